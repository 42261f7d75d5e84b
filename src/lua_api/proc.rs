//! `proc.*`: long-running jobs on a target (training, a server warming up). `spawn` starts
//! one detached from the run, so it keeps running after the run (and its SSH connection)
//! ends; `wait_for` waits for a line in its log; `stop` ends it. A job's pid is kept in
//! runbook's own directory on the target, `proc-NAME.pid` in `$XDG_RUNTIME_DIR/runbook`
//! or else `~/.local/state/runbook` (0700, owned by the user, never a symlink: nobody else
//! can plant or swap it), so a later run finds it by name.
//! The target needs `sh` and `setsid` (util-linux or busybox).

use super::options::{self, LuaValue};
use super::target::target_arg;
use super::to_lua;
use super::word_list;
use super::{err_at, require_running, step_for};
use crate::primitives::proc::{self, SpawnSpec, Which};
use mlua::{Lua, Table, Value};
use serde::Deserialize;
use std::ffi::OsString;
use std::time::Duration;

/// Options of `proc.spawn`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpawnOptions {
    /// `cmd` (required): the command, a list of words and no shell (`{ "sh", "-c", "…" }`
    /// for one);
    /// ---@type runbook.Words
    cmd: Option<LuaValue>,
    /// `log` (required): the file its stdout and stderr are appended to; best absolute: a
    /// relative one is relative to `cwd`, else to where commands start on `t` (the home
    /// directory over SSH);
    log: Option<String>,
    /// `cwd`: the job's working directory;
    cwd: Option<String>,
    /// `env` (table): variables for the job, as `t:exec` takes them;
    #[serde(default, deserialize_with = "options::env")]
    env: Vec<(String, OsString)>,
    /// `name` (default: the program's file name): identifies the job: its pid goes to
    /// `proc-NAME.pid` in runbook's own directory for the target user
    /// (`$XDG_RUNTIME_DIR/runbook`, else `~/.local/state/runbook`; 0700, never a symlink,
    /// never /tmp), where `proc.stop` finds it.
    name: Option<String>,
}

/// Options of `proc.wait_for`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitOptions {
    /// `file` (required): the file on `t` to read;
    file: Option<String>,
    /// `pattern` (required): a regular expression in Rust `regex` syntax
    /// (<https://docs.rs/regex/latest/regex/#syntax>: like Perl/PCRE without look-around
    /// or backreferences; `(?i)` for case-insensitive);
    pattern: Option<String>,
    /// `timeout` (default `"10m"`; 0 means no timeout): then the step fails with the
    /// file's last lines in the message; the step's own timeout and Ctrl-C end the wait
    /// too;
    #[serde(default, deserialize_with = "options::timeout_given")]
    timeout: Option<Option<Duration>>,
    /// `from_start = true`: the whole file counts (an earlier run's lines included);
    #[serde(default)]
    from_start: bool,
    /// `since = job` (the result of `proc.spawn`): the lines that job wrote count, and
    /// the wait ends when that job does.
    /// ---@type runbook.ProcJob
    since: Option<LuaValue>,
}

/// Options of `proc.stop`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopOptions {
    /// `name`: the job, by the name `proc.spawn` gave it;
    name: Option<String>,
    /// `pid`: any process, by its id, instead of a `name`;
    /// ---@type integer
    pid: Option<LuaValue>,
    /// `timeout` (default `"30s"`): how long it has to exit after SIGTERM before SIGKILL;
    /// 0 means no timeout, as everywhere: it waits for the job to exit on SIGTERM (until
    /// the step's timeout or Ctrl-C) and never sends SIGKILL.
    #[serde(default, deserialize_with = "options::timeout_given")]
    timeout: Option<Option<Duration>>,
}

pub fn register(lua: &Lua) -> mlua::Result<()> {
    lua.set_app_data(proc::Jobs::default());
    let t = lua.create_table()?;
    t.raw_set("spawn", super::async_function(lua, spawn)?)?;
    t.raw_set("wait_for", super::async_function(lua, wait_for)?)?;
    t.raw_set("stop", super::async_function(lua, stop)?)?;
    lua.globals().raw_set("proc", t)
}

/// What the `proc` table remembers in this VM (set by [`register`]).
fn jobs(lua: &Lua) -> mlua::AppDataRef<'_, proc::Jobs> {
    lua.app_data_ref::<proc::Jobs>()
        .expect("proc.register keeps the jobs in the VM")
}

