//! Commands that outlive the connection that started them (`detach = true`, and by
//! default a command whose timeout is over 5 minutes).
//!
//! A long step (a venv build, a 20-minute warm-up) on an ordinary channel dies with it:
//! an sshd restart, a network blip or a laptop asleep fails the step and leaves the
//! command's fate unknown. A detached command runs on the target under a supervisor
//! (`sh/detach_start.sh`: a background subshell, the command in a session of its own,
//! its output in files and its exit status written to a file, all in runbook's 0700
//! directory there). runbook then only *reads*: each poll (`sh/detach_poll.sh`) is a
//! short command that sends what the command wrote past the bytes already read and,
//! once it ended and everything was read, its status. A poll that dies with the
//! connection is simply sent again, from the same offsets, once runbook has reconnected
//! (with backoff): nothing is shown twice, nothing is lost, and the command runs once.
//!
//! Starting is safe to repeat too: the job's id is chosen before it starts, and a
//! second start of the same id finds its directory and follows it (`exists`). That is
//! also how `--resume` reattaches to a command a killed run left running: the record
//! names the job (`action_detached`), and the resumed run starts it again by that id.
//!
//! A timeout or Ctrl-C stops the command's whole process group, as for any command
//! (`sh/detach_end.sh stop`).

use super::pump::{self, Stop};
use super::{wrap, ExecIo, ExecOutcome, ExecRequest, Group, Stream, Target, TargetError};
use crate::base::script::{self, Script};
use std::ffi::OsString;
use std::time::{Duration, Instant};

/// What a detached command is known by: its job id on the target (hex, chosen before it
/// starts), and the run and step that started it, for `runbook ps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detach {
    pub job: String,
    pub run: String,
    pub step: String,
}

/// Commands whose timeout is longer than this are detached unless told otherwise.
pub const BY_DEFAULT_OVER: Duration = Duration::from_secs(5 * 60);

/// How long a poll waits on the target for something new before it answers anyway.
const POLL_WAIT_S: u64 = 2;

/// How long a poll may take beyond its wait before it counts as lost.
const POLL_GRACE_S: u64 = 30;

/// How long runbook goes on trying to reach a target again before it gives up on
/// following the command (which goes on running there: `runbook ps` lists it).
const RECONNECT_FOR: Duration = Duration::from_secs(15 * 60);

/// What one poll said.
#[derive(Debug, PartialEq, Eq)]
struct Poll<'a> {
    out: &'a [u8],
    err: &'a [u8],
    state: State,
}

#[derive(Debug, PartialEq, Eq)]
enum State {
    Running,
    Exited(i32),
    /// Gone without an exit status: its supervisor was killed.
    Lost,
}

/// Reads a poll's stdout: `NOUT NERR STATE\n`, then exactly NOUT + NERR bytes. `None`
/// for anything else (a poll cut short): it is sent again from the same offsets.
fn parse_poll(stdout: &[u8]) -> Option<Poll<'_>> {
    let nl = stdout.iter().position(|&b| b == b'\n')?;
    let head = std::str::from_utf8(&stdout[..nl]).ok()?;
    let mut words = head.split(' ');
    let n_out: usize = words.next()?.parse().ok()?;
    let n_err: usize = words.next()?.parse().ok()?;
    let state = match (words.next()?, words.next()) {
        ("run", None) => State::Running,
        ("lost", None) => State::Lost,
        ("exit", Some(code)) => State::Exited(code.parse().ok()?),
        _ => return None,
    };
    let body = &stdout[nl + 1..];
    if words.next().is_some() || body.len() != n_out + n_err {
        return None;
    }
    Some(Poll {
        out: &body[..n_out],
        err: &body[n_out..],
        state,
    })
}

/// `sh -c BODY sh ARGS…`: one of runbook's scripts, as an argv.
fn script_argv(s: &Script, args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec!["sh".into(), "-c".into(), s.body.into(), "sh".into()];
    argv.extend(args);
    argv
}

/// Why following stopped before the command ended.
enum Halt {
    Stop(Stop),
    /// The target could not be reached again within `RECONNECT_FOR` (or the deadline).
    Unreachable(TargetError),
}

