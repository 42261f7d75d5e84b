//! `runbook`: runs operations runbooks written in Lua.

mod actions;
mod cancel;
mod cli;
mod commands;
mod ctx;
mod duration;
mod embedded;
mod engine;
mod error;
mod events;
mod inventory;
mod lint;
mod locks;
mod lua_api;
mod orphans;
mod params;
mod primitives;
mod quote;
mod sandbox;
mod secrets;
mod sinks;
mod source;
mod state;
mod suggest;
mod targets;
mod watchdog;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    init_logging(cli.verbose, cli.quiet);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    // Lua runs on this one thread; commands and timers are futures on the same task set.
    let local = tokio::task::LocalSet::new();
    let result = local.block_on(&runtime, commands::dispatch(cli));
    drop(local);
    // Do not wait for a blocking stdin read (an abandoned confirmation prompt).
    runtime.shutdown_background();
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            if !matches!(e, error::Error::Interrupted(_)) {
                eprintln!("error: {e}");
            }
            e.exit_code()
        }
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}

fn init_logging(verbose: bool, quiet: bool) {
    use tracing_subscriber::EnvFilter;
    let default = if verbose {
        "debug"
    } else if quiet {
        "error"
    } else {
        "warn"
    };
    let filter = EnvFilter::try_from_env("RUNBOOK_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .without_time()
        .with_writer(|| sinks::terminal::LogWriter)
        .try_init();
}
