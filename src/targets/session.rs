//! A persistent session: one long-lived shell on a target (one SSH channel for a host,
//! one `pct exec`/`docker exec`/… for a container) that runs `sh/session.sh`, a read-eval
//! loop, so that each command costs a fork and an exec there instead of a new SSH
//! session, a login shell and a container entry. The loop runs under bash where there
//! is one (`sh/session_start.sh`): its job control gives a command its process group
//! as it forks; dash and busybox need a second exec (setsid) per command for that.
//!
//! What a command gets through a session is what it gets through a channel of its own:
//! its argv byte for byte (rendered once by `quote.rs`), its environment (values on the
//! session's stdin, never in an argv) and working directory, its own stdin (from a file
//! in a private directory, never the loop's input), stdout and stderr apart, line by line,
//! its exit status, and a process group of its own, reported before it starts, that a
//! timeout or Ctrl-C kills (`kill_tree`), and nothing else. Its output is framed by lines
//! carrying a token drawn afresh for each command, which the command never sees, so it
//! cannot end its frame early or fake its group. Its streams are its own: FIFOs copied
//! to the channel by a `cat` each, which goes on to the next command's FIFO only once it
//! read this one to its end (nothing holds it open for writing) and is ended otherwise,
//! before the next command begins, so what a process it left running prints later
//! reaches no other command (it writes into a pipe nobody reads).
//!
//! Sessions are pooled per connection (`Pool`): a command takes an idle session for its
//! target or starts one, and gives it back when it ends cleanly. A session that dies
//! takes its command with it ("connection lost"); it is never run again by itself, and
//! the next command starts a new session. Where the target cannot host the loop (no
//! POSIX sh, neither bash nor setsid, no mktemp or mkfifo, a login shell that cannot run
//! `sh -c`), commands
//! there use a channel (or container entry) each, as before, and the run is told once.
//!
//! The bytes of one command's request and of its framed output, which `sh/session.sh`
//! must agree with, are `session/protocol.rs`; this file starts sessions, runs a
//! command on one, and pools them.

use super::pump::{Stop, REPORT_WAIT};
use super::{Container, ExecIo, ExecOutcome, ExecRequest, KillFn, Stream};
use crate::base::quote;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::OsString;
use std::future::Future;
use std::os::unix::ffi::OsStrExt;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

mod protocol;
use protocol::{find, Frame};
pub use protocol::{request, token, Mode};

/// A command's stdin up to this size travels through the session (the loop reads it a
/// byte at a time); a larger one gets a channel of its own.
pub const INLINE_STDIN: usize = 1024 * 1024;
/// How long a new session may take to say it is ready (container tools can be slow).
const START_LIMIT: Duration = Duration::from_secs(20);
/// After a stop and the kill, how long the session gets to report the end of the
/// command before it is given up.
const END_WAIT: Duration = Duration::from_secs(5);
/// At the end of a run, how long an idle session's process gets to end after its input
/// did, and then after TERM (`Session::close`).
const CLOSE_WAIT: Duration = Duration::from_secs(2);
const CLOSE_TERM_WAIT: Duration = Duration::from_secs(5);
/// Sessions open at once in this process, for every target together: each holds a few
/// file descriptors here without holding a command slot (`slots.rs`).
fn most_sessions() -> usize {
    (super::nofile::size() / 2).max(1)
}

/// `RUNBOOK_SESSIONS=off` in runbook's environment: a channel (a container entry) per
/// command, as before sessions (to compare, or to rule them out).
pub fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("RUNBOOK_SESSIONS").is_none_or(|v| v != "off"))
}

thread_local! {
    static OPEN: Cell<usize> = const { Cell::new(0) };
}

/// The argv that starts the loop (for a container, wrapped by the caller).
pub fn loop_argv() -> Vec<OsString> {
    vec![
        "sh".into(),
        "-c".into(),
        crate::base::script::SESSION_START.body.into(),
        "sh".into(),
        crate::base::script::SESSION.body.into(),
    ]
}

/// The process a session's loop runs in, on this machine: a channel of an SSH master,
/// or a local process (`pct exec …` on a Proxmox node runbook runs on).
pub enum Proc {
    Ssh(openssh::Child<Rc<openssh::Session>>),
    Local(tokio::process::Child),
}

struct Reader {
    r: Box<dyn AsyncRead + Unpin>,
    /// Bytes read and not yet taken apart.
    pending: Vec<u8>,
    eof: bool,
}

