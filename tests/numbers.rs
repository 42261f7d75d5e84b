//! Hostile numbers and resource exhaustion: nothing a runbook or a flag says can make
//! runbook panic (exit 101, `always` steps skipped, the record left without its end),
//! and a wide `parallel` is queued to what the process can take instead of failing with
//! EMFILE.
//!
//! - Durations that parse but overflow (`"18446744073709551615s"`, `1e300`,
//!   `math.maxinteger`, `math.huge`, NaN, negatives, over 365 days) in every place a
//!   duration is read are errors that name the runbook line (or the flag), exit 2 when
//!   the file never ran a step and 1 when a step failed, with a complete record.
//! - `timeout = 0`, `0.0`, `"0s"` and `"0ms"` all mean no timeout (so does `--timeout 0`).
//! - `parallel{limit = math.maxinteger}` runs; odd limits are refused at their line.
//! - With the open-file limit lowered to 256 for runbook, 2,000 local commands at
//!   `limit = 2000` all complete, never more than the process's slots at once; after a
//!   step timeout, queued commands never start. On one SSH host, commands queue for
//!   the connection's channels rather than being refused by sshd's `MaxSessions`.
//!
//! Each runbook is written inline; the line an error must name is marked `-- HERE`.

use crate::common;
use crate::common::*;

use std::time::Duration;

/// How long any run may take before the test kills it (a hang is a failure).
const HANG: Duration = Duration::from_secs(120);

/// Values that parse as numbers or durations but no timeout or wait can hold.
const HOSTILE: &[&str] = &[
    r#""18446744073709551615s""#,
    "1e300",
    "math.maxinteger",
    "math.huge",
    "0/0",
    "-1",
    r#""-1s""#,
    r#""366d""#,
];

