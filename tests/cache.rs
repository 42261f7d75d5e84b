//! `cache.clear` / `cache.restore` / `cache.size` and `runbook.torch`, driving the real
//! binary on real directories: locally (HOME pointed at a temp dir outside /tmp, so `~`,
//! `~/.cache` and the header's `~/declared` root are the test's own) and inside a
//! container over SSH (see common/sshd.rs).
use crate::common::mount::Mounted;
use crate::common::sshd::Fleet;
use crate::common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type Fields = BTreeMap<String, String>;

/// A test's scratch: the usual Env, a HOME outside every cache root, and cache dirs made
/// directly under /tmp (like /tmp/torchinductor_root), removed when the test ends.
struct Scene {
    env: Env,
    home: tempfile::TempDir,
    tmp_dirs: Vec<tempfile::TempDir>,
}

impl Scene {
    fn new() -> Self {
        // The fake home must not lie under a cache root (/tmp, /var/tmp), or the rules
        // about homes would fire where the test expects others: a checkout under /tmp
        // (as CI may use) puts the target dir there, so use /var/lib then.
        let target_tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
        let base = if target_tmp.starts_with("/tmp") || target_tmp.starts_with("/var/tmp") {
            let b = std::path::PathBuf::from("/var/lib/runbook-tests");
            std::fs::create_dir_all(&b).unwrap();
            b
        } else {
            target_tmp.to_path_buf()
        };
        let home = tempfile::Builder::new()
            .prefix("home-")
            .tempdir_in(base)
            .unwrap();
        Scene {
            env: Env::new(),
            home,
            tmp_dirs: Vec::new(),
        }
    }

    fn home(&self) -> &Path {
        self.home.path()
    }

    /// A new directory directly under /tmp.
    fn tmp_dir(&mut self) -> PathBuf {
        let d = tempfile::Builder::new()
            .prefix("runbook-cache-test-")
            .tempdir_in("/tmp")
            .unwrap();
        let p = d.path().to_path_buf();
        self.tmp_dirs.push(d);
        p
    }

    /// `runbook run tests/runbooks/cache/FILE --json --set K=V…` with HOME and a clean
    /// torch environment.
    fn run(&self, file: &str, sets: &[(&str, &str)], extra: &[&str]) -> Output {
        let mut run = Run::new(&self.env, repo().join("tests/runbooks/cache").join(file))
            .env("HOME", self.home());
        for var in [
            "TORCHINDUCTOR_CACHE_DIR",
            "TORCH_EXTENSIONS_DIR",
            "TRITON_CACHE_DIR",
            "TRITON_HOME",
            "XDG_CACHE_HOME",
            "TMPDIR",
        ] {
            run = run.env_remove(var);
        }
        run = run.json();
        for (k, v) in sets {
            run = run.set(k, v);
        }
        run.args(extra).run()
    }

    fn clear(&self, paths: &[&str], sets: &[(&str, &str)], extra: &[&str]) -> Output {
        let joined = paths.join("|");
        let mut all = vec![("paths", joined.as_str())];
        all.extend_from_slice(sets);
        self.run("clear.lua", &all, extra)
    }
}

/// Makes `n` files of `size` bytes in `dir` (and `dir` itself).
fn fill(dir: &Path, n: usize, size: usize) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..n {
        std::fs::write(dir.join(format!("f{i}")), vec![b'x'; size]).unwrap();
    }
}

/// The `result` lines show.lua logged, as key → value.
fn results(out: &Output) -> Vec<Fields> {
    logs(out, "result")
}

