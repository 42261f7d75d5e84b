//! Integration tests of the run flow, driving the real binary: dry-run fidelity, `--json`,
//! run records, resume, confirmation, params, secrets, step options, the inspection
//! subcommands, and snapshots of the preview and of a few error messages.
//!
//! Fixtures live in `tests/runbooks/flow/`.

use crate::common::*;

use serde_json::Value;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------
// helpers

fn fixture(name: &str) -> PathBuf {
    repo().join("tests/runbooks/flow").join(name)
}

fn fixture_arg(name: &str) -> String {
    fixture(name).display().to_string()
}

/// Copies a fixture into the test's temp dir, so that it can be run by a short relative
/// path (stable labels in messages) or edited.
fn copy_fixture(env: &Env, name: &str) -> PathBuf {
    let body = std::fs::read_to_string(fixture(name)).unwrap();
    env.write(name, &body)
}

fn set(key: &str, value: impl AsRef<Path>) -> [String; 2] {
    [
        "--set".to_string(),
        format!("{key}={}", value.as_ref().display()),
    ]
}

/// Runs a repo runbook for real without touching this machine's own state: compile caches
/// and HOME point into the test's scratch dir, and GPUs come from the nvidia-smi double.
fn run_sandboxed(env: &Env, args: &[String]) -> Output {
    let scratch = env.scratch();
    Run::cmd(env, args)
        .env("HOME", scratch.join("home"))
        .env("XDG_CACHE_HOME", scratch.join("home/.cache"))
        .env("TORCHINDUCTOR_CACHE_DIR", scratch.join("inductor"))
        .env("TORCH_EXTENSIONS_DIR", scratch.join("extensions"))
        .env("TRITON_CACHE_DIR", scratch.join("triton"))
        .path_first(repo().join("tests/bin"))
        .run()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A param as `runbook show` lists it.
struct ShownParam {
    name: String,
    ty: String,
    required: bool,
    has_default: bool,
}

/// Parses the params section of `runbook show FILE`.
fn shown_params(env: &Env, file: &Path) -> Vec<ShownParam> {
    let o = Run::cmd(env, &["show".into(), file.display().to_string()]).run();
    assert_eq!(o.code(), 0, "show {}: {}", file.display(), o.describe());
    let text = o.stdout_text();
    let mut params = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line == "params:" {
            inside = true;
            continue;
        }
        if line == "steps:" {
            break;
        }
        // A param line starts with two spaces and the name; a help line is indented further.
        if !inside || !line.starts_with("  ") || line.starts_with("   ") || line == "  (none)" {
            continue;
        }
        let mut parts = line.trim().splitn(2, char::is_whitespace);
        let name = parts.next().unwrap().to_string();
        let facts: Vec<&str> = parts.next().unwrap_or("").trim().split(", ").collect();
        params.push(ShownParam {
            name,
            ty: facts[0].to_string(),
            required: facts.contains(&"required"),
            has_default: facts.iter().any(|f| f.starts_with("default ")),
        });
    }
    params
}

/// Every runbook in the repo's `runbooks/` and `examples/` folders, found at test time.
fn repo_runbooks() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["runbooks", "examples"] {
        let Ok(entries) = std::fs::read_dir(repo().join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "lua") && p.is_file() {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(
        !files.is_empty(),
        "expected at least examples/quickstart.lua"
    );
    files
}

/// The `--set`s to run a repo runbook in a sandbox: every path-like param points into a
/// fresh scratch dir. `Err(reason)` when it needs a value we cannot invent.
fn sandbox_sets(env: &Env, file: &Path) -> Result<Vec<String>, String> {
    // Shipped runbooks whose real run needs real inputs get them here.
    match file.file_stem().and_then(|s| s.to_str()) {
        Some("clean-reset") => return Err("covered by tests/clean_reset.rs, which runs it on the demo project and compares its dry-run".into()),
        Some("warm-cache") => {
            let venv = env.scratch().join("venv");
            let made = std::process::Command::new("python3").args(["-m", "venv", "--without-pip"]).arg(&venv).status();
            if !made.is_ok_and(|s| s.success()) {
                return Err("python3 -m venv failed".into());
            }
            let mut sets = set("venv", venv).to_vec();
            sets.extend(set("script", repo().join("examples/train/warmup.py")));
            return Ok(sets);
        }
        Some("venv-rebuild") => {
            if std::process::Command::new("uv").arg("--version").output().is_err() {
                return Err("uv is not installed (scripts/test installs it)".into());
            }
            return Ok(set("venv", env.scratch().join("rebuilt-venv")).to_vec());
        }
        _ => {}
    }
    let mut sets = Vec::new();
    for p in shown_params(env, file) {
        let pathlike = p.ty == "path" || p.name.to_ascii_lowercase().contains("dir");
        if pathlike {
            let dir = env.scratch().join(format!("param-{}", p.name));
            sets.extend(set(&p.name, dir));
        } else if p.required && !p.has_default {
            return Err(format!(
                "param '{}' ({}) is required and not path-like",
                p.name, p.ty
            ));
        }
    }
    Ok(sets)
}

// ---------------------------------------------------------------------------------------
// 1. dry-run fidelity, for every runbook in runbooks/ and examples/

#[test]
fn dry_run_plans_exactly_the_changes_a_real_run_makes() {
    let mut covered = 0;
    for file in repo_runbooks() {
        let env = Env::new();
        let sets = match sandbox_sets(&env, &file) {
            Ok(s) => s,
            Err(why) => {
                eprintln!("SKIPPED {}: {why}", file.display());
                continue;
            }
        };
        let base = [vec!["run".to_string(), file.display().to_string()], sets].concat();

        let dry = run_sandboxed(
            &env,
            &[base.clone(), args(&["--dry-run", "--json"])].concat(),
        );
        assert_eq!(
            dry.code(),
            0,
            "{} --dry-run: {}",
            file.display(),
            dry.describe()
        );
        let dry_events = dry.events();
        assert!(
            changes(&dry_events, Changes::Started).is_empty(),
            "{}: a dry-run started a change",
            file.display()
        );

        let real = run_sandboxed(&env, &[base.clone(), args(&["--yes", "--json"])].concat());
        assert_eq!(
            real.code(),
            0,
            "{} --yes: {}",
            file.display(),
            real.describe()
        );
        let real_events = real.events();

        let planned = changes(&dry_events, Changes::Planned);
        let started = changes(&real_events, Changes::Started);
        assert_eq!(
            planned,
            started,
            "{}: the dry-run's planned changes differ from the real run's",
            file.display()
        );
        covered += 1;
    }
    assert!(covered > 0, "no runbook was covered");
}

#[test]
fn offline_dry_run_contacts_nothing_for_every_runbook() {
    for file in repo_runbooks() {
        let env = Env::new();
        // Offline, nothing is contacted: any well-typed values do.
        let sets = if file.file_stem().is_some_and(|s| s == "clean-reset") {
            [
                "venv=/opt/venv",
                "repo=/root/dflash",
                "warmup=warmup.py",
                "train=train.py",
                "log=/root/train.log",
            ]
            .iter()
            .flat_map(|kv| ["--set".to_string(), kv.to_string()])
            .collect()
        } else {
            match sandbox_sets(&env, &file) {
                Ok(s) => s,
                Err(why) => {
                    eprintln!("SKIPPED {}: {why}", file.display());
                    continue;
                }
            }
        };
        let before: Vec<_> = std::fs::read_dir(env.scratch())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        let o = Run::new(&env, &file)
            .args(&sets)
            .dry_run()
            .offline()
            .json()
            .run();
        assert_eq!(
            o.code(),
            0,
            "{} --offline: {}",
            file.display(),
            o.describe()
        );
        let events = o.events();
        assert_eq!(mode_of(&events), "dry-run-offline");
        assert!(
            pick!(events, Event::ActionStarted { .. }).is_empty(),
            "{}: --offline started an action",
            file.display()
        );
        assert!(pick!(events, Event::Output { .. }).is_empty());
        // Nothing was created in the scratch dir where its path params point.
        let created: Vec<_> = std::fs::read_dir(env.scratch())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| !before.contains(p))
            .collect();
        assert!(
            created.is_empty(),
            "{}: --offline created {created:?}",
            file.display()
        );
    }
}

#[test]
fn offline_plans_reads_too() {
    let env = Env::new();
    let dir = env.scratch();
    let o = Run::new(&env, fixture("read_only.lua"))
        .set("dir", &dir)
        .dry_run()
        .offline()
        .json()
        .expect_exit(0)
        .run();
    let events = o.events();
    let effects = pick!(events, Event::ActionPlanned { effect, .. } => *effect);
    assert_eq!(effects, [Effect::Read, Effect::Change]);
    assert!(!dir.join("by-read").exists(), "offline ran a read");
}

