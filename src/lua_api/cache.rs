//! `cache.*`: clear compile caches (torch inductor, triton, extensions, …) safely, keep a
//! copy aside and put it back, measure them. Paths are resolved on the target as its
//! user; only directories strictly inside a cache root can be cleared: `/tmp`, `/var/tmp`,
//! `~/.cache`, `~/.triton`, and the header's `cache_roots`.

use super::options::{self, AtLeastOne};
use super::target::target_arg;
use super::to_lua;
use super::{err_at, path_list, require_running, step_for};
use crate::primitives::cache::{self, ClearOpts};
use crate::targets::Target;
use mlua::{Lua, Table, Value};
use serde::Deserialize;
use std::rc::Rc;

/// Options of `cache.clear`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClearOptions {
    /// `keep = true`: move the directory aside to `PATH.runbook-kept-<UTC time>` (same
    /// directory, atomic) instead of deleting it; `cache.restore` puts it back;
    #[serde(default)]
    keep: bool,
    /// `keep_last` (with `keep = true`; a whole number of at least 1, default 2): how many
    /// kept copies of each path remain afterwards, the one just made included. Older ones
    /// are deleted, oldest first, each as its own destructive change (the same checked
    /// deletion as a clear, shown with its size: `delete older kept copy
    /// /tmp/x.runbook-kept-20250101T000000Z (336.6 MiB, 12,345 files)`), after a log line
    /// with what they free in all. They are listed in `pruned`, their bytes summed in
    /// `pruned_bytes`. A path that does not exist keeps its newest `keep_last` copies;
    /// with `--offline` the copies are not looked at, so none are planned;
    keep_last: Option<AtLeastOne>,
    /// `force = true`: clear even while processes use it.
    #[serde(default)]
    force: bool,
}

/// Options of `cache.restore`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreOptions {
    /// `force = true`: restore even when the path exists again and is not empty: its
    /// current contents are deleted first.
    #[serde(default)]
    force: bool,
}

pub fn register(lua: &Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.raw_set("clear", super::async_function(lua, clear)?)?;
    t.raw_set("restore", super::async_function(lua, restore)?)?;
    t.raw_set("size", super::async_function(lua, size)?)?;
    lua.globals().raw_set("cache", t)
}

/// Lua: cache.clear(t, paths, [opts]) -> { { path, resolved, existed, bytes, files, changed, kept_as, pruned, pruned_bytes, planned }, … }
///
/// Deletes cache directories on `t`. `paths` is one path or a non-empty list of them:
/// strings (a number is never a path), absolute, or `~/…` for the home of the user
/// commands run as on `t`; a list's entries may also be named (as `torch.caches()` names
/// them), any other key is an error. Every option that takes paths reads them this way.
/// Every path is first resolved on the target (symlinks followed) and checked; if any path
/// breaks a rule, the step fails naming each such path and its rule, and nothing is
/// deleted for any path. Refused:
/// relative paths, `..`, `/`, top-level directories, the home directory, a cache root
/// itself, anything not strictly inside a cache root (`/tmp`, `/var/tmp`, `~/.cache`,
/// `~/.triton`, plus `cache_roots` from the header), a symlink (clear its target instead),
/// a path with a filesystem mounted under it, and a path that a process is using (open
/// files, mapped libraries or its working directory: a compile in flight; other users'
/// processes are seen when commands run as root), unless `force = true`. Options ([`ClearOptions`]):
///
/// Each deletion is one destructive change: a script given the cache root and the
/// resolved path (`sh -c '…' sh /tmp /tmp/torchinductor_root`) that reaches the path
/// again from the root without following any symlink, so a directory swapped for a
/// symlink after the check makes the step fail rather than delete outside the root, and
/// that never deletes across a mount. The sizes are read during `--dry-run` too, so the
/// preview says `delete /tmp/torchinductor_root (336.6 MiB, 12,345 files)` (sizes as in
/// `cache.size`, in binary units). A path that does not exist is not an error
/// (`changed = false`, unless kept copies of it were pruned). The result has one table
/// per path, in order; in a dry-run `planned = true` and `changed` says what would change. With `--offline` nothing is looked at: the paths are planned
/// as written, `resolved` and `existed` are nil and `bytes`/`files` 0.
///
/// ```lua
/// local torch = require("runbook.torch")
/// step("clear compile caches", function()
///   for _, c in ipairs(cache.clear(box, torch.caches(box, { user = "root" }))) do
///     if c.changed then log.info(("%s: %d bytes freed"):format(c.path, c.bytes)) end
///   end
///   cache.clear(box, "/tmp/my-run-cache", { keep = true })
/// end)
/// ```
/// ---@param t runbook.Target
/// ---@param paths runbook.Paths
/// ---@param opts? runbook.CacheClearOptions
/// ---@return runbook.Cleared[]
/// ---@class runbook.Cleared
/// ---@field path string the path as given
/// ---@field resolved? string the path as resolved on the target (nil with `--offline`)
/// ---@field existed? boolean whether it existed (nil with `--offline`)
/// ---@field bytes integer its size, as `cache.size` measures it
/// ---@field files integer how many files it held
/// ---@field changed boolean whether it was (or in a dry-run would be) deleted or kept aside
/// ---@field kept_as? string where `keep = true` moved it
/// ---@field pruned string[] the older kept copies deleted
/// ---@field pruned_bytes integer what they held
/// ---@field planned boolean a dry-run: nothing was changed
async fn clear(lua: Lua, (t, paths, opts): (Value, Value, Option<Table>)) -> mlua::Result<Value> {
    let (ctx, target, paths) = prepare(&lua, "cache.clear", t, paths)?;
    let given: ClearOptions = options::read(&lua, "cache.clear()", opts)?;
    let mut o = ClearOpts {
        keep: given.keep,
        force: given.force,
        ..ClearOpts::default()
    };
    if let Some(n) = given.keep_last {
        if !o.keep {
            return Err(err_at(
                &lua,
                "cache.clear(): keep_last counts the copies keep = true sets aside; add keep = true (without it nothing is kept)",
            ));
        }
        o.keep_last = n.count();
    }
    let step = step_for(&lua, &ctx, &target);
    let result = cache::clear(&step, &paths, o).await?;
    to_lua(&lua, &result)
}

