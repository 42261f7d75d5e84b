//! Two runs that change the same target must not overlap. Before its first change on a
//! target, a real run takes an exclusive `flock` on `lock` in runbook's own directory for
//! the target user (`$XDG_RUNTIME_DIR/runbook` or `~/.local/state/runbook`, 0700, never a
//! symlink: not /tmp, where another user could hold it forever or plant a link) *on that target*
//! (inside the container for a container), held by a small command whose stdin runbook
//! keeps open until the run ends; if runbook dies, the connection or pipe closes and the
//! lock goes with it. A second run waits up to `--lock-wait` and then fails naming the
//! holder (run id, user, host).

use crate::targets::hold::Holder;
use crate::targets::Target;
use std::cell::RefCell;
use std::ffi::OsString;
use std::time::Duration;

/// Takes the lock (waiting up to $1 seconds), records who holds it next to it, answers
/// `locked` (or `busy <holder>`), then holds it until stdin closes. The lock file is
/// the target's own choice: `$RUNBOOK_LOCK_FILE` in its environment, else `lock` in
/// `runbook_dir`. A failed redirection would end `sh` silently, hence the probe in a subshell.
const LOCK_BODY: &str = include_str!("targets/sh/lock.sh");

pub struct Locks {
    wait: Duration,
    who: RefCell<String>,
    held: RefCell<Vec<(String, Holder)>>,
    /// One mutex per target: parallel items that change the same target take its lock
    /// once, while different targets take theirs at the same time (one host's slow
    /// connect must not hold up the others).
    taking: RefCell<std::collections::HashMap<String, std::rc::Rc<tokio::sync::Mutex<()>>>>,
    /// Target name → lock key (its resolved destination).
    keys: RefCell<std::collections::HashMap<String, String>>,
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
            failed: RefCell::new(std::collections::HashMap::new()),
        }
    }

    /// `--lock-wait` in whole seconds for `flock -w`, rounded up: `0.5s` must still wait
    /// rather than become `flock -n`. (`duration::parse` bounds it, so no overflow.)
    fn wait_secs(&self) -> u64 {
        self.wait.as_secs() + u64::from(self.wait.subsec_nanos() > 0)
    }

    /// What a waiting run is told about this one: `run ID by USER@HOST (pid N)`.
    pub fn set_holder(&self, who: String) {
        *self.who.borrow_mut() = who;
    }

    fn holds(&self, key: &str) -> bool {
        self.held.borrow().iter().any(|(k, _)| k == key)
    }

    /// The lock's key: the target's resolved destination (see `Target::destination`),
    /// looked up once per target name. Plans name targets by it too.
    pub async fn key(&self, target: &Target) -> String {
        let name = target.name();
        if let Some(k) = self.keys.borrow().get(&name) {
            return k.clone();
        }
        let key = target.destination().await;
        self.keys.borrow_mut().insert(name, key.clone());
        key
    }

    /// Takes the lock on `target` unless this run holds it already.
    pub async fn ensure(&self, target: &Target) -> Result<(), String> {
        let key = self.key(target).await;
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
            format!("{}{LOCK_BODY}", include_str!("targets/sh/runbook_dir.sh")).into(),
            "sh".into(),
            secs.into(),
            self.who.borrow().clone().into(),
        ];
        // A Slurm node's lock is its own file: a cluster's nodes often share one home.
        if let Some(n) = target.slurm_node() {
            argv.push(format!("slurm-{}", n.spec.node).into());
        }
        let (holder, answer) = target.hold(argv).await?;
        // Named as the runbook names it, with where that is when it differs.
        let shown = match target.name() {
            name if name == key => name,
            name => format!("{name} ({key})"),
        };
        match answer.as_deref() {
            Ok("locked") => {
                self.held.borrow_mut().push((key, holder));
                Ok(())
            }
            Ok(busy) if busy.starts_with("busy") => {
                holder.release().await;
                let by = busy.trim_start_matches("busy").trim();
                let by = if by.is_empty() { "another run" } else { by };
                Err(format!(
                    "{shown} is locked by {by}; waited {}s. Wait longer with --lock-wait DUR",
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

    pub async fn release_all(&self) {
        let held: Vec<(String, Holder)> = self.held.borrow_mut().drain(..).collect();
        for (_, h) in held {
            h.release().await;
        }
    }
}
