//! Loads a runbook into a sandboxed VM, runs its steps in order, and owns the decisions
//! around a run: dry-run, confirmation, resume, timeouts, interruption, the record.

use crate::cancel::{self, Cancel, Signal};
use crate::ctx::{Ctx, Header, Mode, Phase, StepCursor, StepDecl};
use crate::duration;
use crate::error::{Error, Exit, Result};
use crate::events::{Event, Level, RunOutcome, StepOutcome as StepResult};
use crate::lua_api::error_message;
use crate::plan::Plan;
use crate::sandbox;
use crate::sinks::{
    collect::{CollectSink, Collected},
    json::JsonSink,
    record::RecordSink,
    terminal::{TerminalOptions, TerminalSink},
};
use crate::source::Source;
use crate::state;
use crate::targets::registry::RemoteSettings;
use mlua::{Lua, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long the top level of a file may run while it declares its steps.
const LOAD_BUDGET: Duration = Duration::from_secs(10);
/// How long `check` lets an offline plan of a file's steps run (see `offline_warnings`).
const CHECK_BUDGET: Duration = Duration::from_secs(5);
/// What an `always` step gets when the run's `--timeout` has already run out.
const ALWAYS_GRACE: Duration = Duration::from_secs(60);

/// A runbook whose declarations have run: header and steps known, nothing executed.
pub struct Loaded {
    /// Kept alive for as long as the steps are: their functions live in this VM.
    _lua: Lua,
    pub ctx: Rc<Ctx>,
}

impl Loaded {
    pub fn header(&self) -> Header {
        self.ctx
            .header
            .borrow()
            .clone()
            .expect("load() checks the header")
    }
    pub fn steps(&self) -> Vec<StepDecl> {
        self.ctx.steps.borrow().clone()
    }
}

/// Runs the file's top level (declarations only; no command can run there).
pub fn load(
    source: &Source,
    mode: Mode,
    sets: Vec<(String, String)>,
    cancel: Rc<Cancel>,
    remote: RemoteSettings,
) -> Result<Loaded> {
    load_with(source, mode, sets, cancel, remote, None)
}

/// `load`, reaching targets through `targets` (the connections of another VM of the
/// same run) when given.
fn load_with(
    source: &Source,
    mode: Mode,
    sets: Vec<(String, String)>,
    cancel: Rc<Cancel>,
    remote: RemoteSettings,
    targets: Option<Rc<crate::targets::registry::Registry>>,
) -> Result<Loaded> {
    let ctx = Rc::new(Ctx::new(
        mode,
        source.label.clone(),
        source.dir.clone(),
        sets,
        cancel,
        remote,
        targets,
    ));
    let lua = sandbox::new_vm(ctx.clone())
        .map_err(|e| Error::Startup(format!("cannot start Lua: {e}")))?;
    // The sandbox's own globals, as no runbook left them, say which tables are the
    // API's (for the typo check, after the top level ran): taken now, not from a second
    // VM (about 1.5 MB and a few ms for every load).
    let api_tables = crate::lint::typos::api_tables(&lua);
    let api_functions = crate::lint::typos::api_functions(&lua);
    let chunk = sandbox::compile(&lua, &source.bytes, &source.label)
        .map_err(|e| Error::Runbook(error_message(&e)))?;
    let deadline = Instant::now() + LOAD_BUDGET;
    ctx.deadline.set(Some(deadline));
    crate::watchdog::arm_load(&source.label, deadline);
    let result = chunk.call::<()>(());
    crate::watchdog::disarm();
    // The top level may have caught its own abort where Lua turns errors into values
    // (a `load` reader, `coroutine.close`): the abort still stands.
    let result = result.and_then(|()| still_standing(&ctx, &source.label));
    ctx.deadline.set(None);
    if let Err(e) = result {
        let msg = error_message(&e);
        match crate::abort::Abort::of(&e) {
            Some(a) if a.why == crate::abort::Why::Interrupted => {
                let signal = ctx.cancel.interrupted().unwrap_or(Signal::Int);
                return Err(Error::Interrupted(signal));
            }
            Some(a) => {
                return Err(Error::Runbook(format!(
                    "{}: the top level of the file ran for over {}s; put work inside step() functions",
                    a.at,
                    LOAD_BUDGET.as_secs()
                )));
            }
            None => {}
        }
        if matches!(e, mlua::Error::MemoryError(_)) {
            let near = ctx.last_location.borrow().clone();
            let at = if near.is_empty() {
                source.label.clone()
            } else {
                near
            };
            return Err(Error::Runbook(format!("{at}: {msg}")));
        }
        if let Some(rejected) = e.downcast_ref::<crate::params::Rejected>() {
            return Err(Error::Params(rejected.to_string()));
        }
        return Err(Error::Runbook(crate::lua_api::located(&e, &source.label)));
    }
    if ctx.header.borrow().is_none() {
        return Err(Error::Runbook(format!(
            "{}: missing header: a runbook starts with runbook {{ name = \"…\", description = \"…\" }}",
            source.label
        )));
    }
    check_globals(&lua, source, &api_tables, &api_functions)?;
    Ok(Loaded { _lua: lua, ctx })
}

/// The warnings an offline plan of the runbook raises about itself (a secret placed in
/// an argv), for `check`: an offline dry-run contacts nothing and changes nothing, so it
/// can run the steps' code. Empty when no plan can be made (a required param unset, a
/// step that needs the results of its reads).
pub async fn offline_warnings(
    source: &Source,
    header: &Header,
    sets: Vec<(String, String)>,
    remote: RemoteSettings,
) -> Vec<String> {
    // Only a secret param with a value can end up in an argv; without one there is
    // nothing to find, and `check` stays one load per file (`header` is from that load).
    let has_secret = header
        .params
        .iter()
        .any(|p| p.secret && matches!(header.values.get(&p.name), Some(Some(_))));
    if !has_secret {
        return Vec::new();
    }
    let Ok(plan) = load(source, Mode::Offline, sets, Cancel::new(), remote) else {
        return Vec::new();
    };
    let collected = Collected::default();
    plan.ctx
        .bus
        .add_sink(Box::new(CollectSink(collected.clone())));
    // Bounded, `always` steps included: a step that loops in its Lua code must not make
    // `check` hang.
    plan.ctx.hard_end.set(Some(Instant::now() + CHECK_BUDGET));
    run_steps(&plan, &ResumePlan::default(), Some(CHECK_BUDGET), true).await;
    let events = collected.0.borrow();
    let mut out: Vec<String> = events
        .iter()
        .filter_map(|ev| match ev {
            Event::Log { level, message, .. }
                if *level == crate::events::Level::Warn
                    && message.starts_with(crate::actions::SECRET_IN_ARGV) =>
            {
                Some(message.clone())
            }
            _ => None,
        })
        .collect();
    out.dedup();
    out
}

/// Reads of undefined globals anywhere in the file, step bodies included, stop the run
/// before its first step: a typo in the last step must not surface after the first ones
/// changed things. Known globals are what the sandbox and the file's top level defined.
/// So do misspelt API names (`cache.clera`, `here:exce`: `lint::typos`).
fn check_globals(
    lua: &Lua,
    source: &Source,
    api_tables: &[String],
    api_functions: &std::collections::BTreeMap<String, usize>,
) -> Result<()> {
    let text = String::from_utf8_lossy(&source.bytes);
    let mut known: Vec<String> = Vec::new();
    for pair in lua.globals().pairs::<Value, Value>() {
        if let Ok((Value::String(k), _)) = pair {
            known.push(k.to_string_lossy());
        }
    }
    let known_refs: Vec<&str> = known.iter().map(String::as_str).collect();
    // The file already compiled and ran, so a parse failure here is the linter's own
    // limit, not the user's mistake: do not block the run on it.
    let Ok(found) = crate::lint::unknown_globals(&text, &known_refs) else {
        return Ok(());
    };
    let mut problems = Vec::new();
    for g in found {
        if g.assigned {
            tracing::warn!(
                "{}:{}: assignment to undeclared global '{}' inside a function (missing `local`?)",
                source.label,
                g.line,
                g.name
            );
        } else {
            let why = match sandbox::REMOVED.iter().find(|(n, _)| *n == g.name) {
                Some((_, why)) => {
                    format!("'{}' is not available in runbooks (sandbox): {why}", g.name)
                }
                None => format!(
                    "unknown global '{}'{}",
                    g.name,
                    crate::suggest::hint(&g.name, known_refs.iter().copied())
                ),
            };
            problems.push((g.line, format!("{}:{}: {why}", source.label, g.line)));
        }
    }
    let mut known = crate::lint::typos::Known::read(crate::embedded::LUA_API, api_tables, lua);
    known.keep_options_of_unchanged(api_functions, &crate::lint::typos::api_functions(lua));
    // `params.NAME` against the declared params: the proxy names a misspelling only
    // when its line runs, which may be after earlier steps changed things.
    if let Some(header) = crate::lua_api::ctx(lua).header.borrow().as_ref() {
        known.tables.insert(
            "params".into(),
            header.params.iter().map(|p| p.name.clone()).collect(),
        );
    }
    // As above: what the parser cannot read, Lua could; Lua has the last word.
    for t in crate::lint::typos::find(&text, &known).unwrap_or_default() {
        problems.push((t.line, format!("{}:{}: {t}", source.label, t.line)));
    }
    problems.sort_by_key(|(line, _)| *line);
    let problems: Vec<String> = problems.into_iter().map(|(_, p)| p).collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Runbook(problems.join("\n")))
    }
}

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
    },
}

