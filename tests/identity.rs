//! A target is the machine, not its name (issue 25, items 4 and 14), against real sshd:
//! one machine under two addresses holds one lock; two machines (two sshd, each with its
//! own host key and, in a mount namespace of its own, its own /etc/machine-id) behind
//! different ProxyCommands with one HostName hold two; a plan applied after the
//! ssh_config leads elsewhere is refused. And what a run locks: its runbook by default,
//! the whole machine with `lock = "machine"`, named locks several runbooks share.
use crate::common::sshd::Fleet;
use crate::common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

/// A runbook named `name` that changes each of `targets` (Lua expressions) in turn:
/// touches `started` once the first change ran, then sleeps `params.sleep` seconds on
/// the last target (a change too), so that another run meets its locks.
fn holder(
    env: &Env,
    file: &str,
    name: &str,
    header: &str,
    targets: &[&str],
    started: &Path,
) -> PathBuf {
    let mut body = String::new();
    for t in targets {
        body.push_str(&subst(
            r#"  @t@:exec({ "true" })
"#,
            &[("t", &t)],
        ));
    }
    env.write(
        file,
        &subst(
            r#"runbook { name = "@name@", params = { sleep = { default = "0" } }@header@ }
step("change", function()
@body@  target("local"):exec({ "touch", "@started@" })
  @last@:exec({ "sleep", params.sleep })
end)
"#,
            &[
                ("name", &name),
                ("header", &header),
                ("body", &body),
                ("started", &started.display()),
                ("last", &targets.last().unwrap()),
            ],
        ),
    )
}

/// An ssh_config where `m1` and `m2` are one private address (10.9.9.9, port 22) behind
/// ProxyCommands to `to.0` and `to.1` (each with its own HostKeyAlias, as such a setup
/// has), and the known_hosts for it.
fn behind_proxies(fleet: &Fleet, dir: &Path, to: [usize; 2]) -> PathBuf {
    let d = fleet.dir.path();
    let mut cfg = String::new();
    let mut known = String::new();
    for (i, node) in to.iter().enumerate() {
        let n = &fleet.nodes[*node];
        let alias = format!("m{}", i + 1);
        cfg.push_str(&format!(
            "Host {alias}\n  HostName 10.9.9.9\n  Port 22\n  User root\n  HostKeyAlias {alias}\n  \
             ProxyCommand bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}; cat <&3 & exec cat >&3'\n",
            port = n.port
        ));
        known.push_str(&format!("{alias} {}\n", n.host_key_line()));
    }
    let known_file = dir.join("known_hosts");
    std::fs::write(&known_file, known).unwrap();
    cfg.push_str(&format!(
        "Host *\n  IdentityFile {}\n  IdentitiesOnly yes\n  UserKnownHostsFile {}\n  GlobalKnownHostsFile /dev/null\n  BatchMode yes\n  KexAlgorithms curve25519-sha256\n  LogLevel ERROR\n",
        d.join("client_ed25519").display(),
        known_file.display()
    ));
    let path = dir.join("ssh_config");
    std::fs::write(&path, cfg).unwrap();
    path
}

/// One machine reached as 127.0.0.1 and as localhost: one run through both names takes
/// one lock and never waits for itself; a second run through the other name meets the
/// first one's lock, and is told who holds it, for which runbook, since when.
#[test]
fn one_machine_under_two_addresses_holds_one_lock() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let port = fleet.nodes[0].port;
    // The same host key under its second name.
    let mut known = std::fs::read_to_string(fleet.known_hosts()).unwrap();
    known.push_str(&format!(
        "[localhost]:{port} {}\n",
        fleet.nodes[0].host_key_line()
    ));
    std::fs::write(fleet.known_hosts(), known).unwrap();
    let env = Env::new();
    let started = env.scratch().join("started");
    let by_ip = format!("target(\"root@127.0.0.1:{port}\")");
    let by_name = format!("target(\"root@localhost:{port}\")");
    let both = holder(&env, "both.lua", "both", "", &[&by_ip, &by_name], &started);
    Run::new(&env, &both)
        .ssh(&fleet)
        .yes()
        .args(["--lock-wait", "0"])
        .timeout(LONG)
        .expect_exit(0)
        .run();

    let _ = std::fs::remove_file(&started);
    let mut first = Run::new(&env, &both)
        .ssh(&fleet)
        .yes()
        .set("sleep", "8")
        .spawn();
    first.wait_file(&started, Duration::from_secs(20));
    let again = holder(
        &env,
        "again.lua",
        "both",
        "",
        &[&by_name],
        &env.scratch().join("s2"),
    );
    let stderr = Run::new(&env, &again)
        .ssh(&fleet)
        .yes()
        .args(["--lock-wait", "0"])
        .expect_exit(1)
        .run()
        .stderr_text();
    assert!(
        stderr.contains(&format!("root@localhost:{port} is locked by run "))
            && stderr.contains("runbook \"both\", since 20"),
        "{stderr}"
    );
    assert_eq!(first.code(LONG), 0, "{}", first.output());
}

