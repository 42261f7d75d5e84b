//! Containers that are real: a busybox-only LXC container (what an Alpine CT looks like),
//! created and started by this harness, reached through `tests/bin/lxc/pct`, which does
//! what Proxmox's `pct exec` does (`lxc-attach --keep-env`, or `--clear-env` as PVE 9).
//! The unshare double in `tests/bin/pct` stays for the SSH tests, where a container
//! behind a test sshd needs no LXC; this file is where runbook meets a real container's
//! PID namespace and busybox userland.
//!
//! Without LXC (`lxc-create` missing, or a container that cannot start) the tests skip
//! with a message, unless `RUNBOOK_REQUIRE_LXC=1` (scripts/test sets it): then they fail.

mod common;
use common::*;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The container's name, which is its VMID, as on Proxmox.
const VMID: &str = "931";

/// Runs a command of the harness's own, its stdout on success.
fn sh(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Makes the container if it is not there, starts it if it is not running, and waits
/// until a command runs in it.
fn make_and_start() -> Result<(), String> {
    if sh(&["lxc-info", "-n", VMID, "-s", "-H"]).is_err() {
        sh(&["lxc-create", "-n", VMID, "-t", "busybox"])?;
        // No network: the tests need none, and this machine has no bridge.
        let config = PathBuf::from(format!("/var/lib/lxc/{VMID}/config"));
        let text = std::fs::read_to_string(&config).map_err(|e| e.to_string())?;
        let text: String = text
            .lines()
            .filter(|l| !l.starts_with("lxc.net.0."))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
            + "lxc.net.0.type = empty\n";
        std::fs::write(&config, text).map_err(|e| e.to_string())?;
    }
    if sh(&["lxc-info", "-n", VMID, "-s", "-H"])? != "RUNNING" {
        sh(&["lxc-start", "-n", VMID, "-d"])?;
    }
    let t0 = Instant::now();
    while sh(&["lxc-attach", "-n", VMID, "--", "true"]).is_err() {
        if t0.elapsed() > Duration::from_secs(20) {
            return Err(format!("container {VMID} did not come up"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// Creates (once per machine) and starts the busybox container; `None` when LXC is not
/// there and not required.
fn container() -> Option<&'static str> {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        make_and_start().or_else(|first| {
            // A container left half-stopped by an earlier run (its processes killed with
            // the session that started them) is made again, once.
            let _ = sh(&["lxc-stop", "-n", VMID, "-k"]);
            let _ = sh(&["lxc-destroy", "-n", VMID, "-f"]);
            make_and_start().map_err(|again| format!("{first}; made again: {again}"))
        })
    });
    match ready {
        Ok(()) => Some(VMID),
        Err(why) if std::env::var("RUNBOOK_REQUIRE_LXC").as_deref() == Ok("1") => {
            panic!("LXC is required here (RUNBOOK_REQUIRE_LXC=1) but: {why}")
        }
        Err(why) => {
            eprintln!("skipped: no LXC container ({why})");
            None
        }
    }
}

/// Runs `body` (steps using `box`, the container as a target) with the real-LXC `pct`
/// first on PATH; `env_mode` is `keep` (PVE 8) or `clear` (PVE 9).
fn run(env: &Env, body: &str, env_mode: &str) -> std::process::Output {
    let rb = env.write(
        "ct.lua",
        &format!(
            "runbook {{ name = \"real-ct\" }}\nlocal box = target(\"local\"):pct({VMID})\n{body}"
        ),
    );
    let path = format!(
        "{}:{}",
        repo().join("tests/bin/lxc").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    env.cmd()
        .args(["run", rb.to_str().unwrap(), "--yes", "--json"])
        .env("PATH", path)
        .env("PCT_ENV", env_mode)
        .timeout(Duration::from_secs(90))
        .output()
        .unwrap()
}

fn describe(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstderr: {}\nstdout: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    )
}

/// Inside the container, as root, with nothing but busybox.
fn inside(script: &str) -> String {
    let out = Command::new("lxc-attach")
        .args(["-n", VMID, "--", "sh", "-c", script])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Every command works in a busybox-only container (before: `setsid -w`, which busybox
/// lacks, failed every one), with argv, env, cwd, stdin and exit codes intact, under both
/// of Proxmox's env modes.
#[test]
fn commands_run_in_a_busybox_container_under_both_env_modes() {
    let Some(_) = container() else { return };
    for mode in ["keep", "clear"] {
        let env = Env::new();
        let out = run(
            &env,
            r#"step("in the container", function()
  local r = box:exec({ "sh", "-c", 'cat /proc/1/comm; pwd; printf "%s|%s|" "$X" "$1"; cat', "sh", "a b" },
                     { env = { X = "x y\nz" }, cwd = "/tmp", stdin = "in", read_only = true })
  if r.stdout ~= "init\n/tmp\nx y\nz|a b|in" then fail("got " .. r.stdout) end
  local bad = box:exec({ "sh", "-c", "exit 7" }, { check = false, read_only = true })
  if bad.code ~= 7 then fail("exit code " .. tostring(bad.code)) end
end)
"#,
            mode,
        );
        assert!(out.status.success(), "{mode}: {}", describe(&out));
    }
}

/// A step timeout kills the command's whole tree inside the container, a part that
/// ignores TERM included, within the kill grace; seen from the container's own PID
/// namespace.
#[test]
fn a_timeout_kills_the_tree_inside_the_container() {
    let Some(_) = container() else { return };
    let env = Env::new();
    let started = Instant::now();
    let out = run(
        &env,
        r#"step("stuck", { timeout = "2s" }, function()
  box:exec({ "sh", "-c", "trap '' TERM; sleep 311 & sleep 311" }, { read_only = true })
end)
"#,
        "keep",
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        inside("ps | grep -c '[s]leep 311'"),
        "0",
        "the tree is gone inside the container"
    );
}

/// Debian's busybox has no `flock` applet (Alpine's has one): in such a container
/// runbook cannot take its run lock, so a change fails before anything changed, saying
/// what it needs. (Jobs, cache clears and the other changing primitives are tested in
/// containers that have flock: the SSH tests' double, and a Debian container to come.)
#[test]
fn a_change_where_flock_is_missing_fails_before_changing_anything() {
    let Some(_) = container() else { return };
    inside("rm -f /tmp/made-by-runbook");
    let env = Env::new();
    let out = run(
        &env,
        r#"step("change", function() box:exec({ "touch", "/tmp/made-by-runbook" }) end)
"#,
        "keep",
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("cannot take the run lock on local/ct931: needs flock for the run lock"),
        "{}",
        describe(&out)
    );
    assert_eq!(
        inside("ls /tmp/made-by-runbook 2>/dev/null | wc -l"),
        "0",
        "nothing changed"
    );
}

/// Reads need no lock: `cache.size` measures inside the container with busybox's find
/// and stat (no GNU `-printf`).
#[test]
fn reads_work_with_busybox_inside_the_container() {
    let Some(_) = container() else { return };
    inside("rm -rf /tmp/torchinductor_root; mkdir -p /tmp/torchinductor_root/a; printf 12345 > /tmp/torchinductor_root/a/k; printf 123 > /tmp/torchinductor_root/j");
    let env = Env::new();
    let out = run(
        &env,
        r#"step("measure", function()
  local s = cache.size(box, { "/tmp/torchinductor_root" })
  if s[1].bytes ~= 8 or s[1].files ~= 2 then fail(("got %s bytes, %s files"):format(s[1].bytes, s[1].files)) end
end)
"#,
        "keep",
    );
    assert!(out.status.success(), "{}", describe(&out));
}
