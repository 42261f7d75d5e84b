//! What a plan file holds: its changes, reads, targets, params, steps and modules, each
//! a serde type of the plan format (`FORMAT`), and the salted digests they carry.

use super::*;

use crate::base::hex::hex;
use crate::targets::identity::Identity;
use crate::targets::{Hop, Target};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::time::SystemTime;

/// The random salt of one plan's digests (hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Salt(pub(super) String);

impl Salt {
    pub fn random() -> Salt {
        use std::io::Read;
        let mut bytes = [0u8; 16];
        let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
        if read.is_err() {
            // No /dev/urandom (a chroot without /dev): still different per plan.
            let mut h = Sha256::new();
            h.update(format!("{:?}", SystemTime::now()));
            h.update(std::process::id().to_le_bytes());
            h.update((&bytes as *const _ as usize).to_le_bytes());
            bytes.copy_from_slice(&h.finalize()[..16]);
        }
        Salt(hex(&bytes))
    }

    /// `sha256(SALT NUL BYTES)`, hex.
    pub fn digest(&self, bytes: &[u8]) -> String {
        let mut h = Sha256::new();
        h.update(self.0.as_bytes());
        h.update([0u8]);
        h.update(bytes);
        hex(&h.finalize())
    }

    /// The digest of a command's result: its exit code and its standard output.
    pub(super) fn result(&self, code: Option<i32>, stdout: &[u8]) -> String {
        let code = code.map_or("signal".to_string(), |c| c.to_string());
        self.digest(&[code.as_bytes(), b"\n", stdout].concat())
    }
}

/// sha256 of a file's bytes, hex: how a plan file is named in records and `history`.
pub fn file_sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// One change as planned (or as about to run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The step's index (0-based) and name.
    pub step: usize,
    pub step_name: String,
    /// The target as the runbook names it, and where that is (`Target::destination`:
    /// `user@host:port` as ssh resolves it, then the container).
    pub target: String,
    pub destination: String,
    /// What it does, with the facts the reads found (sizes, files, packages).
    pub summary: String,
    /// The command as previews show it (runbook's scripts by name).
    pub shown: String,
    /// The exact command line the target runs; secrets masked.
    pub command: String,
    pub command_sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin_sha256: Option<String>,
    /// Deletes, rebuilds or restores something.
    pub destructive: bool,
    /// The holes in the command, in order: each stands for the output of the change of
    /// that index (0-based), known only after apply (`known_after.rs`). The command reads
    /// `(known after apply)` there, and its digests are over the command with a marker
    /// naming that change in each hole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known_after: Vec<usize>,
    /// May delete: runbook cannot tell from its words (`base/classify/`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub may_delete: bool,
    /// Planned inside a `parallel()`: the changes of one run of such changes in a step
    /// run in any order, and are shown so; every other change of a step runs in the
    /// plan's order.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parallel: bool,
    /// Its command text was masked when the plan was made (a secret in it is `***`): the
    /// only change whose text cannot be checked against its digest from the file alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub masked: bool,
    /// What it does to a file's content (`file.put`, `file.template`): a unified diff of
    /// the file as the plan read it and as it will be, or a line of both sizes and
    /// digests (a binary or huge file); secrets masked. Held as the summary is: the real
    /// change's must be this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

impl Change {
    pub(super) fn same(&self, other: &Change) -> bool {
        self.step == other.step && self.same_but_step(other)
    }

    /// The same command on the same target with the same input, in whatever step.
    pub(super) fn same_but_step(&self, other: &Change) -> bool {
        self.target == other.target
            && self.destination == other.destination
            && self.command_sha256 == other.command_sha256
            && self.stdin_sha256 == other.stdin_sha256
    }

    /// Whether its text was masked (a secret in it is `***`), so that its digest, of the
    /// real text, cannot be checked against it from the file alone. The recording says
    /// so; a `***` alone (typed into a command) is checked as any text.
    pub(super) fn masked(&self) -> bool {
        self.masked && self.command.contains(crate::base::secrets::MASK)
    }

