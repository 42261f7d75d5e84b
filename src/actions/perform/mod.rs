//! The one place that decides "really do it" or "plan it", for every command any Lua
//! function or primitive runs, and turns each action into events. [`perform`] is the
//! whole path of one command, stage by stage, each stage in its own file:
//!
//! 1. `render.rs`: the command's two lines, rendered once (the exact one a plan holds,
//!    the one people see);
//! 2. here: whether it only is planned (the mode, and holes of changes known only after
//!    apply);
//! 3. `watch.rs`: the plan pass records it, or a run held to a plan checks it;
//! 4. `run.rs`: a slot, `action_started`, the command on its target (or a kept answer);
//!    `output.rs`: its lines masked, kept and made events, and the tails;
//! 5. `watch.rs` again for a read's result, then `action_finished`.

mod output;
mod render;
mod run;
mod watch;

use crate::actions::ctx::{Ctx, Mode};
use crate::actions::events::{Event, Level};
use crate::actions::plan::Seen;
use crate::base::abort::Why;
use crate::base::classify::Class;
use crate::base::script::Script;
use crate::targets::{ExecOutcome, ExecRequest, Target, TargetError};
use render::Rendered;
use std::time::Duration;

pub use crate::actions::events::Effect;
pub use render::shown;

pub struct Action<'a> {
    pub target: &'a Target,
    pub req: ExecRequest,
    pub effect: Effect,
    /// One line for previews: what it does, e.g. `touch /tmp/demo/f1`.
    pub summary: String,
    /// Whether it deletes, rebuilds or restores something (or may: `base/classify/`), as
    /// previews and plans mark it.
    pub class: Class,
    /// The script the argv runs (`sh -c BODY sh ARG…`), shown by its name.
    pub script: Option<&'static Script>,
    /// Its stdout is data (`artifact.capture`'s archive): kept for the primitive, never
    /// made output events or a tail (bytes, not lines for people or the record).
    pub binary_output: bool,
    /// Its stdin is data (a file's new content), text or not: left out of the lines
    /// people read, which name its size and digest; the plan holds it by its digest.
    pub stdin_data: bool,
    /// What the change does to a file's content, shown under it (`file.put`): a unified
    /// diff, or a line of sizes and digests. The plan holds it as it holds the summary.
    pub diff: Option<String>,
    /// Run it detached from the connection (`targets/detach.rs`).
    pub detach: bool,
}

pub enum Performed {
    /// Not run: a dry-run planned it. For a change, what stands for its output in the
    /// runbook until it runs (`known_after.rs`).
    Planned { known_after: Option<String> },
    /// It ran; `shown` is the command as its events showed it (see [`shown`]).
    Ran { out: ExecOutcome, shown: String },
}

/// Why an action did not run (or not to its end).
#[derive(Debug)]
pub enum ActionError {
    /// The step is being stopped (see `abort.rs`).
    Stop(Why),
    /// The action itself failed: a bad argv, a lock, a target that cannot be reached.
    Failed(String),
}

impl From<String> for ActionError {
    fn from(msg: String) -> Self {
        ActionError::Failed(msg)
    }
}

/// Why no new command may start in the running step, if one may not.
fn stopped(ctx: &Ctx) -> Result<(), ActionError> {
    ctx.stopped()
        .map_or(Ok(()), |why| Err(ActionError::Stop(why)))
}

/// No change may start once the run record can no longer be written.
fn record_kept(ctx: &Ctx) -> Result<(), ActionError> {
    match ctx.record_failed.borrow().as_ref().is_some_and(|f| f.get()) {
        true => Err(ActionError::Stop(Why::RecordBroken)),
        false => Ok(()),
    }
}

/// A change runbook makes itself, on this machine, with no command: `fingerprint.save`
/// writing the known-good record into the state dir. It is planned, confirmed, held to
/// the plan and recorded as a command is: the plan pass records it (target `local`,
/// `command` standing for its command line), a run held to a plan makes it only where
/// it was confirmed and never after the run left the plan, and the record has its
/// `action_started` and `action_finished`. `make` makes it; `Ok(None)`: only planned.
pub fn own_change<T>(
    ctx: &Ctx,
    summary: &str,
    shown: &str,
    command: &str,
    make: impl FnOnce() -> Result<T, String>,
) -> Result<Option<T>, ActionError> {
    const TARGET: &str = "local";
    let step = ctx.step.get().map(|s| s.index).unwrap_or(0);
    let step_name = watch::step_name(ctx, step);
    let seen = Seen {
        step,
        step_name: &step_name,
        target: TARGET,
        destination: TARGET,
        command,
        shown,
        stdin: None,
        summary,
        destructive: false,
        may_delete: false,
        diff: None,
    };
    let plan_only = ctx.mode != Mode::Real;
    watch::before_own(ctx, &seen, plan_only)?;
    let id = ctx.next_action_id();
    let event = Shown {
        step,
        id,
        target: TARGET,
        effect: Effect::Change,
        summary,
        shown,
        class: Class::Safe,
        script: None,
        diff: None,
    };
    if plan_only {
        ctx.mark_changed();
        event.planned(ctx);
        return Ok(None);
    }
    stopped(ctx)?;
    ctx.send_reads_from_now();
    record_kept(ctx)?;
    event.started(ctx, false);
    ctx.mark_changed();
    let started = std::time::Instant::now();
    let made = make();
    let finished = Finished {
        ok: made.is_ok(),
        code: made.is_ok().then_some(0),
        duration: started.elapsed(),
        timed_out: false,
        error: made.as_ref().err().cloned(),
        connection_lost: false,
        tails: Default::default(),
    };
    finished.emit(ctx, step, id);
    made.map(Some).map_err(ActionError::Failed)
}

