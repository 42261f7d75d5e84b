//! Loads a runbook into a sandboxed VM, runs its steps in order, and owns the decisions
//! around a run: dry-run, confirmation, resume, timeouts, interruption, the record.

use crate::actions::ctx::{Header, Mode};
use crate::actions::events::{Event, Level, RunOutcome, StepOutcome as StepResult};
use crate::actions::plan::Plan;
use crate::base::cancel::{self, Cancel};
use crate::base::error::{Error, Exit, Result};
use crate::run::sinks::{
    collect::{CollectSink, Collected},
    json::JsonSink,
    record::RecordSink,
    ship::Shipping,
    terminal::{TerminalOptions, TerminalSink},
};
use crate::run::source::Source;
use crate::run::state;
use crate::targets::registry::RemoteSettings;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

mod confirm;
mod load;
mod resume;
mod step;

pub use confirm::ask_yes;
use confirm::*;
pub use load::*;
use resume::*;
use step::*;

/// How a real run is approved before it changes anything.
pub enum Approval {
    /// `run` without `--yes`: a plan made in memory, shown, confirmed, and enforced.
    Ask,
    /// `run --yes`: no plan.
    Yes,
    /// `apply`: a saved plan, checked against what would run now, shown and confirmed
    /// (unless `yes`), and enforced.
    Saved {
        plan: Box<Plan>,
        /// sha256 of the plan file, and the file as the user named it.
        sha256: String,
        path: String,
        yes: bool,
        /// The plan's sign-off, verified against the policy (`runbook.toml`).
        signed: Option<SignOff>,
    },
}

/// Who signed a plan, as its verified signatures say.
#[derive(Debug, Clone, Default)]
pub struct SignOff {
    pub author: String,
    pub approvers: Vec<String>,
}

pub struct RunRequest {
    pub source: Source,
    pub mode: Mode,
    pub sets: Vec<(String, String)>,
    pub approval: Approval,
    pub json: bool,
    pub resume: Option<String>,
    /// `--retry-failed`: a resumed rollout runs its failed items again.
    pub retry_failed: bool,
    pub state_dir: PathBuf,
    pub timeout: Option<Duration>,
    pub term: TerminalOptions,
    pub remote: RemoteSettings,
}

#[derive(Default)]
struct Tally {
    ok: usize,
    changed: usize,
    failed: usize,
    skipped: usize,
}

