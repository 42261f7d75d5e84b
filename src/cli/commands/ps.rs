//! `runbook ps` and `runbook stop`: what runs left on targets (see `run/left.rs`).

use crate::base::error::{Error, Result};
use crate::run::{left, state};
use crate::targets::registry::{Registry, RemoteSettings};
use std::path::PathBuf;

pub async fn ps(
    targets: &[String],
    json: bool,
    state_dir: Option<PathBuf>,
    remote: RemoteSettings,
) -> Result<()> {
    let dir = state::state_dir(state_dir);
    let registry = Registry::new(remote);
    let survey = left::ps(&dir, &registry, targets).await?;
    if json {
        for l in &survey.left {
            println!("{}", serde_json::to_string(l).unwrap_or_default());
        }
    } else if survey.left.is_empty() {
        println!("nothing left running");
    } else {
        let rows: Vec<[String; 6]> = survey
            .left
            .iter()
            .map(|l| {
                let command = match &l.job {
                    Some(job) => format!("{} (detached, job {job})", l.command),
                    None => l.command.clone(),
                };
                [
                    l.target.clone(),
                    l.run.clone(),
                    l.step.clone(),
                    l.pgid.map_or("-".into(), |p| p.to_string()),
                    l.state.clone(),
                    command,
                ]
            })
            .collect();
        let head = ["TARGET", "RUN", "STEP", "PGID", "STATE", "COMMAND"];
        let mut width = head.map(str::len);
        for r in &rows {
            for (w, c) in width.iter_mut().zip(r.iter()) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: [&str; 6]| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i == 5 {
                    s.push_str(c);
                } else {
                    s.push_str(&format!("{c:<w$}  ", w = width[i]));
                }
            }
            println!("{}", s.trim_end());
        };
        line(head);
        for r in &rows {
            line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]]);
        }
    }
    if survey.unreachable.is_empty() {
        return Ok(());
    }
    Err(Error::Leftovers(format!(
        "could not look at:\n{}",
        survey
            .unreachable
            .iter()
            .map(|(t, why)| format!("  - {t}: {why}"))
            .collect::<Vec<_>>()
            .join("\n")
    )))
}

pub async fn stop(which: &str, state_dir: Option<PathBuf>, remote: RemoteSettings) -> Result<()> {
    let dir = state::state_dir(state_dir);
    let registry = Registry::new(remote);
    let (run, done) = left::stop(&dir, &registry, which).await?;
    if done.is_empty() {
        println!("run {run} left nothing running");
        return Ok(());
    }
    let mut failed = Vec::new();
    for d in &done {
        match &d.result {
            Ok(true) => println!("stopped {}", d.what),
            Ok(false) => println!("already ended: {}", d.what),
            Err(e) => failed.push(format!("  - {}: {e}", d.what)),
        }
    }
    if failed.is_empty() {
        return Ok(());
    }
    Err(Error::Leftovers(format!(
        "could not stop everything run {run} left:\n{}",
        failed.join("\n")
    )))
}
