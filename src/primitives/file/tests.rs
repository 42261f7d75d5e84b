//! The diff people read, the template's errors, the read's answer, the words a put takes,
//! and the two scripts under every shell a target may have.

use super::diff::{render, Before, Diff};
use super::probe::{parse, Found};
use super::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Output;

/// A map of names for a template.
fn map<const N: usize>(pairs: [(&str, minijinja::Value); N]) -> minijinja::Value {
    minijinja::Value::from(
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<std::collections::BTreeMap<_, _>>(),
    )
}

fn plain(text: &str) -> String {
    text.to_string()
}

fn diff(before: Before<'_>, after: &str) -> Diff {
    render("/etc/app.conf", before, after.as_bytes(), &plain, true).expect("a diff")
}

#[test]
fn a_new_file_is_all_added_lines() {
    let d = diff(Before::Missing, "a\nb\n");
    assert_eq!(
        d.text,
        "--- /dev/null\n+++ /etc/app.conf\n@@ -0,0 +1,2 @@\n+a\n+b"
    );
    assert_eq!(d.lines, Some((2, 0)));
}

#[test]
fn a_changed_file_is_a_unified_diff_with_three_lines_of_context() {
    let old: String = (1..=10).map(|n| format!("line {n}\n")).collect();
    let new = old.replace("line 5\n", "line five\n");
    let d = diff(Before::Read(old.as_bytes()), &new);
    assert_eq!(
        d.text,
        "--- /etc/app.conf (before)\n+++ /etc/app.conf (after)\n@@ -2,7 +2,7 @@\n line 2\n line 3\n line 4\n-line 5\n+line five\n line 6\n line 7\n line 8"
    );
    assert_eq!(d.lines, Some((1, 1)));
}

#[test]
fn a_missing_last_newline_is_said() {
    let d = diff(Before::Read(b"a\nb\n"), "a\nb");
    assert!(
        d.text.contains("\\ No newline at end of file"),
        "{}",
        d.text
    );
    assert_eq!(d.lines, Some((1, 1)));
}

#[test]
fn the_same_bytes_have_no_diff() {
    let same = render("/x", Before::Read(b"a\n"), b"a\n", &plain, true);
    assert_eq!(same, None, "only the mode or owner change");
}

#[test]
fn binary_huge_unread_and_hidden_content_is_told_by_sizes_and_digests() {
    let bin = render("/x", Before::Read(b"a\0b"), b"a\0c", &plain, true).unwrap();
    assert_eq!(bin.lines, None);
    assert!(
        bin.text
            .starts_with("binary content: before 3 bytes, sha256 "),
        "{}",
        bin.text
    );
    assert!(
        bin.text.contains("; after 3 bytes, sha256 "),
        "{}",
        bin.text
    );
    let not_utf8 = render("/x", Before::Missing, &[0xff, 0xfe], &plain, true).unwrap();
    assert!(
        not_utf8
            .text
            .starts_with("binary content: before none (a new file); after 2 bytes"),
        "{}",
        not_utf8.text
    );
    let big = "x\n".repeat(DIFF_MAX);
    let huge = render("/x", Before::Missing, big.as_bytes(), &plain, true).unwrap();
    assert!(
        huge.text
            .starts_with("not diffed (over 256.0 KiB): before none (a new file); after 512.0 KiB (524288 bytes), sha256 "),
        "{}",
        huge.text
    );
    let ab = "ab".repeat(32);
    let unread = render(
        "/x",
        Before::Unread {
            size: 300_000,
            sha256: &ab,
        },
        b"small\n",
        &plain,
        true,
    )
    .unwrap();
    assert_eq!(
        unread.text,
        format!(
            "not diffed (over 256.0 KiB): before 293.0 KiB (300000 bytes), sha256 abababababababab…; after 6 bytes, sha256 {}…",
            &sha(b"small\n")[..16]
        )
    );
    let hidden = render("/x", Before::Read(b"key 1\n"), b"key 2\n", &plain, false).unwrap();
    assert!(
        hidden
            .text
            .starts_with("content not shown (diff = false): before 6 bytes"),
        "{}",
        hidden.text
    );
    assert!(!hidden.text.contains("key"), "{}", hidden.text);
}

