//! The state dir and the run records in it: `<state>/runs/<RUN_ID>.jsonl`.
//!
//! The state dir is `--state-dir`, else `$RUNBOOK_STATE_DIR`, else the XDG state dir
//! (`$XDG_STATE_HOME/runbook`, usually `~/.local/state/runbook`).

use crate::actions::events::{Event, Stamped};
use crate::base::error::{Error, Result};
use crate::run::index::{self, Entry};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub fn state_dir(flag: Option<PathBuf>) -> PathBuf {
    if let Some(dir) = flag {
        return dir;
    }
    if let Some(dir) = std::env::var_os("RUNBOOK_STATE_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir).join("runbook");
    }
    directories::BaseDirs::new()
        .map(|b| b.home_dir().join(".local/state/runbook"))
        .unwrap_or_else(|| PathBuf::from(".runbook-state"))
}

pub fn runs_dir(state: &Path) -> PathBuf {
    state.join("runs")
}

/// Sortable, unique enough, and easy to type: `20261130-021715-3fa2`.
pub fn new_run_id() -> String {
    let now = std::time::SystemTime::now();
    let stamp = humantime::format_rfc3339_seconds(now).to_string();
    let digits: String = stamp.chars().filter(|c| c.is_ascii_digit()).collect();
    let nanos = now
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let salt = (nanos ^ std::process::id().wrapping_mul(2_654_435_761)) & 0xffff;
    format!("{}-{}-{salt:04x}", &digits[..8], &digits[8..14])
}

/// Creates the record file for a new run, and lists it in the index of runs
/// (`run/index.rs`). Failing here stops the run before it changes anything: runbook does
/// not act without keeping a record.
pub fn create_record(state: &Path, run_id: &str) -> Result<(PathBuf, File)> {
    let dir = runs_dir(state);
    let explain = |e: std::io::Error, what: &Path| {
        Error::Record(format!(
            "cannot keep the run record in {}: {e}\nrunbook records every run and will not start without a record; \
             free space there or choose another place with --state-dir DIR (or RUNBOOK_STATE_DIR)",
            what.display()
        ))
    };
    std::fs::create_dir_all(&dir).map_err(|e| explain(e, &dir))?;
    let path = dir.join(format!("{run_id}.jsonl"));
    // Only this user reads it: it holds every command and its output (secrets masked,
    // but paths, hosts and what the commands printed are the user's business).
    let file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| explain(e, &path))?;
    let index = index::path(state);
    let opened = Entry::Opened {
        run_id: run_id.to_string(),
    };
    index::append(&index, opened).map_err(|e| explain(e, &index))?;
    Ok((path, file))
}

/// Why the saved plan (its file's sha256, its id: `Plan::id`) cannot be applied: the run
/// that applied it already, as a person reads it; `None` when none did. A plan is spent
/// once applied (the index of runs says by which run), unless that apply ended without
/// success and without changing anything.
pub fn plan_spent(state: &Path, sha256: &str, plan_id: &str) -> Result<Option<String>> {
    let index = index::path(state);
    let earlier = index::applied_by(&index, sha256, plan_id).map_err(|e| Error::io(&index, e))?;
    Ok(earlier.map(|run| spent_why(state, &run)))
}

/// Records that `run_id` applies the saved plan, before its record is made; or, when a
/// run applied it already, why it cannot (as [`plan_spent`] says it), writing nothing.
pub fn claim_plan(
    state: &Path,
    run_id: &str,
    sha256: &str,
    plan_id: &str,
) -> Result<Option<String>> {
    std::fs::create_dir_all(state).map_err(|e| Error::io(state, e))?;
    let index = index::path(state);
    let earlier =
        index::claim_plan(&index, run_id, sha256, plan_id).map_err(|e| Error::io(&index, e))?;
    Ok(earlier.map(|run| spent_why(state, &run)))
}

/// Records that `run_id`, which claimed a saved plan, ended without success and without
/// changing anything: the plan is not spent.
pub fn release_plan(state: &Path, run_id: &str) -> Result<()> {
    let index = index::path(state);
    index::release_plan(&index, run_id).map_err(|e| Error::io(&index, e))
}

fn spent_why(state: &Path, run: &str) -> String {
    let ended = list_runs(state)
        .ok()
        .and_then(|runs| runs.into_iter().find(|r| r.id == run))
        .map_or(String::new(), |r| format!(" (its outcome: {})", r.outcome));
    format!(
        "it was applied already, by run {run}{ended}; see `runbook log {run}`. A plan is spent once applied (an apply that failed before changing anything does not spend it)"
    )
}

