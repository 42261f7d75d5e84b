//! The verdict on a target's GPUs: what `nvidia-smi -q -x`, the kernel log's Xid lines
//! and (when asked) DCGM's diagnostic say, turned into findings in NVIDIA's own terms.
//! Each finding names its check, says what was seen, and gives the recovery in NVML's
//! vocabulary (`nvmlDeviceGetGpuRecoveryAction` and the Xid catalog's resolutions), so a
//! runbook can branch on it. Pure: the commands run in `gpu.rs`.

use super::dcgm::Dcgm;
pub use super::finding::{Action, Finding, Verdict};
use super::kernel_log::{same_device, KernelLog, Source, XidLine};
use super::smi_xml::{SmiGpu, SmiReport};
use super::xid;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuHealth {
    /// How messages name it: `GPU 3`, or `GPU at 0000:3b:00` ([`GpuHealth::label`]).
    pub label: String,
    /// `nvidia-smi`'s index; `None` for a device only the kernel log names.
    pub index: Option<u32>,
    pub uuid: Option<String>,
    pub name: Option<String>,
    pub pci_bus_id: Option<String>,
    pub verdict: Verdict,
    /// The strongest action its findings call for.
    pub action: Action,
    pub findings: Vec<Finding>,
}

impl GpuHealth {
    /// A GPU with no findings yet, named by its index or, for one nvidia-smi does not
    /// list, by its PCI address.
    fn new(index: Option<u32>, pci_bus_id: Option<String>) -> Self {
        let label = match (index, &pci_bus_id) {
            (Some(i), _) => format!("GPU {i}"),
            (None, Some(pci)) => format!("GPU at {pci}"),
            (None, None) => "a GPU".into(),
        };
        GpuHealth {
            label,
            index,
            uuid: None,
            name: None,
            pci_bus_id,
            verdict: Verdict::Ok,
            action: Action::None,
            findings: Vec::new(),
        }
    }
}

/// One Xid line, with what the catalog says of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct XidEvent {
    pub xid: u32,
    /// The catalog's name; `None` for an Xid it does not know (`known = false`).
    pub name: Option<String>,
    pub known: bool,
    pub severity: Verdict,
    pub action: Action,
    /// The index of the GPU it names, when nvidia-smi lists that device.
    pub gpu: Option<u32>,
    pub pci: Option<String>,
    pub at_s: Option<f64>,
    pub message: String,
}

/// What the kernel log said; `readable = false` (and a note) where it could not be read,
/// so that "no Xid" is never said of a log nobody saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct XidReport {
    pub readable: bool,
    pub source: Option<Source>,
    pub events: Vec<XidEvent>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Health {
    pub verdict: Verdict,
    pub gpus: Vec<GpuHealth>,
    /// Findings of the node rather than of one GPU (nvidia-smi itself failing).
    pub findings: Vec<Finding>,
    pub xid: XidReport,
    pub dcgm: Option<Dcgm>,
    pub driver_version: Option<String>,
    /// What could not be looked at, and why.
    pub notes: Vec<String>,
}

/// `nvidia-smi -q -x`'s answer: a report, or an exit status that is itself a finding.
pub enum Smi {
    Report(SmiReport),
    /// `No devices were found` (exit 6): nothing to check.
    NoDevices,
    /// A failure the tool's exit status names (nvidia-smi(1), RETURN VALUE), or no
    /// answer at all (`code = None`: it hung); with the report it printed all the same
    /// (an infoROM warning comes with one).
    Failed {
        code: Option<i32>,
        said: String,
        report: Option<SmiReport>,
    },
}

/// NVML's clocks event reasons (`nvmlClocksEventReasons`), by their names in the XML.
const CLOCK_REASON_BITS: [(&str, u64); 9] = [
    ("gpu_idle", 0x1),
    ("applications_clocks_setting", 0x2),
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("sync_boost", 0x10),
    ("sw_thermal_slowdown", 0x20),
    ("hw_thermal_slowdown", 0x40),
    ("hw_power_brake_slowdown", 0x80),
    ("display_clocks_setting", 0x100),
];