pub struct RunRequest {
    pub source: Source,
    pub mode: Mode,
    pub sets: Vec<(String, String)>,
    pub approval: Approval,
    pub json: bool,
    pub resume: Option<String>,
    pub state_dir: PathBuf,
    pub timeout: Option<Duration>,
    pub term: TerminalOptions,
    pub remote: RemoteSettings,
}

/// Steps a resumed run skips: index → the run in which it succeeded; and the commands
/// the earlier run may have left running.
#[derive(Default)]
struct ResumePlan {
    from: Option<String>,
    done: HashMap<usize, String>,
    orphans: Vec<crate::orphans::Orphan>,
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
        let enforcer = crate::plan::Enforcer::new(plan);
        // A saved plan's shown reads and notes are held too: anyone may have edited it.
        let enforcer = match req.approval {
            Approval::Saved { .. } => enforcer.hold_texts(),
            _ => enforcer,
        };
        *loaded.ctx.watch.borrow_mut() = crate::plan::Watch::Held(enforcer);
    }
    let which = req.resume.as_deref().unwrap_or_default();
    let stopped = crate::orphans::settle(&loaded.ctx, which, &resume.orphans).await?;
    // Stopping an earlier run's command changed the world the dry-run read.
    if !stopped.is_empty() {
        loaded.ctx.send_reads_from_now();
    }

    let run_id = state::new_run_id();
    let (record_path, record_file) = state::create_record(&req.state_dir, &run_id)?;
    let ctx = loaded.ctx.clone();
    *ctx.run_id.borrow_mut() = Some(run_id.clone());
    if !req.json {
        ctx.bus.add_sink(Box::new(TerminalSink::new(req.term)));
    } else {
        ctx.bus.add_sink(Box::new(JsonSink));
    }
    let record = RecordSink::new(record_path.clone(), record_file);
    let record_failed = record.failed_flag();
    *ctx.record_failed.borrow_mut() = Some(record_failed.clone());
    ctx.bus.add_sink(Box::new(record));

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
    });
    if record_failed.get() {
        ctx.bus.finish();
        return Err(Error::Record(format!(
            "cannot write the run record {}; runbook will not run without a record (see --state-dir)",
            record_path.display()
        )));
    }
    crate::orphans::log(&ctx.bus, stopped);
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
    crate::watchdog::set_record(record_path.clone());
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
    crate::watchdog::closing(code);
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
                    serde_json::Value::String(crate::secrets::MASK.into())
                }
                Some(Some(v)) => v.to_json(),
                _ => serde_json::Value::Null,
            };
            (spec.name.clone(), v)
        })
        .collect()
}

