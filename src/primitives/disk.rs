//! `disk.free`: the room on the filesystem that holds a path on a target, read with
//! POSIX `df -P -k` (`sh/disk_free.sh`), so a runbook can refuse before it starts a
//! change the disk cannot hold (a torch cu128 venv is ~6 GB).

use super::{Cmd, Result, Step};
use crate::base::script;
use serde::Serialize;
use std::time::Duration;

/// `df` on a hung network filesystem can block for good: the read gives up after this.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The filesystem under a path, as `df` counts it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Free {
    /// What is available to the user commands run as (`df`'s "Available": the blocks
    /// reserved for root are not in it), in bytes.
    pub bytes_free: u64,
    /// The filesystem's size, in bytes.
    pub bytes_total: u64,
    /// The directory measured: the path asked about, or its nearest existing parent when
    /// it does not exist yet; `~` expanded.
    pub path: String,
}

/// Measures the filesystem that holds `path` on the step's target. A read: it runs
/// during `--dry-run` too; `None` when it was only planned (`--offline`).
pub async fn free(step: &Step<'_>, path: &str) -> Result<Option<Free>> {
    let cmd = Cmd::script(&script::DISK_FREE, [path]).timeout(TIMEOUT);
    let ran = step
        .read(cmd, format!("measure the free space under {path}"))
        .await?;
    if ran.planned() {
        return Ok(None);
    }
    let target = step.target.name();
    if !ran.ok() {
        return Err(step.fail(ran.failure(
            format_args!("disk.free({path})"),
            Some(&target),
            Some(TIMEOUT),
        )));
    }
    parse(&ran.stdout())
        .map(Some)
        .map_err(|e| step.fail(format!("disk.free({path}) on {target}: {e}")))
}

/// The script's output: the directory measured, then `df -P -k`'s header and one line.
/// The numbers are read from the right of that line, around its `Capacity` (`NN%`), so
/// a filesystem name with spaces in it does not shift them.
fn parse(out: &str) -> std::result::Result<Free, String> {
    let mut lines = out.lines();
    let path = lines.next().unwrap_or_default().to_string();
    let Some(line) = lines.rfind(|l| !l.trim().is_empty()) else {
        return Err(format!("df printed nothing: {out:?}"));
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    let Some(at) = words
        .iter()
        .rposition(|w| w.ends_with('%') && w[..w.len() - 1].parse::<u64>().is_ok())
    else {
        return Err(format!("no capacity (NN%) in df's line: {line:?}"));
    };
    let kib = |i: Option<usize>, what: &str| -> std::result::Result<u64, String> {
        i.and_then(|i| words.get(i))
            .and_then(|w| w.parse::<u64>().ok())
            .map(|n| n.saturating_mul(1024))
            .ok_or_else(|| format!("no {what} in df's line: {line:?}"))
    };
    Ok(Free {
        bytes_free: kib(at.checked_sub(1), "available blocks")?,
        bytes_total: kib(at.checked_sub(3), "total blocks")?,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_posix_df_output() {
        let out = "/srv/venvs\nFilesystem     1024-blocks     Used Available Capacity Mounted on\n\
                   /dev/vda         264212084 32277076  63008812      34% /\n";
        assert_eq!(
            parse(out).unwrap(),
            Free {
                bytes_free: 63_008_812 * 1024,
                bytes_total: 264_212_084 * 1024,
                path: "/srv/venvs".into(),
            }
        );
        // A filesystem name and a mount point with spaces: counted from the capacity.
        let spaced = "/mnt/my disk\nFilesystem 1024-blocks Used Available Capacity Mounted on\n\
                      my share 1000 400 600 40% /mnt/my disk\n";
        let f = parse(spaced).unwrap();
        assert_eq!((f.bytes_total, f.bytes_free), (1000 * 1024, 600 * 1024));
        assert!(parse("/x\n").unwrap_err().contains("df printed nothing"));
        assert!(parse("/x\nFilesystem\nweird line\n")
            .unwrap_err()
            .contains("no capacity"));
    }

    /// The script as sent, under dash, bash --posix and busybox sh (with busybox's own
    /// `df`), on this machine's disk: a path that exists, one that does not yet (its
    /// nearest existing parent is measured), and `~/`.
    #[test]
    fn the_script_measures_under_every_shell() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join("work")).unwrap();
        for sh in crate::testing::shells() {
            let run = |path: &str| {
                let out = sh
                    .command(script::DISK_FREE.body, &[path])
                    .env("HOME", &home)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{}: {}",
                    sh.name,
                    String::from_utf8_lossy(&out.stderr)
                );
                parse(&String::from_utf8_lossy(&out.stdout))
                    .unwrap_or_else(|e| panic!("{}: {e}", sh.name))
            };
            let here = run(home.to_str().unwrap());
            assert_eq!(here.path, home.display().to_string(), "{}", sh.name);
            assert!(here.bytes_total > 0, "{}", sh.name);
            assert!(here.bytes_free <= here.bytes_total, "{}", sh.name);
            let ahead = home.join("work/new-venv/lib");
            assert_eq!(
                run(ahead.to_str().unwrap()).path,
                home.join("work").display().to_string(),
                "{}",
                sh.name
            );
            assert_eq!(
                run("~/work").path,
                home.join("work").display().to_string(),
                "{}",
                sh.name
            );
        }
    }
}