/// The GPU's own findings, from its `nvidia-smi -q -x` section.
pub fn gpu_findings(g: &SmiGpu) -> Vec<Finding> {
    use Action as A;
    use Verdict as V;
    let mut f = Vec::new();
    if let Some(n) = g.ecc_volatile_uncorrectable.filter(|n| *n > 0) {
        f.push(Finding::new(
            "memory.ecc_volatile",
            V::Critical,
            A::GpuReset,
            format!("{n} uncorrectable ECC error(s) since the driver loaded"),
        ));
    } else if let Some(n) = g.ecc_aggregate_uncorrectable.filter(|n| *n > 0) {
        f.push(Finding::new(
            "memory.ecc_aggregate",
            V::Warn,
            A::None,
            format!(
                "{n} uncorrectable ECC error(s) over the GPU's life, none since the driver loaded"
            ),
        ));
    }
    if g.sram_threshold_exceeded == Some(true) {
        f.push(Finding::new(
            "memory.sram_threshold",
            V::Critical,
            A::ContactSupport,
            "SRAM uncorrectable errors passed NVIDIA's threshold for replacing the GPU",
        ));
    }
    if g.retired_pages_pending == Some(true) {
        f.push(Finding::new(
            "memory.retired_pages_pending",
            V::Critical,
            A::GpuReset,
            "memory pages wait to be retired: they take effect when the GPU is reset",
        ));
    }
    if g.remapped_rows_pending == Some(true) {
        f.push(Finding::new(
            "memory.remap_pending",
            V::Critical,
            A::GpuReset,
            "a memory row remap is pending: it takes effect when the GPU is reset",
        ));
    }
    if g.remapped_rows_failure == Some(true) {
        f.push(Finding::new(
            "memory.remap_failure",
            V::Critical,
            A::ContactSupport,
            "row remapping failed: the GPU has no spare rows left for its bad memory",
        ));
    }
    if g.repair_pending == Some(true) {
        f.push(Finding::new(
            "memory.repair_pending",
            V::Critical,
            A::GpuReset,
            "a channel or TPC repair is pending: it takes effect when the GPU is reset",
        ));
    }
    if let Some(asked) = &g.recovery_action {
        f.push(Finding::new(
            "recovery_action",
            V::Critical,
            recovery(asked),
            format!("the driver asks for recovery: {asked}"),
        ));
    }
    f.extend(clock_findings(&g.clock_reasons_active));
    if let (Some(cur), Some(max)) = (g.pcie_width_current, g.pcie_width_max) {
        if cur < max {
            f.push(Finding::new(
                "pcie.width",
                V::Warn,
                A::GpuReset,
                format!("PCIe link trained to x{cur} of x{max} (a reset retrains it; a link that comes back narrow points at the slot or riser)"),
            ));
        }
    }
    if let (Some(cur), Some(max)) = (g.pcie_gen_current, g.pcie_gen_max) {
        // An idle GPU lowers its link speed to save power; only a busy one is slow.
        let busy = g.utilization_pct.is_some_and(|u| u > 0);
        if cur < max && busy {
            f.push(Finding::new(
                "pcie.gen",
                V::Warn,
                A::GpuReset,
                format!("PCIe link at gen {cur} of gen {max} while the GPU is busy"),
            ));
        }
    }
    f.extend(temperature(g));
    if g.persistence_mode == Some(false) {
        f.push(Finding::new(
            "persistence_mode",
            V::Warn,
            A::None,
            "persistence mode is off: the driver tears the GPU down between jobs (slow starts; nvidia-smi -pm 1)",
        ));
    }
    match (g.mig_current, g.mig_pending) {
        (Some(cur), Some(pending)) if cur != pending => f.push(Finding::new(
            "mig_mode",
            V::Warn,
            A::GpuReset,
            format!(
                "MIG mode is {} and turns {} at the next GPU reset",
                on_off(cur),
                on_off(pending)
            ),
        )),
        (Some(true), _) => f.push(Finding::new(
            "mig_mode",
            V::Warn,
            A::None,
            "MIG mode is on: the GPU is split into instances and a job sees one of them",
        )),
        _ => {}
    }
    f
}

