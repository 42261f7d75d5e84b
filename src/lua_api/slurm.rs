//! `slurm(node, opts)` and the Slurm selections of `targets("slurm:…")`.

use super::options::{self, AtLeastOne};
use super::target::TargetHandle;
use super::{ctx, err_at, require_running, step_for, string_value};
use crate::primitives::Cmd;
use crate::targets::slurm::{Selection, SlurmSpec};
use crate::targets::Target;
use mlua::{Lua, Table, Value};
use serde::Deserialize;
use std::time::Duration;

/// Options of `slurm`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmOptions {
    /// `job` (a job id): run every command as a step inside this running job's allocation
    /// (`--jobid=JOB --overlap`), with the job's environment, cgroup and GPUs;
    job: Option<AtLeastOne>,
    /// `partition`: without a job, the partition each command's own allocation comes
    /// from (default: the cluster's default partition);
    partition: Option<String>,
    /// `immediate` (duration, default `"10s"`, whole seconds): how long a command may wait
    /// for the node's resources before it fails (`srun --immediate`) instead of queueing.
    #[serde(default, deserialize_with = "options::duration")]
    immediate: Option<Duration>,
}

pub fn register(lua: &Lua) -> mlua::Result<()> {
    lua.globals().raw_set("slurm", lua.create_function(slurm)?)
}

/// Lua: slurm(node, [opts]) -> target
///
/// A node of a Slurm cluster, reached through the scheduler from this machine (a login
/// node): every command is a job step, `srun --nodes=1 --ntasks=1 --nodelist=NODE
/// [--jobid=JOB --overlap] --immediate=S -- argv…`, with the argv kept word for word.
/// `target("slurm:NODE")` and `target("slurm:NODE?job=JOB")` are the same. srun runs
/// with runbook's environment (`SLURM_CONF` included) and gives it to the command, as
/// srun does; a command's `env` travels on standard input, never in srun's argv. A
/// timeout or Ctrl-C cancels the step (`scancel`), whatever it started on the node.
/// Containers on the node work as elsewhere: `slurm("gpu01"):pct(200)`.
/// Options ([`SlurmOptions`]):
///
/// ```lua
/// local node = slurm("gpu01", { job = 4242 })
/// node:exec({ "nvidia-smi", "-L" }, { read_only = true })
/// local fresh = slurm("gpu02", { partition = "gpu", immediate = "30s" })
/// ```
/// ---@param node string
/// ---@param opts? runbook.SlurmOptions
/// ---@return runbook.Target
fn slurm(lua: &Lua, (node, opts): (Value, Option<Table>)) -> mlua::Result<TargetHandle> {
    let Some(node) = string_value(lua, node, "slurm()")? else {
        return Err(err_at(
            lua,
            "slurm(): give a node name, e.g. slurm(\"gpu01\", { job = 4242 })",
        ));
    };
    let o: SlurmOptions = options::read(lua, "slurm()", opts)?;
    let spec = SlurmSpec::new(
        &node,
        o.job.map(|j| j.0 as u64),
        o.partition.as_deref(),
        o.immediate,
    )
    .map_err(|e| err_at(lua, format!("slurm(): {e}")))?;
    Ok(TargetHandle::new(ctx(lua).targets.slurm(spec)))
}

/// The targets of a Slurm selection (what follows `slurm:` in `targets()`), listed by the
/// scheduler with a read on this machine: `sinfo` for a partition, `squeue` for a running
/// job, `scontrol show hostnames` for host lists. Inside a step only; empty when the
/// read was only planned (`--dry-run --offline`).
pub async fn select(lua: &Lua, what: &str, text: &str) -> mlua::Result<Vec<TargetHandle>> {
    let sel = Selection::parse(text).map_err(|e| err_at(lua, format!("{what}: {e}")))?;
    let ctx = require_running(lua, what)?;
    let here = Target::Local;
    let step = step_for(lua, &ctx, &here);
    let Some(mut listing) = read(
        &step,
        sel.list_command(),
        "list the nodes of a Slurm selection",
    )
    .await?
    else {
        return Ok(Vec::new());
    };
    // squeue names a job's nodes as a host list (`gpu[01-04]`): expand it.
    if sel.nodes.is_none() && sel.job.is_some() {
        let list = Selection::names(&listing).join(",");
        if list.is_empty() {
            let job = sel.job.unwrap_or_default();
            return Err(err_at(
                lua,
                format!("{what}: job {job} is not running (squeue lists no nodes for it)"),
            ));
        }
        let Some(expanded) = read(
            &step,
            vec!["scontrol".into(), "show".into(), "hostnames".into(), list],
            "expand a job's node list",
        )
        .await?
        else {
            return Ok(Vec::new());
        };
        listing = expanded;
    }
    let nodes = Selection::names(&listing);
    if nodes.is_empty() {
        return Err(err_at(lua, format!("{what}: Slurm lists no nodes for it")));
    }
    let specs = sel
        .specs(&nodes)
        .map_err(|e| err_at(lua, format!("{what}: {e}")))?;
    Ok(specs
        .into_iter()
        .map(|s| TargetHandle::new(ctx.targets.slurm(s)))
        .collect())
}

/// A read of the scheduler's: its stdout, or `None` when it was only planned.
async fn read(
    step: &crate::primitives::Step<'_>,
    argv: Vec<String>,
    why: &str,
) -> mlua::Result<Option<String>> {
    let ran = step.read(Cmd::new(argv), why).await?;
    if ran.planned() {
        return Ok(None);
    }
    if !ran.ok() {
        return Err(step
            .fail(ran.failure(format!("'{why}'"), Some("local"), None))
            .into());
    }
    Ok(Some(ran.stdout()))
}