fn options(lua: &Lua, opts: Option<Table>, what: &str, example: &str) -> mlua::Result<Table> {
    opts.ok_or_else(|| err_at(lua, format!("{what}: give the options, e.g. {example}")))
}

fn required(lua: &Lua, v: Option<String>, key: &str, what: &str) -> mlua::Result<String> {
    match v {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(err_at(lua, format!("{what}: {key} is required"))),
    }
}

fn raw(v: Option<LuaValue>) -> Value {
    v.map_or(Value::Nil, |v| v.0)
}

/// A list of strings (numbers converted), e.g. an argv.
fn argv_value(lua: &Lua, v: Value, what: &str) -> mlua::Result<Vec<OsString>> {
    let Value::Table(t) = v else {
        return Err(err_at(
            lua,
            format!(
                "{what}: the command is a list of words like {{ \"python\", \"train.py\" }}, got {} (for a shell line use {{ \"sh\", \"-c\", \"…\" }})",
                v.type_name()
            ),
        ));
    };
    let argv = word_list(lua, &t, what)?;
    if argv.is_empty() {
        return Err(err_at(
            lua,
            format!("{what}: the command must be a non-empty plain list of words"),
        ));
    }
    crate::base::quote::validate_argv(&argv).map_err(|e| err_at(lua, format!("{what}: {e}")))?;
    Ok(argv)
}

/// Lua: proc.spawn(t, { cmd, log, cwd, env, name }) -> { pid, name, log, pid_file, log_offset, planned }
///
/// Starts `cmd` on `t` as a detached job: its own session (`setsid`), stdin from
/// `/dev/null`, stdout and stderr appended to `log`. It keeps running after this command,
/// the step and the run end, SSH connection included. Options ([`SpawnOptions`]):
///
/// `log_offset` is the size of the log before the job started: where its own output
/// begins (`proc.wait_for` on that log reads from there). Spawning a name whose job is
/// still running is refused, naming its pid (also during `--dry-run`, which checks but
/// does not start anything: `pid` is nil there and `planned = true`).
///
/// ```lua
/// local box = target("root@pve1.example"):pct(200)
/// local job = proc.spawn(box, { name = "train", cwd = "/root/dflash", log = "/root/train.log",
///                               cmd = { "/opt/venv/bin/python", "train.py", "--resume" },
///                               env = { CUDA_VISIBLE_DEVICES = "0" } })
/// log.info("training as pid " .. tostring(job.pid))
/// ```
/// ---@param t runbook.Target
/// ---@param opts runbook.ProcSpawnOptions
/// ---@return runbook.ProcJob
/// ---@class runbook.ProcJob
/// ---@field pid? integer nil in a dry-run
/// ---@field name string
/// ---@field log string
/// ---@field pid_file? string
/// ---@field log_offset? integer the size of the log before the job started
/// ---@field planned boolean a dry-run: nothing was started
async fn spawn(lua: Lua, (t, opts): (Value, Option<Table>)) -> mlua::Result<Value> {
    const WHAT: &str = "proc.spawn()";
    let ctx = require_running(&lua, WHAT)?;
    let target = target_arg(&lua, &t, "proc.spawn")?;
    let opts = options(
        &lua,
        opts,
        WHAT,
        "proc.spawn(t, { cmd = { \"python\", \"train.py\" }, log = \"/root/train.log\" })",
    )?;
    let o: SpawnOptions = options::read(&lua, WHAT, Some(opts))?;
    let argv = argv_value(&lua, raw(o.cmd), "proc.spawn(): cmd")?;
    let log = required(&lua, o.log, "log", WHAT)?;
    let (cwd, env) = (o.cwd, o.env);
    let name = match o.name {
        Some(n) => {
            proc::check_name(&n).map_err(|e| err_at(&lua, format!("{WHAT}: {e}")))?;
            n
        }
        None => proc::default_name(&argv),
    };
    let step = step_for(&lua, &ctx, &target);
    let spec = SpawnSpec {
        argv,
        log,
        cwd,
        env,
        name,
    };
    let spawned = proc::spawn(&step, &jobs(&lua), &spec).await?;
    to_lua(&lua, &spawned)
}

