//! How many commands really run at once, whatever `parallel{limit = …}` asks for.
//!
//! Two bounds, both queues rather than failures:
//! - per SSH connection, its channel limit (below sshd's `MaxSessions`; see `ssh.rs`);
//! - per process, what the open-file limit allows. Every running command holds a few
//!   file descriptors here (its stdout and stderr pipes, its stdin pipe, a pidfd or the
//!   SSH mux socket), so without a bound a wide `parallel` runs out of them and commands
//!   fail with EMFILE ("Too many open files") at random.
//!
//! A command takes its slot before it starts (before `action_started`), so its own
//! `timeout` counts from when it really runs. Waiting for a slot ends at the step's
//! deadline or a signal: queued work then fails at once instead of starting a command
//! only to kill it (10,000 queued commands each forked after a timeout kept the step
//! running long past its deadline).
//!
//! Kill commands (stopping a remote process tree) and lock holders take no slot: a kill
//! must get through while the commands it stops hold every slot, and a lock holder
//! lives for the whole run. The process bound leaves room for one kill per running
//! command, and lock holders are one per changed target.

use super::pump::Stop;
use super::{ExecIo, Target};
use std::sync::OnceLock;
use std::time::Instant;
use tokio::sync::{Semaphore, SemaphorePermit};

/// File descriptors one running command holds in this process: stdin's write end,
/// stdout's and stderr's read ends, and the pidfd (local) or mux socket (SSH).
const FDS_PER_COMMAND: u64 = 4;
/// The soft open-file limit is raised to the hard limit, but not past this: children
/// inherit it, and some programs loop over every possible descriptor (closing them
/// before `exec`), which gets slow with limits in the millions.
const RAISE_TO: u64 = 65_536;
/// Most commands at once however high the limit. Each spawn costs time in proportion to
/// the descriptors open here (the child copies the descriptor table, then closes every
/// close-on-exec entry at `exec`), so past a few hundred running commands, spawning more
/// makes the whole run slower: 10,000 `true`s took 12 s with up to 512 at once and 29 s
/// with 2,468 on a 2-core machine.
const MOST: usize = 1024;
/// Descriptors kept for everything else (stdio, the runtime, the run record, lock
/// holders, connecting, the pipes of a command being spawned): a quarter of the limit,
/// at most this many.
const RESERVE: u64 = 256;

struct Pool {
    slots: Semaphore,
    size: usize,
    nofile: u64,
}

static POOL: OnceLock<Pool> = OnceLock::new();

fn pool() -> &'static Pool {
    POOL.get_or_init(|| {
        let nofile = raise_nofile();
        let size = size_for(nofile);
        tracing::debug!("open-file limit {nofile}: at most {size} commands at once");
        Pool {
            slots: Semaphore::new(size),
            size,
            nofile,
        }
    })
}

/// Raises the soft open-file limit (once, at startup) and sizes the pool from it.
pub fn init() {
    pool();
}

/// How many commands may run at once in this process.
pub fn size() -> usize {
    pool().size
}

/// The open-file limit the pool was sized from.
pub fn nofile() -> u64 {
    pool().nofile
}

/// Commands at once for a soft open-file limit of `nofile`: half of what is left after
/// the reserve, so that every running command can also have a kill command going, and
/// at most `MOST`.
fn size_for(nofile: u64) -> usize {
    let reserve = (nofile / 4).min(RESERVE);
    let n = nofile.saturating_sub(reserve) / (2 * FDS_PER_COMMAND);
    usize::try_from(n).unwrap_or(usize::MAX).clamp(1, MOST)
}

/// Raises the soft `RLIMIT_NOFILE` towards the hard one and returns the soft limit in
/// force afterwards (1024, the usual default, when it cannot be read).
fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    let want = lim.rlim_max.min(RAISE_TO);
    if want > lim.rlim_cur {
        let raised = libc::rlimit {
            rlim_cur: want,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct; failing leaves the limit as it was.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return want;
        }
    }
    lim.rlim_cur
}

/// What a command holds while it runs; dropping it lets the next queued one start.
pub struct Slot<'a> {
    _channel: Option<SemaphorePermit<'a>>,
    _process: SemaphorePermit<'static>,
}

impl Target {
    /// Waits until this target and this process can take one more command. Ends early,
    /// with why, at the step's deadline or a signal.
    pub async fn slot(&self, io: &ExecIo<'_>) -> Result<Slot<'_>, Stop> {
        // The channel first: a command queued behind a busy host must not sit on a
        // process slot that a command for another target could use.
        let channel = match self.ssh_base() {
            Some(host) => Some(wait(host.channels(), io).await?),
            None => None,
        };
        let process = wait(&pool().slots, io).await?;
        Ok(Slot {
            _channel: channel,
            _process: process,
        })
    }

    /// The SSH connection this target's commands run over, if any.
    fn ssh_base(&self) -> Option<&super::ssh::SshHost> {
        match self {
            Target::Local | Target::Slurm(_) => None,
            Target::Ssh(h) => Some(h),
            Target::In { parent, .. } => parent.ssh_base(),
            Target::Replies { inner, .. } | Target::Named { inner, .. } => inner.ssh_base(),
        }
    }
}

/// One permit of `sem`, unless the step's deadline passes or a signal comes first.
async fn wait<'s>(sem: &'s Semaphore, io: &ExecIo<'_>) -> Result<SemaphorePermit<'s>, Stop> {
    let far = Instant::now() + crate::duration::MAX;
    let deadline = tokio::time::sleep_until(io.deadline.unwrap_or(far).into());
    tokio::pin!(deadline);
    loop {
        if io.cancel.count() > io.abort_at {
            return Err(Stop::Interrupted);
        }
        if io.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Stop::Deadline);
        }
        tokio::select! {
            // The semaphores are never closed, so an error cannot happen; treat it as
            // "try again" rather than unwrap.
            permit = sem.acquire() => if let Ok(p) = permit { return Ok(p) },
            _ = &mut deadline => return Err(Stop::Deadline),
            _ = io.cancel.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_open_file_limit() {
        // ulimit -n 256: a quarter reserved, 4 fds per command and as many for its kill.
        assert_eq!(size_for(256), 24);
        assert_eq!(size_for(1024), 96);
        assert_eq!(size_for(4096), 480);
        assert_eq!(size_for(65_536), MOST);
        // Even a tiny limit lets one command run (queued, never refused).
        assert_eq!(size_for(0), 1);
        assert_eq!(size_for(8), 1);
        assert_eq!(size_for(u64::MAX), MOST);
    }
}
