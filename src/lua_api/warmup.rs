//! `warmup.*`: run the script that fills the compile caches, and check that it did.

use super::options;
use super::target::target_arg;
use super::to_lua;
use super::{err_at, require_running, step_for};
use crate::primitives::warmup::{self, Spec};
use mlua::{Lua, Table, Value};
use serde::{Deserialize, Deserializer};
use std::ffi::OsString;
use std::time::Duration;

/// Options of `warmup.run`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunOptions {
    /// `venv`: the venv whose python runs the script (`<venv>/bin/python`);
    venv: Option<String>,
    /// `python` (default `"python3"`): the python to run it with, when there is no `venv`;
    python: Option<String>,
    /// `script` (required): the python file that warms the caches, on `t`;
    script: Option<String>,
    /// `args`: its arguments, a list of words (numbers are converted);
    #[serde(default, deserialize_with = "options::words")]
    args: Vec<OsString>,
    /// `env`: as in `t:exec`;
    #[serde(default, deserialize_with = "options::env")]
    env: Vec<(String, OsString)>,
    /// `cwd`: as in `t:exec`;
    cwd: Option<String>,
    /// `timeout`: as in `t:exec`;
    #[serde(default, deserialize_with = "options::timeout")]
    timeout: Option<Duration>,
    /// `single_threaded` (default true): sets `TORCHINDUCTOR_COMPILE_THREADS=1` (an `env`
    /// entry of the same name wins); `PYTHONUNBUFFERED=1` is set too, so output is live;
    #[serde(default = "options::yes")]
    single_threaded: bool,
    /// `expect_cache`: a path or a list of paths, as `cache.clear` takes them (`~/` is the
    /// target user's home), measured (files, bytes, as `cache.size` does) before and
    /// after; each must exist afterwards and have more files or more bytes, else the step
    /// fails naming the path with its before → after;
    #[serde(default, deserialize_with = "options::paths")]
    expect_cache: Option<Vec<String>>,
    /// `quiet_warning` (default `"2m"`, at least `"1s"`; `false` or 0 for never): a `warn`
    /// log line after that long without an output line, and again after each further
    /// stretch.
    /// ---@type runbook.Duration|false
    #[serde(default, deserialize_with = "quiet_warning")]
    quiet_warning: Option<Option<Duration>>,
}

/// `false` or a timeout (0 is never too).
fn quiet_warning<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<Duration>>, D::Error> {
    options::parse(d, |v| match v {
        Value::Boolean(false) => Ok(None),
        v => options::timeout_of(v),
    })
    .map(Some)
}

const DEFAULT_QUIET: Duration = Duration::from_secs(120);

pub fn register(lua: &Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.raw_set("run", super::async_function(lua, run)?)?;
    lua.globals().raw_set("warmup", t)
}

/// Lua: warmup.run(t, { script, args, venv, python, env, cwd, timeout, single_threaded, expect_cache, quiet_warning }) -> { ok, duration, caches, planned }
///
/// Runs `PYTHON SCRIPT ARGS…` on `t` to fill compile caches, then checks that it did.
/// `PYTHON` is `<venv>/bin/python` when `venv` is given, else `python`. Options ([`RunOptions`]):
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
/// ---@param t runbook.Target
/// ---@param opts runbook.WarmupRunOptions
/// ---@return runbook.WarmupResult
/// ---@class runbook.WarmupResult
/// ---@field ok boolean
/// ---@field duration number seconds
/// ---@field caches runbook.WarmupCache[]
/// ---@field planned boolean a dry-run: it did not run
/// ---@class runbook.WarmupCache
/// ---@field path string
/// ---@field files_before? integer
/// ---@field bytes_before? integer
/// ---@field files_after? integer
/// ---@field bytes_after? integer
/// ---@field state? "filled"|"warm"|"empty" `filled` (it grew), `warm` (full before and after) or `empty` (nothing in it after)
/// ---@field grew? boolean
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
    let spec = parse_spec(&lua, o)?;
    let step = step_for(&lua, &ctx, &target);
    let outcome = warmup::run(&step, &spec).await?;
    to_lua(&lua, &outcome)
}

fn parse_spec(lua: &Lua, o: Table) -> mlua::Result<Spec> {
    const W: &str = "warmup.run()";
    let o: RunOptions = options::read(lua, W, Some(o))?;
    let Some(script) = o.script else {
        return Err(err_at(
            lua,
            "warmup.run(): `script` is required: the python file that warms the caches",
        ));
    };
    let python = match (o.venv, o.python) {
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
    let quiet_warning = match o.quiet_warning {
        None => Some(DEFAULT_QUIET),
        Some(Some(d)) if d < Duration::from_secs(1) => {
            return Err(err_at(
                lua,
                "warmup.run(): quiet_warning must be at least 1s (false or 0: never)",
            ))
        }
        Some(d) => d,
    };
    Ok(Spec {
        python,
        script,
        args: o.args,
        env: o.env,
        cwd: o.cwd,
        timeout: o.timeout,
        single_threaded: o.single_threaded,
        expect_cache: o.expect_cache.unwrap_or_default(),
        quiet_warning,
    })
}