/// `runbook run`: `Ok` when every step passed (or, in a dry-run, planned).
pub async fn run(req: RunRequest) -> Result<()> {
    // Where this run's events are shipped (`runbook.toml`'s `[[sink]]`), read before
    // anything runs: only a real run's, which is what changes the world; a dry-run
    // changes nothing, and `runbook test` contacts nothing (its replies are answers).
    let replayed = req.remote.replies.as_ref().is_some_and(|r| r.replaying());
    let ship_to = match (req.mode, replayed) {
        (Mode::Real, false) => {
            crate::base::project::Project::load()
                .map_err(Error::Usage)?
                .sink
        }
        _ => Vec::new(),
    };
    let cancel = Cancel::new();
    let _signals = cancel::watch_signals(cancel.clone());
    let loaded = load(
        &req.source,
        req.mode,
        req.sets.clone(),
        cancel.clone(),
        req.remote.clone(),
    )?;
    *loaded.ctx.state_dir.borrow_mut() = Some(req.state_dir.clone());
    let resume = match &req.resume {
        Some(which) => resume_plan(&req, &loaded, which)?,
        None => ResumePlan::default(),
    };
    // One path for "what you saw is what runs": a plan (made now, or the saved one),
    // shown and confirmed, then the real run is held to it.
    let held_to = match (&req.approval, req.mode) {
        (_, mode) if mode != Mode::Real => None,
        (Approval::Yes, _) => None,
        (Approval::Ask, _) => {
            // Its reads run again in the real run: that run is what replies are saved of.
            let _paused = loaded.ctx.targets.replies().map(|r| r.pause());
            let pass = plan_pass(PlanPass {
                source: &req.source,
                mode: Mode::DryRun,
                sets: req.sets.clone(),
                cancel: cancel.clone(),
                remote: req.remote.clone(),
                state_dir: req.state_dir.clone(),
                timeout: req.timeout,
                targets: Some(loaded.ctx.targets.clone()),
                resume: &resume,
                salt: None,
            })
            .await?;
            // A plan that could not be made whole cannot be confirmed (the real run would
            // be held to half a plan and stop where it ends): say why, change nothing.
            // (A failed plan with no change in it yet needs no confirmation: the real run
            // is held to "no changes" and stops before any.)
            hold_to_modules(&loaded, &pass.plan, &req.source.label)?;
            if let (Some(why), false) = (&pass.failed, pass.plan.changes.is_empty()) {
                return Err(Error::PlanFailed(format!(
                    "{}: the plan to confirm could not be made (its dry-run failed): {why}\n\
                     nothing was changed; see it with --dry-run, or run without a confirmation with --yes",
                    req.source.label
                )));
            }
            let hint = "preview with --dry-run, then re-run with --yes";
            let shown = Shown {
                saved: None,
                whole: req.term.verbose,
            };
            confirm(
                &req.source.label,
                &pass.plan,
                shown,
                req.json,
                &cancel,
                hint,
            )
            .await?;
            // A plan that changes nothing: the reads the dry-run sent answer the real
            // run's same reads instead of being sent again. Not when it changes anything:
            // any read may decide what is changed (is the job running now, which
            // directory is idle), and the world may have moved while the user read the
            // plan; those reads are sent again and compared with the plan.
            if pass.plan.changes.is_empty() {
                *loaded.ctx.kept_reads.borrow_mut() = pass.kept;
            }
            Some(pass.plan)
        }
        (
            Approval::Saved {
                plan,
                path,
                yes,
                sha256,
                ..
            },
            _,
        ) => {
            // What can be checked without reaching any target first (the modules the
            // plan loaded among it), then the plan is shown (the ssh_config it names with
            // it), and only then are its targets resolved: `ssh -G` with that config runs
            // what a `Match exec` in it says.
            hold_to_modules(&loaded, plan, path)?;
            check_saved(plan, &loaded, path)?;
            // What this apply reaches the targets with (`--ssh-config`/`--inventory` may
            // name others than the plan shows): said before the prompt, or before it is
            // used with --yes, resolved as the files that are read.
            let used: Vec<String> = [
                ("ssh_config", req.remote.ssh.config.as_deref()),
                (
                    "inventory",
                    req.remote.inventory.as_deref().map(|i| i.path.as_path()),
                ),
            ]
            .into_iter()
            .filter_map(|(what, p)| {
                let p = p?;
                let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
                Some(format!("{what} {}", p.display()))
            })
            .collect();
            if !used.is_empty() {
                eprintln!("{path}: its targets are reached with {}", used.join(", "));
            }
            if !yes {
                let hint = format!("review it, then re-run with runbook apply {path} --yes");
                let shown = Shown {
                    saved: Some((path.as_str(), sha256.as_str())),
                    whole: req.term.verbose,
                };
                confirm(path, plan, shown, req.json, &cancel, &hint).await?;
            }
            check_saved_targets(plan, &loaded, &req, path).await?;
            Some((**plan).clone())
        }
    };
    if let Some(plan) = &held_to {
        let enforcer = crate::actions::plan::Enforcer::new(plan);
        // A saved plan's shown reads and notes are held too: anyone may have edited it.
        let enforcer = match req.approval {
            Approval::Saved { .. } => enforcer.hold_texts(),
            _ => enforcer,
        };
        *loaded.ctx.watch.borrow_mut() = crate::actions::plan::Watch::Held(enforcer);
    }
    let which = req.resume.as_deref().unwrap_or_default();
    let mut stopped = crate::run::orphans::settle(&loaded.ctx, which, &resume.orphans).await?;
    let followed = crate::run::orphans::reattach(&loaded.ctx, &resume.orphans);
    // Stopping an earlier run's command changed the world the dry-run read.
    if !stopped.is_empty() || !followed.is_empty() {
        loaded.ctx.send_reads_from_now();
    }
    stopped.extend(followed);

    let run_id = state::new_run_id();
    // A saved plan is spent from here on, unless this run ends without success and
    // without changing anything; one applied already is refused before anything is
    // changed.
    if let Approval::Saved {
        plan, sha256, path, ..
    } = &req.approval
    {
        if let Some(why) = state::claim_plan(&req.state_dir, &run_id, sha256, &plan.id())? {
            return Err(Error::PlanRefused(format!(
                "{path}: refused, nothing was changed: {why}\nmake a new plan (runbook plan {} …) and review it",
                plan.runbook.path
            )));
        }
    }
    // Before the record, so that a run refused here leaves no empty record behind.
    let shipping = match ship_to.is_empty() {
        true => None,
        false => Some(
            Shipping::start(&ship_to, &req.state_dir, &run_id, &hostname()).map_err(|e| {
                Error::Record(format!(
                    "{e}\nrunbook ships every event of a real run to the sinks of runbook.toml, and will not start without spooling them"
                ))
            })?,
        ),
    };
    let (record_path, record_file) = state::create_record(&req.state_dir, &run_id)?;
    let ctx = loaded.ctx.clone();
    *ctx.run_id.borrow_mut() = Some(run_id.clone());
    if !req.json {
        ctx.bus.add_sink(Box::new(TerminalSink::new(req.term)));
        if confirm::interactive() {
            let cancel = ctx.cancel.clone();
            *ctx.ask.borrow_mut() = Some(std::rc::Rc::new(move |question: String| {
                let cancel = cancel.clone();
                Box::pin(async move {
                    crate::run::sinks::terminal::hide_bars();
                    let yes = confirm::ask_yes(&question, &cancel).await.is_ok();
                    crate::run::sinks::terminal::show_bars();
                    yes
                })
            }));
        }
    } else {
        ctx.bus.add_sink(Box::new(JsonSink));
    }
    let index = crate::run::index::path(&req.state_dir);
    let record = RecordSink::new(record_path.clone(), record_file, &run_id, index);
    let record_failed = record.failed_flag();
    let record_writer = record.writer();
    *ctx.record_failed.borrow_mut() = Some(record_failed.clone());
    ctx.bus.add_sink(Box::new(record));
    ctx.bus.chain(&run_id);
    if let Some(shipping) = shipping {
        ctx.bus.add_sink(Box::new(shipping));
    }

    let header = loaded.header();
    ctx.bus.emit(Event::RunStarted {
        run_id: run_id.clone(),
        runbook: header.name.clone(),
        path: req.source.label.clone(),
        content_hash: req.source.content_hash(),
        params: params_for_record(&header),
        mode: req.mode.label().into(),
        resumed_from: resume.from.clone(),
        user: whoami(),
        host: hostname(),
        plan: match &req.approval {
            Approval::Saved { sha256, .. } => Some(sha256.clone()),
            _ => None,
        },
        author: match &req.approval {
            Approval::Saved {
                signed: Some(s), ..
            } => Some(s.author.clone()),
            _ => None,
        },
        approvers: match &req.approval {
            Approval::Saved {
                signed: Some(s), ..
            } => s.approvers.clone(),
            _ => Vec::new(),
        },
        limit: req.remote.limit.as_ref().map(|l| l.text.clone()),
    });
    if record_failed.get() {
        ctx.bus.finish();
        return Err(Error::Record(format!(
            "cannot write the run record {}; runbook will not run without a record (see --state-dir)",
            record_path.display()
        )));
    }
    crate::run::orphans::log(&ctx.bus, stopped);
    // What the file's top level logged, now that the run has sinks (its record first).
    for (level, message) in ctx.early_logs.take() {
        ctx.bus.emit(Event::Log {
            step: None,
            level,
            message,
        });
    }
    if let Approval::Saved {
        plan, sha256, path, ..
    } = &req.approval
    {
        ctx.bus.emit(Event::Log {
            step: None,
            level: Level::Info,
            message: format!(
                "applying plan {path} (sha256 {}…), made {} by {}: {}; each change is held to it",
                &sha256[..12.min(sha256.len())],
                plan.created,
                plan.created_by,
                match plan.changes.len() {
                    1 => "1 change".to_string(),
                    n => format!("{n} changes"),
                }
            ),
        });
    }
    crate::run::watchdog::set_record(record_writer);
    ctx.locks.set_holder(format!(
        "run {run_id} by {}@{} (pid {}), runbook \"{}\"",
        whoami(),
        hostname(),
        std::process::id(),
        header.name
    ));
    ctx.locks.set_scope(&header.name, &header.lock);
    let started = Instant::now();
    let tally = run_steps(&loaded, &resume, req.timeout, false).await;
    ctx.locks.release_all().await;
    ctx.targets.close_all().await;
    // A saved plan whose text of a change is not the change (an edited file), found
    // before any change ran: a refused plan, as the checks before the run refuse one.
    let refused = match &req.approval {
        Approval::Saved { plan, path, .. } => ctx
            .watch
            .borrow_mut()
            .held()
            .and_then(|e| e.refused())
            .map(|why| {
                format!(
                    "{path}: refused, nothing was changed: {why}\nmake a new plan (runbook plan {} …) and review it",
                    plan.runbook.path
                )
            }),
        _ => None,
    };
    let (outcome, ended) = if let Some(signal) = cancel.interrupted() {
        (RunOutcome::Interrupted, Err(Error::RunInterrupted(signal)))
    } else if let Some(why) = refused {
        (RunOutcome::Failed, Err(Error::PlanRefused(why)))
    } else if tally.failed > 0 || record_failed.get() {
        // A run whose record broke off is not a success: nobody can tell what it did.
        (RunOutcome::Failed, Err(Error::RunFailed))
    } else {
        (RunOutcome::Ok, Ok(()))
    };
    // An apply that did not succeed and changed nothing leaves its plan unspent: it may
    // be applied again (once the lock is free, or on a terminal that can confirm).
    if let (Approval::Saved { .. }, Err(_), 0) = (&req.approval, &ended, tally.changed) {
        if let Err(e) = state::release_plan(&req.state_dir, &run_id) {
            eprintln!("warning: the plan stays spent: {e}");
        }
    }
    let code = match &ended {
        Ok(()) => Exit::Success.code(),
        Err(e) => e.exit_code(),
    };
    ctx.bus.emit(Event::RunFinished {
        outcome,
        ok: tally.ok,
        changed: tally.changed,
        failed: tally.failed,
        skipped: tally.skipped,
        duration_ms: started.elapsed().as_millis() as u64,
        exit_code: code,
    });
    ctx.bus.finish();
    crate::run::watchdog::closing(code);
    if record_failed.get() {
        eprintln!(
            "error: the run record {} broke off (see the error above); changes after that point were refused",
            record_path.display()
        );
    }
    ended
}

