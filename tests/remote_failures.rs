//! How remote targets fail: host keys, refused and silent ports, a host that dies in the
//! middle of a command, timeouts and Ctrl-C that must leave no remote process behind,
//! `pct` errors, and argv words that must reach the remote program byte for byte.
//!
//! Every test drives the real `runbook` binary against real sshd instances on 127.0.0.1
//! (common/sshd.rs) and the `pct` test double (tests/bin/pct). sshd runs on this machine,
//! so a test can see the files and processes a remote command makes.
use crate::common;
use crate::common::argv::lua_path;
use crate::common::run::SshConfig;
use crate::common::running::{alive, gone_within, Reap};
use crate::common::sshd::Fleet;
use crate::common::*;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// helpers

/// `runbook run FILE --yes --json --ssh-config CFG`, at most a minute.
fn run<'e>(env: &'e Env, cfg: &(impl SshConfig + ?Sized), file: &Path) -> Run<'e> {
    Run::new(env, file)
        .yes()
        .json()
        .ssh(cfg)
        .timeout(Duration::from_secs(60))
}

/// An ssh_config with no sshd behind it: `Host ALIAS` → 127.0.0.1:PORT entries, strict
/// batch-mode settings, and nothing from ~/.ssh.
fn bare_config(env: &Env, hosts: &[(&str, u16)]) -> PathBuf {
    let mut text = String::new();
    for (alias, port) in hosts {
        text.push_str(&format!(
            "Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User root\n"
        ));
    }
    text.push_str(
        "Host *\n  UserKnownHostsFile /dev/null\n  GlobalKnownHostsFile /dev/null\n  BatchMode yes\n  LogLevel ERROR\n",
    );
    env.write("ssh_config", &text)
}

/// A port on 127.0.0.1 that nobody listens on (bound, then released).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The pids `pgrep -f PATTERN` lists (none: empty).
fn pgrep(pattern: &str) -> Vec<i32> {
    let out = std::process::Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|&p| alive(p))
        .collect()
}

/// Polls up to 3 s until no process matches `pattern`; returns what is left (and kills it,
/// so that one failure does not leak into later runs).
fn leftovers(pattern: &str) -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        let pids = pgrep(pattern);
        if pids.is_empty() {
            return Vec::new();
        }
        if Instant::now() >= until {
            let described = pids
                .iter()
                .map(|p| {
                    let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                    format!("{p}: {}", String::from_utf8_lossy(&cmd).replace('\0', " "))
                })
                .collect();
            drop(Reap(pids));
            return described;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------------------
// 1, 2: host keys

const ONE_COMMAND: &str = r#"
runbook { name = "one-command" }
local node = target("node1")
step("probe", function()
  local r = node:exec({ "echo", "hello" }, { read_only = true })
  if r.stdout ~= "hello\n" then fail("got " .. r.stdout) end
end)
"#;

#[test]
fn unknown_host_key_fails_unless_trusting_new_hosts() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let port = fleet.nodes[0].port;
    std::fs::write(fleet.known_hosts(), "").unwrap();
    let env = Env::new();
    let rb = env.write("probe.lua", ONE_COMMAND);

    let out = run(&env, &fleet, &rb).run();
    out.assert_exit(1);
    let err = out.step_error(0);
    assert!(err.contains("node1"), "names the host: {err}");
    assert!(
        err.contains("known_hosts") || err.contains("KnownHostsFile"),
        "mentions known_hosts: {err}"
    );
    assert!(
        err.contains("--trust-new-hosts"),
        "suggests --trust-new-hosts: {err}"
    );
    assert_eq!(
        std::fs::read_to_string(fleet.known_hosts()).unwrap(),
        "",
        "a strict check adds nothing"
    );

    let out = run(&env, &fleet, &rb).arg("--trust-new-hosts").run();
    out.assert_exit(0);
    let known = std::fs::read_to_string(fleet.known_hosts()).unwrap();
    assert!(
        known.contains(&format!("[127.0.0.1]:{port} ssh-ed25519 ")),
        "the key was added to known_hosts: {known:?}"
    );
}