/// The zero spellings, which must all mean the same (no timeout).
const ZEROS: &[&str] = &["0", "0.0", r#""0s""#, r#""0ms""#];

/// A runbook around `body`, with an `always` step after it that logs `always ran`.
fn runbook(body: &str) -> String {
    subst(
        r#"runbook { name = "numbers", description = "hostile numbers" }
local here = target("local")
@body@
step("cleanup", { always = true }, function() log.info("always ran") end)
"#,
        &[("body", &body)],
    )
}

/// `n.lua:LINE:` for the line of `text` marked `-- HERE`.
fn here(name: &str, text: &str) -> String {
    let line = text
        .lines()
        .position(|l| l.contains("-- HERE"))
        .unwrap_or_else(|| panic!("no -- HERE in\n{text}"))
        + 1;
    format!("{name}:{line}:")
}

/// Runs `runbook run NAME --yes ARGS…`; `nofile` lowers the open-file limit (soft and
/// hard, so runbook cannot raise it) for the runbook process.
fn run(env: &Env, name: &str, args: &[&str], nofile: Option<u64>) -> Output {
    let mut run = Run::new(env, name).yes().args(args).timeout(HANG);
    if let Some(n) = nofile {
        run = run.nofile(n);
    }
    let o = run.run();
    assert_ne!(o.status.code(), Some(101), "runbook panicked\n{o:?}");
    assert!(
        o.status.code().is_some(),
        "runbook died from a signal (or hung)\n{o:?}"
    );
    assert!(
        !o.stderr_str().contains("panicked"),
        "runbook panicked\n{o:?}"
    );
    o
}

/// Exit 2 with `error: AT …MSG…`, and no run started (no record).
fn assert_refused(env: &Env, o: &Output, at: &str, msg: &str) {
    assert_eq!(
        o.status.code(),
        Some(2),
        "an invalid runbook exits 2\n{o:?}"
    );
    let line = o
        .stderr_str()
        .lines()
        .find(|l| l.contains(&format!("error: {at} ")))
        .unwrap_or_else(|| panic!("stderr has `error: {at}`\n{o:?}"));
    assert!(line.contains(msg), "the error says `{msg}`\n{o:?}");
    assert_eq!(env.record_count(), 0, "no run started\n{o:?}");
}

/// The record ends with `run_finished`, and the `always` step ran.
fn assert_complete(env: &Env, o: &Output) -> Vec<Event> {
    let events = env.last_record();
    let last = events.last().expect("a record");
    assert!(matches!(last, Event::RunFinished { .. }), "{o:?}\n{last:?}");
    assert!(
        events.iter().any(|e| matches!(e, Event::StepFinished {
            name,
            outcome: StepOutcome::Ok,
            ..
        } if name == "cleanup")),
        "the always step ran\n{o:?}"
    );
    assert!(o.stderr_str().contains("always ran"), "{o:?}");
    events
}

/// Exit 1, the failed step's error names `at` and says `msg`, in stderr and the record.
fn assert_step_failed(env: &Env, o: &Output, step: &str, at: &str, msg: &str) -> Vec<Event> {
    assert_eq!(o.status.code(), Some(1), "a failed step exits 1\n{o:?}");
    let line = o
        .stderr_str()
        .lines()
        .find(|l| l.contains(at))
        .unwrap_or_else(|| panic!("stderr has `{at}`\n{o:?}"));
    assert!(line.contains(msg), "the error says `{msg}`\n{o:?}");
    let events = assert_complete(env, o);
    let failed = events
        .iter()
        .find(|e| matches!(e, Event::StepFinished { name, .. } if name == step))
        .unwrap_or_else(|| panic!("step {step} finished\n{o:?}"));
    let Event::StepFinished {
        outcome: StepOutcome::Failed,
        error,
        ..
    } = failed
    else {
        panic!("{failed:?}")
    };
    let error = error.as_deref().unwrap_or_default();
    assert!(error.contains(at) && error.contains(msg), "{error}");
    events
}

// ---------------------------------------------------------------------------------------
// 1. durations that overflow

/// What the error says for a hostile value: too long, negative, or not a number.
fn says_why(o: &Output) -> bool {
    [
        "365 days",
        "negative",
        "finite number",
        "not a valid duration",
    ]
    .iter()
    .any(|w| o.stderr_str().contains(w))
}

#[test]
fn overflowing_durations_in_declarations_are_refused_at_their_line() {
    let env = Env::new();
    let places = [
        (
            "step timeout",
            "step(\"s\", { timeout = @V@ }, function() end) -- HERE",
            "step(\"s\"): timeout:",
        ),
        (
            "retry delay",
            "step(\"s\", { retries = 1, delay = @V@ }, function() end) -- HERE",
            "step(\"s\"): delay:",
        ),
        (
            "ssh connect_timeout",
            "local h = ssh(\"h.example\", { connect_timeout = @V@ }) -- HERE",
            "ssh(): connect_timeout:",
        ),
    ];
    for (what, template, msg) in places {
        for v in HOSTILE {
            let text = runbook(&template.replace("@V@", v));
            env.write("n.lua", &text);
            let o = run(&env, "n.lua", &[], None);
            assert_refused(&env, &o, &here("n.lua", &text), msg);
            assert!(says_why(&o), "{what} = {v}: the error says why\n{o:?}");
        }
    }
}

#[test]
fn overflowing_durations_in_calls_fail_the_step_at_their_line() {
    let env = Env::new();
    let log = env.scratch().join("wait.log");
    // @V@ stays: the loop below puts each value there.
    let wait_for = subst(
        r#"proc.wait_for(here, { file = "@log@", pattern = "x", timeout = @V@ })"#,
        &[("log", &log.display()), ("V", &"@V@")],
    );
    let places = [
        (
            "exec",
            "here:exec({ \"true\" }, { timeout = @V@ })".to_string(),
            "exec: timeout:",
        ),
        (
            "shell",
            "here:shell(\"true\", { timeout = @V@ })".to_string(),
            "shell: timeout:",
        ),
        ("sleep", "sleep(@V@)".to_string(), "sleep():"),
        ("proc.wait_for", wait_for, "proc.wait_for(): timeout:"),
        (
            "proc.stop",
            "proc.stop(here, { name = \"nothing-numbers\", timeout = @V@ })".to_string(),
            "proc.stop(): timeout:",
        ),
        (
            "warmup.run",
            "warmup.run(here, { script = \"w.py\", timeout = @V@ })".to_string(),
            "warmup.run(): timeout:",
        ),
        (
            "venv.build",
            "venv.build(here, { path = \"/tmp/numbers-venv\", timeout = @V@ })".to_string(),
            "venv.build(): timeout:",
        ),
    ];
    for (what, call, msg) in &places {
        for v in HOSTILE {
            let text = runbook(&format!(
                "step(\"s\", function()\n  {} -- HERE\nend)",
                call.replace("@V@", v)
            ));
            env.write("n.lua", &text);
            let o = run(&env, "n.lua", &[], None);
            assert_step_failed(&env, &o, "s", &here("n.lua", &text), msg);
            assert!(says_why(&o), "{what} = {v}: the error says why\n{o:?}");
        }
    }
}

#[test]
fn overflowing_durations_in_flags_are_refused_naming_the_flag() {
    let env = Env::new();
    env.write("n.lua", &runbook("step(\"s\", function() end)"));
    for flag in ["--timeout", "--lock-wait"] {
        for v in ["18446744073709551615s", "1e300", "366d", "inf", "NaN", "-1"] {
            // `--flag=VALUE`, so that `-1` is a value, not another flag.
            let o = run(&env, "n.lua", &[&format!("{flag}={v}")], None);
            assert_eq!(o.status.code(), Some(2), "{flag} {v}\n{o:?}");
            assert!(
                o.stderr_str()
                    .contains(&format!("invalid value '{v}' for '{flag} <DUR>'")),
                "{flag} {v}\n{o:?}"
            );
            assert_eq!(env.record_count(), 0, "{o:?}");
        }
    }
}

#[test]
fn odd_counts_are_refused_at_their_line() {
    let env = Env::new();
    let cases = [
        (
            "step(\"s\", { retries = 1e300 }, function() end) -- HERE",
            "retries: expected a whole number from 0 to 1000, got 1e300",
        ),
        (
            "step(\"s\", { retries = -1 }, function() end) -- HERE",
            "retries: expected a whole number from 0 to 1000, got -1",
        ),
        (
            "step(\"s\", { retries = 0.5 }, function() end) -- HERE",
            "retries: expected a whole number from 0 to 1000, got 0.5",
        ),
        (
            "local h = ssh(\"h.example\", { port = 2^70 }) -- HERE",
            "ssh(): port: expected a whole number from 1 to 65535",
        ),
        (
            "local h = ssh(\"h.example\", { connect_timeout = \"0s\" }) -- HERE",
            "ssh(): connect_timeout must be more than 0",
        ),
    ];
    for (body, msg) in cases {
        let text = runbook(body);
        env.write("n.lua", &text);
        let o = run(&env, "n.lua", &[], None);
        assert_refused(&env, &o, &here("n.lua", &text), msg);
    }
    for (limit, got) in [
        ("0", "0"),
        ("2.5", "2.5"),
        ("-1", "-1"),
        ("math.huge", "inf"),
    ] {
        let text = runbook(&subst(
            r#"step("s", function()
  parallel({ 1, 2 }, function(i) return i end, { limit = @limit@ }) -- HERE
end)"#,
            &[("limit", &limit)],
        ));
        env.write("n.lua", &text);
        let o = run(&env, "n.lua", &[], None);
        assert_step_failed(
            &env,
            &o,
            "s",
            &here("n.lua", &text),
            &format!("parallel(): limit: expected a whole number of at least 1, got {got}"),
        );
    }
}

