//! `artifact.*`: capture the compile caches of a run that worked into a store, and put
//! them back instead of re-compiling, only where the environment's key matches.

use super::options;
use super::target::target_arg;
use super::to_lua;
use super::{ctx, err_at, require_running, step_for, string_value};
use crate::primitives::artifact::{self, Request};
use crate::primitives::fingerprint::Scope;
use crate::primitives::store::{Key, Store};
use mlua::{Lua, Table, Value};
use serde::Deserialize;

/// Options of `artifact.capture`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureOptions {
    /// `paths` (required): the cache directories, as `cache.clear` takes them (one path
    /// or a list; each strictly inside a cache root, resolved on `t`, and a directory);
    #[serde(default, deserialize_with = "options::paths")]
    paths: Option<Vec<String>>,
    /// `name` (required): the artifact's name (letters, digits, `-`, `_`, `.`), what
    /// `artifact.restore` and `artifact.list` look for;
    name: Option<String>,
    /// `key`: fields added to the key read from `t`, or replacing its values
    /// (`{ model = "dflash-v3" }`);
    /// ---@type table<string, string>
    #[serde(default)]
    key: Key,
    /// `venv`, `python`, `repo`: where the key's python, torch and git HEAD are read, as
    /// `fingerprint.take` takes them;
    venv: Option<String>,
    /// `python`: see `venv`;
    python: Option<String>,
    /// `repo`: see `venv`;
    repo: Option<String>,
    /// `store`: where the artifact is kept: an absolute directory on this machine
    /// (default: `artifacts` in the state dir), or `"ssh://HOST/DIR"`, the directory
    /// `/DIR` on HOST (a team's file server; HOST as `target()` takes it: an inventory
    /// name, an ssh_config `Host`, `user@host[:port]`), reached over the run's connection
    /// to HOST;
    store: Option<String>,
    /// `force = true`: go ahead while processes use files under the paths;
    #[serde(default)]
    force: bool,
    /// `throughput`: what the run's gate measured (the Ktok/s a throughput check read, a
    /// number ≥ 0), recorded in the manifest.
    /// ---@type number
    throughput: Option<f64>,
}

/// Options of `artifact.restore`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreOptions {
    /// `paths` (required): the cache directories, as given to `artifact.capture`;
    #[serde(default, deserialize_with = "options::paths")]
    paths: Option<Vec<String>>,
    /// `name` (required): the artifact's name;
    name: Option<String>,
    /// `key`: as for `artifact.capture`;
    /// ---@type table<string, string>
    #[serde(default)]
    key: Key,
    /// `require = true`: a missing artifact or a key that matches none fails the step
    /// (else the result says why, and nothing is restored);
    #[serde(default)]
    require: bool,
    /// `venv`, `python`, `repo`: as for `artifact.capture`;
    venv: Option<String>,
    /// `python`: see `venv`;
    python: Option<String>,
    /// `repo`: see `venv`;
    repo: Option<String>,
    /// `store`: as for `artifact.capture`;
    store: Option<String>,
    /// `force = true`: restore even while processes use files under the paths.
    #[serde(default)]
    force: bool,
}

/// Options of `artifact.list`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListOptions {
    /// `store`: as for `artifact.capture`.
    store: Option<String>,
}

pub fn register(lua: &Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.raw_set("capture", super::async_function(lua, capture)?)?;
    t.raw_set("restore", super::async_function(lua, restore)?)?;
    t.raw_set("list", super::async_function(lua, list)?)?;
    lua.globals().raw_set("artifact", t)
}

fn store(lua: &Lua, what: &str, given: Option<&str>) -> mlua::Result<Store> {
    let ctx = ctx(lua);
    let state = ctx.state_dir.borrow().clone();
    Store::open(given, state.as_deref(), &ctx.targets)
        .map_err(|e| err_at(lua, format!("{what}: {e}")))
}

