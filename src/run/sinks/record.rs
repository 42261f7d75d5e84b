//! The run record: one JSONL file per run, appended and written through per event, so a
//! crash or a kill loses nothing that was already done.
//!
//! Each line is chained to the one before it (`seq`, `prev`: `base/chain.rs`), and when
//! the record is closed the index of runs (`run/index.rs`) is told how many lines it has
//! and the hash of the last, which is what `runbook audit verify` checks it against.

use crate::actions::events::{Event, Line, Sink, Stamped};
use crate::base::chain::{self, Chain};
use crate::run::index::{self, Entry};
use std::cell::Cell;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

pub struct RecordSink {
    writer: RecordWriter,
    failed: Rc<Cell<bool>>,
}

impl RecordSink {
    /// The sink for run `run_id`'s record `file` (at `path`), which `index` lists.
    pub fn new(path: PathBuf, file: File, run_id: &str, index: PathBuf) -> Self {
        RecordSink {
            writer: RecordWriter(Arc::new(Mutex::new(Written {
                path,
                file,
                index,
                run_id: run_id.to_string(),
                chain: Chain::new(&chain::record_genesis(run_id)),
                failed: false,
                closed_at: None,
            }))),
            failed: Rc::new(Cell::new(false)),
        }
    }

    /// Set once a write failed: the engine checks it after the first event.
    pub fn failed_flag(&self) -> Rc<Cell<bool>> {
        self.failed.clone()
    }

    /// The record as the watchdog writes a stuck run's end into it.
    pub fn writer(&self) -> RecordWriter {
        self.writer.clone()
    }
}

impl Sink for RecordSink {
    fn emit(&mut self, ev: &Stamped) {
        self.emit_line(ev, None);
    }

    fn emit_line(&mut self, ev: &Stamped, line: Option<Line<'_>>) {
        if self.failed.get() {
            return;
        }
        if !self.writer.write(ev, line) {
            self.failed.set(true);
        }
    }

    fn finish(&mut self) {
        lock(&self.writer.0).close();
    }
}

/// The record file and where its chain stands, shared by the sink (the main thread) and
/// the watchdog (its own thread, when a step is stuck), so that the lines either writes
/// hold together.
#[derive(Clone)]
pub struct RecordWriter(Arc<Mutex<Written>>);

struct Written {
    path: PathBuf,
    file: File,
    index: PathBuf,
    run_id: String,
    chain: Chain,
    failed: bool,
    /// The line count the index was last given: a second close with nothing new written
    /// adds no line to it.
    closed_at: Option<u64>,
}

fn lock(m: &Mutex<Written>) -> MutexGuard<'_, Written> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RecordWriter {
    /// Appends `ev` (whose line the bus made, when it did); false once the record
    /// cannot be written.
    fn write(&self, ev: &Stamped, made: Option<Line<'_>>) -> bool {
        let mut w = lock(&self.0);
        if w.failed {
            return false;
        }
        let (seq, prev) = w.chain.next();
        // The bus stamps each event of a run with these same links (so that `--json` is
        // the record); an event it did not stamp so still gets the record's own.
        let stamped_so = ev.seq == Some(seq) && ev.prev.as_deref() == Some(prev.as_str());
        if let (true, Some(made)) = (stamped_so, made) {
            return w.append_hashed(made);
        }
        let line = if stamped_so {
            serde_json::to_string(ev)
        } else {
            serde_json::to_string(&Stamped {
                seq: Some(seq),
                prev: Some(prev),
                ..ev.clone()
            })
        };
        match line {
            Ok(line) => w.append(line),
            Err(_) => true,
        }
    }

    /// The watchdog's end of a run whose step is stuck: `events`, stamped `ts`, chained as
    /// the sink chains them, then the record closed. When the main thread holds the record
    /// for longer than `wait` (it is stuck writing it), nothing is written: the record
    /// then ends without `run_finished`, as a killed run's does.
    pub fn end_with(&self, ts: &str, events: Vec<Event>, wait: Duration) {
        let until = Instant::now() + wait;
        let mut w = loop {
            match self.0.try_lock() {
                Ok(w) => break w,
                Err(TryLockError::Poisoned(e)) => break e.into_inner(),
                Err(TryLockError::WouldBlock) if Instant::now() < until => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(TryLockError::WouldBlock) => return,
            }
        };
        for event in events {
            if w.failed {
                break;
            }
            let (seq, prev) = w.chain.next();
            let stamped = Stamped {
                ts: ts.to_string(),
                event,
                seq: Some(seq),
                prev: Some(prev),
            };
            if let Ok(line) = serde_json::to_string(&stamped) {
                w.append(line);
            }
        }
        w.close();
    }
}

impl Written {
    fn append(&mut self, line: String) -> bool {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        if !self.write_line(&bytes) {
            return false;
        }
        self.chain.push(&bytes[..bytes.len() - 1]);
        true
    }

    /// `append` of a line whose hash is known: the bus's, made of this same text.
    fn append_hashed(&mut self, line: Line<'_>) -> bool {
        debug_assert_eq!(chain::hash(line.text.as_bytes()), line.hash);
        let mut bytes = Vec::with_capacity(line.text.len() + 1);
        bytes.extend_from_slice(line.text.as_bytes());
        bytes.push(b'\n');
        if !self.write_line(&bytes) {
            return false;
        }
        self.chain.push_hashed(line.hash.to_string());
        true
    }

