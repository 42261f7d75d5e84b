//! runbook as a library: the program itself (`main`, which src/main.rs calls) and, for
//! the integration tests only, the types of the events it prints and records
//! ([`events`]). Nothing here is a stable API; the program is the binary.

// The layers, top to bottom (docs/ARCHITECTURE.md): a folder each, and a module
// imports only its own layer and the ones below it (tests/layers.rs).
mod actions;
mod base;
mod cli;
mod lua_api;
mod primitives;
mod run;
mod targets;
#[cfg(test)]
mod testing;

/// The events of `--json` and run records (docs/EVENTS.md), as the program writes them:
/// what tests parse instead of untyped JSON.
pub mod events {
    pub use crate::actions::events::{
        Effect, ErrorEvent, Event, Level, RunOutcome, ScriptRef, Stamped, StepOutcome, Stream,
    };
    pub use crate::targets::{Container, Hop};
}

use clap::Parser;
use std::process::ExitCode;

/// The whole program: `runbook`'s `main`.
pub fn main() -> ExitCode {
    // Before any thread starts: a secret given this way must not reach any command.
    base::params::take_from_environment();
    install_panic_hook();
    let cli = match cli::args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return exit(Err(e.into()), false),
    };
    // Before any Lua runs: every phase of every command has a deadline it must keep.
    run::watchdog::start();
    init_logging(cli.verbose, cli.quiet);
    // Before anything opens files: raise the open-file limit and size the pool of
    // commands that may run at once from it.
    targets::nofile::init();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let e = base::error::Error::Startup(format!("cannot start the runtime: {e}"));
            return exit(Err(e), false);
        }
    };
    // Lua runs on this one thread; commands and timers are futures on the same task set.
    let local = tokio::task::LocalSet::new();
    // `run --json` promises events on stdout: an error before the run started is one too.
    let json_run = matches!(&cli.command, cli::args::Command::Run(a) if a.json)
        || matches!(&cli.command, cli::args::Command::Apply(a) if a.json)
        || matches!(&cli.command, cli::args::Command::Test(a) if a.json);
    let result = local.block_on(&runtime, cli::commands::dispatch(cli));
    drop(local);
    // Do not wait for a blocking stdin read (an abandoned confirmation prompt).
    runtime.shutdown_background();
    exit(result, json_run)
}

/// Says what went wrong (unless the terminal shows it already) and ends with its code.
fn exit(result: base::error::Result<()>, json_run: bool) -> ExitCode {
    let Err(e) = result else {
        return ExitCode::from(base::error::Exit::Success.code() as u8);
    };
    let message = base::secrets::mask_global(&e.to_string());
    match &e {
        // clap words its own answers (and puts --help on stdout).
        base::error::Error::Flags(clap) => {
            let _ = clap.print();
        }
        e if e.shown() => {}
        _ => eprintln!("error: {}", base::printable::block(&message)),
    }
    if json_run && !e.after_run() {
        let event = actions::events::ErrorEvent {
            ts: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            message,
            exit_code: e.exit_code(),
        };
        if let Ok(line) = serde_json::to_string(&event) {
            println!("{line}");
        }
    }
    ExitCode::from(e.exit_code().clamp(0, 255) as u8)
}

/// Panics are bugs, but their text must not show a secret either; and a reader that
/// closed our stdout (`runbook docs | head`) ends the program quietly, as it would end
/// `cat`, instead of a panic message and exit 101.
fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info.to_string();
        if text.contains("Broken pipe") {
            std::process::exit(141);
        }
        let masked = base::secrets::mask_global(&text);
        if masked != text {
            eprintln!("runbook {masked}");
            return;
        }
        default(info);
    }));
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
        .with_ansi(run::sinks::terminal::colour_stderr())
        .with_writer(|| run::sinks::terminal::LogWriter)
        .try_init();
}
