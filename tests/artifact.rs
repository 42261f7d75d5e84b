//! `artifact.capture` / `artifact.restore` / `artifact.list` and `runbook artifacts`,
//! driving the real binary on real directories under /tmp (a fake compile cache the test
//! writes), locally and over a real sshd (common/sshd.rs); the store is the state dir's.
//! Hostile archives are made here with the tar crate, with headers set by hand.
use crate::common::mount::Mounted;
use crate::common::sshd::Fleet;
use crate::common::*;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

type Fields = BTreeMap<String, String>;

/// A fake cache directly under /tmp (a cache root), removed when the test ends.
fn cache_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("runbook-artifact-test-")
        .tempdir_in("/tmp")
        .unwrap()
}

/// Files as a compile cache has them: nested, binary, a symlink inside, modes.
fn fill(dir: &Path) {
    std::fs::create_dir_all(dir.join("fxgraph/ab")).unwrap();
    std::fs::write(
        dir.join("fxgraph/ab/graph.bin"),
        (0..=255u8).cycle().take(100_000).collect::<Vec<u8>>(),
    )
    .unwrap();
    std::fs::write(dir.join("triton.json"), b"{\"torch\": \"2.11.0+cu128\"}\n").unwrap();
    std::fs::set_permissions(
        dir.join("triton.json"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::os::unix::fs::symlink("../../triton.json", dir.join("fxgraph/ab/meta")).unwrap();
}

/// Every entry below `dir`: relative path → kind, mode and content (or link target).
fn tree(dir: &Path) -> BTreeMap<String, (String, u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    fn walk(base: &Path, d: &Path, out: &mut BTreeMap<String, (String, u32, Vec<u8>)>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode() & 0o7777;
            if m.file_type().is_symlink() {
                let to = std::fs::read_link(&p).unwrap();
                out.insert(
                    rel,
                    ("link".into(), 0, to.display().to_string().into_bytes()),
                );
            } else if m.is_dir() {
                out.insert(rel, ("dir".into(), mode, Vec::new()));
                walk(base, &p, out);
            } else {
                out.insert(rel, ("file".into(), mode, std::fs::read(&p).unwrap()));
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

/// Incompressible bytes (xorshift), so an archive is as big as its data.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `runbook run tests/runbooks/artifact/artifact.lua --json --yes --set K=V…`.
fn run<'e>(env: &'e Env, sets: &[(&str, &str)]) -> Run<'e> {
    let mut r = Run::new(env, repo().join("tests/runbooks/artifact/artifact.lua"))
        .json()
        .yes();
    for (k, v) in sets {
        r = r.set(k, v);
    }
    r
}

/// The `result` lines the runbook logged, as key → value.
fn results(out: &Output) -> Vec<Fields> {
    out.logs()
        .iter()
        .filter_map(|m| m.strip_prefix("result\t").map(str::to_string))
        .map(|m| {
            m.split('\t')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn capture(env: &Env, dir: &Path) -> Fields {
    let out = run(env, &[("op", "capture"), ("paths", s(dir))]).run();
    out.assert_exit(0);
    results(&out).remove(0)
}

fn store(env: &Env) -> PathBuf {
    env.state().join("artifacts")
}

/// Staging directories left beside `dir` (there must be none).
fn staging_beside(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("runbook-staging"))
        .collect()
}

#[test]
fn capture_wipe_restore_is_byte_exact_and_keeps_the_old_cache_aside() {
    let env = Env::new();
    let d = cache_dir();
    let cache = d.path().join("torchinductor_root");
    fill(&cache);
    let before = tree(&cache);
    let c = capture(&env, &cache);
    assert_eq!(c["changed"], "true");
    assert_eq!(c["planned"], "false");
    assert_eq!(c["files"], "2", "{c:?}");
    assert_eq!(c["key.torch"], "2.11.0+cu128");
    assert!(c["key.platform"].contains(std::env::consts::ARCH), "{c:?}");
    let id = c["id"].clone();
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(store(&env).join(format!("manifests/{id}.json"))).unwrap(),
    )
    .unwrap();
    let sha = manifest["parts"][0]["sha256"].as_str().unwrap();
    let object = std::fs::read(store(&env).join(format!("objects/{sha}.tar.gz"))).unwrap();
    use sha2::Digest;
    let got: String = sha2::Sha256::digest(&object)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(got, sha, "content-addressed");
    assert_eq!(manifest["source"], "local");
    assert!(manifest["run_id"].is_string());
    assert!(manifest["throughput"].is_null());

    // Wiped: put back byte for byte.
    std::fs::remove_dir_all(&cache).unwrap();
    let out = run(&env, &[("op", "restore"), ("paths", s(&cache))]).run();
    out.assert_exit(0);
    let r = &results(&out)[0];
    assert_eq!(
        (r["restored"].as_str(), r["id"].as_str()),
        ("true", id.as_str())
    );
    assert_eq!(tree(&cache), before);
    assert!(out
        .logs()
        .iter()
        .any(|l| l.contains(&format!("artifact {id}")) && l.contains("torch = 2.11.0+cu128 ✓")));

    // Over a cache that changed: it is kept aside as cache.clear's keep names it.
    std::fs::write(cache.join("triton.json"), b"other").unwrap();
    let out = run(&env, &[("op", "restore"), ("paths", s(&cache))]).run();
    out.assert_exit(0);
    let kept = PathBuf::from(&results(&out)[0]["kept.1"]);
    assert!(kept
        .display()
        .to_string()
        .contains("torchinductor_root.runbook-kept-"));
    assert_eq!(std::fs::read(kept.join("triton.json")).unwrap(), b"other");
    assert_eq!(tree(&cache), before);
    assert!(staging_beside(&cache).is_empty());
}

/// An archive larger than a command's output may be (8 MiB) comes back in pieces.
#[test]
fn a_cache_larger_than_a_commands_output_comes_back_whole() {
    let env = Env::new();
    let d = cache_dir();
    let cache = d.path().join("big");
    fill(&cache);
    // Incompressible: the archive is as big as the data.
    let noise = noise(14 * 1024 * 1024, 0x9e3779b97f4a7c15);
    std::fs::write(cache.join("kernels.so"), &noise).unwrap();
    let before = tree(&cache);
    let out = run(&env, &[("op", "capture"), ("paths", s(&cache))]).run();
    out.assert_exit(0);
    let c = &results(&out)[0];
    assert!(
        c["archive_bytes"].parse::<u64>().unwrap() > 14 * 1024 * 1024,
        "{c:?}"
    );
    let events = out.run_events();
    let reads =
        pick!(events, Event::ActionStarted { summary, .. } if summary.contains("part ")).len();
    assert_eq!(reads, 3, "6 MiB a read");
    let left: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("runbook-pack"))
        .collect();
    assert!(left.is_empty(), "the packed file is deleted: {left:?}");
    let pieces: Vec<u64> = pick!(events, Event::ActionStarted { summary, action, .. }
        if summary.contains("part ") => *action);
    let shown = pick!(events, Event::Output { action, stream: Stream::Stdout, .. }
        if pieces.contains(action))
    .len();
    assert_eq!(shown, 0, "the archive's bytes are no output events");
    std::fs::remove_dir_all(&cache).unwrap();
    run(&env, &[("op", "restore"), ("paths", s(&cache))])
        .run()
        .assert_exit(0);
    assert_eq!(tree(&cache), before);
}

#[test]
fn dry_run_plans_capture_and_restore_and_changes_nothing() {
    let env = Env::new();
    let d = cache_dir();
    let cache = d.path().join("c");
    fill(&cache);
    let out = run(&env, &[("op", "capture"), ("paths", s(&cache))])
        .dry_run()
        .run();
    out.assert_exit(0);
    let planned = pick!(out.run_events(), Event::ActionPlanned { summary, .. } => summary.clone());
    assert!(
        planned
            .iter()
            .any(|p| p.starts_with(&format!("pack {} into artifact ", s(&cache)))),
        "{planned:?}"
    );
    assert_eq!(results(&out)[0]["planned"], "true");
    assert!(!store(&env).join("manifests").exists(), "nothing stored");
    // --offline: planned from the paths as written, nothing looked at.
    let out = run(&env, &[("op", "capture"), ("paths", s(&cache))])
        .dry_run()
        .offline()
        .run();
    out.assert_exit(0);
    let planned = pick!(out.run_events(), Event::ActionPlanned { summary, .. } => summary.clone());
    assert!(
        planned.iter().any(|p| *p
            == format!(
                "pack {} (size unknown with --offline) into artifact 'test-cache' in {}",
                s(&cache),
                store(&env).display()
            )),
        "{planned:?}"
    );
    assert!(!store(&env).join("manifests").exists(), "nothing stored");

    capture(&env, &cache);
    std::fs::write(cache.join("triton.json"), b"changed").unwrap();
    let before = tree(&cache);
    let out = run(&env, &[("op", "restore"), ("paths", s(&cache))])
        .dry_run()
        .run();
    out.assert_exit(0);
    let events = out.run_events();
    let planned = pick!(events, Event::ActionPlanned { .. });
    let (destructive, shown) =
        pick!(planned, Event::ActionPlanned { summary, destructive, command, .. }
        if summary.starts_with(&format!("restore {} from artifact", s(&cache)))
        => (*destructive, command))
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("{planned:?}"));
    assert!(destructive);
    assert!(
        shown.contains("artifact-unpack.sh") && shown.contains("bytes of binary data, sha256"),
        "{shown}"
    );
    assert_eq!(tree(&cache), before, "a dry-run changes nothing");
    assert!(staging_beside(&cache).is_empty());
}

#[test]
fn key_mismatch_restores_nothing_and_says_field_by_field() {
    let env = Env::new();
    let d = cache_dir();
    let cache = d.path().join("c");
    fill(&cache);
    capture(&env, &cache);
    std::fs::write(cache.join("triton.json"), b"mine").unwrap();
    let out = run(
        &env,
        &[
            ("op", "restore"),
            ("paths", s(&cache)),
            ("torch", "2.10.0+cu128"),
        ],
    )
    .run();
    out.assert_exit(0);
    let r = &results(&out)[0];
    assert_eq!(r["restored"], "false");
    assert_eq!(r["diff_lines.1"], "torch:2.11.0+cu128>2.10.0+cu128");
    assert!(
        r["reason"].contains("torch: 2.11.0+cu128 (artifact) ≠ 2.10.0+cu128 (here)"),
        "{r:?}"
    );
    assert_eq!(std::fs::read(cache.join("triton.json")).unwrap(), b"mine");

    // require = true: the step fails with the same reason.
    let out = run(
        &env,
        &[
            ("op", "restore"),
            ("paths", s(&cache)),
            ("torch", "2.10.0+cu128"),
            ("require", "true"),
        ],
    )
    .run();
    out.assert_exit(1);
    assert!(
        out.describe()
            .contains("nothing was restored (require = true)"),
        "{}",
        out.describe()
    );
    assert!(out.describe().contains("≠ 2.10.0+cu128 (here)"));
    assert_eq!(std::fs::read(cache.join("triton.json")).unwrap(), b"mine");
    // And no artifact of that name at all.
    let out = run(
        &env,
        &[
            ("op", "restore"),
            ("paths", s(&cache)),
            ("name", "other"),
            ("require", "true"),
        ],
    )
    .run();
    out.assert_exit(1);
    assert!(out.describe().contains("no artifact 'other'"));
}

#[test]
fn a_flipped_byte_is_refused_before_anything_is_extracted() {
    let env = Env::new();
    let d = cache_dir();
    let cache = d.path().join("c");
    fill(&cache);
    capture(&env, &cache);
    let objects = store(&env).join("objects");
    let obj = std::fs::read_dir(&objects)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&obj).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    std::fs::write(&obj, &bytes).unwrap();
    std::fs::write(cache.join("triton.json"), b"mine").unwrap();
    let before = tree(&cache);
    let out = run(&env, &[("op", "restore"), ("paths", s(&cache))]).run();
    out.assert_exit(1);
    assert!(
        out.describe().contains("is damaged: its sha256 is"),
        "{}",
        out.describe()
    );
    assert!(out.describe().contains("nothing was restored"));
    assert_eq!(tree(&cache), before);
    assert!(
        pick!(out.run_events(), Event::ActionStarted { summary, .. } => summary.clone())
            .iter()
            .all(|s| !s.starts_with("restore ")),
        "no restore command ran"
    );
    let v = Run::cmd(&env, ["artifacts", "verify"]).run();
    v.assert_exit(1);
    assert!(v.stdout_text().contains("refused"), "{}", v.describe());
}

/// A gzipped tar with headers written by hand (the builder refuses `..` and absolute
/// names itself), as a hostile store would hold.
fn hostile(entries: &[(&str, tar::EntryType, u32, &str)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    for (name, kind, mode, link) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(*kind);
        h.set_mode(*mode);
        let body: &[u8] = if *kind == tar::EntryType::Regular {
            b"x"
        } else {
            b""
        };
        h.set_size(body.len() as u64);
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        if !link.is_empty() {
            h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        h.set_cksum();
        b.append(&h, body).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

#[test]
fn hostile_archives_are_refused_with_nothing_written() {
    use tar::EntryType as T;
    let env = Env::new();
    let d = cache_dir();
    let cache = d.path().join("c");
    fill(&cache);
    let id = capture(&env, &cache)["id"].clone();
    let manifest_path = store(&env).join(format!("manifests/{id}.json"));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let outside = d.path().join("outside");
    let out_name = format!("../{}", outside.file_name().unwrap().to_str().unwrap());
    let abs = format!("{}/abs", s(&outside));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "absolute",
            hostile(&[
                ("./", T::Directory, 0o755, ""),
                (&abs, T::Regular, 0o644, ""),
            ]),
            "an absolute name",
        ),
        (
            "dotdot",
            hostile(&[
                ("./", T::Directory, 0o755, ""),
                (&format!("./{out_name}"), T::Regular, 0o644, ""),
            ]),
            "'..'",
        ),
        (
            "symlink out",
            hostile(&[
                ("./", T::Directory, 0o755, ""),
                ("./l", T::Symlink, 0o777, "/etc"),
                ("./l/passwd", T::Regular, 0o644, ""),
            ]),
            "absolute target",
        ),
        (
            "hardlink",
            hostile(&[
                ("./", T::Directory, 0o755, ""),
                ("./h", T::Link, 0o644, "/etc/passwd"),
            ]),
            "a hard link",
        ),
        (
            "fifo",
            hostile(&[("./", T::Directory, 0o755, ""), ("./f", T::Fifo, 0o644, "")]),
            "a fifo",
        ),
        (
            "setuid",
            hostile(&[
                ("./", T::Directory, 0o755, ""),
                ("./s", T::Regular, 0o4755, ""),
            ]),
            "setuid/setgid",
        ),
    ];
    std::fs::write(cache.join("triton.json"), b"mine").unwrap();
    let before = tree(&cache);
    for (what, gz, why) in cases {
        use sha2::Digest;
        let sha: String = sha2::Sha256::digest(&gz)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        std::fs::write(store(&env).join(format!("objects/{sha}.tar.gz")), &gz).unwrap();
        let mut m = manifest.clone();
        m["parts"][0]["sha256"] = sha.clone().into();
        std::fs::write(&manifest_path, serde_json::to_vec(&m).unwrap()).unwrap();
        let out = run(&env, &[("op", "restore"), ("paths", s(&cache))]).run();
        out.assert_exit(1);
        let text = out.describe();
        assert!(
            text.contains("refused, nothing was restored") && text.contains(why),
            "{what}: {text}"
        );
        assert_eq!(tree(&cache), before, "{what}");
        assert!(!outside.exists(), "{what}");
        assert!(staging_beside(&cache).is_empty(), "{what}");
    }
}

#[test]
fn two_captures_at_once_are_two_whole_artifacts() {
    let env = Env::new();
    let d = cache_dir();
    let cache = d.path().join("c");
    fill(&cache);
    let (a, b) = std::thread::scope(|sc| {
        // Two runs on one target: the target's run lock takes them in turn (waited for);
        // each may see the other's tar reading the cache (a process using it): force.
        let one = || {
            run(
                &env,
                &[("op", "capture"), ("paths", s(&cache)), ("force", "true")],
            )
            .args(["--lock-wait", "60s"])
            .run()
        };
        let a = sc.spawn(one);
        let b = sc.spawn(one);
        (a.join().unwrap(), b.join().unwrap())
    });
    a.assert_exit(0);
    b.assert_exit(0);
    let ids = [results(&a)[0]["id"].clone(), results(&b)[0]["id"].clone()];
    assert_ne!(ids[0], ids[1]);
    let list = run(&env, &[("op", "list")]).run();
    list.assert_exit(0);
    let listed: Vec<String> = results(&list).iter().map(|r| r["id"].clone()).collect();
    assert_eq!(listed.len(), 2, "{listed:?}");
    let objects = std::fs::read_dir(store(&env).join("objects"))
        .unwrap()
        .count();
    assert!(objects <= 2, "no temporary file left behind");
    Run::cmd(&env, ["artifacts", "verify"]).run().assert_exit(0);
    let shown = Run::cmd(&env, ["artifacts", "show", &ids[0][..8]]).run();
    shown.assert_exit(0);
    assert!(shown
        .stdout_text()
        .contains(&format!("\"id\": \"{}\"", ids[0])));
    let listed = Run::cmd(&env, ["artifacts", "list"]).run();
    assert!(
        listed.stdout_text().contains("test-cache"),
        "{}",
        listed.describe()
    );
    Run::cmd(&env, ["artifacts", "prune", "--keep", "1"])
        .run()
        .assert_exit(0);
    assert_eq!(
        std::fs::read_dir(store(&env).join("manifests"))
            .unwrap()
            .count(),
        1
    );
}

#[test]
fn capture_and_restore_on_a_remote_target_over_ssh() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let env = Env::new();
    let d = cache_dir();
    let cache = d.path().join("c");
    fill(&cache);
    // 9 MiB: two reads back through the session, and a stdin of its own channel (over
    // the session's 1 MiB) for the restore.
    std::fs::write(cache.join("kernels.so"), noise(9 * 1024 * 1024, 7)).unwrap();
    let before = tree(&cache);
    let out = run(
        &env,
        &[("op", "capture"), ("paths", s(&cache)), ("target", "node1")],
    )
    .ssh(&fleet)
    .run();
    out.assert_exit(0);
    let c = &results(&out)[0];
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(store(&env).join(format!("manifests/{}.json", c["id"]))).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["source"], "node1");
    std::fs::remove_dir_all(&cache).unwrap();
    let out = run(
        &env,
        &[("op", "restore"), ("paths", s(&cache)), ("target", "node1")],
    )
    .ssh(&fleet)
    .run();
    out.assert_exit(0);
    assert_eq!(results(&out)[0]["restored"], "true");
    assert_eq!(tree(&cache), before);
}

