//! `runbook apply`: runs a saved plan's runbook, held to the plan.

use super::saved;
use crate::actions::ctx::Mode;
use crate::base::error::Result;
use crate::cli::args::ApplyArgs;
use crate::run::engine::{self, Approval, RunRequest};
use crate::run::sinks::terminal::TerminalOptions;
use crate::run::state;

/// How old a plan may be when no policy asks for approvals.
const DEFAULT_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

pub async fn apply(args: ApplyArgs, verbose: bool, quiet: bool) -> Result<()> {
    // Under a policy a plan is reviewed for longer than an hour: its approvals' expiry
    // bounds its age, unless --max-age asks for less.
    let max_age = match (args.max_age, super::approve::has_policy()?) {
        (Some(age), _) => Some(age),
        (None, true) => None,
        (None, false) => Some(DEFAULT_MAX_AGE),
    };
    let state_dir = state::state_dir(args.limits.state_dir);
    let opened = saved::open(
        &args.plan,
        &state_dir,
        max_age,
        args.params.as_deref(),
        args.sets,
        args.remote.clone(),
        args.limit.as_deref(),
    )?;
    let signed = super::approve::check_policy(&args.plan, &opened)?;
    let saved::Opened {
        plan,
        bytes,
        shown,
        source,
        sets,
        remote: remote_args,
        limit,
    } = opened;
    let mut remote = super::with_limit(super::remote_settings(&remote_args)?, limit.as_deref())?;
    remote.lock_wait = args.limits.lock_wait;
    remote.ssh.keep = args.limits.keep_connections.or(remote.ssh.keep);
    engine::run(RunRequest {
        source,
        mode: Mode::Real,
        sets,
        approval: Approval::Saved {
            sha256: crate::actions::plan::file_sha256(&bytes),
            plan: Box::new(plan),
            path: shown,
            yes: args.yes,
            signed,
        },
        json: args.json,
        resume: None,
        retry_failed: false,
        state_dir,
        timeout: args.limits.timeout.filter(|t| !t.is_zero()),
        term: TerminalOptions::detect(verbose, quiet),
        remote,
    })
    .await
}
