//! Persistent sessions (src/targets/session.rs) against a real OpenSSH sshd on 127.0.0.1
//! and the `pct` double: one loop per host and per container runs every command there;
//! a session that dies fails its command as "connection lost" and is replaced; a
//! command's stdin is its own; a command cannot end its frame; a host whose shell cannot
//! keep a session gets a channel per command, and the run is told once.
use crate::common::argv::lua_path;
use crate::common::sshd::Fleet;
use crate::common::*;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

fn remote<'e>(env: &'e Env, fleet: &Fleet, file: &Path) -> Run<'e> {
    Run::new(env, file).ssh(fleet).yes().json()
}

/// Every command's parent is the same process, the session's loop, on the host and in a
/// container; over a channel per command each would have its own (sshd's session).
#[test]
fn one_session_runs_every_command_of_a_host_and_of_a_container() {
    require_sshd!();
    let fleet = Fleet::start(1);
    fleet.container(200);
    let env = Env::new();
    let scratch = env.scratch();
    let host = scratch.join("host");
    let rb = env.write(
        "reuse.lua",
        &subst(
            r#"
runbook { name = "reuse" }
local node = target("node1")
local box = node:pct(200)
step("many commands", function()
  for i = 1, 20 do
    node:exec({ "sh", "-c", 'echo "$PPID" >> "$1"', "sh", @host@ }, { read_only = true })
  end
  local cmd = node:exec({ "sh", "-c", 'tr "\\000" " " < /proc/$PPID/cmdline' }, { read_only = true })
  log.info("loop: " .. cmd.stdout)
  local seen = {}
  for i = 1, 10 do
    local r = box:exec({ "sh", "-c", 'echo "$PPID"' }, { read_only = true })
    seen[r.stdout] = true
  end
  local n = 0
  for _ in pairs(seen) do n = n + 1 end
  log.info("container parents: " .. n)
end)
"#,
            &[("host", &lua_path(&host))],
        ),
    );
    let out = remote(&env, &fleet, &rb).expect_exit(0).run();
    let parents: BTreeSet<String> = file_lines(&host).into_iter().collect();
    assert_eq!(file_lines(&host).len(), 20);
    assert_eq!(parents.len(), 1, "one parent for 20 commands: {parents:?}");
    let logs = out.logs().join("\n");
    assert!(
        logs.contains("loop: bash --posix -c ") && logs.contains("_rb_child"),
        "the parent is the session's loop: {logs}"
    );
    assert!(
        logs.contains("container parents: 1"),
        "one loop in the container: {logs}"
    );
}

/// `parallel` on one host runs its commands at once, on a pool of sessions no larger
/// than the connection's channel limit (8, below sshd's MaxSessions of 10), and a second
/// batch reuses them.
#[test]
fn parallel_on_one_host_uses_a_bounded_pool_of_sessions() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let env = Env::new();
    let scratch = env.scratch();
    let seen = scratch.join("parents");
    let rb = env.write(
        "pool.lua",
        &subst(
            r#"
runbook { name = "pool" }
local node = target("node1")
local jobs = {}
for i = 1, 12 do jobs[i] = i end
step("two batches", function()
  for batch = 1, 2 do
    parallel(jobs, function()
      node:exec({ "sh", "-c", 'echo "$PPID" >> "$1"; sleep 0.3', "sh", @seen@ }, { read_only = true })
    end, { limit = 12 })
  end
end)
"#,
            &[("seen", &lua_path(&seen))],
        ),
    );
    let started = Instant::now();
    remote(&env, &fleet, &rb).expect_exit(0).run();
    let took = started.elapsed();
    let all = file_lines(&seen);
    assert_eq!(all.len(), 24);
    let parents: BTreeSet<&String> = all.iter().collect();
    assert!(
        parents.len() > 1 && parents.len() <= 8,
        "between 2 and 8 sessions: {parents:?}"
    );
    // 24 commands of 0.3 s, 8 at a time: 3 rounds, not 24 (and not 12 at once).
    assert!(took < Duration::from_secs(7), "took {took:?}");
}

