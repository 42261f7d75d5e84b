//! `runbook approve PLAN`: a second person's signed approval of a saved plan, and the
//! policy check `apply` makes before touching anything (`runbook.toml`'s `[policy]`).

use super::saved::{self, Opened};
use crate::actions::plan::{file_sha256, Style};
use crate::base::error::{Error, Result};
use crate::base::inventory::Inventory;
use crate::base::project::{Policy, Project};
use crate::cli::args::{ApproveArgs, SigningArgs};
use crate::run::engine::{self, SignOff};
use crate::run::signoff::{self, Role};
use crate::run::state;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long an approval counts when neither `--ttl` nor the policy says.
const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

pub async fn approve(args: ApproveArgs, verbose: bool) -> Result<()> {
    let policy = policy()?.ok_or_else(|| {
        Error::Approval(
            "runbook.toml has no [policy]: approvals are checked against its allowed_signers \
             file (see docs/plans.md, \"Review by a second person\")"
                .into(),
        )
    })?;
    let state_dir = state::state_dir(args.state_dir.clone());
    let opened = saved::open(
        &args.plan,
        &state_dir,
        None,
        None,
        Vec::new(),
        args.remote.clone(),
        None,
    )?;
    let sha = file_sha256(&opened.bytes);
    let verified = signoff::verify(&args.plan, &sha, &policy).map_err(Error::Approval)?;
    let Some(author) = verified.author.clone() else {
        return Err(Error::Approval(format!(
            "{}: no valid author signature, so there is nothing to approve; the author signs \
             it with runbook plan … -o {} --sign{}",
            opened.shown,
            opened.shown,
            rejected(&verified.rejected)
        )));
    };
    // Before anything is signed: the targets as they are now, read by the plan's reads.
    let remote = super::with_limit(
        super::remote_settings(&opened.remote)?,
        opened.limit.as_deref(),
    )?;
    let now = engine::replan(
        &opened.source,
        &opened.plan,
        opened.sets.clone(),
        state::state_dir(args.state_dir.clone()),
        remote,
    )
    .await?;
    let mut drift = opened.plan.drift(&now.plan);
    if let Some(why) = &now.failed {
        drift.push(format!("its dry-run now fails: {why}"));
    }
    eprint!(
        "{}",
        opened
            .plan
            .render(Style::Text, Some((&opened.shown, &sha)), verbose)
    );
    eprintln!("signed by its author: {author}");
    if drift.is_empty() {
        eprintln!("the targets read now as the plan says: every read gave the same answer");
    } else {
        eprintln!(
            "the targets no longer read as the plan says:\n  - {}",
            drift.join("\n  - ")
        );
    }
    if args.yes && !drift.is_empty() {
        return Err(Error::Approval(format!(
            "{}: not approved: the targets changed since the plan was made (above); with --yes \
             only a plan that still holds is approved; make a new plan",
            opened.shown
        )));
    }
    if !args.yes {
        ask(&format!("Approve {} as yourself?", opened.shown)).await?;
    }
    let ttl = match (args.ttl, &policy.ttl) {
        (Some(t), _) => t,
        (None, Some(t)) => crate::base::duration::parse(t)
            .map_err(|e| Error::Approval(format!("runbook.toml: [policy] ttl: {e}")))?,
        (None, None) => DEFAULT_TTL,
    };
    let key = signing_key(&args.signing)?;
    let sig = signoff::sign(&key, Role::Approver, &sha, Some(ttl)).map_err(Error::Approval)?;
    let me = signoff::principal(&sig, &policy.allowed_signers).map_err(|why| {
        Error::Approval(format!(
            "{}: your key {}: {why}; ask whoever keeps {} to add it",
            opened.shown,
            key.display(),
            policy.allowed_signers.display()
        ))
    })?;
    if me == author {
        return Err(Error::Approval(format!(
            "{}: not approved: {me} is its author, and an author's approval never counts; \
             another person approves it",
            opened.shown
        )));
    }
    let file = signoff::append(&args.plan, &sig).map_err(Error::Approval)?;
    let (need, _) = required(&policy, &opened);
    let mut approvers = verified.approvers;
    if !approvers.contains(&me) {
        approvers.push(me.clone());
    }
    eprintln!(
        "approved by {me} until {}, in {}: {} of the {need} approval(s) the policy asks",
        sig.expires.as_deref().unwrap_or("?"),
        file.display(),
        approvers.len()
    );
    Ok(())
}

