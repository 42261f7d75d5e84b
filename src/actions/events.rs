//! Everything that happens in a run is an [`Event`]; nothing prints directly.
//!
//! The engine emits events into a [`Bus`], which masks secrets once and hands each event
//! to every sink: the terminal, `--json` (NDJSON on stdout) and the run record (JSONL).
//! The same serialized form is what `--json` prints and what the record stores, and it is
//! documented in `docs/EVENTS.md`.

use crate::base::chain::{self, Chain};
use crate::base::secrets::Masker;
pub use crate::targets::Stream;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    RunStarted {
        run_id: String,
        runbook: String,
        path: String,
        content_hash: String,
        params: BTreeMap<String, serde_json::Value>,
        /// "real", "dry-run" or "dry-run-offline".
        mode: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resumed_from: Option<String>,
        user: String,
        host: String,
        /// sha256 of the plan file this run applied (`runbook apply`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        plan: Option<String>,
        /// Who signed the plan as its author (the principal of `allowed_signers`), when
        /// it was signed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        author: Option<String>,
        /// Who approved it, each once, in the order their approvals were verified.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        approvers: Vec<String>,
        /// `--limit`: the hosts of the inventory's groups the run kept.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<String>,
    },
    StepStarted {
        index: usize,
        name: String,
        attempt: u32,
    },
    StepSkipped {
        index: usize,
        name: String,
        reason: String,
        /// The run in which the step succeeded, when it is skipped for that (`--resume`):
        /// a later resume reads this, never the reason's wording.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        done_in: Option<String>,
    },
    StepFinished {
        index: usize,
        name: String,
        outcome: StepOutcome,
        duration_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// One of runbook's own scripts, the first time an action of this run uses it: its
    /// body is here once, and the actions that run it name it by `name` and `sha256`.
    Script {
        name: String,
        sha256: String,
        body: String,
    },
    /// A change that a dry-run would make (or, offline, a read it would do).
    ActionPlanned {
        step: usize,
        action: u64,
        target: String,
        effect: Effect,
        summary: String,
        command: String,
        #[serde(default)]
        destructive: bool,
        /// It may delete: runbook cannot tell from its words (`base/classify/`).
        #[serde(default, skip_serializing_if = "is_false")]
        may_delete: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        script: Option<ScriptRef>,
        /// What the change does to a file's content (`file.put`, `file.template`): a
        /// unified diff of the file as read and as it will be, or a line with both sizes
        /// and digests for a binary or huge file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<String>,
    },
    ActionStarted {
        step: usize,
        action: u64,
        target: String,
        effect: Effect,
        summary: String,
        command: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        script: Option<ScriptRef>,
        /// A read answered with what the same read answered in the confirmation's
        /// dry-run moments before, not sent again (`kept_reads.rs`).
        #[serde(default, skip_serializing_if = "is_false")]
        replayed: bool,
        /// As `action_planned`'s: what the change does to a file's content.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<String>,
    },
    /// A started command's process group, once known: what lets a later `--resume` find
    /// the command if this run dies before it ends (see `orphans.rs`).
    ActionPgid {
        step: usize,
        action: u64,
        target: String,
        pgid: u32,
        /// The group leader's start time (`/proc/PGID/stat` field 22, clock ticks after
        /// boot) on the target; absent where the target has no /proc.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start_time: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        boot_id: Option<String>,
        /// How to reach the target again, outermost hop first; empty: this machine.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        via: Vec<crate::targets::Hop>,
    },
    /// The action runs detached (`detach = true`): job `job` in runbook's directory on
    /// the target, which `--resume` follows again and `runbook ps`/`stop` find.
    ActionDetached {
        step: usize,
        action: u64,
        target: String,
        job: String,
    },
    Output {
        step: usize,
        action: u64,
        stream: Stream,
        line: String,
    },
    ActionFinished {
        step: usize,
        action: u64,
        ok: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        duration_ms: u64,
        #[serde(default, skip_serializing_if = "is_false")]
        timed_out: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// The connection went away while it ran: its exit status is unknown and it may
        /// still run there (`--resume` looks for it, `orphans.rs`).
        #[serde(default, skip_serializing_if = "is_false")]
        connection_lost: bool,
        /// The last few KiB of each stream; every line is also in its own `output` event.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        stdout_tail: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        stderr_tail: String,
    },
    Log {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<usize>,
        level: Level,
        message: String,
    },
    /// One item of a `rollout()`: its batch (1-based; 0 for an item whose batch never
    /// began) and how it ended: `ok`, `failed`, `not_started` once the failure budget
    /// was spent, or `done` when a resumed run skipped it (`done_in` the run where it
    /// succeeded). A resume reads these fields, never the messages.
    RolloutItem {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<usize>,
        index: usize,
        label: String,
        batch: usize,
        outcome: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        done_in: Option<String>,
    },
    RunFinished {
        outcome: RunOutcome,
        ok: usize,
        changed: usize,
        failed: usize,
        skipped: usize,
        duration_ms: u64,
        exit_code: i32,
    },
}

