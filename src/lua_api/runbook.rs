//! `runbook{}`, the header every runbook starts with, and the read-only `params` table.

use super::options::{self, LuaValue};
use super::{ctx, err_at};
use crate::actions::ctx::{Header, Phase};
use crate::base::params::{self, ParamSpec, ParamType, ParamValue};
use mlua::{Lua, Table, Value};
use serde::Deserialize;

/// The fields of `runbook{}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderOptions {
    /// `name` (required): a short name, e.g. `"clean-reset"`;
    name: Option<String>,
    /// `description`: what it is for, in a line (`runbook show` and `runbook list` show it);
    description: Option<String>,
    /// `params` (a table of `NAME = { … }`): the parameters it takes, by name (letters,
    /// digits and `_`);
    /// ---@type table<string, runbook.RunbookParamOptions>
    params: Option<LuaValue>,
    /// `cache_roots`: directories under which `cache.clear` may delete (a path or a list
    /// of paths, as `cache.clear` takes them; absolute or `~/…`);
    #[serde(default, deserialize_with = "options::paths")]
    cache_roots: Option<Vec<String>>,
    /// `lock`: what its run locks on each target it changes: `"runbook"` (default: no
    /// other run of this runbook there; other runbooks run beside it) or `"machine"` (no
    /// other run at all there while it changes it);
    /// ---@type "runbook"|"machine"
    lock: Option<String>,
    /// `locks` (a list of names): named locks it takes too, beside its own, on each
    /// target it changes: runbooks that name the same lock never change one target at
    /// the same time (at most 5; letters, digits, `.`, `_`, `-`).
    /// ---@type string[]
    locks: Option<Vec<String>>,
}

/// At most this many `locks`: the lock script holds each on a descriptor of its own,
/// and a POSIX shell has 3 to 9 (the machine's and the runbook's take two).
const MAX_NAMED_LOCKS: usize = 5;

/// `lock` and `locks` of the header, checked.
fn lock_scope(
    lua: &Lua,
    lock: Option<String>,
    locks: Option<Vec<String>>,
) -> mlua::Result<params::LockScope> {
    let machine = match lock.as_deref() {
        None | Some("runbook") => false,
        Some("machine") => true,
        Some(other) => {
            return Err(err_at(
                lua,
                format!(
                "runbook{{}}: lock = \"{other}\": lock is \"runbook\" (the default) or \"machine\""
            ),
            ))
        }
    };
    let mut named = locks.unwrap_or_default();
    for n in &named {
        let fine = !n.is_empty()
            && n.len() <= 64
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            && !n.starts_with('.');
        if !fine {
            return Err(err_at(
                lua,
                format!("runbook{{}}: locks: '{n}' is not a lock name (letters, digits, '.', '_', '-'; at most 64)"),
            ));
        }
    }
    named.sort();
    named.dedup();
    if named.len() > MAX_NAMED_LOCKS {
        return Err(err_at(
            lua,
            format!(
                "runbook{{}}: locks: {} names; a runbook takes at most {MAX_NAMED_LOCKS}",
                named.len()
            ),
        ));
    }
    Ok(params::LockScope { machine, named })
}

/// A param's fields, in `runbook{}`'s `params`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamOptions {
    /// `type`: one of `string` (default), `integer`, `number`, `boolean`, `path`;
    /// ---@type "string"|"integer"|"number"|"boolean"|"path"
    #[serde(rename = "type")]
    ty: Option<String>,
    /// `default`: its value when none is given, of its type;
    /// ---@type string|number|boolean
    default: Option<LuaValue>,
    /// `required = true`: with no value, the run stops before anything happens (exit 2);
    #[serde(default)]
    required: bool,
    /// `help`: what it means, for `runbook show`;
    help: Option<String>,
    /// `secret = true`: its value is masked as `***` everywhere runbook writes;
    #[serde(default)]
    secret: bool,
    /// `choices` (a list): the values it may take; `default` must be one of them.
    /// ---@type (string|number|boolean)[]
    choices: Option<LuaValue>,
}

pub fn register(lua: &Lua) -> mlua::Result<()> {
    lua.globals()
        .raw_set("runbook", lua.create_function(declare)?)
}

