//! Where commands run. A target only knows how to run an argv and how to render it; it
//! never knows which Lua function or primitive asked.

pub mod local;

use crate::cancel::Cancel;
use std::ffi::OsString;
use std::time::{Duration, Instant};

/// One command to run: an argv, never a shell string (a `shell` call is the argv
/// `sh -c SCRIPT`, remembered as `script` for the preview).
#[derive(Debug, Clone, Default)]
pub struct ExecRequest {
    pub argv: Vec<OsString>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<String>,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Option<Duration>,
    pub script: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

#[derive(Debug, Default)]
pub struct ExecOutcome {
    /// The exit code; `None` when the process was killed by a signal.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub duration: Duration,
    /// The command's own `timeout` option ran out.
    pub timed_out: bool,
    /// The step deadline or the run's `--timeout` ran out.
    pub deadline_hit: bool,
    /// A signal (Ctrl-C, TERM) stopped it.
    pub interrupted: bool,
}

/// What a running command reports to and is controlled by.
pub struct ExecIo<'a> {
    pub on_line: &'a dyn Fn(Stream, &str),
    /// The step's deadline (its `timeout`, or the run's `--timeout`).
    pub deadline: Option<Instant>,
    pub cancel: &'a Cancel,
    /// Interrupted once `cancel.count()` exceeds this.
    pub abort_at: u32,
}

/// How much of each stream a result keeps in memory; every line still reaches the events.
pub const CAPTURE_LIMIT: usize = 8 * 1024 * 1024;

#[derive(Debug)]
pub enum Target {
    Local(local::Local),
}

impl Target {
    pub fn local() -> Self {
        Target::Local(local::Local)
    }

    /// How the target is named in previews, events and errors.
    pub fn name(&self) -> String {
        match self {
            Target::Local(_) => "local".into(),
        }
    }

    /// The exact, copy-pastable command line that runs `req` on this target.
    pub fn render(&self, req: &ExecRequest) -> String {
        match self {
            Target::Local(l) => l.render(req),
        }
    }

    pub async fn exec(&self, req: &ExecRequest, io: &ExecIo<'_>) -> Result<ExecOutcome, String> {
        match self {
            Target::Local(l) => l.exec(req, io).await,
        }
    }
}
