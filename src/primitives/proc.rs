//! Long-running jobs on a target (training, a server being warmed): start one detached
//! from the run (`spawn`), wait for a line in its log (`wait_for`), stop it (`stop`).
//!
//! A job is `setsid CMD </dev/null >>LOG 2>&1 &` started by a small `sh` script: its own
//! session and process group, no file descriptor shared with the command that started
//! it, so that command returns at once, the SSH channel closes, and the job outlives the
//! run. Its pid (and start time, so a reused pid is not mistaken for it) goes to
//! `proc-NAME.pid` in runbook's own directory for the target user (`runbook_dir.sh`:
//! `$XDG_RUNTIME_DIR/runbook` or `~/.local/state/runbook`, 0700, never a symlink), where
//! `stop` finds it. Not /tmp: there another user could plant the file and feed `stop` a
//! pid to kill, or a symlink for root to write through.
//! Liveness reads `/proc` (a zombie is not alive), falling back to `kill -0` elsewhere.

use super::{Cmd, Error, Ran, Result, Step};
use crate::base::script;
use serde::Serialize;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::time::{Duration, Instant};

/// What `proc` remembers between its calls in one run (one Lua VM: a dry-run's and its
/// real run's are apart). Kept by the `proc` table (`lua_api/proc.rs`), not the run's
/// context: nothing else reads it.
#[derive(Debug, Default)]
pub struct Jobs {
    /// Jobs a dry-run planned to stop, by (target, `name:N` or `pid:N`): a later spawn of
    /// the same job plans its relaunch instead of refusing it as still running.
    planned_stops: std::cell::RefCell<std::collections::HashSet<(String, String)>>,
    /// Where each job `spawn` started begins in its log, and the job's name, by (target,
    /// log path): `wait_for` on that log reads from there, and ends when that job does.
    logs: std::cell::RefCell<std::collections::HashMap<(String, String), (u64, String)>>,
}

/// What `proc.spawn` starts.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub argv: Vec<OsString>,
    pub log: String,
    pub cwd: Option<String>,
    pub env: Vec<(String, OsString)>,
    pub name: String,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Spawned {
    pub pid: Option<u32>,
    pub name: String,
    pub log: String,
    pub pid_file: Option<String>,
    /// Bytes in the log before the job started: where its own output begins.
    pub log_offset: Option<u64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub planned: bool,
}

/// The job to stop: by name (its pid file) or by pid (its process group if it leads one).
#[derive(Debug, Clone)]
pub enum Which {
    Name(String),
    Pid(u32),
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Stopped {
    pub pid: Option<u32>,
    pub was_running: bool,
    /// TERM was not enough within the timeout: KILL was sent.
    pub killed: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub planned: bool,
}

#[derive(Debug, Clone)]
pub struct WaitSpec {
    pub file: String,
    pub pattern: regex::Regex,
    /// `None`: no timeout of its own (the step's deadline and Ctrl-C still end it).
    pub timeout: Option<Duration>,
    pub from_start: bool,
    /// Read from this offset (where a job's output begins, from `proc.spawn`).
    pub since: Option<u64>,
    /// The job that writes the file (its name, from `proc.spawn`): once it is gone, no
    /// line will come, and the wait fails at once instead of at its timeout.
    pub job: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Matched {
    pub line: String,
    /// Groups 1…n; `None` for a group that did not take part in the match.
    pub captures: Vec<Option<String>>,
    /// Named groups.
    pub named: Vec<(String, Option<String>)>,
    pub planned: bool,
}

/// A job name: it becomes part of a file name on the target.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "'{name}' is not a valid job name: use 1 to 64 letters, digits, '.', '_' or '-' (not starting with '.')"
        ))
    }
}

/// The name of a job started without one: its program's file name, made name-safe.
pub fn default_name(argv: &[OsString]) -> String {
    let program = argv
        .first()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let base = program.rsplit('/').next().unwrap_or_default();
    let mut name: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    while name.starts_with('.') {
        name.remove(0);
    }
    if name.is_empty() {
        "job".into()
    } else {
        name
    }
}

/// A failed command's message: `WHAT failed (WHY) on TARGET` and the script's last lines.
fn proc_error(step: &Step<'_>, ran: &Ran, what: impl std::fmt::Display) -> Error {
    step.fail(ran.failure(what, Some(&step.target.name()), None))
}

