//! One module per group of subcommands; `dispatch` picks the one the user asked for.

mod apply;
mod approve;
mod artifacts;
mod audit;
mod docs;
mod fmt;
mod history;
mod init;
mod inspect;
mod new;
mod plan;
mod ps;
mod run;
mod saved;
mod script;
mod ship;
mod test;
mod watch;

use crate::base::error::{Error, Result};
use crate::base::inventory::Inventory;
use crate::cli::args::{Cli, Command, RemoteArgs};
use crate::targets::registry::RemoteSettings;
use crate::targets::ssh::SshSettings;
use std::path::Path;
use std::rc::Rc;

pub async fn dispatch(cli: Cli) -> Result<()> {
    let (verbose, quiet) = (cli.verbose, cli.quiet);
    match cli.command {
        Command::Run(args) => run::run(args, verbose, quiet).await,
        Command::Plan(args) => plan::plan(args, verbose, quiet).await,
        Command::Apply(args) => apply::apply(args, verbose, quiet).await,
        Command::Approve(args) => approve::approve(args, verbose).await,
        Command::Test(args) => test::test(args, verbose, quiet).await,
        Command::Check {
            files,
            sets,
            params,
            remote,
        } => {
            use_params_file(params.as_deref())?;
            inspect::check(&files, sets, remote_settings(&remote)?).await
        }
        Command::Fmt { paths, check } => fmt::fmt(&paths, check),
        Command::List { dir, remote } => inspect::list(dir, remote_settings(&remote)?),
        Command::Show { file, remote } => inspect::show(&file, remote_settings(&remote)?),
        Command::History {
            limit,
            filter,
            state_dir,
        } => history::history(limit, &filter, state_dir),
        Command::Log {
            run,
            json,
            state_dir,
        } => history::log(&run, json, state_dir, verbose, quiet),
        Command::Audit { action } => audit::audit(action),
        Command::Ps {
            targets,
            json,
            state_dir,
            remote,
        } => ps::ps(&targets, json, state_dir, remote_settings(&remote)?).await,
        Command::Stop {
            run,
            state_dir,
            remote,
        } => ps::stop(&run, state_dir, remote_settings(&remote)?).await,
        Command::Docs { globals: true, .. } => docs::globals(),
        Command::Docs {
            topic, markdown, ..
        } => docs::docs(topic.as_deref(), markdown),
        Command::Script { name } => script::script(name.as_deref()),
        Command::Ship { wait, state_dir } => ship::ship(wait, state_dir),
        Command::Watch(args) => watch::watch(args).await,
        Command::Init { dir } => init::init(dir.as_deref()),
        Command::New { name, target, dir } => new::new(&name, target, dir.as_deref()),
        Command::Artifacts {
            action,
            store,
            state_dir,
            inventory,
            ssh_config,
            trust_new_hosts,
        } => {
            let remote = RemoteArgs {
                inventory,
                ssh_config,
                trust_new_hosts,
            };
            artifacts::artifacts(action, store, state_dir, remote_settings(&remote)?).await
        }
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "runbook",
                &mut std::io::stdout(),
            );
            Ok(())
        }
    }
}

/// The inventory (flag, else `./inventory.toml` when it exists) and SSH options.
/// Reads `--params FILE` (run, plan, test and check take it) and makes it the file that
/// params resolve from, below `--set` and `RUNBOOK_PARAM_*`.
pub fn use_params_file(path: Option<&Path>) -> Result<()> {
    if let Some(path) = path {
        crate::base::params::use_file(crate::base::params::read_file(path).map_err(Error::Params)?);
    }
    Ok(())
}

pub fn remote_settings(args: &RemoteArgs) -> Result<RemoteSettings> {
    let path = match &args.inventory {
        Some(p) => Some(p.clone()),
        None => Some(Path::new("inventory.toml").to_path_buf()).filter(|p| p.is_file()),
    };
    let inventory = match path {
        Some(p) => Some(Rc::new(Inventory::load(&p).map_err(Error::Inventory)?)),
        None => None,
    };
    if let Some(cfg) = &args.ssh_config {
        if !cfg.is_file() {
            return Err(Error::Usage(format!(
                "--ssh-config {}: no such file",
                cfg.display()
            )));
        }
    }
    Ok(RemoteSettings {
        ssh: SshSettings {
            config: args.ssh_config.clone(),
            trust_new_hosts: args.trust_new_hosts,
            ..SshSettings::default()
        },
        inventory,
        lock_wait: std::time::Duration::ZERO,
        replies: None,
        limit: None,
    })
}

/// `--limit PATTERN`, read against the inventory `remote` has (`base/limit.rs`).
pub fn with_limit(mut remote: RemoteSettings, limit: Option<&str>) -> Result<RemoteSettings> {
    if let Some(text) = limit {
        let l = crate::base::limit::Limit::parse(text, remote.inventory.as_deref())
            .map_err(Error::Usage)?;
        remote.limit = Some(Rc::new(l));
    }
    Ok(remote)
}

/// This process's working directory with symlinks resolved, as a plan records it.
pub fn working_dir() -> Option<String> {
    let dir = std::env::current_dir().ok()?;
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    Some(dir.to_string_lossy().into_owned())
}
