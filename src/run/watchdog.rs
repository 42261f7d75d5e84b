//! The last resort behind deadlines and signals, in every phase of every command.
//!
//! Timeouts and signals normally end Lua code through the instruction hook and commands
//! by killing them. Some code escapes both: a single long call into C that never returns
//! to the VM (a backtracking `string.find` on a huge string), or Lua code running where
//! Lua turns the hook off (finalizers and to-be-closed handlers; the sandbox refuses
//! those, this is the backstop). This thread watches from outside. It is armed for the
//! phase that runs: the file's top level (`check`, `show`, `list` and `run` all load),
//! each step (in the confirmation pass too), and the VM's close after the run. When the
//! phase is still running `GRACE` past its deadline, or `GRACE` after a signal that
//! should have ended it, it kills the local commands still running, closes the run
//! record with what it knows (once one exists), and ends the process. A signal that the
//! main thread does not even answer (`cancel::answered`) while the top level or a step
//! runs is acted on after `ANSWER` instead: nothing there will stop that call into C, and
//! Ctrl-C or a service manager's SIGTERM must end runbook within a second.

use crate::actions::events::{Event, RunOutcome, StepOutcome};
use crate::base::cancel::Signal;
use crate::base::error::Exit;
use crate::run::sinks::record::RecordWriter;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long past its deadline (or a signal) a phase may take to stop by itself: longer
/// than stopping a remote command can take (TERM, 2 s, KILL, closing the channel).
pub const GRACE: Duration = Duration::from_secs(10);

/// How long a signal may go unanswered by the main thread (`cancel::answered`: its
/// runtime did not wake for it, the instruction hook did not run) while the file's top
/// level or a step runs: then it is stuck in one call into C that does not return, and
/// the signal ends the run from here, well within a second, instead of after `GRACE`.
pub const ANSWER: Duration = Duration::from_millis(400);

/// How often the thread looks: often enough that `ANSWER` is kept to within a second.
const EVERY: Duration = Duration::from_millis(100);

/// What is running now.
#[derive(Default, Clone)]
enum Watch {
    /// Between phases: only a signal that is not acted on is a reason to step in.
    #[default]
    Idle,
    /// The file's top level (`label` is the runbook as users name it).
    Load { label: String },
    /// Step `index` of a real run or of the confirmation pass (`planning`).
    Step {
        index: usize,
        name: String,
        planning: bool,
    },
    /// The run is over and recorded (`code` is its exit code); only the VM's close and
    /// the connections' shutdown remain.
    Closing { code: i32 },
}

#[derive(Default)]
struct Armed {
    watch: Watch,
    deadline: Option<Instant>,
    /// Signals counted when the phase started: only later ones should end it (an
    /// `always` step after a Ctrl-C runs on; a second Ctrl-C stops it).
    signals_at_start: u32,
    signal_seen: Option<Instant>,
    location: String,
}

struct Watchdog {
    record: Mutex<Option<RecordWriter>>,
    armed: Mutex<Armed>,
}

static WATCHDOG: OnceLock<Arc<Watchdog>> = OnceLock::new();

/// Starts the watching thread (once per process, before any Lua runs).
pub fn start() {
    let dog = Arc::new(Watchdog {
        record: Mutex::new(None),
        armed: Mutex::new(Armed::default()),
    });
    if WATCHDOG.set(dog.clone()).is_err() {
        return;
    }
    std::thread::spawn(move || loop {
        std::thread::sleep(EVERY);
        dog.check();
    });
}