/// The loop killed while its command runs: that command fails as "connection lost", is
/// not run again, and the next command gets a new session. (The command here keeps no
/// stream of the session open; one that does holds the channel open until it ends,
/// and is lost then: sshd reports a loop killed by a signal only when the channel
/// closes.)
#[test]
fn a_session_killed_mid_command_loses_that_command_only() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let env = Env::new();
    let scratch = env.scratch();
    let parent = scratch.join("parent");
    let sleeper = scratch.join("sleeper");
    let runs = scratch.join("runs");
    let after = scratch.join("after");
    let rb = env.write(
        "killed.lua",
        &subst(
            r#"
runbook { name = "killed-session" }
local node = target("node1")
step("warm", function() node:exec({ "true" }, { read_only = true }) end)
step("long", function()
  -- Fresh files, appended to: a read may not overwrite one (runbook refuses it).
  node:exec({ "sh", "-c", 'echo x >> "$3"; echo "$PPID" >> "$1"; echo $$ >> "$2"; exec sleep 30 >/dev/null 2>&1', "sh", @parent@, @sleeper@, @runs@ }, { read_only = true })
end)
step("next", { always = true }, function()
  node:exec({ "sh", "-c", 'echo "$PPID" >> "$1"', "sh", @after@ }, { read_only = true })
end)
"#,
            &[
                ("parent", &lua_path(&parent)),
                ("sleeper", &lua_path(&sleeper)),
                ("runs", &lua_path(&runs)),
                ("after", &lua_path(&after)),
            ],
        ),
    );
    let mut run = remote(&env, &fleet, &rb).spawn();
    let loop_pid = run.wait_pid(&parent, Duration::from_secs(10));
    let sleep_pid = run.wait_pid(&sleeper, Duration::from_secs(5));
    let killed = Instant::now();
    // SAFETY: kill only sends a signal, to processes this test's runbook started.
    unsafe { libc::kill(loop_pid, libc::SIGKILL) };
    let code = run.code(Duration::from_secs(15));
    let noticed = killed.elapsed();
    unsafe { libc::kill(sleep_pid, libc::SIGKILL) };
    let out = run.output();
    assert_eq!(code, 1, "{out}");
    assert!(noticed < Duration::from_secs(5), "took {noticed:?}\n{out}");
    let err = step_error(&run.events(), 1);
    assert!(err.contains("connection lost to node1"), "{err}\n{out}");
    assert!(err.contains("does not run it again"), "{err}");
    assert!(
        run.events().iter().any(|e| matches!(
            e,
            Event::ActionFinished {
                connection_lost: true,
                ..
            }
        )),
        "the record says the connection was lost, as a fact --resume reads\n{out}"
    );
    assert_eq!(file_lines(&runs).len(), 1, "the command ran once");
    let next: i32 = file_lines(&after)[0].parse().unwrap();
    assert_ne!(next, loop_pid, "the next command has a new session\n{out}");
    env.complete_record();
}

/// A command's stdin is its own: one that reads all of it gets exactly its bytes (NULs,
/// backslashes, no final newline), one without stdin reads nothing (never the loop's
/// input), and the commands after them run as sent. Output that looks like a frame line
/// (a guessed token, the loop's own "ready") is only output.
#[test]
fn stdin_is_per_command_and_frames_cannot_be_forged() {
    require_sshd!();
    let fleet = Fleet::start(1);
    fleet.container(200);
    let env = Env::new();
    let rb = env.write(
        "stdin.lua",
        r#"
runbook { name = "stdin" }
local forged = "\030" .. string.rep("a", 32) .. " end 0\n\030runbook-session ready 1\n\030" .. string.rep("b", 32) .. " pgid 1 - -\n"
for _, t in ipairs({ target("node1"), target("node1"):pct(200) }) do
  step("on " .. t.name, function()
    local input = "a\0b\\n\\\\c\n\nlast"
    local r = t:exec({ "cat" }, { stdin = input, read_only = true })
    if r.stdout ~= input then fail("stdin came back as " .. string.format("%q", r.stdout)) end
    local r = t:exec({ "sh", "-c", "cat; echo done" }, { read_only = true })
    if r.stdout ~= "done\n" then fail("a command without stdin read " .. string.format("%q", r.stdout)) end
    local big = string.rep("0123456789abcdef", 20000)
    local r = t:exec({ "wc", "-c" }, { stdin = big, read_only = true })
    if tonumber(r.stdout) ~= #big then fail("big stdin: " .. r.stdout) end
    local r = t:exec({ "sh", "-c", 'printf "%s" "$1"; printf "%s" "$1" >&2; exit 3', "sh", forged }, { read_only = true, check = false })
    if r.code ~= 3 or r.stdout ~= forged or r.stderr ~= forged then
      fail("forged frame: code " .. tostring(r.code) .. " " .. string.format("%q", r.stdout))
    end
    local r = t:exec({ "echo", "after" }, { read_only = true })
    if r.stdout ~= "after\n" then fail("after: " .. r.stdout) end
  end)
end
"#,
    );
    remote(&env, &fleet, &rb).expect_exit(0).run();
}