/// `local` and ssh to this very machine, as the same user with the same lock file: one
/// run changing both takes one lock (before: it waited for itself).
#[test]
fn local_and_ssh_to_itself_are_one_machine() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let port = fleet.nodes[0].port;
    let env = Env::new();
    let started = env.scratch().join("started");
    let rb = holder(
        &env,
        "here.lua",
        "here",
        "",
        &["target(\"local\")", "target(\"node1\")"],
        &started,
    );
    Run::new(&env, &rb)
        .ssh(&fleet)
        .yes()
        .args(["--lock-wait", "0"])
        // The lock file the node's sshd gives its sessions, for this side too.
        .env(
            "RUNBOOK_LOCK_FILE",
            format!("/tmp/runbook-node1-{port}.lock"),
        )
        .timeout(LONG)
        .expect_exit(0)
        .run();
}

/// Two machines behind different ProxyCommands, one HostName and port: `ssh -G` says the
/// same `root@10.9.9.9:22` of both. A run that changes both takes a lock on each: with
/// the second held by another run, it is refused there (before: it counted the first
/// machine's lock for both and changed the second under the other run's feet).
#[test]
fn two_machines_behind_proxies_with_one_address_take_two_locks() {
    require_sshd!();
    let fleet = Fleet::start_machines(2);
    let env = Env::new();
    let cfg = behind_proxies(&fleet, &env.scratch(), [0, 1]);
    let started = env.scratch().join("started");
    let on_m2 = holder(&env, "m2.lua", "proxied", "", &["target(\"m2\")"], &started);
    let mut first = Run::new(&env, &on_m2)
        .ssh(cfg.as_path())
        .yes()
        .set("sleep", "8")
        .spawn();
    first.wait_file(&started, Duration::from_secs(20));
    let both = holder(
        &env,
        "both.lua",
        "proxied",
        "",
        &["target(\"m1\")", "target(\"m2\")"],
        &env.scratch().join("s2"),
    );
    let out = Run::new(&env, &both)
        .ssh(cfg.as_path())
        .yes()
        .args(["--lock-wait", "0"])
        .expect_exit(1)
        .run();
    let stderr = out.stderr_text();
    assert!(
        stderr.contains("m2 (root@10.9.9.9:22) is locked by run "),
        "{stderr}"
    );
    assert_eq!(first.code(LONG), 0, "{}", first.output());
}

