//! GPUs on a target, as `nvidia-smi` reports them: two CSV queries (the GPUs, then the
//! compute processes on them), both reads. `require` checks a probe against what a job
//! needs and names whatever is short. `health` reads what says whether a GPU is broken
//! (`nvidia-smi -q -x`, the kernel log's Xid lines, DCGM's diagnostic when asked) and
//! judges it in `gpu/health.rs`.
//!
//! Beside this file: `gpu/smi_xml.rs` (the XML report, across driver generations),
//! `gpu/kernel_log.rs` (the Xid lines `sh/gpu_kernel_log.sh` cuts out), `gpu/xid.rs`
//! (NVIDIA's Xid catalog, `gpu/xid_catalog.toml`), `gpu/dcgm.rs` (`dcgmi diag -j`).

pub mod dcgm;
mod finding;
pub mod health;
mod kernel_log;
mod smi_xml;
mod xid;

use super::{Cmd, Ran, Result, Step};
use crate::base::script;
use health::{Health, Smi};
use serde::Serialize;
use std::time::Duration;

const GPU_FIELDS: &str =
    "index,uuid,name,memory.total,memory.used,utilization.gpu,temperature.gpu,driver_version";
const APP_FIELDS: &str = "gpu_uuid,pid,process_name,used_memory";
const FORMAT: &str = "--format=csv,noheader,nounits";
/// nvidia-smi answers in well under a second; a hung driver must not hang the step.
const QUERY_TIMEOUT: Duration = Duration::from_secs(60);
/// What nvidia-smi prints (exit 6) on a machine whose driver sees no GPU.
const NO_DEVICES: &str = "No devices were found";

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct GpuProcess {
    pub pid: Option<u32>,
    pub name: Option<String>,
    pub used_memory_mib: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Gpu {
    pub index: Option<u32>,
    pub uuid: Option<String>,
    pub name: Option<String>,
    pub memory_total_mib: Option<u64>,
    pub memory_used_mib: Option<u64>,
    pub utilization_pct: Option<u32>,
    pub temperature_c: Option<i32>,
    pub driver_version: Option<String>,
    pub processes: Vec<GpuProcess>,
}

impl Gpu {
    /// "GPU 3 (NVIDIA H200)".
    fn label(&self) -> String {
        let index = self.index.map(|i| i.to_string()).unwrap_or("?".into());
        match &self.name {
            Some(n) => format!("GPU {index} ({n})"),
            None => format!("GPU {index}"),
        }
    }

    fn free_mib(&self) -> Option<u64> {
        Some(self.memory_total_mib?.saturating_sub(self.memory_used_mib?))
    }
}

/// The GPUs of a target; `planned` when `--dry-run --offline` only planned the reads.
#[derive(Debug, Default)]
pub struct Probe {
    pub gpus: Vec<Gpu>,
    pub planned: bool,
}

/// What `gpu.require` asks for.
#[derive(Debug, Clone)]
pub struct Requirement {
    pub count: usize,
    pub idle: bool,
    pub min_free_mib: Option<u64>,
    /// A substring of the GPU name (case-insensitive); other GPUs are not counted.
    pub name: Option<String>,
    /// Fail on a critical health finding (`health` with these options).
    pub healthy: Option<HealthOptions>,
}

impl Default for Requirement {
    fn default() -> Self {
        Requirement {
            count: 1,
            idle: false,
            min_free_mib: None,
            name: None,
            healthy: None,
        }
    }
}

pub async fn probe(step: &Step<'_>) -> Result<Probe> {
    let gpus = query(step, "--query-gpu", GPU_FIELDS, "nvidia-smi: list GPUs").await?;
    let Some(gpus) = gpus else {
        return Ok(Probe {
            gpus: Vec::new(),
            planned: true,
        });
    };
    let mut gpus = parse_gpus(&gpus).map_err(|e| step.fail(bad_output(step, e)))?;
    if gpus.is_empty() {
        return Ok(Probe::default());
    }
    let apps = query(
        step,
        "--query-compute-apps",
        APP_FIELDS,
        "nvidia-smi: list GPU processes",
    )
    .await?
    .unwrap_or_default();
    for (uuid, process) in parse_apps(&apps).map_err(|e| step.fail(bad_output(step, e)))? {
        if let Some(gpu) = gpus.iter_mut().find(|g| g.uuid == uuid) {
            gpu.processes.push(process);
        }
    }
    Ok(Probe {
        gpus,
        planned: false,
    })
}

/// Probes, then fails naming what is short. A planned probe (`--offline`) checks nothing.
pub async fn require(step: &Step<'_>, need: &Requirement) -> Result<Probe> {
    let probe = probe(step).await?;
    if probe.planned {
        return Ok(probe);
    }
    check(&probe.gpus, need).map_err(|why| step.fail(format!("{}: {why}", step.target.name())))?;
    if let Some(opts) = &need.healthy {
        if let Some(h) = health(step, opts).await? {
            if let Some(why) = critical(&h) {
                return Err(step.fail(format!("{}: {why}", step.target.name())));
            }
        }
    }
    Ok(probe)
}

/// What `gpu.health` is asked.
#[derive(Debug, Clone, Default)]
pub struct HealthOptions {
    /// Only Xids logged this long ago or later count (default: since boot).
    pub since: Option<Duration>,
    /// `dcgmi diag -r LEVEL` (1, 2 or 3), when asked.
    pub dcgm: Option<u8>,
    /// How long DCGM's diagnostic may take (default by level: `dcgm_timeout`).
    pub dcgm_timeout: Option<Duration>,
    /// A target without nvidia-smi is no finding but a note (`verdict = "ok"`, no GPUs).
    pub optional: bool,
}

/// How long `dcgmi diag -r LEVEL` may run before it counts as hung: NVIDIA gives level 1
/// about a minute, level 2 a few minutes, level 3 up to half an hour on 8 GPUs.
pub fn dcgm_timeout(level: u8) -> Duration {
    Duration::from_secs(match level {
        1 => 5 * 60,
        2 => 20 * 60,
        _ => 90 * 60,
    })
}

/// The kernel-log read's own limit (journalctl over a large journal is the slow one).
const KERNEL_LOG_TIMEOUT: Duration = Duration::from_secs(60);

/// The GPUs' health: `nvidia-smi -q -x`, the kernel log's Xid lines, and DCGM's
/// diagnostic when asked; all reads. `None` when they were only planned (`--offline`).
/// What is broken is a finding, not an error: only a target that cannot be asked at all
/// (no nvidia-smi and not `optional`, output that is not a report) fails the step.
pub async fn health(step: &Step<'_>, opts: &HealthOptions) -> Result<Option<Health>> {
    let target = step.target.name();
    let mut dcgm_missing = false;
    if opts.optional && !has(step, "nvidia-smi", "the NVIDIA driver's tool").await? {
        let mut h = health::assess(Smi::NoDevices, None, None, None, &target);
        h.notes = vec![format!(
            "no nvidia-smi on {target}: no NVIDIA driver here, nothing to check"
        )];
        return Ok(Some(h));
    }
    let argv = ["nvidia-smi", "-q", "-x"];
    let smi = step
        .read(
            Cmd::new(argv).timeout(QUERY_TIMEOUT),
            "nvidia-smi: the GPUs' full report",
        )
        .await?;
    let log = step
        .read(
            Cmd::script(&script::GPU_KERNEL_LOG, Vec::<String>::new()).timeout(KERNEL_LOG_TIMEOUT),
            "the kernel log's NVIDIA Xid lines",
        )
        .await?;
    let dcgm = match opts.dcgm {
        Some(_) if !has(step, "dcgmi", "NVIDIA DCGM's tool").await? => {
            dcgm_missing = true;
            None
        }
        Some(level) => {
            let timeout = opts.dcgm_timeout.unwrap_or_else(|| dcgm_timeout(level));
            let argv = [
                "dcgmi".to_string(),
                "diag".into(),
                "-r".into(),
                level.to_string(),
                "-j".into(),
            ];
            let ran = step
                .read(
                    Cmd::new(argv).timeout(timeout),
                    format!("DCGM diagnostic, level {level}"),
                )
                .await?;
            Some((level, ran))
        }
        None => None,
    };
    let Ran::Done { out, .. } = &smi else {
        return Ok(None);
    };
    let mut notes = Vec::new();
    if dcgm_missing {
        notes.push(format!(
            "no dcgmi on {target}: DCGM diagnostics were not run"
        ));
    }
    let smi = match read_smi(step, &smi, out.code, out.timed_out)? {
        Some(smi) => smi,
        None => return Err(no_nvidia_smi(step, "gpu.health")),
    };
    let kernel = if log.ok() {
        Some(kernel_log::parse(&log.stdout()).map_err(|e| {
            step.fail(format!(
                "gpu.health on {target}: unexpected kernel-log answer: {e}"
            ))
        })?)
    } else {
        notes.push(log.failure(
            "reading the kernel log for Xid errors",
            Some(&target),
            Some(KERNEL_LOG_TIMEOUT),
        ));
        None
    };
    let dcgm = match dcgm {
        None => None,
        Some((level, ran)) => read_dcgm(level, &ran, &target, &mut notes),
    };
    let since = opts.since.map(|d| d.as_secs_f64());
    let mut h = health::assess(smi, kernel.as_ref(), dcgm, since, &target);
    notes.append(&mut h.notes);
    h.notes = notes;
    Ok(Some(h))
}

/// Whether the target has `program`: asked first where its absence is a note, not an
/// error, since a local command that cannot start fails the read itself where a remote
/// shell exits 127. Planned (`--offline`): as if it had.
async fn has(step: &Step<'_>, program: &str, what: &str) -> Result<bool> {
    let cmd = Cmd::script(&script::NEED, [program, what]);
    let ran = step.read(cmd, format!("is {program} there?")).await?;
    Ok(ran.ok())
}

/// `nvidia-smi -q -x`'s answer; `None` when there is no nvidia-smi.
fn read_smi(step: &Step<'_>, ran: &Ran, code: Option<i32>, timed_out: bool) -> Result<Option<Smi>> {
    let stdout = ran.stdout();
    let said = first_words(&stdout, &ran.stderr());
    let target = step.target.name();
    if timed_out {
        return Ok(Some(Smi::Failed {
            code: None,
            said: format!(
                "nvidia-smi did not answer within {} s (a hung driver)",
                QUERY_TIMEOUT.as_secs()
            ),
            report: None,
        }));
    }
    if said.contains(NO_DEVICES) {
        return Ok(Some(Smi::NoDevices));
    }
    let report = || smi_xml::parse(&stdout);
    match code {
        Some(0) => report().map(|r| Some(Smi::Report(r))).map_err(|e| {
            step.fail(format!(
                "gpu.health on {target}: unexpected nvidia-smi -q -x output: {e}"
            ))
        }),
        Some(127) => Ok(None),
        Some(c) if health::is_health_failure(c, &said) => Ok(Some(Smi::Failed {
            code: Some(c),
            said,
            report: report().ok(),
        })),
        _ => {
            let why = ran.failed("nvidia-smi -q -x", Some(&target), Some(QUERY_TIMEOUT));
            Err(step.fail(format!("gpu.health: {why}: {said}")))
        }
    }
}

/// The first line nvidia-smi said: its own errors go to stdout, a shell's to stderr.
fn first_words(stdout: &str, stderr: &str) -> String {
    stdout
        .lines()
        .chain(stderr.lines())
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('<'))
        .unwrap_or_default()
        .to_string()
}

