//! The one way a test runs the `runbook` binary: a fluent builder (just's `Test` is the
//! model) that says what to run, how, and what must come of it, and an [`Output`] that
//! knows how to read what the run printed and recorded.
//!
//! ```ignore
//! let out = Run::new(&env, &file)
//!     .set("dir", &scratch)
//!     .yes()
//!     .json()
//!     .ssh(&fleet)
//!     .expect_exit(1)
//!     .stderr_has("✗ copy")
//!     .run();
//! assert!(out.step_error("copy").contains("No space left"));
//! ```
//!
//! Every run has the test's own state dir and lock file, no colour, no inherited
//! `RUNBOOK_LOG`, the test's temp dir as its current dir and stdin at its end (never a
//! terminal); it is killed after [`Run::timeout`] (10 minutes unless set), so a hang fails
//! the test instead of the suite. A failed expectation panics with [`Output::describe`].

use super::events::*;
use super::running::Running;
use super::Env;
use std::cell::OnceCell;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a run may take unless the test says otherwise.
const LIMIT: Duration = Duration::from_secs(600);

/// How much of stdout `describe` shows at most: its end, which is what explains a failure
/// (a flood drill prints hundreds of MiB).
const STDOUT_SHOWN: usize = 6000;

/// What `Run::new` runs: a runbook file, a name or path as the command line gives it, or a
/// runbook's text.
pub enum Runbook {
    /// A path or a name, passed as it is (`rb/x.lua`, `env-report`).
    Arg(OsString),
    /// Lua text, written to `runbook.lua` in the test's temp dir first.
    Body(String),
}

impl From<&Path> for Runbook {
    fn from(p: &Path) -> Self {
        Runbook::Arg(p.as_os_str().to_owned())
    }
}

impl From<&PathBuf> for Runbook {
    fn from(p: &PathBuf) -> Self {
        Runbook::Arg(p.as_os_str().to_owned())
    }
}

impl From<PathBuf> for Runbook {
    fn from(p: PathBuf) -> Self {
        Runbook::Arg(p.into_os_string())
    }
}

/// Text with a line break is a runbook's text; anything else is a name or a path.
impl From<&str> for Runbook {
    fn from(s: &str) -> Self {
        if s.contains('\n') {
            Runbook::Body(s.to_string())
        } else {
            Runbook::Arg(s.into())
        }
    }
}

impl From<&String> for Runbook {
    fn from(s: &String) -> Self {
        Runbook::from(s.as_str())
    }
}

impl From<String> for Runbook {
    fn from(s: String) -> Self {
        Runbook::from(s.as_str())
    }
}

/// Where `--ssh-config` comes from: a fleet of test sshds, or a file.
pub trait SshConfig {
    fn ssh_config_path(&self) -> PathBuf;
}

impl SshConfig for super::sshd::Fleet {
    fn ssh_config_path(&self) -> PathBuf {
        self.ssh_config()
    }
}

impl SshConfig for Path {
    fn ssh_config_path(&self) -> PathBuf {
        self.to_path_buf()
    }
}

impl SshConfig for PathBuf {
    fn ssh_config_path(&self) -> PathBuf {
        self.clone()
    }
}

/// A `runbook` command to run, and what must come of it.
#[must_use = "a Run does nothing until .run() or .spawn()"]
pub struct Run<'e> {
    env: &'e Env,
    args: Vec<OsString>,
    vars: Vec<(OsString, Option<OsString>)>,
    stdin: Option<Vec<u8>>,
    limit: Duration,
    nofile: Option<u64>,
    json: bool,
    exit: Option<i32>,
    stdout_has: Vec<String>,
    stderr_has: Vec<String>,
}

impl<'e> Run<'e> {
    /// `runbook run RUNBOOK`: a path, a name, or a runbook's text (see [`Runbook`]).
    pub fn new(env: &'e Env, runbook: impl Into<Runbook>) -> Self {
        let arg = match runbook.into() {
            Runbook::Arg(a) => a,
            Runbook::Body(text) => env.write("runbook.lua", &text).into_os_string(),
        };
        Run::cmd(env, [OsString::from("run"), arg])
    }

