//! The one place that decides "really do it" or "plan it", for every command any Lua
//! function or primitive runs. It also turns each action into events.

use crate::ctx::{Ctx, Mode};
use crate::events::Event;
use crate::targets::{ExecIo, ExecOutcome, ExecRequest, Group, Stream, Target};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Only looks: runs for real during a dry-run.
    Read,
    /// Changes something: planned, not run, during a dry-run.
    Change,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Change => "change",
        }
    }
}

pub struct Action<'a> {
    pub target: &'a Target,
    pub req: ExecRequest,
    pub effect: Effect,
    /// One line for previews: what it does, e.g. `touch /tmp/demo/f1`.
    pub summary: String,
    /// Deletes, rebuilds or restores something: a real run asks before it starts.
    pub destructive: bool,
}

pub enum Performed {
    /// Not run: a dry-run planned it.
    Planned,
    Ran(ExecOutcome),
}

/// How much of each stream an `action_finished` event keeps (every line is also an
/// `output` event of its own).
const TAIL_BYTES: usize = 4096;

fn tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(TAIL_BYTES);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

pub async fn perform(ctx: &Ctx, action: Action<'_>) -> Result<Performed, String> {
    crate::quote::validate_argv(&action.req.argv)?;
    let step = ctx.step.get().map(|s| s.index).unwrap_or(0);
    let id = ctx.next_action_id();
    let target = action.target.name();
    let command = action.target.render(&action.req);
    let plan_only = match ctx.mode {
        Mode::Real => false,
        Mode::DryRun => action.effect == Effect::Change,
        Mode::Offline | Mode::Inspect => true,
    };
    if plan_only {
        if action.effect == Effect::Change {
            ctx.mark_changed();
        }
        ctx.bus.emit(Event::ActionPlanned {
            step,
            action: id,
            target,
            effect: action.effect.as_str().into(),
            summary: action.summary,
            command,
            destructive: action.destructive,
        });
        return Ok(Performed::Planned);
    }
    if ctx.mode == Mode::Real && action.effect == Effect::Change {
        if ctx.record_failed.borrow().as_ref().is_some_and(|f| f.get()) {
            return Err("the run record can no longer be written (see the error above); runbook does not make changes it cannot record".into());
        }
        ctx.locks.ensure(action.target).await?;
    }
    ctx.bus.emit(Event::ActionStarted {
        step,
        action: id,
        target,
        effect: action.effect.as_str().into(),
        summary: action.summary,
        command,
    });
    if action.effect == Effect::Change {
        ctx.mark_changed();
    }
    let on_line = |stream: Stream, line: &str| {
        ctx.bus.emit(Event::Output {
            step,
            action: id,
            stream: stream.as_str().into(),
            line: line.to_string(),
        })
    };
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
    let result = action.target.exec(&action.req, &io).await;
    let (ok, code, duration, timed_out, error, stdout_tail, stderr_tail) = match &result {
        Ok(o) => (
            o.code == Some(0) && !o.timed_out && !o.deadline_hit && !o.interrupted,
            o.code,
            o.duration,
            o.timed_out || o.deadline_hit,
            o.interrupted.then(|| "interrupted".to_string()),
            tail(&o.stdout),
            tail(&o.stderr),
        ),
        Err(e) => (
            false,
            None,
            Duration::ZERO,
            false,
            Some(e.clone()),
            String::new(),
            String::new(),
        ),
    };
    ctx.bus.emit(Event::ActionFinished {
        step,
        action: id,
        ok,
        code,
        duration_ms: duration.as_millis() as u64,
        timed_out,
        error,
        stdout_tail,
        stderr_tail,
    });
    result.map(Performed::Ran)
}