/// Whether the job is alive now: `Some(pid)` with true/false, `None` without a pid file.
async fn probe(step: &Step<'_>, which: &Which, what: &str) -> Result<Option<(u32, bool)>> {
    let (name, pid, label) = match which {
        Which::Name(n) => (n.clone(), String::new(), format!("job {n}")),
        Which::Pid(p) => (String::new(), p.to_string(), format!("pid {p}")),
    };
    let ran = step
        .read(
            Cmd::script(&script::PROC_PROBE, [name, pid]),
            format!("is {label} running?"),
        )
        .await?;
    if ran.planned() {
        return Ok(None);
    }
    if !ran.ok() {
        return Err(proc_error(step, &ran, format!("{what}: checking {label}")));
    }
    Ok(parse_state(&ran.stdout()))
}

fn parse_state(out: &str) -> Option<(u32, bool)> {
    let mut words = out.split_whitespace();
    let state = words.next()?;
    let pid = words.next()?.parse().ok()?;
    match state {
        "running" => Some((pid, true)),
        "stopped" => Some((pid, false)),
        _ => None,
    }
}

/// Starts the job detached; refuses while a job of the same name runs.
pub async fn spawn(step: &Step<'_>, jobs: &Jobs, spec: &SpawnSpec) -> Result<Spawned> {
    check_name(&spec.name).map_err(|e| step.fail(format!("proc.spawn: {e}")))?;
    if spec.argv.is_empty() {
        return Err(step.fail("proc.spawn: cmd is empty"));
    }
    if spec.log.is_empty() {
        return Err(step.fail("proc.spawn: log is empty"));
    }
    let running = probe(step, &Which::Name(spec.name.clone()), "proc.spawn").await?;
    let stopped_in_plan = |pid: u32| {
        let stops = jobs.planned_stops.borrow();
        let target = step.target.name();
        step.dry_run()
            && (stops.contains(&(target.clone(), format!("name:{}", spec.name)))
                || stops.contains(&(target, format!("pid:{pid}"))))
    };
    if let Some((pid, true)) = running.filter(|(pid, _)| !stopped_in_plan(*pid)) {
        return Err(step.fail(format!(
            "proc.spawn: a job named '{}' is already running (pid {pid}); stop it first with proc.stop(t, {{ name = \"{}\" }})",
            spec.name, spec.name
        )));
    }
    let mut args: Vec<OsString> = vec![spec.name.clone().into(), spec.log.clone().into()];
    args.extend(spec.argv.iter().cloned());
    let mut cmd = Cmd::script(&script::PROC_SPAWN, args).timeout(Duration::from_secs(30));
    for (k, v) in &spec.env {
        cmd = cmd.env(k, v);
    }
    if let Some(dir) = &spec.cwd {
        cmd = cmd.cwd(dir);
    }
    // The names only: values may be long, and the command line shows them.
    let env: Vec<&str> = spec.env.iter().map(|(k, _)| k.as_str()).collect();
    let env = match env.as_slice() {
        [] => String::new(),
        names => format!(", env {}", names.join(" ")),
    };
    let cwd = match &spec.cwd {
        Some(dir) => format!("in {dir}, "),
        None => String::new(),
    };
    let summary = format!(
        "start job {} in the background: {} ({cwd}log {}{env})",
        spec.name,
        crate::base::quote::join(&spec.argv),
        spec.log
    );
    let ran = step.change(cmd, summary, false).await?;
    if ran.planned() {
        return Ok(Spawned {
            pid: None,
            name: spec.name.clone(),
            log: spec.log.clone(),
            pid_file: None,
            log_offset: None,
            planned: true,
        });
    }
    if !ran.ok() {
        if let Some(why) = super::needs_from(&ran.stderr(), &step.target.name()) {
            return Err(step.fail(format!(
                "proc.spawn: could not start job '{}': {why}",
                spec.name
            )));
        }
        let what = format!("proc.spawn: starting job '{}'", spec.name);
        return Err(proc_error(step, &ran, what));
    }
    let out = ran.stdout();
    let mut lines = out.lines();
    let pid = lines.next().and_then(|l| l.trim().parse::<u32>().ok());
    let pid_file = lines.next().map(str::to_string);
    let log_offset = lines.next().and_then(|l| l.trim().parse::<u64>().ok());
    if pid.is_none() {
        return Err(step.fail(format!(
            "proc.spawn: job '{}' started but its pid was not reported (output: {out:?})",
            spec.name
        )));
    }
    Ok(Spawned {
        pid,
        name: spec.name.clone(),
        log: spec.log.clone(),
        pid_file,
        log_offset,
        planned: false,
    })
    .inspect(|s| {
        // `wait_for` on this log then reads from where this job's output begins: it sees
        // a line printed at once, and never an earlier run's line in an appended log.
        if let Some(off) = s.log_offset {
            jobs.logs
                .borrow_mut()
                .insert((step.target.name(), s.log.clone()), (off, s.name.clone()));
        }
    })
}

