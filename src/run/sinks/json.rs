//! `--json`: one event per line on stdout, flushed per event so a reader sees it at once.

use crate::actions::events::{Line, Sink, Stamped};
use std::io::Write;

pub struct JsonSink;

impl Sink for JsonSink {
    fn emit(&mut self, ev: &Stamped) {
        self.emit_line(ev, None);
    }

    /// The bus's line when it made one: the record's, byte for byte.
    fn emit_line(&mut self, ev: &Stamped, made: Option<Line<'_>>) {
        let mut out = std::io::stdout().lock();
        let line = match made {
            Some(made) => made.text.to_string(),
            None => match serde_json::to_string(ev) {
                Ok(line) => line,
                Err(_) => return,
            },
        };
        // A closed stdout (e.g. `| head`) must not abort the run: the record still has it.
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}
