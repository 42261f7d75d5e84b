//! The recovery primitives (cache, venv, gpu, warmup, git, proc, fingerprint) and files
//! on targets (file). Each works
//! on any target because it only runs commands through `Step::read` / `Step::change`,
//! which go through `actions::perform`: the one place that plans or runs, takes the run
//! lock before a change, and records every action. Remote logic is small POSIX `sh`
//! scripts passed as argv (`sh -c SCRIPT sh ARG…`), never values pasted into script text;
//! each is a named [`Script`] (listed in [`SCRIPTS`]), shown by its name in previews.
//!
//! The Lua side (`lua_api/<table>.rs`) parses arguments and converts results and errors
//! ([`Error`]); the logic lives here, and knows nothing of Lua.

pub mod artifact;
pub mod cache;
pub mod disk;
pub mod file;
pub mod fingerprint;
pub mod git;
pub mod gpu;
pub mod proc;
pub mod store;
pub mod venv;
pub mod warmup;

use crate::actions::ctx::{Ctx, Mode};
use crate::actions::perform::{self, Action, ActionError, Effect, Performed};
use crate::base::abort::{Abort, Why};
pub use crate::base::classify::Class;
use crate::base::script;
pub use crate::base::script::Script;
use crate::targets::failure::TAIL_LINES;
use crate::targets::{ExecOutcome, ExecRequest, Target};
use std::ffi::OsString;
use std::time::Duration;

/// Why a primitive stopped short. Each carries the runbook line that called the
/// primitive (`Step::at`); `lua_api` turns it into the Lua error, in one place.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// What went wrong, worded for the user: `AT: MSG`.
    #[error("{at}: {msg}")]
    Failed { at: String, msg: String },
    /// The step is being stopped (see `abort.rs`).
    #[error(transparent)]
    Stop(Abort),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Options of one command a primitive runs.
#[derive(Debug, Clone, Default)]
pub struct Cmd {
    pub argv: Vec<OsString>,
    pub env: Vec<(String, std::ffi::OsString)>,
    pub cwd: Option<String>,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Option<Duration>,
    /// The script `argv` runs (`sh -c BODY sh ARG…`), so it is shown by name.
    pub script: Option<&'static Script>,
    /// The command prints a secret (see `ExecRequest::secret_output`).
    pub secret_output: bool,
    /// Its stdout is data (an archive), not lines for people (see `Action::binary_output`).
    pub binary_output: bool,
    /// Its stdin is a file's content, named by size and digest (`Action::stdin_data`).
    pub stdin_data: bool,
    /// What a change does to a file's content, shown under it (`Action::diff`).
    pub diff: Option<String>,
    /// `detach = true|false`; by default a command whose timeout is over
    /// `detach::BY_DEFAULT_OVER` is detached (`targets/detach.rs`).
    pub detach: Option<bool>,
}

impl Cmd {
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Cmd {
            argv: argv.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    /// `sh -c BODY sh ARGS…`: the script sees the values as `$1`, `$2`, … so they never
    /// become script text. Shown as `NAME ARGS…` (see `script.rs`).
    pub fn script<I, S>(script: &'static Script, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut argv: Vec<OsString> =
            vec!["sh".into(), "-c".into(), script.body.into(), "sh".into()];
        argv.extend(args.into_iter().map(Into::into));
        Cmd {
            argv,
            script: Some(script),
            ..Default::default()
        }
    }

    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }

    pub fn env(mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) -> Self {
        self.env.push((k.to_string(), v.as_ref().to_owned()));
        self
    }

    pub fn cwd(mut self, dir: &str) -> Self {
        self.cwd = Some(dir.to_string());
        self
    }
}

/// `needs PROGRAM on TARGET (WHY)`: the one wording for a program a primitive needs and
/// the target lacks.
pub fn needs(program: &str, target: &str, why: &str) -> String {
    format!("needs {program} on {target} ({why})")
}

/// A script's own `needs PROGRAM (WHY)` line on stderr (after an optional `runbook: `),
/// worded by `needs` with the target put in.
pub fn needs_from(stderr: &str, target: &str) -> Option<String> {
    stderr.lines().find_map(|l| {
        let rest = l
            .trim()
            .trim_start_matches("runbook: ")
            .strip_prefix("needs ")?;
        let (program, why) = rest.split_once(" (")?;
        Some(needs(program, target, why.strip_suffix(')').unwrap_or(why)))
    })
}

/// A primitive's view of the running step: where it runs, and the Lua line that called
/// it (for error messages).
pub struct Step<'a> {
    pub ctx: &'a Ctx,
    pub target: &'a Target,
    /// `file:line` of the Lua call.
    pub at: String,
}

/// What a command gave back, or that it only was planned.
pub enum Ran {
    /// Only planned (a dry-run); for a change, what stands for its output until it runs
    /// (`known_after.rs`).
    Planned { known_after: Option<String> },
    /// `shown` is the command as people saw it (previews, events): rendered once, by
    /// `actions::perform`.
    Done { out: ExecOutcome, shown: String },
}