/// TERM the job's process group, wait up to `timeout` (`None`: until it exits), then KILL.
pub async fn stop(
    step: &Step<'_>,
    jobs: &Jobs,
    which: &Which,
    timeout: Option<Duration>,
) -> Result<Stopped> {
    let label = match which {
        Which::Name(n) => format!("job {n}"),
        Which::Pid(p) => format!("pid {p}"),
    };
    let given = match which {
        Which::Pid(p) => Some(*p),
        Which::Name(_) => None,
    };
    let known = match probe(step, which, "proc.stop").await? {
        // Offline dry-run: nothing was looked at; plan the stop as asked.
        None if step.offline() => given,
        None => {
            return Ok(Stopped {
                pid: given,
                ..Stopped::default()
            })
        }
        Some((pid, false)) => {
            if let Which::Name(name) = which {
                forget(step, name, pid).await?;
            }
            return Ok(Stopped {
                pid: Some(pid),
                ..Stopped::default()
            });
        }
        Some((pid, true)) => Some(pid),
    };
    let (name, pid) = match which {
        Which::Name(n) => (n.clone(), String::new()),
        Which::Pid(p) => (String::new(), p.to_string()),
    };
    let ms = match timeout {
        Some(t) => t.as_millis().min(u128::from(u32::MAX)).to_string(),
        None => "-1".to_string(),
    };
    let mut cmd = Cmd::script(&script::PROC_STOP, [name, pid, ms]);
    // Room for the KILL and its own wait after the TERM's; with no timeout the step's
    // deadline and Ctrl-C are what bound the wait.
    cmd.timeout = timeout.map(|t| t + Duration::from_secs(30));
    let running = match (which, known) {
        (Which::Name(_), Some(pid)) => format!(" (pid {pid})"),
        _ => String::new(),
    };
    let summary = match timeout {
        Some(t) => format!(
            "stop {label}{running}: TERM, then KILL after {}",
            crate::base::duration::short(t)
        ),
        None => format!("stop {label}{running}: TERM, and wait for it to exit"),
    };
    let ran = step.change(cmd, summary, false).await?;
    if ran.planned() {
        let key = match which {
            Which::Name(n) => format!("name:{n}"),
            Which::Pid(p) => format!("pid:{}", known.unwrap_or(*p)),
        };
        jobs.planned_stops
            .borrow_mut()
            .insert((step.target.name(), key));
        return Ok(Stopped {
            pid: known,
            was_running: true,
            killed: false,
            planned: true,
        });
    }
    if !ran.ok() {
        return Err(proc_error(
            step,
            &ran,
            format!("proc.stop: stopping {label}"),
        ));
    }
    let out = ran.stdout();
    let mut words = out.split_whitespace();
    let how = words.next().unwrap_or_default();
    let pid = words.next().and_then(|p| p.parse().ok());
    Ok(Stopped {
        pid,
        was_running: matches!(how, "term" | "kill"),
        killed: how == "kill",
        planned: false,
    })
}

/// Removes the pid file of job `name`, which has exited by itself (pid `pid`). The
/// script looks again and leaves a job that runs under that name now alone.
async fn forget(step: &Step<'_>, name: &str, pid: u32) -> Result<()> {
    let cmd = Cmd::script(&script::PROC_FORGET, [name]).timeout(Duration::from_secs(30));
    let summary = format!("remove the pid file of job {name} (pid {pid} has exited)");
    let ran = step.change(cmd, summary, false).await?;
    if ran.planned() || ran.ok() {
        return Ok(());
    }
    Err(proc_error(
        step,
        &ran,
        format!("proc.stop: removing the pid file of job {name}"),
    ))
}