fn resume_plan(req: &RunRequest, loaded: &Loaded, which: &str) -> Result<ResumePlan> {
    let header = loaded.header();
    let info = state::find_run(&req.state_dir, which, |r| {
        r.runbook == header.name && r.mode == "real"
    })
    .map_err(|e| Error::Resume(format!("--resume {which}: {e}")))?;
    if info.mode != "real" {
        return Err(Error::Resume(format!(
            "--resume {which}: run {} was a {}; only real runs can be resumed",
            info.id, info.mode
        )));
    }
    if info.runbook != header.name {
        return Err(Error::Resume(format!(
            "--resume {which}: run {} ran runbook '{}', not '{}'",
            info.id, info.runbook, header.name
        )));
    }
    if info.content_hash != req.source.content_hash() {
        return Err(Error::Resume(format!(
            "--resume {which}: {} changed since run {} (its content hash differs); resuming could skip steps that are not the ones that ran. Run it afresh without --resume",
            req.source.label, info.id
        )));
    }
    let events = state::read_events(&info.path)?;
    let now = params_for_record(&header);
    if let Some(Event::RunStarted { params, .. }) = events.first().map(|e| &e.event) {
        let differ: Vec<&String> = now
            .keys()
            .chain(params.keys())
            .filter(|k| now.get(*k) != params.get(*k))
            .collect();
        if let Some(k) = differ.first() {
            return Err(Error::Resume(format!(
                "--resume {which}: param '{k}' differs from run {} ({} then, {} now); resume with the same --set values",
                info.id,
                params.get(*k).map(|v| v.to_string()).unwrap_or("unset".into()),
                now.get(*k).map(|v| v.to_string()).unwrap_or("unset".into()),
            )));
        }
    }
    let steps = loaded.steps();
    let mut done = HashMap::new();
    for ev in &events {
        if let Event::StepFinished {
            index,
            name,
            outcome,
            ..
        } = &ev.event
        {
            let same_step = steps.get(*index).is_some_and(|s| &s.name == name);
            if same_step && matches!(outcome, StepResult::Ok | StepResult::Changed) {
                done.insert(*index, info.id.clone());
            } else {
                done.remove(index);
            }
        }
        // A step skipped in that run because an even earlier run did it is done too.
        if let Event::StepSkipped { index, reason, .. } = &ev.event {
            if let Some(prev) = reason.strip_prefix("done in run ") {
                done.insert(*index, prev.to_string());
            }
        }
    }
    Ok(ResumePlan {
        orphans: crate::orphans::find(&info.id, &events),
        from: Some(info.id),
        done,
    })
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
}

