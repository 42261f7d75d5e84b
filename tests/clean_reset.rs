//! The shipped clean-reset runbook, run for real on the demo training project
//! (examples/train): on the local machine, and inside a container behind SSH. Its dry-run
//! must predict the real run's changes.
use crate::common::sshd::Fleet;
use crate::common::*;
use std::path::Path;

/// The demo's training job outlives the run: stop it (jobs are named `JOB-PID`).
fn stop_job(env: &Env, target: &str, job: &str, extra: &[String]) {
    let stop = env.write(
        "stop.lua",
        &subst(
            r#"runbook { name = "stop" }
step("stop", function() proc.stop(@target@, { name = "@job@-@pid@" }) end)
"#,
            &[
                ("target", &target),
                ("job", &job),
                ("pid", &std::process::id()),
            ],
        ),
    );
    Run::new(env, &stop).args(extra).yes().expect_exit(0).run();
}

/// Each test names its own training job: tests run in parallel in one process.
fn demo_sets(repo: &Path, work: &Path, job: &str) -> Vec<String> {
    vec![
        format!("venv={}", work.join("venv").display()),
        format!("repo={}", repo.display()),
        "warmup=warmup.py".into(),
        "train=train.py 400".into(),
        format!("log={}", work.join("train.log").display()),
        "min_throughput=1".into(),
        "wait=60s".into(),
        format!("job={job}-{}", std::process::id()),
    ]
    .into_iter()
    .flat_map(|s| ["--set".to_string(), s])
    .collect()
}

/// The known-good fingerprints saved (one per machine), as JSON.
fn known_good(env: &Env) -> Vec<serde_json::Value> {
    let dir = env.state().join("fingerprints/clean-reset");
    std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap())
                .collect()
        })
        .unwrap_or_default()
}

/// (target, command) of every change, with timestamps made comparable.
fn comparable_changes(events: &[Event], which: Changes) -> Vec<(String, String)> {
    let stamp = regex::Regex::new(r"\d{8}T?\d{6}\w*|\d{10,}").unwrap();
    changes(events, which)
        .into_iter()
        .map(|(target, cmd)| (target, stamp.replace_all(&cmd, "<ts>").into_owned()))
        .collect()
}

