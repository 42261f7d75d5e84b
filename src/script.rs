//! runbook's own shell scripts (the `sh -c SCRIPT sh ARG…` a primitive runs on a target),
//! each with a name people see instead of its text.
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
    /// The exact text `sh -c` gets: the `.sh` files, concatenated once at compile time.
    pub body: &'static str,
    sha256: OnceLock<String>,
}

impl Script {
    pub const fn new(
        name: &'static str,
        used_by: &'static str,
        source: &'static str,
        body: &'static str,
    ) -> Script {
        Script {
            name,
            used_by,
            source,
            body,
            sha256: OnceLock::new(),
        }
    }

    /// Hex sha256 of the body: what `runbook script NAME | sha256sum` prints.
    pub fn sha256(&self) -> &str {
        self.sha256
            .get_or_init(|| format!("{:x}", Sha256::digest(self.body.as_bytes())))
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