/// Lua: proc.wait_for(t, { file, pattern, timeout, from_start, since }) -> { line, captures, planned }
///
/// Waits until a line of the growing file `file` on `t` matches `pattern`. Which lines
/// count: after a `proc.spawn` of a job logging to `file` on `t` in this run, the lines
/// that job wrote (from where the log stood when it started: a line it printed at once is
/// seen, an earlier run's line in an appended log is not; `since` says so explicitly);
/// otherwise the lines written after the call starts, or with `from_start` all of them.
/// Lines end at `\n` or `\r` (progress bars count). When that job (spawned in this run
/// with this log, or given as `since`) is gone, its whole process group exited, no line
/// will come: the wait fails at once, not at its timeout, naming the job and showing the
/// log's last lines (a line it printed before exiting still counts, one without a final
/// newline too). Options ([`WaitOptions`]):
///
/// The result has the matching `line` and `captures`, the groups as strings (a group that
/// did not take part is `false`; named groups are also `captures.NAME`); the groups are
/// also the result's own fields 1, 2, ….
///
/// The file is read as it grows, at most ten times a second, and about once a second
/// while it does not (only the new bytes; each read is an action, so
/// the lines it read are in the run record, and shown with `-v`). During `--dry-run`
/// nothing was started, so it returns at once with `planned = true` and no `line`.
///
/// ```lua
/// proc.spawn(box, { name = "train", cmd = { "python", "train.py" }, log = "/root/train.log" })
/// local m = proc.wait_for(box, { file = "/root/train.log", pattern = "([0-9.]+) Ktok/s",
///                                timeout = "15m" })
/// if not m.planned and tonumber(m[1]) < 20 then fail("slow: " .. m.line) end
/// ```
/// ---@param t runbook.Target
/// ---@param opts runbook.ProcWaitOptions
/// ---@return runbook.ProcMatch
/// ---@class runbook.ProcMatch
/// ---@field line? string the matching line (nil in a dry-run)
/// ---@field captures? table<integer|string, string|false> its groups, by number and name
/// ---@field planned boolean a dry-run: nothing was waited for
/// ---@field [integer] string|false the groups, also as the result's own fields
async fn wait_for(lua: Lua, (t, opts): (Value, Option<Table>)) -> mlua::Result<Table> {
    const WHAT: &str = "proc.wait_for()";
    let ctx = require_running(&lua, WHAT)?;
    let target = target_arg(&lua, &t, "proc.wait_for")?;
    let opts = options(
        &lua,
        opts,
        WHAT,
        "proc.wait_for(t, { file = \"/root/train.log\", pattern = \"step [0-9]+\" })",
    )?;
    let o: WaitOptions = options::read(&lua, WHAT, Some(opts))?;
    let file = required(&lua, o.file, "file", WHAT)?;
    let pattern = required(&lua, o.pattern, "pattern", WHAT)?;
    let pattern = regex::Regex::new(&pattern)
        .map_err(|e| err_at(&lua, format!("{WHAT}: pattern is not a valid regex: {e}")))?;
    let timeout = o.timeout.unwrap_or(Some(Duration::from_secs(600)));
    let from_start = o.from_start;
    let (since, job) = match raw(o.since) {
        Value::Nil => (None, None),
        Value::Table(job) => {
            let offset = match job.get::<Value>("log_offset")? {
                Value::Integer(n) if n >= 0 => Some(n as u64),
                // A planned spawn (dry-run) has no offset: nothing was started.
                Value::Nil => None,
                other => {
                    return Err(err_at(
                        &lua,
                        format!(
                            "{WHAT}: since.log_offset must be a whole number, got {}",
                            other.type_name()
                        ),
                    ))
                }
            };
            let name = match job.get::<Value>("name")? {
                Value::Nil => None,
                Value::String(n) => {
                    let n = n.to_string_lossy();
                    proc::check_name(&n)
                        .map_err(|e| err_at(&lua, format!("{WHAT}: since.name: {e}")))?;
                    Some(n)
                }
                other => {
                    return Err(err_at(
                        &lua,
                        format!(
                            "{WHAT}: since.name must be a job name, got {}",
                            other.type_name()
                        ),
                    ))
                }
            };
            (offset, name)
        }
        other => {
            return Err(err_at(
                &lua,
                format!(
                    "{WHAT}: since is the result of proc.spawn, got {}",
                    other.type_name()
                ),
            ))
        }
    };
    let step = step_for(&lua, &ctx, &target);
    let spec = proc::WaitSpec {
        file,
        pattern,
        timeout,
        from_start,
        since,
        job,
    };
    let m = proc::wait_for(&step, &jobs(&lua), &spec).await?;
    let result = lua.create_table()?;
    if m.planned {
        result.raw_set("planned", true)?;
        result.raw_set("captures", lua.create_table()?)?;
        return Ok(result);
    }
    let captures = lua.create_table()?;
    for (i, c) in m.captures.iter().enumerate() {
        let v = match c {
            Some(s) => Value::String(lua.create_string(s)?),
            None => Value::Boolean(false),
        };
        captures.raw_set(i + 1, v.clone())?;
        result.raw_set(i + 1, v)?;
    }
    for (name, c) in &m.named {
        let v = match c {
            Some(s) => Value::String(lua.create_string(s)?),
            None => Value::Boolean(false),
        };
        captures.raw_set(name.as_str(), v)?;
    }
    result.raw_set("line", m.line)?;
    result.raw_set("captures", captures)?;
    result.raw_set("planned", false)?;
    Ok(result)
}

