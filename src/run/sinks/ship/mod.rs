//! Shipping a real run's events, as they happen, to the sinks `runbook.toml` names
//! (`[[sink]]`: syslog, webhook, dir).
//!
//! The bus hands each event (secrets already masked) to [`Shipping`], which numbers it
//! (`id` = run id and `seq`, `line.rs`) and appends it to each sink's spool file in the
//! state dir (`spool.rs`): that write is all a run ever waits for while it runs. A thread
//! per sink (`drain.rs`) sends the spool on: first what earlier runs left there, oldest
//! first, then this run's events in order, in batches, retried while the sink is down.
//! At the end of the run [`Shipping::finish`] waits for the sinks to confirm what is
//! left, [`FINISH_WAIT`] at most; what they have not confirmed then stays in the spool,
//! and the next run (or `runbook ship`) sends it before anything of its own.

pub mod dir;
pub mod drain;
pub mod line;
pub mod spool;
pub mod syslog;
pub mod tcp;
pub mod webhook;

use crate::actions::events::{Sink, Stamped};
use crate::base::project::Sink as Config;
use drain::{Drain, Shared};
use line::Destination;
use spool::{SpoolDir, Writer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest the end of a run waits for its sinks, all of them together. A sink that
/// refuses the connection ends the wait at once (after one more try); one that takes
/// the connection and never answers holds it this long.
pub const FINISH_WAIT: Duration = Duration::from_secs(2);

/// The sink of the bus that ships to every `[[sink]]`.
pub struct Shipping {
    run: String,
    seq: u64,
    shippers: Vec<Shipper>,
}

struct Shipper {
    name: String,
    spool: PathBuf,
    /// `None` once a write to the spool failed: the rest of the run is not shipped.
    writer: Option<Writer>,
    broken: Option<String>,
    shared: Arc<Shared>,
}

impl Shipping {
    /// A spool file for this run in each sink's spool directory, and the thread that
    /// sends it. An error names the sink and the directory: the run must not start, as
    /// it must not without its record.
    pub fn start(sinks: &[Config], state: &Path, run: &str, host: &str) -> Result<Self, String> {
        let mut shippers = Vec::new();
        for sink in sinks {
            let name = sink.describe();
            let cannot = |what: &Path, e: std::io::Error| {
                format!("{name}: cannot spool its events in {}: {e}", what.display())
            };
            let spool_dir = SpoolDir::open(state, sink).map_err(|e| cannot(state, e))?;
            let writer = spool_dir
                .create(run)
                .map_err(|e| cannot(&spool_dir.path, e))?;
            let shared = Arc::new(Shared::default());
            let destination = destination(sink, host);
            let spool = spool_dir.path.clone();
            Drain {
                destination,
                spool: spool_dir,
                own: Some(writer.path.clone()),
                shared: shared.clone(),
            }
            .spawn(name.clone())
            .map_err(|e| format!("{name}: cannot start its thread: {e}"))?;
            shippers.push(Shipper {
                name,
                spool,
                writer: Some(writer),
                broken: None,
                shared,
            });
        }
        Ok(Shipping {
            run: run.to_string(),
            seq: 0,
            shippers,
        })
    }
}

fn destination(sink: &Config, host: &str) -> Box<dyn Destination> {
    match sink {
        Config::Syslog(c) => Box::new(syslog::Syslog::new(c, host)),
        Config::Webhook(c) => Box::new(webhook::Webhook::new(c)),
        Config::Dir(c) => Box::new(dir::Dir::new(c)),
    }
}

/// `runbook ship`: sends what earlier runs left in each sink's spool, waiting `wait` at
/// most; for each sink that still has some, why. A spool a running run holds is its
/// own to send, and is left to it.
pub fn ship_earlier(
    sinks: &[Config],
    state: &Path,
    host: &str,
    wait: Duration,
) -> Result<Vec<String>, String> {
    let deadline = Instant::now() + wait;
    let mut started = Vec::new();
    for sink in sinks {
        let name = sink.describe();
        let spool = SpoolDir::open(state, sink)
            .map_err(|e| format!("{name}: cannot open its spool in {}: {e}", state.display()))?;
        let path = spool.path.clone();
        let shared = Arc::new(Shared::default());
        // No run to wait for: a delivery that fails ends the wait for this sink.
        shared.update(|p| p.closing = true);
        Drain {
            destination: destination(sink, host),
            spool,
            own: None,
            shared: shared.clone(),
        }
        .spawn(name.clone())
        .map_err(|e| format!("{name}: cannot start its thread: {e}"))?;
        started.push((name, path, shared));
    }
    let mut left = Vec::new();
    for (name, path, shared) in started {
        let p = shared.wait(deadline, |p| p.leftovers_tried || p.gave_up);
        if p.leftovers_tried && p.leftovers == 0 {
            continue;
        }
        let why = match (&p.error, p.leftovers_tried) {
            (Some(e), _) => e.clone(),
            (None, true) => "a run still running holds it".into(),
            (None, false) => format!("not confirmed within {}s", wait.as_secs()),
        };
        left.push(format!(
            "sink {name}: {} earlier run(s) not sent whole ({why}); kept in {}",
            p.leftovers,
            path.display()
        ));
    }
    Ok(left)
}

impl Sink for Shipping {
    fn emit(&mut self, ev: &Stamped) {
        self.seq += 1;
        let seq = self.seq;
        let text = line::text(&self.run, seq, ev);
        for s in &mut self.shippers {
            let Some(writer) = &mut s.writer else {
                continue;
            };
            match writer.append(&text) {
                Ok(end) => s.shared.written(end, seq),
                Err(e) => {
                    s.writer = None;
                    s.broken = Some(format!(
                        "cannot append to its spool in {} ({e}): events from #{seq} on are not shipped to it (the run record has them)",
                        s.spool.display()
                    ));
                }
            }
        }
    }

    fn finish(&mut self) {
        let deadline = Instant::now() + FINISH_WAIT;
        for s in &self.shippers {
            s.shared.update(|p| p.closing = true);
        }
        for s in &self.shippers {
            let p = s.shared.wait(deadline, |p| p.done || p.gave_up);
            if let Some(broken) = &s.broken {
                tracing::warn!("sink {}: {broken}", s.name);
            }
            if p.done {
                continue;
            }
            let left = p.written_seq - p.sent_seq;
            let earlier = match p.leftovers {
                0 => String::new(),
                n => format!(" (and what {n} earlier run(s) left)"),
            };
            let why = match &p.error {
                Some(e) => format!(": {e}"),
                None => format!(": not confirmed within {}s", FINISH_WAIT.as_secs()),
            };
            tracing::warn!(
                "sink {}: {left} event(s) of this run{earlier} not delivered{why}; they are kept in {} and sent first by the next run, or by `runbook ship`",
                s.name,
                s.spool.display()
            );
        }
    }
}
