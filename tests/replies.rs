//! `runbook run --save-replies` and `runbook test`: replies saved from real runs on this
//! machine (real uv, git, processes, the `nvidia-smi` double), committed under
//! tests/replies/ and edited there to make the shipped runbooks' failure paths, which
//! then run in milliseconds with no host.
//!
//! The fixtures are saved by the `saved_*` tests below. With `RUNBOOK_BLESS=1` they write
//! the replies of their real run to tests/replies/NAME.jsonl, the run's temp dir written
//! as /tmp/runbook-demo (so the replayed runs pass those paths); the `*-*.jsonl` variants are
//! those files with one reply edited by hand, as each test says.
use crate::common::*;
use std::path::{Path, PathBuf};

/// Where the fixtures live.
fn fixture(name: &str) -> PathBuf {
    repo().join("tests/replies").join(name)
}

/// The temp dir a recorded run worked in, as the fixtures name it.
/// Under /tmp, as the recorded runs were: cache.clear only clears under a cache root, and
/// /tmp is one. Nothing is ever created there: `runbook test` runs no command.
const DEMO: &str = "/tmp/runbook-demo";

fn sets(pairs: &[(&str, String)]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|(k, v)| ["--set".to_string(), format!("{k}={v}")])
        .collect()
}

/// `runbook test RUNBOOK --replies FILE --json ARGS…`.
fn replay<'e>(env: &'e Env, runbook: &str, replies: &Path) -> Run<'e> {
    Run::cmd(env, ["test", runbook, "--json", "--replies"]).arg(replies)
}

/// The saved replies of a real run, with the run's temp dir written as `DEMO`; in
/// `tests/replies/NAME` too with RUNBOOK_BLESS=1.
fn saved(env: &Env, saved: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(saved).unwrap();
    let text = text.replace(&env.tmp.path().display().to_string(), DEMO);
    if std::env::var_os("RUNBOOK_BLESS").is_some() {
        std::fs::write(fixture(name), &text).unwrap();
    }
    text
}

/// (step name, outcome) of every finished step, and the exit code.
fn outcome(out: &Output) -> (i32, Vec<(String, StepOutcome)>) {
    let steps =
        pick!(out.events(), Event::StepFinished { name, outcome, .. } => (name.clone(), *outcome));
    (out.code(), steps)
}

/// The demo training project of examples/train, set up as clean-reset's tests do.
fn clean_reset_sets(work: &Path, repo: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("venv", work.join("venv").display().to_string()),
        ("repo", repo.display().to_string()),
        ("warmup", "warmup.py".into()),
        ("train", "train.py 400".into()),
        ("log", work.join("train.log").display().to_string()),
        ("cache_dirs", work.join("inductor").display().to_string()),
        ("min_throughput", "1".into()),
        ("wait", "60s".into()),
        ("job", "replies-demo".into()),
    ]
}

#[test]
fn saved_clean_reset_replays_with_the_same_outcome() {
    require_uv!();
    let env = Env::new();
    let work = env.tmp.path().join("work");
    std::fs::create_dir_all(work.join("inductor")).unwrap();
    std::fs::write(work.join("inductor/stale.kernel"), "old").unwrap();
    let repo = demo_repo(&work);
    let args = sets(&clean_reset_sets(&work, &repo));
    let file = env.tmp.path().join("R.jsonl");
    let real = Run::new(&env, "clean-reset")
        .json()
        .yes()
        .args(&args)
        .arg("--save-replies")
        .arg(&file)
        .run();
    // The demo's job outlives the run.
    let stop = env.write(
        "stop.lua",
        "runbook { name = \"stop\" }\nstep(\"stop\", function() proc.stop(target(\"local\"), { name = \"replies-demo\" }) end)\n",
    );
    Run::new(&env, &stop).yes().expect_exit(0).run();
    real.assert_exit(0);
    saved(&env, &file, "clean-reset.jsonl");
    let again = replay(&env, "clean-reset", &file)
        .args(&args)
        .arg("--strict")
        .run();
    assert_eq!(outcome(&again), outcome(&real), "{}", again.describe());
}

