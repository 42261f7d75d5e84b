//! Helpers for the unit tests only.
//!
//! [`shells`] is the one harness for runbook's target-side scripts: every test that runs a
//! script runs it under each shell a target may have, with the tools that shell finds.

use std::ffi::OsString;
use std::process::{Command, Output};
use std::rc::Rc;

/// A directory with one link per busybox applet and nothing else: as a PATH, what an
/// Alpine-like target offers (its `rm`, `kill`, `setsid`, `find` are busybox's).
pub fn busybox_applets() -> tempfile::TempDir {
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("these tests need busybox (apt-get install busybox-static; scripts/test does)");
    let list = Command::new(busybox)
        .arg("--list")
        .output()
        .expect("busybox --list runs");
    assert!(list.status.success(), "busybox --list failed");
    let dir = tempfile::tempdir().unwrap();
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        std::os::unix::fs::symlink(busybox, dir.path().join(applet)).unwrap();
    }
    dir
}

/// A shell a target's scripts must work under, and the PATH it gets.
pub struct Shell {
    /// For messages: `dash`, `bash --posix`, `busybox sh`.
    pub name: &'static str,
    /// The program and its words before `-c` (`bash --posix`, busybox's `sh` applet).
    argv: Vec<OsString>,
    path: String,
    /// Keeps the applet directory (busybox's PATH) while the shell is in use.
    _applets: Option<Rc<tempfile::TempDir>>,
}

/// dash and bash (in POSIX mode) with this machine's (GNU) tools, and busybox sh with a
/// PATH of busybox applets and nothing else (an Alpine-like target: its `rm` has no
/// `--one-file-system`, its `setsid` no `-w`).
pub fn shells() -> Vec<Shell> {
    let system = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    let applets = Rc::new(busybox_applets());
    vec![
        Shell {
            name: "dash",
            argv: vec!["dash".into()],
            path: system.clone(),
            _applets: None,
        },
        Shell {
            name: "bash --posix",
            argv: vec!["bash".into(), "--posix".into()],
            path: system,
            _applets: None,
        },
        Shell {
            name: "busybox sh",
            argv: vec![applets.path().join("sh").into()],
            path: applets.path().display().to_string(),
            _applets: Some(applets),
        },
    ]
}

impl Shell {
    /// `SHELL -c SCRIPT sh ARGS…`, as a target runs a script, from `/`, with an
    /// environment of this shell's PATH and the test's HOME only.
    pub fn command<S: AsRef<std::ffi::OsStr>>(&self, script: &str, args: &[S]) -> Command {
        let mut c = Command::new(&self.argv[0]);
        c.args(&self.argv[1..])
            .arg("-c")
            .arg(script)
            .arg("sh")
            .args(args)
            .env_clear()
            .env("PATH", &self.path)
            .env(
                "HOME",
                std::env::var_os("HOME").unwrap_or_else(|| "/".into()),
            )
            .current_dir("/");
        c
    }

    /// `command`, run to its end.
    pub fn run<S: AsRef<std::ffi::OsStr>>(&self, script: &str, args: &[S]) -> Output {
        self.command(script, args).output().unwrap()
    }

    /// The words that start this shell (before `-c`).
    pub fn argv(&self) -> &[OsString] {
        &self.argv
    }

    /// The PATH it runs with.
    pub fn path(&self) -> &str {
        &self.path
    }
}
