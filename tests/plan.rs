//! Plans: `runbook plan FILE -o PLAN.json`, then `runbook apply PLAN.json`.
//!
//! Fidelity: every shipped runbook and example is planned and applied on this machine
//! (clean-reset on the demo project, and in a container on a Proxmox node behind a real
//! sshd: common/sshd.rs and the pct double; the fleet example on two sshd nodes), and the
//! changes the apply made (from its record) are the plan's, in order. Drift: the runbook
//! edited, a param, a target, or a read that decides a change (which directory is
//! deleted, whether a job runs) changed between plan and apply: refused (exit 2) or
//! stopped before the change (exit 1), and a canary shows nothing was changed. Old plans,
//! unknown formats, and secrets (never in a plan file). The Markdown of one runbook is a
//! snapshot.
use crate::common;
use crate::common::sshd::Fleet;
use crate::common::*;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Output;

// ---------------------------------------------------------------------------------------
// helpers

fn fixture(name: &str) -> PathBuf {
    repo().join("tests/runbooks/plan").join(name)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn describe(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    )
}

fn sets(pairs: &[(&str, &str)]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|(k, v)| ["--set".to_string(), format!("{k}={v}")])
        .collect()
}

/// `runbook` that cannot touch this machine's own state: HOME and the compile caches
/// point into the test's scratch dir, GPUs come from the nvidia-smi double.
fn sandboxed(env: &Env) -> assert_cmd::Command {
    let scratch = env.scratch();
    let path = format!(
        "{}:{}",
        repo().join("tests/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = env.cmd();
    c.env("HOME", scratch.join("home"))
        .env("XDG_CACHE_HOME", scratch.join("home/.cache"))
        .env("TORCHINDUCTOR_CACHE_DIR", scratch.join("inductor"))
        .env("TORCH_EXTENSIONS_DIR", scratch.join("extensions"))
        .env("TRITON_CACHE_DIR", scratch.join("triton"))
        .env("PATH", path)
        .write_stdin("");
    c
}

fn plan_path(env: &Env) -> PathBuf {
    env.tmp.path().join("plan.json")
}

/// `runbook plan FILE ARGS… -o plan.json`, which must succeed.
fn make_plan(env: &Env, file: &Path, args: &[String]) -> Value {
    let out = sandboxed(env)
        .arg("plan")
        .arg(file)
        .args(args)
        .arg("-o")
        .arg(plan_path(env))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "plan {}: {}",
        file.display(),
        describe(&out)
    );
    read_plan(env)
}

fn read_plan(env: &Env) -> Value {
    serde_json::from_str(&std::fs::read_to_string(plan_path(env)).unwrap()).unwrap()
}

fn write_plan(env: &Env, plan: &Value) {
    std::fs::write(plan_path(env), serde_json::to_string_pretty(plan).unwrap()).unwrap();
}

/// A plan of `note.lua` (a read of DIR/note, which says "one", and `touch DIR/touched`)
/// in the test's scratch dir, saved as plan.json; and that dir.
fn note_plan(env: &Env) -> (Value, PathBuf) {
    let dir = env.scratch();
    std::fs::write(dir.join("note"), "one").unwrap();
    let plan = make_plan(
        env,
        &fixture("note.lua"),
        &sets(&[("dir", &dir.display().to_string())]),
    );
    (plan, dir)
}

/// `runbook apply plan.json ARGS…`.
fn apply(env: &Env, args: &[&str]) -> Output {
    sandboxed(env)
        .arg("apply")
        .arg(plan_path(env))
        .args(args)
        .output()
        .unwrap()
}

fn sha256_of(path: &Path) -> String {
    let digest = Sha256::digest(std::fs::read(path).unwrap());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// (target, command as shown) of every change in the plan, in order.
fn planned(plan: &Value) -> Vec<(String, String)> {
    plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["target"].as_str().unwrap().to_string(),
                c["shown"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// (target, command) of every change the record says was started, in order.
fn applied(events: &[Event]) -> Vec<(String, String)> {
    pick!(
        events,
        Event::ActionStarted { effect: Effect::Change, target, command, .. }
            => (target.clone(), command.clone())
    )
}

/// The apply went through, made exactly the plan's changes in order, and its record
/// names the plan by its sha256, as `history` does.
fn assert_applied_as_planned(env: &Env, what: &str, plan: &Value, out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: apply: {}",
        describe(out)
    );
    let events = env.last_record();
    assert_eq!(
        applied(&events),
        planned(plan),
        "{what}: the applied changes are not the plan's"
    );
    let sha = sha256_of(&plan_path(env));
    assert!(
        matches!(&events[0], Event::RunStarted { plan: Some(p), .. } if *p == sha),
        "{what}: {:?}",
        events[0]
    );
    let history = env.cmd().arg("history").output().unwrap();
    assert!(
        stdout(&history).contains(&sha[..12]),
        "{what}: history names the plan:\n{}",
        stdout(&history)
    );
}

/// Nothing was changed: no record, or one where no change started.
fn assert_nothing_changed(env: &Env, what: &str) {
    if env.record_count() == 0 {
        return;
    }
    let events = env.last_record();
    assert!(
        applied(&events).is_empty(),
        "{what}: a change started: {events:#?}"
    );
}

fn uv_present() -> bool {
    std::process::Command::new("uv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

macro_rules! require_uv {
    () => {
        if !uv_present() {
            if std::env::var_os("CI").is_some() {
                panic!("uv is required (scripts/test installs it)");
            }
            eprintln!("skipped: uv is not installed (scripts/test installs it)");
            return;
        }
    };
}

/// A git checkout of the demo project (the "model code" clean-reset restores), with
/// `train.py` changed since its commit.
fn hacked_demo_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("dflash");
    std::fs::create_dir_all(&repo).unwrap();
    for f in ["kernels.py", "warmup.py", "train.py"] {
        std::fs::copy(common::repo().join("examples/train").join(f), repo.join(f)).unwrap();
    }
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.invalid",
        "commit",
        "-qm",
        "known good",
    ]);
    std::fs::write(repo.join("train.py"), "raise SystemExit('hacked')\n").unwrap();
    repo
}

/// clean-reset's params for the demo project under `work` (each test its own job).
fn demo_sets(repo: &Path, work: &Path, job: &str) -> Vec<String> {
    let job = format!("{job}-{}", std::process::id());
    sets(&[
        ("venv", &work.join("venv").display().to_string()),
        ("repo", &repo.display().to_string()),
        ("warmup", "warmup.py"),
        ("train", "train.py 400"),
        ("log", &work.join("train.log").display().to_string()),
        ("min_throughput", "1"),
        ("wait", "60s"),
        ("job", &job),
    ])
}

/// Runs `lua` (a step body; `T` is `target_expr`) for real with --yes.
fn run_snippet(env: &Env, target_expr: &str, lua: &str, extra: &[String]) -> Output {
    let rb = env.write(
        "snippet.lua",
        &subst(
            r#"runbook { name = "snippet" }
local T = @target_expr@
step("s", function()
@lua@
end)
"#,
            &[("target_expr", &target_expr), ("lua", &lua)],
        ),
    );
    // Sandboxed as the runs under test are: jobs' pid files are under HOME.
    sandboxed(env)
        .arg("run")
        .arg(&rb)
        .args(extra)
        .arg("--yes")
        .output()
        .unwrap()
}

fn stop_job(env: &Env, target_expr: &str, job: &str, extra: &[String]) {
    let name = format!("{job}-{}", std::process::id());
    let out = run_snippet(
        env,
        target_expr,
        &subst(r#"proc.stop(T, { name = "@name@" })"#, &[("name", &name)]),
        extra,
    );
    assert!(out.status.success(), "{}", describe(&out));
}

fn start_job(env: &Env, target_expr: &str, job: &str, log: &Path, extra: &[String]) {
    let name = format!("{job}-{}", std::process::id());
    let out = run_snippet(
        env,
        target_expr,
        &subst(
            r#"proc.spawn(T, { name = "@name@", cmd = { "sleep", "120" }, log = "@log@" })"#,
            &[("name", &name), ("log", &log.display())],
        ),
        extra,
    );
    assert!(out.status.success(), "{}", describe(&out));
}

/// Whether job `job` (named as above) runs, as `proc` sees it.
fn job_runs(env: &Env, target_expr: &str, job: &str, extra: &[String]) -> bool {
    let name = format!("{job}-{}", std::process::id());
    // A dry-run of a stop plans it only when the job runs.
    let rb = env.write(
        "probe.lua",
        &subst(
            r#"runbook { name = "probe" }
local T = @target_expr@
step("s", function() proc.stop(T, { name = "@name@" }) end)
"#,
            &[("target_expr", &target_expr), ("name", &name)],
        ),
    );
    let out = sandboxed(env)
        .arg("run")
        .arg(&rb)
        .args(extra)
        .args(["--dry-run", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    stamped_of(parse_ndjson(&out.stdout)).iter().any(|s| {
        matches!(
            s.event,
            Event::ActionPlanned {
                effect: Effect::Change,
                ..
            }
        )
    })
}

// ---------------------------------------------------------------------------------------
// 1. fidelity: plan → apply for every shipped runbook and every example

/// Every `.lua` in runbooks/ and examples/ (and their folders), found at test time.
fn repo_runbooks() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "lua") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    for dir in ["runbooks", "examples"] {
        walk(&repo().join(dir), &mut files);
    }
    files.sort();
    files
}

/// What each runbook needs to run in a sandbox here; `None`: covered by its own test
/// below. A runbook added to the repo without an entry fails the test.
fn sandbox_sets(env: &Env, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(repo()).unwrap().display().to_string();
    let scratch = env.scratch();
    let path = |p: &str| scratch.join(p).display().to_string();
    Some(match rel.as_str() {
        "runbooks/cache-reset.lua" => {
            let cache = scratch.join("param-cache");
            std::fs::create_dir_all(cache.join("fx")).unwrap();
            std::fs::write(cache.join("fx/a.kernel"), "k").unwrap();
            sets(&[("cache_dirs", &path("param-cache"))])
        }
        "runbooks/env-report.lua" | "runbooks/gpu-health.lua" | "examples/trim-caches.lua" => {
            Vec::new()
        }
        "runbooks/venv-rebuild.lua" => {
            assert!(uv_present(), "uv is required (scripts/test installs it)");
            sets(&[("venv", &path("rebuilt-venv"))])
        }
        "runbooks/warm-cache.lua" => {
            let venv = scratch.join("venv");
            let made = std::process::Command::new("python3")
                .args(["-m", "venv", "--without-pip"])
                .arg(&venv)
                .status()
                .unwrap();
            assert!(made.success());
            let script = repo().join("examples/train/warmup.py");
            sets(&[
                ("venv", &venv.display().to_string()),
                ("script", &script.display().to_string()),
            ])
        }
        "examples/cache-rotate.lua" => {
            // A cache to set aside, and older copies: one is pruned (keep = 2).
            let cache = scratch.join("cache");
            std::fs::create_dir_all(&cache).unwrap();
            std::fs::write(cache.join("a.kernel"), "k").unwrap();
            for stamp in ["20240101-000000-1", "20240201-000000-1"] {
                std::fs::create_dir_all(scratch.join(format!("cache.old-{stamp}"))).unwrap();
            }
            sets(&[("cache", &path("cache"))])
        }
        "examples/quickstart.lua" => sets(&[("dir", &path("quickstart"))]),
        "examples/config-files.lua" => sets(&[("dir", &path("config"))]),
        "examples/fleet/cache-rollout.lua" => {
            // On this machine alone: the capture on the source (the restore on other nodes
            // is tests/cache_rollout.rs, over sshd).
            let cache = scratch.join("inductor");
            std::fs::create_dir_all(&cache).unwrap();
            std::fs::write(cache.join("a.kernel"), "k").unwrap();
            let venv = scratch.join("venv");
            let made = std::process::Command::new("python3")
                .args(["-m", "venv", "--without-pip"])
                .arg(&venv)
                .status()
                .unwrap();
            assert!(made.success());
            sets(&[
                ("source", "local"),
                ("nodes", "local"),
                ("cache", &path("inductor")),
                ("venv", &venv.display().to_string()),
            ])
        }
        // Its own tests below: the demo project (locally and in a container), the fleet.
        "runbooks/clean-reset.lua" | "examples/fleet/gpu-uptime.lua" => return None,
        // Needs the real Slurm cluster: planned and applied in tests/slurm.rs.
        "examples/slurm/clean-reset.lua" => return None,
        other => panic!("{other}: a runbook tests/plan.rs does not plan and apply yet; add it"),
    })
}

#[test]
fn every_runbook_and_example_applies_exactly_its_plan() {
    let mut covered = Vec::new();
    for file in repo_runbooks() {
        let env = Env::new();
        let Some(args) = sandbox_sets(&env, &file) else {
            continue;
        };
        let what = file.display().to_string();
        let plan = make_plan(&env, &file, &args);
        assert_eq!(plan["format"], 1, "{what}");
        let out = apply(&env, &["--yes"]);
        assert_applied_as_planned(&env, &what, &plan, &out);
        covered.push(what);
    }
    assert!(covered.len() >= 8, "{covered:?}");
}

#[test]
fn clean_reset_applies_its_plan_and_a_job_started_since_stops_it_before_anything() {
    require_uv!();
    let env = Env::new();
    let work = env.scratch();
    let repo = hacked_demo_repo(&work);
    let cache = work.join("inductor");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("stale.kernel"), "old").unwrap();
    let file = common::repo().join("runbooks/clean-reset.lua");
    let args = demo_sets(&repo, &work, "plan-local");
    let plan = make_plan(&env, &file, &args);
    let summaries: Vec<&str> = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["summary"].as_str().unwrap())
        .collect();
    assert!(
        summaries.iter().any(|s| s.contains("restore 1 file in")),
        "{summaries:?}"
    );
    let out = apply(&env, &["--yes"]);
    assert_applied_as_planned(&env, "clean-reset", &plan, &out);
    assert!(std::fs::read_to_string(repo.join("train.py"))
        .unwrap()
        .contains("Ktok/s"));

    // Drift: planned while the job is not running (nothing to stop), applied after it
    // was started: stopping it was never in the plan, so the apply stops before that,
    // and before anything else.
    stop_job(&env, r#"target("local")"#, "plan-local", &[]);
    std::fs::write(repo.join("train.py"), "raise SystemExit('hacked')\n").unwrap();
    let plan = make_plan(&env, &file, &args);
    assert!(!planned(&plan).iter().any(|(_, c)| c.contains("proc-stop")));
    start_job(
        &env,
        r#"target("local")"#,
        "plan-local",
        &work.join("other.log"),
        &[],
    );
    let venv_before = std::fs::metadata(work.join("venv/pyvenv.cfg"))
        .unwrap()
        .modified()
        .unwrap();
    let records_before = env.record_count();
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let said = stderr(&out);
    assert!(
        said.contains("step \"stop the training job\": this change is not one that was confirmed for this step")
            && said.contains("confirmed: nothing more in this step"),
        "{said}"
    );
    assert_eq!(env.record_count(), records_before + 1);
    assert_nothing_changed(&env, "clean-reset with a job started since");
    assert!(job_runs(&env, r#"target("local")"#, "plan-local", &[]));
    assert_eq!(
        std::fs::read_to_string(repo.join("train.py")).unwrap(),
        "raise SystemExit('hacked')\n",
        "the code was not restored"
    );
    assert_eq!(
        std::fs::metadata(work.join("venv/pyvenv.cfg"))
            .unwrap()
            .modified()
            .unwrap(),
        venv_before,
        "the venv was not rebuilt"
    );
    stop_job(&env, r#"target("local")"#, "plan-local", &[]);
}

/// The plan a reviewer approves for a container on a Proxmox node (`--format md`), and its
/// apply through a real sshd and the pct double.
#[test]
fn clean_reset_in_a_container_behind_ssh_applies_its_plan() {
    require_sshd!();
    require_uv!();
    let fleet = Fleet::start(1);
    let ct = fleet.container(200);
    let env = Env::new();
    // The container sees the node's files except /tmp and /root: work under /var/tmp.
    let work = tempfile::Builder::new()
        .prefix("runbook-plan-ct-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let repo = hacked_demo_repo(work.path());
    // A stale inductor cache of the container's root, to be set aside.
    std::fs::create_dir_all(ct.join("tmp/torchinductor_root/fx")).unwrap();
    std::fs::write(
        ct.join("tmp/torchinductor_root/fx/stale.kernel"),
        vec![b'k'; 3000],
    )
    .unwrap();
    let mut args = sets(&[("host", "node1"), ("ct", "200")]);
    args.extend(demo_sets(&repo, work.path(), "plan-ct"));
    args.extend(fleet.args());
    let file = common::repo().join("runbooks/clean-reset.lua");

    let plan = make_plan(&env, &file, &args);
    // The Markdown of the very plan saved: what a reviewer approves.
    let md = env
        .cmd()
        .arg("plan")
        .arg(plan_path(&env))
        .args(["--format", "md"])
        .output()
        .unwrap();
    assert!(md.status.success(), "{}", describe(&md));
    let md = stdout(&md);
    let port = fleet.nodes[0].port;
    for want in [
        "# Plan: clean-reset\n".to_string(),
        format!(
            "| plan file | `{}` (sha256 `{}`: what the record of its apply names) |",
            plan_path(&env).display(),
            &sha256_of(&plan_path(&env))[..12]
        ),
        format!("| apply | `runbook apply {}` (refused if", plan_path(&env).display()),
        // The target, and the machine it is (its host key and machine ids).
        format!("| `node1/ct200` | root@127.0.0.1 port {port}, container 200 (host key ssh-"),
        "| host | `node1` |".into(),
        "**destructive** · on `node1/ct200`: restore 1 file in ".into(),
        "**destructive** · on `node1/ct200`: move aside /tmp/torchinductor_root (2.9 KiB, 1 file) → /tmp/torchinductor_root.runbook-kept-…".into(),
        "   - runs: `cache-move-aside.sh root=/tmp path=/tmp/torchinductor_root`".into(),
        "   <details><summary>the exact command</summary>".into(),
        format!("\n   ssh -F {} node1 -- 'pct exec 200 -- ", fleet.ssh_config().display()),
        "on `node1/ct200`: start job plan-ct-".into(),
        "- Step 3: GPU preflight: its \\`when\\` condition is false".into(),
    ] {
        assert!(md.contains(&want), "no {want:?} in:\n{md}");
    }

    assert_eq!(plan["targets"][0]["name"], "node1/ct200");
    assert_eq!(
        plan["targets"][0]["destination"],
        format!("root@127.0.0.1:{port}/ct200")
    );
    assert_eq!(plan["targets"][0]["container"], "ct200");
    assert_eq!(
        plan["reached_with"]["ssh_config"],
        fleet.ssh_config().display().to_string()
    );
    // No --ssh-config: apply reaches the targets the way the plan did.
    let out = apply(&env, &["--yes"]);
    assert_applied_as_planned(&env, "clean-reset in a container", &plan, &out);
    assert!(
        ct.join("tmp/torchinductor_root/attention.kernel").exists(),
        "the warm-up filled the container's cache"
    );
    stop_job(
        &env,
        r#"target("node1"):pct(200)"#,
        "plan-ct",
        &fleet.args(),
    );
}

/// The fleet example over an inventory of two sshd nodes and a container: reads only,
/// an empty plan, applied (and its targets checked) all the same.
#[test]
fn the_fleet_example_applies_its_plan_of_reads() {
    require_sshd!();
    let fleet = Fleet::start(2);
    fleet.container(200);
    let env = Env::new();
    let inventory = env.write(
        "inventory.toml",
        "[hosts.pve1]\naddress = \"node1\"\n[hosts.pve2]\naddress = \"node2\"\n\
         [hosts.trainer]\nvia = \"pve1\"\npct = 200\n[groups]\nnodes = [\"pve1\", \"pve2\"]\n",
    );
    let mut args = fleet.args();
    args.extend(["--inventory".into(), inventory.display().to_string()]);
    let file = repo().join("examples/fleet/gpu-uptime.lua");
    let plan = make_plan(&env, &file, &args);
    let mut names: Vec<&str> = plan["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["pve1", "pve2", "trainer"]);
    assert!(plan["reads"].as_array().unwrap().len() >= 3);
    let out = apply(&env, &["--yes"]);
    assert_applied_as_planned(&env, "gpu-uptime", &plan, &out);
    let events = env.last_record();
    assert!(
        events.iter().any(
            |e| matches!(e, Event::Log { message, .. } if message.starts_with("trainer runs "))
        ),
        "{events:#?}"
    );

    // Applied once, the plan is spent: a second apply is refused, naming the run.
    let applied_by = env.last_record();
    let run_id = pick!(&applied_by, Event::RunStarted { run_id, .. } => run_id.clone());
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains(&format!(
            "refused, nothing was changed: it was applied already, by run {} (its outcome: ok)",
            run_id[0]
        )),
        "{}",
        describe(&out)
    );

    // A new plan; then the inventory moves pve1 (and the container on it) to the other
    // node: refused.
    make_plan(&env, &file, &args);
    std::fs::write(
        &inventory,
        "[hosts.pve1]\naddress = \"node2\"\n[hosts.pve2]\naddress = \"node2\"\n\
         [hosts.trainer]\nvia = \"pve1\"\npct = 200\n[groups]\nnodes = [\"pve1\", \"pve2\"]\n",
    )
    .unwrap();
    let records = env.record_count();
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let said = stderr(&out);
    assert!(
        said.contains("target pve1: planned by way of")
            && said.contains("target trainer: planned by way of"),
        "{said}"
    );
    assert_eq!(env.record_count(), records, "nothing ran");
}

// ---------------------------------------------------------------------------------------
// 2. drift between plan and apply

/// A runbook reached through a symlink finds its modules beside the file it points to,
/// at plan and at apply alike. Before, the plan looked beside the link and the apply
/// (which finds the runbook by its resolved file) beside the file, so one of the two
/// could not load it.
#[test]
fn a_plan_made_through_a_symlinked_runbook_applies() {
    let env = Env::new();
    let dir = env.scratch();
    let real = dir.join("real");
    let links = dir.join("links");
    std::fs::create_dir_all(&real).unwrap();
    std::fs::create_dir_all(&links).unwrap();
    std::fs::write(
        real.join("helper.lua"),
        "return { made = function(d) return d .. '/made' end }\n",
    )
    .unwrap();
    std::fs::write(
        real.join("linked.lua"),
        r#"runbook { name = "linked", params = { dir = { type = "path", required = true } } }
local helper = require("helper")
step("make", function() target("local"):exec({ "touch", helper.made(params.dir) }) end)
"#,
    )
    .unwrap();
    let link = links.join("linked.lua");
    std::os::unix::fs::symlink(real.join("linked.lua"), &link).unwrap();
    let plan = make_plan(&env, &link, &sets(&[("dir", &dir.display().to_string())]));
    let out = apply(&env, &["--yes"]);
    assert_applied_as_planned(&env, "symlinked", &plan, &out);
    assert!(dir.join("made").exists());
}

#[test]
fn an_edited_runbook_is_refused() {
    let env = Env::new();
    let dir = env.scratch();
    let rb = env.write(
        "edit.lua",
        &std::fs::read_to_string(fixture("note.lua")).unwrap(),
    );
    std::fs::write(dir.join("note"), "hi").unwrap();
    make_plan(&env, &rb, &sets(&[("dir", &dir.display().to_string())]));
    let mut text = std::fs::read_to_string(&rb).unwrap();
    text.push_str("-- a comment is an edit too\n");
    std::fs::write(&rb, text).unwrap();
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let said = stderr(&out);
    assert!(
        said.contains("refused, nothing was changed")
            && said.contains("edit.lua changed since the plan was made (sha256 "),
        "{said}"
    );
    assert!(!dir.join("touched").exists(), "the canary was touched");
    assert_eq!(env.record_count(), 0);
}

/// A plan is spent once applied (issue 33 item 5), as Terraform's: a second apply is
/// refused naming the run that used it, a reformatted copy of it too, and an apply that
/// failed spends it as well. An apply that never started (no confirmation) does not.
/// Of two applies at once, one goes ahead.
#[test]
fn a_plan_is_spent_once_applied() {
    let env = Env::new();
    let (plan, dir) = note_plan(&env);
    // Not confirmed (no terminal to ask on): nothing ran, the plan is not spent.
    assert_eq!(apply(&env, &[]).status.code(), Some(2));
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let first = pick!(env.last_record(), Event::RunStarted { run_id, .. } => run_id.clone());
    let records = env.record_count();
    std::fs::remove_file(dir.join("touched")).unwrap();
    let want = format!(
        "refused, nothing was changed: it was applied already, by run {} (its outcome: ok); see `runbook log {}`",
        first[0], first[0]
    );
    for copy in [None, Some(serde_json::to_string(&plan).unwrap())] {
        if let Some(text) = &copy {
            std::fs::write(plan_path(&env), text).unwrap();
        }
        let out = apply(&env, &["--yes"]);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert!(stderr(&out).contains(&want), "{}", describe(&out));
        assert_eq!(env.record_count(), records, "no run started");
        assert!(!dir.join("touched").exists(), "nothing changed");
    }

    // An apply refused before it changed anything (a copy whose shown command was
    // edited: found when the change is reached) leaves the plan unspent.
    let env = Env::new();
    let (plan, dir) = note_plan(&env);
    let mut edited = plan.clone();
    edited["changes"][0]["shown"] = "touch /tmp/elsewhere".into();
    write_plan(&env, &edited);
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(!dir.join("touched").exists());
    write_plan(&env, &plan);
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(dir.join("touched").exists());

    // A failed apply spends its plan too.
    let env = Env::new();
    let failing = env.write(
        "failing.lua",
        "runbook { name = \"failing\" }\nstep(\"fail\", function() target(\"local\"):exec({ \"sh\", \"-c\", \"exit 3\" }) end)\n",
    );
    make_plan(&env, &failing, &[]);
    assert_eq!(apply(&env, &["--yes"]).status.code(), Some(1));
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains("(its outcome: failed)"),
        "{}",
        describe(&out)
    );

    // Two applies of one plan at once: the index's lock lets one through.
    let env = Env::new();
    let slow = env.write(
        "slow.lua",
        "runbook { name = \"slow\" }\nstep(\"wait\", function() target(\"local\"):exec({ \"sleep\", \"1\" }) end)\n",
    );
    make_plan(&env, &slow, &[]);
    let both: Vec<std::process::Child> = (0..2)
        .map(|_| {
            let mut c = env.std_cmd();
            c.env("HOME", env.scratch().join("home"))
                .arg("apply")
                .arg(plan_path(&env))
                .arg("--yes")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped());
            c.spawn().unwrap()
        })
        .collect();
    let mut codes: Vec<(i32, String)> = both
        .into_iter()
        .map(|c| {
            let o = c.wait_with_output().unwrap();
            (o.status.code().unwrap(), stderr(&o))
        })
        .collect();
    codes.sort();
    assert_eq!(codes[0].0, 0, "{codes:?}");
    assert_eq!(codes[1].0, 2, "{codes:?}");
    assert!(
        codes[1].1.contains("it was applied already, by run"),
        "{codes:?}"
    );
    assert_eq!(env.record_count(), 1, "one run");
}

/// A plan made in one directory, applied from another: its relative paths and local
/// commands would act on another directory than the one reviewed, so it is refused.
#[test]
fn a_plan_applied_from_another_directory_is_refused() {
    let env = Env::new();
    let (a, b) = (env.tmp.path().join("a"), env.tmp.path().join("b"));
    for d in [&a, &b] {
        std::fs::create_dir_all(d.join("scratch")).unwrap();
        std::fs::write(d.join("scratch/keep"), "x").unwrap();
    }
    let rb = env.write(
        "rel.lua",
        r#"runbook { name = "rel", params = { dir = { type = "path", default = "scratch" } } }
step("wipe", function() target("local"):exec({ "rm", "-rf", "--", params.dir }) end)
"#,
    );
    let made = sandboxed(&env)
        .current_dir(&a)
        .arg("plan")
        .arg(&rb)
        .arg("-o")
        .arg(plan_path(&env))
        .output()
        .unwrap();
    assert_eq!(made.status.code(), Some(0), "{}", describe(&made));
    let apply_in = |dir: &Path| {
        sandboxed(&env)
            .current_dir(dir)
            .arg("apply")
            .arg(plan_path(&env))
            .arg("--yes")
            .output()
            .unwrap()
    };
    let from_b = apply_in(&b);
    assert_eq!(from_b.status.code(), Some(2), "{}", describe(&from_b));
    let said = stderr(&from_b);
    let a_shown = std::fs::canonicalize(&a).unwrap();
    assert!(
        said.contains(&format!("it was made in {}", a_shown.display()))
            && said.contains("run apply from"),
        "{said}"
    );
    assert!(b.join("scratch/keep").exists() && a.join("scratch/keep").exists());
    let from_a = apply_in(&a);
    assert_eq!(from_a.status.code(), Some(0), "{}", describe(&from_a));
    assert!(!a.join("scratch").exists() && b.join("scratch/keep").exists());
}

/// A change made in a step's `when` uses up that planned change: the body cannot make
/// it a second time, unconfirmed (it could, when `when` ran before the step's changes
/// were opened).
#[test]
fn a_change_made_in_when_is_not_open_again_for_the_body() {
    let env = Env::new();
    let dir = env.scratch();
    std::fs::write(dir.join("choice"), "A").unwrap();
    let count = dir.join("count");
    let rb = env.write(
        "when.lua",
        &subst(
            r#"runbook { name = "when" }
local here = target("local")
local function bump() here:exec({ "sh", "-c", "echo x >> @c@" }) end
step("s", { when = function() bump(); return true end }, function()
  local r = here:exec({ "cat", "@choice@" }, { read_only = true })
  if r.stdout:match("B") then bump() end
end)
"#,
            &[
                ("c", &count.display()),
                ("choice", &dir.join("choice").display()),
            ],
        ),
    );
    make_plan(&env, &rb, &[]);
    std::fs::write(dir.join("choice"), "B").unwrap();
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).contains("this change is not one that was confirmed for this step"),
        "{}",
        describe(&out)
    );
    assert_eq!(
        std::fs::read_to_string(&count).unwrap(),
        "x\n",
        "the change ran twice"
    );
}

#[test]
fn a_changed_param_is_refused() {
    let env = Env::new();
    let dir = env.scratch();
    std::fs::create_dir_all(dir.join("old")).unwrap();
    let args = sets(&[
        ("dir", &dir.display().to_string()),
        ("token", "a-long-enough-token"),
    ]);
    make_plan(&env, &fixture("review.lua"), &args);
    let token = ["--set", "token=a-long-enough-token"];
    for (extra, want) in [
        (
            vec!["--set", "mode=full"],
            "param 'mode': planned \"fast\", now \"full\"",
        ),
        (
            vec!["--set", "token=another-long-token"],
            "secret param 'token' is not the one planned (a different value)",
        ),
    ] {
        let mut all = token.to_vec();
        all.extend(extra);
        all.push("--yes");
        let out = apply(&env, &all);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        let said = stderr(&out);
        assert!(
            said.contains("refused: what would run now is not what the plan was made for")
                && said.contains(want),
            "{said}"
        );
        assert!(!said.contains("another-long-token"), "{said}");
        assert!(dir.join("old").exists(), "the canary was deleted");
        assert_eq!(env.record_count(), 0);
    }
    // The secret from the environment, as with run: the same one goes through.
    let out = sandboxed(&env)
        .env("RUNBOOK_PARAM_TOKEN", "a-long-enough-token")
        .arg("apply")
        .arg(plan_path(&env))
        .arg("--yes")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(!dir.join("old").exists());
}

/// The same alias, pointed at another machine in the ssh_config: refused before anything
/// runs (the commands would read the same; where they go would not).
#[test]
fn a_target_that_resolves_elsewhere_is_refused() {
    require_sshd!();
    let fleet = Fleet::start(2);
    let env = Env::new();
    let dir = env.scratch();
    let mut args = sets(&[("host", "node1"), ("dir", &dir.display().to_string())]);
    args.extend(fleet.args());
    let plan = make_plan(&env, &fixture("remote.lua"), &args);
    let (p1, p2) = (fleet.nodes[0].port, fleet.nodes[1].port);
    assert_eq!(
        plan["targets"][0]["destination"],
        format!("root@127.0.0.1:{p1}")
    );
    assert_eq!(plan["targets"][0]["port"], p1);
    let cfg = std::fs::read_to_string(fleet.ssh_config()).unwrap();
    let moved = cfg.replacen(&format!("Port {p1}\n"), &format!("Port {p2}\n"), 1);
    assert_ne!(cfg, moved);
    std::fs::write(fleet.ssh_config(), moved).unwrap();
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let said = stderr(&out);
    assert!(
        said.contains(&format!(
            "target node1: planned at root@127.0.0.1:{p1}, now resolves to root@127.0.0.1:{p2}"
        )),
        "{said}"
    );
    assert!(!dir.join("made-there").exists(), "the canary was made");
    assert_eq!(env.record_count(), 0);

    // A param that names another target is a changed param.
    std::fs::write(fleet.ssh_config(), cfg).unwrap();
    let out = apply(&env, &["--yes", "--set", "host=node2"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(stderr(&out).contains("param 'host': planned \"node1\", now \"node2\""));
    // Unchanged, it goes through, over SSH.
    let out = apply(&env, &["--yes"]);
    assert_applied_as_planned(&env, "remote", &plan, &out);
    assert!(dir.join("made-there").exists());
}

/// The read that picks the directory to delete answers differently at apply: the run
/// stops before deleting the other directory, which nobody approved, and changes nothing
/// after it either.
#[test]
fn a_read_that_picks_another_directory_stops_the_apply_before_it() {
    let env = Env::new();
    let dir = env.scratch();
    for d in ["A", "B"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
        std::fs::write(dir.join(d).join("canary"), "x").unwrap();
    }
    std::fs::write(dir.join("which"), "A\n").unwrap();
    let plan = make_plan(
        &env,
        &fixture("pick.lua"),
        &sets(&[("dir", &dir.display().to_string())]),
    );
    assert_eq!(
        planned(&plan)[0].1,
        format!("rm -rf -- {}/A", dir.display())
    );
    std::fs::write(dir.join("which"), "B\n").unwrap();
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let said = stderr(&out);
    assert!(
        said.contains(
            "step \"pick and delete\": this change is not one that was confirmed for this step"
        ) && said.contains(&format!("confirmed: rm -rf -- {}/A", dir.display()))
            && said.contains(&format!("now:       rm -rf -- {}/B", dir.display())),
        "{said}"
    );
    assert!(dir.join("A/canary").exists() && dir.join("B/canary").exists());
    assert!(!dir.join("later").exists(), "nothing further is changed");
    assert_nothing_changed(&env, "pick");
    let events = env.last_record();
    assert!(
        logs(&events, Some(Level::Warn))
            .iter()
            .any(|m| m.contains("returned something else than when the plan was made")),
        "the changed read is said too: {events:#?}"
    );
}

/// Planned while the job was not running; started before the apply: stopping it was
/// never approved.
#[test]
fn a_job_that_runs_since_the_plan_stops_the_apply_before_it() {
    let env = Env::new();
    let dir = env.scratch();
    let job = format!("plan-job-{}", std::process::id());
    let args = sets(&[("dir", &dir.display().to_string()), ("job", &job)]);
    let plan = make_plan(&env, &fixture("job.lua"), &args);
    let summaries: Vec<String> = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["summary"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(summaries.len(), 1, "{summaries:?}");
    assert!(summaries[0].starts_with("start job "), "{summaries:?}");
    start_job(
        &env,
        r#"target("local")"#,
        "plan-job",
        &dir.join("other.log"),
        &[],
    );
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let said = stderr(&out);
    assert!(
        said.contains("step \"stop the job\": this change is not one that was confirmed")
            && said.contains(&format!("now:       proc-stop.sh name={job}")),
        "{said}"
    );
    assert!(
        job_runs(&env, r#"target("local")"#, "plan-job", &[]),
        "the job was stopped"
    );
    assert!(!dir.join("job.log").exists(), "no job was started");
    assert_nothing_changed(&env, "job");
    stop_job(&env, r#"target("local")"#, "plan-job", &[]);
}

/// A read that decides nothing returned something else: the apply goes through (the
/// changes are the plan's) and says so.
#[test]
fn a_read_that_changed_alone_is_a_warning() {
    let env = Env::new();
    let (plan, dir) = note_plan(&env);
    assert!(plan["reads"][0]["result_sha256"].is_string());
    std::fs::write(dir.join("note"), "two").unwrap();
    let out = apply(&env, &["--yes"]);
    assert_applied_as_planned(&env, "note", &plan, &out);
    assert!(
        stderr(&out).contains("step \"note and touch\": the read `cat -- ")
            && stderr(&out).contains("returned something else than when the plan was made"),
        "{}",
        describe(&out)
    );
}

#[test]
fn an_old_plan_is_refused() {
    let env = Env::new();
    let (mut plan, dir) = note_plan(&env);
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    plan["created"] = humantime::format_rfc3339_seconds(two_hours_ago)
        .to_string()
        .into();
    write_plan(&env, &plan);
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        // "2h ago", or "2h 1s ago" when a second passed on a loaded machine.
        stderr(&out).contains("it was made 2h") && stderr(&out).contains("more than --max-age 1h"),
        "{}",
        describe(&out)
    );
    assert!(!dir.join("touched").exists());
    let out = apply(&env, &["--yes", "--max-age", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains("must be more than 0"),
        "{}",
        describe(&out)
    );
    assert_eq!(env.record_count(), 0);
    let out = apply(&env, &["--yes", "--max-age", "3h"]);
    assert_applied_as_planned(&env, "an old plan, allowed", &plan, &out);
}

#[test]
fn unknown_formats_and_broken_plans_are_refused() {
    let env = Env::new();
    let (mut plan, dir) = note_plan(&env);
    plan["format"] = 2.into();
    write_plan(&env, &plan);
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains("plan format 2 is not one this runbook")
            && stderr(&out).contains("reads format 1"),
        "{}",
        describe(&out)
    );
    for (text, want) in [
        (
            "{\"changes\": []}",
            "not a runbook plan (no \"format\" field)",
        ),
        ("not json", "not a runbook plan (not JSON"),
        ("{\"format\": 1}", "a broken plan: missing field"),
    ] {
        std::fs::write(plan_path(&env), text).unwrap();
        let out = apply(&env, &["--yes"]);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert!(stderr(&out).contains(want), "{want}: {}", describe(&out));
    }
    assert!(!dir.join("touched").exists());
    assert_eq!(env.record_count(), 0);
}

/// Without --yes and without a terminal, apply shows the plan and refuses, as run does.
#[test]
fn apply_without_yes_needs_a_terminal_to_ask() {
    let env = Env::new();
    let (_, dir) = note_plan(&env);
    let out = apply(&env, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let said = stderr(&out);
    assert!(
        said.contains("makes 1 change and needs confirmation:")
            && said.contains(&format!("    - on local: touch {}/touched", dir.display()))
            && said.contains("re-run with runbook apply ")
            && said.contains(" --yes"),
        "{said}"
    );
    assert!(!dir.join("touched").exists());
}

/// On a terminal (util-linux `script` gives it a pty), apply shows the whole plan and
/// asks: "n" changes nothing, "y" applies it.
#[test]
fn apply_on_a_terminal_shows_the_plan_and_asks() {
    let env = Env::new();
    let (plan, dir) = note_plan(&env);
    let on_a_terminal = |answer: &str| {
        let line = format!(
            "'{}' apply '{}'",
            assert_cmd::cargo::cargo_bin!("runbook").display(),
            plan_path(&env).display()
        );
        let mut child = std::process::Command::new("script")
            .args(["-q", "-e", "-c", &line, "/dev/null"])
            .env("RUNBOOK_STATE_DIR", env.state())
            .env("RUNBOOK_LOCK_FILE", env.tmp.path().join("runbook.lock"))
            .env("NO_COLOR", "1")
            .current_dir(env.tmp.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("script (util-linux) runs");
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(answer.as_bytes()).unwrap();
            // The pty keeps the answer until the prompt reads it.
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
        let out = child.wait_with_output().unwrap();
        (out.status.code(), stdout(&out))
    };
    let sha = sha256_of(&plan_path(&env));
    let (code, screen) = on_a_terminal("n\n");
    assert_eq!(code, Some(2), "{screen}");
    assert!(
        screen.contains(&format!(
            "plan file: {} (sha256 {}…)",
            plan_path(&env).display(),
            &sha[..12]
        )) && screen.contains(&format!("    - on local: touch {}/touched", dir.display()))
            && screen.contains("Proceed? [y/N]")
            && screen.contains("not confirmed; nothing was changed"),
        "{screen}"
    );
    assert!(!dir.join("touched").exists());
    let (code, screen) = on_a_terminal("y\n");
    assert_eq!(code, Some(0), "{screen}");
    assert!(dir.join("touched").exists(), "{screen}");
    assert_eq!(applied(&env.last_record()), planned(&plan));
}

// ---------------------------------------------------------------------------------------
// 3. what a plan holds

/// A secret param is in no plan file, text or Markdown: only a salted digest of it, a
/// different one in each plan.
#[test]
fn secrets_are_never_in_a_plan() {
    let env = Env::new();
    let dir = env.scratch();
    let secret = "s3cr3t-plan-token-value";
    let args = sets(&[("dir", &dir.display().to_string()), ("token", secret)]);
    let first = make_plan(&env, &fixture("secret.lua"), &args);
    let text = std::fs::read_to_string(plan_path(&env)).unwrap();
    assert!(!text.contains(secret), "{text}");
    assert!(
        text.contains("***"),
        "the commands show where it goes: {text}"
    );
    assert_eq!(first["params"]["token"]["secret"], true);
    assert!(first["params"]["token"].get("value").is_none());
    let digest = first["params"]["token"]["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    let plain: String = Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_ne!(digest, plain, "salted, not a plain sha256");
    let second = make_plan(&env, &fixture("secret.lua"), &args);
    assert_ne!(
        second["params"]["token"]["sha256"].as_str().unwrap(),
        digest
    );
    for format in ["text", "md", "json"] {
        let out = sandboxed(&env)
            .arg("plan")
            .arg(fixture("secret.lua"))
            .args(&args)
            .args(["--format", format])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", describe(&out));
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert!(!all.contains(secret), "{format}: {all}");
    }
    // And it applies, with the secret given again.
    let out = sandboxed(&env)
        .env("RUNBOOK_PARAM_TOKEN", secret)
        .arg("apply")
        .arg(plan_path(&env))
        .arg("--yes")
        .output()
        .unwrap();
    assert_applied_as_planned(&env, "secret", &second, &out);
    assert_eq!(
        std::fs::read_to_string(dir.join("from-stdin")).unwrap(),
        secret
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("from-env")).unwrap(),
        secret
    );
    // Unset: refused as the runbook requires it.
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}

#[test]
fn a_plan_that_cannot_be_made_is_not_saved() {
    let env = Env::new();
    let dir = env.scratch();
    // `which` is missing: the read fails, and with it the plan.
    let out = sandboxed(&env)
        .arg("plan")
        .arg(fixture("pick.lua"))
        .args(sets(&[("dir", &dir.display().to_string())]))
        .arg("-o")
        .arg(plan_path(&env))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).contains("the plan could not be made: step \"pick and delete\" failed"),
        "{}",
        describe(&out)
    );
    assert!(!plan_path(&env).exists());
}

#[test]
fn an_offline_plan_runs_no_read() {
    let env = Env::new();
    let dir = env.scratch();
    let plan = make_plan(
        &env,
        &fixture("note.lua"),
        &[
            sets(&[("dir", &dir.display().to_string())]),
            vec!["--offline".into()],
        ]
        .concat(),
    );
    assert_eq!(plan["mode"], "dry-run-offline");
    assert_eq!(plan["reads"][0]["result_sha256"], Value::Null);
    assert_eq!(planned(&plan).len(), 1);
}

/// The Markdown a reviewer reads, for a small runbook: params (the secret only as a
/// fact), targets, each change with its facts and the command it runs, the exact command
/// where the shown one differs, skipped steps, what the steps said.
#[test]
fn snapshot_markdown_plan() {
    let env = Env::new();
    let dir = env.scratch().join("svc");
    std::fs::create_dir_all(dir.join("old")).unwrap();
    std::fs::write(dir.join("a.tmp"), "").unwrap();
    let rb = env.write(
        "review.lua",
        &std::fs::read_to_string(fixture("review.lua")).unwrap(),
    );
    let made = sandboxed(&env)
        .arg("plan")
        .arg("review.lua")
        .args(sets(&[
            ("dir", &dir.display().to_string()),
            ("token", "the-token-value-1234"),
        ]))
        .args(["-o", "review.json"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", describe(&made));
    let out = env
        .cmd()
        .args(["plan", "review.json", "--format", "md"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let _ = rb;
    let text = stdout(&out).replace(&dir.display().to_string(), "[DIR]");
    let text = regex::Regex::new(r"\| made \| .* with runbook \S+ \|")
        .unwrap()
        .replace(&text, "| made | [TIME] by [WHO] with runbook [VERSION] |")
        .into_owned();
    let text = regex::Regex::new(r"sha256 `[0-9a-f]{12}`")
        .unwrap()
        .replace_all(&text, "sha256 `[SHA]`")
        .into_owned();
    // The machine a target is (issue 25 item 4) differs from machine to machine.
    let text = regex::Regex::new(r"machine-id [0-9a-f-]+")
        .unwrap()
        .replace_all(&text, "machine-id [MACHINE-ID]")
        .into_owned();
    assert!(!text.contains("the-token-value-1234"));
    insta::assert_snapshot!("markdown_plan", text);
}

// ---------------------------------------------------------------------------------------
// 4. what a plan binds (issue 25, items 1, 2 and 11): what a reviewer reads of a plan is
// what apply holds the run to; an edit of any of it is refused before anything runs.

/// A plan of `bound.lua` (one destructive change, `rm -rf -- DIR/junk`), and its canary.
fn bound_plan(env: &Env) -> (Value, PathBuf) {
    let dir = env.scratch();
    std::fs::create_dir_all(dir.join("junk")).unwrap();
    std::fs::write(dir.join("junk/canary"), "x").unwrap();
    let plan = make_plan(
        env,
        &fixture("bound.lua"),
        &sets(&[("dir", &dir.display().to_string())]),
    );
    (plan, dir)
}

/// Each field of a saved plan that its text, its Markdown or apply's prompt shows, edited
/// in the JSON: apply refuses (exit 2) naming the field, and nothing ran. The command's
/// text, the summary, the command as shown, the destructive flag, the runbook's name,
/// description and path, the step's name and the target's name.
#[test]
fn every_shown_field_edited_is_refused_before_anything_runs() {
    let env = Env::new();
    let (plan, dir) = bound_plan(&env);
    assert_eq!(plan["changes"][0]["destructive"], true, "{plan:#}");
    type Edit = fn(&mut Value);
    let edits: Vec<(&str, Edit, &str)> = vec![
        (
            "command",
            |p| {
                let c = p["changes"][0]["command"]
                    .as_str()
                    .unwrap()
                    .replace("/junk", "/old-junk");
                p["changes"][0]["command"] = c.into();
            },
            "change 1: field \"command\" does not match its command_sha256",
        ),
        (
            "summary",
            |p| p["changes"][0]["summary"] = "delete old-junk".into(),
            "change 1: field \"summary\"",
        ),
        (
            "shown",
            |p| p["changes"][0]["shown"] = "rm old-junk".into(),
            "change 1: field \"shown\"",
        ),
        (
            "destructive",
            |p| p["changes"][0]["destructive"] = false.into(),
            "change 1: field \"destructive\"",
        ),
        (
            "step_name",
            |p| p["changes"][0]["step_name"] = "tidy up".into(),
            "change 1: field \"step_name\"",
        ),
        (
            "step name, both places",
            |p| {
                p["changes"][0]["step_name"] = "tidy up".into();
                p["steps"][0]["name"] = "tidy up".into();
            },
            "step 1: field \"name\"",
        ),
        (
            "target",
            |p| p["changes"][0]["target"] = "staging".into(),
            "change 1: field \"target\"",
        ),
        (
            "target, both places",
            |p| {
                p["changes"][0]["target"] = "staging".into();
                p["targets"][0]["name"] = "staging".into();
            },
            "change 1: field \"target\"",
        ),
        (
            "runbook name",
            |p| p["runbook"]["name"] = "harmless".into(),
            "field \"runbook.name\"",
        ),
        (
            "runbook description",
            |p| p["runbook"]["description"] = "Read the logs".into(),
            "field \"runbook.description\"",
        ),
        (
            "runbook path",
            |p| p["runbook"]["path"] = fixture("note.lua").display().to_string().into(),
            "field \"runbook.path\"",
        ),
    ];
    for (what, edit, want) in edits {
        let mut edited = plan.clone();
        edit(&mut edited);
        write_plan(&env, &edited);
        let out = apply(&env, &["--yes"]);
        assert_eq!(out.status.code(), Some(2), "{what}: {}", describe(&out));
        let said = stderr(&out);
        assert!(
            said.contains(want) && said.contains("nothing was changed"),
            "{what}: want {want:?}: {said}"
        );
        assert!(
            dir.join("junk/canary").exists(),
            "{what}: the junk was deleted"
        );
        assert_nothing_changed(&env, what);
    }
    // A plan shown for review refuses what it can tell offline, too: the Markdown never
    // shows a command text that is not the one its digest holds.
    let mut edited = plan.clone();
    edited["changes"][0]["command"] = "rm -rf -- /elsewhere".into();
    write_plan(&env, &edited);
    let out = env
        .cmd()
        .arg("plan")
        .arg(plan_path(&env))
        .args(["--format", "md"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains("change 1: field \"command\" does not match its command_sha256"),
        "{}",
        describe(&out)
    );
    assert!(!stdout(&out).contains("/elsewhere"), "{}", describe(&out));
    // A forged change with a digest to match its text: the run makes another change, so
    // it stops before it, and the junk stays.
    let mut forged = plan.clone();
    let salt = forged["salt"].as_str().unwrap().to_string();
    let text = format!("rm -rf -- {}/old-junk", dir.display());
    let digest: String = Sha256::digest([salt.as_bytes(), b"\0", text.as_bytes()].concat())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    forged["changes"][0]["command"] = text.clone().into();
    forged["changes"][0]["shown"] = text.into();
    forged["changes"][0]["command_sha256"] = digest.into();
    write_plan(&env, &forged);
    let out = apply(&env, &["--yes"]);
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        dir.join("junk/canary").exists(),
        "forged: the junk was deleted"
    );
    assert_nothing_changed(&env, "forged");
    // Untouched, it applies.
    write_plan(&env, &plan);
    let out = apply(&env, &["--yes"]);
    assert_applied_as_planned(&env, "bound", &plan, &out);
    assert!(!dir.join("junk").exists());
}

/// The ssh_config a plan names: shown in its text and Markdown and in apply's prompt, and
/// used (a `Match exec` in it runs, at `ssh -G`) only after the plan is checked and shown.
#[test]
fn a_plans_ssh_config_is_shown_and_used_only_after_the_plan_is_checked() {
    let env = Env::new();
    let dir = env.scratch();
    let cfg = env.tmp.path().join("ssh_config");
    // Nothing listens on port 1: the plan is made offline, and no command reaches it.
    std::fs::write(
        &cfg,
        "Host node1\n  HostName 127.0.0.1\n  Port 1\n  User root\n",
    )
    .unwrap();
    let mut args = sets(&[("host", "node1"), ("dir", &dir.display().to_string())]);
    args.extend([
        "--offline".to_string(),
        "--ssh-config".into(),
        cfg.display().to_string(),
    ]);
    let plan = make_plan(&env, &fixture("remote.lua"), &args);
    let cfg_shown = std::fs::canonicalize(&cfg).unwrap().display().to_string();
    assert_eq!(plan["reached_with"]["ssh_config"], cfg_shown.as_str());
    for format in ["text", "md"] {
        let out = env
            .cmd()
            .arg("plan")
            .arg(plan_path(&env))
            .args(["--format", format])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(
            stdout(&out).contains(&cfg_shown),
            "{format} shows the ssh_config: {}",
            describe(&out)
        );
    }
    // From now, resolving any host through that config runs a command.
    let marker = env.tmp.path().join("MARKER");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!("Match exec \"touch {}\"\n", marker.display()));
    std::fs::write(&cfg, text).unwrap();
    // A tampered plan: refused before the config is used.
    let mut edited = plan.clone();
    edited["changes"][0]["command"] = "touch /elsewhere".into();
    write_plan(&env, &edited);
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains("change 1: field \"command\" does not match its command_sha256"),
        "{}",
        describe(&out)
    );
    assert!(
        !marker.exists(),
        "the plan's ssh_config ran before the plan was checked"
    );
    // One that only the loaded runbook tells: refused before the config is used, too.
    let mut edited = plan.clone();
    edited["runbook"]["name"] = "harmless".into();
    write_plan(&env, &edited);
    let out = apply(&env, &["--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out)
            .contains("field \"runbook.name\" is \"harmless\", and the runbook is \"remote\""),
        "{}",
        describe(&out)
    );
    assert!(
        !marker.exists(),
        "the plan's ssh_config ran before the runbook was checked"
    );
    // The plan as made, without --yes and without a terminal: shown (the ssh_config
    // with it) and not confirmed, and the config was not used.
    write_plan(&env, &plan);
    let out = apply(&env, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains("needs confirmation") && stderr(&out).contains(&cfg_shown),
        "{}",
        describe(&out)
    );
    assert!(
        !marker.exists(),
        "the plan's ssh_config ran before it was shown"
    );
    // With --yes, apply says which config it reaches the targets with before it uses it.
    let out = apply(&env, &["--yes"]);
    assert!(
        stderr(&out).contains(&format!(
            "its targets are reached with ssh_config {cfg_shown}"
        )),
        "{}",
        describe(&out)
    );
    assert!(!dir.join("made-there").exists());
}

/// Plans name hosts, paths and commands: written 0600, as records are, and never through
/// a symlink planted where the plan goes.
#[test]
fn plan_files_are_written_0600_and_not_through_a_symlink() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let (_, _) = bound_plan(&env);
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&plan_path(&env)), 0o600, "plan -o");
    let md = env.tmp.path().join("plan.md");
    let out = env
        .cmd()
        .arg("plan")
        .arg(plan_path(&env))
        .args(["--format", "md", "-o"])
        .arg(&md)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(mode(&md), 0o600, "plan PLAN.json --format md -o");
    // A link where the plan goes: refused (exit 2, naming it), as init, new and fmt
    // refuse one; what it points to stays as it was.
    let victim = env.tmp.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    let link = env.tmp.path().join("linked.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let dir = env.scratch();
    let out = sandboxed(&env)
        .arg("plan")
        .arg(fixture("bound.lua"))
        .args(sets(&[("dir", &dir.display().to_string())]))
        .arg("-o")
        .arg(&link)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("linked.json") && err.contains("symbolic link"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
}
