//! The probe's answer read, and the rules applied to what it saw.

use super::probe::{unescape, Root};
use super::rules::shown;
use super::*;

fn probe_with(found: Found) -> Probe {
    let roots = [
        ("/tmp", "/tmp"),
        ("/var/tmp", "/var/tmp"),
        ("~/.cache", "/root/.cache"),
    ];
    Probe {
        home: "/root".into(),
        home_resolved: "/root".into(),
        roots: roots
            .iter()
            .map(|(g, r)| Root {
                given: g.to_string(),
                expanded: r.to_string(),
                resolved: r.to_string(),
            })
            .collect(),
        paths: vec![found],
    }
}

fn dir(e: &str, r: &str) -> Found {
    Found {
        expanded: e.into(),
        resolved: r.into(),
        kind: Kind::Dir,
        ..Default::default()
    }
}

fn rule(f: Found) -> String {
    let p = probe_with(f);
    refusal(&p, &p.paths[0]).unwrap_or_default()
}

#[test]
fn tidies_or_refuses_paths_as_written() {
    assert_eq!(tidy("/tmp//x/./y/").unwrap(), "/tmp/x/y");
    assert_eq!(tidy("~").unwrap(), "~");
    assert_eq!(tidy("~/").unwrap(), "~");
    assert_eq!(tidy("~/.cache/x").unwrap(), "~/.cache/x");
    assert_eq!(tidy("///").unwrap(), "/");
    assert!(tidy("tmp/x").unwrap_err().contains("relative"));
    assert!(tidy("./x").unwrap_err().contains("relative"));
    assert!(tidy("/tmp/../etc").unwrap_err().contains("'..'"));
    assert!(tidy("~bob/x").unwrap_err().contains("only ~"));
    assert!(tidy("").unwrap_err().contains("empty"));
    assert!(tidy("/tmp/a\nb").unwrap_err().contains("control"));
}

#[test]
fn each_rule_is_named() {
    assert!(rule(dir("/", "/")).contains("root directory"));
    assert!(rule(dir("/tmp", "/tmp")).contains("cache root itself"));
    assert!(rule(dir("/root/.cache", "/root/.cache")).contains("cache root itself"));
    assert!(rule(dir("/root", "/root")).contains("home directory"));
    assert!(rule(dir("/usr", "/usr")).contains("top-level"));
    assert!(rule(dir("/etc/x", "/etc/x")).contains("not under a cache root"));
    assert!(rule(dir("/tmp/x", "/etc/x")).contains("resolves to /etc/x"));
    let mut link = dir("/tmp/l", "/etc/secret");
    link.kind = Kind::Link;
    assert!(rule(link.clone()).contains("symlink to /etc/secret, which is outside"));
    link.resolved = "/tmp/real".into();
    assert!(rule(link).contains("clear /tmp/real itself"));
    let mut mounted = dir("/tmp/m", "/tmp/m");
    mounted.mounts.push("/tmp/m/sub".into());
    assert!(rule(mounted).contains("mounted at /tmp/m/sub"));
    assert_eq!(
        rule(dir("/tmp/torchinductor_root", "/tmp/torchinductor_root")),
        ""
    );
    assert_eq!(rule(dir("/root/.cache/x", "/root/.cache/x")), "");
}

#[test]
fn a_root_that_is_slash_is_ignored() {
    let mut p = probe_with(dir("/etc/x", "/etc/x"));
    p.roots.push(Root {
        given: "/".into(),
        expanded: "/".into(),
        resolved: "/".into(),
    });
    assert!(refusal(&p, &p.paths[0])
        .unwrap()
        .contains("not under a cache root"));
}

#[test]
fn processes_block_unless_forced() {
    let mut f = dir("/tmp/x", "/tmp/x");
    f.holders.push((42, "sleep 30".into()));
    assert!(in_use(&f, false).unwrap().contains("pid 42 (sleep 30)"));
    assert!(in_use(&f, false).unwrap().contains("force = true"));
    assert!(in_use(&f, true).is_none());
}