/// Splits a growing log into lines (`\n` or `\r`, so progress bars count), keeping a
/// partial last line for the next chunk and the last few lines for error messages.
#[derive(Debug, Default)]
pub struct Lines {
    pending: Vec<u8>,
    recent: VecDeque<String>,
}

/// A line longer than this is cut and matched as it is.
const MAX_LINE: usize = 1024 * 1024;
const RECENT: usize = 5;

impl Lines {
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for &b in bytes {
            if b == b'\n' || b == b'\r' {
                self.finish(&mut out);
            } else {
                self.pending.push(b);
                if self.pending.len() >= MAX_LINE {
                    self.finish(&mut out);
                }
            }
        }
        out
    }

    fn finish(&mut self, out: &mut Vec<String>) {
        if self.pending.is_empty() {
            return;
        }
        let line = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(line.clone());
        out.push(line);
    }

    /// The unfinished last line as a line of its own: its writer is gone, so nothing
    /// will end it.
    pub fn flush(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        self.finish(&mut out);
        out
    }

    /// The last complete lines, and the unfinished one.
    pub fn recent(&self) -> Vec<String> {
        let mut v: Vec<String> = self.recent.iter().cloned().collect();
        if !self.pending.is_empty() {
            v.push(String::from_utf8_lossy(&self.pending).into_owned());
        }
        v
    }
}

pub fn match_line(re: &regex::Regex, line: &str) -> Option<Matched> {
    let caps = re.captures(line)?;
    let captures = caps
        .iter()
        .skip(1)
        .map(|m| m.map(|m| m.as_str().to_string()))
        .collect();
    let named = re
        .capture_names()
        .flatten()
        .map(|n| (n.to_string(), caps.name(n).map(|m| m.as_str().to_string())))
        .collect();
    Some(Matched {
        line: line.to_string(),
        captures,
        named,
        planned: false,
    })
}

/// Bytes read per poll at most (the rest comes with the next one).
pub const CHUNK: usize = 1024 * 1024;
/// How long one poll waits on the target for the file to grow.
const MAX_POLL_WAIT: u64 = 15;
const POLL_EVERY: Duration = Duration::from_secs(1);
/// Between a poll that read new lines and the next.
const POLL_AGAIN: Duration = Duration::from_millis(100);
const WHO: &str = "proc.wait_for";

/// What one poll of a growing file read.
pub struct Polled {
    /// Where `bytes` start: the offset asked, or 0 when the file was truncated or
    /// replaced since (or, asked for `end`, the file's size).
    pub start: u64,
    pub exists: bool,
    /// The file's inode as the target's `ls -di` gives it; `None` when there is no file
    /// (or an earlier script answered: replies saved before it said the inode).
    pub inode: Option<String>,
    pub bytes: Vec<u8>,
    pub job: JobState,
}

/// What a poll saw of the job that writes the file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JobState {
    /// No job was named: nothing to look at.
    Untracked,
    Up,
    /// Its whole process group has exited (its pid, when its pid file was still there).
    Gone(Option<u32>),
}

fn job_state(words: &mut std::str::SplitWhitespace<'_>) -> JobState {
    match words.next() {
        Some("up") => {
            words.next();
            JobState::Up
        }
        Some("gone") => JobState::Gone(words.next().and_then(|p| p.parse().ok())),
        _ => JobState::Untracked,
    }
}

/// One look at `file` from `offset` (`None`: only its size, `start`), waiting up to
/// `wait` seconds for it to grow, and no longer than the job `job` runs; `was`, the inode
/// an earlier poll gave, has a file replaced since read from its start. `who` names the
/// caller in a failure (`proc.wait_for`).
pub async fn poll(
    step: &Step<'_>,
    file: &str,
    offset: Option<u64>,
    wait: u64,
    job: Option<&str>,
    was: Option<&str>,
    who: &str,
) -> Result<Polled> {
    let off = offset.map_or_else(|| "end".to_string(), |o| o.to_string());
    let mut args = vec![file.to_string(), off, wait.to_string(), CHUNK.to_string()];
    // Only the words asked for: replies saved with fewer still match.
    if job.is_some() || was.is_some() {
        args.push(job.unwrap_or_default().to_string());
    }
    args.extend(was.map(str::to_string));
    let cmd = Cmd::script(&script::PROC_POLL, args).timeout(Duration::from_secs(wait + 30));
    let summary = if offset.is_none() {
        format!("size of {file}")
    } else {
        format!("new lines of {file}")
    };
    let ran = step.read(cmd, summary).await?;
    if !ran.ok() {
        return Err(proc_error(step, &ran, format!("{who}: reading {file}")));
    }
    let out = ran.outcome().map(|o| o.stdout.clone()).unwrap_or_default();
    let (head, bytes) = match out.iter().position(|b| *b == b'\n') {
        Some(i) => (
            String::from_utf8_lossy(&out[..i]).into_owned(),
            out[i + 1..].to_vec(),
        ),
        None => (String::from_utf8_lossy(&out).into_owned(), Vec::new()),
    };
    let mut words = head.split_whitespace();
    let start = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
    let exists = words.next() == Some("1");
    let job = job_state(&mut words);
    let inode = words.next().filter(|w| *w != "-").map(str::to_string);
    Ok(Polled {
        start,
        exists,
        inode,
        bytes,
        job,
    })
}