// ---------------------------------------------------------------------------------------
// 2. --json

#[test]
fn json_is_one_event_object_per_line() {
    let env = Env::new();
    let dir = env.scratch().join("work");
    let o = Run::new(&env, fixture("preview.lua"))
        .set("dir", &dir)
        .yes()
        .json()
        .expect_exit(0)
        .run();
    // The wire format itself, read as plain JSON (what a consumer without runbook's
    // types sees); the rest of the suite reads events as `runbook::events` types.
    let text = o.stdout_text();
    let mut kinds = Vec::new();
    for line in text.lines() {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        assert!(v.is_object(), "{line}");
        assert!(v["event"].is_string(), "no event: {line}");
        let ts = v["ts"].as_str().unwrap_or_else(|| panic!("no ts: {line}"));
        assert!(
            ts.ends_with('Z') && ts.contains('T'),
            "ts not RFC 3339: {ts}"
        );
        kinds.push(v["event"].as_str().unwrap().to_string());
    }
    assert_eq!(kinds.first().map(String::as_str), Some("run_started"));
    assert_eq!(kinds.last().map(String::as_str), Some("run_finished"));
    for kind in [
        "step_started",
        "step_finished",
        "step_skipped",
        "action_started",
        "action_finished",
        "output",
        "log",
    ] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "no {kind} event in {kinds:?}"
        );
    }
    let events = o.events();
    // The read in step 1 printed "looking".
    assert!(
        !pick!(events, Event::Output { line, stream: Stream::Stdout, .. } if line == "looking")
            .is_empty()
    );
    let Some(Event::RunFinished {
        outcome,
        exit_code,
        skipped,
        ..
    }) = events.last()
    else {
        panic!("the events end with run_finished: {events:#?}")
    };
    assert_eq!(*outcome, RunOutcome::Ok);
    assert_eq!(*exit_code, 0);
    assert_eq!(*skipped, 1);
    // Nothing for humans on stdout in --json mode: the terminal view is off.
    assert!(!o.stderr_text().contains("step 1"), "{}", o.stderr_text());
}

// ---------------------------------------------------------------------------------------
// 3. the run record, history, log

#[test]
fn run_record_holds_the_same_events_and_log_prints_it() {
    let env = Env::new();
    let dir = env.scratch().join("work");
    let o = Run::new(&env, fixture("preview.lua"))
        .set("dir", &dir)
        .yes()
        .json()
        .set("count", "3")
        .expect_exit(0)
        .run();
    let events = o.events();
    let id = run_id(&events);

    let files = env.record_files();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(
        files[0].file_name().unwrap(),
        format!("{id}.jsonl").as_str()
    );
    let record_text = std::fs::read_to_string(&files[0]).unwrap();
    assert_eq!(
        record_text,
        o.stdout_text(),
        "the record differs from --json"
    );
    assert_eq!(env.last_record(), events);

    let Event::RunStarted {
        params,
        mode,
        runbook,
        ..
    } = &events[0]
    else {
        panic!("the events start with run_started: {events:#?}")
    };
    assert_eq!(params["count"], 3);
    assert_eq!(params["dir"], dir.display().to_string());
    assert_eq!(mode, "real");
    assert_eq!(runbook, "flow-preview");

    let h = Run::cmd(&env, args(&["history"])).expect_exit(0).run();
    let line = h
        .stdout_text()
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("history does not list {id}:\n{}", h.stdout_text()))
        .to_string();
    assert!(line.contains("flow-preview") && line.contains("real") && line.contains("ok"));

    for which in ["last", id.as_str(), &id[..id.len() - 2]] {
        let l = Run::cmd(&env, args(&["log", which])).run();
        assert_eq!(l.code(), 0, "log {which}: {}", l.describe());
        let text = l.stdout_text();
        assert!(text.contains(&id), "log {which}: {text}");
        for step in ["look", "make", "remove"] {
            assert!(text.contains(step), "log {which} lacks step {step}: {text}");
        }
        // The log shows every output line.
        assert!(text.contains("looking"), "{text}");
        assert!(text.contains(&files[0].display().to_string()), "{text}");
    }

    let j = Run::cmd(&env, args(&["log", "--json", "last"]))
        .expect_exit(0)
        .run();
    assert_eq!(j.stdout_text(), record_text);

    Run::cmd(&env, args(&["log", "nosuchrun"]))
        .expect_exit(2)
        .run();
}

#[test]
fn dry_runs_are_recorded_as_such() {
    let env = Env::new();
    Run::new(&env, fixture("preview.lua"))
        .dry_run()
        .expect_exit(0)
        .run();
    assert_eq!(env.record_count(), 1);
    assert_eq!(mode_of(&env.last_record()), "dry-run");
    let h = Run::cmd(&env, args(&["history"])).run();
    assert!(h.stdout_text().contains("dry-run"), "{}", h.stdout_text());
}

/// `history --runbook/--target/--failed/--since` (issue 33 item 5): each narrows the
/// list, together they all hold; a target matches the runs that ran or planned a command
/// on it (a container on it counts), here over a real sshd.
#[test]
fn history_filters_by_runbook_target_outcome_and_time() {
    require_sshd!();
    let fleet = crate::common::sshd::Fleet::start(1);
    fleet.container(200);
    let env = Env::new();
    let alpha = env.write(
        "alpha.lua",
        r#"runbook { name = "alpha" }
step("here", function() target("local"):exec({ "true" }) end)
"#,
    );
    let beta = env.write(
        "beta.lua",
        r#"runbook { name = "beta", params = { fail = { type = "boolean", default = false } } }
step("there", function()
  target("node1"):pct(200):exec({ "true" })
  if params.fail then error("asked to fail") end
end)
"#,
    );
    Run::new(&env, &alpha).yes().expect_exit(0).run();
    // Record times are to the millisecond: a second between them is room enough.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let between = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    Run::new(&env, &beta).ssh(&fleet).yes().expect_exit(0).run();
    Run::new(&env, &beta)
        .ssh(&fleet)
        .yes()
        .set("fail", "true")
        .expect_exit(1)
        .run();
    Run::new(&env, &beta)
        .ssh(&fleet)
        .dry_run()
        .expect_exit(0)
        .run();
    // Oldest first (run ids within one second do not sort by time).
    let ids: Vec<String> = env
        .record_files()
        .iter()
        .map(|f| f.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(ids.len(), 4);
    // The runs `history FILTERS…` lists: 0 alpha, 1 beta ok, 2 beta failed, 3 beta dry-run.
    let listed = |filters: &[&str]| -> Vec<usize> {
        let mut words = vec!["history"];
        words.extend(filters);
        let out = Run::cmd(&env, words).expect_exit(0).run();
        let text = out.stdout_text();
        (0..ids.len())
            .filter(|&i| text.lines().any(|l| l.starts_with(ids[i].as_str())))
            .collect()
    };
    assert_eq!(listed(&[]), [0, 1, 2, 3]);
    assert_eq!(listed(&["--runbook", "alpha"]), [0]);
    assert_eq!(listed(&["--runbook", "b*"]), [1, 2, 3]);
    assert_eq!(listed(&["--runbook", "beta.lua"]), [1, 2, 3], "or by file");
    assert_eq!(listed(&["--target", "local"]), [0]);
    assert_eq!(
        listed(&["--target", "node1"]),
        [1, 2, 3],
        "a container on node1 counts, and a dry-run's planned command"
    );
    assert_eq!(listed(&["--target", "node?/ct2*"]), [1, 2, 3]);
    assert!(listed(&["--target", "node2"]).is_empty());
    assert_eq!(listed(&["--failed"]), [2]);
    assert_eq!(listed(&["--since", "1h"]), [0, 1, 2, 3]);
    assert_eq!(listed(&["--since", &between]), [1, 2, 3]);
    assert_eq!(
        listed(&["--since", &between, "--target", "node1", "--failed"]),
        [2]
    );
    assert_eq!(listed(&["--runbook", "beta", "-n", "1"]), [3]);

    let none = Run::cmd(&env, ["history", "--failed", "--runbook", "alpha"])
        .expect_exit(0)
        .run();
    assert!(
        none.stdout_text().contains("is failed, of runbook alpha"),
        "{}",
        none.describe()
    );
    let bad = Run::cmd(&env, ["history", "--since", "last tuesday"])
        .expect_exit(2)
        .run();
    assert!(
        bad.stderr_text().contains("--since")
            && bad
                .stderr_text()
                .contains("neither a duration (2h, 7d) nor a UTC date"),
        "{}",
        bad.describe()
    );
}

// ---------------------------------------------------------------------------------------
// 4. --resume

/// Runs resume.lua (from `file`) once: step 2 fails because the marker is missing.
fn failed_first_run(env: &Env, file: &str, dir: &Path) -> String {
    let o = Run::new(env, file)
        .set("dir", dir)
        .json()
        .yes()
        .expect_exit(1)
        .run();
    let events = o.events();
    let Event::StepFinished { index, .. } = step_finished(&events, FAILED) else {
        unreachable!()
    };
    assert_eq!(*index, 1);
    assert_eq!(
        std::fs::read_to_string(dir.join("step1.log")).unwrap(),
        "a\n"
    );
    run_id(&events)
}

#[test]
fn resume_skips_the_steps_that_succeeded() {
    let env = Env::new();
    let dir = env.scratch();
    let file = fixture_arg("resume.lua");
    let first = failed_first_run(&env, &file, &dir);

    std::fs::write(dir.join("marker"), "").unwrap();
    let o = Run::new(&env, &file)
        .set("dir", &dir)
        .json()
        .yes()
        .args(["--resume", "last"])
        .expect_exit(0)
        .run();
    let events = o.events();
    let Event::RunStarted { resumed_from, .. } = &events[0] else {
        panic!("the events start with run_started: {events:#?}")
    };
    assert_eq!(resumed_from.as_deref(), Some(first.as_str()));
    let skipped = pick!(events, Event::StepSkipped { index, reason, .. } => (*index, reason));
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    let (index, reason) = skipped[0];
    assert_eq!(index, 0);
    assert!(reason.contains("done in run"), "{reason}");
    assert!(reason.contains(&first), "{reason}");
    let started = pick!(events, Event::StepStarted { index, .. } => *index);
    assert_eq!(started, [1]);
    // Step 1 did not run again; step 2 did.
    assert_eq!(
        std::fs::read_to_string(dir.join("step1.log")).unwrap(),
        "a\n"
    );
    assert!(dir.join("step2.done").exists());

    // The terminal view says so too: resume the resumed run, everything is done.
    let o = Run::new(&env, &file)
        .set("dir", &dir)
        .yes()
        .args(["--resume", "last"])
        .expect_exit(0)
        .run();
    let text = o.stderr_text();
    assert!(text.contains("resuming run"), "{text}");
    assert!(
        text.contains(&format!("skipped: done in run {first}")),
        "{text}"
    );
    assert!(text.contains("skipped: done in run"), "{text}");
    assert_eq!(
        std::fs::read_to_string(dir.join("step1.log")).unwrap(),
        "a\n"
    );
}

#[test]
fn resume_refuses_a_changed_runbook() {
    let env = Env::new();
    let dir = env.scratch();
    let copy = copy_fixture(&env, "resume.lua");
    failed_first_run(&env, &copy.display().to_string(), &dir);
    let records = env.record_count();

    let mut body = std::fs::read_to_string(&copy).unwrap();
    body.push_str("-- edited\n");
    std::fs::write(&copy, body).unwrap();
    std::fs::write(dir.join("marker"), "").unwrap();
    let o = Run::new(&env, &copy)
        .set("dir", &dir)
        .yes()
        .args(["--resume", "last"])
        .expect_exit(2)
        .run();
    assert!(
        o.stderr_text().contains("changed since run"),
        "{}",
        o.stderr_text()
    );
    assert_eq!(
        env.record_count(),
        records,
        "a refused resume wrote a record"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("step1.log")).unwrap(),
        "a\n"
    );
    assert!(!dir.join("step2.done").exists());
}

