//! `runbook script [NAME]`: the scripts runbook runs on targets, by the names previews
//! show (`venv-build.sh ARG…`), so a preview line runs by hand as
//! `sh -c "$(runbook script venv-build)" sh ARG…`.

use crate::base::error::{Error, Result};
use crate::base::script::{Script, ALL, PREVIEWED as SCRIPTS};
use std::io::Write;

pub fn script(name: Option<&str>) -> Result<()> {
    let Some(name) = name else {
        print!("{}", listing());
        return Ok(());
    };
    let Some(found) = find(name) else {
        let names: Vec<&str> = SCRIPTS.iter().map(|s| s.short_name()).collect();
        return Err(Error::Usage(format!(
            "no script '{name}'{}; scripts: {}",
            suggestion(name),
            names.join(", ")
        )));
    };
    // The body exactly as `sh -c` gets it (so `| sha256sum` gives the sha256 of the
    // record's `script` event); `$(…)` drops its last newline, which changes nothing.
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(found.body.as_bytes());
    let _ = out.flush();
    Ok(())
}

/// `venv-build`, `venv-build.sh` and the file's own spelling `venv_build` alike. Any
/// script is printed, the listing's and the ones targets run around every command
/// (`session`, `with-env`, …), which previews never name.
fn find(name: &str) -> Option<&'static Script> {
    let wanted = normal(name);
    ALL.iter().copied().find(|s| s.short_name() == wanted)
}

fn normal(name: &str) -> String {
    let name = name.trim();
    name.strip_suffix(".sh").unwrap_or(name).replace('_', "-")
}

/// A typo, or the file's name without the primitive in front (`delete` for
/// `cache-delete`).
fn suggestion(name: &str) -> String {
    let wanted = normal(name);
    let names = SCRIPTS.iter().map(|s| s.short_name());
    let by_part: Vec<&str> = names
        .clone()
        .filter(|n| n.ends_with(&format!("-{wanted}")) || n.starts_with(&format!("{wanted}-")))
        .collect();
    match by_part.as_slice() {
        [one] => format!("; did you mean '{one}'?"),
        _ => crate::base::suggest::hint(&wanted, names),
    }
}

fn listing() -> String {
    let width = SCRIPTS.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let used = SCRIPTS.iter().map(|s| s.used_by.len()).max().unwrap_or(0);
    let mut out = format!("{:<width$}  {:<used$}  SOURCE\n", "SCRIPT", "RUN BY");
    for s in SCRIPTS {
        out.push_str(&format!(
            "{:<width$}  {:<used$}  {}\n",
            s.name, s.used_by, s.source
        ));
        if !s.args.is_empty() {
            out.push_str(&format!("{:<width$}  args: {}\n", "", s.args.join(" ")));
        }
    }
    out.push_str(
        "\n`runbook script NAME` prints one; a preview's `NAME.sh ARG=VALUE…` runs by hand as\n\
         sh -c \"$(runbook script NAME)\" sh VALUE…, the values in the order shown\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each script is built from its own `.sh` file (the rest is shared pieces), every
    /// name is unique, and the names are what previews show.
    #[test]
    fn every_script_is_named_once_and_holds_its_source() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut names = std::collections::HashSet::new();
        for s in SCRIPTS {
            assert!(names.insert(s.name), "{} twice", s.name);
            assert!(
                s.name.ends_with(".sh") && !s.name.contains('_'),
                "{}",
                s.name
            );
            let text = std::fs::read_to_string(root.join(s.source)).unwrap();
            let code = text.lines().find(|l| !l.is_empty() && !l.starts_with('#'));
            assert!(
                s.body.contains(code.unwrap()),
                "{} lacks {}",
                s.name,
                s.source
            );
            assert_eq!(s.sha256().len(), 64);
        }
    }

    #[test]
    fn names_are_found_in_every_spelling_and_typos_get_a_hint() {
        for n in [
            "venv-build",
            "venv-build.sh",
            "venv_build",
            " venv_build.sh",
        ] {
            assert_eq!(find(n).map(|s| s.name), Some("venv-build.sh"), "{n}");
        }
        assert!(find("venv").is_none());
        assert_eq!(suggestion("venv-biuld"), "; did you mean 'venv-build'?");
        assert_eq!(suggestion("delete"), "; did you mean 'cache-delete'?");
        assert_eq!(
            suggestion("move_aside.sh"),
            "; did you mean 'cache-move-aside'?"
        );
        assert_eq!(suggestion("zzzzzz"), "");
        let list = listing();
        assert!(
            list.lines().any(|l| l.split_whitespace().eq([
                "venv-build.sh",
                "venv.build",
                "src/primitives/sh/venv_build.sh"
            ])),
            "{list}"
        );
    }
}