#[allow(clippy::too_many_arguments)]
fn request(
    lua: &Lua,
    what: &str,
    paths: Option<Vec<String>>,
    name: Option<String>,
    key: Key,
    scope: Scope,
    given_store: Option<&str>,
    force: bool,
) -> mlua::Result<Request> {
    let paths = match paths {
        Some(p) if !p.is_empty() => p,
        _ => {
            return Err(err_at(
                lua,
                format!("{what}: paths is required: a path or a list of paths"),
            ))
        }
    };
    let name = name.ok_or_else(|| err_at(lua, format!("{what}: name is required")))?;
    artifact::check_name(&name).map_err(|e| err_at(lua, format!("{what}: {e}")))?;
    Ok(Request {
        name,
        paths,
        key,
        scope,
        store: store(lua, what, given_store)?,
        force,
        throughput: None,
    })
}

/// Lua: artifact.capture(t, opts) -> { id, bytes, files, archive_bytes, key, store, changed, planned }
///
/// Packs cache directories on `t` (POSIX sh, tar and gzip there: busybox's too) into the
/// store, content-addressed by sha256, with a manifest: the key, the paths, files and
/// bytes, the target it was made on (its name, and which machine it is: host key,
/// machine id, containers), the run id, the time and `throughput` when given (what the
/// run's gate measured, e.g. once a throughput check passed). The key is read from `t` as
/// `fingerprint.take` reads it: `torch` (with its build tag, `2.11.0+cu128`), `triton`,
/// `cuda`, `driver`, `gpu`, `compute_capability`, `python`, `platform`, `git_head` (with
/// `repo`) and `env.NAME` for each `TORCHINDUCTOR_*`, `TRITON_*` and
/// `TORCH_CUDA_ARCH_LIST` set there; `key` adds or overrides fields. The paths follow
/// `cache.clear`'s rules (inside a cache root, not in use unless `force`), and each must
/// be a directory when it is packed. Each directory packed is one change, planned during
/// `--dry-run` (`pack /tmp/torchinductor_root into artifact 'NAME' in DIR`, without a
/// size: earlier steps of the run may fill it; a directory not there yet is planned too,
/// for a warm-up before it to make: nothing is packed or stored then, and `id` is nil). The archive is written beside the
/// cache first (a new private file, deleted once read) and read back in 6 MiB reads
/// (`read the archive of PATH (…), part 1 of 59`), as a command's output is bounded; its
/// bytes are never output events. With `--offline` each pack is planned from the path as
/// written (`size unknown with --offline`), and `key` is nil.
///
/// With `store = "ssh://HOST/DIR"` (a team's file server) the store is asked first
/// whether it can be written (a read on HOST, in a dry-run too: an unreachable store
/// stops the capture before anything is packed), and each 6 MiB piece read from `t`
/// goes on, as it comes, over the run's connection to HOST into a new private file in
/// `DIR/objects` there: it passes through runbook's memory, never a file in /tmp on
/// either side. The object gets its name only once its sha256 there is the one runbook
/// took of the pieces, and the manifest only after all its objects, so a reader never
/// sees part of an artifact. Options ([`CaptureOptions`]):
///
/// ```lua
/// step("keep the compile cache that worked", function()
///   local a = artifact.capture(node, { name = "dflash", paths = "/tmp/torchinductor_root",
///                                      venv = "/opt/venv", repo = "/root/dflash" })
///   log.info("captured " .. tostring(a.id))
/// end)
/// ```
/// ---@param t runbook.Target
/// ---@param opts runbook.ArtifactCaptureOptions
/// ---@return runbook.ArtifactCaptured
/// ---@class runbook.ArtifactCaptured
/// ---@field id? string the artifact's id (nil in a dry-run)
/// ---@field bytes integer the apparent size of the files captured
/// ---@field files integer how many files
/// ---@field archive_bytes integer the packed size (0 in a dry-run)
/// ---@field key? table<string, string> the key (nil with `--offline`)
/// ---@field store string the store: its directory, or ssh://HOST/DIR
/// ---@field changed boolean always true: a capture is a change
/// ---@field planned boolean a dry-run: nothing was packed or stored
async fn capture(lua: Lua, (t, opts): (Value, Option<Table>)) -> mlua::Result<Value> {
    let what = "artifact.capture()";
    let ctx = require_running(&lua, what)?;
    let target = target_arg(&lua, &t, "artifact.capture")?;
    let o: CaptureOptions = options::read(&lua, what, opts)?;
    if let Some(n) = o.throughput.filter(|n| !n.is_finite() || *n < 0.0) {
        return Err(err_at(
            &lua,
            format!("{what}: option 'throughput' must be a number ≥ 0 (what the gate measured), got {n}"),
        ));
    }
    let scope = Scope {
        venv: o.venv,
        python: o.python,
        repo: o.repo,
        caches: Vec::new(),
    };
    let mut req = request(
        &lua,
        what,
        o.paths,
        o.name,
        o.key,
        scope,
        o.store.as_deref(),
        o.force,
    )?;
    req.throughput = o.throughput;
    let step = step_for(&lua, &ctx, &target);
    let result = artifact::capture(&step, &req).await?;
    to_lua(&lua, &result)
}

