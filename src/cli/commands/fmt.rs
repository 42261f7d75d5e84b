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
//! - Every file is formatted in memory first: one that does not parse, that StyLua
//!   cannot check (see `unverifiable_number`), or whose settings file does not parse is
//!   an error naming `file:line:column`, and is left as it is; the others go on, and the
//!   exit is 2. Without `--check`, the files that change are rewritten (never through a
//!   link: `fsx`) and named on stdout; with `--check`, nothing is written, each
//!   unformatted file is named with a diff of what formatting would change, and the
//!   exit is 1.

use crate::base::error::{Error, Result};
use crate::base::fsx::{self, Mode, Replace};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const CONFIG_NAMES: [&str; 2] = ["stylua.toml", ".stylua.toml"];

pub fn fmt(paths: &[PathBuf], check: bool) -> Result<()> {
    let files = lua_files(paths)?;
    let mut configs = Configs::default();
    let mut changed: Vec<(&Found, String, String)> = Vec::new();
    let mut problems = Vec::new();
    for f in &files {
        let shown = f.path.display();
        let text = match std::fs::read_to_string(&f.path) {
            Ok(t) => t,
            Err(e) => {
                problems.push(format!("{shown}: {e}"));
                continue;
            }
        };
        let config = match configs.for_file(&f.path) {
            Ok(c) => c,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        match format(&text, config) {
            Ok(out) if out != text => changed.push((f, text, out)),
            Ok(_) => {}
            Err(errors) => {
                for e in errors {
                    problems.push(format!("{shown}:{e}"));
                }
            }
        }
    }
    // A file that cannot be formatted is named (with its line) and left as it is; the
    // others are formatted all the same, and the exit is 2.
    if check {
        for (f, old, new) in &changed {
            let name = f.path.display().to_string();
            println!("would reformat {name}");
            let diff = similar::TextDiff::from_lines(old, new);
            print!(
                "{}",
                diff.unified_diff().context_radius(2).header(&name, &name)
            );
        }
    } else {
        for (f, _, new) in &changed {
            // Never through a link (a cloned repository can ship one to ~/.bashrc): a new
            // file beside it, renamed over it, keeping its permissions.
            match fsx::write(
                &f.root,
                &f.rel,
                new.as_bytes(),
                Mode::Usual,
                Replace::Yes,
                false,
            ) {
                Ok(()) => println!("{}", f.path.display()),
                Err(e) => problems.push(e.to_string()),
            }
        }
    }
    if !problems.is_empty() {
        return Err(Error::Format(problems.join("\n")));
    }
    if check && !changed.is_empty() {
        return Err(Error::Unformatted {
            files: changed.len(),
            of: files.len(),
        });
    }
    Ok(())
}

/// A file to format: `path` as it is named to the user, and the same file as `rel` below
/// `root` (the directory walked, or the one that holds a file named on its own), which
/// is where its write may not follow a link.
struct Found {
    path: PathBuf,
    root: PathBuf,
    rel: PathBuf,
}

/// The files `paths` name: files as given, directories walked for `*.lua`, sorted.
fn lua_files(paths: &[PathBuf]) -> Result<Vec<Found>> {
    let here = [PathBuf::from(".")];
    let paths = if paths.is_empty() { &here[..] } else { paths };
    let mut out: Vec<Found> = Vec::new();
    for p in paths {
        let meta =
            std::fs::metadata(p).map_err(|e| Error::Usage(format!("fmt {}: {e}", p.display())))?;
        if !meta.is_dir() {
            let root = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let rel = PathBuf::from(p.file_name().unwrap_or(p.as_os_str()));
            out.push(Found {
                path: p.clone(),
                root,
                rel,
            });
            continue;
        }
        let mut found = Vec::new();
        for entry in ignore::WalkBuilder::new(p).build() {
            let entry = entry.map_err(|e| Error::Usage(format!("fmt {}: {e}", p.display())))?;
            let path = entry.path();
            // A link is not a file here (the walk does not follow links): one to a file
            // outside is left alone.
            if entry.file_type().is_some_and(|t| t.is_file())
                && path.extension().is_some_and(|x| x == "lua")
            {
                let rel = path.strip_prefix(p).unwrap_or(path).to_path_buf();
                found.push(Found {
                    // `./x.lua` reads better as `x.lua`.
                    path: path.strip_prefix(".").unwrap_or(path).to_path_buf(),
                    root: p.clone(),
                    rel,
                });
            }
        }
        found.sort_by(|a, b| a.path.cmp(&b.path));
        out.extend(found);
    }
    out.dedup_by(|a, b| a.path == b.path);
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
    if let Some(at) = unverifiable_number(text) {
        return Err(vec![at]);
    }
    let formatted = guarded(|| {
        stylua_lib::format_code(text, config, None, stylua_lib::OutputVerification::Full)
    })
    .map_err(|said| {
        vec![format!(
            " StyLua failed on this file ({said}); it was left as it is"
        )]
    })?;
    formatted.map_err(|e| match e {
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
    })
}

/// `LINE:COLUMN: …` for the first number literal StyLua's output check cannot read, if
/// there is one. That check (`OutputVerification::Full`, which holds the formatted file
/// to mean what the original meant) reads each number as a decimal `f64` or a hex `i64`
/// and panics on anything else: hex floats (`0x1p-2`, `0x.8`) and hex integers past
/// `i64` (`0xffffffffffffffff`), which Lua 5.4 (and `runbook check`) accept. Without
/// the check a file is not formatted at all, so such a file is named and left alone.
fn unverifiable_number(text: &str) -> Option<String> {
    use full_moon::tokenizer::{Lexer, LexerResult, TokenType};
    let tokens = match Lexer::new(text, full_moon::LuaVersion::lua54()).collect() {
        LexerResult::Ok(t) | LexerResult::Recovered(t, _) => t,
        // What does not even tokenize is StyLua's parse error to report.
        LexerResult::Fatal(_) => return None,
    };
    tokens.iter().find_map(|t| {
        let TokenType::Number { text } = t.token_type() else {
            return None;
        };
        let readable = text.parse::<f64>().is_ok()
            || text
                .get(2..)
                .is_some_and(|hex| i64::from_str_radix(hex, 16).is_ok());
        (!readable).then(|| {
            let at = t.start_position();
            format!(
                "{}:{}: the number `{text}` (a hex float, or a hex integer past 64 bits) is one StyLua cannot check its output for; the file was left as it is (write the number in decimal to format it)",
                at.line(),
                at.character()
            )
        })
    })
}

/// `f()`, or what its panic said. The last line of defence around StyLua: a panic in it
/// (a bug there, on a file it does not expect) must name the file and let the others be
/// formatted, not end runbook with a backtrace. The panic hook is silenced meanwhile, so
/// nothing of the panic reaches the terminal but what the caller says of it.
fn guarded<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    use std::sync::{Arc, Mutex};
    let said: Arc<Mutex<String>> = Arc::default();
    let keep = said.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_string());
        *keep.lock().unwrap_or_else(|e| e.into_inner()) = text;
    }));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(previous);
    result.map_err(|_| {
        let text = said.lock().unwrap_or_else(|e| e.into_inner()).clone();
        format!("internal error: {text}")
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
    toml::from_str(include_str!("../../../stylua.toml")).expect("the shipped stylua.toml is valid")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_stylua_cannot_check_are_found_with_their_line() {
        for ok in [
            "1",
            "1.5",
            ".5",
            "1e-3",
            "0xff",
            "0XFF",
            "0x7fffffffffffffff",
            "3.",
        ] {
            assert_eq!(
                unverifiable_number(&format!("local x = {ok}\n")),
                None,
                "{ok}"
            );
        }
        for bad in ["0x1p-2", "0x.8", "0xA.8p0", "0xffffffffffffffff"] {
            let said = unverifiable_number(&format!("local y = 1\nlocal x = {bad}\n"));
            let said = said.unwrap_or_else(|| panic!("{bad} is found"));
            assert!(said.starts_with("2:11: the number `"), "{said}");
        }
    }

    #[test]
    fn a_panic_is_caught_and_said_without_the_hook() {
        let got = guarded(|| -> u32 { panic!("boom at {}", 3) });
        assert_eq!(got, Err("internal error: boom at 3".to_string()));
        assert_eq!(guarded(|| 7), Ok(7));
    }
}
