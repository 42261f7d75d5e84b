//! `fingerprint.*`: describe an environment, keep the known-good one, say what changed.

use super::options;
use super::target::target_arg;
use super::to_lua;
use super::{ctx, err_at, require_running, step_for, string_value};
use crate::events::Event;
use crate::primitives::fingerprint::{self, Fingerprint, Scope};
use mlua::{Lua, LuaSerdeExt, Table, Value};
use serde::Deserialize;

/// Options of `fingerprint.take`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TakeOptions {
    /// `venv`: the venv whose python (and packages) to describe;
    venv: Option<String>,
    /// `python` (default `"python3"`): the python to describe, when there is no `venv`;
    python: Option<String>,
    /// `repo`: a git repository on `t`, whose HEAD and dirty files are described;
    repo: Option<String>,
    /// `caches`: a path or a list of paths, as `cache.clear` takes them, each measured as
    /// `cache.size` does when it exists (`caches[path] = { bytes, files }`).
    #[serde(default, deserialize_with = "options::paths")]
    caches: Option<Vec<String>>,
}

pub fn register(lua: &Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.raw_set("take", super::async_function(lua, take)?)?;
    t.raw_set("save", lua.create_function(save)?)?;
    t.raw_set("load", lua.create_function(load)?)?;
    t.raw_set("diff", lua.create_function(diff)?)?;
    lua.globals().raw_set("fingerprint", t)
}

/// Lua: fingerprint.take(t, { venv, python, repo, caches }) -> fp
///
/// Describes the environment on `t` (a read, so it runs during `--dry-run` too): python,
/// torch and CUDA versions, GPU names, compute capabilities and driver, the platform,
/// the compile-relevant environment (`TORCHINDUCTOR_*`, `TRITON_*`,
/// `TORCH_CUDA_ARCH_LIST`), every installed package (`packages`,
/// with `packages_hash`), the git HEAD and dirty files of `repo`, and the size of each
/// path in `caches` that exists. Options ([`TakeOptions`]):
///
/// ```lua
/// local torch = require("runbook.torch")
/// local now = fingerprint.take(node, { venv = "/opt/venv", repo = "/root/dflash",
///                                      caches = torch.caches(node, { user = "root" }) })
/// ```
/// ---@param t runbook.Target
/// ---@param opts runbook.FingerprintTakeOptions
/// ---@return runbook.Fingerprint
/// ---@class runbook.Fingerprint
/// ---@field target string the target it describes
/// ---@field taken_at string when, in UTC (RFC 3339)
/// ---@field python? string
/// ---@field torch? string
/// ---@field cuda? string
/// ---@field driver? string the GPU driver version
/// ---@field gpus string[] the GPU names
/// ---@field compute_caps string[] each GPU's compute capability (`9.0`), where nvidia-smi knows it
/// ---@field platform? string `uname -s -m`: `Linux x86_64`
/// ---@field env table<string, string> the compile-relevant environment on `t`: `TORCHINDUCTOR_*`, `TRITON_*`, `TORCH_CUDA_ARCH_LIST`
/// ---@field packages table<string, string> name → version, every installed package
/// ---@field packages_hash? string
/// ---@field git_head? string the HEAD of `repo`
/// ---@field git_dirty string[] the dirty files of `repo`
/// ---@field caches table<string, { bytes: integer, files: integer }> path → size, for each cache that exists
/// ---@field planned boolean `--offline`: nothing was looked at
async fn take(lua: Lua, (t, opts): (Value, Option<Table>)) -> mlua::Result<Value> {
    let ctx = require_running(&lua, "fingerprint.take()")?;
    let target = target_arg(&lua, &t, "fingerprint.take")?;
    let o: TakeOptions = options::read(&lua, "fingerprint.take()", opts)?;
    let scope = Scope {
        venv: o.venv,
        python: o.python,
        repo: o.repo,
        caches: o.caches.unwrap_or_default(),
    };
    let step = step_for(&lua, &ctx, &target);
    let fp = fingerprint::take(&step, &scope).await?;
    to_lua(&lua, &fp)
}

fn from_lua(lua: &Lua, v: Value, what: &str) -> mlua::Result<Fingerprint> {
    lua.from_value(v).map_err(|e| {
        err_at(
            lua,
            format!("{what}: not a fingerprint (from fingerprint.take or .load): {e}"),
        )
    })
}

fn state_dir(lua: &Lua) -> mlua::Result<std::path::PathBuf> {
    ctx(lua).state_dir.borrow().clone().ok_or_else(|| {
        err_at(
            lua,
            "fingerprints are kept in the state dir, which only a run has",
        )
    })
}