#[test]
fn clean_reset_on_the_local_machine() {
    require_uv!();
    let env = Env::new();
    let work = env.scratch();
    let repo = demo_repo(&work);
    // Pollute: a hacked model file and a stale cache.
    std::fs::write(repo.join("train.py"), "raise SystemExit('hacked')\n").unwrap();
    let cache = work.join("inductor");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("stale.kernel"), "old").unwrap();
    // Copies earlier resets kept aside: only the newest stays beside the one this run
    // keeps (keep_last = 2), and the dry-run plans deleting the others.
    let kept = |stamp: &str| work.join(format!("inductor.runbook-kept-{stamp}"));
    let earlier = [
        kept("20240101T000000Z"),
        kept("20240201T000000Z"),
        kept("20240301T000000Z"),
    ];
    for k in &earlier {
        std::fs::create_dir_all(k).unwrap();
        std::fs::write(k.join("old.kernel"), vec![b'k'; 1024 * 1024]).unwrap();
    }
    // A job that runs for tens of seconds: the dry-run after the run must find it still
    // running, however busy the machine (400 steps end in about 3 s).
    let mut sets = demo_sets(&repo, &work, "local");
    for s in sets
        .iter_mut()
        .filter(|s| s.as_str() == "train=train.py 400")
    {
        *s = "train=train.py 4000".into();
    }
    let run = |extra: &[&str]| {
        Run::new(&env, "clean-reset")
            .env("TORCHINDUCTOR_CACHE_DIR", &cache)
            .json()
            .args(&sets)
            .args(extra)
            .run()
    };
    let dry = run(&["--dry-run"]);
    dry.assert_exit(0);
    assert!(!work.join("venv").exists(), "a dry-run builds nothing");
    let dry_events = dry.events();
    let prunes = pick!(dry_events, Event::ActionPlanned { summary, .. }
        if summary.starts_with("delete older kept copy") => summary.clone());
    assert_eq!(
        prunes,
        vec![
            format!(
                "delete older kept copy {} (1.0 MiB, 1 file)",
                earlier[0].display()
            ),
            format!(
                "delete older kept copy {} (1.0 MiB, 1 file)",
                earlier[1].display()
            ),
        ]
    );
    assert!(earlier.iter().all(|k| k.exists()));
    assert_eq!(
        std::fs::read_to_string(repo.join("train.py")).unwrap(),
        "raise SystemExit('hacked')\n"
    );

    let real = run(&["--yes"]);
    real.assert_exit(0);
    let (planned, done) = (dry.events(), real.events());
    assert_eq!(
        comparable_changes(&planned, Changes::Planned),
        comparable_changes(&done, Changes::Started),
        "the dry-run predicted the real run"
    );

    assert!(work.join("venv/bin/python").exists());
    assert!(
        std::fs::read_to_string(repo.join("train.py"))
            .unwrap()
            .contains("Ktok/s"),
        "code restored"
    );
    assert!(
        cache.join("attention.kernel").exists(),
        "the warm-up filled the cache"
    );
    assert!(
        !cache.join("stale.kernel").exists(),
        "the stale cache was set aside"
    );
    let mut left: Vec<String> = std::fs::read_dir(&work)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with("inductor.runbook-kept-"))
        .collect();
    left.sort();
    assert_eq!(left.len(), 2, "{left:?}");
    assert_eq!(left[0], "inductor.runbook-kept-20240301T000000Z");
    assert!(
        std::fs::read_to_string(work.join(&left[1]).join("stale.kernel")).unwrap() == "old",
        "the cache this run set aside is kept"
    );
    assert_eq!(known_good(&env).len(), 1, "known-good saved");
    let log = std::fs::read_to_string(work.join("train.log")).unwrap();
    assert!(log.contains("Ktok/s"), "{log}");
    // With the job running (the usual case for a recovery), a dry-run plans its stop
    // (naming its pid), says nothing about having stopped it, and plans the relaunch:
    // the job it planned to stop does not count as still running (before, the dry-run
    // failed at "relaunch training", and so did every confirmation of a real run).
    let again = run(&["--dry-run"]);
    // The whole dry-run succeeds with the job running.
    again.assert_exit(0);
    let events = again.events();
    assert!(
        events.iter().any(
            |e| matches!(e, Event::ActionPlanned { summary, .. } if summary.starts_with("start job "))
        ),
        "the relaunch is planned: {}",
        again.stdout_str()
    );
    assert!(
        events.iter().any(|e| matches!(e, Event::StepFinished {
            name,
            outcome: StepOutcome::Changed,
            ..
        } if name == "stop the training job")),
        "{}",
        again.stdout_str()
    );
    let stop = pick!(events, Event::ActionPlanned { summary, .. } => summary)
        .into_iter()
        .find(|s| s.starts_with("stop job "))
        .unwrap_or_else(|| panic!("no planned stop: {}", again.stdout_str()));
    assert!(stop.contains(" (pid "), "{stop}");
    let said = logs(&events, None);
    assert!(!said.iter().any(|m| m.starts_with("stopped")), "{said:?}");
    // The training job keeps running after the run: stop it.
    stop_job(&env, r#"target("local")"#, "local", &[]);
}

