//! The open-file limit, raised once at startup, and the number of commands this process
//! may run at once because of it (the process bound of `slots.rs`). A leaf: every part
//! of `targets/` that sizes itself from the pool reads it here.

use std::sync::OnceLock;
use tokio::sync::Semaphore;

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
pub fn limit() -> u64 {
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

/// The process-wide slots: one permit per command running at once.
pub(super) fn process_slots() -> &'static Semaphore {
    &pool().slots
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