/// Reconnection, with backoff: how many times the connection went, and how long the
/// current outage has lasted.
#[derive(Default)]
struct Outage {
    since: Option<Instant>,
    times: u32,
    tries: u32,
}

impl Outage {
    /// After a failed attempt: waits before the next one (0.5 s doubling to 10 s), or
    /// says why not to try again.
    async fn wait(
        &mut self,
        why: TargetError,
        io: &ExecIo<'_>,
        own: Option<Instant>,
        deadline: Option<Instant>,
    ) -> Result<(), Halt> {
        let since = *self.since.get_or_insert_with(|| {
            self.times += 1;
            Instant::now()
        });
        if since.elapsed() >= RECONNECT_FOR {
            return Err(Halt::Unreachable(why));
        }
        let pause =
            Duration::from_millis(500 * (1u64 << self.tries.min(5))).min(Duration::from_secs(10));
        self.tries += 1;
        let until = Instant::now() + pause;
        let until = deadline.map_or(until, |d| d.min(until));
        let sleep = tokio::time::sleep_until(until.into());
        tokio::pin!(sleep);
        loop {
            if io.cancel.count() > io.abort_at {
                return Err(Halt::Stop(Stop::Interrupted));
            }
            if let Some(d) = deadline {
                if Instant::now() >= d {
                    return Err(Halt::Stop(if own == Some(d) {
                        Stop::Timeout
                    } else {
                        Stop::Deadline
                    }));
                }
            }
            tokio::select! {
                _ = &mut sleep => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        continue;
                    }
                    return Ok(());
                }
                _ = io.cancel.notified() => {}
            }
        }
    }

    fn over(&mut self) {
        self.since = None;
        self.tries = 0;
    }
}

