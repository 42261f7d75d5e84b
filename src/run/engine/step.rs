//! Running the steps in order: each under its deadline, with its retries, `when` and
//! `always`, until one fails or the run is stopped.

use super::*;
use crate::actions::ctx::{Ctx, Phase, StepCursor, StepDecl};
use crate::actions::events::{Event, Level, StepOutcome as StepResult};
use crate::base::cancel::Signal;
use crate::base::duration;
use mlua::Value;
use std::time::{Duration, Instant};

/// What an `always` step gets when the run's `--timeout` has already run out.
pub(super) const ALWAYS_GRACE: Duration = Duration::from_secs(60);

/// Runs the steps in order; `planning` for the silent dry-run behind a confirmation.
pub(super) async fn run_steps(
    loaded: &Loaded,
    resume: &ResumePlan,
    run_timeout: Option<Duration>,
    planning: bool,
) -> Tally {
    let ctx = &loaded.ctx;
    ctx.phase.set(Phase::Running);
    *ctx.rollout_resume.borrow_mut() = resume.items.clone();
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
            tally.skipped += 1;
            ctx.bus.emit(Event::StepSkipped {
                index,
                name: step.name.clone(),
                reason: format!("done in run {prev}"),
                done_in: Some(prev.clone()),
            });
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

pub(super) fn skip(ctx: &Ctx, tally: &mut Tally, index: usize, step: &StepDecl, reason: String) {
    tally.skipped += 1;
    ctx.bus.emit(Event::StepSkipped {
        index,
        name: step.name.clone(),
        reason,
        done_in: None,
    });
}

pub(super) enum StepOutcome {
    Ok,
    Changed,
    Failed { changed: bool },
    Skipped(String),
}

pub(super) fn step_deadline(
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

pub(super) async fn run_step(
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
        ctx.step.set(Some(StepCursor { index, changes: 0 }));
        let deadline = step_deadline(step, run_deadline, ctx.hard_end.get());
        ctx.deadline.set(deadline);
        crate::run::watchdog::arm(index, &step.name, &step.location, deadline, planning);
        let decided = when.call_async::<Value>(()).await;
        crate::run::watchdog::disarm();
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
        ctx.step.set(Some(StepCursor { index, changes: 0 }));
        ctx.deadline.set(deadline);
        if attempt > 1 {
            if let Some(enforcer) = ctx.watch.borrow_mut().held() {
                enforcer.step_attempt(index);
            }
            // A retry is there to see something new: its reads are sent.
            ctx.send_reads_from_now();
        }
        *ctx.last_location.borrow_mut() = step.location.clone();
        crate::run::watchdog::arm(index, &step.name, &step.location, deadline, planning);
        let started = Instant::now();
        let result = step.func.call_async::<()>(()).await;
        crate::run::watchdog::disarm();
        let result = result.and_then(|()| still_standing(ctx, &step.location));
        let changed = ctx.step.get().is_some_and(|c| c.changed());
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
        let at = crate::base::abort::Abort::of(&err)
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
                level: crate::actions::events::Level::Warn,
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
pub(super) fn still_standing(ctx: &Ctx, fallback: &str) -> mlua::Result<()> {
    let at = ctx.last_location.borrow().clone();
    crate::lua_api::vm::abort_check(ctx, if at.is_empty() { fallback } else { &at })
}

/// Sleeps unless interrupted; returns false when a signal cut it short.
pub(super) async fn cancellable_sleep(ctx: &Ctx, d: Duration) -> bool {
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

pub(super) fn finish(
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
