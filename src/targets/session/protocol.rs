//! What runbook and `sh/session.sh` say to each other about one command: the request
//! the loop reads (`request`: the argv, environment, working directory and stdin, each
//! line of it prefixed so that none can end it early; one line where it can be) and the
//! frame the command's output comes back in (`Frame`: lines that start with the
//! command's token mark its begin, group and end). Apart from `session.rs`, which
//! starts, runs and pools sessions, because this is the part the loop's shell script
//! must agree with byte for byte.

use crate::base::quote;
use crate::targets::pump::{feed, take_line};
use crate::targets::{ExecIo, ExecOutcome, ExecRequest, Group, Stream};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

/// One stream of one command, as its frame is read.
#[derive(Default)]
pub(super) struct Side {
    begun: bool,
    pub(super) ended: bool,
    /// The line being read (up to `LINE_LIMIT`).
    line: Vec<u8>,
}

/// What is known of one command's frame on both streams.
pub(super) struct Frame {
    marker: Vec<u8>,
    pub(super) out: Side,
    pub(super) err: Side,
    pub(super) status: Option<i32>,
    pub(super) pgid: Option<u32>,
}

impl Frame {
    pub(super) fn new(token: &str) -> Frame {
        let mut marker = b"\x1e".to_vec();
        marker.extend_from_slice(token.as_bytes());
        marker.push(b' ');
        Frame {
            marker,
            out: Side::default(),
            err: Side::default(),
            status: None,
            pgid: None,
        }
    }

    pub(super) fn done(&self) -> bool {
        self.out.ended && self.err.ended
    }

    /// Takes apart what `pending` holds: the command's bytes become lines, frame lines
    /// are acted on, and a tail that may be the start of a frame line waits for more.
    pub(super) fn take(
        &mut self,
        stream: Stream,
        pending: &mut Vec<u8>,
        io: &ExecIo<'_>,
        out: &mut ExecOutcome,
    ) {
        loop {
            let side = match stream {
                Stream::Stdout => &self.out,
                Stream::Stderr => &self.err,
            };
            if side.ended {
                // What follows belongs to no command yet (the next one's frame starts with
                // its own marker).
                return;
            }
            let begun = side.begun;
            let (data_end, frame_line) = match find(pending, &self.marker) {
                Some(at) => match pending[at..].iter().position(|&b| b == b'\n') {
                    Some(nl) => (at, Some((at, at + nl))),
                    None => (at, None),
                },
                None => (keep_from(pending, &self.marker), None),
            };
            // Before the command's "begin": another command's stray output. Dropped.
            if begun && data_end > 0 {
                self.data(stream, &pending[..data_end], io, out);
            }
            let Some((at, nl)) = frame_line else {
                pending.drain(..data_end);
                return;
            };
            let text = String::from_utf8_lossy(&pending[at + self.marker.len()..nl]).into_owned();
            pending.drain(..nl + 1);
            let (word, rest) = text.split_once(' ').unwrap_or((&text, ""));
            match word {
                "begin" => self.side(stream).begun = true,
                "pgid" if stream == Stream::Stderr => {
                    if let Some(group) = Group::parse(rest) {
                        self.pgid = Some(group.pgid);
                        if let Some(report) = io.on_group {
                            report(&group);
                        }
                    }
                }
                "end" => {
                    if stream == Stream::Stdout {
                        self.status = rest.trim().parse().ok();
                    }
                    let side = self.side(stream);
                    side.ended = true;
                    if !side.line.is_empty() {
                        let mut line = std::mem::take(&mut side.line);
                        take_line(&mut line, stream, out, io);
                    }
                }
                _ => {}
            }
        }
    }

    fn side(&mut self, stream: Stream) -> &mut Side {
        match stream {
            Stream::Stdout => &mut self.out,
            Stream::Stderr => &mut self.err,
        }
    }

    /// The command's own bytes: each whole line (or `LINE_LIMIT` piece) goes out at once.
    fn data(&mut self, stream: Stream, bytes: &[u8], io: &ExecIo<'_>, out: &mut ExecOutcome) {
        feed(&mut self.side(stream).line, stream, bytes, io, out);
    }
}

pub(super) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Where the part of `pending` that may be the start of `marker` begins (its length
/// when no tail can be). A marker starts with \036, which text rarely holds, so a line
/// that ends in a newline is never held back.
pub(super) fn keep_from(pending: &[u8], marker: &[u8]) -> usize {
    let from = pending.len().saturating_sub(marker.len() - 1);
    (from..pending.len())
        .find(|&i| marker.starts_with(&pending[i..]))
        .unwrap_or(pending.len())
}

/// A token nobody can guess: 128 bits from the kernel, as hex.
pub fn token() -> String {
    let mut bytes = [0u8; 16];
    let mut filled = 0;
    while filled < bytes.len() {
        // SAFETY: getrandom writes at most the given length into the buffer.
        let n = unsafe {
            libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0)
        };
        if n <= 0 {
            // No getrandom (very old kernels): /dev/urandom.
            use std::io::Read;
            std::fs::File::open("/dev/urandom")
                .and_then(|mut f| f.read_exact(&mut bytes[filled..]))
                .expect("no source of randomness (getrandom, /dev/urandom)");
            break;
        }
        filled += n as usize;
    }
    crate::base::hex::hex(&bytes)
}

/// How a command runs in a session: `Group` in a process group of its own, reported
/// (every command of a runbook); `Plain` as is (runbook's own short commands: kills).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Group,
    Plain,
}

/// The request the loop reads for `req`, and its token.
pub fn request(req: &ExecRequest, mode: Mode) -> Result<(Vec<u8>, String), String> {
    for (k, _) in &req.env {
        crate::targets::wrap::check_env_name(k)?;
    }
    let token = token();
    let mut words: Vec<OsString> = vec![
        token.clone().into(),
        match mode {
            Mode::Group => "g",
            Mode::Plain => "p",
        }
        .into(),
        if req.stdin.is_some() { "1" } else { "0" }.into(),
        match &req.cwd {
            Some(d) => format!("+{d}").into(),
            None => "-".into(),
        },
    ];
    for (k, v) in &req.env {
        words.push(k.into());
        words.push(v.clone());
    }
    words.push("--".into());
    words.extend(req.argv.iter().cloned());
    let words = quote::join_bytes(&words);
    let words = words.as_bytes();
    let mut text = Vec::with_capacity(words.len() + 16);
    if words.contains(&b'\n') {
        for line in words.split(|&b| b == b'\n') {
            text.push(b'=');
            text.extend_from_slice(line);
            text.push(b'\n');
        }
        text.extend_from_slice(b".\n");
    } else {
        // One line: the loop reads a byte at a time, and each line is a turn of it.
        text.push(b'!');
        text.extend_from_slice(words);
        text.push(b'\n');
    }
    if let Some(input) = &req.stdin {
        for chunk in input.chunks(4096) {
            text.push(b'=');
            for &b in chunk {
                match b {
                    b'\\' => text.extend_from_slice(b"\\\\"),
                    b'\n' => text.extend_from_slice(b"\\n"),
                    0 => text.extend_from_slice(b"\\0000"),
                    _ => text.push(b),
                }
            }
            text.push(b'\n');
        }
        text.extend_from_slice(b".\n");
    }
    Ok((text, token))
}