impl Reader {
    /// One read; false at the end of the stream. Cancel-safe. Straight into `pending`:
    /// a buffer of its own would sit in every command's future, twice (stdout and
    /// stderr are read at once).
    async fn fill(&mut self) -> bool {
        self.pending.reserve(16 * 1024);
        match self.r.read_buf(&mut self.pending).await {
            Ok(0) | Err(_) => {
                self.eof = true;
                false
            }
            Ok(_) => true,
        }
    }
}

pub struct Session {
    /// Turns true when the loop's process (or channel) ended.
    exited: tokio::sync::watch::Receiver<bool>,
    /// The local process's group (a container of this machine), to kill if it hangs.
    local_pgid: Option<u32>,
    stdin: Box<dyn AsyncWrite + Unpin>,
    out: Reader,
    err: Reader,
    /// Set when a command on it saw it die, or left it in a state it cannot go on from.
    broken: bool,
    _open: Open,
}

/// Counts a session in its pool and in the process while it lives.
struct Open(Rc<Cell<usize>>);

impl Open {
    fn new(pool: Rc<Cell<usize>>) -> Open {
        pool.set(pool.get() + 1);
        OPEN.with(|o| o.set(o.get() + 1));
        Open(pool)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
        OPEN.with(|o| o.set(o.get().saturating_sub(1)));
    }
}

/// Why a session did not start.
#[derive(Debug)]
pub enum StartError {
    /// The loop said this target cannot host it, or the shell there did not run it.
    Cannot(String),
    /// The process ended before the loop was ready: what it said on stderr, which names
    /// the reason when a container tool refused to enter (see `Container::refused`).
    Ended(String),
}

impl Session {
    /// Waits until the loop on `proc` says it is ready.
    async fn start(mut proc: Proc, open: Open, io: &ExecIo<'_>) -> Result<Session, StartError> {
        let (stdin, out, err): (
            Box<dyn AsyncWrite + Unpin>,
            Box<dyn AsyncRead + Unpin>,
            Box<dyn AsyncRead + Unpin>,
        ) = match &mut proc {
            Proc::Ssh(c) => (
                Box::new(c.stdin().take().expect("piped")),
                Box::new(c.stdout().take().expect("piped")),
                Box::new(c.stderr().take().expect("piped")),
            ),
            Proc::Local(c) => (
                Box::new(c.stdin.take().expect("piped")),
                Box::new(c.stdout.take().expect("piped")),
                Box::new(c.stderr.take().expect("piped")),
            ),
        };
        let local_pgid = match &proc {
            Proc::Local(c) => c.id(),
            Proc::Ssh(_) => None,
        };
        // The loop may end while a command it started still holds the streams open (its
        // process killed, say): its end is watched apart from them.
        let (tell, exited) = tokio::sync::watch::channel(false);
        tokio::task::spawn_local(async move {
            match proc {
                Proc::Ssh(c) => {
                    let _ = c.wait().await;
                }
                Proc::Local(mut c) => {
                    let _ = c.wait().await;
                }
            }
            let _ = tell.send(true);
        });
        let mut s = Session {
            exited,
            local_pgid,
            stdin,
            out: Reader {
                r: out,
                pending: Vec::new(),
                eof: false,
            },
            err: Reader {
                r: err,
                pending: Vec::new(),
                eof: false,
            },
            broken: false,
            _open: open,
        };
        const READY: &[u8] = b"\x1erunbook-session ";
        let wait = async {
            loop {
                // What a login script prints before the loop starts is skipped (bounded).
                if let Some(at) = find(&s.out.pending, READY) {
                    if let Some(nl) = s.out.pending[at..].iter().position(|&b| b == b'\n') {
                        let line =
                            String::from_utf8_lossy(&s.out.pending[at + READY.len()..at + nl])
                                .into_owned();
                        s.out.pending.drain(..at + nl + 1);
                        return Ok(line);
                    }
                }
                if s.out.pending.len() > 64 * 1024 {
                    return Err(StartError::Cannot(
                        "the shell there printed too much before the loop started".into(),
                    ));
                }
                if s.out.eof {
                    // Read what it said while ending.
                    while !s.err.eof && s.err.pending.len() < 64 * 1024 {
                        s.err.fill().await;
                    }
                    return Err(StartError::Ended(
                        String::from_utf8_lossy(&s.err.pending).into_owned(),
                    ));
                }
                tokio::select! {
                    _ = s.out.fill() => {}
                    _ = s.err.fill(), if !s.err.eof && s.err.pending.len() < 64 * 1024 => {}
                }
            }
        };
        let line = tokio::select! {
            r = tokio::time::timeout(START_LIMIT, wait) => match r {
                Ok(r) => r?,
                Err(_) => return Err(StartError::Cannot(format!("the loop did not start within {}s", START_LIMIT.as_secs()))),
            },
            _ = aborted(io) => return Err(StartError::Cannot("interrupted".into())),
        };
        match line.split_whitespace().next() {
            Some("ready") => {
                // What the loop said on stderr before it was ready is no command's.
                s.err.pending.clear();
                Ok(s)
            }
            Some("cannot") => Err(StartError::Cannot(
                line.trim_start_matches("cannot").trim().to_string(),
            )),
            _ => Err(StartError::Cannot(format!("the loop answered '{line}'"))),
        }
    }

