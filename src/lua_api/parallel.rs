//! `parallel()`: fan-out over targets (or any items) as Lua coroutines on the one runtime
//! thread, not an OS thread per host.

use super::options::{self, AtLeastOne};
use super::{err_at, require_running};
use crate::actions::events::Event;
use mlua::{Function, Lua, Table, Value};
use serde::Deserialize;
use std::rc::Rc;
use tokio::sync::Semaphore;

const DEFAULT_LIMIT: usize = 8;

/// Options of `parallel`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParallelOptions {
    /// `limit` (a whole number, default 8; any limit above the number of items means all
    /// at once): how many items run at a time.
    limit: Option<AtLeastOne>,
}

pub fn register(lua: &Lua) -> mlua::Result<()> {
    lua.globals()
        .raw_set("parallel", super::async_function(lua, parallel)?)
}

/// Lua: parallel(items, fn, [opts]) -> results
///
/// Calls `fn(item)` for every item of the list concurrently, at most `limit` at a time.
/// Commands are queued, not failed, beyond what the targets can take: commands on one SSH
/// host share its connection, up to 8 channels at a time, and local commands (`pct` on
/// this machine included) are bounded by this process's open-file limit. Every
/// item runs to the end even when others fail; then, if any failed, the step fails with
/// one line per failed item. Returns the list of `fn`'s results, in item order.
/// Options ([`ParallelOptions`]):
///
/// ```lua
/// step("uptime everywhere", function()
///   parallel(targets("gpu"), function(t) t:exec({ "uptime" }, { read_only = true }) end, { limit = 8 })
/// end)
/// ```
/// ---@generic I, R
/// ---@param items I[]
/// ---@param fn fun(item: I): R
/// ---@param opts? runbook.ParallelOptions
/// ---@return R[]
async fn parallel(
    lua: Lua,
    (items, func, opts): (Value, Value, Option<Table>),
) -> mlua::Result<Table> {
    let ctx = require_running(&lua, "parallel()")?;
    let Value::Table(items) = items else {
        return Err(err_at(
            &lua,
            "parallel(): the first argument is a list of items (e.g. targets(\"gpu\"))",
        ));
    };
    let Value::Function(func) = func else {
        return Err(err_at(
            &lua,
            "parallel(): the second argument is a function called with each item",
        ));
    };
    let o: ParallelOptions = options::read(&lua, "parallel()", opts)?;
    let limit = o.limit.map_or(DEFAULT_LIMIT, |n| n.count());
    let items: Vec<Value> = items
        .sequence_values::<Value>()
        .collect::<mlua::Result<_>>()?;
    let total = items.len();
    // A limit above the number of items means "all at once"; clamping also keeps it
    // under what tokio's semaphore can count (it panics above `MAX_PERMITS`). How many
    // commands really run at once is bounded further down, per target and per process.
    let slots = Rc::new(Semaphore::new(limit.min(total).max(1)));
    // A plan records the changes its items make as made in any order (they finish in
    // any order), and shows them so; the rest of a step is held to the plan's order.
    let _marked = InParallel::mark(&ctx);
    let mut tasks = Vec::with_capacity(total);
    for (i, item) in items.into_iter().enumerate() {
        let label = label_of(&item, i);
        let func: Function = func.clone();
        let slots = slots.clone();
        let ctx = ctx.clone();
        let said = label.clone();
        tasks.push((
            label,
            tokio::task::spawn_local(async move {
                let _slot = slots.acquire().await;
                let outcome = func.call_async::<Value>(item).await;
                // Said as each item ends, not in the list's order: one slow host must not
                // hold back the lines of the hundreds that finished (measured at 200).
                said_done(&ctx, &outcome, i, total, &said);
                outcome
            }),
        ));
    }
    let results = lua.create_table()?;
    let mut failures = Vec::new();
    let mut stopped = 0;
    for (i, (label, task)) in tasks.into_iter().enumerate() {
        let outcome = task
            .await
            .map_err(|e| mlua::Error::runtime(format!("parallel(): item {label} panicked: {e}")))?;
        match outcome {
            Ok(v) => results.raw_set(i + 1, v)?,
            Err(e) => {
                // Why, once: in the step's error below, which lists every failed item.
                failures.push(format!("  {label}: {}", super::error_message(&e)));
                if stopped_by_abort(&ctx, &e) {
                    stopped += 1;
                }
            }
        }
    }
    if stopped > 0 {
        ctx.bus.emit(Event::Log {
            step: ctx.step.get().map(|s| s.index),
            level: crate::actions::events::Level::Error,
            message: format!("{stopped} of {total} did not finish: the step was stopped"),
        });
    }
    if failures.is_empty() {
        return Ok(results);
    }
    // An abort (timeout, Ctrl-C) is reported as such by the engine, not as item failures.
    super::vm::abort_check(&ctx, &super::location(&lua))?;
    Err(err_at(
        &lua,
        format!(
            "parallel(): {} of {total} failed:\n{}",
            failures.len(),
            failures.join("\n")
        ),
    ))
}

/// After a timeout or Ctrl-C, every item still queued fails the same way: one line
/// says so at the end instead of thousands of identical ones.
fn stopped_by_abort(ctx: &crate::actions::ctx::Ctx, e: &mlua::Error) -> bool {
    (ctx.aborted() || ctx.past_deadline()) && crate::base::abort::Abort::of(e).is_some()
}

/// The line that says item `i` (of `total`, named `label`) ended: ok or failed.
fn said_done(
    ctx: &crate::actions::ctx::Ctx,
    outcome: &mlua::Result<Value>,
    i: usize,
    total: usize,
    label: &str,
) {
    let (level, word) = match outcome {
        Ok(_) => (crate::actions::events::Level::Info, "ok"),
        Err(e) if stopped_by_abort(ctx, e) => return,
        Err(_) => (crate::actions::events::Level::Error, "failed"),
    };
    ctx.bus.emit(Event::Log {
        step: ctx.step.get().map(|s| s.index),
        level,
        message: format!("[{}/{total}] {label}: {word}", i + 1),
    });
}

/// While a `parallel()` runs its items, the plan pass's recording marks each change as
/// one of a parallel (`Recording::parallel`); dropped on every way out.
pub(super) struct InParallel(Rc<crate::actions::ctx::Ctx>);

impl InParallel {
    pub(super) fn mark(ctx: &Rc<crate::actions::ctx::Ctx>) -> Self {
        if let Some(rec) = ctx.watch.borrow_mut().recording() {
            rec.parallel += 1;
        }
        InParallel(ctx.clone())
    }
}

impl Drop for InParallel {
    fn drop(&mut self) {
        if let Some(rec) = self.0.watch.borrow_mut().recording() {
            rec.parallel = rec.parallel.saturating_sub(1);
        }
    }
}

/// How an item is named in progress lines: a target's name, a string, or its position.
pub(super) fn label_of(item: &Value, i: usize) -> String {
    if let Value::UserData(ud) = item {
        if let Ok(t) = ud.borrow::<super::target::TargetHandle>() {
            return t.0.name();
        }
    }
    match item {
        Value::String(s) => s.to_string_lossy(),
        Value::Integer(n) => n.to_string(),
        _ => format!("item {}", i + 1),
    }
}