/// A restore onto a filesystem that fills up while extracting: the step fails, the cache
/// there is as it was, and no staging directory is left.
#[test]
fn a_full_disk_mid_restore_leaves_the_old_cache_as_it_was() {
    let env = Env::new();
    let d = cache_dir();
    let fs = d.path().join("small");
    let Some(mounted) = Mounted::tmpfs(&fs, "size=8m") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root and mounts"
        );
        return;
    };
    let cache = fs.join("c");
    fill(&cache);
    let noise = noise(3 * 1024 * 1024, 0x2545f4914f6cdd1d);
    std::fs::write(cache.join("kernels.so"), &noise).unwrap();
    capture(&env, &cache);
    std::fs::remove_file(cache.join("kernels.so")).unwrap();
    std::fs::write(cache.join("triton.json"), b"mine").unwrap();
    let before = tree(&cache);
    mounted.remount("size=2m");
    let out = run(&env, &[("op", "restore"), ("paths", s(&cache))]).run();
    out.assert_exit(1);
    let text = out.describe();
    assert!(text.contains("left as it was"), "{text}");
    assert_eq!(tree(&cache), before);
    assert!(staging_beside(&cache).is_empty());
    drop(mounted);
}

/// `runbook plan -o` of a restore holds the archive by its digest (not its bytes as
/// text), `apply` restores it, and a plan made before another capture is refused at the
/// restore: the artifact it would now send is not the one reviewed.
#[test]
fn a_saved_plan_of_a_restore_holds_the_archive_by_its_digest() {
    let env = Env::new();
    let d = cache_dir();
    let cache = d.path().join("c");
    fill(&cache);
    let before = tree(&cache);
    capture(&env, &cache);
    std::fs::write(cache.join("triton.json"), b"mine").unwrap();
    let plan = env.tmp.path().join("restore.json");
    let rb = repo().join("tests/runbooks/artifact/artifact.lua");
    let sets = ["--set", "op=restore", "--set"];
    let paths = format!("paths={}", s(&cache));
    Run::cmd(&env, ["plan"])
        .arg(&rb)
        .args(sets)
        .arg(&paths)
        .arg("-o")
        .arg(&plan)
        .run()
        .assert_exit(0);
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(
        text.len() < 64 * 1024,
        "no archive in the plan: {} bytes",
        text.len()
    );
    assert!(text.contains("< (binary stdin)"));
    Run::cmd(&env, ["apply"])
        .arg(&plan)
        .arg("--yes")
        .run()
        .assert_exit(0);
    assert_eq!(tree(&cache), before);

    // Planned, then another capture (of other contents): apply must not send it.
    std::fs::write(cache.join("triton.json"), b"mine").unwrap();
    Run::cmd(&env, ["plan"])
        .arg(&rb)
        .args(sets)
        .arg(&paths)
        .arg("-o")
        .arg(&plan)
        .run()
        .assert_exit(0);
    std::fs::write(cache.join("triton.json"), b"newer").unwrap();
    capture(&env, &cache);
    std::fs::write(cache.join("triton.json"), b"mine").unwrap();
    let applied = Run::cmd(&env, ["apply"]).arg(&plan).arg("--yes").run();
    applied.assert_exit(1);
    assert!(
        applied
            .stderr_text()
            .contains("this change is not one that was confirmed"),
        "{}",
        applied.describe()
    );
    assert_eq!(std::fs::read(cache.join("triton.json")).unwrap(), b"mine");
}

