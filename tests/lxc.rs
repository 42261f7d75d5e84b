//! Commands in real LXC containers (common/lxc.rs makes them): busybox only (931),
//! busybox with util-linux's flock and setsid (932), Debian minbase (933) and Debian with
//! python3 and git (934), reached through `tests/bin/lxc/pct`, which does what Proxmox's
//! `pct exec` does (`lxc-attach --keep-env`, or `--clear-env` as PVE 9). Each test runs in
//! every container (`NAME::busybox`, `NAME::busybox_util`, `NAME::minbase`,
//! `NAME::debian`): argv, env, cwd, stdin and exit codes under both env modes; a timeout
//! and Ctrl-C killing the whole tree inside the container's PID namespace, a part that
//! ignores SIGTERM included; the run lock where flock is missing (a directory); and a real container
//! behind the test sshd. The primitives are in lxc_primitives.rs.

use crate::common::lxc::{self, Ct, EnvMode, Kind};
use crate::common::*;
use std::time::{Duration, Instant};

/// A number no other test's `sleep` uses, so a process scan finds this test's own.
fn unique_sleep() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    100_000 + (nanos / 7 + std::process::id() * 131) % 800_000
}

// Every command works in every container (before: `setsid -w`, which busybox lacks,
// failed every one in a busybox container), with argv, env, cwd, stdin and exit codes
// intact, under both of Proxmox's env modes; runbook's own environment reaches the
// command in keep mode only.
in_containers!(commands_run_under_both_env_modes, |ct: &Ct| {
    for mode in [EnvMode::Keep, EnvMode::Clear] {
        let env = Env::new();
        let dir = ct.dir();
        let body = subst(
            r#"step("in the container", function()
  local r = box:exec({ "sh", "-c", 'cat /proc/sys/kernel/hostname; pwd; printf "%s|%s|%s|" "$X" "$1" "${RBT_OUTER-unset}"; cat', "sh", "a b" },
                     { env = { X = "x y\nz" }, cwd = "@cwd@", stdin = "in", read_only = true })
  local want = "@vmid@\n@cwd@\nx y\nz|a b|@outer@|in"
  if r.stdout ~= want then fail("got " .. r.stdout .. " want " .. want) end
  local bad = box:exec({ "sh", "-c", "exit 7" }, { check = false, read_only = true })
  if bad.code ~= 7 then fail("exit code " .. tostring(bad.code)) end
  local sh = box:shell("echo $((6 * 7)) | tr 4 x", { read_only = true })
  if sh.stdout ~= "x2\n" then fail("shell: " .. sh.stdout) end
end)
"#,
            &[
                ("cwd", &dir.path),
                ("vmid", &ct.vmid),
                (
                    "outer",
                    &if mode == EnvMode::Keep {
                        "outer"
                    } else {
                        "unset"
                    },
                ),
            ],
        );
        let rb = env.write(
            "ct.lua",
            &subst(
                r#"runbook { name = "real-ct" }
local box = @ct@
@body@"#,
                &[("ct", &ct.lua()), ("body", &body)],
            ),
        );
        lxc::on_ct(Run::new(&env, rb), &dir, mode, &[])
            .env("RBT_OUTER", "outer")
            .yes()
            .json()
            .expect_exit(0)
            .run();
    }
});

/// `sh -c` whose whole tree ignores SIGTERM (the trap is inherited), both of its
/// `sleep`s named by `n`.
fn stubborn_tree(n: u32) -> String {
    subst(
        r#"{ "sh", "-c", "trap '' TERM; sleep @n@ & sleep @n@" }"#,
        &[("n", &n)],
    )
}

