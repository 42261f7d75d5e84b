//! What the typo check holds a runbook's names against ([`Known`]), read where the API
//! is defined: the live VM (its tables, their keys, the stdlib modules' exports, the
//! functions a runbook did not replace), the target handle's `UserData`, and the table
//! build.rs writes from the `/// Lua:` blocks. Apart from the walk in `typos.rs`, which
//! reads only the source, because this is the one part that looks at a VM.

use std::collections::{BTreeMap, BTreeSet};

/// The names the API defines, as the engine found them.
#[derive(Debug, Default, Clone)]
pub struct Known {
    /// Global API tables (`cache`, `string`, …) and their keys.
    pub tables: BTreeMap<String, BTreeSet<String>>,
    /// Stdlib modules by `require` name (`runbook.text`) and their keys.
    pub modules: BTreeMap<String, BTreeSet<String>>,
    /// A target handle's methods (`exec`, `pct`, …).
    pub target_methods: BTreeSet<String>,
    /// A target handle's fields (`name`).
    pub target_fields: BTreeSet<String>,
    /// Methods of a handle that return a handle (`pct`, `docker`, …).
    pub target_derivers: BTreeSet<String>,
    /// Globals that return a handle (`target`, `ssh`).
    pub target_makers: BTreeSet<String>,
    /// Globals that return a list of handles (`targets`).
    pub target_lists: BTreeSet<String>,
    /// The exact options tables a function or method takes, by how it is called
    /// (`cache.clear`, `step`; `:exec` for a target handle's method): (argument index,
    /// the keys it takes).
    pub options: BTreeMap<String, Vec<(usize, BTreeSet<String>)>>,
}

/// The names of the API's tables: the globals of a sandbox VM that holds a table,
/// taken before any runbook ran in it (`_G` and `params`, which hold the runbook's own,
/// left out).
pub fn api_tables(fresh: &mlua::Lua) -> Vec<String> {
    use mlua::Value;
    fresh
        .globals()
        .pairs::<Value, Value>()
        .flatten()
        .filter_map(|(k, v)| match (k, v) {
            (Value::String(name), Value::Table(_)) => Some(name.to_string_lossy()),
            _ => None,
        })
        // `_G` holds the runbook's own globals too, and `params` the runbook's params
        // (whose misspellings the params proxy names when read).
        .filter(|name| name != "_G" && name != "params")
        .collect()
}

/// The function each name whose options the check knows (`embedded::api::OPTIONS`: a
/// global function, `step`, or an API table's, `cache.clear`) is in `vm`, by that name:
/// taken from a fresh sandbox VM (with `api_tables`, before any runbook ran) and again
/// after the runbook's top level ran. A name whose function the top level replaced (a
/// helper module that wraps `step`, `function cache.clear(…)`) is no longer the API's,
/// and its options are not the definitions'. Only those names: the others' functions
/// are never compared.
pub fn api_functions(vm: &mlua::Lua) -> BTreeMap<&'static str, usize> {
    use mlua::Value;
    let globals = vm.globals();
    let mut out = BTreeMap::new();
    for (callee, _, _) in crate::base::embedded::api::OPTIONS {
        if callee.starts_with(':') || out.contains_key(callee) {
            continue;
        }
        let value = match callee.split_once('.') {
            None => globals.raw_get::<Value>(*callee),
            // `_G` and `params` hold the runbook's own.
            Some(("_G" | "params", _)) => continue,
            Some((table, key)) => match globals.raw_get::<Value>(table) {
                Ok(Value::Table(t)) => t.raw_get::<Value>(key),
                _ => continue,
            },
        };
        if let Ok(Value::Function(f)) = value {
            out.insert(*callee, f.to_pointer() as usize);
        }
    }
    out
}

impl Known {
    /// Keeps the options of the functions that are still the API's: the same in the
    /// runbook's VM after its top level ran (`now`) as in a fresh one (`before`). A
    /// handle's methods (`:exec`) cannot be replaced.
    pub fn keep_options_of_unchanged(
        &mut self,
        before: &BTreeMap<&'static str, usize>,
        now: &BTreeMap<&'static str, usize>,
    ) {
        self.options.retain(|callee, _| {
            let callee = callee.as_str();
            callee.starts_with(':')
                || (before.contains_key(callee) && before.get(callee) == now.get(callee))
        });
    }

    /// What the API defines, from its one source: its tables (`api_tables`, taken from
    /// the runbook's VM before the runbook ran), their keys and the exports of the
    /// stdlib modules `source` names as the runbook's own VM (`live`, after its top level
    /// ran) holds them;
    /// the target handle's methods and fields as its `UserData` registers them; what
    /// returns a handle and the options tables' keys from the `/// Lua:` blocks, as
    /// build.rs tabled them (`embedded::api`).
    pub fn read(api_tables: &[String], live: &mlua::Lua, source: &str) -> Known {
        use mlua::{Table, Value};
        let keys = |t: &Table| -> BTreeSet<String> {
            t.pairs::<Value, Value>()
                .flatten()
                .filter_map(|(k, _)| match k {
                    Value::String(s) => Some(s.to_string_lossy()),
                    _ => None,
                })
                .collect()
        };
        let mut known = Known::default();
        for name in api_tables {
            if let Ok(t) = live.globals().raw_get::<Table>(name.as_str()) {
                known.tables.insert(name.clone(), keys(&t));
            }
        }
        // The sandbox's own: the global may be the runbook's, run here without the
        // load's deadline.
        if let Ok(require) =
            live.named_registry_value::<mlua::Function>(crate::run::sandbox::REQUIRE_KEY)
        {
            for (stem, _) in crate::base::embedded::STDLIB {
                let name = format!("runbook.{stem}");
                // The check binds a module only to `require` of a literal that is its
                // name as written: one the file does not spell cannot be bound, and
                // loading it would cost every load its compile (and list it among the
                // modules a plan ran).
                if !source.contains(name.as_str()) {
                    continue;
                }
                if let Ok(t) = require.call::<Table>(name.as_str()) {
                    known.modules.insert(name, keys(&t));
                }
            }
        }
        known.read_table();
        // The handle's methods and fields as its `UserData` impl registers them (the
        // reference must name the same: a unit test holds it to that).
        let (methods, fields) = crate::lua_api::target::handle_api();
        known.target_methods = methods;
        known.target_fields = fields;
        known
    }

    /// The handle makers and options tables build.rs read from the `/// Lua:` blocks
    /// (`embedded::api`).
    pub(super) fn read_table(&mut self) {
        use crate::base::embedded::api;
        let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
        self.target_makers = set(api::TARGET_MAKERS);
        self.target_lists = set(api::TARGET_LISTS);
        self.target_derivers = set(api::TARGET_DERIVERS);
        for (callee, index, keys) in api::OPTIONS {
            self.options
                .entry(callee.to_string())
                .or_default()
                .push((*index, set(keys)));
        }
    }
}
