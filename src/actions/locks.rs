//! Two runs that change the same thing must not overlap. Before its first change on a
//! target, a real run takes its locks in runbook's own directory for the target user
//! (`$XDG_RUNTIME_DIR/runbook` or `~/.local/state/runbook`, 0700, never a symlink: not
//! /tmp, where another user could hold one forever or plant a link) *on that target*
//! (inside the container for a container), held by a small command whose stdin runbook
//! keeps open until the run ends; if runbook dies, the connection or pipe closes and the
//! locks go with it (`targets/sh/lock.sh`: `flock`, or where there is none an atomic
//! `mkdir` whose dead owner makes it stale).
//!
//! What is locked is what a run changes: by default the machine shared (every run) and
//! the runbook exclusive, so two runs of one runbook exclude each other and unrelated
//! runbooks run side by side; `lock = "machine"` in the header takes the machine
//! exclusive (no other run at all); `locks = { "gpu-env" }` adds named locks that
//! several runbooks share. A second run waits up to `--lock-wait` and then fails naming
//! the holder: its run id, user and host, its runbook, and since when.
//!
//! Locks are keyed by the machine, not its name (`targets/identity.rs`): a run that
//! reaches one machine under two names takes its lock once, and two machines with one
//! address take one each.

use crate::base::params::LockScope;
use crate::targets::hold::Holder;
use crate::targets::identity::{Found, Known};
use crate::targets::Target;
use std::cell::RefCell;
use std::ffi::OsString;
use std::time::Duration;

pub struct Locks {
    wait: Duration,
    who: RefCell<String>,
    held: RefCell<Vec<(String, Holder)>>,
    /// One mutex per target: parallel items that change the same target take its lock
    /// once, while different targets take theirs at the same time (one host's slow
    /// connect must not hold up the others).
    taking: RefCell<std::collections::HashMap<String, std::rc::Rc<tokio::sync::Mutex<()>>>>,
    /// Target name → its resolved destination (`key`).
    keys: RefCell<std::collections::HashMap<String, String>>,
    /// Target name → what it is (`identity`): asked once per target per run.
    identities: Known,
    /// The locks each target's holder takes (`lock.sh`'s LOCK words), in order.
    scope: RefCell<Vec<String>>,
    /// The runbook's name, for messages.
    runbook: RefCell<String>,
    /// The last failed attempt per key and when it ended: callers that were already
    /// waiting for that attempt share its failure (several names for one unreachable
    /// machine cost one connect timeout, not one each); a later retry tries again.
    failed: RefCell<std::collections::HashMap<String, (std::time::Instant, String)>>,
}

impl Locks {
    pub fn new(wait: Duration) -> Self {
        Locks {
            wait,
            who: RefCell::new(String::new()),
            held: RefCell::new(Vec::new()),
            taking: RefCell::new(std::collections::HashMap::new()),
            keys: RefCell::new(std::collections::HashMap::new()),
            identities: Known::default(),
            scope: RefCell::new(vec!["s:machine".into()]),
            runbook: RefCell::new(String::new()),
            failed: RefCell::new(std::collections::HashMap::new()),
        }
    }

    /// Keeps what targets are in `known`, shared with the other passes of the run (its
    /// plan pass asks; its real pass takes the answers).
    pub fn sharing(mut self, known: Known) -> Self {
        self.identities = known;
        self
    }

    /// What this run locks on each target it changes: the machine (shared, or exclusive
    /// for `lock = "machine"`), the runbook `name`'s own lock, then the named `locks`.
    pub fn set_scope(&self, name: &str, scope: &LockScope) {
        *self.runbook.borrow_mut() = name.to_string();
        let mut words = Vec::new();
        if scope.machine {
            words.push("x:machine".to_string());
        } else {
            words.push("s:machine".to_string());
            words.push(format!("x:{}", runbook_lock(name)));
        }
        words.extend(scope.named.iter().map(|n| format!("x:lock-{n}")));
        *self.scope.borrow_mut() = words;
    }

