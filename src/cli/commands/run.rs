//! `runbook run`.

use crate::actions::ctx::Mode;
use crate::base::error::{Error, Result};
use crate::cli::args::RunArgs;
use crate::run::engine::{self, RunRequest};
use crate::run::sinks::terminal::TerminalOptions;
use crate::run::{source, state};
use crate::targets::replies::Replies;
use std::rc::Rc;

pub async fn run(args: RunArgs, verbose: bool, quiet: bool) -> Result<()> {
    let source = source::locate(&args.file)?;
    super::use_params_file(args.params.as_deref())?;
    let mode = match (args.dry_run, args.offline) {
        (false, _) => Mode::Real,
        (true, false) => Mode::DryRun,
        (true, true) => Mode::Offline,
    };
    let replies = args
        .save_replies
        .as_ref()
        .map(|_| Rc::new(Replies::recorder(super::test::scripts())));
    let label = source.label.clone();
    let ran = engine::run(RunRequest {
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
        retry_failed: args.retry_failed,
        state_dir: state::state_dir(args.limits.state_dir),
        // `--timeout 0` is no timeout, as 0 is for every timeout in a runbook.
        timeout: args.limits.timeout.filter(|t| !t.is_zero()),
        term: TerminalOptions::detect(verbose, quiet),
        remote: {
            let mut r =
                super::with_limit(super::remote_settings(&args.remote)?, args.limit.as_deref())?;
            r.lock_wait = args.limits.lock_wait;
            r.ssh.keep = args.limits.keep_connections.or(r.ssh.keep);
            r.replies = replies.clone();
            r
        },
    })
    .await;
    // Saved once the run ran, failed or not (a failure is worth testing); not when it was
    // refused before it started, which would replace a good file with an empty one.
    let (Some(path), Some(replies)) = (&args.save_replies, replies) else {
        return ran;
    };
    if ran.as_ref().err().is_some_and(|e| !e.after_run()) {
        return ran;
    }
    match replies.save(path, &label) {
        Ok(()) => {
            if !quiet && !args.json {
                eprintln!(
                    "saved {} repl{} to {}",
                    replies.count(),
                    if replies.count() == 1 { "y" } else { "ies" },
                    path.display()
                );
            }
            ran
        }
        // The run's own failure says more; the file's is said beside it.
        Err(e) if ran.is_err() => {
            eprintln!("error: --save-replies {}: {e}", path.display());
            ran
        }
        Err(e) => Err(Error::io(path, e)),
    }
}