#[test]
fn saved_gpu_health_replays_with_the_same_outcome() {
    let env = Env::new();
    let file = env.tmp.path().join("R.jsonl");
    // The double's eight H200s, GPU 3 running a training process: not idle.
    let args = sets(&[("count", "8".into()), ("idle", "true".into())]);
    let real = Run::new(&env, "gpu-health")
        .json()
        .yes()
        .path_first(repo().join("tests/bin"))
        .env("NVIDIA_SMI_FIXTURE", "h200x8")
        .args(&args)
        .arg("--save-replies")
        .arg(&file)
        .run();
    real.assert_exit(1);
    saved(&env, &file, "gpu-health-busy.jsonl");
    let again = replay(&env, "gpu-health", &file).args(&args).run();
    assert_eq!(outcome(&again), outcome(&real), "{}", again.describe());
    assert_eq!(
        again.step_error("requirements"),
        real.step_error("requirements")
    );
}

#[test]
fn saved_cache_reset_replays_with_the_same_outcome() {
    let env = Env::new();
    let work = env.tmp.path().join("work");
    std::fs::create_dir_all(work.join("inductor/fxgraph")).unwrap();
    std::fs::write(work.join("inductor/fxgraph/k1"), vec![b'k'; 4096]).unwrap();
    let file = env.tmp.path().join("R.jsonl");
    let args = sets(&[("cache_dirs", work.join("inductor").display().to_string())]);
    let real = Run::new(&env, "cache-reset")
        .json()
        .yes()
        .args(&args)
        .arg("--save-replies")
        .arg(&file)
        .run();
    real.assert_exit(0);
    saved(&env, &file, "cache-reset.jsonl");
    let again = replay(&env, "cache-reset", &file)
        .args(&args)
        .arg("--strict")
        .run();
    assert_eq!(outcome(&again), outcome(&real), "{}", again.describe());
}

/// clean-reset's params as its fixtures were saved with.
fn demo_args() -> Vec<String> {
    let demo = Path::new(DEMO).join("work");
    sets(&clean_reset_sets(&demo, &demo.join("dflash")))
}

/// The replies that `runbook test` left unused, from its warning.
fn unused(out: &Output) -> String {
    let err = out.stderr_text();
    match err.split_once("answered no command") {
        Some((_, rest)) => rest.to_string(),
        None => String::new(),
    }
}

#[test]
fn the_saved_clean_reset_passes_in_milliseconds() {
    let env = Env::new();
    let started = std::time::Instant::now();
    let out = replay(&env, "clean-reset", &fixture("clean-reset.jsonl"))
        .args(demo_args())
        .arg("--strict")
        .expect_exit(0)
        .run();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        out.logs_at(Level::Info)
            .iter()
            .filter(|l| l.starts_with("throughput ") && l.ends_with("(minimum 1.0)"))
            .count(),
        1,
        "{}",
        out.describe()
    );
}

#[test]
fn a_failed_venv_verify_keeps_the_old_venv() {
    let env = Env::new();
    let out = replay(
        &env,
        "clean-reset",
        &fixture("clean-reset-verify-fails.jsonl"),
    )
    .args(demo_args())
    .expect_exit(1)
    .run();
    let err = out.step_error("fresh venv");
    assert!(
        err.contains("verify failed: the new venv did not pass its check; it was removed and /tmp/runbook-demo/work/venv was left as it was"),
        "{err}"
    );
    assert!(err.contains("ImportError: libcudart.so.12"), "{err}");
    // Rolled back: the run counts no change (it said changed=1).
    let changed = pick!(out.run_events(), Event::RunFinished { changed, .. } => *changed);
    assert_eq!(changed, [0]);
    let skipped: Vec<String> = pick!(out.run_events(), Event::StepSkipped { name, reason, .. }
        if reason == "an earlier step failed" => name.clone());
    for later in [
        "restore code to the known-good rev",
        "restore or clear the compile caches (kept aside)",
        "relaunch training",
    ] {
        assert!(skipped.iter().any(|s| s == later), "{later}: {skipped:?}");
    }
    // Nothing after the build was sent: the code, the caches and the job stay as they were,
    // and the replies for them are left over.
    let sent: Vec<String> =
        pick!(out.run_events(), Event::ActionStarted { command, .. } => command.clone());
    assert!(sent.last().unwrap().contains(" venv-build.sh "), "{sent:?}");
    let left = unused(&out);
    assert!(left.contains("venv-list.sh"), "{left}");
    assert!(
        left.contains("git -C /tmp/runbook-demo/work/dflash"),
        "{left}"
    );
}

