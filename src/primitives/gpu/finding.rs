//! What a health check found: how bad it is and what recovers from it, in NVML's
//! vocabulary. A leaf: the readers of each source (`dcgm.rs`, `xid.rs`) and the checks
//! (`health.rs`) all speak it.

use serde::{Deserialize, Serialize};

/// How bad: the whole target's verdict is its worst finding's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    Warn,
    Critical,
}

/// What recovers from a finding, least to most disruptive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    None,
    RestartApp,
    GpuReset,
    DrainAndReset,
    NodeReboot,
    ContactSupport,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::None => "none",
            Action::RestartApp => "restart_app",
            Action::GpuReset => "gpu_reset",
            Action::DrainAndReset => "drain_and_reset",
            Action::NodeReboot => "node_reboot",
            Action::ContactSupport => "contact_support",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Which check: `memory.remap_pending`, `clocks.hw_slowdown`, `pcie.width`, `xid`, …
    pub check: String,
    pub severity: Verdict,
    pub detail: String,
    pub action: Action,
}

impl Finding {
    pub fn new(check: &str, severity: Verdict, action: Action, detail: impl Into<String>) -> Self {
        Finding {
            check: check.to_string(),
            severity,
            detail: detail.into(),
            action,
        }
    }
}
