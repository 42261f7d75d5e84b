//! `--resume`: which steps an earlier run finished, from its record, and which of its
//! commands may still be running on their targets.

use super::*;
use crate::actions::events::{Event, StepOutcome as StepResult};
use crate::base::error::{Error, Result};
use crate::run::state;
use std::collections::HashMap;

/// Steps a resumed run skips: index → the run in which it succeeded; and the commands
/// the earlier run may have left running.
#[derive(Default)]
pub(super) struct ResumePlan {
    pub(super) from: Option<String>,
    pub(super) done: HashMap<usize, String>,
    pub(super) orphans: Vec<crate::run::orphans::Orphan>,
    /// What the earlier run's `rollout()`s did with each item (`rollout_item` events).
    pub(super) items: crate::actions::ctx::RolloutResume,
}

pub(super) fn resume_plan(req: &RunRequest, loaded: &Loaded, which: &str) -> Result<ResumePlan> {
    let header = loaded.header();
    let info = state::find_run(&req.state_dir, which, |r| {
        r.runbook == header.name && r.mode == "real"
    })
    .map_err(|e| Error::Resume(format!("--resume {which}: {e}")))?;
    if info.mode != "real" {
        return Err(Error::Resume(format!(
            "--resume {which}: run {} was a {}; only real runs can be resumed",
            info.id, info.mode
        )));
    }
    if info.runbook != header.name {
        return Err(Error::Resume(format!(
            "--resume {which}: run {} ran runbook '{}', not '{}'",
            info.id, info.runbook, header.name
        )));
    }
    if info.content_hash != req.source.content_hash() {
        return Err(Error::Resume(format!(
            "--resume {which}: {} changed since run {} (its content hash differs); resuming could skip steps that are not the ones that ran. Run it afresh without --resume",
            req.source.label, info.id
        )));
    }
    let events = state::read_events(&info.path)?;
    let now = params_for_record(&header);
    if let Some(Event::RunStarted { params, .. }) = events.first().map(|e| &e.event) {
        let differ: Vec<&String> = now
            .keys()
            .chain(params.keys())
            .filter(|k| now.get(*k) != params.get(*k))
            .collect();
        if let Some(k) = differ.first() {
            return Err(Error::Resume(format!(
                "--resume {which}: param '{k}' differs from run {} ({} then, {} now); resume with the same --set values",
                info.id,
                params.get(*k).map(|v| v.to_string()).unwrap_or("unset".into()),
                now.get(*k).map(|v| v.to_string()).unwrap_or("unset".into()),
            )));
        }
    }
    let steps = loaded.steps();
    let mut done = HashMap::new();
    let mut items = crate::actions::ctx::RolloutResume {
        retry_failed: req.retry_failed,
        ..Default::default()
    };
    for ev in &events {
        if let Event::RolloutItem {
            step: Some(step),
            label,
            outcome,
            done_in,
            ..
        } = &ev.event
        {
            let was = match outcome.as_str() {
                "ok" => Some(crate::actions::ctx::Earlier::Done(info.id.clone())),
                "done" => done_in.clone().map(crate::actions::ctx::Earlier::Done),
                "failed" => Some(crate::actions::ctx::Earlier::Failed(info.id.clone())),
                _ => None,
            };
            match was {
                Some(w) => {
                    items.items.insert((*step, label.clone()), w);
                }
                None => {
                    items.items.remove(&(*step, label.clone()));
                }
            }
        }
        if let Event::StepFinished {
            index,
            name,
            outcome,
            ..
        } = &ev.event
        {
            let same_step = steps.get(*index).is_some_and(|s| &s.name == name);
            if same_step && matches!(outcome, StepResult::Ok | StepResult::Changed) {
                done.insert(*index, info.id.clone());
            } else {
                done.remove(index);
            }
        }
        // A step skipped in that run because an even earlier run did it is done too.
        if let Event::StepSkipped {
            index,
            done_in: Some(prev),
            ..
        } = &ev.event
        {
            done.insert(*index, prev.clone());
        }
    }
    Ok(ResumePlan {
        orphans: crate::run::orphans::find(&info.id, &events),
        from: Some(info.id),
        done,
        items,
    })
}