#[test]
fn throughput_under_the_minimum_fails_with_the_line() {
    let env = Env::new();
    let out = replay(&env, "clean-reset", &fixture("clean-reset-slow.jsonl"))
        .args(demo_args())
        .expect_exit(1)
        .run();
    let err = out.step_error("throughput check");
    assert!(
        err.contains("throughput 0.4 is below the minimum 1.0: step 20 | loss 2.86 | 0.4 Ktok/s"),
        "{err}"
    );
    // The caches were moved aside by then: the cleanup step says how to put them back.
    let warned = out.logs_at(Level::Warn).join("\n");
    assert!(
        warned.contains("runbook run cache-reset --set host=local"),
        "{warned}"
    );
}

#[test]
fn a_busy_gpu_fails_the_idle_requirement() {
    let env = Env::new();
    let args = sets(&[("count", "8".into()), ("idle", "true".into())]);
    let busy = replay(&env, "gpu-health", &fixture("gpu-health-busy.jsonl"))
        .args(&args)
        .arg("--strict")
        .expect_exit(1)
        .run();
    let err = busy.step_error("requirements");
    assert!(err.contains("GPU 3") && err.contains("1234"), "{err}");
    // The same GPUs with the process gone pass, with no nvidia-smi anywhere on PATH.
    replay(&env, "gpu-health", &fixture("gpu-health-idle.jsonl"))
        .args(&args)
        .arg("--strict")
        .env("PATH", "/nonexistent")
        .expect_exit(0)
        .run();
}

#[test]
fn a_cache_held_open_is_not_cleared() {
    let env = Env::new();
    let args = sets(&[("cache_dirs", format!("{DEMO}/work/inductor"))]);
    let out = replay(&env, "cache-reset", &fixture("cache-reset-held.jsonl"))
        .args(&args)
        .expect_exit(1)
        .run();
    let err = out.step_error("clear");
    assert!(
        err.contains("4242") && err.contains("python train.py --resume"),
        "{err}"
    );
    assert!(err.contains("force"), "{err}");
    assert!(
        unused(&out).contains("cache-move-aside.sh"),
        "{}",
        out.describe()
    );
}

/// A runbook on a host that does not exist, in a container on it, and on this machine.
const NOWHERE: &str = r#"runbook { name = "nowhere", params = { token = { secret = true, default = "" } } }
local node = target("root@node.invalid")
local box = node:pct(200)
local here = target("local")
step("probe", function()
  log.info("gpus: " .. box:exec({ "nvidia-smi", "-L" }).stdout)
  here:exec({ "touch", params.marker })
  for i = 1, 2 do log.info("uptime " .. i .. ": " .. node:shell("uptime").stdout) end
end)
"#;

fn nowhere(env: &Env, marker: &Path) -> PathBuf {
    env.write(
        "nowhere.lua",
        &NOWHERE.replace(
            "token = {",
            &subst(
                "marker = { default = @marker@ }, token = {",
                &[("marker", &format!("{:?}", marker.display().to_string()))],
            ),
        ),
    )
}

const NOWHERE_REPLIES: &str = r#"{"runbook_replies":1}
{"target":"root@node.invalid/ct200","argv":["nvidia-smi","-L"],"code":0,"stdout":"GPU 0: NVIDIA H200\n"}
{"target":"local","argv":["touch","MARKER"],"code":0}
{"target":"root@node.invalid","argv":["sh","-c","uptime"],"code":0,"stdout":"up 3 days\n"}
{"target":"root@node.invalid","argv":["sh","-c","uptime"],"code":0,"stdout":"up 4 days\n"}
"#;

#[test]
fn no_target_is_contacted_and_repeats_answer_in_order() {
    let env = Env::new();
    let marker = env.tmp.path().join("marker");
    let rb = nowhere(&env, &marker);
    let file = env.write(
        "R.jsonl",
        &NOWHERE_REPLIES.replace("MARKER", &marker.display().to_string()),
    );
    // No ssh, pct or touch on PATH either: nothing could have run.
    let out = replay(&env, rb.to_str().unwrap(), &file)
        .arg("--strict")
        .env("PATH", "/nonexistent")
        .expect_exit(0)
        .run();
    assert!(!marker.exists(), "touch did not run");
    let logs = out.logs_at(Level::Info);
    assert!(
        logs.contains(&"gpus: GPU 0: NVIDIA H200".to_string()),
        "{logs:?}"
    );
    assert!(
        logs.contains(&"uptime 1: up 3 days".to_string()),
        "{logs:?}"
    );
    assert!(
        logs.contains(&"uptime 2: up 4 days".to_string()),
        "{logs:?}"
    );
    // The real state dir was not written: the run's record went to a temp dir of its own.
    assert!(!env.state().exists(), "{:?}", env.state());
}