#[test]
fn resume_refuses_different_params() {
    let env = Env::new();
    let dir = env.scratch();
    let file = fixture_arg("resume.lua");
    let first = failed_first_run(&env, &file, &dir);
    std::fs::write(dir.join("marker"), "").unwrap();
    let o = Run::new(&env, &file)
        .set("dir", &dir)
        .yes()
        .set("label", "b")
        .args(["--resume", "last"])
        .expect_exit(2)
        .run();
    let text = o.stderr_text();
    assert!(text.contains("param 'label' differs"), "{text}");
    assert!(text.contains(&first), "{text}");
    assert_eq!(env.record_count(), 1);
    assert!(!dir.join("step2.done").exists());

    let o = Run::new(&env, fixture("params.lua"))
        .set("name", "x")
        .args(["--resume", "last"])
        .expect_exit(2)
        .run();
    assert!(
        o.stderr_text().contains("no earlier run"),
        "{}",
        o.stderr_text()
    );
}

// ---------------------------------------------------------------------------------------
// 5. confirmation

fn assert_refused_then_runs_with_yes(fixture_name: &str, reason: &str) {
    let env = Env::new();
    let dir = env.scratch();
    let base = [
        vec!["run".to_string(), fixture_arg(fixture_name)],
        set("dir", &dir).to_vec(),
    ]
    .concat();

    for extra in [&[][..], &["--json"][..]] {
        let o = Run::cmd(&env, [base.clone(), args(extra)].concat()).run();
        assert_eq!(o.code(), 2, "{extra:?}: {}", o.describe());
        let text = o.stderr_text();
        assert!(text.contains("needs confirmation"), "{text}");
        assert!(text.contains(reason), "{text}");
        assert!(text.contains("--yes"), "{text}");
        assert!(!dir.join("created").exists(), "the first step ran anyway");
        assert_eq!(env.record_count(), 0, "a refused run wrote a record");
    }

    // A dry-run needs no confirmation and changes nothing.
    Run::cmd(&env, [base.clone(), args(&["--dry-run"])].concat())
        .expect_exit(0)
        .run();
    assert!(!dir.join("created").exists());

    Run::cmd(&env, [base, args(&["--yes"])].concat())
        .expect_exit(0)
        .run();
    assert_eq!(env.record_count(), 2);
}

#[test]
fn rm_in_the_plan_needs_yes_without_a_terminal() {
    assert_refused_then_runs_with_yes("confirm_rm.lua", "rm -f --");
}

#[test]
fn confirm_step_needs_yes_without_a_terminal() {
    assert_refused_then_runs_with_yes("confirm_step.lua", "step \"risky\" asks for confirmation");
}

// ---------------------------------------------------------------------------------------
// 6. params

fn params_run(env: &Env, extra: &[&str]) -> Output {
    Run::cmd(
        env,
        [
            args(&["run", &fixture_arg("params.lua"), "--json"]),
            args(extra),
        ]
        .concat(),
    )
    .run()
}

fn assert_invalid(o: &Output, needles: &[&str]) {
    assert_eq!(o.code(), 2, "{}", o.describe());
    let text = o.stderr_text();
    for n in needles {
        assert!(text.contains(n), "expected {n:?} in:\n{text}");
    }
    // With --json, the one line is the error itself.
    let lines = o.lines();
    assert!(
        o.stdout_text().is_empty() || matches!(lines[..], [Line::Error(_)]),
        "an invalid run printed events: {}",
        o.stdout_text()
    );
}

#[test]
fn param_errors_exit_2_before_anything_runs() {
    let env = Env::new();
    assert_invalid(
        &params_run(&env, &["--set", "name=x", "--set", "count=abc"]),
        &["param 'count'", "expected an integer, got 'abc'"],
    );
    assert_invalid(
        &params_run(&env, &["--set", "name=x", "--set", "colour=blue"]),
        &["unknown param 'colour'", "did you mean 'color'"],
    );
    assert_invalid(
        &params_run(&env, &["--set", "name=x", "--set", "cuont=1"]),
        &[
            "unknown param 'cuont'",
            "declared: color, count, flag, name",
        ],
    );
    assert_invalid(&params_run(&env, &[]), &["missing required param 'name'"]);
    assert_invalid(
        &params_run(&env, &["--set", "name=x", "--set", "color=blue"]),
        &[
            "param 'color'",
            "'blue' is not one of the choices: red, green",
        ],
    );
    assert_invalid(
        &params_run(&env, &["--set", "name=x", "--set", "flag=maybe"]),
        &["param 'flag'", "expected true or false, got 'maybe'"],
    );
    // Several problems are reported at once.
    assert_invalid(
        &params_run(&env, &["--set", "count=abc", "--set", "cuont=1"]),
        &[
            "param 'count'",
            "unknown param 'cuont'",
            "missing required param 'name'",
        ],
    );
    // Nor does a dry-run start with bad params.
    assert_invalid(
        &params_run(
            &env,
            &["--dry-run", "--set", "count=abc", "--set", "name=x"],
        ),
        &["param 'count'"],
    );
    assert_eq!(env.record_count(), 0);
}

#[test]
fn a_transposed_param_name_gets_a_suggestion() {
    let env = Env::new();
    assert_invalid(
        &params_run(&env, &["--set", "name=x", "--set", "cuont=1"]),
        &["unknown param 'cuont'", "did you mean 'count'"],
    );
}

fn reported(o: &Output) -> String {
    assert_eq!(o.code(), 0, "{}", o.describe());
    let msgs = o.logs();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    msgs[0].clone()
}

