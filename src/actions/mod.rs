//! The actions layer: what one command is on its way to a target. `perform` plans, runs
//! and records it; `ctx` is the run's state that every primitive reaches; `events` is
//! everything that happens, as data; `plan` is a saved plan, recorded and enforced;
//! `kept_reads`, `known_after` and `locks` are what a run keeps between commands.

pub mod ctx;
pub mod events;
pub mod kept_reads;
pub mod known_after;
pub mod locks;
pub mod perform;
pub mod plan;
