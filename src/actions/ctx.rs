//! The state one run (or one load, for `check`/`show`/`list`) shares between the engine
//! and the Lua API. It lives in the Lua VM's app data; callbacks fetch it per call.

use crate::actions::events::Bus;
use crate::base::abort::Why;
use crate::base::cancel::Cancel;
pub use crate::base::params::Header;
use crate::base::params::Missing;
use crate::targets::registry::{Registry, RemoteSettings};
use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `check`, `show`, `list`: only the declarations run; no step body ever does.
    Inspect,
    /// A real run: everything happens.
    Real,
    /// `--dry-run`: reads run for real, changes are planned.
    DryRun,
    /// `--dry-run --offline`: nothing is contacted; reads are planned too.
    Offline,
}

impl Mode {
    pub fn label(self) -> &'static str {
        match self {
            Mode::Inspect => "inspect",
            Mode::Real => "real",
            Mode::DryRun => "dry-run",
            Mode::Offline => "dry-run-offline",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The file's top level runs: `runbook{}`, `step()`, `target()` declare things.
    Declaring,
    /// Steps run one by one.
    Running,
}

#[derive(Debug, Clone, Default)]
pub struct StepOptions {
    pub retries: u32,
    pub delay: Duration,
    pub timeout: Option<Duration>,
    pub when: Option<mlua::Function>,
    pub always: bool,
    pub confirm: bool,
}

#[derive(Debug, Clone)]
pub struct StepDecl {
    pub name: String,
    pub opts: StepOptions,
    pub func: mlua::Function,
    /// `file:line` where the step was declared.
    pub location: String,
}

/// The step that is running now.
#[derive(Debug, Clone, Copy)]
pub struct StepCursor {
    pub index: usize,
    /// The changes it made (or, planning, would make), less those rolled back.
    pub changes: u32,
}

impl StepCursor {
    /// Whether it changed anything (that stayed changed).
    pub fn changed(&self) -> bool {
        self.changes > 0
    }
}

/// What an earlier run did with an item of a `rollout()` (`--resume`).
#[derive(Debug, Clone, PartialEq)]
pub enum Earlier {
    /// It succeeded, in this run.
    Done(String),
    /// It failed, in this run.
    Failed(String),
}

/// A resumed run's view of the earlier run's rollouts: by (step index, item label).
#[derive(Debug, Clone, Default)]
pub struct RolloutResume {
    pub items: std::collections::HashMap<(usize, String), Earlier>,
    /// `--retry-failed`: run the items that failed again.
    pub retry_failed: bool,
}

/// Asks the person at the terminal a yes/no question in the middle of a run (a
/// rollout's canary pause): true for yes. Given by the engine, which owns the terminal.
pub type Ask =
    std::rc::Rc<dyn Fn(String) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool>>>>;

pub struct Ctx {
    pub mode: Mode,
    pub phase: Cell<Phase>,
    pub bus: Bus,
    pub cancel: Rc<Cancel>,
    /// Work started now is interrupted once `cancel.count()` exceeds this.
    pub abort_at: Cell<u32>,
    /// When the current step (or the load) must end.
    pub deadline: Cell<Option<Instant>>,
    /// When everything must have ended, `always` steps included (`check`'s offline pass).
    pub hard_end: Cell<Option<Instant>>,
    pub step: Cell<Option<StepCursor>>,
    pub action_seq: Cell<u64>,
    pub header: RefCell<Option<Header>>,
    pub steps: RefCell<Vec<StepDecl>>,
    /// `--set` pairs, in command-line order.
    pub sets: Vec<(String, String)>,
    pub missing: Missing,
    /// The runbook as users name it in messages (its path, or `<embedded>/name.lua`).
    pub label: String,
    /// Where `require` finds Lua files beside the runbook; `None` for embedded runbooks.
    pub dir: Option<PathBuf>,
    /// Targets by name, and the connections of this run (shared with the confirmation
    /// pass, so a host is connected to once).
    pub targets: Rc<Registry>,
    /// The plan this VM's actions are seen by: the plan pass (a confirmation's, or
    /// `runbook plan`'s) records what it plans and reads; a confirmed real run (or an
    /// applied plan) is held to the changes that were shown.
    pub watch: RefCell<crate::actions::plan::Watch>,
    /// The state dir of this run (set when a run starts; `fingerprint.save/load` use it).
    pub state_dir: RefCell<Option<PathBuf>>,
    /// The id of this run's record (set when a real run starts; an artifact names it).
    pub run_id: RefCell<Option<String>>,
    /// Set when the run record can no longer be written: no change may start after that.
    pub record_failed: RefCell<Option<Rc<Cell<bool>>>>,
    /// Run locks on the targets this run changes.
    pub locks: crate::actions::locks::Locks,
    /// `file:line` the instruction hook last saw: where an out-of-memory error happened.
    pub last_location: RefCell<String>,
    /// A confirmation's dry-run keeps what its reads answered here; the real run after
    /// it is answered from them when the plan changes nothing (`kept_reads.rs`).
    pub kept_reads: RefCell<Option<crate::actions::kept_reads::KeptReads>>,
    /// What `log`/`print` said while the file's top level ran: no sink is attached yet
    /// then, so a run shows them once its record has started (`engine::run`).
    pub early_logs: RefCell<Vec<(crate::actions::events::Level, String)>>,
    /// The placeholders this VM gives as the output of a change it only plans
    /// (`known_after.rs`).
    pub known_after: crate::actions::known_after::KnownAfter,
    /// The Lua modules this VM loaded, and (held to a plan) the only ones it may load.
    pub modules: RefCell<crate::actions::plan::Modules>,
    /// Each warning that a secret was in a command's argv, as it was said: `check` lists
    /// them (`engine::load::secrets_in_argv`) without reading them back out of the log.
    pub secret_in_argv: RefCell<Vec<String>>,
    /// `--resume`: the items earlier `rollout()`s finished or failed.
    pub rollout_resume: RefCell<RolloutResume>,
    /// A resumed run's detached commands of the earlier run that may still run, by
    /// (step name, target, command as shown): the job each is followed again by.
    pub detached_resume: RefCell<std::collections::HashMap<(String, String, String), String>>,
    /// `None` where nobody can answer: no terminal, `--json`.
    pub ask: RefCell<Option<Ask>>,
}

impl Ctx {
    pub fn new(
        mode: Mode,
        label: String,
        dir: Option<PathBuf>,
        sets: Vec<(String, String)>,
        cancel: Rc<Cancel>,
        remote: RemoteSettings,
        targets: Option<Rc<Registry>>,
    ) -> Self {
        let lock_wait = remote.lock_wait;
        let targets = targets.unwrap_or_else(|| Rc::new(Registry::new(remote)));
        Ctx {
            mode,
            phase: Cell::new(Phase::Declaring),
            bus: Bus::default(),
            cancel,
            abort_at: Cell::new(0),
            deadline: Cell::new(None),
            hard_end: Cell::new(None),
            step: Cell::new(None),
            action_seq: Cell::new(0),
            header: RefCell::new(None),
            steps: RefCell::new(Vec::new()),
            sets,
            missing: if mode == Mode::Inspect {
                Missing::Placeholder
            } else {
                Missing::Error
            },
            label,
            dir,
            state_dir: RefCell::new(None),
            run_id: RefCell::new(None),
            record_failed: RefCell::new(None),
            // What each target is, asked once per run: the registry is the run's, shared
            // by its plan pass and its real pass.
            locks: crate::actions::locks::Locks::new(lock_wait).sharing(targets.identities()),
            targets,
            watch: RefCell::new(Default::default()),
            last_location: RefCell::new(String::new()),
            kept_reads: RefCell::new(None),
            early_logs: RefCell::new(Vec::new()),
            secret_in_argv: RefCell::new(Vec::new()),
            rollout_resume: RefCell::new(RolloutResume::default()),
            detached_resume: RefCell::new(Default::default()),
            ask: RefCell::new(None),
            known_after: crate::actions::known_after::KnownAfter::random(),
            modules: RefCell::new(Default::default()),
        }
    }

