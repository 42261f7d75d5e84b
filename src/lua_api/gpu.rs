//! `gpu.*`: what GPUs a target has and who uses them (`nvidia-smi`), and a check that a
//! job's GPUs are there before it starts.

use super::options::{self, Whole};
use super::target::target_arg;
use super::to_lua;
use super::{require_running, step_for};
use crate::primitives::gpu::{self, Probe, Requirement};
use mlua::{Lua, Table, Value};
use serde::Deserialize;

type AtLeastZero = Whole<0, { i64::MAX }>;

/// Options of `gpu.require`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequireOptions {
    /// `count` (a whole number, default 1): how many such GPUs there must be at least;
    count: Option<AtLeastZero>,
    /// `idle = true`: each of them runs no compute process;
    #[serde(default)]
    idle: bool,
    /// `min_free_mib` (a whole number): each of them has that many MiB of memory free;
    min_free_mib: Option<AtLeastZero>,
    /// `name`: only GPUs whose name contains this count (case-insensitive; all GPUs when
    /// absent).
    name: Option<String>,
}

pub fn register(lua: &Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.raw_set("probe", super::async_function(lua, probe)?)?;
    t.raw_set("require", super::async_function(lua, require)?)?;
    lua.globals().raw_set("gpu", t)
}

/// Lua: gpu.probe(t) -> { { index, uuid, name, memory_total_mib, memory_used_mib, utilization_pct, temperature_c, driver_version, processes }, … }
///
/// The GPUs of `t`, in `nvidia-smi`'s order, each with its compute processes
/// (`processes = { { pid, name, used_memory_mib }, … }`). A value `nvidia-smi` does not
/// report (`[N/A]`, `[Not Supported]`) is nil. A read: it runs during `--dry-run` too; with
/// `--offline` it is only planned and the list is empty with `planned = true`.
/// No GPU ("No devices were found") gives an empty list; no `nvidia-smi`, or a driver it
/// cannot talk to, fails the step naming the target.
///
/// ```lua
/// for _, g in ipairs(gpu.probe(node)) do
///   log.info(("GPU %d %s: %d/%d MiB, %d processes"):format(
///     g.index, g.name, g.memory_used_mib or 0, g.memory_total_mib or 0, #g.processes))
/// end
/// ```
/// ---@param t runbook.Target
/// ---@return runbook.Gpus
/// ---@class runbook.Gpus: runbook.Gpu[]
/// ---@field planned? boolean `--offline`: nothing was looked at
/// ---@class runbook.Gpu
/// ---@field index? integer
/// ---@field uuid? string
/// ---@field name? string
/// ---@field memory_total_mib? integer
/// ---@field memory_used_mib? integer
/// ---@field utilization_pct? integer
/// ---@field temperature_c? integer
/// ---@field driver_version? string
/// ---@field processes runbook.GpuProcess[] its compute processes
/// ---@class runbook.GpuProcess
/// ---@field pid? integer
/// ---@field name? string
/// ---@field used_memory_mib? integer
async fn probe(lua: Lua, t: Value) -> mlua::Result<Value> {
    let ctx = require_running(&lua, "gpu.probe()")?;
    let target = target_arg(&lua, &t, "gpu.probe")?;
    let step = step_for(&lua, &ctx, &target);
    let found = gpu::probe(&step).await?;
    probe_to_lua(&lua, &found)
}

/// Lua: gpu.require(t, { count, idle, min_free_mib, name }) -> { gpu, … }
///
/// Probes `t` (like `gpu.probe`) and fails the step unless it has the GPUs the options
/// ask for. Options ([`RequireOptions`]):
///
/// The error names what is short:
/// `node1: needs 8 GPUs, found 7`,
/// `GPU 3 (NVIDIA H200) is busy: pid 1234 python (81000 MiB)`,
/// `GPU 2 has 1200 MiB free, needs 20000`. Returns the probe's list. During `--dry-run`
/// it checks for real; with `--offline` nothing is checked.
///
/// Inside a container `nvidia-smi` lists only the container's own processes: pair
/// `idle` with `min_free_mib` to notice memory held from elsewhere.
///
/// ```lua
/// step("GPUs are free", function()
///   gpu.require(box, { count = 8, idle = true, min_free_mib = 130000, name = "H200" })
/// end)
/// ```
/// ---@param t runbook.Target
/// ---@param opts runbook.GpuRequireOptions
/// ---@return runbook.Gpus
async fn require(lua: Lua, (t, opts): (Value, Option<Table>)) -> mlua::Result<Value> {
    let ctx = require_running(&lua, "gpu.require()")?;
    let target = target_arg(&lua, &t, "gpu.require")?;
    let o: RequireOptions = options::read(&lua, "gpu.require()", opts)?;
    let mut need = Requirement::default();
    if let Some(n) = o.count {
        need.count = n.count();
    }
    need.idle = o.idle;
    need.min_free_mib = o.min_free_mib.map(|n| n.0 as u64);
    need.name = o.name;
    let step = step_for(&lua, &ctx, &target);
    let found = gpu::require(&step, &need).await?;
    probe_to_lua(&lua, &found)
}

fn probe_to_lua(lua: &Lua, probe: &Probe) -> mlua::Result<Value> {
    let list = to_lua(lua, &probe.gpus)?;
    if probe.planned {
        if let Value::Table(t) = &list {
            t.raw_set("planned", true)?;
        }
    }
    Ok(list)
}
