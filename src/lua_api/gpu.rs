//! `gpu.*`: what GPUs a target has and who uses them (`nvidia-smi`), whether they are
//! healthy (`nvidia-smi -q -x`, the kernel log's Xids, DCGM), and a check that a job's
//! GPUs are there and sound before it starts.

use super::options::{self, Whole};
use super::target::target_arg;
use super::to_lua;
use super::{require_running, step_for};
use crate::primitives::gpu::{self, HealthOptions as Health, Probe, Requirement};
use mlua::{Lua, Table, Value};
use serde::Deserialize;
use std::time::Duration;

type AtLeastZero = Whole<0, { i64::MAX }>;

/// Options of `gpu.health` (and of `gpu.require`'s health check).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct HealthOptions {
    /// `since` (a duration, e.g. `"2h"`): only Xids logged that long ago or later count
    /// (default: every Xid since boot);
    #[serde(default, deserialize_with = "options::duration")]
    since: Option<Duration>,
    /// `dcgm` (1, 2 or 3): also run DCGM's diagnostic at that level (`dcgmi diag -r N
    /// -j`; 1 takes about a minute, 3 up to half an hour);
    dcgm: Option<Whole<1, 3>>,
    /// `dcgm_timeout` (a duration; default 5 min for level 1, 20 for 2, 90 for 3): a
    /// diagnostic still running then is stopped and counts as failed (it hangs on a
    /// faulty GPU);
    #[serde(default, deserialize_with = "options::duration")]
    dcgm_timeout: Option<Duration>,
    /// `optional = true`: a target with no `nvidia-smi` (no NVIDIA driver) gives
    /// `verdict = "ok"`, no GPUs and a note, instead of failing the step.
    #[serde(default)]
    optional: bool,
}

impl HealthOptions {
    fn into_primitive(self) -> Health {
        Health {
            since: self.since,
            dcgm: self.dcgm.map(|n| n.0 as u8),
            dcgm_timeout: self.dcgm_timeout,
            optional: self.optional,
        }
    }
}

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
    /// absent);
    name: Option<String>,
    /// `healthy = true`: also check their health (`gpu.health`) and fail on any critical
    /// finding, naming the GPU, the finding and its action; `healthy = { since, dcgm,
    /// dcgm_timeout }` checks with those options.
    /// ---@type boolean|runbook.GpuHealthOptions
    #[serde(default, deserialize_with = "healthy")]
    healthy: Option<HealthOptions>,
}

/// `healthy`: `true`, `false`, or `gpu.health`'s options.
fn healthy<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<HealthOptions>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        Flag(bool),
        Options(HealthOptions),
    }
    Ok(match Option::<Given>::deserialize(d)? {
        None | Some(Given::Flag(false)) => None,
        Some(Given::Flag(true)) => Some(HealthOptions::default()),
        Some(Given::Options(o)) => Some(o),
    })
}

pub fn register(lua: &Lua) -> mlua::Result<()> {
    let t = lua.create_table()?;
    t.raw_set("probe", super::async_function(lua, probe)?)?;
    t.raw_set("require", super::async_function(lua, require)?)?;
    t.raw_set("health", super::async_function(lua, health)?)?;
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

/// Lua: gpu.require(t, { count, idle, min_free_mib, name, healthy }) -> { gpu, … }
///
/// Probes `t` (like `gpu.probe`) and fails the step unless it has the GPUs the options
/// ask for. Options ([`RequireOptions`]):
///
/// The error names what is short:
/// `node1: needs 8 GPUs, found 7`,
/// `GPU 3 (NVIDIA H200) is busy: pid 1234 python (81000 MiB)`,
/// `GPU 2 has 1200 MiB free, needs 20000`,
/// `GPU 3: Xid 79 (GPU has fallen off the bus) → node_reboot`. Returns the probe's list.
/// During `--dry-run` it checks for real; with `--offline` nothing is checked.
///
/// Inside a container `nvidia-smi` lists only the container's own processes: pair
/// `idle` with `min_free_mib` to notice memory held from elsewhere.
///
/// ```lua
/// step("GPUs are free", function()
///   gpu.require(box, { count = 8, idle = true, min_free_mib = 130000, name = "H200", healthy = true })
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
    need.healthy = o.healthy.map(HealthOptions::into_primitive);
    let step = step_for(&lua, &ctx, &target);
    let found = gpu::require(&step, &need).await?;
    probe_to_lua(&lua, &found)
}