/// What `history` shows of a run, read from its first and last events.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub id: String,
    pub path: PathBuf,
    pub started: String,
    pub runbook: String,
    pub file: String,
    pub mode: String,
    pub content_hash: String,
    /// "ok", "failed", "interrupted", or "incomplete" when the record has no end.
    pub outcome: String,
    pub duration_ms: Option<u64>,
    /// sha256 of the plan file the run applied (`runbook apply`).
    pub plan: Option<String>,
    /// Who signed that plan and who approved it (a policy's sign-off), and who ran it.
    pub author: Option<String>,
    pub approvers: Vec<String>,
    pub user: String,
}

pub fn read_events(path: &Path) -> Result<Vec<Stamped>> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut events = Vec::new();
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| Error::io(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Stamped>(&line) {
            Ok(ev) => events.push(ev),
            // A torn last line (power loss) should not hide the rest of the record.
            Err(e) => tracing::warn!("{}:{}: unreadable record line: {e}", path.display(), n + 1),
        }
    }
    Ok(events)
}

fn info_from(path: &Path, events: &[Stamped]) -> Option<RunInfo> {
    let first = events.first()?;
    let Event::RunStarted {
        run_id,
        runbook,
        path: file,
        mode,
        content_hash,
        plan,
        author,
        approvers,
        user,
        ..
    } = &first.event
    else {
        return None;
    };
    let (outcome, duration_ms) = match events.last().map(|e| &e.event) {
        Some(Event::RunFinished {
            outcome,
            duration_ms,
            ..
        }) => (outcome.as_str().to_string(), Some(*duration_ms)),
        _ => ("incomplete".to_string(), None),
    };
    Some(RunInfo {
        id: run_id.clone(),
        path: path.to_path_buf(),
        started: first.ts.clone(),
        runbook: runbook.clone(),
        file: file.clone(),
        mode: mode.clone(),
        content_hash: content_hash.clone(),
        outcome,
        duration_ms,
        plan: plan.clone(),
        author: author.clone(),
        approvers: approvers.clone(),
        user: user.clone(),
    })
}

/// The first and the last event of a record, without reading what is between: records
/// of chatty commands run to tens of megabytes, and `history` reads every record.
fn first_and_last(path: &Path) -> Option<Vec<Stamped>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = File::open(path).ok()?;
    let mut first = String::new();
    BufReader::new(&mut file).read_line(&mut first).ok()?;
    let first: Stamped = serde_json::from_str(first.trim()).ok()?;
    let len = file.metadata().ok()?.len();
    // The last event is small (run_finished); 64 KiB also covers a long last line.
    let tail_start = len.saturating_sub(64 * 1024);
    file.seek(SeekFrom::Start(tail_start)).ok()?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).ok()?;
    // The cut may fall inside a character: lossy, the partial first line is skipped anyway.
    let tail = String::from_utf8_lossy(&tail);
    let last = tail
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Stamped>(l).ok());
    Some(match last {
        Some(last) => vec![first, last],
        None => vec![first],
    })
}

/// All runs, oldest first.
pub fn list_runs(state: &Path) -> Result<Vec<RunInfo>> {
    let dir = runs_dir(state);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut runs = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|x| x == "jsonl") {
            if let Some(info) = first_and_last(&path).and_then(|events| info_from(&path, &events)) {
                runs.push(info);
            }
        }
    }
    runs.sort_by(|a, b| a.started.cmp(&b.started).then(a.id.cmp(&b.id)));
    Ok(runs)
}

/// Whether the run of the record at `path` ran (or planned) a command on a target whose
/// name `matches`: each action's target, read line by line to the record's end.
pub fn touched(path: &Path, matches: impl Fn(&str) -> bool) -> Result<bool> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| Error::io(path, e))?;
        // Only the lines that can be one are parsed: output lines are most of a record.
        if !line.contains("\"action_started\"") && !line.contains("\"action_planned\"") {
            continue;
        }
        let Ok(ev) = serde_json::from_str::<Stamped>(&line) else {
            continue;
        };
        if let Event::ActionStarted { target, .. } | Event::ActionPlanned { target, .. } = &ev.event
        {
            if matches(target) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Finds a run by id (or a unique prefix of one), or `last`.
pub fn find_run(state: &Path, which: &str, filter: impl Fn(&RunInfo) -> bool) -> Result<RunInfo> {
    let runs = list_runs(state)?;
    if which == "last" {
        return runs.into_iter().rev().find(|r| filter(r)).ok_or_else(|| {
            Error::NoSuchRun(format!("no earlier run found in {}", state.display()))
        });
    }
    let matches: Vec<RunInfo> = runs
        .into_iter()
        .filter(|r| r.id.starts_with(which))
        .collect();
    match matches.len() {
        1 => Ok(matches.into_iter().next().unwrap()),
        0 => Err(Error::NoSuchRun(format!(
            "no run '{which}' in {} (see `runbook history`)",
            state.display()
        ))),
        n => Err(Error::NoSuchRun(format!(
            "'{which}' matches {n} runs; give more of the run id"
        ))),
    }
}