fn params_for_record(header: &Header) -> BTreeMap<String, serde_json::Value> {
    header
        .params
        .iter()
        .map(|spec| {
            let v = match header.values.get(&spec.name) {
                Some(Some(_)) if spec.secret => {
                    serde_json::Value::String(crate::base::secrets::MASK.into())
                }
                Some(Some(v)) => v.to_json(),
                _ => serde_json::Value::Null,
            };
            (spec.name.clone(), v)
        })
        .collect()
}

/// What a plan is made from: the runbook, its params, and (for `run`'s confirmation) the
/// connections of the real run, so that a host is connected to once.
pub struct PlanPass<'a> {
    pub source: &'a Source,
    /// `DryRun` (reads run) or `Offline` (nothing is contacted).
    pub mode: Mode,
    pub sets: Vec<(String, String)>,
    pub cancel: Rc<Cancel>,
    pub remote: RemoteSettings,
    pub state_dir: PathBuf,
    pub timeout: Option<Duration>,
    pub targets: Option<Rc<crate::targets::registry::Registry>>,
    resume: &'a ResumePlan,
    /// The salt of the plan this one is compared with (`approve`), so that equal reads
    /// and commands have equal digests; a new one otherwise.
    salt: Option<crate::actions::plan::Salt>,
}

/// A plan, and why it is not whole when a step of the dry-run failed.
pub struct Planned {
    pub plan: Plan,
    pub failed: Option<String>,
    /// What the dry-run's reads answered, for a confirmation's pass (`kept_reads.rs`).
    pub kept: Option<crate::actions::kept_reads::KeptReads>,
}