#[test]
fn clean_reset_in_a_container_behind_ssh() {
    require_sshd!();
    require_uv!();
    let fleet = Fleet::start(1);
    let ct = fleet.container(200);
    let env = Env::new();
    // The container sees the node's files except /tmp and /root: work under /var/tmp.
    let work = tempfile::Builder::new()
        .prefix("runbook-ct-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let repo = demo_repo(work.path());
    Run::new(&env, "clean-reset")
        .yes()
        .set("host", "node1")
        .set("ct", "200")
        .args(demo_sets(&repo, work.path(), "ct"))
        .ssh(&fleet)
        .expect_exit(0)
        .run();
    assert!(
        ct.join("tmp/torchinductor_root/attention.kernel").exists(),
        "the warm-up filled the container's cache"
    );
    stop_job(&env, r#"target("node1"):pct(200)"#, "ct", &fleet.args());
}

/// A recovery that fails after the caches were set aside says how to put them back, and
/// that advice works.
#[test]
fn a_failed_recovery_says_how_to_restore_the_caches() {
    require_uv!();
    let env = Env::new();
    let work = env.scratch();
    let repo = demo_repo(&work);
    let cache = work.join("inductor");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("precious.kernel"), "compiled").unwrap();
    let mut sets = demo_sets(&repo, &work, "failed");
    sets.extend(["--set".into(), format!("cache_dirs={}", cache.display())]);
    sets.extend(["--set".into(), "min_throughput=1000000000".into()]);
    let stderr = Run::new(&env, "clean-reset")
        .yes()
        .args(&sets)
        .expect_exit(1)
        .stderr_has("is below the minimum")
        .run()
        .stderr_text();
    assert!(
        !cache.join("precious.kernel").exists(),
        "the cache was set aside"
    );
    let advice = stderr
        .lines()
        .find_map(|l| l.split("to put them back: runbook ").nth(1))
        .unwrap_or_else(|| panic!("no advice in:\n{stderr}"));
    // Follow the advice as a user would paste it into a shell (runbook = this binary).
    let bin = assert_cmd::cargo::cargo_bin!("runbook");
    let restored = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("\"$0\" {advice}"))
        .arg(bin)
        .env("RUNBOOK_STATE_DIR", env.state())
        .env("RUNBOOK_LOCK_FILE", env.tmp.path().join("runbook.lock"))
        .current_dir(env.tmp.path())
        .output()
        .unwrap();
    assert!(
        restored.status.success(),
        "{advice}\n{}",
        String::from_utf8_lossy(&restored.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(cache.join("precious.kernel")).unwrap(),
        "compiled"
    );
    stop_job(&env, r#"target("local")"#, "failed", &[]);
}

/// The offline preview names no pid it does not know (it said `stopped train (pid nil)`)
/// and claims no stop: nothing was looked at, nothing was done. Nor does it report drift
/// from a known-good for values it never read (it listed every one as gone), nor guess
/// whether a known-good compile cache matches.
#[test]
fn the_offline_preview_claims_nothing() {
    let env = Env::new();
    let work = env.scratch();
    // A known-good of this target, in the layout before they were kept per machine.
    let good = env.state().join("fingerprints/clean-reset.json");
    std::fs::create_dir_all(good.parent().unwrap()).unwrap();
    std::fs::write(
        &good,
        r#"{"target": "local", "taken_at": "2026-01-01T00:00:00Z", "python": "3.12.3", "torch": "2.11.0+cu128", "git_head": "2a0e86e604195d79ba7baf4111250a28baa8d54c"}"#,
    )
    .unwrap();
    let stderr = Run::new(&env, "clean-reset")
        .dry_run()
        .offline()
        .args(demo_sets(&work.join("dflash"), &work, "offline"))
        .expect_exit(0)
        .stderr_has("stop job offline-")
        .stderr_has("--offline: nothing is read, so the drift from the known-good is not known")
        .stderr_has(
            "warm = auto: --offline reads nothing, so whether a known-good cache matches is not known: shown as compiling",
        )
        .run()
        .stderr_text();
    assert!(
        !stderr.contains("nil") && !stderr.contains("· stopped") && !stderr.contains("drift:"),
        "{stderr}"
    );
    // warm = restore with nothing to restore stops before any step changes anything.
    let out = Run::new(&env, "clean-reset")
        .dry_run()
        .offline()
        .json()
        .args(demo_sets(&work.join("dflash"), &work, "offline"))
        .set("warm", "restore")
        .run();
    out.assert_exit(1);
    assert!(
        out.step_error("fingerprint and drift").contains(
            "warm = restore: there is no artifact 'compile-cache' to restore (warm = auto compiles instead)"
        ),
        "{}",
        out.describe()
    );
    assert!(
        pick!(
            out.run_events(),
            Event::ActionPlanned {
                effect: Effect::Change,
                ..
            }
        )
        .is_empty(),
        "{}",
        out.describe()
    );
    // With one, warm = restore never clears the inductor cache: offline it plans only the
    // others.
    let kept = tempfile::Builder::new()
        .prefix("runbook-offline-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::write(kept.path().join("k"), "kernel").unwrap();
    let capture = env.write(
        "capture.lua",
        &subst(
            r#"runbook { name = "capture" }
step("capture", function() artifact.capture(target("local"), { name = "compile-cache", paths = "@kept@" }) end)
"#,
            &[("kept", &kept.path().display())],
        ),
    );
    Run::new(&env, &capture).yes().expect_exit(0).run();
    let stderr = Run::new(&env, "clean-reset")
        .dry_run()
        .offline()
        .args(demo_sets(&work.join("dflash"), &work, "offline"))
        .set("warm", "restore")
        .expect_exit(0)
        .stderr_has("warm = restore: --offline reads nothing, so the restore is decided in a run that reads the key")
        .stderr_has("move aside /root/.triton/cache")
        .run()
        .stderr_text();
    assert!(
        !stderr.contains("move aside /tmp/torchinductor_root"),
        "{stderr}"
    );
}

/// The preview names the wheel index the venv is built from: PyTorch's for `cuda`
/// (cu128 by default), none for `cuda=pypi` (uv's default index), the mirror `index_url`
/// names (for every package, with torch or without). Bad values stop the run before its
/// first step (exit 2, nothing planned), credentials in the URL without being echoed.
#[test]
fn the_preview_names_the_wheel_index() {
    let env = Env::new();
    let work = env.scratch();
    let preview = |sets: &[&str]| {
        Run::new(&env, "clean-reset")
            .dry_run()
            .offline()
            .json()
            .args(demo_sets(&work.join("dflash"), &work, "index"))
            .args(sets.iter().flat_map(|s| ["--set", s]))
            .run()
    };
    // The one build command's arguments after the verify code.
    let install = |out: &Output| -> String {
        out.assert_exit(0);
        let events = out.events();
        let builds = pick!(events, Event::ActionPlanned { command, .. }
            if command.contains(" mode=fresh ") => command.as_str());
        assert_eq!(builds.len(), 1, "{builds:?}");
        builds[0]
            .rsplit_once("' ")
            .map_or("", |(_, tail)| tail)
            .to_string()
    };
    const MIRROR: &str = "https://pypi.mirror.example/simple";
    for (sets, want) in [
        (
            vec!["torch=2.11.0"],
            "--index-url https://download.pytorch.org/whl/cu128 torch==2.11.0".to_string(),
        ),
        (
            vec!["torch=2.11.0", "cuda=cu130"],
            "--index-url https://download.pytorch.org/whl/cu130 torch==2.11.0".into(),
        ),
        (vec!["torch=2.11.0", "cuda=pypi"], "torch==2.11.0".into()),
        (
            vec!["torch=2.11.0", "cuda=cu126", &format!("index_url={MIRROR}")],
            format!("--index-url {MIRROR} torch==2.11.0"),
        ),
        (
            vec!["packages=numpy", &format!("index_url={MIRROR}")],
            format!("--index-url {MIRROR} numpy"),
        ),
        (vec!["packages=numpy"], "numpy".into()),
    ] {
        assert_eq!(install(&preview(&sets)), want, "{sets:?}");
    }
    for (set, want) in [
        (
            "cuda=cu12",
            r#"torch.index: cuda: give a CUDA build like "cu128" (cu + 3 digits), "cpu", or "pypi" (the default index, no --index-url), got "cu12""#,
        ),
        (
            "index_url=pypi.mirror.example/simple",
            r#"torch.index: index_url must be an http://, https:// or file:/// URL of a package index"#,
        ),
        (
            "index_url=https://ci:hunter2@pypi.mirror.example/simple",
            "torch.index: index_url carries credentials (user:password@host)",
        ),
    ] {
        let out = preview(&["torch=2.11.0", set]);
        let stderr = out.stderr_str();
        assert_eq!(out.status.code(), Some(2), "{set}: {stderr}");
        assert!(
            stderr.contains("clean-reset.lua:") && stderr.contains(want),
            "{set}: {stderr}"
        );
        let stdout = out.stdout_str();
        assert!(
            !stdout.contains("step_started") && !stdout.contains("hunter2"),
            "{set}: {stdout}"
        );
        assert!(!stderr.contains("hunter2"), "{stderr}");
    }
}

/// The manifests in the default store, as JSON.
fn manifests(env: &Env) -> Vec<serde_json::Value> {
    let dir = env.state().join("artifacts/manifests");
    std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap())
                .collect()
        })
        .unwrap_or_default()
}

