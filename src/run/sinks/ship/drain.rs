//! The thread that sends one sink's spool: first what earlier runs left, oldest first,
//! then this run's events as they are spooled; retried with a growing pause while the
//! sink is down. It shares with the run only [`Progress`], behind a mutex.

use super::line::Destination;
use super::spool::{Reader, SpoolDir};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Between the starts of two deliveries at least this long, unless the run is ending or
/// the first was a full batch (a backlog goes out as fast as the sink takes it): events
/// that come meanwhile go in one batch, so a busy run opens a few connections a second,
/// not one per event (each TCP connection closed leaves a port in TIME_WAIT for a
/// minute).
const GATHER: Duration = Duration::from_millis(200);
/// The pause after a failed delivery doubles from the first to the last.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MOST: Duration = Duration::from_secs(2);

/// What the run and the thread know of each other.
#[derive(Debug, Default)]
pub struct Progress {
    /// This run's spool, as far as written: the last event's `seq`, and its length.
    pub written_seq: u64,
    pub written: u64,
    /// How far the sink confirmed this run's events.
    pub sent_seq: u64,
    /// The run has ended: send what is left at once, and say when it is all sent or a
    /// delivery tried after the end failed.
    pub closing: bool,
    pub done: bool,
    pub gave_up: bool,
    /// Earlier runs' spool files not yet sent whole, and whether all were looked at.
    pub leftovers: usize,
    pub leftovers_tried: bool,
    /// Why the last delivery failed, until one succeeds.
    pub error: Option<String>,
    /// The thread waits for this run's next event (else a new one needs no wake-up: a
    /// run's every event would wake a thread that waits to retry).
    idle: bool,
}

#[derive(Default)]
pub struct Shared {
    progress: Mutex<Progress>,
    changed: Condvar,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, Progress> {
        // A panic on the thread leaves the numbers as they were: still the truth.
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the progress and wakes whoever waits on it.
    pub fn update(&self, change: impl FnOnce(&mut Progress)) {
        change(&mut self.lock());
        self.changed.notify_all();
    }

    /// This run's spool is `end` long, up to event `seq`: wakes the thread if it waits
    /// for that.
    pub fn written(&self, end: u64, seq: u64) {
        let mut p = self.lock();
        p.written = end;
        p.written_seq = seq;
        if p.idle {
            p.idle = false;
            drop(p);
            self.changed.notify_all();
        }
    }

    /// Waits until `until` says so or `deadline` passes; the progress then.
    pub fn wait(
        &self,
        deadline: Instant,
        mut until: impl FnMut(&mut Progress) -> bool,
    ) -> MutexGuard<'_, Progress> {
        let mut p = self.lock();
        loop {
            let now = Instant::now();
            if until(&mut p) || now >= deadline {
                return p;
            }
            p = match self.changed.wait_timeout(p, deadline - now) {
                Ok((p, _)) => p,
                Err(e) => e.into_inner().0,
            };
        }
    }
}

pub struct Drain {
    pub destination: Box<dyn Destination>,
    pub spool: SpoolDir,
    /// This run's spool file; none for `runbook ship`, which sends earlier runs' only.
    pub own: Option<PathBuf>,
    pub shared: Arc<Shared>,
}

enum Sent {
    Batch,
    Nothing,
    Failed,
    /// The spool file itself cannot be read: it is left where it is.
    Unreadable,
}

