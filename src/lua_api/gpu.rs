//! `gpu.*`: what GPUs a target has and who uses them (`nvidia-smi`), and a check that a
//! job's GPUs are there before it starts.

use super::target::target_arg;
use super::to_lua;
use super::{bool_value, check_keys, err_at, location, require_running, string_value};
use crate::primitives::gpu::{self, Probe, Requirement};
use crate::primitives::Step;
use mlua::{Lua, Table, Value};

const REQUIRE_KEYS: &[&str] = &["count", "idle", "min_free_mib", "name"];

pub fn register(lua: &Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.raw_set("probe", lua.create_async_function(probe)?)?;
    t.raw_set("require", lua.create_async_function(require)?)?;
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
async fn probe(lua: Lua, t: Value) -> mlua::Result<Value> {
    let ctx = require_running(&lua, "gpu.probe()")?;
    let target = target_arg(&lua, &t, "gpu.probe")?;
    let step = Step {
        ctx: &ctx,
        target: &target,
        at: location(&lua),
    };
    let found = gpu::probe(&step).await?;
    probe_to_lua(&lua, &found)
}

/// Lua: gpu.require(t, { count, idle, min_free_mib, name }) -> { gpu, … }
///
/// Probes `t` (like `gpu.probe`) and fails the step unless it has at least `count` GPUs
/// (default one) whose name contains `name` (case-insensitive; all GPUs when absent), and
/// every one of those runs no compute process (when `idle = true`) and has `min_free_mib`
/// MiB of memory free (when given). The error names what is short:
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
async fn require(lua: Lua, (t, opts): (Value, Option<Table>)) -> mlua::Result<Value> {
    let ctx = require_running(&lua, "gpu.require()")?;
    let target = target_arg(&lua, &t, "gpu.require")?;
    let mut need = Requirement::default();
    if let Some(o) = &opts {
        check_keys(&lua, o, REQUIRE_KEYS, "gpu.require()")?;
        if let Some(n) = whole_number(&lua, o.get("count")?, "gpu.require(): count")? {
            need.count = n as usize;
        }
        need.idle = bool_value(&lua, o.get("idle")?, "gpu.require(): idle", false)?;
        need.min_free_mib =
            whole_number(&lua, o.get("min_free_mib")?, "gpu.require(): min_free_mib")?;
        need.name = string_value(&lua, o.get("name")?, "gpu.require(): name")?;
    }
    let step = Step {
        ctx: &ctx,
        target: &target,
        at: location(&lua),
    };
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

fn whole_number(lua: &Lua, v: Value, what: &str) -> mlua::Result<Option<u64>> {
    match v {
        Value::Nil => Ok(None),
        Value::Integer(n) if n >= 0 => Ok(Some(n as u64)),
        Value::Number(n) if n >= 0.0 && n.fract() == 0.0 && n < 9.0e15 => Ok(Some(n as u64)),
        other => Err(err_at(
            lua,
            format!(
                "{what}: expected a whole number of at least 0, got {}",
                match other {
                    Value::Integer(n) => n.to_string(),
                    Value::Number(n) => n.to_string(),
                    o => o.type_name().to_string(),
                }
            ),
        )),
    }
}