/// Two cache directories (inductor's and triton's) are one artifact: both put back.
#[test]
fn an_artifact_of_two_directories_restores_both() {
    let env = Env::new();
    let d = cache_dir();
    let (inductor, triton) = (d.path().join("inductor"), d.path().join("triton"));
    fill(&inductor);
    fill(&triton);
    std::fs::write(triton.join("only-here"), b"t").unwrap();
    let (a, b) = (tree(&inductor), tree(&triton));
    let both = format!("{}|{}", s(&inductor), s(&triton));
    let c = capture(&env, Path::new(&both));
    assert_eq!(c["files"], "5", "{c:?}");
    std::fs::remove_dir_all(&inductor).unwrap();
    std::fs::remove_dir_all(&triton).unwrap();
    // Asked for one of them only: no artifact is of exactly those paths.
    let out = run(&env, &[("op", "restore"), ("paths", s(&inductor))]).run();
    out.assert_exit(0);
    assert_eq!(results(&out)[0]["restored"], "false");
    let out = run(&env, &[("op", "restore"), ("paths", &both)]).run();
    out.assert_exit(0);
    assert_eq!(results(&out)[0]["restored"], "true");
    assert_eq!((tree(&inductor), tree(&triton)), (a, b));
}

// A team's store on another machine (`store = "ssh://HOST/DIR"`): each test's store is a
// directory that one sshd of the fleet serves, which the test reads and damages
// directly (every node is this machine, on its own port).

