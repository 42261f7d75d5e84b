//! What runs left running on targets: `runbook ps` lists it, `runbook stop RUN` ends it.
//!
//! Two kinds: detached commands (`detach = true`), which keep a job directory in
//! runbook's own directory on their target (`sh/detach_list.sh` lists them there, with
//! the run and step that started them), and the commands of runs that were killed or
//! lost their connection, which the runs' records name with their process group
//! (`orphans.rs`). `ps` looks where the records say such commands ran, and on the
//! targets it is given; `stop` ends what one run left, without resuming it: a later
//! `--resume` of that run then starts those steps afresh.

use crate::base::error::{Error, Result};
use crate::base::script::{self, Script};
use crate::run::orphans::{self, Found, Orphan};
use crate::run::state;
use crate::targets::registry::Registry;
use crate::targets::{Hop, Target};
use serde::Serialize;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::rc::Rc;

/// How many of the latest runs `ps` reads the records of.
pub const RUNS_READ: usize = 200;

/// One command still running (or left behind) on a target.
#[derive(Debug, Clone, Serialize)]
pub struct Left {
    pub target: String,
    pub run: String,
    pub step: String,
    pub pgid: Option<u32>,
    /// `running`, `ended N` (a detached command whose status nobody collected yet),
    /// `lost` (a detached command gone without a status), `unsure` (its group runs but
    /// nothing proves it is that command).
    pub state: String,
    pub command: String,
    /// The detached command's job id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}

/// What `ps` found, and the targets it could not look at (with why).
#[derive(Debug, Default)]
pub struct Survey {
    pub left: Vec<Left>,
    pub unreachable: Vec<(String, String)>,
}

/// The commands of the latest `RUNS_READ` runs whose end their record never saw.
fn recorded(state_dir: &Path) -> Result<Vec<Orphan>> {
    let runs = state::list_runs(state_dir)?;
    let mut out = Vec::new();
    for info in runs.iter().rev().take(RUNS_READ) {
        // A record that cannot be read is skipped here: `runbook audit verify` is where
        // a damaged record is reported.
        if let Ok(events) = state::read_events(&info.path) {
            out.extend(orphans::find(&info.id, &events));
        }
    }
    Ok(out)
}

fn script_argv(s: &Script, args: &[&str]) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec!["sh".into(), "-c".into(), s.body.into(), "sh".into()];
    argv.extend(args.iter().map(OsString::from));
    argv
}

/// One job as `detach_list.sh` prints it.
#[derive(Debug, PartialEq, Eq)]
struct Job {
    id: String,
    pgid: Option<u32>,
    state: String,
    run: String,
    step: String,
    argv: Vec<String>,
}

/// Reads `detach_list.sh`'s blocks: `JOB PGID STATE…`, then `=`-prefixed lines (run,
/// step, the argv's words), then `.`.
fn parse_jobs(text: &str) -> Vec<Job> {
    let mut jobs = Vec::new();
    let mut lines = text.lines();
    while let Some(head) = lines.next() {
        let mut words = head.splitn(3, ' ');
        let (Some(id), Some(pgid), Some(state)) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        let mut meta = Vec::new();
        for l in lines.by_ref() {
            match l.strip_prefix('=') {
                Some(m) => meta.push(m.to_string()),
                None => break,
            }
        }
        let mut meta = meta.into_iter();
        jobs.push(Job {
            id: id.to_string(),
            pgid: pgid.parse().ok(),
            state: state.to_string(),
            run: meta.next().unwrap_or_default(),
            step: meta.next().unwrap_or_default(),
            argv: meta.collect(),
        });
    }
    jobs
}