/// A host whose shell cannot keep a session (here: neither bash nor setsid on its PATH)
/// gets a channel per command, as before: every command still runs, and the run says so
/// once.
#[test]
fn a_host_that_cannot_keep_a_session_falls_back_and_says_so_once() {
    require_sshd!();
    let mut fleet = Fleet::start(1);
    let env = Env::new();
    let bin = env.scratch().join("bin-without-setsid");
    std::fs::create_dir_all(&bin).unwrap();
    for dir in ["/usr/local/bin", "/usr/bin", "/bin"] {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = e.file_name();
            let link = bin.join(&name);
            if name != "setsid" && name != "bash" && !link.exists() {
                std::os::unix::fs::symlink(e.path(), link).unwrap();
            }
        }
    }
    let node = fleet.node("node1");
    let cfg = std::fs::read_to_string(&node.config).unwrap();
    let cfg: String = cfg
        .lines()
        .map(|l| match l.strip_prefix("SetEnv PATH=") {
            Some(rest) => {
                let (_, others) = rest.split_once(' ').unwrap();
                format!("SetEnv PATH={} {others}\n", bin.display())
            }
            None => format!("{l}\n"),
        })
        .collect();
    std::fs::write(&node.config, cfg).unwrap();
    node.kill();
    node.start();
    let rb = env.write(
        "fallback.lua",
        r#"
runbook { name = "fallback" }
local node = target("node1")
step("commands", function()
  for i = 1, 3 do
    local r = node:exec({ "sh", "-c", 'printf "%s" "$X"' }, { env = { X = "v" .. i }, read_only = true })
    if r.stdout ~= "v" .. i then fail("got " .. r.stdout) end
  end
end)
"#,
    );
    let out = remote(&env, &fleet, &rb).expect_exit(0).run();
    let warned: Vec<String> = out
        .logs_at(Level::Warn)
        .into_iter()
        .filter(|l| l.contains("cannot keep a session open"))
        .collect();
    assert_eq!(warned.len(), 1, "told once: {:?}", out.logs());
    assert!(warned[0].contains("needs setsid"), "{warned:?}");
    assert!(warned[0].contains("node1"), "{warned:?}");
}

/// The master's pid, as `ssh -O check` on its socket says (`None`: no master there).
fn master_pid(socket: &Path) -> Option<u32> {
    let out = std::process::Command::new("ssh")
        .arg("-o")
        .arg(format!("ControlPath={}", socket.display()))
        .args(["-O", "check", "x"])
        .output()
        .ok()?;
    let said = String::from_utf8_lossy(&out.stderr);
    said.split("pid=").nth(1)?.split(')').next()?.parse().ok()
}

fn stop_master(socket: &Path) {
    let _ = std::process::Command::new("ssh")
        .arg("-o")
        .arg(format!("ControlPath={}", socket.display()))
        .args(["-O", "exit", "x"])
        .output();
}