/// A directory for a team store, outside /tmp (which the store never uses).
fn team_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("runbook-team-store-")
        .tempdir_in("/var/tmp")
        .unwrap()
}

/// The files of a store directory (`objects/…`, `manifests/…`), temporary ones included.
fn store_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for kind in ["objects", "manifests"] {
        if let Ok(entries) = std::fs::read_dir(dir.join(kind)) {
            for e in entries.flatten() {
                out.push(format!("{kind}/{}", e.file_name().to_string_lossy()));
            }
        }
    }
    out.sort();
    out
}

/// `runbook artifacts WORDS… --store STORE`, reaching the fleet.
fn artifacts<'e>(env: &'e Env, fleet: &Fleet, store: &str, words: &[&str]) -> Run<'e> {
    Run::cmd(env, ["artifacts"])
        .args(words)
        .args(["--store", store])
        .ssh(fleet)
}

/// Captured on node1, kept on node2 (named by the inventory as `files`), restored on
/// node3: byte for byte, the objects and manifest only on the server, nothing in the
/// local store, no upload left behind. Its dry-run plans the capture naming the store
/// and writes nothing there; the restore's dry-run reads the store (reads on `files`)
/// and plans the restore. `runbook artifacts list|verify --store` read it too.
#[test]
fn a_team_store_over_ssh_keeps_what_one_host_captured_for_another_to_restore() {
    require_sshd!();
    let fleet = Fleet::start(3);
    let env = Env::new();
    let server = team_dir();
    let dir = server.path().join("artifacts");
    let inventory = env.write("inventory.toml", "[hosts.files]\naddress = \"node2\"\n");
    let store = format!("ssh://files{}", dir.display());
    let d = cache_dir();
    let cache = d.path().join("c");
    fill(&cache);
    // Over 6 MiB packed: two pieces on the way in, and two on the way back.
    std::fs::write(cache.join("kernels.so"), noise(9 * 1024 * 1024, 11)).unwrap();
    let before = tree(&cache);
    let on = |op: &str, target: &str| {
        run(
            &env,
            &[
                ("op", op),
                ("paths", s(&cache)),
                ("target", target),
                ("store", &store),
            ],
        )
        .ssh(&fleet)
        .arg("--inventory")
        .arg(&inventory)
    };

    let plan = on("capture", "node1").dry_run().run();
    plan.assert_exit(0);
    let planned: Vec<String> =
        pick!(plan.run_events(), Event::ActionPlanned { summary, .. } => summary.clone());
    assert!(
        planned.iter().any(|p| p.starts_with("pack ")
            && p.ends_with(&format!("into artifact 'test-cache' in {store}"))),
        "{planned:?}"
    );
    assert!(!dir.exists(), "a dry-run writes nothing into the store");

    let out = on("capture", "node1").run();
    out.assert_exit(0);
    let c = results(&out).remove(0);
    assert_eq!(c["store"], store);
    let files = store_files(&dir);
    assert_eq!(files.len(), 2, "one object, one manifest: {files:?}");
    assert!(
        files.iter().all(|f| !f.contains("/.")),
        "no upload left: {files:?}"
    );
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join(format!("manifests/{}.json", c["id"]))).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["source"], "node1");
    let sha = manifest["parts"][0]["sha256"].as_str().unwrap();
    let object = std::fs::read(dir.join(format!("objects/{sha}.tar.gz"))).unwrap();
    assert!(object.len() > 6 * 1024 * 1024, "{}", object.len());
    use sha2::Digest;
    let digest: String = sha2::Sha256::digest(&object)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(digest, sha, "the object is named by its sha256");
    assert!(
        !env.state().join("artifacts").exists(),
        "nothing went to the local store"
    );

    std::fs::remove_dir_all(&cache).unwrap();
    let plan = on("restore", "node3").dry_run().run();
    plan.assert_exit(0);
    let events = plan.run_events();
    let reads: Vec<(Effect, &String)> = pick!(events, Event::ActionStarted { target, effect, summary, .. }
        if target == "files" => (*effect, summary));
    assert!(
        reads
            .iter()
            .any(|(e, s)| *e == Effect::Read && s.contains("list the artifacts in")),
        "{reads:?}"
    );
    assert!(
        reads.iter().all(|(e, _)| *e == Effect::Read),
        "only reads on the store: {reads:?}"
    );
    assert!(events.iter().any(
        |e| matches!(e, Event::ActionPlanned { summary, .. } if summary.starts_with("restore "))
    ));
    assert!(!cache.exists(), "a dry-run restores nothing");

    let out = on("restore", "node3").run();
    out.assert_exit(0);
    assert_eq!(results(&out)[0]["restored"], "true", "{}", out.describe());
    assert_eq!(tree(&cache), before);

    let inv = ["--inventory", s(&inventory)];
    let listed = artifacts(&env, &fleet, &store, &["list"]).args(inv).run();
    listed.assert_exit(0);
    let text = listed.stdout_text();
    assert!(text.contains(&c["id"]) && text.contains("node1"), "{text}");
    let verified = artifacts(&env, &fleet, &store, &["verify"]).args(inv).run();
    verified.assert_exit(0);
    assert!(
        verified
            .stdout_text()
            .contains("1 artifact(s) verified in ssh://files"),
        "{}",
        verified.describe()
    );
}

