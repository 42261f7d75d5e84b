//! Reads a running command's stdout and stderr line by line, whatever transport it runs
//! on: each line becomes an `output` event at once and is kept (up to a cap) for the
//! result. Stops early at a deadline or a signal and says why; the caller kills.

use super::{ExecIo, ExecOutcome, Stream, CAPTURE_LIMIT};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// Why a command was stopped before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Its own `timeout` option ran out.
    Timeout,
    /// The step's deadline or the run's `--timeout` ran out.
    Deadline,
    /// SIGINT/SIGTERM.
    Interrupted,
}

/// The first stderr line a remote command's wrapper prints: its process group id, so that
/// runbook can kill the whole remote tree later (see `wrap.rs`). Never shown to users.
pub const PGID_MARKER: &str = "\u{1e}runbook-pgid=";

pub struct Pumped {
    pub stop: Option<Stop>,
    /// The remote process group, when the command was wrapped to report it.
    pub pgid: Option<u32>,
}

pub fn effective_deadline(
    own: Option<Duration>,
    started: Instant,
    io: &ExecIo<'_>,
) -> (Option<Instant>, Option<Instant>) {
    let own = own.map(|t| started + t);
    let deadline = match (own, io.deadline) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    (own, deadline)
}

pub async fn pump(
    stdout: impl AsyncRead + Unpin,
    stderr: impl AsyncRead + Unpin,
    own_deadline: Option<Instant>,
    deadline: Option<Instant>,
    io: &ExecIo<'_>,
    out: &mut ExecOutcome,
) -> Pumped {
    let mut stdout = BufReader::new(stdout);
    let mut stderr = BufReader::new(stderr);
    let (mut out_buf, mut err_buf) = (Vec::new(), Vec::new());
    let (mut out_done, mut err_done) = (false, false);
    let mut pgid = None;
    let far = Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600);
    let sleep = tokio::time::sleep_until(deadline.unwrap_or(far).into());
    tokio::pin!(sleep);

    while !(out_done && err_done) {
        if io.cancel.count() > io.abort_at {
            return Pumped {
                stop: Some(Stop::Interrupted),
                pgid,
            };
        }
        tokio::select! {
            r = stdout.read_until(b'\n', &mut out_buf), if !out_done => {
                if matches!(r, Ok(0) | Err(_)) {
                    out_done = true;
                }
                if !out_buf.is_empty() && (out_done || out_buf.ends_with(b"\n")) {
                    take_line(&mut out_buf, Stream::Stdout, out, io);
                }
            }
            r = stderr.read_until(b'\n', &mut err_buf), if !err_done => {
                if matches!(r, Ok(0) | Err(_)) {
                    err_done = true;
                }
                if !err_buf.is_empty() && (err_done || err_buf.ends_with(b"\n")) {
                    if pgid.is_none() && err_buf.starts_with(PGID_MARKER.as_bytes()) {
                        let text = String::from_utf8_lossy(&err_buf[PGID_MARKER.len()..]).trim().to_string();
                        pgid = text.parse().ok();
                        err_buf.clear();
                    } else {
                        take_line(&mut err_buf, Stream::Stderr, out, io);
                    }
                }
            }
            _ = &mut sleep => {
                let stop = if own_deadline.is_some() && own_deadline == deadline { Stop::Timeout } else { Stop::Deadline };
                return Pumped { stop: Some(stop), pgid };
            }
            _ = io.cancel.notified() => {}
        }
    }
    Pumped { stop: None, pgid }
}

fn take_line(buf: &mut Vec<u8>, stream: Stream, out: &mut ExecOutcome, io: &ExecIo<'_>) {
    let (store, truncated) = match stream {
        Stream::Stdout => (&mut out.stdout, &mut out.stdout_truncated),
        Stream::Stderr => (&mut out.stderr, &mut out.stderr_truncated),
    };
    if store.len() + buf.len() <= CAPTURE_LIMIT {
        store.extend_from_slice(buf);
    } else {
        *truncated = true;
    }
    let mut line = &buf[..];
    if line.ends_with(b"\n") {
        line = &line[..line.len() - 1];
    }
    if line.ends_with(b"\r") {
        line = &line[..line.len() - 1];
    }
    (io.on_line)(stream, &String::from_utf8_lossy(line));
    buf.clear();
}
