//! Interruption by SIGINT/SIGTERM, shared by the engine, the Lua hook and running commands.
//!
//! Signals are counted: the first one interrupts the running step (its commands are
//! killed, its Lua code stops), `always` steps then still run, and a second signal
//! interrupts those too. A piece of work started when `count() == n` is aborted once
//! `count() > n`.
//!
//! The count lives in atomics written by a real signal handler, not by an async task:
//! a step busy in pure Lua never yields to the runtime, and the instruction hook must
//! still see the signal. The async side only wakes up waiting futures.

use std::rc::Rc;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::Once;
use tokio::sync::Notify;

static SIGNALS: AtomicU32 = AtomicU32::new(0);
static FIRST_SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The signals the main thread has answered (see [`answered`]).
static ANSWERED: AtomicU32 = AtomicU32::new(0);

/// The signals that interrupt a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (Ctrl-C).
    Int,
    /// SIGTERM.
    Term,
}

impl Signal {
    pub fn number(self) -> i32 {
        match self {
            Signal::Int => libc::SIGINT,
            Signal::Term => libc::SIGTERM,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
        }
    }
}

fn record(signal: i32) {
    // Only async-signal-safe work here: two atomic operations.
    let _ = FIRST_SIGNAL.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    SIGNALS.fetch_add(1, Ordering::SeqCst);
}

/// Signals received so far (readable from any thread).
pub fn signal_count() -> u32 {
    SIGNALS.load(Ordering::SeqCst)
}

/// The main thread is alive to the signals so far: its runtime woke up for them, or the
/// instruction hook ran after them (and ends the Lua code they interrupt). A signal that
/// stays unanswered means the thread is held where neither can run, in one long call
/// into C: the watchdog then ends the run itself (watchdog.rs).
pub fn answered() {
    ANSWERED.fetch_max(signal_count(), Ordering::SeqCst);
}

/// Whether a signal came that the main thread has not answered yet.
pub fn unanswered() -> bool {
    ANSWERED.load(Ordering::SeqCst) < signal_count()
}

/// The first signal that came, if one did.
pub fn first_signal() -> Option<Signal> {
    match FIRST_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        n if n == libc::SIGTERM => Some(Signal::Term),
        _ => Some(Signal::Int),
    }
}

#[derive(Default)]
pub struct Cancel {
    notify: Notify,
}

impl Cancel {
    pub fn new() -> Rc<Self> {
        Rc::new(Cancel::default())
    }

    pub fn count(&self) -> u32 {
        SIGNALS.load(Ordering::SeqCst)
    }

    /// The first signal, once one came (the count is raised after it is stored).
    pub fn interrupted(&self) -> Option<Signal> {
        (self.count() > 0).then(|| first_signal().unwrap_or(Signal::Int))
    }

    /// Resolves when the next signal arrives.
    pub async fn notified(&self) {
        self.notify.notified().await
    }
}

/// Counts SIGINT and SIGTERM from now on, and wakes `cancel`'s waiters for as long as
/// the returned task lives.
pub fn watch_signals(cancel: Rc<Cancel>) -> tokio::task::JoinHandle<()> {
    static HANDLERS: Once = Once::new();
    HANDLERS.call_once(|| {
        // SAFETY: the actions only touch atomics, which is async-signal-safe.
        unsafe {
            let _ = signal_hook_registry::register(libc::SIGINT, || record(libc::SIGINT));
            let _ = signal_hook_registry::register(libc::SIGTERM, || record(libc::SIGTERM));
        }
    });
    tokio::task::spawn_local(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        loop {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            answered();
            cancel.notify.notify_waiters();
        }
    })
}