/// One byte flipped in the object on the server: the restore reads it back, finds its
/// sha256 wrong and refuses before anything is sent to the target; `artifacts verify`
/// over ssh says which artifact. The store is named by an ssh_config alias here.
#[test]
fn a_flipped_byte_in_a_team_store_is_refused_before_anything_is_extracted() {
    require_sshd!();
    let fleet = Fleet::start(2);
    let env = Env::new();
    let server = team_dir();
    let dir = server.path().join("a");
    let store = format!("ssh://node2{}", dir.display());
    let d = cache_dir();
    let cache = d.path().join("c");
    fill(&cache);
    let go = |op: &str| {
        run(
            &env,
            &[
                ("op", op),
                ("paths", s(&cache)),
                ("target", "node1"),
                ("store", &store),
            ],
        )
        .ssh(&fleet)
        .run()
    };
    go("capture").assert_exit(0);
    let object = store_files(&dir)
        .into_iter()
        .find(|f| f.starts_with("objects/"))
        .unwrap();
    let mut bytes = std::fs::read(dir.join(&object)).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    std::fs::write(dir.join(&object), &bytes).unwrap();
    std::fs::write(cache.join("triton.json"), b"mine").unwrap();
    let before = tree(&cache);
    let out = go("restore");
    out.assert_exit(1);
    let said = out.describe();
    assert!(said.contains("is damaged: its sha256 is"), "{said}");
    assert!(
        said.contains(&format!("{store}/{object}")),
        "names the object: {said}"
    );
    assert!(said.contains("nothing was restored"), "{said}");
    assert_eq!(tree(&cache), before);
    assert!(
        pick!(out.run_events(), Event::ActionStarted { summary, .. } => summary.clone())
            .iter()
            .all(|s| !s.starts_with("restore ")),
        "no restore command ran"
    );
    let v = artifacts(&env, &fleet, &store, &["verify"]).run();
    v.assert_exit(1);
    assert!(v.stdout_text().contains("refused"), "{}", v.describe());
}

