//! "What you saw is what runs": a plan of the changes a runbook makes, and the check that
//! holds a real run to it.
//!
//! A plan is what a silent dry-run of the runbook records: every change (step, target,
//! the exact command, a digest of its standard input), every read and a digest of what it
//! returned, the targets as they resolve, the params. `runbook run` makes one in memory,
//! shows it and asks; `runbook plan -o FILE` saves one and `runbook apply FILE` loads it.
//! Either way the real run is then held to it by an [`Enforcer`]: each change, when it is
//! reached, must be one of its step's planned changes (same target, same destination,
//! same exact command, same standard input). A difference stops the run before that
//! change, and every later change is refused too. Each attempt of a step starts at that
//! step's own first planned change: a retry does its changes again, and the changes of
//! steps the run skipped (after a failure, a false `when`) are passed over, so an
//! `always` cleanup step keeps its place.
//!
//! Digests are salted: `sha256(SALT NUL BYTES)` with a random salt per plan, stored in
//! the plan. The same secret in two plans gives two unrelated digests, and no table of
//! precomputed hashes of common passwords matches one; a weak secret can still be
//! guessed against a plan file one guess at a time, which is why the docs say to keep
//! plans of runbooks with weak secrets where the secret itself could be kept. Text in a
//! plan (summaries, commands) has every secret masked; the digests are of the real text.

use crate::events::Event;
use crate::known_after::KnownAfter;
use crate::params::Header;
use crate::targets::identity::Identity;
use crate::targets::{Hop, Target};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// The plan file format this runbook writes and reads.
pub const FORMAT: u32 = 1;

/// The random salt of one plan's digests (hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Salt(String);

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
    fn result(&self, code: Option<i32>, stdout: &[u8]) -> String {
        let code = code.map_or("signal".to_string(), |c| c.to_string());
        self.digest(&[code.as_bytes(), b"\n", stdout].concat())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
    /// May delete: runbook cannot tell from its words (`classify.rs`).
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
}

impl Change {
    fn same(&self, other: &Change) -> bool {
        self.step == other.step && self.same_but_step(other)
    }

    /// The same command on the same target with the same input, in whatever step.
    fn same_but_step(&self, other: &Change) -> bool {
        self.target == other.target
            && self.destination == other.destination
            && self.command_sha256 == other.command_sha256
            && self.stdin_sha256 == other.stdin_sha256
    }

    /// Whether its text was masked (a secret in it is `***`), so that its digest, of the
    /// real text, cannot be checked against it from the file alone. The recording says
    /// so; a `***` alone (typed into a command) is checked as any text.
    fn masked(&self) -> bool {
        self.masked && self.command.contains(crate::secrets::MASK)
    }

