//! The plan an action is seen by: a plan pass records it, a run held to a plan checks it
//! (`ctx.watch`, one [`Watch`]). Each hook here is one moment of an action: before it
//! is planned or runs, after a change ran, after a read returned.

use super::{ActionError, Effect};
use crate::actions::ctx::{Ctx, Mode};
use crate::actions::plan::{Seen, Templated, Watch};
use crate::targets::{ExecRequest, Target};

/// What names an action to the plan beyond the command itself: its step's name, and the
/// target by where it resolves (as run locks name it, so an alias that now points
/// elsewhere is a difference). Empty when no plan sees the run.
#[derive(Default)]
pub struct Names {
    pub step_name: String,
    pub destination: String,
}

impl Names {
    pub async fn of(ctx: &Ctx, target: &Target, step: usize) -> Names {
        if matches!(*ctx.watch.borrow(), Watch::Free) {
            return Names::default();
        }
        let destination = ctx.locks.key(target).await;
        Names {
            step_name: step_name(ctx, step),
            destination,
        }
    }
}

/// The name of step `step`, as the plan holds it.
pub fn step_name(ctx: &Ctx, step: usize) -> String {
    ctx.steps
        .borrow()
        .get(step)
        .map(|s| s.name.clone())
        .unwrap_or_default()
}

/// Where an action stands in the plan, after [`before`].
#[derive(Default)]
pub struct Place {
    /// A change's number in the plan, or `None`: its placeholder is its action's id.
    pub numbered: Option<usize>,
    /// The planned change a run held to a plan found this one to be: what it prints is
    /// kept for the holes that name it ([`after_change`]).
    pub planned_as: Option<usize>,
}

/// Before an action is planned or runs. A plan pass records the target (which machine it
/// is, asked where the pass may contact it: this machine always, others unless
/// --offline) and every action it only plans; a run held to a plan checks each change
/// before it starts (before the lock, the events and the command: a change nobody saw
/// never starts).
pub async fn before(
    ctx: &Ctx,
    target: &Target,
    req: &ExecRequest,
    effect: Effect,
    plan_only: bool,
    seen: &Seen<'_>,
) -> Result<Place, ActionError> {
    let recording = matches!(*ctx.watch.borrow(), Watch::Recording(_));
    let identity = match recording
        && (ctx.mode == Mode::DryRun || (ctx.mode == Mode::Offline && target.is_local()))
    {
        true => ctx
            .locks
            .identity(target)
            .await?
            .map(|found| found.identity),
        false => None,
    };
    let mut place = Place::default();
    match &mut *ctx.watch.borrow_mut() {
        Watch::Recording(rec) => {
            rec.target(target, seen.destination, identity);
            match effect {
                Effect::Change if plan_only => place.numbered = Some(rec.change(seen)),
                Effect::Read if plan_only => rec.read(seen, None),
                _ => {}
            }
        }
        Watch::Held(enforcer) if effect == Effect::Change && !plan_only => {
            let fills = enforcer.fills();
            let templated = match fills.is_empty() {
                true => Vec::new(),
                false => templated(ctx, target, req, &fills),
            };
            place.planned_as =
                Some(enforcer.allow_templated(seen, &templated, &|t| ctx.bus.mask(t))?);
        }
        _ => {}
    }
    Ok(place)
}

/// Before runbook's own change (no command, this machine): recorded by a plan pass that
/// only plans it, held to the plan by a run that makes it.
pub fn before_own(ctx: &Ctx, seen: &Seen<'_>, plan_only: bool) -> Result<(), ActionError> {
    match &mut *ctx.watch.borrow_mut() {
        Watch::Recording(rec) if plan_only => {
            rec.change(seen);
        }
        Watch::Held(enforcer) if !plan_only => {
            enforcer.allow(seen, &|t| ctx.bus.mask(t))?;
        }
        _ => {}
    }
    Ok(())
}

/// The planned change at `place` ran and printed `stdout`.
pub fn after_change(ctx: &Ctx, place: &Place, stdout: &[u8]) {
    if let (Some(index), Watch::Held(enforcer)) = (place.planned_as, &mut *ctx.watch.borrow_mut()) {
        enforcer.output(index, stdout);
    }
}

/// A read returned `returned` (exit code and stdout; none when it failed to run or its
/// output is secret): the plan pass keeps its digest, a run held to a plan compares it
/// with the plan's. `Ok(Some)`: a warning to show; `Err`: the run stops here (a read
/// shown otherwise than the plan shows it, before any change), the read's result is not
/// given to the runbook.
pub fn after_read(
    ctx: &Ctx,
    seen: &Seen<'_>,
    code: Option<i32>,
    returned: Option<(Option<i32>, &[u8])>,
) -> Result<Option<String>, String> {
    match &mut *ctx.watch.borrow_mut() {
        Watch::Recording(rec) => {
            rec.read(seen, returned);
            Ok(None)
        }
        Watch::Held(enforcer) => enforcer.read(seen, code, returned.map(|(_, out)| out), &|t| {
            ctx.bus.mask(t)
        }),
        Watch::Free => Ok(None),
    }
}

/// `req` read back as templates for the holes of the planned changes (`fills`: which
/// change's output may stand in one, and in what forms), rendered on `target` as the plan
/// rendered its commands, each hole as the marker of its change.
fn templated(
    ctx: &Ctx,
    target: &Target,
    req: &ExecRequest,
    fills: &[(usize, Vec<Vec<u8>>)],
) -> Vec<Templated> {
    let known = &ctx.known_after;
    known
        .templates(req, fills)
        .into_iter()
        .filter(|r| known.in_request(r))
        .map(|r| Templated {
            command: known.marked(target.render(&r).as_bytes()).0,
            stdin: r.stdin.as_deref().map(|s| known.marked(s).0),
        })
        .collect()
}