/// Waits until `until` (or the step's deadline), ending early on Ctrl-C.
async fn pause(step: &Step<'_>, until: Instant) -> Result<()> {
    let ctx = step.ctx;
    let until = ctx.deadline.get().map_or(until, |d| d.min(until));
    ctx.send_reads_from_now();
    loop {
        step.check_stopped()?;
        if Instant::now() >= until {
            return Ok(());
        }
        tokio::select! {
            _ = tokio::time::sleep_until(until.into()) => {}
            _ = ctx.cancel.notified() => {}
        }
    }
}

/// Polls the file about once a second until a new line matches.
pub async fn wait_for(step: &Step<'_>, jobs: &Jobs, spec: &WaitSpec) -> Result<Matched> {
    if step.dry_run() {
        // The job it waits on was not started: nothing to wait for.
        return Ok(Matched {
            planned: true,
            ..Matched::default()
        });
    }
    let started = Instant::now();
    let deadline = spec.timeout.map(|t| started + t);
    let mut lines = Lines::default();
    let spawned = jobs
        .logs
        .borrow()
        .get(&(step.target.name(), spec.file.clone()))
        .cloned();
    let (spawned_at, spawned_job) = spawned.map_or((None, None), |(o, n)| (Some(o), Some(n)));
    let job = spec.job.clone().or(spawned_job);
    let mut offset = match (spec.from_start, spec.since.or(spawned_at)) {
        (true, _) => 0,
        (false, Some(since)) => since,
        (false, None) => {
            poll(step, &spec.file, None, 0, None, None, WHO)
                .await?
                .start
        }
    };
    let mut ever_existed = false;
    loop {
        let poll_started = Instant::now();
        let wait = deadline.map_or(MAX_POLL_WAIT, |d| {
            d.saturating_duration_since(poll_started)
                .as_secs()
                .min(MAX_POLL_WAIT)
        });
        let polled = poll(
            step,
            &spec.file,
            Some(offset),
            wait,
            job.as_deref(),
            None,
            WHO,
        )
        .await?;
        ever_existed |= polled.exists;
        if polled.start < offset {
            // The file was truncated or replaced: read it from the start.
            lines = Lines::default();
        }
        offset = polled.start + polled.bytes.len() as u64;
        for line in lines.push(&polled.bytes) {
            if let Some(m) = match_line(&spec.pattern, &line) {
                return Ok(m);
            }
        }
        // Gone, and the poll read all it wrote (it was seen gone before the file was
        // measured; a full chunk may have more behind it): no line will come.
        if let (JobState::Gone(pid), true) = (polled.job, polled.bytes.len() < CHUNK) {
            if let Some(m) = lines
                .flush()
                .iter()
                .find_map(|l| match_line(&spec.pattern, l))
            {
                return Ok(m);
            }
            let name = job.as_deref().unwrap_or_default();
            let pid = pid.map_or_else(String::new, |p| format!(" (pid {p})"));
            let head = format!(
                "proc.wait_for: job {name}{pid} exited before a line of {} matched /{}/ (after {})",
                spec.file,
                spec.pattern.as_str(),
                crate::base::duration::short(started.elapsed())
            );
            return Err(with_last_lines(step, spec, head, &lines, ever_existed).await);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            let head = format!(
                "proc.wait_for: no line of {} matched /{}/ within {}",
                spec.file,
                spec.pattern.as_str(),
                crate::base::duration::short(spec.timeout.unwrap_or_default())
            );
            return Err(with_last_lines(step, spec, head, &lines, ever_existed).await);
        }
        // A poll that read lines and none matched is followed at once (the next one
        // waits on the target until the file grows): pausing out the second here cost
        // clean-reset about 0.9 s between the training's first lines and its throughput
        // line. A short pause still bounds a chatty log to ten polls a second.
        let every = if polled.bytes.is_empty() {
            POLL_EVERY
        } else {
            POLL_AGAIN
        };
        let next = poll_started + every;
        pause(step, deadline.map_or(next, |d| next.min(d))).await?;
    }
}