/// An action as its `action_planned` and `action_started` events show it.
struct Shown<'a> {
    step: usize,
    id: u64,
    target: &'a str,
    effect: Effect,
    summary: &'a str,
    shown: &'a str,
    class: Class,
    script: Option<&'static Script>,
    diff: Option<&'a str>,
}

impl Shown<'_> {
    fn planned(&self, ctx: &Ctx) {
        ctx.bus.emit(Event::ActionPlanned {
            step: self.step,
            action: self.id,
            target: self.target.into(),
            effect: self.effect,
            summary: self.summary.into(),
            command: self.shown.into(),
            destructive: self.class == Class::Deletes,
            may_delete: self.class == Class::MayDelete,
            script: self.script.map(|s| ctx.bus.script(s)),
            diff: self.diff.map(str::to_string),
        });
    }

    fn started(&self, ctx: &Ctx, replayed: bool) {
        ctx.bus.emit(Event::ActionStarted {
            step: self.step,
            action: self.id,
            target: self.target.into(),
            effect: self.effect,
            summary: self.summary.into(),
            command: self.shown.into(),
            script: self.script.map(|s| ctx.bus.script(s)),
            replayed,
            diff: self.diff.map(str::to_string),
        });
    }
}

/// How an action ended, as its `action_finished` event says it.
struct Finished {
    ok: bool,
    code: Option<i32>,
    duration: Duration,
    timed_out: bool,
    error: Option<String>,
    connection_lost: bool,
    /// Of stdout and stderr (`output.rs`).
    tails: (String, String),
}

impl Finished {
    fn of(result: &Result<ExecOutcome, TargetError>, lines: &output::Lines) -> Finished {
        match result {
            Ok(o) => Finished {
                ok: o.code == Some(0) && !o.timed_out && !o.deadline_hit && !o.interrupted,
                code: o.code,
                duration: o.duration,
                timed_out: o.timed_out || o.deadline_hit,
                error: o.interrupted.then(|| "interrupted".to_string()),
                connection_lost: false,
                tails: lines.tails(o),
            },
            Err(e) => Finished {
                ok: false,
                code: None,
                duration: Duration::ZERO,
                timed_out: false,
                error: Some(e.to_string()),
                connection_lost: e.is_connection_lost(),
                tails: Default::default(),
            },
        }
    }

    fn emit(self, ctx: &Ctx, step: usize, id: u64) {
        ctx.bus.emit(Event::ActionFinished {
            step,
            action: id,
            ok: self.ok,
            code: self.code,
            duration_ms: self.duration.as_millis() as u64,
            timed_out: self.timed_out,
            error: self.error,
            connection_lost: self.connection_lost,
            stdout_tail: self.tails.0,
            stderr_tail: self.tails.1,
        });
    }
}

/// An argv is readable by every user of the machine (/proc/PID/cmdline) while the
/// command runs, on every hop: say so when a secret is in one. Env and stdin are not.
fn warn_secret_in_argv(ctx: &Ctx, action: &Action<'_>, step: usize, target: &str) {
    if !ctx.bus.has_secrets() {
        return;
    }
    let has_secret = |w: &str| ctx.bus.mask(w) != w;
    // `cwd` is an argv word too on every remote hop (`sh -c 'cd -- "$1" …' sh DIR`).
    let cwd_is_argv = !action.target.is_local();
    let in_argv = action
        .req
        .argv
        .iter()
        .any(|w| has_secret(&w.to_string_lossy()))
        || (cwd_is_argv && action.req.cwd.as_deref().is_some_and(has_secret));
    if in_argv {
        let message = format!(
            "a secret is in the argv of `{}` on {target} (or in its cwd, which is an argv word on remote targets): every user of that machine can read it (ps, /proc/PID/cmdline) while it runs; pass it with env = {{ … }} or stdin = … instead",
            action.summary
        );
        // Kept masked, as every sink shows it: the command holds the secret.
        ctx.secret_in_argv.borrow_mut().push(ctx.bus.mask(&message));
        ctx.bus.emit(Event::Log {
            step: Some(step),
            level: Level::Warn,
            message,
        });
    }
}

