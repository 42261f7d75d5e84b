//! Loading a runbook: its file run in a fresh sandboxed VM under a time budget, which
//! declares the header and the steps and runs nothing else; and `check`'s offline plan.

use super::*;
use crate::actions::ctx::{Ctx, Header, Mode, StepDecl};
use crate::base::cancel::{Cancel, Signal};
use crate::base::error::{Error, Result};
use crate::lua_api::error_message;
use crate::run::sandbox;
use crate::run::source::Source;
use crate::targets::registry::RemoteSettings;
use mlua::{Lua, Value};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long the top level of a file may run while it declares its steps.
pub(super) const LOAD_BUDGET: Duration = Duration::from_secs(10);

/// How long `check` lets an offline plan of a file's steps run (see `offline_warnings`).
pub(super) const CHECK_BUDGET: Duration = Duration::from_secs(5);

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
    /// How many steps it declares (`steps` copies them all).
    pub fn step_count(&self) -> usize {
        self.ctx.steps.borrow().len()
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
pub(super) fn load_with(
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
    let api_tables = crate::run::lint::typos::api_tables(&lua);
    let api_functions = crate::run::lint::typos::api_functions(&lua);
    let chunk = sandbox::compile(&lua, &source.bytes, &source.label)
        .map_err(|e| Error::Runbook(error_message(&e)))?;
    let deadline = Instant::now() + LOAD_BUDGET;
    ctx.deadline.set(Some(deadline));
    crate::run::watchdog::arm_load(&source.label, deadline);
    let result = chunk.call::<()>(());
    crate::run::watchdog::disarm();
    // The top level may have caught its own abort where Lua turns errors into values
    // (a `load` reader, `coroutine.close`): the abort still stands.
    let result = result.and_then(|()| still_standing(&ctx, &source.label));
    ctx.deadline.set(None);
    if let Err(e) = result {
        let msg = error_message(&e);
        match crate::base::abort::Abort::of(&e) {
            Some(a) if a.why == crate::base::abort::Why::Interrupted => {
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
        if let Some(rejected) = e.downcast_ref::<crate::base::params::Rejected>() {
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
    check_globals(&lua, &chunk, source, &api_tables, &api_functions)?;
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
    // Bounded, `always` steps included: a step that loops in its Lua code must not make
    // `check` hang.
    plan.ctx.hard_end.set(Some(Instant::now() + CHECK_BUDGET));
    run_steps(&plan, &ResumePlan::default(), Some(CHECK_BUDGET), true).await;
    let mut out = plan.ctx.secret_in_argv.borrow().clone();
    out.dedup();
    out
}

/// Reads of undefined globals anywhere in the file, step bodies included, stop the run
/// before its first step: a typo in the last step must not surface after the first ones
/// changed things. Known globals are what the sandbox and the file's top level defined.
/// So do misspelt API names (`cache.clera`, `here:exce`: `lint::typos`).
pub(super) fn check_globals(
    lua: &Lua,
    chunk: &mlua::Function,
    source: &Source,
    api_tables: &[String],
    api_functions: &std::collections::BTreeMap<&'static str, usize>,
) -> Result<()> {
    let text = crate::run::lint::text(&source.bytes);
    let mut known: Vec<String> = Vec::new();
    for pair in lua.globals().pairs::<Value, Value>() {
        if let Ok((Value::String(k), _)) = pair {
            known.push(k.to_string_lossy());
        }
    }
    let known_refs: Vec<&str> = known.iter().map(String::as_str).collect();
    // Read from the chunk the load compiled and ran, not compiled again; what cannot be
    // read is the linter's own limit, not the user's mistake: do not block the run on it.
    let Ok(found) = crate::run::lint::unknown_globals_in(&chunk.dump(false), &known_refs) else {
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
                    crate::base::suggest::hint(&g.name, known_refs.iter().copied())
                ),
            };
            problems.push((g.line, format!("{}:{}: {why}", source.label, g.line)));
        }
    }
    let mut known = crate::run::lint::typos::Known::read(api_tables, lua, &text);
    known.keep_options_of_unchanged(api_functions, &crate::run::lint::typos::api_functions(lua));
    // `params.NAME` against the declared params: the proxy names a misspelling only
    // when its line runs, which may be after earlier steps changed things.
    if let Some(header) = crate::lua_api::ctx(lua).header.borrow().as_ref() {
        known.tables.insert(
            "params".into(),
            header.params.iter().map(|p| p.name.clone()).collect(),
        );
    }
    // As above: what the parser cannot read, Lua could; Lua has the last word.
    for t in crate::run::lint::typos::find(&text, &known).unwrap_or_default() {
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
