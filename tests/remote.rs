//! Remote targets against a real OpenSSH sshd on 127.0.0.1 (see common/sshd.rs) and the
//! `pct` test double (tests/bin/pct).
use crate::common::sshd::Fleet;
use crate::common::*;

/// `runbook run FILE` against the fleet, `--yes --json`, to add to before it runs.
fn remote<'e>(env: &'e Env, fleet: &Fleet, file: &std::path::Path) -> Run<'e> {
    Run::new(env, file).ssh(fleet).yes().json()
}

#[test]
fn exec_over_ssh_and_inside_a_container() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let ct = fleet.container(200);
    let env = Env::new();
    let rb = env.write(
        "remote.lua",
        r#"
runbook { name = "remote" }
local node = target("node1")
local box = node:pct(200)
step("on the node", function()
  local r = node:exec({ "printf", "%s|", "a b", "$HOME", "it's", "" })
  if r.stdout ~= "a b|$HOME|it's||" then fail("node got: " .. r.stdout) end
end)
step("in the container", function()
  box:exec({ "touch", "/tmp/made-inside" })
  local r = box:exec({ "sh", "-c", "ls /tmp" }, { read_only = true })
  if not r.stdout:find("made-inside", 1, true) then fail("not inside: " .. r.stdout) end
  local env_cwd = box:exec({ "sh", "-c", 'printf "%s %s" "$PWD" "$X"' }, { env = { X = "v 1" }, cwd = "/tmp" })
  if env_cwd.stdout ~= "/tmp v 1" then fail("env/cwd: " .. env_cwd.stdout) end
end)
"#,
    );
    remote(&env, &fleet, &rb).expect_exit(0).run();
    assert!(
        ct.join("tmp/made-inside").exists(),
        "the file is in container 200's /tmp"
    );
    assert!(
        !std::path::Path::new("/tmp/made-inside").exists(),
        "and not in the node's /tmp"
    );
}

#[test]
fn preview_shows_the_outermost_command_line() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let env = Env::new();
    let rb = env.write(
        "preview.lua",
        r#"
runbook { name = "preview" }
local box = target("node1"):pct(200)
step("clear", function() box:exec({ "rm", "-rf", "--", "/tmp/torchinductor_root" }) end)
"#,
    );
    let stderr = Run::new(&env, &rb)
        .ssh(&fleet)
        .dry_run()
        .offline()
        .expect_exit(0)
        .run()
        .stderr_text();
    let expected = format!(
        "$ ssh -F {} node1 -- 'pct exec 200 -- rm -rf -- /tmp/torchinductor_root'",
        fleet.ssh_config().display()
    );
    assert!(
        stderr.contains(&expected),
        "preview lacks {expected}:\n{stderr}"
    );
    assert!(
        stderr.contains("node1/ct200: rm -rf -- /tmp/torchinductor_root"),
        "{stderr}"
    );
}

#[test]
fn parallel_over_a_fleet_with_one_host_down() {
    require_sshd!();
    let mut fleet = Fleet::start(6);
    fleet.node("node3").kill();
    let env = Env::new();
    let marks = env.scratch();
    let rb = env.write(
        "fleet.lua",
        &subst(
            r#"
runbook { name = "fleet" }
local hosts = {}
for i = 1, 6 do hosts[i] = target("node" .. i) end
step("touch everywhere", function()
  parallel(hosts, function(t)
    t:exec({ "touch", "@marks@/" .. t.name })
    return t.name
  end, { limit = 3 })
end)
step("after", { always = true }, function() log.info("cleanup ran") end)
"#,
            &[("marks", &marks.display())],
        ),
    );
    let out = remote(&env, &fleet, &rb).expect_exit(1).run();
    for i in [1, 2, 4, 5, 6] {
        assert!(
            marks.join(format!("node{i}")).exists(),
            "node{i} did its work"
        );
    }
    assert!(!marks.join("node3").exists());
    let error = out.step_error("touch everywhere");
    assert!(error.contains("1 of 6 failed"), "{error}");
    assert!(
        error.contains("node3: ") && error.contains("Connection refused"),
        "{error}"
    );
    assert!(out.logs().contains(&"cleanup ran".to_string()));

    // What a person reads (issue 33 item 6): the host that failed is named once with its
    // error, in the step's failure; the line as it fails says only that it failed.
    let out = Run::new(&env, &rb).ssh(&fleet).yes().expect_exit(1).run();
    let screen = out.stderr_text() + &out.stdout_text();
    assert_eq!(
        screen.matches("Connection refused").count(),
        1,
        "the reason once:\n{screen}"
    );
    assert!(screen.contains("error: [3/6] node3: failed\n"), "{screen}");
    assert!(
        screen.contains("parallel(): 1 of 6 failed:\n      node3: "),
        "{screen}"
    );
}

