//! A trigger fired: the plan of its runbook, made as `runbook plan -o` makes one (the
//! same plan pass, in-process), written into the plans directory (`ID.json`, 0600, never
//! over another file), signed as its author under a policy, and rendered to Markdown
//! (`ID.md`) from the very file written, as `runbook plan ID.json --format md` renders
//! it. Nothing here changes a target: a plan pass only reads.

use super::config::Trigger;
use super::notify::{Event, Message};
use super::state::{rfc3339, unix, Proposal, Status};
use crate::actions::plan::{file_sha256, Plan, ReachedWith, Style};
use crate::base::error::Error;
use crate::base::fsx::{Mode, Replace};
use crate::base::quote::quote_word;
use crate::run::engine;
use crate::run::signoff::{self, Role};
use crate::run::source;
use crate::targets::registry::RemoteSettings;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How long a plan pass may take: a target that hangs must not hold the watcher.
const PLAN_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// What every plan of this watcher is made with.
pub struct Planner {
    pub plans: PathBuf,
    pub state_dir: PathBuf,
    pub remote: RemoteSettings,
    /// What `runbook plan` records: the inventory, the ssh_config and the working
    /// directory, where `approve` and `apply` must run.
    pub reached_with: ReachedWith,
    /// The key plans are signed with as their author (under a policy).
    pub sign: Option<PathBuf>,
}

/// Why no plan was made.
#[derive(Debug)]
pub enum NotMade {
    Interrupted,
    Failed(String),
}

/// What set a trigger off on a target.
pub struct Fired<'a> {
    pub trigger: &'a Trigger,
    pub target: &'a str,
    /// Params after the trigger's own (an alert's labels).
    pub sets: Vec<(String, String)>,
    pub why: String,
}

/// Makes, writes and renders the plan; the proposal and its notification.
pub async fn propose(
    p: &Planner,
    f: Fired<'_>,
    now: SystemTime,
) -> Result<(Proposal, Message), NotMade> {
    let t = f.trigger;
    let fail = |e: Error| match e {
        Error::Interrupted(_) | Error::RunInterrupted(_) => NotMade::Interrupted,
        other => NotMade::Failed(other.to_string()),
    };
    let source = source::locate(&t.runbook).map_err(fail)?;
    let mut sets = t.params.clone();
    sets.extend(f.sets);
    let planned = engine::plan(
        &source,
        false,
        sets,
        p.state_dir.clone(),
        Some(PLAN_TIMEOUT),
        p.remote.clone(),
    )
    .await
    .map_err(fail)?;
    if let Some(why) = planned.failed {
        return Err(NotMade::Failed(format!(
            "{}: the plan could not be made: {why}",
            source.label
        )));
    }
    let mut plan = planned.plan;
    plan.reached_with = p.reached_with.clone();
    let json = plan.to_json();
    let sha = file_sha256(json.as_bytes());
    let id = new_id(&p.plans, &t.name, f.target, now);
    let path = p.plans.join(format!("{id}.json"));
    let shown = path.display().to_string();
    write(&p.plans, &format!("{id}.json"), json.as_bytes())?;
    if let Some(key) = &p.sign {
        let sig = signoff::sign(key, Role::Author, &sha, None).map_err(NotMade::Failed)?;
        signoff::append(&path, &sig).map_err(NotMade::Failed)?;
    }
    // The Markdown of the file as written, as `runbook plan ID.json --format md` shows it.
    let saved = Plan::parse(&json, &shown).map_err(NotMade::Failed)?;
    let unbound = saved.unbound();
    if !unbound.is_empty() {
        return Err(NotMade::Failed(format!(
            "{shown}: the plan does not hold together: {}",
            unbound.join("; ")
        )));
    }
    let markdown = saved.render(Style::Markdown, Some((&shown, &sha)), false);
    let md_path = p.plans.join(format!("{id}.md"));
    write(&p.plans, &format!("{id}.md"), markdown.as_bytes())?;
    let changes = saved.changes.len();
    let deleting = saved.changes.iter().filter(|c| c.destructive).count();
    let summary = format!(
        "{} on {}: {}; proposed: {} ({changes} change(s){}), waiting for a decision",
        t.name,
        f.target,
        f.why,
        saved.runbook.name,
        match deleting {
            0 => String::new(),
            n => format!(", {n} that delete"),
        }
    );
    let proposal = Proposal {
        id: id.clone(),
        trigger: t.name.clone(),
        target: f.target.to_string(),
        why: f.why.clone(),
        summary: summary.clone(),
        plan: path.clone(),
        markdown: md_path,
        sha256: sha.clone(),
        created: rfc3339(now),
        created_unix: unix(now),
        status: Status::Pending,
        closed_unix: None,
        outcome: None,
        notified: Vec::new(),
    };
    let message = message(
        &proposal,
        Event::Proposed,
        summary,
        markdown,
        &p.reached_with,
    );
    Ok((proposal, message))
}

/// The notification of `proposal`: `summary`, its Markdown, and the commands that act on
/// it, each run from the directory the plan was made in.
pub fn message(
    proposal: &Proposal,
    event: Event,
    summary: String,
    markdown: String,
    reached_with: &ReachedWith,
) -> Message {
    let plan = quote_word(proposal.plan.as_os_str());
    let cd = reached_with.cwd.as_deref().map_or(String::new(), |d| {
        format!("cd {} && ", quote_word(d.as_ref()))
    });
    Message {
        event,
        id: proposal.id.clone(),
        trigger: proposal.trigger.clone(),
        target: proposal.target.clone(),
        summary,
        markdown,
        plan: proposal.plan.display().to_string(),
        sha256: proposal.sha256.clone(),
        review: format!("runbook plan {plan} --format md"),
        approve: format!("{cd}runbook approve {plan}"),
        apply: format!("{cd}runbook apply {plan}"),
    }
}

/// `TRIGGER-TARGET-YYYYMMDD-HHMMSS`, the target's name made a plain word; `-2`, `-3`, …
/// after it when that file is there already.
fn new_id(plans: &Path, trigger: &str, target: &str, now: SystemTime) -> String {
    let word: String = target
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c,
            _ => '_',
        })
        .take(64)
        .collect();
    let stamp: String = rfc3339(now).chars().filter(char::is_ascii_digit).collect();
    let base = format!("{trigger}-{word}-{}-{}", &stamp[..8], &stamp[8..14]);
    let mut id = base.clone();
    let mut n = 1;
    while plans.join(format!("{id}.json")).exists() {
        n += 1;
        id = format!("{base}-{n}");
    }
    id
}

/// A new file in the plans directory, readable by its owner only (a plan names hosts,
/// paths and commands), never over another one or through a link.
fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), NotMade> {
    crate::base::fsx::write(
        dir,
        Path::new(name),
        bytes,
        Mode::Private,
        Replace::No,
        false,
    )
    .map_err(|e| NotMade::Failed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_plain_words_and_never_reuse_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600);
        let id = new_id(dir.path(), "slow", "root@gpu1:22/ct200", at);
        assert_eq!(id, "slow-root_gpu1_22_ct200-20260101-000000");
        std::fs::write(dir.path().join(format!("{id}.json")), "").unwrap();
        assert_eq!(
            new_id(dir.path(), "slow", "root@gpu1:22/ct200", at),
            format!("{id}-2")
        );
    }
}
