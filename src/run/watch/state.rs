//! What a watcher proposed and when, and where it is in each log it follows, kept across
//! restarts in the state dir: `STATE/watch/NAME.json`, written whole each time (a new
//! file of an unpredictable name, fsynced, renamed over it: `base/fsx.rs`), so a crash
//! leaves the last state whole. One watcher per name at a time: it holds an exclusive
//! lock on `STATE/watch/NAME.lock` for as long as it runs.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The format of the state file.
const VERSION: u32 = 1;
/// Closed proposals kept (the newest): what cooldowns and `--list` read.
const KEEP_CLOSED: usize = 200;

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub version: u32,
    /// Oldest first.
    #[serde(default)]
    pub proposals: Vec<Proposal>,
    /// Each log trigger's place in its log, by trigger name.
    #[serde(default)]
    pub follows: BTreeMap<String, Follow>,
}

/// One plan the watcher made and its fate.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proposal {
    /// `TRIGGER-TARGET-YYYYMMDD-HHMMSS`: the plan's file name without `.json`.
    pub id: String,
    pub trigger: String,
    pub target: String,
    /// What set it off, in words.
    pub why: String,
    /// The one line its notification leads with.
    pub summary: String,
    pub plan: PathBuf,
    pub markdown: PathBuf,
    /// The plan file's sha256 (what approvals sign, and a run's `plan` names).
    pub sha256: String,
    /// RFC 3339, UTC.
    pub created: String,
    pub created_unix: u64,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_unix: Option<u64>,
    /// How it was closed: who rejected it, the run that applied it, why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// The notification URLs that confirmed the proposal (a 2xx).
    #[serde(default)]
    pub notified: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Waiting for a decision: no other plan for its trigger and target meanwhile.
    Pending,
    Applied,
    Rejected,
    Expired,
    /// Applied, and the run failed or was refused: a person looks at it.
    Failed,
}

impl Status {
    pub fn word(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Applied => "applied",
            Status::Rejected => "rejected",
            Status::Expired => "expired",
            Status::Failed => "failed",
        }
    }
}

/// Where a log trigger is in its log.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Follow {
    /// The target the log is on: a follow of another one starts afresh.
    pub target: String,
    pub file: String,
    /// The log's inode when last read; another one is a rotated log, read from its start.
    #[serde(default)]
    pub inode: Option<String>,
    /// The end of the last whole line read.
    pub offset: u64,
    /// Since when (unix seconds) every value read was below the threshold.
    #[serde(default)]
    pub below_since: Option<u64>,
    /// The last value read.
    #[serde(default)]
    pub last: Option<f64>,
}

/// Seconds since the epoch.
pub fn unix(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// The state file and its lock, in the state dir.
pub struct Store {
    pub dir: PathBuf,
    pub path: PathBuf,
    rel: PathBuf,
    /// Held (flock) while the process lives.
    _lock: std::fs::File,
}

impl Store {
    /// Takes the lock of the watcher `name`; an error says who holds it.
    pub fn open(state_dir: &Path, name: &str) -> Result<Store, String> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = state_dir.join("watch");
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot keep the watch state in {}: {e}", dir.display()))?;
        let lock_path = dir.join(format!("{name}.lock"));
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&lock_path)
            .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor this function owns.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let holder = std::fs::read_to_string(&lock_path).unwrap_or_default();
            let holder = holder.trim();
            return Err(format!(
                "another runbook watch of '{name}' runs{} (it holds {}): one watcher per watch file",
                if holder.is_empty() {
                    String::new()
                } else {
                    format!(" (pid {holder})")
                },
                lock_path.display()
            ));
        }
        // Who holds it, for the message above: written only once the lock is ours.
        let _ = lock.set_len(0);
        let _ =
            std::io::Write::write_all(&mut &lock, format!("{}\n", std::process::id()).as_bytes());
        Ok(Store {
            dir: state_dir.to_path_buf(),
            path: dir.join(format!("{name}.json")),
            rel: PathBuf::from("watch").join(format!("{name}.json")),
            _lock: lock,
        })
    }

    /// The state as last saved; an empty one the first time. A file that cannot be read
    /// is an error: starting afresh would forget what was proposed, and propose it again.
    pub fn load(&self) -> Result<State, String> {
        read(&self.path).map(|s| {
            s.unwrap_or(State {
                version: VERSION,
                ..State::default()
            })
        })
    }

    /// Writes `state` whole, readable by its owner only (it names hosts and plans).
    pub fn save(&self, state: &mut State) -> Result<(), String> {
        state.version = VERSION;
        let closed = state
            .proposals
            .iter()
            .filter(|p| p.status != Status::Pending)
            .count();
        if closed > KEEP_CLOSED {
            let mut drop = closed - KEEP_CLOSED;
            state.proposals.retain(|p| {
                if drop > 0 && p.status != Status::Pending {
                    drop -= 1;
                    return false;
                }
                true
            });
        }
        let mut text = serde_json::to_string_pretty(state).expect("the state serializes");
        text.push('\n');
        use crate::base::fsx::{Mode, Replace};
        crate::base::fsx::write(
            &self.dir,
            &self.rel,
            text.as_bytes(),
            Mode::Private,
            Replace::Yes,
            true,
        )
        .map_err(|e| format!("cannot save the watch state: {e}"))
    }
}