#[test]
fn param_values_from_set_env_and_defaults() {
    let env = Env::new();
    assert_eq!(
        reported(&params_run(&env, &["--set", "name=x"])),
        "count=1 flag=false color=red name=x"
    );
    assert_eq!(
        reported(&params_run(
            &env,
            &[
                "--set",
                "name=x",
                "--set",
                "count=42",
                "--set",
                "color=green",
                "--set",
                "flag=yes"
            ]
        )),
        "count=42 flag=true color=green name=x"
    );
    assert_eq!(
        reported(&params_run(
            &env,
            &["--set", "name=x", "--set", "flag=false"]
        )),
        "count=1 flag=false color=red name=x"
    );
    // The last --set wins.
    assert_eq!(
        reported(&params_run(&env, &["--set", "name=x", "--set", "name=y"])),
        "count=1 flag=false color=red name=y"
    );

    let from_env = Run::new(&env, fixture("params.lua"))
        .json()
        .env("RUNBOOK_PARAM_NAME", "from-env")
        .env("RUNBOOK_PARAM_COUNT", "7")
        .env("RUNBOOK_PARAM_FLAG", "on")
        .run();
    assert_eq!(
        reported(&from_env),
        "count=7 flag=true color=red name=from-env"
    );
    let events = from_env.events();
    let Event::RunStarted { params, .. } = &events[0] else {
        panic!("the events start with run_started: {events:#?}")
    };
    assert_eq!(params["name"], "from-env");
    assert_eq!(params["count"], 7);
    assert_eq!(params["flag"], true);

    // --set beats the environment.
    let both = Run::new(&env, fixture("params.lua"))
        .json()
        .set("name", "from-set")
        .env("RUNBOOK_PARAM_NAME", "from-env")
        .run();
    assert_eq!(
        reported(&both),
        "count=1 flag=false color=red name=from-set"
    );

    // A bad value from the environment names the variable.
    let bad = Run::new(&env, fixture("params.lua"))
        .set("name", "x")
        .env("RUNBOOK_PARAM_COUNT", "seven")
        .run();
    assert_invalid(&bad, &["RUNBOOK_PARAM_COUNT", "param 'count'"]);
}

#[test]
fn writing_to_params_fails_the_step_at_its_line() {
    let env = Env::new();
    let o = Run::new(&env, fixture("params_write.lua"))
        .json()
        .expect_exit(1)
        .run();
    let events = o.events();
    assert_eq!(step_outcome(&events, 0), StepOutcome::Failed);
    let err = step_error(&events, 0);
    assert!(err.contains("params_write.lua:8:"), "{err}");
    assert!(err.contains("read-only"), "{err}");
}

#[test]
fn what_the_top_level_logs_is_shown_once_by_the_run_and_kept_in_its_record() {
    // It was dropped: the top level runs before the run has any sink.
    let env = Env::new();
    let file = env.write(
        "early.lua",
        "runbook { name = \"early\", description = \"logs at its top level\" }\n\
         print(\"loaded from the top\")\n\
         log.warn(\"careful: top-level warning\")\n\
         step(\"s\", function() log.info(\"in the step\") end)\n",
    );
    // (A confirmed run loads the file twice, for its plan pass and for the run; only the
    // run's own load is shown, as here.)
    for extra in [&["--yes"][..], &["--dry-run"][..]] {
        let out = Run::new(&env, &file).args(extra).expect_exit(0).run();
        let err = out.stderr_str();
        assert_eq!(
            err.matches("loaded from the top").count(),
            1,
            "{extra:?}\n{err}"
        );
        assert_eq!(
            err.matches("careful: top-level warning").count(),
            1,
            "{extra:?}\n{err}"
        );
        assert!(
            err.find("loaded from the top") < err.find("in the step"),
            "{extra:?}\n{err}"
        );
    }
    let record = env.last_record();
    let logs =
        pick!(record, Event::Log { step, level, message } => (*step, *level, message.as_str()));
    assert_eq!(
        logs[0],
        (None, Level::Info, "loaded from the top"),
        "{logs:?}"
    );
    assert_eq!(logs[1].1, Level::Warn, "{logs:?}");
}

#[test]
fn rawset_and_rawget_do_not_get_past_the_read_only_params() {
    // With a table proxy, rawset stored the value on the proxy: every later read saw 2
    // while the record's params still said 1. Then `pairs` handed out the values' table.
    let env = Env::new();
    let o = Run::new(&env, fixture("params_rawset.lua")).json().run();
    let events = o.events();
    let logs = logs(&events, None);
    assert_eq!(logs.len(), 4, "{logs:?}");
    assert!(logs[0].starts_with("rawget: false"), "{logs:?}");
    assert!(logs[0].contains("table expected"), "{logs:?}");
    assert!(logs[1].starts_with("rawset: false"), "{logs:?}");
    assert!(logs[1].contains("table expected"), "{logs:?}");
    // What `pairs` hands out is a copy (found by review: it was the values' own table).
    assert_eq!(logs[2], "count is 1");
    assert!(logs[3].contains("params[1]: no such param"), "{logs:?}");
}

// ---------------------------------------------------------------------------------------
// 7. secrets

const SECRETS: &[&str] = &[
    "token-secret-default",
    "derived-secret-value",
    "token-from-set-Q7",
    "token-from-env-Z9",
];

fn assert_no_secret(what: &str, text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "{what} shows the secret {s:?}:\n{text}");
    }
}

#[test]
fn secrets_appear_nowhere() {
    let env = Env::new();
    let dir = env.scratch();
    let file = fixture_arg("secrets.lua");
    let base = [
        vec!["run".to_string(), file.clone()],
        set("dir", &dir).to_vec(),
    ]
    .concat();
    let mut seen = Vec::new();

    /// What is run, the extra args, and an environment variable to set.
    type Variant<'a> = (&'a str, Vec<String>, Option<(&'a str, &'a str)>);
    let variants: Vec<Variant> = vec![
        ("real run", args(&["-v", "--yes"]), None),
        ("real run --json", args(&["--json", "--yes"]), None),
        (
            "real run --set",
            args(&["-v", "--yes", "--set", "token=token-from-set-Q7"]),
            None,
        ),
        (
            "real run, env",
            args(&["--json", "--yes"]),
            Some(("RUNBOOK_PARAM_TOKEN", "token-from-env-Z9")),
        ),
        ("dry-run", args(&["--dry-run", "-v"]), None),
        ("dry-run --json", args(&["--dry-run", "--json"]), None),
        (
            "dry-run --set",
            args(&["--dry-run", "--set", "token=token-from-set-Q7"]),
            None,
        ),
        ("offline", args(&["--dry-run", "--offline"]), None),
    ];
    for (what, extra, var) in variants {
        let mut run = Run::cmd(&env, &base).args(&extra);
        if let Some((k, v)) = var {
            run = run.env(k, v);
        }
        let o = run.run();
        // The last step fails on purpose (with the secrets in its message), in every mode.
        assert_eq!(o.code(), 1, "{what}: {}", o.describe());
        assert_no_secret(&format!("{what}: stdout"), &o.stdout_text());
        assert_no_secret(&format!("{what}: stderr"), &o.stderr_text());
        seen.push(format!("{}{}", o.stdout_text(), o.stderr_text()));

        for (sub, json) in [("log", false), ("log --json", true)] {
            let mut a = vec!["log".to_string()];
            if json {
                a.push("--json".into());
            }
            a.push("last".into());
            let l = Run::cmd(&env, &a).expect_exit(0).run();
            assert_no_secret(
                &format!("{what}: {sub}"),
                &format!("{}{}", l.stdout_text(), l.stderr_text()),
            );
        }
    }
    assert_no_secret("the run records", &env.all_records());
    // The command really printed them, masked.
    let all = seen.join("\n");
    assert!(all.contains("token: *** derived: ***"), "{all}");
    assert!(all.contains("token *** derived ***"), "{all}");
    assert!(all.contains("boom *** ***"), "{all}");
    // The real runs did use the real value.
    assert!(dir.join("derived-secret-value").exists());

    let records = env.all_records();
    assert!(records.contains(r#""token":"***""#), "{records}");

    for sub in [
        args(&["show", &file]),
        args(&["check", &file]),
        args(&["list", &fixture(".").display().to_string()]),
        args(&["history"]),
    ] {
        let o = Run::cmd(&env, &sub).run();
        assert_eq!(o.code(), 0, "{sub:?}: {}", o.describe());
        assert_no_secret(
            &format!("{sub:?}"),
            &format!("{}{}", o.stdout_text(), o.stderr_text()),
        );
    }
    let show = Run::cmd(&env, args(&["show", &file])).run();
    assert!(
        show.stdout_text().contains("secret, default ***"),
        "{}",
        show.stdout_text()
    );
}

#[test]
fn secret_rejected_by_choices_is_masked_in_the_error() {
    let env = Env::new();
    let file = env.write(
        "choice.lua",
        r#"runbook { name = "choice", params = {
  token = { secret = true, choices = { "alpha-token", "beta-token" }, default = "alpha-token" },
} }
step("noop", function() end)
"#,
    );
    for sub in ["run", "check"] {
        let o = Run::cmd(
            &env,
            args(&[
                sub,
                &file.display().to_string(),
                "--set",
                "token=typo-of-the-real-Secret",
            ]),
        )
        .expect_exit(2)
        .run();
        assert!(
            o.stderr_text().contains("param 'token'"),
            "{}",
            o.stderr_text()
        );
        assert!(
            !o.stderr_text().contains("typo-of-the-real-Secret"),
            "{sub}: {}",
            o.stderr_text()
        );
    }
}