impl Drain {
    pub fn spawn(self, name: String) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name(format!("ship {name}"))
            .spawn(move || self.run())
            .map(|_| ())
    }

    fn run(mut self) {
        let leftovers = self.spool.leftovers(self.own.as_deref());
        self.shared.update(|p| p.leftovers = leftovers.len());
        let mut pace = Pace::default();
        for path in leftovers {
            if let Some(mut reader) = Reader::leftover(&path) {
                loop {
                    let end = reader.len();
                    match self.send(&mut reader, end, &mut pace, false) {
                        Sent::Batch | Sent::Failed => continue,
                        Sent::Nothing => {
                            reader.remove();
                            self.shared.update(|p| p.leftovers -= 1);
                            break;
                        }
                        Sent::Unreadable => break,
                    }
                }
            }
        }
        self.shared.update(|p| p.leftovers_tried = true);
        let Some(own) = self.own.clone() else {
            return;
        };
        let Ok(mut reader) = Reader::own(&own) else {
            self.shared.update(|p| {
                p.error = Some(format!("cannot read the spool {}", own.display()));
                p.gave_up = true;
            });
            return;
        };
        loop {
            let sent = reader.sent.offset;
            let (end, closing) = {
                let mut p = self.shared.wait(far(), |p| {
                    let ready = p.written > sent || p.closing;
                    // Set under the lock the run takes to write: no event is missed.
                    p.idle = !ready;
                    ready
                });
                p.idle = false;
                (p.written, p.closing)
            };
            if reader.sent.offset >= end && closing {
                reader.remove();
                self.shared.update(|p| p.done = true);
                return;
            }
            if let Sent::Unreadable = self.send(&mut reader, end, &mut pace, true) {
                self.shared.update(|p| p.gave_up = true);
                return;
            }
        }
    }

    /// Sends the next batch of `reader` before `end` (of this run's own spool, or an
    /// earlier run's), after the pause `pace` asks for.
    fn send(&mut self, reader: &mut Reader, end: u64, pace: &mut Pace, own: bool) -> Sent {
        pace.wait(&self.shared);
        // What the run wrote during the pause goes in this batch too.
        let end = match own {
            true => self.shared.lock().written,
            false => end,
        };
        let batch = match reader.next(end) {
            Ok(b) => b,
            Err(e) => {
                self.failed(format!("cannot read its spool: {e}"), pace);
                return Sent::Unreadable;
            }
        };
        if batch.after == reader.sent {
            return Sent::Nothing;
        }
        pace.started(self.shared.lock().closing, batch.full);
        // A batch of damaged lines only is passed over without a delivery.
        if !batch.lines.is_empty() {
            if let Err(why) = self.destination.deliver(&batch.lines) {
                return self.failed(why, pace);
            }
        }
        if let Err(e) = reader.confirm(batch.after) {
            return self.failed(format!("cannot move its spool's cursor: {e}"), pace);
        }
        pace.succeeded();
        self.shared.update(|p| {
            p.error = None;
            if own {
                p.sent_seq = batch.after.seq;
            }
        });
        Sent::Batch
    }

    fn failed(&mut self, why: String, pace: &mut Pace) -> Sent {
        pace.failed();
        let tried_after_end = pace.closing_seen;
        self.shared.update(|p| {
            p.error = Some(why);
            if tried_after_end {
                p.gave_up = true;
            }
        });
        Sent::Failed
    }
}

/// When the next delivery may start.
#[derive(Default)]
struct Pace {
    next: Option<Instant>,
    retry: Option<Duration>,
    /// The delivery under way started after the run ended.
    closing_seen: bool,
}

impl Pace {
    /// Until the next delivery may start; at once when the run ends meanwhile (its
    /// first wait after the end only: a sink still failing then is retried at the usual
    /// pace, while the run no longer waits for it).
    fn wait(&mut self, shared: &Shared) {
        let Some(next) = self.next else { return };
        let seen = self.closing_seen;
        drop(shared.wait(next, |p| p.closing && !seen));
    }

    /// A delivery starts: the next waits to gather events, unless there may be more
    /// already (a full batch) or the run has ended (no more will come).
    fn started(&mut self, closing: bool, full: bool) {
        self.closing_seen = closing;
        self.next = (!full && !closing).then(|| Instant::now() + GATHER);
    }

    fn succeeded(&mut self) {
        self.retry = None;
    }

    fn failed(&mut self) {
        let pause = self.retry.map_or(RETRY_FIRST, |r| (r * 2).min(RETRY_MOST));
        self.retry = Some(pause);
        self.next = Some(Instant::now() + pause);
    }
}

/// A deadline that never comes (a wait for the run's next event).
fn far() -> Instant {
    Instant::now() + Duration::from_secs(365 * 24 * 3600)
}
