//! The Lua VM a runbook runs in, and everything that keeps it in its box.
//!
//! Only the `string`, `table`, `math`, `utf8` and `coroutine` libraries are loaded: no
//! `io`, `os`, `debug` or `package`. `dofile`, `loadfile` and `string.dump` are gone,
//! `load` only takes text, the runbook itself is loaded in text mode (mlua's safe mode
//! alone does not block bytecode), `require` only reaches the embedded stdlib and Lua
//! files beside the runbook. A memory limit and an instruction hook (set as a *global*
//! hook, so coroutines that mlua creates for async calls get it too) end memory bombs,
//! endless loops and interrupted runs; `pcall` cannot swallow those.

use crate::actions::ctx::Ctx;
use crate::base::embedded;
use crate::base::suggest;
use crate::lua_api::vm::{abort_check, MEMORY_LIMIT, USER_THREADS};
use crate::lua_api::{self, location};
use mlua::chunk::ChunkMode;
use mlua::{
    Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, Variadic, VmState,
};
use std::path::Path;
use std::rc::Rc;

/// How often (in VM instructions) the hook checks deadlines and signals.
const HOOK_EVERY: u32 = 10_000;

/// Globals a user coming from plain Lua may reach for, with the reason they are absent.
pub const REMOVED: &[(&str, &str)] = &[
    ("io", "runbooks cannot open files directly; run a command on a target, e.g. t:exec({ \"cat\", path })"),
    ("os", "runbooks cannot run programs or read the environment directly; use t:exec() or t:shell() on a target"),
    ("debug", "the debug library could break the sandbox"),
    ("package", "modules come from require(\"runbook.NAME\") or Lua files beside the runbook"),
    ("dofile", "load code with require() from a file beside the runbook"),
    ("loadfile", "load code with require() from a file beside the runbook"),
    ("warn", "Lua's warn() writes nowhere here; use log.warn(...)"),
];

pub fn new_vm(ctx: Rc<Ctx>) -> mlua::Result<Lua> {
    let libs = StdLib::STRING | StdLib::TABLE | StdLib::MATH | StdLib::UTF8 | StdLib::COROUTINE;
    let lua = Lua::new_with(libs, LuaOptions::new())?;
    lua.set_memory_limit(MEMORY_LIMIT)?;
    lua.set_app_data(ctx);
    let globals = lua.globals();

    for (name, _) in REMOVED {
        globals.raw_set(*name, Value::Nil)?;
    }
    let string: Table = globals.get("string")?;
    string.raw_set(
        "dump",
        lua.create_function(|lua, _: MultiValue| -> mlua::Result<()> {
            Err(mlua::Error::runtime(format!(
                "{}: string.dump is disabled in runbooks (bytecode is not allowed)",
                location(lua)
            )))
        })?,
    )?;
    install_text_only_load(&lua)?;
    install_require(&lua)?;
    install_hook(&lua)?;
    install_abort_aware_pcall(&lua)?;
    install_metatable_rules(&lua)?;
    lua_api::register_all(&lua)?;
    install_strict_globals(&lua)?;
    Ok(lua)
}

/// Compiles runbook source (text only) under a chunk name that makes errors read
/// `path:line: message`.
pub fn compile(lua: &Lua, source: &[u8], label: &str) -> mlua::Result<Function> {
    if source.starts_with(b"\x1bLua") {
        return Err(mlua::Error::runtime(format!(
            "{label}: this is a precompiled (bytecode) chunk; runbooks must be Lua source text"
        )));
    }
    lua.load(source)
        .set_name(format!("@{label}"))
        .set_mode(ChunkMode::Text)
        .into_function()
}

