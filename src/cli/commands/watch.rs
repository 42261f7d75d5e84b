//! `runbook watch FILE [--once | --reject ID | --list]`: the watcher itself is
//! `run/watch/`; this reads the command line, the policy and the signing key.

use super::plan::absolute;
use crate::actions::plan::ReachedWith;
use crate::base::error::{Error, Result};
use crate::base::project::Project;
use crate::cli::args::WatchArgs;
use crate::run::state;
use crate::run::watch::{self, config, decide};

pub async fn watch(args: WatchArgs) -> Result<()> {
    let file = config::read(&args.file).map_err(Error::Watch)?;
    let state_dir = state::state_dir(args.state_dir.clone());
    if let Some(id) = &args.reject {
        return reject(&file, &state_dir, id, args.reason.clone());
    }
    if args.list {
        return list(&file, &state_dir);
    }
    let policy = Project::load().map_err(Error::Approval)?.policy;
    // Under a policy a plan is approved only once its author signed it: the watcher
    // signs what it proposes.
    let sign = match &policy {
        Some(_) => Some(super::approve::signing_key(&args.signing)?),
        None => None,
    };
    let remote = super::remote_settings(&args.remote)?;
    let reached_with = ReachedWith {
        inventory: remote.inventory.as_ref().map(|i| absolute(&i.path)),
        ssh_config: remote.ssh.config.as_deref().map(absolute),
        cwd: super::working_dir(),
        // The watcher proposes for the targets its triggers name, never a --limit.
        limit: None,
    };
    watch::watch(watch::Options {
        file,
        state_dir,
        remote,
        reached_with,
        policy,
        sign,
        once: args.once,
    })
    .await
}

fn state_path(file: &config::WatchFile, state_dir: &std::path::Path) -> std::path::PathBuf {
    state_dir.join("watch").join(format!("{}.json", file.name))
}

/// `--reject ID`: leaves `ID.rejected` beside the plan; the watcher closes it.
fn reject(
    file: &config::WatchFile,
    state_dir: &std::path::Path,
    id: &str,
    reason: Option<String>,
) -> Result<()> {
    let path = state_path(file, state_dir);
    let saved = watch::state::read(&path)
        .map_err(Error::Watch)?
        .unwrap_or_default();
    let Some(p) = saved.proposals.iter().find(|p| p.id == id) else {
        let pending: Vec<&str> = saved
            .proposals
            .iter()
            .filter(|p| p.status == watch::state::Status::Pending)
            .map(|p| p.id.as_str())
            .collect();
        return Err(Error::Usage(format!(
            "--reject {id}: no such proposal in {} (waiting for a decision: {})",
            path.display(),
            if pending.is_empty() {
                "none".to_string()
            } else {
                pending.join(", ")
            }
        )));
    };
    if p.status != watch::state::Status::Pending {
        return Err(Error::Usage(format!(
            "--reject {id}: it is {} already{}",
            p.status.word(),
            p.outcome
                .as_deref()
                .map(|o| format!(" ({o})"))
                .unwrap_or_default()
        )));
    }
    let who = format!(
        "{}@{}",
        crate::run::engine::whoami(),
        crate::run::engine::hostname()
    );
    let marker = decide::reject(&p.plan, &who, reason).map_err(Error::Watch)?;
    eprintln!(
        "rejected {id} ({}): the watcher closes it at its next look",
        marker.display()
    );
    Ok(())
}

/// `--list`: every proposal kept, oldest first.
fn list(file: &config::WatchFile, state_dir: &std::path::Path) -> Result<()> {
    let path = state_path(file, state_dir);
    let saved = watch::state::read(&path)
        .map_err(Error::Watch)?
        .unwrap_or_default();
    if saved.proposals.is_empty() {
        eprintln!("no proposals yet ({})", path.display());
        return Ok(());
    }
    for p in &saved.proposals {
        println!(
            "{}  {:<8} {}  {}",
            p.created,
            p.status.word(),
            p.id,
            crate::base::printable::line(p.outcome.as_deref().unwrap_or(&p.why))
        );
    }
    Ok(())
}
