//! Mounts a test makes (a bind mount, a small tmpfs), unmounted when the test ends, even
//! when it fails: before the temp dirs holding them are removed (that removal would
//! follow a bind mount).

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Mounted(PathBuf);

impl Mounted {
    /// `mount --bind FROM AT`; the test fails where it cannot (it needs root, as CI runs).
    pub fn bind(from: &Path, at: &Path) -> Self {
        let out = Command::new("mount")
            .arg("--bind")
            .arg(from)
            .arg(at)
            .output()
            .expect("running mount");
        assert!(
            out.status.success(),
            "this test bind-mounts a directory, which needs root (CI runs as root): mount --bind {} {}: {}",
            from.display(),
            at.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Mounted(at.to_path_buf())
    }

    /// A tmpfs with `opts` on `dir`; None (with a message) where mounting is not
    /// permitted (not root, or a container without CAP_SYS_ADMIN).
    pub fn tmpfs(dir: &Path, opts: &str) -> Option<Self> {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "tmpfs"])
            .arg(dir)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Mounted(dir.to_path_buf())),
            Ok(o) => {
                eprintln!(
                    "skipped: cannot mount a tmpfs here ({}); this drill needs root with mount rights",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipped: cannot run mount ({e})");
                None
            }
        }
    }

    /// `mount -o remount,OPTS` (e.g. `ro`).
    pub fn remount(&self, opts: &str) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(st.success(), "remount {opts}");
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}