/// DCGM's answer; a missing or unreachable DCGM is a note, never an error.
fn read_dcgm(level: u8, ran: &Ran, target: &str, notes: &mut Vec<String>) -> Option<dcgm::Dcgm> {
    let out = ran.outcome()?;
    if out.timed_out {
        return Some(dcgm::Dcgm::timed_out(level));
    }
    if out.code == Some(127) {
        notes.push(format!(
            "no dcgmi on {target}: DCGM diagnostics were not run"
        ));
        return None;
    }
    // dcgmi exits non-zero when a test fails, with the JSON all the same.
    match dcgm::parse(level, &ran.stdout()) {
        Ok(d) => Some(d),
        Err(e) => {
            // Its own words when it failed (no host engine, say), else why its JSON was
            // not a result.
            let said = match out.code {
                Some(0) => e,
                _ => first_words(&ran.stdout(), &ran.stderr()),
            };
            notes.push(format!(
                "dcgmi diag -r {level} on {target} gave no result ({}): {said}",
                out.why(None)
            ));
            None
        }
    }
}

/// The critical findings of a health report, each as `GPU 3: WHAT → ACTION`; `None`
/// when there is none.
pub fn critical(h: &Health) -> Option<String> {
    let mut lines = Vec::new();
    for g in &h.gpus {
        for f in g
            .findings
            .iter()
            .filter(|f| f.severity == health::Verdict::Critical)
        {
            lines.push(format!("{}: {} → {}", g.label, f.detail, f.action.name()));
        }
    }
    for f in h
        .findings
        .iter()
        .filter(|f| f.severity == health::Verdict::Critical)
    {
        lines.push(format!("{} → {}", f.detail, f.action.name()));
    }
    (!lines.is_empty()).then(|| lines.join("; "))
}