/// Lua: runbook { name = "…", description = "…", params = { NAME = { type, default, required, help, secret, choices } }, cache_roots = { … }, lock = "runbook"|"machine", locks = { … } }
///
/// Declares the runbook. Must come first, once. Fields ([`HeaderOptions`]):
///
/// Each param ([`ParamOptions`]):
///
/// A param's value comes from `--set NAME=VALUE` or the environment variable
/// `RUNBOOK_PARAM_NAME`, else `default`. After the header, `params.NAME` reads a value;
/// `params` is read-only and reading an undeclared name is an error.
///
/// ```lua
/// runbook {
///   name = "demo", description = "Make and check some files",
///   params = {
///     dir   = { type = "path", default = "/tmp/demo", help = "where to work" },
///     count = { type = "integer", default = 3 },
///     mode  = { choices = { "fast", "safe" }, default = "safe" },
///     token = { type = "string", secret = true, required = true },
///   },
/// }
/// ```
/// ---@param header runbook.RunbookHeaderOptions
/// ---@global params table<string, any> The runbook's params, by name (read-only; reading an undeclared name is an error).
fn declare(lua: &Lua, decl: Value) -> mlua::Result<()> {
    let ctx = ctx(lua);
    if ctx.phase.get() != Phase::Declaring {
        return Err(err_at(
            lua,
            "runbook{} can only be used at the top level of the file",
        ));
    }
    if ctx.header.borrow().is_some() {
        return Err(err_at(
            lua,
            "runbook{} is declared twice; a file holds one runbook",
        ));
    }
    if !ctx.steps.borrow().is_empty() {
        return Err(err_at(lua, "runbook{} must come before the first step()"));
    }
    let Value::Table(decl) = decl else {
        return Err(err_at(
            lua,
            format!(
                "runbook{{}} takes a table, e.g. runbook {{ name = \"demo\" }}, got {}",
                decl.type_name()
            ),
        ));
    };
    let decl: HeaderOptions = options::read(lua, "runbook{}", Some(decl))?;
    let name = match decl.name {
        Some(n) if !n.trim().is_empty() => n,
        _ => {
            return Err(err_at(
                lua,
                "runbook{}: 'name' is required (a short name, e.g. \"clean-reset\")",
            ))
        }
    };
    let description = decl.description;
    let specs = match decl.params.map_or(Value::Nil, |p| p.0) {
        Value::Nil => Vec::new(),
        Value::Table(t) => parse_params(lua, &t)?,
        other => {
            return Err(err_at(
                lua,
                format!(
                    "runbook{{}}: 'params' must be a table, got {}",
                    other.type_name()
                ),
            ))
        }
    };

    let cache_roots = decl.cache_roots.unwrap_or_default();
    let lock = lock_scope(lua, decl.lock, decl.locks)?;
    for root in &cache_roots {
        if !(root.starts_with('/') || root.starts_with("~/")) || root.split('/').any(|p| p == "..")
        {
            return Err(err_at(
                lua,
                format!("runbook{{}}: cache_roots: '{root}' must be an absolute path (or ~/…) without '..'"),
            ));
        }
    }
    let env = |k: &str| params::given(k);
    let values = params::resolve(&specs, &ctx.sets, &env, ctx.missing).map_err(|e| {
        let at = super::location(lua);
        mlua::Error::external(params::Rejected(format!("{at}: {e}")))
    })?;
    for spec in specs.iter().filter(|s| s.secret) {
        // `check`'s stand-in for an unset secret (`<token>`) is no secret: masking it
        // would only warn that it is short.
        if params::is_placeholder(spec, &ctx.sets, &env, ctx.missing) {
            continue;
        }
        if let Some(Some(v)) = values.get(&spec.name) {
            ctx.bus
                .add_secret(&v.display(), &format!("param '{}'", spec.name));
        }
    }
    install_params_table(lua, &specs, &values)?;
    *ctx.header.borrow_mut() = Some(Header {
        name,
        description,
        params: specs,
        values,
        cache_roots,
        lock,
    });
    Ok(())
}

fn parse_params(lua: &Lua, table: &Table) -> mlua::Result<Vec<ParamSpec>> {
    let mut specs = Vec::new();
    for pair in table.pairs::<Value, Value>() {
        let (k, v) = pair?;
        let Value::String(name) = k else {
            return Err(err_at(
                lua,
                "runbook{}: params are a table of NAME = { … }, keyed by name",
            ));
        };
        let name = name.to_string_lossy();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(err_at(
                lua,
                format!("param '{name}': names are letters, digits and '_'"),
            ));
        }
        let Value::Table(spec) = v else {
            return Err(err_at(
                lua,
                format!("param '{name}': expected a table like {{ type = \"string\", default = … }}, got {}", v.type_name()),
            ));
        };
        let what = format!("param '{name}'");
        let spec: ParamOptions = options::read(lua, &what, Some(spec))?;
        let ty = match spec.ty {
            None => ParamType::String,
            Some(t) => ParamType::parse(&t).map_err(|e| err_at(lua, format!("{what}: {e}")))?,
        };
        let default = match spec.default {
            None => None,
            Some(v) => Some(lua_to_param(lua, ty, v.0, &format!("{what}: default"))?),
        };
        let choices = match spec.choices.map_or(Value::Nil, |c| c.0) {
            Value::Nil => Vec::new(),
            Value::Table(list) => {
                let mut out = Vec::new();
                for item in list.sequence_values::<Value>() {
                    out.push(lua_to_param(lua, ty, item?, &format!("{what}: choices"))?);
                }
                out
            }
            other => {
                return Err(err_at(
                    lua,
                    format!("{what}: choices must be a list, got {}", other.type_name()),
                ))
            }
        };
        if let (Some(d), false) = (&default, choices.is_empty()) {
            if !choices.contains(d) {
                return Err(err_at(
                    lua,
                    format!(
                        "{what}: the default '{}' is not one of its choices",
                        d.display()
                    ),
                ));
            }
        }
        specs.push(ParamSpec {
            name: name.clone(),
            ty,
            default,
            required: spec.required,
            help: spec.help,
            secret: spec.secret,
            choices,
        });
    }
    specs.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(specs)
}