/// The failure `head`, with the file's last lines (those the wait read, else its tail).
async fn with_last_lines(
    step: &Step<'_>,
    spec: &WaitSpec,
    head: String,
    lines: &Lines,
    existed: bool,
) -> Error {
    if !existed {
        return step.fail(format!("{head}: the file does not exist"));
    }
    let mut recent = lines.recent();
    let mut intro = "last lines";
    if recent.is_empty() {
        intro = "nothing new was written; the file ends with";
        let cmd = Cmd::new(["tail", "-n", "5", "--", spec.file.as_str()])
            .timeout(Duration::from_secs(30));
        match step.read(cmd, format!("last lines of {}", spec.file)).await {
            Ok(ran) if ran.ok() => recent = ran.stdout().lines().map(str::to_string).collect(),
            Ok(_) => {}
            Err(e) => return e,
        }
    }
    if recent.is_empty() {
        return step.fail(format!("{head}: the file is empty"));
    }
    let mut msg = format!("{head}; {intro}:");
    for l in recent {
        msg.push_str("\n  ");
        msg.push_str(&l);
    }
    step.fail(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `proc_poll.sh` under dash, bash and busybox sh: the size and inode at `end`; the
    /// bytes from an offset; from the start when the file shrank or is another inode
    /// than the one given (rotated); `0 0 - -` for no file (no job named: state `-`).
    #[test]
    fn poll_reads_on_from_an_offset_and_again_from_the_start_of_a_rotated_file() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("train.log");
        std::fs::write(&log, "one\ntwo\n").unwrap();
        use std::os::unix::fs::MetadataExt;
        let inode = std::fs::metadata(&log).unwrap().ino().to_string();
        let file = log.display().to_string();
        for sh in &crate::testing::shells() {
            let poll = |args: &[&str]| -> String {
                let out = sh.command(script::PROC_POLL.body, args).output().unwrap();
                assert!(out.status.success(), "{}: {out:?}", sh.name);
                String::from_utf8_lossy(&out.stdout).into_owned()
            };
            let shell = sh.name;
            assert_eq!(
                poll(&[&file, "end", "0", "100"]),
                format!("8 1 - {inode}\n"),
                "{shell}"
            );
            assert_eq!(
                poll(&[&file, "4", "0", "100"]),
                format!("4 1 - {inode}\ntwo\n"),
                "{shell}"
            );
            assert_eq!(
                poll(&[&file, "4", "0", "100", "", &inode]),
                format!("4 1 - {inode}\ntwo\n"),
                "{shell}"
            );
            assert_eq!(
                poll(&[&file, "4", "0", "100", "", "1"]),
                format!("0 1 - {inode}\none\ntwo\n"),
                "{shell}: another inode"
            );
            assert_eq!(
                poll(&[&file, "20", "0", "100"]),
                format!("0 1 - {inode}\none\ntwo\n"),
                "{shell}: shrank"
            );
            assert_eq!(
                poll(&[&file, "0", "0", "3"]),
                format!("0 1 - {inode}\none"),
                "{shell}: at most MAX bytes"
            );
            let gone = dir.path().join("gone").display().to_string();
            assert_eq!(
                poll(&[&gone, "4", "0", "100", "", &inode]),
                "0 0 - -\n",
                "{shell}"
            );
        }
    }

    /// The probe under dash and under busybox sh (busybox applets only), read back by
    /// `parse_state`: a live job is running, a dead one stopped, a missing name none.
    #[test]
    fn probe_answers_what_parse_state_reads_under_dash_and_busybox() {
        use std::process::Command;
        let home = tempfile::tempdir().unwrap();
        let mut job = Command::new("setsid")
            .args(["sleep", "30"])
            .spawn()
            .unwrap();
        let pid = job.id();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let probe = |sh: &crate::testing::Shell, name: &str, pid: &str| -> String {
            let out = sh
                .command(script::PROC_PROBE.body, &[name, pid])
                .env("HOME", home.path())
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let shells = crate::testing::shells();
        for sh in &shells {
            let shell = sh.name;
            let out = probe(sh, "", &pid.to_string());
            assert_eq!(parse_state(&out), Some((pid, true)), "{shell}: {out:?}");
            let out = probe(sh, "never-started", "");
            assert_eq!(parse_state(&out), None, "{shell}: {out:?}");
        }
        let _ = job.kill();
        let _ = job.wait();
        for sh in &shells {
            let shell = sh.name;
            let out = probe(sh, "", &pid.to_string());
            assert_eq!(parse_state(&out), Some((pid, false)), "{shell}: {out:?}");
        }
    }

    /// Under a PATH of busybox applets only (an Alpine-like target), `stop` kills a whole
    /// group that ignores TERM: the KILL reaches the group, not just its leader.
    #[test]
    fn stop_kills_a_term_ignoring_group_under_busybox() {
        use std::process::Command;
        let dir = crate::testing::busybox_applets();
        let mut job = Command::new("setsid")
            .args(["sh", "-c", "trap '' TERM; sleep 60 & sleep 60; wait"])
            .spawn()
            .unwrap();
        let pid = job.id();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let out = Command::new(dir.path().join("sh"))
            .args([
                "-c",
                script::PROC_STOP.body,
                "sh",
                "",
                &pid.to_string(),
                "300",
            ])
            .env_clear()
            .env("PATH", dir.path())
            .env("HOME", dir.path())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        let _ = job.wait();
        // Live members of the group (a zombie waiting for init to reap it is dead).
        let live = || -> Vec<String> {
            let mut out = Vec::new();
            for e in std::fs::read_dir("/proc").unwrap().flatten() {
                let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                    continue;
                };
                let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
                    continue;
                };
                let f: Vec<&str> = rest.split(' ').collect();
                if f.len() > 2 && f[2] == pid.to_string() && f[0] != "Z" {
                    out.push(e.file_name().to_string_lossy().into_owned());
                }
            }
            out
        };
        let mut left = live();
        for _ in 0..20 {
            if left.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            left = live();
        }
        let left = left.join(" ");
        // Clean up whatever survived before asserting.
        let _ = Command::new("kill")
            .args(["-s", "KILL", "--", &format!("-{pid}")])
            .status();
        assert!(
            said.starts_with("kill "),
            "TERM was not enough, KILL went out: {said:?}"
        );
        assert!(left.is_empty(), "the group survived: {left}");
    }

    #[test]
    fn lines_split_across_chunks_and_carriage_returns() {
        let mut l = Lines::default();
        assert_eq!(
            l.push(b"step 1 21.5 Ktok/s\nstep 2 2"),
            vec!["step 1 21.5 Ktok/s"]
        );
        assert_eq!(
            l.push(b"2.0 Ktok/s\r\nprog 10%\rprog 20%\r"),
            vec!["step 2 22.0 Ktok/s", "prog 10%", "prog 20%"]
        );
        l.push(b"half");
        assert_eq!(l.recent().last().unwrap(), "half");
    }

    #[test]
    fn captures_come_back_as_strings() {
        let re = regex::Regex::new(r"(?P<rate>[0-9.]+) Ktok/s(x)?").unwrap();
        let m = match_line(&re, "step 3 21.5 Ktok/s").unwrap();
        assert_eq!(m.captures, vec![Some("21.5".to_string()), None]);
        assert_eq!(
            m.named,
            vec![("rate".to_string(), Some("21.5".to_string()))]
        );
        assert!(match_line(&re, "loading").is_none());
    }

    #[test]
    fn names() {
        assert!(check_name("train-1.b_2").is_ok());
        for bad in ["", ".x", "a/b", "a b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert_eq!(default_name(&["/opt/venv/bin/python3".into()]), "python3");
        assert_eq!(default_name(&["my tool".into()]), "my_tool");
        assert_eq!(default_name(&[".x".into()]), "x");
        assert_eq!(parse_state("running 12\n"), Some((12, true)));
        assert_eq!(parse_state("stopped 12"), Some((12, false)));
        assert_eq!(parse_state("none"), None);
    }
}