#[test]
fn a_short_secret_does_not_corrupt_the_run_id() {
    let env = Env::new();
    let file = env.write(
        "pin.lua",
        r#"runbook { name = "pin", params = { pin = { secret = true, required = true } } }
step("noop", function() end)
"#,
    );
    // The year: the first four digits of every run id made today.
    let year = humantime_year();
    Run::cmd(
        &env,
        args(&[
            "run",
            &file.display().to_string(),
            "--json",
            "--set",
            &format!("pin={year}"),
        ]),
    )
    .expect_exit(0)
    .run();
    let files = env.record_files();
    let id = files[0].file_stem().unwrap().to_string_lossy().into_owned();
    assert_eq!(run_id(&env.last_record()), id);
    Run::cmd(&env, args(&["log", &id])).expect_exit(0).run();
}

/// The current UTC year, from the system clock (no date crate in dev-dependencies).
fn humantime_year() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // Days since 1970-01-01 → civil year (Howard Hinnant's algorithm).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    year.to_string()
}

// ---------------------------------------------------------------------------------------
// 8. step options

#[test]
fn retries_when_and_unchecked_commands() {
    let env = Env::new();
    let dir = env.scratch();
    let o = Run::new(&env, fixture("options.lua"))
        .json()
        .yes()
        .set("dir", &dir)
        .expect_exit(0)
        .run();
    let events = o.events();

    let attempts = pick!(events, Event::StepStarted { index, attempt, .. } => (*index, *attempt));
    assert_eq!(attempts, [(0, 1), (0, 2), (0, 3), (2, 1)]);
    assert_eq!(
        std::fs::read_to_string(dir.join("count")).unwrap().trim(),
        "3"
    );
    let warnings = logs(&events, Some(Level::Warn)).len();
    assert_eq!(warnings, 2, "one warning per retry");

    let skipped =
        pick!(events, Event::StepSkipped { index, reason, .. } => (*index, reason.as_str()));
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].0, 1);
    assert!(skipped[0].1.contains("when"), "{skipped:?}");
    assert!(!dir.join("never").exists());

    assert!(logs(&events, None).contains(&"code=3 ok=false".to_string()));
    let Some(Event::RunFinished {
        outcome,
        skipped,
        failed,
        ..
    }) = events.last()
    else {
        panic!("the events end with run_finished: {events:#?}")
    };
    assert_eq!((*outcome, *skipped, *failed), (RunOutcome::Ok, 1, 0));
}

#[test]
fn a_failing_step_stops_the_run_but_always_steps_run() {
    let env = Env::new();
    let dir = env.scratch();
    let o = Run::new(&env, fixture("failing.lua"))
        .json()
        .yes()
        .set("dir", &dir)
        .expect_exit(1)
        .run();
    let events = o.events();
    assert!(dir.join("first").exists());
    assert!(!dir.join("after").exists(), "a step after the failure ran");
    assert!(dir.join("cleanup").exists(), "the always step did not run");

    let finished = pick!(events, Event::StepFinished { index, outcome, .. } => (*index, *outcome));
    assert_eq!(
        finished,
        [
            (0, StepOutcome::Changed),
            (1, StepOutcome::Failed),
            (3, StepOutcome::Changed)
        ]
    );
    let err = step_error(&events, 1);
    assert!(err.contains("failing.lua:13"), "{err}");
    assert!(err.contains("exit code 7"), "{err}");
    assert!(err.contains("about to fail"), "{err}");
    let skipped =
        pick!(events, Event::StepSkipped { index, reason, .. } => (*index, reason.as_str()));
    assert_eq!(skipped, [(2, "an earlier step failed")]);
    let Some(Event::RunFinished {
        outcome,
        exit_code,
        ok,
        failed,
        ..
    }) = events.last()
    else {
        panic!("the events end with run_finished: {events:#?}")
    };
    assert_eq!(
        (*outcome, *exit_code, *ok, *failed),
        (RunOutcome::Failed, 1, 2, 1)
    );

    // The terminal view says which step failed and why.
    let o = Run::new(&env, fixture("failing.lua"))
        .yes()
        .set("dir", &dir)
        .expect_exit(1)
        .run();
    let text = o.stderr_text();
    assert!(text.contains("✗ breaks"), "{text}");
    assert!(text.contains("exit code 7"), "{text}");
    assert!(text.contains("skipped: an earlier step failed"), "{text}");
    assert!(
        // The failed step ran its command (a change) before it failed: it counts.
        text.contains("failed: ok=2 changed=3 failed=1 skipped=1"),
        "{text}"
    );
}

#[test]
fn read_only_commands_run_during_a_dry_run_and_changes_do_not() {
    let env = Env::new();
    let dir = env.scratch();
    let base = [
        args(&["run", &fixture_arg("read_only.lua")]),
        set("dir", &dir).to_vec(),
    ]
    .concat();
    let o = Run::cmd(
        &env,
        [base.clone(), args(&["--dry-run", "--json"])].concat(),
    )
    .expect_exit(0)
    .run();
    assert!(dir.join("by-read").exists(), "the read did not run");
    assert!(!dir.join("by-change").exists(), "the dry-run made a change");
    let events = o.events();
    assert_eq!(pick!(events, Event::ActionStarted { .. }).len(), 1);
    assert_eq!(changes(&events, Changes::Planned).len(), 1);

    std::fs::remove_file(dir.join("by-read")).unwrap();
    Run::cmd(&env, [base.clone(), args(&["--yes"])].concat())
        .expect_exit(0)
        .run();
    assert!(dir.join("by-read").exists());
    assert!(dir.join("by-change").exists());
}

// ---------------------------------------------------------------------------------------
// 9. check, show, list, docs, finding runbooks

#[test]
fn check_accepts_good_runbooks_and_names_the_line_of_a_syntax_error() {
    let env = Env::new();
    let o = Run::cmd(
        &env,
        args(&[
            "check",
            &fixture_arg("options.lua"),
            &fixture_arg("params.lua"),
        ]),
    )
    .expect_exit(0)
    .run();
    let text = o.stdout_text();
    assert!(
        text.contains("ok: ") && text.contains("runbook 'flow-options', 1 params, 3 steps"),
        "{text}"
    );
    assert!(
        text.contains("runbook 'flow-params', 4 params, 1 steps"),
        "{text}"
    );

    let bad = env.write("broken.lua", SYNTAX_ERROR);
    let o = Run::cmd(
        &env,
        args(&[
            "check",
            &fixture_arg("options.lua"),
            &bad.display().to_string(),
        ]),
    )
    .expect_exit(2)
    .run();
    let text = o.stderr_text();
    assert!(text.contains(&format!("{}:4:", bad.display())), "{text}");
    assert!(
        text.contains("1 of 2 runbook(s) failed the check"),
        "{text}"
    );
    // check validates --set values too.
    let o = Run::cmd(
        &env,
        args(&["check", &fixture_arg("params.lua"), "--set", "count=abc"]),
    )
    .expect_exit(2)
    .run();
    assert!(
        o.stderr_text().contains("param 'count'"),
        "{}",
        o.stderr_text()
    );
    // check runs no step.
    let dir = env.scratch();
    Run::cmd(
        &env,
        [
            args(&["check", &fixture_arg("read_only.lua")]),
            set("dir", &dir).to_vec(),
        ]
        .concat(),
    )
    .expect_exit(0)
    .run();
    assert!(!dir.join("by-read").exists());
    assert_eq!(env.record_count(), 0);
}

const SYNTAX_ERROR: &str = r#"runbook { name = "broken", description = "broken on purpose" }

step("a", function()
  local x = = 1
end)
"#;