/// Two captures into one team store at once (from two hosts, so no run lock orders
/// them), while `artifacts verify --store` reads the store over and over: every reading
/// finds each listed artifact whole (its objects there, their sha256 right), and both
/// captures end as whole artifacts with no upload left behind.
#[test]
fn captures_at_once_into_a_team_store_are_whole_and_a_reader_never_sees_a_partial_one() {
    require_sshd!();
    let fleet = Fleet::start(2);
    let env = Env::new();
    let server = team_dir();
    let dir = server.path().join("a");
    let store = format!("ssh://node2{}", dir.display());
    let caches: Vec<tempfile::TempDir> = (0..2).map(|_| cache_dir()).collect();
    for (i, d) in caches.iter().enumerate() {
        fill(d.path());
        std::fs::write(
            d.path().join("kernels.so"),
            noise(8 * 1024 * 1024, 20 + i as u64),
        )
        .unwrap();
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    let (outs, reads) = std::thread::scope(|sc| {
        let writers: Vec<_> = caches
            .iter()
            .zip(["local", "node1"])
            .map(|(d, target)| {
                let (env, fleet, store) = (&env, &fleet, &store);
                sc.spawn(move || {
                    run(
                        env,
                        &[
                            ("op", "capture"),
                            ("paths", s(d.path())),
                            ("target", target),
                            ("store", store),
                        ],
                    )
                    .ssh(fleet)
                    .run()
                })
            })
            .collect();
        let reader = sc.spawn(|| {
            let mut reads = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) || reads == 0 {
                let v = artifacts(&env, &fleet, &store, &["verify"]).run();
                v.assert_exit(0);
                reads += 1;
            }
            reads
        });
        let outs: Vec<Output> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        (outs, reader.join().unwrap())
    });
    assert!(reads > 0);
    for o in &outs {
        o.assert_exit(0);
    }
    let ids: Vec<String> = outs.iter().map(|o| results(o)[0]["id"].clone()).collect();
    assert_ne!(ids[0], ids[1]);
    let files = store_files(&dir);
    assert_eq!(files.len(), 4, "two objects, two manifests: {files:?}");
    let v = artifacts(&env, &fleet, &store, &["verify"]).run();
    v.assert_exit(0);
    assert!(
        v.stdout_text().contains("2 artifact(s) verified"),
        "{}",
        v.describe()
    );
}

