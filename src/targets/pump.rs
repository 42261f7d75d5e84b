//! Reads a running command's stdout and stderr line by line, whatever transport it runs
//! on: each line becomes an `output` event at once and is kept (up to a cap) for the
//! result. Stops early at a deadline or a signal and says why; the caller kills, and
//! keeps draining while the command dies (a command whose pipes are closed under it dies
//! of SIGPIPE before its cleanup traps run).

use super::{ExecIo, ExecOutcome, Group, Stream, CAPTURE_LIMIT};
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
/// runbook can kill the whole remote tree later, then the boot id and the group leader's
/// `/proc` stat line, so that a later run can tell that group from one that reuses its
/// number (see `wrap.rs`, `Group::parse`). Never shown to users.
pub const PGID_MARKER: &str = "\u{1e}runbook-pgid=";

/// How long a stopped command's group report is waited for (`Pump::group_after_stop`).
pub const REPORT_WAIT: Duration = Duration::from_secs(2);

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

pub struct Pump<O, E> {
    stdout: BufReader<O>,
    stderr: BufReader<E>,
    out_buf: Vec<u8>,
    err_buf: Vec<u8>,
    out_done: bool,
    err_done: bool,
    /// The remote process group, when the command was wrapped to report it.
    pub pgid: Option<u32>,
    /// The start of the line that reports it (`PGID_MARKER`, with a token where the
    /// command could print before the report does); `None`: the command reports no
    /// group, and a line that looks like a report is only output.
    group: Option<Vec<u8>>,
}

impl<O: AsyncRead + Unpin, E: AsyncRead + Unpin> Pump<O, E> {
    /// `group`: see the field.
    pub fn new(stdout: O, stderr: E, group: Option<Vec<u8>>) -> Self {
        Pump {
            stdout: BufReader::new(stdout),
            stderr: BufReader::new(stderr),
            out_buf: Vec::new(),
            err_buf: Vec::new(),
            out_done: false,
            err_done: false,
            pgid: None,
            group,
        }
    }

    /// Reads until both streams end (`None`), or until a deadline or signal (`Some`).
    pub async fn run(
        &mut self,
        own_deadline: Option<Instant>,
        deadline: Option<Instant>,
        io: &ExecIo<'_>,
        out: &mut ExecOutcome,
    ) -> Option<Stop> {
        let far = Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600);
        let sleep = tokio::time::sleep_until(deadline.unwrap_or(far).into());
        tokio::pin!(sleep);
        while !(self.out_done && self.err_done) {
            if io.cancel.count() > io.abort_at {
                return Some(Stop::Interrupted);
            }
            tokio::select! {
                _ = self.step(io, out) => {}
                _ = &mut sleep => {
                    let own = own_deadline.is_some() && own_deadline == deadline;
                    return Some(if own { Stop::Timeout } else { Stop::Deadline });
                }
                _ = io.cancel.notified() => {}
            }
        }
        None
    }

    /// The remote group to kill after a stop. A stop can win the race against the
    /// wrapper's report still sitting unread in the pipe (seen under load: Ctrl-C landed
    /// after the tree started but before the pump read its first stderr line), and a
    /// report still on its way means the tree is about to start; either way killing only
    /// the local client would leave that tree running. So read on, up to `limit`, until
    /// the report arrives or the streams end.
    pub async fn group_after_stop(
        &mut self,
        io: &ExecIo<'_>,
        out: &mut ExecOutcome,
        limit: Duration,
    ) -> Option<u32> {
        let _ = tokio::time::timeout(limit, async {
            while self.pgid.is_none() && !(self.out_done && self.err_done) {
                self.step(io, out).await;
            }
        })
        .await;
        self.pgid
    }

    /// Reads whatever the (dying) command still prints, until both streams end.
    pub async fn drain(&mut self, io: &ExecIo<'_>, out: &mut ExecOutcome) {
        while !(self.out_done && self.err_done) {
            self.step(io, out).await;
        }
    }

    /// One read on whichever stream has data. Cancel-safe: a partial line stays in its
    /// buffer for the next call.
    async fn step(&mut self, io: &ExecIo<'_>, out: &mut ExecOutcome) {
        tokio::select! {
            r = read_line_capped(&mut self.stdout, &mut self.out_buf), if !self.out_done => {
                if matches!(r, Ok(0) | Err(_)) {
                    self.out_done = true;
                }
                if !self.out_buf.is_empty() && (self.out_done || line_ready(&self.out_buf)) {
                    take_line(&mut self.out_buf, Stream::Stdout, out, io);
                }
                // At the end, what take_line held back (a cut character) goes too.
                if self.out_done && !self.out_buf.is_empty() {
                    take_line(&mut self.out_buf, Stream::Stdout, out, io);
                }
            }
            r = read_line_capped(&mut self.stderr, &mut self.err_buf), if !self.err_done => {
                if matches!(r, Ok(0) | Err(_)) {
                    self.err_done = true;
                }
                if !self.err_buf.is_empty() && (self.err_done || line_ready(&self.err_buf)) {
                    let marker = self
                        .group
                        .as_deref()
                        .filter(|m| self.pgid.is_none() && self.err_buf.starts_with(m));
                    if let Some(marker) = marker {
                        let text = String::from_utf8_lossy(&self.err_buf[marker.len()..]);
                        if let Some(group) = Group::parse(&text) {
                            self.pgid = Some(group.pgid);
                            if let Some(report) = io.on_group {
                                report(&group);
                            }
                        }
                        self.err_buf.clear();
                    } else {
                        take_line(&mut self.err_buf, Stream::Stderr, out, io);
                    }
                }
                if self.err_done && !self.err_buf.is_empty() {
                    take_line(&mut self.err_buf, Stream::Stderr, out, io);
                }
            }
        }
    }
}

