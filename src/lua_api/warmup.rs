//! `warmup.*`: run the script that fills the compile caches, and check that it did.

use super::options;
use super::target::target_arg;
use super::to_lua;
use super::{err_at, require_running, step_for};
use crate::primitives::warmup::{self, OnMiss, Spec};
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
    /// `detach = true`: the warm-up outlives the connection (as `t:exec`'s `detach`:
    /// a dropped connection is reconnected and followed, `--resume` follows it after a
    /// killed run); default: true when `timeout` is over 5 minutes;
    detach: Option<bool>,
    /// `single_threaded` (default true): sets `TORCHINDUCTOR_COMPILE_THREADS=1` (an `env`
    /// entry of the same name wins); `PYTHONUNBUFFERED=1` is set too, so output is live;
    #[serde(default = "options::yes")]
    single_threaded: bool,
    /// `expect_cache`: a path or a list of paths, as `cache.clear` takes them (`~/` is the
    /// target user's home), measured (files, bytes, as `cache.size` does) before and
    /// after; each must exist afterwards and have more files or more bytes, else the step
    /// fails naming the path with its before → after. Or `"hit"`: the warm-up should
    /// compile nothing (after a restore): inductor's FX graph cache entries are counted
    /// before and after (its cache dir found with the warm-up's environment, as inductor
    /// finds it), and a warm-up that compiled anyway is reported (`cache_hit.hit = false`,
    /// a warning `the restored cache missed: 3 graphs compiled`; `on_miss`);
    /// ---@type "hit"|runbook.Paths
    #[serde(default, deserialize_with = "expect_cache")]
    expect_cache: Option<Expect>,
    /// `on_miss` (default `"warn"`): with `expect_cache = "hit"`, `"fail"` fails the step
    /// when the warm-up compiled anything;
    /// ---@type "warn"|"fail"
    on_miss: Option<String>,
    /// `torch_report = true`: runs the script under runbook's wrapper (`warmup-torch.sh`),
    /// which reads torch's own counters as the script exits (`torch.counters`:
    /// `fxgraph_cache_hit`, `fxgraph_cache_miss`, … from `torch._dynamo.utils.counters`)
    /// and, with `expect_cache = "hit"`, counts the graphs compiled by them;
    #[serde(default)]
    torch_report: bool,
    /// `mega_save`: a file path on `t` (absolute or `~/`): the wrapper (as with
    /// `torch_report`) saves torch's Mega-Cache there as the script exits
    /// (`torch.compiler.save_cache_artifacts()`, torch 2.7 or later; `torch.mega` says
    /// what it saved or why not; its folder is made 0700, the file written whole, then
    /// renamed);
    mega_save: Option<String>,
    /// `quiet_warning` (default `"2m"`, at least `"1s"`; `false` or 0 for never): a `warn`
    /// log line after that long without an output line, and again after each further
    /// stretch.
    /// ---@type runbook.Duration|false
    #[serde(default, deserialize_with = "quiet_warning")]
    quiet_warning: Option<Option<Duration>>,
}

/// `expect_cache`: `"hit"`, or the caches that must fill.
enum Expect {
    Hit,
    Fill(Vec<String>),
}

