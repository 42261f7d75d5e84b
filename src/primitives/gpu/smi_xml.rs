//! `nvidia-smi -q -x` read into what the health checks need, across driver generations.
//!
//! The XML follows NVIDIA's `nvsmi_device_vN.dtd`, whose element names moved between
//! drivers; each field below is looked up under every name a driver has used for it:
//! - clock reasons: `clocks_throttle_reasons/clocks_throttle_reason_X` (470 and before),
//!   `clocks_event_reasons/clocks_event_reason_X` (535 on);
//! - ECC: `single_bit`/`double_bit` with a `total` (Volta and before), then
//!   `sram_*`/`dram_*` counters (Ampere on), the SRAM uncorrectable one split into
//!   `_parity` and `_secded` from the 550 series;
//! - retired pages: `pending_blacklist` and `pending_retirement` (one value, both names
//!   in every generation), `N/A` from Ampere on (it remaps rows instead);
//! - remapped rows: only on GPUs that remap (Ampere on); absent or `N/A` elsewhere;
//! - temperature: absolute thresholds (`gpu_temp_slow_threshold`) up to Ampere; Hopper
//!   reports margins below its T.Limit instead (`gpu_temp_tlimit`,
//!   `gpu_temp_slow_tlimit_threshold`), and the absolute elements are gone;
//! - what the driver asks for: `gpu_reset_status/{reset_required,
//!   drain_and_reset_recommended}` (535 to 550), then `gpu_recovery_action` (570 on);
//! - `ecc_errors/{channel,tpc}_repair_pending` (580 on).
//!
//! A value a GPU does not report (`N/A`, `Not Supported`, `[N/A]`, `Unknown Error`, or an
//! element missing altogether) is `None`: the checks say nothing about what is unknown.

use roxmltree::{Document, Node, ParsingOptions};

/// One GPU of the report, in `nvidia-smi`'s order (its `index`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SmiGpu {
    pub index: u32,
    /// `<gpu id="00000000:3B:00.0">`: the PCI address kernel-log lines name.
    pub pci_bus_id: Option<String>,
    pub uuid: Option<String>,
    pub name: Option<String>,
    pub persistence_mode: Option<bool>,
    pub mig_current: Option<bool>,
    pub mig_pending: Option<bool>,
    /// Uncorrectable ECC errors since the driver loaded.
    pub ecc_volatile_uncorrectable: Option<u64>,
    /// Uncorrectable ECC errors over the GPU's life.
    pub ecc_aggregate_uncorrectable: Option<u64>,
    /// `sram_threshold_exceeded`: the SRAM error count passed NVIDIA's replacement mark.
    pub sram_threshold_exceeded: Option<bool>,
    /// Pages waiting to be retired at the next driver reload or GPU reset.
    pub retired_pages_pending: Option<bool>,
    pub retired_pages_double_bit: Option<u64>,
    pub remapped_rows_pending: Option<bool>,
    pub remapped_rows_failure: Option<bool>,
    /// A channel or TPC repair waits for the next GPU reset (580 on).
    pub repair_pending: Option<bool>,
    /// What the driver itself asks for: `gpu_recovery_action` (570 on) or what the older
    /// `gpu_reset_status` says, in NVML's words (`GPU Reset`, `Drain and Reset`, …).
    pub recovery_action: Option<String>,
    /// The active clock event (throttle) reasons, by NVML's name without its prefix
    /// (`hw_slowdown`, `hw_thermal_slowdown`, `hw_power_brake_slowdown`, …).
    pub clock_reasons_active: Vec<String>,
    pub pcie_gen_current: Option<u32>,
    pub pcie_gen_max: Option<u32>,
    pub pcie_width_current: Option<u32>,
    pub pcie_width_max: Option<u32>,
    pub temperature_c: Option<i64>,
    /// Where the GPU starts to slow itself down.
    pub temperature_slowdown_c: Option<i64>,
    /// Where it shuts down.
    pub temperature_shutdown_c: Option<i64>,
    /// Hopper on: how far below its T.Limit the GPU runs, and the margins at which it
    /// slows down and shuts down (negative: past the limit).
    pub tlimit_margin_c: Option<i64>,
    pub tlimit_slowdown_c: Option<i64>,
    pub tlimit_shutdown_c: Option<i64>,
    pub utilization_pct: Option<u32>,
}