    /// `--lock-wait` in whole seconds for `flock -w`, rounded up: `0.5s` must still wait
    /// rather than become `flock -n`. (`duration::parse` bounds it, so no overflow.)
    fn wait_secs(&self) -> u64 {
        self.wait.as_secs() + u64::from(self.wait.subsec_nanos() > 0)
    }

    /// What a waiting run is told about this one: `run ID by USER@HOST (pid N), runbook
    /// "NAME"` (the lock script adds since when).
    pub fn set_holder(&self, who: String) {
        *self.who.borrow_mut() = who;
    }

    fn holds(&self, key: &str) -> bool {
        self.held.borrow().iter().any(|(k, _)| k == key)
    }

    /// The target's resolved destination (see `Target::destination`), looked up once per
    /// target name: plans name targets by it.
    pub async fn key(&self, target: &Target) -> String {
        let name = target.name();
        if let Some(k) = self.keys.borrow().get(&name) {
            return k.clone();
        }
        let key = target.destination().await;
        self.keys.borrow_mut().insert(name, key.clone());
        key
    }

    /// What `target` is (`Target::identity`), asked once per target name per run; `None`
    /// when nothing may be contacted (`runbook test`).
    pub async fn identity(&self, target: &Target) -> Result<Option<Found>, String> {
        let name = target.name();
        if let Some(found) = self.identities.borrow().get(&name) {
            return Ok(found.clone());
        }
        let found = target.identity().await?;
        self.identities.borrow_mut().insert(name, found.clone());
        Ok(found)
    }

    /// What the locks on `target` are keyed by: the machine (see `identity.rs`), else
    /// (nothing contacted) the name.
    async fn lock_key(&self, target: &Target) -> Result<String, String> {
        let key = match self.identity(target).await {
            Ok(Some(found)) => found.lock_key,
            Ok(None) => target.name(),
            Err(e) => {
                return Err(format!(
                    "cannot take the run lock on {}: {e}",
                    target.name()
                ))
            }
        };
        // A Slurm node's locks are files of its own (`take`), whatever machine it is.
        Ok(match target.slurm_node() {
            Some(n) => format!("{key} slurm-{}", n.spec.node),
            None => key,
        })
    }

    /// Takes the lock on `target` unless this run holds it already.
    pub async fn ensure(&self, target: &Target) -> Result<(), String> {
        let key = self.lock_key(target).await?;
        if self.holds(&key) {
            return Ok(());
        }
        let gate = self
            .taking
            .borrow_mut()
            .entry(key.clone())
            .or_default()
            .clone();
        let asked = std::time::Instant::now();
        let _one_at_a_time = gate.lock().await;
        if self.holds(&key) {
            return Ok(());
        }
        if let Some((at, why)) = self.failed.borrow().get(&key) {
            if *at >= asked {
                return Err(why.clone());
            }
        }
        let result = self.take(target, &key).await;
        if let Err(why) = &result {
            self.failed
                .borrow_mut()
                .insert(key.clone(), (std::time::Instant::now(), why.clone()));
        }
        result
    }