/// A secret is masked in both sides before they are compared: one of several lines
/// reads `***` as a whole, not its lines one by one around the diff's marks.
#[test]
fn secrets_are_masked_before_the_diff() {
    let secret = "-----BEGIN KEY-----\nAAAAsecretline1\nBBBBsecretline2\n-----END KEY-----";
    let mask = |t: &str| t.replace(secret, "***");
    let old = "user = app\n";
    let new = format!("user = app\nkey = {secret}\n");
    let d = render(
        "/x",
        Before::Read(old.as_bytes()),
        new.as_bytes(),
        &mask,
        true,
    )
    .unwrap();
    assert!(!d.text.contains("secretline"), "{}", d.text);
    assert!(d.text.contains("+key = ***"), "{}", d.text);
    assert_eq!(d.lines, Some((1, 0)));
}

#[test]
fn templates_render_with_ansibles_whitespace() {
    let vars = map([
        ("name", minijinja::Value::from("app")),
        (
            "ups",
            minijinja::Value::from(vec![
                minijinja::Value::from("a"),
                minijinja::Value::from("b"),
            ]),
        ),
    ]);
    let out = template::render(
        "t.j2",
        "# {{ name }}\n{% for u in ups %}\nserver {{ u }};\n{% endfor %}\n<{{ name | upper }}>\n",
        vars,
    )
    .unwrap();
    assert_eq!(
        out, "# app\nserver a;\nserver b;\n<APP>\n",
        "trim_blocks, the trailing newline kept, no HTML escaping"
    );
}

#[test]
fn a_name_the_vars_lack_is_an_error_at_the_templates_line() {
    let vars = map([
        ("server", map([("n", minijinja::Value::from(1))])),
        ("port", minijinja::Value::from(1)),
    ]);
    let src = "one\n{{ port }}\n{{ server.name }} {{ range(2) | length }}\n{{ host }}\n";
    let e = template::render("templates/a.j2", src, vars.clone()).unwrap_err();
    assert_eq!(
        e,
        "templates/a.j2:3: undefined value: 'server.name' is not in vars"
    );
    let e =
        template::render("templates/a.j2", "{{ host }}{{ other }}\n", vars.clone()).unwrap_err();
    assert_eq!(
        e,
        "templates/a.j2:1: undefined value: not in vars: 'host', 'other'"
    );
    let e = template::render("t.j2", "{% if flag %}x{% endif %}", vars.clone()).unwrap_err();
    assert!(e.starts_with("t.j2:1: undefined value"), "strict: {e}");
    let ok = template::render(
        "t.j2",
        "{{ flag | default('off') }} {% if flag is defined %}on{% endif %}",
        vars,
    );
    assert_eq!(ok.as_deref(), Ok("off "));
    // No global answers for a name the vars lack (minijinja's `debug` is removed).
    let none = template::render("t.j2", "{% if debug is defined %}on{% endif %}", map([]));
    assert_eq!(none.as_deref(), Ok(""));
}

/// One template and its vars, nothing else: no other template, no file, no environment.
#[test]
fn a_template_reaches_nothing_but_its_vars() {
    let none = map([("x", minijinja::Value::from(1))]);
    let cases = [
        (
            "{% include 'other.j2' %}",
            "t.j2:1: syntax error: unknown statement include",
        ),
        (
            "{% extends 'base.j2' %}",
            "t.j2:1: syntax error: unknown statement extends",
        ),
        (
            "{% import 'm.j2' as m %}",
            "t.j2:1: syntax error: unknown statement import",
        ),
        (
            "{{ env('HOME') }}",
            "t.j2:1: unknown function: env is unknown",
        ),
        (
            "{{ lookup('file', '/etc/passwd') }}",
            "t.j2:1: unknown function: lookup is unknown",
        ),
        ("{{ '/etc/passwd' | read_file }}", "t.j2:1: unknown filter"),
        (
            "{{ debug() }}",
            "t.j2:1: unknown function: debug is unknown",
        ),
    ];
    for (src, want) in cases {
        let e = template::render("t.j2", src, none.clone()).unwrap_err();
        assert!(e.starts_with(want), "{src}: {e}");
    }
    let e = template::render("t.j2", "{% for x in %}\n", none.clone()).unwrap_err();
    assert!(e.starts_with("t.j2:1: syntax error"), "{e}");
    // A render that would run on and on stops at its fuel.
    let e = template::render(
        "t.j2",
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
        none,
    )
    .unwrap_err();
    assert!(e.contains("fuel"), "{e}");
}

