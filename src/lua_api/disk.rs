//! `disk.*`: how much room a target's filesystems have, before a change that needs it.

use super::target::target_arg;
use super::{err_at, require_running, step_for, string_value, to_lua};
use crate::primitives::disk;
use mlua::{Lua, Value};

pub fn register(lua: &Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.raw_set("free", super::async_function(lua, free)?)?;
    lua.globals().raw_set("disk", t)
}

/// Lua: disk.free(t, path) -> { bytes_free, bytes_total, path }
///
/// The room on the filesystem that holds `path` on `t`, as POSIX `df -P -k` counts it:
/// `bytes_free` is what the user commands run as may still write (`df`'s "Available",
/// without the blocks reserved for root), `bytes_total` the filesystem's size. `path` is
/// absolute or starts with `~/`; when it does not exist yet, its nearest existing parent
/// is measured (where a new venv or cache would be made), and the result's `path` says
/// which directory that was. A read: it runs during `--dry-run` too; with `--offline` it
/// is only planned and the result is `{ planned = true }`. No `df` on the target, or a
/// `df` that hangs for 30 s (a dead network mount), fails the step naming the target.
///
/// ```lua
/// local d = disk.free(box, "/opt/venvs/train")
/// if not d.planned and d.bytes_free < 7 * 1024 ^ 3 then
///   fail(("only %.1f GB free under %s: a torch venv needs ~6"):format(d.bytes_free / 1024 ^ 3, d.path))
/// end
/// ```
/// ---@param t runbook.Target
/// ---@param path string
/// ---@return runbook.DiskFree
/// ---@class runbook.DiskFree
/// ---@field bytes_free? integer what may still be written there
/// ---@field bytes_total? integer the filesystem's size
/// ---@field path? string the directory measured
/// ---@field planned? boolean `--offline`: nothing was looked at
async fn free(lua: Lua, (t, path): (Value, Value)) -> mlua::Result<Value> {
    let ctx = require_running(&lua, "disk.free()")?;
    let target = target_arg(&lua, &t, "disk.free")?;
    let path = match string_value(&lua, path, "disk.free()")? {
        Some(p) if p.starts_with('/') || p == "~" || p.starts_with("~/") => p,
        Some(p) => {
            return Err(err_at(
                &lua,
                format!("disk.free(): give an absolute path or one under ~/, not {p:?}"),
            ))
        }
        None => {
            return Err(err_at(
                &lua,
                "disk.free(): give a path, e.g. disk.free(t, \"/opt/venvs\")",
            ))
        }
    };
    let step = step_for(&lua, &ctx, &target);
    match disk::free(&step, &path).await? {
        Some(found) => to_lua(&lua, &found),
        None => {
            let planned = lua.create_table()?;
            planned.raw_set("planned", true)?;
            Ok(Value::Table(planned))
        }
    }
}