/// Lua: cache.restore(t, paths, [opts]) -> { { path, restored_from, changed, planned }, … }
///
/// Puts back the newest copy that `cache.clear(t, paths, { keep = true })` set aside
/// (`PATH.runbook-kept-<UTC time>`), with the same path rules as `cache.clear`. A path
/// with no kept copy is not an error (`changed = false`, logged), like clearing an absent
/// path, so the list given to `cache.clear` can be given back as is. Refused when the path
/// exists again and is not empty, unless `force = true`; an empty directory in the way
/// is removed. Not available with `--offline` (which copy to restore is only known by
/// looking at the target). Options ([`RestoreOptions`]):
///
/// ```lua
/// step("put the old cache back", { when = function() return params.rollback end }, function()
///   cache.restore(box, "/tmp/torchinductor_root", { force = true })
/// end)
/// ```
/// ---@param t runbook.Target
/// ---@param paths runbook.Paths
/// ---@param opts? runbook.CacheRestoreOptions
/// ---@return runbook.CacheRestored[]
/// ---@class runbook.CacheRestored
/// ---@field path string the path as given
/// ---@field restored_from? string the kept copy put back
/// ---@field changed boolean whether a copy was (or in a dry-run would be) put back
/// ---@field planned boolean a dry-run: nothing was changed
async fn restore(lua: Lua, (t, paths, opts): (Value, Value, Option<Table>)) -> mlua::Result<Value> {
    let (ctx, target, paths) = prepare(&lua, "cache.restore", t, paths)?;
    let o: RestoreOptions = options::read(&lua, "cache.restore()", opts)?;
    let step = step_for(&lua, &ctx, &target);
    let result = cache::restore(&step, &paths, o.force).await?;
    to_lua(&lua, &result)
}

/// Lua: cache.size(t, paths) -> { { path, resolved, existed, bytes, files, planned }, … }
///
/// How big each path is on `t`: `bytes`, the apparent size (what `ls -l` shows) of the
/// regular files at or under it, and `files`, how many there are; directories, symlinks
/// (not followed, except the path itself) and special files count for nothing. This is
/// the one definition of a directory's size: `cache.clear`'s preview, `fingerprint.take`
/// and `warmup.run` measure the same way, and show sizes in binary units (`4.2 KiB`,
/// `3.0 MiB`). A read, so it runs during `--dry-run` too; with `--offline`, `resolved`
/// and `existed` are nil, `bytes` and `files` 0, `planned = true`. A path that does not
/// exist has `existed = false`.
///
/// ```lua
/// for _, s in ipairs(cache.size(box, { "/tmp/torchinductor_root", "~/.triton/cache" })) do
///   log.info(s.path .. ": " .. s.size) -- "/tmp/torchinductor_root: 336.6 MiB, 12,345 files"
/// end
/// ```
/// ---@param t runbook.Target
/// ---@param paths runbook.Paths
/// ---@return runbook.CacheSize[]
/// ---@class runbook.CacheSize
/// ---@field path string the path as given
/// ---@field resolved? string the path as resolved on the target (nil with `--offline`)
/// ---@field existed? boolean whether it exists (nil with `--offline`)
/// ---@field bytes integer the apparent size of its regular files
/// ---@field files integer how many regular files it holds
/// ---@field size string `bytes` and `files` as previews show them: `336.6 MiB, 12,345 files`
/// ---@field planned boolean `--offline`: nothing was looked at
async fn size(lua: Lua, (t, paths): (Value, Value)) -> mlua::Result<Value> {
    let (ctx, target, paths) = prepare(&lua, "cache.size", t, paths)?;
    let step = step_for(&lua, &ctx, &target);
    let result = cache::size(&step, &paths).await?;
    to_lua(&lua, &result)
}

type Prepared = (Rc<crate::actions::ctx::Ctx>, Rc<Target>, Vec<String>);

/// The checks every `cache.*` call starts with: inside a step, a target, a path list.
fn prepare(lua: &Lua, what: &str, t: Value, paths: Value) -> mlua::Result<Prepared> {
    let ctx = require_running(lua, &format!("{what}()"))?;
    let target = target_arg(lua, &t, what)?;
    let what_paths = format!("{what}(): paths");
    let paths = match path_list(lua, &what_paths, paths)? {
        Some(p) if !p.is_empty() => p,
        // Nothing to act on is a mistake (a list built empty), not a no-op.
        Some(_) => return Err(err_at(lua, format!("{what_paths}: got an empty list"))),
        None => {
            return Err(err_at(
                lua,
                format!("{what_paths} is required: a path or a list of paths"),
            ))
        }
    };
    Ok((ctx, target, paths))
}
