//! Commands an earlier run left running. A run killed with `kill -9` (or that lost the
//! connection to a host) cannot stop what it started, and its command goes on: `sleep`
//! does not notice its reader is gone, and sshd does not signal a command whose channel
//! closed. Resuming would start the step's command again beside it.
//!
//! So each command's process group is in the record (`action_pgid`, with its leader's
//! start time and the boot id), and before a resumed run does anything, every command of
//! the earlier run that never finished is looked up where it ran, through the same hops:
//! still running *and* the same process (not a later one with the same number) → stopped
//! (TERM, 2 s, KILL) and named in a warning of the new run's record; cannot be checked
//! (host unreachable) or cannot be proved the same → the resume is refused. The check is
//! `sh/orphan.sh`.
//!
//! Only the run being resumed needs looking at, not the runs it resumed from in turn:
//! each of those was itself a resume that did this before its first event, or refused.

use crate::actions::ctx::{Ctx, Mode};
use crate::actions::events::{Bus, Event, Stamped};
use crate::base::error::{Error, Result};
use crate::targets::{Hop, Target};
use std::collections::HashMap;
use std::ffi::OsString;

/// A command of an earlier run whose end that run never saw.
#[derive(Debug, Clone)]
pub struct Orphan {
    pub(crate) run: String,
    pub(crate) step: String,
    pub(crate) target: String,
    pub(crate) command: String,
    pub(crate) pgid: u32,
    pub(crate) start_time: Option<u64>,
    pub(crate) boot_id: Option<String>,
    pub(crate) via: Vec<Hop>,
    /// It ran detached (`detach = true`): its job, which a resumed run follows again
    /// instead of stopping it.
    pub(crate) job: Option<String>,
}

impl Orphan {
    pub(crate) fn describe(&self) -> String {
        format!(
            "the command of step \"{}\" in run {} on {} (process group {}: {})",
            self.step, self.run, self.target, self.pgid, self.command
        )
    }
}

/// The commands of `run`'s record that may still run: their group is recorded and the
/// record never saw them end (runbook died), or saw only that the connection to their
/// host was lost, which leaves the command's fate unknown.
pub fn find(run: &str, events: &[Stamped]) -> Vec<Orphan> {
    let mut steps: HashMap<usize, String> = HashMap::new();
    let mut commands: HashMap<u64, String> = HashMap::new();
    let mut open: Vec<(u64, Orphan)> = Vec::new();
    let mut jobs: HashMap<u64, String> = HashMap::new();
    for ev in events {
        match &ev.event {
            Event::StepStarted { index, name, .. } => {
                steps.insert(*index, name.clone());
            }
            Event::ActionStarted {
                action, command, ..
            } => {
                commands.insert(*action, command.clone());
            }
            Event::ActionDetached { action, job, .. } => {
                jobs.insert(*action, job.clone());
            }
            Event::ActionPgid {
                step,
                action,
                target,
                pgid,
                start_time,
                boot_id,
                via,
            } => open.push((
                *action,
                Orphan {
                    run: run.to_string(),
                    step: steps.get(step).cloned().unwrap_or_default(),
                    target: target.clone(),
                    command: commands.get(action).cloned().unwrap_or_default(),
                    pgid: *pgid,
                    start_time: *start_time,
                    boot_id: boot_id.clone(),
                    via: via.clone(),
                    job: jobs.get(action).cloned(),
                },
            )),
            // One whose connection was lost stays open: its exit status is unknown, and
            // it may still run there.
            Event::ActionFinished {
                action,
                connection_lost: false,
                ..
            } => open.retain(|(a, _)| a != action),
            _ => {}
        }
    }
    open.into_iter().map(|(_, o)| o).collect()
}

/// What `orphan.sh` found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// Not running (or its number now belongs to another process).
    Gone,
    Running,
    Stopped,
    /// Running, but nothing proves it is the recorded group.
    Unsure,
    /// Still there after TERM and KILL.
    Survived,
}