/// At or past the slowdown or shutdown temperature: absolute thresholds where the GPU
/// gives them, else (Hopper on) its margin below T.Limit against the margins of each.
fn temperature(g: &SmiGpu) -> Option<Finding> {
    let (now, slow, off) = match (g.temperature_c, g.tlimit_margin_c) {
        (Some(t), _)
            if g.temperature_slowdown_c.is_some() || g.temperature_shutdown_c.is_some() =>
        {
            let off = g.temperature_shutdown_c.filter(|off| t >= *off);
            let slow = g.temperature_slowdown_c.filter(|slow| t >= *slow);
            (
                format!("{t} °C"),
                slow.map(|s| format!("{s} °C")),
                off.map(|o| format!("{o} °C")),
            )
        }
        (t, Some(m)) => {
            let off = g.tlimit_shutdown_c.filter(|off| m <= *off);
            let slow = g.tlimit_slowdown_c.filter(|slow| m <= *slow);
            let t = t.map(|t| format!("{t} °C, ")).unwrap_or_default();
            let margin = |x: i64| format!("{x} °C from T.Limit");
            (
                format!("{t}{}", margin(m)),
                slow.map(margin),
                off.map(margin),
            )
        }
        _ => return None,
    };
    if let Some(off) = off {
        return Some(Finding::new(
            "temperature",
            Verdict::Critical,
            Action::ContactSupport,
            format!("{now}: at its shutdown threshold ({off})"),
        ));
    }
    slow.map(|slow| {
        Finding::new(
            "temperature",
            Verdict::Warn,
            Action::None,
            format!(
                "{now}: at or past its slowdown threshold ({slow}); it runs slower, check cooling"
            ),
        )
    })
}