/// `--keep-connections`: the master outlives the run, in a private directory, and the
/// next run uses that very master (no handshake); where the ssh_config sets a
/// ControlPath, that is the socket, and the inventory's `[ssh] keep_connections` does
/// what the flag does.
#[test]
fn kept_connections_serve_the_next_run_at_the_users_control_path_too() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let env = Env::new();
    let runtime = env.scratch().join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let rb = env.write(
        "kept.lua",
        r#"
runbook { name = "kept" }
step("one", function() target("node1"):exec({ "true" }, { read_only = true }) end)
"#,
    );
    let kept = |cfg: &Path, extra: &[&str]| {
        Run::new(&env, &rb)
            .args(["--ssh-config".as_ref(), cfg.as_os_str()])
            .args(extra)
            .yes()
            .json()
            .env("XDG_RUNTIME_DIR", &runtime)
            .expect_exit(0)
            .run()
    };
    kept(&fleet.ssh_config(), &["--keep-connections", "30s"]);
    let dir = runtime.join("runbook/ssh");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    let sockets: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(sockets.len(), 1, "{sockets:?}");
    let socket = &sockets[0];
    let first = master_pid(socket).expect("the master outlived the run");
    kept(&fleet.ssh_config(), &["--keep-connections", "30s"]);
    assert_eq!(
        master_pid(socket),
        Some(first),
        "the second run used the same master"
    );
    stop_master(socket);

    // The user's ControlPath, and the inventory's setting.
    let cp = env.scratch().join("cp");
    std::fs::create_dir_all(&cp).unwrap();
    let cfg = env.scratch().join("ssh_config_cp");
    std::fs::write(
        &cfg,
        format!(
            "Host *\n  ControlPath {}/m-%C\n{}",
            cp.display(),
            std::fs::read_to_string(fleet.ssh_config()).unwrap()
        ),
    )
    .unwrap();
    let inv = env.write(
        "inventory.toml",
        "[hosts.node1]\naddress = \"node1\"\n\n[ssh]\nkeep_connections = \"30s\"\n",
    );
    kept(&cfg, &["--inventory", inv.to_str().unwrap()]);
    let mine: Vec<_> = std::fs::read_dir(&cp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(
        mine.len(),
        1,
        "the socket is at the ssh_config's ControlPath: {mine:?}"
    );
    let pid = master_pid(&mine[0]).expect("a master at the user's ControlPath");
    // The user's own ssh finds it too.
    let st = std::process::Command::new("ssh")
        .arg("-F")
        .arg(&cfg)
        .args(["-o", "ControlMaster=no", "node1", "true"])
        .status()
        .unwrap();
    assert!(st.success());
    kept(&cfg, &["--inventory", inv.to_str().unwrap()]);
    assert_eq!(master_pid(&mine[0]), Some(pid));
    stop_master(&mine[0]);
    let bad = env.write("bad.toml", "[ssh]\nkeep_connections = \"soon\"\n");
    let out = Run::new(&env, &rb)
        .args(["--inventory", bad.to_str().unwrap()])
        .yes()
        .run();
    assert_ne!(out.code(), 0);
    assert!(
        out.stderr_text().contains("[ssh] keep_connections"),
        "{}",
        out.describe()
    );
}

/// The confirmation pass (the plan shown before a real run) and the real run share the
/// host's connection and its session: the read both passes run has the same parent.
#[test]
fn the_confirmation_pass_and_the_run_share_the_session() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let env = Env::new();
    let scratch = env.scratch();
    let seen = scratch.join("parents");
    let made = scratch.join("made");
    let rb = env.write(
        "confirm.lua",
        &subst(
            r#"
runbook { name = "confirm-shares" }
local node = target("node1")
step("look, then change", function()
  node:exec({ "sh", "-c", 'echo "$PPID" >> "$1"', "sh", @seen@ }, { read_only = true })
  node:exec({ "touch", @made@ })
end)
"#,
            &[("seen", &lua_path(&seen)), ("made", &lua_path(&made))],
        ),
    );
    let (code, shown) = Run::new(&env, &rb).ssh(&fleet).on_terminal("y\n");
    assert_eq!(code, 0, "{shown}");
    assert!(made.exists(), "{shown}");
    let parents = file_lines(&seen);
    assert_eq!(
        parents.len(),
        2,
        "the read ran in the plan and in the run: {parents:?}"
    );
    assert_eq!(parents[0], parents[1], "one session for both passes");
}

