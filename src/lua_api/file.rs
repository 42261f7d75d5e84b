//! `file.*`: files on targets. `put` writes bytes (given, or a file beside the runbook),
//! `template` renders a Jinja2 template beside the runbook and writes the result, `get`
//! reads a file back. A write changes nothing when the file already holds those bytes
//! (and the mode and owner given); otherwise it is atomic (a new file in the same
//! directory, renamed over the path), and the preview and the plan show its diff.

use super::options::{self, LuaValue, Whole};
use super::target::target_arg;
use super::to_lua;
use super::{err_at, require_running, step_for};
use crate::primitives::file::{self, Mode, Owner, PutSpec};
use mlua::{Lua, Table, Value};
use serde::Deserialize;
use std::path::Path;

/// Options of `file.put`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutOptions {
    /// `path` (required): the file on `t`, an absolute path; its directory must exist. A
    /// symbolic link there is refused (give the path it points to), and so is a
    /// directory;
    path: Option<String>,
    /// `content`: the bytes to write, a string kept exactly (text or not);
    #[serde(default, deserialize_with = "options::bytes")]
    content: Option<Vec<u8>>,
    /// `src`: instead of `content`, a file beside the runbook whose bytes to write: a
    /// path relative to the runbook's folder, never out of it (no `..`, no absolute
    /// path, no link that leads out);
    src: Option<String>,
    /// `mode`: the permissions, a string of octal digits (`"0644"`; a Lua number is
    /// refused: `0644` is the decimal 644). Default: the file's own; a new file gets
    /// `0666` less the umask of the user commands run as on `t`;
    /// ---@type string
    mode: Option<LuaValue>,
    /// `owner`: `"USER"` or `"USER:GROUP"` (names or numeric ids; changing it needs
    /// root). Default: the file's own, kept (the write fails rather than change it); a
    /// new file is the user's commands run as;
    owner: Option<String>,
    /// `backup = true`: keep the file as it was beside it, as `PATH.YYYYMMDDTHHMMSSZ~`
    /// (UTC; `PATH.YYYYMMDDTHHMMSSZ.1~` when that is taken), a hard link to the old file;
    /// its name is the result's `backup`;
    #[serde(default)]
    backup: bool,
    /// `diff = false`: the preview and the plan show the old and new content's sizes and
    /// sha256 only, not the diff (a key, a certificate: a secret the runbook does not
    /// know as one).
    #[serde(default = "options::yes")]
    diff: bool,
}

/// Options of `file.template`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateOptions {
    /// `path` (required): the file on `t`, as for `file.put`;
    path: Option<String>,
    /// `src` (required): the template, a file beside the runbook (relative to its folder,
    /// never out of it);
    src: Option<String>,
    /// `vars`: the values the template sees, a table of names (strings, numbers,
    /// booleans, lists and tables of them); nothing else is visible to it;
    /// ---@type table<string, any>
    vars: Option<LuaValue>,
    /// `mode`: as for `file.put`;
    /// ---@type string
    mode: Option<LuaValue>,
    /// `owner`: as for `file.put`;
    owner: Option<String>,
    /// `backup = true`: as for `file.put`;
    #[serde(default)]
    backup: bool,
    /// `diff = false`: as for `file.put`.
    #[serde(default = "options::yes")]
    diff: bool,
}

/// `max_bytes`' bounds: at least 1 byte, at most what a command's output keeps.
type MaxBytes = Whole<1, { file::GET_MAX as i64 }>;

/// Options of `file.get`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetOptions {
    /// `max_bytes` (a whole number, default 1 MiB, at most 8 MiB less 4 KiB): a bigger
    /// file is an error naming its size, and nothing of it is read;
    /// ---@type integer
    max_bytes: Option<MaxBytes>,
    /// `missing_ok = true`: nil when nothing is at the path, instead of an error.
    #[serde(default)]
    missing_ok: bool,
}

pub fn register(lua: &Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.raw_set("put", super::async_function(lua, put)?)?;
    t.raw_set("template", super::async_function(lua, template)?)?;
    t.raw_set("get", super::async_function(lua, get)?)?;
    lua.globals().raw_set("file", t)
}