/// Lua: artifact.restore(t, opts) -> { restored, reason, id, diff, kept, changed, planned }
///
/// Puts back the newest artifact of `name` for these `paths` whose key equals the key
/// read from `t` now (as `artifact.capture` reads it, `key` added). The log names it
/// (id, size, age, where and by which run it was made) and shows the key it matched.
/// When none matches, nothing is restored: `restored = false`, `diff` lists each field
/// that differs from the newest artifact of that name (`{ field, artifact, here }`) and
/// `reason` says it in one line (`torch: 2.11.0+cu128 (artifact) ≠ 2.10.0+cu128
/// (here)`); with `require = true` the step fails with that reason instead.
///
/// Before anything is sent, each stored archive's sha256 is checked against its name (an
/// object in a store over ssh is read back in 6 MiB pieces, reads on the store's host,
/// and checked here) and
/// every entry is read: absolute names, `..`, symlinks that lead out, entries through a
/// symlink, hard links, devices, fifos and setuid/setgid modes refuse the restore with
/// nothing written. The paths follow `cache.clear`'s rules. Each directory is one
/// destructive change (`restore /tmp/torchinductor_root from artifact ID (…), the one
/// there (…) kept aside as /tmp/torchinductor_root.runbook-kept-…`): the archive is
/// extracted into a staging directory beside the path, checked again, then the directory
/// there is renamed aside as `cache.clear { keep = true }` names it (`cache.restore`
/// puts it back; its name is in `kept`) and the staging directory renamed into place. A
/// failure before the renames (a full disk) leaves the directory there as it was. The
/// key and the paths are read during `--dry-run` too, where the restore is planned; not
/// available with `--offline`. Options ([`RestoreOptions`]):
///
/// ```lua
/// step("put the known-good compile cache back", function()
///   local r = artifact.restore(node, { name = "dflash", paths = "/tmp/torchinductor_root",
///                                      venv = "/opt/venv", repo = "/root/dflash" })
///   if not r.restored then log.warn("compiling instead: " .. r.reason) end
/// end)
/// ```
/// ---@param t runbook.Target
/// ---@param opts runbook.ArtifactRestoreOptions
/// ---@return runbook.ArtifactRestored
/// ---@class runbook.ArtifactRestored
/// ---@field restored boolean whether it was (or in a dry-run would be) restored
/// ---@field reason? string why nothing was restored
/// ---@field id? string the artifact restored, or the one whose key differed
/// ---@field diff { field: string, artifact: string?, here: string? }[] the fields that differ
/// ---@field kept string[] where the directories that were there were kept aside
/// ---@field changed boolean whether something was (or would be) restored
/// ---@field planned boolean a dry-run: nothing was changed
async fn restore(lua: Lua, (t, opts): (Value, Option<Table>)) -> mlua::Result<Value> {
    let what = "artifact.restore()";
    let ctx = require_running(&lua, what)?;
    let target = target_arg(&lua, &t, "artifact.restore")?;
    let o: RestoreOptions = options::read(&lua, what, opts)?;
    let scope = Scope {
        venv: o.venv,
        python: o.python,
        repo: o.repo,
        caches: Vec::new(),
    };
    let req = request(
        &lua,
        what,
        o.paths,
        o.name,
        o.key,
        scope,
        o.store.as_deref(),
        o.force,
    )?;
    let step = step_for(&lua, &ctx, &target);
    let result = artifact::restore(&step, &req).await?;
    if let (true, Some(reason)) = (o.require, &result.reason) {
        return Err(err_at(
            &lua,
            format!("artifact.restore: nothing was restored (require = true): {reason}"),
        ));
    }
    to_lua(&lua, &result)
}

