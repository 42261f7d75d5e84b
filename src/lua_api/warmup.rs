//! `warmup.*`: run the script that fills the compile caches, and check that it did.

use super::target::target_arg;
use super::to_lua;
use super::{
    bool_value, check_keys, err_at, location, path_list, require_running, string_value,
    timeout_value,
};
use crate::primitives::warmup::{self, Spec};
use crate::primitives::Step;
use mlua::{Lua, Table, Value};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::time::Duration;

const RUN_KEYS: &[&str] = &[
    "venv",
    "python",
    "script",
    "args",
    "env",
    "cwd",
    "timeout",
    "single_threaded",
    "expect_cache",
    "quiet_warning",
];

const DEFAULT_QUIET: Duration = Duration::from_secs(120);

pub fn register(lua: &Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.raw_set("run", lua.create_async_function(run)?)?;
    lua.globals().raw_set("warmup", t)
}

/// Lua: warmup.run(t, { script, args, venv, python, env, cwd, timeout, single_threaded, expect_cache, quiet_warning }) -> { ok, duration, caches, planned }
///
/// Runs `PYTHON SCRIPT ARGS…` on `t` to fill compile caches, then checks that it did.
/// `PYTHON` is `<venv>/bin/python` when `venv` is given, else `python` (default
/// `"python3"`). `env`, `cwd` and `timeout` work as in `t:exec`. Options:
/// - `single_threaded` (default true): sets `TORCHINDUCTOR_COMPILE_THREADS=1` (an `env`
///   entry of the same name wins); `PYTHONUNBUFFERED=1` is set too, so output is live;
/// - `expect_cache`: a path or a list of paths, as `cache.clear` takes them (`~/` is the
///   target user's home), measured
///   (files, bytes, as `cache.size` does) before and after; each must exist afterwards
///   and have more files or more bytes, else the step fails naming the path with its
///   before → after;
/// - `quiet_warning` (default `"2m"`, at least `"1s"`; `false` or 0 for never): a `warn`
///   log line after that long without an output line, and again after each further
///   stretch.
///
/// Every output line is shown live (the spinner's latest line, `-v`, `--json`). Result:
/// `ok`, `duration` (seconds), `caches = { { path, files_before, bytes_before,
/// files_after, bytes_after, grew }, … }` (nil where a path did not exist). The run is a
/// change: `--dry-run` only plans it (`planned = true`) but still measures the caches
/// (before only; `--offline` measures nothing).
///
/// ```lua
/// step("warm caches", { timeout = "45m" }, function()
///   local w = warmup.run(box, {
///     venv = "/opt/venv", script = "/root/dflash/warmup.py", args = { "--steps", 3 },
///     cwd = "/root/dflash", expect_cache = { "/tmp/torchinductor_root", "~/.triton/cache" },
///   })
///   log.info(("warm-up took %.0fs"):format(w.duration))
/// end)
/// ```
async fn run(lua: Lua, (t, opts): (Value, Value)) -> mlua::Result<Value> {
    let ctx = require_running(&lua, "warmup.run()")?;
    let target = target_arg(&lua, &t, "warmup.run")?;
    let Value::Table(o) = opts else {
        return Err(err_at(
            &lua,
            "warmup.run(): the second argument is an options table, e.g. \
             warmup.run(t, { script = \"warmup.py\", expect_cache = \"/tmp/torchinductor_root\" })",
        ));
    };
    let spec = parse_spec(&lua, &o)?;
    let step = Step {
        ctx: &ctx,
        target: &target,
        at: location(&lua),
    };
    let outcome = warmup::run(&step, &spec).await?;
    to_lua(&lua, &outcome)
}

fn parse_spec(lua: &Lua, o: &Table) -> mlua::Result<Spec> {
    const W: &str = "warmup.run()";
    check_keys(lua, o, RUN_KEYS, W)?;
    let Some(script) = string_value(lua, o.get("script")?, "warmup.run(): script")? else {
        return Err(err_at(
            lua,
            "warmup.run(): `script` is required: the python file that warms the caches",
        ));
    };
    let venv = string_value(lua, o.get("venv")?, "warmup.run(): venv")?;
    let python = string_value(lua, o.get("python")?, "warmup.run(): python")?;
    let python = match (venv, python) {
        (Some(_), Some(_)) => {
            return Err(err_at(
                lua,
                "warmup.run(): give `venv` or `python`, not both",
            ))
        }
        (Some(v), None) => format!("{}/bin/python", v.trim_end_matches('/')),
        (None, Some(p)) => p,
        (None, None) => "python3".into(),
    };
    // 0 is "never", like `false`; below a second the warning would repeat as fast as the
    // runtime can loop, flooding the terminal and the record.
    let quiet_warning = match o.get::<Value>("quiet_warning")? {
        Value::Nil => Some(DEFAULT_QUIET),
        Value::Boolean(false) => None,
        v => match timeout_value(lua, v, "warmup.run(): quiet_warning")? {
            Some(d) if d < Duration::from_secs(1) => {
                return Err(err_at(
                    lua,
                    "warmup.run(): quiet_warning must be at least 1s (false or 0: never)",
                ))
            }
            d => d,
        },
    };
    Ok(Spec {
        python,
        script,
        args: args(lua, o.get("args")?)?,
        env: super::env_table(lua, o.get("env")?, "warmup.run(): env")?,
        cwd: string_value(lua, o.get("cwd")?, "warmup.run(): cwd")?,
        timeout: timeout_value(lua, o.get("timeout")?, "warmup.run(): timeout")?,
        single_threaded: bool_value(
            lua,
            o.get("single_threaded")?,
            "warmup.run(): single_threaded",
            true,
        )?,
        expect_cache: path_list(lua, "warmup.run(): expect_cache", o.get("expect_cache")?)?
            .unwrap_or_default(),
        quiet_warning,
    })
}

/// A list of words (strings or numbers), kept byte for byte.
fn args(lua: &Lua, v: Value) -> mlua::Result<Vec<OsString>> {
    let t = match v {
        Value::Nil => return Ok(Vec::new()),
        Value::Table(t) => t,
        other => {
            return Err(err_at(
                lua,
                format!(
                    "warmup.run(): args must be a list like {{ \"--steps\", 3 }}, got {}",
                    other.type_name()
                ),
            ))
        }
    };
    let mut out = Vec::new();
    for (i, v) in t.sequence_values::<Value>().enumerate() {
        match v? {
            Value::String(s) => out.push(OsString::from_vec(s.as_bytes().to_vec())),
            Value::Integer(n) => out.push(n.to_string().into()),
            Value::Number(n) => out.push(n.to_string().into()),
            other => {
                return Err(err_at(
                    lua,
                    format!(
                        "warmup.run(): args[{}] must be a string, got {}",
                        i + 1,
                        other.type_name()
                    ),
                ))
            }
        }
    }
    if t.pairs::<Value, Value>().count() != out.len() {
        return Err(err_at(
            lua,
            "warmup.run(): args must be a plain list (no holes, no named keys)",
        ));
    }
    Ok(out)
}
