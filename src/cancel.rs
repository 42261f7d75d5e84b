//! Interruption by SIGINT/SIGTERM, shared by the engine, the Lua hook and running commands.
//!
//! Signals are counted: the first one interrupts the running step (its commands are
//! killed, its Lua code stops), `always` steps then still run, and a second signal
//! interrupts those too. A piece of work started when `count() == n` is aborted once
//! `count() > n`.

use std::cell::Cell;
use std::rc::Rc;
use tokio::sync::Notify;

#[derive(Default)]
pub struct Cancel {
    count: Cell<u32>,
    exit_code: Cell<i32>,
    notify: Notify,
}

impl Cancel {
    pub fn new() -> Rc<Self> {
        Rc::new(Cancel::default())
    }

    pub fn signal(&self, exit_code: i32) {
        self.count.set(self.count.get() + 1);
        if self.exit_code.get() == 0 {
            self.exit_code.set(exit_code);
        }
        self.notify.notify_waiters();
    }

    pub fn count(&self) -> u32 {
        self.count.get()
    }

    /// 130 for SIGINT, 143 for SIGTERM; 0 when no signal came.
    pub fn exit_code(&self) -> i32 {
        self.exit_code.get()
    }

    /// Resolves when the next signal arrives.
    pub async fn notified(&self) {
        self.notify.notified().await
    }
}

/// Forwards SIGINT and SIGTERM to `cancel` for as long as the returned task lives.
pub fn watch_signals(cancel: Rc<Cancel>) -> tokio::task::JoinHandle<()> {
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
                _ = int.recv() => cancel.signal(130),
                _ = term.recv() => cancel.signal(143),
            }
        }
    })
}
