//! `runbook run`.

use crate::cli::RunArgs;
use crate::ctx::Mode;
use crate::engine::{self, RunRequest};
use crate::error::Result;
use crate::sinks::terminal::TerminalOptions;
use crate::{source, state};

pub async fn run(args: RunArgs, verbose: bool, quiet: bool) -> Result<()> {
    let source = source::locate(&args.file)?;
    let mode = match (args.dry_run, args.offline) {
        (false, _) => Mode::Real,
        (true, false) => Mode::DryRun,
        (true, true) => Mode::Offline,
    };
    engine::run(RunRequest {
        source,
        mode,
        sets: args.sets,
        approval: if args.yes {
            engine::Approval::Yes
        } else {
            engine::Approval::Ask
        },
        json: args.json,
        resume: args.resume,
        state_dir: state::state_dir(args.limits.state_dir),
        // `--timeout 0` is no timeout, as 0 is for every timeout in a runbook.
        timeout: args.limits.timeout.filter(|t| !t.is_zero()),
        term: TerminalOptions::detect(verbose, quiet),
        remote: {
            let mut r = super::remote_settings(&args.remote)?;
            r.lock_wait = args.limits.lock_wait;
            r.ssh.keep = args.limits.keep_connections.or(r.ssh.keep);
            r
        },
    })
    .await
}