#[test]
fn changed_host_key_fails_even_when_trusting_new_hosts() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let port = fleet.nodes[0].port;
    let env = Env::new();
    let other = env.tmp.path().join("other_host_key");
    let st = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "impostor", "-f"])
        .arg(&other)
        .status()
        .unwrap();
    assert!(st.success());
    let public = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    let key: Vec<&str> = public.split_whitespace().take(2).collect();
    let line = format!("[127.0.0.1]:{port} {} {}\n", key[0], key[1]);
    std::fs::write(fleet.known_hosts(), &line).unwrap();
    let rb = env.write("probe.lua", ONE_COMMAND);

    for extra in [&[][..], &["--trust-new-hosts"][..]] {
        let out = run(&env, &fleet, &rb).args(extra).run();
        assert_eq!(out.status.code(), Some(1), "{extra:?}\n{}", out.describe());
        let err = out.step_error(0);
        assert!(err.contains("node1"), "names the host: {err}");
        assert!(
            err.to_lowercase().contains("changed"),
            "says the key changed: {err}"
        );
        assert_eq!(
            std::fs::read_to_string(fleet.known_hosts()).unwrap(),
            line,
            "known_hosts is left alone"
        );
    }
}

// ---------------------------------------------------------------------------------------
// 3, 4: nobody there, or nobody answering

#[test]
fn closed_port_fails_fast_and_retries() {
    require_sshd!();
    let env = Env::new();
    let cfg = bare_config(&env, &[("deadhost", closed_port())]);
    let rb = env.write(
        "closed.lua",
        r#"
runbook { name = "closed" }
local node = target("deadhost")
step("probe", { retries = 2, delay = "100ms" }, function()
  node:exec({ "true" })
end)
"#,
    );
    let started = Instant::now();
    let out = run(&env, &cfg, &rb).run();
    let took = started.elapsed();
    out.assert_exit(1);
    assert!(
        took < Duration::from_secs(5),
        "3 tries against a closed port took {took:?} (the connect timeout is 10s)"
    );
    let ev = out.events();
    let err = step_error(&ev, 0);
    assert!(err.contains("deadhost"), "names the host: {err}");
    assert!(err.contains("Connection refused"), "says why: {err}");
    let attempts: Vec<u32> = pick!(ev, Event::StepStarted { attempt, .. } => *attempt);
    assert_eq!(attempts, vec![1, 2, 3], "{ev:#?}");
}

#[test]
fn silent_host_fails_after_the_connect_timeout() {
    require_sshd!();
    // Accepts connections and never says a word.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming() {
            held.push(s);
        }
    });
    let env = Env::new();
    let cfg = bare_config(&env, &[]);
    let rb = env.write(
        "silent.lua",
        &subst(
            r#"
runbook { name = "silent" }
local node = ssh("127.0.0.1", { port = @port@, connect_timeout = "1s" })
step("probe", function()
  node:exec({ "true" })
end)
"#,
            &[("port", &port)],
        ),
    );
    let started = Instant::now();
    let out = run(&env, &cfg, &rb).run();
    let took = started.elapsed();
    out.assert_exit(1);
    assert!(
        took < Duration::from_secs(5),
        "a 1s connect timeout took {took:?}"
    );
    let err = out.step_error(0);
    assert!(
        err.contains(&format!("127.0.0.1:{port}")),
        "names the host: {err}"
    );
}

// ---------------------------------------------------------------------------------------
// 5: the host dies in the middle of a command

#[test]
fn host_killed_mid_command_is_connection_lost() {
    require_sshd!();
    let mut fleet = Fleet::start(1);
    let env = Env::new();
    let scratch = env.scratch();
    let started = scratch.join("started.pid");
    let always = scratch.join("always");
    let rb = env.write(
        "killed.lua",
        &subst(
            r#"
runbook { name = "killed" }
local node = target("node1")
step("long", function()
  node:exec({ "sh", "-c", 'echo $$ > "$1"; exec sleep 30', "sh", @started@ })
end)
step("clean up", { always = true }, function()
  target("local"):exec({ "touch", @always@ })
end)
"#,
            &[
                ("started", &lua_path(&started)),
                ("always", &lua_path(&always)),
            ],
        ),
    );
    let mut run = run(&env, &fleet, &rb).spawn();
    let sleeper = run.wait_pid(&started, Duration::from_secs(5));
    let _reap = Reap(vec![sleeper]);
    let killed = Instant::now();
    fleet.node("node1").kill();
    let code = run.code(Duration::from_secs(10));
    let out = run.output();
    assert_eq!(code, 1, "{out}");
    assert!(
        killed.elapsed() < Duration::from_secs(5),
        "noticing the dead host took {:?}",
        killed.elapsed()
    );
    let ev = run.events();
    let err = step_error(&ev, 0);
    assert!(err.contains("connection lost"), "{err}\n{out}");
    assert!(err.contains("node1"), "names the host: {err}");
    assert!(!err.contains("exit code 255"), "{err}");
    assert!(always.exists(), "the always step ran on local\n{out}");
    assert_ne!(step_outcome(&ev, 1), StepOutcome::Failed, "{out}");
    let record = env.complete_record();
    let end = record.last().unwrap();
    let Event::RunFinished {
        outcome, exit_code, ..
    } = end
    else {
        panic!("{end:?}")
    };
    assert_eq!(*outcome, RunOutcome::Failed, "{end:?}");
    assert_eq!(*exit_code, 1, "{end:?}");
}