    /// The command text as its digest is over: for a template, each `(known after
    /// apply)` as the marker of the change `known_after` names for it, in order (the
    /// recording put them there in that order). A count that does not match is a text
    /// that is not the template's, and so is not its digest's either.
    pub(super) fn digested_command(&self) -> Vec<u8> {
        if self.known_after.is_empty() {
            return self.command.as_bytes().to_vec();
        }
        let parts: Vec<&str> = self
            .command
            .split(crate::actions::known_after::SHOWN)
            .collect();
        if parts.len() != self.known_after.len() + 1 {
            return self.command.as_bytes().to_vec();
        }
        let mut out = Vec::new();
        for (k, part) in parts.iter().enumerate() {
            out.extend_from_slice(part.as_bytes());
            if let Some(&n) = self.known_after.get(k) {
                out.extend(crate::actions::known_after::marker(n));
            }
        }
        out
    }

    /// The first field of this planned change that a person reads and that is not what
    /// the real change `seen` is: (field, as planned, as it is). Texts are compared as
    /// the plan holds them, masked.
    ///
    /// A template (`known_after`) reads `(known after apply)` where the real change has
    /// the output of an earlier change: `holes` are those outputs (in every form a hole
    /// may hold, longest first), read back as `(known after apply)` in the real texts
    /// before they are compared. An output that also stands where no hole is reads as
    /// one too, and the texts then differ: the safe side.
    pub(super) fn misread(
        &self,
        seen: &Seen,
        mask: &dyn Fn(&str) -> String,
        holes: &[Vec<u8>],
    ) -> Option<Misread> {
        let as_planned = |text: &str| {
            let mut text = mask(text);
            if !self.known_after.is_empty() {
                for hole in holes {
                    let hole = String::from_utf8_lossy(hole);
                    if !hole.is_empty() {
                        text = text.replace(&*hole, crate::actions::known_after::SHOWN);
                    }
                }
            }
            text
        };
        let texts = [
            ("target", &self.target, seen.target.to_string()),
            ("step_name", &self.step_name, mask(seen.step_name)),
            ("command", &self.command, as_planned(seen.command)),
            ("shown", &self.shown, as_planned(seen.shown)),
            ("summary", &self.summary, as_planned(seen.summary)),
            (
                "diff",
                &self.diff.clone().unwrap_or_default(),
                seen.diff.map(as_planned).unwrap_or_default(),
            ),
        ];
        for (field, planned, now) in texts {
            if *planned != now {
                return Some(Misread {
                    field,
                    planned: format!("{planned:?}"),
                    now: format!("{now:?}"),
                });
            }
        }
        let flags = [
            ("destructive", self.destructive, seen.destructive),
            ("may_delete", self.may_delete, seen.may_delete),
        ];
        flags
            .into_iter()
            .find(|(_, planned, now)| planned != now)
            .map(|(field, planned, now)| Misread {
                field,
                planned: planned.to_string(),
                now: now.to_string(),
            })
    }
}

/// A field of a planned change that reads otherwise than the change the run makes.
pub(super) struct Misread {
    pub(super) field: &'static str,
    pub(super) planned: String,
    pub(super) now: String,
}

/// A read the plan ran, and a digest of what it returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Read {
    pub step: usize,
    pub target: String,
    pub summary: String,
    pub shown: String,
    pub command_sha256: String,
    /// Digest of the exit code and standard output; none when the read did not run
    /// (`--offline`) or its output is secret.
    #[serde(default)]
    pub result_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// A command as `actions::perform` sees it, before it is planned, checked or run.
pub struct Seen<'a> {
    pub step: usize,
    pub step_name: &'a str,
    pub target: &'a str,
    pub destination: &'a str,
    pub command: &'a str,
    pub shown: &'a str,
    pub stdin: Option<&'a [u8]>,
    pub summary: &'a str,
    pub destructive: bool,
    pub may_delete: bool,
    /// What the change does to a file's content (`Action::diff`).
    pub diff: Option<&'a str>,
}