#[test]
fn show_lists_params_and_steps_in_order() {
    let env = Env::new();
    let o = Run::cmd(&env, args(&["show", &fixture_arg("params.lua")]))
        .expect_exit(0)
        .run();
    let text = o.stdout_text();
    assert!(text.starts_with("flow-params ("), "{text}");
    assert!(text.contains("reports its params"), "{text}");
    for needle in [
        "count          integer, default 1",
        "how many",
        "flag           boolean, default false",
        "color          string, default red, one of red|green",
        "name           string, required",
        "who",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }

    let o = Run::cmd(&env, args(&["show", &fixture_arg("failing.lua")])).run();
    let text = o.stdout_text();
    let steps: Vec<&str> = text
        .split("steps:\n")
        .nth(1)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(steps.len(), 4, "{text}");
    for (i, (line, name)) in steps
        .iter()
        .zip(["first", "breaks", "after", "cleanup"])
        .enumerate()
    {
        assert!(
            line.trim_start().starts_with(&format!("{}. {name}", i + 1)),
            "{line}"
        );
    }
    assert!(steps[3].contains("[always]"), "{}", steps[3]);
    assert!(steps[0].contains("failing.lua:8"), "{}", steps[0]);

    let o = Run::cmd(&env, args(&["show", &fixture_arg("options.lua")])).run();
    let text = o.stdout_text();
    assert!(text.contains("1. flaky  [retries=2]"), "{text}");
    assert!(text.contains("2. never  [when]"), "{text}");
}

#[test]
fn list_shows_the_runbooks_of_a_dir() {
    let env = Env::new();
    let flow = repo().join("tests/runbooks/flow");
    let o = Run::cmd(&env, args(&["list", &flow.display().to_string()]))
        .expect_exit(0)
        .run();
    let text = o.stdout_text();
    for (file, name) in [
        ("options.lua", "flow-options"),
        ("params.lua", "flow-params"),
        ("resume.lua", "flow-resume"),
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(file))
            .unwrap_or_else(|| panic!("{file} not listed:\n{text}"));
        assert!(line.contains(name), "{line}");
    }
    assert!(text.contains("retries, when, check = false"), "{text}");

    // Default: ./runbooks when there is one; an invalid file is listed as such.
    env.write("runbooks/good.lua", &runbook_named("listed-good"));
    env.write("runbooks/broken.lua", SYNTAX_ERROR);
    env.write("runbooks/notes.txt", "not a runbook");
    let o = Run::cmd(&env, args(&["list"])).expect_exit(0).run();
    let text = o.stdout_text();
    assert!(text.starts_with("runbooks:"), "{text}");
    assert!(text.contains("listed-good"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("broken.lua") && l.contains("(invalid)")),
        "{text}"
    );
    assert!(!text.contains("notes.txt"), "{text}");

    Run::cmd(&env, args(&["list", "/nonexistent/flow-dir"]))
        .expect_exit(2)
        .run();
}

#[test]
fn docs_prints_the_reference_and_a_topic() {
    let env = Env::new();
    let all = Run::cmd(&env, args(&["docs"])).expect_exit(0).run();
    let all = all.stdout_text();
    assert!(
        all.starts_with("# Lua API reference"),
        "{}",
        &all[..200.min(all.len())]
    );
    for f in [
        "t:exec(",
        "t:shell(",
        "step(",
        "runbook {",
        "secret(",
        "log.info(",
    ] {
        assert!(all.contains(f), "{f} missing from the reference");
    }

    let exec = Run::cmd(&env, args(&["docs", "exec"])).expect_exit(0).run();
    let exec = exec.stdout_text();
    assert!(exec.contains("t:exec(argv, [opts])"), "{exec}");
    assert!(exec.contains("read_only"), "{exec}");
    assert!(
        !exec.contains("t:shell("),
        "docs exec shows more than exec:\n{exec}"
    );
    assert!(exec.len() < all.len());

    let module = Run::cmd(&env, args(&["docs", "step"])).expect_exit(0).run();
    assert!(module.stdout_text().contains("retries"));

    // A stdlib module by its short name or its require name.
    for topic in ["text", "runbook.torch"] {
        let out = Run::cmd(&env, args(&["docs", topic])).expect_exit(0).run();
        let out = out.stdout_text();
        assert!(out.starts_with("### `require(\"runbook."), "{topic}: {out}");
        assert!(!out.contains("## venv"), "{topic}: {out}");
    }

    let none = Run::cmd(&env, args(&["docs", "nosuchtopic"]))
        .expect_exit(2)
        .run();
    assert!(
        none.stderr_text().contains("no docs for 'nosuchtopic'"),
        "{}",
        none.stderr_text()
    );
}

fn runbook_named(name: &str) -> String {
    subst(
        r#"runbook { name = "@name@", description = "found by name" }
step("hello", function() log.info("hello from @name@") end)
"#,
        &[("name", &name)],
    )
}

#[test]
fn bare_names_are_found_in_the_current_dir_then_runbooks() {
    let env = Env::new();
    env.write("dup.lua", &runbook_named("dup-top"));
    env.write("runbooks/dup.lua", &runbook_named("dup-sub"));
    env.write("runbooks/only.lua", &runbook_named("only-sub"));
    for (name, expected) in [("dup", "dup-top"), ("only", "only-sub")] {
        let o = Run::new(&env, name).json().run();
        assert_eq!(o.code(), 0, "{name}: {}", o.describe());
        let events = o.events();
        let Event::RunStarted { runbook, .. } = &events[0] else {
            panic!("{name}: the events start with run_started: {events:#?}")
        };
        assert_eq!(runbook, expected, "{name}");
        // Other subcommands find it the same way.
        let s = Run::cmd(&env, args(&["show", name])).run();
        assert!(s.stdout_text().starts_with(expected), "{}", s.describe());
    }

    let o = Run::cmd(&env, args(&["run", "nosuch"]))
        .expect_exit(2)
        .run();
    let text = o.stderr_text();
    assert!(text.contains("no runbook 'nosuch'"), "{text}");
    assert!(
        text.contains("./nosuch.lua") && text.contains("./runbooks/nosuch.lua"),
        "{text}"
    );
    let o = Run::cmd(&env, args(&["run", "nosuch.lua"]))
        .expect_exit(2)
        .run();
    assert!(
        o.stderr_text().contains("no such runbook file"),
        "{}",
        o.stderr_text()
    );
    let o = Run::cmd(&env, args(&["run", "runbooks/"]))
        .expect_exit(2)
        .run();
    assert!(
        o.stderr_text().contains("is a directory"),
        "{}",
        o.stderr_text()
    );
    assert_eq!(env.record_count(), 2);
}

// ---------------------------------------------------------------------------------------
// 10. snapshots

macro_rules! snapshot {
    ($name:expr, $value:expr) => {{
        let mut settings = insta::Settings::clone_current();
        settings.add_filter(r"\b\d{8}-\d{6}-[0-9a-f]{4}\b", "[RUN]");
        settings.add_filter(r"\b\d+m\d{2}s\b", "[DUR]");
        settings.add_filter(r"\b\d+(\.\d+)?(ms|s)\b", "[DUR]");
        settings.bind(|| insta::assert_snapshot!($name, $value));
    }};
}

#[test]
fn snapshot_dry_run_preview() {
    let env = Env::new();
    copy_fixture(&env, "preview.lua");
    let o = Run::cmd(&env, args(&["run", "preview.lua", "--dry-run"]))
        .expect_exit(0)
        .run();
    assert!(o.stdout_text().is_empty());
    snapshot!("dry_run_preview", o.stderr_text());

    let o = Run::cmd(
        &env,
        args(&["run", "preview.lua", "--dry-run", "--offline"]),
    )
    .expect_exit(0)
    .run();
    snapshot!("dry_run_offline_preview", o.stderr_text());
}

#[test]
fn snapshot_error_messages() {
    let env = Env::new();
    copy_fixture(&env, "params.lua");
    copy_fixture(&env, "confirm_rm.lua");
    env.write("broken.lua", SYNTAX_ERROR);

    let o = Run::cmd(
        &env,
        args(&[
            "run",
            "params.lua",
            "--set",
            "colour=blue",
            "--set",
            "count=abc",
        ]),
    )
    .run();
    assert_eq!(o.code(), 2);
    snapshot!("error_bad_params", o.stderr_text());

    let o = Run::cmd(&env, args(&["check", "broken.lua"])).run();
    assert_eq!(o.code(), 2);
    snapshot!("error_syntax", o.stderr_text());

    let o = Run::cmd(
        &env,
        args(&["run", "confirm_rm.lua", "--set", "dir=/nonexistent/flow"]),
    )
    .run();
    assert_eq!(o.code(), 2);
    snapshot!("error_needs_confirmation", o.stderr_text());
}

// ---------------------------------------------------------------------------------------
// 5b. every change is confirmed, and the confirmed plan is what runs

