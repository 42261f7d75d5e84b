//! The verdicts, on reports made here; the fixtures of every driver generation are read
//! in `gpu/health/fixtures.rs`.

use super::super::kernel_log::{KernelLog, Source, XidLine};
use super::super::smi_xml::{SmiGpu, SmiReport};
use super::*;

fn gpu(index: u32, pci: &str) -> SmiGpu {
    SmiGpu {
        index,
        pci_bus_id: Some(pci.into()),
        name: Some("NVIDIA H200".into()),
        persistence_mode: Some(true),
        mig_current: Some(false),
        mig_pending: Some(false),
        ..SmiGpu::default()
    }
}

fn report(gpus: Vec<SmiGpu>) -> Smi {
    Smi::Report(SmiReport {
        driver_version: Some("570.133.20".into()),
        dtd: None,
        gpus,
    })
}

fn log_with(lines: &[(&str, u32, f64)]) -> KernelLog {
    KernelLog {
        source: Some(Source::Dmesg),
        xids: lines
            .iter()
            .map(|(pci, xid, at)| XidLine {
                xid: *xid,
                pci: Some(pci.to_string()),
                at_s: Some(*at),
                message: "pid=0, …".into(),
            })
            .collect(),
        uptime_s: Some(10_000.0),
        first_at_s: Some(0.0),
        ..KernelLog::default()
    }
}

#[test]
fn a_sound_gpu_is_ok() {
    let h = assess(
        report(vec![gpu(0, "00000000:18:00.0")]),
        Some(&log_with(&[])),
        None,
        None,
        "n",
    );
    assert_eq!(h.verdict, Verdict::Ok);
    assert!(h.gpus[0].findings.is_empty());
    assert!(h.xid.readable);
    assert!(h.notes.is_empty());
}

#[test]
fn each_failure_is_one_finding_with_its_action() {
    let cases: Vec<(fn(&mut SmiGpu), &str, Verdict, Action)> = vec![
        (
            |g| g.ecc_volatile_uncorrectable = Some(2),
            "memory.ecc_volatile",
            Verdict::Critical,
            Action::GpuReset,
        ),
        (
            |g| g.ecc_aggregate_uncorrectable = Some(5),
            "memory.ecc_aggregate",
            Verdict::Warn,
            Action::None,
        ),
        (
            |g| g.retired_pages_pending = Some(true),
            "memory.retired_pages_pending",
            Verdict::Critical,
            Action::GpuReset,
        ),
        (
            |g| g.remapped_rows_pending = Some(true),
            "memory.remap_pending",
            Verdict::Critical,
            Action::GpuReset,
        ),
        (
            |g| g.remapped_rows_failure = Some(true),
            "memory.remap_failure",
            Verdict::Critical,
            Action::ContactSupport,
        ),
        (
            |g| g.clock_reasons_active = vec!["hw_slowdown".into()],
            "clocks.hw_slowdown",
            Verdict::Warn,
            Action::None,
        ),
        (
            |g| g.clock_reasons_active = vec!["hw_power_brake_slowdown".into()],
            "clocks.hw_power_brake_slowdown",
            Verdict::Warn,
            Action::None,
        ),
        (
            |g| {
                g.pcie_width_current = Some(4);
                g.pcie_width_max = Some(16)
            },
            "pcie.width",
            Verdict::Warn,
            Action::GpuReset,
        ),
        (
            |g| {
                g.pcie_gen_current = Some(1);
                g.pcie_gen_max = Some(5);
                g.utilization_pct = Some(90)
            },
            "pcie.gen",
            Verdict::Warn,
            Action::GpuReset,
        ),
        (
            |g| {
                g.temperature_c = Some(90);
                g.temperature_slowdown_c = Some(87);
                g.temperature_shutdown_c = Some(95)
            },
            "temperature",
            Verdict::Warn,
            Action::None,
        ),
        (
            |g| g.persistence_mode = Some(false),
            "persistence_mode",
            Verdict::Warn,
            Action::None,
        ),
        (
            |g| {
                g.mig_current = Some(true);
                g.mig_pending = Some(true)
            },
            "mig_mode",
            Verdict::Warn,
            Action::None,
        ),
        (
            |g| g.mig_pending = Some(true),
            "mig_mode",
            Verdict::Warn,
            Action::GpuReset,
        ),
    ];
    for (break_it, check, severity, action) in cases {
        let mut g = gpu(0, "00000000:18:00.0");
        break_it(&mut g);
        let h = assess(report(vec![g]), Some(&log_with(&[])), None, None, "n");
        let f = &h.gpus[0].findings;
        assert_eq!(f.len(), 1, "{check}: {f:?}");
        assert_eq!(
            (f[0].check.as_str(), f[0].severity, f[0].action),
            (check, severity, action)
        );
        assert_eq!(h.verdict, severity, "{check}");
        assert_eq!(h.gpus[0].action, action, "{check}");
    }
}