    /// Whether the session still runs: nothing it could have ended with is waiting to be
    /// read. What a finished command's stray background processes printed since is
    /// dropped here (it belongs to no command).
    fn alive(&mut self) -> bool {
        if self.broken || *self.exited.borrow() {
            return false;
        }
        for r in [&mut self.out, &mut self.err] {
            let waker = std::task::Waker::noop();
            let mut cx = std::task::Context::from_waker(waker);
            loop {
                let polled = {
                    let mut fut = std::pin::pin!(r.fill());
                    fut.as_mut().poll(&mut cx)
                };
                match polled {
                    std::task::Poll::Ready(true) => r.pending.clear(),
                    std::task::Poll::Ready(false) => return false,
                    std::task::Poll::Pending => break,
                }
            }
        }
        true
    }

    /// Runs one command. `Ok((outcome, reusable))`; `Err` when the session died while the
    /// command ran (its status is unknown).
    pub async fn exec(
        &mut self,
        request: &[u8],
        token: &str,
        timeout: Option<Duration>,
        io: &ExecIo<'_>,
        kill: Option<&KillFn<'_>>,
    ) -> Result<(ExecOutcome, bool), String> {
        let started = Instant::now();
        let mut out = ExecOutcome::default();
        let mut frame = Frame::new(token);
        let (own, deadline) = super::pump::effective_deadline(timeout, started, io);
        let send = async {
            self.stdin.write_all(request).await?;
            self.stdin.flush().await
        };
        let far = Instant::now() + crate::base::duration::MAX;
        let sleep = tokio::time::sleep_until(deadline.unwrap_or(far).into());
        tokio::pin!(sleep);
        // A request too large for the pipe is written while nothing is read: the loop
        // reads all of it before the command starts and prints nothing meanwhile.
        let mut stop = tokio::select! {
            r = send => match r {
                Ok(()) => None,
                Err(e) => {
                    self.broken = true;
                    return Err(format!("the session ended ({e})"));
                }
            },
            _ = &mut sleep => {
                self.broken = true;
                Some(if own.is_some() && own == deadline { Stop::Timeout } else { Stop::Deadline })
            },
            _ = aborted(io) => {
                self.broken = true;
                Some(Stop::Interrupted)
            }
        };
        if stop.is_none() {
            while !frame.done() {
                if io.cancel.count() > io.abort_at {
                    stop = Some(Stop::Interrupted);
                    break;
                }
                tokio::select! {
                    r = self.step(&mut frame, io, &mut out) => r?,
                    _ = &mut sleep => {
                        stop = Some(if own.is_some() && own == deadline { Stop::Timeout } else { Stop::Deadline });
                        break;
                    }
                    _ = io.cancel.notified() => {}
                }
            }
        }
        let Some(stop) = stop else {
            out.code = frame.status;
            out.duration = started.elapsed();
            return Ok((out, true));
        };
        match stop {
            Stop::Timeout => out.timed_out = true,
            Stop::Deadline => out.deadline_hit = true,
            Stop::Interrupted => out.interrupted = true,
        }
        if self.broken {
            // Stopped while the request was on its way: whether it started is unknown,
            // and the loop may be reading half a request. The session is given up
            // (its channel closes, the loop reads its end); a command it started goes
            // with its group's kill below if it was reported in time.
            out.duration = started.elapsed();
            return Ok((out, false));
        }
        // The group may still be on its way (see `Pump::group_after_stop`).
        let _ = tokio::time::timeout(REPORT_WAIT, async {
            while frame.pgid.is_none() && !frame.done() {
                if self.step(&mut frame, io, &mut out).await.is_err() {
                    break;
                }
            }
        })
        .await;
        if let (Some(kill), Some(pgid)) = (kill, frame.pgid) {
            if !frame.done() {
                kill(pgid).await;
            }
        }
        let ended = tokio::time::timeout(END_WAIT, async {
            while !frame.done() {
                if self.step(&mut frame, io, &mut out).await.is_err() {
                    return false;
                }
            }
            true
        })
        .await
        .unwrap_or(false);
        out.code = if ended { frame.status } else { None };
        out.duration = started.elapsed();
        if !ended {
            self.broken = true;
        }
        Ok((out, ended))
    }

