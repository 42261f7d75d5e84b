//! The Lua surface: one module per Lua table or global family, each with a `register`.
//!
//! Every function here is thin: validate arguments (errors name the runbook file and
//! line), call into the engine or a target, convert the result. Doc comments that start
//! with `Lua:` are the API reference: `build.rs` collects them into `docs/lua-api.md` and
//! `runbook docs`.

pub mod artifact;
pub mod cache;
pub mod control;
mod convert;
pub mod disk;
pub mod file;
pub mod fingerprint;
pub mod git;
pub mod gpu;
pub mod groups;
pub mod log;
pub mod options;
pub mod parallel;
pub mod proc;
pub mod rollout;
pub mod runbook;
pub mod slurm;
pub mod step;
pub mod target;
pub mod venv;
pub mod vm;
pub mod warmup;

pub use convert::to_lua;

use crate::actions::ctx::{Ctx, Phase};
use crate::primitives::Step;
use crate::targets::Target;
use mlua::{FromLuaMulti, IntoLuaMulti, Lua, Table, Value};
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

pub fn register_all(lua: &Lua) -> mlua::Result<()> {
    runbook::register(lua)?;
    step::register(lua)?;
    target::register(lua)?;
    slurm::register(lua)?;
    groups::register(lua)?;
    log::register(lua)?;
    parallel::register(lua)?;
    rollout::register(lua)?;
    control::register(lua)?;
    cache::register(lua)?;
    artifact::register(lua)?;
    venv::register(lua)?;
    gpu::register(lua)?;
    disk::register(lua)?;
    file::register(lua)?;
    warmup::register(lua)?;
    git::register(lua)?;
    proc::register(lua)?;
    fingerprint::register(lua)?;
    Ok(())
}

/// mlua keeps an async callback's future until Lua's collector frees the call's userdata,
/// finished or not, and Lua counts none of its bytes: a loop of `exec` calls grew
/// runbook by a whole future per call (73 KB each, measured with massif) until a
/// collection happened to run. The work goes in a box of its own, freed the moment it
/// finishes, so what mlua keeps is a pointer. Every async callback goes through this.
// The block is the point: it drops the box as the work finishes, where the box alone
// (what clippy suggests) would live as long as mlua keeps it.
#[allow(clippy::redundant_async_block)]
pub(crate) fn freed_when_done<F: Future>(work: F) -> impl Future<Output = F::Output> {
    let work = Box::pin(work);
    async move { work.await }
}

/// `lua.create_async_function(f)`, its future freed when it finishes ([`freed_when_done`]).
pub(crate) fn async_function<F, A, FR, R>(lua: &Lua, f: F) -> mlua::Result<mlua::Function>
where
    F: Fn(Lua, A) -> FR + 'static,
    A: FromLuaMulti,
    FR: Future<Output = mlua::Result<R>> + 'static,
    R: IntoLuaMulti,
{
    lua.create_async_function(move |lua, args| freed_when_done(f(lua, args)))
}

/// The run context stored in the VM.
pub fn ctx(lua: &Lua) -> Rc<Ctx> {
    lua.app_data_ref::<Rc<Ctx>>()
        .expect("the VM is always created with a context")
        .clone()
}

/// `file:line` of the innermost runbook code on the stack (skipping mlua's own helper
/// chunks and Rust functions), for error messages.
pub fn location(lua: &Lua) -> String {
    // A line of the stdlib (`<stdlib>/runbook/torch.lua:70`) is runbook's own: the
    // runbook's line that called into it is the one to name, as for any other call.
    let mut in_stdlib = None;
    for level in 0..64 {
        let found = lua.inspect_stack(level, |d| {
            let src = d.source();
            let file = src
                .source
                .as_deref()
                .unwrap_or_default()
                .strip_prefix('@')?;
            // Made by hand: every step() and every command asks for its location.
            let line = d.current_line().unwrap_or(0).to_string();
            let mut loc = String::with_capacity(file.len() + 1 + line.len());
            loc.push_str(file);
            loc.push(':');
            loc.push_str(&line);
            Some(loc)
        });
        match found {
            None => break,
            Some(Some(loc)) if is_stdlib(&loc) => {
                in_stdlib.get_or_insert(loc);
            }
            Some(Some(loc)) => return loc,
            Some(None) => continue,
        }
    }
    if let Some(loc) = in_stdlib {
        return loc;
    }
    if let Some(at) = vm::resumed_at(lua) {
        return at;
    }
    ctx(lua).label.clone()
}

