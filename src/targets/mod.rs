//! Where commands run. A target only knows how to run an argv and how to render it; it
//! never knows which Lua function or primitive asked.
//!
//! Targets nest: a container wraps any target (its argv becomes `pct exec ID -- argv`,
//! `docker exec -i NAME argv`, … there; see `container.rs`), so every chain ends at a
//! *base*: this machine or an SSH connection.

pub mod container;
pub mod detach;
pub mod error;
pub mod failure;
pub mod hold;
pub mod identity;
pub mod keep;
pub mod local;
pub mod nofile;
pub mod pump;
pub mod registry;
pub mod replies;
pub mod session;
pub mod slots;
pub mod slurm;
pub mod ssh;
pub mod wrap;

use crate::base::cancel::Cancel;
use crate::base::quote;
pub use container::Container;
pub use error::TargetError;
use serde::{Deserialize, Serialize};
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
    /// Values are bytes, not only UTF-8.
    pub env: Vec<(String, OsString)>,
    pub cwd: Option<String>,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Option<Duration>,
    /// The command prints a secret: its output is masked whole in every sink, and its
    /// stdout becomes a secret when it ends.
    pub secret_output: bool,
    /// Run it detached from the connection (see `detach.rs`): it outlives a dropped
    /// connection and a killed runbook, and is followed by polls.
    pub detach: Option<detach::Detach>,
}

/// `stdout` or `stderr` in `output` events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
}

#[derive(Debug, Default, Clone)]
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
    /// Something the run should be told once about how the command ran (a target whose
    /// shell cannot keep a session: commands there take a channel each).
    pub notice: Option<String>,
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
    /// Told the command's process group as soon as it is known, so that a run killed
    /// while the command runs leaves a record a later `--resume` can find it by.
    pub on_group: Option<&'a dyn Fn(&Group)>,
}

/// A command's process group where it runs, and what tells that very group apart from a
/// later one that got the same number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub pgid: u32,
    /// Its leader's start time: field 22 of `/proc/PGID/stat` (clock ticks after boot).
    pub start_time: Option<u64>,
    /// `/proc/sys/kernel/random/boot_id`: a start time only means something within a boot.
    pub boot_id: Option<String>,
}

impl Group {
    /// From what a wrapper reports: `PGID BOOT_ID STAT_LINE`, `-` for what it could not
    /// read (no /proc), or just `PGID`.
    pub fn parse(text: &str) -> Option<Group> {
        let text = text.trim();
        let (pgid, rest) = text.split_once(' ').unwrap_or((text, ""));
        let (boot, stat) = rest.split_once(' ').unwrap_or((rest, ""));
        Some(Group {
            pgid: pgid.parse().ok()?,
            start_time: start_time_of(stat),
            boot_id: Some(boot)
                .filter(|b| !b.is_empty() && *b != "-")
                .map(str::to_string),
        })
    }
}

/// Field 22 of a `/proc/PID/stat` line. The command name (field 2) may hold spaces and
/// parentheses, so the fields are counted from the last `)`.
pub fn start_time_of(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// One hop of the way to a target, as a run record keeps it: enough to reach the same
/// place again from a later run, whatever the runbook called it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hop {
    Ssh {
        host: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        identity: Option<std::path::PathBuf>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        jump: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        alias: Option<String>,
        connect_timeout_ms: u64,
    },
    /// `{"slurm":{"node":"gpu01","job":42,"immediate_s":10}}`: a Slurm node, through srun.
    Slurm(slurm::SlurmSpec),
    /// `{"pct":200}`, `{"docker":{"name":"trainer"}}`, … (see `Container`).
    #[serde(untagged)]
    In(Container),
}

/// Stops a remote process group (by its id) on the target that started it.
pub type KillFn<'a> = dyn Fn(u32) -> Pin<Box<dyn Future<Output = ()> + 'a>> + 'a;

/// How much of each stream a result keeps in memory; every line still reaches the events.
pub const CAPTURE_LIMIT: usize = 8 * 1024 * 1024;