/// Terraform's rule: any change asks, not only programs known to delete. Each of these
/// ran without asking before (the deleting program hidden behind `sh -c`, `env`, `find`).
#[test]
fn any_change_needs_confirmation_without_a_terminal() {
    for (what, cmd) in [
        (
            "sh -c rm",
            r#"{ "sh", "-c", 'rm -rf -- "$1"', "sh", params.dir .. "/victim" }"#,
        ),
        (
            "env rm",
            r#"{ "env", "rm", "-rf", "--", params.dir .. "/victim" }"#,
        ),
        (
            "find -delete",
            r#"{ "find", params.dir .. "/victim", "-delete" }"#,
        ),
        (
            "a plain touch",
            r#"{ "touch", params.dir .. "/victim/new" }"#,
        ),
    ] {
        let env = Env::new();
        let dir = env.scratch();
        std::fs::create_dir_all(dir.join("victim")).unwrap();
        std::fs::write(dir.join("victim/f"), "x").unwrap();
        let rb = env.write(
            "change.lua",
            &subst(
                r#"runbook { name = "change", params = { dir = { type = "path", required = true } } }
step("change", function() target("local"):exec(@cmd@) end)
"#,
                &[("cmd", &cmd)],
            ),
        );
        let o = Run::new(&env, &rb)
            .args(["--set", &format!("dir={}", dir.display())])
            .run();
        assert_eq!(o.code(), 2, "{what}: {}", o.describe());
        assert!(
            o.stderr_text()
                .contains("makes 1 change and needs confirmation"),
            "{what}: {}",
            o.describe()
        );
        assert!(
            dir.join("victim/f").exists(),
            "{what}: changed without asking"
        );
        assert!(
            !dir.join("victim/new").exists(),
            "{what}: changed without asking"
        );
        assert_eq!(env.record_count(), 0, "{what}");
    }
}

/// The user confirmed `rm -rf …/dir1`; the world changed before the real run got there
/// (the read that picks the directory answers differently the second time). The real
/// run stops before deleting `dir2`, which nobody saw, names the step and shows both.
/// (A plan that changes anything keeps no answers from its dry-run: the read is sent
/// again, `kept_reads.rs`.)
#[test]
fn a_real_run_stops_before_a_change_that_was_not_confirmed() {
    let env = Env::new();
    let dir = env.scratch();
    for d in ["dir1", "dir2"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
        std::fs::write(dir.join(d).join("f"), "x").unwrap();
    }
    let rb = env.write(
        "drift.lua",
        r#"runbook { name = "drift", params = { dir = { type = "path", required = true } } }
local here = target("local")
step("pick and delete", function()
  -- A read whose answer changes between the confirmation and the run (it appends, a
  -- read may: overwriting would make it no read).
  local r = here:exec({ "sh", "-c", 'echo x >> "$1/count"; n=$(wc -l < "$1/count"); printf dir%s $n', "sh", params.dir }, { read_only = true })
  here:exec({ "rm", "-rf", "--", params.dir .. "/" .. r.stdout })
end)
step("later", function() here:exec({ "touch", params.dir .. "/later" }) end)
"#,
    );
    let set = format!("dir={}", dir.display());
    let (code, screen) = Run::new(&env, &rb).args(["--set", &set]).on_terminal("y\n");
    assert!(
        screen.contains("dir1"),
        "the plan shown names dir1:\n{screen}"
    );
    assert_eq!(code, 1, "{screen}");
    assert!(
        dir.join("dir2/f").exists(),
        "dir2 was never confirmed, yet deleted:\n{screen}"
    );
    assert!(dir.join("dir1/f").exists(), "{screen}");
    assert_eq!(
        std::fs::read_to_string(dir.join("count"))
            .unwrap()
            .lines()
            .count(),
        2,
        "the deleting step's read was not sent again:\n{screen}"
    );
    assert!(
        !dir.join("later").exists(),
        "nothing further is changed:\n{screen}"
    );
    assert!(
        screen.contains("this change is not one that was confirmed for this step")
            && screen.contains(&format!("confirmed: rm -rf -- {}/dir1", dir.display()))
            && screen.contains(&format!("now:       rm -rf -- {}/dir2", dir.display())),
        "{screen}"
    );
    let events = env.last_record();
    assert!(
        changes(&events, Changes::Started).is_empty(),
        "no change started: {events:#?}"
    );
}

/// When nothing drifted, the confirmed run goes through (and a retried step repeating
/// its confirmed change is no difference).
#[test]
fn a_confirmed_run_with_a_retry_goes_through() {
    let env = Env::new();
    let dir = env.scratch();
    let rb = env.write(
        "retry.lua",
        r#"runbook { name = "retry", params = { dir = { type = "path", required = true } } }
local here = target("local")
step("flaky", { retries = 1, delay = "0s" }, function()
  here:exec({ "touch", params.dir .. "/made" })
  here:exec({ "sh", "-c", 'test -e "$1/second" || { touch "$1/second"; exit 1; }', "sh", params.dir })
end)
"#,
    );
    let set = format!("dir={}", dir.display());
    let (code, screen) = Run::new(&env, &rb).args(["--set", &set]).on_terminal("y\n");
    assert!(screen.contains("will make 2 changes"), "{screen}");
    assert_eq!(code, 0, "{screen}");
    assert!(
        dir.join("made").exists() && dir.join("second").exists(),
        "{screen}"
    );
}

/// Any answer but yes at the prompt: exit 2, "not confirmed", nothing changed, no record.
#[test]
fn a_run_the_user_does_not_confirm_changes_nothing() {
    let env = Env::new();
    let dir = env.scratch();
    let rb = env.write(
        "ask.lua",
        r#"runbook { name = "ask", params = { dir = { type = "path", required = true } } }
local here = target("local")
step("make", function() here:exec({ "touch", params.dir .. "/made" }) end)
"#,
    );
    let set = format!("dir={}", dir.display());
    let (code, screen) = Run::new(&env, &rb).args(["--set", &set]).on_terminal("n\n");
    assert!(screen.contains("will make 1 change"), "{screen}");
    assert_eq!(code, 2, "{screen}");
    assert!(
        screen.contains("error: not confirmed; nothing was changed"),
        "{screen}"
    );
    assert!(!dir.join("made").exists(), "{screen}");
    assert_eq!(env.record_count(), 0, "{screen}");
}

// ---------------------------------------------------------------------------------------
// 5c. smaller promises: stdout ends quietly on a closed pipe, `log` writes to stdout,
//     `--json` errors are events, a failed step still counts what it changed

/// `runbook completions bash | head -1` (and every command that prints) ends quietly
/// when the reader closes the pipe: no panic message, no exit 101.
#[test]
fn a_closed_stdout_ends_quietly() {
    let env = Env::new();
    for cmd in ["completions bash", "docs", "docs --markdown"] {
        for _ in 0..5 {
            let bin = assert_cmd::cargo::cargo_bin!("runbook");
            let out = std::process::Command::new("bash")
                .args(["-c", &format!("set -o pipefail; '{}' {cmd} | head -c 10 >/dev/null; echo \"${{PIPESTATUS[0]}}\"", bin.display())])
                .current_dir(env.tmp.path())
                .output()
                .unwrap();
            let status = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                status == "0" || status == "141",
                "{cmd}: exit {status}: {stderr}"
            );
            assert!(!stderr.contains("panicked"), "{cmd}: {stderr}");
        }
    }
}

#[test]
fn log_writes_the_run_to_stdout() {
    let env = Env::new();
    let dir = env.scratch();
    Run::new(&env, fixture("options.lua"))
        .yes()
        .set("dir", &dir)
        .expect_exit(0)
        .run();
    let o = Run::cmd(&env, args(&["log", "last"])).expect_exit(0).run();
    assert!(o.stdout_text().contains("record: "), "{}", o.describe());
    assert!(
        o.stdout_text().contains("✓"),
        "the steps are on stdout: {}",
        o.describe()
    );
    assert!(o.stderr_text().is_empty(), "{}", o.describe());
}

#[test]
fn json_errors_before_the_run_are_events_on_stdout() {
    let env = Env::new();
    let broken = env.write("broken.lua", "runbook { name = \"broken\" \nstep(\n");
    let confirm = fixture_arg("confirm_rm.lua");
    for (what, argv) in [
        (
            "syntax error",
            vec!["run", broken.to_str().unwrap(), "--json"],
        ),
        (
            "needs confirmation",
            vec!["run", &confirm, "--json", "--set", "dir=/nonexistent/x"],
        ),
    ] {
        let o = Run::cmd(&env, args(&argv)).run();
        assert_eq!(o.code(), 2, "{what}: {}", o.describe());
        let lines = o.lines();
        let [Line::Error(error)] = &lines[..] else {
            panic!("{what}: one error line: {}", o.describe())
        };
        assert_eq!(error.exit_code, 2, "{what}");
        assert!(!error.message.is_empty(), "{what}");
    }
}

