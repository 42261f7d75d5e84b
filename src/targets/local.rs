//! The machine runbook itself runs on.
//!
//! Each command gets its own process group, so that a timeout or Ctrl-C can stop the whole
//! tree it started (a shell's children included), not just the first process.

use super::pump::{self, Pump, Stop};
use super::{ExecIo, ExecOutcome, Group, KillFn};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

/// How long a stopped command gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// Process groups of the local commands running now, for the watchdog: when it ends a
/// stuck process, no command may outlive runbook.
static RUNNING: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Keeps a process group in [`RUNNING`] while its command runs.
struct Running(i32);

impl Running {
    fn new(pgid: i32) -> Self {
        RUNNING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pgid);
        Running(pgid)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.0);
    }
}

/// SIGKILLs every local command still running (called from the watchdog's thread).
pub fn kill_all_running() {
    // try_lock: the runtime thread may be the one stuck, holding nothing; never wait.
    if let Ok(groups) = RUNNING.try_lock() {
        for pgid in groups.iter() {
            kill_group(*pgid, libc::SIGKILL);
        }
    }
}

/// What to start: the argv and how to set up its process.
pub struct Spawn<'a> {
    pub argv: &'a [OsString],
    pub env: &'a [(String, OsString)],
    pub cwd: Option<&'a str>,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Option<Duration>,
    /// How the command's wrapper reports the group it started elsewhere (a container, a
    /// Slurm step): the start of that stderr line (`pump::PGID_MARKER`, with the launch's
    /// token for Slurm). `None` for a command that runs here as it is: a line of its own
    /// that looks like a report is only its output.
    pub group: Option<Vec<u8>>,
}

/// Runs a local process. `kill_remote` stops the tree the process started elsewhere (in a
/// container) before the local group is killed.
pub async fn run(
    spawn: Spawn<'_>,
    io: &ExecIo<'_>,
    kill_remote: Option<&KillFn<'_>>,
) -> Result<ExecOutcome, String> {
    let started = Instant::now();
    let argv = spawn.argv;
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .envs(spawn.env.iter().map(|(k, v)| (k, v)))
        .stdin(if spawn.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    detach(&mut cmd);
    if let Some(dir) = spawn.cwd {
        cmd.current_dir(dir);
    }
    let program = argv[0].to_string_lossy().into_owned();
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound
            if spawn.cwd.is_some_and(|d| !std::path::Path::new(d).is_dir()) =>
        {
            format!(
                "cannot run '{program}' on local: the working directory '{}' does not exist",
                spawn.cwd.unwrap_or_default()
            )
        }
        std::io::ErrorKind::NotFound => {
            format!(
                "cannot run '{program}' on local: no such program (is it installed and on PATH?)"
            )
        }
        _ if e.raw_os_error() == Some(libc::EMFILE) => format!(
            "cannot run '{program}' on local: {e}; this process may open {} files and runs at most {} commands at once",
            super::nofile::limit(),
            super::nofile::size()
        ),
        _ => format!("cannot run '{program}' on local: {e}"),
    })?;
    let pgid = child.id().map(|p| p as i32);
    let _running = pgid.map(Running::new);
    // A command wrapped for elsewhere (a container) reports its own group through the
    // pump; a plain local command's group is the one made here.
    if let (None, Some(report), Some(pid)) = (kill_remote, io.on_group, child.id()) {
        report(&own_group(pid));
    }

    if let (Some(data), Some(mut stdin)) = (spawn.stdin, child.stdin.take()) {
        // Written concurrently so a command that prints before it reads cannot deadlock.
        tokio::task::spawn_local(async move {
            let _ = stdin.write_all(&data).await;
            let _ = stdin.shutdown().await;
        });
    }

    let mut out = ExecOutcome::default();
    let (own, deadline) = pump::effective_deadline(spawn.timeout, started, io);
    let mut pump = Pump::new(
        child.stdout.take().expect("piped"),
        child.stderr.take().expect("piped"),
        spawn.group,
    );
    if let Some(stop) = pump.run(own, deadline, io, &mut out).await {
        if let Some(kill) = kill_remote {
            if let Some(remote) = pump.group_after_stop(io, &mut out, pump::REPORT_WAIT).await {
                kill(remote).await;
            }
        }
        if let Some(pgid) = pgid {
            kill_group(pgid, libc::SIGTERM);
            // Keep reading while it dies: closing its pipes now would kill it with
            // SIGPIPE before its own cleanup (traps) could run.
            let dying = async {
                let _ = tokio::join!(child.wait(), pump.drain(io, &mut out));
            };
            if tokio::time::timeout(KILL_GRACE, dying).await.is_err() {
                kill_group(pgid, libc::SIGKILL);
            }
            // Whatever of the tree ignored TERM, or outlived its leader, goes now.
            kill_group(pgid, libc::SIGKILL);
        }
        match stop {
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

/// The group [`detach`] made for a child: its pid, with its start time and the
/// boot id, read here (no process started) so a later run can tell it from a reused pid.
fn own_group(pid: u32) -> Group {
    static BOOT_ID: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let boot_id = BOOT_ID.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|b| b.trim().to_string())
    });
    // The child cannot have been reaped yet (nobody waited for it), so its stat is there
    // even if it already exited. One read: the line is a few hundred bytes, and
    // `read_to_string` would read a /proc file (size 0) in several.
    let mut buf = [0u8; 1024];
    let start_time = std::fs::File::open(format!("/proc/{pid}/stat"))
        .and_then(|mut f| std::io::Read::read(&mut f, &mut buf))
        .ok()
        .and_then(|n| super::start_time_of(&String::from_utf8_lossy(&buf[..n])));
    Group {
        pgid: pid,
        start_time,
        boot_id: boot_id.clone(),
    }
}

/// Starts `cmd`'s process in a process group of its own (its pid), which a timeout or
/// Ctrl-C kills whole without touching runbook, and without a controlling terminal, as
/// over SSH. With runbook in a terminal, the group would be a background one of it, and
/// a command that reads /dev/tty (a password prompt) would stop there (SIGTTIN) until its
/// timeout, so it gets a session of its own (setsid), where it fails at once. Without a
/// terminal (CI, cron, a pipe) a group is enough: std then starts it with posix_spawn,
/// where `pre_exec` makes it fork, 0.3 ms more per command (measured: 1.1 against 1.4 ms
/// for a local `true`).
pub(super) fn detach(cmd: &mut tokio::process::Command) {
    if !has_terminal() {
        cmd.process_group(0);
        return;
    }
    // SAFETY: setsid is async-signal-safe, and it is all the child does before exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Whether runbook has a controlling terminal (opening /dev/tty fails without one).
fn has_terminal() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| std::fs::File::open("/dev/tty").is_ok())
}

fn kill_group(pgid: i32, sig: i32) {
    // SAFETY: killpg only sends a signal; a group that no longer exists yields ESRCH.
    unsafe {
        libc::killpg(pgid, sig);
    }
}
