//! The machine runbook itself runs on.
//!
//! Each command gets its own process group, so that a timeout or Ctrl-C can stop the whole
//! tree it started (a shell's children included), not just the first process.

use super::{ExecIo, ExecOutcome, ExecRequest, Stream, CAPTURE_LIMIT};
use crate::quote;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[derive(Debug)]
pub struct Local;

/// How long a stopped command gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);

enum Stop {
    Timeout,
    Deadline,
    Interrupted,
}

impl Local {
    pub fn render(&self, req: &ExecRequest) -> String {
        quote::render_with(
            &req.argv,
            &req.env,
            req.cwd.as_deref(),
            req.stdin.as_deref(),
        )
    }

    pub async fn exec(&self, req: &ExecRequest, io: &ExecIo<'_>) -> Result<ExecOutcome, String> {
        let started = Instant::now();
        let mut cmd = tokio::process::Command::new(&req.argv[0]);
        cmd.args(&req.argv[1..])
            .envs(req.env.iter().map(|(k, v)| (k, v)))
            .stdin(if req.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(dir) = &req.cwd {
            cmd.current_dir(dir);
        }
        let program = req.argv[0].to_string_lossy().into_owned();
        let mut child = cmd.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound if req.cwd.as_deref().is_some_and(|d| !std::path::Path::new(d).is_dir()) => {
                format!("cannot run '{program}' on local: the working directory '{}' does not exist", req.cwd.as_deref().unwrap_or_default())
            }
            std::io::ErrorKind::NotFound => {
                format!("cannot run '{program}' on local: no such program (is it installed and on PATH?)")
            }
            _ => format!("cannot run '{program}' on local: {e}"),
        })?;
        let pgid = child.id().map(|p| p as i32);

        if let (Some(data), Some(mut stdin)) = (req.stdin.clone(), child.stdin.take()) {
            // Written concurrently so a command that prints before it reads cannot deadlock.
            tokio::task::spawn_local(async move {
                let _ = stdin.write_all(&data).await;
                let _ = stdin.shutdown().await;
            });
        }

        let mut out = ExecOutcome::default();
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut stderr = BufReader::new(child.stderr.take().expect("piped"));
        let (mut out_buf, mut err_buf) = (Vec::new(), Vec::new());
        let (mut out_done, mut err_done) = (false, false);

        let own_deadline = req.timeout.map(|t| started + t);
        let deadline = match (own_deadline, io.deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let far = Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600);
        let sleep = tokio::time::sleep_until(deadline.unwrap_or(far).into());
        tokio::pin!(sleep);

        let mut stop = None;
        while !(out_done && err_done) {
            if io.cancel.count() > io.abort_at {
                stop = Some(Stop::Interrupted);
                break;
            }
            tokio::select! {
                r = stdout.read_until(b'\n', &mut out_buf), if !out_done => {
                    match r {
                        Ok(0) | Err(_) => { out_done = true; flush_partial(&mut out_buf, Stream::Stdout, &mut out, io) }
                        Ok(_) => take_line(&mut out_buf, Stream::Stdout, &mut out, io),
                    }
                }
                r = stderr.read_until(b'\n', &mut err_buf), if !err_done => {
                    match r {
                        Ok(0) | Err(_) => { err_done = true; flush_partial(&mut err_buf, Stream::Stderr, &mut out, io) }
                        Ok(_) => take_line(&mut err_buf, Stream::Stderr, &mut out, io),
                    }
                }
                _ = &mut sleep => {
                    stop = Some(if own_deadline == deadline { Stop::Timeout } else { Stop::Deadline });
                    break;
                }
                _ = io.cancel.notified() => {}
            }
        }

        if let Some(why) = stop {
            if let Some(pgid) = pgid {
                kill_group(pgid, libc::SIGTERM);
                if tokio::time::timeout(KILL_GRACE, child.wait())
                    .await
                    .is_err()
                {
                    kill_group(pgid, libc::SIGKILL);
                }
                // Whatever of the tree ignored TERM, or outlived its leader, goes now.
                kill_group(pgid, libc::SIGKILL);
            }
            match why {
                Stop::Timeout => out.timed_out = true,
                Stop::Deadline => out.deadline_hit = true,
                Stop::Interrupted => out.interrupted = true,
            }
        }
        let status = child
            .wait()
            .await
            .map_err(|e| format!("waiting for '{program}' on local: {e}"))?;
        {
            use std::os::unix::process::ExitStatusExt;
            out.code = status.code();
            out.signal = status.signal();
        }
        out.duration = started.elapsed();
        Ok(out)
    }
}

fn kill_group(pgid: i32, sig: i32) {
    // SAFETY: killpg only sends a signal; a group that no longer exists yields ESRCH.
    unsafe {
        libc::killpg(pgid, sig);
    }
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

fn flush_partial(buf: &mut Vec<u8>, stream: Stream, out: &mut ExecOutcome, io: &ExecIo<'_>) {
    if !buf.is_empty() {
        take_line(buf, stream, out, io);
    }
}