/// The log lines that start with `tag<TAB>`: `key=value` fields (or `_1`, `_2`… for
/// plain ones).
fn logs(out: &Output, tag: &str) -> Vec<Fields> {
    out.logs()
        .iter()
        .filter_map(|m| m.strip_prefix(&format!("{tag}\t")).map(str::to_string))
        .map(|m| {
            m.split('\t')
                .enumerate()
                .map(|(i, kv)| match kv.split_once('=') {
                    Some((k, v)) => (k.to_string(), v.to_string()),
                    None => (format!("_{}", i + 1), kv.to_string()),
                })
                .collect()
        })
        .collect()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn clears_under_tmp_and_a_declared_root_after_a_truthful_preview() {
    let mut scene = Scene::new();
    let inductor = scene.tmp_dir();
    fill(&inductor, 1_100, 0);
    std::fs::write(inductor.join("big"), vec![b'x'; 2_000_000]).unwrap();
    let declared = scene.home().join("declared/torch");
    fill(&declared.join("sub"), 3, 1_000_000);
    let absent = inductor.with_extension("absent");
    let paths = [s(&inductor), "~/declared/torch", s(&absent)];

    // Dry-run: real sizes in the preview (the look is a read), nothing deleted.
    let dry = scene.clear(&paths, &[], &["--dry-run"]);
    dry.assert_exit(0);
    let events = dry.run_events();
    let planned = pick!(events, Event::ActionPlanned { .. });
    let summaries = pick!(planned, Event::ActionPlanned { summary, .. } => summary.clone());
    let declared_real = std::fs::canonicalize(&declared).unwrap();
    assert_eq!(
        summaries,
        vec![
            format!("delete {} (1.9 MiB, 1,101 files)", inductor.display()),
            format!("delete {} (2.9 MiB, 3 files)", declared_real.display()),
        ],
        "{}",
        dry.describe()
    );
    // The command is the delete script with the root and the resolved path as its
    // arguments: it checks the path again from the root as it deletes.
    let shown = [
        format!("cache-delete.sh root=/tmp path={}", inductor.display()),
        format!(
            "cache-delete.sh root={} path={}",
            declared_real.parent().unwrap().display(),
            declared_real.display()
        ),
    ];
    for (e, want) in planned.iter().zip(&shown) {
        let Event::ActionPlanned {
            destructive,
            command,
            script,
            ..
        } = e
        else {
            unreachable!()
        };
        assert!(*destructive, "{e:?}");
        assert_eq!(command, want);
        assert_eq!(
            script.as_ref().map(|s| s.name.as_str()),
            Some("cache-delete.sh")
        );
    }
    assert!(inductor.join("big").exists() && declared.join("sub/f0").exists());
    let r = results(&dry);
    assert_eq!(r.len(), 3);
    assert_eq!(r[0]["path"], s(&inductor));
    assert_eq!(r[0]["existed"], "true");
    assert_eq!(r[0]["changed"], "true");
    assert_eq!(r[0]["planned"], "true");
    assert_eq!(r[0]["files"], "1101");
    assert_eq!(
        r[0]["bytes"], "2000000",
        "the regular files' bytes, exactly"
    );
    assert_eq!(r[1]["path"], "~/declared/torch");
    assert_eq!(r[1]["resolved"], s(&declared_real));
    assert_eq!(
        (r[2]["existed"].as_str(), r[2]["changed"].as_str()),
        ("false", "false")
    );

    // The terminal preview says the same.
    let stderr = Run::new(&scene.env, repo().join("tests/runbooks/cache/clear.lua"))
        .env("HOME", scene.home())
        .set("paths", paths.join("|"))
        .dry_run()
        .run()
        .stderr_text();
    // The script by its name, with the arguments.
    let shown = format!(
        "delete {} (1.9 MiB, 1,101 files)  [deletes]\n      $ cache-delete.sh root=/tmp path={}\n",
        inductor.display(),
        inductor.display()
    );
    assert!(stderr.contains(&shown), "{stderr}");

    // The real run deletes both, and nothing around them.
    let real = scene.clear(&paths, &[], &["--yes"]);
    real.assert_exit(0);
    assert!(!inductor.exists() && !declared.exists());
    assert!(scene.home().join("declared").exists(), "the root stays");
    let r = results(&real);
    assert_eq!(r[0]["changed"], "true");
    assert_eq!(r[0]["planned"], "false");
    assert_eq!(r[1]["files"], "3");
    assert_eq!(r[2]["changed"], "false");

    // Clearing again: nothing there, nothing to do.
    let again = scene.clear(&paths, &[], &["--yes"]);
    again.assert_exit(0);
    assert!(results(&again).iter().all(|r| r["changed"] == "false"));
    assert!(!again
        .run_events()
        .iter()
        .any(|e| matches!(e, Event::ActionStarted { effect, .. } if *effect != Effect::Read)));
}

#[test]
fn hostile_paths_are_refused_and_nothing_is_deleted() {
    let mut scene = Scene::new();
    // Outside every root: the test's home is under target/tmp, not /tmp.
    let outside = scene.home().join("outside");
    fill(&outside, 1, 10);
    let outside = std::fs::canonicalize(&outside).unwrap();
    let canary = outside.join("f0");
    let valid = scene.tmp_dir();
    fill(&valid, 2, 10);
    let link = valid.with_extension("link");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let _link_guard = Remove(link.clone());
    let through = format!("{}/f0", link.display());
    let cases: Vec<(String, String)> = vec![
        ("tmp/relative".into(), "is a relative path".into()),
        (
            format!("{}/../etc", valid.display()),
            "contains a '..' component".into(),
        ),
        ("/".into(), "is the root directory /".into()),
        ("/tmp".into(), "is a cache root itself (/tmp)".into()),
        (
            "~/.cache".into(),
            "is a cache root itself (~/.cache)".into(),
        ),
        ("/usr".into(), "is a top-level directory".into()),
        ("~".into(), "is the home directory".into()),
        (
            s(&link).into(),
            format!(
                "is a symlink to {}, which is outside the cache roots",
                outside.display()
            ),
        ),
        (
            through.clone(),
            format!(
                "resolves to {}/f0, which is outside the cache roots",
                outside.display()
            ),
        ),
        ("~/outside".into(), "is not under a cache root".into()),
    ];
    for (path, rule) in &cases {
        let out = scene.clear(&[path], &[], &["--yes"]);
        assert_eq!(out.status.code(), Some(1), "{path}: {}", out.describe());
        let err = out.step_errors();
        assert!(
            err.contains(&format!("{path}: {rule}")) && err.contains("nothing was deleted"),
            "{path}: expected '{rule}' in: {err}"
        );
        assert!(canary.exists(), "{path}: the canary was deleted");
    }

    // All at once, with a valid path first: every rule named, the valid path kept too.
    let mut all: Vec<&str> = vec![s(&valid)];
    all.extend(cases.iter().map(|(p, _)| p.as_str()));
    let out = scene.clear(&all, &[("force", "true")], &["--yes"]);
    out.assert_exit(1);
    let err = out.step_errors();
    for (path, rule) in &cases {
        assert!(err.contains(&format!("{path}: {rule}")), "{err}");
    }
    assert!(!err.contains(&format!("{}:", valid.display())), "{err}");
    assert!(valid.join("f0").exists(), "the valid path was deleted");
    assert!(canary.exists() && std::fs::read_link(&link).is_ok());
    assert!(
        !out.run_events()
            .iter()
            .any(|e| matches!(e, Event::ActionStarted { effect, .. } if *effect != Effect::Read)),
        "a change ran"
    );
    // The rules hold in a dry-run too (the preview fails the same way).
    let dry = scene.clear(&all, &[], &["--dry-run"]);
    dry.assert_exit(1);
}

#[test]
fn a_name_with_a_newline_on_the_way_cannot_add_records_to_the_probes_answer() {
    // The probe answers in tab-separated lines. A symlink (made by whoever owns a
    // directory on the way) can lead to directories whose names spell out a record
    // that makes a path outside every root look like one inside a root.
    let mut scene = Scene::new();
    let outside = scene.home().join("forged-root");
    fill(&outside.join("victim"), 1, 10);
    let outside = std::fs::canonicalize(&outside).unwrap();
    let canary = outside.join("victim/f0");
    let valid = scene.tmp_dir();
    let o = outside.display();
    let forged = format!("A\tdir\t0\t0\t0\nroot\t1\t{o}\t{o}\npath\t1\t{o}/victim\t{o}/victim");
    let full = valid.join(&forged);
    std::fs::create_dir_all(&full).unwrap();
    let link = valid.join("lnk");
    std::os::unix::fs::symlink(full.parent().unwrap(), &link).unwrap();
    let path = format!("{}/victim", link.display());
    for flags in [&["--dry-run"][..], &["--yes"][..]] {
        let out = scene.clear(&[&path], &[], flags);
        assert_eq!(out.status.code(), Some(1), "{flags:?}: {}", out.describe());
        let err = out.step_errors();
        assert!(
            err.contains(&format!(
                "{path} leads to a name with a tab or a newline in it"
            )),
            "{flags:?}: {err}"
        );
        assert!(
            canary.exists(),
            "{flags:?}: the canary outside the roots was deleted"
        );
        assert!(
            full.exists(),
            "{flags:?}: the directory the link leads to was deleted"
        );
        assert!(
            !out.run_events().iter().any(|e| matches!(
                e,
                Event::ActionPlanned { .. }
                    | Event::ActionStarted {
                        effect: Effect::Change,
                        ..
                    }
            )),
            "{flags:?}: a change was planned or ran"
        );
    }
}

/// Removes what a test made beside its temp dirs under /tmp (a symlink, a kept copy)
/// when the test ends, even when it fails. A symlink is removed, never followed.
struct Remove(PathBuf);

impl Drop for Remove {
    fn drop(&mut self) {
        if std::fs::remove_file(&self.0).is_err() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Kills a spawned process when the test ends.
struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_process_using_the_cache_blocks_the_clear_unless_forced() {
    let mut scene = Scene::new();
    let busy = scene.tmp_dir();
    fill(&busy.join("kernels"), 2, 100);
    let held = std::fs::File::open(busy.join("kernels/f0")).unwrap();
    let sleeper = Kill(
        std::process::Command::new("sleep")
            .arg("30")
            .stdin(held)
            .spawn()
            .unwrap(),
    );
    let pid = sleeper.0.id();

    let out = scene.clear(&[s(&busy)], &[], &["--yes"]);
    out.assert_exit(1);
    let err = out.step_errors();
    assert!(
        err.contains(&format!(
            "{}: is in use by pid {pid} (sleep 30)",
            busy.display()
        )),
        "{err}"
    );
    assert!(err.contains("force = true"), "{err}");
    assert!(busy.join("kernels/f1").exists());

    let forced = scene.clear(&[s(&busy)], &[("force", "true")], &["--yes"]);
    forced.assert_exit(0);
    assert!(!busy.exists());
    drop(sleeper);
}

#[test]
fn keep_moves_aside_and_restore_brings_it_back() {
    let mut scene = Scene::new();
    let dir = scene.tmp_dir();
    fill(&dir.join("a/b"), 3, 1234);
    std::fs::write(dir.join("a/note"), "known good").unwrap();

    let dry = scene.clear(&[s(&dir)], &[("keep", "true")], &["--dry-run"]);
    dry.assert_exit(0);
    let summary =
        pick!(dry.run_events(), Event::ActionPlanned { summary, .. } => summary.clone())[0].clone();
    // 3 × 1234 + 10 bytes of regular files: directories count for nothing.
    let d = dir.display();
    assert_eq!(
        summary,
        format!("move aside {d} (3.6 KiB, 4 files) → {d}.runbook-kept-…")
    );
    assert!(dir.join("a/note").exists(), "a dry-run moves nothing");

    let kept = scene.clear(&[s(&dir)], &[("keep", "true")], &["--yes"]);
    kept.assert_exit(0);
    let r = results(&kept);
    let kept_as = PathBuf::from(&r[0]["kept_as"]);
    assert!(!dir.exists());
    assert_eq!(kept_as.parent(), dir.parent());
    assert!(
        kept_as
            .to_str()
            .unwrap()
            .starts_with(&format!("{}.runbook-kept-2", dir.display())),
        "{kept_as:?}"
    );
    assert_eq!(
        std::fs::read_to_string(kept_as.join("a/note")).unwrap(),
        "known good"
    );
    let _cleanup = Remove(kept_as.clone()); // in case restore fails

    // The cache came back (a new compile) and is not empty: restore refuses unless forced.
    fill(&dir, 1, 5);
    let refused = scene.clear(&[s(&dir)], &[("op", "restore")], &["--yes"]);
    refused.assert_exit(1);
    assert!(
        refused
            .step_errors()
            .contains("exists again and is not empty"),
        "{}",
        refused.step_errors()
    );
    assert!(dir.join("f0").exists() && kept_as.exists());

    let restored = scene.clear(
        &[s(&dir)],
        &[("op", "restore"), ("force", "true")],
        &["--yes"],
    );
    restored.assert_exit(0);
    assert_eq!(
        results(&restored)[0]["restored_from"],
        kept_as.to_str().unwrap()
    );
    assert!(!kept_as.exists() && !dir.join("f0").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("a/note")).unwrap(),
        "known good"
    );
    for i in 0..3 {
        assert_eq!(
            std::fs::read(dir.join(format!("a/b/f{i}"))).unwrap().len(),
            1234
        );
    }

    // Nothing kept any more: nothing to restore, like clearing an absent path.
    let none = scene.clear(&[s(&dir)], &[("op", "restore")], &["--yes"]);
    none.assert_exit(0);
    assert_eq!(results(&none)[0]["changed"], "false");
    assert!(dir.join("a/note").exists());

    // cache.size reads without changing anything.
    let size = scene.clear(&[s(&dir)], &[("op", "size")], &["--yes"]);
    size.assert_exit(0);
    let r = results(&size);
    assert_eq!(
        (r[0]["existed"].as_str(), r[0]["files"].as_str()),
        ("true", "4")
    );
}

/// The summaries of the changes a run planned, in order.
fn change_summaries(out: &Output) -> Vec<String> {
    pick!(
        out.run_events(),
        Event::ActionPlanned { effect: Effect::Change, summary, .. } => summary.clone()
    )
}

/// The kept copies beside `dir`, oldest first.
fn kept_copies(dir: &Path) -> Vec<PathBuf> {
    let prefix = format!(
        "{}.runbook-kept-",
        dir.file_name().unwrap().to_str().unwrap()
    );
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir.parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// Each `keep = true` sets another copy aside (a real inductor cache is hundreds of
/// MiB), so only the newest `keep_last` stay (default 2, the one just made included):
/// the older ones are deleted, each planned in the dry-run with its size and the total
/// logged, and the real run deletes exactly those and nothing else.
#[test]
fn keep_prunes_the_kept_copies_beyond_keep_last() {
    let mut scene = Scene::new();
    let base = scene.tmp_dir();
    let dir = base.join("inductor");
    fill(&dir, 2, 1000);
    let kept = |stamp: &str| base.join(format!("inductor.runbook-kept-{stamp}"));
    let (oldest, older, newest) = (
        kept("20240101T000000Z"),
        kept("20240102T000000Z"),
        kept("20240102T000000Z.1"),
    );
    fill(&oldest, 1, 1024 * 1024);
    fill(&older.join("sub"), 2, 1024 * 1024);
    fill(&newest, 3, 10);
    let d = dir.display();

    let dry = scene.clear(&[s(&dir)], &[("keep", "true")], &["--dry-run"]);
    dry.assert_exit(0);
    let planned = change_summaries(&dry);
    assert_eq!(
        planned,
        vec![
            format!("move aside {d} (2.0 KiB, 2 files) → {d}.runbook-kept-…"),
            format!(
                "delete older kept copy {} (1.0 MiB, 1 file)",
                oldest.display()
            ),
            format!(
                "delete older kept copy {} (2.0 MiB, 2 files)",
                older.display()
            ),
        ],
        "{}",
        dry.describe()
    );
    let said: Vec<String> = dry.logs();
    let frees = format!(
        "cache.clear: {d}: keeping the newest 2 kept copies; deleting 2 older ones frees 3.0 MiB (3 files)"
    );
    assert!(said.contains(&frees), "{said:?}");
    let r = &results(&dry)[0];
    assert_eq!(
        r["pruned"],
        format!("{},{}", oldest.display(), older.display())
    );
    assert_eq!(r["pruned_bytes"], (3 * 1024 * 1024).to_string());
    assert!(
        oldest.exists() && older.exists() && dir.exists(),
        "a dry-run deletes nothing"
    );

    // The real run does what the dry-run planned, command for command.
    let real = scene.clear(&[s(&dir)], &[("keep", "true")], &["--yes"]);
    real.assert_exit(0);

    assert_eq!(
        pick!(
            dry.run_events(),
            Event::ActionPlanned { effect: Effect::Change, command, .. } => command.clone()
        ),
        pick!(
            real.run_events(),
            Event::ActionStarted { effect: Effect::Change, command, .. } => command.clone()
        )
    );
    let made = PathBuf::from(&results(&real)[0]["kept_as"]);
    assert_eq!(kept_copies(&dir), vec![newest.clone(), made.clone()]);
    assert_eq!(std::fs::read(newest.join("f2")).unwrap().len(), 10);

    // keep_last = 1: only the copy made now stays.
    fill(&dir, 1, 5);
    let one = scene.clear(
        &[s(&dir)],
        &[("keep", "true"), ("keep_last", "1")],
        &["--yes"],
    );
    one.assert_exit(0);
    let last = PathBuf::from(&results(&one)[0]["kept_as"]);
    assert_eq!(kept_copies(&dir), vec![last.clone()]);

    // A path that is not there now keeps its newest keep_last copies all the same.
    let ancient = kept("20230101T000000Z");
    fill(&ancient, 1, 1);
    let absent = scene.clear(
        &[s(&dir)],
        &[("keep", "true"), ("keep_last", "1")],
        &["--yes"],
    );
    absent.assert_exit(0);
    let r = &results(&absent)[0];
    assert_eq!(
        (r["existed"].as_str(), r["changed"].as_str()),
        ("false", "true")
    );
    assert_eq!(r["pruned"], s(&ancient));
    assert_eq!(kept_copies(&dir), vec![last.clone()]);

    // keep_last is a count of at least 1, and only means something with keep = true.
    for (sets, why) in [
        (
            vec![("keep", "true"), ("keep_last", "0")],
            "keep_last: expected a whole number of at least 1, got 0",
        ),
        (
            vec![("keep_last", "3")],
            "keep_last counts the copies keep = true sets aside",
        ),
    ] {
        let out = scene.clear(&[s(&dir)], &sets, &["--yes"]);
        out.assert_exit(1);
        assert!(out.step_errors().contains(why), "{}", out.step_errors());
    }
    assert_eq!(kept_copies(&dir), vec![last]);
}

/// One size for a directory, whichever primitive measures it: the apparent bytes of its
/// regular files, and how many there are. Directories (4 KiB each in `du -b` on ext4),
/// a sparse file's blocks, a symlink out, an empty directory count for nothing (they made
/// `cache.size` say 4,296 B / 2 files where `fingerprint` said 12,288 B / 3 files), and
/// the preview says it in binary units.
#[test]
fn every_primitive_measures_a_directory_the_same_way() {
    let mut scene = Scene::new();
    let dir = scene.tmp_dir().join("cache");
    std::fs::create_dir_all(dir.join("sub/empty")).unwrap();
    std::fs::write(dir.join("a"), vec![b'a'; 100]).unwrap();
    std::fs::write(dir.join("sub/b"), vec![b'b'; 100]).unwrap();
    let sparse = std::fs::File::create(dir.join("sub/sparse")).unwrap();
    sparse.set_len(3 * 1024 * 1024).unwrap();
    drop(sparse); // an open file would make the clear refuse: in use
    std::os::unix::fs::symlink("/etc/passwd", dir.join("link-out")).unwrap();
    let script = scene.env.write("noop.py", "pass\n");
    let out = scene.run(
        "sizes.lua",
        &[("dir", s(&dir)), ("script", s(&script))],
        &["--dry-run"],
    );
    out.assert_exit(0);
    let want = ((3 * 1024 * 1024 + 200).to_string(), "3".to_string());
    let sizes = logs(&out, "size");
    assert_eq!(sizes.len(), 4, "{}", out.describe());
    for m in &sizes {
        assert_eq!(
            (m["bytes"].clone(), m["files"].clone()),
            want,
            "{}",
            m["by"]
        );
    }
    assert_eq!(
        change_summaries(&out).last().unwrap(),
        &format!("delete {} (3.0 MiB, 3 files)", dir.display())
    );
}

#[test]
fn another_runs_lock_blocks_the_clear() {
    let mut scene = Scene::new();
    let dir = scene.tmp_dir();
    fill(&dir, 2, 10);
    let started = scene.env.scratch().join("started");
    let mut first = Run::new(&scene.env, repo().join("tests/runbooks/cache/hold.lua"))
        .yes()
        .set("sleep", "2")
        .set("started", &started)
        .env("HOME", scene.home())
        .spawn();
    first.wait_file(&started, std::time::Duration::from_secs(10));
    let busy = scene.clear(&[s(&dir)], &[], &["--yes"]);
    busy.assert_exit(1);
    let err = busy.step_errors();
    assert!(err.contains("is locked by run "), "{err}");
    assert!(dir.join("f1").exists());
    assert_eq!(
        first.code(std::time::Duration::from_secs(60)),
        0,
        "{}",
        first.output()
    );
}

#[test]
fn torch_caches_follow_the_targets_environment() {
    let scene = Scene::new();
    let home = scene.home().display().to_string();
    let out = scene.run("torch.lua", &[], &["--yes"]);
    out.assert_exit(0);
    let user = String::from_utf8(
        std::process::Command::new("id")
            .arg("-un")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    let c = &logs(&out, "caches")[0];
    assert_eq!(c["_1"], format!("/tmp/torchinductor_{user}"));
    assert_eq!(c["_2"], format!("{home}/.cache/torch_extensions"));
    assert_eq!(c["_3"], format!("{home}/.triton/cache"));
    assert_eq!(c["_4"], "3", "the array part holds the three paths");
    assert_eq!(
        logs(&out, "index")[0]["_1"],
        "https://download.pytorch.org/whl/cu128"
    );

    // The environment variables torch and triton read win.
    let out = Run::new(&scene.env, repo().join("tests/runbooks/cache/torch.lua"))
        .env("HOME", scene.home())
        .env("TORCHINDUCTOR_CACHE_DIR", "/var/tmp/inductor-here")
        .env("TORCH_EXTENSIONS_DIR", "/var/tmp/ext-here")
        .env("TRITON_CACHE_DIR", "/var/tmp/triton-here")
        .json()
        .set("user", "root")
        .expect_exit(0)
        .run();
    let c = &logs(&out, "caches")[0];
    assert_eq!(
        (c["_1"].as_str(), c["_2"].as_str(), c["_3"].as_str()),
        (
            "/var/tmp/inductor-here",
            "/var/tmp/ext-here",
            "/var/tmp/triton-here"
        )
    );

    // Offline nothing is looked at: the defaults for the user.
    let out = scene.run(
        "torch.lua",
        &[("user", "alice")],
        &["--dry-run", "--offline"],
    );
    out.assert_exit(0);
    let c = &logs(&out, "caches")[0];
    assert_eq!(
        (c["_1"].as_str(), c["_2"].as_str(), c["_3"].as_str()),
        (
            "/tmp/torchinductor_alice",
            "/home/alice/.cache/torch_extensions",
            "/home/alice/.triton/cache"
        )
    );

    // A wheel index is checked, and the error names the runbook line.
    let out = scene.run("torch.lua", &[("build", "cu12")], &["--yes"]);
    out.assert_exit(1);
    let err = out.step_errors();
    assert!(
        err.contains("torch.lua:20: torch.index: cuda: give a CUDA build like \"cu128\""),
        "{err}"
    );
}

#[test]
fn clears_torch_caches_inside_a_container_over_ssh() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let ct = fleet.container(200);
    fill(&ct.join("tmp/torchinductor_root/fx"), 5, 1000);
    fill(&ct.join("tmp/keep-me"), 1, 10);
    let node_inductor = Path::new("/tmp/torchinductor_root");
    let node_had_one = node_inductor.exists();
    let env = Env::new();
    let out = Run::new(&env, repo().join("tests/runbooks/cache/torch.lua"))
        .ssh(&fleet)
        .yes()
        .json()
        .set("target", "node1")
        .set("ct", "200")
        .set("user", "root")
        .set("clear", "true")
        .expect_exit(0)
        .run();
    let c = &logs(&out, "caches")[0];
    assert_eq!(
        (c["_1"].as_str(), c["_2"].as_str(), c["_3"].as_str()),
        (
            "/tmp/torchinductor_root",
            "/root/.cache/torch_extensions",
            "/root/.triton/cache"
        )
    );
    let r = results(&out);
    assert_eq!(r.len(), 3);
    assert_eq!(
        (r[0]["changed"].as_str(), r[0]["files"].as_str()),
        ("true", "5")
    );
    assert_eq!(
        (r[1]["existed"].as_str(), r[2]["existed"].as_str()),
        ("false", "false")
    );
    assert!(
        !ct.join("tmp/torchinductor_root").exists(),
        "gone in the container"
    );
    assert!(ct.join("tmp/keep-me/f0").exists());
    assert_eq!(
        node_inductor.exists(),
        node_had_one,
        "the node's /tmp is untouched"
    );
    let events = out.run_events();
    let rm = pick!(
        events,
        Event::ActionStarted {
            effect: Effect::Change,
            ..
        }
    )
    .into_iter()
    .next()
    .expect("one change");
    // As it runs in the container (the target is node1/ct200), the script by name.
    assert!(
        matches!(rm, Event::ActionStarted { command, .. }
            if command == "cache-delete.sh root=/tmp path=/tmp/torchinductor_root"),
        "{rm:?}"
    );
}

/// Swaps two names in one directory again and again (`renameat2` with
/// `RENAME_EXCHANGE`, what a user who owns the directory can do) until dropped; then
/// leaves them as they were. The count of swaps shows the race really ran.
struct Swapper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Swapper {
    fn start(a: &Path, b: &Path) -> Self {
        use std::os::unix::ffi::OsStrExt;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
        let (a, b, flag) = (c(a), c(b), stop.clone());
        let thread = std::thread::spawn(move || {
            let swap = || unsafe {
                libc::renameat2(
                    libc::AT_FDCWD,
                    a.as_ptr(),
                    libc::AT_FDCWD,
                    b.as_ptr(),
                    libc::RENAME_EXCHANGE,
                )
            };
            let mut n = 0u64;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                assert_eq!(swap(), 0, "renameat2: {}", std::io::Error::last_os_error());
                n += 1;
                // Half the time each way, at a pace the probe and the change both meet.
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            if n % 2 == 1 {
                assert_eq!(swap(), 0);
            }
            n
        });
        Swapper {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The race of issue 8: the path is checked by one command and acted on by another, and a
/// user who owns a parent directory swaps it for a symlink to a directory outside every
/// root in between. Deleting, moving aside and restoring must all stay inside the root:
/// the canary out there survives every try.
#[test]
fn a_parent_swapped_for_a_symlink_mid_clear_never_takes_the_clear_outside_the_root() {
    const TRIES: usize = 200;
    let mut scene = Scene::new();
    let dir = scene.tmp_dir();
    let victim = scene.home().join("victim"); // outside every cache root
    fill(&victim.join("cache"), 0, 0);
    let canary = victim.join("cache/canary");
    std::fs::write(&canary, "must stay").unwrap();
    std::fs::create_dir(dir.join("a")).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("b")).unwrap();
    let swapper = Swapper::start(&dir.join("a"), &dir.join("b"));
    let out = scene.run(
        "race.lua",
        &[
            ("path", s(&dir.join("a/cache"))),
            ("other", s(&dir.join("b/cache"))),
            ("canary", s(&canary)),
            ("tries", &TRIES.to_string()),
        ],
        &["--yes"],
    );
    let swaps = swapper.finish();
    out.assert_exit(0);
    assert!(swaps > 100, "the swapper ran ({swaps} swaps)");
    // The race was met: cache changes ran, and some of them acted (inside the root).
    let cache_change = |summary: &str| {
        ["delete ", "move aside ", "restore "]
            .iter()
            .any(|p| summary.starts_with(p))
    };
    let events = out.run_events();
    let started: Vec<u64> = pick!(events, Event::ActionStarted { effect: Effect::Change, summary, action, .. }
        if cache_change(summary) => *action);
    let acted = pick!(events, Event::ActionFinished { ok: true, action, .. }
        if started.contains(action))
    .len();
    assert!(
        started.len() > 10 && acted > 0,
        "{} cache changes ran, {acted} of them acted",
        started.len()
    );
    let escaped = logs(&out, "escaped");
    assert!(
        escaped.is_empty(),
        "the clear reached outside the root in {} of {TRIES} tries: {escaped:?}",
        escaped.len()
    );
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), "must stay");
}

/// `/proc/self/mounts` writes a space in a path as `\040` (tab `\011`, newline `\012`,
/// backslash `\134`): a mount under a cache path with such a character must still be seen,
/// and the clear refused rather than emptying the mounted directory.
#[test]
fn a_mount_under_a_path_with_a_space_or_backslash_is_seen_and_never_emptied() {
    let mut scene = Scene::new();
    let dir = scene.tmp_dir();
    let victim = scene.home().join("mounted");
    fill(&victim, 2, 10);
    let canary = victim.join("f0");
    for (cache, mount_point) in [
        ("with space/cache", "sub"),
        ("back\\slash/cache", "sub"),
        ("tab and space/cache", "t\tab"),
        ("new line/cache", "new\nline"),
    ] {
        let cache = dir.join(cache);
        let at = cache.join(mount_point);
        fill(&at, 0, 0);
        fill(&cache, 1, 10);
        let _mounted = Mounted::bind(&victim, &at);
        let out = scene.clear(&[s(&cache)], &[], &["--yes"]);
        assert!(
            canary.exists() && victim.join("f1").exists(),
            "{}: the mounted directory was emptied: {}",
            cache.display(),
            out.step_errors()
        );
        let err = out.step_errors();
        let shown = s(&at).replace('\t', "\\t").replace('\n', "\\n");
        assert!(
            out.status.code() == Some(1)
                && err.contains(&format!("has a filesystem mounted at {shown}")),
            "{}: {}",
            cache.display(),
            out.describe()
        );
        assert!(cache.join("f0").exists(), "nothing was deleted");
    }
}

/// With `--offline` nothing is resolved: the delete script is planned with the path and
/// the innermost root holding it as written, `~` included (the script expands it on the
/// target), so the planned line is one that really works; a path under no root as written
/// gets an empty root, which the script refuses.
#[test]
fn offline_plans_the_delete_script_with_the_roots_as_written() {
    let scene = Scene::new();
    let out = scene.clear(
        &["~/.cache/torch/x", "/var/tmp/y", "/srv/z"],
        &[],
        &["--dry-run", "--offline"],
    );
    out.assert_exit(0);
    let commands: Vec<String> = pick!(
        out.run_events(),
        Event::ActionPlanned { effect: Effect::Change, command, .. } => command.clone()
    );
    assert_eq!(
        commands,
        [
            "cache-delete.sh root='~/.cache' path='~/.cache/torch/x'",
            "cache-delete.sh root=/var/tmp path=/var/tmp/y",
            "cache-delete.sh root='' path=/srv/z",
        ]
    );
    // The planned line, run on this machine with the script `runbook script` prints and
    // the values in the order shown, deletes what it says.
    fill(&scene.home().join(".cache/torch/x"), 2, 1);
    let line = commands[0]
        .replacen(
            "cache-delete.sh",
            r#"sh -c "$("$RUNBOOK" script cache-delete)" sh"#,
            1,
        )
        .replace(" root=", " ")
        .replace(" path=", " ");
    let ran = std::process::Command::new("sh")
        .arg("-c")
        .arg(line)
        .env("RUNBOOK", assert_cmd::cargo::cargo_bin!("runbook"))
        .env("HOME", scene.home())
        .output()
        .unwrap();
    assert!(ran.status.success(), "{ran:?}");
    assert!(!scene.home().join(".cache/torch/x").exists());
    assert!(scene.home().join(".cache/torch").exists());
}

/// A host that cannot be reached inside a stdlib call (issue 33 item 6): the error names
/// the runbook's own line and the host, as other errors do, not the stdlib's
/// (`<stdlib>/runbook/torch.lua:58`) with "runtime error:" in the middle; caught with
/// pcall too.
#[test]
fn an_unreachable_host_in_a_stdlib_call_names_the_runbooks_line() {
    require_sshd!();
    let mut fleet = Fleet::start(1);
    fleet.node("node1").kill();
    let env = Env::new();
    let rb = env.write(
        "caches.lua",
        r#"runbook { name = "caches" }
local torch = require("runbook.torch")
step("in a container", function()
  local ok, err = pcall(torch.caches, target("node1"):pct(200))
  log.info("caught: " .. tostring(err))
end)
step("on the node", function()
  torch.caches(target("node1"))
end)
"#,
    );
    let out = Run::new(&env, &rb)
        .ssh(&fleet)
        .yes()
        .json()
        .expect_exit(1)
        .run();
    let err = out.step_error("on the node");
    assert!(
        err.starts_with(&format!(
            "{}:8: torch.caches: cannot connect to node1",
            rb.display()
        )),
        "{err}"
    );
    let caught = out
        .logs()
        .into_iter()
        .find_map(|l| l.strip_prefix("caught: ").map(str::to_string))
        .unwrap();
    assert!(
        caught.contains("torch.caches: cannot connect to node1"),
        "{caught}"
    );
    for text in [&err, &caught] {
        assert!(
            !text.contains("<stdlib>") && !text.contains("runtime error"),
            "{text}"
        );
    }
}
