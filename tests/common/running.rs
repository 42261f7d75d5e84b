//! `runbook` started in the background, for tests that act on it while it runs: wait for
//! a file or a pid file it writes, signal it, kill a host under it, watch its memory.
//!
//! Its output goes to files in the test's temp dir; every wait fails the test with that
//! output when runbook exits too early or takes too long; dropping a `Running` kills a
//! runbook that still runs. `alive` and `Reap` look after the processes it started.

use super::events::{parse_ndjson, stamped_of, Event, Line};
use super::run::tail_of;
use super::Env;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How much of stdout `output()` shows at most: its end, which is what explains a failure
/// (a flood drill prints hundreds of MiB).
const STDOUT_SHOWN: usize = 6000;

/// A `runbook` process started in the background, its output going to files.
pub struct Running {
    child: Child,
    out: PathBuf,
    err: PathBuf,
    state: PathBuf,
    started: Instant,
}

impl Running {
    /// Starts `cmd` (a `runbook` command as `Run::command` sets it up: `Run::spawn`), stdin
    /// closed, stdout and stderr going to `runbookN.stdout` and `runbookN.stderr` in the
    /// temp dir (N: the first number free, so that each run of a test keeps its own output).
    pub fn start(env: &Env, mut cmd: std::process::Command) -> Running {
        let dir = env.tmp.path();
        let n = (0..)
            .find(|n| !dir.join(format!("runbook{n}.stdout")).exists())
            .unwrap();
        let out = dir.join(format!("runbook{n}.stdout"));
        let err = dir.join(format!("runbook{n}.stderr"));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("spawn runbook");
        Running {
            child,
            out,
            err,
            state: env.state(),
            started: Instant::now(),
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// What runbook printed so far (of stdout, the last `STDOUT_SHOWN` bytes), to show
    /// with a failure.
    pub fn output(&self) -> String {
        let stdout = std::fs::read_to_string(&self.out).unwrap_or_default();
        let stderr = std::fs::read_to_string(&self.err).unwrap_or_default();
        if stdout.len() <= STDOUT_SHOWN {
            format!("--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}")
        } else {
            format!(
                "--- stdout (the last {STDOUT_SHOWN} bytes) ---\n{}\n--- stderr ---\n{stderr}",
                tail_of(&stdout, STDOUT_SHOWN)
            )
        }
    }

    /// What runbook printed on stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// The lines of a `--json` run, from what it printed so far: its events, or the
    /// `error` line of a command that failed before a run started.
    pub fn lines(&self) -> Vec<Line> {
        parse_ndjson(&std::fs::read(&self.out).unwrap_or_default())
    }

    /// The events of a `--json` run, from what it printed so far (an `error` line fails
    /// the test: see [`Running::lines`]).
    pub fn events(&self) -> Vec<Event> {
        stamped_of(self.lines())
            .into_iter()
            .map(|s| s.event)
            .collect()
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill only sends a signal to the process this test started.
        let rc = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(rc, 0, "kill({}, {sig}) failed", self.pid());
    }

    /// Its exit status, if it has exited (without waiting).
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// Waits for the process to exit; kills it and fails the test after `limit`.
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let until = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() >= until {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "runbook did not exit within {limit:?}; killed it\n{}",
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A `--json` run (`Run::json`) that has exited, as `Run::run` would have returned it.
    pub fn finish(mut self) -> super::run::Output {
        let status = self.wait(Duration::from_secs(10));
        super::run::Output::of_background(
            status,
            std::fs::read(&self.out).unwrap_or_default(),
            std::fs::read(&self.err).unwrap_or_default(),
            self.state.clone(),
            self.started.elapsed(),
        )
    }

    /// Waits and returns the exit code (a signal death fails the test).
    pub fn code(&mut self, limit: Duration) -> i32 {
        let status = self.wait(limit);
        status.code().unwrap_or_else(|| {
            panic!(
                "runbook died from a signal ({status:?}) instead of exiting\n{}",
                self.output()
            )
        })
    }

    /// Waits until `path` exists, while runbook still runs.
    pub fn wait_file(&mut self, path: &Path, limit: Duration) {
        self.wait_for(path.display(), limit, || path.exists().then_some(()))
    }

    /// Waits until `path` holds a pid, while runbook still runs.
    pub fn wait_pid(&mut self, path: &Path, limit: Duration) -> i32 {
        self.wait_for(path.display(), limit, || {
            std::fs::read_to_string(path).ok()?.trim().parse().ok()
        })
    }

    /// Polls `found` until it gives a value; fails the test when runbook exits first or
    /// `what` has not appeared within `limit`.
    pub fn wait_for<T>(
        &mut self,
        what: impl std::fmt::Display,
        limit: Duration,
        mut found: impl FnMut() -> Option<T>,
    ) -> T {
        let until = Instant::now() + limit;
        loop {
            if let Some(value) = found() {
                return value;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "runbook exited ({status:?}) before {what} appeared\n{}",
                    self.output()
                );
            }
            assert!(
                Instant::now() < until,
                "{what} did not appear within {limit:?}\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `/proc/PID/stat` fields after the command name: state, ppid, …
pub fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S …": the fields follow the last ')'.
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Whether a process is alive: `/proc/PID` exists and is not a zombie (a dead child
/// reparented to a PID 1 that does not reap counts as gone).
pub fn alive(pid: i32) -> bool {
    match stat_fields(pid) {
        None => false,
        Some(f) => f.first().is_some_and(|state| state != "Z" && state != "X"),
    }
}

/// Polls up to `limit` for `pid` to be gone (see `alive`).
pub fn gone_within(pid: i32, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while alive(pid) {
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Kills, when dropped, processes a test's runbook started (on the "remote" side too:
/// sshd runs on this machine), so that a failing test leaves nothing behind.
pub struct Reap(pub Vec<i32>);

impl Drop for Reap {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if alive(pid) {
                // SAFETY: only sends a signal to a process this test's runbook started.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}