/// Lua: file.put(t, { path, content, src, mode, owner, backup, diff }) -> { path, changed, created, backup, bytes, sha256, planned }
///
/// Makes the file `path` on `t` hold `content` (or the bytes of the file `src` beside
/// the runbook: exactly one of them), with `mode` and `owner` when given. Options ([`PutOptions`]):
///
/// One read looks at the path first (in `--dry-run` too). When the file already holds
/// those bytes, and the mode and owner given, nothing changes (`changed = false`, no
/// change in the preview or the plan). Otherwise one change writes it: the bytes go on the
/// command's stdin (never in an argv), into a new file of an unpredictable name in the
/// same directory (`mktemp`, mode 0600 while it is written), which gets the owner and
/// mode and is renamed over `path`: a reader sees the old file or the new one, never a
/// part. When only the mode or owner differ, the file's own bytes are copied the same
/// way. The preview, the confirmation and the plan show what it does to the content as
/// a unified diff (as Ansible's `--diff`), secrets masked; a binary file, or one over
/// 256 KiB, by its sizes and sha256 instead. The change's command names the sha256 the
/// file had when it was read and the one it will have: a file that changed since it
/// was read is not written (the step fails, naming both), and a saved plan holds the
/// run to the content that was reviewed. A write is not marked `[deletes]`: what it
/// drops is in its diff (`backup = true` keeps the old file). `created` is true for a
/// new file (nil with `--offline`, which reads nothing); in a dry-run `planned = true`
/// and `changed` says what would change.
///
/// ```lua
/// step("motd", function()
///   file.put(box, { path = "/etc/motd", content = "maintained by runbook\n", mode = "0644" })
///   file.put(box, { path = "/etc/app/logging.ini", src = "files/logging.ini", backup = true })
/// end)
/// ```
/// ---@param t runbook.Target
/// ---@param opts runbook.FilePutOptions
/// ---@return runbook.FilePut
/// ---@class runbook.FilePut
/// ---@field path string
/// ---@field changed boolean whether it was (or in a dry-run would be) written, or its mode or owner set
/// ---@field created? boolean whether there was no file at the path (nil with `--offline`)
/// ---@field backup? string where `backup = true` kept the old file
/// ---@field bytes integer the size of the content
/// ---@field sha256 string the content's sha256
/// ---@field planned boolean a dry-run: nothing was written
async fn put(lua: Lua, (t, opts): (Value, Option<Table>)) -> mlua::Result<Value> {
    const WHAT: &str = "file.put()";
    let ctx = require_running(&lua, WHAT)?;
    let target = target_arg(&lua, &t, "file.put")?;
    let o: PutOptions = options::read(&lua, WHAT, Some(given(&lua, opts, WHAT)?))?;
    let content = match (o.content, o.src) {
        (Some(bytes), None) => bytes,
        (None, Some(src)) => beside(&lua, WHAT, &src)?.1,
        (Some(_), Some(_)) => {
            return Err(err_at(
                &lua,
                format!("{WHAT}: give content or src, not both"),
            ))
        }
        (None, None) => {
            return Err(err_at(
                &lua,
                format!("{WHAT}: content or src is required (the bytes to write)"),
            ))
        }
    };
    let spec = PutSpec {
        what: "file.put",
        path: required_path(&lua, o.path, WHAT)?,
        content,
        mode: mode(&lua, o.mode, WHAT)?,
        owner: owner(&lua, o.owner, WHAT)?,
        backup: o.backup,
        diff: o.diff,
    };
    let step = step_for(&lua, &ctx, &target);
    let done = file::put(&step, &spec).await?;
    to_lua(&lua, &done)
}

