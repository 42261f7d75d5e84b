//! `runbook.toml`: what a team decides once for every run from its repository: who may
//! approve plans and how many must (`[policy]`), and where run records are shipped as
//! they happen (`[[sink]]`). Found as `./runbook.toml`, or the file `$RUNBOOK_CONFIG`
//! names; none is the same as an empty one.
//!
//! ```toml
//! [policy]
//! allowed_signers = "allowed_signers"   # OpenSSH's format, relative to this file
//! approvers = 1                         # distinct approvers besides the author, every plan
//!
//! [[policy.rule]]                       # more for some plans: the most any rule asks wins
//! group = "gpu"                         # a change on a target of this inventory group
//! deletes = true                        # ... that deletes, rebuilds or restores something
//! approvers = 2
//!
//! [[sink]]
//! kind = "syslog"                       # RFC 5424 over TCP
//! address = "127.0.0.1:6514"
//! ```

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Project {
    #[serde(default)]
    pub policy: Option<Policy>,
    /// Where events are shipped (see `run/sinks/`).
    #[serde(default)]
    #[allow(dead_code)] // read by the shipping sinks (issue 29.4), being built
    pub sink: Vec<toml::Table>,
    /// The file it was read from, for messages and relative paths.
    #[serde(skip)]
    pub path: Option<PathBuf>,
}

/// `[policy]`: plans must be signed by their author and approved before `apply`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// OpenSSH's allowed-signers file (`ssh-keygen(1)`, ALLOWED SIGNERS): who is who.
    pub allowed_signers: PathBuf,
    /// Distinct approvers other than the author every plan needs (default 1).
    #[serde(default = "one")]
    pub approvers: u32,
    /// How long an approval counts when `approve` is given no `--ttl` (default 24h).
    pub ttl: Option<String>,
    #[serde(default)]
    pub rule: Vec<Rule>,
}

fn one() -> u32 {
    1
}

/// `[[policy.rule]]`: plans it matches need `approvers` at least. A rule with neither
/// `group` nor `deletes` matches every plan.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// A change on a target of this inventory group.
    pub group: Option<String>,
    /// `true`: only a change that deletes, rebuilds or restores something (`[deletes]`).
    #[serde(default)]
    pub deletes: bool,
    pub approvers: u32,
}

impl Project {
    /// `./runbook.toml` or `$RUNBOOK_CONFIG`; the default when there is neither. A file
    /// that cannot be read or parsed is an error naming it (and the line).
    pub fn load() -> Result<Project, String> {
        let named = std::env::var_os("RUNBOOK_CONFIG").filter(|v| !v.is_empty());
        let path = match &named {
            Some(p) => PathBuf::from(p),
            None => PathBuf::from("runbook.toml"),
        };
        if named.is_none() && !path.is_file() {
            return Ok(Project::default());
        }
        Project::read(&path)
    }

    pub fn read(path: &Path) -> Result<Project, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut project: Project = toml::from_str(&text).map_err(|e| {
            let at = e
                .span()
                .map(|s| text[..s.start].matches('\n').count() + 1)
                .map_or(String::new(), |l| format!(":{l}"));
            format!("{}{at}: {}", path.display(), e.message().trim())
        })?;
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if let Some(policy) = &mut project.policy {
            if policy.allowed_signers.is_relative() {
                let dir = path.parent().unwrap_or(Path::new("."));
                policy.allowed_signers = dir.join(&policy.allowed_signers);
            }
        }
        project.path = Some(path);
        Ok(project)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_policy_and_names_a_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("runbook.toml");
        std::fs::write(
            &p,
            "[policy]\nallowed_signers = \"signers\"\napprovers = 1\n\n[[policy.rule]]\ngroup = \"gpu\"\ndeletes = true\napprovers = 2\n",
        )
        .unwrap();
        let project = Project::read(&p).unwrap();
        let policy = project.policy.unwrap();
        assert!(policy.allowed_signers.ends_with("signers"));
        assert!(policy.allowed_signers.is_absolute());
        assert_eq!(policy.rule[0].approvers, 2);
        std::fs::write(&p, "[policy]\nallowed_signers = \"s\"\naprovers = 2\n").unwrap();
        let err = Project::read(&p).unwrap_err();
        assert!(err.contains("runbook.toml:3"), "{err}");
        assert!(err.contains("aprovers"), "{err}");
    }
}