/// Two runs changing the same target: the second fails naming the first, unless it waits.
#[test]
fn a_run_lock_keeps_two_runs_apart() {
    require_sshd!();
    let fleet = Fleet::start(1);
    fleet.container(200);
    let env = Env::new();
    let started = env.scratch().join("started");
    let rb = env.write(
        "hold.lua",
        &subst(
            r#"
runbook { name = "hold", params = { sleep = { default = "0" } } }
local box = target("node1"):pct(200)
step("change", function()
  box:exec({ "touch", "/tmp/x" })
  target("local"):exec({ "touch", "@started@" })
  box:exec({ "sleep", params.sleep })
end)
"#,
            &[("started", &started.display())],
        ),
    );
    let mut first = Run::new(&env, &rb)
        .ssh(&fleet)
        .yes()
        .set("sleep", "3")
        .spawn();
    first.wait_file(&started, std::time::Duration::from_secs(10));
    let stderr = Run::new(&env, &rb)
        .ssh(&fleet)
        .yes()
        .expect_exit(1)
        .run()
        .stderr_text();
    // Named as the runbook names it, with where that resolves to.
    assert!(
        stderr.contains("node1/ct200 (root@127.0.0.1:")
            && stderr.contains("/ct200) is locked by run "),
        "{stderr}"
    );
    assert!(stderr.contains("--lock-wait"), "{stderr}");
    Run::new(&env, &rb)
        .ssh(&fleet)
        .yes()
        .args(["--lock-wait", "20s"])
        .expect_exit(0)
        .run();
    assert_eq!(
        first.code(std::time::Duration::from_secs(60)),
        0,
        "{}",
        first.output()
    );
}

/// The fleet example, run for real: its inventory's hosts pointed at local sshd instances.
#[test]
fn fleet_example_runs_against_an_inventory() {
    require_sshd!();
    let fleet = Fleet::start(2);
    fleet.container(200);
    let env = Env::new();
    let example = repo().join("examples/fleet/gpu-uptime.lua");
    let shipped_inventory = repo().join("examples/fleet/inventory.toml");
    Run::cmd(&env, ["check".as_ref(), example.as_os_str()])
        .arg("--inventory")
        .arg(&shipped_inventory)
        .expect_exit(0)
        .run();
    let inventory = env.write(
        "inventory.toml",
        "[hosts.pve1]\naddress = \"node1\"\n[hosts.pve2]\naddress = \"node2\"\n\
         [hosts.trainer]\nvia = \"pve1\"\npct = 200\n[groups]\nnodes = [\"pve1\", \"pve2\"]\n",
    );
    let logs = remote(&env, &fleet, &example)
        .arg("--inventory")
        .arg(&inventory)
        .expect_exit(0)
        .run()
        .logs();
    assert!(
        logs.iter()
            .any(|m| m.starts_with("pve1: ") && m.contains("load average")),
        "{logs:?}"
    );
    assert!(
        logs.iter()
            .any(|m| m.starts_with("pve2: ") && m.contains("load average")),
        "{logs:?}"
    );
    assert!(
        logs.iter().any(|m| m.starts_with("trainer runs ")),
        "{logs:?}"
    );
}