#[test]
fn the_reads_answer_is_read_back() {
    let body = b"hi\n";
    let sha = crate::primitives::store::sha256(body);
    let head = format!("type=file\nstat=640 0 4 3 root adm\nsha256={sha}\n--\n");
    let out = [head.as_bytes(), body].concat();
    let Ok(Found::File(stat)) = parse(&out) else {
        panic!("{:?}", parse(&out))
    };
    assert_eq!((stat.mode, stat.uid, stat.gid, stat.size), (0o640, 0, 4, 3));
    assert_eq!((stat.user.as_str(), stat.group.as_str()), ("root", "adm"));
    assert_eq!(stat.mode_text(), "0640");
    assert_eq!(stat.content.as_deref(), Some(&body[..]));
    // Over the size asked for: no bytes came.
    let Ok(Found::File(big)) = parse(head.replace(" 3 root", " 9000 root").as_bytes()) else {
        panic!()
    };
    assert_eq!(big.content, None);
    // Bytes that are not the ones the digest was of: changed while it was read.
    let changed = [head.as_bytes(), b"ho\n"].concat();
    assert!(parse(&changed)
        .unwrap_err()
        .contains("changed while it was read"));
    for (ty, found) in [
        ("missing", Found::Missing),
        ("link", Found::Link),
        ("dir", Found::Dir),
        ("other", Found::Other),
    ] {
        assert_eq!(parse(format!("type={ty}\n--\n").as_bytes()), Ok(found));
    }
    assert!(parse(b"type=file\n").is_err(), "no -- line");
    assert!(parse(b"type=file\nstat=1 2\n--\n").is_err());
    assert!(parse(b"type=what\n--\n").is_err());
}

#[test]
fn modes_owners_and_paths_are_checked_as_given() {
    assert_eq!(Mode::parse("0644"), Ok(Mode(0o644)));
    assert_eq!(Mode::parse("755").map(|m| m.to_string()), Ok("0755".into()));
    assert_eq!(Mode::parse("2775"), Ok(Mode(0o2775)));
    for bad in ["", "64", "0648", "u+x", "01777x", "12345"] {
        assert!(Mode::parse(bad).is_err(), "{bad}");
    }
    let o = Owner::parse("www-data:adm").unwrap();
    assert_eq!(
        (o.user.as_str(), o.group.as_deref()),
        ("www-data", Some("adm"))
    );
    assert_eq!(Owner::parse("0").unwrap().to_string(), "0");
    for bad in ["", ":adm", "a b", "root:", "-rf", "root:adm:x", "r;oot"] {
        assert!(Owner::parse(bad).is_err(), "{bad}");
    }
    let stat = probe::Stat {
        mode: 0o644,
        uid: 33,
        gid: 4,
        size: 0,
        user: "www-data".into(),
        group: "adm".into(),
        sha256: String::new(),
        content: None,
    };
    assert!(Owner::parse("www-data").unwrap().holds(&stat));
    assert!(Owner::parse("33:4").unwrap().holds(&stat));
    assert!(Owner::parse("www-data:adm").unwrap().holds(&stat));
    assert!(!Owner::parse("root").unwrap().holds(&stat));
    assert!(!Owner::parse("www-data:root").unwrap().holds(&stat));
    assert!(check_path("/etc/app.conf").is_ok());
    for bad in [
        "etc/x",
        "/",
        "",
        "/etc/",
        "/etc//x",
        "/etc/./x",
        "/etc/../x",
        "/a\0b",
    ] {
        assert!(check_path(bad).is_err(), "{bad:?}");
    }
}

// The scripts themselves, under dash, bash --posix and busybox sh (busybox's applets
// only: its stat, mktemp, ln, sha256sum).

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn sha(bytes: &[u8]) -> String {
    crate::primitives::store::sha256(bytes)
}

fn put(sh: &crate::testing::Shell, path: &Path, words: &[String], stdin: Option<&[u8]>) -> Output {
    use std::io::Write;
    let mut args = vec![path.display().to_string()];
    args.extend(words.iter().cloned());
    let mut child = sh
        .command(script::FILE_PUT.body, &args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        // A script that refuses early reads none of it.
        let _ = input.write_all(bytes);
    }
    drop(input);
    child.wait_with_output().unwrap()
}

/// Names in `dir` other than `keep`: what a put left behind.
fn others(dir: &Path, keep: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect();
    names.sort();
    names
}

