//! What a run printed (`--json`) and recorded, read as the program's own event types
//! (`runbook::events`, docs/EVENTS.md): a test that reads a field by its Rust name stops
//! compiling when the field is renamed, where `e["outcome"] == "failed"` would go on
//! comparing against nothing.
//!
//! A line that is not an event fails the test with the line and serde's error; only
//! [`parse_lenient`], which feeds failure messages, passes over such lines.
//!
//! [`pick!`] selects events by their variant (and fields): `pick!(events, Event::Output
//! { line, .. } => line.clone())` is every output line, `pick!(events, Event::ActionPlanned
//! { effect: Effect::Change, .. })` every planned change.

pub use runbook::events::{
    Container, Effect, ErrorEvent, Event, Hop, Level, RunOutcome, ScriptRef, Stamped, StepOutcome,
    Stream,
};
use std::fmt::Display;
use std::path::{Path, PathBuf};

/// The events that match a pattern, in order: `pick!(events, PATTERN)` gives references to
/// them, `pick!(events, PATTERN => EXPR)` what `EXPR` makes of each (the pattern's bindings
/// are references into the event). `events` is anything whose `.iter()` yields `&Event`.
#[macro_export]
macro_rules! pick {
    ($events:expr, $pat:pat $(if $guard:expr)? => $out:expr) => {
        $events
            .iter()
            .filter_map(|e| match e {
                $pat $(if $guard)? => Some($out),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    ($events:expr, $pat:pat $(if $guard:expr)?) => {
        $events
            .iter()
            .filter(|e| matches!(e, $pat $(if $guard)?))
            .collect::<Vec<_>>()
    };
}

/// One line of `--json` stdout: an event of the run, or the `error` line the command
/// prints instead when it fails before a run starts.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // test-only, and built once per line read
pub enum Line {
    Event(Stamped),
    Error(ErrorEvent),
}

/// One `--json` line, or why it is neither an event nor an `error` line.
pub fn parse_line(line: &str) -> Result<Line, serde_json::Error> {
    let not_an_event = match serde_json::from_str::<Stamped>(line) {
        Ok(stamped) => return Ok(Line::Event(stamped)),
        Err(e) => e,
    };
    // serde does not check a tagged struct's tag when it reads one (it passes over it as
    // an unknown field), so the tag is looked at here: only `"event":"error"` is an error.
    let tag: serde_json::Value = serde_json::from_str(line)?;
    if tag.get("event").and_then(|t| t.as_str()) != Some("error") {
        return Err(not_an_event);
    }
    serde_json::from_str(line).map(Line::Error)
}

/// The lines of `--json` stdout (blank ones passed over); one that does not parse fails
/// the test.
pub fn parse_ndjson(stdout: &[u8]) -> Vec<Line> {
    String::from_utf8_lossy(stdout)
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            parse_line(l)
                .unwrap_or_else(|e| panic!("--json line {} is not an event ({e}): {l}", i + 1))
        })
        .collect()
}

/// The events of `--json` lines that must all be events: an `error` line fails the test.
pub fn stamped_of(lines: Vec<Line>) -> Vec<Stamped> {
    lines
        .into_iter()
        .map(|l| match l {
            Line::Event(stamped) => stamped,
            Line::Error(error) => {
                panic!("--json printed an error, not the run's events: {error:?}")
            }
        })
        .collect()
}

/// One line of a run record, which holds events only; `whence` says where it is, for
/// the failure when it does not parse.
fn parse_recorded(line: &str, whence: impl Display) -> Stamped {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{whence} is not an event ({e}): {line}"))
}

/// One line of a run record, as a test that edits a record reads it.
pub fn parse_record_line(line: &str) -> Stamped {
    parse_recorded(line, "a record line")
}

/// The events of a run record (JSONL), with their times.
pub fn read_stamped(path: &Path) -> Vec<Stamped> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .enumerate()
        .map(|(i, l)| parse_recorded(l, format_args!("{} line {}", path.display(), i + 1)))
        .collect()
}

/// The events of a record its run may still be writing: a last line without its newline
/// (half written) is left out; every complete line must be an event.
pub fn read_stamped_so_far(path: &Path) -> Vec<Stamped> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let complete = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    complete
        .lines()
        .enumerate()
        .map(|(i, l)| parse_recorded(l, format_args!("{} line {}", path.display(), i + 1)))
        .collect()
}