    pub fn next_action_id(&self) -> u64 {
        let id = self.action_seq.get() + 1;
        self.action_seq.set(id);
        id
    }

    /// Every read is sent from now on, none answered from the confirmation's dry-run
    /// (`kept_reads.rs`): at a change (one the plan did not have, or runbook's own stop
    /// of an earlier run's command), a retry, a wait (a runbook waits to see something
    /// new).
    /// (The dry-run that keeps them goes on keeping: the real run stops at the same
    /// point of its own.)
    pub fn send_reads_from_now(&self) {
        if self.mode != Mode::Real {
            return;
        }
        if let Some(kept) = self.kept_reads.borrow_mut().as_mut() {
            kept.stop();
        }
    }

    pub fn mark_changed(&self) {
        if let Some(mut cur) = self.step.get() {
            cur.changes = cur.changes.saturating_add(1);
            self.step.set(Some(cur));
        }
    }

    /// A change of the running step failed and put back what it had changed (a fresh
    /// `venv.build` whose new venv was removed, the old one untouched): it does not count
    /// as a change of the step (`changed=` of the summary).
    pub fn mark_rolled_back(&self) {
        if let Some(mut cur) = self.step.get() {
            cur.changes = cur.changes.saturating_sub(1);
            self.step.set(Some(cur));
        }
    }

    pub fn aborted(&self) -> bool {
        self.cancel.count() > self.abort_at.get()
    }

    pub fn past_deadline(&self) -> bool {
        self.deadline.get().is_some_and(|d| Instant::now() >= d)
    }

    /// Why the running step is being stopped, if it is: the one check that every place
    /// which notices it (the instruction hook, `sleep`, commands, waiting primitives)
    /// asks.
    pub fn stopped(&self) -> Option<Why> {
        if self.aborted() {
            Some(Why::Interrupted)
        } else if self.past_deadline() {
            Some(Why::TimedOut)
        } else {
            None
        }
    }
}