/// `artifacts prune --keep 1` over ssh keeps the newest artifact of each name and key
/// (three of torch 2.11, one of 2.10: the newest 2.11 and the 2.10 stay), and deletes
/// what no manifest names once it is an hour old (an orphan object, a dead capture's
/// upload), never a named object however old, nor a young orphan.
#[test]
fn prune_over_ssh_keeps_the_newest_of_each_key() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let env = Env::new();
    let server = team_dir();
    let dir = server.path().join("a");
    let store = format!("ssh://node1{}", dir.display());
    let d = cache_dir();
    let cache = d.path().join("c");
    fill(&cache);
    let mut ids = Vec::new();
    for torch in [
        "2.11.0+cu128",
        "2.11.0+cu128",
        "2.11.0+cu128",
        "2.10.0+cu128",
    ] {
        let out = run(
            &env,
            &[
                ("op", "capture"),
                ("paths", s(&cache)),
                ("store", &store),
                ("torch", torch),
            ],
        )
        .ssh(&fleet)
        .run();
        out.assert_exit(0);
        ids.push(results(&out)[0]["id"].clone());
        // Artifacts are ordered by their second.
        std::thread::sleep(std::time::Duration::from_millis(1100));
    }
    let objects = dir.join("objects");
    let named: Vec<String> = store_files(&dir)
        .into_iter()
        .filter(|f| f.starts_with("objects/"))
        .collect();
    let old_orphan = objects.join(format!("{}.tar.gz", "e".repeat(64)));
    let young_orphan = objects.join(format!("{}.tar.gz", "f".repeat(64)));
    let dead_upload = objects.join(".upload.AbCdEfGhIj");
    for f in [&old_orphan, &young_orphan, &dead_upload] {
        std::fs::write(f, b"x").unwrap();
    }
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    for f in named
        .iter()
        .map(|n| dir.join(n))
        .chain([old_orphan.clone(), dead_upload.clone()])
    {
        std::fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(two_hours_ago)
            .unwrap();
    }
    let out = artifacts(&env, &fleet, &store, &["prune", "--keep", "1"]).run();
    out.assert_exit(0);
    assert!(
        out.stdout_text().contains("deleted 2 artifact(s)"),
        "{}",
        out.describe()
    );
    let left: Vec<String> = store_files(&dir)
        .into_iter()
        .filter(|f| f.starts_with("manifests/"))
        .collect();
    let mut want = vec![
        format!("manifests/{}.json", ids[2]),
        format!("manifests/{}.json", ids[3]),
    ];
    want.sort();
    assert_eq!(left, want);
    assert!(!old_orphan.exists() && !dead_upload.exists());
    assert!(young_orphan.exists(), "an orphan under an hour old is kept");
    for n in &named {
        assert!(dir.join(n).exists(), "{n}: a named object is kept");
    }
    artifacts(&env, &fleet, &store, &["verify"])
        .run()
        .assert_exit(0);
}

