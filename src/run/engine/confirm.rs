//! Before a real run changes anything: a saved plan checked against what would run now,
//! the plan shown, and the yes asked for.

use super::*;
use crate::actions::plan::Plan;
use crate::base::cancel::{Cancel, Signal};
use crate::base::error::{Error, Result};
use std::rc::Rc;

/// From now on the run's VM loads only the plan's Lua modules, byte for byte (`require`
/// asks `plan::Modules`); the ones its top level loaded already must be the plan's too.
pub(super) fn hold_to_modules(loaded: &Loaded, plan: &Plan, label: &str) -> Result<()> {
    let held = loaded.ctx.modules.borrow_mut().hold_to(&plan.modules);
    held.map_err(|problems| {
        Error::PlanRefused(format!(
            "{label}: refused, nothing was changed: the Lua modules loaded are not the ones the plan was made with:\n  - {}\nmake a new plan and review it",
            problems.join("\n  - ")
        ))
    })
}

/// `apply`: the saved plan must be of what would run now: the same params (a secret's
/// salted digest), the runbook's name, description and steps as the plan shows them.
/// Otherwise nothing runs. Nothing here reaches a target.
pub(super) fn check_saved(plan: &Plan, loaded: &Loaded, path: &str) -> Result<()> {
    let header = loaded.header();
    let mut problems = plan.param_differences(&header);
    let steps: Vec<(String, bool)> = loaded
        .steps()
        .iter()
        .map(|d| (d.name.clone(), d.opts.confirm))
        .collect();
    let mask = |t: &str| loaded.ctx.bus.mask(t);
    problems.extend(plan.loaded_differences(&header, &steps, &mask));
    refuse_saved(plan, loaded, path, problems)
}

/// `apply`: the saved plan's targets, resolved the same way (see `target_differences`).
pub(super) async fn check_saved_targets(
    plan: &Plan,
    loaded: &Loaded,
    req: &RunRequest,
    path: &str,
) -> Result<()> {
    let problems = crate::actions::plan::target_differences(
        plan,
        &loaded.ctx.targets,
        req.remote.inventory.as_deref(),
        &loaded.ctx.locks,
    )
    .await;
    refuse_saved(plan, loaded, path, problems)
}

pub(super) fn refuse_saved(
    plan: &Plan,
    loaded: &Loaded,
    path: &str,
    problems: Vec<String>,
) -> Result<()> {
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::PlanRefused(loaded.ctx.bus.mask(&format!(
        "{path}: refused: what would run now is not what the plan was made for, so nothing was changed:\n  - {}\n\
         make a new plan (runbook plan {} …) and review it",
        problems.join("\n  - "),
        plan.runbook.path
    ))))
}

/// How `confirm` shows a plan.
pub(super) struct Shown<'a> {
    /// The plan file (as named, and its sha256) of an `apply`, which shows the whole plan
    /// (params, targets) rather than only its changes.
    pub(super) saved: Option<(&'a str, &'a str)>,
    /// Long scripts unfolded (`-v`).
    pub(super) whole: bool,
}

/// Before a real run changes anything (Terraform's rule): if its plan holds any change,
/// or a step asks for it, show the plan and ask once (or refuse without a terminal).
pub(super) async fn confirm(
    label: &str,
    plan: &Plan,
    shown: Shown<'_>,
    json: bool,
    cancel: &Rc<Cancel>,
    hint: &str,
) -> Result<()> {
    let asks = plan.confirm_steps();
    if plan.changes.is_empty() && asks.is_empty() {
        return Ok(());
    }
    let mut list = match shown.saved {
        Some(file) => plan.render(crate::actions::plan::Style::Text, Some(file), shown.whole),
        None => plan.render_changes(crate::actions::plan::Style::Text, shown.whole),
    };
    for name in asks {
        list.push_str(&format!(
            "  step \"{}\" asks for confirmation\n",
            crate::base::printable::line(name)
        ));
    }
    // The plan's text is masked already.
    let list = list.trim_end();
    let interactive = interactive() && !json;
    let count = match plan.changes.len() {
        1 => "1 change".to_string(),
        n => format!("{n} changes"),
    };
    if !interactive {
        return Err(Error::NeedsConfirmation(format!(
            "{label} makes {count} and needs confirmation:\n{list}\nnothing was changed; {hint}"
        )));
    }
    eprintln!("{label} will make {count}:\n{list}");
    ask_yes("Proceed?", cancel).await
}

/// Whether a person can answer a question: stdin and stderr are a terminal.
pub fn interactive() -> bool {
    use is_terminal::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Asks `question` on the terminal: `Ok` for y or yes, `NotConfirmed` for anything else;
/// Ctrl-C at the prompt interrupts (`cancel`).
pub async fn ask_yes(question: &str, cancel: &Rc<Cancel>) -> Result<()> {
    eprint!("{question} [y/N] ");
    // Read on a blocking thread so that Ctrl-C at the prompt still interrupts the run.
    let read = tokio::task::spawn_blocking(|| {
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        answer
    });
    let answer = tokio::select! {
        a = read => a.unwrap_or_default(),
        _ = cancel.notified() => {
            eprintln!();
            return Err(Error::Interrupted(cancel.interrupted().unwrap_or(Signal::Int)));
        }
    };
    if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        Ok(())
    } else {
        Err(Error::NotConfirmed)
    }
}