#[derive(Debug)]
pub enum Target {
    Local,
    Ssh(Rc<ssh::SshHost>),
    /// A node of a Slurm cluster: each command a job step started with srun here.
    Slurm(Rc<slurm::SlurmNode>),
    /// A container on `parent`, entered with its tool there (`pct exec`, `docker exec`, …).
    In {
        parent: Rc<Target>,
        ct: Container,
        /// Its inventory name, if it came from there.
        label: Option<String>,
    },
    /// Any of the above, whose commands are saved (`run --save-replies`) or answered from
    /// saved replies without running (`runbook test`): see `replies.rs`. The registry
    /// puts one at the base of every target it makes.
    Replies {
        inner: Rc<Target>,
        replies: Rc<replies::Replies>,
    },
    /// An inventory entry that is this machine (`address = "local"`): runs as `inner`,
    /// shown and recorded by its inventory name.
    Named {
        inner: Rc<Target>,
        label: String,
    },
}

/// What `Target::in_session` did.
enum InSession {
    Done(Result<ExecOutcome, TargetError>),
    /// Run it on a channel of its own, and tell the run this (once).
    Fallback(Option<String>),
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
            Target::Slurm(n) => n.name(),
            Target::In { label: Some(l), .. } => l.clone(),
            Target::In { parent, ct, .. } => format!("{}/{}", parent.name(), ct.label()),
            Target::Replies { inner, .. } => inner.name(),
            Target::Named { label, .. } => label.clone(),
        }
    }

    /// The replies this target's commands are saved to or answered from, if any.
    pub(crate) fn replies(&self) -> Option<&Rc<replies::Replies>> {
        match self {
            Target::Replies { replies, .. } => Some(replies),
            Target::In { parent, .. } => parent.replies(),
            Target::Named { inner, .. } => inner.replies(),
            Target::Local | Target::Ssh(_) | Target::Slurm(_) => None,
        }
    }

    /// Whether its commands run on this machine itself (no hop in between).
    pub fn is_local(&self) -> bool {
        match self {
            Target::Local => true,
            Target::Replies { inner, .. } | Target::Named { inner, .. } => inner.is_local(),
            Target::Ssh(_) | Target::Slurm(_) | Target::In { .. } => false,
        }
    }

    /// The Slurm node this target is (not one a container of it is on).
    pub fn slurm_node(&self) -> Option<&Rc<slurm::SlurmNode>> {
        match self {
            Target::Slurm(n) => Some(n),
            Target::Replies { inner, .. } => inner.slurm_node(),
            _ => None,
        }
    }

    /// Whether nothing may be contacted: commands are answered from replies.
    fn replaying(&self) -> bool {
        self.replies().is_some_and(|r| r.replaying())
    }

    /// What identifies the machine (and container) this target is, whatever name it was
    /// given: run locks are keyed by it, so one run never waits for itself.
    pub fn destination(&self) -> Pin<Box<dyn Future<Output = String> + '_>> {
        Box::pin(async move {
            match self {
                Target::Local => "local".to_string(),
                Target::Ssh(h) => h.destination().await,
                Target::Slurm(n) => n.destination(),
                Target::In { parent, ct, .. } => {
                    format!("{}/{}", parent.destination().await, ct.label())
                }
                // A test resolves nothing (`ssh -G` included): a target is where it is named.
                Target::Replies { inner, replies } if replies.replaying() => inner.name(),
                Target::Replies { inner, .. } | Target::Named { inner, .. } => {
                    inner.destination().await
                }
            }
        })
    }

    /// How to reach this target from this machine, outermost hop first (empty: local).
    pub fn route(&self) -> Vec<Hop> {
        match self {
            Target::Local => Vec::new(),
            Target::Ssh(h) => {
                let s = &h.spec;
                vec![Hop::Ssh {
                    host: s.host.clone(),
                    user: s.user.clone(),
                    port: s.port,
                    identity: s.identity.clone(),
                    jump: s.jump.clone(),
                    alias: s.alias.clone(),
                    connect_timeout_ms: s.connect_timeout.as_millis() as u64,
                }]
            }
            Target::Slurm(n) => vec![Hop::Slurm(n.spec.clone())],
            Target::In { parent, ct, .. } => {
                let mut route = parent.route();
                route.push(Hop::In(ct.clone()));
                route
            }
            Target::Replies { inner, .. } | Target::Named { inner, .. } => inner.route(),
        }
    }

    /// The target a `route` leads to, on the connections of `registry`.
    pub fn from_route(route: &[Hop], registry: &registry::Registry) -> Result<Rc<Target>, String> {
        let mut target = registry.local();
        for (i, hop) in route.iter().enumerate() {
            target = match hop {
                Hop::Ssh {
                    host,
                    user,
                    port,
                    identity,
                    jump,
                    alias,
                    connect_timeout_ms,
                } if i == 0 => registry.ssh(ssh::SshSpec {
                    host: host.clone(),
                    user: user.clone(),
                    port: *port,
                    identity: identity.clone(),
                    jump: jump.clone(),
                    connect_timeout: Duration::from_millis(*connect_timeout_ms),
                    alias: alias.clone(),
                }),
                Hop::Ssh { .. } => return Err("an SSH hop after another hop".into()),
                Hop::Slurm(spec) if i == 0 => registry.slurm(slurm::SlurmSpec::new(
                    &spec.node,
                    spec.job,
                    spec.partition.as_deref(),
                    Some(Duration::from_secs(spec.immediate_s)),
                )?),
                Hop::Slurm(_) => return Err("a Slurm hop after another hop".into()),
                Hop::In(ct) => Rc::new(Target::In {
                    parent: target,
                    ct: ct.clone().validated()?,
                    label: None,
                }),
            };
        }
        Ok(target)
    }

    /// The argv that runs `argv` on this target, and the base that runs it.
    fn flatten(&self, argv: Vec<OsString>) -> (Base, Vec<OsString>) {
        match self {
            Target::Local => (Base::Local, argv),
            Target::Ssh(h) => (Base::Ssh(h.clone()), argv),
            // srun runs here: the node is reached through the scheduler.
            Target::Slurm(n) => (Base::Local, n.spec.srun(argv)),
            Target::In { parent, ct, .. } => parent.flatten(ct.wrap(argv)),
            Target::Replies { inner, .. } | Target::Named { inner, .. } => inner.flatten(argv),
        }
    }

    /// The exact, copy-pastable command line that runs `req` on this target (the
    /// outermost hop: for a container behind SSH, `ssh … -- 'pct exec 200 -- …'`).
    pub fn render(&self, req: &ExecRequest) -> String {
        if let Target::Replies { inner, .. } | Target::Named { inner, .. } = self {
            return inner.render(req);
        }
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

    pub async fn exec(
        &self,
        req: &ExecRequest,
        io: &ExecIo<'_>,
    ) -> Result<ExecOutcome, TargetError> {
        match self.replies() {
            Some(replies) => replies.exec(self, req, io).await,
            None => self.run_here(req, io).await,
        }
    }

    /// Runs `req` where this target is, past any replies (see `exec`).
    async fn run_here(
        &self,
        req: &ExecRequest,
        io: &ExecIo<'_>,
    ) -> Result<ExecOutcome, TargetError> {
        if let Target::Replies { inner, .. } | Target::Named { inner, .. } = self {
            return Box::pin(inner.run_here(req, io)).await;
        }
        if let Some(d) = &req.detach {
            return detach::run(self, req, d, io).await;
        }
        if let Target::Local = self {
            let spawn = local::Spawn {
                argv: &req.argv,
                env: &req.env,
                cwd: req.cwd.as_deref(),
                stdin: req.stdin.clone(),
                timeout: req.timeout,
                group: None,
            };
            return local::run(spawn, io, None).await.map_err(Into::into);
        }
        // A Slurm node's commands are job steps, each an srun of its own (see slurm.rs).
        if slurm::on_slurm(self) {
            return slurm::exec(self, req, io).await.map_err(Into::into);
        }
        let kill = |pgid: u32| -> Pin<Box<dyn Future<Output = ()> + '_>> {
            Box::pin(self.kill_tree(pgid))
        };
        let notice = match self
            .in_session(req, io, session::Mode::Group, Some(&kill))
            .await
        {
            InSession::Done(r) => return r,
            InSession::Fallback(notice) => notice,
        };
        let mut out = self.exec_alone(req, io, &kill).await;
        if let (Ok(o), Some(n)) = (&mut out, notice) {
            o.notice = Some(n);
        }
        out
    }

    /// Runs `req` in a session of this target (see `session.rs`), or says why not: the
    /// caller then runs it on a channel (a container entry) of its own.
    async fn in_session(
        &self,
        req: &ExecRequest,
        io: &ExecIo<'_>,
        mode: session::Mode,
        kill: Option<&KillFn<'_>>,
    ) -> InSession {
        if self.is_local()
            || slurm::on_slurm(self)
            || !session::enabled()
            || session::unsuited(req).is_some()
        {
            return InSession::Fallback(None);
        }
        // A command's duration counts from here, connecting and starting a session
        // included, as a channel of its own counts its connect.
        let started = Instant::now();
        let (base, chain) = self.home();
        let local_pool;
        let pool: &session::Pool = match &base {
            Base::Ssh(h) => &h.sessions,
            Base::Local => {
                local_pool = session::local();
                &local_pool
            }
        };
        if pool.cannot(&chain) {
            return InSession::Fallback(None);
        }
        let mut s = match pool.take(&chain) {
            Some(s) => s,
            None => {
                if !pool.room() {
                    return InSession::Fallback(None);
                }
                let (_, argv) = self.flatten(session::loop_argv());
                let proc = match &base {
                    Base::Ssh(h) => match h.open_channel(session::line_of(&argv), io).await {
                        Ok(p) => p,
                        Err(e) => return InSession::Done(Err(e.into())),
                    },
                    Base::Local => match session::spawn_local(&argv) {
                        Ok(p) => p,
                        Err(e) => {
                            return InSession::Done(Err(format!(
                                "cannot run a command on {}: {e}",
                                self.name()
                            )
                            .into()))
                        }
                    },
                };
                match pool.start(proc, io).await {
                    Ok(s) => s,
                    Err(e) => {
                        if io.cancel.count() > io.abort_at {
                            return InSession::Done(Ok(ExecOutcome {
                                interrupted: true,
                                ..Default::default()
                            }));
                        }
                        let why = match e {
                            session::StartError::Ended(said) => {
                                // A container tool that would not let anything in says so
                                // to a channel of its own too: that is the error.
                                if let Some(why) = self.refused(&said) {
                                    return InSession::Done(Err(format!(
                                        "cannot run a command on {}: {why}",
                                        self.name()
                                    )
                                    .into()));
                                }
                                if let Base::Ssh(h) = &base {
                                    if let Err(e) = h.alive().await {
                                        return InSession::Done(Err(e.into()));
                                    }
                                }
                                let said = said.trim();
                                if said.is_empty() {
                                    "its shell ended without running it".to_string()
                                } else {
                                    format!("its shell said: {}", failure::tail(said, 2).trim())
                                }
                            }
                            session::StartError::Cannot(why) => why,
                        };
                        let first = pool.refuse(&chain, why.clone());
                        return InSession::Fallback(first.then(|| {
                            format!(
                                "{} cannot keep a session open ({why}); each command there takes a channel of its own (slower)",
                                self.name()
                            )
                        }));
                    }
                }
            }
        };
        let (request, token) = match session::request(req, mode) {
            Ok(r) => r,
            Err(e) => {
                pool.put(chain, s);
                return InSession::Done(Err(e.into()));
            }
        };
        match s.exec(&request, &token, req.timeout, io, kill).await {
            Ok((mut out, reusable)) => {
                out.duration = started.elapsed();
                if reusable {
                    pool.put(chain, s);
                } else {
                    s.close().await;
                }
                InSession::Done(Ok(out))
            }
            Err(why) => {
                let lost = match &base {
                    Base::Ssh(h) => h.alive().await.err(),
                    Base::Local => None,
                };
                // The session took the command with it either way: its exit status is
                // unknown, and it may still run there.
                InSession::Done(Err(TargetError::ConnectionLost(match lost {
                    // As for a channel of its own: the connection went.
                    Some(lost) => format!("{lost} while the command ran"),
                    None => format!(
                        "connection lost to {}: {why} (its exit status is unknown; runbook does not run it again)",
                        self.name()
                    ),
                })))
            }
        }
    }

    /// Where this target's sessions live: its connection, and the containers on the way
    /// from there, outermost first.
    fn home(&self) -> (Base, session::Chain) {
        match self {
            Target::Local => (Base::Local, Vec::new()),
            Target::Ssh(h) => (Base::Ssh(h.clone()), Vec::new()),
            Target::In { parent, ct, .. } => {
                let (base, mut chain) = parent.home();
                chain.push(ct.clone());
                (base, chain)
            }
            Target::Replies { inner, .. } | Target::Named { inner, .. } => inner.home(),
            // Never asked for: `in_session` runs no session on a Slurm chain.
            Target::Slurm(_) => (Base::Local, Vec::new()),
        }
    }

    /// Runs `req` on a channel (a container entry) of its own.
    async fn exec_alone(
        &self,
        req: &ExecRequest,
        io: &ExecIo<'_>,
        kill: &KillFn<'_>,
    ) -> Result<ExecOutcome, TargetError> {
        let (inner, stdin) = wrap::env_and_cwd(req)?;
        let kill = Some(kill);
        if let Target::Ssh(h) = self {
            let line = wrap::report_pgid_then_exec(&inner, h.boot_id().is_none());
            // The first command on a connection reads the boot id, the others take it
            // from there (a container reads its own: it may not be the host's).
            let report = |g: &Group| {
                let mut g = g.clone();
                match &g.boot_id {
                    Some(b) => h.learn_boot_id(b),
                    None => g.boot_id = h.boot_id(),
                }
                if let Some(on_group) = io.on_group {
                    on_group(&g);
                }
            };
            let io = ExecIo {
                on_line: io.on_line,
                deadline: io.deadline,
                cancel: io.cancel,
                abort_at: io.abort_at,
                on_group: Some(&report),
            };
            return h.run(line, stdin, req.timeout, &io, kill).await;
        }
        // The wrapper's first act inside the container is to report its group: a command
        // that ends without one never started there, and what the tools on the way said
        // is why (the container is missing, stopped, …).
        let started = std::cell::Cell::new(false);
        let report = |g: &Group| {
            started.set(true);
            if let Some(on_group) = io.on_group {
                on_group(g);
            }
        };
        let io = ExecIo {
            on_line: io.on_line,
            deadline: io.deadline,
            cancel: io.cancel,
            abort_at: io.abort_at,
            on_group: Some(&report),
        };
        let out = match self.flatten(wrap::killable(inner)) {
            (Base::Local, argv) => {
                let spawn = local::Spawn {
                    argv: &argv,
                    env: &[],
                    cwd: None,
                    stdin,
                    timeout: req.timeout,
                    // `killable` reports the group before the command starts.
                    group: Some(pump::PGID_MARKER.as_bytes().to_vec()),
                };
                local::run(spawn, &io, kill).await?
            }
            (Base::Ssh(h), argv) => {
                h.run(quote::join_bytes(&argv), stdin, req.timeout, &io, kill)
                    .await?
            }
        };
        let stopped = out.timed_out || out.deadline_hit || out.interrupted;
        if !started.get() && !stopped && out.code != Some(0) {
            if let Some(why) = self.refused(&String::from_utf8_lossy(&out.stderr)) {
                return Err(format!("cannot run a command on {}: {why}", self.name()).into());
            }
        }
        Ok(out)
    }

    /// Why a container on the way to this target would not let a command in, from what
    /// the tools said (outermost container first: its refusal is the cause of the rest).
    pub fn refused(&self, stderr: &str) -> Option<String> {
        match self {
            Target::In { parent, ct, .. } => parent
                .refused(stderr)
                .or_else(|| ct.refused(&parent.name(), stderr)),
            Target::Replies { inner, .. } | Target::Named { inner, .. } => inner.refused(stderr),
            Target::Slurm(_) => slurm::refused(stderr),
            _ => None,
        }
    }

    /// Stops a process group that a wrapped command reported, through the same chain of
    /// hops it was started through (inside the container, on the remote host).
    async fn kill_tree(&self, pgid: u32) {
        if let Err(e) = self.run_plain(wrap::kill_tree(pgid)).await {
            tracing::warn!(
                "could not stop process group {pgid} on {}: {e}",
                self.name()
            );
        }
    }

    /// Runs a short command of runbook's own (no events, no output shown, no interruption)
    /// through this target's chain of hops, within 15 s.
    pub async fn run_plain(&self, argv: Vec<OsString>) -> Result<ExecOutcome, TargetError> {
        if self.replaying() {
            return Err(format!(
                "{}: runbook test contacts no target, and runbook's own commands have no replies",
                self.name()
            )
            .into());
        }
        let quiet = |_: Stream, _: &str, _: bool| {};
        let cancel = Cancel::default();
        let io = ExecIo {
            on_line: &quiet,
            deadline: Some(Instant::now() + Duration::from_secs(15)),
            cancel: &cancel,
            abort_at: u32::MAX,
            on_group: None,
        };
        let req = ExecRequest {
            argv,
            ..Default::default()
        };
        // Boxed: a kill runs while the command it stops holds its own session, and
        // `in_session` may call this again through its kill.
        let in_session: Pin<Box<dyn Future<Output = InSession> + '_>> =
            Box::pin(self.in_session(&req, &io, session::Mode::Plain, None));
        if let InSession::Done(r) = in_session.await {
            return r;
        }
        let (base, argv) = self.flatten(req.argv);
        match base {
            Base::Local => {
                let spawn = local::Spawn {
                    argv: &argv,
                    env: &[],
                    cwd: None,
                    stdin: None,
                    timeout: None,
                    group: None,
                };
                local::run(spawn, &io, None).await.map_err(Into::into)
            }
            Base::Ssh(h) => h.run(quote::join_bytes(&argv), None, None, &io, None).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reported_group_parses_whatever_the_command_name_holds() {
        let stat = "77 (a) b (c) R 1 77 77 0 -1 4194304 1 0 0 0 0 0 0 0 20 0 1 0 123456 0 0";
        let g = Group::parse(&format!("77 f8b7-boot {stat}\n")).unwrap();
        assert_eq!(
            g,
            Group {
                pgid: 77,
                start_time: Some(123456),
                boot_id: Some("f8b7-boot".into())
            }
        );
        // No /proc on the target: only the group.
        let g = Group::parse("77 - -").unwrap();
        assert_eq!((g.start_time, g.boot_id), (None, None));
        assert_eq!(Group::parse("77").unwrap().pgid, 77);
        assert!(Group::parse("x").is_none());
    }

    #[test]
    fn a_route_leads_back_to_the_same_place() {
        let registry = registry::Registry::new(Default::default());
        let node = registry.resolve("root@node.example:2222").unwrap();
        let box_ = Target::In {
            parent: node,
            ct: Container::Pct(200),
            label: None,
        };
        let route = box_.route();
        let again = Target::from_route(&route, &registry).unwrap();
        assert_eq!(again.route(), route);
        assert_eq!(again.name(), "root@node.example:2222/ct200");
        assert!(Target::from_route(&[], &registry)
            .unwrap()
            .route()
            .is_empty());
    }

    /// Records written before other containers existed (`{"pct":200}`) still read, and
    /// a container inside a container comes back as it was, named by each hop.
    #[test]
    fn recorded_routes_of_every_container_read_back() {
        let registry = registry::Registry::new(Default::default());
        let old: Vec<Hop> = serde_json::from_str(
            r#"[{"ssh":{"host":"node.example","user":"root","connect_timeout_ms":10000}},{"pct":200}]"#,
        )
        .unwrap();
        let ct = Target::from_route(&old, &registry).unwrap();
        assert_eq!(ct.name(), "root@node.example/ct200");
        let nested = Target::In {
            parent: ct,
            ct: Container::engine(false, "trainer", Some("app")).unwrap(),
            label: None,
        };
        let json = serde_json::to_string(&nested.route()).unwrap();
        assert!(
            json.ends_with(r#"{"pct":200},{"docker":{"name":"trainer","user":"app"}}]"#),
            "{json}"
        );
        let back: Vec<Hop> = serde_json::from_str(&json).unwrap();
        let again = Target::from_route(&back, &registry).unwrap();
        assert_eq!(again.name(), "root@node.example/ct200/docker:app@trainer");
        // A record is checked like a runbook: no name a tool would read as a flag.
        let bad: Vec<Hop> = serde_json::from_str(r#"[{"lxc":{"name":"-n"}}]"#).unwrap();
        assert!(Target::from_route(&bad, &registry).is_err());
    }
}
