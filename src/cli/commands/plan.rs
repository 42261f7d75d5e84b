//! `runbook plan`: the plan of a runbook, printed or saved for `runbook apply`.

use crate::actions::plan::{Plan, ReachedWith, Style};
use crate::base::error::{Error, Result};
use crate::cli::args::{PlanArgs, PlanFormat};
use crate::run::engine;
use crate::run::{source, state};
use std::path::Path;

pub async fn plan(args: PlanArgs, verbose: bool, quiet: bool) -> Result<()> {
    if args.file.ends_with(".json") {
        return show_saved(args, verbose);
    }
    let source = source::locate(&args.file)?;
    super::use_params_file(args.params.as_deref())?;
    let remote = super::with_limit(super::remote_settings(&args.remote)?, args.limit.as_deref())?;
    let reached_with = ReachedWith {
        inventory: remote.inventory.as_ref().map(|i| absolute(&i.path)),
        ssh_config: remote.ssh.config.as_deref().map(absolute),
        cwd: super::working_dir(),
        limit: remote.limit.as_ref().map(|l| l.text.clone()),
    };
    let planned = engine::plan(
        &source,
        args.offline,
        args.sets,
        state::state_dir(args.state_dir),
        args.timeout.filter(|t| !t.is_zero()),
        remote,
    )
    .await?;
    if let Some(why) = planned.failed {
        return Err(Error::PlanIncomplete(format!(
            "{}: the plan could not be made: {why}\nnothing was saved; see the whole dry-run with runbook run {} --dry-run",
            source.label, args.file
        )));
    }
    let mut plan = planned.plan;
    plan.reached_with = reached_with;
    let format = args.format.unwrap_or(match args.output {
        Some(_) => PlanFormat::Json,
        None => PlanFormat::Text,
    });
    let Some(out) = args.output else {
        print!("{}", rendered(&plan, format, None, verbose));
        return Ok(());
    };
    let text = rendered(&plan, format, None, verbose);
    if args.sign && !matches!(format, PlanFormat::Json) {
        return Err(Error::Usage(
            "--sign signs a plan apply reads: save it as json (the default with -o)".into(),
        ));
    }
    write_new(&out, text.as_bytes())?;
    if args.sign {
        super::approve::sign_as_author(&out, text.as_bytes(), &args.signing)?;
    }
    let shown = out.display().to_string();
    let sha = crate::actions::plan::file_sha256(text.as_bytes());
    if !quiet {
        match format {
            PlanFormat::Json => {
                print!(
                    "{}",
                    plan.render(Style::Text, Some((&shown, &sha)), verbose)
                );
                eprintln!(
                    "plan saved to {shown}; the Markdown of this very plan, for a review: runbook plan {shown} --format md"
                );
            }
            _ => eprintln!("plan written to {shown}"),
        }
    }
    Ok(())
}

/// `whole`: long scripts unfolded in text (`-v`).
fn rendered(plan: &Plan, format: PlanFormat, saved: Option<(&str, &str)>, whole: bool) -> String {
    match format {
        PlanFormat::Json => plan.to_json(),
        PlanFormat::Text => plan.render(Style::Text, saved, whole),
        PlanFormat::Md => plan.render(Style::Markdown, saved, whole),
    }
}

/// `runbook plan PLAN.json [--format text|md] [-o FILE]`: a saved plan, shown (nothing is
/// planned again: the reviewer reads the very plan `apply` will hold the run to).
fn show_saved(args: PlanArgs, verbose: bool) -> Result<()> {
    if !args.sets.is_empty() || args.params.is_some() || args.offline {
        return Err(Error::Usage(format!(
            "{}: a saved plan is shown as it is; --set, --params and --offline are for making one (runbook plan RUNBOOK …)",
            args.file
        )));
    }
    let bytes = std::fs::read(&args.file)
        .map_err(|e| Error::PlanFile(format!("cannot read plan {}: {e}", args.file)))?;
    let text = String::from_utf8_lossy(&bytes);
    let plan = Plan::parse(&text, &args.file).map_err(Error::PlanFile)?;
    // What a reviewer reads must be what the plan holds: a text that is not (an edited
    // file) is refused here as apply refuses it.
    let unbound = plan.unbound();
    if !unbound.is_empty() {
        return Err(Error::PlanFile(format!(
            "{}: not shown: the plan file does not hold together (was it edited?):\n  - {}\napply refuses it too; make a new plan",
            args.file,
            unbound.join("\n  - ")
        )));
    }
    let sha = crate::actions::plan::file_sha256(&bytes);
    let format = args.format.unwrap_or(PlanFormat::Text);
    let out = rendered(&plan, format, Some((&args.file, &sha)), verbose);
    match args.output {
        None => print!("{out}"),
        Some(path) => write_new(&path, out.as_bytes())?,
    }
    Ok(())
}

/// `p` with symlinks resolved, as a plan records the inventory and ssh_config.
pub(super) fn absolute(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// Writes `bytes` to `path` whole or not at all, readable by its owner only (records and
/// replies are 0600 too: a plan names hosts, paths and commands), never through a link
/// (`fsx`: the same write as init's, new's and fmt's).
fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| Error::PlanFile(format!("-o {}: not a file name", path.display())))?;
    crate::base::fsx::write(
        dir,
        Path::new(name),
        bytes,
        crate::base::fsx::Mode::Private,
        crate::base::fsx::Replace::Yes,
        false,
    )?;
    Ok(())
}
