//! An action that runs: a slot on its target, `action_started`, the command (or, for a
//! read a dry-run sent moments ago, what it answered then), and what the command left
//! to say once it ended.

use super::output::Lines;
use super::{Action, ActionError, Effect, Shown};
use crate::actions::ctx::{Ctx, Mode};
use crate::actions::events::{Event, Level};
use crate::actions::kept_reads::Key;
use crate::base::abort::Why;
use crate::targets::detach::Detach;
use crate::targets::pump::Stop;
use crate::targets::{ExecIo, ExecOutcome, ExecRequest, Group, TargetError};

/// Whether this action's lines are kept for a replay: a dry-run's reads, when the
/// dry-run keeps them (`kept_reads.rs`).
pub fn keeps_lines(ctx: &Ctx, effect: Effect) -> bool {
    ctx.mode == Mode::DryRun && effect == Effect::Read && ctx.kept_reads.borrow().is_some()
}

/// Runs `action` (its events as `event` shows it; `key` names it to the kept reads), its
/// lines going to `lines`. The outer error: it never started (the step was stopped while
/// it waited for a slot); the inner: it started and could not run to an exit status.
pub async fn run(
    ctx: &Ctx,
    action: &Action<'_>,
    event: &Shown<'_>,
    key: &Key<'_>,
    lines: &Lines<'_>,
) -> Result<Result<ExecOutcome, TargetError>, ActionError> {
    let (step, id) = (event.step, event.id);
    // In a run whose plan changes nothing, a read the dry-run sent moments ago is
    // answered with what it answered then (`kept_reads.rs`).
    let answer = match (ctx.mode, action.effect) {
        (Mode::Real, Effect::Read) => ctx
            .kept_reads
            .borrow_mut()
            .as_mut()
            .and_then(|k| k.answer(key)),
        _ => None,
    };
    let on_line = |stream, piece: &str, continues| lines.line(stream, piece, continues);
    let on_group = |group: &Group| {
        ctx.bus.emit(Event::ActionPgid {
            step,
            action: id,
            target: action.target.name(),
            pgid: group.pgid,
            start_time: group.start_time,
            boot_id: group.boot_id.clone(),
            via: action.target.route(),
        })
    };
    let io = ExecIo {
        on_line: &on_line,
        deadline: ctx.deadline.get(),
        cancel: &ctx.cancel,
        abort_at: ctx.abort_at.get(),
        on_group: Some(&on_group),
    };
    // Queued here, not failed, when the target or this process is at its limit of
    // commands at once (`targets/slots.rs`); `action_started` means it really started.
    // An answered read runs nothing, so it takes no slot.
    let _slot = match answer {
        Some(_) => None,
        None => Some(action.target.slot(&io).await.map_err(|stop| match stop {
            Stop::Interrupted => ActionError::Stop(Why::Interrupted),
            Stop::Deadline | Stop::Timeout => ActionError::Stop(Why::TimedOut),
        })?),
    };
    event.started(ctx, answer.is_some());
    if action.effect == Effect::Change {
        ctx.mark_changed();
    }
    let result = match answer {
        Some(answer) => {
            for (stream, piece, continues) in &answer.pieces {
                lines.line(*stream, piece, *continues);
            }
            Ok(answer.out)
        }
        None if action.detach => {
            let req = detached(ctx, action, event);
            action.target.exec(&req, &io).await
        }
        None => action.target.exec(&action.req, &io).await,
    };
    if let Ok(out) = &result {
        if keeps_lines(ctx, action.effect) {
            if let Some(kept) = ctx.kept_reads.borrow_mut().as_mut() {
                kept.keep(key, lines.kept(), out);
            }
        }
    }
    Ok(result)
}

/// `action`'s request, detached: as the job a resumed run's earlier run left running
/// for the same step, target and command, or as a new one. The job is in the record
/// before the command starts, so that a run killed at any moment leaves it findable.
fn detached(ctx: &Ctx, action: &Action<'_>, event: &Shown<'_>) -> ExecRequest {
    let step_name = ctx
        .steps
        .borrow()
        .get(event.step)
        .map(|s| s.name.clone())
        .unwrap_or_default();
    let key = (
        step_name.clone(),
        event.target.to_string(),
        event.shown.to_string(),
    );
    let job = ctx
        .detached_resume
        .borrow_mut()
        .remove(&key)
        .unwrap_or_else(crate::targets::session::token);
    ctx.bus.emit(Event::ActionDetached {
        step: event.step,
        action: event.id,
        target: event.target.to_string(),
        job: job.clone(),
    });
    let mut req = action.req.clone();
    req.detach = Some(Detach {
        job,
        run: ctx.run_id.borrow().clone().unwrap_or_default(),
        step: step_name,
    });
    req
}

/// What a command that ran leaves to say, after its last line: the target's notice, the
/// rest of a line cut at its very end, and (for a command whose output is secret) that
/// output, masked from now on wherever it appears.
pub fn ended(
    ctx: &Ctx,
    action: &Action<'_>,
    step: usize,
    result: &Result<ExecOutcome, TargetError>,
    lines: &Lines<'_>,
) {
    if let Some(message) = result.as_ref().ok().and_then(|o| o.notice.clone()) {
        ctx.bus.emit(Event::Log {
            step: Some(step),
            level: Level::Warn,
            message,
        });
    }
    lines.end();
    if let (true, Ok(o)) = (action.req.secret_output, result) {
        let text = String::from_utf8_lossy(&o.stdout);
        if !text.trim().is_empty() {
            ctx.bus
                .add_secret(text.trim(), &format!("the output of `{}`", action.summary));
        }
    }
}
