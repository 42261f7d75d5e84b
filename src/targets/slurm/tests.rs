//! Slurm specs parsed, srun's argv, and srun's labels and refusals read.

use super::*;

#[test]
fn specs_parse_and_refuse_what_slurm_would_not_take() {
    let s = SlurmSpec::parse("gpu01?job=42").unwrap();
    assert_eq!(
        (s.node.as_str(), s.job, s.immediate_s),
        ("gpu01", Some(42), 10)
    );
    assert_eq!(s.name(), "slurm:gpu01?job=42");
    let s = SlurmSpec::parse("n1?partition=gpu&immediate=1.5s").unwrap();
    assert_eq!((s.partition.as_deref(), s.immediate_s), (Some("gpu"), 2));
    assert!(SlurmSpec::parse("-n")
        .unwrap_err()
        .contains("not a Slurm node name"));
    assert!(SlurmSpec::parse("gpu[01-02]")
        .unwrap_err()
        .contains("nodes="));
    assert!(SlurmSpec::parse("n?job=x")
        .unwrap_err()
        .contains("not a job id"));
    assert!(SlurmSpec::parse("n?jbo=1")
        .unwrap_err()
        .contains("did you mean 'job'"));
    assert!(SlurmSpec::parse("n?job=1&partition=p")
        .unwrap_err()
        .contains("not both"));
}

#[test]
fn srun_gets_the_argv_word_for_word_after_its_own_flags() {
    let s = SlurmSpec::parse("n1?job=7").unwrap();
    let argv = s.srun(vec!["echo".into(), "--nodes=9".into()]);
    let words: Vec<String> = argv.iter().map(|w| w.to_string_lossy().into()).collect();
    assert_eq!(
        words,
        [
            "srun",
            "--nodes=1",
            "--ntasks=1",
            "--nodelist=n1",
            "--jobid=7",
            "--overlap",
            "--immediate=10",
            "--quiet",
            "--",
            "echo",
            "--nodes=9"
        ]
    );
}

#[test]
fn labels_and_refusals_read_as_srun_writes_them() {
    assert_eq!(split_label(b" 3: a: b\n"), Some((3, &b"a: b\n"[..])));
    assert_eq!(split_label(b"0: "), Some((0, &b""[..])));
    assert_eq!(split_label(b"srun: error: x"), None);
    assert_eq!(
        refused("srun: error: Unable to allocate resources: Invalid node name specified\n")
            .as_deref(),
        Some("srun: Unable to allocate resources: Invalid node name specified")
    );
    assert_eq!(
        refused("srun: error: vm: task 0: Exited with exit code 3"),
        None
    );
    let marks = Marks::new("t0k".into());
    let mut b = b"\x1erunbook-slurm-task=t0k 1.2 0 vm\nreal\n\x1erunbook-slurm-task=1.3 0 vm\n\x1erunbook-slurm-exit=t0k 3\n\x1erunbook-pgid=t0k 9 - -\n".to_vec();
    strip_markers(&mut b, &marks);
    // A line without the token is the command's own.
    assert_eq!(b, b"real\n\x1erunbook-slurm-task=1.3 0 vm\n");
}