#[test]
fn a_huge_parallel_limit_means_all_at_once() {
    let env = Env::new();
    for limit in ["math.maxinteger", "2^62", "4.0"] {
        let text = runbook(&subst(
            r#"step("s", function()
  local r = parallel({ 1, 2, 3 }, function(i) return i * 2 end, { limit = @limit@ })
  log.info("sum " .. (r[1] + r[2] + r[3]))
end)"#,
            &[("limit", &limit)],
        ));
        env.write("n.lua", &text);
        let o = run(&env, "n.lua", &[], None);
        assert_eq!(o.status.code(), Some(0), "limit = {limit}\n{o:?}");
        assert!(o.stderr_str().contains("sum 12"), "{o:?}");
        assert_complete(&env, &o);
    }
}

// ---------------------------------------------------------------------------------------
// 2. what 0 means

#[test]
fn zero_means_no_timeout_in_every_spelling() {
    let env = Env::new();
    let log = env.scratch().join("ready.log");
    for v in ZEROS {
        let _ = std::fs::remove_file(&log);
        // Each of these takes longer than no time at all: a zero that timed out at once
        // would fail it.
        let text = runbook(&subst(
            r#"step("step timeout", { timeout = @v@ }, function() sleep(0.3) end)
step("exec timeout", function() here:exec({ "sleep", "0.3" }, { timeout = @v@ }) end)
step("shell timeout", function() here:shell("sleep 0.3", { timeout = @v@ }) end)
step("wait_for timeout", function()
  here:shell("(sleep 1; echo ready >> '@log@') >/dev/null 2>&1 &")
  proc.wait_for(here, { file = "@log@", pattern = "ready", timeout = @v@ })
end)"#,
            &[("v", &v), ("log", &log.display())],
        ));
        env.write("n.lua", &text);
        let o = run(&env, "n.lua", &[], None);
        assert_eq!(
            o.status.code(),
            Some(0),
            "timeout = {v} is no timeout\n{o:?}"
        );
        let events = assert_complete(&env, &o);
        assert!(
            matches!(
                events.last(),
                Some(Event::RunFinished {
                    outcome: RunOutcome::Ok,
                    ..
                })
            ),
            "{o:?}"
        );
    }
    env.write("n.lua", &runbook("step(\"s\", function() sleep(0.3) end)"));
    for v in ["0", "0.0", "0s", "0ms"] {
        let o = run(&env, "n.lua", &["--timeout", v], None);
        assert_eq!(
            o.status.code(),
            Some(0),
            "--timeout {v} is no timeout\n{o:?}"
        );
        assert_complete(&env, &o);
    }
}