impl Seen<'_> {
    pub(super) fn change(&self, salt: &Salt) -> Change {
        Change {
            step: self.step,
            step_name: self.step_name.into(),
            target: self.target.into(),
            destination: self.destination.into(),
            summary: self.summary.into(),
            shown: self.shown.into(),
            command: self.command.into(),
            command_sha256: salt.digest(self.command.as_bytes()),
            stdin_sha256: self.stdin.map(|s| salt.digest(s)),
            destructive: self.destructive,
            known_after: Vec::new(),
            may_delete: self.may_delete,
            parallel: false,
            masked: false,
            diff: self.diff.map(str::to_string),
        }
    }
}

/// A Lua module a runbook loaded while its plan was made: `name` as required, `path`
/// relative to the runbook's folder (or `shipped`, for the stdlib inside runbook), and the
/// sha256 of its bytes. `apply` checks each before anything runs, and the apply's VM loads
/// only these, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedModule {
    pub name: String,
    pub path: String,
    pub sha256: String,
}

/// What `path` says for a stdlib module.
pub const SHIPPED_MODULE: &str = "shipped";

/// How `now` differs from the module the plan names the same, if it does.
pub(super) fn module_difference(planned: &[PlannedModule], now: &PlannedModule) -> Option<String> {
    let short = |s: &str| s[..12.min(s.len())].to_string();
    let Some(then) = planned.iter().find(|m| m.name == now.name) else {
        return Some(format!(
            "module '{}' ({}) is not in the plan: only the modules the plan loaded may be loaded",
            now.name, now.path
        ));
    };
    if then.path != now.path {
        return Some(format!(
            "module '{}': planned at {}, now at {}",
            now.name, then.path, now.path
        ));
    }
    (then.sha256 != now.sha256).then(|| {
        format!(
            "module '{}' ({}): planned sha256 {}…, now {}…",
            now.name,
            now.path,
            short(&then.sha256),
            short(&now.sha256)
        )
    })
}

/// The Lua modules one VM loaded, and, once it is held to a plan, the only ones it may
/// load: `require` asks here before it runs a module.
#[derive(Debug, Default)]
pub struct Modules {
    loaded: Vec<PlannedModule>,
    planned: Option<Vec<PlannedModule>>,
}

impl Modules {
    /// A module is about to run; refused (why) when held to a plan that does not have it
    /// byte for byte.
    pub fn load(&mut self, module: PlannedModule) -> Result<(), String> {
        if let Some(why) = self
            .planned
            .as_deref()
            .and_then(|p| module_difference(p, &module))
        {
            return Err(why);
        }
        if !self.loaded.iter().any(|m| m.name == module.name) {
            self.loaded.push(module);
        }
        Ok(())
    }

    /// From now on only `planned` may load; what loaded already must be in it.
    pub fn hold_to(&mut self, planned: &[PlannedModule]) -> Result<(), Vec<String>> {
        let problems: Vec<String> = self
            .loaded
            .iter()
            .filter_map(|m| module_difference(planned, m))
            .collect();
        self.planned = Some(planned.to_vec());
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    pub fn loaded(&self) -> &[PlannedModule] {
        &self.loaded
    }
}

/// A target a plan used, as it resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedTarget {
    pub name: String,
    /// `local`, or `user@host:port` as `ssh -G` resolves it, then `/ctN` for a container.
    pub destination: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// How it is reached, as given (outermost hop first; empty: this machine).
    pub route: Vec<Hop>,
    /// Which machine it was (`targets/identity.rs`): the host key the connection
    /// verified, the machine id, the containers on the way. `apply` asks again and runs
    /// nothing where the answer differs. None: the plan was made offline, and it names a
    /// target it did not contact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Identity>,
}

impl PlannedTarget {
    pub(super) fn of(
        target: &Target,
        destination: &str,
        identity: Option<Identity>,
    ) -> PlannedTarget {
        let (base, container) = match destination.split_once('/') {
            Some((b, c)) => (b, Some(c.to_string())),
            None => (destination, None),
        };
        let (user, hostport) = match base.rsplit_once('@') {
            Some((u, h)) => (Some(u.to_string()), h),
            None => (None, base),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if p.parse::<u16>().is_ok() => (h.to_string(), p.parse().ok()),
            _ => (hostport.to_string(), None),
        };
        PlannedTarget {
            name: target.name(),
            destination: destination.into(),
            user,
            host: Some(host).filter(|h| h != "local"),
            port,
            container,
            route: target.route(),
            identity,
        }
    }
}