/// runbook in a terminal: a command on this machine, plain or in a container of it
/// (`target("local"):pct`, the pct double, through its session), has no controlling
/// terminal, so one that opens /dev/tty fails at once, as over SSH, where it would stop
/// (SIGTTIN) at a read from the terminal until its timeout: its process group is not the
/// terminal's foreground one. (Under bash a container session's commands are job
/// control's groups in the loop's session, so the loop must not be in runbook's.)
#[test]
fn commands_on_this_machine_have_no_terminal() {
    let env = Env::new();
    let root = env.scratch().join("pct");
    std::fs::create_dir_all(root.join("ct/200/tmp")).unwrap();
    std::fs::create_dir_all(root.join("ct/200/root")).unwrap();
    let rb = env.write(
        "tty.lua",
        r#"
runbook { name = "tty" }
local probe = { "sh", "-c", "if (exec 3</dev/tty) 2>/dev/null; then echo has-tty; else echo no-tty; fi; cat /proc/$PPID/comm" }
step("tty", function()
  for _, where in ipairs({ target("local"), target("local"):pct(200) }) do
    local r = where:exec(probe, { read_only = true, timeout = "20s" })
    log.info("seen: " .. r.stdout:gsub("\n", " "))
  end
  -- What a prompt does: with a terminal in a background group it would stop here.
  local r = target("local"):exec({ "sh", "-c", "read x </dev/tty" }, { read_only = true, timeout = "20s", check = false })
  local failed = not r.timed_out and r.code ~= nil and r.code ~= 0
  log.info("seen: read " .. (failed and "failed" or ("timed out " .. tostring(r.timed_out) .. ", exit " .. tostring(r.code))))
end)
"#,
    );
    // `script` (util-linux) gives runbook a terminal of its own.
    let cmd = env.std_cmd();
    let line = format!(
        "{} run {} --yes",
        assert_cmd::cargo::cargo_bin!("runbook").display(),
        rb.display()
    );
    let path = format!(
        "{}:{}",
        repo().join("tests/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = Instant::now();
    let ran = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("PATH", path)
        .env("PCT_DOUBLE_ROOT", &root)
        .current_dir(cmd.get_current_dir().unwrap())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script (util-linux) runs");
    let said = String::from_utf8_lossy(&ran.stdout).into_owned();
    assert!(ran.status.success(), "{}: {said}", ran.status);
    let seen: Vec<String> = pick!(env.last_record(), Event::Log { message, .. } => message.clone())
        .iter()
        .filter_map(|m| m.strip_prefix("seen: "))
        .map(str::to_string)
        .collect();
    assert_eq!(
        seen,
        ["no-tty runbook ", "no-tty bash ", "read failed"],
        "no terminal here nor through the session: {said}"
    );
    assert!(started.elapsed() < Duration::from_secs(15));
}

/// What a finished command's background process prints is never another command's
/// output (issue 25, item 7): on a host and in a container, a command that leaves
/// `(sleep 0.3; echo STRAY) &` behind ends at once, and the next command, running while
/// the stray one prints, gets only its own lines, on both streams. A channel per command
/// (`RUNBOOK_SESSIONS=off`) always kept them apart.
#[test]
fn a_finished_commands_stray_output_never_reaches_the_next_command() {
    require_sshd!();
    let fleet = Fleet::start(1);
    fleet.container(200);
    let env = Env::new();
    let rb = env.write(
        "stray.lua",
        r#"
runbook { name = "stray" }
step("stray", function()
  for _, t in ipairs({ target("node1"), target("node1"):pct(200) }) do
    for i = 1, 3 do
      t:exec({ "sh", "-c", "(sleep 0.3; echo STRAY-OUT; echo STRAY-ERR >&2) &" }, { read_only = true })
      local r = t:exec({ "sh", "-c", "sleep 0.8; echo next; echo next-err >&2" }, { read_only = true })
      log.info(t.name .. " " .. i .. " [" .. r.stdout .. "] [" .. r.stderr .. "]")
    end
  end
end)
"#,
    );
    for sessions in ["on", "off"] {
        let out = remote(&env, &fleet, &rb)
            .env("RUNBOOK_SESSIONS", sessions)
            .expect_exit(0)
            .run();
        let logs = out.logs();
        for t in ["node1", "node1/ct200"] {
            for i in 1..=3 {
                let want = format!("{t} {i} [next\n] [next-err\n]");
                assert!(
                    logs.contains(&want),
                    "sessions {sessions}: {want:?} in {logs:#?}"
                );
            }
        }
        // Through a session the stray lines are dropped; a channel of its own waits for
        // them, as the first command's own.
        if sessions == "on" {
            assert!(
                !out.output_lines().iter().any(|l| l.contains("STRAY")),
                "a stray line was given to a command: {:#?}",
                out.output_lines()
            );
        }
    }
}