/// NVML's recovery action as nvidia-smi words it (`GPU Reset`, `Node Reboot`, `Drain P2P`,
/// `Drain and Reset`), in the vocabulary findings use.
fn recovery(asked: &str) -> Action {
    let key: String = asked
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    match key.as_str() {
        "none" => Action::None,
        "gpureset" | "reset" => Action::GpuReset,
        "nodereboot" | "reboot" => Action::NodeReboot,
        "drainp2p" | "drainandreset" => Action::DrainAndReset,
        _ => Action::ContactSupport,
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// Clock event reasons that are the hardware holding the GPU back (a software power cap
/// or an idle GPU is normal), with NVML's bitmask of every active reason.
fn clock_findings(active: &[String]) -> Vec<Finding> {
    let mask: u64 = CLOCK_REASON_BITS
        .iter()
        .filter(|(name, _)| active.iter().any(|a| a == name))
        .map(|(_, bit)| bit)
        .sum();
    let hw = [
        ("hw_slowdown", "hardware slowdown"),
        ("hw_thermal_slowdown", "hardware thermal slowdown"),
        ("hw_power_brake_slowdown", "hardware power brake slowdown"),
    ];
    hw.iter()
        .filter(|(name, _)| active.iter().any(|a| a == name))
        .map(|(name, words)| {
            Finding::new(
                &format!("clocks.{name}"),
                Verdict::Warn,
                Action::None,
                format!("{words} active (NVML clocks event reasons {mask:#06x}): clocks are held down; check cooling and power"),
            )
        })
        .collect()
}

/// An Xid line read through the catalog.
pub fn xid_event(line: &XidLine, gpus: &[SmiGpu]) -> XidEvent {
    let entry = xid::lookup(line.xid);
    let gpu = line.pci.as_deref().and_then(|pci| {
        gpus.iter()
            .find(|g| {
                g.pci_bus_id
                    .as_deref()
                    .is_some_and(|id| same_device(pci, id))
            })
            .map(|g| g.index)
    });
    let (mut severity, mut action) = (
        entry.map_or(Verdict::Warn, |e| e.severity),
        entry.map_or(Action::None, |e| e.action),
    );
    if let Some(asked) = recovery_change(line) {
        (severity, action) = (Verdict::Critical, asked);
    }
    XidEvent {
        xid: line.xid,
        name: entry.map(|e| e.name.clone()),
        known: entry.is_some(),
        severity,
        action,
        gpu,
        pci: line.pci.clone(),
        at_s: line.at_s,
        message: line.message.clone(),
    }
}

/// Xid 154 says what the driver now asks for: `GPU recovery action changed from 0x0
/// (None) to 0x2 (Node Reboot Required)`. `None` for any other line, or one back to none.
fn recovery_change(line: &XidLine) -> Option<Action> {
    if line.xid != 154 {
        return None;
    }
    let (_, to) = line.message.rsplit_once(" to ")?;
    let words = to.split_once('(')?.1.split(')').next()?;
    match recovery(words.trim_end_matches(" Required").trim()) {
        Action::None => None,
        a => Some(a),
    }
}

/// One finding per Xid number of one device: a storm of one Xid is one finding.
fn xid_findings<'a>(events: impl Iterator<Item = &'a XidEvent>) -> Vec<Finding> {
    let mut by_xid: Vec<(u32, Vec<&XidEvent>)> = Vec::new();
    for e in events {
        match by_xid.iter_mut().find(|(x, _)| *x == e.xid) {
            Some((_, list)) => list.push(e),
            None => by_xid.push((e.xid, vec![e])),
        }
    }
    by_xid
        .into_iter()
        .map(|(xid, list)| {
            let last = list[list.len() - 1];
            let name = match &last.name {
                Some(n) => format!("Xid {xid} ({n})"),
                None => format!(
                    "Xid {xid} (not in runbook's Xid catalog: see NVIDIA's Xid documentation)"
                ),
            };
            let times = match list.len() {
                1 => String::new(),
                n => format!(", {n} times"),
            };
            let when = last
                .at_s
                .map(|s| format!(", last {s:.0} s after boot"))
                .unwrap_or_default();
            Finding::new(
                "xid",
                last.severity,
                last.action,
                format!("{name}{times}{when}"),
            )
        })
        .collect()
}

/// The verdict from everything that was read. `since_s`: only Xids stamped that many
/// seconds before the log's uptime, or later, count.
pub fn assess(
    smi: Smi,
    log: Option<&KernelLog>,
    dcgm: Option<Dcgm>,
    since_s: Option<f64>,
    target: &str,
) -> Health {
    let mut notes = Vec::new();
    let mut node = Vec::new();
    let mut driver_version = None;
    let smi_gpus = match smi {
        Smi::Report(r) => {
            driver_version = r.driver_version;
            r.gpus
        }
        Smi::NoDevices => {
            notes.push(format!("nvidia-smi on {target} found no GPU"));
            Vec::new()
        }
        Smi::Failed { code, said, report } => {
            node.push(smi_failure(code, &said));
            match report {
                Some(r) => {
                    driver_version = r.driver_version;
                    r.gpus
                }
                None => Vec::new(),
            }
        }
    };
    let mut gpus: Vec<GpuHealth> = smi_gpus
        .iter()
        .map(|g| GpuHealth {
            uuid: g.uuid.clone(),
            name: g.name.clone(),
            findings: gpu_findings(g),
            ..GpuHealth::new(Some(g.index), g.pci_bus_id.clone())
        })
        .collect();

    let xid = match log {
        None => XidReport {
            readable: false,
            source: None,
            events: Vec::new(),
        },
        Some(log) if log.source.is_none() => {
            notes.push(format!(
                "the kernel log of {target} could not be read ({}): Xid errors were not checked",
                log.unreadable.join("; ")
            ));
            XidReport {
                readable: false,
                source: None,
                events: Vec::new(),
            }
        }
        Some(log) => {
            let from = match (since_s, log.uptime_s) {
                (Some(since), Some(up)) => Some(up - since),
                _ => None,
            };
            if let (Some(first), true) = (log.first_at_s, from.is_none_or(|f| f < 0.0)) {
                if first > 60.0 {
                    notes.push(format!(
                        "the kernel log of {target} starts {first:.0} s after boot: Xids older than that were overwritten"
                    ));
                }
            }
            if log.dropped > 0 {
                notes.push(format!(
                    "{} more Xid lines than the {} read were in the kernel log of {target}",
                    log.dropped,
                    log.xids.len()
                ));
            }
            let events: Vec<XidEvent> = log
                .xids
                .iter()
                .filter(|l| match (from, l.at_s) {
                    (Some(from), Some(at)) => at >= from,
                    _ => true,
                })
                .map(|l| xid_event(l, &smi_gpus))
                .collect();
            XidReport {
                readable: true,
                source: log.source,
                events,
            }
        }
    };
    for g in gpus.iter_mut() {
        let mine = xid
            .events
            .iter()
            .filter(|e| e.gpu == g.index && e.gpu.is_some());
        g.findings.extend(xid_findings(mine));
    }
    // Xids of a device nvidia-smi does not list (a GPU that fell off the bus is often
    // missing from its report): a GPU entry of its own, named by its PCI address.
    let mut orphans: Vec<&str> = Vec::new();
    for e in xid.events.iter().filter(|e| e.gpu.is_none()) {
        let pci = e.pci.as_deref().unwrap_or("");
        if !orphans.contains(&pci) {
            orphans.push(pci);
        }
    }
    for pci in orphans {
        let mine = xid
            .events
            .iter()
            .filter(|e| e.gpu.is_none() && e.pci.as_deref().unwrap_or("") == pci);
        let findings = xid_findings(mine);
        if pci.is_empty() {
            node.extend(findings);
        } else {
            gpus.push(GpuHealth {
                findings,
                ..GpuHealth::new(None, Some(pci.to_string()))
            });
        }
    }
    if let Some(d) = &dcgm {
        for (gpu, finding) in d.findings() {
            match gpu.and_then(|i| gpus.iter_mut().find(|g| g.index == Some(i))) {
                Some(g) => g.findings.push(finding),
                None => node.push(finding),
            }
        }
    }
    for g in gpus.iter_mut() {
        g.verdict = worst(&g.findings);
        g.action = strongest(&g.findings);
    }
    let verdict = gpus
        .iter()
        .map(|g| g.verdict)
        .chain(std::iter::once(worst(&node)))
        .max()
        .unwrap_or(Verdict::Ok);
    Health {
        verdict,
        gpus,
        findings: node,
        xid,
        dcgm,
        driver_version,
        notes,
    }
}

fn worst(f: &[Finding]) -> Verdict {
    f.iter().map(|f| f.severity).max().unwrap_or(Verdict::Ok)
}

fn strongest(f: &[Finding]) -> Action {
    f.iter().map(|f| f.action).max().unwrap_or(Action::None)
}

/// nvidia-smi's exit statuses that say the GPUs or the driver are in trouble
/// (nvidia-smi(1), RETURN VALUE), as a finding of the node.
fn smi_failure(code: Option<i32>, said: &str) -> Finding {
    let Some(code) = code else {
        return Finding::new("nvidia_smi", Verdict::Critical, Action::NodeReboot, said);
    };
    let lost = code == 15 || said.contains(LOST);
    let (severity, action, what) = match code {
        _ if lost => (
            Verdict::Critical,
            Action::NodeReboot,
            "a GPU has fallen off the bus or is otherwise inaccessible",
        ),
        8 => (
            Verdict::Critical,
            Action::ContactSupport,
            "a GPU's external power cables are not properly attached",
        ),
        9 => (
            Verdict::Critical,
            Action::NodeReboot,
            "the NVIDIA driver is not loaded",
        ),
        10 => (
            Verdict::Critical,
            Action::NodeReboot,
            "the NVIDIA kernel module detected an interrupt issue with a GPU",
        ),
        14 => (
            Verdict::Warn,
            Action::ContactSupport,
            "a GPU's infoROM is corrupted",
        ),
        _ => (Verdict::Critical, Action::NodeReboot, "nvidia-smi failed"),
    };
    let said = said.trim();
    let detail = if said.is_empty() {
        format!("{what} (nvidia-smi exit status {code})")
    } else {
        format!("{what} (nvidia-smi exit status {code}: {said})")
    };
    Finding::new("nvidia_smi", severity, action, detail)
}

/// What nvidia-smi says, whatever its exit status, when it cannot reach a GPU that is
/// there: `Unable to determine the device handle for GPU 0000:03:00.0: GPU is lost.
/// Reboot the system to recover this GPU` (or `: Unknown Error`).
const LOST: &str = "Unable to determine the device handle for GPU";

/// The failures `smi_failure` reads as a finding: the exit statuses that say the GPUs or
/// the driver are in trouble, and a GPU it cannot reach. Any other failure of nvidia-smi
/// fails the call instead.
pub fn is_health_failure(code: i32, said: &str) -> bool {
    matches!(code, 8 | 9 | 10 | 14 | 15) || said.contains(LOST)
}

#[cfg(test)]
mod tests;
