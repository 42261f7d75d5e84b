//! `kind = "gpu_health"`: `gpu.health` on a target, at each look, as the `gpu-health`
//! runbook asks it (`nvidia-smi -q -x`, the kernel log's Xid lines): the trigger fires
//! while its verdict is critical, naming each critical finding and its recovery.

use super::config::GpuHealth;
use crate::primitives::gpu::{self, health::Verdict, HealthOptions};
use crate::primitives::{Error, Step};

/// One look: `Some(why)` when a GPU (or the node) is critical.
pub async fn look(step: &Step<'_>, g: &GpuHealth) -> Result<Option<String>, Error> {
    let opts = HealthOptions {
        since: g.since,
        ..HealthOptions::default()
    };
    let Some(h) = gpu::health(step, &opts).await? else {
        return Ok(None);
    };
    if h.verdict != Verdict::Critical {
        return Ok(None);
    }
    let what = gpu::critical(&h).unwrap_or_else(|| "critical".into());
    Ok(Some(format!(
        "gpu.health on {} is critical: {what}",
        step.target.name()
    )))
}