/// The events of a run record (JSONL).
pub fn read_jsonl(path: &Path) -> Vec<Event> {
    read_stamped(path).into_iter().map(|s| s.event).collect()
}

/// The run record files in a state dir, oldest first (by modification time, then name).
pub fn record_files(state: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(state.join("runs"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort_by_key(|p| (std::fs::metadata(p).unwrap().modified().unwrap(), p.clone()));
    files
}

/// A record checked to be complete: newline-terminated lines, each an event, from
/// `run_started` to exactly one `run_finished` at the end.
pub fn complete_record(path: &Path) -> Vec<Event> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    assert!(
        text.ends_with('\n'),
        "{} ends with a complete line",
        path.display()
    );
    let events: Vec<Event> = text
        .lines()
        .enumerate()
        .map(|(i, l)| parse_recorded(l, format_args!("{} line {}", path.display(), i + 1)).event)
        .collect();
    assert!(
        matches!(events.first(), Some(Event::RunStarted { .. })),
        "{events:#?}"
    );
    assert!(
        matches!(events.last(), Some(Event::RunFinished { .. })),
        "the record ends with run_finished: {events:#?}"
    );
    assert_eq!(
        pick!(events, Event::RunFinished { .. }).len(),
        1,
        "{events:#?}"
    );
    events
}

/// The latest run record file in a state dir.
pub fn latest_record_file(state: &Path) -> PathBuf {
    record_files(state)
        .pop()
        .unwrap_or_else(|| panic!("no run record in {}", state.display()))
}

/// The events of the latest run record in a state dir.
pub fn latest_record(state: &Path) -> Vec<Event> {
    read_jsonl(&latest_record_file(state))
}

/// The events of the latest run record in a state dir, with their times.
pub fn latest_record_stamped(state: &Path) -> Vec<Stamped> {
    read_stamped(&latest_record_file(state))
}

/// The events among the lines of `stdout`, passing over any line that is not one (for
/// failure messages of runs that were not `--json`, or that printed something broken).
pub fn parse_lenient(stdout: &[u8]) -> Vec<Event> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Stamped>(l).ok())
        .map(|s| s.event)
        .collect()
}

/// Which step `step_error` means.
#[derive(Debug, Clone, Copy)]
pub enum Step<'s> {
    /// The first step that failed.
    Failed,
    /// The step of this name (its last `step_finished`: retries finish more than once).
    Named(&'s str),
    /// The step at this index (its last `step_finished`).
    Index(usize),
}

/// The first step that failed, for `step_error(FAILED)`.
pub const FAILED: Step<'static> = Step::Failed;

impl<'s> From<&'s str> for Step<'s> {
    fn from(name: &'s str) -> Self {
        Step::Named(name)
    }
}

impl From<usize> for Step<'_> {
    fn from(index: usize) -> Self {
        Step::Index(index)
    }
}

pub(crate) fn find_step<'v>(events: &'v [Event], step: Step<'_>) -> Option<&'v Event> {
    let mut finished = events
        .iter()
        .filter(|e| matches!(e, Event::StepFinished { .. }));
    match step {
        Step::Failed => finished.find(|e| {
            matches!(
                e,
                Event::StepFinished {
                    outcome: StepOutcome::Failed,
                    ..
                }
            )
        }),
        Step::Named(want) => {
            finished.rfind(|e| matches!(e, Event::StepFinished { name, .. } if name == want))
        }
        Step::Index(i) => {
            finished.rfind(|e| matches!(e, Event::StepFinished { index, .. } if *index == i))
        }
    }
}

pub(crate) fn failed_error(ev: &Event, step: Step<'_>) -> String {
    match ev {
        Event::StepFinished {
            outcome: StepOutcome::Failed,
            error,
            ..
        } => error.clone().unwrap_or_default(),
        _ => panic!("{step:?} did not fail: {ev:?}"),
    }
}

