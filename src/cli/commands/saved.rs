//! A saved plan opened for `apply` and `approve`: read, and checked against everything
//! the file alone and this machine can tell, before any target is reached.

use crate::actions::plan::{file_sha256, Plan};
use crate::base::error::{Error, Result};
use crate::run::source::{self, Source};
use std::time::SystemTime;

/// A saved plan, read and checked against everything the file alone and this machine can
/// tell, before any target is reached: what `apply` and `approve` both start from.
pub(super) struct Opened {
    pub plan: Plan,
    pub bytes: Vec<u8>,
    pub shown: String,
    pub source: Source,
    pub sets: Vec<(String, String)>,
    pub remote: crate::cli::args::RemoteArgs,
    /// The plan's `--limit`, which the apply keeps.
    pub limit: Option<String>,
}

/// Reads `path` and refuses a plan that a run recorded in `state` applied already, that is
/// too old (`max_age`), does not hold together,
/// was made elsewhere, or whose runbook, modules, params or inventory are not the ones it
/// was made with.
pub(super) fn open(
    path: &std::path::Path,
    state: &std::path::Path,
    max_age: Option<std::time::Duration>,
    params: Option<&std::path::Path>,
    extra_sets: Vec<(String, String)>,
    remote: crate::cli::args::RemoteArgs,
    limit: Option<&str>,
) -> Result<Opened> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path)
        .map_err(|e| Error::PlanFile(format!("cannot read plan {shown}: {e}")))?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| Error::PlanFile(format!("{shown}: not a runbook plan (not UTF-8 text)")))?;
    let plan = Plan::parse(text, &shown).map_err(Error::PlanFile)?;
    // The hint names the runbook as the plan does, unless that name is itself not the
    // plan's runbook (an edited `path`).
    let runbook = match (plan.runbook_path_differs(), &plan.runbook.file) {
        (Some(_), Some(file)) => file.clone(),
        _ => plan.runbook.path.clone(),
    };
    let refuse = |why: String| {
        Error::PlanRefused(format!(
            "{shown}: refused, nothing was changed: {why}\nmake a new plan (runbook plan {runbook} …) and review it"
        ))
    };
    plan.check_made(max_age, SystemTime::now())
        .map_err(&refuse)?;
    // Every field a person reads that the file alone can check, before anything the plan
    // names is used (a runbook, an inventory, an ssh_config: `ssh -G` runs its `Match
    // exec`).
    let unbound = plan.unbound();
    if !unbound.is_empty() {
        return Err(refuse(format!(
            "the plan file does not hold together (was it edited?):\n  - {}",
            unbound.join("\n  - ")
        )));
    }
    // Spent: a run applied it (or a copy of it) already. After the checks above, so that
    // an edited copy is named as edited.
    if let Some(why) = crate::run::state::plan_spent(state, &file_sha256(&bytes), &plan.id())? {
        return Err(refuse(why));
    }
    // A plan made before plans said where they were made has no directory to hold to.
    if let Some(made_in) = &plan.reached_with.cwd {
        let here = super::working_dir();
        if here.as_ref() != Some(made_in) {
            return Err(refuse(format!(
                "it was made in {made_in}, and this is {}: local commands and relative paths would act on another directory; run apply from {made_in}",
                here.as_deref().unwrap_or("a directory that cannot be read")
            )));
        }
    }
    if let Some(why) = plan.runbook_path_differs() {
        return Err(refuse(why));
    }
    // The hosts a group gives are the ones the plan kept: another `--limit` would give
    // others (a wider one, changes nobody reviewed).
    let planned = plan.reached_with.limit.as_deref();
    if let Some(given) = limit.filter(|l| Some(*l) != planned) {
        return Err(refuse(match planned {
            Some(p) => format!(
                "it was made with --limit {p}, and this apply gives --limit {given}: apply keeps the plan's hosts; leave --limit out"
            ),
            None => format!(
                "it was made without --limit (every host of its groups), and this apply gives --limit {given}: leave --limit out, or make a plan with it"
            ),
        }));
    }
    let source = match (&plan.runbook.shipped, &plan.runbook.file) {
        (Some(name), _) => Source::shipped(name).ok_or_else(|| {
            refuse(format!(
                "it is a plan of the shipped runbook '{name}', which this runbook does not ship"
            ))
        })?,
        (None, Some(file)) => source::locate(file).map_err(|e| refuse(e.to_string()))?,
        (None, None) => return Err(refuse("it names no runbook file".into())),
    };
    let now = source.content_hash();
    if now != plan.runbook.sha256 {
        return Err(refuse(format!(
            "{} changed since the plan was made (sha256 {}… then, {}… now)",
            source.label,
            &plan.runbook.sha256[..12.min(plan.runbook.sha256.len())],
            &now[..12]
        )));
    }
    // Every Lua module the plan loaded, as `require` would find it now: checked before
    // anything runs (and again by `require` itself, as each is loaded).
    let modules = plan.module_differences(|name| {
        crate::run::sandbox::find_module(source.dir.as_deref(), &source.label, name)
            .map(|f| f.module)
    });
    if !modules.is_empty() {
        return Err(refuse(format!(
            "a Lua module changed since the plan was made:\n  - {}",
            modules.join("\n  - ")
        )));
    }
    // The plan's params, then what the command line adds (a secret's value); a param
    // that then differs from the plan's is refused once the runbook is loaded.
    if let Some(path) = params {
        let file = crate::base::params::read_file(path).map_err(Error::Params)?;
        let differ = file_differences(&plan, &file);
        if !differ.is_empty() {
            return Err(refuse(format!(
                "--params {} gives values the plan was not made with:\n  - {}",
                path.display(),
                differ.join("\n  - ")
            )));
        }
        crate::base::params::use_file(file);
    }
    let mut sets = plan.sets();
    sets.extend(extra_sets);
    let mut remote_args = remote;
    // An `inventory.toml` here that the plan was not made with would be loaded by
    // default and decide where its targets are: used only when named (--inventory).
    let found = std::path::Path::new("inventory.toml");
    if remote_args.inventory.is_none() && plan.reached_with.inventory.is_none() && found.is_file() {
        let config = remote_args
            .ssh_config
            .clone()
            .or_else(|| plan.reached_with.ssh_config.clone().map(Into::into))
            .map(|c| std::fs::canonicalize(&c).unwrap_or(c));
        return Err(refuse(format!(
            "{} is an inventory the plan was not made with (it names none{}): give it with --inventory inventory.toml to reach the targets through it, or apply where it is not",
            std::fs::canonicalize(found)
                .unwrap_or_else(|_| found.to_path_buf())
                .display(),
            config.map_or(String::new(), |c| format!(
                "; this apply would reach them with ssh_config {}",
                c.display()
            ))
        )));
    }
    if remote_args.inventory.is_none() {
        remote_args.inventory = plan.reached_with.inventory.clone().map(Into::into);
    }
    if remote_args.ssh_config.is_none() {
        remote_args.ssh_config = plan.reached_with.ssh_config.clone().map(Into::into);
    }
    let limit = plan.reached_with.limit.clone();
    Ok(Opened {
        plan,
        bytes,
        shown,
        source,
        sets,
        remote: remote_args,
        limit,
    })
}