/// The script an action's `command` names (its body is in the run's `script` event).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScriptRef {
    pub name: String,
    pub sha256: String,
}

/// What an action does to its target; `read` or `change` in events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Only looks: runs for real during a dry-run.
    Read,
    /// Changes something: planned, not run, during a dry-run.
    Change,
}

/// How a step ended: `ok`, `changed` or `failed` in events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepOutcome {
    Ok,
    Changed,
    Failed,
}

/// How a run ended: `ok`, `failed` or `interrupted` in events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunOutcome {
    Ok,
    Failed,
    Interrupted,
}

impl RunOutcome {
    /// The word in events, for `history`'s table.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Ok => "ok",
            RunOutcome::Failed => "failed",
            RunOutcome::Interrupted => "interrupted",
        }
    }
}

/// A `log` event's level: `debug`, `info`, `warn` or `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

impl std::fmt::Display for Level {
    /// The word in events (`warn`), for text that quotes a log line's level.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        })
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// An event with the wall-clock time it happened, as written to `--json` and records.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stamped {
    pub ts: String,
    #[serde(flatten)]
    pub event: Event,
    /// Its line in the run's record, from 1, and the sha256 of the line before it
    /// (`base/chain.rs`): set on the events of a run, which has a record; `--json`
    /// carries them too, so that what it printed is the record, byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<String>,
}

/// What `--json` prints on stdout in place of a run's events when the command ends with
/// an error of its own before the run started (`"event": "error"`); never in a record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "event", rename = "error")]
pub struct ErrorEvent {
    // In this order (after the tag) so that the line reads as it always has.
    pub exit_code: i32,
    pub message: String,
    pub ts: String,
}

/// The line the bus made of a chained event: the `serde_json` text of the `Stamped`
/// (the run record's line of it, without the line break) and that text's sha256
/// (`chain::hash`), which the next event names as its `prev`.
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    pub text: &'a str,
    pub hash: &'a str,
}

pub trait Sink {
    fn emit(&mut self, ev: &Stamped);
    /// `emit`, given the line the bus made of `ev` when it chains the run's events: a
    /// sink that writes that same text (the record, `--json`) takes it instead of
    /// serializing and hashing the event again.
    fn emit_line(&mut self, ev: &Stamped, line: Option<Line<'_>>) {
        let _ = line;
        self.emit(ev);
    }
    /// Called once at the end, whatever the outcome; flushes and tears down bars.
    fn finish(&mut self) {}
}

/// Fans events out to sinks after masking secrets.
#[derive(Default)]
pub struct Bus {
    sinks: RefCell<Vec<(SinkId, Box<dyn Sink>)>>,
    next_id: std::cell::Cell<u64>,
    masker: RefCell<Masker>,
    /// The sha256 of each script a `script` event carried already.
    scripts_sent: RefCell<std::collections::HashSet<String>>,
    /// Once a dry-run gave out a placeholder for a change's output: every event shows
    /// them as `(known after apply)`.
    known_after: RefCell<Option<crate::actions::known_after::KnownAfter>>,
    /// From the run's first event on: where the chain of its record stands.
    chain: RefCell<Option<Chain>>,
}

/// Names a sink so that a short-lived one (a primitive watching its own command's
/// output) can be taken off again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinkId(u64);

impl Bus {
    pub fn add_sink(&self, sink: Box<dyn Sink>) -> SinkId {
        let id = SinkId(self.next_id.get());
        self.next_id.set(id.0 + 1);
        self.sinks.borrow_mut().push((id, sink));
        id
    }

    pub fn remove_sink(&self, id: SinkId) {
        self.sinks.borrow_mut().retain(|(i, _)| *i != id);
    }

    /// Registers a value that must never appear in any output from now on. `what` names
    /// it (never by value) in the warning for a secret short enough to be ordinary text.
    pub fn add_secret(&self, value: &str, what: &str) {
        let added = self.masker.borrow_mut().add(value);
        let len = value.chars().count();
        if added && len < crate::base::secrets::SHORT_SECRET {
            tracing::warn!(
                "{what} is a secret of only {len} characters: it is masked as {} wherever that text appears in output, which can hide ordinary words",
                crate::base::secrets::MASK
            );
        }
    }

    pub fn mask(&self, text: &str) -> String {
        self.masker.borrow().mask(text)
    }

    /// Whether any secret is registered (most runs have none: nothing to look for).
    pub fn has_secrets(&self) -> bool {
        !self.masker.borrow().is_empty()
    }

    /// See [`crate::base::secrets::Masker::mask_piece`].
    pub fn mask_piece(&self, carry: &mut String, piece: &str, continues: bool) -> String {
        self.masker.borrow().mask_piece(carry, piece, continues)
    }