/// Lua: file.template(t, { path, src, vars, mode, owner, backup, diff }) -> { path, changed, created, backup, bytes, sha256, planned }
///
/// Renders the Jinja2 template `src` (a file beside the runbook) with `vars`, here,
/// and writes the result to `path` on `t` exactly as `file.put` writes `content`: the
/// same read, idempotence, atomic write, diff and result. Options ([`TemplateOptions`]):
///
/// The syntax is Jinja2's (`{{ name }}`, `{% for x in list %}…{% endfor %}`, `{% if %}`,
/// filters such as `default`, `join`, `upper`, `indent`, `tojson`), rendered by
/// minijinja, with the whitespace of Ansible's template module: the newline after a
/// block tag is dropped (`trim_blocks`), the template's trailing newline kept. The
/// template sees `vars` and nothing else: no other template (`include`, `extends` and
/// `import` are refused), no file, no environment variable. A name it uses that `vars`
/// lacks is an error naming the template's file and line (`templates/app.conf.j2:3:
/// undefined value: 'port' is not in vars`), as Jinja2's `StrictUndefined`: write
/// `{{ port | default(8080) }}` or `{% if port is defined %}` for an optional one.
/// Output is never HTML-escaped.
///
/// ```lua
/// step("nginx site", function()
///   file.template(box, {
///     path = "/etc/nginx/sites-available/app", src = "templates/site.conf.j2",
///     vars = { server_name = "app.example", upstreams = { "app1.example:8000", "app2.example:8000" } },
///     mode = "0644", backup = true,
///   })
/// end)
/// ```
/// ---@param t runbook.Target
/// ---@param opts runbook.FileTemplateOptions
/// ---@return runbook.FilePut
async fn template(lua: Lua, (t, opts): (Value, Option<Table>)) -> mlua::Result<Value> {
    const WHAT: &str = "file.template()";
    let ctx = require_running(&lua, WHAT)?;
    let target = target_arg(&lua, &t, "file.template")?;
    let o: TemplateOptions = options::read(&lua, WHAT, Some(given(&lua, opts, WHAT)?))?;
    let Some(src) = o.src else {
        return Err(err_at(
            &lua,
            format!("{WHAT}: src is required (the template, a file beside the runbook)"),
        ));
    };
    let (name, source) = beside(&lua, WHAT, &src)?;
    let source = String::from_utf8(source).map_err(|_| {
        err_at(
            &lua,
            format!("{WHAT}: the template {name} is not UTF-8 text"),
        )
    })?;
    let vars = match o.vars.map(|v| v.0) {
        None | Some(Value::Nil) => {
            minijinja::Value::from(std::collections::BTreeMap::<String, minijinja::Value>::new())
        }
        Some(Value::Table(t)) => jinja_value(&Value::Table(t), "vars", 0)
            .map_err(|e| err_at(&lua, format!("{WHAT}: {e}")))?,
        Some(other) => {
            return Err(err_at(
                &lua,
                format!(
                    "{WHAT}: vars must be a table of names, like {{ port = 8080 }}; got {}",
                    other.type_name()
                ),
            ))
        }
    };
    let content = file::template::render(&name, &source, vars)
        .map_err(|e| err_at(&lua, format!("{WHAT}: {e}")))?;
    let spec = PutSpec {
        what: "file.template",
        path: required_path(&lua, o.path, WHAT)?,
        content: content.into_bytes(),
        mode: mode(&lua, o.mode, WHAT)?,
        owner: owner(&lua, o.owner, WHAT)?,
        backup: o.backup,
        diff: o.diff,
    };
    let step = step_for(&lua, &ctx, &target);
    let done = file::put(&step, &spec).await?;
    to_lua(&lua, &done)
}