    /// `runbook WORDS…`: any subcommand (`check`, `show`, `log last`, `docs`, …), or none.
    pub fn cmd<I, S>(env: &'e Env, words: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<OsString> = words.into_iter().map(|w| w.as_ref().to_owned()).collect();
        let json = args.iter().any(|a| a == "--json");
        Run {
            env,
            args,
            vars: Vec::new(),
            stdin: None,
            limit: LIMIT,
            nofile: None,
            json,
            exit: None,
            stdout_has: Vec::new(),
            stderr_has: Vec::new(),
        }
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        if arg.as_ref() == "--json" {
            self.json = true;
        }
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for a in args {
            self = self.arg(a);
        }
        self
    }

    /// `--set KEY=VALUE`.
    pub fn set(self, key: &str, value: impl AsRef<OsStr>) -> Self {
        let mut kv = OsString::from(format!("{key}="));
        kv.push(value.as_ref());
        self.arg("--set").arg(kv)
    }

    pub fn yes(self) -> Self {
        self.arg("--yes")
    }

    pub fn dry_run(self) -> Self {
        self.arg("--dry-run")
    }

    pub fn offline(self) -> Self {
        self.arg("--offline")
    }

    /// `--json`: events on stdout, which [`Output::events`] reads.
    pub fn json(self) -> Self {
        self.arg("--json")
    }

    /// `--ssh-config` of a fleet of test sshds (or a file).
    pub fn ssh(self, config: &(impl SshConfig + ?Sized)) -> Self {
        self.arg("--ssh-config").arg(config.ssh_config_path())
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.vars
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.vars.push((key.as_ref().to_owned(), None));
        self
    }

    /// `dir` first on PATH (a test double's directory).
    pub fn path_first(self, dir: impl AsRef<Path>) -> Self {
        let mut path = dir.as_ref().as_os_str().to_owned();
        path.push(":");
        path.push(std::env::var_os("PATH").unwrap_or_default());
        self.env("PATH", path)
    }