/// The lines of a `--params` file whose value is not the plan's: at apply, a file gives a
/// secret the plan holds only as a digest (checked once the runbook is loaded, as a
/// `--set` one is); any other value in it must be the one the plan was made with, since
/// the plan's own would silently win over it. Compared as the plan holds the value (a
/// number as a number: `1` is the plan's `1.0`).
fn file_differences(
    plan: &crate::actions::plan::Plan,
    file: &crate::base::params::ParamsFile,
) -> Vec<String> {
    use serde_json::Value;
    let shown = file.path.display();
    let mut out = Vec::new();
    for (key, text, line) in &file.values {
        let Some(planned) = plan.params.get(key) else {
            out.push(format!("{shown}:{line}: {key}: the plan has no such param"));
            continue;
        };
        if planned.secret {
            continue;
        }
        let same = match planned.value.as_ref().unwrap_or(&Value::Null) {
            Value::String(s) => s == text,
            Value::Bool(b) => text.parse::<bool>() == Ok(*b),
            Value::Number(n) => text.parse::<f64>().ok() == n.as_f64(),
            _ => false,
        };
        if !same {
            let planned = planned
                .value
                .as_ref()
                .map_or("unset".to_string(), |v| v.to_string());
            out.push(format!(
                "{shown}:{line}: {key} = {} here, {planned} in the plan",
                crate::base::printable::line(text)
            ));
        }
    }
    out
}