#[test]
fn an_idle_gpu_may_slow_its_link_and_unreported_values_say_nothing() {
    let mut g = gpu(0, "00000000:18:00.0");
    g.pcie_gen_current = Some(1);
    g.pcie_gen_max = Some(5);
    g.utilization_pct = Some(0);
    g.persistence_mode = None;
    g.mig_current = None;
    let h = assess(report(vec![g]), Some(&log_with(&[])), None, None, "n");
    assert_eq!(h.verdict, Verdict::Ok, "{:?}", h.gpus[0].findings);
}

#[test]
fn the_hardware_clock_reasons_carry_nvmls_bitmask() {
    let mut g = gpu(0, "x");
    g.clock_reasons_active = vec![
        "sw_power_cap".into(),
        "hw_slowdown".into(),
        "hw_thermal_slowdown".into(),
    ];
    let f = gpu_findings(&g);
    assert_eq!(f.len(), 2, "a software power cap is no finding: {f:?}");
    assert!(f[0].detail.contains("0x004c"), "{}", f[0].detail);
}

#[test]
fn xids_land_on_their_gpu_and_a_storm_is_one_finding() {
    let log = log_with(&[
        ("0000:3b:00", 79, 500.0),
        ("0000:18:00", 999_999, 600.0),
        ("0000:18:00", 999_999, 700.0),
    ]);
    let gpus = vec![gpu(0, "00000000:18:00.0"), gpu(3, "00000000:3B:00.0")];
    let h = assess(report(gpus), Some(&log), None, None, "n");
    assert_eq!(h.verdict, Verdict::Critical);
    let three = &h.gpus[1];
    assert_eq!(three.findings[0].check, "xid");
    assert_eq!(three.findings[0].action, Action::NodeReboot);
    assert!(three.findings[0]
        .detail
        .starts_with("Xid 79 (GPU has fallen off the bus)"));
    let zero = &h.gpus[0];
    assert_eq!(zero.findings.len(), 1);
    assert_eq!(zero.findings[0].severity, Verdict::Warn);
    assert!(
        zero.findings[0]
            .detail
            .contains("not in runbook's Xid catalog"),
        "{}",
        zero.findings[0].detail
    );
    assert!(zero.findings[0].detail.contains("2 times"));
    assert!(!h.xid.events[1].known);
    assert_eq!(h.xid.events[0].gpu, Some(3));
    assert_eq!(
        super::super::critical(&h).unwrap(),
        "GPU 3: Xid 79 (GPU has fallen off the bus), last 500 s after boot → node_reboot"
    );
}

#[test]
fn since_drops_older_xids_and_an_unlisted_device_is_a_gpu_of_its_own() {
    let log = log_with(&[("0000:3b:00", 79, 500.0), ("0000:af:00", 79, 9_500.0)]);
    let h = assess(
        report(vec![gpu(0, "00000000:18:00.0")]),
        Some(&log),
        None,
        Some(3600.0),
        "n",
    );
    assert_eq!(
        h.xid.events.len(),
        1,
        "the Xid at 500 s is older than an hour"
    );
    let lost = &h.gpus[1];
    assert_eq!(
        (lost.index, lost.pci_bus_id.as_deref()),
        (None, Some("0000:af:00"))
    );
    assert_eq!(lost.label(), "GPU at 0000:af:00");
    assert_eq!(h.verdict, Verdict::Critical);
}

#[test]
fn an_unreadable_kernel_log_is_said_not_taken_for_no_xid() {
    let log = KernelLog {
        unreadable: vec!["dmesg: read kernel buffer failed: Operation not permitted".into()],
        ..KernelLog::default()
    };
    let h = assess(report(vec![gpu(0, "x")]), Some(&log), None, None, "ct 200");
    assert!(!h.xid.readable);
    assert_eq!(
        h.notes,
        ["the kernel log of ct 200 could not be read (dmesg: read kernel buffer failed: Operation not permitted): Xid errors were not checked"]
    );
    let late = KernelLog {
        first_at_s: Some(86_000.0),
        ..log_with(&[])
    };
    let h = assess(report(vec![]), Some(&late), None, None, "n");
    assert!(
        h.notes[0].contains("starts 86000 s after boot"),
        "{:?}",
        h.notes
    );
}

#[test]
fn nvidia_smi_failures_are_findings_of_the_node() {
    let lost = Smi::Failed {
        code: Some(15),
        said: "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.".into(),
        report: None,
    };
    let h = assess(lost, None, None, None, "n");
    assert_eq!(h.verdict, Verdict::Critical);
    assert_eq!(h.findings[0].check, "nvidia_smi");
    assert_eq!(h.findings[0].action, Action::NodeReboot);
    assert!(h.findings[0].detail.contains("fallen off the bus"));
    let hung = Smi::Failed {
        code: None,
        said: "nvidia-smi did not answer".into(),
        report: None,
    };
    assert_eq!(
        assess(hung, None, None, None, "n").verdict,
        Verdict::Critical
    );
    let none = assess(Smi::NoDevices, None, None, None, "n");
    assert_eq!(none.verdict, Verdict::Ok);
    assert_eq!(none.notes, ["nvidia-smi on n found no GPU"]);
}