    /// The command text as its digest is over: for a template, each `(known after
    /// apply)` as the marker of the change `known_after` names for it, in order (the
    /// recording put them there in that order). A count that does not match is a text
    /// that is not the template's, and so is not its digest's either.
    fn digested_command(&self) -> Vec<u8> {
        if self.known_after.is_empty() {
            return self.command.as_bytes().to_vec();
        }
        let parts: Vec<&str> = self.command.split(crate::known_after::SHOWN).collect();
        if parts.len() != self.known_after.len() + 1 {
            return self.command.as_bytes().to_vec();
        }
        let mut out = Vec::new();
        for (k, part) in parts.iter().enumerate() {
            out.extend_from_slice(part.as_bytes());
            if let Some(&n) = self.known_after.get(k) {
                out.extend(crate::known_after::marker(n));
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
    fn misread(
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
                        text = text.replace(&*hole, crate::known_after::SHOWN);
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
struct Misread {
    field: &'static str,
    planned: String,
    now: String,
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
}

impl Seen<'_> {
    fn change(&self, salt: &Salt) -> Change {
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
fn module_difference(planned: &[PlannedModule], now: &PlannedModule) -> Option<String> {
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
    fn of(target: &Target, destination: &str, identity: Option<Identity>) -> PlannedTarget {
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

/// What the plan pass records in its context: changes, reads, targets, modules.
pub struct Recording {
    pub salt: Salt,
    pub changes: Vec<Change>,
    pub reads: Vec<Read>,
    pub targets: Vec<PlannedTarget>,
    /// The Lua modules the pass loaded (set when it ends).
    pub modules: Vec<PlannedModule>,
    /// The placeholders the pass's planned changes gave as their output: where one
    /// stands in a later change, that change is a template (see `known_after.rs`).
    known_after: Option<KnownAfter>,
    /// How many `parallel()`s are running their items now: a change planned meanwhile is
    /// one of a parallel (`Change::parallel`).
    pub parallel: usize,
}

impl Recording {
    pub fn new(salt: Salt) -> Self {
        Recording {
            salt,
            changes: Vec::new(),
            reads: Vec::new(),
            targets: Vec::new(),
            modules: Vec::new(),
            known_after: None,
            parallel: 0,
        }
    }

    /// Records the commands that hold `known`'s placeholders as templates.
    pub fn with_known_after(mut self, known: KnownAfter) -> Self {
        self.known_after = Some(known);
        self
    }

    pub fn target(&mut self, target: &Target, destination: &str, identity: Option<Identity>) {
        let name = target.name();
        if !self.targets.iter().any(|t| t.name == name) {
            self.targets
                .push(PlannedTarget::of(target, destination, identity));
        }
    }

    /// A planned change; its index in the plan. A placeholder in it (the output of an
    /// earlier planned change) makes it a template: shown `(known after apply)` there,
    /// digested with the marker of that change there (`known_after.rs`).
    pub fn change(&mut self, seen: &Seen) -> usize {
        let mut change = seen.change(&self.salt);
        change.parallel = self.parallel > 0;
        if let Some(known) = &self.known_after {
            let (command, sources) = known.marked(seen.command.as_bytes());
            let stdin = seen.stdin.map(|s| known.marked(s));
            if !sources.is_empty() || stdin.as_ref().is_some_and(|(_, s)| !s.is_empty()) {
                change.command_sha256 = self.salt.digest(&command);
                change.stdin_sha256 = stdin.map(|(s, _)| self.salt.digest(&s));
                change.known_after = sources;
            }
            change.command = known.shown(&change.command);
            change.shown = known.shown(&change.shown);
            change.summary = known.shown(&change.summary);
        }
        self.changes.push(change);
        self.changes.len() - 1
    }

    /// A read; `result` is (exit code, stdout) when it ran and its output is not secret.
    pub fn read(&mut self, seen: &Seen, result: Option<(Option<i32>, &[u8])>) {
        let shown = |text: &str| match &self.known_after {
            Some(known) => known.shown(text),
            None => text.to_string(),
        };
        self.reads.push(Read {
            step: seen.step,
            target: seen.target.into(),
            summary: shown(seen.summary),
            shown: shown(seen.shown),
            command_sha256: self.salt.digest(seen.command.as_bytes()),
            result_sha256: result.map(|(code, out)| self.salt.result(code, out)),
            exit_code: result.and_then(|(code, _)| code),
        });
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
    pub level: crate::events::Level,
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
}

/// What `Plan::assemble` is made from: the plan pass's context, after its steps ran.
pub struct Pass<'a> {
    pub header: &'a Header,
    /// The runbook as messages name it (its path as given, or `<shipped>/NAME.lua`),
    /// whether it came from a file (not shipped), and its content's sha256.
    pub label: &'a str,
    pub from_file: bool,
    pub sha256: String,
    pub mode: &'a str,
    pub recording: Recording,
    pub events: &'a [Event],
    pub created_by: String,
    /// For each declared step: whether it asks for confirmation.
    pub confirms: &'a [bool],
    /// The plan pass's masker: every text the plan keeps goes through it.
    pub mask: &'a dyn Fn(&str) -> String,
}

impl Plan {
    pub fn assemble(pass: Pass) -> Plan {
        let mask = pass.mask;
        let rec = pass.recording;
        let salt = rec.salt;
        let params = pass
            .header
            .params
            .iter()
            .map(|spec| {
                let value = pass.header.values.get(&spec.name).cloned().flatten();
                let p = if spec.secret {
                    PlannedParam {
                        secret: true,
                        value: None,
                        sha256: value.map(|v| salt.digest(v.display().as_bytes())),
                    }
                } else {
                    PlannedParam {
                        secret: false,
                        value: Some(value.map_or(serde_json::Value::Null, |v| v.to_json())),
                        sha256: None,
                    }
                };
                (spec.name.clone(), p)
            })
            .collect();
        let mut steps: Vec<PlannedStep> = Vec::new();
        let mut notes: BTreeMap<usize, Vec<Note>> = BTreeMap::new();
        for ev in pass.events {
            match ev {
                Event::StepFinished { index, name, .. } => steps.push(PlannedStep {
                    index: *index,
                    name: name.clone(),
                    outcome: "planned".into(),
                    reason: None,
                    confirm: false,
                    notes: Vec::new(),
                }),
                Event::StepSkipped {
                    index,
                    name,
                    reason,
                } => steps.push(PlannedStep {
                    index: *index,
                    name: name.clone(),
                    outcome: "skipped".into(),
                    reason: Some(reason.clone()),
                    confirm: false,
                    notes: Vec::new(),
                }),
                Event::Log {
                    step: Some(step),
                    level,
                    message,
                } if *level != crate::events::Level::Debug => {
                    notes.entry(*step).or_default().push(Note {
                        level: *level,
                        message: message.clone(),
                    })
                }
                _ => {}
            }
        }
        // (Each step finishes or is skipped once in a run: a retry finishes only at its end.)
        for s in &mut steps {
            s.notes = notes.remove(&s.index).unwrap_or_default();
            s.confirm = pass.confirms.get(s.index).copied().unwrap_or(false);
        }
        let mut changes = rec.changes;
        for c in &mut changes {
            c.step_name = mask(&c.step_name);
            c.summary = mask(&c.summary);
            c.shown = mask(&c.shown);
            let command = mask(&c.command);
            c.masked = command != c.command;
            c.command = command;
        }
        let mut reads = rec.reads;
        for r in &mut reads {
            r.summary = mask(&r.summary);
            r.shown = mask(&r.shown);
        }
        for s in &mut steps {
            s.name = mask(&s.name);
            for n in &mut s.notes {
                n.message = mask(&n.message);
            }
            if let Some(r) = &mut s.reason {
                *r = mask(r);
            }
        }
        let label = pass.label;
        let shipped = match (pass.from_file, label.strip_prefix("<shipped>/")) {
            (false, Some(rest)) => rest.strip_suffix(".lua").map(str::to_string),
            _ => None,
        };
        let file = match shipped {
            Some(_) => None,
            None => std::fs::canonicalize(label)
                .ok()
                .map(|p| p.display().to_string()),
        };
        Plan {
            format: FORMAT,
            runbook_version: env!("CARGO_PKG_VERSION").into(),
            created: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            created_by: pass.created_by,
            mode: pass.mode.into(),
            runbook: PlannedRunbook {
                name: pass.header.name.clone(),
                description: pass.header.description.as_deref().map(mask),
                path: label.to_string(),
                file,
                shipped,
                sha256: pass.sha256,
            },
            modules: rec.modules,
            salt,
            params,
            reached_with: ReachedWith::default(),
            targets: rec.targets,
            steps,
            changes,
            reads,
        }
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

    /// Refuses a plan made by another version of runbook, or older than `max_age`.
    pub fn check_made(&self, max_age: Duration, now: SystemTime) -> Result<(), String> {
        let mut problems = Vec::new();
        if self.runbook_version != env!("CARGO_PKG_VERSION") {
            problems.push(format!(
                "it was made by runbook {}, and this is runbook {}: the commands it holds the run to may differ between versions",
                self.runbook_version,
                env!("CARGO_PKG_VERSION")
            ));
        }
        match humantime::parse_rfc3339(&self.created) {
            Err(e) => problems.push(format!("its \"created\" time '{}' is not RFC 3339: {e}", self.created)),
            Ok(at) => match now.duration_since(at) {
                Ok(age) if age > max_age => problems.push(format!(
                    "it was made {} ago ({}), more than --max-age {}: what it read may no longer hold",
                    humantime::format_duration(Duration::from_secs(age.as_secs())),
                    self.created,
                    humantime::format_duration(max_age)
                )),
                Ok(_) => {}
                // A little clock skew between machines is normal; more is not.
                Err(e) if e.duration() > Duration::from_secs(300) => problems.push(format!(
                    "it was made in the future ({}, {} from now): check the clocks",
                    self.created,
                    humantime::format_duration(Duration::from_secs(e.duration().as_secs()))
                )),
                Err(_) => {}
            },
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("\n"))
        }
    }

    /// How the params that will run differ from the plan's.
    pub fn param_differences(&self, header: &Header) -> Vec<String> {
        let mut out = Vec::new();
        for spec in &header.params {
            let now = header.values.get(&spec.name).cloned().flatten();
            let Some(planned) = self.params.get(&spec.name) else {
                out.push(format!(
                    "param '{}' is not in the plan (the runbook declares it now)",
                    spec.name
                ));
                continue;
            };
            if spec.secret || planned.secret {
                let digest = now.map(|v| self.salt.digest(v.display().as_bytes()));
                if !planned.secret || digest != planned.sha256 {
                    out.push(format!(
                        "secret param '{}' is not the one planned ({}); give it with --set {}=… or RUNBOOK_PARAM_{}",
                        spec.name,
                        match (&planned.sha256, &digest) {
                            (Some(_), None) => "unset now",
                            (None, Some(_)) => "it was unset",
                            _ => "a different value",
                        },
                        spec.name,
                        spec.name.to_ascii_uppercase()
                    ));
                }
                continue;
            }
            let now = now.map_or(serde_json::Value::Null, |v| v.to_json());
            let then = planned.value.clone().unwrap_or(serde_json::Value::Null);
            if now != then {
                out.push(format!("param '{}': planned {then}, now {now}", spec.name));
            }
        }
        for name in self.params.keys() {
            if !header.params.iter().any(|s| &s.name == name) {
                out.push(format!(
                    "param '{name}' was planned, and the runbook no longer declares it"
                ));
            }
        }
        out
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

/// Whether a target a plan used still resolves to the same place, and is the same machine:
/// reached again the way the runbook would reach it now (an inventory name through the
/// inventory, anything else by its route), where does it lead, and what does the machine
/// there say it is? Asks each target (one short command), before anything runs.
pub async fn target_differences(
    plan: &Plan,
    registry: &crate::targets::registry::Registry,
    inventory: Option<&crate::inventory::Inventory>,
    locks: &crate::locks::Locks,
) -> Vec<String> {
    let mut out = Vec::new();
    for t in &plan.targets {
        let by_name = inventory.is_some_and(|inv| inv.host(&t.name).is_some());
        let now = if by_name {
            registry.resolve(&t.name)
        } else {
            Target::from_route(&t.route, registry)
        };
        let now = match now {
            Ok(now) => now,
            Err(e) => {
                out.push(format!(
                    "target {}: cannot be reached as planned: {e}",
                    t.name
                ));
                continue;
            }
        };
        if now.route() != t.route {
            out.push(format!(
                "target {}: planned by way of {}, now {}",
                t.name,
                route_text(&t.route),
                route_text(&now.route())
            ));
            continue;
        }
        let dest = now.destination().await;
        if dest != t.destination {
            out.push(format!(
                "target {}: planned at {}, now resolves to {}",
                t.name, t.destination, dest
            ));
            continue;
        }
        let Some(planned) = &t.identity else {
            out.push(format!(
                "target {}: the plan does not say which machine it is (made with --offline?); make the plan without --offline to apply it there",
                t.name
            ));
            continue;
        };
        // Through the run's locks: the identity checked here is the one its locks are
        // keyed by, asked once on the connection the run goes on using.
        match locks.identity(&now).await {
            // `runbook test`: nothing is contacted.
            Ok(None) => {}
            Ok(Some(found)) => {
                let diff = Identity::differences(planned, &found.identity);
                if !diff.is_empty() {
                    out.push(format!(
                        "target {}: another machine than the one planned ({}):\n    planned: {}\n    found:   {}",
                        t.name,
                        diff.join("; "),
                        planned.text(),
                        found.identity.text()
                    ));
                }
            }
            Err(e) => out.push(format!("target {}: {e}", t.name)),
        }
    }
    out
}

/// `change 1` or `changes 1 and 3`: the changes holes name, numbered from 1 as the
/// plan's text and Markdown number them.
fn changes_named(sources: &[usize]) -> String {
    let mut n: Vec<usize> = sources.iter().map(|s| s + 1).collect();
    n.sort();
    n.dedup();
    let list: Vec<String> = n.iter().map(|i| i.to_string()).collect();
    match list.as_slice() {
        [one] => format!("change {one}"),
        [rest @ .., last] => format!("changes {} and {last}", rest.join(", ")),
        [] => "no change".into(),
    }
}

fn route_text(route: &[Hop]) -> String {
    if route.is_empty() {
        return "this machine".into();
    }
    serde_json::to_string(route).unwrap_or_default()
}

/// The plan a run's actions are seen by: none, the one a plan pass records, or the one a
/// run is held to. One at a time: a plan pass is never held to a plan.
#[derive(Default)]
pub enum Watch {
    #[default]
    Free,
    Recording(Recording),
    Held(Enforcer),
}

impl Watch {
    /// The plan this run is held to, if it is.
    pub fn held(&mut self) -> Option<&mut Enforcer> {
        match self {
            Watch::Held(enforcer) => Some(enforcer),
            _ => None,
        }
    }

    /// What a plan pass records, if this is one.
    pub fn recording(&mut self) -> Option<&mut Recording> {
        match self {
            Watch::Recording(rec) => Some(rec),
            _ => None,
        }
    }
}

/// Holds a real run to a plan.
#[derive(Debug)]
pub struct Enforcer {
    salt: Salt,
    planned: Vec<Change>,
    /// Which planned changes ran (in this attempt of their step).
    used: Vec<bool>,
    /// Which ran in any attempt: a retry may pass over one made before (it is done).
    made: Vec<bool>,
    reads: Vec<Read>,
    reads_used: Vec<bool>,
    /// Targets this run changed: reads there after that are expected to differ.
    changed: std::collections::HashSet<String>,
    /// The step whose attempt runs now.
    step: Option<usize>,
    /// Set at the first difference: nothing changes after that.
    broken: Option<String>,
    /// Whether any change was let through: a refusal after one cannot say that nothing
    /// was changed.
    made_any: bool,
    /// Why the run was stopped before its first change because the plan does not read
    /// as the change it holds (an edited plan file): `apply` then refuses, exit 2.
    refused: Option<String>,
    /// What each planned change a hole names printed when it ran in this run, by its
    /// index: the only value that hole may hold.
    outputs: BTreeMap<usize, Vec<u8>>,
    /// A saved plan (a file anyone may have edited): what it shows of its reads and of
    /// what its steps said is held to what the run reads and says (`read`, `note`).
    texts: bool,
    /// What each step said in the plan, and which of those the run's step has said.
    notes: BTreeMap<usize, Vec<Note>>,
    notes_said: BTreeMap<usize, Vec<bool>>,
    /// A read of this run returned something else than the plan's, or something the plan
    /// does not know (offline, secret, a read it did not make): a text that tells what
    /// reads found may then differ without the file being edited.
    moved: bool,
}

/// A real command read back as a template (`known_after.rs`): the command line and its
/// standard input, each hole holding the marker of its change.
pub struct Templated {
    pub command: Vec<u8>,
    pub stdin: Option<Vec<u8>>,
}

impl Enforcer {
    pub fn new(plan: &Plan) -> Self {
        Enforcer {
            salt: plan.salt.clone(),
            used: vec![false; plan.changes.len()],
            made: vec![false; plan.changes.len()],
            planned: plan.changes.clone(),
            reads_used: vec![false; plan.reads.len()],
            reads: plan.reads.clone(),
            changed: Default::default(),
            step: None,
            broken: None,
            made_any: false,
            refused: None,
            outputs: BTreeMap::new(),
            texts: false,
            notes: plan
                .steps
                .iter()
                .map(|s| (s.index, s.notes.clone()))
                .collect(),
            notes_said: BTreeMap::new(),
            moved: false,
        }
    }

    /// Holds the run to what a saved plan shows of its reads and notes too (see
    /// `read` and `note`): an in-memory plan (`run`'s confirmation) is the run's own.
    pub fn hold_texts(mut self) -> Self {
        self.texts = true;
        self
    }

    /// A text the plan shows (a read's summary, a step's note) is not what the run has.
    /// While every read so far returned what the plan's did and nothing was changed, the
    /// same runbook says the same: the plan file was edited, and is refused. Once a read
    /// returned something else (or something the plan cannot compare) or a change ran,
    /// such a text may tell what a read found: said as a warning.
    fn text_differs(&mut self, why: String) -> Result<Option<String>, String> {
        if self.made_any || self.moved {
            return Ok(Some(format!(
                "{why}; the changes are still held to the plan"
            )));
        }
        self.broken = Some(why.clone());
        self.refused = Some(why.clone());
        Err(format!(
            "{why}; stopped before any change, and nothing is changed"
        ))
    }

    /// The run's step logged `message` (masked) at `level`, as `log.*` does: it must be
    /// one of what the plan shows that step said and the run has not said yet (other
    /// notes, runbook's own, may lie between). Not in the plan's order: the branches of a
    /// `parallel()` log in the order they finish, which differs from run to run (seen:
    /// a fleet's per-host lines refused a plan whose reads all matched). What a
    /// reviewer reads is each note's text, held here; their order is not a promise. See
    /// `text_differs` for what a difference does.
    pub fn note(
        &mut self,
        step: usize,
        level: crate::events::Level,
        message: &str,
    ) -> Result<Option<String>, String> {
        if !self.texts || level == crate::events::Level::Debug {
            return Ok(None);
        }
        let planned = self.notes.get(&step).map(Vec::as_slice).unwrap_or(&[]);
        let said = self
            .notes_said
            .entry(step)
            .or_insert_with(|| vec![false; planned.len()]);
        let unsaid = |k: &usize| !said[*k];
        if let Some(k) = (0..planned.len())
            .filter(unsaid)
            .find(|&k| planned[k].level == level && planned[k].message == message)
        {
            said[k] = true;
            return Ok(None);
        }
        let shown = (0..planned.len())
            .find(unsaid)
            .map_or("nothing more".into(), |k| {
                format!("({}) {:?}", planned[k].level, planned[k].message)
            });
        self.text_differs(format!(
            "step {}: field \"steps[].notes\": the plan shows the step saying {shown}, and it says ({level}) {message:?}",
            step + 1
        ))
    }

    /// Why the run was stopped before it changed anything, when the plan's text of a
    /// change is not the change (see `allow`): the run is then a refused plan, not a
    /// failed run.
    pub fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    /// An attempt of `step` starts: its planned changes are all to run again (a retry
    /// repeats them), and its reads are compared again. Steps run in order, so the
    /// changes of steps the run skipped are simply never asked for.
    pub fn step_attempt(&mut self, step: usize) {
        self.step = Some(step);
        for (c, used) in self.planned.iter().zip(self.used.iter_mut()) {
            if c.step == step {
                *used = false;
            }
        }
        for (r, used) in self.reads.iter().zip(self.reads_used.iter_mut()) {
            if r.step == step {
                *used = false;
            }
        }
        self.notes_said.remove(&step);
    }

    /// Allows `now` when it is its step's next planned change (in the plan's order, which
    /// is the order shown; the changes of one `parallel()`, shown "in any order", in any
    /// order among themselves: see [`Self::out_of_order`]) and the plan reads
    /// as it is: the same target name, step name, command text, command as shown,
    /// summary and destructive flag, each as the plan holds it (masked by `mask`, the
    /// run's masker). Otherwise says why not, showing both versions. Gives the planned
    /// change's index.
    ///
    /// The digests alone would let a plan file whose texts were edited (the command a
    /// reviewer reads, its summary, "destructive") hold the run to a change it does not
    /// show: the digests and the salt are in the file, so nothing in it proves its texts;
    /// the real change does.
    pub fn allow(&mut self, seen: &Seen, mask: &dyn Fn(&str) -> String) -> Result<usize, String> {
        self.allow_templated(seen, &[], mask)
    }

    /// Where change `i` stands in its step's order: the first change of the run of
    /// parallel changes it belongs to, or itself.
    fn position(&self, i: usize) -> usize {
        let c = &self.planned[i];
        if !c.parallel {
            return i;
        }
        let mut p = i;
        while p > 0 && self.planned[p - 1].parallel && self.planned[p - 1].step == c.step {
            p -= 1;
        }
        p
    }

    /// Why planned change `i` may not run now, by the order the plan shows: a change of
    /// its step shown before it has not run (a retry may pass over one an earlier attempt
    /// made), or one shown after it ran already. None: it is next.
    fn out_of_order(&self, i: usize) -> Option<String> {
        let at = self.position(i);
        let step = self.planned[i].step;
        let head = |j: usize| {
            let c = &self.planned[j];
            format!("change {} (on {}: {})", j + 1, c.target, c.summary)
        };
        for j in (0..self.planned.len()).filter(|&j| j != i && self.planned[j].step == step) {
            let pj = self.position(j);
            if pj < at && !self.used[j] && !self.made[j] {
                return Some(format!(
                    "it is change {} of the plan, which shows {} before it, and that has not run",
                    i + 1,
                    head(j)
                ));
            }
            if pj > at && self.used[j] {
                return Some(format!(
                    "it is change {} of the plan, which shows it before {}, and that ran already",
                    i + 1,
                    head(j)
                ));
            }
        }
        None
    }

    /// What may stand in the holes of the step's planned changes not run yet: for each
    /// change a hole names that ran in this run, the forms of what it printed. Empty when
    /// the step's changes have no hole.
    pub fn fills(&self) -> Vec<(usize, Vec<Vec<u8>>)> {
        let mut sources: Vec<usize> = (0..self.planned.len())
            .filter(|&i| !self.used[i] && Some(self.planned[i].step) == self.step)
            .flat_map(|i| self.planned[i].known_after.iter().copied())
            .collect();
        sources.sort();
        sources.dedup();
        sources
            .into_iter()
            .filter_map(|n| Some((n, crate::known_after::forms(self.outputs.get(&n)?))))
            .collect()
    }

    /// The planned change `index` ran and printed `stdout`: kept when a hole names it.
    pub fn output(&mut self, index: usize, stdout: &[u8]) {
        if self.planned.iter().any(|c| c.known_after.contains(&index)) {
            self.outputs.insert(index, stdout.to_vec());
        }
    }

    /// `allow`, where a planned change with holes matches one of `templated` (the real
    /// command read back with the outputs of [`Self::fills`] as holes) exactly: the
    /// command differs from the plan only where a hole is, and there only by the output
    /// of the change the hole names.
    pub fn allow_templated(
        &mut self,
        seen: &Seen,
        templated: &[Templated],
        mask: &dyn Fn(&str) -> String,
    ) -> Result<usize, String> {
        let now = seen.change(&self.salt);
        if let Some(why) = &self.broken {
            return Err(format!(
                "no change runs after the run left the confirmed plan ({why})"
            ));
        }
        let open: Vec<usize> = (0..self.planned.len())
            .filter(|&i| !self.used[i] && self.planned[i].step == now.step)
            .collect();
        let fits = |want: &Change| {
            if want.known_after.is_empty() {
                return want.same(&now);
            }
            want.step == now.step
                && want.target == now.target
                && want.destination == now.destination
                && templated.iter().any(|t| {
                    self.salt.digest(&t.command) == want.command_sha256
                        && t.stdin.as_ref().map(|s| self.salt.digest(s)) == want.stdin_sha256
                })
        };
        let exact: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&i| fits(&self.planned[i]))
            .collect();
        let mut holes: Vec<Vec<u8>> = self.fills().into_iter().flat_map(|(_, f)| f).collect();
        holes.sort_by_key(|h| std::cmp::Reverse(h.len()));
        let readable: Vec<usize> = exact
            .iter()
            .copied()
            .filter(|&i| self.planned[i].misread(seen, mask, &holes).is_none())
            .collect();
        if let Some(&i) = readable.iter().find(|&&i| self.out_of_order(i).is_none()) {
            self.used[i] = true;
            self.made[i] = true;
            self.made_any = true;
            self.changed.insert(now.target);
            return Ok(i);
        }
        // A planned change, but not the next one in the order the plan shows.
        if let Some(why) = readable.first().and_then(|&i| self.out_of_order(i)) {
            let step_name = seen.step_name;
            self.broken = Some(format!("step \"{step_name}\""));
            return Err(format!(
                "step \"{step_name}\": this change runs out of the order the plan shows: {why}; a step's changes run in the plan's order (those of one parallel(), shown \"in any order\", in any order among themselves); stopped before it, and nothing further is changed\n  now: {}",
                now.shown
            ));
        }
        // The change the plan holds by its digests (or all but the target's name), shown
        // otherwise than it is.
        let misread = exact.first().copied().or_else(|| {
            open.iter().copied().find(|&i| {
                let c = &self.planned[i];
                c.destination == now.destination
                    && c.command_sha256 == now.command_sha256
                    && c.stdin_sha256 == now.stdin_sha256
            })
        });
        if let Some((i, m)) =
            misread.and_then(|i| Some((i, self.planned[i].misread(seen, mask, &holes)?)))
        {
            let why = format!(
                "change {}: field \"{}\" is not what the change is (step \"{}\", on {}): the plan says {}, the change is {}; {}",
                i + 1,
                m.field,
                mask(seen.step_name),
                seen.target,
                m.planned,
                m.now,
                if m.field == "summary" {
                    "the plan file was edited, or what the reads found changed since it was made (a size, a list of files)"
                } else {
                    "the plan file was edited after it was made"
                }
            );
            self.broken = Some(format!("change {}", i + 1));
            if !self.made_any {
                self.refused = Some(why.clone());
            }
            return Err(format!(
                "{why}; stopped before it, and nothing further is changed"
            ));
        }
        let step_name = seen.step_name;
        let mut lines = vec![format!(
            "step \"{step_name}\": this change is not one that was confirmed for this step; stopped before it, and nothing further is changed"
        )];
        match open.first().map(|&i| &self.planned[i]) {
            Some(want) => {
                if want.target != now.target {
                    lines.push(format!("  confirmed on: {}", want.target));
                    lines.push(format!("  now on:       {}", now.target));
                } else if want.destination != now.destination {
                    lines.push(format!(
                        "  confirmed on: {} ({})",
                        want.target, want.destination
                    ));
                    lines.push(format!(
                        "  now on:       {} ({})",
                        now.target, now.destination
                    ));
                }
                lines.push(format!("  confirmed: {}", want.shown));
                lines.push(format!("  now:       {}", now.shown));
                if want.command_sha256 == now.command_sha256
                    && want.stdin_sha256 != now.stdin_sha256
                {
                    lines.push("  (the same command, with different standard input)".into());
                } else if want.shown == now.shown && want.command_sha256 != now.command_sha256 {
                    lines.push(
                        "  (shown the same; the exact command lines differ, e.g. in a script's text or a secret)"
                            .into(),
                    );
                }
                if !want.known_after.is_empty() {
                    lines.push(format!(
                        "  (where it says {}, only what {} printed in this run may stand; the command differs elsewhere, or that change has not run)",
                        crate::known_after::SHOWN,
                        changes_named(&want.known_after)
                    ));
                }
            }
            None => {
                let elsewhere = self.planned.iter().any(|c| c.same_but_step(&now));
                lines.push(format!(
                    "  confirmed: nothing more in this step{}",
                    if elsewhere {
                        " (this command was confirmed for another step)"
                    } else {
                        ""
                    }
                ));
                lines.push(format!("  now:       {}", now.shown));
            }
        }
        self.broken = Some(format!("step \"{step_name}\""));
        Err(lines.join("\n"))
    }

    /// What the attempt of `step` that just succeeded left of its planned changes.
    pub fn not_run(&self, step: usize) -> Vec<String> {
        (0..self.planned.len())
            .filter(|&i| self.planned[i].step == step && !self.used[i])
            .map(|i| {
                let c = &self.planned[i];
                format!(
                    "step \"{}\": the planned change `{}` on {} was not made: the step found nothing to do there any more",
                    c.step_name, c.summary, c.target
                )
            })
            .collect()
    }

    /// A read ran: when the plan ran the same read in the same step, on a target this run
    /// has not changed yet, and it returned something else, the warning to show. Held to
    /// a saved plan, the read must also be shown as the plan shows it (its summary and
    /// command, masked by `mask`): see `text_differs`.
    pub fn read(
        &mut self,
        seen: &Seen,
        code: Option<i32>,
        stdout: Option<&[u8]>,
        mask: &dyn Fn(&str) -> String,
    ) -> Result<Option<String>, String> {
        let digest = self.salt.digest(seen.command.as_bytes());
        let Some(i) = (0..self.reads.len()).find(|&i| {
            !self.reads_used[i]
                && self.reads[i].step == seen.step
                && self.reads[i].target == seen.target
                && self.reads[i].command_sha256 == digest
        }) else {
            self.moved = true;
            return Ok(None);
        };
        self.reads_used[i] = true;
        if self.texts {
            let r = &self.reads[i];
            let texts = [
                ("summary", r.summary.clone(), mask(seen.summary)),
                ("shown", r.shown.clone(), mask(seen.shown)),
            ];
            // A text with a value known only after apply cannot be compared as it is.
            if let Some((field, planned, now)) = texts
                .into_iter()
                .find(|(_, p, n)| p != n && !p.contains(crate::known_after::SHOWN))
            {
                return self.text_differs(format!(
                    "read {}: field \"{field}\" is not what the read is (step \"{}\", on {}): the plan says {planned:?}, the read is {now:?}",
                    i + 1,
                    mask(seen.step_name),
                    seen.target
                ));
            }
        }
        let result = self.read_result(i, seen, code, stdout);
        if result.is_some() || self.reads[i].result_sha256.is_none() || stdout.is_none() {
            self.moved = true;
        }
        Ok(result)
    }

    /// Whether read `i` returned what it returned when the plan was made.
    fn read_result(
        &mut self,
        i: usize,
        seen: &Seen,
        code: Option<i32>,
        stdout: Option<&[u8]>,
    ) -> Option<String> {
        if self.changed.contains(seen.target) {
            return None;
        }
        let then = self.reads[i].result_sha256.as_ref()?;
        let now = self.salt.result(code, stdout?);
        if *then == now {
            return None;
        }
        let codes = match (self.reads[i].exit_code, code) {
            (a, b) if a != b => format!(
                " (exit code {} then, {} now)",
                a.map_or("-".into(), |c| c.to_string()),
                b.map_or("-".into(), |c| c.to_string())
            ),
            _ => String::new(),
        };
        Some(format!(
            "step \"{}\": the read `{}` on {} returned something else than when the plan was made{codes}; the changes are still held to the plan",
            seen.step_name, seen.summary, seen.target
        ))
    }
}

// ---------------------------------------------------------------------------------------
// What a plan binds (docs/plans.md): every field a person reads of a plan is checked
// against what apply holds before anything runs, where it can be: against the rest of
// the plan file (`unbound`), the runbook file (`runbook_path_differs`), the runbook as it
// loads (`loaded_differences`); the rest, against the real change (`Enforcer::allow`).

impl Plan {
    /// What does not hold together in the plan file itself: a command text that is not
    /// the one its digest is of (where no secret is masked in it), a change's step or
    /// target that is not the plan's, a target shown otherwise than its destination. Each
    /// names the field; empty when none. Nothing outside the file is read, so a reviewer's
    /// `runbook plan PLAN.json` refuses such a plan as `apply` does.
    ///
    /// A check an editor of the file can redo (the salt is in the file) proves nothing on
    /// its own; these catch a text edited without its digest, and leave a plan whose
    /// digests were forged to the run, which does not make the forged change.
    pub fn unbound(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, c) in self.changes.iter().enumerate() {
            let n = i + 1;
            // Steps run in order, and so are their changes recorded: a plan listing them
            // otherwise shows an order that cannot run.
            if let Some(before) = i.checked_sub(1).map(|b| &self.changes[b]) {
                if before.step > c.step {
                    out.push(format!(
                        "change {n}: field \"step\" is {}, after change {i} of step {}: a plan lists its changes in the order they run, step by step",
                        c.step + 1,
                        before.step + 1
                    ));
                }
            }
            if !c.masked() && self.salt.digest(&c.digested_command()) != c.command_sha256 {
                out.push(format!(
                    "change {n}: field \"command\" does not match its command_sha256 (the text a reviewer reads is not the command the plan holds)"
                ));
            }
            match self.steps.iter().find(|s| s.index == c.step) {
                None => out.push(format!(
                    "change {n}: field \"step\" is {}, a step the plan does not have",
                    c.step + 1
                )),
                Some(s) if s.name != c.step_name => out.push(format!(
                    "change {n}: field \"step_name\" is {:?}, and step {} of the plan is {:?}",
                    c.step_name,
                    c.step + 1,
                    s.name
                )),
                Some(_) => {}
            }
            // runbook's own changes (`fingerprint.save`) are on this machine, unrecorded
            // among the targets.
            let own = c.target == "local" && c.destination == "local";
            match self.targets.iter().find(|t| t.name == c.target) {
                None if own => {}
                None => out.push(format!(
                    "change {n}: field \"target\" is {:?}, not one of the plan's targets",
                    c.target
                )),
                Some(t) if t.destination != c.destination => out.push(format!(
                    "change {n}: field \"destination\" is {}, and target {} of the plan is at {}",
                    c.destination, t.name, t.destination
                )),
                Some(_) => {}
            }
        }
        for t in &self.targets {
            let split = PlannedTarget::of(&Target::Local, &t.destination, None);
            let fields = [
                ("user", t.user != split.user),
                ("host", t.host != split.host),
                ("port", t.port != split.port),
                ("container", t.container != split.container),
            ];
            for (field, differs) in fields {
                if differs {
                    out.push(format!(
                        "target {}: field \"{field}\" is not what its destination {} says",
                        t.name, t.destination
                    ));
                }
            }
        }
        out
    }

    /// Whether the runbook the plan shows (`path`, as it was named) is the one apply
    /// loads (`file`, or a shipped one): `path` is resolved from the working directory,
    /// which apply has checked is the plan's.
    pub fn runbook_path_differs(&self) -> Option<String> {
        let r = &self.runbook;
        match (&r.shipped, &r.file) {
            (Some(_), Some(_)) => Some(
                "fields \"runbook.shipped\" and \"runbook.file\": a plan is of one runbook".into(),
            ),
            (Some(name), None) if r.path != format!("<shipped>/{name}.lua") => Some(format!(
                "field \"runbook.path\" is {:?}, and the plan is of the shipped runbook '{name}'",
                r.path
            )),
            (None, Some(file)) => {
                let resolved = std::fs::canonicalize(&r.path).ok();
                let same = resolved.as_deref() == Some(std::path::Path::new(file));
                (!same).then(|| {
                    let what = match resolved {
                        None => " (no such file here)".to_string(),
                        Some(p) if p.display().to_string() != r.path => {
                            format!(" (that is {})", p.display())
                        }
                        Some(_) => String::new(),
                    };
                    format!(
                        "field \"runbook.path\" is {:?}{what}, and the runbook of the plan is {file}",
                        r.path
                    )
                })
            }
            _ => None,
        }
    }

    /// How the plan's runbook fields and steps differ from the runbook as it loaded:
    /// its header's name and description, and each step's name and `confirm`, by index
    /// (`steps`: each declared step's name and whether it asks for confirmation). Texts
    /// are compared as the plan holds them, masked by `mask`.
    pub fn loaded_differences(
        &self,
        header: &Header,
        steps: &[(String, bool)],
        mask: &dyn Fn(&str) -> String,
    ) -> Vec<String> {
        let mut out = Vec::new();
        if header.name != self.runbook.name {
            out.push(format!(
                "field \"runbook.name\" is {:?}, and the runbook is {:?}",
                self.runbook.name, header.name
            ));
        }
        let description = header.description.as_deref().map(mask);
        if description != self.runbook.description {
            out.push(format!(
                "field \"runbook.description\" is {}, and the runbook's is {}",
                self.runbook
                    .description
                    .as_ref()
                    .map_or("none".into(), |d| format!("{d:?}")),
                description.map_or("none".into(), |d| format!("{d:?}"))
            ));
        }
        for s in &self.steps {
            let n = s.index + 1;
            match steps.get(s.index) {
                None => out.push(format!(
                    "step {n}: field \"index\": the runbook declares {} steps",
                    steps.len()
                )),
                Some((name, _)) if mask(name) != s.name => out.push(format!(
                    "step {n}: field \"name\" is {:?}, and the runbook's step {n} is {:?}",
                    s.name,
                    mask(name)
                )),
                Some((_, confirm)) if *confirm != s.confirm => out.push(format!(
                    "step {n}: field \"confirm\" is {}, and the runbook's step {n} has confirm = {confirm}",
                    s.confirm
                )),
                Some(_) => {}
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------------------
// Rendering: one walk over the plan, two styles (terminal text and Markdown).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Text,
    Markdown,
}

/// One planned change as people read it: the dry-run preview (as each change is reached),
/// `run`'s confirmation, `runbook plan`'s text and its Markdown all render a change
/// through this, so what a reviewer approved and what the user confirmed read as what
/// they previewed: the same head (where, the summary's facts, destructive or not) and the
/// same command.
pub struct ChangeText<'a> {
    pub target: &'a str,
    pub summary: &'a str,
    /// The command as it runs on its target (named scripts by name): `actions::shown`.
    pub shown: &'a str,
    pub destructive: bool,
    /// Runbook cannot tell whether it deletes (`classify.rs`): marked as such.
    pub may_delete: bool,
    /// The exact command line, and whether it has standard input, where known (a plan;
    /// the preview's events carry only `shown`): the Markdown shows it when it differs.
    pub exact: Option<(&'a str, bool)>,
}

/// A line of a change's command as `ChangeText::command` gives it.
#[derive(Debug, PartialEq, Eq)]
pub enum CommandLine {
    /// The first line (text puts `$ ` before it).
    First(String),
    /// A later line, exactly as it is in the command.
    More(String),
    /// Where lines of a long script were left out, and how many.
    Folded(usize),
}

impl CommandLine {
    /// What stands for the lines a fold left out.
    pub fn fold_note(n: usize) -> String {
        format!("… {n} more lines of the script (-v, --json, a saved plan or `runbook log` show it whole)")
    }
}

impl ChangeText<'_> {
    /// The change in text: its head after `lead`, its command lines under it, `indent`
    /// spaces in, folded as `command` says.
    pub fn text(&self, lead: &str, indent: usize, whole: bool) -> String {
        let indent = " ".repeat(indent);
        let mut out = format!("{lead}{}\n", self.head());
        for line in self.command(whole) {
            // A command's later lines are printed as they are, not indented: they are
            // often inside a quoted word (a script, a value with a newline), where spaces
            // added for looks would show a command that is not the one that runs.
            let line = match line {
                CommandLine::First(l) => format!("{indent}$ {}", crate::printable::line(&l)),
                CommandLine::More(l) => crate::printable::line(&l).into_owned(),
                CommandLine::Folded(n) => format!("{indent}  {}", CommandLine::fold_note(n)),
            };
            out.push_str(&format!("{line}\n"));
        }
        out
    }

    /// The change as item `n` of a Markdown list: the head, the command shown, and the
    /// exact command in a `<details>` when it differs (every command whole).
    pub fn markdown(&self, n: usize) -> String {
        let mark = match (self.destructive, self.may_delete) {
            (true, _) => "**destructive** · ",
            (false, true) => "**may delete** · ",
            (false, false) => "",
        };
        let mut out = format!(
            "{n}. {mark}on {}: {}\n",
            code_span(&crate::printable::line(self.target)),
            md(&crate::printable::line(self.summary))
        );
        let (command, stdin) = self.exact.unwrap_or((self.shown, false));
        let exact = command == self.shown;
        let runs = if exact { "runs, exactly" } else { "runs" };
        out.push_str(&format!(
            "   - {runs}:{}",
            code_in_list(&crate::printable::block(self.shown))
        ));
        if !exact {
            out.push_str(&format!(
                "   <details><summary>the exact command{}</summary>\n\n{}   </details>\n",
                if stdin {
                    ", with its standard input"
                } else {
                    ""
                },
                code_block(&crate::printable::block(command), "   ")
            ));
        }
        out
    }

    /// A script is folded when it is longer than this many lines plus the three a fold
    /// would save.
    const FOLD_AT: usize = 4;

    /// `on TARGET: SUMMARY`, marked when it deletes, rebuilds or restores something, or
    /// may.
    pub fn head(&self) -> String {
        let mark = match (self.destructive, self.may_delete) {
            (true, _) => "  [deletes]",
            (false, true) => "  [may delete]",
            (false, false) => "",
        };
        format!(
            "on {}: {}{mark}",
            crate::printable::line(self.target),
            crate::printable::line(self.summary)
        )
    }

    /// The command's lines, when the summary does not already say it. A script of more than a few lines (a runbook's own `t:shell`;
    /// runbook's scripts are shown by name) is folded unless `whole`: its first lines and
    /// its last, which ends with the arguments (`sh -c '…' sh ARG…`: what it acts on).
    pub fn command(&self, whole: bool) -> Vec<CommandLine> {
        if self.shown == self.summary {
            return Vec::new();
        }
        let lines: Vec<&str> = self.shown.lines().collect();
        let lead = |n: usize, l: &str| {
            if n == 0 {
                CommandLine::First(l.to_string())
            } else {
                CommandLine::More(l.to_string())
            }
        };
        if whole || lines.len() <= Self::FOLD_AT + 3 {
            return lines.iter().enumerate().map(|(n, l)| lead(n, l)).collect();
        }
        let last = lines.len() - 1;
        let mut out: Vec<CommandLine> = lines[..Self::FOLD_AT]
            .iter()
            .enumerate()
            .map(|(n, l)| lead(n, l))
            .collect();
        out.push(CommandLine::Folded(last - Self::FOLD_AT));
        out.push(lead(last, lines[last]));
        out
    }
}

/// Markdown-escapes ordinary text (summaries, names, notes).
fn md(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    for (i, &c) in chars.iter().enumerate() {
        // An `_` inside a word (`torchinductor_root`) is no emphasis in GitHub's Markdown.
        let inside_word = c == '_'
            && i > 0
            && chars[i - 1].is_alphanumeric()
            && chars.get(i + 1).is_some_and(|n| n.is_alphanumeric());
        if "\\`*_[]<>|#~".contains(c) && !inside_word {
            out.push('\\');
        }
        out.push(c);
    }
    out.replace('\n', " ")
}

/// A code span that holds any text (a fence longer than any backtick run in it).
fn code_span(text: &str) -> String {
    let text = text.replace('\n', " ");
    let run = longest_backtick_run(&text);
    let fence = "`".repeat(run + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

/// A command after `- runs:` in a list item: inline when it is one line, else a block
/// under it (a code span would fold its lines into one).
fn code_in_list(text: &str) -> String {
    if text.contains('\n') {
        format!("\n\n{}", code_block(text, "     "))
    } else {
        format!(" {}\n", code_span(text))
    }
}

/// A fenced block holding `text` as it is, each line after `indent`.
fn code_block(text: &str, indent: &str) -> String {
    let fence = "`".repeat(longest_backtick_run(text).max(2) + 1);
    let mut out = format!("{indent}{fence}sh\n");
    for line in text.lines() {
        out.push_str(&format!("{indent}{line}\n"));
    }
    out.push_str(&format!("{indent}{fence}\n"));
    out
}

fn longest_backtick_run(text: &str) -> usize {
    let (mut best, mut cur) = (0, 0);
    for c in text.chars() {
        if c == '`' {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

/// Text in a table cell: GitHub's tables split cells at `|` even inside code spans.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

impl Plan {
    fn short_sha(&self) -> &str {
        &self.runbook.sha256[..self.runbook.sha256.len().min(12)]
    }

    fn steps_with_changes(&self) -> usize {
        let mut steps: Vec<usize> = self.changes.iter().map(|c| c.step).collect();
        steps.dedup();
        steps.len()
    }

    /// The changes, step by step: what `run` shows before it asks, and the heart of
    /// every rendering of a plan. `whole`: long scripts unfolded in text (Markdown always
    /// has them whole).
    pub fn render_changes(&self, style: Style, whole: bool) -> String {
        let mut out = String::new();
        let mut current = None;
        for (i, c) in self.changes.iter().enumerate() {
            if current != Some(c.step) {
                current = Some(c.step);
                match style {
                    Style::Text => out.push_str(&format!(
                        "  step \"{}\":\n",
                        crate::printable::line(&c.step_name)
                    )),
                    Style::Markdown => out.push_str(&format!(
                        "\n### Step {}: {}\n\n",
                        c.step + 1,
                        md(&c.step_name)
                    )),
                }
            }
            // The changes of one parallel() run in any order among themselves (the
            // enforcer holds every other change of a step to the order shown).
            let starts_group = c.parallel
                && (i == 0 || {
                    let b = &self.changes[i - 1];
                    !b.parallel || b.step != c.step
                });
            if starts_group {
                let last = (i..self.changes.len())
                    .take_while(|&j| self.changes[j].parallel && self.changes[j].step == c.step)
                    .last()
                    .unwrap_or(i);
                let what = format!(
                    "changes {} to {}, in any order (made by one parallel()):",
                    i + 1,
                    last + 1
                );
                match style {
                    Style::Text => out.push_str(&format!("    {what}\n")),
                    Style::Markdown => out.push_str(&format!("\n*{what}*\n\n")),
                }
            }
            let text = ChangeText {
                target: &c.target,
                summary: &c.summary,
                shown: &c.shown,
                destructive: c.destructive,
                may_delete: c.may_delete,
                exact: Some((&c.command, c.stdin_sha256.is_some())),
            };
            match style {
                Style::Text => out.push_str(&text.text("    - ", 8, whole)),
                Style::Markdown => out.push_str(&text.markdown(i + 1)),
            }
            if !c.known_after.is_empty() {
                out.push_str(&self.holes_note(c, style));
            }
        }
        out
    }

    /// What stands where a change says `(known after apply)`: the output of which
    /// earlier change.
    fn holes_note(&self, c: &Change, style: Style) -> String {
        let mut sources = c.known_after.clone();
        sources.sort();
        sources.dedup();
        let named: Vec<String> = sources
            .iter()
            .map(|&n| {
                let head = self
                    .changes
                    .get(n)
                    .map(|s| format!("on {}: {}", s.target, s.summary))
                    .unwrap_or_else(|| "a change this plan does not have".into());
                match style {
                    Style::Text => format!("change {} ({head})", n + 1),
                    Style::Markdown => format!("change {} ({})", n + 1, md(&head)),
                }
            })
            .collect();
        let what = format!(
            "where it says {}: what {} printed, once it has run",
            crate::known_after::SHOWN,
            named.join(" and ")
        );
        match style {
            Style::Text => format!("        {what}\n"),
            Style::Markdown => format!("   - {what}\n"),
        }
    }

    /// The Lua modules the plan loaded, as text lines or Markdown rows.
    fn module_lines(&self, style: Style) -> String {
        let mut out = String::new();
        if self.modules.is_empty() {
            return out;
        }
        match style {
            Style::Text => out.push_str("modules:\n"),
            Style::Markdown => {
                out.push_str("\n## Lua modules\n\n| module | file | digest |\n|---|---|---|\n")
            }
        }
        for m in &self.modules {
            let short = &m.sha256[..12.min(m.sha256.len())];
            match style {
                Style::Text => {
                    out.push_str(&format!("  {} ({}, sha256 {short}…)\n", m.name, m.path))
                }
                Style::Markdown => out.push_str(&format!(
                    "| {} | {} | sha256 {} |\n",
                    cell(&code_span(&m.name)),
                    cell(&code_span(&m.path)),
                    code_span(short)
                )),
            }
        }
        out
    }

    /// How the modules a runbook would load now differ from the plan's: `now(name)` is
    /// the module as `require` would load it now (or why it cannot be).
    pub fn module_differences(
        &self,
        now: impl Fn(&str) -> Result<PlannedModule, String>,
    ) -> Vec<String> {
        self.modules
            .iter()
            .filter_map(|m| match now(&m.name) {
                Ok(found) => module_difference(&self.modules, &found),
                Err(e) => Some(format!(
                    "module '{}' ({}): planned sha256 {}…, now: {e}",
                    m.name,
                    m.path,
                    &m.sha256[..12.min(m.sha256.len())]
                )),
            })
            .collect()
    }

    /// The whole plan: header, params, targets, changes, skipped steps and notes; `saved`
    /// is the plan file (as named, and its sha256), when there is one: what `apply` takes
    /// and what its record and `history` name.
    /// `whole`: as for `render_changes`.
    pub fn render(&self, style: Style, saved: Option<(&str, &str)>, whole: bool) -> String {
        // Whatever else of the plan's text holds a control character is shown escaped.
        let text = match style {
            Style::Text => self.render_text(saved, whole),
            Style::Markdown => self.render_markdown(saved),
        };
        crate::printable::block(&text).into_owned()
    }

    /// Each param: its value as text, or what is known about it (unset, a secret).
    fn param_rows(&self) -> Vec<(&str, Result<String, &'static str>)> {
        self.params
            .iter()
            .map(|(k, p)| {
                let v = match (p.secret, &p.sha256, &p.value) {
                    (true, Some(_), _) => {
                        Err("secret: set; the plan holds only a salted sha256 of it")
                    }
                    (true, None, _) => Err("secret: unset"),
                    (false, _, None | Some(serde_json::Value::Null)) => Err("unset"),
                    (false, _, Some(serde_json::Value::String(s))) => Ok(s.clone()),
                    (false, _, Some(v)) => Ok(v.to_string()),
                };
                (k.as_str(), v)
            })
            .collect()
    }

    fn target_text(t: &PlannedTarget) -> String {
        let mut s = match (&t.user, &t.host, t.port) {
            (Some(u), Some(h), Some(p)) => format!("{u}@{h} port {p}"),
            (None, Some(h), Some(p)) => format!("{h} port {p}"),
            (_, Some(h), None) => h.clone(),
            _ => "this machine".into(),
        };
        if let Some(c) = &t.container {
            s.push_str(&format!(", container {}", c.trim_start_matches("ct")));
        }
        // The machine itself, as apply compares it: a name is only a way there.
        if let Some(id) = &t.identity {
            s.push_str(&format!(" ({})", id.text()));
        }
        s
    }

    /// The ssh_config and inventory the targets are reached with, each path through
    /// `path`: apply uses them (a `Match exec` in an ssh_config runs a command), so every
    /// rendering of a plan names them. None when the plan names neither.
    fn reached_with_text(&self, path: impl Fn(&str) -> String) -> Option<String> {
        let r = &self.reached_with;
        let parts: Vec<String> = [("ssh_config", &r.ssh_config), ("inventory", &r.inventory)]
            .into_iter()
            .filter_map(|(what, p)| Some(format!("{what} {}", path(p.as_deref()?))))
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    fn summary_line(&self) -> String {
        let destructive = self.changes.iter().filter(|c| c.destructive).count();
        let mut s = format!(
            "{} in {}",
            count(self.changes.len(), "change", "changes"),
            count(self.steps_with_changes(), "step", "steps")
        );
        if destructive > 0 {
            s.push_str(&format!(
                ", {destructive} of them destructive (delete, rebuild or restore something)"
            ));
        }
        let may = self.changes.iter().filter(|c| c.may_delete).count();
        if may > 0 {
            s.push_str(&format!(
                ", {may} that may delete (runbook cannot tell from the command)"
            ));
        }
        s
    }

    fn render_text(&self, saved: Option<(&str, &str)>, whole: bool) -> String {
        let mut out = format!(
            "plan for {} ({}, sha256 {}…), made {} by {} with runbook {}{}\n",
            self.runbook.name,
            self.runbook.path,
            self.short_sha(),
            self.created,
            self.created_by,
            self.runbook_version,
            if self.mode == "dry-run-offline" {
                " offline (reads did not run)"
            } else {
                ""
            }
        );
        if let Some((path, sha)) = saved {
            out.push_str(&format!(
                "plan file: {path} (sha256 {}…): apply it with runbook apply {path}\n",
                &sha[..12.min(sha.len())]
            ));
        }
        let params = self.param_rows();
        if !params.is_empty() {
            out.push_str("params:\n");
            for (k, v) in params {
                // Quoted, so that an empty value or one with spaces reads as what it is.
                let v = v.map_or_else(|note| format!("({note})"), |v| format!("{v:?}"));
                out.push_str(&format!("  {k} = {v}\n"));
            }
        }
        if !self.targets.is_empty() {
            out.push_str("targets:\n");
            for t in &self.targets {
                out.push_str(&format!("  {}: {}\n", t.name, Self::target_text(t)));
            }
        }
        if let Some(reached) = self.reached_with_text(|p| p.to_string()) {
            out.push_str(&format!("reached with: {reached}\n"));
        }
        out.push_str(&self.module_lines(Style::Text));
        out.push_str(&format!("{}:\n", self.summary_line()));
        out.push_str(&self.render_changes(Style::Text, whole));
        for s in &self.steps {
            if s.outcome == "skipped" {
                out.push_str(&format!(
                    "  step \"{}\" is skipped: {}\n",
                    s.name,
                    s.reason.as_deref().unwrap_or("")
                ));
            }
            for n in &s.notes {
                out.push_str(&format!(
                    "  step \"{}\" says ({}): {}\n",
                    s.name, n.level, n.message
                ));
            }
        }
        out
    }

    fn render_markdown(&self, saved: Option<(&str, &str)>) -> String {
        let mut out = format!("# Plan: {}\n\n", md(&self.runbook.name));
        if let Some(d) = &self.runbook.description {
            out.push_str(&format!("{}\n\n", md(d)));
        }
        out.push_str(
            "Made by running the runbook's reads; nothing was changed. Applying this plan makes \
             exactly the changes listed below, in this order, and stops before any change that \
             differs from them.\n\n",
        );
        out.push_str("| | |\n|---|---|\n");
        out.push_str(&format!(
            "| runbook | {} (sha256 {}) |\n",
            cell(&code_span(&self.runbook.path)),
            code_span(self.short_sha())
        ));
        out.push_str(&format!(
            "| made | {} by {} with runbook {}{} |\n",
            md(&self.created),
            md(&self.created_by),
            md(&self.runbook_version),
            if self.mode == "dry-run-offline" {
                ", offline (reads did not run)"
            } else {
                ""
            }
        ));
        out.push_str(&format!("| changes | {} |\n", md(&self.summary_line())));
        if let Some(reached) = self.reached_with_text(|p| cell(&code_span(p))) {
            out.push_str(&format!("| reached with | {reached} |\n"));
        }
        let (file, sha) = saved.unwrap_or(("PLAN.json", ""));
        if !sha.is_empty() {
            out.push_str(&format!(
                "| plan file | {} (sha256 {}: what the record of its apply names) |\n",
                cell(&code_span(file)),
                code_span(&sha[..12.min(sha.len())])
            ));
        }
        out.push_str(&format!(
            "| apply | {} (refused if the runbook, params or targets differ, or once the plan is older than --max-age, 1h by default) |\n",
            cell(&code_span(&format!("runbook apply {file}")))
        ));
        let params = self.param_rows();
        if !params.is_empty() {
            out.push_str("\n## Params\n\n| param | value |\n|---|---|\n");
            for (k, v) in params {
                let shown = match v {
                    Ok(v) if v.is_empty() => "*empty*".to_string(),
                    Ok(v) => cell(&code_span(&v)),
                    Err(note) => format!("*{}*", md(note)),
                };
                out.push_str(&format!("| {} | {shown} |\n", md(k)));
            }
        }
        if !self.targets.is_empty() {
            out.push_str("\n## Targets\n\n| target | where |\n|---|---|\n");
            for t in &self.targets {
                out.push_str(&format!(
                    "| {} | {} |\n",
                    cell(&code_span(&t.name)),
                    md(&Self::target_text(t))
                ));
            }
        }
        out.push_str(&self.module_lines(Style::Markdown));
        out.push_str("\n## Changes\n");
        if self.changes.is_empty() {
            out.push_str("\nNone: this runbook only reads.\n");
        } else {
            out.push_str(&self.render_changes(Style::Markdown, true));
        }
        let skipped: Vec<&PlannedStep> = self
            .steps
            .iter()
            .filter(|s| s.outcome == "skipped")
            .collect();
        if !skipped.is_empty() {
            out.push_str("\n## Skipped steps\n\n");
            for s in skipped {
                out.push_str(&format!(
                    "- Step {}: {}: {}\n",
                    s.index + 1,
                    md(&s.name),
                    md(s.reason.as_deref().unwrap_or(""))
                ));
            }
        }
        let noted: Vec<&PlannedStep> = self.steps.iter().filter(|s| !s.notes.is_empty()).collect();
        if !noted.is_empty() {
            out.push_str("\n## What the steps said\n\n");
            for s in noted {
                for n in &s.notes {
                    out.push_str(&format!(
                        "- Step {} ({}), {}: {}\n",
                        s.index + 1,
                        md(&s.name),
                        n.level,
                        md(&n.message)
                    ));
                }
            }
        }
        if !self.reads.is_empty() {
            out.push_str(&format!(
                "\n<details><summary>What the plan read ({})</summary>\n\n",
                html(&count(self.reads.len(), "read", "reads"))
            ));
            for r in &self.reads {
                out.push_str(&format!(
                    "- Step {}, on {}: {}\n",
                    r.step + 1,
                    code_span(&r.target),
                    md(&r.summary)
                ));
            }
            out.push_str("\n</details>\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn salt() -> Salt {
        Salt("00".into())
    }

    /// The masker of a run without secrets.
    fn plain(text: &str) -> String {
        text.to_string()
    }

    fn seen<'a>(step: usize, command: &'a str) -> Seen<'a> {
        Seen {
            step,
            step_name: "s",
            target: "local",
            destination: "local",
            command,
            shown: command,
            stdin: None,
            summary: command,
            destructive: false,
            may_delete: false,
        }
    }

    fn plan(changes: &[(usize, &str)]) -> Plan {
        let mut rec = Recording::new(salt());
        for (step, command) in changes {
            rec.change(&seen(*step, command));
        }
        Plan {
            format: FORMAT,
            runbook_version: env!("CARGO_PKG_VERSION").into(),
            created: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            created_by: "me@here".into(),
            mode: "dry-run".into(),
            runbook: PlannedRunbook {
                name: "t".into(),
                description: None,
                path: "t.lua".into(),
                file: None,
                shipped: None,
                sha256: "ab".repeat(32),
            },
            modules: Vec::new(),
            salt: rec.salt,
            params: BTreeMap::new(),
            reached_with: ReachedWith::default(),
            targets: Vec::new(),
            steps: Vec::new(),
            changes: rec.changes,
            reads: rec.reads,
        }
    }

    #[test]
    fn the_confirmed_changes_run_in_order_and_nothing_else() {
        let mut e = Enforcer::new(&plan(&[(0, "rm -rf -- /x/A"), (1, "touch b")]));
        e.step_attempt(0);
        assert!(e.allow(&seen(0, "rm -rf -- /x/A"), &plain).is_ok());
        e.step_attempt(1);
        let err = e.allow(&seen(1, "rm -rf -- /x/B"), &plain).unwrap_err();
        assert!(
            err.contains("confirmed: touch b") && err.contains("now:       rm -rf -- /x/B"),
            "{err}"
        );
        // Sticky: the confirmed change itself no longer runs either.
        assert!(e.allow(&seen(1, "touch b"), &plain).is_err());
    }

    #[test]
    fn a_retry_repeats_its_steps_changes() {
        let mut e = Enforcer::new(&plan(&[(0, "a"), (0, "b"), (1, "c")]));
        e.step_attempt(0);
        assert!(e.allow(&seen(0, "a"), &plain).is_ok());
        e.step_attempt(0);
        assert!(e.allow(&seen(0, "a"), &plain).is_ok());
        assert!(e.allow(&seen(0, "b"), &plain).is_ok());
        e.step_attempt(1);
        assert!(e.allow(&seen(1, "c"), &plain).is_ok());
        assert!(e
            .allow(&seen(1, "d"), &plain)
            .unwrap_err()
            .contains("nothing more in this step"));
    }

    /// A change the user saw in a later step does not run in an earlier one (review F2).
    #[test]
    fn a_confirmed_change_does_not_run_in_another_step() {
        let mut e = Enforcer::new(&plan(&[(2, "rm -f canary")]));
        e.step_attempt(0);
        let err = e.allow(&seen(0, "rm -f canary"), &plain).unwrap_err();
        assert!(err.contains("confirmed for another step"), "{err}");
    }

    /// After a failure the run skips steps; an `always` step's confirmed change still
    /// runs (review F3).
    #[test]
    fn skipped_steps_changes_are_passed_over() {
        let mut e = Enforcer::new(&plan(&[
            (0, "touch started"),
            (1, "touch more"),
            (2, "rm -f started"),
        ]));
        e.step_attempt(0);
        assert!(e.allow(&seen(0, "touch started"), &plain).is_ok());
        // step 1 skipped; step 2 (always) runs
        e.step_attempt(2);
        assert!(e.allow(&seen(2, "rm -f started"), &plain).is_ok());
        // a step with no confirmed change may make none
        e.step_attempt(3);
        assert!(e.allow(&seen(3, "touch x"), &plain).is_err());
    }

    /// `parallel()` items finish in any order: among the changes one made, any may
    /// come next, each once.
    #[test]
    fn a_parallels_changes_run_in_any_order_but_each_once() {
        let mut p = plan(&[(0, "touch a"), (0, "touch b")]);
        for c in &mut p.changes {
            c.parallel = true;
        }
        assert!(p.render(Style::Text, None, false).contains("in any order"));
        let mut e = Enforcer::new(&p);
        e.step_attempt(0);
        assert!(e.allow(&seen(0, "touch b"), &plain).is_ok());
        assert!(e.allow(&seen(0, "touch a"), &plain).is_ok());
        assert!(e.allow(&seen(0, "touch a"), &plain).is_err());
    }

    /// Every other change of a step runs in the order the plan shows (review: a plan
    /// whose changes were swapped showed one order and ran another). One the step no
    /// longer makes may be left out at its end, not passed over: a retry may pass over
    /// what an earlier attempt made.
    #[test]
    fn a_steps_changes_run_in_the_order_shown() {
        let p = plan(&[(0, "backup"), (0, "delete"), (0, "report")]);
        let mut e = Enforcer::new(&p);
        e.step_attempt(0);
        let err = e.allow(&seen(0, "delete"), &plain).unwrap_err();
        assert!(
            err.contains("out of the order") && err.contains("change 1"),
            "{err}"
        );
        let mut e = Enforcer::new(&p);
        e.step_attempt(0);
        assert!(e.allow(&seen(0, "backup"), &plain).is_ok());
        e.step_attempt(0);
        assert!(e.allow(&seen(0, "delete"), &plain).is_ok());
        assert!(e.allow(&seen(0, "backup"), &plain).is_err());
        // And a plan listing a later step's change first does not hold together.
        let mut p = plan(&[(0, "a"), (1, "b")]);
        p.changes.swap(0, 1);
        assert!(
            p.unbound().iter().any(|w| w.contains("field \"step\"")),
            "{:?}",
            p.unbound()
        );
    }

    /// A `***` in a command is checked against its digest unless the recording masked it.
    #[test]
    fn only_a_masked_command_goes_unchecked() {
        let mut p = plan(&[(0, "echo one")]);
        p.changes[0].command = "echo *** two".into();
        assert!(p.unbound().iter().any(|w| w.contains("command_sha256")));
        p.changes[0].masked = true;
        assert!(p.unbound().iter().all(|w| !w.contains("command_sha256")));
    }

    #[test]
    fn different_stdin_is_a_difference() {
        let mut rec = Recording::new(salt());
        rec.change(&Seen {
            stdin: Some(b"one"),
            ..seen(0, "tee f")
        });
        let mut p = plan(&[]);
        p.changes = rec.changes;
        let mut e = Enforcer::new(&p);
        e.step_attempt(0);
        let err = e
            .allow(
                &Seen {
                    stdin: Some(b"two"),
                    ..seen(0, "tee f")
                },
                &plain,
            )
            .unwrap_err();
        assert!(err.contains("different standard input"), "{err}");
    }

    /// The same name, somewhere else (an ssh_config alias that now points at another
    /// machine): a difference, shown with both destinations.
    #[test]
    fn another_destination_is_a_difference() {
        let mut e = Enforcer::new(&plan(&[(0, "touch a")]));
        e.step_attempt(0);
        let err = e
            .allow(
                &Seen {
                    destination: "root@10.0.0.9:22",
                    ..seen(0, "touch a")
                },
                &plain,
            )
            .unwrap_err();
        assert!(err.contains("(root@10.0.0.9:22)"), "{err}");
    }

    /// What a person reads of a change is held to the real change, not only its
    /// digests: a plan whose text of a change was edited stops the run before it, naming
    /// the field; before any change ran, that is the plan refused.
    #[test]
    fn a_change_shown_otherwise_than_it_is_is_refused() {
        type Edit = fn(&mut Change);
        let edits: [(&str, Edit); 7] = [
            ("summary", |c| c.summary = "delete old-junk".into()),
            ("shown", |c| c.shown = "rm old-junk".into()),
            ("command", |c| c.command = "rm old-junk".into()),
            ("destructive", |c| c.destructive = true),
            ("may_delete", |c| c.may_delete = true),
            ("step_name", |c| c.step_name = "tidy".into()),
            ("target", |c| c.target = "staging".into()),
        ];
        for (field, edit) in edits {
            let mut p = plan(&[(0, "rm -rf -- /x/A")]);
            edit(&mut p.changes[0]);
            let mut e = Enforcer::new(&p);
            e.step_attempt(0);
            let err = e.allow(&seen(0, "rm -rf -- /x/A"), &plain).unwrap_err();
            assert!(
                err.contains(&format!(
                    "change 1: field \"{field}\" is not what the change is"
                )),
                "{field}: {err}"
            );
            assert!(e.refused().is_some(), "{field}");
        }
        // After a change ran, the stop is no longer "nothing was changed".
        let mut p = plan(&[(0, "touch a"), (0, "touch b")]);
        p.changes[1].summary = "touch c".into();
        let mut e = Enforcer::new(&p);
        e.step_attempt(0);
        e.allow(&seen(0, "touch a"), &plain).unwrap();
        assert!(e.allow(&seen(0, "touch b"), &plain).is_err());
        assert_eq!(e.refused(), None);
        // A plan holds its texts masked; the real change, masked the same, is the plan's.
        let mask = |t: &str| t.replace("hunter2", crate::secrets::MASK);
        let mut p = plan(&[(0, "curl -u hunter2 x")]);
        for c in &mut p.changes {
            c.command = mask(&c.command);
            c.shown = mask(&c.shown);
            c.summary = mask(&c.summary);
        }
        let mut e = Enforcer::new(&p);
        e.step_attempt(0);
        e.allow(&seen(0, "curl -u hunter2 x"), &mask).unwrap();
    }

    /// The checks a plan file gets from itself alone, each naming the field.
    #[test]
    fn a_plan_file_that_does_not_hold_together_names_the_field() {
        let mut p = plan(&[(0, "touch a")]);
        p.steps = vec![PlannedStep {
            index: 0,
            name: "s".into(),
            outcome: "planned".into(),
            reason: None,
            confirm: false,
            notes: Vec::new(),
        }];
        assert_eq!(p.unbound(), Vec::<String>::new());
        let unbound = |edit: fn(&mut Plan)| {
            let mut q = p.clone();
            edit(&mut q);
            q.unbound().join("\n")
        };
        assert!(unbound(|q| q.changes[0].command = "touch b".into())
            .contains("change 1: field \"command\" does not match its command_sha256"));
        // Masked, the text cannot be checked against its digest: the run checks it. A
        // `***` the recording did not put there is checked as any text.
        assert_eq!(
            unbound(|q| {
                q.changes[0].command = "touch ***".into();
                q.changes[0].masked = true;
            }),
            ""
        );
        assert!(unbound(|q| q.changes[0].command = "touch ***".into())
            .contains("change 1: field \"command\" does not match its command_sha256"));
        assert!(unbound(|q| q.changes[0].step_name = "t".into())
            .contains("change 1: field \"step_name\" is \"t\", and step 1 of the plan is \"s\""));
        assert!(unbound(|q| q.changes[0].step = 4).contains("change 1: field \"step\" is 5"));
        assert!(unbound(|q| q.changes[0].target = "node1".into())
            .contains("change 1: field \"target\" is \"node1\", not one of the plan's targets"));
        assert!(unbound(|q| {
            let mut t = PlannedTarget::of(&Target::Local, "root@10.0.0.5:22", None);
            t.name = "local".into();
            t.host = Some("10.0.0.9".into());
            q.targets.push(t);
        })
        .contains(
            "target local: field \"host\" is not what its destination root@10.0.0.5:22 says"
        ));
    }

    /// A change that uses an earlier one's output is a template: `(known after apply)`
    /// where the output stands, and in a real run only that change's real output may
    /// stand there; the command may differ nowhere else.
    #[test]
    fn a_hole_holds_only_what_its_change_printed() {
        use crate::known_after::{forms, KnownAfter};
        use crate::targets::ExecRequest;
        let planning = KnownAfter::random();
        let mut rec = Recording::new(salt()).with_known_after(planning.clone());
        assert_eq!(rec.change(&seen(0, "mktemp -d")), 0);
        assert_eq!(rec.change(&seen(0, "mktemp -d")), 1);
        let cmd = format!("touch {}/file", planning.token(0));
        rec.change(&seen(1, &cmd));
        assert_eq!(rec.changes[2].known_after, [0]);
        assert_eq!(rec.changes[2].command, "touch (known after apply)/file");
        assert_eq!(rec.changes[2].summary, "touch (known after apply)/file");
        let mut p = plan(&[]);
        p.changes = rec.changes;
        // The real run: its own placeholders read the real command back.
        let real = KnownAfter::random();
        let read_back = |e: &Enforcer, argv: &[&str]| -> Vec<Templated> {
            let req = ExecRequest {
                argv: argv.iter().map(Into::into).collect(),
                ..ExecRequest::default()
            };
            real.templates(&req, &e.fills())
                .into_iter()
                .map(|r| Templated {
                    command: real.marked(Target::Local.render(&r).as_bytes()).0,
                    stdin: None,
                })
                .collect()
        };
        let ran = |outputs: bool| {
            let mut e = Enforcer::new(&p);
            e.step_attempt(0);
            let a = e.allow(&seen(0, "mktemp -d"), &plain).unwrap();
            let b = e.allow(&seen(0, "mktemp -d"), &plain).unwrap();
            if outputs {
                e.output(a, b"/tmp/d.1\n");
                e.output(b, b"/tmp/d.2\n");
            }
            e.step_attempt(1);
            e
        };
        let mut e = ran(true);
        assert_eq!(e.fills(), vec![(0, forms(b"/tmp/d.1\n"))]);
        let t = read_back(&e, &["touch", "/tmp/d.1/file"]);
        assert!(e
            .allow_templated(&seen(1, "touch /tmp/d.1/file"), &t, &plain)
            .is_ok());
        // Another change's output in the hole, a difference beside it, or the exact
        // command without reading it back: refused.
        for argv in [["touch", "/tmp/d.2/file"], ["touch", "/tmp/d.1/file2"]] {
            let mut e = ran(true);
            let t = read_back(&e, &argv);
            let err = e
                .allow_templated(&seen(1, &argv.join(" ")), &t, &plain)
                .unwrap_err();
            assert!(
                err.contains("confirmed: touch (known after apply)/file"),
                "{err}"
            );
            assert!(err.contains("only what change 1 printed"), "{err}");
        }
        assert!(ran(true)
            .allow(&seen(1, "touch /tmp/d.1/file"), &plain)
            .is_err());
        // The change a hole names has not run (no output kept): nothing fits it.
        let mut e = ran(false);
        assert!(e.fills().is_empty());
        assert!(e
            .allow_templated(&seen(1, "touch /tmp/d.1/file"), &[], &plain)
            .is_err());
    }

    #[test]
    fn modules_are_held_to_the_plan() {
        let m = |name: &str, sha: &str| PlannedModule {
            name: name.into(),
            path: format!("{name}.lua"),
            sha256: sha.repeat(32),
        };
        let mut held = Modules::default();
        held.load(m("top", "aa")).unwrap();
        let err = held.hold_to(&[m("top", "bb")]).unwrap_err();
        assert_eq!(
            err,
            ["module 'top' (top.lua): planned sha256 bbbbbbbbbbbb…, now aaaaaaaaaaaa…"]
        );
        let mut held = Modules::default();
        held.hold_to(&[m("a", "aa")]).unwrap();
        held.load(m("a", "aa")).unwrap();
        assert!(held
            .load(m("a", "cc"))
            .unwrap_err()
            .contains("planned sha256 aaaa"));
        assert!(held
            .load(m("b", "aa"))
            .unwrap_err()
            .contains("is not in the plan"));
        assert_eq!(held.loaded(), [m("a", "aa")]);
    }

    #[test]
    fn a_read_that_returns_something_else_is_a_warning_until_its_target_changed() {
        let mut rec = Recording::new(salt());
        rec.read(&seen(0, "cat which"), Some((Some(0), b"A\n")));
        rec.read(&seen(0, "cat which"), Some((Some(0), b"A\n")));
        rec.read(&seen(1, "cat which"), Some((Some(0), b"A\n")));
        let mut p = plan(&[(0, "touch x")]);
        p.reads = rec.reads;
        let mut e = Enforcer::new(&p);
        e.step_attempt(0);
        assert_eq!(
            e.read(&seen(0, "cat which"), Some(0), Some(b"A\n"), &plain),
            Ok(None)
        );
        let warned = e
            .read(&seen(0, "cat which"), Some(1), Some(b"B\n"), &plain)
            .unwrap()
            .unwrap();
        assert!(warned.contains("exit code 0 then, 1 now"), "{warned}");
        e.allow(&seen(0, "touch x"), &plain).unwrap();
        e.step_attempt(1);
        // After this run changed the target, its reads are expected to differ.
        assert_eq!(
            e.read(&seen(1, "cat which"), Some(0), Some(b"B\n"), &plain),
            Ok(None)
        );
    }

    /// Held to a saved plan, a read and a note are shown as the plan shows them (review:
    /// an edited summary and note were shown and applied): before any change a
    /// difference refuses the plan; after one it is a warning.
    #[test]
    fn a_saved_plans_reads_and_notes_are_held_to_the_run() {
        let mut rec = Recording::new(salt());
        rec.read(&seen(0, "cat which"), Some((Some(0), b"A\n")));
        let mut p = plan(&[(0, "touch x")]);
        p.reads = rec.reads;
        p.reads[0].summary = "verified the backup".into();
        let mut e = Enforcer::new(&p).hold_texts();
        e.step_attempt(0);
        let err = e
            .read(&seen(0, "cat which"), Some(0), Some(b"A\n"), &plain)
            .unwrap_err();
        assert!(err.contains("read 1: field \"summary\""), "{err}");
        assert!(e.refused().is_some() && e.allow(&seen(0, "touch x"), &plain).is_err());
        let mut p = plan(&[(0, "touch x")]);
        p.steps = vec![PlannedStep {
            index: 0,
            name: "s".into(),
            outcome: "planned".into(),
            reason: None,
            confirm: false,
            notes: vec![Note {
                level: crate::events::Level::Info,
                message: "backup verified".into(),
            }],
        }];
        let info = crate::events::Level::Info;
        let mut e = Enforcer::new(&p).hold_texts();
        e.step_attempt(0);
        assert_eq!(e.note(0, info, "backup verified"), Ok(None));
        e.allow(&seen(0, "touch x"), &plain).unwrap();
        assert!(e.note(0, info, "took 3s").unwrap().is_some());
        let mut e = Enforcer::new(&p).hold_texts();
        e.step_attempt(0);
        let err = e.note(0, info, "backup missing").unwrap_err();
        assert!(err.contains("field \"steps[].notes\""), "{err}");
        // The branches of a parallel() say theirs in the order they finish.
        let mut q = p.clone();
        q.steps[0].notes = ["node1: up", "node2: up"]
            .map(|m| Note {
                level: info,
                message: m.into(),
            })
            .to_vec();
        let mut e = Enforcer::new(&q).hold_texts();
        e.step_attempt(0);
        assert_eq!(e.note(0, info, "node2: up"), Ok(None));
        assert_eq!(e.note(0, info, "node1: up"), Ok(None));
        let err = e.note(0, info, "node1: up").unwrap_err();
        assert!(err.contains("saying nothing more"), "said once only: {err}");
        // An in-memory plan (`run`'s confirmation) is the run's own: not held.
        let mut e = Enforcer::new(&p);
        e.step_attempt(0);
        assert_eq!(e.note(0, info, "backup missing"), Ok(None));
    }

    #[test]
    fn digests_are_salted() {
        let (a, b) = (Salt("aa".into()), Salt("bb".into()));
        assert_ne!(a.digest(b"hunter2"), b.digest(b"hunter2"));
        assert_ne!(a.digest(b"hunter2"), file_sha256(b"hunter2"));
        assert_ne!(Salt::random(), Salt::random());
    }

    #[test]
    fn a_plan_round_trips_and_unknown_formats_are_refused() {
        let p = plan(&[(0, "touch a")]);
        let text = p.to_json();
        assert_eq!(Plan::parse(&text, "p.json").unwrap(), p);
        let future = text.replacen("\"format\": 1", "\"format\": 2", 1);
        let err = Plan::parse(&future, "p.json").unwrap_err();
        assert!(
            err.contains("plan format 2 is not one this runbook"),
            "{err}"
        );
        let err = Plan::parse("{}", "p.json").unwrap_err();
        assert!(err.contains("no \"format\" field"), "{err}");
        let err = Plan::parse("[1,", "p.json").unwrap_err();
        assert!(err.contains("not JSON"), "{err}");
    }

    #[test]
    fn an_old_plan_is_refused() {
        let mut p = plan(&[]);
        let now = SystemTime::now();
        assert!(p.check_made(Duration::from_secs(3600), now).is_ok());
        p.created = humantime::format_rfc3339_seconds(now - Duration::from_secs(7200)).to_string();
        let err = p.check_made(Duration::from_secs(3600), now).unwrap_err();
        assert!(err.contains("made 2h ago"), "{err}");
        p.created = humantime::format_rfc3339_seconds(now + Duration::from_secs(7200)).to_string();
        assert!(p
            .check_made(Duration::from_secs(3600), now)
            .unwrap_err()
            .contains("in the future"));
    }

    #[test]
    fn markdown_holds_any_text() {
        assert_eq!(md("a*b_c|d _e_"), "a\\*b_c\\|d \\_e\\_");
        assert_eq!(code_span("rm `x`"), "`` rm `x` ``");
        assert_eq!(code_span("plain"), "`plain`");
    }

    #[test]
    fn a_destination_is_split_into_its_parts() {
        let t = PlannedTarget::of(&Target::Local, "root@127.0.0.1:2222/ct200", None);
        assert_eq!(t.user.as_deref(), Some("root"));
        assert_eq!(t.host.as_deref(), Some("127.0.0.1"));
        assert_eq!(t.port, Some(2222));
        assert_eq!(t.container.as_deref(), Some("ct200"));
        let l = PlannedTarget::of(&Target::Local, "local", None);
        assert_eq!((l.user, l.host, l.port), (None, None, None));
        let v6 = PlannedTarget::of(&Target::Local, "u@::1:22", None);
        assert_eq!((v6.host.as_deref(), v6.port), (Some("::1"), Some(22)));
    }

    /// A long script folds to its first lines and its last (its arguments), saying how
    /// many were left out; a short one, or one asked for whole, is shown as it is; a
    /// command its summary already says is not repeated.
    #[test]
    fn a_change_reads_the_same_wherever_it_is_shown() {
        let script: String = (1..=10).map(|n| format!("line {n}\n")).collect();
        let text = ChangeText {
            target: "local",
            summary: "sh -c: …",
            shown: script.trim_end(),
            destructive: true,
            may_delete: false,
            exact: None,
        };
        assert_eq!(text.head(), "on local: sh -c: …  [deletes]");
        let folded = text.command(false);
        assert_eq!(folded.len(), 6);
        assert_eq!(folded[0], CommandLine::First("line 1".into()));
        assert_eq!(folded[4], CommandLine::Folded(5));
        assert_eq!(folded[5], CommandLine::More("line 10".into()));
        assert_eq!(text.command(true).len(), 10);
        let shown = text.text("  ~ ", 6, false);
        assert!(shown.contains("\n      $ line 1\nline 2\n"), "{shown}");
        assert!(text
            .markdown(3)
            .starts_with("3. **destructive** · on `local`: "));
        let plain = ChangeText {
            target: "local",
            summary: "true",
            shown: "true",
            destructive: false,
            may_delete: false,
            exact: None,
        };
        assert_eq!(plain.head(), "on local: true");
        let unsure = ChangeText {
            may_delete: true,
            ..plain
        };
        assert_eq!(unsure.head(), "on local: true  [may delete]");
        assert!(unsure
            .markdown(1)
            .starts_with("1. **may delete** · on `local`"));
        assert!(plain.command(false).is_empty());
        assert_eq!(plain.text("- ", 4, false), "- on local: true\n");
    }
}