/// Lua: fingerprint.save(name, fp)
///
/// Keeps `fp` under `name` in the state dir (`<state>/fingerprints/NAME.json`), e.g. as
/// the new known-good after a successful recovery. It is a change like a command's: a
/// preview and a plan list it (`on local: save fingerprint 'NAME'`), a confirmed run
/// saves it only where it was confirmed, and during `--dry-run` nothing is written.
///
/// ```lua
/// fingerprint.save("dflash-known-good", fingerprint.take(node, { venv = "/opt/venv" }))
/// ```
/// ---@param name string
/// ---@param fp runbook.Fingerprint
fn save(lua: &Lua, (name, fp): (Value, Value)) -> mlua::Result<()> {
    let ctx = require_running(lua, "fingerprint.save()")?;
    let name = string_value(lua, name, "fingerprint.save(): name")?.unwrap_or_default();
    let fp = from_lua(lua, fp, "fingerprint.save()")?;
    // The file it writes, when the state dir is known (an offline `check` has none).
    let file = match ctx.state_dir.borrow().as_ref() {
        Some(dir) => Some(
            fingerprint::store(dir, &name)
                .map_err(|e| err_at(lua, format!("fingerprint.save(): {e}")))?,
        ),
        None => None,
    };
    let summary = format!("save fingerprint '{name}'");
    let shown = match &file {
        Some(path) => format!("write {}", path.display()),
        None => summary.clone(),
    };
    // What the plan holds the run to: the name, not the file (the state dir may be
    // named differently at apply) nor the facts (taken again in the real run).
    let command = format!("fingerprint.save {name}");
    let saved = crate::actions::own_change(&ctx, &summary, &shown, &command, || {
        let dir = ctx
            .state_dir
            .borrow()
            .clone()
            .ok_or("fingerprints are kept in the state dir, which only a run has")?;
        fingerprint::save(&dir, &name, &fp).map_err(|e| format!("fingerprint.save(): {e}"))
    })
    .map_err(|e| match e {
        crate::actions::ActionError::Stop(why) => {
            crate::primitives::Error::Stop(crate::abort::Abort {
                why,
                at: super::location(lua),
            })
            .into()
        }
        crate::actions::ActionError::Failed(msg) => err_at(lua, msg),
    })?;
    if let Some(path) = saved {
        ctx.bus.emit(Event::Log {
            step: ctx.step.get().map(|s| s.index),
            level: crate::events::Level::Info,
            message: format!("saved fingerprint '{name}' ({})", path.display()),
        });
    }
    Ok(())
}

/// Lua: fingerprint.load(name) -> fp or nil
///
/// The fingerprint saved under `name`, or nil when there is none yet.
/// ---@param name string
/// ---@return runbook.Fingerprint?
fn load(lua: &Lua, name: Value) -> mlua::Result<Value> {
    let name = string_value(lua, name, "fingerprint.load(): name")?.unwrap_or_default();
    match fingerprint::load(&state_dir(lua)?, &name)
        .map_err(|e| err_at(lua, format!("fingerprint.load(): {e}")))?
    {
        Some(fp) => to_lua(lua, &fp),
        None => Ok(Value::Nil),
    }
}

/// Lua: fingerprint.diff(a, b) -> { { what, before, after }, … }
///
/// What changed from `a` to `b`, most telling first: torch, CUDA, python, driver, git
/// HEAD, GPUs, dirty files, each package added, removed or changed, caches that appeared
/// or vanished. An empty list means nothing that matters changed.
///
/// ```lua
/// local good = fingerprint.load("dflash-known-good")
/// if good then
///   local now = fingerprint.take(node, { venv = "/opt/venv", repo = "/root/dflash" })
///   for _, c in ipairs(fingerprint.diff(good, now)) do
///     log.warn(c.what .. ": " .. tostring(c.before) .. " -> " .. tostring(c.after))
///   end
/// end
/// ```
/// ---@param a runbook.Fingerprint
/// ---@param b runbook.Fingerprint
/// ---@return runbook.FingerprintChange[]
/// ---@class runbook.FingerprintChange
/// ---@field what string what changed (`torch`, `package numpy`, …)
/// ---@field before? string
/// ---@field after? string
fn diff(lua: &Lua, (a, b): (Value, Value)) -> mlua::Result<Value> {
    let a = from_lua(lua, a, "fingerprint.diff(): first argument")?;
    let b = from_lua(lua, b, "fingerprint.diff(): second argument")?;
    let changes = fingerprint::diff(&a, &b);
    let list = lua.create_table()?;
    for c in changes {
        list.raw_push(to_lua(lua, &c)?)?;
    }
    Ok(Value::Table(list))
}