    /// What runbook reads on stdin (otherwise nothing: stdin is at its end at once).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// How long the run may take before the test kills it (its `Output` then says so and
    /// has no exit code).
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.limit = limit;
        self
    }

    /// Lowers the open-file limit, soft and hard (so runbook cannot raise it).
    pub fn nofile(mut self, n: u64) -> Self {
        self.nofile = Some(n);
        self
    }

    /// The run must exit with `code`.
    pub fn expect_exit(mut self, code: i32) -> Self {
        self.exit = Some(code);
        self
    }

    pub fn stdout_has(mut self, text: impl Into<String>) -> Self {
        self.stdout_has.push(text.into());
        self
    }

    pub fn stderr_has(mut self, text: impl Into<String>) -> Self {
        self.stderr_has.push(text.into());
        self
    }

    /// The command as it will run, stdio not yet set.
    pub fn command(&self) -> std::process::Command {
        let mut c = self.env.std_cmd();
        c.args(&self.args);
        for (k, v) in &self.vars {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        if let Some(n) = self.nofile {
            // SAFETY: only setrlimit, which is async-signal-safe, runs between fork and exec.
            unsafe {
                c.pre_exec(move || {
                    let lim = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        c
    }

    /// Runs it to its end (or the limit), checks what it must, and returns what came of it.
    pub fn run(self) -> Output {
        let mut child = self
            .command()
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("runbook starts");
        let started = Instant::now();
        if let Some(bytes) = self.stdin.clone() {
            let mut pipe = child.stdin.take().unwrap();
            // A writer of its own, so a run that never reads stdin cannot block the test.
            std::thread::spawn(move || {
                let _ = pipe.write_all(&bytes);
            });
        }
        let read = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut v = Vec::new();
                let _ = pipe.read_to_end(&mut v);
                v
            })
        };
        let out = read(Box::new(child.stdout.take().unwrap()));
        let err = read(Box::new(child.stderr.take().unwrap()));
        let mut timed_out = None;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if started.elapsed() > self.limit {
                let _ = child.kill();
                timed_out = Some(self.limit);
                break child.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let took = started.elapsed();
        let output = Output {
            status,
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
            took,
            timed_out,
            state: self.env.state(),
            json: self.json,
            stdout_str: OnceCell::new(),
            stderr_str: OnceCell::new(),
        };
        self.check(&output);
        output
    }

    /// Runs it on a terminal (util-linux `script` gives it a pty), typing `answer` into
    /// it: the exit code, and what the terminal showed. Expectations on stderr are checked
    /// against what the terminal showed (it is stdout and stderr at once).
    pub fn on_terminal(self, answer: &str) -> (i32, String) {
        let runbook = self.command();
        let mut line = shell_word(runbook.get_program());
        for a in runbook.get_args() {
            line.push(' ');
            line.push_str(&shell_word(a));
        }
        let mut script = std::process::Command::new("script");
        script.args(["-q", "-e", "-c", &line, "/dev/null"]);
        for (k, v) in runbook.get_envs() {
            match v {
                Some(v) => script.env(k, v),
                None => script.env_remove(k),
            };
        }
        if let Some(dir) = runbook.get_current_dir() {
            script.current_dir(dir);
        }
        let mut child = script
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("script (util-linux) runs");
        {
            let mut stdin = child.stdin.take().unwrap();
            // The prompt comes after the confirmation pass; the pty keeps the answer until
            // then.
            stdin.write_all(answer.as_bytes()).unwrap();
            std::thread::sleep(Duration::from_secs(3));
        }
        let out = child.wait_with_output().unwrap();
        let shown = String::from_utf8_lossy(&out.stdout).into_owned();
        let code = out.status.code().unwrap_or(-1);
        if let Some(want) = self.exit {
            assert_eq!(code, want, "exit code on a terminal\n{shown}");
        }
        for want in self.stderr_has.iter().chain(&self.stdout_has) {
            assert!(
                shown.contains(want.as_str()),
                "the terminal lacks {want:?}\n{shown}"
            );
        }
        (code, shown)
    }

    /// Starts it in the background (see running.rs); expectations are not checked.
    pub fn spawn(self) -> Running {
        Running::start(self.env, self.command())
    }

    fn check(&self, out: &Output) {
        if let Some(code) = self.exit {
            out.assert_exit(code);
        }
        let (stdout, stderr) = (out.stdout_text(), out.stderr_text());
        for want in &self.stdout_has {
            assert!(
                stdout.contains(want.as_str()),
                "stdout lacks {want:?}\n{}",
                out.describe()
            );
        }
        for want in &self.stderr_has {
            assert!(
                stderr.contains(want.as_str()),
                "stderr lacks {want:?}\n{}",
                out.describe()
            );
        }
    }
}

/// What a finished run left: its exit, its output, and (through the state dir) its record.
pub struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// From the start to the exit.
    pub took: Duration,
    /// The limit it ran past, when the test killed it.
    pub timed_out: Option<Duration>,
    state: PathBuf,
    json: bool,
    stdout_str: OnceCell<String>,
    stderr_str: OnceCell<String>,
}

/// `{out:?}` in a failure message shows [`Output::describe`].
impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Output {
    /// A `--json` run started in the background, once it ended (`Running::finish`).
    pub fn of_background(
        status: ExitStatus,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
        state: PathBuf,
        took: Duration,
    ) -> Output {
        Output {
            status,
            stdout,
            stderr,
            took,
            timed_out: None,
            state,
            json: true,
            stdout_str: OnceCell::new(),
            stderr_str: OnceCell::new(),
        }
    }

    /// The exit code; a death by signal (or the test's kill) fails the test.
    pub fn code(&self) -> i32 {
        self.status
            .code()
            .unwrap_or_else(|| panic!("runbook did not exit normally\n{}", self.describe()))
    }

    /// Fails the test unless it exited with `code`.
    pub fn assert_exit(&self, code: i32) -> &Self {
        assert_eq!(
            self.status.code(),
            Some(code),
            "exit code\n{}",
            self.describe()
        );
        self
    }

    pub fn success(&self) -> bool {
        self.status.success()
    }

    pub fn stdout_text(&self) -> String {
        self.stdout_str().to_string()
    }

    pub fn stderr_text(&self) -> String {
        self.stderr_str().to_string()
    }

    /// stdout as text (bytes that are not UTF-8 as U+FFFD), borrowed from the output.
    pub fn stdout_str(&self) -> &str {
        self.stdout_str
            .get_or_init(|| String::from_utf8_lossy(&self.stdout).into_owned())
    }

    /// stderr as text (bytes that are not UTF-8 as U+FFFD), borrowed from the output.
    pub fn stderr_str(&self) -> &str {
        self.stderr_str
            .get_or_init(|| String::from_utf8_lossy(&self.stderr).into_owned())
    }

    /// All there is to know about the run, for a failure message: how it ended, the
    /// failed steps' errors, stderr, and (the end of) stdout.
    pub fn describe(&self) -> String {
        let stdout = self.stdout_text();
        let ended = match (self.timed_out, self.status.code()) {
            (Some(limit), _) => format!("killed by the test after {limit:?}"),
            (None, Some(code)) => format!("exit {code} after {:?}", self.took),
            (None, None) => format!("{} after {:?}", self.status, self.took),
        };
        let failed: Vec<String> = pick!(
            parse_lenient(&self.stdout),
            Event::StepFinished { index, name, outcome: StepOutcome::Failed, error, .. }
                => format!("  step {index} {name:?}: {:?}", error.as_deref().unwrap_or_default())
        );
        let shown = if stdout.len() <= STDOUT_SHOWN {
            "--- stdout ---".to_string()
        } else {
            format!("--- stdout (the last {STDOUT_SHOWN} bytes) ---")
        };
        format!(
            "{ended}\n{}--- stderr ---\n{}\n{shown}\n{}",
            if failed.is_empty() {
                String::new()
            } else {
                format!("--- failed steps ---\n{}\n", failed.join("\n"))
            },
            self.stderr_text(),
            tail_of(&stdout, STDOUT_SHOWN)
        )
    }

    /// The lines a `--json` run printed: its events, or the `error` line of a command
    /// that failed before a run started.
    pub fn lines(&self) -> Vec<Line> {
        parse_ndjson(&self.stdout)
    }

    /// The events a `--json` run printed, with their times (an `error` line fails the
    /// test: see [`Output::lines`]).
    pub fn stamped(&self) -> Vec<Stamped> {
        stamped_of(self.lines())
    }

    /// The events a `--json` run printed (an `error` line fails the test: see
    /// [`Output::lines`]).
    pub fn events(&self) -> Vec<Event> {
        self.stamped().into_iter().map(|s| s.event).collect()
    }

    /// The events of the state dir's latest run record.
    pub fn record(&self) -> Vec<Event> {
        latest_record(&self.state)
    }

    /// The run's events: what `--json` printed, else its record.
    pub fn run_events(&self) -> Vec<Event> {
        if self.json {
            self.events()
        } else {
            self.record()
        }
    }

    /// The messages the runbook logged, in order.
    pub fn logs(&self) -> Vec<String> {
        logs(&self.run_events(), None)
    }

    /// The messages the runbook logged at `level`.
    pub fn logs_at(&self, level: Level) -> Vec<String> {
        logs(&self.run_events(), Some(level))
    }

    /// The lines the run's commands printed (`output` events), in order.
    pub fn output_lines(&self) -> Vec<String> {
        pick!(self.run_events(), Event::Output { line, .. } => line.clone())
    }

    /// The error of a step that failed: see [`step_error`].
    pub fn step_error<'s>(&self, step: impl Into<Step<'s>>) -> String {
        let step = step.into();
        let events = self.run_events();
        find_step(&events, step)
            .map(|e| failed_error(e, step))
            .unwrap_or_else(|| panic!("no {step:?} finished\n{}", self.describe()))
    }

    /// Every failed step's error, one a line.
    pub fn step_errors(&self) -> String {
        step_errors(&self.run_events())
    }
}

/// `word` quoted for `sh -c`.
fn shell_word(word: &OsStr) -> String {
    format!("'{}'", word.to_string_lossy().replace('\'', r"'\''"))
}

/// The last `n` bytes of `s` (fewer, to start on a character).
pub fn tail_of(s: &str, n: usize) -> &str {
    let mut start = s.len().saturating_sub(n);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}
