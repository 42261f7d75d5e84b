//! The one place that decides "really do it" or "plan it", for every command any Lua
//! function or primitive runs. It also turns each action into events.

use crate::abort::Why;
use crate::classify::Class;
use crate::ctx::{Ctx, Mode};
use crate::events::{Event, Level};
use crate::script::Script;
use crate::targets::pump::Stop;
use crate::targets::{ExecIo, ExecOutcome, ExecRequest, Group, Stream, Target};
use std::time::Duration;

pub use crate::events::Effect;

pub struct Action<'a> {
    pub target: &'a Target,
    pub req: ExecRequest,
    pub effect: Effect,
    /// One line for previews: what it does, e.g. `touch /tmp/demo/f1`.
    pub summary: String,
    /// Whether it deletes, rebuilds or restores something (or may: `classify.rs`), as
    /// previews and plans mark it.
    pub class: Class,
    /// The script the argv runs (`sh -c BODY sh ARG…`), shown by its name.
    pub script: Option<&'static Script>,
    /// Its stdout is data (`artifact.capture`'s archive): kept for the primitive, never
    /// made output events or a tail (bytes, not lines for people or the record).
    pub binary_output: bool,
}

/// A command as people see it (previews, `runbook log`, messages, the `command` of
/// events): the exact, copy-pastable line the target renders, except where that line
/// would carry a script: runbook's own (shown as `NAME ARG…`, printed by `runbook
/// script NAME`) or the wrappers a remote hop needs for env and cwd. Such a command is
/// shown as it runs on its target (`cd DIR && env K=V NAME ARG…`), which the events name.
pub fn shown(target: &Target, req: &ExecRequest, script: Option<&Script>) -> String {
    let named: Vec<std::ffi::OsString>;
    let argv = match script {
        Some(s) if req.argv.len() >= 4 && req.argv[2] == s.body => {
            named = std::iter::once(s.name.into())
                .chain(req.argv[4..].iter().cloned())
                .collect();
            &named
        }
        _ => &req.argv,
    };
    let wrapped = !target.is_local() && (!req.env.is_empty() || req.cwd.is_some());
    if script.is_none() && !wrapped {
        return target.render(req);
    }
    // Input that is no text (artifact.restore's archive) is named by its size and digest:
    // pasted as a word it is noise, megabytes of it. The plan holds its digest either way.
    if let Some(input) = req
        .stdin
        .as_deref()
        .filter(|s| std::str::from_utf8(s).is_err())
    {
        use sha2::Digest;
        let digest: String = sha2::Sha256::digest(input)
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        let line = crate::quote::render_with(argv, &req.env, req.cwd.as_deref(), None);
        return format!(
            "{line} < (stdin: {} bytes of binary data, sha256 {digest}…)",
            input.len()
        );
    }
    crate::quote::render_with(argv, &req.env, req.cwd.as_deref(), req.stdin.as_deref())
}

pub enum Performed {
    /// Not run: a dry-run planned it. For a change, what stands for its output in the
    /// runbook until it runs (`known_after.rs`).
    Planned { known_after: Option<String> },
    /// It ran; `shown` is the command as its events showed it (see [`shown`]).
    Ran { out: ExecOutcome, shown: String },
}

/// How much of each stream an `action_finished` event keeps (every line is also an
/// `output` event of its own).
const TAIL_BYTES: usize = 4096;