    /// One read on whichever stream has data, taken apart into the command's lines and
    /// its frame. `Err` when the session ended before the command's frame did.
    async fn step(
        &mut self,
        frame: &mut Frame,
        io: &ExecIo<'_>,
        out: &mut ExecOutcome,
    ) -> Result<(), String> {
        let out_open = !frame.out.ended;
        let err_open = !frame.err.ended;
        if *self.exited.borrow() {
            // What it printed before it ended may still be on its way: read on briefly,
            // but not for whatever it started and left holding the streams.
            let rest = tokio::time::timeout(Duration::from_millis(300), async {
                while !(frame.done() || self.out.eof && self.err.eof) {
                    tokio::select! {
                        _ = self.out.fill(), if !self.out.eof && !frame.out.ended => {}
                        _ = self.err.fill(), if !self.err.eof && !frame.err.ended => {}
                        else => break,
                    }
                    frame.take(Stream::Stdout, &mut self.out.pending, io, out);
                    frame.take(Stream::Stderr, &mut self.err.pending, io, out);
                }
            });
            let _ = rest.await;
            if frame.done() {
                return Ok(());
            }
            self.broken = true;
            return Err("the session running the command ended".into());
        }
        let mut exited = self.exited.clone();
        tokio::select! {
            _ = exited.changed() => {}
            more = self.out.fill(), if out_open => {
                frame.take(Stream::Stdout, &mut self.out.pending, io, out);
                if !more && !frame.out.ended {
                    self.broken = true;
                    return Err("the session running the command ended".into());
                }
            }
            more = self.err.fill(), if err_open => {
                frame.take(Stream::Stderr, &mut self.err.pending, io, out);
                if !more && !frame.err.ended {
                    self.broken = true;
                    return Err("the session running the command ended".into());
                }
            }
        }
        Ok(())
    }

    /// Ends the session: its stdin closes (the loop reads its end and exits), then the
    /// process or channel goes.
    pub async fn close(mut self) {
        // Dropped, not shut down: a pipe's end closes only when its descriptor does.
        self.stdin = Box::new(tokio::io::sink());
        let Some(pgid) = self.local_pgid else {
            let _ = tokio::time::timeout(CLOSE_WAIT, self.exited.wait_for(|e| *e)).await;
            return;
        };
        // A local tool that does not end by itself after the end of its input is asked
        // with TERM before KILL: srun forwards TERM to the step's task and then ends the
        // step, where an srun killed outright can leave its step inside a job running
        // (the task, the loop, never reads the end of its input; CI once saw such a step
        // outlive its run). pct exec and the other container tools pass TERM on too.
        for (wait, signal) in [
            (CLOSE_WAIT, libc::SIGTERM),
            (CLOSE_TERM_WAIT, libc::SIGKILL),
        ] {
            if tokio::time::timeout(wait, self.exited.wait_for(|e| *e))
                .await
                .is_ok()
            {
                return;
            }
            // SAFETY: killpg only sends a signal; the group is the tool's own
            // (`local::detach` in `spawn_local`).
            unsafe {
                libc::killpg(pgid as i32, signal);
            }
        }
    }
}

async fn aborted(io: &ExecIo<'_>) {
    loop {
        if io.cancel.count() > io.abort_at {
            return;
        }
        io.cancel.notified().await;
    }
}

/// Why a request cannot go through a session (the command takes a channel of its own).
pub fn unsuited(req: &ExecRequest) -> Option<&'static str> {
    if req.stdin.as_ref().is_some_and(|s| s.len() > INLINE_STDIN) {
        return Some("stdin");
    }
    // The loop's own variables are `_rb_*`: one of the command's own would be unset.
    if req.env.iter().any(|(k, _)| k.starts_with("_rb_")) {
        return Some("env");
    }
    None
}