/// Lua: file.get(t, path, [opts]) -> { path, content, size, mode, owner, group, sha256, planned }
///
/// Reads the file `path` (absolute) on `t`: a read, so it runs in `--dry-run` too. Its
/// bytes are the result's `content`, a string kept exactly (text or not); they are
/// not output: no event, record or preview holds them. A symbolic link is refused
/// (give the path it points to), and so is anything that is not a regular file. Options ([`GetOptions`]):
///
/// With `--offline` nothing is read: `planned = true`, and every other field but
/// `path` is nil.
///
/// ```lua
/// local f = file.get(box, "/etc/os-release")
/// local id = f.content:match('\nID=([^\n]+)')
/// local old = file.get(box, "/etc/app.conf", { missing_ok = true })
/// if old == nil then log.info("no app.conf yet") end
/// ```
/// ---@param t runbook.Target
/// ---@param path string
/// ---@param opts? runbook.FileGetOptions
/// ---@return runbook.FileGot?
/// ---@class runbook.FileGot
/// ---@field path string
/// ---@field content? string its bytes (nil with `--offline`)
/// ---@field size? integer
/// ---@field mode? string its permissions in octal, `"0644"`
/// ---@field owner? string its owner's name (`UNKNOWN` when the target names none)
/// ---@field group? string its group's name
/// ---@field sha256? string
/// ---@field planned boolean `--offline`: nothing was read
async fn get(lua: Lua, (t, path, opts): (Value, Value, Option<Table>)) -> mlua::Result<Value> {
    const WHAT: &str = "file.get()";
    let ctx = require_running(&lua, WHAT)?;
    let target = target_arg(&lua, &t, "file.get")?;
    let path = match path {
        Value::String(s) => s.to_str()?.to_string(),
        other => {
            return Err(err_at(
                &lua,
                format!(
                    "{WHAT}: path must be a string, the file's absolute path; got {}",
                    other.type_name()
                ),
            ))
        }
    };
    let o: GetOptions = options::read(&lua, WHAT, opts)?;
    let max = o.max_bytes.map_or(file::GET_DEFAULT, |m| m.0 as u64);
    let step = step_for(&lua, &ctx, &target);
    let Some(got) = file::get(&step, &path, max, o.missing_ok).await? else {
        return Ok(Value::Nil);
    };
    let value = to_lua(&lua, &got)?;
    if let (Value::Table(t), Some(bytes)) = (&value, &got.content) {
        t.raw_set("content", lua.create_string(bytes)?)?;
    }
    Ok(value)
}

fn given(lua: &Lua, opts: Option<Table>, what: &str) -> mlua::Result<Table> {
    opts.ok_or_else(|| {
        err_at(
            lua,
            format!("{what}: give the options, e.g. {{ path = \"/etc/app.conf\", … }}"),
        )
    })
}

fn required_path(lua: &Lua, path: Option<String>, what: &str) -> mlua::Result<String> {
    let path = path.ok_or_else(|| {
        err_at(
            lua,
            format!("{what}: path is required (the file on the target, an absolute path)"),
        )
    })?;
    file::check_path(&path).map_err(|e| err_at(lua, format!("{what}: {e}")))?;
    Ok(path)
}

fn mode(lua: &Lua, v: Option<LuaValue>, what: &str) -> mlua::Result<Option<Mode>> {
    match v.map(|v| v.0) {
        None | Some(Value::Nil) => Ok(None),
        Some(Value::String(s)) => Mode::parse(&s.to_string_lossy())
            .map(Some)
            .map_err(|e| err_at(lua, format!("{what}: {e}"))),
        Some(Value::Integer(n)) => Err(err_at(
            lua,
            format!(
                "{what}: mode must be a string of octal digits, like \"0644\"; got the number {n} (a Lua number is decimal: 0644 is 644)"
            ),
        )),
        Some(other) => Err(err_at(
            lua,
            format!(
                "{what}: mode must be a string of octal digits, like \"0644\"; got {}",
                other.type_name()
            ),
        )),
    }
}

fn owner(lua: &Lua, v: Option<String>, what: &str) -> mlua::Result<Option<Owner>> {
    v.map(|o| Owner::parse(&o))
        .transpose()
        .map_err(|e| err_at(lua, format!("{what}: {e}")))
}