/// Lua: gpu.health(t, [opts]) -> { verdict, gpus = { { label, index, uuid, name, verdict, action, findings }, … }, findings, xid, dcgm, notes }
///
/// Whether `t`'s GPUs are broken, in NVIDIA's own terms: a polluted environment is
/// fixed by a clean reset, a GPU with a pending row remap or an Xid 79 is not. Reads
/// `nvidia-smi -q -x` (every driver generation's layout), the kernel log's `NVRM: Xid`
/// lines (`dmesg`, or `journalctl -k` where dmesg is restricted), and runs DCGM's
/// diagnostic when `opts.dcgm` asks. All reads: they run during `--dry-run` too; with
/// `--offline` they are only planned and the result is `{ planned = true }` with empty
/// `gpus`, `findings` and `notes`.
///
/// `verdict` (the whole target's, and each GPU's) is `"ok"`, `"warn"` or `"critical"`:
/// its worst finding. Each finding is `{ check, severity, detail, action }`, `action`
/// in NVML's recovery vocabulary: `none`, `restart_app`, `gpu_reset`, `node_reboot`,
/// `drain_and_reset`, `contact_support` (a GPU's own `action` is its strongest). Checks:
/// `memory.ecc_volatile` (uncorrectable ECC errors since the driver loaded),
/// `memory.ecc_aggregate` (over its life), `memory.sram_threshold`,
/// `memory.retired_pages_pending`, `memory.remap_pending`, `memory.remap_failure`,
/// `clocks.hw_slowdown`, `clocks.hw_thermal_slowdown`, `clocks.hw_power_brake_slowdown`
/// (with NVML's clocks event reasons bitmask), `pcie.width` (link narrower than its
/// maximum), `pcie.gen` (slower while busy; an idle GPU slows its link on purpose),
/// `temperature` (at the slowdown or shutdown threshold), `persistence_mode`,
/// `mig_mode`, `xid` (one per Xid number and GPU, through the Xid catalog shipped
/// with runbook; an Xid it does not know is reported as such), `dcgm` (a test that
/// failed, warned or was skipped), and `nvidia_smi` in the target's own `findings`
/// when nvidia-smi itself says a GPU is lost (exit 15), the driver is not loaded (9),
/// or hangs.
///
/// `xid = { readable, source, events = { { xid, name, known, severity, action, gpu,
/// pci, at_s, message }, … } }`: `readable = false` (and a note) where the kernel log
/// could not be read, as inside most containers, so that "no Xid" is never claimed of a
/// log nobody saw. A device the kernel log names and nvidia-smi does not list (a GPU
/// that fell off the bus) is a GPU of its own, with `index = nil` and its `pci_bus_id`;
/// `label` names either kind as messages do (`GPU 3`, `GPU at 0000:3b:00`).
/// `dcgm = { level, passed, timed_out, version, tests = { { name, result, gpu, detail } } }`,
/// or nil with a note when not asked, when `dcgmi` is missing or its host engine is not
/// running (never an error). Options ([`HealthOptions`]):
///
/// ```lua
/// local h = gpu.health(box, { since = "24h" })
/// for _, g in ipairs(h.gpus) do
///   for _, f in ipairs(g.findings) do
///     log.warn(("%s: %s → %s"):format(g.label, f.detail, f.action))
///   end
/// end
/// if h.verdict == "critical" then fail("the GPUs are broken: a clean reset will not help") end
/// ```
/// ---@param t runbook.Target
/// ---@param opts? runbook.GpuHealthOptions
/// ---@return runbook.GpuHealth
/// ---@class runbook.GpuHealth
/// ---@field verdict? "ok"|"warn"|"critical" nil when only planned
/// ---@field gpus runbook.GpuHealthGpu[]
/// ---@field findings runbook.GpuFinding[] the target's own (nvidia-smi failing)
/// ---@field xid? runbook.GpuXidReport
/// ---@field dcgm? runbook.GpuDcgm
/// ---@field driver_version? string
/// ---@field notes string[] what could not be looked at, and why
/// ---@field planned? boolean `--offline`: nothing was looked at
/// ---@class runbook.GpuHealthGpu
/// ---@field label string `GPU 3`, or `GPU at 0000:3b:00`
/// ---@field index? integer nil for a device only the kernel log names
/// ---@field uuid? string
/// ---@field name? string
/// ---@field pci_bus_id? string
/// ---@field verdict "ok"|"warn"|"critical"
/// ---@field action "none"|"restart_app"|"gpu_reset"|"drain_and_reset"|"node_reboot"|"contact_support" the strongest its findings call for
/// ---@field findings runbook.GpuFinding[]
/// ---@class runbook.GpuFinding
/// ---@field check string
/// ---@field severity "ok"|"warn"|"critical"
/// ---@field detail string
/// ---@field action "none"|"restart_app"|"gpu_reset"|"drain_and_reset"|"node_reboot"|"contact_support"
/// ---@class runbook.GpuXidReport
/// ---@field readable boolean
/// ---@field source? "dmesg"|"journalctl"
/// ---@field events runbook.GpuXid[]
/// ---@class runbook.GpuXid
/// ---@field xid integer
/// ---@field name? string
/// ---@field known boolean
/// ---@field severity "warn"|"critical"
/// ---@field action "none"|"restart_app"|"gpu_reset"|"drain_and_reset"|"node_reboot"|"contact_support"
/// ---@field gpu? integer
/// ---@field pci? string
/// ---@field at_s? number seconds after boot
/// ---@field message string
/// ---@class runbook.GpuDcgm
/// ---@field level integer
/// ---@field passed boolean
/// ---@field timed_out boolean
/// ---@field version? string
/// ---@field tests runbook.GpuDcgmTest[]
/// ---@class runbook.GpuDcgmTest
/// ---@field name string
/// ---@field result "pass"|"fail"|"warn"|"skip"
/// ---@field gpu? integer
/// ---@field detail string
async fn health(lua: Lua, (t, opts): (Value, Option<Table>)) -> mlua::Result<Value> {
    let ctx = require_running(&lua, "gpu.health()")?;
    let target = target_arg(&lua, &t, "gpu.health")?;
    let o: HealthOptions = options::read(&lua, "gpu.health()", opts)?;
    let step = step_for(&lua, &ctx, &target);
    match gpu::health(&step, &o.into_primitive()).await? {
        Some(h) => to_lua(&lua, &h),
        None => {
            let planned = lua.create_table()?;
            planned.raw_set("planned", true)?;
            for empty in ["gpus", "findings", "notes"] {
                planned.raw_set(empty, lua.create_table()?)?;
            }
            Ok(Value::Table(planned))
        }
    }
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