/// Whether the action only is planned, not run. A read whose command holds a change's
/// output that is known only after apply cannot run before it: it is planned, as
/// offline.
fn plan_only(ctx: &Ctx, action: &Action<'_>) -> bool {
    match ctx.mode {
        Mode::Real => false,
        Mode::DryRun => action.effect == Effect::Change || ctx.known_after.in_request(&action.req),
        Mode::Offline | Mode::Inspect => true,
    }
}

/// One command of a runbook, from the Lua call to its exit status: every stage in order
/// (see the top of this file).
pub async fn perform(ctx: &Ctx, mut action: Action<'_>) -> Result<Performed, ActionError> {
    crate::base::quote::validate_argv(&action.req.argv)?;
    let step = ctx.step.get().map(|s| s.index).unwrap_or(0);
    let id = ctx.next_action_id();
    let target = action.target.name();
    let Rendered {
        line: command,
        shown,
    } = Rendered::of(
        action.target,
        &mut action.req,
        action.script,
        action.stdin_data,
    );
    warn_secret_in_argv(ctx, &action, step, &target);
    let plan_only = plan_only(ctx, &action);
    let names = watch::Names::of(ctx, action.target, step).await;
    let seen = || Seen {
        step,
        step_name: &names.step_name,
        target: &target,
        destination: &names.destination,
        command: &command,
        shown: &shown,
        stdin: action.req.stdin.as_deref(),
        summary: &action.summary,
        destructive: action.class == Class::Deletes,
        may_delete: action.class == Class::MayDelete,
        diff: action.diff.as_deref(),
    };
    let place = watch::before(
        ctx,
        action.target,
        &action.req,
        action.effect,
        plan_only,
        &seen(),
    )
    .await?;
    let event = Shown {
        step,
        id,
        target: &target,
        effect: action.effect,
        summary: &action.summary,
        shown: &shown,
        class: action.class,
        script: action.script,
        diff: action.diff.as_deref(),
    };
    if plan_only {
        let mut known_after = None;
        if action.effect == Effect::Change {
            ctx.mark_changed();
            // Its placeholder: a change's number in the plan, or its action's outside one.
            let numbered = place.numbered.unwrap_or(id as usize);
            known_after = Some(ctx.known_after.token(numbered));
            ctx.bus.show_known_after(&ctx.known_after);
        }
        event.planned(ctx);
        return Ok(Performed::Planned { known_after });
    }
    // Nothing new starts once the step is over: work that was still queued (a wide
    // `parallel`) fails at once after a timeout or Ctrl-C, as `file:line: timed out` /
    // `interrupted`, which the engine words, instead of starting a command only to
    // kill it.
    stopped(ctx)?;
    if ctx.mode == Mode::Real && action.effect == Effect::Change {
        // A change (one the plan did not have is refused above): reads after it are
        // expected to find something new.
        ctx.send_reads_from_now();
        record_kept(ctx)?;
        ctx.locks.ensure(action.target).await?;
    }
    let key = crate::actions::kept_reads::Key {
        step,
        target: &target,
        destination: &names.destination,
        command: &command,
        stdin: action.req.stdin.as_deref(),
        secret_output: action.req.secret_output,
    };
    let lines = output::Lines::new(
        ctx,
        step,
        id,
        action.req.secret_output,
        action.binary_output,
        run::keeps_lines(ctx, action.effect),
    );
    let result = run::run(ctx, &action, &event, &key, &lines).await?;
    if let Ok(out) = &result {
        watch::after_change(ctx, &place, &out.stdout);
    }
    run::ended(ctx, &action, step, &result, &lines);
    let finished = Finished::of(&result, &lines);
    let mut refused_read = None;
    if action.effect == Effect::Read {
        // What the read returned, for the plan (its digest), or against the plan's.
        let out = result.as_ref().ok().filter(|_| !action.req.secret_output);
        let returned = out.map(|o| (o.code, o.stdout.as_slice()));
        match watch::after_read(ctx, &seen(), finished.code, returned) {
            Ok(Some(message)) => ctx.bus.emit(Event::Log {
                step: Some(step),
                level: Level::Warn,
                message,
            }),
            Ok(None) => {}
            Err(why) => refused_read = Some(why),
        }
    }
    finished.emit(ctx, step, id);
    if let Some(why) = refused_read {
        return Err(ActionError::Failed(why));
    }
    result
        .map(|out| Performed::Ran { out, shown })
        .map_err(|e| ActionError::Failed(e.into()))
}
