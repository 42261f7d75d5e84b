//! One error type for the whole program. Each variant says what went wrong; [`Error::exit`]
//! is the one place that decides which documented exit code it ends with (nextest's
//! model: an enum of the errors a user can meet, each mapped to a class of exit code).
//!
//! Exit codes are a contract (README, `--help`): 0 success, 1 the run ran and failed
//! (or `fmt --check` found files to format, or a verify found damage), 2 refused before anything was changed,
//! 3 `runbook test` found the runbook no longer runs what its replies hold, 130/143
//! interrupted by SIGINT/SIGTERM.

use crate::base::cancel::Signal;
use std::path::PathBuf;

/// The documented exit codes, one per way a command can end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: it did what was asked (a dry-run that planned, a run whose steps all passed).
    Success,
    /// 1: the run ran and a step failed, or its record broke off; a verify (`artifacts`,
    /// `audit`) found damage.
    RunFailed,
    /// 2: refused before anything was changed: usage, the runbook, its params, a plan
    /// that needs confirmation, a resume that cannot be done, runbook's own files.
    NothingChanged,
    /// 3: `runbook test`: the runbook ran a command its replies have no reply for (or,
    /// with `--strict`, left replies unused): it no longer does what the recorded run did.
    Diverged,
    /// 128 + the signal: 130 for SIGINT, 143 for SIGTERM.
    Signal(Signal),
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Success => 0,
            Exit::RunFailed => 1,
            Exit::NothingChanged => 2,
            Exit::Diverged => 3,
            Exit::Signal(s) => 128 + s.number(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// What clap answers for the command line itself: a flag it rejects, or `--help` and
    /// `--version` (not failures; it prints them on stdout).
    #[error("{0}")]
    Flags(#[from] clap::Error),

    /// A flag's value is wrong: `--ssh-config` names no file, `docs TOPIC` has no docs,
    /// `list DIR` cannot be read.
    #[error("{0}")]
    Usage(String),

    /// The runbook named on the command line cannot be found or read.
    #[error("{0}")]
    NoRunbook(String),

    /// The runbook file is wrong: it does not compile, its header is missing or wrong, its
    /// top level failed or ran too long, it reads an unknown global. Names `file:line`.
    #[error("{0}")]
    Runbook(String),

    /// Values for the runbook's params (`--set`, `RUNBOOK_PARAM_*`) that its header
    /// rejects, or a required one that is unset. Names `file:line` of the header.
    #[error("{0}")]
    Params(String),

    /// The inventory file (`--inventory`, `./inventory.toml`) cannot be read or is wrong.
    #[error("{0}")]
    Inventory(String),

    /// `check`: this many of the files failed (each was reported as it was found).
    #[error("{bad} of {of} runbook(s) failed the check")]
    CheckFailed { bad: usize, of: usize },

    /// `fmt`: a Lua file does not parse, a settings file (`stylua.toml`) is wrong, or a
    /// file cannot be read. Names `file:line`; nothing was written.
    #[error("{0}")]
    Format(String),

    /// `fmt --check`: this many of the files are not formatted (each was named, with
    /// its diff). Exit 1, as StyLua's and rustfmt's `--check`.
    #[error("{files} of {of} file(s) would be reformatted (run `runbook fmt` on them)")]
    Unformatted { files: usize, of: usize },

    /// No recorded run is the one `log RUN` or `--resume RUN` names.
    #[error("{0}")]
    NoSuchRun(String),

    /// `--resume` cannot go ahead: the run is of another kind or runbook, the file or the
    /// params changed, or a command of that run may still be running.
    #[error("{0}")]
    Resume(String),

    /// The plan a real run must confirm could not be made: its dry-run failed.
    #[error("{0}")]
    PlanFailed(String),

    /// A real run's plan needs confirmation and there is no terminal to ask on.
    #[error("{0}")]
    NeedsConfirmation(String),

    /// Asked to confirm the plan, the user did not say yes.
    #[error("not confirmed; nothing was changed")]
    NotConfirmed,

    /// The run record cannot be created, or its first event written: runbook does not
    /// run without a record.
    #[error("{0}")]
    Record(String),

    /// Reading or writing a file of runbook's own (state dir, run records).
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A saved plan (`apply PLAN.json`, `plan PLAN.json`) cannot be read or is not a plan
    /// this runbook reads (unknown format), or `plan -o` cannot write one.
    #[error("{0}")]
    PlanFile(String),

    /// `apply` refused a saved plan before anything ran: too old, or the runbook file, its
    /// params or its targets differ from the plan's. The message shows the difference.
    #[error("{0}")]
    PlanRefused(String),

    /// A plan's signatures do not meet the policy (`runbook.toml`): no author signature,
    /// too few approvers, an approval expired or of another plan; or signing failed.
    /// Nothing was changed.
    #[error("{0}")]
    Approval(String),

    /// `runbook plan`: a step failed while planning, so no (half) plan was saved. Exit 1,
    /// as for a dry-run whose step failed.
    #[error("{0}")]
    PlanIncomplete(String),

    /// `runbook new`: the file it would write is already there (it never overwrites one).
    #[error("{}: already exists; `runbook new` does not overwrite a file (choose another NAME or --dir)", .0.display())]
    FileExists(PathBuf),

    /// `init`, `new` or `fmt` did not write a file of the user's: it, or a directory on
    /// the way to it, is a symbolic link (never written through), or the write failed.
    /// Names the path; nothing was written there.
    #[error(transparent)]
    Write(#[from] crate::base::fsx::Refused),

    /// runbook itself could not start: its async runtime, or a Lua VM.
    #[error("{0}")]
    Startup(String),

    /// A signal stopped runbook before the run started: while loading, planning, or at
    /// the confirmation prompt.
    #[error("interrupted")]
    Interrupted(Signal),

    /// The run ran and failed: a step failed, or its record broke off. Its summary and
    /// `run_finished` say so already.
    #[error("the run failed")]
    RunFailed,

    /// A signal stopped the run once it had started; its summary and `run_finished` say so.
    #[error("interrupted")]
    RunInterrupted(Signal),

    /// `runbook artifacts`: the store cannot be read, or has no such artifact.
    #[error("{0}")]
    Store(String),

    /// `runbook artifacts verify`: stored artifacts that a restore would refuse (each named).
    #[error("{0}")]
    ArtifactsDamaged(String),

    /// `runbook audit verify`: run records (or the index of runs) that were tampered
    /// with (each named, with its first bad line). Exit 1, as `artifacts verify`'s damage:
    /// 2 is for a run it could not check.
    #[error("{0}")]
    RecordsTampered(String),

    /// `runbook test --replies FILE`: the file cannot be read or a line of it is wrong
    /// (names `FILE:LINE`).
    #[error("{0}")]
    Replies(String),

    /// `runbook ps` / `runbook stop`: a target could not be looked at, or a command a run
    /// left could not be stopped (each named). Exit 1: what could be done was done.
    #[error("{0}")]
    Leftovers(String),

    /// `runbook test`: a command had no reply (the message shows it, the closest
    /// recorded one and their difference), or `--strict` and replies were left unused.
    #[error("{0}")]
    TestDiverged(String),

    /// `runbook watch` cannot start, or cannot go on: its watch file is wrong (names
    /// `FILE:LINE`), another watcher holds its state, its state cannot be read or
    /// written, or its listener cannot listen. Nothing was proposed or changed by it.
    #[error("{0}")]
    Watch(String),
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// How the program ends with this error: the one place exit codes are chosen.
    pub fn exit(&self) -> Exit {
        match self {
            Error::Flags(e) if !e.use_stderr() => Exit::Success,
            Error::RunFailed
            | Error::PlanIncomplete(_)
            | Error::Unformatted { .. }
            | Error::ArtifactsDamaged(_)
            | Error::RecordsTampered(_)
            | Error::Leftovers(_) => Exit::RunFailed,
            Error::Interrupted(s) | Error::RunInterrupted(s) => Exit::Signal(*s),
            Error::TestDiverged(_) => Exit::Diverged,
            // Problems with runbook's own state dir are found before a run starts
            // changing things, so they count as "nothing was changed".
            Error::Flags(_)
            | Error::Usage(_)
            | Error::NoRunbook(_)
            | Error::Runbook(_)
            | Error::Params(_)
            | Error::Inventory(_)
            | Error::CheckFailed { .. }
            | Error::Format(_)
            | Error::NoSuchRun(_)
            | Error::Resume(_)
            | Error::PlanFailed(_)
            | Error::PlanFile(_)
            | Error::PlanRefused(_)
            | Error::Approval(_)
            | Error::NeedsConfirmation(_)
            | Error::NotConfirmed
            | Error::Record(_)
            | Error::Io { .. }
            | Error::Replies(_)
            | Error::Store(_)
            | Error::FileExists(_)
            | Error::Write(_)
            | Error::Watch(_)
            | Error::Startup(_) => Exit::NothingChanged,
        }
    }

    pub fn exit_code(&self) -> i32 {
        self.exit().code()
    }

    /// Whether the terminal already shows all there is to say: the run's own summary, or
    /// the user's own Ctrl-C. `main` prints nothing more for these.
    pub fn shown(&self) -> bool {
        matches!(
            self,
            Error::RunFailed | Error::RunInterrupted(_) | Error::Interrupted(_)
        )
    }

    /// Whether the run had started: its `run_finished` carries the exit code, so
    /// `--json` prints no `error` event after it.
    pub fn after_run(&self) -> bool {
        matches!(self, Error::RunFailed | Error::RunInterrupted(_))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The table in README ("Exit codes") and `--help`, class by class.
    #[test]
    fn each_class_has_its_documented_code() {
        assert_eq!(Exit::Success.code(), 0);
        assert_eq!(Error::RunFailed.exit_code(), 1);
        assert_eq!(Error::Runbook("x.lua:1: oops".into()).exit_code(), 2);
        assert_eq!(Error::NotConfirmed.exit_code(), 2);
        assert_eq!(Error::CheckFailed { bad: 1, of: 2 }.exit_code(), 2);
        assert_eq!(Error::Unformatted { files: 1, of: 2 }.exit_code(), 1);
        assert_eq!(Error::Format("x.lua:1:1: oops".into()).exit_code(), 2);
        assert_eq!(Error::Interrupted(Signal::Int).exit_code(), 130);
        assert_eq!(Error::RunInterrupted(Signal::Term).exit_code(), 143);
        assert_eq!(Error::TestDiverged("no reply".into()).exit_code(), 3);
        assert_eq!(Error::Replies("R.jsonl:2: bad".into()).exit_code(), 2);
        assert_eq!(Error::RecordsTampered("1 of 2".into()).exit_code(), 1);
        use clap::Parser;
        let help = crate::cli::args::Cli::try_parse_from(["runbook", "--help"]).unwrap_err();
        assert_eq!(Error::from(help).exit_code(), 0);
        let bad = crate::cli::args::Cli::try_parse_from(["runbook", "--no-such-flag"]).unwrap_err();
        assert_eq!(Error::from(bad).exit_code(), 2);
    }
}