/// File name → content of each file in `dir`.
fn files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// warm = "auto" (the default), end to end on the demo project. The first recovery finds
/// no known-good cache, compiles, and once the throughput check passed captures what it
/// compiled: the manifest holds the throughput the check measured and the machine it
/// came from, the known-good fingerprint names the artifact. The next recovery, on a
/// polluted cache, restores that artifact instead of compiling (the warm-up compiles
/// nothing), captures nothing new, and its preview said so beforehand, with the key it
/// compared. Once the code's HEAD moves the key differs: warm = "restore" fails naming
/// the field, warm = "auto" compiles again and captures the new cache.
#[test]
fn warm_auto_restores_the_known_good_cache_where_the_key_matches() {
    require_uv!();
    let env = Env::new();
    let work = env.scratch();
    let repo = demo_repo(&work);
    let cache = work.join("inductor");
    let mut sets = demo_sets(&repo, &work, "warm");
    sets.extend(["--set".into(), format!("cache_dirs={}", cache.display())]);
    let run = |extra: &[&str]| {
        Run::new(&env, "clean-reset")
            .json()
            .args(&sets)
            .args(extra)
            .run()
    };
    let said = |out: &Output, start: &str| -> Vec<String> {
        out.logs()
            .into_iter()
            .filter(|l| l.starts_with(start))
            .collect()
    };

    // The first preview, with no cache yet: the warm-up makes it, the capture is planned.
    let preview = run(&["--dry-run"]);
    preview.assert_exit(0);
    assert!(
        pick!(preview.run_events(), Event::ActionPlanned { summary, .. } => summary.clone())
            .iter()
            .any(|s| *s
                == format!(
                    "pack {} into artifact 'compile-cache' in {}",
                    cache.display(),
                    env.state().join("artifacts").display()
                )),
        "{}",
        preview.describe()
    );
    assert!(!cache.exists());
    let first = run(&["--yes"]);
    first.assert_exit(0);
    assert_eq!(
        comparable_changes(&preview.events(), Changes::Planned),
        comparable_changes(&first.events(), Changes::Started),
        "the first dry-run predicted the first run"
    );
    let why = said(&first, "artifact.restore: ");
    assert!(
        why.len() == 1 && why[0].contains("no artifact 'compile-cache'"),
        "{why:?}"
    );
    assert_eq!(
        said(&first, "warm = auto: "),
        vec!["warm = auto: no known-good compile cache to restore: clearing the caches and compiling"]
    );
    let all = manifests(&env);
    assert_eq!(all.len(), 1, "captured once the gate passed");
    let m = &all[0];
    let id = m["id"].as_str().unwrap().to_string();
    let line = said(&first, "throughput ");
    let logged: f64 = line[0]
        .strip_prefix("throughput ")
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line:?}"));
    let recorded = m["throughput"].as_f64().expect("throughput recorded");
    assert!((recorded - logged).abs() < 0.051, "{recorded} vs {logged}");
    let machine_id = std::fs::read_to_string("/etc/machine-id").unwrap();
    assert_eq!(m["source"], "local");
    assert_eq!(m["source_identity"]["machine_id"], machine_id.trim());
    let head = git(&repo, &["rev-parse", "HEAD"]);
    assert_eq!(m["key"]["git_head"], head.trim());
    assert_eq!(known_good(&env)[0]["artifact"], id.as_str());
    let compiled = files(&cache);
    assert_eq!(compiled.len(), 8, "{:?}", compiled.keys());

    // A polluted cache: the next recovery puts the known-good back. (The job is stopped
    // first, so that the dry-run and the run find it the same way.)
    stop_job(&env, r#"target("local")"#, "warm", &[]);
    std::fs::remove_dir_all(&cache).unwrap();
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("attention.kernel"), "stale").unwrap();
    let dry = run(&["--dry-run"]);
    dry.assert_exit(0);
    assert_eq!(
        said(&dry, "warm = auto: restoring known-good artifact "),
        vec![format!(
            "warm = auto: restoring known-good artifact {id}: the warm-up should find it warm"
        )]
    );
    let compared = dry
        .logs()
        .into_iter()
        .find(|l| l.contains("matches the key here"))
        .unwrap_or_else(|| panic!("no key comparison: {:?}", dry.logs()));
    assert!(
        compared.contains(&format!("git_head = {} ✓", head.trim())),
        "{compared}"
    );
    let planned: Vec<String> =
        pick!(dry.run_events(), Event::ActionPlanned { summary, .. } => summary.clone());
    assert!(
        planned
            .iter()
            .any(|s| s.starts_with(&format!("restore {} from artifact {id}", cache.display()))),
        "{planned:?}"
    );
    assert!(
        !planned.iter().any(|s| s.starts_with("pack ")),
        "nothing to capture: {planned:?}"
    );
    let real = run(&["--yes"]);
    real.assert_exit(0);
    assert_eq!(
        comparable_changes(&dry.events(), Changes::Planned),
        comparable_changes(&real.events(), Changes::Started),
        "the dry-run predicted the real run"
    );
    let warmup: Vec<String> = real
        .output_lines()
        .into_iter()
        .filter(|l| l.starts_with("cached ") || l.starts_with("compiled "))
        .collect();
    assert_eq!(warmup.len(), 8, "{warmup:?}");
    assert!(
        warmup.iter().all(|l| l.starts_with("cached ")),
        "the warm-up compiled nothing: {warmup:?}"
    );
    assert_eq!(
        files(&cache),
        compiled,
        "the known-good cache, byte for byte"
    );
    assert_eq!(manifests(&env).len(), 1, "no second capture");
    assert_eq!(known_good(&env)[0]["artifact"], id.as_str());

    // The code moves on: its HEAD is part of the key.
    std::fs::write(repo.join("NOTES"), "tuned\n").unwrap();
    git(&repo, &["add", "NOTES"]);
    git(&repo, &["commit", "-qm", "tuned"]);
    let moved = git(&repo, &["rev-parse", "HEAD"]);
    let refused = run(&["--yes", "--set", "warm=restore"]);
    refused.assert_exit(1);
    let want = format!(
        "git_head: {} (artifact) ≠ {} (here)",
        head.trim(),
        moved.trim()
    );
    let error = refused.step_error("restore or clear the compile caches (kept aside)");
    assert!(
        error.contains(&want) && error.contains("require = true"),
        "{error}"
    );
    let again = run(&["--yes"]);
    again.assert_exit(0);
    let why = said(&again, "artifact.restore: the key here differs");
    assert!(why.len() == 1 && why[0].contains(&want), "{why:?}");
    assert!(
        said(
            &again,
            "warm = auto: no known-good compile cache to restore"
        )
        .len()
            == 1,
        "{:?}",
        again.logs()
    );
    assert_eq!(manifests(&env).len(), 2, "the new cache captured");
    stop_job(&env, r#"target("local")"#, "warm", &[]);
}

