//! `rollout()`: `parallel()` in batches, canary first, with one failure budget for the
//! whole rollout (Ansible's `serial` + `max_fail_percentage` counts per batch; this counts
//! once). Items of a batch run as `parallel()`'s do (coroutines on the one thread, at most
//! `limit` at a time); a batch starts when the one before it has finished.

use super::options::{self, AtLeastOne, LuaValue};
use super::parallel::{label_of, InParallel};
use super::{err_at, require_running};
use crate::actions::ctx::Earlier;
use crate::actions::events::{Event, Level};
use mlua::{Function, Lua, Table, Value};
use serde::Deserialize;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::Semaphore;

const DEFAULT_LIMIT: usize = 8;

/// An item of a batch: run now, or decided by what an earlier run did (`--resume`).
enum Job {
    Run(tokio::task::JoinHandle<Option<mlua::Result<Value>>>),
    Done(String),
    FailedIn(String),
}

/// Options of `rollout`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutOptions {
    /// `batches` (default `{ 1, "25%", "100%" }`): the size of each batch, a whole number
    /// of items or a percentage of all of them (rounded up, at least 1); the last size
    /// repeats until every item had its turn;
    /// ---@type (integer|string)[]
    batches: Option<LuaValue>,
    /// `max_failures` (a whole number or a percentage of all items, rounded down;
    /// default 0): how many items may fail in the whole rollout. One more, and no new
    /// item starts: those running finish, and the step fails listing each failed item
    /// and each one never started. Within the budget the rollout goes on and the step
    /// succeeds, its failed items logged and returned in `failed`;
    /// ---@type integer|string
    max_failures: Option<LuaValue>,
    /// `pause_between` (a duration): wait this long between batches (the step's timeout
    /// and Ctrl-C still end the wait);
    #[serde(default, deserialize_with = "options::duration")]
    pause_between: Option<Duration>,
    /// `pause = "after_first"`: stop after the canary batch, its results on screen. On a
    /// terminal runbook asks whether to go on (yes: the rest runs in the same run);
    /// otherwise (no terminal, `--json`, or the answer no) the step ends failed saying
    /// so, and `--resume` continues the rollout from the second batch (the canary is not
    /// run again);
    pause: Option<String>,
    /// `limit` (a whole number, default 8): how many items of a batch run at a time.
    limit: Option<AtLeastOne>,
}

pub fn register(lua: &Lua) -> mlua::Result<()> {
    lua.globals()
        .raw_set("rollout", super::async_function(lua, rollout)?)
}

/// A size as given: a count, or a fraction of all items.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Size {
    Count(usize),
    Percent(f64),
}

impl Size {
    fn parse(v: &Value, what: &str) -> Result<Size, String> {
        match v {
            Value::Integer(n) if *n >= 0 => Ok(Size::Count(*n as usize)),
            Value::Number(n) if *n >= 0.0 && n.fract() == 0.0 => Ok(Size::Count(*n as usize)),
            Value::String(s) => {
                let text = s.to_string_lossy();
                let pct = text
                    .strip_suffix('%')
                    .and_then(|p| p.trim().parse::<f64>().ok())
                    .filter(|p| (0.0..=100.0).contains(p));
                pct.map(Size::Percent).ok_or_else(|| {
                    format!("{what}: expected a whole number or a percentage like \"25%\", got \"{text}\"")
                })
            }
            other => Err(format!(
                "{what}: expected a whole number or a percentage like \"25%\", got {}",
                other.type_name()
            )),
        }
    }
}

/// The batches' sizes for `total` items: each size in turn (the last repeated), a
/// percentage of the total rounded up, never 0, and the last batch cut to what is left.
fn batch_sizes(sizes: &[Size], total: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut left = total;
    let mut i = 0;
    while left > 0 {
        let size = sizes[i.min(sizes.len() - 1)];
        let n = match size {
            Size::Count(n) => n,
            Size::Percent(p) => (p / 100.0 * total as f64).ceil() as usize,
        };
        let n = n.max(1).min(left);
        out.push(n);
        left -= n;
        i += 1;
    }
    out
}