/// Runs `orphan.sh` for each of `orphans` where it ran, all at once (hosts that do not
/// answer each take their connect timeout: in turn, a fleet's would add up).
pub(crate) async fn probe_all(
    registry: &crate::targets::registry::Registry,
    orphans: &[&Orphan],
    stop: bool,
) -> Vec<std::result::Result<Found, String>> {
    let mut tasks = Vec::with_capacity(orphans.len());
    for o in orphans {
        let target = Target::from_route(&o.via, registry);
        let argv: Vec<OsString> = vec![
            "sh".into(),
            "-c".into(),
            crate::base::script::ORPHAN.body.into(),
            "sh".into(),
            o.pgid.to_string().into(),
            o.start_time.map_or("-".into(), |t| t.to_string()).into(),
            o.boot_id.clone().unwrap_or_else(|| "-".into()).into(),
            if stop { "stop" } else { "check" }.into(),
        ];
        tasks.push(tokio::task::spawn_local(async move {
            let out = target?.run_plain(argv).await?;
            let said = String::from_utf8_lossy(&out.stdout);
            match (out.code, said.trim()) {
                (Some(0), "gone" | "other") => Ok(Found::Gone),
                (Some(0), "running") => Ok(Found::Running),
                (Some(0), "stopped" | "killed") => Ok(Found::Stopped),
                (Some(0), "unsure") => Ok(Found::Unsure),
                (Some(0), "survived") => Ok(Found::Survived),
                _ => Err(format!(
                    "the check ended ({}) and said {:?} {:?}",
                    out.why(None),
                    said.trim(),
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
            }
        }));
    }
    let mut found = Vec::with_capacity(tasks.len());
    for task in tasks {
        found.push(
            task.await
                .unwrap_or_else(|e| Err(format!("the check failed: {e}"))),
        );
    }
    found
}

fn refusal(o: &Orphan, found: &std::result::Result<Found, String>) -> Option<String> {
    let g = o.pgid;
    match found {
        Ok(Found::Gone | Found::Running | Found::Stopped) => None,
        Ok(Found::Unsure) => Some(format!(
            "{} may still run: process group {g} runs on {}, but its leader is gone, so nothing proves it is that command and not a later one with the same number; look (ps -o pid,lstart,args -g {g}) and stop it if it is (kill -- -{g})",
            o.describe(),
            o.target
        )),
        Ok(Found::Survived) => Some(format!(
            "{} still runs after TERM and KILL (stuck in the kernel?); resume once it is gone",
            o.describe()
        )),
        Err(e) => Some(format!(
            "cannot check whether {} still runs: {e}; resume once {} can be reached, or stop it there by hand",
            o.describe(),
            o.target
        )),
    }
}

/// Before a resumed run starts: its earlier run's detached commands that may still run
/// are followed again, not stopped: each is handed to the step that runs the same
/// command on the same target (`perform/run.rs`), which starts it by its job id and so
/// finds it running, or ended with its status waiting, instead of starting a second
/// copy. Returns the notes for the new run's record.
pub fn reattach(ctx: &Ctx, orphans: &[Orphan]) -> Vec<String> {
    let mut notes = Vec::new();
    for o in orphans {
        let Some(job) = &o.job else { continue };
        ctx.detached_resume.borrow_mut().insert(
            (o.step.clone(), o.target.clone(), o.command.clone()),
            job.clone(),
        );
        notes.push(format!(
            "{} ran detached (job {job}): step \"{}\" follows it again instead of starting it a second time",
            o.describe(),
            o.step
        ));
    }
    notes
}

/// Before a resumed run starts: finds which of `orphans` still run and, in a real run,
/// stops them (not the detached ones: see `reattach`). Returns the warnings for the new run's record. Refuses (exit 2) when one
/// cannot be checked or proved to be the recorded command; a dry-run only reports.
pub async fn settle(ctx: &Ctx, resuming: &str, orphans: &[Orphan]) -> Result<Vec<String>> {
    let orphans: Vec<Orphan> = orphans
        .iter()
        .filter(|o| o.job.is_none())
        .cloned()
        .collect();
    if orphans.is_empty() {
        return Ok(Vec::new());
    }
    if matches!(ctx.mode, Mode::Offline | Mode::Inspect) {
        return Ok(orphans
            .iter()
            .map(|o| {
                format!(
                    "{} may still run; --offline does not look, a real resume checks and stops it first",
                    o.describe()
                )
            })
            .collect());
    }
    // Every one is checked before any is stopped, so that a refusal changes nothing.
    let all: Vec<&Orphan> = orphans.iter().collect();
    let mut running = Vec::new();
    let mut problems = Vec::new();
    for (o, found) in all.iter().zip(probe_all(&ctx.targets, &all, false).await) {
        match refusal(o, &found) {
            Some(p) => problems.push(p),
            None if found == Ok(Found::Running) => running.push(*o),
            None => tracing::debug!("{} no longer runs", o.describe()),
        }
    }
    let refuse = |problems: Vec<String>, done: &[String]| {
        let mut msg = format!(
            "--resume {resuming}: a command of the earlier run may still be running; running its step again would start a second copy beside it:\n  - {}",
            problems.join("\n  - ")
        );
        if done.is_empty() {
            msg.push_str("\nnothing was changed");
        } else {
            msg.push_str(&format!(
                "\nno step was run; already stopped:\n  - {}",
                done.join("\n  - ")
            ));
        }
        Error::Resume(msg)
    };
    if !problems.is_empty() {
        // A refused run ends here: it leaves no connection behind.
        ctx.targets.close_all().await;
        return Err(refuse(problems, &[]));
    }
    if ctx.mode != Mode::Real {
        return Ok(running
            .iter()
            .map(|o| {
                format!(
                    "{} is still running; a real resume stops it first",
                    o.describe()
                )
            })
            .collect());
    }
    let mut notes = Vec::new();
    let mut problems = Vec::new();
    for (o, found) in running
        .iter()
        .zip(probe_all(&ctx.targets, &running, true).await)
    {
        match refusal(o, &found) {
            Some(p) => problems.push(p),
            None if found == Ok(Found::Stopped) => notes.push(format!(
                "{} was still running; stopped it before resuming",
                o.describe()
            )),
            None => {}
        }
    }
    if !problems.is_empty() {
        ctx.targets.close_all().await;
        return Err(refuse(problems, &notes));
    }
    Ok(notes)
}

/// Writes `settle`'s warnings into the new run's record (and so on the terminal).
pub fn log(bus: &Bus, notes: Vec<String>) {
    for message in notes {
        bus.emit(Event::Log {
            step: None,
            level: crate::actions::events::Level::Warn,
            message,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(json: &str) -> Stamped {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn only_commands_whose_end_is_unknown_are_left_over() {
        let record = [
            r#"{"ts":"t","event":"step_started","index":0,"name":"a","attempt":1}"#,
            r#"{"ts":"t","event":"action_started","step":0,"action":1,"target":"local","effect":"change","summary":"x","command":"x"}"#,
            r#"{"ts":"t","event":"action_pgid","step":0,"action":1,"target":"local","pgid":10,"start_time":5,"boot_id":"b"}"#,
            r#"{"ts":"t","event":"action_finished","step":0,"action":1,"ok":true,"code":0,"duration_ms":1}"#,
            r#"{"ts":"t","event":"action_started","step":0,"action":2,"target":"h","effect":"change","summary":"y","command":"y"}"#,
            r#"{"ts":"t","event":"action_pgid","step":0,"action":2,"target":"h","pgid":20,"via":[{"ssh":{"host":"h","connect_timeout_ms":10000}}]}"#,
            r#"{"ts":"t","event":"action_finished","step":0,"action":2,"ok":false,"duration_ms":0,"error":"connection lost to h while the command ran","connection_lost":true}"#,
            r#"{"ts":"t","event":"step_started","index":1,"name":"b","attempt":1}"#,
            r#"{"ts":"t","event":"action_started","step":1,"action":3,"target":"local","effect":"read","summary":"z","command":"z"}"#,
            r#"{"ts":"t","event":"action_pgid","step":1,"action":3,"target":"local","pgid":30}"#,
        ]
        .map(ev);
        let left = find("r1", &record);
        let groups: Vec<(u32, &str, &str)> = left
            .iter()
            .map(|o| (o.pgid, o.step.as_str(), o.command.as_str()))
            .collect();
        assert_eq!(groups, vec![(20, "a", "y"), (30, "b", "z")]);
        assert_eq!(left[0].via.len(), 1);
        assert!(left[1]
            .describe()
            .contains("run r1 on local (process group 30: z)"));
    }
}