/// warm-cache --set capture=true keeps the cache it warmed as the artifact clean-reset
/// restores: given the venv and repo clean-reset gets, the key it reads is the one
/// clean-reset reads after rebuilding the venv, so the next recovery restores that cache
/// instead of compiling, and captures nothing new.
#[test]
fn a_cache_warm_cache_captured_is_what_clean_reset_restores() {
    require_uv!();
    let env = Env::new();
    let work = env.scratch();
    let repo = demo_repo(&work);
    let cache = work.join("inductor");
    let venv = work.join("venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    Run::new(&env, "warm-cache")
        .yes()
        .set("venv", &venv)
        .set("script", repo.join("warmup.py"))
        .set("cache_dirs", &cache)
        .set("repo", &repo)
        .set("capture", "true")
        .expect_exit(0)
        .stderr_has("captured artifact ")
        .run();
    let all = manifests(&env);
    assert_eq!(all.len(), 1);
    let id = all[0]["id"].as_str().unwrap().to_string();
    let warmed = files(&cache);
    std::fs::remove_dir_all(&cache).unwrap();

    let mut sets = demo_sets(&repo, &work, "captured");
    sets.extend(["--set".into(), format!("cache_dirs={}", cache.display())]);
    let out = Run::new(&env, "clean-reset").json().yes().args(&sets).run();
    out.assert_exit(0);
    assert!(
        out.logs().contains(&format!(
            "warm = auto: restoring known-good artifact {id}: the warm-up should find it warm"
        )),
        "{:?}",
        out.logs()
    );
    assert!(
        !out.output_lines()
            .iter()
            .any(|l| l.starts_with("compiled ")),
        "{:?}",
        out.output_lines()
    );
    assert_eq!(files(&cache), warmed);
    assert_eq!(manifests(&env).len(), 1, "nothing captured again");
    assert_eq!(known_good(&env)[0]["artifact"], id.as_str());
    stop_job(&env, r#"target("local")"#, "captured", &[]);
}

/// Two hosts behind real sshd, each a machine of its own (machine id, host key), node2
/// with other GPUs: a recovery on node1 saves node1's known-good; node2's preview finds
/// none for its machine instead of node1's (before, it diffed node1's and warned of a GPU
/// change node2 never had), while node1's finds its own, unchanged, naming its artifact.
#[test]
fn a_second_host_is_not_compared_with_the_first_ones_known_good() {
    require_sshd!();
    require_uv!();
    let mut fleet = Fleet::start_machines(2);
    fleet
        .node("node2")
        .set_env(&[("NVIDIA_SMI_FIXTURE", "a100x4")]);
    let env = Env::new();
    // Under /var/tmp, a cache root, and apart from other tests' /tmp caches.
    let work = tempfile::Builder::new()
        .prefix("runbook-hosts-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let repo = demo_repo(work.path());
    let mut sets = demo_sets(&repo, work.path(), "hosts");
    let cache = work.path().join("inductor");
    sets.extend(["--set".into(), format!("cache_dirs={}", cache.display())]);
    Run::new(&env, "clean-reset")
        .yes()
        .set("host", "node1")
        .args(&sets)
        .ssh(&fleet)
        .expect_exit(0)
        .run();
    stop_job(&env, r#"target("node1")"#, "hosts", &fleet.args());
    let saved = known_good(&env);
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0]["target"], "node1");
    assert_eq!(saved[0]["gpus"][0], "NVIDIA H200");
    let preview = |host: &str| {
        let out = Run::new(&env, "clean-reset")
            .dry_run()
            .json()
            .set("host", host)
            .args(&sets)
            .ssh(&fleet)
            .run();
        out.assert_exit(0);
        out.logs()
    };
    let node2 = preview("node2");
    assert!(
        node2.contains(
            &"no known-good fingerprint 'clean-reset' for this machine yet: this run will save one"
                .to_string()
        ),
        "{node2:?}"
    );
    assert!(!node2.iter().any(|l| l.starts_with("drift:")), "{node2:?}");
    let node1 = preview("node1");
    assert!(
        node1.contains(&"nothing changed since the known-good environment".to_string()),
        "{node1:?}"
    );
    let artifact = saved[0]["artifact"].as_str().expect("names its artifact");
    assert!(
        node1.contains(&format!(
            "the known-good's compile cache is artifact {artifact}"
        )),
        "{node1:?}"
    );
}

/// The README's two commands pass on a busy machine (issue 33 item 7): while another
/// runbook holds its locks on this machine (mid-change, its locks where runbook keeps
/// them by itself, not in a test's lock file), the quickstart and the main command
/// (clean-reset with examples/train/params.toml, its paths moved into the test's own
/// directory) run to the end. Locks are scoped: the machine shared, each runbook its
/// own; a second run of the busy runbook itself is refused, naming the first.
#[test]
fn the_readme_commands_pass_beside_another_run() {
    require_uv!();
    let env = Env::new();
    let work = env.scratch();
    let repo = demo_repo(&work);
    let runtime = env.tmp.path().join("xdg-runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    let (ready, release) = (work.join("ready"), work.join("release"));
    let busy = env.write(
        "busy.lua",
        &subst(
            r#"runbook { name = "busy" }
step("hold", function()
  target("local"):exec({ "sh", "-c", 'touch "$1"; while [ ! -e "$2" ]; do sleep 0.1; done', "sh", "@ready@", "@release@" })
end)
"#,
            &[("ready", &ready.display()), ("release", &release.display())],
        ),
    );
    // Locks in runbook's own directory (under this XDG_RUNTIME_DIR), as outside tests.
    fn own_locks<'e>(run: Run<'e>, runtime: &Path) -> Run<'e> {
        run.env_remove("RUNBOOK_LOCK_FILE")
            .env("XDG_RUNTIME_DIR", runtime)
    }
    let mut holder = own_locks(Run::new(&env, &busy).yes(), &runtime).spawn();
    holder.wait_file(&ready, std::time::Duration::from_secs(20));

    let again = own_locks(Run::new(&env, &busy).yes(), &runtime).run();
    again.assert_exit(1);
    assert!(
        again.step_error("hold").contains("is locked by run"),
        "the busy run holds its lock: {}",
        again.describe()
    );
    own_locks(
        Run::new(&env, repo_path("examples/quickstart.lua")),
        &runtime,
    )
    .yes()
    .set("dir", work.join("quickstart"))
    .expect_exit(0)
    .run();
    let mut main = own_locks(Run::new(&env, "clean-reset"), &runtime)
        .arg("--params")
        .arg(repo_path("examples/train/params.toml"))
        .yes()
        .args(demo_sets(&repo, &work, "busy-readme"));
    for (k, v) in [
        ("code_paths", ".".to_string()),
        ("cache_dirs", work.join("inductor").display().to_string()),
    ] {
        main = main.set(k, v);
    }
    let out = main.run();
    out.assert_exit(0);
    stop_job(&env, r#"target("local")"#, "busy-readme", &[]);
    std::fs::write(&release, "").unwrap();
    assert_eq!(holder.code(std::time::Duration::from_secs(20)), 0);
}

fn repo_path(rel: &str) -> std::path::PathBuf {
    repo().join(rel)
}