/// What a store spelled wrong, a host nobody knows and a host that does not answer say:
/// each names the runbook's line and the store as given, and nothing is captured.
#[test]
fn bad_store_spellings_unknown_hosts_and_unreachable_ones_are_clear_errors() {
    require_sshd!();
    let mut fleet = Fleet::start(1);
    let env = Env::new();
    let d = cache_dir();
    let cache = d.path().join("c");
    fill(&cache);
    let inventory = env.write("inventory.toml", "[hosts.files]\naddress = \"node1\"\n");
    let config = fleet.ssh_config();
    let try_store = |store: &str| {
        let out = run(
            &env,
            &[("op", "capture"), ("paths", s(&cache)), ("store", store)],
        )
        .arg("--ssh-config")
        .arg(&config)
        .arg("--inventory")
        .arg(&inventory)
        .run();
        out.assert_exit(1);
        let said = out.describe();
        assert!(said.contains("artifact.lua:"), "names the line: {said}");
        assert!(
            said.contains(&format!("{store:?}")) || said.contains(store),
            "{said}"
        );
        said
    };
    let said = try_store("files");
    assert!(said.contains("ssh://files/DIR"), "{said}");
    let said = try_store("ssh://no_such_host/srv/artifacts");
    assert!(said.contains("unknown target 'no_such_host'"), "{said}");
    // A plain host name is taken as ssh takes it (issue 33 item 3); one no resolver knows
    // cannot be reached, and the message says where its name came from.
    let said = try_store("ssh://nosuchhost/srv/artifacts");
    assert!(
        said.contains("cannot connect to nosuchhost: ")
            && said.contains("(nosuchhost is a plain host name: in neither the inventory "),
        "{said}"
    );
    let said = try_store("ssh://files");
    assert!(said.contains("no directory after the host"), "{said}");
    let said = try_store("ftp://files/srv");
    assert!(said.contains("only ssh://"), "{said}");
    fleet.node("node1").kill();
    let said = try_store("ssh://files/var/tmp/runbook-no-store");
    assert!(
        said.contains("the store ssh://files/var/tmp/runbook-no-store: cannot connect to files"),
        "{said}"
    );
    // Asked before anything is packed: the target is as it was.
    let out = run(
        &env,
        &[
            ("op", "capture"),
            ("paths", s(&cache)),
            ("store", "ssh://files/var/tmp/runbook-no-store"),
        ],
    )
    .arg("--ssh-config")
    .arg(&config)
    .arg("--inventory")
    .arg(&inventory)
    .run();
    out.assert_exit(1);
    assert!(
        pick!(out.run_events(), Event::ActionStarted { summary, .. } => summary.clone())
            .iter()
            .all(|s| !s.starts_with("pack ")),
        "nothing was packed"
    );
    let cli = artifacts(&env, &fleet, "files", &["list"])
        .arg("--inventory")
        .arg(&inventory)
        .run();
    cli.assert_exit(2);
    assert!(
        cli.stderr_text().contains("ssh://files/DIR"),
        "{}",
        cli.describe()
    );
}

/// A saved plan of a capture into a team store, then of a restore from it: `apply` is
/// held to each plan and goes through (the store's reads are the plan's reads, its
/// writes part of the planned pack), and the cache comes back byte for byte.
#[test]
fn saved_plans_of_a_capture_into_and_a_restore_from_a_team_store_apply() {
    require_sshd!();
    let fleet = Fleet::start(2);
    let env = Env::new();
    let server = team_dir();
    let dir = server.path().join("a");
    let store = format!("ssh://node2{}", dir.display());
    let d = cache_dir();
    let cache = d.path().join("c");
    fill(&cache);
    let before = tree(&cache);
    let rb = repo().join("tests/runbooks/artifact/artifact.lua");
    let plan = env.tmp.path().join("plan.json");
    let plan_then_apply = |op: &str| {
        Run::cmd(&env, ["plan"])
            .arg(&rb)
            .set("op", op)
            .set("paths", s(&cache))
            .set("target", "node1")
            .set("store", &store)
            .arg("-o")
            .arg(&plan)
            .ssh(&fleet)
            .run()
            .assert_exit(0);
        let applied = Run::cmd(&env, ["apply"])
            .arg(&plan)
            .arg("--yes")
            .ssh(&fleet)
            .run();
        applied.assert_exit(0);
        applied
    };
    plan_then_apply("capture");
    assert_eq!(store_files(&dir).len(), 2, "{:?}", store_files(&dir));
    std::fs::remove_dir_all(&cache).unwrap();
    plan_then_apply("restore");
    assert_eq!(tree(&cache), before);
}