/// The tail an `action_finished` event keeps: masked before it is cut, and nothing but
/// the mask for a command whose output is secret.
fn tail(ctx: &Ctx, bytes: &[u8], secret_output: bool) -> String {
    if secret_output && !bytes.is_empty() {
        return crate::secrets::MASK.into();
    }
    ctx.bus.masked_tail(bytes, TAIL_BYTES)
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

/// How the warning about a secret in an argv starts (`check` looks for it).
pub const SECRET_IN_ARGV: &str = "a secret is in the argv of";

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
    let step_name = ctx
        .steps
        .borrow()
        .get(step)
        .map(|s| s.name.clone())
        .unwrap_or_default();
    let seen = crate::plan::Seen {
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
    };
    let plan_only = ctx.mode != Mode::Real;
    if let Some(rec) = ctx.recording.borrow_mut().as_mut() {
        if plan_only {
            rec.change(&seen);
        }
    } else if let Some(enforcer) = ctx.enforcer.borrow_mut().as_mut() {
        if !plan_only {
            enforcer.allow(&seen, &|t| ctx.bus.mask(t))?;
        }
    }
    let id = ctx.next_action_id();
    if plan_only {
        ctx.mark_changed();
        ctx.bus.emit(Event::ActionPlanned {
            step,
            action: id,
            target: TARGET.into(),
            effect: Effect::Change,
            summary: summary.into(),
            command: shown.into(),
            destructive: false,
            may_delete: false,
            script: None,
        });
        return Ok(None);
    }
    stopped(ctx)?;
    ctx.send_reads_from_now();
    record_kept(ctx)?;
    ctx.bus.emit(Event::ActionStarted {
        step,
        action: id,
        target: TARGET.into(),
        effect: Effect::Change,
        summary: summary.into(),
        command: shown.into(),
        script: None,
        replayed: false,
    });
    ctx.mark_changed();
    let started = std::time::Instant::now();
    let made = make();
    ctx.bus.emit(Event::ActionFinished {
        step,
        action: id,
        ok: made.is_ok(),
        code: made.is_ok().then_some(0),
        duration_ms: started.elapsed().as_millis() as u64,
        timed_out: false,
        error: made.as_ref().err().cloned(),
        stdout_tail: String::new(),
        stderr_tail: String::new(),
    });
    made.map(Some).map_err(ActionError::Failed)
}

/// `req` read back as templates for the holes of the planned changes (`fills`: which
/// change's output may stand in one, and in what forms), rendered on `target` as the plan
/// rendered its commands, each hole as the marker of its change.
fn templated(
    ctx: &Ctx,
    target: &Target,
    req: &ExecRequest,
    fills: &[(usize, Vec<Vec<u8>>)],
) -> Vec<crate::plan::Templated> {
    let known = &ctx.known_after;
    known
        .templates(req, fills)
        .into_iter()
        .filter(|r| known.in_request(r))
        .map(|r| crate::plan::Templated {
            command: known.marked(target.render(&r).as_bytes()).0,
            stdin: r.stdin.as_deref().map(|s| known.marked(s).0),
        })
        .collect()
}

