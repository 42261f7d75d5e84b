//! The shared layer: small pieces any layer may use, which use only each other (the one
//! error type, quoting, durations, secrets, the embedded runbooks and scripts, …).

pub mod abort;
pub mod beside;
pub mod cancel;
pub mod chain;
pub mod classify;
pub mod duration;
pub mod embedded;
pub mod error;
pub mod fsx;
pub mod glob;
pub mod hex;
pub mod inventory;
pub mod limit;
pub mod params;
pub mod printable;
pub mod project;
pub mod quote;
pub mod script;
pub mod secrets;
pub mod suggest;