// ---------------------------------------------------------------------------------------
// 3. many commands at once

/// The open-file limit the runbook process gets in these tests, and the commands it
/// then runs at once at most (`targets/slots.rs`: a quarter kept back, 4 descriptors per
/// command and as many for its kill command).
const NOFILE: u64 = 256;
const SLOTS: i64 = 24;

/// The most commands that were running at one time, from the record.
fn most_at_once(events: &[Event]) -> i64 {
    let (mut now, mut most) = (0i64, 0i64);
    for e in events {
        match e {
            Event::ActionStarted { .. } => now += 1,
            Event::ActionFinished { .. } => now -= 1,
            _ => {}
        }
        most = most.max(now);
    }
    most
}

#[test]
fn thousands_of_local_commands_queue_instead_of_running_out_of_files() {
    let env = Env::new();
    let n = 2000;
    let text = runbook(&subst(
        r#"step("fan out", function()
  local items = {}
  for i = 1, @n@ do items[i] = i end
  parallel(items, function(i) here:exec({ "true" }, { read_only = true }) end, { limit = @n@ })
end)"#,
        &[("n", &n)],
    ));
    env.write("n.lua", &text);
    let o = run(&env, "n.lua", &[], Some(NOFILE));
    assert!(
        !o.stderr_str().contains("Too many open files"),
        "no command ran out of file descriptors\n{o:?}"
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let events = assert_complete(&env, &o);
    let finished = pick!(events, Event::ActionFinished { ok, .. } => *ok);
    assert_eq!(finished.len(), n, "every command ran");
    assert!(finished.iter().all(|ok| *ok), "{o:?}");
    let most = most_at_once(&events);
    assert!(
        (1..=SLOTS).contains(&most),
        "at most {SLOTS} commands at once with {NOFILE} files, saw {most}"
    );
    eprintln!("{n} commands in {:?}, at most {most} at once", o.took);
}

