//! What became of a proposal, looked at each round: rejected (`runbook watch FILE --reject
//! ID` left `ID.rejected` beside the plan, or its plan file is gone), applied (a run
//! record names the plan's sha256, as `runbook history`'s PLAN column does: whoever ran
//! `runbook apply`), expired; and, where the watch file allows it, applied by the
//! watcher once the plan carries the approvals the policy asks.
//!
//! The watcher's own apply is `runbook apply PLAN --yes` as a person would type it, run
//! as a child in its own process group from the plan's directory: every check apply
//! makes (the plan's age, its runbook and modules, the author's signature and the
//! approvals, the targets being the planned machines) is made by apply itself. The
//! approvals are checked here first with the same verification (`run/signoff.rs`), so
//! that a plan nobody approved is never handed to apply at all.

use super::state::{rfc3339, Proposal, Status};
use crate::actions::plan::Plan;
use crate::base::project::Policy;
use crate::run::signoff;
use crate::run::state::RunInfo;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// `ID.rejected`: who rejected a proposal, when, and why.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    pub by: String,
    pub at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `ID.rejected` beside `plan` (`ID.json`).
pub fn rejection_path(plan: &Path) -> PathBuf {
    plan.with_extension("rejected")
}

/// Records the rejection of the proposal whose plan is `plan` (the watcher closes it at
/// its next look). Refused when it is rejected already.
pub fn reject(plan: &Path, by: &str, reason: Option<String>) -> Result<PathBuf, String> {
    let path = rejection_path(plan);
    let r = Rejection {
        by: by.to_string(),
        at: rfc3339(SystemTime::now()),
        reason,
    };
    let mut text = serde_json::to_string(&r).expect("a rejection serializes");
    text.push('\n');
    let dir = plan.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(PathBuf::from).unwrap_or_default();
    crate::base::fsx::write(
        dir,
        &name,
        text.as_bytes(),
        crate::base::fsx::Mode::Private,
        crate::base::fsx::Replace::No,
        false,
    )
    .map_err(|e| e.to_string())?;
    Ok(path)
}

/// How a pending proposal was decided outside the watcher, if it was: its new status and
/// the words for it. `runs`: the run records (`state::list_runs`).
pub fn decided(p: &Proposal, runs: &[RunInfo], now: u64, expire: u64) -> Option<(Status, String)> {
    if let Some(run) = runs
        .iter()
        .find(|r| r.plan.as_deref() == Some(p.sha256.as_str()))
    {
        match run.outcome.as_str() {
            // Still running: decided once it ends.
            "incomplete" => {}
            "ok" => {
                return Some((
                    Status::Applied,
                    format!("applied by {} (run {})", run.user, run.id),
                ))
            }
            other => {
                return Some((
                    Status::Failed,
                    format!("applied by {} (run {}): {other}", run.user, run.id),
                ))
            }
        }
    }
    let marker = rejection_path(&p.plan);
    if let Ok(text) = std::fs::read_to_string(&marker) {
        let said = match serde_json::from_str::<Rejection>(&text) {
            Ok(r) => format!(
                "rejected by {} at {}{}",
                crate::base::printable::line(&r.by),
                r.at,
                r.reason
                    .map(|w| format!(": {}", crate::base::printable::line(&w)))
                    .unwrap_or_default()
            ),
            Err(_) => format!("rejected ({} is there)", marker.display()),
        };
        return Some((Status::Rejected, said));
    }
    if !p.plan.exists() {
        return Some((
            Status::Rejected,
            format!("its plan {} is gone: taken as rejected", p.plan.display()),
        ));
    }
    if now >= p.created_unix.saturating_add(expire) {
        return Some((
            Status::Expired,
            format!("expired: no decision since {}", p.created),
        ));
    }
    None
}

/// Whether the plan carries the approvals `policy` asks of it: `Ok(None)` when it does,
/// `Ok(Some(what is missing))` when not yet.
pub fn approvals(
    p: &Proposal,
    policy: &Policy,
    inventory: Option<&crate::base::inventory::Inventory>,
) -> Result<Option<String>, String> {
    let bytes =
        std::fs::read(&p.plan).map_err(|e| format!("cannot read {}: {e}", p.plan.display()))?;
    if crate::actions::plan::file_sha256(&bytes) != p.sha256 {
        return Err(format!(
            "{} is not the plan proposed (its sha256 changed): not applied",
            p.plan.display()
        ));
    }
    let plan = Plan::parse(
        &String::from_utf8_lossy(&bytes),
        &p.plan.display().to_string(),
    )?;
    let v = signoff::verify(&p.plan, &p.sha256, policy)?;
    let (need, _) = signoff::required_in(policy, &plan, inventory);
    let mut missing = Vec::new();
    if v.author.is_none() {
        missing.push("its author's signature".to_string());
    }
    if (v.approvers.len() as u32) < need {
        missing.push(format!("{} of {need} approval(s)", v.approvers.len()));
    }
    Ok((!missing.is_empty()).then(|| missing.join(", ")))
}

