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
fn option_fields(text: &str, name: &str) -> Vec<OptionField> {
    let head = [format!("pub struct {name} {{"), format!("struct {name} {{")];
    let mut lines = text
        .lines()
        .skip_while(|l| !head.contains(&l.trim().to_string()));
    assert!(
        lines.next().is_some(),
        "options struct {name} not found beside its use"
    );
    let (mut fields, mut doc, mut rename) = (Vec::new(), Vec::new(), None);
    let (mut given_type, mut parser) = (None, None);
    for line in lines {
        let l = line.trim();
        if l == "}" {
            break;
        } else if let Some(d) = l.strip_prefix("/// ---@type ") {
            given_type = Some(d.trim().to_string());
        } else if let Some(d) = l.strip_prefix("///") {
            doc.push(d.strip_prefix(' ').unwrap_or(d).to_string());
        } else if l.starts_with("//") || l.is_empty() {
            continue;
        } else if l.starts_with("#[") {
            if let Some((_, r)) = l.split_once("rename = \"") {
                rename = r.split('"').next().map(str::to_string);
            }
            if let Some((_, r)) = l.split_once("deserialize_with = \"") {
                parser = r.split('"').next().map(str::to_string);
            }
        } else if let Some((field, rust_type)) = l.split_once(':') {
            let field = field
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            let lua = rename.take().unwrap_or_else(|| field.trim().to_string());
            let first = doc.first().map(String::as_str).unwrap_or_default();
            assert!(
                first.starts_with(&format!("`{lua}`")) || first.starts_with(&format!("`{lua} ")),
                "option '{lua}' of {name}: its doc comment must start with `{lua}` (it is the reference's entry)"
            );
            let parser = parser.take();
            let ty = given_type.take().unwrap_or_else(|| {
                lua_type(rust_type.trim().trim_end_matches(','), parser.as_deref())
                    .unwrap_or_else(|| panic!("option '{lua}' of {name}: no Lua type follows from its Rust type: give it one, a doc line `/// ---@type TYPE`"))
                    .to_string()
            });
            let required = first.contains("(required");
            fields.push(OptionField {
                name: lua,
                doc: std::mem::take(&mut doc),
                ty,
                required,
            });
        }
    }
    fields
}

/// One option of an options struct: its Lua name, its doc lines (its entry in the
/// reference) and its Lua type, for the definitions `runbook init` writes.
struct OptionField {
    name: String,
    doc: Vec<String>,
    ty: String,
    required: bool,
}

/// The Lua type an option's Rust type and parser (`deserialize_with`) take; `None` where
/// that says nothing (a `LuaValue`), which then needs its own `/// ---@type` line.
fn lua_type(rust: &str, parser: Option<&str>) -> Option<&'static str> {
    match parser.map(|p| p.rsplit("::").next().unwrap_or(p)) {
        Some("duration" | "timeout" | "timeout_given") => Some("runbook.Duration"),
        Some("paths") => Some("runbook.Paths"),
        Some("env") => Some("runbook.Env"),
        Some("words") => Some("runbook.Words"),
        Some("bytes") => Some("string"),
        Some(_) => None,
        None => match rust.trim_start_matches("Option<").trim_end_matches('>') {
            "bool" => Some("boolean"),
            "String" => Some("string"),
            t if t.starts_with("Whole<") || t.starts_with("AtLeast") => Some("integer"),
            _ => None,
        },
    }
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

/// An options struct (`topic::Name`) and the options it takes, for the unit test.
type Documented = (String, Vec<String>);

/// One section per `src/lua_api/*.rs` file: its `//!` summary, then every `/// Lua:` block,
/// where a line ending `([`NAME`]):` is followed by the options of struct NAME. Also
/// returns each options struct's options, which a unit test holds against serde's.
fn api_reference(dir: &Path) -> (String, Vec<Documented>, Vec<Block>) {
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
    let (mut documented, mut blocks) = (Vec::new(), Vec::new());
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
                let start = doc.len();
                let mut block = Block {
                    topic: topic.clone(),
                    summary: summary.join(" "),
                    sig: sig.trim().to_string(),
                    text: String::new(),
                    notes: Vec::new(),
                    options: Vec::new(),
                };
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
                    // Type annotations, for `runbook init`'s definitions only.
                    if body.starts_with("---@") && !in_code {
                        block.notes.push(body.to_string());
                        i += 1;
                        continue;
                    }
                    let marker = body
                        .strip_suffix("`]):")
                        .and_then(|b| b.rsplit_once(" ([`"));
                    match marker {
                        Some((before, name)) if !in_code => {
                            let fields = option_fields(&text, name);
                            writeln!(doc, "{before}:").unwrap();
                            for f in &fields {
                                writeln!(doc, "- {}", f.doc.join("\n  ")).unwrap();
                            }
                            undocumented.retain(|s| s != name);
                            let names = fields.iter().map(|f| f.name.clone()).collect();
                            documented.push((format!("{topic}::{name}"), names));
                            block.options.push((name.to_string(), fields));
                        }
                        _ => {
                            doc.push_str(body);
                            doc.push('\n');
                        }
                    }
                    i += 1;
                }
                block.text = doc[start..].to_string();
                blocks.push(block);
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
    (doc, documented, blocks)
}