/// The report's top: the driver and its GPUs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SmiReport {
    pub driver_version: Option<String>,
    /// The DTD the report names (`nvsmi_device_v12.dtd`), which says its layout.
    pub dtd: Option<String>,
    pub gpus: Vec<SmiGpu>,
}

/// Parses the whole output of `nvidia-smi -q -x`.
pub fn parse(xml: &str) -> Result<SmiReport, String> {
    // nvidia-smi names its DTD in a DOCTYPE (an external one, never fetched); roxmltree
    // refuses any DOCTYPE unless told, and bounds entity expansion when it is.
    let opts = ParsingOptions {
        allow_dtd: true,
        ..ParsingOptions::default()
    };
    let doc = Document::parse_with_options(xml, opts).map_err(|e| format!("not XML: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "nvidia_smi_log" {
        return Err(format!(
            "expected <nvidia_smi_log>, found <{}>",
            root.tag_name().name()
        ));
    }
    let dtd = xml
        .split_once("<!DOCTYPE")
        .and_then(|(_, rest)| rest.split('"').nth(1))
        .map(str::to_string);
    let gpus = root
        .children()
        .filter(|n| n.has_tag_name("gpu"))
        .enumerate()
        .map(|(i, g)| gpu(i as u32, g))
        .collect();
    Ok(SmiReport {
        driver_version: value(root, &["driver_version"]).map(str::to_string),
        dtd,
        gpus,
    })
}

fn gpu(index: u32, g: Node) -> SmiGpu {
    let reasons = child(g, "clocks_event_reasons")
        .map(|n| (n, "clocks_event_reason_"))
        .or_else(|| child(g, "clocks_throttle_reasons").map(|n| (n, "clocks_throttle_reason_")));
    let clock_reasons_active = match reasons {
        Some((node, prefix)) => node
            .children()
            .filter(|n| n.is_element())
            .filter(|n| text(*n).is_some_and(|v| v.eq_ignore_ascii_case("Active")))
            .map(|n| {
                let name = n.tag_name().name();
                name.strip_prefix(prefix).unwrap_or(name).to_string()
            })
            .collect(),
        None => Vec::new(),
    };
    let link = ["pci", "pci_gpu_link_info"];
    SmiGpu {
        index,
        pci_bus_id: g.attribute("id").map(str::to_string),
        uuid: value(g, &["uuid"]).map(str::to_string),
        name: value(g, &["product_name"]).map(str::to_string),
        persistence_mode: flag(g, &["persistence_mode"]),
        mig_current: flag(g, &["mig_mode", "current_mig"]),
        mig_pending: flag(g, &["mig_mode", "pending_mig"]),
        ecc_volatile_uncorrectable: uncorrectable(g, "volatile"),
        ecc_aggregate_uncorrectable: uncorrectable(g, "aggregate"),
        sram_threshold_exceeded: flag(g, &["ecc_errors", "aggregate", "sram_threshold_exceeded"]),
        retired_pages_pending: flag(g, &["retired_pages", "pending_retirement"])
            .or_else(|| flag(g, &["retired_pages", "pending_blacklist"])),
        retired_pages_double_bit: number(
            g,
            &["retired_pages", "double_bit_retirement", "retired_count"],
        ),
        remapped_rows_pending: flag(g, &["remapped_rows", "remapped_row_pending"]),
        remapped_rows_failure: flag(g, &["remapped_rows", "remapped_row_failure"]),
        repair_pending: any_flag(
            g,
            &[
                &["ecc_errors", "channel_repair_pending"],
                &["ecc_errors", "tpc_repair_pending"],
            ],
        ),
        recovery_action: recovery_action(g),
        clock_reasons_active,
        pcie_gen_current: number(g, &[link[0], link[1], "pcie_gen", "current_link_gen"]),
        pcie_gen_max: number(g, &[link[0], link[1], "pcie_gen", "max_link_gen"]),
        pcie_width_current: number(g, &[link[0], link[1], "link_widths", "current_link_width"]),
        pcie_width_max: number(g, &[link[0], link[1], "link_widths", "max_link_width"]),
        temperature_c: number(g, &["temperature", "gpu_temp"]),
        temperature_slowdown_c: number(g, &["temperature", "gpu_temp_slow_threshold"]),
        temperature_shutdown_c: number(g, &["temperature", "gpu_temp_max_threshold"]),
        tlimit_margin_c: number(g, &["temperature", "gpu_temp_tlimit"]),
        tlimit_slowdown_c: number(g, &["temperature", "gpu_temp_slow_tlimit_threshold"]),
        tlimit_shutdown_c: number(g, &["temperature", "gpu_temp_max_tlimit_threshold"]),
        utilization_pct: number(g, &["utilization", "gpu_util"]),
    }
}

/// The uncorrectable ECC count under `ecc_errors/<which>`, in whichever layout the driver
/// wrote: `double_bit/total` (old), or the `*_uncorrectable` counters summed, where the
/// SRAM one is either whole (`sram_uncorrectable`) or split in two (`_parity`,
/// `_secded`), never both. `None` when none of them is reported.
fn uncorrectable(g: Node, which: &str) -> Option<u64> {
    let base = ["ecc_errors", which];
    if let Some(total) = number(g, &[base[0], base[1], "double_bit", "total"]) {
        return Some(total);
    }
    let node = path(g, &base)?;
    let count = |name: &str| number(node, &[name]);
    let sram = count("sram_uncorrectable").or_else(|| {
        let parts = [
            count("sram_uncorrectable_parity"),
            count("sram_uncorrectable_secded"),
        ];
        parts
            .iter()
            .any(Option::is_some)
            .then(|| parts.iter().flatten().sum())
    });
    let parts = [sram, count("dram_uncorrectable")];
    parts
        .iter()
        .any(Option::is_some)
        .then(|| parts.iter().flatten().sum())
}

/// `gpu_recovery_action` when it asks for something; else what `gpu_reset_status` says.
fn recovery_action(g: Node) -> Option<String> {
    if let Some(a) = value(g, &["gpu_recovery_action"]) {
        return (!a.eq_ignore_ascii_case("none")).then(|| a.to_string());
    }
    let status = ["gpu_reset_status"];
    if flag(g, &[status[0], "drain_and_reset_recommended"]) == Some(true) {
        return Some("Drain and Reset".into());
    }
    (flag(g, &[status[0], "reset_required"]) == Some(true)).then(|| "GPU Reset".into())
}

/// Whether any of the flags is set; `None` when none is reported.
fn any_flag(n: Node, paths: &[&[&str]]) -> Option<bool> {
    let seen: Vec<bool> = paths.iter().filter_map(|p| flag(n, p)).collect();
    (!seen.is_empty()).then(|| seen.contains(&true))
}

fn child<'a, 'i>(n: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    n.children().find(|c| c.has_tag_name(name))
}

fn path<'a, 'i>(mut n: Node<'a, 'i>, names: &[&str]) -> Option<Node<'a, 'i>> {
    for name in names {
        n = child(n, name)?;
    }
    Some(n)
}

/// An element's text, `None` when it is one of the ways nvidia-smi says "not reported".
fn text<'a>(n: Node<'a, '_>) -> Option<&'a str> {
    let v = n.text()?.trim();
    let unreported = v.is_empty()
        || v.starts_with('[')
        || [
            "N/A",
            "Not Supported",
            "Unknown Error",
            "Not Available",
            "Requested functionality has been deprecated",
        ]
        .iter()
        .any(|u| v.eq_ignore_ascii_case(u));
    (!unreported).then_some(v)
}

fn value<'a>(n: Node<'a, '_>, names: &[&str]) -> Option<&'a str> {
    text(path(n, names)?)
}

/// `Enabled`/`Disabled`, `Yes`/`No`, `Active`/`Not Active`.
fn flag(n: Node, names: &[&str]) -> Option<bool> {
    match value(n, names)?.to_ascii_lowercase().as_str() {
        "enabled" | "yes" | "active" => Some(true),
        "disabled" | "no" | "not active" => Some(false),
        _ => None,
    }
}

/// The leading number of a value with its unit (`34 C`, `16x`, `0 %`, `5`).
fn number<T: std::str::FromStr>(n: Node, names: &[&str]) -> Option<T> {
    let v = value(n, names)?;
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '-'))
        .unwrap_or(v.len());
    v[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEW: &str = r#"<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
  <driver_version>570.133.20</driver_version>
  <gpu id="00000000:18:00.0">
    <product_name>NVIDIA H200</product_name>
    <persistence_mode>Enabled</persistence_mode>
    <mig_mode><current_mig>Disabled</current_mig><pending_mig>Disabled</pending_mig></mig_mode>
    <uuid>GPU-aaaa</uuid>
    <pci><pci_gpu_link_info>
      <pcie_gen><max_link_gen>5</max_link_gen><current_link_gen>5</current_link_gen></pcie_gen>
      <link_widths><max_link_width>16x</max_link_width><current_link_width>4x</current_link_width></link_widths>
    </pci_gpu_link_info></pci>
    <clocks_event_reasons>
      <clocks_event_reason_gpu_idle>Not Active</clocks_event_reason_gpu_idle>
      <clocks_event_reason_hw_slowdown>Active</clocks_event_reason_hw_slowdown>
    </clocks_event_reasons>
    <ecc_errors>
      <volatile><sram_correctable>0</sram_correctable><sram_uncorrectable_parity>1</sram_uncorrectable_parity>
        <sram_uncorrectable_secded>0</sram_uncorrectable_secded><dram_correctable>3</dram_correctable>
        <dram_uncorrectable>2</dram_uncorrectable></volatile>
      <aggregate><sram_uncorrectable>N/A</sram_uncorrectable><dram_uncorrectable>N/A</dram_uncorrectable>
        <sram_threshold_exceeded>No</sram_threshold_exceeded></aggregate>
    </ecc_errors>
    <retired_pages><pending_retirement>N/A</pending_retirement></retired_pages>
    <remapped_rows><remapped_row_pending>Yes</remapped_row_pending><remapped_row_failure>No</remapped_row_failure></remapped_rows>
    <temperature><gpu_temp>88 C</gpu_temp><gpu_temp_max_threshold>95 C</gpu_temp_max_threshold>
      <gpu_temp_slow_threshold>92 C</gpu_temp_slow_threshold></temperature>
    <utilization><gpu_util>97 %</gpu_util></utilization>
  </gpu>
</nvidia_smi_log>
"#;

    #[test]
    fn reads_a_newer_driver_and_its_unreported_values() {
        let r = parse(NEW).unwrap();
        assert_eq!(r.driver_version.as_deref(), Some("570.133.20"));
        assert_eq!(r.dtd.as_deref(), Some("nvsmi_device_v12.dtd"));
        let g = &r.gpus[0];
        assert_eq!(g.pci_bus_id.as_deref(), Some("00000000:18:00.0"));
        assert_eq!(g.persistence_mode, Some(true));
        assert_eq!(g.mig_current, Some(false));
        assert_eq!(g.ecc_volatile_uncorrectable, Some(3));
        assert_eq!(g.ecc_aggregate_uncorrectable, None);
        assert_eq!(g.sram_threshold_exceeded, Some(false));
        assert_eq!(g.retired_pages_pending, None);
        assert_eq!(g.remapped_rows_pending, Some(true));
        assert_eq!(g.clock_reasons_active, vec!["hw_slowdown".to_string()]);
        assert_eq!(
            (g.pcie_width_current, g.pcie_width_max),
            (Some(4), Some(16))
        );
        assert_eq!(g.temperature_c, Some(88));
        assert_eq!(g.temperature_slowdown_c, Some(92));
        assert_eq!(g.utilization_pct, Some(97));
    }

    #[test]
    fn reads_the_old_layout() {
        let xml = r#"<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v11.dtd">
<nvidia_smi_log><gpu id="00000000:3B:00.0">
  <clocks_throttle_reasons><clocks_throttle_reason_hw_thermal_slowdown>Active</clocks_throttle_reason_hw_thermal_slowdown></clocks_throttle_reasons>
  <ecc_errors><volatile><double_bit><device_memory>1</device_memory><total>1</total></double_bit></volatile></ecc_errors>
  <retired_pages><pending_blacklist>Yes</pending_blacklist></retired_pages>
  <remapped_rows>N/A</remapped_rows>
</gpu></nvidia_smi_log>"#;
        let g = &parse(xml).unwrap().gpus[0];
        assert_eq!(
            g.clock_reasons_active,
            vec!["hw_thermal_slowdown".to_string()]
        );
        assert_eq!(g.ecc_volatile_uncorrectable, Some(1));
        assert_eq!(g.retired_pages_pending, Some(true));
        assert_eq!(g.remapped_rows_pending, None);
        assert_eq!(g.name, None);
    }

    #[test]
    fn refuses_what_is_not_a_report() {
        assert!(parse("No devices were found")
            .unwrap_err()
            .starts_with("not XML"));
        assert!(parse("<a/>").unwrap_err().contains("nvidia_smi_log"));
    }
}
