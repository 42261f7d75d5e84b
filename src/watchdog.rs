//! The last resort behind step timeouts and Ctrl-C.
//!
//! Timeouts and signals normally end a step through the Lua instruction hook or by
//! killing the running command. One thing escapes both: a single long call into C that
//! never returns to the VM (a backtracking `string.find` on a huge string). This thread
//! watches from outside: when a step is still running well past its deadline, or past a
//! signal, it closes the run record with what it knows and ends the process. No command
//! is running at that point (commands only run while Lua waits), so nothing is orphaned.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long past its deadline (or a signal) a step may take to stop by itself: longer
/// than stopping a remote command can take (TERM, 2 s, KILL, closing the channel).
const GRACE: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Armed {
    step: Option<(usize, String)>,
    deadline: Option<Instant>,
    signal_seen: Option<Instant>,
    location: String,
}

struct Watchdog {
    record: PathBuf,
    armed: Mutex<Armed>,
}

static WATCHDOG: OnceLock<Arc<Watchdog>> = OnceLock::new();

/// Starts watching a real run whose record is at `record`.
pub fn start(record: PathBuf) {
    let dog = Arc::new(Watchdog {
        record,
        armed: Mutex::new(Armed::default()),
    });
    if WATCHDOG.set(dog.clone()).is_err() {
        return;
    }
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(250));
        dog.check();
    });
}

/// A step starts (with its deadline, if any).
pub fn arm(index: usize, name: &str, deadline: Option<Instant>) {
    if let Some(dog) = WATCHDOG.get() {
        let mut a = dog.armed.lock().unwrap_or_else(|e| e.into_inner());
        *a = Armed {
            step: Some((index, name.to_string())),
            deadline,
            signal_seen: None,
            location: String::new(),
        };
    }
}

/// The step ended by itself.
pub fn disarm() {
    if let Some(dog) = WATCHDOG.get() {
        *dog.armed.lock().unwrap_or_else(|e| e.into_inner()) = Armed::default();
    }
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
        let mut a = self.armed.lock().unwrap_or_else(|e| e.into_inner());
        let Some((index, name)) = a.step.clone() else {
            return;
        };
        let signals = crate::cancel::signal_count();
        if signals > 0 && a.signal_seen.is_none() {
            a.signal_seen = Some(now);
        }
        let late = a.deadline.is_some_and(|d| now > d + GRACE);
        let ignored_signal = a.signal_seen.is_some_and(|t| now > t + GRACE);
        if !(late || ignored_signal) {
            return;
        }
        let at = if a.location.is_empty() {
            "the step".to_string()
        } else {
            a.location.clone()
        };
        let (why, code, outcome) = if ignored_signal {
            let code = crate::cancel::first_exit_code();
            (format!("{at}: interrupted, but the step did not stop (stuck in one long call into C); runbook stopped itself"), code, "interrupted")
        } else {
            (format!("{at}: step timed out, but did not stop (stuck in one long call into C); runbook stopped itself"), 1, "failed")
        };
        self.close_record(index, &name, &why, outcome, code);
        eprintln!("✗ {name}\n    {why}");
        std::process::exit(code);
    }

    fn close_record(&self, index: usize, name: &str, error: &str, outcome: &str, code: i32) {
        let ts = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        let lines = [
            serde_json::json!({"ts": ts, "event": "step_finished", "index": index, "name": name, "outcome": "failed", "duration_ms": 0, "error": error}),
            serde_json::json!({"ts": ts, "event": "run_finished", "outcome": outcome, "ok": 0, "changed": 0, "failed": 1, "skipped": 0, "duration_ms": 0, "exit_code": code}),
        ];
        if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&self.record) {
            for l in lines {
                let _ = writeln!(f, "{l}");
            }
            let _ = f.sync_all();
        }
    }
}
