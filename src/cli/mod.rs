//! The cli layer: the command line (`args`, parsed by clap) and one module per
//! subcommand (`commands`), which call the engine.

pub mod args;
pub mod commands;
