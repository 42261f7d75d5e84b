//! `runbook docs`: the Lua API reference, carried in the binary.

use crate::base::embedded::LUA_API;
use crate::base::error::{Error, Result};

pub fn docs(topic: Option<&str>, markdown: bool) -> Result<()> {
    let Some(topic) = topic.filter(|_| !markdown) else {
        print!("{LUA_API}");
        return Ok(());
    };
    let wanted = topic.trim().trim_end_matches("()").to_lowercase();
    let mut out = String::new();
    let mut topics = Vec::new();
    // A section is a "## module" (all of it) or a "### `signature`" naming the function.
    let mut keep_level = 0;
    for line in LUA_API.lines() {
        let level = line.chars().take_while(|c| *c == '#').count();
        if level == 2 || level == 3 {
            let title = line[level..].trim().trim_matches('`').to_lowercase();
            // A stdlib module, `### require("runbook.text")`, is found as `text` too.
            let module = title
                .strip_prefix("require(\"")
                .and_then(|t| t.strip_suffix("\")"));
            if level == 2 {
                topics.push(title.clone());
            }
            if let Some(m) = module {
                topics.push(m.to_string());
            }
            let names_it = title == wanted
                || module.is_some_and(|m| {
                    m == wanted || m.strip_prefix("runbook.") == Some(wanted.as_str())
                })
                || title.starts_with(&format!("{wanted}("))
                || title.contains(&format!(":{wanted}("))
                || title.contains(&format!(".{wanted}("))
                || title.contains(&format!(" {wanted}("))
                || (level == 3 && title.split(['(', ' ']).next() == Some(wanted.as_str()));
            if names_it {
                keep_level = level;
            } else if keep_level != 0 && level <= keep_level {
                keep_level = 0;
            }
        }
        if keep_level != 0 {
            out.push_str(line);
            out.push('\n');
        }
    }
    if out.is_empty() {
        return Err(Error::Usage(format!(
            "no docs for '{topic}'{}; topics: {}",
            crate::base::suggest::hint(&wanted, topics.iter().map(|s| s.as_str())),
            topics.join(", ")
        )));
    }
    print!("{out}");
    Ok(())
}

/// `runbook docs --globals` (hidden, for tests/docs.rs): what runbook's Lua VM defines,
/// found by walking a VM made the way `engine::load` makes one, as JSON: every global
/// and its type, the globals a plain Lua VM has too (the language's own), the keys of
/// every table runbook adds, and the methods and fields of a target handle, as its
/// `UserData` impl registers them. The docs test holds docs/lua-api.md to this.
pub fn globals() -> Result<()> {
    use crate::actions::ctx::{Ctx, Mode};
    use crate::base::cancel::Cancel;
    use mlua::{Lua, Table, Value};
    use std::collections::BTreeMap;
    use std::rc::Rc;

    let ctx = Rc::new(Ctx::new(
        Mode::Inspect,
        "<globals>".into(),
        None,
        Vec::new(),
        Rc::new(Cancel::default()),
        Default::default(),
        None,
    ));
    let lua = crate::run::sandbox::new_vm(ctx).map_err(|e| Error::Startup(e.to_string()))?;
    let names = |t: &Table| -> Vec<(String, Value)> {
        t.pairs::<Value, Value>()
            .flatten()
            .filter_map(|(k, v)| k.as_string().map(|s| (s.to_string_lossy(), v)))
            .collect()
    };
    let plain = Lua::new();
    let own: Vec<String> = names(&plain.globals())
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let mut globals = BTreeMap::new();
    let mut tables = BTreeMap::new();
    for (name, value) in names(&lua.globals()) {
        if let Value::Table(t) = &value {
            if !own.contains(&name) {
                let mut keys: Vec<String> = names(t).into_iter().map(|(k, _)| k).collect();
                keys.sort();
                tables.insert(name.clone(), keys);
            }
        }
        globals.insert(name, value.type_name());
    }
    let (methods, fields) = crate::lua_api::target::handle_api();
    let mut lua_own = own;
    lua_own.sort();
    let out = serde_json::json!({
        "globals": globals,
        "lua": lua_own,
        "tables": tables,
        "target": { "methods": methods, "fields": fields },
    });
    println!("{out:#}");
    Ok(())
}