/// Runs one query. `None` when it was only planned; "" when the driver sees no GPU.
async fn query(step: &Step<'_>, flag: &str, fields: &str, summary: &str) -> Result<Option<String>> {
    let argv = [
        "nvidia-smi".to_string(),
        format!("{flag}={fields}"),
        FORMAT.into(),
    ];
    let ran = step
        .read(Cmd::new(argv).timeout(QUERY_TIMEOUT), summary)
        .await?;
    let Ran::Done { out, .. } = &ran else {
        return Ok(None);
    };
    let stdout = ran.stdout();
    let stderr = ran.stderr();
    // nvidia-smi writes its own errors on stdout; a shell's "not found" goes to stderr.
    let said = stdout
        .lines()
        .chain(stderr.lines())
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .to_string();
    if said.contains(NO_DEVICES) {
        return Ok(Some(String::new()));
    }
    if ran.ok() {
        return Ok(Some(stdout));
    }
    let target = step.target.name();
    let why = if out.timed_out {
        format!(
            "nvidia-smi did not answer within {}s (a hung driver?)",
            QUERY_TIMEOUT.as_secs()
        )
    } else if out.code == Some(127) {
        return Err(no_nvidia_smi(step, "gpu.probe"));
    } else {
        // nvidia-smi's own words are on stdout (`said`), not in a stderr tail.
        let code = out.why(None);
        if said.is_empty() {
            format!("nvidia-smi failed ({code})")
        } else {
            format!("nvidia-smi failed ({code}): {said}")
        }
    };
    Err(step.fail(format!("gpu.probe on {target}: {why}")))
}