    /// One attempt at the lock on `target` (known as `key`).
    async fn take(&self, target: &Target, key: &str) -> Result<(), String> {
        let key = key.to_string();
        let secs = self.wait_secs().to_string();
        let mut argv: Vec<OsString> = vec![
            "sh".into(),
            "-c".into(),
            crate::base::script::LOCK.body.into(),
            "sh".into(),
            secs.into(),
            self.who.borrow().clone().into(),
            // A Slurm node's locks are its own files: a cluster's nodes often share one home.
            target
                .slurm_node()
                .map(|n| format!("slurm-{}", n.spec.node))
                .unwrap_or_default()
                .into(),
        ];
        argv.extend(self.scope.borrow().iter().map(OsString::from));
        let (holder, answer) = target.hold(argv).await?;
        if let Ok("locked") = answer.as_deref() {
            self.held.borrow_mut().push((key, holder));
            return Ok(());
        }
        // Named as the runbook names it, with where that is when it differs: only for the
        // message, and finding where a host is may spawn `ssh -G`.
        let shown = match (target.name(), self.key(target).await) {
            (name, dest) if name == dest => name,
            (name, dest) => format!("{name} ({dest})"),
        };
        match answer.as_deref() {
            Ok(busy) if busy.starts_with("busy ") => {
                holder.release().await;
                let (lock, by) = busy["busy ".len()..]
                    .split_once(' ')
                    .unwrap_or((&busy["busy ".len()..], ""));
                let by = match by.trim() {
                    "" => "another run",
                    by => by,
                };
                Err(format!(
                    "{shown} is locked by {by}: {}; waited {}s. Wait longer with --lock-wait DUR",
                    self.what_is_held(lock),
                    self.wait_secs()
                ))
            }
            Ok(other) => {
                holder.release().await;
                Err(format!(
                    "cannot take the run lock on {shown}: {}",
                    other.trim_start_matches("error: ")
                ))
            }
            Err(stderr) => {
                holder.release().await;
                // A container that would not let the lock command in says why itself.
                if let Some(why) = target.refused(stderr) {
                    return Err(format!("cannot take the run lock on {shown}: {why}"));
                }
                let why = if stderr.is_empty() {
                    "the lock command ended without an answer".to_string()
                } else {
                    stderr.replace('\n', "; ")
                };
                Err(format!("cannot take the run lock on {shown}: {why}"))
            }
        }
    }

    /// What the lock a refusal names stands for, from this run's side.
    fn what_is_held(&self, lock: &str) -> String {
        let runbook = self.runbook.borrow();
        if lock == "machine" {
            return if self.scope.borrow().iter().any(|w| w == "x:machine") {
                format!("runbook \"{runbook}\" locks the whole machine (lock = \"machine\") and another run holds a lock there")
            } else {
                "that run locks the whole machine (lock = \"machine\")".into()
            };
        }
        if let Some(name) = lock.strip_prefix("lock-") {
            return format!("it holds the lock \"{name}\", which runbook \"{runbook}\" takes too");
        }
        format!("runbook \"{runbook}\" runs there already")
    }

    pub async fn release_all(&self) {
        let held: Vec<(String, Holder)> = self.held.borrow_mut().drain(..).collect();
        for (_, h) in held {
            h.release().await;
        }
    }
}

/// The runbook's own lock: `runbook-NAME` for a name fit for a file name, else
/// `runbook-` and a digest of the name.
fn runbook_lock(name: &str) -> String {
    let plain = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if plain {
        return format!("runbook-{name}");
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(name.as_bytes());
    let hex: String = crate::base::hex::hex(&digest[..8]);
    format!("runbook-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_run_locks_follows_its_header() {
        let locks = Locks::new(Duration::ZERO);
        assert_eq!(*locks.scope.borrow(), vec!["s:machine"]);
        locks.set_scope("clean-reset", &LockScope::default());
        assert_eq!(
            *locks.scope.borrow(),
            vec!["s:machine", "x:runbook-clean-reset"]
        );
        locks.set_scope(
            "a name / with spaces",
            &LockScope {
                machine: false,
                named: vec!["gpu-env".into()],
            },
        );
        let words = locks.scope.borrow().clone();
        assert_eq!(words[0], "s:machine");
        assert!(words[1].starts_with("x:runbook-") && !words[1].contains(' '));
        assert_eq!(words[2], "x:lock-gpu-env");
        locks.set_scope(
            "x",
            &LockScope {
                machine: true,
                named: Vec::new(),
            },
        );
        assert_eq!(*locks.scope.borrow(), vec!["x:machine"]);
    }
}