/// A plan made through one ProxyCommand, applied after the ssh_config's ProxyCommand
/// leads to the other machine (the same HostName, so `ssh -G` is none the wiser): apply
/// refuses before anything runs (exit 2), saying what was planned and what was found.
#[test]
fn a_plan_applied_where_the_proxy_now_leads_elsewhere_is_refused() {
    require_sshd!();
    let fleet = Fleet::start_machines(2);
    let env = Env::new();
    let dir = env.scratch();
    let cfg = behind_proxies(&fleet, &dir, [0, 1]);
    let marker = dir.join("changed");
    let rb = env.write(
        "touch.lua",
        &subst(
            r#"runbook { name = "touch" }
step("touch", function() target("m1"):exec({ "touch", "@marker@" }) end)
"#,
            &[("marker", &marker.display())],
        ),
    );
    let plan = dir.join("plan.json");
    Run::cmd(
        &env,
        [
            "plan".as_ref(),
            rb.as_os_str(),
            "-o".as_ref(),
            plan.as_os_str(),
        ],
    )
    .ssh(cfg.as_path())
    .expect_exit(0)
    .run();
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let identity = &saved["targets"][0]["identity"];
    let want_id = std::fs::read_to_string(fleet.nodes[0].machine_id.as_ref().unwrap()).unwrap();
    assert_eq!(identity["machine_id"], want_id.trim(), "{saved}");
    assert!(
        identity["host_key"]
            .as_str()
            .is_some_and(|k| k.starts_with("ssh-ed25519 SHA256:")),
        "{saved}"
    );
    // Now m1's ProxyCommand leads to the second machine (its key known under m1's alias).
    behind_proxies(&fleet, &dir, [1, 0]);
    let out = Run::cmd(&env, ["apply".as_ref(), plan.as_os_str()])
        .ssh(cfg.as_path())
        .yes()
        .expect_exit(2)
        .run();
    let stderr = out.stderr_text();
    assert!(
        stderr.contains("target m1: another machine than the one planned")
            && stderr.contains("planned: host key ssh-ed25519 SHA256:")
            && stderr.contains("found:   host key ssh-ed25519 SHA256:")
            && stderr.contains(&format!("machine-id: planned {}", want_id.trim())),
        "{stderr}"
    );
    assert!(!marker.exists(), "nothing ran");
    // Led back to the planned machine, the same plan applies.
    behind_proxies(&fleet, &dir, [0, 1]);
    Run::cmd(&env, ["apply".as_ref(), plan.as_os_str()])
        .ssh(cfg.as_path())
        .yes()
        .expect_exit(0)
        .run();
    assert!(marker.exists());
}

/// A plan of a `local` runbook records this machine's identity.
#[test]
fn a_local_plan_records_this_machine() {
    let env = Env::new();
    let dir = env.scratch();
    let rb = env.write(
        "here.lua",
        &subst(
            r#"runbook { name = "here" }
step("s", function() target("local"):exec({ "touch", "@file@" }) end)
"#,
            &[("file", &dir.join("x").display())],
        ),
    );
    let plan = dir.join("plan.json");
    Run::cmd(
        &env,
        [
            "plan".as_ref(),
            rb.as_os_str(),
            "-o".as_ref(),
            plan.as_os_str(),
        ],
    )
    .expect_exit(0)
    .run();
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let here = std::fs::read_to_string("/etc/machine-id").unwrap();
    assert_eq!(
        saved["targets"][0]["identity"]["machine_id"],
        here.trim(),
        "{saved}"
    );
}

/// Lock scope on one machine: runs of two unrelated runbooks overlap (`--lock-wait 0`);
/// a second run of the same runbook is refused naming the holder, its runbook and since
/// when; `lock = "machine"` excludes every other run; a named lock excludes the other
/// runbooks that name it.
#[test]
fn a_run_locks_its_runbook_the_machine_or_a_named_lock() {
    let env = Env::new();
    let started = env.scratch().join("started");
    let here = ["target(\"local\")"];
    let first = holder(&env, "first.lua", "first", "", &here, &started);
    let other = holder(
        &env,
        "other.lua",
        "other",
        "",
        &here,
        &env.scratch().join("s2"),
    );
    let whole = holder(
        &env,
        "whole.lua",
        "whole",
        ", lock = \"machine\"",
        &here,
        &started,
    );
    let gpu_a = holder(
        &env,
        "gpu_a.lua",
        "gpu-a",
        ", locks = { \"gpu-env\" }",
        &here,
        &started,
    );
    let gpu_b = holder(
        &env,
        "gpu_b.lua",
        "gpu-b",
        ", locks = { \"gpu-env\" }",
        &here,
        &env.scratch().join("s3"),
    );
    let busy = |holder_rb: &Path, other_rb: &Path| -> String {
        let _ = std::fs::remove_file(&started);
        let mut held = Run::new(&env, holder_rb).yes().set("sleep", "6").spawn();
        held.wait_file(&started, Duration::from_secs(20));
        let out = Run::new(&env, other_rb)
            .yes()
            .args(["--lock-wait", "0"])
            .timeout(LONG)
            .run();
        assert_eq!(held.code(LONG), 0, "{}", held.output());
        format!("exit {}\n{}", out.code(), out.stderr_text())
    };
    // Unrelated runbooks run side by side.
    let said = busy(&first, &other);
    assert!(said.starts_with("exit 0"), "{said}");
    // The same runbook twice: refused, naming the holder, its runbook and since when.
    let said = busy(&first, &first);
    assert!(
        said.starts_with("exit 1")
            && said.contains("local is locked by run ")
            && said.contains("runbook \"first\", since 20")
            && said.contains("runbook \"first\" runs there already"),
        "{said}"
    );
    // `lock = "machine"` excludes runs of other runbooks, both ways.
    let said = busy(&whole, &other);
    assert!(
        said.starts_with("exit 1")
            && said.contains("runbook \"whole\", since 20")
            && said.contains("that run locks the whole machine (lock = \"machine\")"),
        "{said}"
    );
    let said = busy(&first, &whole);
    assert!(
        said.starts_with("exit 1")
            && said.contains("runbook \"first\", since 20")
            && said.contains("runbook \"whole\" locks the whole machine"),
        "{said}"
    );
    // A named lock: two runbooks that name it exclude each other.
    let said = busy(&gpu_a, &gpu_b);
    assert!(
        said.starts_with("exit 1")
            && said.contains("runbook \"gpu-a\", since 20")
            && said.contains("it holds the lock \"gpu-env\", which runbook \"gpu-b\" takes too"),
        "{said}"
    );
    // … and leave the rest alone.
    let said = busy(&gpu_a, &other);
    assert!(said.starts_with("exit 0"), "{said}");
}