/// `WHAT: needs nvidia-smi on TARGET (…)`: the one wording for a target without it.
fn no_nvidia_smi(step: &Step<'_>, what: &str) -> super::Error {
    step.fail(format!(
        "{what}: {}",
        super::needs(
            "nvidia-smi",
            &step.target.name(),
            &format!(
                "{what} asks the NVIDIA driver through it; not found on PATH: no NVIDIA \
                 driver here, or a container without the host's driver tools?"
            )
        )
    ))
}

fn bad_output(step: &Step<'_>, e: String) -> String {
    format!(
        "gpu.probe on {}: unexpected nvidia-smi output: {e}",
        step.target.name()
    )
}

/// `[N/A]`, `[Not Supported]` (any bracketed note, e.g. `[Insufficient Permissions]`) and
/// empty fields mean "not reported".
fn field(raw: &str) -> Option<&str> {
    let v = raw.trim();
    let note = v.starts_with('[') && v.ends_with(']');
    (!v.is_empty() && !note).then_some(v)
}

fn number<T: std::str::FromStr>(raw: &str, what: &str, line: &str) -> Result<Option<T>, String> {
    match field(raw) {
        None => Ok(None),
        Some(v) => v
            .parse()
            .map(Some)
            .map_err(|_| format!("{what} '{v}' is not a number in: {line}")),
    }
}