#[test]
fn put_writes_atomically_and_refuses_what_it_did_not_read_under_every_shell() {
    for sh in crate::testing::shells() {
        let name = sh.name;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let f = dir.join("app.conf");
        let w = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        // `old=SHA new=SHA EXTRA…` for the bytes `old` and `new`.
        let swap = |old: &[u8], new: &[u8], extra: &[&str]| {
            let mut words = vec![format!("old={}", sha(old)), format!("new={}", sha(new))];
            words.extend(extra.iter().map(|e| e.to_string()));
            words
        };

        // New: the umask's mode (the tests run with 022 or so: never the temp's 0600).
        let one = b"one\n";
        let out = put(
            &sh,
            &f,
            &w(&["old=none", &format!("new={}", sha(one))]),
            Some(one),
        );
        assert!(out.status.success(), "{name}: {}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "written\n", "{name}");
        assert_eq!(std::fs::read(&f).unwrap(), one);
        let umask = unsafe { libc::umask(0o022) };
        unsafe { libc::umask(umask) };
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&f), 0o666 & !umask, "{name}");
        assert_eq!(others(dir, &["app.conf"]), Vec::<String>::new(), "{name}");

        // Replaced: the mode given, a backup kept as a hard link to the old file.
        let two = b"two\n";
        let words = swap(one, two, &["mode=0600", "backup=yes"]);
        let out = put(&sh, &f, &words, Some(two));
        assert!(out.status.success(), "{name}: {}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let backup = stdout
            .lines()
            .find_map(|l| l.strip_prefix("backup="))
            .unwrap_or_else(|| panic!("{name}: {stdout}"))
            .to_string();
        assert!(
            backup.starts_with(&format!("{}.", f.display())) && backup.ends_with("Z~"),
            "{name}: {backup}"
        );
        assert_eq!(std::fs::read(&backup).unwrap(), one, "{name}");
        assert_eq!(
            (std::fs::read(&f).unwrap(), mode(&f)),
            (two.to_vec(), 0o600)
        );
        // The same second again: the next free name.
        let three = b"three\n";
        let words = swap(two, three, &["backup=yes"]);
        let out = put(&sh, &f, &words, Some(three));
        assert!(out.status.success(), "{name}: {}", text(&out));
        assert_eq!(mode(&f), 0o600, "{name}: a replaced file keeps its mode");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("backup="),
            "{name}"
        );
        assert_eq!(others(dir, &["app.conf"]).len(), 2, "{name}: two backups");

        // Only the mode: the file's own bytes, a new inode all the same (never chmod
        // through a path that could be swapped for a link).
        let words = swap(three, three, &["mode=0640"]);
        let out = put(&sh, &f, &words, None);
        assert!(out.status.success(), "{name}: {}", text(&out));
        assert_eq!(
            (std::fs::read(&f).unwrap(), mode(&f)),
            (three.to_vec(), 0o640)
        );

        // The file is not what was read: nothing is written.
        let words = w(&["old=none", &format!("new={}", sha(one))]);
        let out = put(&sh, &f, &words, Some(one));
        assert_eq!(out.status.code(), Some(1), "{name}: {}", text(&out));
        assert!(text(&out).contains("changed since it was read"), "{name}");
        assert_eq!(std::fs::read(&f).unwrap(), three);

        // The bytes that arrive are not the ones named: nothing is written, no temp left.
        let words = w(&[&format!("old={}", sha(three)), &format!("new={}", sha(one))]);
        let out = put(&sh, &f, &words, Some(b"on"));
        assert_eq!(out.status.code(), Some(1), "{name}: {}", text(&out));
        assert!(
            text(&out).contains("not ") && text(&out).contains("as sent"),
            "{name}"
        );
        assert_eq!(std::fs::read(&f).unwrap(), three);
        assert_eq!(
            others(dir, &["app.conf"]).len(),
            2,
            "{name}: no temp file left"
        );

        // A link is neither followed nor replaced; a directory is not replaced.
        let target = dir.join("elsewhere");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let out = put(
            &sh,
            &link,
            &w(&["old=none", &format!("new={}", sha(one))]),
            Some(one),
        );
        assert_eq!(out.status.code(), Some(1), "{name}: {}", text(&out));
        assert!(text(&out).contains("is a symbolic link"), "{name}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        let sub = dir.join("sub");
        std::fs::create_dir(&sub).unwrap();
        let out = put(
            &sh,
            &sub,
            &w(&["old=none", &format!("new={}", sha(one))]),
            Some(one),
        );
        assert!(
            text(&out).contains("is not a regular file"),
            "{name}: {}",
            text(&out)
        );
        let out = put(
            &sh,
            &dir.join("no/such/x"),
            &w(&["old=none", &format!("new={}", sha(one))]),
            Some(one),
        );
        assert!(
            text(&out).contains("is not a directory"),
            "{name}: {}",
            text(&out)
        );

        // An owner that cannot be kept: as root, any; the test gives the file another
        // owner first, which the put keeps.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&f, Some(65534), Some(65534)).unwrap();
            let four = b"four\n";
            let words = swap(three, four, &[]);
            let out = put(&sh, &f, &words, Some(four));
            assert!(out.status.success(), "{name}: {}", text(&out));
            let m = std::fs::metadata(&f).unwrap();
            assert_eq!((m.uid(), m.gid()), (65534, 65534), "{name}: the owner kept");
            let words = swap(four, four, &["owner=0:0"]);
            let out = put(&sh, &f, &words, None);
            assert!(out.status.success(), "{name}: {}", text(&out));
            let m = std::fs::metadata(&f).unwrap();
            assert_eq!((m.uid(), m.gid()), (0, 0), "{name}: the owner given");
        }
    }
}