fn lua_to_param(lua: &Lua, ty: ParamType, v: Value, what: &str) -> mlua::Result<ParamValue> {
    let bad = |v: &Value| {
        err_at(
            lua,
            format!("{what}: expected {}, got {}", ty.name(), v.type_name()),
        )
    };
    Ok(match (ty, &v) {
        (ParamType::String | ParamType::Path, Value::String(s)) => {
            ParamValue::Str(s.to_string_lossy())
        }
        (ParamType::Integer, Value::Integer(i)) => ParamValue::Int(*i),
        // Only floats i64 holds exactly: `as` would saturate 1e300 to i64::MAX silently.
        (ParamType::Integer, Value::Number(n))
            if n.fract() == 0.0 && *n >= -(2f64.powi(63)) && *n < 2f64.powi(63) =>
        {
            ParamValue::Int(*n as i64)
        }
        (ParamType::Number, Value::Integer(i)) => ParamValue::Num(*i as f64),
        // As for `--set`: NaN and infinities are not values a param can have.
        (ParamType::Number, Value::Number(n)) if n.is_finite() => ParamValue::Num(*n),
        (ParamType::Boolean, Value::Boolean(b)) => ParamValue::Bool(*b),
        _ => return Err(bad(&v)),
    })
}

pub fn param_to_lua(lua: &Lua, v: &ParamValue) -> mlua::Result<Value> {
    Ok(match v {
        ParamValue::Str(s) => Value::String(lua.create_string(s)?),
        ParamValue::Int(i) => Value::Integer(*i),
        ParamValue::Num(n) => Value::Number(*n),
        ParamValue::Bool(b) => Value::Boolean(*b),
    })
}

/// `params`: a userdata, not a table, so that writes and misspelt reads are errors
/// however they are made: `rawset` and `rawget` take only tables, so neither gets past
/// the checks (with a table proxy, `rawset(params, k, v)` stored a value that every
/// later read saw while the record showed the old one).
struct ParamsProxy {
    /// The values, by name (unset params are absent).
    store: Table,
    /// The declared names.
    names: Vec<String>,
}

impl mlua::UserData for ParamsProxy {
    fn add_methods<M: mlua::UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method("__index", |lua, this, key: Value| {
            if let Value::String(s) = &key {
                let name = s.to_string_lossy();
                if this.names.contains(&name) {
                    return this.store.raw_get::<Value>(name.as_str());
                }
            }
            let declared = if this.names.is_empty() {
                "none".to_string()
            } else {
                this.names.join(", ")
            };
            let hint = match &key {
                Value::String(s) => crate::base::suggest::hint(
                    &s.to_string_lossy(),
                    this.names.iter().map(|s| s.as_str()),
                ),
                _ => String::new(),
            };
            Err(err_at(
                lua,
                format!(
                    "{}: no such param{hint} (declared: {declared})",
                    shown(&key)
                ),
            ))
        });
        methods.add_meta_method(
            "__newindex",
            |lua, _, (key, _): (Value, Value)| -> mlua::Result<()> {
                Err(err_at(
                    lua,
                    format!(
                        "{}: params are read-only; use a local variable",
                        shown(&key)
                    ),
                ))
            },
        );
        // Over a copy: the values' own table never reaches Lua, where `pairs` would
        // hand it out to be written (`local _, t = pairs(params)`).
        methods.add_meta_method("__pairs", |lua, this, ()| {
            let next: mlua::Function = lua.globals().raw_get("next")?;
            let copy = lua.create_table()?;
            for pair in this.store.pairs::<Value, Value>() {
                let (k, v) = pair?;
                copy.raw_set(k, v)?;
            }
            Ok((next, copy, Value::Nil))
        });
        methods.add_meta_method("__tostring", |_, _, ()| Ok("params"));
    }
}

/// How an error names `params[key]`: `params.name`, `params[1]`, `params[true]`.
fn shown(key: &Value) -> String {
    match key {
        Value::String(s) => format!("params.{}", s.to_string_lossy()),
        Value::Integer(i) => format!("params[{i}]"),
        Value::Number(n) => format!("params[{n}]"),
        Value::Boolean(b) => format!("params[{b}]"),
        other => format!("params[{}]", other.type_name()),
    }
}

fn install_params_table(
    lua: &Lua,
    specs: &[ParamSpec],
    values: &std::collections::BTreeMap<String, Option<ParamValue>>,
) -> mlua::Result<()> {
    let store = lua.create_table()?;
    for (k, v) in values {
        if let Some(v) = v {
            store.raw_set(k.as_str(), param_to_lua(lua, v)?)?;
        }
    }
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let proxy = lua.create_userdata(ParamsProxy { store, names })?;
    lua.globals().raw_set("params", proxy)
}
