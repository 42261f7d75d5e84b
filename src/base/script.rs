//! runbook's own shell scripts (the `sh -c SCRIPT sh ARG…` a primitive or a target runs
//! on a target), each with a name people see instead of its text.
//!
//! There is one way in: every `.sh` under `src/primitives/sh/` and `src/targets/sh/` is
//! read by build.rs, which makes each script (a file whose header says `# script: NAME`)
//! a static here, named after it (`cache-delete.sh` is [`CACHE_DELETE`]), its body the
//! files its `# made of:` line names, comments left out. No Rust file includes a `.sh`.
//!
//! The argv that runs carries the whole body, byte for byte as composed from the `.sh`
//! files; every rendering for people (the preview, `runbook log`, error messages) shows
//! `NAME ARG…` instead, and `runbook script NAME` prints the body, so a preview line runs
//! by hand as `sh -c "$(runbook script NAME)" sh ARG…`. Machine readers get the body once
//! per run, in a `script` event keyed by its sha256 (see docs/EVENTS.md).

use sha2::{Digest, Sha256};
use std::sync::OnceLock;

pub struct Script {
    /// What previews show in place of `sh -c BODY sh`, e.g. `venv-build.sh`.
    pub name: &'static str,
    /// The primitive(s) that run it, for `runbook script`.
    pub used_by: &'static str,
    /// The `.sh` file it is made from (relative to the repository), shared pieces aside.
    pub source: &'static str,
    /// The `.sh` files its body is made of, in order (its header's `# made of:`); only
    /// the tests read it, to check each body against its files.
    #[cfg_attr(not(test), allow(dead_code))]
    pub parts: &'static [&'static str],
    /// What previews call its arguments, in order (its header's `# args:`), so that a
    /// bare `''` or `60000` reads `pid=''`, `timeout_ms=60000`; a last name ending in
    /// `...` stands for the rest, shown as they are. Empty: shown as they are.
    pub args: &'static [&'static str],
    /// The exact text `sh -c` gets: the parts without their comments, joined at compile
    /// time (build.rs).
    pub body: &'static str,
    sha256: OnceLock<String>,
}

impl Script {
    pub const fn new(
        name: &'static str,
        used_by: &'static str,
        source: &'static str,
        parts: &'static [&'static str],
        args: &'static [&'static str],
        body: &'static str,
    ) -> Script {
        Script {
            name,
            used_by,
            source,
            parts,
            args,
            body,
            sha256: OnceLock::new(),
        }
    }

    /// Hex sha256 of the body: what `runbook script NAME | sha256sum` prints.
    pub fn sha256(&self) -> &str {
        self.sha256
            .get_or_init(|| format!("{:x}", Sha256::digest(self.body.as_bytes())))
    }

    /// Its arguments as previews show them: `NAME=VALUE` (the value quoted as
    /// `quote::quote_word` does) for each named one, the rest as they are.
    pub fn shown_args(&self, args: &[std::ffi::OsString]) -> Vec<String> {
        let mut out = Vec::with_capacity(args.len());
        for (i, value) in args.iter().enumerate() {
            let word = crate::base::quote::quote_word(value);
            match self.args.get(i) {
                Some(name) if !name.ends_with("...") => out.push(format!("{name}={word}")),
                _ => out.push(word),
            }
        }
        out
    }

    /// The name without `.sh`, as `runbook script` takes it.
    pub fn short_name(&self) -> &'static str {
        self.name.strip_suffix(".sh").unwrap_or(self.name)
    }
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Script({})", self.name)
    }
}

include!(concat!(env!("OUT_DIR"), "/scripts.rs"));

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `.sh` file is a script or a piece of one, and every body, as `sh -c` gets
    /// it, parses under each shell a target may have (scripts/test checks the files
    /// themselves; this checks what is sent: pieces joined, comments gone).
    #[test]
    fn every_script_as_sent_parses_under_every_shell() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        for dir in ["src/primitives/sh", "src/targets/sh"] {
            for e in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.ends_with(".sh") {
                    files.push(name);
                }
            }
        }
        for file in &files {
            let used = ALL.iter().any(|s| s.parts.contains(&file.as_str()));
            assert!(
                used,
                "{file} is in no script: add `# script:` or `# made of:`"
            );
        }
        for (piece, _) in PIECES {
            assert!(files.iter().any(|f| f == piece), "{piece}");
        }
        let shells = crate::testing::shells();
        for s in ALL {
            assert!(
                !s.body.contains("# script:"),
                "{}: its header is sent",
                s.name
            );
            for sh in &shells {
                // `-n`: read, do not run.
                let out = std::process::Command::new(&sh.argv()[0])
                    .args(&sh.argv()[1..])
                    .args(["-n", "-c", s.body])
                    .env("PATH", sh.path())
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{} under {}: {}",
                    s.name,
                    sh.name,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}