#[test]
fn read_tells_what_is_there_and_sends_bytes_up_to_max_under_every_shell() {
    for sh in crate::testing::shells() {
        let name = sh.name;
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("f");
        std::fs::write(&f, b"12345\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
        let read = |p: &Path, max: &str| {
            sh.run(
                script::FILE_READ.body,
                &[p.display().to_string(), max.to_string()],
            )
        };
        let out = read(&f, "100");
        assert!(out.status.success(), "{name}: {}", text(&out));
        let Ok(Found::File(stat)) = parse(&out.stdout) else {
            panic!("{name}: {}", text(&out))
        };
        assert_eq!((stat.mode, stat.size), (0o640, 6), "{name}");
        assert_eq!(stat.content.as_deref(), Some(&b"12345\n"[..]), "{name}");
        assert_eq!(stat.sha256, sha(b"12345\n"), "{name}");
        let Ok(Found::File(stat)) = parse(&read(&f, "5").stdout) else {
            panic!("{name}")
        };
        assert_eq!(stat.content, None, "{name}: over max, no bytes");
        let link = tmp.path().join("l");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert_eq!(parse(&read(&link, "100").stdout), Ok(Found::Link), "{name}");
        assert_eq!(
            parse(&read(tmp.path(), "100").stdout),
            Ok(Found::Dir),
            "{name}"
        );
        assert_eq!(
            parse(&read(&tmp.path().join("none"), "100").stdout),
            Ok(Found::Missing),
            "{name}"
        );
        assert_eq!(
            parse(&read(Path::new("/dev/null"), "100").stdout),
            Ok(Found::Other),
            "{name}"
        );
    }
}

/// Stopped while its stdin is still open (a timeout or Ctrl-C sends TERM to the
/// command's process group): the temp file goes with it, the file is as it was. The
/// bytes sent are the whole new content, so a TERM the script did not act on would show
/// as a write. Its stdin then ends, as runbook's does once sent: a TERM that came just
/// before `cat` started is acted on when `cat` ends (a shell runs a trap between
/// commands), which must not wait on an input that never ends.
#[test]
fn put_stopped_midway_leaves_nothing_behind_under_every_shell() {
    use std::io::Write;
    use std::os::unix::process::CommandExt;
    for sh in crate::testing::shells() {
        let name = sh.name;
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("app.conf");
        std::fs::write(&f, "old\n").unwrap();
        let words = [
            f.display().to_string(),
            format!("old={}", sha(b"old\n")),
            format!("new={}", sha(b"new\n")),
        ];
        let mut child = sh
            .command(script::FILE_PUT.body, &words)
            .process_group(0)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(b"new\n").unwrap();
        input.flush().unwrap();
        // The temp file is there once the script copies into it.
        let t0 = std::time::Instant::now();
        while others(tmp.path(), &["app.conf"]).is_empty() {
            assert!(t0.elapsed().as_secs() < 10, "{name}: no temp file made");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        unsafe { libc::kill(-(child.id() as i32), libc::SIGTERM) };
        drop(input);
        let out = child.wait_with_output().unwrap();
        assert!(!out.status.success(), "{name}: {}", text(&out));
        assert_eq!(
            others(tmp.path(), &["app.conf"]),
            Vec::<String>::new(),
            "{name}"
        );
        assert_eq!(std::fs::read(&f).unwrap(), b"old\n", "{name}");
    }
}
