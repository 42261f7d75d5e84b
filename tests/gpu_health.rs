//! `gpu.health`, `gpu.require { healthy = true }` and the runbooks that use them, against
//! the test doubles of NVIDIA's tools: `nvidia-smi -q -x` (tests/bin/nvidia-smi, the
//! fixtures of drivers 470 to 580 in tests/fixtures/nvidia-smi/), the kernel log
//! (tests/bin/gpu-node/{dmesg,journalctl}, captures in tests/fixtures/kmsg/) and DCGM
//! (tests/bin/gpu-node/dcgmi, tests/fixtures/dcgmi/). Locally, over SSH, inside a pct
//! container behind it, and in real LXC containers. The verdict of every fixture is
//! checked in the unit tests (primitives/gpu/health/tests.rs); these drive the binary.
use crate::common::lxc::{changes_started, Ct, CtRun, EnvMode, Kind};
use crate::common::sshd::Fleet;
use crate::common::*;
use std::path::{Path, PathBuf};

/// Every finding and fact of `gpu.health`, one log line each, so a test compares lines.
const REPORT: &str = r#"
runbook {
  name = "health",
  params = {
    since = { default = "" },
    dcgm = { type = "integer", default = 0 },
    dcgm_timeout = { default = "" },
    optional = { type = "boolean", default = false },
    host = { default = "local" },
    ct = { type = "integer" },
  },
}
local node = target(params.host)
local box = params.ct and node:pct(params.ct) or node
step("health", function()
  local h = gpu.health(box, {
    since = params.since ~= "" and params.since or nil,
    dcgm = params.dcgm > 0 and params.dcgm or nil,
    dcgm_timeout = params.dcgm_timeout ~= "" and params.dcgm_timeout or nil,
    optional = params.optional,
  })
  log.info("verdict " .. tostring(h.verdict) .. " gpus " .. #h.gpus)
  for _, g in ipairs(h.gpus) do
    for _, f in ipairs(g.findings) do
      log.info(("finding %s %s %s %s: %s"):format(g.label, f.check, f.severity, f.action, f.detail))
    end
  end
  for _, f in ipairs(h.findings) do
    log.info(("node %s %s %s: %s"):format(f.check, f.severity, f.action, f.detail))
  end
  if h.xid then
    local known = 0
    for _, e in ipairs(h.xid.events) do
      if e.known then known = known + 1 end
    end
    log.info(("xid readable=%s source=%s events=%d known=%d"):format(
      tostring(h.xid.readable), tostring(h.xid.source), #h.xid.events, known))
  end
  for _, n in ipairs(h.notes) do
    log.info("note " .. n)
  end
  if h.dcgm then
    local d = h.dcgm
    log.info(("dcgm level=%d passed=%s timed_out=%s tests=%d"):format(d.level, tostring(d.passed), tostring(d.timed_out), #d.tests))
  end
end)
"#;

fn doubles() -> String {
    format!(
        "{}:{}",
        repo().join("tests/bin/gpu-node").display(),
        repo().join("tests/bin").display()
    )
}

/// `runbook run` with the doubles first on PATH and the machine state chosen.
fn on_node<'e>(env: &'e Env, file: &Path, smi: &str, kmsg: &str) -> Run<'e> {
    let path = format!(
        "{}:{}",
        doubles(),
        std::env::var("PATH").unwrap_or_default()
    );
    Run::new(env, file)
        .yes()
        .json()
        .env("PATH", path)
        .env("NVIDIA_SMI_FIXTURE", smi)
        .env("KMSG_FIXTURE", kmsg)
        .env("DCGMI_FIXTURE", "pass")
}

fn report(env: &Env) -> PathBuf {
    env.write("health.lua", REPORT)
}

fn has(logs: &[String], line: &str) -> bool {
    logs.iter().any(|l| l == line)
}

fn has_prefix(logs: &[String], prefix: &str) -> bool {
    logs.iter().any(|l| l.starts_with(prefix))
}

#[test]
fn a_sound_machine_is_ok_and_says_what_it_read() {
    let env = Env::new();
    let out = on_node(&env, &report(&env), "d570-h200x4", "clean")
        .expect_exit(0)
        .run();
    let logs = out.logs();
    assert_eq!(
        logs,
        [
            "verdict ok gpus 4",
            "xid readable=true source=dmesg events=0 known=0"
        ],
        "{logs:?}"
    );
}

#[test]
fn a_pending_remap_is_critical_with_its_action() {
    let env = Env::new();
    let out = on_node(&env, &report(&env), "d550-h100x2-remap-pending", "clean")
        .expect_exit(0)
        .run();
    let logs = out.logs();
    assert!(has(&logs, "verdict critical gpus 2"), "{logs:?}");
    assert!(
        has(&logs, "finding GPU 1 memory.remap_pending critical gpu_reset: a memory row remap is pending: it takes effect when the GPU is reset"),
        "{logs:?}"
    );
}

#[test]
fn xids_from_the_kernel_log_land_on_their_gpus() {
    let env = Env::new();
    let out = on_node(&env, &report(&env), "d570-h200x4", "xid-79")
        .expect_exit(0)
        .run();
    let logs = out.logs();
    assert!(has(&logs, "verdict critical gpus 4"), "{logs:?}");
    // 0000:4c:00 is the third GPU of that machine.
    assert!(
        has_prefix(
            &logs,
            "finding GPU 2 xid critical node_reboot: Xid 79 (GPU has fallen off the bus)"
        ),
        "{logs:?}"
    );
    assert!(
        has(&logs, "xid readable=true source=dmesg events=2 known=2"),
        "{logs:?}"
    );
}

#[test]
fn every_xid_of_a_busy_log_is_read_and_an_unknown_one_said_so() {
    let env = Env::new();
    let out = on_node(&env, &report(&env), "d570-h200x4", "xid-modern")
        .expect_exit(0)
        .run();
    let logs = out.logs();
    assert!(has(&logs, "verdict critical gpus 4"), "{logs:?}");
    let unknown = logs
        .iter()
        .find(|l| l.contains("Xid 999"))
        .unwrap_or_else(|| panic!("no Xid 999 in {logs:?}"));
    assert!(
        unknown.starts_with("finding GPU 0 xid warn none: Xid 999 (not in runbook's Xid catalog"),
        "{unknown}"
    );
    let xid_line = logs.iter().find(|l| l.starts_with("xid ")).unwrap();
    assert!(
        xid_line.starts_with("xid readable=true source=dmesg events="),
        "{xid_line}"
    );
    // The older driver's form (no pid= name=, a bare number) reads the same.
    let out = on_node(&env, &report(&env), "d470-v100x2", "xid-legacy")
        .expect_exit(0)
        .run();
    let logs = out.logs();
    assert!(
        logs.iter()
            .any(|l| l.starts_with("finding GPU") && l.contains(" xid ")),
        "{logs:?}"
    );
}

#[test]
fn where_dmesg_is_restricted_journalctl_reads_the_kernel_log() {
    let env = Env::new();
    let out = on_node(&env, &report(&env), "d570-h200x4", "dmesg-restricted")
        .expect_exit(0)
        .run();
    let logs = out.logs();
    assert!(
        has_prefix(&logs, "xid readable=true source=journalctl events="),
        "{logs:?}"
    );
}

#[test]
fn a_kernel_log_nobody_could_read_is_said_not_taken_for_no_xid() {
    let env = Env::new();
    let out = on_node(&env, &report(&env), "d570-h200x4", "container")
        .expect_exit(0)
        .run();
    let logs = out.logs();
    assert!(has(&logs, "verdict ok gpus 4"), "{logs:?}");
    assert!(
        has(&logs, "xid readable=false source=nil events=0 known=0"),
        "{logs:?}"
    );
    assert!(
        has(&logs, "note the kernel log of local could not be read (dmesg: read kernel buffer failed: Operation not permitted; journalctl -k: no kernel messages (it cannot see the kernel's log)): Xid errors were not checked"),
        "{logs:?}"
    );
}

#[test]
fn nvidia_smi_failing_is_a_finding_of_the_node() {
    let env = Env::new();
    let rb = report(&env);
    let out = on_node(&env, &rb, "gpu-lost", "clean").expect_exit(0).run();
    let logs = out.logs();
    assert!(has(&logs, "verdict critical gpus 0"), "{logs:?}");
    assert!(
        has(&logs, "node nvidia_smi critical node_reboot: a GPU has fallen off the bus or is otherwise inaccessible (nvidia-smi exit status 15: Unable to determine the device handle for GPU 0000:4C:00.0: GPU is lost.  Reboot the system to recover this GPU)"),
        "{logs:?}"
    );
    let out = on_node(&env, &rb, "driver-fail", "clean")
        .expect_exit(0)
        .run();
    let logs = out.logs();
    assert!(
        has_prefix(
            &logs,
            "node nvidia_smi critical node_reboot: the NVIDIA driver is not loaded (nvidia-smi exit status 9: NVIDIA-SMI has failed"
        ),
        "{logs:?}"
    );
    let out = on_node(&env, &rb, "none", "clean").expect_exit(0).run();
    let logs = out.logs();
    assert!(has(&logs, "verdict ok gpus 0"), "{logs:?}");
    assert!(
        has(&logs, "note nvidia-smi on local found no GPU"),
        "{logs:?}"
    );
}

#[test]
fn no_nvidia_smi_fails_unless_optional() {
    let env = Env::new();
    let rb = report(&env);
    // Only the kernel-log doubles: no nvidia-smi anywhere on PATH.
    let empty = env.scratch().join("bin");
    std::fs::create_dir_all(&empty).unwrap();
    let path = format!(
        "{}:/usr/bin:/bin",
        repo().join("tests/bin/gpu-node").display()
    );
    let run = || Run::new(&env, &rb).yes().json().env("PATH", &path);
    let err = run().expect_exit(1).run().step_error(FAILED);
    assert!(
        err.contains("cannot run 'nvidia-smi' on local: no such program"),
        "{err}"
    );
    let out = run().set("optional", "true").expect_exit(0).run();
    let logs = out.logs();
    assert!(has(&logs, "verdict ok gpus 0"), "{logs:?}");
    assert!(
        has(
            &logs,
            "note no nvidia-smi on local: no NVIDIA driver here, nothing to check"
        ),
        "{logs:?}"
    );
}

#[test]
fn dcgm_diagnostics_pass_fail_skip_and_hang() {
    let env = Env::new();
    let rb = report(&env);
    let run_at = |fixture: &str, level: &str| {
        on_node(&env, &rb, "d570-h200x4", "clean")
            .env("DCGMI_FIXTURE", fixture)
            .set("dcgm", level)
            .set("dcgm_timeout", "3s")
            .expect_exit(0)
            .run()
            .logs()
    };
    let run = |fixture: &str| run_at(fixture, "2");
    let pass = run("pass");
    assert!(has(&pass, "verdict ok gpus 4"), "{pass:?}");
    assert!(
        has_prefix(&pass, "dcgm level=2 passed=true timed_out=false tests="),
        "{pass:?}"
    );
    let fail = run("fail-memory");
    assert!(has(&fail, "verdict critical gpus 4"), "{fail:?}");
    assert!(
        fail.iter().any(|l| l.starts_with("finding GPU")
            && l.contains(" dcgm critical contact_support: DCGM level 2 test ")),
        "{fail:?}"
    );
    assert!(has_prefix(&fail, "dcgm level=2 passed=false"), "{fail:?}");
    // The power test is skipped at level 3 (exit 0): not passed all the same.
    let skip = run_at("skip-power", "3");
    assert!(has_prefix(&skip, "dcgm level=3 passed=false"), "{skip:?}");
    assert!(
        skip.iter().any(|l| l.contains("was skipped (not passed)")),
        "{skip:?}"
    );
    let t0 = std::time::Instant::now();
    let hang = run("hang");
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(30),
        "the hard timeout ends a hung diagnostic"
    );
    assert!(
        has(&hang, "dcgm level=2 passed=false timed_out=true tests=0"),
        "{hang:?}"
    );
    assert!(
        has_prefix(
            &hang,
            "node dcgm critical drain_and_reset: dcgmi diag -r 2 did not finish in time"
        ),
        "{hang:?}"
    );
}

#[test]
fn no_dcgmi_is_a_note_never_an_error() {
    let env = Env::new();
    let rb = report(&env);
    // nvidia-smi's double without the gpu-node folder: this machine's own dmesg, and no
    // dcgmi anywhere.
    let path = format!("{}:/usr/bin:/bin", repo().join("tests/bin").display());
    let out = Run::new(&env, &rb)
        .yes()
        .json()
        .env("PATH", path)
        .env("NVIDIA_SMI_FIXTURE", "d570-h200x4")
        .set("dcgm", "1")
        .expect_exit(0)
        .run();
    let logs = out.logs();
    assert!(
        has(
            &logs,
            "note no dcgmi on local: DCGM diagnostics were not run"
        ),
        "{logs:?}"
    );
    assert!(!logs.iter().any(|l| l.starts_with("dcgm ")), "{logs:?}");
}

#[test]
fn bad_options_name_the_line() {
    let env = Env::new();
    let rb = env.write(
        "bad.lua",
        r#"runbook { name = "bad" }
step("x", function()
  gpu.health(target("local"), { dcgm = 4 })
end)
"#,
    );
    let err = on_node(&env, &rb, "d570-h200x4", "clean")
        .expect_exit(1)
        .run()
        .step_error(FAILED);
    assert!(
        err.contains("bad.lua:3: gpu.health(): dcgm: expected a whole number from 1 to 3, got 4"),
        "{err}"
    );
    let rb = env.write(
        "typo.lua",
        r#"runbook { name = "typo" }
step("x", function()
  gpu.health(target("local"), { sinse = "1h" })
end)
"#,
    );
    // A misspelt option is found before anything runs (the typo check), exit 2.
    let out = on_node(&env, &rb, "d570-h200x4", "clean")
        .expect_exit(2)
        .run();
    assert!(
        out.stderr_str().contains("typo.lua:3: unknown 'sinse': gpu.health() takes no option 'sinse'; did you mean 'since'?"),
        "{}",
        out.describe()
    );
}

#[test]
fn offline_plans_the_reads_and_claims_nothing() {
    let env = Env::new();
    let out = on_node(&env, &report(&env), "d570-h200x4", "xid-79")
        .dry_run()
        .offline()
        .expect_exit(0)
        .run();
    let logs = out.logs();
    assert_eq!(logs, ["verdict nil gpus 0"], "{logs:?}");
}

#[test]
fn require_healthy_fails_naming_the_gpu_the_finding_and_the_action() {
    let env = Env::new();
    let rb = env.write(
        "require.lua",
        r#"runbook { name = "require" }
step("GPUs sound", function()
  gpu.require(target("local"), { count = 8, healthy = true })
end)
"#,
    );
    on_node(&env, &rb, "h200x8", "clean").expect_exit(0).run();
    // 0000:4c:00 is GPU 2 of h200x8.
    let err = on_node(&env, &rb, "h200x8", "xid-79")
        .expect_exit(1)
        .run()
        .step_error(FAILED);
    assert!(
        err.contains("require.lua:3: local: GPU 2: Xid 79 (GPU has fallen off the bus)"),
        "{err}"
    );
    assert!(err.contains("→ node_reboot"), "{err}");
}

#[test]
fn the_gpu_health_runbook_prints_a_line_per_gpu_and_fails_on_a_critical_one() {
    let env = Env::new();
    let rb = repo().join("runbooks/gpu-health.lua");
    let out = on_node(&env, &rb, "h200x8", "clean").expect_exit(0).run();
    let logs = out.logs();
    for i in 0..8 {
        assert!(has(&logs, &format!("GPU {i} NVIDIA H200: ok")), "{logs:?}");
    }
    let out = on_node(&env, &rb, "h200x8", "xid-79").expect_exit(1).run();
    let warned = out.logs_at(Level::Warn);
    assert!(
        warned.iter().any(|l| l
            .starts_with("GPU 2 NVIDIA H200: critical: Xid 79 (GPU has fallen off the bus)")
            && l.contains("→ node_reboot")),
        "{warned:?}"
    );
    let err = out.step_error(FAILED);
    assert!(
        err.contains("GPU 2: Xid 79 (GPU has fallen off the bus)"),
        "{err}"
    );
    // What a GPU does not report is "n/a", never "nil".
    let out = on_node(&env, &rb, "na-fields", "clean")
        .expect_exit(0)
        .run();
    let logs = out.logs();
    assert!(!logs.iter().any(|l| l.contains("nil")), "{logs:?}");
    assert!(logs.iter().any(|l| l.contains("n/a")), "{logs:?}");
}

/// clean-reset stops before changing anything when a GPU is critical, naming it, the
/// finding and the action; `ignore_health=true` goes on (its dry-run plans every change).
#[test]
fn clean_reset_stops_on_a_critical_gpu_before_anything_changes() {
    let env = Env::new();
    let work = env.scratch();
    let repo_dir = demo_repo(&work);
    let rb = repo().join("runbooks/clean-reset.lua");
    let sets = [
        format!("venv={}", work.join("venv").display()),
        format!("repo={}", repo_dir.display()),
        "warmup=warmup.py".into(),
        "train=train.py 400".into(),
        format!("log={}", work.join("train.log").display()),
        format!("job=health-{}", std::process::id()),
    ];
    let args: Vec<&str> = sets.iter().flat_map(|s| ["--set", s.as_str()]).collect();
    let out = on_node(&env, &rb, "h200x8", "xid-79")
        .args(&args)
        .expect_exit(1)
        .run();
    let err = out.step_error(FAILED);
    assert!(
        err.contains("GPU 2: Xid 79 (GPU has fallen off the bus)")
            && err.contains("→ node_reboot")
            && err.contains(
                ": a clean reset will not help (--set ignore_health=true goes on anyway)"
            ),
        "{err}"
    );
    assert_eq!(changes_started(&out), 0, "{}", out.describe());
    assert!(!work.join("venv").exists());

    let out = on_node(&env, &rb, "h200x8", "xid-79")
        .args(&args)
        .dry_run()
        .set("ignore_health", "true")
        .expect_exit(0)
        .run();
    let warned = out.logs_at(Level::Warn);
    assert!(
        warned.iter().any(
            |l| l.contains("GPU 2: Xid 79") && l.ends_with(": going on (ignore_health = true)")
        ),
        "{warned:?}"
    );
}

/// Over SSH, on the node and inside its container 200 (the pct double runs commands with
/// the node's PATH): the same doubles, the same verdict, each named by its target.
#[test]
fn over_ssh_and_inside_a_pct_container() {
    require_sshd!();
    let mut fleet = Fleet::start(1);
    fleet.container(200);
    let bin = fleet.doubles_bin();
    let path = format!(
        "{}/gpu-node:{}:/usr/local/bin:/usr/bin:/bin",
        bin.display(),
        bin.display()
    );
    fleet.node("node1").set_env(&[
        ("PATH", path.as_str()),
        ("NVIDIA_SMI_FIXTURE", "h200x8"),
        ("KMSG_FIXTURE", "xid-79"),
    ]);
    let env = Env::new();
    let rb = report(&env);
    for ct in [None, Some("200")] {
        let mut run = Run::new(&env, &rb)
            .ssh(&fleet)
            .yes()
            .json()
            .set("host", "node1");
        if let Some(ct) = ct {
            run = run.set("ct", ct);
        }
        let logs = run.expect_exit(0).run().logs();
        assert!(has(&logs, "verdict critical gpus 8"), "{ct:?}: {logs:?}");
        assert!(
            has_prefix(
                &logs,
                "finding GPU 2 xid critical node_reboot: Xid 79 (GPU has fallen off the bus)"
            ),
            "{ct:?}: {logs:?}"
        );
    }
}

// In every real LXC container (busybox, busybox with util-linux, Debian minbase and
// full): nvidia-smi's double copied in; the container's own dmesg and journalctl, which
// may or may not see the host's kernel log: either it is read and named, or a note says
// it could not be, never a silent "no Xid". Then the kernel-log doubles, as a container
// that sees nothing: the note.
crate::in_containers!(health_in_a_real_container, |ct: &Ct| {
    let env = Env::new();
    let dir = ct.dir();
    dir.copy(&repo().join("tests/bin/nvidia-smi"), "tests/bin/nvidia-smi");
    dir.copy(&repo().join("tests/bin/gpu-node"), "tests/bin/gpu-node");
    dir.copy(
        &repo().join("tests/fixtures/nvidia-smi"),
        "tests/fixtures/nvidia-smi",
    );
    dir.copy(&repo().join("tests/fixtures/kmsg"), "tests/fixtures/kmsg");
    let body = r#"
step("health", function()
  local h = gpu.health(box)
  log.info("verdict " .. h.verdict .. " gpus " .. #h.gpus)
  log.info("xid readable=" .. tostring(h.xid.readable) .. " source=" .. tostring(h.xid.source))
  for _, n in ipairs(h.notes) do
    log.info("note " .. n)
  end
end)
"#;
    let out = CtRun::new(&env, &dir, EnvMode::Keep)
        .path_first(&dir.at("tests/bin"))
        .var("NVIDIA_SMI_FIXTURE", "d570-h200x4")
        .go(body, &[]);
    out.assert_exit(0);
    let logs = out.logs();
    assert_eq!(logs[0], "verdict ok gpus 4", "{logs:?}");
    let read = logs[1].starts_with("xid readable=true source=");
    let said = logs[1] == "xid readable=false source=nil"
        && logs.iter().any(|l| {
            l.starts_with(&format!(
                "note the kernel log of {} could not be read (",
                ct.target()
            ))
        });
    assert!(read || said, "{logs:?}");

    let out = CtRun::new(&env, &dir, EnvMode::Keep)
        .path_first(&dir.at("tests/bin/gpu-node"))
        .path_first(&dir.at("tests/bin"))
        .var("NVIDIA_SMI_FIXTURE", "d570-h200x4")
        .var("KMSG_FIXTURE", "container")
        .go(body, &[]);
    out.assert_exit(0);
    let logs = out.logs();
    if matches!(ct.kind, Kind::Busybox | Kind::BusyboxUtil) {
        // busybox sh runs its own dmesg applet before anything on PATH.
        assert!(logs[1].starts_with("xid readable="), "{logs:?}");
    } else {
        assert_eq!(logs[1], "xid readable=false source=nil", "{logs:?}");
        assert!(
            has_prefix(
                &logs,
                &format!(
                    "note the kernel log of {} could not be read (dmesg: read kernel buffer failed: Operation not permitted",
                    ct.target()
                )
            ),
            "{logs:?}"
        );
    }
});

/// On a node of a real Slurm cluster, through srun (which gives a command runbook's
/// environment, the doubles' PATH included), inside the running job's allocation.
#[test]
fn on_a_slurm_node_inside_its_job() {
    let c = require_slurm!();
    // One cluster for the whole suite: its tests take turns (they count its job steps).
    let _one = c.serial();
    let env = Env::new();
    let rb = report(&env);
    let host = format!("slurm:{}?job={}", c.node, c.job);
    let out = on_node(&env, &rb, "d550-h100x2-remap-pending", "clean")
        .env("SLURM_CONF", &c.conf)
        .set("host", &host)
        .timeout(std::time::Duration::from_secs(90))
        .expect_exit(0)
        .run();
    let logs = out.logs();
    assert!(has(&logs, "verdict critical gpus 2"), "{logs:?}");
    assert!(
        has_prefix(
            &logs,
            "finding GPU 1 memory.remap_pending critical gpu_reset"
        ),
        "{logs:?}"
    );
    assert!(
        has(&logs, "xid readable=true source=dmesg events=0 known=0"),
        "{logs:?}"
    );
}