/// The error of a step that failed, from a run's events (its `--json` output or its
/// record): the first failed step ([`FAILED`]), or a step by name or index. The test fails
/// when that step did not finish, or finished without failing.
pub fn step_error<'s>(events: &[Event], step: impl Into<Step<'s>>) -> String {
    let step = step.into();
    let ev =
        find_step(events, step).unwrap_or_else(|| panic!("no {step:?} finished in {events:#?}"));
    failed_error(ev, step)
}

/// The last `step_finished` of a step: by name or index, or the first that failed.
pub fn step_finished<'v, 's>(events: &'v [Event], step: impl Into<Step<'s>>) -> &'v Event {
    let step = step.into();
    find_step(events, step).unwrap_or_else(|| panic!("no {step:?} finished in {events:#?}"))
}

/// How a step ended (its last `step_finished`: by name or index).
pub fn step_outcome<'s>(events: &[Event], step: impl Into<Step<'s>>) -> StepOutcome {
    match step_finished(events, step) {
        Event::StepFinished { outcome, .. } => *outcome,
        _ => unreachable!("find_step finds step_finished events only"),
    }
}

/// The `step_skipped` of the step at `index`, if it was skipped.
pub fn step_skipped(events: &[Event], index: usize) -> Option<&Event> {
    events
        .iter()
        .find(|e| matches!(e, Event::StepSkipped { index: i, .. } if *i == index))
}

/// Every failed step's error, one a line.
pub fn step_errors(events: &[Event]) -> String {
    pick!(events, Event::StepFinished { error: Some(error), .. } => error.as_str()).join("\n")
}

/// The messages of `log` events (at `level`, when given), in order.
pub fn logs(events: &[Event], level: Option<Level>) -> Vec<String> {
    pick!(events, Event::Log { level: l, message, .. } if level.is_none_or(|want| *l == want)
        => message.clone())
}

/// The id of the run whose events these are (its `run_started`, which comes first).
pub fn run_id(events: &[Event]) -> String {
    match events.first() {
        Some(Event::RunStarted { run_id, .. }) => run_id.clone(),
        _ => panic!("the events do not start with run_started: {events:#?}"),
    }
}

/// Whether the event is a change action, planned or started (the events with an `effect`).
pub fn is_change(e: &Event) -> bool {
    matches!(
        e,
        Event::ActionPlanned {
            effect: Effect::Change,
            ..
        } | Event::ActionStarted {
            effect: Effect::Change,
            ..
        }
    )
}

/// Which change actions [`changes`] reads: those a dry-run planned, or those a run
/// started.
#[derive(Debug, Clone, Copy)]
pub enum Changes {
    Planned,
    Started,
}

/// (target, command) of each change action of that kind, in order.
pub fn changes(events: &[Event], which: Changes) -> Vec<(String, String)> {
    match which {
        Changes::Planned => {
            pick!(events, Event::ActionPlanned { effect: Effect::Change, target, command, .. }
            => (target.clone(), command.clone()))
        }
        Changes::Started => {
            pick!(events, Event::ActionStarted { effect: Effect::Change, target, command, .. }
            => (target.clone(), command.clone()))
        }
    }
}

/// The script an action runs (`action_planned` or `action_started`), if it runs one.
pub fn script_of(e: &Event) -> Option<&ScriptRef> {
    match e {
        Event::ActionPlanned { script, .. } | Event::ActionStarted { script, .. } => {
            script.as_ref()
        }
        _ => None,
    }
}

/// The `action_started` events of the actions that run the script `name`.
pub fn started_running<'v>(events: &'v [Event], name: &str) -> Vec<&'v Event> {
    pick!(events, e @ Event::ActionStarted { .. }
        if script_of(e).is_some_and(|s| s.name == name) => e)
}

/// The lines action `id` printed on `stream`, in order.
pub fn lines_of(events: &[Event], id: u64, stream: Stream) -> Vec<&str> {
    pick!(events, Event::Output { action, stream: s, line, .. }
        if *action == id && *s == stream => line.as_str())
}

/// The mode the run says it ran in (its `run_started`, which comes first).
pub fn mode_of(events: &[Event]) -> String {
    match events.first() {
        Some(Event::RunStarted { mode, .. }) => mode.clone(),
        _ => panic!("the events do not start with run_started: {events:#?}"),
    }
}
