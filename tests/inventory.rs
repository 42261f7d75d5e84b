//! The inventory a fleet lives in (issue 33 item 2): nested groups (`children`), host
//! `vars` read as `t.vars`, and `--limit PATTERN` on `run`, `plan` and `apply`, over
//! real sshd nodes and a real LXC container behind one of them (`via` + `pct`).
use crate::common::lxc::{self, Kind};
use crate::common::sshd::Fleet;
use crate::common::*;

/// Three nodes and the real minbase container on node1; `gpu` holds `a100` and `h100`
/// as children, `all` holds `gpu` and the container.
fn inventory(env: &Env, vmid: &str) -> std::path::PathBuf {
    env.write(
        "inventory.toml",
        &subst(
            r#"
[hosts.gpu01]
address = "node1"
vars = { cuda = "12.4", gpus = 8, racks = ["r1", "r2"], since = 2026-12-01 }
[hosts.gpu02]
address = "node2"
[hosts.gpu07]
address = "node3"
vars = { cuda = "12.8" }
[hosts.trainer]
via = "gpu01"
pct = @vmid@
vars = { role = "trainer" }

[groups]
a100 = ["gpu01", "gpu02"]
h100 = ["gpu07"]
gpu = { children = ["a100", "h100"] }
all = { hosts = ["trainer"], children = ["gpu"] }
"#,
            &[("vmid", &vmid)],
        ),
    )
}

/// Each target of `targets("all")` reads its hostname (where it really runs) and logs
/// `NAME vars…`.
const FLEET: &str = r#"runbook { name = "fleet" }
step("each", function()
  for _, t in ipairs(targets("all")) do
    local r = t:exec({ "cat", "/proc/sys/kernel/hostname" }, { read_only = true })
    local v = t.vars
    log.info(("%s cuda=%s gpus=%s racks=%s since=%s role=%s ran=%s"):format(t.name, tostring(v.cuda),
      tostring(v.gpus), v.racks and table.concat(v.racks, "+") or "nil", tostring(v.since),
      tostring(v.role), r.planned and "planned" or "yes"))
  end
  local direct = target("gpu01")
  log.info("direct " .. direct.vars.cuda .. " " .. tostring(target("local").vars.cuda)
    .. " " .. tostring(direct:pct(200).vars.cuda))
end)
"#;

fn names(logs: &[String]) -> Vec<String> {
    logs.iter()
        .filter(|l| !l.starts_with("direct ") && !l.starts_with("applying plan "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

#[test]
fn nested_groups_vars_and_limit_over_ssh_and_a_real_container() {
    require_sshd!();
    let Some(ct) = lxc::container(Kind::Minbase) else {
        return;
    };
    let fleet = Fleet::start_with_real_lxc(3);
    let env = Env::new();
    let inv = inventory(&env, ct.vmid);
    let rb = env.write("fleet.lua", FLEET);
    let run = |extra: &[&str]| {
        Run::new(&env, &rb)
            .ssh(&fleet)
            .arg("--inventory")
            .arg(&inv)
            .args(extra)
            .yes()
            .json()
            .run()
    };

    let out = run(&[]);
    out.assert_exit(0);
    let logs = out.logs();
    assert_eq!(
        names(&logs),
        ["trainer", "gpu01", "gpu02", "gpu07"],
        "its own hosts, then its children's, each once: {logs:?}"
    );
    assert!(logs.contains(
        &"gpu01 cuda=12.4 gpus=8 racks=r1+r2 since=2026-12-01 role=nil ran=yes".to_string()
    ));
    assert!(logs.contains(
        &"trainer cuda=nil gpus=nil racks=nil since=nil role=trainer ran=yes".to_string()
    ));
    assert!(
        logs.contains(&"direct 12.4 nil nil".to_string()),
        "{logs:?}"
    );
    // The container's hostname is its VMID: its read ran inside it.
    let hostnames = pick!(out.run_events(), Event::Output { line, .. } => line.clone());
    assert!(hostnames.iter().any(|h| h == ct.vmid), "{hostnames:?}");

    // --limit: globs, groups, `!`; `targets()` keeps only those.
    for (limit, want) in [
        ("gpu,!gpu07", vec!["gpu01", "gpu02"]),
        ("gpu0*", vec!["gpu01", "gpu02", "gpu07"]),
        ("h100,trainer", vec!["trainer", "gpu07"]),
        ("all,&a100", vec!["gpu01", "gpu02"]),
    ] {
        let out = run(&["--limit", limit]);
        out.assert_exit(0);
        assert_eq!(names(&out.logs()), want, "--limit {limit}");
        let started = pick!(out.events(), Event::RunStarted { limit, .. } => limit.clone());
        assert_eq!(started, [Some(limit.to_string())], "the record says it");
    }
    // A limit that keeps nothing, or names nothing, is refused before anything runs.
    let records = env.record_count();
    for (limit, want) in [
        (
            "gpu08",
            "--limit gpu08: 'gpu08' is no group and matches no host of",
        ),
        ("a10", "'a10' is no group and matches no host of"),
        (
            "h100,&a100",
            "--limit h100,&a100: keeps none of the 4 hosts of",
        ),
    ] {
        let out = run(&["--limit", limit]);
        out.assert_exit(2);
        let said = out.stdout_text() + &out.stderr_text();
        assert!(said.contains(want), "{limit}: {said}");
    }
    assert_eq!(env.record_count(), records, "nothing ran");

    // A plan records its limit; apply keeps it and refuses another.
    let plan = env.tmp.path().join("plan.json");
    Run::cmd(&env, ["plan"])
        .arg(&rb)
        .ssh(&fleet)
        .arg("--inventory")
        .arg(&inv)
        .args(["--limit", "a100", "-o"])
        .arg(&plan)
        .expect_exit(0)
        .run();
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(saved["reached_with"]["limit"], "a100");
    let shown = Run::cmd(&env, ["plan"]).arg(&plan).expect_exit(0).run();
    assert!(
        shown.stdout_text().contains("--limit a100"),
        "{}",
        shown.describe()
    );
    for other in ["gpu", "a100,gpu07"] {
        let out = Run::cmd(&env, ["apply"])
            .arg(&plan)
            .ssh(&fleet)
            .args(["--yes", "--limit", other])
            .run();
        out.assert_exit(2);
        assert!(
            out.stderr_text().contains(&format!(
                "it was made with --limit a100, and this apply gives --limit {other}"
            )),
            "{}",
            out.describe()
        );
    }
    let out = Run::cmd(&env, ["apply"])
        .arg(&plan)
        .ssh(&fleet)
        .args(["--yes", "--json"])
        .run();
    out.assert_exit(0);
    assert_eq!(names(&out.logs()), ["gpu01", "gpu02"], "the plan's hosts");
}
