//! `gpu.probe` and `gpu.require` against the `nvidia-smi` test double (tests/bin/nvidia-smi,
//! fixtures in tests/fixtures/nvidia-smi/): locally with a chosen fixture, and over SSH
//! into a container, where the double is on the session's PATH.
use crate::common::sshd::Fleet;
use crate::common::*;
use std::path::{Path, PathBuf};

/// `runbook run FILE --yes --json` with the double first on PATH and `fixture` chosen.
fn with_fixture<'e>(env: &'e Env, fixture: &str, file: &Path) -> Run<'e> {
    Run::new(env, file)
        .yes()
        .json()
        .path_first(repo().join("tests/bin"))
        .env("NVIDIA_SMI_FIXTURE", fixture)
}

/// Checks in Lua: `check(cond, what)` fails the step with `what`.
const PRELUDE: &str = r#"
local function check(cond, what) if not cond then fail("check failed: " .. what) end end
local here = target("local")
"#;

fn runbook(env: &Env, body: &str) -> PathBuf {
    env.write(
        "gpu.lua",
        &subst(
            "runbook { name = \"gpu\" }\n@prelude@\n@body@",
            &[("prelude", &PRELUDE), ("body", &body)],
        ),
    )
}

#[test]
fn probe_parses_eight_h200s_and_their_processes() {
    let env = Env::new();
    let rb = runbook(
        &env,
        r#"
step("probe", function()
  local gs = gpu.probe(here)
  check(#gs == 8, "8 GPUs, got " .. #gs)
  check(gs.planned == nil, "not planned")
  local g0, g3 = gs[1], gs[4]
  check(g0.index == 0 and g3.index == 3, "indexes")
  check(g0.uuid == "GPU-bc087a02-3415-49ca-a6cd-1c580bad0d02", "uuid " .. tostring(g0.uuid))
  check(g0.name == "NVIDIA H200", "name")
  check(g0.memory_total_mib == 143771 and g0.memory_used_mib == 0, "memory")
  check(g0.utilization_pct == 0 and g0.temperature_c == 31, "util/temp")
  check(g0.driver_version == "580.82.07", "driver")
  check(#g0.processes == 0, "GPU 0 idle")
  check(g3.memory_used_mib == 81544 and g3.utilization_pct == 97, "GPU 3 busy")
  check(#g3.processes == 1, "one process on GPU 3")
  local p = g3.processes[1]
  check(p.pid == 1234 and p.name == "python" and p.used_memory_mib == 81000, "process")
end)
"#,
    );
    with_fixture(&env, "h200x8", &rb).expect_exit(0).run();
}

#[test]
fn unreported_fields_are_nil() {
    let env = Env::new();
    let rb = runbook(
        &env,
        r#"
step("probe", function()
  local gs = gpu.probe(here)
  check(#gs == 2, "2 GPUs")
  local a, b = gs[1], gs[2]
  check(a.utilization_pct == nil, "[N/A] utilization is nil")
  check(a.memory_used_mib == 1200 and a.temperature_c == 34, "reported values stay")
  check(b.memory_total_mib == nil and b.memory_used_mib == nil, "[N/A] memory is nil")
  check(b.utilization_pct == nil, "[Not Supported] is nil")
  check(b.temperature_c == nil, "temperature nil")
  check(b.driver_version == "580.82.07", "driver")
  local p = a.processes[1]
  check(#a.processes == 1 and p.pid == 4321, "process listed")
  check(p.name == nil and p.used_memory_mib == nil, "empty name and [N/A] memory are nil")
end)
"#,
    );
    with_fixture(&env, "na-fields", &rb).expect_exit(0).run();
}

#[test]
fn no_devices_is_an_empty_list() {
    let env = Env::new();
    let rb = runbook(
        &env,
        r#"
step("probe", function()
  local gs = gpu.probe(here)
  check(#gs == 0 and next(gs) == nil, "empty list")
end)
"#,
    );
    with_fixture(&env, "none", &rb).expect_exit(0).run();
}

#[test]
fn a_driver_failure_fails_naming_the_target() {
    let env = Env::new();
    let rb = runbook(&env, "step(\"probe\", function() gpu.probe(here) end)\n");
    let err = with_fixture(&env, "driver-fail", &rb)
        .expect_exit(1)
        .run()
        .step_error(FAILED);
    assert!(err.contains("gpu.lua:"), "{err}");
    assert!(
        err.contains("gpu.probe on local: nvidia-smi failed (exit code 9): NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"),
        "{err}"
    );
}

#[test]
fn missing_nvidia_smi_fails_naming_the_target() {
    let env = Env::new();
    let rb = runbook(&env, "step(\"probe\", function() gpu.probe(here) end)\n");
    let empty = env.scratch();
    let err = Run::new(&env, &rb)
        .yes()
        .json()
        .env("PATH", &empty)
        .expect_exit(1)
        .run()
        .step_error(FAILED);
    assert!(
        err.contains("cannot run 'nvidia-smi' on local: no such program"),
        "{err}"
    );
}

#[test]
fn require_names_what_is_short() {
    let cases: &[(&str, &str, &str)] = &[
        ("h200x8", "{ count = 9 }", "local: needs 9 GPUs, found 8"),
        (
            "h200x8",
            "{ count = 8, idle = true }",
            "local: GPU 3 (NVIDIA H200) is busy: pid 1234 python (81000 MiB)",
        ),
        (
            "h200x8",
            "{ count = 8, min_free_mib = 70000 }",
            "GPU 3 has 62227 MiB free, needs 70000",
        ),
        (
            "h200x8",
            "{ name = \"A100\" }",
            "local: needs 1 GPU matching \"A100\", found 0 (has GPU 0 (NVIDIA H200), GPU 1",
        ),
        (
            "na-fields",
            "{ count = 2, min_free_mib = 20000 }",
            "GPU 1 does not report its memory use, needs 20000 MiB free",
        ),
        (
            "na-fields",
            "{ count = 1, min_free_mib = 143000 }",
            "GPU 0 has 142571 MiB free, needs 143000; GPU 1 does not report",
        ),
        ("none", "{}", "local: needs 1 GPU, found 0"),
    ];
    for (fixture, opts, expected) in cases {
        let env = Env::new();
        let rb = runbook(
            &env,
            &format!("step(\"need\", function() gpu.require(here, {opts}) end)\n"),
        );
        let err = with_fixture(&env, fixture, &rb)
            .expect_exit(1)
            .run()
            .step_error(FAILED);
        assert!(
            err.contains(expected),
            "{fixture} {opts}: expected {expected:?} in {err}"
        );
    }
}

#[test]
fn require_returns_the_probe_when_satisfied() {
    let env = Env::new();
    let rb = runbook(
        &env,
        r#"
step("need", function()
  local gs = gpu.require(here, { count = 8, min_free_mib = 60000, name = "h200" })
  check(#gpu.require(here, { count = 0 }) == 8, "count = 0: any number")
  check(#gs == 8, "the whole probe comes back")
end)
"#,
    );
    with_fixture(&env, "h200x8", &rb).expect_exit(0).run();
}

#[test]
fn require_rejects_bad_options() {
    let env = Env::new();
    let rb = runbook(
        &env,
        // Built before the call: written in it, `check` refuses it as the file loads.
        "step(\"need\", function() local o = { cuont = 8 }; gpu.require(here, o) end)\n",
    );
    let err = with_fixture(&env, "h200x8", &rb).run().step_error(FAILED);
    assert!(
        err.contains("gpu.require(): unknown option 'cuont'") && err.contains("count"),
        "{err}"
    );
    let rb = runbook(
        &env,
        "step(\"need\", function() gpu.require(here, { count = -1 }) end)\n",
    );
    let err = with_fixture(&env, "h200x8", &rb).run().step_error(FAILED);
    assert!(
        err.contains("count: expected a whole number of at least 0, got -1"),
        "{err}"
    );
    let rb = runbook(&env, "step(\"p\", function() gpu.probe(\"local\") end)\n");
    let err = with_fixture(&env, "h200x8", &rb).run().step_error(FAILED);
    assert!(
        err.contains("gpu.probe: the first argument is a target"),
        "{err}"
    );
}

/// The probe is a read: a dry-run checks for real; offline it is only planned.
#[test]
fn dry_run_checks_and_offline_plans() {
    let env = Env::new();
    let rb = runbook(
        &env,
        r#"
step("need", function()
  local gs = gpu.require(here, { count = 8, idle = true })
  log.info("planned=" .. tostring(gs.planned) .. " n=" .. #gs)
end)
"#,
    );
    let out = with_fixture(&env, "h200x8", &rb)
        .dry_run()
        .expect_exit(1)
        .run();
    assert!(out
        .step_error(FAILED)
        .contains("GPU 3 (NVIDIA H200) is busy"));

    let out = with_fixture(&env, "h200x8", &rb)
        .dry_run()
        .offline()
        .expect_exit(0)
        .run();
    assert!(
        out.logs().contains(&"planned=true n=0".to_string()),
        "{:?}",
        out.logs()
    );
    let events = out.run_events();
    let (effect, command) =
        pick!(events, Event::ActionPlanned { effect, command, .. } => (effect, command))
            .into_iter()
            .next()
            .expect("the read is planned");
    assert_eq!(*effect, Effect::Read);
    assert!(command.starts_with("nvidia-smi --query-gpu=index,uuid,name,memory.total"));
}

/// Over SSH, inside container 200: the pct double runs the command with the node's PATH,
/// where the nvidia-smi double is (default fixture h200x8).
#[test]
fn probe_over_ssh_inside_a_container() {
    require_sshd!();
    let fleet = Fleet::start(1);
    fleet.container(200);
    let env = Env::new();
    let rb = env.write(
        "remote_gpu.lua",
        r#"
runbook { name = "remote-gpu" }
step("probe", function()
  for _, t in ipairs({ target("node1"), target("node1"):pct(200) }) do
    local gs = gpu.probe(t)
    if #gs ~= 8 then fail(t.name .. ": " .. #gs .. " GPUs") end
    log.info(t.name .. ": " .. gs[4].name .. " busy with " .. gs[4].processes[1].name)
  end
  gpu.require(target("node1"):pct(200), { count = 8, idle = true })
end)
"#,
    );
    let out = Run::new(&env, &rb)
        .ssh(&fleet)
        .yes()
        .json()
        .expect_exit(1)
        .run();
    let logs = out.logs();
    assert!(
        logs.contains(&"node1: NVIDIA H200 busy with python".to_string()),
        "{logs:?}"
    );
    assert!(
        logs.contains(&"node1/ct200: NVIDIA H200 busy with python".to_string()),
        "{logs:?}"
    );
    let err = out.step_error(FAILED);
    assert!(
        err.contains("node1/ct200: GPU 3 (NVIDIA H200) is busy: pid 1234 python (81000 MiB)"),
        "{err}"
    );
}

/// The double itself fails like the real tool on what it does not know.
#[test]
fn the_double_rejects_unknown_options_and_lists_gpus() {
    let smi = repo().join("tests/bin/nvidia-smi");
    let out = std::process::Command::new(&smi)
        .arg("--bogus")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ERROR: Option --bogus is not recognized. Please run 'nvidia-smi -h'.\n"
    );
    let out = std::process::Command::new(&smi)
        .arg("-L")
        .env_remove("NVIDIA_SMI_FIXTURE")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 8);
    assert!(
        text.starts_with("GPU 0: NVIDIA H200 (UUID: GPU-bc087a02-3415-49ca-a6cd-1c580bad0d02)\n")
    );
    let out = std::process::Command::new(&smi)
        .args(["--query-gpu=name,memory.total", "--format=csv"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("name, memory.total [MiB]\nNVIDIA H200, 143771 MiB\n"),
        "{text}"
    );
    let out = std::process::Command::new(&smi)
        .args(["--query-gpu=index", "--format=csv,noheader"])
        .env("NVIDIA_SMI_FIXTURE", "none")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "No devices were found\n"
    );
}