/// The containers on the way from a connection to where a session runs (none: the
/// connection's own machine).
pub type Chain = Vec<Container>;

/// The sessions of one connection (an SSH master, or this machine for its containers).
pub struct Pool {
    idle: RefCell<HashMap<Chain, Vec<Session>>>,
    open: Rc<Cell<usize>>,
    /// Sessions this connection may have open at once (SSH: its channel limit).
    cap: usize,
    /// Where the loop could not run, and why: commands there take a channel each.
    cannot: RefCell<HashMap<Chain, String>>,
}

impl Pool {
    pub fn new(cap: usize) -> Pool {
        Pool {
            idle: RefCell::new(HashMap::new()),
            open: Rc::new(Cell::new(0)),
            cap,
            cannot: RefCell::new(HashMap::new()),
        }
    }

    pub fn cannot(&self, chain: &Chain) -> bool {
        self.cannot.borrow().contains_key(chain)
    }

    /// Remembers that `chain` cannot host the loop; true the first time (say so then).
    pub fn refuse(&self, chain: &Chain, why: String) -> bool {
        self.cannot
            .borrow_mut()
            .insert(chain.clone(), why)
            .is_none()
    }

    /// An idle session for `chain` that still runs.
    pub fn take(&self, chain: &Chain) -> Option<Session> {
        let mut idle = self.idle.borrow_mut();
        let list = idle.get_mut(chain)?;
        while let Some(mut s) = list.pop() {
            if s.alive() {
                return Some(s);
            }
            // Dropped: its channel or process goes with it.
        }
        None
    }

    /// Room for one more session: below this connection's cap (closing an idle session
    /// of another chain if that is what it takes) and below the process's.
    pub fn room(&self) -> bool {
        if OPEN.with(Cell::get) >= most_sessions() {
            return false;
        }
        if self.open.get() < self.cap {
            return true;
        }
        let mut idle = self.idle.borrow_mut();
        for list in idle.values_mut() {
            if let Some(s) = list.pop() {
                drop(s);
                return self.open.get() < self.cap;
            }
        }
        false
    }

    /// What counts a new session in this pool.
    fn counter(&self) -> Open {
        Open::new(self.open.clone())
    }

    /// Gives a session back after a command that ended cleanly.
    pub fn put(&self, chain: Chain, s: Session) {
        self.idle.borrow_mut().entry(chain).or_default().push(s);
    }

    /// Forgets every session (their connection is gone, or the run ends).
    pub fn clear(&self) -> Vec<Session> {
        self.idle
            .borrow_mut()
            .drain()
            .flat_map(|(_, v)| v)
            .collect()
    }

    /// Closes every idle session, all at once (each waits for its loop to end).
    pub async fn close_all(&self) {
        let closing: Vec<_> = self
            .clear()
            .into_iter()
            .map(|s| tokio::task::spawn_local(s.close()))
            .collect();
        for c in closing {
            let _ = c.await;
        }
    }

    /// Starts a session in `proc` and waits for it to be ready.
    pub async fn start(&self, proc: Proc, io: &ExecIo<'_>) -> Result<Session, StartError> {
        Session::start(proc, self.counter(), io).await
    }
}

thread_local! {
    /// Sessions in containers of this machine (`pct exec` on the node runbook runs on).
    static LOCAL: Rc<Pool> = Rc::new(Pool::new(64));
}

/// The pool of this machine's containers.
pub fn local() -> Rc<Pool> {
    LOCAL.with(Rc::clone)
}

/// Starts the loop as a local process (for a container of this machine).
pub fn spawn_local(argv: &[OsString]) -> Result<Proc, String> {
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // Detached: a Ctrl-C at the terminal reaches runbook, which stops the command in
    // the container itself (the tool must not die of it first); and under bash the
    // loop's commands are job control's groups in the loop's session, so that session
    // must not be runbook's, in the user's terminal.
    super::local::detach(&mut cmd);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", argv[0].to_string_lossy()))?;
    Ok(Proc::Local(child))
}

/// The line an SSH channel runs for `argv`: the login shell `exec`s it, so the loop
/// is the channel's only process there.
pub fn line_of(argv: &[OsString]) -> OsString {
    let mut line = b"exec ".to_vec();
    line.extend_from_slice(quote::join_bytes(argv).as_bytes());
    std::os::unix::ffi::OsStringExt::from_vec(line)
}

#[cfg(test)]
mod tests;