/// `runbook.toml`'s policy, if it has one.
fn policy() -> Result<Option<Policy>> {
    Ok(Project::load().map_err(Error::Approval)?.policy)
}

pub(super) fn has_policy() -> Result<bool> {
    Ok(policy()?.is_some())
}

/// What `apply` checks before it touches anything: under a policy, the author's valid
/// signature and enough distinct approvers other than the author, every approval
/// unexpired and over this very plan; `None` when there is no policy.
pub(super) fn check_policy(plan: &Path, opened: &Opened) -> Result<Option<SignOff>> {
    let Some(policy) = policy()? else {
        return Ok(None);
    };
    let sha = file_sha256(&opened.bytes);
    let v = signoff::verify(plan, &sha, &policy).map_err(Error::Approval)?;
    let (need, why) = required(&policy, opened);
    let mut missing = Vec::new();
    if v.author.is_none() {
        missing.push(format!(
            "the author's signature (runbook plan … -o {} --sign)",
            opened.shown
        ));
    }
    if (v.approvers.len() as u32) < need {
        missing.push(format!(
            "{} approval(s) by someone other than the author, {} valid (the policy asks {}: {})",
            need,
            v.approvers.len(),
            need,
            why.join(", ")
        ));
    }
    if !missing.is_empty() {
        return Err(Error::Approval(format!(
            "{}: refused, nothing was changed: the policy ({}) needs\n  - {}{}",
            opened.shown,
            policy.allowed_signers.display(),
            missing.join("\n  - "),
            rejected(&v.rejected)
        )));
    }
    Ok(Some(SignOff {
        author: v.author.unwrap_or_default(),
        approvers: v.approvers,
    }))
}

fn required(policy: &Policy, opened: &Opened) -> (u32, Vec<String>) {
    let inventory = opened
        .remote
        .inventory
        .as_deref()
        .and_then(|p| Inventory::load(p).ok());
    signoff::required_in(policy, &opened.plan, inventory.as_ref())
}

fn rejected(list: &[String]) -> String {
    if list.is_empty() {
        String::new()
    } else {
        format!("\nnot counted:\n  - {}", list.join("\n  - "))
    }
}

/// `--key`, `$RUNBOOK_SIGNING_KEY`, else `~/.ssh/id_ed25519`.
pub(super) fn signing_key(args: &SigningArgs) -> Result<PathBuf> {
    if let Some(k) = &args.key {
        return Ok(k.clone());
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match home.map(|h| h.join(".ssh/id_ed25519")) {
        Some(k) if k.is_file() => Ok(k),
        _ => Err(Error::Approval(
            "no signing key: give one with --key FILE (a private key, or KEY.pub with its \
             private half in ssh-agent)"
                .into(),
        )),
    }
}

/// Asks on the terminal; no terminal is no answer.
async fn ask(question: &str) -> Result<()> {
    use is_terminal::IsTerminal;
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err(Error::NeedsConfirmation(format!(
            "{question} needs a yes on a terminal; nothing was signed (review it, then --yes)"
        )));
    }
    let cancel = crate::base::cancel::Cancel::new();
    let _signals = crate::base::cancel::watch_signals(cancel.clone());
    engine::ask_yes(question, &cancel).await
}

/// A plan signed as its author, right after `plan -o` saved it.
pub(super) fn sign_as_author(plan: &Path, bytes: &[u8], signing: &SigningArgs) -> Result<()> {
    let key = signing_key(signing)?;
    let sig =
        signoff::sign(&key, Role::Author, &file_sha256(bytes), None).map_err(Error::Approval)?;
    // A plan saved again under the same name starts its signatures afresh.
    let file = signoff::approvals_path(plan);
    let _ = std::fs::remove_file(&file);
    signoff::append(plan, &sig).map_err(Error::Approval)?;
    eprintln!(
        "signed as its author in {} (with {})",
        file.display(),
        key.display()
    );
    Ok(())
}