fn text(raw: &str) -> Option<String> {
    field(raw).map(str::to_string)
}

/// Splits a CSV line whose one free-text column sits at `free` among `n` columns: the
/// text may hold commas, so the fixed columns are taken from both ends.
fn columns(line: &str, n: usize, free: usize) -> Result<Vec<String>, String> {
    let parts: Vec<&str> = line.split(',').collect();
    if parts.len() < n {
        return Err(format!("expected {n} fields in: {line}"));
    }
    let tail = n - free - 1;
    let mut out: Vec<String> = parts[..free].iter().map(|s| s.to_string()).collect();
    out.push(parts[free..parts.len() - tail].join(","));
    out.extend(parts[parts.len() - tail..].iter().map(|s| s.to_string()));
    Ok(out)
}

pub fn parse_gpus(text_out: &str) -> Result<Vec<Gpu>, String> {
    let mut gpus = Vec::new();
    for line in text_out.lines().filter(|l| !l.trim().is_empty()) {
        let c = columns(line, 8, 2)?;
        gpus.push(Gpu {
            index: number(&c[0], "index", line)?,
            uuid: text(&c[1]),
            name: text(&c[2]),
            memory_total_mib: number(&c[3], "memory.total", line)?,
            memory_used_mib: number(&c[4], "memory.used", line)?,
            utilization_pct: number(&c[5], "utilization.gpu", line)?,
            temperature_c: number(&c[6], "temperature.gpu", line)?,
            driver_version: text(&c[7]),
            processes: Vec::new(),
        });
    }
    Ok(gpus)
}

/// (GPU uuid, process) pairs.
pub fn parse_apps(text_out: &str) -> Result<Vec<(Option<String>, GpuProcess)>, String> {
    let mut apps = Vec::new();
    for line in text_out.lines().filter(|l| !l.trim().is_empty()) {
        let c = columns(line, 4, 2)?;
        apps.push((
            text(&c[0]),
            GpuProcess {
                pid: number(&c[1], "pid", line)?,
                name: text(&c[2]),
                used_memory_mib: number(&c[3], "used_memory", line)?,
            },
        ));
    }
    Ok(apps)
}

fn describe_process(p: &GpuProcess) -> String {
    let mut s = match p.pid {
        Some(pid) => format!("pid {pid}"),
        None => "pid ?".to_string(),
    };
    if let Some(name) = &p.name {
        s.push(' ');
        s.push_str(name);
    }
    if let Some(mib) = p.used_memory_mib {
        s.push_str(&format!(" ({mib} MiB)"));
    }
    s
}