/// Runs `req` detached as `d` on `t` (see the module's comment).
pub(super) async fn run(
    t: &Target,
    req: &ExecRequest,
    d: &Detach,
    io: &ExecIo<'_>,
) -> Result<ExecOutcome, TargetError> {
    let started = Instant::now();
    let (own, deadline) = pump::effective_deadline(req.timeout, started, io);
    let (argv, stdin) = wrap::env_and_cwd(req)?;
    let mut args: Vec<OsString> = vec![
        d.job.clone().into(),
        d.run.clone().into(),
        d.step.clone().into(),
    ];
    args.extend(argv);
    let start = ExecRequest {
        argv: script_argv(&script::DETACH_START, args),
        stdin,
        timeout: Some(Duration::from_secs(60)),
        ..Default::default()
    };
    let quiet = |_: Stream, _: &str, _: bool| {};
    let sub = ExecIo {
        on_line: &quiet,
        deadline,
        cancel: io.cancel,
        abort_at: io.abort_at,
        on_group: None,
    };
    let mut outage = Outage::default();
    let mut out = ExecOutcome::default();
    let stopped = |out: &mut ExecOutcome, stop: Stop| match stop {
        Stop::Timeout => out.timed_out = true,
        Stop::Deadline => out.deadline_hit = true,
        Stop::Interrupted => out.interrupted = true,
    };
    // Started (or found started), whatever the connection does meanwhile.
    let group = loop {
        let tried = Box::pin(t.run_here(&start, &sub)).await;
        let why = match tried {
            // No answer in time over a link that hangs: starting again is safe (the job
            // id is the test-and-set).
            Ok(o) if o.timed_out && !o.interrupted && !o.deadline_hit => {
                TargetError::ConnectionLost(format!(
                    "the start of the detached command on {} got no answer within 60 s",
                    t.name()
                ))
            }
            Ok(o) if o.interrupted || o.deadline_hit => {
                // Stopped while it started: whatever did start is stopped too.
                end(t, d, "stop").await;
                stopped(&mut out, halt_of(&o, own, deadline));
                out.duration = started.elapsed();
                return Ok(out);
            }
            Ok(o) if o.code == Some(0) => {
                let said = String::from_utf8_lossy(&o.stdout);
                let group = said
                    .strip_prefix("started ")
                    .or_else(|| said.strip_prefix("exists "))
                    .and_then(Group::parse);
                match group {
                    Some(g) => break g,
                    None => {
                        return Err(format!(
                            "cannot start the detached command on {}: its supervisor said {:?}",
                            t.name(),
                            said.trim()
                        )
                        .into())
                    }
                }
            }
            // The script itself refused (no setsid, no private directory): final.
            Ok(o) if o.code.is_some_and(|c| c != 255) => {
                return Err(format!(
                    "cannot start the detached command on {}: {}",
                    t.name(),
                    super::failure::tail(String::from_utf8_lossy(&o.stderr).trim(), 3).trim()
                )
                .into())
            }
            Ok(o) => TargetError::ConnectionLost(format!(
                "the start of the detached command on {} ended {}",
                t.name(),
                o.why(None)
            )),
            Err(e) => e,
        };
        if let Err(halt) = outage.wait(why, io, own, deadline).await {
            return finish_halted(t, d, halt, out, started, &outage, &stopped).await;
        }
    };
    outage.over();
    if let Some(on_group) = io.on_group {
        on_group(&group);
    }
    let (mut line_out, mut line_err) = (Vec::new(), Vec::new());
    let (mut off_out, mut off_err) = (0u64, 0u64);
    loop {
        let poll = ExecRequest {
            argv: script_argv(
                &script::DETACH_POLL,
                [
                    d.job.clone().into(),
                    off_out.to_string().into(),
                    off_err.to_string().into(),
                    POLL_WAIT_S.to_string().into(),
                ],
            ),
            timeout: Some(Duration::from_secs(POLL_WAIT_S + POLL_GRACE_S)),
            ..Default::default()
        };
        let polled = Box::pin(t.run_here(&poll, &sub)).await;
        let why = match polled {
            // A poll that hangs (a link down, its TCP connection not given up yet) is
            // stopped by its own timeout and sent again.
            Ok(o) if o.timed_out && !o.interrupted && !o.deadline_hit => {
                TargetError::ConnectionLost(format!(
                    "a poll of the detached command on {} got no answer within {} s",
                    t.name(),
                    POLL_WAIT_S + POLL_GRACE_S
                ))
            }
            Ok(o) if o.interrupted || o.deadline_hit => {
                let halt = Halt::Stop(halt_of(&o, own, deadline));
                return finish_halted(t, d, halt, out, started, &outage, &stopped).await;
            }
            Ok(o) if o.code == Some(0) => match parse_poll(&o.stdout) {
                Some(p) => {
                    outage.over();
                    pump::feed(&mut line_out, Stream::Stdout, p.out, io, &mut out);
                    pump::feed(&mut line_err, Stream::Stderr, p.err, io, &mut out);
                    off_out += p.out.len() as u64;
                    off_err += p.err.len() as u64;
                    match p.state {
                        State::Running => {
                            if let Some(stop) = due(io, own, deadline) {
                                let halt = Halt::Stop(stop);
                                return finish_halted(t, d, halt, out, started, &outage, &stopped)
                                    .await;
                            }
                            continue;
                        }
                        State::Exited(code) => {
                            flush(&mut line_out, Stream::Stdout, io, &mut out);
                            flush(&mut line_err, Stream::Stderr, io, &mut out);
                            end(t, d, "reap").await;
                            out.code = Some(code);
                            out.duration = started.elapsed();
                            out.notice = reconnected(t, &outage);
                            return Ok(out);
                        }
                        State::Lost => {
                            return Err(format!(
                                "the detached command on {} is gone without an exit status (its supervisor, job {} in runbook's directory there, was killed)",
                                t.name(),
                                d.job
                            )
                            .into())
                        }
                    }
                }
                None => TargetError::ConnectionLost(format!(
                    "a poll of the detached command on {} was cut short",
                    t.name()
                )),
            },
            Ok(o) if o.code == Some(3) => {
                return Err(format!(
                    "the detached command on {} is gone: its job directory (job {}) was removed (`runbook stop`?)",
                    t.name(),
                    d.job
                )
                .into())
            }
            Ok(o) if o.code.is_some_and(|c| c != 255) => {
                return Err(format!(
                    "cannot follow the detached command on {}: {}",
                    t.name(),
                    super::failure::tail(String::from_utf8_lossy(&o.stderr).trim(), 3).trim()
                )
                .into())
            }
            Ok(o) => TargetError::ConnectionLost(format!(
                "a poll of the detached command on {} ended {}",
                t.name(),
                o.why(None)
            )),
            Err(e) => e,
        };
        if let Err(halt) = outage.wait(why, io, own, deadline).await {
            return finish_halted(t, d, halt, out, started, &outage, &stopped).await;
        }
    }
}

