//! `git.*`: what a repository on a target has checked out, and putting its tracked files
//! back to a known-good commit. Git runs on the target (`git -C REPO …`), so these work
//! over SSH and inside containers; the target needs `git` 2.11 or newer.

use super::options;
use super::target::target_arg;
use super::to_lua;
use super::{err_at, require_running, step_for, string_value};
use crate::primitives::git::{self, RestoreSpec};
use mlua::{Lua, Table, Value};
use serde::Deserialize;

/// Options of `git.restore`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreOptions {
    /// `repo` (required): the repository's directory on the target, or a folder inside it:
    /// then only that folder is restored;
    repo: Option<String>,
    /// `paths`: one path or a list of them, as `cache.clear` takes them: files or
    /// directories, relative to `repo` or absolute under it; without it, every tracked
    /// file under `repo` is restored;
    #[serde(default, deserialize_with = "options::paths")]
    paths: Option<Vec<String>>,
    /// `rev` (default `"HEAD"`): the commit to put the files back to.
    rev: Option<String>,
}

pub fn register(lua: &Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.raw_set("restore", super::async_function(lua, restore)?)?;
    t.raw_set("head", super::async_function(lua, head)?)?;
    t.raw_set("status", super::async_function(lua, status)?)?;
    lua.globals().raw_set("git", t)
}

fn repo_arg(lua: &Lua, v: Value, what: &str) -> mlua::Result<String> {
    match string_value(lua, v, what)? {
        Some(r) if !r.is_empty() => Ok(r),
        _ => Err(err_at(
            lua,
            format!("{what}: give the repository's directory, e.g. {what}(t, \"/root/dflash\")"),
        )),
    }
}

/// Lua: git.restore(t, { repo, paths, rev }) -> { rev, files, changed, planned }
///
/// Puts tracked files of the repository `repo` on `t` back to commit `rev`, in the index
/// and the working tree: local edits are discarded, deleted files come back, files added
/// since `rev` are removed (a commit still holds them). Options ([`RestoreOptions`]):
///
/// Untracked files (never `git add`ed) are always kept, and a new file that is only
/// staged is unstaged and kept on disk. Paths are literal (no globs); a path outside
/// `repo` (absolute elsewhere, or `..` climbing out) is refused, and so is a `rev` that
/// is not a commit.
///
/// The files that differ are found first (a read, so `--dry-run` shows them: "restore
/// 3 files in /root/dflash to abc1234: dflash_model.py, …"); when none differ nothing is
/// changed and `changed = false`. `rev` in the result is the full commit id; `files` are
/// the paths (relative to `repo`) that were put back. It counts as destructive: a real run
/// asks first unless `--yes`. With `--dry-run --offline` nothing is looked at: the plan
/// is `git checkout REV -- PATHS` and `files` is empty.
///
/// ```lua
/// local box = target("root@pve1.example"):pct(200)
/// local r = git.restore(box, { repo = "/root/dflash", rev = params.good_commit })
/// log.info("restored " .. #r.files .. " files to " .. r.rev)
/// git.restore(box, { repo = "/root/dflash", paths = { "dflash_model.py", "configs/" } })
/// ```
/// ---@param t runbook.Target
/// ---@param opts runbook.GitRestoreOptions
/// ---@return runbook.GitRestored
/// ---@class runbook.GitRestored
/// ---@field rev string the full commit id
/// ---@field files string[] the paths put back, relative to `repo`
/// ---@field changed boolean whether any file was (or in a dry-run would be) put back
/// ---@field planned boolean a dry-run: nothing was changed
async fn restore(lua: Lua, (t, opts): (Value, Option<Table>)) -> mlua::Result<Value> {
    const WHAT: &str = "git.restore()";
    let ctx = require_running(&lua, WHAT)?;
    let target = target_arg(&lua, &t, "git.restore")?;
    let Some(opts) = opts else {
        return Err(err_at(
            &lua,
            "git.restore(): give the options, e.g. git.restore(t, { repo = \"/root/dflash\", rev = \"HEAD\" })",
        ));
    };
    let o: RestoreOptions = options::read(&lua, WHAT, Some(opts))?;
    let repo = match o.repo {
        Some(r) if !r.is_empty() => r,
        _ => {
            return Err(err_at(
                &lua,
                "git.restore(): repo is required: the repository's directory on the target",
            ))
        }
    };
    let rev = o.rev.unwrap_or_else(|| "HEAD".to_string());
    let paths = o.paths;
    let step = step_for(&lua, &ctx, &target);
    let restored = git::restore(&step, &RestoreSpec { repo, paths, rev }).await?;
    to_lua(&lua, &restored)
}

/// Lua: git.head(t, repo) -> { rev, short, branch, subject }
///
/// The commit checked out in `repo` on `t`: full id, short id, branch name (`nil` when
/// HEAD is detached) and subject line. A read: it also runs during `--dry-run`.
///
/// ```lua
/// local h = git.head(box, "/root/dflash")
/// log.info(h.short .. " on " .. (h.branch or "detached HEAD") .. ": " .. h.subject)
/// ```
/// ---@param t runbook.Target
/// ---@param repo string
/// ---@return runbook.GitHead
/// ---@class runbook.GitHead
/// ---@field rev string the full commit id
/// ---@field short string the short commit id
/// ---@field branch? string the branch (nil when HEAD is detached)
/// ---@field subject string the subject line
/// ---@field planned? boolean `--offline`: nothing was looked at
async fn head(lua: Lua, (t, repo): (Value, Value)) -> mlua::Result<Value> {
    let ctx = require_running(&lua, "git.head()")?;
    let target = target_arg(&lua, &t, "git.head")?;
    let repo = repo_arg(&lua, repo, "git.head")?;
    let step = step_for(&lua, &ctx, &target);
    let h = git::head(&step, &repo).await?;
    to_lua(&lua, &h)
}

/// Lua: git.status(t, repo) -> { clean, files = { { path, status, from }, … } }
///
/// What differs in `repo` on `t`, from `git status --porcelain=v1 -z`: one entry per
/// file with its path (relative to the repository's top level, any bytes included:
/// spaces, newlines), its two-letter `XY` status (`" M"` modified, `"M "` staged,
/// `"A "` added, `" D"` deleted, `"??"` untracked, `"R "` renamed, …) and, for a rename
/// or copy, `from`. `clean` is true when nothing is listed (untracked files count;
/// ignored ones do not). A read: it also runs during `--dry-run`.
///
/// ```lua
/// local s = git.status(box, "/root/dflash")
/// if not s.clean then
///   for _, f in ipairs(s.files) do log.warn(f.status .. " " .. f.path) end
/// end
/// ```
/// ---@param t runbook.Target
/// ---@param repo string
/// ---@return runbook.GitStatus
/// ---@class runbook.GitStatus
/// ---@field clean boolean nothing is listed
/// ---@field files runbook.GitStatusEntry[]
/// ---@field planned? boolean `--offline`: nothing was looked at
/// ---@class runbook.GitStatusEntry
/// ---@field path string relative to the top level
/// ---@field status string the two-letter `XY` status
/// ---@field from? string the old path of a rename or copy
async fn status(lua: Lua, (t, repo): (Value, Value)) -> mlua::Result<Value> {
    let ctx = require_running(&lua, "git.status()")?;
    let target = target_arg(&lua, &t, "git.status")?;
    let repo = repo_arg(&lua, repo, "git.status")?;
    let step = step_for(&lua, &ctx, &target);
    let s = git::status(&step, &repo).await?;
    to_lua(&lua, &s)
}
