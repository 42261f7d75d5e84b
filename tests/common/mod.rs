//! Shared helpers for the integration tests: each test drives the real `runbook` binary
//! with its own temporary state dir and scratch dir, so tests never share records.
#![allow(dead_code)]

pub mod argv;
pub mod lxc;
pub mod run;
pub mod running;
pub mod sshd;

#[allow(unused_imports)]
pub use run::{
    complete_record, logs, of_kind, step_error, step_errors, step_finished, step_skipped, Output,
    Run, Step, FAILED,
};

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

    /// `runbook` with this test's state dir, no colour, and no inherited params.
    pub fn cmd(&self) -> Command {
        Command::from_std(self.std_cmd())
    }

    /// `cmd` as a `std::process::Command`, for a run started in the background
    /// (running.rs).
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
    pub fn last_record(&self) -> Vec<serde_json::Value> {
        run::latest_record(&self.state())
    }

    /// The latest run record, checked to be complete (`run::complete_record`).
    pub fn complete_record(&self) -> Vec<serde_json::Value> {
        let files = self.record_files();
        run::complete_record(files.last().expect("a run record"))
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
        run::record_files(&self.state())
    }

    pub fn record_count(&self) -> usize {
        std::fs::read_dir(self.state().join("runs"))
            .map(|d| d.count())
            .unwrap_or(0)
    }
}

pub fn read_jsonl(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each record line is JSON"))
        .collect()
}

pub fn parse_ndjson(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("each --json line is JSON"))
        .collect()
}

/// The repository root (for runbooks/ and examples/).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}
