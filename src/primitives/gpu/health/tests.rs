//! The verdicts, on reports made here; the fixtures of every driver generation are read
//! in `gpu/health/fixtures.rs`.

use super::super::kernel_log::{KernelLog, Source, XidLine};
use super::super::smi_xml::{SmiGpu, SmiReport};
use super::*;

/// A finding as the tests compare them: check, GPU index, severity, action.
type Expected<'a> = (&'a str, u32, Verdict, Action);

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
    type Case = (fn(&mut SmiGpu), &'static str, Verdict, Action);
    let cases: Vec<Case> = vec![
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
    assert_eq!(lost.label, "GPU at 0000:af:00");
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

/// Every `nvidia-smi -q -x` fixture (drivers 470, 535, 550, 570 and 580, each
/// generation's layout; tests/fixtures/nvidia-smi/README.md) gives exactly the findings
/// its README row lists.
#[test]
fn every_driver_generations_fixture_gives_its_findings() {
    use Action as A;
    use Verdict as V;
    let expected: &[(&str, &[Expected])] = &[
        ("d470-v100x2", &[]),
        (
            "d470-v100x2-ecc-volatile",
            &[("memory.ecc_volatile", 1, V::Critical, A::GpuReset)],
        ),
        (
            "d470-v100x2-retired-pending",
            &[("memory.retired_pages_pending", 0, V::Critical, A::GpuReset)],
        ),
        (
            "d470-v100x2-hw-slowdown",
            &[("clocks.hw_slowdown", 1, V::Warn, A::None)],
        ),
        (
            "d470-v100x2-temp-slowdown",
            &[("temperature", 0, V::Warn, A::None)],
        ),
        (
            "d470-v100x2-persistence-off",
            &[("persistence_mode", 1, V::Warn, A::None)],
        ),
        (
            "d470-v100x2-pcie-gen1",
            &[("pcie.gen", 0, V::Warn, A::GpuReset)],
        ),
        ("d535-a100x2", &[]),
        (
            "d535-a100x2-ecc-aggregate",
            &[("memory.ecc_aggregate", 0, V::Warn, A::None)],
        ),
        ("d535-a100x2-ecc-disabled", &[]),
        (
            "d535-a100x2-hw-thermal",
            &[
                ("clocks.hw_slowdown", 0, V::Warn, A::None),
                ("clocks.hw_thermal_slowdown", 0, V::Warn, A::None),
            ],
        ),
        (
            "d535-a100x2-pcie-x4",
            &[("pcie.width", 1, V::Warn, A::GpuReset)],
        ),
        (
            "d535-a100x2-remap-failure",
            &[("memory.remap_failure", 1, V::Critical, A::ContactSupport)],
        ),
        (
            "d535-a100x2-temp-slowdown",
            &[("temperature", 1, V::Warn, A::None)],
        ),
        ("d550-h100x2", &[]),
        (
            "d550-h100x2-ecc-volatile-sram",
            &[("memory.ecc_volatile", 0, V::Critical, A::GpuReset)],
        ),
        ("d550-h100x2-mig", &[("mig_mode", 1, V::Warn, A::None)]),
        (
            "d550-h100x2-power-brake",
            &[
                ("clocks.hw_slowdown", 0, V::Warn, A::None),
                ("clocks.hw_power_brake_slowdown", 0, V::Warn, A::None),
            ],
        ),
        (
            "d550-h100x2-remap-pending",
            &[("memory.remap_pending", 1, V::Critical, A::GpuReset)],
        ),
        (
            "d550-h100x2-temp-slowdown",
            &[("temperature", 0, V::Warn, A::None)],
        ),
        ("d570-h200x4", &[]),
        ("d570-h200x4-na", &[]),
        (
            "d570-h200x4-pcie-gen1",
            &[("pcie.gen", 2, V::Warn, A::GpuReset)],
        ),
        (
            "d570-h200x4-sram-threshold",
            &[
                ("memory.ecc_aggregate", 1, V::Warn, A::None),
                ("memory.sram_threshold", 1, V::Critical, A::ContactSupport),
            ],
        ),
        ("h200x8", &[]),
        ("a100x4", &[]),
        ("na-fields", &[("mig_mode", 0, V::Warn, A::None)]),
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvidia-smi");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let xml = entry.unwrap().path().join("q.xml");
        if xml.exists() {
            seen += 1;
            let name = xml
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            assert!(
                expected.iter().any(|(n, _)| *n == name),
                "fixture {name} has no expectation here"
            );
        }
    }
    assert_eq!(seen, expected.len());
    for (fixture, want) in expected {
        let xml = std::fs::read_to_string(dir.join(fixture).join("q.xml")).unwrap();
        let report =
            super::super::smi_xml::parse(&xml).unwrap_or_else(|e| panic!("{fixture}: {e}"));
        assert!(!report.gpus.is_empty(), "{fixture}");
        let h = assess(Smi::Report(report), Some(&log_with(&[])), None, None, "n");
        let mut got: Vec<(String, u32, Verdict, Action)> = h
            .gpus
            .iter()
            .flat_map(|g| {
                g.findings
                    .iter()
                    .map(move |f| (f.check.clone(), g.index.unwrap(), f.severity, f.action))
            })
            .collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let mut want: Vec<(String, u32, Verdict, Action)> = want
            .iter()
            .map(|(c, i, s, a)| (c.to_string(), *i, *s, *a))
            .collect();
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(got, want, "{fixture}: {:#?}", h.gpus);
        let worst = want.iter().map(|w| w.2).max().unwrap_or(Verdict::Ok);
        assert_eq!(h.verdict, worst, "{fixture}");
    }
}

#[test]
fn xid_154_carries_the_recovery_the_driver_asks_for() {
    let line = |message: &str| XidLine {
        xid: 154,
        pci: Some("0000:18:00".into()),
        at_s: Some(10.0),
        message: message.into(),
    };
    let gpus = [gpu(0, "00000000:18:00.0")];
    let reboot = xid_event(
        &line("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"),
        &gpus,
    );
    assert_eq!(
        (reboot.severity, reboot.action),
        (Verdict::Critical, Action::NodeReboot)
    );
    let reset = xid_event(
        &line("GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"),
        &gpus,
    );
    assert_eq!(reset.action, Action::GpuReset);
    let back = xid_event(
        &line("GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)"),
        &gpus,
    );
    assert_eq!(back.action, Action::None);
}
