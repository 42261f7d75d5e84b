//! `runbook ship`: send what earlier runs left in the spool (`run/sinks/ship/`).

use crate::base::error::{Error, Result};
use crate::base::project::Project;
use crate::run::sinks::ship;
use crate::run::{engine, state};
use std::path::PathBuf;
use std::time::Duration;

pub fn ship(wait: Duration, state_dir: Option<PathBuf>) -> Result<()> {
    let project = Project::load().map_err(Error::Usage)?;
    if project.sink.is_empty() {
        return Err(Error::Usage(
            "runbook ship: no [[sink]] in runbook.toml (or the file $RUNBOOK_CONFIG names) to ship to".into(),
        ));
    }
    let state = state::state_dir(state_dir);
    let left = ship::ship_earlier(&project.sink, &state, &engine::hostname(), wait)
        .map_err(Error::Usage)?;
    if left.is_empty() {
        return Ok(());
    }
    for l in &left {
        eprintln!("{l}");
    }
    Err(Error::RunFailed)
}