#[test]
fn an_unanswered_command_names_the_closest_reply_and_exits_3() {
    let env = Env::new();
    let marker = env.tmp.path().join("marker");
    let rb = nowhere(&env, &marker);
    let file = env.write(
        "R.jsonl",
        &NOWHERE_REPLIES
            .replace("MARKER", &marker.display().to_string())
            .replace("\"-L\"", "\"-q\""),
    );
    let out = replay(&env, rb.to_str().unwrap(), &file)
        .expect_exit(3)
        .run();
    let err = out.stderr_text();
    assert!(
        err.contains(&format!(
            "no reply in {} for the command on root@node.invalid/ct200:\n  nvidia-smi -L\nclosest recorded ({}:2, on root@node.invalid/ct200):\n  nvidia-smi -q\ndifference (- recorded, + ran):\n  - argv -q\n  + argv -L\n",
            file.display(),
            file.display()
        )),
        "{err}"
    );
    // Ran once more than recorded: said so.
    let file = env.write(
        "R2.jsonl",
        &NOWHERE_REPLIES
            .replace("MARKER", &marker.display().to_string())
            .replace("{\"target\":\"root@node.invalid\",\"argv\":[\"sh\",\"-c\",\"uptime\"],\"code\":0,\"stdout\":\"up 4 days\\n\"}\n", ""),
    );
    let out = replay(&env, rb.to_str().unwrap(), &file)
        .expect_exit(3)
        .run();
    assert!(
        out.stderr_text().contains(
            "holds 1 reply for it, all used: the runbook ran it more often than the recorded run"
        ),
        "{}",
        out.stderr_text()
    );
}

#[test]
fn unused_replies_warn_and_fail_with_strict() {
    let env = Env::new();
    let marker = env.tmp.path().join("marker");
    let rb = nowhere(&env, &marker);
    let extra = "{\"target\":\"local\",\"argv\":[\"reboot\"],\"code\":0}\n";
    let file = env.write(
        "R.jsonl",
        &(NOWHERE_REPLIES.replace("MARKER", &marker.display().to_string()) + extra),
    );
    let out = replay(&env, rb.to_str().unwrap(), &file)
        .expect_exit(0)
        .run();
    let warning = format!(
        "warning: 1 reply in {} answered no command (--strict makes this a failure):\n  {}:6: on local: reboot\n",
        file.display(),
        file.display()
    );
    assert!(
        out.stderr_text().contains(&warning),
        "{}",
        out.stderr_text()
    );
    let out = replay(&env, rb.to_str().unwrap(), &file)
        .arg("--strict")
        .expect_exit(3)
        .run();
    assert!(
        out.stderr_text().contains(":6: on local: reboot"),
        "{}",
        out.stderr_text()
    );
}