#[test]
fn host_killed_in_parallel_leaves_the_other_host_alone() {
    require_sshd!();
    let env = Env::new();
    let mut fleet = Fleet::start(2);
    let scratch = env.scratch();
    let started1 = scratch.join("started1.pid");
    let started2 = scratch.join("started2.pid");
    let done2 = scratch.join("done2");
    let rb = env.write(
        "parallel_killed.lua",
        &subst(
            r#"
runbook { name = "parallel-killed" }
local jobs = {
  { node = target("node1"), mark = @started1@ },
  { node = target("node2"), mark = @started2@ },
}
local results = {}
step("both", function()
  local ok, err = pcall(parallel, jobs, function(job)
    job.node:exec({ "sh", "-c", 'echo $$ > "$1"; exec sleep 3', "sh", job.mark })
    results[job.mark] = "ok"
  end, { limit = 2 })
  if results[@started2@] == "ok" then
    target("local"):exec({ "touch", @done2@ })
  end
  if not ok then error(err, 0) end
end)
"#,
            &[
                ("started1", &lua_path(&started1)),
                ("started2", &lua_path(&started2)),
                ("done2", &lua_path(&done2)),
            ],
        ),
    );
    let mut run = run(&env, &fleet, &rb).spawn();
    let p1 = run.wait_pid(&started1, Duration::from_secs(5));
    let p2 = run.wait_pid(&started2, Duration::from_secs(5));
    let _reap = Reap(vec![p1, p2]);
    fleet.node("node1").kill();
    let code = run.code(Duration::from_secs(10));
    let out = run.output();
    assert_eq!(code, 1, "node1's loss fails the step\n{out}");
    let err = step_error(&run.events(), 0);
    assert!(err.contains("connection lost to node1"), "{err}\n{out}");
    assert!(!err.contains("node2"), "node2 did not fail: {err}");
    assert!(
        done2.exists(),
        "node2's command completed despite node1 dying\n{out}"
    );
    env.complete_record();
}

// ---------------------------------------------------------------------------------------
// 6, 7: a remote command stopped by its timeout or by Ctrl-C leaves nothing behind

fn timeout_leaves_no_process(container: bool) {
    let fleet = Fleet::start(1);
    fleet.container(200);
    let env = Env::new();
    let on = if container {
        r#"target("node1"):pct(200)"#
    } else {
        r#"target("node1")"#
    };
    // Durations no other process on this shared machine has (`pgrep` sees them all).
    let tag = std::process::id();
    let rb = env.write(
        "timeout.lua",
        &subst(
            r#"
runbook { name = "remote-timeout" }
local t = @on@
step("slow", function()
  local r = t:exec({ "sh", "-c", "sleep 300.@tag@ & sleep 301.@tag@; wait" }, { timeout = "500ms", check = false })
  if not r.timed_out or r.ok then
    fail("expected a timeout, got ok=" .. tostring(r.ok) .. " code=" .. tostring(r.code))
  end
end)
"#,
            &[("on", &on), ("tag", &tag)],
        ),
    );
    let started = Instant::now();
    let out = run(&env, &fleet, &rb).run();
    let took = started.elapsed();
    out.assert_exit(0);
    // 500 ms, then TERM and at most 2 s for the group to go (zombies count until reaped).
    assert!(
        took < Duration::from_millis(4500),
        "a 500ms timeout took {took:?}"
    );
    let left = leftovers(&format!("sleep 30[01][.]{tag}"));
    assert!(
        left.is_empty(),
        "processes left behind after the timeout{}: {left:#?}",
        if container { " (in the container)" } else { "" }
    );
}

