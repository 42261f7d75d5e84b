//! Shared helpers for the integration tests: each test drives the real `runbook` binary
//! with its own temporary state dir and scratch dir, so tests never share records.
#![allow(dead_code)]

pub mod argv;
#[macro_use]
pub mod events;
pub mod subst;
#[macro_use]
pub mod lxc;
pub mod mount;
pub mod run;
pub mod running;
pub mod screen;
#[macro_use]
pub mod slurm;
#[macro_use]
pub mod sshd;

#[allow(unused_imports)]
pub use events::*;
#[allow(unused_imports)]
pub use run::{Output, Run};
#[allow(unused_imports)]
pub use subst::subst;

use assert_cmd::Command;
use std::path::{Path, PathBuf};

pub struct Env {
    pub tmp: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Self {
        Env {
            tmp: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// The state dir this test's runs record into.
    pub fn state(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    /// A scratch dir for the runbook to work in.
    pub fn scratch(&self) -> PathBuf {
        let p = self.tmp.path().join("scratch");
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    /// Writes a runbook file into the temp dir and returns its path.
    pub fn write(&self, name: &str, body: &str) -> PathBuf {
        let p = self.tmp.path().join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, body).unwrap();
        p
    }

    /// `runbook` with this test's state dir, no colour, and no inherited params, as an
    /// assert_cmd `Command`. Tests run the binary with `Run` (run.rs), which builds on
    /// `std_cmd`; this is kept for code that wants assert_cmd itself.
    pub fn cmd(&self) -> Command {
        Command::from_std(self.std_cmd())
    }

    /// The `runbook` command every run starts from (`Run::command`): the test's state dir
    /// and lock file, no colour, no inherited `RUNBOOK_LOG`, the temp dir as current dir.
    pub fn std_cmd(&self) -> std::process::Command {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin!("runbook"));
        c.env("RUNBOOK_STATE_DIR", self.state())
            .env("RUNBOOK_LOCK_FILE", self.tmp.path().join("runbook.lock"))
            .env("NO_COLOR", "1")
            .env_remove("RUNBOOK_LOG")
            .current_dir(self.tmp.path());
        c
    }

    /// The events of the only (or latest) run record.
    pub fn last_record(&self) -> Vec<Event> {
        events::latest_record(&self.state())
    }

    /// The events of the only (or latest) run record, with their times.
    pub fn last_record_stamped(&self) -> Vec<Stamped> {
        events::latest_record_stamped(&self.state())
    }

    /// The latest run record, checked to be complete (`events::complete_record`).
    pub fn complete_record(&self) -> Vec<Event> {
        let files = self.record_files();
        events::complete_record(files.last().expect("a run record"))
    }

    /// Every run record in the state dir, concatenated (to look for what must not be in
    /// any of them).
    pub fn all_records(&self) -> String {
        self.record_files()
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap())
            .collect()
    }

    /// The run record files, oldest first.
    pub fn record_files(&self) -> Vec<PathBuf> {
        events::record_files(&self.state())
    }

    pub fn record_count(&self) -> usize {
        std::fs::read_dir(self.state().join("runs"))
            .map(|d| d.count())
            .unwrap_or(0)
    }
}

/// uv's binary itself (not a pyenv shim, which needs pyenv's environment), or `None`.
pub fn real_uv() -> Option<String> {
    let found = |cmd: &mut std::process::Command| -> Option<String> {
        let out = cmd.output().ok().filter(|o| o.status.success())?;
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (!path.is_empty()).then_some(path)
    };
    let uv = found(std::process::Command::new("pyenv").args(["which", "uv"]))
        .or_else(|| found(std::process::Command::new("sh").args(["-c", "command -v uv"])))?;
    std::process::Command::new(&uv)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| uv)
}

/// uv's path; skips the calling test when uv is missing, unless CI demands it.
#[macro_export]
macro_rules! require_uv {
    () => {
        match $crate::common::real_uv() {
            Some(uv) => uv,
            None => {
                if std::env::var_os("CI").is_some() {
                    panic!("uv is required (scripts/test installs it with pip)");
                }
                eprintln!("skipped: uv is not installed (`python3 -m pip install uv`)");
                return;
            }
        }
    };
}

/// Runs git in `dir` with a fixed identity and no user or system config; its stdout,
/// trimmed (the test fails when git does).
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A git checkout of the demo training project (examples/train) at `dir/dflash`, its
/// files committed as "known good": the model code clean-reset restores.
pub fn demo_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("dflash");
    std::fs::create_dir_all(&repo).unwrap();
    for f in ["kernels.py", "warmup.py", "train.py"] {
        std::fs::copy(self::repo().join("examples/train").join(f), repo.join(f)).unwrap();
    }
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "known good"]);
    repo
}

/// The lines of a file a test's commands append to (none when it does not exist yet).
pub fn file_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The repository root (for runbooks/ and examples/).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}
