//! One error type for the whole program, mapped to the documented exit codes.
//!
//! Exit codes are a contract (README, `--help`): 0 success, 1 a step failed,
//! 2 invalid runbook/params/usage (nothing was changed), 130 interrupted (SIGINT),
//! 143 terminated (SIGTERM).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The runbook file, its header, its params or the command line are wrong.
    /// Raised before any change happened.
    #[error("{0}")]
    Invalid(String),

    /// The run was interrupted by a signal; the value is the exit code (130 or 143).
    #[error("interrupted")]
    Interrupted(i32),

    /// Reading or writing a file of runbook's own (state dir, run records).
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::Invalid(msg.into())
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Invalid(_) => 2,
            Error::Interrupted(code) => *code,
            // Problems with our own state dir are detected before a run starts changing
            // things, so they count as "nothing was changed".
            Error::Io { .. } => 2,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
