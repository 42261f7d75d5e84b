//! The kernel log's NVIDIA Xid lines, as `sh/gpu_kernel_log.sh` cuts them out on the
//! target: which source answered (`dmesg`, or `journalctl -k` where dmesg is refused),
//! whether it could see the kernel's log at all, and each Xid line read into its parts.

use serde::Serialize;

/// Where the lines came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Dmesg,
    Journalctl,
}

/// One `NVRM: Xid` line.
#[derive(Debug, Clone, PartialEq)]
pub struct XidLine {
    pub xid: u32,
    /// `0000:3b:00`, as the driver names the device (domain, bus, device).
    pub pci: Option<String>,
    /// Seconds since boot, from the line's `[  1234.567890]` stamp.
    pub at_s: Option<f64>,
    /// What follows the number: pid, process, the driver's own words.
    pub message: String,
}

/// What the script found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelLog {
    /// The source that was read; `None` when neither could be.
    pub source: Option<Source>,
    pub xids: Vec<XidLine>,
    /// Xid lines past the 2000 the script sends (a storm repeats one line).
    pub dropped: u64,
    /// The stamp of the log's first line: well after boot when the ring buffer has
    /// overwritten its start, and Xids from before it are gone.
    pub first_at_s: Option<f64>,
    /// The target's uptime, which `since` is measured against.
    pub uptime_s: Option<f64>,
    /// Why no source could be read: each one's last words.
    pub unreadable: Vec<String>,
}

/// One source's answer, as the script prints it.
#[derive(Default)]
struct Answer {
    source: Option<Source>,
    xids: Vec<XidLine>,
    lines: u64,
    count: u64,
    first: Option<String>,
    status: Option<i32>,
    said: String,
}

impl Answer {
    fn read(&self) -> bool {
        self.status == Some(0) && self.lines > 0
    }

    fn why_not(&self) -> String {
        let name = match self.source {
            Some(Source::Journalctl) => "journalctl -k",
            _ => "dmesg",
        };
        match self.status {
            Some(0) => format!("{name}: no kernel messages (it cannot see the kernel's log)"),
            Some(127) => format!("{name}: not found"),
            _ if self.said.is_empty() => format!("{name}: failed"),
            _ => self.said.clone(),
        }
    }
}

/// Reads the script's output.
pub fn parse(out: &str) -> Result<KernelLog, String> {
    let mut log = KernelLog::default();
    let mut answers: Vec<Answer> = Vec::new();
    for line in out.lines() {
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        if key == "uptime" {
            log.uptime_s = rest.parse().ok();
            continue;
        }
        if key == "source" {
            let source = match rest {
                "dmesg" => Source::Dmesg,
                "journalctl" => Source::Journalctl,
                other => return Err(format!("unknown source {other:?}")),
            };
            answers.push(Answer {
                source: Some(source),
                ..Answer::default()
            });
            continue;
        }
        let Some(a) = answers.last_mut() else {
            return Err(format!("a line before any source: {line:?}"));
        };
        match key {
            "xid" => a.xids.extend(xid_line(rest)),
            "lines" => a.lines = rest.parse().map_err(|_| format!("bad count: {line:?}"))?,
            "xids" => a.count = rest.parse().map_err(|_| format!("bad count: {line:?}"))?,
            "first" => a.first = Some(rest.to_string()),
            "status" => a.status = rest.parse().ok(),
            "said" => a.said = rest.to_string(),
            _ => return Err(format!("unexpected line {line:?}")),
        }
    }
    if answers.is_empty() {
        return Err("no source was tried".into());
    }
    match answers.iter().position(Answer::read) {
        Some(i) => {
            let a = answers.swap_remove(i);
            log.source = a.source;
            log.dropped = a.count.saturating_sub(a.xids.len() as u64);
            log.first_at_s = a.first.as_deref().and_then(stamp);
            log.xids = a.xids;
        }
        None => log.unreadable = answers.iter().map(Answer::why_not).collect(),
    }
    Ok(log)
}

/// `[ 1234.567890] …` → 1234.56789.
fn stamp(line: &str) -> Option<f64> {
    let inner = line.trim_start().strip_prefix('[')?;
    inner.split_once(']')?.0.trim().parse().ok()
}

/// `[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.`, also
/// with a host and `kernel:` before `NVRM` (journalctl) and without the PCI part.
pub fn xid_line(line: &str) -> Option<XidLine> {
    let (_, rest) = line.split_once("NVRM: Xid")?;
    let rest = rest.trim_start();
    let (pci, rest) = match rest.strip_prefix('(') {
        Some(inner) => {
            let (dev, after) = inner.split_once(')')?;
            let dev = dev.trim().trim_start_matches("PCI:");
            (Some(dev.to_ascii_lowercase()), after)
        }
        None => (None, rest),
    };
    let rest = rest
        .trim_start()
        .strip_prefix(':')
        .unwrap_or(rest)
        .trim_start();
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let xid = rest[..digits].parse().ok()?;
    let message = rest[digits..]
        .trim_start_matches([',', ' '])
        .trim_end()
        .to_string();
    Some(XidLine {
        xid,
        pci,
        at_s: stamp(line),
        message,
    })
}