/// A plan, and why it is not whole when a step of the dry-run failed.
pub struct Planned {
    pub plan: Plan,
    pub failed: Option<String>,
    /// What the dry-run's reads answered, for a confirmation's pass (`kept_reads.rs`).
    pub kept: Option<crate::kept_reads::KeptReads>,
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
    *plan.ctx.watch.borrow_mut() = crate::plan::Watch::Recording(
        crate::plan::Recording::new(crate::plan::Salt::random())
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
    let crate::plan::Watch::Recording(mut recording) = plan.ctx.watch.take() else {
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
    let made = Plan::assemble(crate::plan::Pass {
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
    let cancel = Cancel::new();
    let _signals = cancel::watch_signals(cancel.clone());
    plan_pass(PlanPass {
        source,
        mode: if offline { Mode::Offline } else { Mode::DryRun },
        sets,
        cancel,
        remote,
        state_dir,
        timeout,
        targets: None,
        resume: &ResumePlan::default(),
    })
    .await
}

/// From now on the run's VM loads only the plan's Lua modules, byte for byte (`require`
/// asks `plan::Modules`); the ones its top level loaded already must be the plan's too.
fn hold_to_modules(loaded: &Loaded, plan: &Plan, label: &str) -> Result<()> {
    let held = loaded.ctx.modules.borrow_mut().hold_to(&plan.modules);
    held.map_err(|problems| {
        Error::PlanRefused(format!(
            "{label}: refused, nothing was changed: the Lua modules loaded are not the ones the plan was made with:\n  - {}\nmake a new plan and review it",
            problems.join("\n  - ")
        ))
    })
}

/// `apply`: the saved plan must be of what would run now: the same params (a secret's
/// salted digest), the runbook's name, description and steps as the plan shows them.
/// Otherwise nothing runs. Nothing here reaches a target.
fn check_saved(plan: &Plan, loaded: &Loaded, path: &str) -> Result<()> {
    let header = loaded.header();
    let mut problems = plan.param_differences(&header);
    let steps: Vec<(String, bool)> = loaded
        .steps()
        .iter()
        .map(|d| (d.name.clone(), d.opts.confirm))
        .collect();
    let mask = |t: &str| loaded.ctx.bus.mask(t);
    problems.extend(plan.loaded_differences(&header, &steps, &mask));
    refuse_saved(plan, loaded, path, problems)
}

/// `apply`: the saved plan's targets, resolved the same way (see `target_differences`).
async fn check_saved_targets(
    plan: &Plan,
    loaded: &Loaded,
    req: &RunRequest,
    path: &str,
) -> Result<()> {
    let problems = crate::plan::target_differences(
        plan,
        &loaded.ctx.targets,
        req.remote.inventory.as_deref(),
        &loaded.ctx.locks,
    )
    .await;
    refuse_saved(plan, loaded, path, problems)
}

fn refuse_saved(plan: &Plan, loaded: &Loaded, path: &str, problems: Vec<String>) -> Result<()> {
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::PlanRefused(loaded.ctx.bus.mask(&format!(
        "{path}: refused: what would run now is not what the plan was made for, so nothing was changed:\n  - {}\n\
         make a new plan (runbook plan {} …) and review it",
        problems.join("\n  - "),
        plan.runbook.path
    ))))
}

/// How `confirm` shows a plan.
struct Shown<'a> {
    /// The plan file (as named, and its sha256) of an `apply`, which shows the whole plan
    /// (params, targets) rather than only its changes.
    saved: Option<(&'a str, &'a str)>,
    /// Long scripts unfolded (`-v`).
    whole: bool,
}

/// Before a real run changes anything (Terraform's rule): if its plan holds any change,
/// or a step asks for it, show the plan and ask once (or refuse without a terminal).
async fn confirm(
    label: &str,
    plan: &Plan,
    shown: Shown<'_>,
    json: bool,
    cancel: &Rc<Cancel>,
    hint: &str,
) -> Result<()> {
    let asks = plan.confirm_steps();
    if plan.changes.is_empty() && asks.is_empty() {
        return Ok(());
    }
    let mut list = match shown.saved {
        Some(file) => plan.render(crate::plan::Style::Text, Some(file), shown.whole),
        None => plan.render_changes(crate::plan::Style::Text, shown.whole),
    };
    for name in asks {
        list.push_str(&format!(
            "  step \"{}\" asks for confirmation\n",
            crate::printable::line(name)
        ));
    }
    // The plan's text is masked already.
    let list = list.trim_end();
    use is_terminal::IsTerminal;
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal() && !json;
    let count = match plan.changes.len() {
        1 => "1 change".to_string(),
        n => format!("{n} changes"),
    };
    if !interactive {
        return Err(Error::NeedsConfirmation(format!(
            "{label} makes {count} and needs confirmation:\n{list}\nnothing was changed; {hint}"
        )));
    }
    eprintln!("{label} will make {count}:\n{list}");
    eprint!("Proceed? [y/N] ");
    // Read on a blocking thread so that Ctrl-C at the prompt still interrupts the run.
    let read = tokio::task::spawn_blocking(|| {
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        answer
    });
    let answer = tokio::select! {
        a = read => a.unwrap_or_default(),
        _ = cancel.notified() => {
            eprintln!();
            return Err(Error::Interrupted(cancel.interrupted().unwrap_or(Signal::Int)));
        }
    };
    if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        Ok(())
    } else {
        Err(Error::NotConfirmed)
    }
}

/// Runs the steps in order; `planning` for the silent dry-run behind a confirmation.
async fn run_steps(
    loaded: &Loaded,
    resume: &ResumePlan,
    run_timeout: Option<Duration>,
    planning: bool,
) -> Tally {
    let ctx = &loaded.ctx;
    ctx.phase.set(Phase::Running);
    let run_deadline = run_timeout.map(|t| Instant::now() + t);
    let steps = loaded.steps();
    let mut tally = Tally::default();
    let mut failed = false;
    for (index, step) in steps.iter().enumerate() {
        if ctx.hard_end.get().is_some_and(|h| Instant::now() >= h) {
            skip(
                ctx,
                &mut tally,
                index,
                step,
                "check's time for the plan ran out".into(),
            );
            continue;
        }
        let interrupted = ctx.cancel.count() > 0;
        let out_of_time = run_deadline.is_some_and(|d| Instant::now() >= d);
        if !step.opts.always && (failed || interrupted || out_of_time) {
            let reason = if interrupted {
                "the run was interrupted"
            } else if failed {
                "an earlier step failed"
            } else {
                "the run's --timeout ran out"
            };
            skip(ctx, &mut tally, index, step, reason.to_string());
            continue;
        }
        if let Some(prev) = resume.done.get(&index).filter(|_| !step.opts.always) {
            skip(ctx, &mut tally, index, step, format!("done in run {prev}"));
            continue;
        }
        let outcome = run_step(ctx, index, step, run_deadline, run_timeout, planning).await;
        match outcome {
            StepOutcome::Skipped(reason) => skip(ctx, &mut tally, index, step, reason),
            StepOutcome::Ok => tally.ok += 1,
            StepOutcome::Changed => {
                tally.ok += 1;
                tally.changed += 1
            }
            StepOutcome::Failed { changed } => {
                tally.failed += 1;
                // A failed step may still have changed things (some hosts of a parallel()).
                tally.changed += usize::from(changed);
                failed = true;
            }
        }
    }
    tally
}

fn skip(ctx: &Ctx, tally: &mut Tally, index: usize, step: &StepDecl, reason: String) {
    tally.skipped += 1;
    ctx.bus.emit(Event::StepSkipped {
        index,
        name: step.name.clone(),
        reason,
    });
}

enum StepOutcome {
    Ok,
    Changed,
    Failed { changed: bool },
    Skipped(String),
}

fn step_deadline(
    step: &StepDecl,
    run_deadline: Option<Instant>,
    hard_end: Option<Instant>,
) -> Option<Instant> {
    let now = Instant::now();
    let own = step.opts.timeout.map(|t| now + t);
    let deadline = match run_deadline {
        // An `always` step after the run ran out of time still gets a chance to clean up.
        Some(rd) if rd <= now && step.opts.always => Some(own.unwrap_or(now + ALWAYS_GRACE)),
        Some(rd) => Some(own.map_or(rd, |o| o.min(rd))),
        None => own,
    };
    match (deadline, hard_end) {
        (Some(d), Some(h)) => Some(d.min(h)),
        (d, h) => d.or(h),
    }
}

async fn run_step(
    ctx: &Ctx,
    index: usize,
    step: &StepDecl,
    run_deadline: Option<Instant>,
    run_timeout: Option<Duration>,
    planning: bool,
) -> StepOutcome {
    // Work in this step is interrupted by the *next* signal: after a Ctrl-C, `always`
    // steps still run, and a second Ctrl-C stops them.
    ctx.abort_at.set(ctx.cancel.count());
    // The step's planned changes are open from here: its `when` and its first attempt
    // share them, so a change made in `when` is not open again for the body (a retry
    // opens them all again, below).
    if let Some(enforcer) = ctx.watch.borrow_mut().held() {
        enforcer.step_attempt(index);
    }
    if let Some(when) = &step.opts.when {
        ctx.step.set(Some(StepCursor {
            index,
            changed: false,
        }));
        let deadline = step_deadline(step, run_deadline, ctx.hard_end.get());
        ctx.deadline.set(deadline);
        crate::watchdog::arm(index, &step.name, &step.location, deadline, planning);
        let decided = when.call_async::<Value>(()).await;
        crate::watchdog::disarm();
        let decided = decided.and_then(|v| still_standing(ctx, &step.location).map(|()| v));
        ctx.step.set(None);
        ctx.deadline.set(None);
        match decided {
            Ok(Value::Boolean(false) | Value::Nil) => {
                return StepOutcome::Skipped("its `when` condition is false".into())
            }
            Ok(_) => {}
            Err(e) => {
                let msg = format!(
                    "evaluating `when`: {}",
                    crate::lua_api::located(&e, &step.location)
                );
                finish(
                    ctx,
                    index,
                    step,
                    StepResult::Failed,
                    Duration::ZERO,
                    Some(msg),
                );
                return StepOutcome::Failed { changed: false };
            }
        }
    }
    let attempts = step.opts.retries + 1;
    let mut changed_any = false;
    for attempt in 1..=attempts {
        ctx.bus.emit(Event::StepStarted {
            index,
            name: step.name.clone(),
            attempt,
        });
        let deadline = step_deadline(step, run_deadline, ctx.hard_end.get());
        ctx.step.set(Some(StepCursor {
            index,
            changed: false,
        }));
        ctx.deadline.set(deadline);
        if attempt > 1 {
            if let Some(enforcer) = ctx.watch.borrow_mut().held() {
                enforcer.step_attempt(index);
            }
            // A retry is there to see something new: its reads are sent.
            ctx.send_reads_from_now();
        }
        *ctx.last_location.borrow_mut() = step.location.clone();
        crate::watchdog::arm(index, &step.name, &step.location, deadline, planning);
        let started = Instant::now();
        let result = step.func.call_async::<()>(()).await;
        crate::watchdog::disarm();
        let result = result.and_then(|()| still_standing(ctx, &step.location));
        let changed = ctx.step.get().is_some_and(|c| c.changed);
        changed_any |= changed;
        ctx.step.set(None);
        ctx.deadline.set(None);
        let took = started.elapsed();
        let err = match result {
            Ok(()) => {
                // Held to a plan: a planned change the step did not make (what it read
                // said there was nothing to do any more) is no difference, but is said.
                let not_run = match ctx.watch.borrow_mut().held() {
                    Some(e) => e.not_run(index),
                    None => Vec::new(),
                };
                for message in not_run {
                    ctx.bus.emit(Event::Log {
                        step: Some(index),
                        level: Level::Warn,
                        message,
                    });
                }
                let outcome = if changed {
                    StepResult::Changed
                } else {
                    StepResult::Ok
                };
                finish(ctx, index, step, outcome, took, None);
                return if changed {
                    StepOutcome::Changed
                } else {
                    StepOutcome::Ok
                };
            }
            Err(e) => e,
        };
        let aborted = ctx.aborted();
        let run_over = run_deadline.is_some_and(|d| Instant::now() >= d);
        let raw = crate::lua_api::located(&err, &step.location);
        // An abort names the line where it was noticed; the words are the engine's.
        let at = crate::abort::Abort::of(&err)
            .map(|a| a.at.clone())
            .unwrap_or_else(|| step.location.clone());
        let msg = if aborted {
            let sig = ctx.cancel.interrupted().unwrap_or(Signal::Int).name();
            format!("{at}: interrupted ({sig})")
        } else if deadline.is_some_and(|d| Instant::now() >= d) {
            let own_first = step
                .opts
                .timeout
                .is_some_and(|t| Some(started + t) <= run_deadline);
            match run_timeout {
                Some(rt) if run_over && !own_first => {
                    format!(
                        "{at}: the run's --timeout ({}) ran out",
                        duration::short(rt)
                    )
                }
                _ => format!(
                    "{at}: step timed out after {}",
                    duration::short(step.opts.timeout.unwrap_or_default())
                ),
            }
        } else if matches!(crate::lua_api::innermost(&err), mlua::Error::MemoryError(_)) {
            let near = ctx.last_location.borrow().clone();
            let at = if near.is_empty() {
                step.location.clone()
            } else {
                near
            };
            format!("{at}: {raw}")
        } else {
            raw
        };
        if attempt < attempts && !aborted && !run_over {
            ctx.bus.emit(Event::Log {
                step: Some(index),
                level: crate::events::Level::Warn,
                message: format!(
                    "step \"{}\" failed (attempt {attempt} of {attempts}), retrying in {}: {msg}",
                    step.name,
                    duration::short(step.opts.delay)
                ),
            });
            if !cancellable_sleep(ctx, step.opts.delay).await {
                finish(
                    ctx,
                    index,
                    step,
                    StepResult::Failed,
                    took,
                    Some("interrupted".into()),
                );
                return StepOutcome::Failed {
                    changed: changed_any,
                };
            }
            continue;
        }
        finish(ctx, index, step, StepResult::Failed, took, Some(msg));
        return StepOutcome::Failed {
            changed: changed_any,
        };
    }
    unreachable!("the last attempt always returns")
}

/// A step (or its `when`) that returned normally after its deadline or a signal caught
/// its own abort somewhere Lua turns errors into values: it failed all the same. The
/// error points where the hook last saw Lua run.
fn still_standing(ctx: &Ctx, fallback: &str) -> mlua::Result<()> {
    let at = ctx.last_location.borrow().clone();
    crate::lua_api::vm::abort_check(ctx, if at.is_empty() { fallback } else { &at })
}

/// Sleeps unless interrupted; returns false when a signal cut it short.
async fn cancellable_sleep(ctx: &Ctx, d: Duration) -> bool {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if ctx.aborted() {
            return false;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(until.into()) => {}
            _ = ctx.cancel.notified() => {}
        }
    }
    !ctx.aborted()
}

fn finish(
    ctx: &Ctx,
    index: usize,
    step: &StepDecl,
    outcome: StepResult,
    took: Duration,
    error: Option<String>,
) {
    ctx.bus.emit(Event::StepFinished {
        index,
        name: step.name.clone(),
        outcome,
        duration_ms: took.as_millis() as u64,
        error,
    });
}

fn whoami() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        // SAFETY: getuid has no failure mode.
        .unwrap_or_else(|| format!("uid {}", unsafe { libc::getuid() }))
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