#[test]
fn a_secret_never_reaches_the_replies() {
    let env = Env::new();
    let secret = "hunter2-correct-horse";
    let rb = env.write(
        "secret.lua",
        r#"runbook { name = "secret", params = { token = { secret = true, required = true } } }
local here = target("local")
step("use it", function()
  here:exec({ "sh", "-c", 'echo "in argv: $1"; echo "in env: $TOKEN"; cat', "sh", params.token },
    { env = { TOKEN = params.token }, stdin = "on stdin: " .. params.token .. "\n" })
  here:exec({ "sh", "-c", 'echo "$TOKEN" >&2; exit 3' }, { env = { TOKEN = params.token }, check = false })
end)
"#,
    );
    let file = env.tmp.path().join("R.jsonl");
    let real = Run::new(&env, &rb)
        .yes()
        .json()
        .env("RUNBOOK_PARAM_TOKEN", secret)
        .arg("--save-replies")
        .arg(&file)
        .expect_exit(0)
        .run();
    assert!(
        real.stdout_text().contains("in argv: ***"),
        "{}",
        real.describe()
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        !text.contains(secret) && !text.contains("hunter2"),
        "{text}"
    );
    assert!(
        text.contains("in argv: ***") && text.contains("\"TOKEN\":\"***\""),
        "{text}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // A test given another value still matches: both sides are masked.
    replay(&env, rb.to_str().unwrap(), &file)
        .arg("--strict")
        .env("RUNBOOK_PARAM_TOKEN", "another-value-entirely")
        .expect_exit(0)
        .run();
}

/// `secret_output = true`: the record and the terminal mask every line the command
/// prints, on both streams; the replies hold no more than the record does.
#[test]
fn a_secret_output_commands_stderr_never_reaches_the_replies() {
    let env = Env::new();
    let made = "gen-42-tok-abcdef";
    let rb = env.write(
        "mint.lua",
        r#"runbook { name = "mint" }
local here = target("local")
step("mint", function()
  here:exec({ "sh", "-c", 'v="gen-$((6*7))-tok-abcdef"; echo "$v"; echo "minted $v" >&2' }, { secret_output = true })
end)
"#,
    );
    let file = env.tmp.path().join("R.jsonl");
    let real = Run::new(&env, &rb)
        .yes()
        .json()
        .arg("--save-replies")
        .arg(&file)
        .expect_exit(0)
        .run();
    let text = std::fs::read_to_string(&file).unwrap();
    for (what, seen) in [
        ("replies", &text),
        ("events", &real.stdout_text()),
        ("record", &env.all_records()),
    ] {
        assert!(
            !seen.contains(made) && !seen.contains("gen-42"),
            "{what}: {seen}"
        );
    }
    assert!(text.contains(r#""stderr":"***""#), "{text}");
    // It still replays: the runbook gets back what the replies hold.
    replay(&env, rb.to_str().unwrap(), &file)
        .arg("--strict")
        .expect_exit(0)
        .run();
}

#[test]
fn a_bad_replies_file_is_refused_at_its_line() {
    let env = Env::new();
    let rb = env.write(
        "ok.lua",
        "runbook { name = \"ok\" }\nstep(\"s\", function() end)\n",
    );
    let file = env.write(
        "R.jsonl",
        "{\"runbook_replies\":1}\n{\"target\":\"local\",\"argv\":[\"true\"],\"exit\":0}\n",
    );
    let out = replay(&env, rb.to_str().unwrap(), &file)
        .expect_exit(2)
        .run();
    assert!(
        out.stderr_text()
            .contains(&format!("{}:2: unknown field `exit`", file.display())),
        "{}",
        out.stderr_text()
    );
    // A run refused before it started saves nothing (an earlier file stays as it was).
    let keep = env.write("keep.jsonl", "earlier\n");
    Run::new(&env, &rb)
        .arg("--set")
        .arg("nosuch=1")
        .arg("--save-replies")
        .arg(&keep)
        .expect_exit(2)
        .run();
    assert_eq!(std::fs::read_to_string(&keep).unwrap(), "earlier\n");
}

/// A run that asks first runs its reads twice (the plan it shows, then the run): the
/// replies hold the real run's, once.
#[test]
fn a_confirmed_run_saves_each_command_once() {
    let env = Env::new();
    let marker = env.tmp.path().join("made");
    let rb = env.write(
        "ask.lua",
        &subst(
            r#"runbook { name = "ask" }
local here = target("local")
step("s", function()
  here:exec({ "uname", "-s" }, { read_only = true })
  here:exec({ "touch", @marker@ })
end)
"#,
            &[("marker", &format!("{:?}", marker.display().to_string()))],
        ),
    );
    let file = env.tmp.path().join("R.jsonl");
    let (code, shown) = Run::new(&env, &rb)
        .arg("--save-replies")
        .arg(&file)
        .on_terminal("y\n");
    assert_eq!(code, 0, "{shown}");
    assert!(marker.exists());
    let text = std::fs::read_to_string(&file).unwrap();
    let commands: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(commands.len(), 2, "{text}");
    assert!(
        commands[0].contains("\"argv\":[\"uname\",\"-s\"]"),
        "{text}"
    );
    std::fs::remove_file(&marker).unwrap();
    replay(&env, rb.to_str().unwrap(), &file)
        .arg("--strict")
        .expect_exit(0)
        .run();
    assert!(!marker.exists());
}