/// `runbook apply PLAN --yes --state-dir STATE`, run by the watcher: its exit code and the
/// last lines it said. A signal to the watcher is passed on to it (its own process
/// group: a terminal's Ctrl-C reaches it once, through the watcher).
pub async fn apply(
    plan: &Path,
    state_dir: &Path,
    cancel: &crate::base::cancel::Cancel,
    signals_before: u32,
) -> Result<(i32, String), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find runbook itself: {e}"))?;
    let child = tokio::process::Command::new(exe)
        .arg("apply")
        .arg(plan)
        .arg("--yes")
        .arg("--state-dir")
        .arg(state_dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start runbook apply: {e}"))?;
    let pid = child.id();
    let out = child.wait_with_output();
    tokio::pin!(out);
    // Each signal to the watcher after `signals_before` (the count when the apply was
    // decided) is passed on once; the count is looked at again every half second too,
    // so a signal between two looks is never lost.
    let mut told = signals_before;
    let out = loop {
        if cancel.count() > told {
            told = cancel.count();
            if let Some(pid) = pid {
                // SAFETY: a signal to the child this function started.
                unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            }
        }
        tokio::select! {
            r = &mut out => break r,
            _ = cancel.notified() => {}
            _ = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
        }
    }
    .map_err(|e| format!("runbook apply: {e}"))?;
    let said = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = said.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = tail[tail.len().saturating_sub(6)..].join("\n");
    Ok((out.status.code().unwrap_or(-1), tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(dir: &Path) -> Proposal {
        let plan = dir.join("t-gpu1-20260101-000000.json");
        std::fs::write(&plan, "{}").unwrap();
        Proposal {
            id: "t-gpu1-20260101-000000".into(),
            trigger: "t".into(),
            target: "gpu1".into(),
            why: String::new(),
            summary: String::new(),
            plan,
            markdown: dir.join("x.md"),
            sha256: "abc".into(),
            created: "2026-01-01T00:00:00Z".into(),
            created_unix: 1000,
            status: Status::Pending,
            closed_unix: None,
            outcome: None,
            notified: Vec::new(),
        }
    }

    fn run(plan: &str, outcome: &str) -> RunInfo {
        RunInfo {
            id: "r1".into(),
            path: PathBuf::new(),
            started: String::new(),
            runbook: String::new(),
            file: String::new(),
            mode: "real".into(),
            content_hash: String::new(),
            outcome: outcome.into(),
            duration_ms: None,
            plan: Some(plan.into()),
            author: None,
            approvers: Vec::new(),
            user: "carol".into(),
        }
    }

    #[test]
    fn applied_rejected_gone_expired() {
        let dir = tempfile::tempdir().unwrap();
        let p = pending(dir.path());
        assert_eq!(decided(&p, &[], 1500, 1000), None);
        assert_eq!(decided(&p, &[], 2000, 1000).unwrap().0, Status::Expired);
        assert_eq!(decided(&p, &[run("abc", "incomplete")], 1500, 1000), None);
        let (s, why) = decided(&p, &[run("abc", "ok")], 1500, 1000).unwrap();
        assert_eq!(
            (s, why.as_str()),
            (Status::Applied, "applied by carol (run r1)")
        );
        assert_eq!(
            decided(&p, &[run("abc", "failed")], 1500, 1000).unwrap().0,
            Status::Failed
        );
        assert_eq!(decided(&p, &[run("other", "ok")], 1500, 1000), None);
        reject(&p.plan, "bob@h", Some("not now\u{1b}[2J".into())).unwrap();
        let (s, why) = decided(&p, &[], 1500, 1000).unwrap();
        assert_eq!(s, Status::Rejected);
        assert!(why.starts_with("rejected by bob@h at "), "{why}");
        assert!(
            why.ends_with(": not now\\u{1b}[2J") || !why.contains('\u{1b}'),
            "{why}"
        );
        assert!(reject(&p.plan, "bob@h", None).is_err(), "rejected once");
        std::fs::remove_file(rejection_path(&p.plan)).unwrap();
        std::fs::remove_file(&p.plan).unwrap();
        assert!(decided(&p, &[], 1500, 1000).unwrap().1.contains("is gone"));
    }
}