fn install_text_only_load(lua: &Lua) -> mlua::Result<()> {
    let raw_load: Function = lua.globals().get("load")?;
    let load = lua.create_function(move |lua, args: Variadic<Value>| {
        let mut args: Vec<Value> = args.into_iter().collect();
        let loc = location(lua);
        if let Some(Value::String(s)) = args.first() {
            if s.as_bytes().starts_with(b"\x1bLua") {
                return Err(mlua::Error::runtime(format!(
                    "{loc}: load: bytecode is not allowed in runbooks (text chunks only)"
                )));
            }
        }
        // Keep the caller's argument count: Lua's load treats an explicit nil env
        // differently from an absent one.
        while args.len() < 2 {
            args.push(Value::Nil);
        }
        // Chunk names are runbook's to set: a name like "@/etc/passwd" would make error
        // locations point at a file the runbook never was. The name says where load was
        // called, so `[load at rb/x.lua:5]:1: boom` leads back to the runbook line.
        args[1] = Value::String(lua.create_string(format!("=[load at {loc}]"))?);
        let mode = Value::String(lua.create_string("t")?);
        if args.len() >= 3 {
            args[2] = mode;
        } else {
            args.push(mode);
        }
        let loaded = raw_load.call::<MultiValue>(MultiValue::from_iter(args))?;
        // A reader function's error becomes load's `nil, msg`: the timeout or Ctrl-C the
        // hook raised inside the reader must not turn into a return value.
        abort_check(&lua_api::ctx(lua), &loc)?;
        Ok(loaded)
    })?;
    lua.globals().raw_set("load", load)
}

fn valid_module_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
}

/// A module as `require` finds it: its bytes, the name errors give its file, and what a
/// plan records of it.
pub struct Found {
    pub source: Vec<u8>,
    pub label: String,
    pub module: crate::actions::plan::PlannedModule,
}

