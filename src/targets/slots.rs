//! How many commands really run at once, whatever `parallel{limit = …}` asks for.
//!
//! Two bounds, both queues rather than failures:
//! - per SSH connection, its channel limit (below sshd's `MaxSessions`; see `ssh.rs`);
//! - per process, what the open-file limit allows. Every running command holds a few
//!   file descriptors here (its stdout and stderr pipes, its stdin pipe, a pidfd or the
//!   SSH mux socket), so without a bound a wide `parallel` runs out of them and commands
//!   fail with EMFILE ("Too many open files") at random (the pool: `nofile.rs`).
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

use super::nofile;
use super::pump::Stop;
use super::{ExecIo, Target};
use std::time::Instant;
use tokio::sync::{Semaphore, SemaphorePermit};

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
        let process = wait(nofile::process_slots(), io).await?;
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
    let far = Instant::now() + crate::base::duration::MAX;
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