/// Makes a plan: a silent dry-run of the whole runbook that records every change it
/// plans and every read it runs (`plan::Recording`).
async fn plan_pass(p: PlanPass<'_>) -> Result<Planned> {
    let shared = p.targets.is_some();
    let plan = load_with(
        p.source,
        p.mode,
        p.sets,
        p.cancel.clone(),
        p.remote,
        p.targets,
    )?;
    let collected = Collected::default();
    *plan.ctx.state_dir.borrow_mut() = Some(p.state_dir);
    *plan.ctx.watch.borrow_mut() = crate::actions::plan::Watch::Recording(
        crate::actions::plan::Recording::new(
            p.salt.unwrap_or_else(crate::actions::plan::Salt::random),
        )
        .with_known_after(plan.ctx.known_after.clone()),
    );
    // A confirmation's pass keeps its reads' answers for the real run after it. Not when
    // replies are saved: the real run's commands are what a replies file holds, each one.
    if shared && p.mode == Mode::DryRun && plan.ctx.targets.replies().is_none() {
        *plan.ctx.kept_reads.borrow_mut() = Some(Default::default());
    }
    plan.ctx
        .bus
        .add_sink(Box::new(CollectSink(collected.clone())));
    let tally = run_steps(&plan, p.resume, p.timeout, true).await;
    if !shared {
        plan.ctx.targets.close_all().await;
    }
    if let Some(signal) = p.cancel.interrupted() {
        return Err(Error::Interrupted(signal));
    }
    let crate::actions::plan::Watch::Recording(mut recording) = plan.ctx.watch.take() else {
        unreachable!("a plan pass records: set above")
    };
    recording.modules = plan.ctx.modules.borrow().loaded().to_vec();
    let kept = plan.ctx.kept_reads.borrow_mut().take();
    let events = collected.0.borrow();
    let failed = (tally.failed > 0).then(|| {
        let why = events.iter().find_map(|ev| match ev {
            Event::StepFinished {
                name,
                outcome,
                error,
                ..
            } if *outcome == StepResult::Failed => Some(format!(
                "step \"{name}\" failed: {}",
                error.as_deref().unwrap_or("(no message)")
            )),
            _ => None,
        });
        plan.ctx
            .bus
            .mask(&why.unwrap_or_else(|| "a step failed".into()))
    });
    let header = plan.header();
    let steps = plan.steps();
    let mask = |t: &str| plan.ctx.bus.mask(t);
    let confirms: Vec<bool> = steps.iter().map(|d| d.opts.confirm).collect();
    let made = Plan::assemble(crate::actions::plan::Pass {
        header: &header,
        label: &p.source.label,
        from_file: p.source.dir.is_some(),
        sha256: p.source.content_hash(),
        mode: p.mode.label(),
        recording,
        events: &events,
        created_by: format!("{}@{}", whoami(), hostname()),
        confirms: &confirms,
        mask: &mask,
    });
    Ok(Planned {
        plan: made,
        failed,
        kept,
    })
}

