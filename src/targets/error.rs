//! Why a target could not give a command an exit status, as a fact and not as words:
//! `orphans.rs` lists a command whose connection went away while it ran (it may still
//! run there), and it must not learn that by reading the message, which is free to change.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    /// The connection to the target went away with the command in flight: its exit
    /// status is unknown and it may still be running there. runbook never runs it again.
    ConnectionLost(String),
    /// Anything else: it could not start, or runbook could not talk to the target.
    Failed(String),
}

impl TargetError {
    pub fn message(&self) -> &str {
        match self {
            TargetError::ConnectionLost(m) | TargetError::Failed(m) => m,
        }
    }

    pub fn is_connection_lost(&self) -> bool {
        matches!(self, TargetError::ConnectionLost(_))
    }
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

/// Most of what fails on a target is not a lost connection: a plain message is `Failed`.
impl From<String> for TargetError {
    fn from(message: String) -> TargetError {
        TargetError::Failed(message)
    }
}

/// Callers above the targets that only report the failure keep the words.
impl From<TargetError> for String {
    fn from(e: TargetError) -> String {
        match e {
            TargetError::ConnectionLost(m) | TargetError::Failed(m) => m,
        }
    }
}
