//! The run record: one JSONL file per run, appended and written through per event, so a
//! crash or a kill loses nothing that was already done.

use crate::actions::events::{Sink, Stamped};
use std::cell::Cell;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;

pub struct RecordSink {
    path: PathBuf,
    file: File,
    failed: Rc<Cell<bool>>,
}

impl RecordSink {
    pub fn new(path: PathBuf, file: File) -> Self {
        RecordSink {
            path,
            file,
            failed: Rc::new(Cell::new(false)),
        }
    }

    /// Set once a write failed: the engine checks it after the first event.
    pub fn failed_flag(&self) -> Rc<Cell<bool>> {
        self.failed.clone()
    }
}

impl Sink for RecordSink {
    fn emit(&mut self, ev: &Stamped) {
        if self.failed.get() {
            return;
        }
        let Ok(mut line) = serde_json::to_string(ev) else {
            return;
        };
        line.push('\n');
        // One write per event on an unbuffered file: the line is in the kernel's hands
        // before the next action starts.
        if let Err(e) = self.file.write_all(line.as_bytes()) {
            self.failed.set(true);
            tracing::error!(
                "cannot append to the run record {}: {e}; the rest of this run is not recorded",
                self.path.display()
            );
        }
    }

    fn finish(&mut self) {
        let _ = self.file.sync_all();
    }
}