pub async fn perform(ctx: &Ctx, mut action: Action<'_>) -> Result<Performed, ActionError> {
    crate::quote::validate_argv(&action.req.argv)?;
    let step = ctx.step.get().map(|s| s.index).unwrap_or(0);
    let id = ctx.next_action_id();
    let target = action.target.name();
    // The exact line is what a confirmed plan holds the run to; people see `shown`. Input
    // that is no text (artifact.restore's archive, megabytes) is left out of it: the plan
    // holds the run to its digest (`stdin_sha256`) all the same.
    let command = match action.req.stdin.take() {
        Some(input) if std::str::from_utf8(&input).is_err() => {
            let line = action.target.render(&action.req);
            action.req.stdin = Some(input);
            format!("{line} < (binary stdin)")
        }
        input => {
            action.req.stdin = input;
            action.target.render(&action.req)
        }
    };
    let shown = shown(action.target, &action.req, action.script);
    // An argv is readable by every user of the machine (/proc/PID/cmdline) while the
    // command runs, on every hop: say so when a secret is in one. Env and stdin are not.
    let has_secret = |w: &str| ctx.bus.mask(w) != w;
    // `cwd` is an argv word too on every remote hop (`sh -c 'cd -- "$1" …' sh DIR`).
    let cwd_is_argv = !action.target.is_local();
    let argv_has_secret = ctx.bus.has_secrets()
        && (action
            .req
            .argv
            .iter()
            .any(|w| has_secret(&w.to_string_lossy()))
            || (cwd_is_argv && action.req.cwd.as_deref().is_some_and(has_secret)));
    if argv_has_secret {
        ctx.bus.emit(Event::Log {
            step: Some(step),
            level: Level::Warn,
            message: format!(
                "{SECRET_IN_ARGV} `{}` on {target} (or in its cwd, which is an argv word on remote targets): every user of that machine can read it (ps, /proc/PID/cmdline) while it runs; pass it with env = {{ … }} or stdin = … instead",
                action.summary
            ),
        });
    }
    // A read whose command holds a change's output that is known only after apply
    // cannot run before it: it is planned, as offline.
    let plan_only = match ctx.mode {
        Mode::Real => false,
        Mode::DryRun => action.effect == Effect::Change || ctx.known_after.in_request(&action.req),
        Mode::Offline | Mode::Inspect => true,
    };
    // A plan pass records every action; a run held to a plan checks each change before
    // it starts (before the lock, the events and the command: a change nobody saw never
    // starts) and compares each read. Both name the target by where it resolves, as run
    // locks do, so an alias that now points elsewhere is a difference.
    let watched = ctx.recording.borrow().is_some() || ctx.enforcer.borrow().is_some();
    let destination = match watched {
        true => ctx.locks.key(action.target).await,
        false => String::new(),
    };
    let step_name = match watched {
        true => ctx.steps.borrow().get(step).map(|s| s.name.clone()),
        false => None,
    }
    .unwrap_or_default();
    let summary = action.summary.clone();
    let seen = || crate::plan::Seen {
        step,
        step_name: &step_name,
        target: &target,
        destination: &destination,
        command: &command,
        shown: &shown,
        stdin: action.req.stdin.as_deref(),
        summary: &summary,
        destructive: action.class == Class::Deletes,
        may_delete: action.class == Class::MayDelete,
    };
    // The planned change this one is (held to a plan): what it prints is kept for the
    // holes that name it.
    let mut planned_as = None;
    // A change's number in the plan, or its action's outside one: its placeholder's.
    let mut numbered = id as usize;
    // A plan records which machine each target is: asked where the pass may contact it
    // (this machine always; others unless --offline).
    let recording = ctx.recording.borrow().is_some();
    let identity = match recording
        && (ctx.mode == Mode::DryRun || (ctx.mode == Mode::Offline && action.target.is_local()))
    {
        true => ctx
            .locks
            .identity(action.target)
            .await?
            .map(|found| found.identity),
        false => None,
    };
    if let Some(rec) = ctx.recording.borrow_mut().as_mut() {
        rec.target(action.target, &destination, identity);
        match action.effect {
            Effect::Change if plan_only => numbered = rec.change(&seen()),
            Effect::Read if plan_only => rec.read(&seen(), None),
            _ => {}
        }
    } else if let Some(enforcer) = ctx.enforcer.borrow_mut().as_mut() {
        if action.effect == Effect::Change && !plan_only {
            let fills = enforcer.fills();
            let templated = match fills.is_empty() {
                true => Vec::new(),
                false => templated(ctx, action.target, &action.req, &fills),
            };
            planned_as = Some(enforcer.allow_templated(&seen(), &templated, &|t| ctx.bus.mask(t))?);
        }
    }
    if plan_only {
        let mut known_after = None;
        if action.effect == Effect::Change {
            ctx.mark_changed();
            known_after = Some(ctx.known_after.token(numbered));
            ctx.bus.show_known_after(&ctx.known_after);
        }
        let script = action.script.map(|s| ctx.bus.script(s));
        ctx.bus.emit(Event::ActionPlanned {
            step,
            action: id,
            target,
            effect: action.effect,
            summary: action.summary,
            command: shown,
            destructive: action.class == Class::Deletes,
            may_delete: action.class == Class::MayDelete,
            script,
        });
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
    // In a run whose plan changes nothing, a read the dry-run sent moments ago is
    // answered with what it answered then (`kept_reads.rs`). The dry-run keeps its
    // reads' pieces of lines to be answered with.
    let key = crate::kept_reads::Key {
        step,
        target: &target,
        destination: &destination,
        command: &command,
        stdin: action.req.stdin.as_deref(),
        secret_output: action.req.secret_output,
    };
    let answer = match (ctx.mode, action.effect) {
        (Mode::Real, Effect::Read) => ctx
            .kept_reads
            .borrow_mut()
            .as_mut()
            .and_then(|k| k.answer(&key)),
        _ => None,
    };
    let keeping = ctx.mode == Mode::DryRun
        && action.effect == Effect::Read
        && ctx.kept_reads.borrow().is_some();
    let pieces: std::cell::RefCell<Vec<crate::kept_reads::Piece>> = Default::default();
    let what = action.summary.clone();
    let secret_output = action.req.secret_output;
    // What a line cut at 64 KiB left that could be the start of a secret, per stream.
    let carry = std::cell::RefCell::new([String::new(), String::new()]);
    let binary_output = action.binary_output;
    let on_line = |stream: Stream, piece: &str, continues: bool| {
        if binary_output && stream == Stream::Stdout {
            return;
        }
        if keeping {
            pieces
                .borrow_mut()
                .push((stream, piece.to_string(), continues));
        }
        let line = if secret_output {
            crate::secrets::MASK.to_string()
        } else {
            let mut carry = carry.borrow_mut();
            let slot = &mut carry[stream as usize];
            ctx.bus.mask_piece(slot, piece, continues)
        };
        if continues && line.is_empty() {
            return;
        }
        ctx.bus.emit(Event::Output {
            step,
            action: id,
            stream,
            line,
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
    let script = action.script.map(|s| ctx.bus.script(s));
    ctx.bus.emit(Event::ActionStarted {
        step,
        action: id,
        target: target.clone(),
        effect: action.effect,
        summary: action.summary,
        command: shown.clone(),
        script,
        replayed: answer.is_some(),
    });
    if action.effect == Effect::Change {
        ctx.mark_changed();
    }
    let result = match answer {
        Some(answer) => {
            for (stream, piece, continues) in &answer.pieces {
                on_line(*stream, piece, *continues);
            }
            Ok(answer.out)
        }
        None => action.target.exec(&action.req, &io).await,
    };
    if let (true, Ok(out)) = (keeping, &result) {
        if let Some(kept) = ctx.kept_reads.borrow_mut().as_mut() {
            kept.keep(&key, pieces.take(), out);
        }
    }
    if let (Some(index), Ok(out)) = (planned_as, &result) {
        if let Some(enforcer) = ctx.enforcer.borrow_mut().as_mut() {
            enforcer.output(index, &out.stdout);
        }
    }
    if let Some(message) = result.as_ref().ok().and_then(|o| o.notice.clone()) {
        ctx.bus.emit(Event::Log {
            step: Some(step),
            level: Level::Warn,
            message,
        });
    }
    // A line cut at 64 KiB at the very end: what was held back is shown now.
    for stream in [Stream::Stdout, Stream::Stderr] {
        let rest = std::mem::take(&mut carry.borrow_mut()[stream as usize]);
        if !rest.is_empty() {
            on_line(stream, &rest, false);
        }
    }
    if let (true, Ok(o)) = (secret_output, &result) {
        let text = String::from_utf8_lossy(&o.stdout);
        if !text.trim().is_empty() {
            ctx.bus
                .add_secret(text.trim(), &format!("the output of `{what}`"));
        }
    }
    let (ok, code, duration, timed_out, error, stdout_tail, stderr_tail) = match &result {
        Ok(o) => (
            o.code == Some(0) && !o.timed_out && !o.deadline_hit && !o.interrupted,
            o.code,
            o.duration,
            o.timed_out || o.deadline_hit,
            o.interrupted.then(|| "interrupted".to_string()),
            match binary_output {
                true => String::new(),
                false => tail(ctx, &o.stdout, secret_output),
            },
            tail(ctx, &o.stderr, secret_output),
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
    let mut refused_read = None;
    if action.effect == Effect::Read {
        // What the read returned, for the plan (its digest), or against the plan's.
        let out = result.as_ref().ok().filter(|_| !secret_output);
        let returned = out.map(|o| (o.code, o.stdout.as_slice()));
        let mut warning = None;
        // A read shown otherwise than the plan shows it, before any change: the run
        // stops here (the read's result is not given to the runbook).
        if let Some(rec) = ctx.recording.borrow_mut().as_mut() {
            rec.read(&seen(), returned);
        } else if let Some(enforcer) = ctx.enforcer.borrow_mut().as_mut() {
            match enforcer.read(&seen(), code, returned.map(|(_, out)| out), &|t| {
                ctx.bus.mask(t)
            }) {
                Ok(w) => warning = w,
                Err(why) => refused_read = Some(why),
            }
        }
        if let Some(message) = warning {
            ctx.bus.emit(Event::Log {
                step: Some(step),
                level: Level::Warn,
                message,
            });
        }
    }
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
    if let Some(why) = refused_read {
        return Err(ActionError::Failed(why));
    }
    result
        .map(|out| Performed::Ran { out, shown })
        .map_err(ActionError::Failed)
}
