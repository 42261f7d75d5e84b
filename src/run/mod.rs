//! The engine layer: a run from its file to its record. `engine` loads a runbook and runs
//! its steps (with `sandbox`, the Lua VM it runs them in, and `lint`, the checks of
//! `runbook check`); `source` finds a runbook by name, `state` keeps run records, `index` lists
//! them and `audit` checks them against their chains and the index,
//! `sinks` show events, `orphans` finds what a killed run left running, and `watchdog`
//! holds every phase to its deadline; `watch` proposes recovery plans when
//! triggers fire (`runbook watch`).

pub mod audit;
pub mod engine;
pub mod index;
pub mod left;
pub mod lint;
pub mod orphans;
pub mod sandbox;
pub mod signoff;
pub mod sinks;
pub mod source;
pub mod state;
pub mod watch;
pub mod watchdog;