/// Both variants in one test: `pgrep` looks at the whole machine, so they must not overlap.
#[test]
fn remote_timeout_leaves_no_process_on_the_host_or_in_a_container() {
    require_sshd!();
    timeout_leaves_no_process(false);
    timeout_leaves_no_process(true);
}

#[test]
fn sigint_stops_the_remote_process_tree() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let env = Env::new();
    let scratch = env.scratch();
    let shell = scratch.join("shell.pid");
    let child = scratch.join("child.pid");
    let rb = env.write(
        "sigint.lua",
        &subst(
            r#"
runbook { name = "remote-sigint" }
local node = target("node1")
step("long", function()
  node:exec({ "sh", "-c", 'echo $$ > "$1"; sleep 305 & echo $! > "$2"; wait', "sh", @shell@, @child@ })
end)
"#,
            &[("shell", &lua_path(&shell)), ("child", &lua_path(&child))],
        ),
    );
    let mut run = run(&env, &fleet, &rb).spawn();
    let shell_pid = run.wait_pid(&shell, Duration::from_secs(5));
    let child_pid = run.wait_pid(&child, Duration::from_secs(5));
    let _reap = Reap(vec![shell_pid, child_pid]);
    assert!(alive(shell_pid) && alive(child_pid));
    let sent = Instant::now();
    run.signal(libc::SIGINT);
    let code = run.code(Duration::from_secs(8));
    let out = run.output();
    assert_eq!(code, 130, "{out}");
    // Stopping takes TERM, at most 2 s for the group to go, KILL: well under 5 s.
    assert!(
        sent.elapsed() < Duration::from_millis(4500),
        "runbook took {:?} to stop after SIGINT\n{out}",
        sent.elapsed()
    );
    assert!(
        gone_within(shell_pid, Duration::from_secs(3)),
        "the remote shell survived Ctrl-C\n{out}"
    );
    assert!(
        gone_within(child_pid, Duration::from_secs(3)),
        "the remote shell's background sleep survived Ctrl-C\n{out}"
    );
    let record = env.complete_record();
    assert!(
        matches!(
            record.last(),
            Some(Event::RunFinished {
                outcome: RunOutcome::Interrupted,
                ..
            })
        ),
        "{record:#?}"
    );
}

// ---------------------------------------------------------------------------------------
// 8: pct errors

/// `pct exec` on a container that does not exist: the step fails with pct's own words.
fn unknown_ctid(read_only: bool) {
    let fleet = Fleet::start(1);
    let env = Env::new();
    let rb = env.write(
        "missing.lua",
        &subst(
            r#"
runbook { name = "missing-ct" }
step("in ct 999", function()
  target("node1"):pct(999):exec({ "true" }, { read_only = @read_only@ })
end)
"#,
            &[("read_only", &read_only)],
        ),
    );
    let out = run(&env, &fleet, &rb).run();
    out.assert_exit(1);
    let err = out.step_error(0);
    assert!(err.contains("does not exist"), "{err}");
    assert!(err.contains("node1/ct999"), "names the target: {err}");
}

#[test]
fn pct_unknown_ctid_fails_with_pcts_message() {
    require_sshd!();
    unknown_ctid(true);
}

/// The same for a command that changes something (so takes the run lock first).
#[test]
fn pct_unknown_ctid_fails_with_pcts_message_when_changing() {
    require_sshd!();
    unknown_ctid(false);
}

/// `pct(99)`, `pct("abc")`: a Lua error naming file:line; in a step it fails the step
/// (exit 1), at the top level the runbook is invalid (exit 2).
#[test]
fn pct_bad_ids_are_errors_at_the_line() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let env = Env::new();

    // A bad id inside a step: a Lua error at that line, the step fails.
    let rb = env.write(
        "bad_in_step.lua",
        r#"
runbook { name = "bad-ct-step" }
step("bad id", function()
  target("node1"):pct(99):exec({ "true" })
end)
"#,
    );
    let out = run(&env, &fleet, &rb).run();
    out.assert_exit(1);
    let err = out.step_error(0);
    assert!(err.contains("bad_in_step.lua:4"), "names file:line: {err}");
    assert!(err.contains("container id"), "{err}");

    // A bad id at the top level: the runbook is invalid, nothing runs.
    let rb = env.write(
        "bad_top.lua",
        r#"
runbook { name = "bad-ct-top" }
local box = target("node1"):pct("abc")
step("never", function() box:exec({ "true" }) end)
"#,
    );
    let out = run(&env, &fleet, &rb).run();
    out.assert_exit(2);
    let all = out.stdout_text() + &out.stderr_text();
    assert!(all.contains("bad_top.lua:3"), "names file:line: {all}");
    assert!(all.contains("container id"), "{all}");
}

