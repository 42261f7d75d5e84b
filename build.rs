//! Embeds the shipped runbooks and the Lua stdlib into the binary, and builds the Lua API
//! reference from the `/// Lua:` doc comments in `src/lua_api/` (see `runbook docs`).

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

fn lua_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "lua") {
                let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
                out.push((stem, fs::canonicalize(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn table(name: &str, files: &[(String, PathBuf)]) -> String {
    let mut s = format!("pub static {name}: &[(&str, &str)] = &[\n");
    for (stem, path) in files {
        writeln!(
            s,
            "    ({stem:?}, include_str!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }
    s.push_str("];\n");
    s
}

/// One section per `src/lua_api/*.rs` file that has a `/// Lua:` block: its `//!`
/// summary, then every such block. Files without one are helpers, not a Lua table.
fn api_reference(dir: &Path) -> String {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs") && !p.ends_with("mod.rs"))
        .filter(|p| fs::read_to_string(p).is_ok_and(|t| t.contains("/// Lua: ")))
        .collect();
    files.sort();
    let mut doc = String::from(
        "# Lua API reference\n\nGenerated from the `/// Lua:` doc comments in `src/lua_api/` \
         (do not edit by hand: `runbook docs --markdown > docs/lua-api.md`).\n\
         The same text is in the binary: `runbook docs [TOPIC]`.\n",
    );
    for path in files {
        let topic = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = fs::read_to_string(&path).unwrap();
        let summary: Vec<&str> = text
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .map(|l| l.trim_start_matches("//!").trim())
            .collect();
        write!(doc, "\n## {topic}\n\n{}\n", summary.join(" ")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let l = lines[i].trim_start();
            if let Some(sig) = l.strip_prefix("/// Lua: ") {
                write!(doc, "\n### `{}`\n\n", sig.trim()).unwrap();
                i += 1;
                // The blank `///` line between signature and text is already written.
                if lines.get(i).is_some_and(|l| l.trim() == "///") {
                    i += 1;
                }
                let mut in_code = false;
                while i < lines.len() && lines[i].trim_start().starts_with("///") {
                    let body = lines[i].trim_start().trim_start_matches("///");
                    let body = body.strip_prefix(' ').unwrap_or(body);
                    if body.starts_with("```") {
                        in_code = !in_code;
                    }
                    doc.push_str(body);
                    doc.push('\n');
                    i += 1;
                }
                continue;
            }
            i += 1;
        }
    }
    doc
}

/// The stdlib modules: each `--- text` comment above a `function mod.name(…)`.
fn stdlib_reference(files: &[(String, PathBuf)]) -> String {
    let mut doc = String::from("\n## stdlib\n\nLua modules carried in the binary, loaded with `require(\"runbook.NAME\")`.\n");
    for (stem, path) in files {
        let text = fs::read_to_string(path).unwrap();
        write!(doc, "\n### `require(\"runbook.{stem}\")`\n\n").unwrap();
        let mut pending: Vec<&str> = Vec::new();
        for line in text.lines() {
            if let Some(c) = line.strip_prefix("--- ") {
                pending.push(c);
            } else if let Some(sig) = line.strip_prefix("function ") {
                if !pending.is_empty() {
                    writeln!(doc, "- `{}`: {}", sig.trim(), pending.join(" ")).unwrap();
                }
                pending.clear();
            } else {
                pending.clear();
            }
        }
    }
    doc
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    for d in ["runbooks", "stdlib/runbook", "src/lua_api"] {
        println!("cargo:rerun-if-changed={}", root.join(d).display());
    }
    let shipped = lua_files(&root.join("runbooks"));
    let stdlib = lua_files(&root.join("stdlib/runbook"));
    for (_, p) in shipped.iter().chain(&stdlib) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    let mut code = table("SHIPPED", &shipped);
    code.push_str(&table("STDLIB", &stdlib));
    fs::write(out.join("embedded.rs"), code).unwrap();
    let api_dir = root.join("src/lua_api");
    for e in fs::read_dir(&api_dir).unwrap().flatten() {
        println!("cargo:rerun-if-changed={}", e.path().display());
    }
    let mut reference = api_reference(&api_dir);
    reference.push_str(&stdlib_reference(&stdlib));
    fs::write(out.join("lua-api.md"), reference).unwrap();
}