/// `runbook plan`: the plan of a runbook, made as `run` makes the one it confirms.
pub async fn plan(
    source: &Source,
    offline: bool,
    sets: Vec<(String, String)>,
    state_dir: PathBuf,
    timeout: Option<Duration>,
    remote: RemoteSettings,
) -> Result<Planned> {
    let mode = if offline { Mode::Offline } else { Mode::DryRun };
    standalone_pass(source, mode, sets, state_dir, timeout, remote, None).await
}

/// The plan `saved` would be now: its runbook's dry-run with its params, over its
/// targets, recorded with its salt, so that [`Plan::drift`] can compare the two change
/// by change and read by read (`approve`).
pub async fn replan(
    source: &Source,
    saved: &Plan,
    sets: Vec<(String, String)>,
    state_dir: PathBuf,
    remote: RemoteSettings,
) -> Result<Planned> {
    let salt = Some(saved.salt.clone());
    standalone_pass(source, Mode::DryRun, sets, state_dir, None, remote, salt).await
}

/// A plan pass of its own (not a run's confirmation): its own signals and connections.
async fn standalone_pass(
    source: &Source,
    mode: Mode,
    sets: Vec<(String, String)>,
    state_dir: PathBuf,
    timeout: Option<Duration>,
    remote: RemoteSettings,
    salt: Option<crate::actions::plan::Salt>,
) -> Result<Planned> {
    let cancel = Cancel::new();
    let _signals = cancel::watch_signals(cancel.clone());
    plan_pass(PlanPass {
        source,
        mode,
        sets,
        cancel,
        remote,
        state_dir,
        timeout,
        targets: None,
        resume: &ResumePlan::default(),
        salt,
    })
    .await
}

/// Who runs runbook: `$USER`, else the uid (a plan's `created_by` is `whoami@hostname`).
pub fn whoami() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        // SAFETY: getuid has no failure mode.
        .unwrap_or_else(|| format!("uid {}", unsafe { libc::getuid() }))
}

/// This machine's name, as `run_started` and syslog messages give it.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
