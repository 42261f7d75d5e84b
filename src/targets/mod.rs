//! Where commands run. A target only knows how to run an argv and how to render it; it
//! never knows which Lua function or primitive asked.
//!
//! Targets nest: `Pct` wraps any target (its argv becomes `pct exec ID -- argv` there),
//! so every chain ends at a *base*: this machine or an SSH connection.

pub mod hold;
pub mod local;
pub mod pump;
pub mod registry;
pub mod slots;
pub mod ssh;
pub mod wrap;

use crate::cancel::Cancel;
use crate::quote;
use std::ffi::OsString;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// One command to run: an argv, never a shell string (a `shell` call is the argv
/// `sh -c SCRIPT`, remembered as `script` for the preview).
#[derive(Debug, Clone, Default)]
pub struct ExecRequest {
    pub argv: Vec<OsString>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<String>,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Option<Duration>,
    pub script: Option<String>,
    /// The command prints a secret: its output is masked whole in every sink, and its
    /// stdout becomes a secret when it ends.
    pub secret_output: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

#[derive(Debug, Default)]
pub struct ExecOutcome {
    /// The exit code; `None` when the process was killed by a signal.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub duration: Duration,
    /// The command's own `timeout` option ran out.
    pub timed_out: bool,
    /// The step deadline or the run's `--timeout` ran out.
    pub deadline_hit: bool,
    /// A signal (Ctrl-C, TERM) stopped it.
    pub interrupted: bool,
}

/// What a running command reports to and is controlled by.
pub struct ExecIo<'a> {
    /// Each line as it arrives; the flag says the line continues in the next call (it was
    /// cut at 64 KiB).
    pub on_line: &'a dyn Fn(Stream, &str, bool),
    /// The step's deadline (its `timeout`, or the run's `--timeout`).
    pub deadline: Option<Instant>,
    pub cancel: &'a Cancel,
    /// Interrupted once `cancel.count()` exceeds this.
    pub abort_at: u32,
}

/// Stops a remote process group (by its id) on the target that started it.
pub type KillFn<'a> = dyn Fn(u32) -> Pin<Box<dyn Future<Output = ()> + 'a>> + 'a;

/// How much of each stream a result keeps in memory; every line still reaches the events.
pub const CAPTURE_LIMIT: usize = 8 * 1024 * 1024;

#[derive(Debug)]
pub enum Target {
    Local,
    Ssh(Rc<ssh::SshHost>),
    /// A Proxmox LXC container on `parent`, reached with `pct exec`.
    Pct {
        parent: Rc<Target>,
        ctid: u32,
        /// Its inventory name, if it came from there.
        label: Option<String>,
    },
}

/// Where a chain of targets really runs its process.
enum Base {
    Local,
    Ssh(Rc<ssh::SshHost>),
}

impl Target {
    /// How the target is named in previews, events and errors.
    pub fn name(&self) -> String {
        match self {
            Target::Local => "local".into(),
            Target::Ssh(h) => h.name(),
            Target::Pct { label: Some(l), .. } => l.clone(),
            Target::Pct { parent, ctid, .. } => format!("{}/ct{ctid}", parent.name()),
        }
    }

    /// What identifies the machine (and container) this target is, whatever name it was
    /// given: run locks are keyed by it, so one run never waits for itself.
    pub fn destination(&self) -> Pin<Box<dyn Future<Output = String> + '_>> {
        Box::pin(async move {
            match self {
                Target::Local => "local".to_string(),
                Target::Ssh(h) => h.destination().await,
                Target::Pct { parent, ctid, .. } => {
                    format!("{}/ct{ctid}", parent.destination().await)
                }
            }
        })
    }

    /// The argv that runs `argv` on this target, and the base that runs it.
    fn flatten(&self, argv: Vec<OsString>) -> (Base, Vec<OsString>) {
        match self {
            Target::Local => (Base::Local, argv),
            Target::Ssh(h) => (Base::Ssh(h.clone()), argv),
            Target::Pct { parent, ctid, .. } => {
                let mut outer: Vec<OsString> = vec![
                    "pct".into(),
                    "exec".into(),
                    ctid.to_string().into(),
                    "--".into(),
                ];
                outer.extend(argv);
                parent.flatten(outer)
            }
        }
    }

    /// The exact, copy-pastable command line that runs `req` on this target (the
    /// outermost hop: for a container behind SSH, `ssh … -- 'pct exec 200 -- …'`).
    pub fn render(&self, req: &ExecRequest) -> String {
        if let Target::Local = self {
            return quote::render_with(
                &req.argv,
                &req.env,
                req.cwd.as_deref(),
                req.stdin.as_deref(),
            );
        }
        let (inner, stdin) =
            wrap::env_and_cwd(req).unwrap_or_else(|_| (req.argv.clone(), req.stdin.clone()));
        match self.flatten(inner) {
            (Base::Local, argv) => quote::render_with(&argv, &[], None, stdin.as_deref()),
            (Base::Ssh(h), argv) => h.render(&argv, stdin.as_deref()),
        }
    }

    pub async fn exec(&self, req: &ExecRequest, io: &ExecIo<'_>) -> Result<ExecOutcome, String> {
        if let Target::Local = self {
            let spawn = local::Spawn {
                argv: &req.argv,
                env: &req.env,
                cwd: req.cwd.as_deref(),
                stdin: req.stdin.clone(),
                timeout: req.timeout,
            };
            return local::run(spawn, io, None).await;
        }
        let (inner, stdin) = wrap::env_and_cwd(req)?;
        let kill = |pgid: u32| -> Pin<Box<dyn Future<Output = ()> + '_>> {
            Box::pin(self.kill_tree(pgid))
        };
        if let Target::Ssh(h) = self {
            let line = wrap::report_pgid_then_exec(&inner);
            return h.run(line, stdin, req.timeout, io, Some(&kill)).await;
        }
        match self.flatten(wrap::killable(inner)) {
            (Base::Local, argv) => {
                let spawn = local::Spawn {
                    argv: &argv,
                    env: &[],
                    cwd: None,
                    stdin,
                    timeout: req.timeout,
                };
                local::run(spawn, io, Some(&kill)).await
            }
            (Base::Ssh(h), argv) => {
                h.run(
                    quote::join_bytes(&argv),
                    stdin,
                    req.timeout,
                    io,
                    Some(&kill),
                )
                .await
            }
        }
    }

    /// Stops a process group that a wrapped command reported, through the same chain of
    /// hops it was started through (inside the container, on the remote host).
    async fn kill_tree(&self, pgid: u32) {
        let (base, argv) = self.flatten(wrap::kill_tree(pgid));
        let quiet = |_: Stream, _: &str, _: bool| {};
        let cancel = Cancel::default();
        let io = ExecIo {
            on_line: &quiet,
            deadline: Some(Instant::now() + Duration::from_secs(15)),
            cancel: &cancel,
            abort_at: u32::MAX,
        };
        let result = match base {
            Base::Local => {
                let spawn = local::Spawn {
                    argv: &argv,
                    env: &[],
                    cwd: None,
                    stdin: None,
                    timeout: None,
                };
                local::run(spawn, &io, None).await
            }
            Base::Ssh(h) => h.run(quote::join_bytes(&argv), None, None, &io, None).await,
        };
        if let Err(e) = result {
            tracing::warn!(
                "could not stop process group {pgid} on {}: {e}",
                self.name()
            );
        }
    }
}