/// Whether `gpus` meet `need`: at least `count` GPUs (whose name contains `name`), every
/// one of them idle and with `min_free_mib` free when asked. The error names what is short.
pub fn check(gpus: &[Gpu], need: &Requirement) -> Result<(), String> {
    let wanted = need.name.as_deref().map(str::to_lowercase);
    let matching: Vec<&Gpu> = gpus
        .iter()
        .filter(|g| match &wanted {
            None => true,
            Some(w) => g
                .name
                .as_deref()
                .is_some_and(|n| n.to_lowercase().contains(w)),
        })
        .collect();
    if matching.len() < need.count {
        let gpus_word = if need.count == 1 { "GPU" } else { "GPUs" };
        let mut msg = format!("needs {} {gpus_word}", need.count);
        if let Some(n) = &need.name {
            msg.push_str(&format!(" matching \"{n}\""));
        }
        msg.push_str(&format!(", found {}", matching.len()));
        if need.name.is_some() && !gpus.is_empty() {
            let names: Vec<String> = gpus.iter().map(Gpu::label).collect();
            msg.push_str(&format!(" (has {})", names.join(", ")));
        }
        return Err(msg);
    }
    let mut problems = Vec::new();
    for g in &matching {
        if need.idle && !g.processes.is_empty() {
            let procs: Vec<String> = g.processes.iter().map(describe_process).collect();
            problems.push(format!("{} is busy: {}", g.label(), procs.join(", ")));
        }
        if let Some(min) = need.min_free_mib {
            let index = g.index.map(|i| i.to_string()).unwrap_or("?".into());
            match g.free_mib() {
                Some(free) if free >= min => {}
                Some(free) => {
                    problems.push(format!("GPU {index} has {free} MiB free, needs {min}"))
                }
                None => problems.push(format!(
                    "GPU {index} does not report its memory use, needs {min} MiB free"
                )),
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H200: &str = "0, GPU-a, NVIDIA H200, 143771, 0, 0, 31, 580.82.07\n\
                        3, GPU-d, NVIDIA H200, 143771, 81544, 97, 58, 580.82.07\n";

    #[test]
    fn parses_gpus_and_unreported_fields() {
        let gpus = parse_gpus(H200).unwrap();
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[1].index, Some(3));
        assert_eq!(gpus[1].name.as_deref(), Some("NVIDIA H200"));
        assert_eq!(gpus[1].memory_used_mib, Some(81544));
        assert_eq!(gpus[1].driver_version.as_deref(), Some("580.82.07"));
        let na = parse_gpus("1, GPU-x, Tesla, a, b, [N/A], [N/A], [Not Supported], [N/A], 550.1\n")
            .unwrap();
        assert_eq!(na[0].name.as_deref(), Some("Tesla, a, b"));
        assert_eq!(na[0].memory_total_mib, None);
        assert_eq!(na[0].temperature_c, None);
        assert!(parse_gpus("0, GPU-a, X, lots, 0, 0, 1, 5\n").is_err());
        assert!(parse_gpus("0, GPU-a\n").is_err());
    }

    #[test]
    fn parses_processes() {
        let apps = parse_apps("GPU-d, 1234, python, 81000\nGPU-a, 9, , [N/A]\n").unwrap();
        assert_eq!(apps[0].0.as_deref(), Some("GPU-d"));
        assert_eq!(apps[0].1.used_memory_mib, Some(81000));
        assert_eq!(apps[1].1.name, None);
        assert_eq!(apps[1].1.used_memory_mib, None);
        assert!(parse_apps("").unwrap().is_empty());
    }

    #[test]
    fn requirements_name_what_is_short() {
        let mut gpus = parse_gpus(H200).unwrap();
        gpus[1].processes.push(GpuProcess {
            pid: Some(1234),
            name: Some("python".into()),
            used_memory_mib: Some(81000),
        });
        let need = |count| Requirement {
            count,
            ..Default::default()
        };
        assert_eq!(check(&gpus, &need(8)).unwrap_err(), "needs 8 GPUs, found 2");
        assert!(check(&gpus, &need(2)).is_ok());
        let idle = Requirement {
            idle: true,
            ..need(2)
        };
        assert_eq!(
            check(&gpus, &idle).unwrap_err(),
            "GPU 3 (NVIDIA H200) is busy: pid 1234 python (81000 MiB)"
        );
        let one_idle = Requirement {
            idle: true,
            ..need(1)
        };
        assert!(check(&gpus, &one_idle).is_err(), "every GPU must be idle");
        assert!(check(&gpus[..1], &one_idle).is_ok());
        let roomy = Requirement {
            min_free_mib: Some(100_000),
            ..need(2)
        };
        assert_eq!(
            check(&gpus, &roomy).unwrap_err(),
            "GPU 3 has 62227 MiB free, needs 100000"
        );
        let named = Requirement {
            name: Some("a100".into()),
            ..need(1)
        };
        assert_eq!(
            check(&gpus, &named).unwrap_err(),
            "needs 1 GPU matching \"a100\", found 0 (has GPU 0 (NVIDIA H200), GPU 3 (NVIDIA H200))"
        );
        let h200 = Requirement {
            name: Some("h200".into()),
            ..need(2)
        };
        assert!(check(&gpus, &h200).is_ok());
    }
}
