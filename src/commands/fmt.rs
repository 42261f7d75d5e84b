//! `runbook fmt [--check] [PATH…]`: formats Lua files with StyLua (the `stylua` crate,
//! as a library), the way `terraform fmt` formats `.tf` files.
//!
//! - A PATH that is a file is formatted whatever its name; a directory is walked for
//!   `*.lua`, recursively, skipping hidden entries and what `.gitignore`/`.ignore`
//!   exclude (the `ignore` crate, as StyLua's own CLI walks). No PATH: the current
//!   directory.
//! - Each file's settings come from the nearest `stylua.toml` or `.stylua.toml` in its
//!   directory or a parent (StyLua's `--search-parent-directories`), else StyLua's
//!   defaults. The syntax is always Lua 5.4: that is what runbooks run as.
//! - Every file is formatted in memory first: one that does not parse (or a settings
//!   file that does not) is an error naming `file:line:column`, exit 2, and nothing is
//!   written at all. Then, without `--check`, the files that change are rewritten and
//!   named on stdout; with `--check`, nothing is written, each unformatted file is named
//!   with a diff of what formatting would change, and the exit is 1.

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const CONFIG_NAMES: [&str; 2] = ["stylua.toml", ".stylua.toml"];

pub fn fmt(paths: &[PathBuf], check: bool) -> Result<()> {
    let files = lua_files(paths)?;
    let mut configs = Configs::default();
    let mut changed: Vec<(PathBuf, String, String)> = Vec::new();
    let mut problems = Vec::new();
    for f in &files {
        let text = match std::fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => {
                problems.push(format!("{}: {e}", f.display()));
                continue;
            }
        };
        let config = match configs.for_file(f) {
            Ok(c) => c,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        match format(&text, config) {
            Ok(out) if out != text => changed.push((f.clone(), text, out)),
            Ok(_) => {}
            Err(errors) => {
                for e in errors {
                    problems.push(format!("{}:{e}", f.display()));
                }
            }
        }
    }
    if !problems.is_empty() {
        return Err(Error::Format(problems.join("\n")));
    }
    if check {
        for (f, old, new) in &changed {
            let name = f.display().to_string();
            println!("would reformat {name}");
            let diff = similar::TextDiff::from_lines(old, new);
            print!(
                "{}",
                diff.unified_diff().context_radius(2).header(&name, &name)
            );
        }
        if changed.is_empty() {
            return Ok(());
        }
        return Err(Error::Unformatted {
            files: changed.len(),
            of: files.len(),
        });
    }
    for (f, _, new) in &changed {
        std::fs::write(f, new).map_err(|e| Error::io(f, e))?;
        println!("{}", f.display());
    }
    Ok(())
}

/// The files `paths` name: files as given, directories walked for `*.lua`, sorted.
fn lua_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let here = [PathBuf::from(".")];
    let paths = if paths.is_empty() { &here[..] } else { paths };
    let mut out = Vec::new();
    for p in paths {
        let meta =
            std::fs::metadata(p).map_err(|e| Error::Usage(format!("fmt {}: {e}", p.display())))?;
        if !meta.is_dir() {
            out.push(p.clone());
            continue;
        }
        let mut found = Vec::new();
        for entry in ignore::WalkBuilder::new(p).build() {
            let entry = entry.map_err(|e| Error::Usage(format!("fmt {}: {e}", p.display())))?;
            let path = entry.path();
            if entry.file_type().is_some_and(|t| t.is_file())
                && path.extension().is_some_and(|x| x == "lua")
            {
                // `./x.lua` reads better as `x.lua`.
                found.push(path.strip_prefix(".").unwrap_or(path).to_path_buf());
            }
        }
        found.sort();
        out.extend(found);
    }
    out.dedup();
    Ok(out)
}

/// The formatted text, or `LINE:COLUMN: what is wrong` for each error when `text` does
/// not parse.
///
/// StyLua's output is not always its own fixed point (a call it breaks over lines can
/// be laid out differently when formatted again), and `fmt --check` right after `fmt`
/// must pass: so it formats again until nothing changes, a few times at most.
fn format(text: &str, config: stylua_lib::Config) -> std::result::Result<String, Vec<String>> {
    let mut out = format_once(text, config)?;
    for _ in 0..4 {
        let again = format_once(&out, config)?;
        if again == out {
            break;
        }
        out = again;
    }
    Ok(out)
}

fn format_once(text: &str, config: stylua_lib::Config) -> std::result::Result<String, Vec<String>> {
    stylua_lib::format_code(text, config, None, stylua_lib::OutputVerification::Full).map_err(|e| {
        match e {
            stylua_lib::Error::ParseError(errors) => errors
                .iter()
                .map(|e| {
                    let (start, _) = e.range();
                    format!(
                        "{}:{}: {}",
                        start.line(),
                        start.character(),
                        e.error_message()
                    )
                })
                .collect(),
            other => vec![format!(" {other}")],
        }
    })
}

/// The settings of each directory, found once.
#[derive(Default)]
struct Configs {
    by_dir: HashMap<PathBuf, stylua_lib::Config>,
}

impl Configs {
    fn for_file(&mut self, file: &Path) -> std::result::Result<stylua_lib::Config, String> {
        let abs = std::path::absolute(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let dir = abs.parent().unwrap_or(Path::new("/")).to_path_buf();
        if let Some(c) = self.by_dir.get(&dir) {
            return Ok(*c);
        }
        let mut config = runbook_style();
        let mut at = Some(dir.as_path());
        'search: while let Some(d) = at {
            for name in CONFIG_NAMES {
                let candidate = d.join(name);
                if candidate.is_file() {
                    // Named as the user would: relative to where runbook runs, if inside.
                    let cwd = std::env::current_dir().unwrap_or_default();
                    let shown = candidate.strip_prefix(&cwd).unwrap_or(&candidate);
                    config = read_config(&candidate, shown)?;
                    break 'search;
                }
            }
            at = d.parent();
        }
        config.syntax = stylua_lib::LuaVersion::Lua54;
        self.by_dir.insert(dir, config);
        Ok(config)
    }
}

/// The style with no settings file: runbook's own (the repository's `stylua.toml`, which
/// the shipped runbooks and `runbook new`'s skeletons are written in), not StyLua's
/// defaults (tabs, `runbook({ … })`), which would rewrite every line of a new runbook.
fn runbook_style() -> stylua_lib::Config {
    toml::from_str(include_str!("../../stylua.toml")).expect("the shipped stylua.toml is valid")
}

fn read_config(path: &Path, shown: &Path) -> std::result::Result<stylua_lib::Config, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", shown.display()))?;
    toml::from_str(&text).map_err(|e: toml::de::Error| {
        let at = e
            .span()
            .map(|s| format!(":{}", text[..s.start].matches('\n').count() + 1))
            .unwrap_or_default();
        format!(
            "{}{at}: not StyLua settings: {}",
            shown.display(),
            e.message()
        )
    })
}
