//! `fingerprint.*`: describe an environment, keep the known-good one, say what changed.

use super::options;
use super::target::target_arg;
use super::to_lua;
use super::{ctx, err_at, require_running, step_for, string_value};
use crate::actions::events::Event;
use crate::primitives::fingerprint::{self, Fingerprint, Loaded, Scope};
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
/// with `packages_hash`), the git HEAD and dirty files of `repo`, the size of each
/// path in `caches` that exists, and which machine `t` is (`identity`: what a
/// known-good is kept by). With `--offline` nothing is read: `planned` is true and every
/// value is unknown (`fingerprint.diff` reports no change for it). Options ([`TakeOptions`]):
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
/// ---@field identity? runbook.MachineIdentity which machine it describes (nil with `--offline`)
/// ---@field artifact? string the compile cache artifact (`artifact.capture`'s id) that goes with it, set by the runbook before `fingerprint.save`
/// ---@field planned boolean `--offline`: nothing was looked at, every value is unknown
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
/// Keeps `fp` under `name` for the machine it describes, in the state dir
/// (`<state>/fingerprints/NAME/MACHINE.json`, MACHINE named by its machine id and the
/// containers on the way), e.g. as the new known-good after a successful recovery: each
/// machine has its own, whatever name it was reached by. It is a change like a
/// command's: a preview and a plan list it (`on local: save fingerprint 'NAME' of
/// TARGET`), a confirmed run saves it only where it was confirmed, and during
/// `--dry-run` nothing is written.
///
/// ```lua
/// local fp = fingerprint.take(node, { venv = "/opt/venv" })
/// fp.artifact = "3f9c0a51d2e4b7a8" -- the compile cache that goes with it (artifact.capture's id)
/// fingerprint.save("dflash-known-good", fp)
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
            fingerprint::store(dir, &name, &fp)
                .map_err(|e| err_at(lua, format!("fingerprint.save(): {e}")))?,
        ),
        None => None,
    };
    let summary = format!("save fingerprint '{name}' of {}", fp.target);
    let shown = match &file {
        Some(path) => format!("write {}", path.display()),
        None => summary.clone(),
    };
    // What the plan holds the run to: the name and the target, not the file (the state
    // dir may be named differently at apply; the machine a plan's target is, is checked
    // by apply itself) nor the facts (taken again in the real run).
    let command = format!("fingerprint.save {name} of {}", fp.target);
    let saved = crate::actions::perform::own_change(&ctx, &summary, &shown, &command, || {
        let dir = ctx
            .state_dir
            .borrow()
            .clone()
            .ok_or("fingerprints are kept in the state dir, which only a run has")?;
        fingerprint::save(&dir, &name, &fp).map_err(|e| format!("fingerprint.save(): {e}"))
    })
    .map_err(|e| match e {
        crate::actions::perform::ActionError::Stop(why) => {
            crate::primitives::Error::Stop(crate::base::abort::Abort {
                why,
                at: super::location(lua),
            })
            .into()
        }
        crate::actions::perform::ActionError::Failed(msg) => err_at(lua, msg),
    })?;
    if let Some(path) = saved {
        ctx.bus.emit(Event::Log {
            step: ctx.step.get().map(|s| s.index),
            level: crate::actions::events::Level::Info,
            message: format!("saved fingerprint '{name}' ({})", path.display()),
        });
    }
    Ok(())
}

/// Lua: fingerprint.load(name, now) -> fp or nil
///
/// The fingerprint saved under `name` for the machine `now` (a fingerprint just taken
/// with `fingerprint.take`) describes, or nil when that machine has none yet: another
/// host's known-good is never returned, whatever names they were reached by. A file for
/// the same machine id behind another host key (a cloned image) is not this machine's:
/// nil, with a warning. With `--offline` (`now.planned`) no machine is known: nil.
/// A fingerprint saved before they were kept per machine (`fingerprints/NAME.json`) is
/// read for the target name it was taken on, until the next save writes the machine's.
///
/// ```lua
/// local now = fingerprint.take(node, { venv = "/opt/venv" })
/// local good = fingerprint.load("dflash-known-good", now)
/// ```
/// ---@param name string
/// ---@param now runbook.Fingerprint
/// ---@return runbook.Fingerprint?
fn load(lua: &Lua, (name, now): (Value, Value)) -> mlua::Result<Value> {
    let name = string_value(lua, name, "fingerprint.load(): name")?.unwrap_or_default();
    if now.is_nil() {
        return Err(err_at(
            lua,
            "fingerprint.load(): give the fingerprint taken now, fingerprint.load(name, fingerprint.take(t, …)): a known-good is kept per machine",
        ));
    }
    let now = from_lua(lua, now, "fingerprint.load(): second argument")?;
    let warn = |message: String| {
        let ctx = ctx(lua);
        ctx.bus.emit(Event::Log {
            step: ctx.step.get().map(|s| s.index),
            level: crate::actions::events::Level::Warn,
            message,
        });
    };
    match fingerprint::load(&state_dir(lua)?, &name, &now)
        .map_err(|e| err_at(lua, format!("fingerprint.load(): {e}")))?
    {
        Loaded::Found(fp) => to_lua(lua, &fp),
        Loaded::Legacy(fp) => to_lua(lua, &fp),
        Loaded::OtherMachine(why) => {
            warn(format!(
                "fingerprint '{name}': the one kept for this machine id is of another machine ({}): a copied machine id? not compared",
                why.join("; ")
            ));
            Ok(Value::Nil)
        }
        Loaded::None => Ok(Value::Nil),
    }
}

/// Lua: fingerprint.diff(a, b) -> { { what, before, after }, … }
///
/// What changed from `a` to `b`, most telling first: torch, CUDA, python, driver, git
/// HEAD, GPUs, dirty files, each package added, removed or changed, caches that appeared
/// or vanished. An empty list means nothing that matters changed, or that one of them
/// was taken with `--offline` (`planned`): what was never read is unknown, not changed.
///
/// ```lua
/// local now = fingerprint.take(node, { venv = "/opt/venv", repo = "/root/dflash" })
/// local good = fingerprint.load("dflash-known-good", now)
/// if good then
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