#[test]
fn after_a_step_timeout_queued_commands_never_start() {
    let env = Env::new();
    let n = 500;
    let text = runbook(&subst(
        r#"step("fan out", { timeout = "1s" }, function()
  local items = {}
  for i = 1, @n@ do items[i] = i end
  parallel(items, function(i) here:exec({ "sleep", "5" }, { read_only = true }) end, { limit = @n@ }) -- HERE
end)"#,
        &[("n", &n)],
    ));
    env.write("n.lua", &text);
    let o = run(&env, "n.lua", &[], Some(NOFILE));
    assert!(!o.stderr_str().contains("Too many open files"), "{o:?}");
    assert!(
        !o.stderr_str().contains("runbook stopped itself"),
        "the step ended by itself, not by the watchdog\n{o:?}"
    );
    let events = assert_step_failed(
        &env,
        &o,
        "fan out",
        &here("n.lua", &text),
        "step timed out after 1.0s",
    );
    let started = pick!(events, Event::ActionStarted { .. }).len() as i64;
    assert!(
        (1..=SLOTS).contains(&started),
        "only the commands that had a slot started ({started} of {n})\n{o:?}"
    );
    // Every item ended with the step: the killed ones and the never started ones.
    assert!(
        o.stderr_str()
            .contains(&format!("{n} of {n} did not finish: the step was stopped")),
        "one line sums up the stopped items\n{o:?}"
    );
    assert!(o.took < Duration::from_secs(8), "{o:?}");
}

#[test]
fn many_commands_on_one_ssh_host_queue_for_its_channels() {
    require_sshd!();
    let fleet = common::sshd::Fleet::start(1);
    let env = Env::new();
    let n = 40;
    let text = runbook(&subst(
        r#"local node = target("node1")
step("fan out", function()
  local items = {}
  for i = 1, @n@ do items[i] = i end
  parallel(items, function(i) node:exec({ "sleep", "0.2" }, { read_only = true }) end, { limit = @n@ })
end)"#,
        &[("n", &n)],
    ));
    env.write("n.lua", &text);
    let args = fleet.args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run(&env, "n.lua", &args, None);
    assert_eq!(
        o.status.code(),
        Some(0),
        "no command was refused by sshd\n{o:?}"
    );
    let events = assert_complete(&env, &o);
    let most = most_at_once(&events);
    // The connection's channel limit (8), below sshd's MaxSessions (10).
    assert!(
        (1..=8).contains(&most),
        "at most 8 commands at once on one connection, saw {most}"
    );
}

/// Each item's line comes as it ends: a slow first item does not hold back the others'.
#[test]
fn parallel_says_each_item_as_it_ends() {
    let env = Env::new();
    let text = runbook(
        r#"local here = target("local")
step("s", function()
  parallel({ "slow", "quick" }, function(name)
    if name == "slow" then here:exec({ "sleep", "1" }, { read_only = true }) end
  end)
end)"#,
    );
    env.write("n.lua", &text);
    let o = Run::new(&env, "n.lua").yes().json().expect_exit(0).run();
    let said: Vec<String> = logs(&o.events(), None)
        .into_iter()
        .filter(|m| m.starts_with('['))
        .collect();
    assert_eq!(said, ["[2/2] quick: ok", "[1/2] slow: ok"], "{said:?}");
}
