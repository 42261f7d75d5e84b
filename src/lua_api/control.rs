//! `fail`, `secret`, `sleep`: small controls a runbook needs.

use super::{ctx, duration_value, err_at, require_running};
use mlua::{Lua, Value};

pub fn register(lua: &Lua) -> mlua::Result<()> {
    let g = lua.globals();
    g.raw_set("fail", lua.create_function(fail)?)?;
    g.raw_set("secret", lua.create_function(secret)?)?;
    g.raw_set("sleep", super::async_function(lua, sleep)?)?;
    Ok(())
}

/// Lua: fail(message)
///
/// Fails the current step with `message` (retries apply). The message names the line.
///
/// ```lua
/// local r = here:exec({ "sh", "-c", "ls /srv/data | wc -l" }, { read_only = true })
/// if tonumber(r.stdout) < 3 then fail("expected at least 3 files") end
/// ```
/// ---@param message string
/// ---@return never
fn fail(lua: &Lua, msg: Value) -> mlua::Result<()> {
    let text = match msg {
        Value::String(s) => s.to_string_lossy(),
        Value::Nil => "failed".to_string(),
        other => format!("{other:?}"),
    };
    Err(err_at(lua, text))
}

/// Lua: secret(value) -> value
///
/// Marks a value as secret and returns it: from now on it shows as `***` in the terminal,
/// `--json`, previews and the run record, also when a command prints it. For a value a
/// command prints, use the command's `secret_output = true` instead: `secret()` comes
/// after the command's output was already recorded.
///
/// ```lua
/// local token = secret(params.prefix .. "-" .. params.suffix)
/// ```
/// ---@generic V
/// ---@param value V
/// ---@return V
fn secret(lua: &Lua, value: mlua::LuaString) -> mlua::Result<mlua::LuaString> {
    let what = format!("the value passed to secret() at {}", super::location(lua));
    ctx(lua).bus.add_secret(&value.to_string_lossy(), &what);
    Ok(value)
}

/// Lua: sleep(duration)
///
/// Waits, e.g. `sleep("2s")` or `sleep(0.5)`, up to 365 days (`sleep(0)` returns at
/// once); Ctrl-C and the step's timeout end the wait.
/// ---@param duration runbook.Duration
async fn sleep(lua: Lua, d: Value) -> mlua::Result<()> {
    let ctx = require_running(&lua, "sleep()")?;
    let Some(d) = duration_value(&lua, d, "sleep()")? else {
        return Err(err_at(&lua, "sleep(): give a duration, e.g. sleep(\"2s\")"));
    };
    let until = std::time::Instant::now() + d;
    let until = ctx.deadline.get().map_or(until, |dl| dl.min(until));
    let loc = super::location(&lua);
    ctx.send_reads_from_now();
    loop {
        if ctx.aborted() {
            return super::vm::abort_check(&ctx, &loc);
        }
        tokio::select! {
            _ = tokio::time::sleep_until(until.into()) => break,
            _ = ctx.cancel.notified() => {}
        }
    }
    super::vm::abort_check(&ctx, &loc)
}
