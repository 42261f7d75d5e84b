//! One module per group of subcommands; `dispatch` picks the one the user asked for.

mod docs;
mod history;
mod inspect;
mod run;

use crate::cli::{Cli, Command};
use crate::error::Result;

pub async fn dispatch(cli: Cli) -> Result<i32> {
    let (verbose, quiet) = (cli.verbose, cli.quiet);
    match cli.command {
        Command::Run(args) => run::run(args, verbose, quiet).await,
        Command::Check { files, sets } => inspect::check(&files, sets),
        Command::List { dir } => inspect::list(dir),
        Command::Show { file } => inspect::show(&file),
        Command::History { limit, state_dir } => history::history(limit, state_dir),
        Command::Log {
            run,
            json,
            state_dir,
        } => history::log(&run, json, state_dir, quiet),
        Command::Docs { topic, markdown } => docs::docs(topic.as_deref(), markdown),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "runbook",
                &mut std::io::stdout(),
            );
            Ok(0)
        }
    }
}