/// Whether a `FILE:LINE` is in runbook's stdlib (`require("runbook.torch")`).
fn is_stdlib(location: &str) -> bool {
    location.starts_with(crate::base::embedded::STDLIB_LABEL)
}

/// A Lua error that points at the runbook line that caused it.
pub fn err_at(lua: &Lua, msg: impl std::fmt::Display) -> mlua::Error {
    mlua::Error::runtime(format!("{}: {msg}", location(lua)))
}

/// Errors unless a step is running: commands never run while a file is being loaded,
/// which is what lets `check`/`show`/`list` load any runbook safely.
pub fn require_running(lua: &Lua, what: &str) -> mlua::Result<Rc<Ctx>> {
    let ctx = ctx(lua);
    if ctx.phase.get() != Phase::Running || ctx.step.get().is_none() {
        return Err(err_at(
            lua,
            format!("{what} can only be called inside a step: wrap it in step(\"name\", function() … end)"),
        ));
    }
    // Commands run while the step's code is suspended; that needs the step's own thread.
    if vm::in_runbook_coroutine(lua) {
        return Err(err_at(
            lua,
            format!("{what} cannot run inside a coroutine made with coroutine.create/wrap (runbook could not supervise it there); call it from the step itself, or use parallel() for concurrency"),
        ));
    }
    if !vm::can_suspend(lua) {
        return Err(err_at(
            lua,
            format!("{what} cannot run inside a callback that Lua calls from C (string.gsub, table.sort, a metamethod such as __tostring or __index, …); collect what you need there and run commands from the step itself"),
        ));
    }
    Ok(ctx)
}

/// The [`Step`] a primitive runs as when the current Lua line calls it: every call from
/// `lua_api` into a primitive builds it here.
pub fn step_for<'a>(lua: &Lua, ctx: &'a Ctx, target: &'a Target) -> Step<'a> {
    Step {
        ctx,
        target,
        at: location(lua),
    }
}

// Readers for positional arguments. Options tables are read by `options::read`; both use
// the one parser of each kind in `options`. `what` names the argument in errors.

/// A duration argument ([`options::duration_of`]), e.g. `sleep()`'s.
pub fn duration_value(lua: &Lua, v: Value, what: &str) -> mlua::Result<Option<Duration>> {
    options::duration_of(&v).map_err(|e| err_at(lua, e.about(what)))
}

/// A string argument ([`options::string_of`]); nil is `None`.
pub fn string_value(lua: &Lua, v: Value, what: &str) -> mlua::Result<Option<String>> {
    options::string_of(&v).map_err(|e| err_at(lua, e.about(what)))
}

/// A path or a list of paths ([`options::paths_of`]: every option that takes paths reads
/// them the same way), e.g. `cache.clear(): paths`.
pub fn path_list(lua: &Lua, what: &str, v: Value) -> mlua::Result<Option<Vec<String>>> {
    options::paths_of(&v).map_err(|e| err_at(lua, e.about(what)))
}

/// The words of a plain Lua list ([`options::words_of`]), e.g. `exec: argv`.
pub fn word_list(lua: &Lua, t: &Table, what: &str) -> mlua::Result<Vec<std::ffi::OsString>> {
    options::words_of(t).map_err(|e| err_at(lua, e.about(what)))
}

/// Strips mlua's wrapping and the traceback from an error, leaving the message a user
/// needs: `file:line: what went wrong`.
pub fn error_message(e: &mlua::Error) -> String {
    let raw = match e {
        mlua::Error::CallbackError { cause, .. } => return error_message(cause),
        mlua::Error::WithContext { cause, .. } => return error_message(cause),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::MemoryError(_) => format!(
            "out of memory: the runbook went over its Lua memory limit ({} MiB)",
            vm::MEMORY_LIMIT / (1024 * 1024)
        ),
        mlua::Error::ExternalError(inner) => inner.to_string(),
        other => other.to_string(),
    };
    match raw.find("\nstack traceback:") {
        Some(i) => raw[..i].to_string(),
        None => raw,
    }
}

