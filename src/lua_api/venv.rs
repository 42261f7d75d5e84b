//! `venv.build`: Python virtual environments built with uv on the target, fresh and
//! swapped in only once they verify.

use super::options::{self, LuaValue};
use super::to_lua;
use super::{err_at, require_running, step_for, string_value};
use crate::lua_api::target::target_arg;
use crate::primitives::venv::{self as prim, BuildSpec, IndexOptions};
use mlua::{Lua, Table, Value};
use serde::Deserialize;
use std::time::Duration;

/// Options of `venv.build`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildOptions {
    /// `path` (required): the venv's absolute path on the target;
    path: Option<String>,
    /// `python`: the interpreter for `uv venv --python`, a version (`"3.12"`) or a path;
    /// uv never downloads one (`UV_PYTHON_DOWNLOADS=never`): it must be installed;
    python: Option<String>,
    /// `packages`: a list of requirement specifiers (`"torch==2.11.0"`); pip options
    /// (`"--pre"`) are refused there, each has its own option;
    /// ---@type string[]
    packages: Option<LuaValue>,
    /// `requirements`: a requirements file on the target (`-r`), with or instead of
    /// `packages`;
    requirements: Option<String>,
    /// `index_url`: the index packages come from instead of PyPI (`--index-url`);
    index_url: Option<String>,
    /// `extra_index_url` (a string or a list): more indexes to look in;
    /// ---@type string|string[]
    extra_index_url: Option<LuaValue>,
    /// `find_links` (a directory or URL, or a list): wheels to install from as well;
    /// ---@type string|string[]
    find_links: Option<LuaValue>,
    /// `no_index = true`: no index at all; an offline cluster uses
    /// `no_index = true, find_links = "/srv/wheels"`;
    #[serde(default)]
    no_index: bool,
    /// `fresh` (default true): build in a new sibling directory `PATH.runbook-new-<ts>`,
    /// install, run `verify`, and only then swap it into `PATH` (the old venv is renamed
    /// to `PATH.runbook-old-<ts>`, then deleted). A failed install or verify leaves the old
    /// venv in place and working, removes the half-built one, and fails the step with uv's
    /// messages. `fresh = false` installs into `PATH` in place (creating it if missing);
    /// a failure there can leave it partly updated, and an existing venv keeps its python;
    #[serde(default = "options::yes")]
    fresh: bool,
    /// `verify`: Python code run with the new venv's interpreter (`python -c`, from `/`)
    /// before it is put in place, e.g. `"import torch"`; it is run again once the venv is
    /// at `PATH` (the old one is restored if that fails);
    verify: Option<String>,
    /// `install_uv = true`: when no uv is found, install it first, for the user the target
    /// runs commands as, with `python3 -m pip install --user uv` (using the index options
    /// above, with `index_url` searched besides the default index rather than instead
    /// of it, since a torch wheel index holds no uv; needs pip and a reachable index);
    #[serde(default)]
    install_uv: bool,
    /// `uv`: uv's path on the target, when it is somewhere else;
    uv: Option<String>,
    /// `timeout`: for each command, the build included (default: none, large wheels take
    /// long), e.g. `"30m"`; a stopped build cleans up like a failed one.
    #[serde(default, deserialize_with = "options::timeout")]
    timeout: Option<Duration>,
    /// `detach = true`: the build outlives the connection (as `t:exec`'s `detach`:
    /// a dropped connection is reconnected and followed, `--resume` follows it after a
    /// killed run); default: true when `timeout` is over 5 minutes;
    detach: Option<bool>,
}

pub fn register(lua: &Lua) -> mlua::Result<()> {
    let venv = lua.create_table()?;
    venv.raw_set("build", super::async_function(lua, build)?)?;
    lua.globals().raw_set("venv", venv)
}

/// Lua: venv.build(t, opts) -> { path, python, packages, hash, changed, planned }
///
/// Builds a Python virtual environment at `opts.path` on target `t` with
/// [uv](https://docs.astral.sh/uv/), which must be on the target (on its PATH, at
/// `~/.local/bin/uv` or `~/.cargo/bin/uv`, or given as `uv`). Options ([`BuildOptions`]):
///
/// `PATH` must be a venv (have a `pyvenv.cfg`) or not exist: anything else is refused.
/// Replacing an existing venv counts as destructive (a real run asks first). Venvs are
/// made with `uv venv --relocatable`, so scripts in `bin/` keep working after the
/// rename. Build directories left by a build killed too hard to clean up after itself
/// are removed by the next fresh build of the same `PATH`.
///
/// Returns `path`, `python` (the venv's Python version), `packages` (a list of
/// `{ name, version }` from `uv pip list`, sorted by name), `hash` (sha256 of the sorted
/// `name==version` lines: equal hashes, equal package sets) and `changed = true`. During
/// `--dry-run` the build is one planned change (uv is still looked for): `planned = true`,
/// `python` is the requested one, `packages` is empty and `hash` is nil.
///
/// ```lua
/// local node = target("root@gpu-node-1.example")
/// step("fresh venv", function()
///   local v = venv.build(node, {
///     path = "/opt/train/venv", python = "3.12",
///     packages = { "torch==2.11.0", "numpy==2.3.1" },
///     index_url = "https://download.pytorch.org/whl/cu128",
///     extra_index_url = "https://pypi.org/simple",
///     verify = "import torch; assert torch.cuda.is_available()",
///     timeout = "30m",
///   })
///   log.info(("venv %s: python %s, %d packages, %s"):format(v.path, v.python or "?", #v.packages, v.hash or "planned"))
/// end)
/// ```
/// ---@param t runbook.Target
/// ---@param opts runbook.VenvBuildOptions
/// ---@return runbook.VenvBuilt
/// ---@class runbook.VenvBuilt
/// ---@field path string
/// ---@field python? string the venv's Python version
/// ---@field packages { name: string, version: string }[] sorted by name
/// ---@field hash? string sha256 of the sorted `name==version` lines (nil in a dry-run)
/// ---@field changed boolean
/// ---@field planned boolean a dry-run: nothing was built
async fn build(lua: Lua, (t, opts): (Value, Value)) -> mlua::Result<Value> {
    let ctx = require_running(&lua, "venv.build()")?;
    let target = target_arg(&lua, &t, "venv.build")?;
    let spec = parse_build(&lua, opts)?;
    let step = step_for(&lua, &ctx, &target);
    let built = prim::build(&step, &spec).await?;
    to_lua(&lua, &built)
}

