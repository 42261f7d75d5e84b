//! The integration tests: one test binary (each file here a module of it), so the
//! crate's tests link once rather than once per file. Run one file's tests with
//! `cargo test --test suite NAME::` (e.g. `cargo test --test suite layers::`).

#[macro_use]
mod common;

mod adversarial_review;
mod approvals;
mod artifact;
mod artifact_manifest;
mod audit;
mod cache;
mod cache_rollout;
mod clean_reset;
mod containers;
mod control_bytes;
mod detach;
mod disk;
mod docs;
mod drills;
mod errors;
mod file;
mod fingerprint;
mod fmt;
mod git;
mod gpu;
mod gpu_health;
mod identity;
mod interrupt;
mod inventory;
mod kept_reads;
mod known_after;
mod layers;
mod lxc;
mod lxc_primitives;
mod modules;
mod names;
mod numbers;
mod options;
mod params_file;
mod plan;
mod preview;
mod proc;
mod read_only;
mod remote;
mod remote_failures;
mod replies;
mod resume_orphans;
mod rollout;
mod run_flow;
mod sandbox;
mod secrets;
mod session;
mod sinks;
mod slurm;
mod smoke;
mod torch_cache;
mod types;
mod typos;
mod venv;
mod warmup;
mod watch;