/// What stopped a sub-command that was stopped.
fn halt_of(o: &ExecOutcome, own: Option<Instant>, deadline: Option<Instant>) -> Stop {
    if o.interrupted {
        Stop::Interrupted
    } else if own.is_some() && own == deadline {
        Stop::Timeout
    } else {
        Stop::Deadline
    }
}

/// Whether following must stop now: Ctrl-C, the command's timeout, the deadline.
fn due(io: &ExecIo<'_>, own: Option<Instant>, deadline: Option<Instant>) -> Option<Stop> {
    if io.cancel.count() > io.abort_at {
        return Some(Stop::Interrupted);
    }
    let d = deadline?;
    (Instant::now() >= d).then(|| {
        if own == Some(d) {
            Stop::Timeout
        } else {
            Stop::Deadline
        }
    })
}

/// Ends following: a stop stops the command's whole group; a target that cannot be
/// reached again is an error that says the command may still run there.
async fn finish_halted(
    t: &Target,
    d: &Detach,
    halt: Halt,
    mut out: ExecOutcome,
    started: Instant,
    outage: &Outage,
    stopped: &dyn Fn(&mut ExecOutcome, Stop),
) -> Result<ExecOutcome, TargetError> {
    match halt {
        Halt::Stop(stop) => {
            end(t, d, "stop").await;
            stopped(&mut out, stop);
            out.duration = started.elapsed();
            out.notice = reconnected(t, outage);
            Ok(out)
        }
        Halt::Unreachable(why) => Err(TargetError::ConnectionLost(format!(
            "{why}; gave up reaching {} again after {} s: the detached command may still run there (job {}: `runbook ps` lists it, `runbook run --resume` follows it again, `runbook stop RUN` ends it)",
            t.name(),
            RECONNECT_FOR.as_secs(),
            d.job
        ))),
    }
}

fn reconnected(t: &Target, outage: &Outage) -> Option<String> {
    (outage.times > 0).then(|| {
        format!(
            "the connection to {} went away {} time(s) while the detached command ran; runbook reconnected and followed it to its end",
            t.name(),
            outage.times
        )
    })
}

/// `detach_end.sh JOB MODE` (stop or reap): best effort; a job left behind is listed by
/// `runbook ps`.
async fn end(t: &Target, d: &Detach, mode: &str) {
    let argv = script_argv(&script::DETACH_END, [d.job.clone().into(), mode.into()]);
    if let Err(e) = t.run_plain(argv).await {
        tracing::warn!(
            "could not {mode} detached job {} on {}: {e}",
            d.job,
            t.name()
        );
    }
}

/// The rest of a line the command left without its newline.
fn flush(line: &mut Vec<u8>, stream: Stream, io: &ExecIo<'_>, out: &mut ExecOutcome) {
    if !line.is_empty() {
        pump::take_line(line, stream, out, io);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poll_is_read_only_when_it_is_whole() {
        let p = parse_poll(b"3 2 run\nab\nc\n").unwrap();
        assert_eq!(
            (p.out, p.err, p.state),
            (&b"ab\n"[..], &b"c\n"[..], State::Running)
        );
        let p = parse_poll(b"0 0 exit 143\n").unwrap();
        assert_eq!(p.state, State::Exited(143));
        assert_eq!(parse_poll(b"0 0 lost\n").unwrap().state, State::Lost);
        // Cut short, too long, or not a poll at all: sent again.
        assert!(parse_poll(b"3 2 run\nab\n").is_none());
        assert!(parse_poll(b"1 0 run\nab").is_none());
        assert!(parse_poll(b"3 2 run").is_none());
        assert!(parse_poll(b"x 2 run\n").is_none());
        assert!(parse_poll(b"0 0 exit\n").is_none());
        assert!(parse_poll(b"0 0 exit 1 2\n").is_none());
    }
}