impl Ran {
    pub fn planned(&self) -> bool {
        matches!(self, Ran::Planned { .. })
    }

    /// The outcome, for a command that must have run (reads outside `--offline`).
    pub fn outcome(&self) -> Option<&ExecOutcome> {
        match self {
            Ran::Done { out, .. } => Some(out),
            Ran::Planned { .. } => None,
        }
    }

    pub fn ok(&self) -> bool {
        match self {
            Ran::Planned { .. } => true,
            Ran::Done { out, .. } => out.code == Some(0) && !out.timed_out,
        }
    }

    pub fn stdout(&self) -> String {
        self.outcome()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    pub fn stderr(&self) -> String {
        self.outcome()
            .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
            .unwrap_or_default()
    }

    /// Why a command that ran did not succeed, in the one shape (`targets/failure.rs`):
    /// `WHAT failed (WHY) on TARGET` and the last lines of its stderr.
    pub fn failure(
        &self,
        what: impl std::fmt::Display,
        target: Option<&str>,
        timeout: Option<Duration>,
    ) -> String {
        self.failed(what, target, timeout) + &self.stderr_tail(TAIL_LINES)
    }

    /// The head of [`Self::failure`], for a message that puts more before the tail.
    pub fn failed(
        &self,
        what: impl std::fmt::Display,
        target: Option<&str>,
        timeout: Option<Duration>,
    ) -> String {
        match self {
            Ran::Done { out, .. } => out.failed(what, target, timeout),
            Ran::Planned { .. } => format!("{what} was only planned"),
        }
    }

    /// The end of [`Self::failure`]: the last `n` non-blank lines of stderr, indented.
    pub fn stderr_tail(&self, n: usize) -> String {
        self.outcome().map(|o| o.stderr_tail(n)).unwrap_or_default()
    }
}

impl Step<'_> {
    /// A command that only looks: it runs during `--dry-run` too (planned only offline).
    pub async fn read(&self, cmd: Cmd, summary: impl Into<String>) -> Result<Ran> {
        self.run(cmd, summary.into(), Effect::Read, Class::Safe)
            .await
    }

    /// A command that changes the target: planned, not run, during `--dry-run`.
    pub async fn change(
        &self,
        cmd: Cmd,
        summary: impl Into<String>,
        destructive: bool,
    ) -> Result<Ran> {
        let class = match destructive {
            true => Class::Deletes,
            false => Class::Safe,
        };
        self.run(cmd, summary.into(), Effect::Change, class).await
    }

    /// True when changes are only planned (so a primitive can skip its follow-up reads).
    pub fn dry_run(&self) -> bool {
        self.ctx.mode != Mode::Real
    }

    pub fn offline(&self) -> bool {
        matches!(self.ctx.mode, Mode::Offline | Mode::Inspect)
    }

    /// Fails the step with `WHAT: needs PROGRAM on TARGET (WHY)` unless `program` runs on
    /// the target: one read, before the primitive's first change, so that a missing
    /// program is reported before anything changed. Real runs only: in a dry-run the
    /// program may come from an earlier step of the same run (a venv's python). `env`
    /// and `cwd` are the command's own, which can change where `program` is found.
    pub async fn need(
        &self,
        what: &str,
        program: &str,
        why: &str,
        env: &[(String, OsString)],
        cwd: Option<&str>,
    ) -> Result<()> {
        if self.dry_run() {
            return Ok(());
        }
        let mut cmd = Cmd::script(&script::NEED, [program, why]);
        cmd.env = env.to_vec();
        cmd.cwd = cwd.map(str::to_string);
        let ran = self.read(cmd, format!("is {program} there?")).await?;
        if ran.ok() {
            return Ok(());
        }
        let target = self.target.name();
        let msg = needs_from(&ran.stderr(), &target).unwrap_or_else(|| {
            format!(
                "cannot tell whether {program} is on {target}: {}",
                ran.stderr().trim()
            )
        });
        Err(self.fail(format!("{what}: {msg}")))
    }

    /// An error that names the Lua line and the target.
    pub fn fail(&self, msg: impl std::fmt::Display) -> Error {
        Error::Failed {
            at: self.at.clone(),
            msg: msg.to_string(),
        }
    }

    /// The error for a step that is being stopped, noticed at this primitive's line.
    pub fn stop(&self, why: Why) -> Error {
        Error::Stop(Abort {
            why,
            at: self.at.clone(),
        })
    }

    /// Fails once the step is interrupted or out of time: for a primitive that waits
    /// between commands, since no command of its own would notice.
    pub fn check_stopped(&self) -> Result<()> {
        match self.ctx.stopped() {
            Some(why) => Err(self.stop(why)),
            None => Ok(()),
        }
    }

