//! The Lua surface: one module per Lua table or global family, each with a `register`.
//!
//! Every function here is thin: validate arguments (errors name the runbook file and
//! line), call into the engine or a target, convert the result. Doc comments that start
//! with `Lua:` are the API reference: `build.rs` collects them into `docs/lua-api.md` and
//! `runbook docs`.

pub mod cache;
pub mod control;
mod convert;
pub mod fingerprint;
pub mod git;
pub mod gpu;
pub mod log;
pub mod parallel;
pub mod proc;
pub mod runbook;
pub mod step;
pub mod target;
pub mod venv;
pub mod vm;
pub mod warmup;

pub use convert::to_lua;

use crate::ctx::{Ctx, Phase};
use crate::duration;
use mlua::{Lua, Table, Value};
use std::rc::Rc;
use std::time::Duration;

pub fn register_all(lua: &Lua) -> mlua::Result<()> {
    runbook::register(lua)?;
    step::register(lua)?;
    target::register(lua)?;
    log::register(lua)?;
    parallel::register(lua)?;
    control::register(lua)?;
    cache::register(lua)?;
    venv::register(lua)?;
    gpu::register(lua)?;
    warmup::register(lua)?;
    git::register(lua)?;
    proc::register(lua)?;
    fingerprint::register(lua)?;
    Ok(())
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
    for level in 0..64 {
        let found = lua.inspect_stack(level, |d| {
            let src = d.source();
            let source = src.source.as_deref().unwrap_or_default().to_string();
            source
                .strip_prefix('@')
                .map(|file| format!("{file}:{}", d.current_line().unwrap_or(0)))
        });
        match found {
            None => break,
            Some(Some(loc)) => return loc,
            Some(None) => continue,
        }
    }
    ctx(lua).label.clone()
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

/// Rejects keys an options table does not know, with a suggestion.
pub fn check_keys(lua: &Lua, table: &Table, known: &[&str], what: &str) -> mlua::Result<()> {
    for pair in table.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let name = match &k {
            Value::String(s) => s.to_string_lossy(),
            other => format!("{other:?}"),
        };
        if !known.contains(&name.as_str()) {
            return Err(err_at(
                lua,
                format!(
                    "{what}: unknown option '{name}'{}; known: {}",
                    crate::suggest::hint(&name, known.iter().copied()),
                    known.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// A duration given as a string (`"30s"`) or a number of seconds, checked against
/// `duration::MAX` (a negative, NaN, infinite or too long one is an error naming the
/// line). 0 stays 0: for a wait (`sleep`, `delay`) that means no wait. Timeouts read
/// theirs with `timeout_value`.
pub fn duration_value(lua: &Lua, v: Value, what: &str) -> mlua::Result<Option<Duration>> {
    checked_duration(v).map_err(|e| err_at(lua, format!("{what}: {e}")))
}

fn checked_duration(v: Value) -> Result<Option<Duration>, String> {
    match v {
        Value::Nil => return Ok(None),
        Value::Integer(i) => duration::from_whole_secs(i).map_err(|e| format!("{i} {e}")),
        // `{:?}` keeps a huge or tiny float short (`1e300`, not 301 digits).
        Value::Number(n) => duration::from_secs(n).map_err(|e| format!("{n:?} {e}")),
        Value::String(s) => duration::parse(&s.to_string_lossy()),
        other => Err(format!(
            "expected a duration like \"30s\" or a number of seconds, got {}",
            other.type_name()
        )),
    }
    .map(Some)
}

/// A timeout: like `duration_value`, and 0 in any spelling (`0`, `0.0`, `"0s"`, `"0ms"`)
/// means no timeout (`None`), as with coreutils `timeout 0`. One meaning for every
/// spelling: a runbook cannot tell an integer 0 from a float 0.0 at a glance.
pub fn timeout_value(lua: &Lua, v: Value, what: &str) -> mlua::Result<Option<Duration>> {
    match checked_duration(v) {
        Ok(d) => Ok(d.filter(|d| !d.is_zero())),
        Err(e) => Err(err_at(
            lua,
            format!("{what}: {e}{}", duration::NO_TIMEOUT_HINT),
        )),
    }
}

/// A timeout with a default: absent is `default`, 0 (any spelling) is no timeout.
pub fn timeout_or(
    lua: &Lua,
    v: Value,
    what: &str,
    default: Duration,
) -> mlua::Result<Option<Duration>> {
    let given = checked_duration(v)
        .map_err(|e| err_at(lua, format!("{what}: {e}{}", duration::NO_TIMEOUT_HINT)))?;
    Ok(match given {
        None => Some(default),
        Some(d) if d.is_zero() => None,
        Some(d) => Some(d),
    })
}

/// A whole number in `min..=max` from Lua: an integer, or a float with no fractional
/// part (`n / 2` is a float in Lua 5.4 even when it divides evenly). Anything else is an
/// error naming the line and the value, never a wrapped or saturated cast.
pub fn whole_number_value(
    lua: &Lua,
    v: Value,
    what: &str,
    min: i64,
    max: i64,
) -> mlua::Result<Option<i64>> {
    let n = match &v {
        Value::Nil => return Ok(None),
        Value::Integer(i) => Some(*i),
        // Exactly representable and inside i64: the cast is exact.
        Value::Number(f) if f.fract() == 0.0 && *f >= -(2f64.powi(63)) && *f < 2f64.powi(63) => {
            Some(*f as i64)
        }
        _ => None,
    };
    match n {
        Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
        _ => {
            let got = match &v {
                Value::Integer(i) => i.to_string(),
                Value::Number(f) => format!("{f:?}"),
                Value::String(s) => format!("\"{}\"", s.to_string_lossy()),
                other => other.type_name().to_string(),
            };
            let range = if max == i64::MAX {
                format!("of at least {min}")
            } else {
                format!("from {min} to {max}")
            };
            Err(err_at(
                lua,
                format!("{what}: expected a whole number {range}, got {got}"),
            ))
        }
    }
}

pub fn bool_value(lua: &Lua, v: Value, what: &str, default: bool) -> mlua::Result<bool> {
    match v {
        Value::Nil => Ok(default),
        Value::Boolean(b) => Ok(b),
        other => Err(err_at(
            lua,
            format!("{what}: expected true or false, got {}", other.type_name()),
        )),
    }
}

pub fn string_value(lua: &Lua, v: Value, what: &str) -> mlua::Result<Option<String>> {
    match v {
        Value::Nil => Ok(None),
        Value::String(s) => Ok(Some(s.to_string_lossy())),
        Value::Integer(i) => Ok(Some(i.to_string())),
        Value::Number(n) => Ok(Some(n.to_string())),
        other => Err(err_at(
            lua,
            format!("{what}: expected a string, got {}", other.type_name()),
        )),
    }
}

/// Every option that takes paths (`cache.*`'s `paths`, `git.restore`'s `paths`,
/// `warmup.run`'s `expect_cache`, `fingerprint.take`'s `caches`) reads them here, the same
/// way: nil is `None`; a string is one path; a list holds strings only (a number is never
/// a path) and no holes, and may also name its entries (`torch.caches()` names them
/// `inductor`, …), but any other key is an error rather than silently ignored (an option
/// in the wrong table, `{ "/tmp/x", keep = true }`). An empty list is `Some([])`: whether
/// that is allowed is the caller's rule. `what` names the option, e.g. `cache.clear(): paths`.
pub fn path_list(lua: &Lua, what: &str, v: Value) -> mlua::Result<Option<Vec<String>>> {
    let wrong = |got: &str| {
        err_at(
            lua,
            format!("{what} is a path or a list of paths, e.g. {{ \"/tmp/torchinductor_root\" }}; got {got}"),
        )
    };
    let list = match v {
        Value::Nil => return Ok(None),
        Value::String(s) => return Ok(Some(vec![s.to_string_lossy()])),
        Value::Table(list) => list,
        other => return Err(wrong(other.type_name())),
    };
    let len = list.raw_len();
    let mut out = Vec::with_capacity(len);
    for i in 1..=len {
        match list.raw_get::<Value>(i)? {
            Value::String(s) => out.push(s.to_string_lossy()),
            other => return Err(wrong(&format!("{} at [{i}]", other.type_name()))),
        }
    }
    for pair in list.pairs::<Value, Value>() {
        let (k, v) = pair?;
        let alias = matches!((&k, &v), (Value::String(_), Value::String(s)) if out.contains(&s.to_string_lossy()));
        let listed = matches!(k, Value::Integer(i) if i >= 1 && i as usize <= len);
        if !alias && !listed {
            let key = match &k {
                Value::String(s) => s.to_string_lossy(),
                other => format!("{other:?}"),
            };
            return Err(wrong(&format!(
                "a table with the entry '{key}' that is not in its list (an option in the wrong table?)"
            )));
        }
    }
    Ok(Some(out))
}

/// `{ NAME = "value", … }` (or nil) as sorted pairs, for a command's environment. `what`
/// names the option in errors, e.g. `exec: env`.
/// Values keep their exact bytes (not only UTF-8), as argv words and stdin do.
pub fn env_table(
    lua: &Lua,
    v: Value,
    what: &str,
) -> mlua::Result<Vec<(String, std::ffi::OsString)>> {
    let t = match v {
        Value::Nil => return Ok(Vec::new()),
        Value::Table(t) => t,
        other => {
            return Err(err_at(
                lua,
                format!(
                    "{what} must be a table of NAME = \"value\", got {}",
                    other.type_name()
                ),
            ))
        }
    };
    let mut out = Vec::new();
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair?;
        let key = string_value(lua, k, what)?.unwrap_or_default();
        let val: Vec<u8> = match v {
            Value::String(s) => s.as_bytes().to_vec(),
            other => string_value(lua, other, &format!("{what}.{key}"))?
                .unwrap_or_default()
                .into_bytes(),
        };
        if key.is_empty() || key.contains('=') || key.contains('\0') || val.contains(&0) {
            return Err(err_at(
                lua,
                format!("{what}: '{key}' is not a valid variable name (or its value holds a NUL)"),
            ));
        }
        out.push((key, std::os::unix::ffi::OsStringExt::from_vec(val)));
    }
    out.sort();
    Ok(out)
}

/// The words of a plain Lua list (numbers converted), e.g. an argv: no holes and no
/// named keys, every word a string. `what` names the list in errors, e.g. `exec: argv`.
pub fn word_list(lua: &Lua, t: &Table, what: &str) -> mlua::Result<Vec<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStringExt;
    let len = t.raw_len();
    let mut words = Vec::with_capacity(len);
    for i in 1..=len {
        match t.raw_get::<Value>(i)? {
            Value::String(s) => words.push(std::ffi::OsString::from_vec(s.as_bytes().to_vec())),
            Value::Integer(n) => words.push(n.to_string().into()),
            Value::Number(n) => words.push(n.to_string().into()),
            other => {
                return Err(err_at(
                    lua,
                    format!("{what}[{i}] must be a string, got {}", other.type_name()),
                ))
            }
        }
    }
    if t.pairs::<Value, Value>().count() != len {
        return Err(err_at(
            lua,
            format!("{what} must be a plain list (no holes, no named keys)"),
        ));
    }
    Ok(words)
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
pub fn located(e: &mlua::Error, fallback: &str) -> String {
    let msg = error_message(e);
    if matches!(innermost(e), mlua::Error::MemoryError(_)) || has_location(&msg) {
        return msg;
    }
    let at = traceback_location(e).unwrap_or_else(|| fallback.to_string());
    format!("{at}: {msg}")
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
            (file.ends_with(".lua") && line.bytes().all(|b| b.is_ascii_digit()))
                .then(|| loc.to_string())
        })
    })
}