    /// Writes `bytes` (a line and its line break); false, and the record given up, when
    /// it cannot.
    fn write_line(&mut self, bytes: &[u8]) -> bool {
        // One write per event on an unbuffered file: the line is in the kernel's hands
        // before the next action starts.
        match self.file.write_all(bytes) {
            Ok(()) => true,
            Err(e) => {
                self.failed = true;
                tracing::error!(
                    "cannot append to the run record {}: {e}; the rest of this run is not recorded",
                    self.path.display()
                );
                false
            }
        }
    }

    /// Syncs the record, then tells the index where it ends (after the sync: the index
    /// never names a line the disk may not have).
    fn close(&mut self) {
        let _ = self.file.sync_all();
        let lines = self.chain.lines();
        if self.closed_at == Some(lines) {
            return;
        }
        let closed = Entry::Closed {
            run_id: self.run_id.clone(),
            lines,
            last: self.chain.last().to_string(),
        };
        match index::append(&self.index, closed) {
            Ok(()) => self.closed_at = Some(lines),
            Err(e) => tracing::warn!(
                "cannot write to the run index {}: {e}; `runbook audit verify` cannot tell where this run's record ends",
                self.index.display()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::events::{Level, RunOutcome};
    use crate::base::chain::Checker;

    fn log(message: &str) -> Event {
        Event::Log {
            step: None,
            level: Level::Info,
            message: message.into(),
        }
    }

    fn stamped(event: Event) -> Stamped {
        Stamped {
            ts: "t".into(),
            event,
            seq: None,
            prev: None,
        }
    }

    /// A sink for run `id` in `dir`, and the path of its record.
    fn sink(dir: &std::path::Path, id: &str) -> (RecordSink, PathBuf) {
        let path = dir.join(format!("{id}.jsonl"));
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .unwrap();
        (
            RecordSink::new(path.clone(), file, id, index::path(dir)),
            path,
        )
    }

    fn check(id: &str, text: &str) -> Checker {
        let mut c = Checker::new(&chain::record_genesis(id));
        for l in text.lines() {
            c.feed(l.as_bytes())
                .unwrap_or_else(|b| panic!("{b}: {text}"));
        }
        c
    }

    /// The bus's links and the sink's agree: the record is `--json`, byte for byte.
    #[test]
    fn the_record_is_what_the_bus_stamped() {
        use crate::actions::events::Bus;
        let dir = tempfile::tempdir().unwrap();
        let (sink, path) = sink(dir.path(), "r1");
        struct Copy(Rc<std::cell::RefCell<String>>);
        impl Sink for Copy {
            fn emit(&mut self, ev: &Stamped) {
                let line = serde_json::to_string(ev).unwrap();
                self.0.borrow_mut().push_str(&(line + "\n"));
            }
        }
        let json = Rc::new(std::cell::RefCell::new(String::new()));
        let bus = Bus::default();
        bus.add_sink(Box::new(Copy(json.clone())));
        bus.add_sink(Box::new(sink));
        bus.chain("r1");
        for m in ["a", "b", "c"] {
            bus.emit(log(m));
        }
        bus.finish();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, *json.borrow());
        assert_eq!(check("r1", &text).chain().lines(), 3);
    }

    /// Events the bus did not chain are chained by the sink; a close tells the index
    /// where the record ends, once.
    #[test]
    fn the_sink_chains_what_it_writes_and_closes_in_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let (mut sink, path) = sink(dir.path(), "r2");
        for m in ["a", "b"] {
            sink.emit(&stamped(log(m)));
        }
        sink.finish();
        sink.finish();
        let text = std::fs::read_to_string(&path).unwrap();
        let c = check("r2", &text);
        let read = index::read(&index::path(dir.path())).unwrap().unwrap();
        assert_eq!(read.broken, None);
        assert_eq!(
            read.entries,
            vec![(
                1,
                Entry::Closed {
                    run_id: "r2".into(),
                    lines: 2,
                    last: c.chain().last().to_string()
                }
            )]
        );
    }

    /// The watchdog's lines continue the sink's chain.
    #[test]
    fn the_watchdogs_end_continues_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let (mut sink, path) = sink(dir.path(), "r3");
        sink.emit(&stamped(log("a")));
        let end = Event::RunFinished {
            outcome: RunOutcome::Failed,
            ok: 0,
            changed: 0,
            failed: 1,
            skipped: 0,
            duration_ms: 0,
            exit_code: 1,
        };
        sink.writer()
            .end_with("t", vec![log("stuck"), end], Duration::from_secs(1));
        let text = std::fs::read_to_string(&path).unwrap();
        let c = check("r3", &text);
        assert_eq!(c.chain().lines(), 3);
        assert_eq!(c.last_event(), Some("run_finished"));
        let read = index::read(&index::path(dir.path())).unwrap().unwrap();
        assert!(matches!(
            read.entries[..],
            [(1, Entry::Closed { lines: 3, .. })]
        ));
    }
}
