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

/// The options an options struct in `text` takes: `(Lua name, doc lines)` for each field,
/// in order (`#[serde(rename = "…")]` applied). Every field needs a doc comment that starts
/// with its name in backticks (`` `keep` `` or `` `keep = true` ``): it is the option's
/// entry in the reference.
fn option_fields(text: &str, name: &str) -> Vec<(String, Vec<String>)> {
    let head = [format!("pub struct {name} {{"), format!("struct {name} {{")];
    let mut lines = text
        .lines()
        .skip_while(|l| !head.contains(&l.trim().to_string()));
    assert!(
        lines.next().is_some(),
        "options struct {name} not found beside its use"
    );
    let (mut fields, mut doc, mut rename) = (Vec::new(), Vec::new(), None);
    for line in lines {
        let l = line.trim();
        if l == "}" {
            break;
        } else if let Some(d) = l.strip_prefix("///") {
            doc.push(d.strip_prefix(' ').unwrap_or(d).to_string());
        } else if l.starts_with("//") || l.is_empty() {
            continue;
        } else if l.starts_with("#[") {
            if let Some((_, r)) = l.split_once("rename = \"") {
                rename = r.split('"').next().map(str::to_string);
            }
        } else if let Some((field, _)) = l.split_once(':') {
            let field = field
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            let lua = rename.take().unwrap_or_else(|| field.trim().to_string());
            let first = doc.first().map(String::as_str).unwrap_or_default();
            assert!(
                first.starts_with(&format!("`{lua}`")) || first.starts_with(&format!("`{lua} ")),
                "option '{lua}' of {name}: its doc comment must start with `{lua}` (it is the reference's entry)"
            );
            fields.push((lua, std::mem::take(&mut doc)));
        }
    }
    fields
}

/// Structs in `text` that are options tables (`#[serde(deny_unknown_fields)]`).
fn options_structs(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.trim() == "#[serde(deny_unknown_fields)]" {
            let decl = lines[i + 1..].iter().find(|l| !l.trim().starts_with("#["));
            if let Some(name) = decl.and_then(|d| d.split("struct ").nth(1)) {
                out.push(name.trim_end_matches(" {").trim().to_string());
            }
        }
    }
    out
}

/// One section per `src/lua_api/*.rs` file: its `//!` summary, then every `/// Lua:` block,
/// where a line ending `([`NAME`]):` is followed by the options of struct NAME. Also
/// returns each options struct's options, which a unit test holds against serde's.
fn api_reference(dir: &Path) -> (String, Vec<(String, Vec<String>)>) {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "rs")
                && !p.ends_with("mod.rs")
                && !p.ends_with("options.rs")
        })
        .filter(|p| fs::read_to_string(p).is_ok_and(|t| t.contains("/// Lua: ")))
        .collect();
    files.sort();
    let mut doc = String::from(
        "# Lua API reference\n\nGenerated from the `/// Lua:` doc comments in `src/lua_api/` \
         (do not edit by hand: `runbook docs --markdown > docs/lua-api.md`).\n\
         The same text is in the binary: `runbook docs [TOPIC]`.\n",
    );
    let mut documented = Vec::new();
    for path in files {
        let topic = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = fs::read_to_string(&path).unwrap();
        let mut undocumented = options_structs(&text);
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
                    let marker = body
                        .strip_suffix("`]):")
                        .and_then(|b| b.rsplit_once(" ([`"));
                    match marker {
                        Some((before, name)) if !in_code => {
                            let fields = option_fields(&text, name);
                            writeln!(doc, "{before}:").unwrap();
                            for (_, lines) in &fields {
                                writeln!(doc, "- {}", lines.join("\n  ")).unwrap();
                            }
                            undocumented.retain(|s| s != name);
                            let names = fields.into_iter().map(|(n, _)| n).collect();
                            documented.push((format!("{topic}::{name}"), names));
                        }
                        _ => {
                            doc.push_str(body);
                            doc.push('\n');
                        }
                    }
                    i += 1;
                }
                continue;
            }
            i += 1;
        }
        assert!(
            undocumented.is_empty(),
            "{}: options structs {undocumented:?} are not in any `/// Lua:` block (a line ending `([`NAME`]):`)",
            path.display()
        );
    }
    (doc, documented)
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
    let (mut reference, options) = api_reference(&api_dir);
    reference.push_str(&stdlib_reference(&stdlib));
    fs::write(out.join("lua-api.md"), reference).unwrap();
    let mut code = String::from("pub static DOCUMENTED: &[(&str, &[&str])] = &[\n");
    for (name, fields) in options {
        writeln!(code, "    ({name:?}, &{fields:?}),").unwrap();
    }
    code.push_str("];\n");
    fs::write(out.join("documented_options.rs"), code).unwrap();
}
