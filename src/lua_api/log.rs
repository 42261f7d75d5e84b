//! `log.*` and `print`: messages from the runbook, as events (never printed directly).

use super::ctx;
use crate::actions::ctx::Phase;
use crate::actions::events::{Event, Level};
use mlua::{Lua, Value, Variadic};

pub fn register(lua: &Lua) -> mlua::Result<()> {
    let log = lua.create_table()?;
    for (name, level) in [
        ("debug", Level::Debug),
        ("info", Level::Info),
        ("warn", Level::Warn),
        ("error", Level::Error),
    ] {
        log.raw_set(
            name,
            lua.create_function(move |lua, args: Variadic<Value>| emit(lua, level, args))?,
        )?;
    }
    lua.globals().raw_set("log", log)?;
    lua.globals().raw_set(
        "print",
        lua.create_function(|lua, args: Variadic<Value>| emit(lua, Level::Info, args))?,
    )
}

/// Lua: log.info(...), log.warn(...), log.error(...), log.debug(...), print(...)
///
/// Writes a message to the terminal, `--json` and the run record. Arguments are joined
/// with spaces like `print`'s. `log.error` does not fail the step: use `fail()` for that.
/// `log.debug` shows only with `-v`.
///
/// ```lua
/// local r = here:exec({ "ls", "/etc" }, { read_only = true })
/// log.info("files:", r.stdout)
/// ```
/// ---@param ... any
/// The most a log message shows, in bytes.
const MESSAGE_MAX: usize = 1 << 20;

/// The most messages the top level of a file keeps for the run to show.
const EARLY_MAX: usize = 100;

fn emit(lua: &Lua, level: Level, args: Variadic<Value>) -> mlua::Result<()> {
    let ctx = ctx(lua);
    let mut parts = Vec::with_capacity(args.len());
    let mut len = 0;
    for v in args.iter() {
        // One Lua string passed many times is one string in Lua and a copy each here,
        // outside Lua's memory limit: a message is cut at MESSAGE_MAX.
        if len > MESSAGE_MAX {
            break;
        }
        let part = lua_display(lua, v)?;
        len += part.len() + 1;
        parts.push(part);
    }
    let mut message = parts.join(" ");
    if message.len() > MESSAGE_MAX {
        let mut cut = MESSAGE_MAX;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push_str(" … (cut at 1 MiB)");
    }
    if level == Level::Debug {
        tracing::debug!("{}", ctx.bus.mask(&message));
    }
    if ctx.phase.get() == Phase::Declaring {
        // Nothing listens yet while the top level runs: kept for the run to show, up to
        // EARLY_MAX (they are held outside Lua's memory limit).
        let mut early = ctx.early_logs.borrow_mut();
        match early.len() {
            n if n < EARLY_MAX => early.push((level, message)),
            EARLY_MAX => early.push((
                Level::Warn,
                format!("(more messages from the top level of the file were left out after {EARLY_MAX})"),
            )),
            _ => {}
        }
        return Ok(());
    }
    let step = ctx.step.get().map(|s| s.index);
    // Held to a saved plan, what a step says is what the plan shows it saying.
    let held = match (step, ctx.watch.borrow_mut().held()) {
        (Some(step), Some(enforcer)) => enforcer.note(step, level, &ctx.bus.mask(&message)),
        _ => Ok(None),
    };
    ctx.bus.emit(Event::Log {
        step,
        level,
        message,
    });
    match held {
        Ok(Some(warning)) => ctx.bus.emit(Event::Log {
            step,
            level: Level::Warn,
            message: warning,
        }),
        Ok(None) => {}
        Err(why) => return Err(mlua::Error::runtime(why)),
    }
    Ok(())
}

/// `tostring` semantics, with a trailing newline dropped (command output usually ends in one).
fn lua_display(lua: &Lua, v: &Value) -> mlua::Result<String> {
    let tostring: mlua::Function = lua.globals().raw_get("tostring")?;
    let s: String = match v {
        Value::String(s) => s.to_string_lossy(),
        other => tostring
            .call::<mlua::LuaString>(other.clone())?
            .to_string_lossy(),
    };
    Ok(s.strip_suffix('\n').map(str::to_string).unwrap_or(s))
}