/// Reads `src`, a file beside the runbook (`base::beside`): its name as messages give it
/// (beside the runbook's own path, as `require` names modules) and its bytes.
fn beside(lua: &Lua, what: &str, src: &str) -> mlua::Result<(String, Vec<u8>)> {
    /// More than any configuration file; a bigger one is data, for `artifact.*`.
    const SRC_MAX: u64 = 64 << 20;
    let ctx = super::ctx(lua);
    let Some(dir) = ctx.dir.as_deref() else {
        return Err(err_at(
            lua,
            format!("{what}: src: this runbook is shipped inside runbook and has no folder; give content"),
        ));
    };
    let shown = Path::new(&ctx.label)
        .parent()
        .map(|p| p.join(src).display().to_string())
        .unwrap_or_else(|| src.to_string());
    let Some(file) = crate::base::beside::inside(dir, Path::new(src)) else {
        return Err(err_at(
            lua,
            format!("{what}: src {shown:?}: no such file beside the runbook (src is a path relative to the runbook's folder, of plain names, and no link out of it)"),
        ));
    };
    let meta =
        std::fs::metadata(&file).map_err(|e| err_at(lua, format!("{what}: src {shown}: {e}")))?;
    if !meta.is_file() {
        return Err(err_at(lua, format!("{what}: src {shown} is not a file")));
    }
    if meta.len() > SRC_MAX {
        return Err(err_at(
            lua,
            format!(
                "{what}: src {shown} is {} bytes, over {} MiB: file.* writes configuration, not data (artifact.* moves data)",
                meta.len(),
                SRC_MAX >> 20
            ),
        ));
    }
    let bytes =
        std::fs::read(&file).map_err(|e| err_at(lua, format!("{what}: src {shown}: {e}")))?;
    Ok((shown, bytes))
}

/// A Lua value as a template sees it: strings (UTF-8), numbers (a float with no fraction as a
/// whole number), booleans, lists (a table
/// of 1…n) and maps (a table of string keys), nested at most 32 deep. `at` names the
/// value in errors (`vars.servers[2].name`).
fn jinja_value(v: &Value, at: &str, depth: usize) -> Result<minijinja::Value, String> {
    if depth > 32 {
        return Err(format!(
            "{at}: nested more than 32 deep (a table that holds itself?)"
        ));
    }
    Ok(match v {
        Value::Nil => minijinja::Value::from(()),
        Value::Boolean(b) => minijinja::Value::from(*b),
        Value::Integer(i) => minijinja::Value::from(*i),
        // A whole number reads as one (`80`, not `80.0`): a `type = "number"` param or
        // `n / 2` is a float in Lua 5.4 even when it has no fraction.
        Value::Number(n) if n.fract() == 0.0 && n.abs() < 2f64.powi(53) => {
            minijinja::Value::from(*n as i64)
        }
        Value::Number(n) => minijinja::Value::from(*n),
        Value::String(s) => match s.to_str() {
            Ok(text) => minijinja::Value::from(text.to_string()),
            Err(_) => return Err(format!("{at} is not UTF-8 text: a template writes text")),
        },
        Value::Table(t) => {
            let len = t.raw_len();
            let mut pairs = Vec::new();
            for pair in t.clone().pairs::<Value, Value>() {
                pairs.push(pair.map_err(|e| format!("{at}: {e}"))?);
            }
            let list = len > 0 && pairs.len() == len;
            if list {
                let mut items = Vec::with_capacity(len);
                for i in 1..=len {
                    let item: Value = t.raw_get(i).map_err(|e| format!("{at}: {e}"))?;
                    items.push(jinja_value(&item, &format!("{at}[{i}]"), depth + 1)?);
                }
                minijinja::Value::from(items)
            } else {
                let mut map = std::collections::BTreeMap::new();
                for (k, item) in pairs {
                    let Value::String(k) = k else {
                        return Err(format!(
                            "{at}: a table given to a template is a list (1…n) or has string keys only; it has the key {}",
                            k.to_string().unwrap_or_else(|_| k.type_name().to_string())
                        ));
                    };
                    let k = k.to_string_lossy();
                    let value = jinja_value(&item, &format!("{at}.{k}"), depth + 1)?;
                    map.insert(k, value);
                }
                minijinja::Value::from(map)
            }
        }
        other => {
            return Err(format!(
                "{at} is a {}: a template takes strings, numbers, booleans and tables of them",
                other.type_name()
            ))
        }
    })
}