fn parse_build(lua: &Lua, opts: Value) -> mlua::Result<BuildSpec> {
    const WHAT: &str = "venv.build()";
    let Value::Table(t) = opts else {
        return Err(err_at(
            lua,
            format!(
                "{WHAT}: the second argument is an options table, e.g. {{ path = \"/opt/venv\", packages = {{ \"torch\" }} }}; got {}",
                opts.type_name()
            ),
        ));
    };
    let o: BuildOptions = options::read(lua, WHAT, Some(t))?;
    let raw = |v: Option<LuaValue>| v.map_or(Value::Nil, |v| v.0);
    let spec = BuildSpec {
        path: venv_path(lua, o.path)?,
        python: non_empty(lua, o.python, "python")?,
        packages: packages(lua, raw(o.packages))?,
        requirements: non_empty(lua, o.requirements, "requirements")?,
        index: IndexOptions {
            index_url: non_empty(lua, o.index_url, "index_url")?,
            extra_index_urls: string_list(lua, raw(o.extra_index_url), "extra_index_url")?,
            find_links: string_list(lua, raw(o.find_links), "find_links")?,
            no_index: o.no_index,
        },
        fresh: o.fresh,
        verify: non_empty(lua, o.verify, "verify")?,
        install_uv: o.install_uv,
        uv: non_empty(lua, o.uv, "uv")?,
        timeout: o.timeout,
        detach: o.detach,
    };
    Ok(spec)
}

/// The venv path: absolute (a relative one would mean a different place on every kind of
/// target), not `/`, without a trailing slash (the build dir is `PATH.runbook-new-…`).
fn venv_path(lua: &Lua, path: Option<String>) -> mlua::Result<String> {
    let Some(path) = path else {
        return Err(err_at(
            lua,
            "venv.build(): path is required: the venv's absolute path on the target, e.g. path = \"/opt/venv\"",
        ));
    };
    let trimmed = path.trim_end_matches('/');
    if !path.starts_with('/') || trimmed.is_empty() || path.contains('\n') {
        return Err(err_at(
            lua,
            format!("venv.build(): path must be an absolute path below /, like \"/opt/venv\"; got {path:?}"),
        ));
    }
    Ok(trimmed.to_string())
}

fn non_empty(lua: &Lua, v: Option<String>, key: &str) -> mlua::Result<Option<String>> {
    match v {
        Some(s) if s.is_empty() => Err(err_at(
            lua,
            format!("venv.build(): {key} is empty; leave it out instead"),
        )),
        other => Ok(other),
    }
}

/// A string, or a list of strings (`extra_index_url`, `find_links`).
fn string_list(lua: &Lua, v: Value, key: &str) -> mlua::Result<Vec<String>> {
    match v {
        Value::Nil => Ok(Vec::new()),
        Value::Table(list) => list_of_strings(lua, &list, key),
        other => Ok(non_empty(
            lua,
            string_value(lua, other, &format!("venv.build(): {key}"))?,
            key,
        )?
        .into_iter()
        .collect()),
    }
}

fn list_of_strings(lua: &Lua, list: &Table, key: &str) -> mlua::Result<Vec<String>> {
    let mut out = Vec::new();
    for (i, v) in list.sequence_values::<Value>().enumerate() {
        let what = format!("venv.build(): {key}[{}]", i + 1);
        match string_value(lua, v?, &what)? {
            Some(s) if !s.is_empty() => out.push(s),
            _ => return Err(err_at(lua, format!("{what} is empty"))),
        }
    }
    if list.pairs::<Value, Value>().count() != out.len() {
        return Err(err_at(
            lua,
            format!("venv.build(): {key} must be a plain list of strings"),
        ));
    }
    Ok(out)
}

/// Requirement specifiers. Options are refused here: each has its own key, and a
/// `--index-url` hidden in the list would not show in the summary.
fn packages(lua: &Lua, v: Value) -> mlua::Result<Vec<String>> {
    let list = match v {
        Value::Nil => return Ok(Vec::new()),
        Value::Table(list) => list_of_strings(lua, &list, "packages")?,
        other => {
            return Err(err_at(
                lua,
                format!(
                    "venv.build(): packages is a list like {{ \"torch==2.11.0\" }}, got {}",
                    other.type_name()
                ),
            ))
        }
    };
    if let Some(opt) = list.iter().find(|p| p.starts_with('-')) {
        return Err(err_at(
            lua,
            format!(
                "venv.build(): packages holds the option {opt:?}; use the options index_url, \
                 extra_index_url, find_links, no_index or requirements instead"
            ),
        ));
    }
    Ok(list)
}