/// Lua: proc.stop(t, { name or pid, timeout }) -> { pid, was_running, killed, planned }
///
/// Stops a job started by `proc.spawn`, or any process: SIGTERM to its process group
/// (the process alone if it leads none), up to `timeout` for it to exit, then SIGKILL
/// (`killed = true`). Give one of `name` and `pid`. Options ([`StopOptions`]):
///
/// A job that is not running is not an error: `was_running = false`, nothing is
/// signalled (`pid` is nil when there is no pid file). The pid file is removed, that of a
/// job that exited by itself too (a change: planned during `--dry-run`). During
/// `--dry-run` the check runs and the stop is planned.
///
/// ```lua
/// local s = proc.stop(box, { name = "train", timeout = "1m" })
/// if s.killed then log.warn("train ignored SIGTERM; killed") end
/// ```
/// ---@param t runbook.Target
/// ---@param opts runbook.ProcStopOptions
/// ---@return runbook.ProcStopped
/// ---@class runbook.ProcStopped
/// ---@field pid? integer
/// ---@field was_running boolean
/// ---@field killed boolean it ignored SIGTERM and got SIGKILL
/// ---@field planned boolean a dry-run: nothing was stopped
async fn stop(lua: Lua, (t, opts): (Value, Option<Table>)) -> mlua::Result<Value> {
    const WHAT: &str = "proc.stop()";
    let ctx = require_running(&lua, WHAT)?;
    let target = target_arg(&lua, &t, "proc.stop")?;
    let opts = options(&lua, opts, WHAT, "proc.stop(t, { name = \"train\" })")?;
    let o: StopOptions = options::read(&lua, WHAT, Some(opts))?;
    let name = o.name;
    let pid = match raw(o.pid) {
        Value::Nil => None,
        Value::Integer(p) if p > 1 && p <= i64::from(u32::MAX) => Some(p as u32),
        Value::Number(p) if p.fract() == 0.0 && p > 1.0 && p <= f64::from(u32::MAX) => {
            Some(p as u32)
        }
        Value::String(s) => match s.to_string_lossy().trim().parse::<u32>() {
            Ok(p) if p > 1 => Some(p),
            _ => return Err(err_at(&lua, format!("{WHAT}: pid must be a process id"))),
        },
        _ => return Err(err_at(&lua, format!("{WHAT}: pid must be a process id"))),
    };
    let which = match (name, pid) {
        (Some(n), None) => {
            proc::check_name(&n).map_err(|e| err_at(&lua, format!("{WHAT}: {e}")))?;
            Which::Name(n)
        }
        (None, Some(p)) => Which::Pid(p),
        _ => {
            return Err(err_at(
                &lua,
                format!("{WHAT}: give exactly one of name (a job from proc.spawn) or pid"),
            ))
        }
    };
    let timeout = o.timeout.unwrap_or(Some(Duration::from_secs(30)));
    let step = step_for(&lua, &ctx, &target);
    let stopped = proc::stop(&step, &jobs(&lua), &which, timeout).await?;
    to_lua(&lua, &stopped)
}