/// Finds module `name` for a runbook in `dir` (`None`: shipped in
/// the binary) that messages call `label`: a stdlib module (`runbook.NAME`), or a Lua file
/// in the runbook's folder (never a link out of it). The error is what follows
/// `require("NAME"): `.
pub fn find_module(dir: Option<&Path>, label: &str, name: &str) -> Result<Found, String> {
    if !valid_module_name(name) {
        return Err("module names are dotted words (e.g. \"runbook.text\" or \"helpers\"); paths, '..' and '/' are not allowed".into());
    }
    let sha256 = |bytes: &[u8]| crate::actions::plan::file_sha256(bytes);
    if let Some(rest) = name.strip_prefix("runbook.") {
        return match embedded::stdlib(rest) {
            Some(src) => Ok(Found {
                source: src.as_bytes().to_vec(),
                label: format!("{}runbook/{rest}.lua", embedded::STDLIB_LABEL),
                module: crate::actions::plan::PlannedModule {
                    name: name.into(),
                    path: crate::actions::plan::SHIPPED_MODULE.into(),
                    sha256: sha256(src.as_bytes()),
                },
            }),
            None => {
                let names: Vec<&str> = embedded::STDLIB.iter().map(|(n, _)| *n).collect();
                Err(format!(
                    "no such stdlib module{}; available: {}",
                    suggest::hint(rest, names.iter().copied()),
                    names
                        .iter()
                        .map(|n| format!("runbook.{n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        };
    }
    let Some(dir) = dir else {
        return Err("this runbook is embedded in the binary, so only the stdlib (runbook.*) can be required".into());
    };
    let rel: std::path::PathBuf = name.split('.').collect::<Vec<_>>().join("/").into();
    let rel = rel.with_extension("lua");
    let path = dir.join(&rel);
    if crate::base::beside::inside(dir, &rel).is_none() {
        let shown = Path::new(label).parent().map(|p| p.join(&rel));
        return Err(format!(
            "no module '{}' beside the runbook (modules must be Lua files in the runbook's folder, not links out of it)",
            shown.unwrap_or(rel).display()
        ));
    }
    let source = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let shown = Path::new(label)
        .parent()
        .map(|p| p.join(&rel).display().to_string())
        .unwrap_or_else(|| path.display().to_string());
    Ok(Found {
        module: crate::actions::plan::PlannedModule {
            name: name.into(),
            path: rel.display().to_string(),
            sha256: sha256(&source),
        },
        source,
        label: shown,
    })
}

/// Where the sandbox's own `require` is kept in the registry.
pub const REQUIRE_KEY: &str = "runbook.require";

fn install_require(lua: &Lua) -> mlua::Result<()> {
    let loaded = lua.create_table()?;
    let loading: std::cell::RefCell<Vec<String>> = std::cell::RefCell::new(Vec::new());
    let require = lua.create_function(move |lua, name: String| {
        if let Ok(v) = loaded.raw_get::<Value>(name.as_str()) {
            if !v.is_nil() {
                return Ok(v);
            }
        }
        let loc = location(lua);
        if loading.borrow().contains(&name) {
            let chain = loading.borrow().join(" → ");
            return Err(mlua::Error::runtime(format!(
                "{loc}: require(\"{name}\"): circular require ({chain} → {name})"
            )));
        }
        let ctx = lua_api::ctx(lua);
        let found = find_module(ctx.dir.as_deref(), &ctx.label, &name)
            .map_err(|e| mlua::Error::runtime(format!("{loc}: require(\"{name}\"): {e}")))?;
        // Held to a plan, only the modules it loaded run, byte for byte: checked here, as
        // the bytes that will run are read, so a file swapped after apply's own check
        // (by an earlier step's command) is refused too.
        ctx.modules.borrow_mut().load(found.module).map_err(|why| {
            mlua::Error::runtime(format!("{loc}: require(\"{name}\"): refused: {why}"))
        })?;
        let (source, label) = (found.source, found.label);
        let chunk = compile(lua, &source, &label)?;
        loading.borrow_mut().push(name.clone());
        let value = chunk.call::<Value>(name.clone());
        loading.borrow_mut().pop();
        // Name the line that asked for the module as well as the line inside it that failed.
        let value = value.map_err(|e| {
            // A timeout or Ctrl-C inside the module is the step's, not the module's failure.
            if crate::base::abort::Abort::of(&e).is_some() {
                return e;
            }
            mlua::Error::runtime(format!(
                "{loc}: require(\"{name}\") failed: {}",
                lua_api::error_message(&e)
            ))
        })?;
        let value = if value.is_nil() {
            Value::Boolean(true)
        } else {
            value
        };
        loaded.raw_set(name.as_str(), value.clone())?;
        Ok(value)
    })?;
    // Kept where the runbook cannot reach it too: the typo check reads the stdlib's
    // names after the load (and its deadline), when the global may be the runbook's own.
    lua.set_named_registry_value(REQUIRE_KEY, &require)?;
    lua.globals().raw_set("require", require)
}

fn install_hook(lua: &Lua) -> mlua::Result<()> {
    lua.set_global_hook(
        HookTriggers::new().every_nth_instruction(HOOK_EVERY),
        |lua, _debug| {
            // Lua runs, so a signal now is acted on (the check below raises it).
            crate::base::cancel::answered();
            let ctx = lua_api::ctx(lua);
            let loc = location(lua);
            abort_check(&ctx, &loc)?;
            crate::run::watchdog::seen_at(&loc);
            // Remembered for errors that carry no position (out of memory).
            *ctx.last_location.borrow_mut() = loc;
            Ok(VmState::Continue)
        },
    )
}

/// `pcall`, `xpcall`, `coroutine.resume` and `coroutine.close` re-raise once the step is
/// interrupted or out of time, so a runbook cannot catch its own timeout and loop on.
/// Coroutines the runbook makes are remembered, so that commands refuse to run in them
/// (see [`lua_api::vm::in_runbook_coroutine`]); `coroutine.wrap` is rebuilt on the checked
/// `create`/`resume` for that reason.
fn install_abort_aware_pcall(lua: &Lua) -> mlua::Result<()> {
    let check = lua.create_function(|lua, ()| abort_check(&lua_api::ctx(lua), &location(lua)))?;
    let globals = lua.globals();
    let coroutine: Table = globals.get("coroutine")?;
    let user_threads = lua.create_table()?;
    let weak = lua.create_table()?;
    weak.raw_set("__mode", "k")?;
    user_threads.set_metatable(Some(weak))?;
    lua.set_named_registry_value(USER_THREADS, &user_threads)?;
    lua.load(
        r#"
        local raw_pcall, raw_xpcall, check, coroutine, user_threads = ...
        local raw_resume, raw_close, raw_create = coroutine.resume, coroutine.close, coroutine.create
        local error, type = error, type
        local function after(ok, ...) check() return ok, ... end
        pcall = function(...) return after(raw_pcall(...)) end
        -- The handler runs before the stack unwinds, while hooks are still off after a
        -- hook raised the abort: check first, so it cannot loop on unbounded.
        xpcall = function(f, handler, ...)
          return after(raw_xpcall(f, function(...) check() return handler(...) end, ...))
        end
        local running = coroutine.running
        -- Who resumed it: where an error in it names the line when its own stack has
        -- none (lua_api::vm::resumed_at).
        local resume = function(co, ...)
          if user_threads[co] ~= nil then user_threads[co] = running() end
          return after(raw_resume(co, ...))
        end
        coroutine.resume = resume
        coroutine.close = function(...) return after(raw_close(...)) end
        local create = function(f)
          local co = raw_create(f)
          user_threads[co] = true
          return co
        end
        coroutine.create = create
        local function unwrap(co, ok, ...)
          if ok then return ... end
          local err = ...
          raw_close(co)
          check()
          error(err, 0)
        end
        coroutine.wrap = function(f)
          local co = create(f)
          return function(...) return unwrap(co, resume(co, ...)) end
        end
        "#,
    )
    .set_name("=sandbox")
    .set_mode(ChunkMode::Text)
    .call::<()>((
        globals.get::<Function>("pcall")?,
        globals.get::<Function>("xpcall")?,
        check,
        coroutine,
        user_threads,
    ))
}

/// Finalizers (`__gc`) and to-be-closed handlers (`__close`) are the corners of Lua that
/// run with the debug hook off (finalizers always; close handlers when a coroutine the
/// hook aborted is closed): a loop there could never be stopped by a timeout or Ctrl-C,
/// and a finalizer can even run after the run ended, when the VM closes. `setmetatable`
/// refuses both. The string metatable (shared by every string) is made read-only, so
/// strings cannot be given one either. The watchdog stays the backstop for anything that
/// slips past this (a `__close` added to a metatable after it was set).
fn install_metatable_rules(lua: &Lua) -> mlua::Result<()> {
    let check = lua.create_function(|lua, (mt,): (Value,)| -> mlua::Result<()> {
        let Value::Table(mt) = mt else {
            return Ok(());
        };
        for (key, what) in [
            ("__gc", "finalizers (__gc)"),
            ("__close", "to-be-closed handlers (__close)"),
        ] {
            if !mt.raw_get::<Value>(key)?.is_nil() {
                return Err(mlua::Error::runtime(format!(
                    "{}: setmetatable: {what} are not allowed in runbooks: Lua runs them where a timeout or Ctrl-C cannot stop them; do the cleanup in a step with `always = true`",
                    location(lua)
                )));
            }
        }
        Ok(())
    })?;
    let globals = lua.globals();
    lua.load(
        r#"
        local raw_setmetatable, check = ...
        setmetatable = function(t, mt)
          check(mt)
          return raw_setmetatable(t, mt)
        end
        "#,
    )
    .set_name("=sandbox")
    .set_mode(ChunkMode::Text)
    .call::<()>((globals.get::<Function>("setmetatable")?, check))?;
    let string_meta: Table = lua
        .load("return getmetatable('')")
        .set_name("=sandbox")
        .call(())?;
    string_meta.raw_set(
        "__metatable",
        "the string metatable is read-only in runbooks",
    )
}

/// Reading an undefined global is an error that names it (with a suggestion), rather
/// than a silent nil that fails later somewhere else.
fn install_strict_globals(lua: &Lua) -> mlua::Result<()> {
    let globals = lua.globals();
    let meta = lua.create_table()?;
    meta.raw_set(
        "__index",
        lua.create_function(|lua, (g, key): (Table, Value)| -> mlua::Result<Value> {
            let Value::String(key) = key else {
                return Ok(Value::Nil);
            };
            let key = key.to_string_lossy();
            let loc = location(lua);
            if let Some((_, why)) = REMOVED.iter().find(|(n, _)| *n == key) {
                return Err(mlua::Error::runtime(format!(
                    "{loc}: '{key}' is not available in runbooks (sandbox): {why}"
                )));
            }
            let mut names = Vec::new();
            for pair in g.pairs::<Value, Value>() {
                if let Ok((Value::String(k), _)) = pair {
                    names.push(k.to_string_lossy());
                }
            }
            Err(mlua::Error::runtime(format!(
                "{loc}: unknown global '{key}'{}",
                suggest::hint(&key, names.iter().map(|s| s.as_str()))
            )))
        })?,
    )?;
    globals.set_metatable(Some(meta))?;
    Ok(())
}
