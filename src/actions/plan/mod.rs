//! "What you saw is what runs": a plan of the changes a runbook makes, and the check that
//! holds a real run to it.
//!
//! A plan is what a silent dry-run of the runbook records: every change (step, target,
//! the exact command, a digest of its standard input), every read and a digest of what it
//! returned, the targets as they resolve, the params. `runbook run` makes one in memory,
//! shows it and asks; `runbook plan -o FILE` saves one and `runbook apply FILE` loads it.
//! Either way the real run is then held to it by an [`Enforcer`]: each change, when it is
//! reached, must be one of its step's planned changes (same target, same destination,
//! same exact command, same standard input). A difference stops the run before that
//! change, and every later change is refused too. Each attempt of a step starts at that
//! step's own first planned change: a retry does its changes again, and the changes of
//! steps the run skipped (after a failure, a false `when`) are passed over, so an
//! `always` cleanup step keeps its place.
//!
//! Digests are salted: `sha256(SALT NUL BYTES)` with a random salt per plan, stored in
//! the plan. The same secret in two plans gives two unrelated digests, and no table of
//! precomputed hashes of common passwords matches one; a weak secret can still be
//! guessed against a plan file one guess at a time, which is why the docs say to keep
//! plans of runbooks with weak secrets where the secret itself could be kept. Text in a
//! plan (summaries, commands) has every secret masked; the digests are of the real text.

/// The plan file format this runbook writes and reads.
pub const FORMAT: u32 = 1;

mod check;
mod enforce;
mod model;
mod record;
mod render;
#[cfg(test)]
mod tests;

pub use check::*;
pub use enforce::*;
pub use model::*;
pub use record::*;
pub use render::*;