/// How a param is in a plan: its value, or for a secret only a salted digest of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedParam {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
    /// The value (null: unset). Never present for a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    /// For a secret: `sha256(SALT NUL VALUE)` (null: unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    pub level: crate::actions::events::Level,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedStep {
    pub index: usize,
    pub name: String,
    /// "planned" (it ran in the plan) or "skipped".
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The step asks for confirmation itself (`confirm = true`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confirm: bool,
    /// What it logged while planning (drift found, "no known-good yet").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<Note>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedRunbook {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// As messages named it when the plan was made.
    pub path: String,
    /// The file, absolute; or the name of a runbook shipped inside runbook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shipped: Option<String>,
    /// sha256 of the runbook's bytes.
    pub sha256: String,
}

/// A saved (or in-memory) plan. See docs/plans.md for the file format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub format: u32,
    pub runbook_version: String,
    /// RFC 3339, UTC.
    pub created: String,
    /// `user@host` that made it.
    pub created_by: String,
    /// "dry-run" (reads ran) or "dry-run-offline" (nothing was contacted).
    pub mode: String,
    pub runbook: PlannedRunbook,
    /// Every Lua module the runbook loaded while the plan was made.
    #[serde(default)]
    pub modules: Vec<PlannedModule>,
    pub salt: Salt,
    pub params: BTreeMap<String, PlannedParam>,
    /// The inventory and ssh_config the targets were resolved with (absolute paths):
    /// `apply` uses them unless told otherwise, and checks that the targets still
    /// resolve to the same places.
    #[serde(default)]
    pub reached_with: ReachedWith,
    pub targets: Vec<PlannedTarget>,
    pub steps: Vec<PlannedStep>,
    pub changes: Vec<Change>,
    pub reads: Vec<Read>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReachedWith {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_config: Option<String>,
    /// The directory the plan was made in (symlinks resolved): local commands run there
    /// and relative paths mean a place in it, so `apply` runs only from the same one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `--limit`: the hosts of the groups it kept; `apply` keeps the same ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
}

impl Plan {
    /// What names this plan however its file is written (reformatted, re-indented): a
    /// digest of its random salt, which no other plan has, and which the id does not
    /// give away (the salt guards the digests of secret params).
    pub fn id(&self) -> String {
        self.salt.digest(b"runbook plan id")
    }

    /// The plan file's text: pretty JSON and a newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("a plan serializes");
        text.push('\n');
        text
    }

    /// Reads a plan file; `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<Plan, String> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| format!("{path}: not a runbook plan (not JSON: {e})"))?;
        match value.get("format") {
            Some(serde_json::Value::Number(n)) if n.as_u64() == Some(u64::from(FORMAT)) => {}
            Some(serde_json::Value::Number(n)) => {
                return Err(format!(
                    "{path}: plan format {n} is not one this runbook ({}) reads (it reads format {FORMAT}); make the plan again with this runbook",
                    env!("CARGO_PKG_VERSION")
                ))
            }
            Some(other) => {
                return Err(format!(
                    "{path}: \"format\" must be a number, got {other}; this runbook reads plan format {FORMAT}"
                ))
            }
            None => {
                return Err(format!(
                    "{path}: not a runbook plan (no \"format\" field); make one with runbook plan FILE -o {path}"
                ))
            }
        }
        serde_json::from_value(value).map_err(|e| format!("{path}: a broken plan: {e}"))
    }

    /// Steps that ask for confirmation themselves (`confirm = true`) and ran in the plan.
    pub fn confirm_steps(&self) -> Vec<&str> {
        self.steps
            .iter()
            .filter(|s| s.outcome == "planned" && s.confirm)
            .map(|s| s.name.as_str())
            .collect()
    }

    /// The `--set` pairs that give the run the plan's (non-secret) params.
    pub fn sets(&self) -> Vec<(String, String)> {
        self.params
            .iter()
            .filter(|(_, p)| !p.secret)
            .filter_map(|(k, p)| {
                let text = match p.value.as_ref()? {
                    serde_json::Value::Null => return None,
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                Some((k.clone(), text))
            })
            .collect()
    }
}
