//! `--json`: one event per line on stdout, flushed per event so a reader sees it at once.

use crate::actions::events::{Sink, Stamped};
use std::io::Write;

pub struct JsonSink;

impl Sink for JsonSink {
    fn emit(&mut self, ev: &Stamped) {
        let mut out = std::io::stdout().lock();
        if let Ok(line) = serde_json::to_string(ev) {
            // A closed stdout (e.g. `| head`) must not abort the run: the record still has it.
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }
}