#[test]
fn newest_kept_copy_sorts_by_time_then_counter() {
    let kept: Vec<Kept> = [
        "/tmp/x.runbook-kept-20250101T000000Z",
        "/tmp/x.runbook-kept-20250101T000000Z.10",
        "/tmp/x.runbook-kept-20250101T000000Z.9",
        "/tmp/x.runbook-kept-20240101T000000Z.99",
    ]
    .iter()
    .map(|s| Kept {
        path: s.to_string(),
        ..Default::default()
    })
    .collect();
    assert_eq!(newest(&kept).unwrap(), &kept[1]);
    let order: Vec<&Kept> = by_age(&kept);
    assert_eq!(order, vec![&kept[1], &kept[2], &kept[0], &kept[3]]);
}

#[test]
fn mount_points_are_decoded_and_shown_escaped() {
    assert_eq!(
        unescape("/tmp/a\\040b/t\\011c\\012d\\134e"),
        "/tmp/a b/t\tc\nd\\e"
    );
    assert_eq!(
        unescape("/tmp/x\\04"),
        "/tmp/x\\04",
        "not three digits: as is"
    );
    assert_eq!(unescape("/tmp/\\477"), "/tmp/\\477", "beyond \\377: as is");
    assert_eq!(shown("/tmp/a b/t\tc\nd"), "/tmp/a b/t\\tc\\nd");
    let out = "home\t/root\t/root\nroot\t1\t/tmp\t/tmp\npath\t1\t/tmp/a b\t/tmp/a b\tdir\t0\t0\t0\nmount\t1\t/tmp/a\\040b/m\nend\n";
    let p = parse(out, &["/tmp".into()], &["/tmp/x".into()]).unwrap();
    assert_eq!(p.paths[0].mounts, vec!["/tmp/a b/m".to_string()]);
    assert!(refusal(&p, &p.paths[0])
        .unwrap()
        .contains("mounted at /tmp/a b/m;"));
}

#[test]
fn an_answer_with_a_record_twice_or_missing_is_refused() {
    let head = "home\t/root\t/root\nroot\t1\t/tmp\t/tmp\n";
    let path = "path\t1\t/tmp/x\t/tmp/x\tdir\t0\t0\t0\n";
    let twice = [
        format!("{head}{path}root\t1\t/mnt\t/mnt\nend\n"),
        format!("{head}{path}{path}end\n"),
    ];
    for out in &twice {
        let e = parse(out, &["/tmp".into()], &["/tmp/x".into()]).unwrap_err();
        assert!(
            matches!(&e, ProbeError::Bad(m) if m.contains("answered twice")),
            "{e:?}"
        );
    }
    let e = parse(
        &format!("{head}end\n"),
        &["/tmp".into()],
        &["/tmp/x".into()],
    )
    .unwrap_err();
    assert!(
        matches!(&e, ProbeError::Bad(m) if m.contains("missing")),
        "{e:?}"
    );
    let out = format!("{head}unusable\tpath\t1\nend\n");
    let e = parse(&out, &["/tmp".into()], &["/tmp/x".into()]).unwrap_err();
    assert!(
        matches!(&e, ProbeError::Unusable(m) if m.starts_with("/tmp/x leads to a name with a tab")),
        "{e:?}"
    );
}

#[test]
fn parses_the_probe_answer() {
    let out = "home\t/root\t/root\nroot\t1\t/tmp\t/tmp\npath\t1\t/tmp/x\t/tmp/x\tdir\t2048\t 3\t0\nkept\t1\t5120\t2\t/tmp/x.runbook-kept-1\nholder\t1\t7\tsleep 30 \nend\n";
    let p = parse(out, &["/tmp".into()], &["/tmp/x".into()]).unwrap();
    assert_eq!(p.home, "/root");
    assert_eq!(p.roots[0].given, "/tmp");
    let f = &p.paths[0];
    assert_eq!((f.kind, f.bytes, f.files), (Kind::Dir, 2048, 3));
    assert_eq!(f.holders, vec![(7, "sleep 30".to_string())]);
    assert_eq!(f.size(), "2.0 KiB, 3 files");
    assert_eq!(
        f.kept,
        vec![Kept {
            path: "/tmp/x.runbook-kept-1".into(),
            bytes: 5120,
            files: 2
        }]
    );
    assert!(
        parse("home\t/root\t/root\n", &[], &[]).is_err(),
        "no end line"
    );
}