/// The run record exists from now on: a stuck step gets its end written there.
pub fn set_record(record: RecordWriter) {
    if let Some(dog) = WATCHDOG.get() {
        *lock(&dog.record) = Some(record);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn set(watch: Watch, deadline: Option<Instant>, location: &str) {
    if let Some(dog) = WATCHDOG.get() {
        *lock(&dog.armed) = Armed {
            watch,
            deadline,
            signals_at_start: crate::base::cancel::signal_count(),
            signal_seen: None,
            location: location.to_string(),
        };
    }
}

/// The top level of `label` starts running, with its budget.
pub fn arm_load(label: &str, deadline: Instant) {
    set(
        Watch::Load {
            label: label.to_string(),
        },
        Some(deadline),
        "",
    );
}

/// A step starts (with its deadline, if any); `planning` for the confirmation pass. `at`
/// (where it is declared) names it until the hook has seen a line of it.
pub fn arm(index: usize, name: &str, at: &str, deadline: Option<Instant>, planning: bool) {
    set(
        Watch::Step {
            index,
            name: name.to_string(),
            planning,
        },
        deadline,
        at,
    );
}

/// The run is recorded and will exit with `code`: what remains (closing the VM and the
/// connections) gets `GRACE`.
pub fn closing(code: i32) {
    set(Watch::Closing { code }, Some(Instant::now() + GRACE), "");
}

/// The phase ended by itself.
pub fn disarm() {
    set(Watch::Idle, None, "");
}

/// Where Lua was last seen (from the instruction hook).
pub fn seen_at(location: &str) {
    if let Some(dog) = WATCHDOG.get() {
        if let Ok(mut a) = dog.armed.try_lock() {
            if a.location != location {
                a.location = location.to_string();
            }
        }
    }
}

impl Watchdog {
    fn check(&self) {
        let now = Instant::now();
        let mut a = lock(&self.armed);
        if crate::base::cancel::signal_count() > a.signals_at_start && a.signal_seen.is_none() {
            a.signal_seen = Some(now);
        }
        let late = a.deadline.is_some_and(|d| now > d + GRACE);
        let running_lua = matches!(a.watch, Watch::Load { .. } | Watch::Step { .. });
        let unanswered = running_lua
            && crate::base::cancel::unanswered()
            && a.signal_seen.is_some_and(|t| now > t + ANSWER);
        let ignored_signal = unanswered || a.signal_seen.is_some_and(|t| now > t + GRACE);
        if !(late || ignored_signal) {
            return;
        }
        let signal = Exit::Signal(crate::base::cancel::first_signal().unwrap_or(Signal::Int));
        let at = |fallback: &str| {
            if a.location.is_empty() {
                fallback.to_string()
            } else {
                a.location.clone()
            }
        };
        // Nothing may keep running once runbook is gone: its local commands go first.
        crate::targets::local::kill_all_running();
        let how = if unanswered {
            "interrupted, but did not answer"
        } else if ignored_signal {
            "interrupted, but did not stop"
        } else {
            "ran past its deadline and did not stop"
        };
        let stuck = "(stuck in one long call into C, or in Lua code that runs with the hook off); runbook stopped itself";
        match a.watch.clone() {
            Watch::Idle => {
                eprintln!("error: runbook {how} {stuck}");
                let exit = if ignored_signal {
                    signal
                } else {
                    Exit::RunFailed
                };
                std::process::exit(exit.code());
            }
            Watch::Closing { code } => {
                // The record is complete; the exit code is the run's.
                eprintln!(
                    "error: runbook did not finish closing within {}s after the run ended; exiting",
                    GRACE.as_secs()
                );
                std::process::exit(code);
            }
            Watch::Load { label } => {
                let at = at(&label);
                eprintln!(
                    "error: {at}: the top level of the file {how} {stuck}; nothing was changed"
                );
                let exit = if ignored_signal {
                    signal
                } else {
                    Exit::NothingChanged
                };
                std::process::exit(exit.code());
            }
            Watch::Step {
                index,
                name,
                planning,
            } => {
                let at = at("the step");
                let (why, outcome, exit) = if ignored_signal {
                    let did = if unanswered {
                        "did not answer"
                    } else {
                        "did not stop"
                    };
                    (
                        format!("{at}: interrupted, but the step {did} {stuck}"),
                        RunOutcome::Interrupted,
                        signal,
                    )
                } else if planning {
                    (
                        format!("{at}: step timed out while planning the run, but did not stop {stuck}; nothing was changed"),
                        RunOutcome::Failed,
                        Exit::NothingChanged,
                    )
                } else {
                    (
                        format!("{at}: step timed out, but did not stop {stuck}"),
                        RunOutcome::Failed,
                        Exit::RunFailed,
                    )
                };
                // The name may be built from a secret; what ends the run is said masked.
                let name = crate::base::secrets::mask_global(&name);
                let why = crate::base::secrets::mask_global(&why);
                if !planning {
                    self.close_record(index, &name, &why, outcome, exit.code());
                }
                eprintln!("✗ {name}\n    {why}");
                std::process::exit(exit.code());
            }
        }
    }

    fn close_record(&self, index: usize, name: &str, error: &str, outcome: RunOutcome, code: i32) {
        let Some(record) = lock(&self.record).clone() else {
            return;
        };
        let ts = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        let lines = [
            Event::StepFinished {
                index,
                name: name.to_string(),
                outcome: StepOutcome::Failed,
                duration_ms: 0,
                error: Some(error.to_string()),
            },
            Event::RunFinished {
                outcome,
                ok: 0,
                changed: 0,
                failed: 1,
                skipped: 0,
                duration_ms: 0,
                exit_code: code,
            },
        ];
        // Chained after the sink's last line; not written at all when the main thread is
        // stuck inside the record itself.
        record.end_with(&ts, lines.into(), Duration::from_secs(1));
    }
}