    /// Any command, read or change: the one way a command of a runbook runs (`t:exec`
    /// and `t:shell` too), so that stopping the step and the errors it gives are the
    /// same for all of them. `class`: whether it deletes, as previews mark it.
    pub async fn run(
        &self,
        cmd: Cmd,
        summary: String,
        effect: Effect,
        class: Class,
    ) -> Result<Ran> {
        let action = Action {
            target: self.target,
            req: ExecRequest {
                argv: cmd.argv,
                env: cmd.env,
                cwd: cmd.cwd,
                stdin: cmd.stdin,
                timeout: cmd.timeout,
                secret_output: cmd.secret_output,
                detach: None,
            },
            effect,
            summary,
            class,
            script: cmd.script,
            binary_output: cmd.binary_output,
            stdin_data: cmd.stdin_data,
            diff: cmd.diff,
            detach: cmd.detach.unwrap_or_else(|| {
                cmd.timeout
                    .is_some_and(|t| t > crate::targets::detach::BY_DEFAULT_OVER)
            }),
        };
        let performed = perform::perform(self.ctx, action)
            .await
            .map_err(|e| match e {
                ActionError::Stop(why) => self.stop(why),
                ActionError::Failed(msg) => self.fail(msg),
            })?;
        match performed {
            Performed::Planned { known_after } => Ok(Ran::Planned { known_after }),
            Performed::Ran { out, shown } => {
                if out.interrupted {
                    return Err(self.stop(Why::Interrupted));
                }
                if out.deadline_hit {
                    return Err(self.stop(Why::TimedOut));
                }
                Ok(Ran::Done { out, shown })
            }
        }
    }
}

/// A size for people, in binary units (what `ls -h`, `du -h` and `df -h` mean): bytes
/// below 1 KiB as `512 B`, then one decimal, `4.2 KiB`, `3.0 MiB`, `1.2 GiB`. The one
/// formatter for sizes in every preview, log line and message, so the same bytes always
/// read the same.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 1;
    // Rounded to one decimal, 1023.96 KiB would read "1024.0 KiB": move up instead.
    while (v * 10.0).round() >= 10240.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// `3.0 MiB, 12,345 files`: how big a directory is, as every primitive says it (the
/// numbers are `size_of`'s in `sh/size.sh`: apparent bytes of the regular files).
pub fn human_size(bytes: u64, files: u64) -> String {
    let noun = if files == 1 { "file" } else { "files" };
    format!("{}, {} {noun}", human_bytes(bytes), thousands(files))
}

/// "12,345" for counts in previews.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_counts_read_well() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1.0 KiB");
        assert_eq!(human_bytes(4_296), "4.2 KiB");
        assert_eq!(human_bytes(3 * 1024 * 1024), "3.0 MiB");
        assert_eq!(human_bytes(3_000_000), "2.9 MiB", "binary, not decimal");
        assert_eq!(human_bytes(353_000_000), "336.6 MiB");
        assert_eq!(human_bytes(1_288_490_189), "1.2 GiB");
        assert_eq!(human_bytes(1024 * 1024 - 1), "1.0 MiB", "never 1024.0 KiB");
        assert_eq!(human_bytes(u64::MAX), "16384.0 PiB");
        assert_eq!(human_size(4_296, 2), "4.2 KiB, 2 files");
        assert_eq!(human_size(1, 1), "1 B, 1 file");
        assert_eq!(human_size(0, 12_345), "0 B, 12,345 files");
        assert_eq!(thousands(12345), "12,345");
        assert_eq!(thousands(7), "7");
    }

    #[test]
    fn a_scripts_needs_line_gets_the_target() {
        assert_eq!(
            needs_from(
                "x\nrunbook: needs setsid (a job runs in its own session)\n",
                "local/ct931"
            ),
            Some("needs setsid on local/ct931 (a job runs in its own session)".into())
        );
        assert_eq!(
            needs_from("needs python3 (why (nested))", "h"),
            Some("needs python3 on h (why (nested))".into())
        );
        assert_eq!(needs_from("sh: git: not found", "h"), None);
    }

    /// need.sh under dash and under busybox sh (busybox applets only): a program on PATH,
    /// an executable by path and a builtin pass (printing what was found); a missing
    /// name, a missing path, a file that is not executable and a directory fail with the
    /// line `needs_from` reads.
    #[test]
    fn need_finds_programs_under_dash_and_busybox() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "").unwrap();
        for sh in crate::testing::shells() {
            let shell = sh.name;
            let run = |program: &str| sh.run(script::NEED.body, &[program, "for a test"]);
            let program = sh.argv()[0].to_str().unwrap();
            for found in ["sh", "cat", "command", program] {
                let out = run(found);
                assert!(out.status.success(), "{shell}: {found}: {out:?}");
                assert!(!out.stdout.is_empty(), "{shell}: {found}");
            }
            for missing in [
                "no-such-program",
                "/no/such/path",
                plain.to_str().unwrap(),
                dir.path().to_str().unwrap(),
            ] {
                let out = run(missing);
                assert_eq!(out.status.code(), Some(127), "{shell}: {missing}: {out:?}");
                assert_eq!(
                    needs_from(&String::from_utf8_lossy(&out.stderr), "t"),
                    Some(format!("needs {missing} on t (for a test)")),
                    "{shell}"
                );
            }
        }
    }
}
