//! `history` and `log`: read the run records.

use crate::actions::events::Sink;
use crate::base::error::{Error, Result};
use crate::cli::args::HistoryFilter;
use crate::run::sinks::terminal::{TerminalOptions, TerminalSink};
use crate::run::state;
use std::path::PathBuf;
use std::time::Duration;

pub fn history(limit: usize, filter: &HistoryFilter, state_dir: Option<PathBuf>) -> Result<()> {
    let dir = state::state_dir(state_dir);
    let all = state::list_runs(&dir)?;
    if all.is_empty() {
        println!("no runs recorded in {}", dir.display());
        return Ok(());
    }
    let mut runs = Vec::new();
    for r in all {
        if kept(&r, filter)? {
            runs.push(r);
        }
    }
    if runs.is_empty() {
        println!(
            "no run in {} is {}",
            dir.display(),
            crate::base::printable::line(&described(filter))
        );
        return Ok(());
    }
    // Whether each record still holds (its chain and the index of runs): one pass over
    // the state dir, as `audit verify --all` makes.
    let checked = crate::run::audit::verify(&dir, None)?;
    let verdict = |id: &str| {
        checked
            .records
            .iter()
            .find(|c| c.run_id == id)
            .map_or("-", |c| verdict_word(&c.verdict))
    };
    println!(
        "{:<22} {:<24} {:<18} {:<16} {:<11} {:>8}  {:<12}  {:<10}  FILE",
        "RUN", "STARTED", "RUNBOOK", "MODE", "OUTCOME", "TIME", "PLAN", "RECORD"
    );
    for r in runs
        .iter()
        .rev()
        .take(limit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        let took = r
            .duration_ms
            .map(|ms| crate::base::duration::short(Duration::from_millis(ms)))
            .unwrap_or("-".into());
        // The applied plan's sha256, as `plan -o` and `apply` print it.
        let plan = r.plan.as_deref().map_or("-", |p| &p[..p.len().min(12)]);
        // A signed plan: who made it, who approved it, who applied it.
        let signoff = match &r.author {
            Some(author) => format!(
                "  signed {author}, approved {}, applied by {}",
                match r.approvers.is_empty() {
                    true => "by nobody".to_string(),
                    false => r.approvers.join(", "),
                },
                r.user
            ),
            None => String::new(),
        };
        println!(
            "{:<22} {:<24} {:<18} {:<16} {:<11} {:>8}  {:<12}  {:<10}  {}{}",
            r.id,
            r.started,
            crate::base::printable::line(&r.runbook),
            r.mode,
            r.outcome,
            took,
            plan,
            verdict(&r.id),
            crate::base::printable::line(&r.file),
            crate::base::printable::line(&signoff)
        );
    }
    if let crate::run::audit::IndexVerdict::Bad(why) = &checked.index {
        println!("the index of runs does not hold: {why} (runbook audit verify --all)");
    }
    Ok(())
}

/// Whether `history`'s filters keep the run `r` (the cheap ones first: `--target` reads
/// the whole record).
fn kept(r: &state::RunInfo, f: &HistoryFilter) -> Result<bool> {
    use crate::base::glob;
    if let Some(name) = &f.runbook {
        let base = r.file.rsplit('/').next().unwrap_or_default();
        if ![r.runbook.as_str(), &r.file, base]
            .iter()
            .any(|text| glob::matches(name, text))
        {
            return Ok(false);
        }
    }
    if f.failed && !matches!(r.outcome.as_str(), "failed" | "interrupted") {
        return Ok(false);
    }
    if let Some(since) = f.since {
        let started = humantime::parse_rfc3339_weak(&r.started).ok();
        if started.is_none_or(|t| t < since) {
            return Ok(false);
        }
    }
    match &f.target {
        None => Ok(true),
        // The target itself, or a container on it (`node1/ct200` for `node1`).
        Some(t) => state::touched(&r.path, |name| {
            glob::matches(t, name)
                || name
                    .char_indices()
                    .filter(|(_, c)| *c == '/')
                    .any(|(i, _)| glob::matches(t, &name[..i]))
        }),
    }
}

/// The filters as words, for "no run is …".
fn described(f: &HistoryFilter) -> String {
    let mut out = Vec::new();
    if f.failed {
        out.push("failed".to_string());
    }
    if let Some(n) = &f.runbook {
        out.push(format!("of runbook {n}"));
    }
    if let Some(t) = &f.target {
        out.push(format!("on target {t}"));
    }
    if let Some(s) = f.since {
        out.push(format!(
            "started since {}",
            humantime::format_rfc3339_seconds(s)
        ));
    }
    out.join(", ")
}

/// A record's state in one word: `verified`, `incomplete` (killed or running, its chain
/// intact), `unchained` (made before records were chained), `empty`, or `TAMPERED`
/// (`runbook audit verify RUN` says where).
fn verdict_word(v: &crate::run::audit::Verdict) -> &'static str {
    use crate::run::audit::Verdict;
    match v {
        Verdict::Ok { .. } => "verified",
        Verdict::Incomplete { .. } => "incomplete",
        Verdict::Unchained => "unchained",
        Verdict::Empty => "empty",
        Verdict::Bad { .. } => "TAMPERED",
    }
}

pub fn log(
    which: &str,
    json: bool,
    state_dir: Option<PathBuf>,
    verbose: bool,
    quiet: bool,
) -> Result<()> {
    let dir = state::state_dir(state_dir);
    let info = state::find_run(&dir, which, |_| true)?;
    if json {
        let text = std::fs::read_to_string(&info.path).map_err(|e| Error::io(&info.path, e))?;
        print!("{text}");
        return Ok(());
    }
    // Replays the record through the same terminal view, with every output line; the
    // scripts' bodies with -v.
    let mut opts = TerminalOptions::detect(true, quiet);
    opts.scripts = verbose;
    opts.fancy = false;
    opts.color = false;
    opts.stdout = true;
    let mut sink = TerminalSink::new(opts);
    for ev in state::read_events(&info.path)? {
        sink.emit(&ev);
    }
    if info.outcome == "incomplete" {
        println!("(the record ends here: the run was killed or is still running)");
    }
    let checked = crate::run::audit::verify(&dir, Some(&info.id))?;
    let word = checked
        .records
        .first()
        .map_or("-", |c| verdict_word(&c.verdict));
    println!("record: {} ({word})", info.path.display());
    Ok(())
}