/// A step that changed things and then failed counts as changed in the summary.
#[test]
fn a_failed_step_counts_what_it_changed() {
    let env = Env::new();
    let dir = env.scratch();
    let rb = env.write(
        "partly.lua",
        r#"runbook { name = "partly", params = { dir = { type = "path", required = true } } }
local here = target("local")
step("fan out", function()
  parallel({ "a", "b", "c", "d", "bad" }, function(n)
    if n == "bad" then here:exec({ "false" }) else here:exec({ "touch", params.dir .. "/" .. n }) end
  end)
end)
"#,
    );
    let o = Run::new(&env, &rb)
        .yes()
        .json()
        .set("dir", &dir)
        .expect_exit(1)
        .run();
    let events = o.events();
    let Some(Event::RunFinished {
        failed, changed, ..
    }) = events.last()
    else {
        panic!("the events end with run_finished: {events:#?}")
    };
    assert_eq!(*failed, 1, "{events:#?}");
    assert_eq!(*changed, 1, "the failed step changed 4 files: {events:#?}");
}

/// A plan whose dry-run fails cannot be confirmed: exit 2, nothing changed, the reason
/// shown (before, the partial plan was confirmed and the run went past it).
#[test]
fn a_plan_that_cannot_be_made_is_not_confirmed() {
    let env = Env::new();
    let dir = env.scratch();
    let rb = env.write(
        "half.lua",
        r#"runbook { name = "half", params = { dir = { type = "path", required = true } } }
local here = target("local")
step("make", function() here:exec({ "touch", params.dir .. "/made" }) end)
step("read it back", function()
  here:exec({ "cat", params.dir .. "/missing" }, { read_only = true })
end)
"#,
    );
    let o = Run::new(&env, &rb).set("dir", &dir).expect_exit(2).run();
    assert!(
        o.stderr_text()
            .contains("the plan to confirm could not be made"),
        "{}",
        o.describe()
    );
    assert!(
        o.stderr_text().contains("step \"read it back\" failed"),
        "{}",
        o.describe()
    );
    assert!(!dir.join("made").exists());
}

/// Found by review: a change confirmed for a later step must not run in an earlier step
/// whose `when` drifted from false to true (before the gate the user saw); and an
/// `always` cleanup still runs its confirmed change after an earlier step failed.
#[test]
fn confirmed_changes_stay_in_their_steps_and_always_steps_keep_theirs() {
    let env = Env::new();
    let dir = env.scratch();
    std::fs::write(dir.join("canary"), "x").unwrap();
    let rb = env.write(
        "swap.lua",
        r#"runbook { name = "swap", params = { dir = { type = "path", required = true } } }
local here = target("local")
local function second_time()
  local r = here:exec({ "sh", "-c", 'if [ -e "$1/seen" ]; then echo yes; else touch "$1/seen"; echo no; fi', "sh", params.dir }, { read_only = true })
  return r.stdout == "yes\n"
end
step("early", { when = second_time }, function() here:exec({ "rm", "-f", "--", params.dir .. "/canary" }) end)
step("gate", function() here:exec({ "test", "-e", params.dir .. "/canary" }, { read_only = true }) end)
step("delete", function() here:exec({ "rm", "-f", "--", params.dir .. "/canary" }) end)
"#,
    );
    let set = format!("dir={}", dir.display());
    let (code, screen) = Run::new(&env, &rb).args(["--set", &set]).on_terminal("y\n");
    assert_eq!(code, 1, "{screen}");
    assert!(
        dir.join("canary").exists(),
        "the rm ran in a step nobody saw it in:\n{screen}"
    );
    assert!(screen.contains("confirmed for another step"), "{screen}");

    let env = Env::new();
    let dir = env.scratch();
    let rb = env.write(
        "cleanup.lua",
        r#"runbook { name = "cleanup", params = { dir = { type = "path", required = true } } }
local here = target("local")
step("work", function()
  here:exec({ "touch", params.dir .. "/started" })
  here:exec({ "sh", "-c", "exit 3" })
end)
step("more", function() here:exec({ "touch", params.dir .. "/more" }) end)
step("cleanup", { always = true }, function() here:exec({ "rm", "-f", "--", params.dir .. "/started" }) end)
"#,
    );
    let set = format!("dir={}", dir.display());
    let (code, screen) = Run::new(&env, &rb).args(["--set", &set]).on_terminal("y\n");
    assert_eq!(code, 1, "{screen}");
    assert!(
        !dir.join("started").exists(),
        "the always step cleaned up:\n{screen}"
    );
    assert!(!dir.join("more").exists(), "{screen}");
}

/// `runbook run … | head`: the reader goes away, and the run goes on to its end (its
/// `always` cleanup included) with a whole record, where a panic on the closed pipe
/// had ended it midway.
#[test]
fn a_closed_output_pipe_does_not_stop_the_run() {
    let env = Env::new();
    let done = env.tmp.path().join("cleaned");
    let rb = env.write(
        "pipe.lua",
        &subst(
            r#"runbook { name = "pipe" }
local here = target("local")
for i = 1, 20 do
  step("noisy " .. i, function() here:exec({ "sh", "-c", "seq 1 50" }) end)
end
step("clean up", { always = true }, function() here:exec({ "touch", "@done@" }) end)
"#,
            &[("done", &done.display())],
        ),
    );
    for json in [false, true] {
        let _ = std::fs::remove_file(&done);
        let mut cmd = env.std_cmd();
        cmd.args(["run", "-v", "--yes"]).arg(&rb);
        if json {
            cmd.arg("--json");
        }
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        drop(child.stderr.take());
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "json={json}");
        assert!(done.exists(), "json={json}: the always step did not run");
        let record = env.last_record();
        assert!(
            matches!(record.last(), Some(Event::RunFinished { .. })),
            "json={json}: the record broke off"
        );
    }
}

/// `log.debug` shows with -v only, as documented; the record keeps it either way.
#[test]
fn log_debug_shows_with_verbose_only() {
    let env = Env::new();
    let rb = env.write(
        "dbg.lua",
        r#"runbook { name = "dbg" }
step("s", function() log.debug("quiet-detail-42"); log.info("loud-line-42") end)
"#,
    );
    let plain = Run::new(&env, &rb)
        .yes()
        .expect_exit(0)
        .stderr_has("loud-line-42")
        .run();
    assert!(
        !plain.stderr_text().contains("quiet-detail-42"),
        "{}",
        plain.describe()
    );
    let verbose = Run::new(&env, &rb).yes().arg("-v").expect_exit(0).run();
    assert!(
        verbose.stderr_text().contains("quiet-detail-42"),
        "{}",
        verbose.describe()
    );
    assert!(env.all_records().contains("quiet-detail-42"));
}

/// The spinner of a running step leaves nothing in the scrollback (issue 33 item 6), on a
/// terminal narrower than its line (a long step name, a long output line), whether the
/// terminal says its rows or not (a pty with unknown rows, which console takes for 80
/// columns): the screen, replayed by `common::screen`, holds the step's ✓ line and no
/// spinner frame.
#[test]
fn the_spinner_leaves_nothing_in_the_scrollback() {
    let env = Env::new();
    let rb = env.write(
        "spin.lua",
        r#"runbook { name = "spin" }
step("restore or clear the compile caches (kept aside)", function()
  target("local"):exec({ "sh", "-c", "echo a first line of output longer than the screen is wide; sleep 0.6" })
end)
"#,
    );
    for stty in ["stty cols 40", "stty rows 24 cols 40"] {
        let line = format!(
            "{stty}; '{}' run '{}' --yes",
            assert_cmd::cargo::cargo_bin!("runbook").display(),
            rb.display()
        );
        let out = std::process::Command::new("script")
            .args(["-q", "-e", "-c", &line, "/dev/null"])
            .env("RUNBOOK_STATE_DIR", env.state())
            .env("TERM", "xterm")
            .env_remove("NO_COLOR")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("script (util-linux) runs");
        assert!(out.status.success(), "{stty}: {out:?}");
        assert!(
            out.stdout.windows(3).any(|w| w == "⠁".as_bytes()),
            "{stty}: a spinner was drawn"
        );
        let rows = crate::common::screen::rows(&out.stdout, 40);
        let spinning: Vec<&String> = rows
            .iter()
            .filter(|r| r.chars().any(|c| ('\u{2800}'..='\u{28ff}').contains(&c)))
            .collect();
        assert!(
            spinning.is_empty(),
            "{stty}: left behind: {spinning:?}\n{rows:#?}"
        );
        assert!(
            rows.iter()
                .any(|r| r.starts_with("✓ restore or clear the compile caches (k")),
            "{stty}: {rows:#?}"
        );
    }
}