/// `lock` and `locks` are checked where they are written.
#[test]
fn bad_lock_fields_name_the_field() {
    let env = Env::new();
    for (header, want) in [
        (
            "lock = \"box\"",
            "lock = \"box\": lock is \"runbook\" (the default) or \"machine\"",
        ),
        ("locks = { \"a b\" }", "locks: 'a b' is not a lock name"),
        (
            "locks = { \"a\", \"b\", \"c\", \"d\", \"e\", \"f\" }",
            "locks: 6 names; a runbook takes at most 5",
        ),
    ] {
        let rb = env.write(
            "bad.lua",
            &subst(
                r#"runbook { name = "bad", @header@ }
step("s", function() end)
"#,
                &[("header", &header)],
            ),
        );
        let out = Run::cmd(&env, ["check".as_ref(), rb.as_os_str()])
            .expect_exit(2)
            .run();
        let stderr = out.stderr_text();
        assert!(
            stderr.contains("bad.lua:1:") && stderr.contains(want),
            "{header}: {stderr}"
        );
    }
}

/// An inventory entry that is this machine (`address = "local"`) is shown and recorded
/// under its inventory name (before: as `local`), and its plan applies.
#[test]
fn a_local_inventory_entry_keeps_its_name() {
    let env = Env::new();
    let dir = env.scratch();
    let inventory = env.write(
        "inventory.toml",
        "[hosts.workstation]\naddress = \"local\"\n",
    );
    let marker = dir.join("x");
    let rb = env.write(
        "here.lua",
        &subst(
            r#"runbook { name = "here" }
step("s", function() target("workstation"):exec({ "touch", "@marker@" }) end)
"#,
            &[("marker", &marker.display())],
        ),
    );
    let plan = dir.join("plan.json");
    let shown = Run::cmd(
        &env,
        [
            "plan".as_ref(),
            rb.as_os_str(),
            "-o".as_ref(),
            plan.as_os_str(),
        ],
    )
    .arg("--inventory")
    .arg(&inventory)
    .expect_exit(0)
    .run()
    .stdout_text();
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(saved["targets"][0]["name"], "workstation", "{saved}");
    assert_eq!(saved["changes"][0]["target"], "workstation", "{saved}");
    assert!(
        saved["targets"][0]["identity"]["machine_id"].is_string(),
        "{saved}"
    );
    assert!(shown.contains("workstation"), "{shown}");
    Run::cmd(&env, ["apply".as_ref(), plan.as_os_str()])
        .arg("--inventory")
        .arg(&inventory)
        .yes()
        .expect_exit(0)
        .run();
    assert!(marker.exists());
}
