//! `step()`: declares the units a run is made of.

use super::{
    bool_value, check_keys, ctx, duration_value, err_at, location, string_value, timeout_value,
    whole_number_value,
};
use crate::ctx::{Phase, StepDecl, StepOptions};
use mlua::{Lua, Table, Value, Variadic};

const STEP_KEYS: &[&str] = &["retries", "delay", "timeout", "when", "always", "confirm"];

pub fn register(lua: &Lua) -> mlua::Result<()> {
    lua.globals().raw_set("step", lua.create_function(declare)?)
}

/// Lua: step(name, [opts], fn)
///
/// Declares a step. Steps run in the order they are declared, after the whole file has
/// loaded; the first failing step stops the run. Options:
/// - `retries` (whole number from 0 to 1000, default 0) and `delay` (duration between
///   tries, default `"1s"`; 0 retries at once);
/// - `timeout` (duration): covers the step's commands *and* its Lua code; 0 (in any
///   spelling: `0`, `0.0`, `"0s"`) means no timeout;
/// - `when` (function returning a boolean): false skips the step;
/// - `always` (boolean): runs even after an earlier failure or Ctrl-C, like `finally`;
/// - `confirm` (boolean): a real run asks before it starts (or needs `--yes`).
///
/// ```lua
/// step("make files", { retries = 2, delay = "1s", timeout = "30s" }, function()
///   here:exec({ "touch", params.dir .. "/f1" })
/// end)
/// step("clean up", { always = true }, function() here:exec({ "rm", "-rf", "--", params.dir }) end)
/// ```
fn declare(lua: &Lua, args: Variadic<Value>) -> mlua::Result<()> {
    let ctx = ctx(lua);
    if ctx.phase.get() != Phase::Declaring {
        return Err(err_at(
            lua,
            "step() is declared at the top level of the file, not inside another step",
        ));
    }
    if ctx.header.borrow().is_none() {
        return Err(err_at(
            lua,
            "the file must start with runbook { name = … } before its first step()",
        ));
    }
    let usage = "usage: step(\"name\", [{ options }], function() … end)";
    let mut args = args.into_iter();
    let name = match string_value(lua, args.next().unwrap_or(Value::Nil), "step name")? {
        Some(n) if !n.trim().is_empty() => n,
        _ => {
            return Err(err_at(
                lua,
                format!("step(): the first argument is the step's name; {usage}"),
            ))
        }
    };
    let (opts, func) = match (args.next(), args.next(), args.next()) {
        (Some(Value::Function(f)), None, None) => (None, f),
        (Some(Value::Table(t)), Some(Value::Function(f)), None) => (Some(t), f),
        _ => return Err(err_at(lua, format!("step(\"{name}\"): {usage}"))),
    };
    if ctx.steps.borrow().iter().any(|s| s.name == name) {
        return Err(err_at(
            lua,
            format!(
                "step(\"{name}\"): a step with this name already exists; step names must be unique"
            ),
        ));
    }
    let opts = match opts {
        None => StepOptions {
            delay: std::time::Duration::from_secs(1),
            ..Default::default()
        },
        Some(t) => parse_options(lua, &name, &t)?,
    };
    ctx.steps.borrow_mut().push(StepDecl {
        name,
        opts,
        func,
        location: location(lua),
    });
    Ok(())
}

fn parse_options(lua: &Lua, name: &str, t: &Table) -> mlua::Result<StepOptions> {
    let what = format!("step(\"{name}\")");
    check_keys(lua, t, STEP_KEYS, &what)?;
    let retries = whole_number_value(lua, t.get("retries")?, &format!("{what}: retries"), 0, 1000)?
        .unwrap_or(0) as u32;
    let when = match t.get::<Value>("when")? {
        Value::Nil => None,
        Value::Function(f) => Some(f),
        other => {
            return Err(err_at(
                lua,
                format!(
                    "{what}: when must be a function returning true or false, got {}",
                    other.type_name()
                ),
            ))
        }
    };
    Ok(StepOptions {
        retries,
        delay: duration_value(lua, t.get("delay")?, &format!("{what}: delay"))?
            .unwrap_or(std::time::Duration::from_secs(1)),
        timeout: timeout_value(lua, t.get("timeout")?, &format!("{what}: timeout"))?,
        when,
        always: bool_value(lua, t.get("always")?, &format!("{what}: always"), false)?,
        confirm: bool_value(lua, t.get("confirm")?, &format!("{what}: confirm"), false)?,
    })
}