fn expect_cache<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Expect>, D::Error> {
    options::parse(d, |v| match v {
        Value::String(s) if s.as_bytes() == b"hit" => Ok(Some(Expect::Hit)),
        v => options::paths_of(v).map(|p| p.map(Expect::Fill)),
    })
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

/// Lua: warmup.run(t, { script, args, venv, python, env, cwd, timeout, detach, single_threaded, expect_cache, on_miss, torch_report, mega_save, quiet_warning }) -> { ok, duration, caches, cache_hit, torch, planned }
///
/// Runs `PYTHON SCRIPT ARGS…` on `t` to fill compile caches, then checks that it did.
/// `PYTHON` is `<venv>/bin/python` when `venv` is given, else `python`. Options ([`RunOptions`]):
///
/// Every output line is shown live (the spinner's latest line, `-v`, `--json`). Result:
/// `ok`, `duration` (seconds), `caches = { { path, files_before, bytes_before,
/// files_after, bytes_after, grew }, … }` (nil where a path did not exist); with
/// `expect_cache = "hit"`, `cache_hit = { dir, entries_before, entries_after,
/// graphs_compiled, counted_by, hit }`; with `torch_report` or `mega_save`, `torch = {
/// torch, inductor, counters, mega, error }` (nil when the script left no report: it was
/// killed, or ended with `os._exit`). The run is a change: `--dry-run` only plans it
/// (`planned = true`) but still measures the caches (before only; `--offline` measures
/// nothing).
///
/// A warm-up that compiled after a restore is not a failure by default: the cache is
/// warm once it ends, only the restore did not save the compile; the warning says how
/// many graphs, and `on_miss = "fail"` makes it one. Graphs are counted by inductor's
/// counters `fxgraph_cache_miss + fxgraph_cache_bypass` when `torch_report` is on, else
/// by the new files under inductor's `fxgraph/` (one per graph it compiled and kept: a
/// graph it could not cache, a bypass, leaves none). `require("runbook.torch")`'s
/// `torch.warmup` is this with `torch_report = true`.
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
/// ---@field cache_hit? runbook.WarmupCacheHit with `expect_cache = "hit"`
/// ---@field torch? runbook.WarmupTorchReport with `torch_report` or `mega_save`
/// ---@field planned boolean a dry-run: it did not run
/// ---@class runbook.WarmupCacheHit
/// ---@field dir string inductor's cache dir, as the warm-up's environment makes inductor choose it
/// ---@field entries_before? integer FX graph cache entries (files under `fxgraph/`) before; nil without `fxgraph/`
/// ---@field entries_after? integer the same after
/// ---@field graphs_compiled? integer graphs inductor compiled (nil when not measured)
/// ---@field counted_by? "counters"|"entries" inductor's counters, or the new entries
/// ---@field hit? boolean nothing was compiled
/// ---@class runbook.WarmupTorchReport
/// ---@field torch? string `torch.__version__` (nil: the script never imported torch)
/// ---@field inductor? string inductor's cache dir, as it resolved it
/// ---@field counters? runbook.TorchCounters
/// ---@field mega? runbook.TorchMegaSaved with `mega_save`
/// ---@field error? string why a part could not be read
/// ---@class runbook.TorchCounters
/// ---@field fxgraph_cache_hit integer
/// ---@field fxgraph_cache_miss integer
/// ---@field fxgraph_cache_bypass integer
/// ---@field autograd_cache_hit integer
/// ---@field autograd_cache_miss integer
/// ---@field autograd_cache_bypass integer
/// ---@field fxgraph_lookup_write_file integer generated code a hit had to write again (after a Mega-Cache load: its kernels are rebuilt)
/// ---@class runbook.TorchMegaSaved
/// ---@field saved boolean
/// ---@field path? string the file written
/// ---@field bytes? integer
/// ---@field artifacts table<string, integer> artifacts by kind (`inductor`, `aot_autograd`, …)
/// ---@field reason? string why nothing was saved
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
    let (expect_cache, hit) = match o.expect_cache {
        None => (Vec::new(), false),
        Some(Expect::Fill(paths)) => (paths, false),
        Some(Expect::Hit) => (Vec::new(), true),
    };
    let on_miss = match o.on_miss.as_deref() {
        None | Some("warn") => OnMiss::Warn,
        Some("fail") => OnMiss::Fail,
        Some(other) => {
            return Err(err_at(
                lua,
                format!("warmup.run(): on_miss is \"warn\" or \"fail\", got {other:?}"),
            ))
        }
    };
    if o.on_miss.is_some() && !hit {
        return Err(err_at(
            lua,
            "warmup.run(): on_miss goes with expect_cache = \"hit\" (what to do when the warm-up compiled)",
        ));
    }
    let expect_hit = hit.then_some(on_miss);
    let mega_save = match o.mega_save {
        Some(p) if !(p.starts_with('/') || p.starts_with("~/")) || p.ends_with('/') => {
            return Err(err_at(
                lua,
                format!(
                    "warmup.run(): mega_save is a file path on the target, absolute or ~/…, \
                     e.g. \"~/.cache/runbook/megacache/NAME/megacache.bin\"; got {p:?}"
                ),
            ))
        }
        p => p,
    };
    Ok(Spec {
        python,
        script,
        args: o.args,
        env: o.env,
        cwd: o.cwd,
        timeout: o.timeout,
        detach: o.detach,
        single_threaded: o.single_threaded,
        expect_cache,
        expect_hit,
        torch_report: o.torch_report,
        mega_save,
        quiet_warning,
    })
}
