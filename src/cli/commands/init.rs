//! `runbook init [DIR]`: editor support for writing runbooks. Writes runbook's Lua API as
//! `---@meta` definitions (`.runbook/types/runbook.lua`, made by build.rs from the same
//! doc comments as `runbook docs`) with the stdlib modules beside them, and a
//! `.luarc.json` that points lua-language-server and EmmyLua at them.

use crate::base::embedded::STDLIB;
use crate::base::error::{Error, Result};
use crate::base::fsx::{self, Mode, Replace};
use std::path::{Path, PathBuf};

/// The definitions, generated at build time from the `/// Lua:` blocks (see build.rs).
pub use crate::base::embedded::TYPES;

/// Where the definitions go, relative to DIR; `.luarc.json` names it as a library.
pub const TYPES_DIR: &str = ".runbook/types";

/// The `.luarc.json` a new project gets. Both servers read this file (EmmyLua also reads
/// its own `.emmyrc.json`, which takes precedence there).
pub const LUARC: &str = r#"{
  "$schema": "https://raw.githubusercontent.com/LuaLS/vscode-lua/master/setting/schema.json",
  "runtime": { "version": "Lua 5.4" },
  "workspace": { "library": [".runbook/types"] }
}
"#;

pub fn init(dir: Option<&Path>) -> Result<()> {
    let dir = dir.unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(Error::Usage(format!(
            "init {}: no such directory",
            dir.display()
        )));
    }
    let types = Path::new(TYPES_DIR);
    let mut files: Vec<(PathBuf, &str)> = vec![(types.join("runbook.lua"), TYPES)];
    for (name, source) in STDLIB {
        files.push((types.join("runbook").join(format!("{name}.lua")), source));
    }
    let luarc_rel = Path::new(".luarc.json");
    let luarc = dir.join(luarc_rel);
    // Read through a link if it is one: reading tells what it lacks, and it is never
    // written. Only a missing one (a dangling link reads as missing) is written.
    let theirs = match std::fs::read_to_string(&luarc) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(&luarc, e)),
        Ok(theirs) => Some(theirs),
    };
    if theirs.is_none() {
        files.push((luarc_rel.to_path_buf(), LUARC));
    }
    // A cloned project can ship any of these as a link out of it (to ~/.bashrc): each is
    // checked before the first is written, so a refusal leaves everything as it was.
    for (rel, _) in &files {
        fsx::check(dir, rel, Replace::Yes)?;
    }
    for (rel, text) in &files {
        fsx::write(dir, rel, text.as_bytes(), Mode::Usual, Replace::Yes, true)?;
    }
    println!(
        "wrote {} (runbook {}'s Lua API and its stdlib modules)",
        dir.join(types).display(),
        env!("CARGO_PKG_VERSION")
    );
    let Some(theirs) = theirs else {
        println!("wrote {}", luarc.display());
        return Ok(());
    };
    let missing = missing_settings(&theirs);
    if missing.is_empty() {
        println!("{} already uses {TYPES_DIR}", luarc.display());
    } else {
        // Theirs may hold settings of their own (and JSON with comments, which
        // lua-language-server accepts): it is never rewritten.
        eprintln!(
            "kept {} as it is; for runbook's types it needs:\n{}",
            luarc.display(),
            missing.join("\n")
        );
    }
    Ok(())
}

/// What an existing `.luarc.json` lacks for the types, as the lines to add; everything,
/// when it is not plain JSON this can read.
fn missing_settings(text: &str) -> Vec<String> {
    let library =
        format!("  \"workspace.library\": [\"{TYPES_DIR}\"] (or add it to the list there)");
    let version = "  \"runtime.version\": \"Lua 5.4\"".to_string();
    let Ok(json) = serde_json::from_str::<serde_json::Value>(text) else {
        return vec![library, version];
    };
    // Both the nested form and LuaLS's dotted keys ("workspace.library") are valid.
    let get = |section: &str, key: &str| {
        json.get(section)
            .and_then(|s| s.get(key))
            .or_else(|| json.get(format!("{section}.{key}")))
            .cloned()
    };
    let mut missing = Vec::new();
    let has_library = get("workspace", "library")
        .and_then(|l| l.as_array().cloned())
        .is_some_and(|l| {
            l.iter().any(|p| {
                p.as_str()
                    .is_some_and(|p| p.trim_start_matches("./").trim_end_matches('/') == TYPES_DIR)
            })
        });
    if !has_library {
        missing.push(library);
    }
    if get("runtime", "version").is_none() {
        missing.push(version);
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_luarc_is_read_for_what_it_lacks() {
        assert!(missing_settings(LUARC).is_empty());
        let dotted =
            r#"{ "workspace.library": ["./.runbook/types/"], "runtime.version": "Lua 5.4" }"#;
        assert!(missing_settings(dotted).is_empty());
        let other =
            r#"{ "workspace": { "library": ["vendor"] }, "runtime": { "version": "Lua 5.4" } }"#;
        let said = missing_settings(other);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("workspace.library"), "{said:?}");
        // JSON with comments (which lua-language-server takes) cannot be checked: all of it.
        assert_eq!(missing_settings("// mine\n{}").len(), 2);
    }
}
