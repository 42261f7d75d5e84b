//! Interruption (SIGINT/SIGTERM), timeouts (command, step, run), retries, `sleep()` and
//! output streaming, each driven through the real `runbook` binary.
//!
//! Tests that signal runbook start it in the background (common/running.rs) so they can
//! wait for a pid file the runbook writes, signal the process, and then check that the
//! process tree it started is gone and that the run record is complete.

use crate::common::running::alive;
use crate::common::*;

use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// helpers

fn fixture(name: &str) -> String {
    repo()
        .join("tests/runbooks/interrupt")
        .join(name)
        .display()
        .to_string()
}

/// `run FIXTURE --yes --set dir=SCRATCH`.
fn fixture_run<'e>(env: &'e Env, name: &str) -> Run<'e> {
    Run::new(env, fixture(name)).yes().set("dir", env.scratch())
}

/// Polls up to 3 s for `pid` to be gone.
fn assert_gone(pid: i32, what: &str) {
    let until = Instant::now() + Duration::from_secs(3);
    while alive(pid) {
        if Instant::now() >= until {
            // Do not leave it behind for the next test run.
            // SAFETY: only sends a signal.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            panic!("{what} (pid {pid}) is still running 3 s after runbook stopped it");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The only run record, checked to be complete (`complete_record`).
fn record(env: &Env) -> Vec<Event> {
    let files = env.record_files();
    assert_eq!(files.len(), 1, "exactly one run record: {files:?}");
    complete_record(&files[0])
}

/// The one `step_finished` event of step `index`.
fn finished(events: &[Event], index: usize) -> &Event {
    let all = pick!(events, Event::StepFinished { index: i, .. } if *i == index);
    assert_eq!(
        all.len(),
        1,
        "one step_finished for step {index}: {events:#?}"
    );
    all[0]
}

/// The last event (a complete record's `run_finished`).
fn run_finished(events: &[Event]) -> &Event {
    events.last().unwrap()
}

/// The outcome and exit code of a `run_finished`.
fn end_of(ev: &Event) -> (RunOutcome, i32) {
    match ev {
        Event::RunFinished {
            outcome, exit_code, ..
        } => (*outcome, *exit_code),
        _ => panic!("not run_finished: {ev:?}"),
    }
}

/// The fields of a `step_finished` these tests look at.
fn outcome_of(ev: &Event) -> StepOutcome {
    match ev {
        Event::StepFinished { outcome, .. } => *outcome,
        _ => panic!("not step_finished: {ev:?}"),
    }
}

fn duration_of(ev: &Event) -> u64 {
    match ev {
        Event::StepFinished { duration_ms, .. } => *duration_ms,
        _ => panic!("not step_finished: {ev:?}"),
    }
}

fn error_of(ev: &Event) -> &str {
    match ev {
        Event::StepFinished { error, .. } => error.as_deref().unwrap_or(""),
        _ => panic!("not step_finished: {ev:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// 1, 2: a signal in the middle of a step

fn signal_mid_step(sig: i32, code: i32, name: &str) {
    let env = Env::new();
    let scratch = env.scratch();
    let mut run = fixture_run(&env, "mid_step.lua").spawn();
    let shell = run.wait_pid(&scratch.join("shell.pid"), Duration::from_secs(5));
    let child: i32 = std::fs::read_to_string(scratch.join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        alive(shell) && alive(child),
        "the tree runs before the signal"
    );
    let sent = Instant::now();
    run.signal(sig);
    let got = run.code(Duration::from_secs(8));
    let out = run.output();
    assert_eq!(got, code, "exit code after {name}\n{out}");
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "runbook took {:?} to stop after {name}",
        sent.elapsed()
    );
    assert!(
        scratch.join("always").exists(),
        "the always step ran\n{out}"
    );
    assert!(
        !scratch.join("later").exists(),
        "the step after the interrupted one did not run\n{out}"
    );
    assert_gone(shell, "the interrupted step's shell");
    assert_gone(child, "the shell's background sleep");

    let events = record(&env);
    let end = run_finished(&events);
    assert_eq!(end_of(end), (RunOutcome::Interrupted, code), "{end:?}");
    let long = finished(&events, 0);
    assert_eq!(outcome_of(long), StepOutcome::Failed, "{long:?}");
    assert!(
        error_of(long).contains("interrupted"),
        "the error says interrupted: {long:?}"
    );
    assert!(
        error_of(long).contains(name),
        "the error names the signal {name}: {long:?}"
    );
    let later = step_skipped(&events, 1).expect("step 1 skipped");
    assert!(
        matches!(later, Event::StepSkipped { reason, .. } if reason.contains("interrupted")),
        "{later:?}"
    );
    let cleanup = finished(&events, 2);
    assert!(
        matches!(outcome_of(cleanup), StepOutcome::Changed | StepOutcome::Ok),
        "{cleanup:?}"
    );
}

#[test]
fn sigint_mid_step_stops_the_tree_and_runs_always_steps() {
    signal_mid_step(libc::SIGINT, 130, "SIGINT");
}

#[test]
fn sigterm_mid_step_stops_the_tree_and_runs_always_steps() {
    signal_mid_step(libc::SIGTERM, 143, "SIGTERM");
}

// ---------------------------------------------------------------------------------------
// 3: a second signal stops the always step

#[test]
fn second_sigint_stops_the_always_step() {
    let env = Env::new();
    let scratch = env.scratch();
    let mut run = fixture_run(&env, "second_signal.lua").spawn();
    let first = run.wait_pid(&scratch.join("first.pid"), Duration::from_secs(5));
    run.signal(libc::SIGINT);
    let always = run.wait_pid(&scratch.join("always.pid"), Duration::from_secs(5));
    assert_gone(first, "the first step's sleep");
    assert!(alive(always), "the always step runs after the first signal");
    run.signal(libc::SIGINT);
    let got = run.code(Duration::from_secs(6));
    let out = run.output();
    assert_eq!(got, 130, "{out}");
    assert_gone(always, "the always step's sleep");

    let events = record(&env);
    let end = run_finished(&events);
    assert_eq!(end_of(end), (RunOutcome::Interrupted, 130), "{end:?}");
    for index in [0, 1] {
        let ev = finished(&events, index);
        assert_eq!(outcome_of(ev), StepOutcome::Failed, "{ev:?}");
        assert!(error_of(ev).contains("interrupted"), "{ev:?}");
    }
}

// ---------------------------------------------------------------------------------------
// 4: a command's own timeout

#[test]
fn command_timeout_kills_the_tree() {
    let env = Env::new();
    let scratch = env.scratch();
    let mut run = fixture_run(&env, "command_timeout.lua").spawn();
    let got = run.code(Duration::from_secs(8));
    let out = run.output();
    assert_eq!(got, 1, "the checked command's timeout fails the run\n{out}");

    // check = false: the step saw timed_out and carried on.
    assert_eq!(
        std::fs::read_to_string(scratch.join("unchecked.txt")).unwrap_or_default(),
        "timed_out=true ok=false",
        "{out}"
    );
    // check = true: the step failed there.
    assert!(!scratch.join("after_checked").exists(), "{out}");

    for name in ["u_shell", "u_child", "c_shell", "c_child"] {
        let pid: i32 = std::fs::read_to_string(scratch.join(format!("{name}.pid")))
            .unwrap_or_else(|e| panic!("{name}.pid: {e}\n{out}"))
            .trim()
            .parse()
            .unwrap();
        assert_gone(pid, name);
    }

    let events = record(&env);
    let unchecked = finished(&events, 0);
    assert!(
        matches!(
            outcome_of(unchecked),
            StepOutcome::Changed | StepOutcome::Ok
        ),
        "{unchecked:?}"
    );
    let checked = finished(&events, 1);
    assert_eq!(outcome_of(checked), StepOutcome::Failed, "{checked:?}");
    assert!(
        error_of(checked).contains("timed out"),
        "the error says timed out: {checked:?}"
    );
    assert!(
        duration_of(checked) < 2500,
        "stopped near its 300ms timeout: {checked:?}"
    );
    let timed_out = pick!(
        events,
        Event::ActionFinished {
            timed_out: true,
            ..
        }
    );
    assert_eq!(timed_out.len(), 2, "both shells timed out: {events:#?}");
    let end = run_finished(&events);
    assert_eq!(end_of(end), (RunOutcome::Failed, 1), "{end:?}");
}

// ---------------------------------------------------------------------------------------
// 5: a step's timeout covers Lua code and commands

#[test]
fn step_timeout_stops_endless_lua() {
    let env = Env::new();
    let started = Instant::now();
    let out = Run::new(&env, fixture("step_timeout_lua.lua"))
        .yes()
        .timeout(Duration::from_secs(8))
        .expect_exit(1)
        .run();
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "the 500ms step timeout ended the loop, but the run took {took:?}\n{}",
        out.stderr_text()
    );
    let events = record(&env);
    let spin = finished(&events, 0);
    assert_eq!(outcome_of(spin), StepOutcome::Failed, "{spin:?}");
    assert!(error_of(spin).contains("timed out"), "{spin:?}");
    assert!(duration_of(spin) < 2000, "{spin:?}");
    assert_eq!(end_of(run_finished(&events)).1, 1);
}

#[test]
fn step_timeout_stops_a_running_command() {
    let env = Env::new();
    let scratch = env.scratch();
    let started = Instant::now();
    Run::new(&env, fixture("step_timeout_command.lua"))
        .yes()
        .set("dir", &scratch)
        .timeout(Duration::from_secs(8))
        .expect_exit(1)
        .run();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "the run took {took:?}");
    let pid: i32 = std::fs::read_to_string(scratch.join("sleep.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_gone(pid, "the step's sleep 30");
    let events = record(&env);
    let sleepy = finished(&events, 0);
    assert_eq!(outcome_of(sleepy), StepOutcome::Failed, "{sleepy:?}");
    assert!(error_of(sleepy).contains("timed out"), "{sleepy:?}");
    assert!(duration_of(sleepy) < 2000, "{sleepy:?}");
}

// ---------------------------------------------------------------------------------------
// 6: the run's --timeout

#[test]
fn run_timeout_stops_the_step_skips_the_rest_and_runs_always() {
    let env = Env::new();
    let scratch = env.scratch();
    let started = Instant::now();
    Run::new(&env, fixture("run_timeout.lua"))
        .yes()
        .args(["--timeout", "1s"])
        .set("dir", &scratch)
        .timeout(Duration::from_secs(10))
        .expect_exit(1)
        .run();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "the run took {took:?}");
    assert!(
        !scratch.join("later").exists(),
        "the later step was skipped"
    );
    assert!(scratch.join("always").exists(), "the always step ran");
    let pid: i32 = std::fs::read_to_string(scratch.join("sleep.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_gone(pid, "the long step's sleep 30");

    let events = record(&env);
    let long = finished(&events, 0);
    assert_eq!(outcome_of(long), StepOutcome::Failed, "{long:?}");
    assert!(error_of(long).contains("timeout"), "{long:?}");
    assert!(
        step_skipped(&events, 1).is_some(),
        "later is skipped: {events:#?}"
    );
    let cleanup = finished(&events, 2);
    assert!(
        matches!(outcome_of(cleanup), StepOutcome::Changed | StepOutcome::Ok),
        "{cleanup:?}"
    );
    let end = run_finished(&events);
    assert_eq!(end_of(end), (RunOutcome::Failed, 1), "{end:?}");
}

// ---------------------------------------------------------------------------------------
// 7: retries

#[test]
fn retries_try_three_times_then_fail() {
    let env = Env::new();
    let started = Instant::now();
    Run::new(&env, fixture("retries.lua"))
        .yes()
        .timeout(Duration::from_secs(8))
        .expect_exit(1)
        .run();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(200),
        "two 100ms delays between attempts, but the run took {took:?}"
    );
    let events = record(&env);
    let attempts: Vec<u32> = pick!(events, Event::StepStarted { attempt, .. } => *attempt);
    assert_eq!(attempts, vec![1, 2, 3], "{events:#?}");
    let flaky = finished(&events, 0);
    assert_eq!(outcome_of(flaky), StepOutcome::Failed, "{flaky:?}");
    assert!(error_of(flaky).contains("still broken"), "{flaky:?}");
    let warnings = logs(&events, Some(Level::Warn)).len();
    assert_eq!(warnings, 2, "one retry warning per retry: {events:#?}");
    let end = run_finished(&events);
    assert_eq!(end_of(end), (RunOutcome::Failed, 1), "{end:?}");
}

// ---------------------------------------------------------------------------------------
// 8: sleep()

#[test]
fn lua_sleep_waits_and_sigint_ends_it() {
    let env = Env::new();
    let scratch = env.scratch();
    let mut run = fixture_run(&env, "lua_sleep.lua").spawn();
    run.wait_file(&scratch.join("ready"), Duration::from_secs(5));
    // Let the step get into its sleep.
    std::thread::sleep(Duration::from_millis(200));
    let sent = Instant::now();
    run.signal(libc::SIGINT);
    let got = run.code(Duration::from_secs(6));
    let out = run.output();
    assert_eq!(got, 130, "{out}");
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "sleep() ended {:?} after SIGINT",
        sent.elapsed()
    );
    assert!(!scratch.join("woke").exists(), "{out}");

    let events = record(&env);
    let nap = finished(&events, 0);
    assert_eq!(outcome_of(nap), StepOutcome::Ok, "{nap:?}");
    assert!(duration_of(nap) >= 200, "sleep(\"200ms\") slept: {nap:?}");
    let long = finished(&events, 1);
    assert_eq!(outcome_of(long), StepOutcome::Failed, "{long:?}");
    assert!(error_of(long).contains("interrupted"), "{long:?}");
    let end = run_finished(&events);
    assert_eq!(end_of(end), (RunOutcome::Interrupted, 130), "{end:?}");
}

// ---------------------------------------------------------------------------------------
// 9: output streaming

#[test]
fn every_output_line_is_an_event_and_in_the_result() {
    let env = Env::new();
    let scratch = env.scratch();
    Run::new(&env, fixture("output_stream.lua"))
        .yes()
        .arg("--quiet")
        .set("dir", &scratch)
        .timeout(Duration::from_secs(10))
        .expect_exit(0)
        .run();
    let expected: Vec<String> = (1..=20000).map(|i| i.to_string()).collect();

    let copy = std::fs::read_to_string(scratch.join("stdout.txt")).unwrap();
    let copied: Vec<&str> = copy.lines().collect();
    assert_eq!(copied.len(), 20000, "the result's stdout has every line");
    assert!(copied.iter().zip(&expected).all(|(a, b)| a == b));

    let events = record(&env);
    let seq_action = pick!(events, Event::ActionStarted { action, command, .. }
        if command.contains("seq") => *action)
    .into_iter()
    .next()
    .expect("the seq action");
    let lines: Vec<&str> = pick!(events, Event::Output { action, stream, line, .. }
    if *action == seq_action => {
        assert_eq!(*stream, Stream::Stdout, "{line}");
        line.as_str()
    });
    assert_eq!(lines.len(), 20000, "one output event per line");
    assert!(
        lines.iter().zip(&expected).all(|(a, b)| a == b),
        "output events are the lines, in order"
    );
    assert_eq!(end_of(run_finished(&events)).0, RunOutcome::Ok);
}

// ---------------------------------------------------------------------------------------
// A signal while the step is busy in Lua (no command, no sleep to wait on).

#[test]
fn sigint_stops_a_step_busy_in_lua() {
    let env = Env::new();
    let scratch = env.scratch();
    let mut run = fixture_run(&env, "busy_loop.lua").spawn();
    run.wait_file(&scratch.join("spinning"), Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(200));
    run.signal(libc::SIGINT);
    let got = run.code(Duration::from_secs(5));
    let out = run.output();
    assert_eq!(got, 130, "{out}");
    assert!(
        scratch.join("always").exists(),
        "the always step ran\n{out}"
    );
    let events = record(&env);
    let spin = finished(&events, 0);
    assert_eq!(outcome_of(spin), StepOutcome::Failed, "{spin:?}");
    assert!(error_of(spin).contains("interrupted"), "{spin:?}");
    let end = run_finished(&events);
    assert_eq!(end_of(end), (RunOutcome::Interrupted, 130), "{end:?}");
}

// ---------------------------------------------------------------------------------------
// A signal while the main thread is held in one call into C (a backtracking
// `string.find`): no hook runs there, so the watchdog ends the run within a second.

/// The CPU time `pid` has used so far (user and system), from /proc.
fn cpu_time(pid: i32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields
        .get(11..13)
        .map(|f| f.iter().filter_map(|t| t.parse::<u64>().ok()).sum())
        .unwrap_or(0);
    // SAFETY: sysconf only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

/// Runs `fixture` until it is busy in its `string.find` (well past a load or a command:
/// half a second of CPU), sends `sig`, and returns the exit code and how long runbook took
/// to exit after the signal.
fn signal_while_stuck(env: &Env, fixture: &str, sig: i32) -> (i32, Duration, String) {
    let mut run = fixture_run(env, fixture).spawn();
    let pid = run.pid();
    run.wait_for(
        "half a second of CPU in string.find",
        Duration::from_secs(20),
        || (cpu_time(pid) >= Duration::from_millis(500)).then_some(()),
    );
    let sent = Instant::now();
    run.signal(sig);
    let code = run.code(Duration::from_secs(30));
    let took = sent.elapsed();
    (code, took, run.output())
}

fn stuck_top_level_ends_on(sig: i32, code: i32, name: &str) {
    let env = Env::new();
    let (got, took, out) = signal_while_stuck(&env, "stuck_top.lua", sig);
    eprintln!("{name} to a top level stuck in string.find: exited after {took:?}");
    assert_eq!(got, code, "exit code after {name}\n{out}");
    // Within a second; the slack is for a loaded 2-core machine.
    assert!(
        took < Duration::from_secs(3),
        "took {took:?} after {name}\n{out}"
    );
    assert!(
        out.contains("stuck_top.lua") && out.contains("interrupted"),
        "says the file and that it was interrupted\n{out}"
    );
    // The run never started: no record, nothing ran.
    assert_eq!(env.record_count(), 0, "{out}");
    assert!(!env.scratch().join("later").exists(), "{out}");
}

#[test]
fn sigterm_ends_a_top_level_stuck_in_a_c_call_within_a_second() {
    stuck_top_level_ends_on(libc::SIGTERM, 143, "SIGTERM");
}

#[test]
fn sigint_ends_a_top_level_stuck_in_a_c_call_within_a_second() {
    stuck_top_level_ends_on(libc::SIGINT, 130, "SIGINT");
}

fn stuck_step_ends_on(sig: i32, code: i32, name: &str) {
    let env = Env::new();
    let (got, took, out) = signal_while_stuck(&env, "stuck_step.lua", sig);
    eprintln!("{name} to a step stuck in string.find: exited after {took:?}");
    assert_eq!(got, code, "exit code after {name}\n{out}");
    assert!(
        took < Duration::from_secs(3),
        "took {took:?} after {name}\n{out}"
    );
    assert!(env.scratch().join("started").exists(), "{out}");
    assert!(!env.scratch().join("later").exists(), "{out}");
    // The record is closed: the stuck step failed, interrupted, and the run ends with
    // its final event and the signal's exit code.
    let events = record(&env);
    let stuck = finished(&events, 0);
    assert_eq!(outcome_of(stuck), StepOutcome::Failed, "{stuck:?}");
    assert!(error_of(stuck).contains("interrupted"), "{stuck:?}");
    assert!(error_of(stuck).contains("stuck_step.lua:"), "{stuck:?}");
    let end = run_finished(&events);
    assert_eq!(end_of(end), (RunOutcome::Interrupted, code), "{end:?}");
}

#[test]
fn sigterm_ends_a_step_stuck_in_a_c_call_within_a_second() {
    stuck_step_ends_on(libc::SIGTERM, 143, "SIGTERM");
}

#[test]
fn sigint_ends_a_step_stuck_in_a_c_call_within_a_second() {
    stuck_step_ends_on(libc::SIGINT, 130, "SIGINT");
}