/// Waits until `count` processes inside the container have `needle` in their command
/// line.
fn wait_processes(ct: &Ct, needle: &str, count: usize, limit: Duration) {
    let t0 = Instant::now();
    while ct.processes(needle).len() < count {
        assert!(
            t0.elapsed() < limit,
            "{needle}: only {:?} after {limit:?}",
            ct.processes(needle)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until nothing inside the container has `needle` in its command line.
fn gone_inside(ct: &Ct, needle: &str, limit: Duration) -> Vec<String> {
    let t0 = Instant::now();
    loop {
        let left = ct.processes(needle);
        if left.is_empty() || t0.elapsed() > limit {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

// A step timeout kills the command's whole tree inside the container, seen from the
// container's own PID namespace: TERM first, and KILL after the 2 s grace for the parts
// that ignore TERM (the issue saw such a tree survive in a busybox container with
// util-linux's setsid: 932 is that container, and it is killed there too).
in_containers!(
    a_timeout_kills_the_tree_term_ignorers_after_the_grace,
    |ct: &Ct| {
        let env = Env::new();
        let dir = ct.dir();
        let n = unique_sleep();
        dir.kill_on_drop(&format!("sleep {n}"));
        let started = Instant::now();
        let out = lxc::run(
            &env,
            &dir,
            EnvMode::Keep,
            &subst(
                r#"step("stuck", { timeout = "2s" }, function()
  box:exec(@tree@, { read_only = true })
end)
"#,
                &[("tree", &stubborn_tree(n))],
            ),
            &[],
        );
        let took = started.elapsed();
        assert_eq!(out.status.code(), Some(1), "{}", out.describe());
        assert!(
            out.step_error(FAILED).contains("timed out"),
            "{}",
            out.describe()
        );
        // The KILL comes after the grace: before it the TERM-ignoring tree still stood.
        assert!(
            took >= Duration::from_secs(4) && took < Duration::from_secs(20),
            "took {took:?}"
        );
        let left = gone_inside(ct, &format!("sleep {n}"), Duration::from_secs(3));
        assert!(left.is_empty(), "left running in the container: {left:?}");
    }
);

// Ctrl-C (SIGINT to runbook) stops the tree inside the container the same way, and the
// run exits 130.
in_containers!(ctrl_c_kills_the_tree_inside_the_container, |ct: &Ct| {
    let env = Env::new();
    let dir = ct.dir();
    let n = unique_sleep();
    dir.kill_on_drop(&format!("sleep {n}"));
    let rb = env.write(
        "ct.lua",
        &subst(
            r#"runbook { name = "real-ct" }
local box = @ct@
step("stuck", function()
  box:exec(@tree@, { read_only = true })
end)
"#,
            &[("ct", &ct.lua()), ("tree", &stubborn_tree(n))],
        ),
    );
    let mut run = lxc::on_ct(Run::new(&env, rb), &dir, EnvMode::Clear, &[])
        .yes()
        .spawn();
    wait_processes(ct, &format!("sleep {n}"), 2, Duration::from_secs(20));
    run.signal(libc::SIGINT);
    // It ends within 20 s of SIGINT.
    assert_eq!(run.code(Duration::from_secs(20)), 130, "{}", run.output());
    let left = gone_inside(ct, &format!("sleep {n}"), Duration::from_secs(3));
    assert!(left.is_empty(), "left running in the container: {left:?}");
});

/// Debian's busybox has no `flock` applet (Alpine's has one). In such a container the
/// run lock is a directory made by the atomic `mkdir` (before: every change was refused,
/// "needs flock"): a change runs; a second run of the runbook meets the first one's lock
/// (refused at `--lock-wait 0` naming it, and let in once it ends when it waits); a lock
/// whose owner was killed outright (SIGKILL: it could not clean up) is stale, and the
/// next run takes it over.
#[test]
fn where_flock_is_missing_the_run_lock_is_a_directory() {
    let Some(ct) = lxc::container(Kind::Busybox) else {
        return;
    };
    assert_eq!(
        ct.inside("command -v flock || busybox flock 2>&1 | head -1"),
        "flock: applet not found",
        "the container has no flock"
    );
    let dir = ct.dir();
    let env = Env::new();
    let made = dir.at("made-by-runbook");
    for mode in [EnvMode::Keep, EnvMode::Clear] {
        let out = lxc::run(
            &env,
            &dir,
            mode,
            &subst(
                r#"step("change", function() box:exec({ "touch", "@made@" }) end)
"#,
                &[("made", &made)],
            ),
            &[],
        );
        assert_eq!(out.status.code(), Some(0), "{}", out.describe());
        assert!(dir.host.join("made-by-runbook").exists());
        std::fs::remove_file(dir.host.join("made-by-runbook")).unwrap();
    }

    // Two runs: the second meets the first one's lock. (The holder says it holds it by a
    // file it makes in the container, which this side sees in the container's root.)
    let started = dir.host.join("made-by-runbook");
    let holder = env.write(
        "hold.lua",
        &subst(
            r#"runbook { name = "busybox-hold" }
local box = @ct@
step("hold", function()
  box:exec({ "touch", "@made@" })
  box:exec({ "sleep", "8" })
end)
"#,
            &[("ct", &ct.lua()), ("made", &made)],
        ),
    );
    let mut first = lxc::on_ct(Run::new(&env, &holder), &dir, EnvMode::Keep, &[])
        .yes()
        .spawn();
    first.wait_file(&started, Duration::from_secs(60));
    let owner = dir.host.join("runbook.lock.runbook-busybox-hold.d/owner");
    assert!(owner.exists(), "the lock is a directory with its owner");
    let refused = lxc::on_ct(Run::new(&env, &holder), &dir, EnvMode::Keep, &[])
        .yes()
        .args(["--lock-wait", "0"])
        .timeout(Duration::from_secs(60))
        .expect_exit(1)
        .run()
        .stderr_text();
    assert!(
        refused.contains(&format!("{} is locked by run ", ct.target()))
            && refused.contains("runbook \"busybox-hold\", since "),
        "{refused}"
    );
    let waited = lxc::on_ct(Run::new(&env, &holder), &dir, EnvMode::Keep, &[])
        .yes()
        .args(["--lock-wait", "30s"])
        .timeout(Duration::from_secs(90))
        .run();
    assert_eq!(first.code(Duration::from_secs(60)), 0, "{}", first.output());
    waited.assert_exit(0);
    assert!(!owner.exists(), "let go of at the end");

    // An owner killed outright leaves its lock behind: stale, and taken over.
    let _ = std::fs::remove_file(&started);
    let mut first = lxc::on_ct(Run::new(&env, &holder), &dir, EnvMode::Keep, &[])
        .yes()
        .spawn();
    first.wait_file(&started, Duration::from_secs(60));
    let pid = std::fs::read_to_string(&owner).unwrap();
    let pid = pid.split_whitespace().next().unwrap();
    ct.inside(&format!("kill -9 {pid}"));
    first.signal(libc::SIGKILL);
    let _ = first.wait(Duration::from_secs(20));
    assert!(owner.exists(), "its owner could not clean up");
    lxc::on_ct(Run::new(&env, &holder), &dir, EnvMode::Keep, &[])
        .yes()
        .args(["--lock-wait", "0"])
        .timeout(Duration::from_secs(60))
        .expect_exit(0)
        .run();
    assert!(!owner.exists(), "taken over, and let go of at the end");
}

/// A Proxmox node as it is used: runbook reaches it over SSH (the test sshd), and `pct`
/// there enters a real container (minbase). A command, a change under the run lock and a
/// timeout that kills a TERM-ignoring tree inside the container, through both hops.
#[test]
fn a_real_container_behind_ssh() {
    require_sshd!();
    let Some(ct) = lxc::container(Kind::Minbase) else {
        return;
    };
    let fleet = sshd::Fleet::start_with_real_lxc(1);
    let env = Env::new();
    let dir = ct.dir();
    let n = unique_sleep();
    dir.kill_on_drop(&format!("sleep {n}"));
    let rb = env.write(
        "ct.lua",
        &subst(
            r#"runbook { name = "real-ct-over-ssh" }
local box = target("node1"):pct(@vmid@)
step("run and change", function()
  local r = box:exec({ "cat", "/proc/sys/kernel/hostname" }, { read_only = true })
  if r.stdout ~= "@vmid@\n" then fail("got " .. r.stdout) end
  box:exec({ "touch", "@made@" })
end)
step("stuck", { timeout = "2s" }, function()
  box:exec(@tree@, { read_only = true })
end)
"#,
            &[
                ("vmid", &ct.vmid),
                ("made", &dir.at("made")),
                ("tree", &stubborn_tree(n)),
            ],
        ),
    );
    let out = Run::new(&env, rb)
        .yes()
        .json()
        .ssh(&fleet)
        .timeout(Duration::from_secs(60))
        .expect_exit(1)
        .run();
    let events = out.events();
    let outcome = |i: usize| step_outcome(&events, i);
    assert_eq!(outcome(0), StepOutcome::Changed, "{}", out.describe());
    assert_eq!(outcome(1), StepOutcome::Failed, "{}", out.describe());
    assert!(
        dir.host.join("made").exists(),
        "the change happened in the container"
    );
    let left = gone_inside(&ct, &format!("sleep {n}"), Duration::from_secs(3));
    assert!(left.is_empty(), "left running in the container: {left:?}");
}
