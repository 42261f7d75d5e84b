//! Making a plan: what the plan pass records in its context as its steps run
//! (`Recording`), and the plan assembled from it afterwards (`Plan::assemble`).

use super::*;

use crate::actions::events::Event;
use crate::actions::known_after::KnownAfter;
use crate::base::params::Header;
use crate::targets::identity::Identity;
use crate::targets::Target;
use std::collections::BTreeMap;
use std::time::SystemTime;

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
            change.diff = change.diff.as_deref().map(|d| known.shown(d));
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
                    ..
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
                } if *level != crate::actions::events::Level::Debug => {
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
            c.diff = c.diff.as_deref().map(mask);
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
}