/// Env values reach the command on every hop (SSH, SSH + pct) without passing through an
/// argv: while the command runs, no process on the machine has the secret in
/// `/proc/PID/cmdline` (before, `env TOKEN=…` was an argv word on the host and in the
/// container). The secret comes in through `RUNBOOK_PARAM_TOKEN`, not `--set`, so that
/// runbook's own argv does not hold it either.
#[test]
fn secret_env_values_stay_out_of_every_argv() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let _ct = fleet.container(200);
    let env = Env::new();
    let rb = env.write(
        "secret_env.lua",
        r#"
runbook { name = "secret-env", params = { token = { type = "string", secret = true, required = true } } }
-- Looks at every process's argv while a process with the secret in its env is alive.
local scan = [[
sleep 5 & holder=$!
n=0
for f in /proc/[0-9]*/cmdline; do
  c=$(tr '\000' ' ' < "$f" 2>/dev/null) || continue
  case $c in *"$TOKEN"*) echo "LEAK $f: $c"; n=$((n+1));; esac
done
kill "$holder"
[ "${TOKEN%%-*}:${#TOKEN}" = "s3cr3t:19" ] || { echo "wrong value"; exit 3; }
echo "checked, $n leaks"
]]
for _, t in ipairs({ target("node1"), target("node1"):pct(200) }) do
  step("on " .. t.name, function()
    local r = t:exec({ "sh", "-c", scan }, { env = { TOKEN = params.token }, read_only = true })
    if not r.stdout:find("checked, 0 leaks", 1, true) then fail(r.stdout) end
  end)
end
"#,
    );
    let stdout = remote(&env, &fleet, &rb)
        .env("RUNBOOK_PARAM_TOKEN", "s3cr3t-env-VALUE-42")
        .expect_exit(0)
        .run()
        .stdout_text();
    assert!(!stdout.contains("s3cr3t-env-VALUE-42"), "{stdout}");
}

/// The same host under two names (its ssh_config alias and `root@127.0.0.1:PORT`), and
/// the same container under both: one run takes one lock per machine and never waits
/// for itself (before: "locked by run <its own id>").
#[test]
fn one_host_under_two_names_does_not_lock_itself_out() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let _ct = fleet.container(200);
    let port = fleet.nodes[0].port;
    let env = Env::new();
    let rb = env.write(
        "two_names.lua",
        &subst(
            r#"runbook { name = "two-names" }
local by_alias, by_address = target("node1"), target("root@127.0.0.1:@port@")
step("change by both names", function()
  by_alias:exec({ "true" })
  by_address:exec({ "true" })
  by_alias:pct(200):exec({ "true" })
  by_address:pct(200):exec({ "true" })
end)
"#,
            &[("port", &port)],
        ),
    );
    remote(&env, &fleet, &rb)
        .args(["--lock-wait", "0"])
        .env_remove("RUNBOOK_LOCK_FILE")
        .timeout(std::time::Duration::from_secs(60))
        .expect_exit(0)
        .run();
}

/// Env values are bytes, like argv words and stdin: non-UTF-8 bytes arrive exactly on
/// every target (before, they became U+FFFD, `ef bf bd`).
#[test]
fn env_values_keep_their_bytes_on_every_target() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let _ct = fleet.container(200);
    let env = Env::new();
    let rb = env.write(
        "bytes.lua",
        r#"runbook { name = "env-bytes" }
for _, t in ipairs({ target("local"), target("node1"), target("node1"):pct(200) }) do
  step("on " .. t.name, function()
    local r = t:exec({ "sh", "-c", 'printf %s "$X" | od -An -tx1 | tr -d " \n"' },
                     { env = { X = "a\255\254\nb\\" }, read_only = true })
    if r.stdout ~= "61fffe0a625c" then fail(t.name .. " got " .. r.stdout) end
  end)
end
"#,
    );
    remote(&env, &fleet, &rb).expect_exit(0).run();
}

/// A secret in `cwd` is an argv word on remote hops (`sh -c 'cd -- "$1" …' sh DIR`):
/// warned about like a secret in the argv (found by review).
#[test]
fn a_secret_in_a_remote_cwd_is_warned_about() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let env = Env::new();
    let rb = env.write(
        "cwd.lua",
        r#"runbook { name = "cwd", params = { token = { type = "string", secret = true, required = true } } }
step("in a secret dir", function()
  target("node1"):exec({ "true" }, { cwd = "/tmp/cwd-" .. params.token, read_only = true, check = false })
end)
"#,
    );
    let stdout = remote(&env, &fleet, &rb)
        .env("RUNBOOK_PARAM_TOKEN", "cwd-s3cr3t-98765")
        .run()
        .stdout_text();
    assert!(stdout.contains("a secret is in the argv of"), "{stdout}");
    assert!(!stdout.contains("cwd-s3cr3t-98765"), "{stdout}");
}