    /// See [`crate::base::secrets::Masker::masked_tail`].
    pub fn masked_tail(&self, bytes: &[u8], max: usize) -> String {
        self.masker.borrow().masked_tail(bytes, max)
    }

    /// A `script` event for `script`, unless this bus carried it already; the reference
    /// an action event gives to it.
    pub fn script(&self, script: &crate::base::script::Script) -> ScriptRef {
        let sha256 = script.sha256().to_string();
        if self.scripts_sent.borrow_mut().insert(sha256.clone()) {
            self.emit(Event::Script {
                name: script.name.into(),
                sha256: sha256.clone(),
                body: script.body.into(),
            });
        }
        ScriptRef {
            name: script.name.into(),
            sha256,
        }
    }

    /// From now on, events show `known`'s placeholders as `(known after apply)`.
    pub fn show_known_after(&self, known: &crate::actions::known_after::KnownAfter) {
        let mut slot = self.known_after.borrow_mut();
        if slot.is_none() {
            *slot = Some(known.clone());
        }
    }

    /// From now on every event carries its place in the record of run `run_id` and the
    /// hash of the line before it (`Stamped::seq`, `Stamped::prev`).
    pub fn chain(&self, run_id: &str) {
        *self.chain.borrow_mut() = Some(Chain::new(&chain::record_genesis(run_id)));
    }

    pub fn emit(&self, event: Event) {
        let event = self.masker.borrow().mask_event(event);
        let event = match self.known_after.borrow().as_ref() {
            Some(known) => known.shown_event(event),
            None => event,
        };
        let mut stamped = Stamped {
            ts: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            event,
            seq: None,
            prev: None,
        };
        let mut made: Option<(String, String)> = None;
        if let Some(chain) = self.chain.borrow_mut().as_mut() {
            let (seq, prev) = chain.next();
            stamped.seq = Some(seq);
            stamped.prev = Some(prev);
            // The line the sinks write is serde_json's text of this same value: hashed
            // here once, so that the next event can name it, and handed to the sinks
            // that write it.
            if let Ok(line) = serde_json::to_string(&stamped) {
                chain.push(line.as_bytes());
                made = Some((line, chain.last().to_string()));
            }
        }
        let line = made.as_ref().map(|(text, hash)| Line { text, hash });
        for (_, sink) in self.sinks.borrow_mut().iter_mut() {
            sink.emit_line(&stamped, line);
        }
    }

    pub fn finish(&self) {
        for (_, sink) in self.sinks.borrow_mut().iter_mut() {
            sink.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The enum fields keep the words docs/EVENTS.md lists, so records written before
    /// they were enums read back, and re-serialize, byte for byte.
    #[test]
    fn enum_fields_are_the_documented_words() {
        let lines = [
            r#"{"event":"step_finished","index":0,"name":"a","outcome":"ok","duration_ms":1}"#,
            r#"{"event":"step_finished","index":0,"name":"a","outcome":"changed","duration_ms":1}"#,
            r#"{"event":"step_finished","index":0,"name":"a","outcome":"failed","duration_ms":1,"error":"x"}"#,
            r#"{"event":"action_planned","step":0,"action":1,"target":"local","effect":"read","summary":"s","command":"c","destructive":false}"#,
            r#"{"event":"action_started","step":0,"action":1,"target":"local","effect":"change","summary":"s","command":"c"}"#,
            r#"{"event":"output","step":0,"action":1,"stream":"stdout","line":"l"}"#,
            r#"{"event":"output","step":0,"action":1,"stream":"stderr","line":"l"}"#,
            r#"{"event":"log","level":"debug","message":"m"}"#,
            r#"{"event":"log","step":2,"level":"info","message":"m"}"#,
            r#"{"event":"log","level":"warn","message":"m"}"#,
            r#"{"event":"log","level":"error","message":"m"}"#,
            r#"{"event":"run_finished","outcome":"ok","ok":1,"changed":0,"failed":0,"skipped":0,"duration_ms":3,"exit_code":0}"#,
            r#"{"event":"run_finished","outcome":"failed","ok":0,"changed":0,"failed":1,"skipped":0,"duration_ms":3,"exit_code":1}"#,
            r#"{"event":"run_finished","outcome":"interrupted","ok":0,"changed":0,"failed":1,"skipped":0,"duration_ms":3,"exit_code":130}"#,
        ];
        for line in lines {
            let ev: Event = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(serde_json::to_string(&ev).unwrap(), line);
        }
        for word in ["ok", "failed", "interrupted"] {
            let o: RunOutcome = serde_json::from_value(word.into()).unwrap();
            assert_eq!(o.as_str(), word);
        }
        let unknown = r#"{"event":"log","level":"loud","message":"m"}"#;
        assert!(serde_json::from_str::<Event>(unknown).is_err());
    }
}
