//! `step()`: declares the units a run is made of.

use super::options::{self, Whole};
use super::{ctx, err_at, location, string_value};
use crate::actions::ctx::{Phase, StepDecl, StepOptions};
use mlua::{Lua, Table, Value, Variadic};
use serde::Deserialize;
use std::collections::HashSet;
use std::time::Duration;

/// Options of `step`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct DeclareOptions {
    /// `retries` (a whole number from 0 to 1000, default 0): how many more tries a failed
    /// step gets;
    retries: Option<Whole<0, 1000>>,
    /// `delay` (a duration, default `"1s"`; 0 retries at once): the wait between tries;
    #[serde(default, deserialize_with = "options::duration")]
    delay: Option<Duration>,
    /// `timeout` (duration): covers the step's commands *and* its Lua code; 0 (in any
    /// spelling: `0`, `0.0`, `"0s"`) means no timeout;
    #[serde(default, deserialize_with = "options::timeout")]
    timeout: Option<Duration>,
    /// `when` (function returning a boolean): false skips the step;
    /// ---@type fun(): boolean
    #[serde(default, deserialize_with = "options::function")]
    when: Option<mlua::Function>,
    /// `always` (boolean): runs even after an earlier failure or Ctrl-C, like `finally`;
    #[serde(default)]
    always: bool,
    /// `confirm` (boolean): a real run asks before it starts (or needs `--yes`).
    #[serde(default)]
    confirm: bool,
}

pub fn register(lua: &Lua) -> mlua::Result<()> {
    // The names declared so far, to refuse a second step of one name: a set, not a look
    // through every step declared before (1,000 steps were half a million comparisons).
    let names = std::cell::RefCell::new(HashSet::new());
    lua.globals().raw_set(
        "step",
        lua.create_function(move |lua, args| declare(lua, args, &names))?,
    )
}

/// Lua: step(name, [opts], fn)
///
/// Declares a step. Steps run in the order they are declared, after the whole file has
/// loaded; the first failing step stops the run. Options ([`DeclareOptions`]):
///
/// ```lua
/// step("make files", { retries = 2, delay = "1s", timeout = "30s" }, function()
///   here:exec({ "touch", params.dir .. "/f1" })
/// end)
/// step("clean up", { always = true }, function() here:exec({ "rm", "-rf", "--", params.dir }) end)
/// ```
/// ---@param name string
/// ---@param opts runbook.StepDeclareOptions
/// ---@param fn fun()
/// ---@overload fun(name: string, fn: fun())
fn declare(
    lua: &Lua,
    args: Variadic<Value>,
    names: &std::cell::RefCell<HashSet<String>>,
) -> mlua::Result<()> {
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
    if names.borrow().contains(&name) {
        return Err(err_at(
            lua,
            format!(
                "step(\"{name}\"): a step with this name already exists; step names must be unique"
            ),
        ));
    }
    let opts = parse_options(lua, &name, opts)?;
    names.borrow_mut().insert(name.clone());
    ctx.steps.borrow_mut().push(StepDecl {
        name,
        opts,
        func,
        location: location(lua),
    });
    Ok(())
}

fn parse_options(lua: &Lua, name: &str, t: Option<Table>) -> mlua::Result<StepOptions> {
    // No table: every option's default, without an empty table made to read them from.
    let o: DeclareOptions = match t {
        None => DeclareOptions::default(),
        t => options::read(lua, &format!("step(\"{name}\")"), t)?,
    };
    Ok(StepOptions {
        retries: o.retries.map_or(0, |n| n.0 as u32),
        delay: o.delay.unwrap_or(Duration::from_secs(1)),
        timeout: o.timeout,
        when: o.when,
        always: o.always,
        confirm: o.confirm,
    })
}