/// Lua: artifact.list([name], [opts]) -> { { id, name, key, paths, files, bytes, archive_bytes, source, source_identity, run_id, created, throughput }, … }
///
/// The artifacts in the store (of `name`, when given), newest first: a read, so it runs
/// in a dry-run too. A store on this machine is read in every mode; one over ssh
/// (`store = "ssh://HOST/DIR"`) only inside a step (it runs a command on HOST), and not
/// with `--offline`. Options ([`ListOptions`]):
///
/// ```lua
/// for _, a in ipairs(artifact.list("dflash")) do
///   log.info(a.id .. " " .. a.created .. " " .. a.source)
/// end
/// ```
/// ---@param name? string
/// ---@param opts? runbook.ArtifactListOptions
/// ---@return runbook.Artifact[]
/// ---@class runbook.Artifact
/// ---@field id string
/// ---@field name string
/// ---@field key table<string, string>
/// ---@field paths string[] the paths as captured
/// ---@field files integer
/// ---@field bytes integer
/// ---@field archive_bytes integer
/// ---@field source string the target it was captured on
/// ---@field source_identity? runbook.MachineIdentity which machine that was
/// ---@field run_id? string the run that captured it
/// ---@field created string when, in UTC (RFC 3339)
/// ---@field throughput? number what the run's gate measured (`artifact.capture { throughput = N }`)
/// ---@class runbook.MachineIdentity
/// ---@field host_key? string the host key the SSH connection verified (`ssh-ed25519 SHA256:…`)
/// ---@field machine_id string the machine's `/etc/machine-id` (`-`: it has none)
/// ---@field containers? string[] each container on the way, outermost first
async fn list(lua: Lua, (name, opts): (Value, Option<Table>)) -> mlua::Result<Value> {
    let what = "artifact.list()";
    let name = string_value(&lua, name, "artifact.list(): name")?;
    let o: ListOptions = options::read(&lua, what, opts)?;
    let store = store(&lua, what, o.store.as_deref())?;
    let ctx = ctx(&lua);
    let local = ctx.targets.local();
    if let Store::Remote(_) = store {
        require_running(&lua, what)?;
    }
    let step = step_for(&lua, &ctx, &local);
    let all = artifact::stored(&step, "artifact.list", store.list(&step).await)?;
    let lua = &lua;
    let out = lua.create_table()?;
    for m in all
        .iter()
        .filter(|m| name.as_ref().is_none_or(|n| &m.name == n))
    {
        let v = to_lua(lua, m)?;
        if let Value::Table(t) = &v {
            t.raw_set("parts", Value::Nil)?;
            t.raw_set("created_unix", Value::Nil)?;
        }
        out.raw_push(v)?;
    }
    Ok(Value::Table(out))
}