/// Whether a kernel-log PCI name (`0000:3b:00`) and nvidia-smi's (`00000000:3B:00.0`) are
/// one device: domain, bus and device compared as numbers.
pub fn same_device(kernel: &str, smi: &str) -> bool {
    fn parts(s: &str) -> Option<(u32, u32, u32)> {
        let s = s.split('.').next()?;
        let mut it = s.rsplitn(3, ':');
        let dev = u32::from_str_radix(it.next()?, 16).ok()?;
        let bus = u32::from_str_radix(it.next()?, 16).ok()?;
        let domain = match it.next() {
            Some(d) => u32::from_str_radix(d, 16).ok()?,
            None => 0,
        };
        Some((domain, bus, dev))
    }
    matches!((parts(kernel), parts(smi)), (Some(a), Some(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_xid_lines_of_each_form() {
        let old = xid_line(
            "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.",
        )
        .unwrap();
        assert_eq!(old.xid, 79);
        assert_eq!(old.pci.as_deref(), Some("0000:3b:00"));
        assert_eq!(old.at_s, Some(1234.56789));
        assert_eq!(old.message, "pid=0, GPU has fallen off the bus.");
        let journal = xid_line(
            "[  88.100000] node7 kernel: NVRM: Xid (PCI:0000:18:00): 48, pid='<unknown>', \
             name=<unknown>, An uncorrectable double bit error (DBE) has been detected",
        )
        .unwrap();
        assert_eq!(journal.xid, 48);
        assert_eq!(journal.at_s, Some(88.1));
        assert!(xid_line("[ 1.0] NVRM: loading NVIDIA UNIX x86_64 Kernel Module").is_none());
        assert!(same_device("0000:3b:00", "00000000:3B:00.0"));
        assert!(!same_device("0000:3b:00", "00000000:3C:00.0"));
    }

    /// The script as sent, under dash, bash --posix and busybox sh, with the dmesg and
    /// journalctl doubles (tests/bin/gpu-node) first on PATH: an Xid capture, dmesg
    /// refused with journalctl reading the same log, and a container that sees neither.
    /// busybox sh runs its own applets before anything on PATH (a standalone shell), so
    /// there it reads this machine's kernel log with busybox's dmesg, as on an
    /// Alpine-like target (the tests run as root, who may read it).
    #[test]
    fn the_script_reads_the_log_under_every_shell() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let doubles = root.join("tests/bin/gpu-node");
        for sh in crate::testing::shells() {
            if sh.name == "busybox sh" {
                let out = sh.run(crate::base::script::GPU_KERNEL_LOG.body, &[] as &[&str]);
                assert!(out.status.success(), "{out:?}");
                let log = parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
                assert_eq!(log.source, Some(Source::Dmesg), "{log:?}");
                assert!(
                    log.unreadable.is_empty() && log.first_at_s.is_some(),
                    "{log:?}"
                );
                continue;
            }
            let run = |fixture: &str| {
                let out = sh
                    .command(crate::base::script::GPU_KERNEL_LOG.body, &[] as &[&str])
                    .env("PATH", format!("{}:{}", doubles.display(), sh.path()))
                    .env("KMSG_FIXTURE", fixture)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{}: {out:?}", sh.name);
                parse(&String::from_utf8_lossy(&out.stdout)).unwrap()
            };
            let log = run("xid-79");
            assert_eq!(log.source, Some(Source::Dmesg), "{}", sh.name);
            let xids: Vec<u32> = log.xids.iter().map(|x| x.xid).collect();
            assert_eq!(xids, [79, 154], "{}", sh.name);
            assert_eq!(log.xids[0].pci.as_deref(), Some("0000:4c:00"));
            assert_eq!(log.xids[0].at_s, Some(6034.441796));
            assert_eq!(log.first_at_s, Some(0.0));
            assert!(log.uptime_s.is_some(), "{}: /proc/uptime", sh.name);
            let restricted = run("dmesg-restricted");
            assert_eq!(restricted.source, Some(Source::Journalctl), "{}", sh.name);
            let blind = run("container");
            assert_eq!(blind.source, None, "{}", sh.name);
            assert_eq!(
                blind.unreadable,
                [
                    "dmesg: read kernel buffer failed: Operation not permitted",
                    "journalctl -k: no kernel messages (it cannot see the kernel's log)"
                ],
                "{}",
                sh.name
            );
        }
    }

    #[test]
    fn takes_the_first_source_that_read_the_log() {
        let out = "uptime 5000.25\nsource dmesg\nlines 0\nxids 0\nstatus 1\n\
                   said dmesg: read kernel buffer failed: Operation not permitted\n\
                   source journalctl\nxid [ 10.5] h kernel: NVRM: Xid (PCI:0000:18:00): 13, Graphics Exception\n\
                   first [ 0.000000] h kernel: Linux version 6.1\nlines 900\nxids 3\nstatus 0\nsaid x\n";
        let log = parse(out).unwrap();
        assert_eq!(log.source, Some(Source::Journalctl));
        assert_eq!(log.uptime_s, Some(5000.25));
        assert_eq!(log.xids.len(), 1);
        assert_eq!(log.dropped, 2);
        assert_eq!(log.first_at_s, Some(0.0));
        let none = "uptime -\nsource dmesg\nlines 0\nxids 0\nstatus 1\n\
                    said dmesg: read kernel buffer failed: Operation not permitted\n\
                    source journalctl\nlines 0\nxids 0\nstatus 0\nsaid \n";
        let log = parse(none).unwrap();
        assert_eq!(log.source, None);
        assert_eq!(
            log.unreadable,
            [
                "dmesg: read kernel buffer failed: Operation not permitted",
                "journalctl -k: no kernel messages (it cannot see the kernel's log)"
            ]
        );
        assert!(parse("").is_err());
    }
}
