//! One shipped event: the event's id, and the run record's line of it; and what a
//! destination reads of that.

use crate::actions::events::Stamped;
use serde::{Deserialize, Serialize};

/// The form every sink receives, one JSON object per event:
/// `{"id":"RUN:SEQ","run":"RUN","seq":SEQ,"record":{"ts":…,"event":…,…}}`. `seq` counts
/// the run's events from 1 (`run_started`) with no gap, so a receiver can drop a
/// duplicate by `id` and see one missing, or out of order, by `seq`. `record` is the
/// event as the run record's line has it, the same serde_json text: nested, not
/// flattened, so that nothing the record's line carries can clash with the id's fields,
/// and a receiver holds that line whole.
#[derive(Serialize)]
struct Shipped<'a> {
    id: String,
    run: &'a str,
    seq: u64,
    record: &'a Stamped,
}

/// The JSON text of `stamped` as the `seq`th event of `run` (no line break).
pub fn text(run: &str, seq: u64, stamped: &Stamped) -> String {
    let shipped = Shipped {
        id: format!("{run}:{seq}"),
        run,
        seq,
        record: stamped,
    };
    // Nothing in an event fails to serialize (strings and numbers); `{}` is never sent.
    serde_json::to_string(&shipped).unwrap_or_else(|_| "{}".into())
}

/// A spooled event as a destination sends it: its text and the fields syslog's header
/// is made of.
#[derive(Debug, Clone)]
pub struct Line {
    pub id: String,
    pub run: String,
    pub seq: u64,
    pub ts: String,
    pub event: String,
    /// A `log` event's level.
    pub level: Option<String>,
    /// `step_finished`'s and `run_finished`'s outcome.
    pub outcome: Option<String>,
    /// `action_finished`'s `ok`.
    pub ok: Option<bool>,
    pub text: String,
}

/// What is read of a line: the rest of the event is passed over, not built. Only the
/// id's fields, the time and the kind must be there with their types; the others are
/// taken where they are of the type wanted (`ok` is a bool in `action_finished`, a count
/// in `run_finished`), so that no event is ever taken for a damaged line.
#[derive(Deserialize)]
struct Head {
    id: String,
    run: String,
    seq: u64,
    record: Record,
}

#[derive(Deserialize)]
struct Record {
    ts: String,
    event: String,
    #[serde(default)]
    level: Option<serde_json::Value>,
    #[serde(default)]
    outcome: Option<serde_json::Value>,
    #[serde(default)]
    ok: Option<serde_json::Value>,
}

impl Line {
    /// A line of a spool file, `None` if it is not one (the file was damaged).
    pub fn parse(text: &str) -> Option<Line> {
        let Head {
            id,
            run,
            seq,
            record: h,
        } = serde_json::from_str(text).ok()?;
        Some(Line {
            id,
            run,
            seq,
            ts: h.ts,
            event: h.event,
            level: h.level.and_then(|v| v.as_str().map(str::to_string)),
            outcome: h.outcome.and_then(|v| v.as_str().map(str::to_string)),
            ok: h.ok.and_then(|v| v.as_bool()),
            text: text.to_string(),
        })
    }
}

/// Where shipped events go: delivers a batch of one run's events, in order.
pub trait Destination: Send {
    /// `Ok` once the receiver confirmed every line of the batch (what confirms it is
    /// each destination's own: docs/ARCHITECTURE.md, "Shipping events"); `Err` says why
    /// not, and the whole batch is sent again later.
    fn deliver(&mut self, lines: &[Line]) -> Result<(), String>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::events::{Event, Level};

    #[test]
    fn the_id_leads_and_the_event_follows() {
        let stamped = Stamped {
            ts: "2026-01-02T03:04:05.678Z".into(),
            event: Event::Log {
                step: Some(1),
                level: Level::Warn,
                message: "m".into(),
            },
            seq: None,
            prev: None,
        };
        let t = text("20260102-030405-00aa", 7, &stamped);
        assert_eq!(
            t,
            r#"{"id":"20260102-030405-00aa:7","run":"20260102-030405-00aa","seq":7,"record":{"ts":"2026-01-02T03:04:05.678Z","event":"log","step":1,"level":"warn","message":"m"}}"#
        );
        // The record's line, byte for byte.
        assert!(t.contains(&format!(
            ",\"record\":{}}}",
            serde_json::to_string(&stamped).unwrap()
        )));
        let line = Line::parse(&t).unwrap();
        assert_eq!((line.seq, line.event.as_str()), (7, "log"));
        assert_eq!(line.level.as_deref(), Some("warn"));
        assert_eq!(line.text, t);
        assert!(Line::parse("{\"id\":").is_none());
        // Every event of a run is a line, whatever its fields are.
        let finished = Stamped {
            ts: "t".into(),
            event: Event::RunFinished {
                outcome: crate::actions::events::RunOutcome::Ok,
                ok: 1,
                changed: 0,
                failed: 0,
                skipped: 0,
                duration_ms: 3,
                exit_code: 0,
            },
            seq: None,
            prev: None,
        };
        let line = Line::parse(&text("r", 9, &finished)).unwrap();
        assert_eq!(
            (line.seq, line.ok, line.outcome.as_deref()),
            (9, None, Some("ok"))
        );
    }
}
