//! `disk.free` (POSIX `df -P -k` on the target) and the room check the shipped venv
//! runbooks make with it (`torch.venv_room`): on this machine, over SSH and inside a
//! container, in a dry-run and offline, and its failures.
use crate::common::sshd::Fleet;
use crate::common::*;
use std::path::{Path, PathBuf};

/// `df -P -k DIR` here, as (total, available) bytes: what runbook must agree with.
fn df(dir: &Path) -> (u64, u64) {
    let out = std::process::Command::new("df")
        .args(["-P", "-k"])
        .arg(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let words: Vec<&str> = text.lines().last().unwrap().split_whitespace().collect();
    let at = words.iter().rposition(|w| w.ends_with('%')).unwrap();
    let kib = |i: usize| words[i].parse::<u64>().unwrap() * 1024;
    (kib(at - 3), kib(at - 1))
}

fn runbook(env: &Env, body: &str) -> PathBuf {
    env.write(
        "disk.lua",
        &subst(
            r#"runbook { name = "disk" }
@body@"#,
            &[("body", &body)],
        ),
    )
}

/// A path that exists, one that does not yet (its nearest existing parent is measured),
/// and `~/…`: the figures are df's for that filesystem.
#[test]
fn free_measures_the_filesystem_under_a_path() {
    let env = Env::new();
    let dir = env.scratch();
    std::fs::create_dir_all(dir.join("home/work")).unwrap();
    let rb = env.write(
        "disk.lua",
        r#"
runbook { name = "disk", params = { dir = { type = "path", required = true } } }
step("measure", function()
  local here = target("local")
  for _, p in ipairs({ params.dir, params.dir .. "/not/yet/venv", "~/work/new" }) do
    local d = disk.free(here, p)
    log.info(("%s|%d|%d"):format(d.path, d.bytes_total, d.bytes_free))
  end
end)
"#,
    );
    let out = Run::new(&env, &rb)
        .set("dir", &dir)
        .env("HOME", dir.join("home"))
        .yes()
        .json()
        .expect_exit(0)
        .run();
    let logs = out.logs();
    let (total, free) = df(&dir);
    let want = [
        dir.display().to_string(),
        dir.display().to_string(),
        dir.join("home/work").display().to_string(),
    ];
    assert_eq!(logs.len(), 3, "{logs:?}");
    for (line, path) in logs.iter().zip(want) {
        let parts: Vec<&str> = line.split('|').collect();
        assert_eq!(parts[0], path, "{line}");
        assert_eq!(parts[1].parse::<u64>().unwrap(), total, "{line}");
        // Others write to this disk meanwhile: the same figure within 1 GiB.
        let got: u64 = parts[2].parse().unwrap();
        assert!(got.abs_diff(free) < 1 << 30, "{line}: df says {free} free");
    }
}

/// A read: a dry-run measures for real; offline it is only planned and says so.
#[test]
fn dry_run_measures_and_offline_plans() {
    let env = Env::new();
    let rb = runbook(
        &env,
        r#"
step("measure", function()
  local d = disk.free(target("local"), "/")
  log.info("planned=" .. tostring(d.planned) .. " total=" .. tostring(d.bytes_total ~= nil))
end)
"#,
    );
    let out = Run::new(&env, &rb).dry_run().json().expect_exit(0).run();
    assert!(
        out.logs().contains(&"planned=nil total=true".to_string()),
        "{:?}",
        out.logs()
    );
    let out = Run::new(&env, &rb)
        .dry_run()
        .offline()
        .expect_exit(0)
        .stderr_has("  ? on local: measure the free space under /\n")
        .run();
    assert!(
        out.stderr_text().contains("planned=true total=false"),
        "{}",
        out.stderr_text()
    );
}

#[test]
fn bad_paths_fail_at_the_line() {
    let cases = [
        (
            "\"relative/dir\"",
            "disk.free(): give an absolute path or one under ~/, not \"relative/dir\"",
        ),
        (
            "nil",
            "disk.free(): give a path, e.g. disk.free(t, \"/opt/venvs\")",
        ),
    ];
    for (arg, expected) in cases {
        let env = Env::new();
        let rb = runbook(
            &env,
            &format!("step(\"measure\", function()\n  disk.free(target(\"local\"), {arg})\nend)\n"),
        );
        let err = Run::new(&env, &rb)
            .yes()
            .json()
            .expect_exit(1)
            .run()
            .step_error(FAILED);
        assert!(err.contains("disk.lua:3:"), "{arg}: {err}");
        assert!(err.contains(expected), "{arg}: {err}");
    }
}

/// A target without `df` (a minimal image): the step fails naming the target and what is
/// missing, rather than reporting no room.
#[test]
fn no_df_fails_naming_the_target() {
    let env = Env::new();
    let bin = env.scratch();
    std::os::unix::fs::symlink(which("sh"), bin.join("sh")).unwrap();
    let rb = runbook(
        &env,
        "step(\"measure\", function()\n  disk.free(target(\"local\"), \"/\")\nend)\n",
    );
    let err = Run::new(&env, &rb)
        .env("PATH", &bin)
        .yes()
        .json()
        .expect_exit(1)
        .run()
        .step_error(FAILED);
    assert!(err.contains("disk.free(/) failed"), "{err}");
    assert!(err.contains("on local"), "{err}");
    assert!(
        err.contains("needs df (to measure free disk space)"),
        "{err}"
    );
}

fn which(program: &str) -> PathBuf {
    let out = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .unwrap();
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Over SSH and inside a container on that node (the pct double runs the command on the
/// node): the same script, the node's disk.
#[test]
fn free_over_ssh_and_inside_a_container() {
    require_sshd!();
    let fleet = Fleet::start(1);
    fleet.container(200);
    let env = Env::new();
    let rb = runbook(
        &env,
        r#"
step("measure", function()
  for _, t in ipairs({ target("node1"), target("node1"):pct(200) }) do
    local d = disk.free(t, "/tmp/runbook-disk-test-absent/venv")
    log.info(("%s %s %s"):format(t.name, d.path, tostring(d.bytes_total > 0 and d.bytes_free <= d.bytes_total)))
  end
end)
"#,
    );
    let out = Run::new(&env, &rb)
        .ssh(&fleet)
        .yes()
        .json()
        .expect_exit(0)
        .run();
    let logs = out.logs();
    assert!(logs.contains(&"node1 /tmp true".to_string()), "{logs:?}");
    assert!(
        logs.contains(&"node1/ct200 /tmp true".to_string()),
        "{logs:?}"
    );
}

/// venv-rebuild refuses before it builds anything when the disk cannot hold the new venv,
/// in a dry-run and in a real run, and names what is free and what is needed.
#[test]
fn venv_rebuild_refuses_a_disk_too_small() {
    let env = Env::new();
    let dir = env.scratch();
    let venv = dir.join("venv");
    for dry in [true, false] {
        let mut run = Run::cmd(&env, ["run", "venv-rebuild", "--json"])
            .set("venv", &venv)
            .set("torch", "2.11.0")
            .set("min_free_gb", "1000000");
        run = if dry { run.dry_run() } else { run.yes() };
        let out = run.expect_exit(1).run();
        let err = out.step_error(FAILED);
        assert!(err.contains("torch.venv_room: local:"), "{err}");
        assert!(
            err.contains(&format!(
                "GB free under {}, a new venv at {} needs 1e+06 GB (torch cu128 is ~6 GB)",
                dir.display(),
                venv.display()
            )),
            "{err}"
        );
        assert!(!venv.exists(), "nothing was built");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "no new venv beside it"
        );
    }
}

/// clean-reset checks the room in its first step, before the training job is stopped.
#[test]
fn clean_reset_refuses_before_it_stops_the_job() {
    let env = Env::new();
    let dir = env.scratch();
    let out = Run::cmd(&env, ["run", "clean-reset", "--json"])
        .set("venv", dir.join("venv"))
        .set("repo", dir.join("repo"))
        .set("warmup", "warm.py")
        .set("train", "train.py")
        .set("log", dir.join("train.log"))
        .set("min_free_gb", "1000000")
        .yes()
        .expect_exit(1)
        .run();
    let err = out.step_error("fingerprint and drift");
    assert!(err.contains("needs 1e+06 GB (no torch)"), "{err}");
    assert!(
        out.step_errors().lines().count() == 1,
        "only the first step failed: {}",
        out.step_errors()
    );
}