/// The stdlib modules: each `--- text` comment above a `function mod.name(…)`.
fn stdlib_reference(files: &[(String, PathBuf)]) -> String {
    let mut doc = String::from("\n## stdlib\n\nLua modules carried in the binary, loaded with `require(\"runbook.NAME\")`.\n");
    for (stem, path) in files {
        let text = fs::read_to_string(path).unwrap();
        write!(doc, "\n### `require(\"runbook.{stem}\")`\n\n").unwrap();
        let mut pending: Vec<&str> = Vec::new();
        for line in text.lines() {
            if line.starts_with("---@") {
                // A type annotation (`---@param`), for editors: not part of the text.
            } else if let Some(c) = line.strip_prefix("--- ") {
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
    let (mut reference, options, blocks) = api_reference(&api_dir);
    reference.push_str(&stdlib_reference(&stdlib));
    fs::write(out.join("lua-api.md"), reference).unwrap();
    let aliases = fs::read_to_string(api_dir.join("options.rs")).unwrap();
    fs::write(out.join("runbook-types.lua"), api_types(&blocks, &aliases)).unwrap();
    fs::write(out.join("api_table.rs"), api_table(&blocks)).unwrap();
    let mut code = String::from("pub static DOCUMENTED: &[(&str, &[&str])] = &[\n");
    for (name, fields) in options {
        writeln!(code, "    ({name:?}, &{fields:?}),").unwrap();
    }
    code.push_str("];\n");
    fs::write(out.join("documented_options.rs"), code).unwrap();
    fs::write(out.join("scripts.rs"), scripts(&root)).unwrap();
}

/// One `/// Lua:` block: its section, signature, rendered text (as in the reference) and
/// its `---@` type annotations, with the options structs its text lists.
struct Block {
    topic: String,
    summary: String,
    sig: String,
    text: String,
    notes: Vec<String>,
    options: Vec<(String, Vec<OptionField>)>,
}

/// The class a target handle is, whose methods are the `t:NAME(…)` signatures.
const HANDLE: &str = "runbook.Target";

/// An options struct's class: `runbook.` and the struct's name, after its section's
/// (`cache`'s `ClearOptions` is `runbook.CacheClearOptions`) unless it starts with it.
fn options_class(topic: &str, name: &str) -> String {
    let mut section = topic[..1].to_uppercase();
    section.push_str(&topic[1..]);
    if name.starts_with(&section) {
        format!("runbook.{name}")
    } else {
        format!("runbook.{section}{name}")
    }
}

/// `text` before its first whitespace outside brackets (a type such as
/// `table<string, any>`), and the rest.
fn split_type(text: &str) -> (&str, &str) {
    let mut depth = 0i32;
    for (i, c) in text.char_indices() {
        match c {
            '<' | '(' | '{' | '[' => depth += 1,
            '>' | ')' | '}' | ']' => depth -= 1,
            c if c.is_whitespace() && depth == 0 => return (&text[..i], text[i..].trim()),
            _ => {}
        }
    }
    (text, "")
}

/// The signature outside brackets and quotes, each opening bracket there kept: what the
/// calls at its top level are.
fn top_level(sig: &str) -> String {
    let (mut top, mut depth, mut quoted) = (String::new(), 0usize, false);
    for c in sig.split(" -> ").next().unwrap().chars() {
        match c {
            '"' => quoted = !quoted,
            _ if quoted => {}
            '(' | '{' | '[' => {
                if depth == 0 {
                    top.push(c);
                }
                depth += 1;
            }
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => top.push(c),
            _ => {}
        }
    }
    top
}

/// The functions a signature documents (`log.info(...), log.warn(...)` is two), as
/// `NAME`, `TABLE.KEY` or `t:METHOD`.
fn sig_names(sig: &str) -> Vec<String> {
    let top = top_level(sig);
    let mut names = Vec::new();
    for part in top.split(',') {
        let part = part.trim();
        if let Some(name) = part.strip_suffix('(').or_else(|| part.strip_suffix('{')) {
            names.push(name.trim().to_string());
        }
    }
    names
}

/// The parameters of a signature's first call: `(name, optional)`, the name `None` for
/// a table written out (`{ venv, python }`).
fn sig_params(sig: &str) -> Vec<(Option<String>, bool)> {
    let open = sig.find(['(', '{']).expect("a signature is a call");
    if sig[open..].starts_with('{') {
        return vec![(None, false)];
    }
    let (mut params, mut depth, mut current) = (Vec::new(), 0, String::new());
    for c in sig[open + 1..].chars() {
        match c {
            '(' | '{' | '[' => depth += 1,
            ')' if depth == 0 => break,
            ')' | '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                params.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    params.push(current);
    params
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .map(
            |p| match p.strip_prefix('[').and_then(|p| p.strip_suffix(']')) {
                Some(inner) => (Some(inner.trim().to_string()), true),
                None if p.starts_with('{') => (None, false),
                None => (Some(p.to_string()), false),
            },
        )
        .collect()
}

/// `text` as `---` comment lines, the way lua-language-server and EmmyLua show a
/// definition's documentation.
fn doc_comment(text: &str) -> String {
    text.trim()
        .lines()
        .map(|l| match l.trim_end() {
            "" => "---\n".to_string(),
            l => format!("--- {l}\n"),
        })
        .collect()
}

/// The `---@meta` definitions of the Lua API, for lua-language-server and EmmyLua
/// (`runbook init` writes them), from the same blocks as the reference: each block's
/// text is its function's documentation, and its `---@` lines its types:
/// - `---@param`, `---@return`, `---@overload`, `---@generic`: the function's, one `---@param` per
///   parameter of the signature, in order (`[opts]` is `opts?`), and a `---@return`
///   when the signature has `->`;
/// - `---@class NAME` and the `---@field` lines after it: a result table's class;
/// - `---@global NAME TYPE TEXT`: a global value that is no function (`params`).
///
/// Each options struct is a class of its fields, typed by their Rust type and parser
/// (or a `/// ---@type` line), documented by their text, and exact: its parent is the
/// table of exactly those fields, so a misspelled option is a type error. Types named
/// `runbook.*` (`options_alias` lines in `options_rs` add aliases: `runbook.Duration`,
/// …) must all be defined.
fn api_types(blocks: &[Block], options_rs: &str) -> String {
    let mut classes = String::new();
    let mut code = String::new();
    let mut defined: Vec<String> = Vec::new();
    let mut used: Vec<(String, String)> = Vec::new();
    let mut tables: Vec<String> = Vec::new();
    let mut uses = |what: &str, line: &str| {
        let mut rest = line;
        while let Some(i) = rest.find("runbook.") {
            let name: String = rest[i..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.')
                .collect();
            used.push((name.trim_end_matches('.').to_string(), what.to_string()));
            rest = &rest[i + name.len()..];
        }
    };
    let mut aliases = String::new();
    for line in options_rs.lines() {
        if let Some(alias) = line.trim().strip_prefix("/// ---@alias ") {
            let (name, rest) = split_type(alias);
            let (ty, text) = split_type(rest);
            writeln!(aliases, "{}---@alias {name} {ty}\n", doc_comment(text)).unwrap();
            defined.push(name.to_string());
        }
    }
    for block in blocks {
        let what = format!("`/// Lua: {}`", block.sig);
        let (mut params, mut fn_notes, mut returns, mut overload) =
            (Vec::new(), Vec::new(), false, false);
        let mut notes = block.notes.iter().peekable();
        while let Some(note) = notes.next() {
            uses(&what, note);
            if let Some(class) = note.strip_prefix("---@class ") {
                let name = class.split([' ', ':']).next().unwrap().to_string();
                writeln!(classes, "{note}").unwrap();
                while let Some(field) = notes.next_if(|n| n.starts_with("---@field ")) {
                    uses(&what, field);
                    writeln!(classes, "{field}").unwrap();
                }
                if name == HANDLE {
                    classes.push_str("local Target = {}\n");
                }
                classes.push('\n');
                defined.push(name);
            } else if let Some(global) = note.strip_prefix("---@global ") {
                let (name, rest) = split_type(global);
                let (ty, text) = split_type(rest);
                writeln!(code, "{}---@type {ty}\n{name} = {{}}\n", doc_comment(text)).unwrap();
            } else if let Some(param) = note.strip_prefix("---@param ") {
                params.push(split_type(param).0.to_string());
                fn_notes.push(note.clone());
            } else if note.starts_with("---@generic ") {
                fn_notes.push(note.clone());
            } else if note.starts_with("---@return ") || note.starts_with("---@overload ") {
                // `never` (it raises) is no value, so no `->` in the signature.
                returns |= note.starts_with("---@return ") && note != "---@return never";
                overload |= note.starts_with("---@overload ");
                fn_notes.push(note.clone());
            } else {
                panic!("{what}: `{note}` is none of the annotations build.rs knows");
            }
        }
        let sig = sig_params(&block.sig);
        assert_eq!(
            sig.len(),
            params.len(),
            "{what}: its `---@param` lines ({params:?}) must name each parameter of the signature"
        );
        for ((name, optional), given) in sig.iter().zip(&params) {
            let plain = given.trim_end_matches('?');
            assert!(
                name.as_deref().is_none_or(|n| n == plain),
                "{what}: `---@param {given}` is not the signature's {name:?}"
            );
            assert!(
                overload || *optional == given.ends_with('?'),
                "{what}: `---@param {given}`: optional in one of signature and annotation only"
            );
        }
        assert_eq!(
            returns,
            block.sig.contains(" -> "),
            "{what}: a signature with `->` has a `---@return` line, and only such a signature"
        );
        for (name, fields) in &block.options {
            let class = options_class(&block.topic, name);
            // A function type's returns run on past a comma: `(fun(): boolean), next?: …`.
            let ty = |f: &OptionField| match f.ty.starts_with("fun(") {
                true => format!("({})", f.ty),
                false => f.ty.clone(),
            };
            let exact: Vec<String> = fields
                .iter()
                .map(|f| format!("{}{}: {}", f.name, if f.required { "" } else { "?" }, ty(f)))
                .collect();
            writeln!(
                classes,
                "---@class {class} : {{ {}, [string]: never }}",
                exact.join(", ")
            )
            .unwrap();
            for f in fields {
                let opt = if f.required { "" } else { "?" };
                let text = f.doc.join(" ");
                writeln!(classes, "---@field {}{opt} {} {text}", f.name, ty(f)).unwrap();
                uses(&format!("option {} of {name}", f.name), &f.ty);
            }
            classes.push('\n');
            defined.push(class);
        }
        let args: Vec<&str> = params.iter().map(|p| p.trim_end_matches('?')).collect();
        for name in sig_names(&block.sig) {
            if let Some((table, _)) = name.split_once('.') {
                if !tables.iter().any(|t| t == table) {
                    let doc = if table == block.topic {
                        doc_comment(&block.summary)
                    } else {
                        String::new()
                    };
                    writeln!(code, "{doc}{table} = {{}}\n").unwrap();
                    tables.push(table.to_string());
                }
            }
            let name = match name.strip_prefix("t:") {
                Some(method) => format!("Target:{method}"),
                None => name,
            };
            writeln!(
                code,
                "{}{}\nfunction {name}({}) end\n",
                doc_comment(&block.text),
                fn_notes.join("\n"),
                args.join(", ")
            )
            .unwrap();
        }
    }
    let missing: Vec<String> = used
        .iter()
        .filter(|(name, _)| !defined.contains(name))
        .map(|(name, what)| format!("{name} (in {what})"))
        .collect();
    assert!(
        missing.is_empty(),
        "types used but not defined by a `---@class` or `/// ---@alias` line: {missing:?}"
    );
    assert!(
        defined.iter().any(|d| d == HANDLE),
        "no `---@class {HANDLE}`"
    );
    format!(
        "---@meta\n\
         -- runbook {}'s Lua API, for lua-language-server and EmmyLua: written by `runbook init`,\n\
         -- which rewrites it, from the reference `runbook docs` prints. Do not edit.\n\n\
         {aliases}{classes}{code}",
        std::env::var("CARGO_PKG_VERSION").unwrap()
    )
}

/// What the typo check (`src/run/lint/typos.rs`) knows of the API besides the live VM, as
/// data: which calls return a target handle or a list of them, and the exact keys of each
/// options table by callee and argument. The same blocks make the reference and the
/// EmmyLua definitions, so the three cannot disagree, and nothing reads text back.
fn api_table(blocks: &[Block]) -> String {
    // Exact classes (no key outside their fields): each options struct, and each
    // `---@class NAME : { …, [string]: never }` an annotation writes out.
    let mut exact: Vec<(String, Vec<String>)> = Vec::new();
    for block in blocks {
        for (name, fields) in &block.options {
            let keys = fields.iter().map(|f| f.name.clone()).collect();
            exact.push((options_class(&block.topic, name), keys));
        }
        let mut notes = block.notes.iter().peekable();
        while let Some(note) = notes.next() {
            let Some(class) = note.strip_prefix("---@class ") else {
                continue;
            };
            let name = class.split([' ', ':']).next().unwrap().to_string();
            let mut keys = Vec::new();
            while let Some(field) = notes.next_if(|n| n.starts_with("---@field ")) {
                let rest = &field["---@field ".len()..];
                keys.push(rest.split([' ', '?']).next().unwrap().to_string());
            }
            if class.contains("[string]: never") {
                exact.push((name, keys));
            }
        }
    }
    let (mut makers, mut lists, mut derivers) = (Vec::new(), Vec::new(), Vec::new());
    let (mut methods, mut fields) = (Vec::new(), Vec::new());
    let mut options = String::new();
    for block in blocks {
        let params: Vec<&str> = block
            .notes
            .iter()
            .filter_map(|n| n.strip_prefix("---@param "))
            .map(|p| split_type(split_type(p).1).0)
            .collect();
        let handle = block.sig.ends_with("-> target");
        let list = block.sig.ends_with("-> { target, … }");
        for name in sig_names(&block.sig) {
            let callee = match name.strip_prefix("t:") {
                Some(method) => {
                    methods.push(method.to_string());
                    if handle {
                        derivers.push(method.to_string());
                    }
                    format!(":{method}")
                }
                None => {
                    if handle {
                        makers.push(name.clone());
                    } else if list {
                        lists.push(name.clone());
                    }
                    name
                }
            };
            for (index, ty) in params.iter().enumerate() {
                if let Some((_, keys)) = exact.iter().find(|(class, _)| class == ty) {
                    writeln!(options, "    ({callee:?}, {index}, &{keys:?}),").unwrap();
                }
            }
        }
    }
    // The handle's fields are the `t.NAME` its blocks mention.
    for block in blocks {
        for (i, _) in block.text.match_indices("`t.") {
            let rest = &block.text[i + 3..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && rest[name.len()..].starts_with('`') && !fields.contains(&name) {
                fields.push(name);
            }
        }
    }
    format!(
        "/// The handle's methods and fields the reference documents (a unit test holds\n\
         /// them to what `lua_api/target.rs` registers).\n\
         #[cfg(test)]\n\
         pub static TARGET_METHODS: &[&str] = &{methods:?};\n\
         #[cfg(test)]\n\
         pub static TARGET_FIELDS: &[&str] = &{fields:?};\n\
         /// Globals that return a target handle (`target`, `ssh`).\n\
         pub static TARGET_MAKERS: &[&str] = &{makers:?};\n\
         /// Globals that return a list of handles (`targets`).\n\
         pub static TARGET_LISTS: &[&str] = &{lists:?};\n\
         /// A handle's methods that return a handle (`pct`, `docker`, …).\n\
         pub static TARGET_DERIVERS: &[&str] = &{derivers:?};\n\
         /// Each options table with exact keys: (callee as called, `cache.clear` or\n\
         /// `:exec` for a handle's method; the argument's index; its keys).\n\
         pub static OPTIONS: &[(&str, usize, &[&str])] = &[\n{options}];\n"
    )
}

/// A script's text as `sh -c` gets it: without comment lines and blank lines, which every
/// byte of a command carries to the target (and a preview of a plain `sh -c` would show).
/// A here-document is kept as it is: its lines are data.
fn sh_body(text: &str) -> String {
    let mut out = Vec::new();
    let mut heredoc: Option<String> = None;
    for line in text.lines() {
        if let Some(end) = &heredoc {
            if line.trim_start_matches('\t') == end {
                heredoc = None;
            }
            out.push(line);
            continue;
        }
        let t = line.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if let Some(at) = line.find("<<") {
            let word = line[at + 2..].trim_start_matches('-').trim_start();
            let word: String = word
                .trim_start_matches(['\'', '"'])
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !word.is_empty() {
                heredoc = Some(word);
            }
        }
        out.push(line);
    }
    assert!(heredoc.is_none(), "a here-document is not ended");
    out.join("\n")
}

/// Every `.sh` under `src/**/sh/`: a script (its header names it: `# script: NAME`,
/// `# for: WHO RUNS IT`, `# made of: PIECE…` in order when it is more than itself, and
/// `# args: NAME…`, what previews call its arguments)
/// or a piece others are made of. Generates one `Script` static per script, named after
/// it (`cache-delete.sh` is `CACHE_DELETE`), `ALL`, `PREVIEWED` (those a primitive runs,
/// which previews name) and `PIECES`.
fn scripts(root: &Path) -> String {
    let mut files = Vec::new();
    for dir in ["src/primitives/sh", "src/targets/sh"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
        for e in fs::read_dir(root.join(dir)).unwrap().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "sh") {
                println!("cargo:rerun-if-changed={}", p.display());
                let file = p.file_name().unwrap().to_string_lossy().into_owned();
                files.push((
                    file,
                    format!("{dir}/{}", p.file_name().unwrap().to_string_lossy()),
                    fs::read_to_string(&p).unwrap(),
                ));
            }
        }
    }
    files.sort();
    for w in files.windows(2) {
        assert!(
            w[0].0 != w[1].0,
            "two scripts named {}: {} and {}",
            w[0].0,
            w[0].1,
            w[1].1
        );
    }
    let text_of = |file: &str| -> &str {
        &files
            .iter()
            .find(|(f, _, _)| f == file)
            .unwrap_or_else(|| panic!("`# made of:` names {file}, which no sh/ folder holds"))
            .2
    };
    let header = |text: &str, key: &str| -> Option<String> {
        text.lines()
            .take_while(|l| l.starts_with('#'))
            .find_map(|l| l.strip_prefix(&format!("# {key}: ")).map(str::to_string))
    };
    let (mut code, mut all, mut previewed, mut pieces) =
        (String::new(), Vec::new(), Vec::new(), Vec::new());
    // By the name people know a script by, so `runbook script` lists them in that order.
    let mut by_name: Vec<_> = files.iter().collect();
    by_name.sort_by_key(|(file, _, text)| header(text, "script").unwrap_or_else(|| file.clone()));
    for (file, source, text) in by_name {
        let Some(name) = header(text, "script") else {
            pieces.push(format!("({file:?}, {:?})", sh_body(text)));
            continue;
        };
        let used_by =
            header(text, "for").unwrap_or_else(|| panic!("{source}: `# for:` is missing"));
        let parts: Vec<String> = header(text, "made of")
            .map(|p| p.split_whitespace().map(str::to_string).collect())
            .unwrap_or_else(|| vec![file.clone()]);
        assert!(
            parts.contains(file),
            "{source}: `# made of:` leaves out {file} itself"
        );
        let body: Vec<String> = parts.iter().map(|p| sh_body(text_of(p))).collect();
        // `# args: NAME…`: what previews call each argument (`timeout_ms=60000`); a last
        // name ending in `...` stands for the rest, shown as they are.
        let args: Vec<String> = header(text, "args")
            .map(|a| a.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        for (i, a) in args.iter().enumerate() {
            let plain = a.strip_suffix("...").unwrap_or(a);
            assert!(
                !plain.is_empty()
                    && plain
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                    && (i + 1 == args.len() || !a.ends_with("...")),
                "{source}: `# args:` names are lower_case words, only the last one may end in ..."
            );
        }
        let ident = name
            .trim_end_matches(".sh")
            .replace('-', "_")
            .to_uppercase();
        writeln!(
            code,
            "/// `{name}`, from `{source}`.\npub static {ident}: Script = Script::new({name:?}, {used_by:?}, {source:?}, &{parts:?}, &{args:?}, {:?});",
            body.join("\n")
        )
        .unwrap();
        all.push(format!("&{ident}"));
        if source.starts_with("src/primitives/") {
            previewed.push(format!("&{ident}"));
        }
    }
    writeln!(
        code,
        "/// Every script.\npub static ALL: &[&Script] = &[{}];",
        all.join(", ")
    )
    .unwrap();
    writeln!(code, "/// The scripts primitives run (`Cmd::script`), which previews show by name.\npub static PREVIEWED: &[&Script] = &[{}];", previewed.join(", ")).unwrap();
    writeln!(code, "/// The pieces scripts are made of (`# made of:`), as they are sent.\n#[cfg(test)]\npub static PIECES: &[(&str, &str)] = &[{}];", pieces.join(", ")).unwrap();
    code
}