/// The detached jobs on `target`.
async fn jobs_on(target: &Target) -> std::result::Result<Vec<Job>, String> {
    let out = target
        .run_plain(script_argv(&script::DETACH_LIST, &[]))
        .await?;
    if out.code != Some(0) {
        return Err(format!(
            "listing its detached commands ended {}: {}",
            out.why(None),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(parse_jobs(&String::from_utf8_lossy(&out.stdout)))
}

/// `runbook ps`: what still runs on `named` targets (none: every target a record names,
/// and this machine).
pub async fn ps(state_dir: &Path, registry: &Registry, named: &[String]) -> Result<Survey> {
    let recorded = recorded(state_dir)?;
    // Each place once, by its route: the targets named, else those the records name.
    let mut places: BTreeMap<String, (String, Vec<Hop>)> = BTreeMap::new();
    let key = |via: &[Hop]| serde_json::to_string(via).unwrap_or_default();
    if named.is_empty() {
        places.insert(key(&[]), ("local".into(), Vec::new()));
        for o in &recorded {
            places
                .entry(key(&o.via))
                .or_insert_with(|| (o.target.clone(), o.via.clone()));
        }
    } else {
        for name in named {
            let t = registry
                .resolve(name)
                .map_err(|e| Error::Usage(format!("runbook ps {name}: {e}")))?;
            places.insert(key(&t.route()), (name.clone(), t.route()));
        }
    }
    let mut found = Survey::default();
    for (k, (name, via)) in &places {
        let target: Rc<Target> = match Target::from_route(via, registry) {
            Ok(t) => t,
            Err(e) => {
                found.unreachable.push((name.clone(), e));
                continue;
            }
        };
        match jobs_on(&target).await {
            Ok(jobs) => found.left.extend(jobs.into_iter().map(|j| {
                Left {
                    target: name.clone(),
                    run: j.run,
                    step: j.step,
                    pgid: j.pgid,
                    state: j.state,
                    command: crate::base::printable::line(&crate::base::quote::join(
                        &j.argv.iter().map(OsString::from).collect::<Vec<_>>(),
                    ))
                    .into_owned(),
                    job: Some(j.id),
                }
            })),
            Err(e) => {
                found.unreachable.push((name.clone(), e));
                continue;
            }
        }
        // The commands records left here that did not run detached.
        let here: Vec<&Orphan> = recorded
            .iter()
            .filter(|o| o.job.is_none() && &key(&o.via) == k)
            .collect();
        for (o, state) in here
            .iter()
            .zip(orphans::probe_all(registry, &here, false).await)
        {
            let state = match state {
                Ok(Found::Running) => "running",
                Ok(Found::Unsure) => "unsure",
                Ok(_) => continue,
                Err(e) => {
                    found.unreachable.push((name.clone(), e));
                    continue;
                }
            };
            found.left.push(Left {
                target: name.clone(),
                run: o.run.clone(),
                step: o.step.clone(),
                pgid: Some(o.pgid),
                state: state.into(),
                command: crate::base::printable::line(&o.command).into_owned(),
                job: None,
            });
        }
    }
    registry.close_all().await;
    Ok(found)
}

/// What `stop` did to one command.
#[derive(Debug)]
pub struct Stopped {
    pub what: String,
    /// `Ok(true)`: it ran and was stopped; `Ok(false)`: it had ended already.
    pub result: std::result::Result<bool, String>,
}

/// `runbook stop RUN`: ends every command `run`'s record left running (detached or
/// not), through the same hops it was started through.
pub async fn stop(
    state_dir: &Path,
    registry: &Registry,
    which: &str,
) -> Result<(String, Vec<Stopped>)> {
    let info = state::find_run(state_dir, which, |_| true)?;
    let events = state::read_events(&info.path)?;
    let left = orphans::find(&info.id, &events);
    let mut done = Vec::new();
    let plain: Vec<&Orphan> = left.iter().filter(|o| o.job.is_none()).collect();
    for (o, found) in plain
        .iter()
        .zip(orphans::probe_all(registry, &plain, true).await)
    {
        done.push(Stopped {
            what: o.describe(),
            result: match found {
                Ok(Found::Stopped) => Ok(true),
                Ok(Found::Gone) => Ok(false),
                Ok(Found::Running) => Ok(true),
                Ok(Found::Unsure) => Err(format!(
                    "process group {} runs but its leader is gone: nothing proves it is this command; left alone",
                    o.pgid
                )),
                Ok(Found::Survived) => Err("still there after TERM and KILL".into()),
                Err(e) => Err(e),
            },
        });
    }
    for o in left.iter().filter(|o| o.job.is_some()) {
        let job = o.job.as_deref().unwrap_or_default();
        let result = match Target::from_route(&o.via, registry) {
            Err(e) => Err(e),
            Ok(t) => match t
                .run_plain(script_argv(&script::DETACH_END, &[job, "stop"]))
                .await
            {
                Ok(out) if out.code == Some(0) => {
                    Ok(String::from_utf8_lossy(&out.stdout).trim() == "stopped")
                }
                Ok(out) => Err(format!(
                    "stopping it ended {}: {}",
                    out.why(None),
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
                Err(e) => Err(e.to_string()),
            },
        };
        done.push(Stopped {
            what: format!("{} (detached, job {job})", o.describe()),
            result,
        });
    }
    registry.close_all().await;
    Ok((info.id, done))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_read_back_as_the_list_script_prints_them() {
        let text = "ab12 77 running\n=20261207-1\n=warm up\n=sh\n=-c\n=sleep 60\n.\ncd34 - ended 3\n=r2\n=s\n=true\n.\n";
        let jobs = parse_jobs(text);
        assert_eq!(jobs.len(), 2);
        assert_eq!(
            jobs[0],
            Job {
                id: "ab12".into(),
                pgid: Some(77),
                state: "running".into(),
                run: "20261207-1".into(),
                step: "warm up".into(),
                argv: vec!["sh".into(), "-c".into(), "sleep 60".into()],
            }
        );
        assert_eq!((jobs[1].pgid, jobs[1].state.as_str()), (None, "ended 3"));
    }
}