/// [`error_message`], with the runbook's `file:line` in front when the message has none
/// (errors raised inside Lua's own C code, such as "C stack overflow" from a recursive
/// `__tostring`): the innermost frame of a runbook file in the traceback, else
/// `fallback` (the step's line).
///
/// A message placed in the stdlib (`<stdlib>/runbook/torch.lua:95: torch.caches: …`, an
/// `error()` of the stdlib's own) is placed at the runbook's line that called it instead.
pub fn located(e: &mlua::Error, fallback: &str) -> String {
    let msg = error_message(e);
    if matches!(innermost(e), mlua::Error::MemoryError(_)) {
        return msg;
    }
    let at = || traceback_location(e).unwrap_or_else(|| fallback.to_string());
    if let Some(rest) = stdlib_placed(&msg) {
        return format!("{}: {rest}", at());
    }
    if has_location(&msg) {
        return msg;
    }
    format!("{}: {msg}", at())
}

/// The message after its location, when that location is a line of the stdlib.
fn stdlib_placed(msg: &str) -> Option<&str> {
    if !is_stdlib(msg) {
        return None;
    }
    let (loc, rest) = msg.split_once(": ")?;
    let (_, line) = loc.rsplit_once(':')?;
    line.bytes().all(|b| b.is_ascii_digit()).then_some(rest)
}

/// The error under mlua's callback wrappers.
pub fn innermost(e: &mlua::Error) -> &mlua::Error {
    match e {
        mlua::Error::CallbackError { cause, .. } | mlua::Error::WithContext { cause, .. } => {
            innermost(cause)
        }
        other => other,
    }
}

/// `something:LINE: ` at the start, the way Lua and runbook place a location.
fn has_location(msg: &str) -> bool {
    let first = msg.lines().next().unwrap_or_default();
    first.match_indices(": ").any(|(i, _)| {
        let head = &first[..i];
        head.rsplit_once(':').is_some_and(|(file, line)| {
            !file.is_empty() && !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit())
        })
    })
}

/// The first `FILE.lua:LINE` frame of the tracebacks carried by `e` (innermost first).
fn traceback_location(e: &mlua::Error) -> Option<String> {
    let mut texts = Vec::new();
    let mut cur = e;
    loop {
        match cur {
            mlua::Error::CallbackError { traceback, cause } => {
                texts.push(traceback.clone());
                cur = cause;
            }
            mlua::Error::WithContext { cause, .. } => cur = cause,
            mlua::Error::RuntimeError(m) => {
                texts.push(m.clone());
                break;
            }
            _ => break,
        }
    }
    // The innermost error's own traceback names the deepest frames: read it first.
    texts.reverse();
    texts.iter().find_map(|t| {
        let (_, frames) = t.split_once("stack traceback:")?;
        frames.lines().find_map(|l| {
            let l = l.trim();
            let (loc, _) = l.split_once(": ")?;
            let (file, line) = loc.rsplit_once(':')?;
            (file.ends_with(".lua") && line.bytes().all(|b| b.is_ascii_digit()) && !is_stdlib(loc))
                .then(|| loc.to_string())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::pin::{pin, Pin};
    use std::task::{Context, Poll, Waker};

    /// A future as big as a session read's, that says when it is dropped.
    struct Work<'a> {
        buffer: [u8; 64 * 1024],
        dropped: &'a Cell<bool>,
    }
    impl Future for Work<'_> {
        type Output = u8;
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u8> {
            Poll::Ready(self.buffer[1])
        }
    }
    impl Drop for Work<'_> {
        fn drop(&mut self) {
            self.dropped.set(true);
        }
    }

    #[test]
    fn a_finished_callbacks_work_is_freed_while_its_future_is_kept() {
        let dropped = Cell::new(false);
        let kept = freed_when_done(Work {
            buffer: [7; 64 * 1024],
            dropped: &dropped,
        });
        // What mlua boxes and keeps until Lua collects it: a pointer and a state.
        assert!(
            std::mem::size_of_val(&kept) <= 32,
            "{}",
            std::mem::size_of_val(&kept)
        );
        let mut kept = pin!(kept);
        assert!(!dropped.get());
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(kept.as_mut().poll(&mut cx), Poll::Ready(7));
        assert!(
            dropped.get(),
            "the work (and its box) is dropped once it finishes"
        );
    }
}