/// The longest line kept whole: a command printing megabytes without a newline is cut
/// into pieces of this size, so memory stays bounded whatever it prints.
pub(super) const LINE_LIMIT: usize = 64 * 1024;

fn line_ready(buf: &[u8]) -> bool {
    buf.ends_with(b"\n") || buf.len() >= LINE_LIMIT
}

/// Like `read_until(b'\n')`, but returns once `LINE_LIMIT` bytes are buffered. Cancel-safe:
/// the only await is `fill_buf`, and bytes move into `buf` right after it, synchronously.
async fn read_line_capped<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    buf: &mut Vec<u8>,
) -> std::io::Result<usize> {
    let mut read = 0;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(read);
        }
        let room = LINE_LIMIT.saturating_sub(buf.len()).max(1);
        let (take, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) if i < room => (i + 1, true),
            _ => (
                available.len().min(room),
                buf.len() + available.len().min(room) >= LINE_LIMIT,
            ),
        };
        buf.extend_from_slice(&available[..take]);
        reader.consume(take);
        read += take;
        if done {
            return Ok(read);
        }
    }
}

/// How many bytes at the end of `b` are the start of a UTF-8 character that goes on
/// past it (0 when the last character is whole).
fn cut_character(b: &[u8]) -> usize {
    for back in 1..=b.len().min(3) {
        let c = b[b.len() - back];
        if c & 0xC0 != 0x80 {
            let len = match c {
                0xF8.. => 1, // never in UTF-8
                0xF0.. => 4,
                0xE0.. => 3,
                0xC0.. => 2,
                _ => 1,
            };
            return if len > back { back } else { 0 };
        }
    }
    0
}

/// Takes `bytes` of `stream` into lines: `line` holds the line begun (up to
/// `LINE_LIMIT`), each line ended goes to `take_line`.
pub(super) fn feed(
    line: &mut Vec<u8>,
    stream: Stream,
    mut bytes: &[u8],
    io: &ExecIo<'_>,
    out: &mut ExecOutcome,
) {
    while !bytes.is_empty() {
        let room = LINE_LIMIT - line.len();
        let window = &bytes[..bytes.len().min(room)];
        match window.iter().position(|&b| b == b'\n') {
            Some(i) => {
                line.extend_from_slice(&window[..=i]);
                take_line(line, stream, out, io);
                bytes = &bytes[i + 1..];
            }
            None => {
                line.extend_from_slice(window);
                bytes = &bytes[window.len()..];
                if line.len() >= LINE_LIMIT {
                    take_line(line, stream, out, io);
                }
            }
        }
    }
}

pub(super) fn take_line(buf: &mut Vec<u8>, stream: Stream, out: &mut ExecOutcome, io: &ExecIo<'_>) {
    let (store, truncated) = match stream {
        Stream::Stdout => (&mut out.stdout, &mut out.stdout_truncated),
        Stream::Stderr => (&mut out.stderr, &mut out.stderr_truncated),
    };
    // A piece without its newline is a line cut at LINE_LIMIT (or the last, unterminated
    // line): the sink is told, so that it can mask a secret that spans the cut. A
    // character the cut splits waits for the next piece: decoded apart, its halves
    // would become two U+FFFD, and a secret around it would no longer be found.
    let continues = !buf.ends_with(b"\n") && buf.len() >= LINE_LIMIT;
    let held = if continues { cut_character(buf) } else { 0 };
    let whole = buf.len() - held;
    let room = CAPTURE_LIMIT.saturating_sub(store.len());
    if whole <= room {
        store.extend_from_slice(&buf[..whole]);
    } else {
        store.extend_from_slice(&buf[..room]);
        *truncated = true;
    }
    let mut line = &buf[..whole];
    if line.ends_with(b"\n") {
        line = &line[..line.len() - 1];
    }
    if line.ends_with(b"\r") {
        line = &line[..line.len() - 1];
    }
    (io.on_line)(stream, &String::from_utf8_lossy(line), continues);
    buf.drain(..whole);
}

#[cfg(test)]
mod tests {
    use super::cut_character;

    #[test]
    fn a_character_cut_at_the_end_is_found() {
        let a = "aÄ€😀".as_bytes();
        assert_eq!(cut_character(a), 0);
        assert_eq!(cut_character(&a[..a.len() - 1]), 3, "3 of 😀's 4 bytes");
        assert_eq!(cut_character(&a[..a.len() - 3]), 1);
        assert_eq!(cut_character(&"aÄ".as_bytes()[..2]), 1);
        assert_eq!(
            cut_character(b"abc\xff"),
            0,
            "not UTF-8: nothing to wait for"
        );
        assert_eq!(cut_character(b""), 0);
    }
}