/// The failure budget: a count, or a percentage of all items rounded down.
fn budget(size: Size, total: usize) -> usize {
    match size {
        Size::Count(n) => n,
        Size::Percent(p) => (p / 100.0 * total as f64).floor() as usize,
    }
}

/// Lua: rollout(items, fn, [opts]) -> results
///
/// Calls `fn(item)` for every item in batches: the first batch (the canary) alone, then
/// each next one once the one before has finished, as `batches` says. One failure budget
/// (`max_failures`) counts across every batch: once it is spent, no new item starts, the
/// running ones finish, and the step fails with one line per failed item and one per
/// item never started. Within the budget the rollout goes on to the end. Each item gets
/// a `rollout_item` event in the record (its batch and outcome). `--resume` continues the
/// same rollout: items that succeeded are skipped (`done in run …`), items that failed
/// stay failed and count against the budget unless `--retry-failed` runs them again,
/// items never started start. Returns `fn`'s results in item order (nil for an item
/// skipped), with `failed`, the labels of the items that failed within the budget.
/// Options ([`RolloutOptions`]):
///
/// ```lua
/// step("clean reset, canary first", function()
///   rollout(targets("gpu"), function(t)
///     t:exec({ "systemctl", "restart", "trainer" })
///   end, { batches = { 1, "25%", "100%" }, max_failures = "10%", pause_between = "2m" })
/// end)
/// ```
/// ---@generic I, R
/// ---@param items I[]
/// ---@param fn fun(item: I): R
/// ---@param opts? runbook.RolloutOptions
/// ---@return R[]
async fn rollout(
    lua: Lua,
    (items, func, opts): (Value, Value, Option<Table>),
) -> mlua::Result<Table> {
    let ctx = require_running(&lua, "rollout()")?;
    let Value::Table(items) = items else {
        return Err(err_at(
            &lua,
            "rollout(): the first argument is a list of items (e.g. targets(\"gpu\"))",
        ));
    };
    let Value::Function(func) = func else {
        return Err(err_at(
            &lua,
            "rollout(): the second argument is a function called with each item",
        ));
    };
    let o: RolloutOptions = options::read(&lua, "rollout()", opts)?;
    let items: Vec<Value> = items
        .sequence_values::<Value>()
        .collect::<mlua::Result<_>>()?;
    let total = items.len();
    let sizes = match &o.batches {
        None => vec![Size::Count(1), Size::Percent(25.0), Size::Percent(100.0)],
        Some(LuaValue(Value::Table(t))) => {
            let mut sizes = Vec::new();
            for (i, v) in t.sequence_values::<Value>().enumerate() {
                sizes.push(
                    Size::parse(&v?, &format!("rollout(): batches[{}]", i + 1))
                        .map_err(|e| err_at(&lua, e))?,
                );
            }
            if sizes.is_empty() {
                return Err(err_at(
                    &lua,
                    "rollout(): batches is empty; give at least one size",
                ));
            }
            sizes
        }
        Some(LuaValue(other)) => {
            return Err(err_at(
                &lua,
                format!(
                "rollout(): batches is a list of sizes, e.g. {{ 1, \"25%\", \"100%\" }}, got {}",
                other.type_name()
            ),
            ))
        }
    };
    let allowed = match &o.max_failures {
        None => 0,
        Some(LuaValue(v)) => budget(
            Size::parse(v, "rollout(): max_failures").map_err(|e| err_at(&lua, e))?,
            total,
        ),
    };
    let pause_after_first = match o.pause.as_deref() {
        None => false,
        Some("after_first") => true,
        Some(other) => {
            return Err(err_at(
                &lua,
                format!("rollout(): pause is \"after_first\" (stop after the canary batch), got \"{other}\"; to wait between batches, pause_between = \"2m\""),
            ))
        }
    };
    let limit = o.limit.map_or(DEFAULT_LIMIT, |n| n.count());
    let batches = batch_sizes(&sizes, total);
    let step = ctx.step.get().map(|s| s.index);
    let log = |level: Level, message: String| {
        ctx.bus.emit(Event::Log {
            step,
            level,
            message,
        })
    };
    let _marked = InParallel::mark(&ctx);
    let results = lua.create_table()?;
    let failed_labels = lua.create_table()?;
    // Shared with the items' tasks, so an item that fails spends the budget at once and
    // an item of the same batch still waiting for a slot does not start.
    let failures = Rc::new(Cell::new(0usize));
    let mut failed: Vec<String> = Vec::new();
    let mut never: Vec<String> = Vec::new();
    // The labels of the canary batch's items that ran in this run (not skipped as done).
    let mut canary_ran: Vec<String> = Vec::new();
    let mut paused = false;
    let mut items = items.into_iter().enumerate();
    for (b, size) in batches.iter().enumerate() {
        if b == 1 && pause_after_first && !canary_ran.is_empty() && failures.get() <= allowed {
            // On a terminal, the person decides now, the canary's lines above; elsewhere
            // (--json, CI) the run stops, and --resume goes on.
            let ask = ctx.ask.borrow().clone();
            let go_on = match ask {
                Some(ask) => {
                    let left = total - canary_ran.len();
                    ask(format!(
                        "rollout: the canary batch is done ({}: {}); go on with the other {left} item(s)?",
                        canary_ran.join(", "),
                        if failures.get() == 0 { "ok".to_string() } else { format!("{} failed, within the budget", failures.get()) },
                    ))
                    .await
                }
                None => false,
            };
            if !go_on {
                paused = true;
                break;
            }
            log(
                Level::Info,
                "the canary batch was confirmed: going on".into(),
            );
        }
        let spent = failures.get() > allowed;
        if b > 0 && !spent {
            if let Some(wait) = o.pause_between {
                log(
                    Level::Info,
                    format!(
                        "batch {b} of {} done; waiting {} before the next",
                        batches.len(),
                        crate::base::duration::short(wait)
                    ),
                );
                let until = tokio::time::Instant::now() + wait;
                while tokio::time::Instant::now() < until {
                    super::vm::abort_check(&ctx, &super::location(&lua))?;
                    tokio::time::sleep(
                        Duration::from_millis(100).min(until - tokio::time::Instant::now()),
                    )
                    .await;
                }
            }
        }
        if !spent {
            log(
                Level::Info,
                format!(
                    "batch {} of {}: {} item(s), {} failure(s) so far of the {allowed} allowed",
                    b + 1,
                    batches.len(),
                    size,
                    failures.get()
                ),
            );
        }
        let slots = Rc::new(Semaphore::new(limit.min(*size).max(1)));
        let mut tasks = Vec::new();
        for _ in 0..*size {
            let Some((i, item)) = items.next() else { break };
            let label = label_of(&item, i);
            // A resumed run: what the earlier run did with this item decides.
            let earlier = ctx
                .rollout_resume
                .borrow()
                .items
                .get(&(step.unwrap_or_default(), label.clone()))
                .cloned();
            match earlier {
                Some(Earlier::Done(run)) => {
                    tasks.push((i, label, Job::Done(run)));
                    continue;
                }
                Some(Earlier::Failed(run)) if !ctx.rollout_resume.borrow().retry_failed => {
                    // It spends the budget before the items after it start.
                    failures.set(failures.get() + 1);
                    tasks.push((i, label, Job::FailedIn(run)));
                    continue;
                }
                _ => {}
            }
            let func: Function = func.clone();
            let slots = slots.clone();
            let failures = failures.clone();
            tasks.push((
                i,
                label,
                Job::Run(tokio::task::spawn_local(async move {
                    let _slot = slots.acquire().await;
                    if failures.get() > allowed {
                        return None;
                    }
                    let out = func.call_async::<Value>(item).await;
                    if out.is_err() {
                        failures.set(failures.get() + 1);
                    }
                    Some(out)
                })),
            ));
        }
        for (i, label, job) in tasks {
            let task = match job {
                Job::Run(task) => task,
                Job::Done(run) => {
                    log(
                        Level::Info,
                        format!("[batch {}] {label}: done in run {run}", b + 1),
                    );
                    ctx.bus.emit(Event::RolloutItem {
                        step,
                        index: i,
                        label,
                        batch: b + 1,
                        outcome: "done".into(),
                        error: None,
                        done_in: Some(run),
                    });
                    continue;
                }
                Job::FailedIn(run) => {
                    let msg =
                        format!("failed in run {run} (not run again; --retry-failed runs it)");
                    log(
                        Level::Error,
                        format!("[batch {}] {label}: failed in run {run}", b + 1),
                    );
                    failed.push(format!("  {label}: {msg}"));
                    failed_labels.raw_set(failed_labels.raw_len() + 1, label.clone())?;
                    ctx.bus.emit(Event::RolloutItem {
                        step,
                        index: i,
                        label,
                        batch: b + 1,
                        outcome: "failed".into(),
                        error: Some(msg),
                        done_in: None,
                    });
                    continue;
                }
            };
            let outcome = task.await.map_err(|e| {
                mlua::Error::runtime(format!("rollout(): item {label} panicked: {e}"))
            })?;
            if b == 0 && outcome.is_some() {
                canary_ran.push(label.clone());
            }
            let (word, error) = match outcome {
                None => {
                    never.push(label.clone());
                    ("not_started", None)
                }
                Some(Ok(v)) => {
                    results.raw_set(i + 1, v)?;
                    log(Level::Info, format!("[batch {}] {label}: ok", b + 1));
                    ("ok", None)
                }
                Some(Err(e)) => {
                    let msg = super::error_message(&e);
                    // Why, once: in the list of failures the rollout ends with (the
                    // step's error, or a warning within the budget).
                    log(Level::Error, format!("[batch {}] {label}: failed", b + 1));
                    failed.push(format!("  {label}: {msg}"));
                    failed_labels.raw_set(failed_labels.raw_len() + 1, label.clone())?;
                    ("failed", Some(msg))
                }
            };
            ctx.bus.emit(Event::RolloutItem {
                step,
                index: i,
                label,
                batch: b + 1,
                outcome: word.into(),
                error,
                done_in: None,
            });
        }
    }
    // Items of batches that never began.
    for (i, item) in items {
        let label = label_of(&item, i);
        ctx.bus.emit(Event::RolloutItem {
            step,
            index: i,
            label: label.clone(),
            batch: 0,
            outcome: "not_started".into(),
            error: None,
            done_in: None,
        });
        never.push(label);
    }
    super::vm::abort_check(&ctx, &super::location(&lua))?;
    if paused {
        return Err(err_at(
            &lua,
            format!(
                "rollout(): paused after the canary batch ({}: {}), as pause = \"after_first\" asks; {} item(s) wait: continue the rollout with --resume (the canary is not run again)",
                canary_ran.join(", "),
                if failures.get() == 0 { "ok".to_string() } else { format!("{} failed, within the budget", failures.get()) },
                never.len()
            ),
        ));
    }
    if failures.get() > allowed {
        let mut lines = failed;
        lines.extend(never.iter().map(|l| format!("  {l}: never started")));
        return Err(err_at(
            &lua,
            format!(
                "rollout(): {} of {total} failed, more than the {allowed} allowed (max_failures): stopped, {} never started:\n{}",
                failures.get(),
                never.len(),
                lines.join("\n")
            ),
        ));
    }
    if !failed.is_empty() {
        log(
            Level::Warn,
            format!(
                "rollout(): {} of {total} failed, within the {allowed} allowed:\n{}",
                failed.len(),
                failed.join("\n")
            ),
        );
    }
    results.raw_set("failed", failed_labels)?;
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_follow_the_sizes_the_last_repeated() {
        let canary = [Size::Count(1), Size::Percent(25.0), Size::Percent(100.0)];
        assert_eq!(batch_sizes(&canary, 10), [1, 3, 6]);
        assert_eq!(batch_sizes(&canary, 1), [1]);
        assert_eq!(batch_sizes(&canary, 0), Vec::<usize>::new());
        assert_eq!(batch_sizes(&[Size::Count(2)], 5), [2, 2, 1]);
        assert_eq!(batch_sizes(&[Size::Percent(0.0)], 2), [1, 1]);
        assert_eq!(budget(Size::Percent(10.0), 64), 6);
        assert_eq!(budget(Size::Count(2), 64), 2);
    }
}