// ---------------------------------------------------------------------------------------
// 9, 10: argv words reach the program byte for byte, whatever they hold

/// Runs 24 random argvs (plus fixed nasty ones) on local, ssh, and each container kind
/// behind ssh: pct and the docker, podman and kubectl doubles (which turn bytes that are
/// not UTF-8 into U+FFFD, as the real engines do: runbook must armour them).
fn argv_round_trips(utf8: bool) {
    let fleet = Fleet::start(1);
    fleet.container(200);
    // The doubles keep their containers under the pct double's root (tests/bin/docker).
    for dir in [
        "docker/trainer",
        "podman/trainer",
        "kube/default/ml/train-0/main",
    ] {
        std::fs::create_dir_all(fleet.dir.path().join("pct").join(dir)).unwrap();
    }
    let env = Env::new();
    let targets = [
        ("local", r#"target("local")"#),
        ("ssh", r#"target("node1")"#),
        ("ssh+pct", r#"target("node1"):pct(200)"#),
        ("ssh+docker", r#"target("node1"):docker("trainer")"#),
        ("ssh+podman", r#"target("node1"):podman("trainer")"#),
        (
            "ssh+kube",
            r#"target("node1"):kube("train-0", { namespace = "ml", container = "main" })"#,
        ),
    ];
    common::argv::round_trips(&env, utf8, &targets, |rb| run(&env, &fleet, rb).run());
}

#[test]
fn random_utf8_argv_round_trips_through_local_ssh_and_containers() {
    require_sshd!();
    argv_round_trips(true);
}

#[test]
fn random_byte_argv_round_trips_through_local_ssh_and_containers() {
    require_sshd!();
    argv_round_trips(false);
}

#[test]
fn nul_in_an_argv_word_is_rejected() {
    require_sshd!();
    let fleet = Fleet::start(1);
    fleet.container(200);
    let env = Env::new();
    let rb = env.write(
        "nul.lua",
        r#"
runbook { name = "nul" }
step("nul", function()
  for _, t in ipairs({ target("local"), target("node1"), target("node1"):pct(200) }) do
    local ok, err = pcall(function() return t:exec({ "echo", "a\0b" }) end)
    err = tostring(err)
    if ok then fail("a NUL was accepted on " .. t.name) end
    if not (err:find("NUL", 1, true) and err:find("argument 2", 1, true) and err:find("nul.lua:5", 1, true)) then
      fail("unclear error on " .. t.name .. ": " .. err)
    end
  end
  target("node1"):exec({ "echo", "a\0b" })
end)
"#,
    );
    let out = run(&env, &fleet, &rb).run();
    out.assert_exit(1);
    let err = out.step_error(0);
    assert!(
        err.contains("nul.lua:12") && err.contains("NUL byte") && err.contains("argument 2"),
        "{err}"
    );
    assert!(
        pick!(out.run_events(), Event::ActionStarted { .. }).is_empty(),
        "nothing ran"
    );
}

#[test]
fn huge_word_and_many_words_over_ssh() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let env = Env::new();
    let rb = env.write(
        "big.lua",
        r#"
runbook { name = "big-argv" }
local node = target("node1")
step("a 100 KB word", function()
  -- Shell-special bytes, but no single quote (each would grow the remote command line).
  local big = string.rep('ab c$`"\\\n*', 10 * 1024)
  assert(#big == 100 * 1024)
  local r = node:exec({ "printf", "%s", big }, { read_only = true })
  if r.stdout ~= big then fail("the 100 KB word came back as " .. #r.stdout .. " bytes") end
end)
step("2000 words", function()
  local argv, want = { "printf", "%s\\n" }, {}
  for i = 1, 2000 do
    argv[#argv + 1] = "w" .. i .. "'"
    want[#want + 1] = "w" .. i .. "'\n"
  end
  local r = node:exec(argv, { read_only = true })
  if r.stdout ~= table.concat(want) then fail("2000 words came back wrong: " .. #r.stdout .. " bytes") end
end)
"#,
    );
    let out = run(&env, &fleet, &rb).run();
    out.assert_exit(0);
}