/// The state at `path`, `None` when there is none (read by `--list` without the lock).
pub fn read(path: &Path) -> Result<Option<State>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let state: State = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{}: not a watch state ({e}); move it aside to start afresh (what it proposed is then forgotten)",
            path.display()
        )
    })?;
    if state.version != VERSION {
        return Err(format!(
            "{}: a watch state of format {} (this runbook reads {VERSION})",
            path.display(),
            state.version
        ));
    }
    Ok(Some(state))
}

impl State {
    /// The proposal waiting for a decision for this trigger and target, if any.
    pub fn pending(&self, trigger: &str, target: &str) -> Option<&Proposal> {
        self.proposals
            .iter()
            .find(|p| p.status == Status::Pending && p.trigger == trigger && p.target == target)
    }

    /// The last closed proposal for this trigger and target, if it was closed less than
    /// `cooldown` before `now` (unix seconds): no new one until then.
    pub fn cooling(
        &self,
        trigger: &str,
        target: &str,
        cooldown: u64,
        now: u64,
    ) -> Option<&Proposal> {
        self.proposals
            .iter()
            .rev()
            .filter(|p| p.trigger == trigger && p.target == target)
            .filter_map(|p| p.closed_unix.map(|c| (p, c)))
            .find(|(_, closed)| now < closed.saturating_add(cooldown))
            .map(|(p, _)| p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proposal(trigger: &str, status: Status, closed: Option<u64>) -> Proposal {
        Proposal {
            id: format!("{trigger}-x"),
            trigger: trigger.into(),
            target: "gpu1".into(),
            why: String::new(),
            summary: String::new(),
            plan: PathBuf::from("/p.json"),
            markdown: PathBuf::from("/p.md"),
            sha256: String::new(),
            created: String::new(),
            created_unix: 0,
            status,
            closed_unix: closed,
            outcome: None,
            notified: Vec::new(),
        }
    }

    #[test]
    fn saved_whole_and_read_back_and_the_lock_is_one_holders() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), "w").unwrap();
        let mut state = store.load().unwrap();
        assert!(state.proposals.is_empty());
        state.proposals.push(proposal("t", Status::Pending, None));
        state.follows.insert(
            "t".into(),
            Follow {
                target: "gpu1".into(),
                file: "/l".into(),
                offset: 12,
                ..Follow::default()
            },
        );
        store.save(&mut state).unwrap();
        let again = store.load().unwrap();
        assert_eq!(again.proposals.len(), 1);
        assert_eq!(again.follows["t"].offset, 12);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&store.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Another watcher of the same name is refused, naming this one.
        let err = Store::open(dir.path(), "w").err().unwrap();
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(store);
        assert!(Store::open(dir.path(), "w").is_ok());
        std::fs::write(dir.path().join("watch/w.json"), "{").unwrap();
        let store = Store::open(dir.path(), "w").unwrap();
        assert!(store.load().unwrap_err().contains("move it aside"));
    }

    #[test]
    fn pending_and_cooling() {
        let mut s = State::default();
        s.proposals.push(proposal("a", Status::Rejected, Some(100)));
        s.proposals.push(proposal("b", Status::Pending, None));
        assert!(s.pending("b", "gpu1").is_some());
        assert!(s.pending("a", "gpu1").is_none());
        assert!(s.pending("b", "gpu2").is_none());
        assert!(s.cooling("a", "gpu1", 60, 159).is_some());
        assert!(s.cooling("a", "gpu1", 60, 160).is_none());
        assert!(s.cooling("b", "gpu1", 60, 120).is_none());
    }
}
