//! A machine reached over SSH: one OpenSSH ControlMaster per host per run (started on the
//! first command), every command a channel on it through the native mux protocol, so no
//! `ssh` process is started per command.
//!
//! Host keys are checked strictly unless the run says `--trust-new-hosts` (accept new
//! keys, never changed ones). The master closes when the run ends and, should runbook
//! die, by itself after a bounded idle time.

use super::pump::{self, Pump, Stop};
use super::{ExecIo, ExecOutcome, KillFn, TargetError};
use crate::base::quote;
use openssh::{Session, Stdio};
use std::cell::RefCell;
use std::ffi::OsString;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::sync::{Mutex, Semaphore};

/// Channels at once per connection: below sshd's default `MaxSessions` of 10, leaving
/// room for the lock holder and for kill commands.
const CHANNELS: usize = 8;
/// A master left behind by a crashed run exits after this much idle time.
const MASTER_IDLE_SECS: u64 = 60;

/// Settings shared by every SSH host of a run.
#[derive(Debug, Clone)]
pub struct SshSettings {
    /// `--ssh-config`: instead of `~/.ssh/config`.
    pub config: Option<PathBuf>,
    /// `--trust-new-hosts`: accept unknown host keys (changed keys still fail).
    pub trust_new_hosts: bool,
    /// Where the control sockets live (short path: sockets have a 108-byte limit).
    pub control_dir: PathBuf,
    /// `--keep-connections DUR`: masters outlive the run by this much idle time, at a
    /// socket the next run finds (`keep.rs`); `None`: they close when the run ends.
    pub keep: Option<Duration>,
}

impl Default for SshSettings {
    fn default() -> Self {
        SshSettings {
            config: None,
            trust_new_hosts: false,
            control_dir: std::env::temp_dir(),
            keep: None,
        }
    }
}

/// How to reach a host: what `target("user@host:port")`, `ssh(host, opts)` or an
/// inventory entry says.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SshSpec {
    pub host: String,
    pub user: Option<String>,
    pub port: Option<u16>,
    pub identity: Option<PathBuf>,
    pub jump: Option<String>,
    pub connect_timeout: Duration,
    /// The inventory name it was reached by, shown instead of the address.
    pub alias: Option<String>,
}

pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl SshSpec {
    /// `host`, `user@host`, `user@host:port`, `ssh://user@host:port`, `[::1]:22`.
    pub fn parse(text: &str) -> Result<SshSpec, String> {
        let rest = text.strip_prefix("ssh://").unwrap_or(text);
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (user, hostport) = match rest.rsplit_once('@') {
            Some((u, h)) => (Some(u.to_string()), h),
            None => (None, rest),
        };
        let (host, port) = if let Some(inner) = hostport.strip_prefix('[') {
            let (h, after) = inner
                .split_once(']')
                .ok_or_else(|| format!("'{text}': missing ']' after an IPv6 address"))?;
            (h.to_string(), after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (hostport.to_string(), None),
            }
        };
        let port = match port {
            None => None,
            Some(p) => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("'{text}': '{p}' is not a port number"))?,
            ),
        };
        let valid = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-._:%".contains(c))
        };
        if !valid(&host) {
            return Err(format!("'{text}': '{host}' is not a host name"));
        }
        if let Some(u) = &user {
            if !u
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
                || u.is_empty()
            {
                return Err(format!("'{text}': '{u}' is not a user name"));
            }
        }
        Ok(SshSpec {
            host,
            user,
            port,
            identity: None,
            jump: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            alias: None,
        })
    }

    /// How the host is named in previews and messages: `user@host:port`, as given.
    pub fn display(&self) -> String {
        if let Some(a) = &self.alias {
            return a.clone();
        }
        let mut s = String::new();
        if let Some(u) = &self.user {
            s.push_str(u);
            s.push('@');
        }
        if self.host.contains(':') {
            s.push_str(&format!("[{}]", self.host));
        } else {
            s.push_str(&self.host);
        }
        if let Some(p) = self.port {
            s.push_str(&format!(":{p}"));
        }
        s
    }
}

pub struct SshHost {
    pub spec: SshSpec,
    pub(super) settings: Rc<SshSettings>,
    /// Where its name came from (the inventory, an ssh_config Host, a plain host name),
    /// said when it cannot be reached; the first name that made it.
    origin: RefCell<Option<String>>,
    session: RefCell<Option<Rc<Session>>>,
    /// The host's boot id as a command on the current connection reported it. A reboot
    /// ends the connection, so it holds for every later command on the same one, and
    /// those need not read it again (`wrap::report_pgid_then_exec`).
    boot_id: RefCell<Option<String>>,
    /// The host key the current connection verified (`ssh-ed25519 SHA256:…`), as its
    /// master logged it; none for a kept master runbook found rather than started.
    host_key: RefCell<Option<String>>,
    connecting: Mutex<()>,
    channels: Semaphore,
    /// The sessions (`session.rs`) on this connection: the host's own and its
    /// containers', each a channel, so at most `CHANNELS` of them.
    pub(super) sessions: super::session::Pool,
}

impl std::fmt::Debug for SshHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SshHost({})", self.spec.display())
    }
}

impl SshHost {
    pub fn new(spec: SshSpec, settings: Rc<SshSettings>) -> Self {
        SshHost {
            spec,
            settings,
            origin: RefCell::new(None),
            session: RefCell::new(None),
            boot_id: RefCell::new(None),
            host_key: RefCell::new(None),
            connecting: Mutex::new(()),
            channels: Semaphore::new(CHANNELS),
            sessions: super::session::Pool::new(CHANNELS),
        }
    }

    pub fn name(&self) -> String {
        self.spec.display()
    }

    /// Says where its name came from, unless an earlier name did.
    pub(super) fn set_origin(&self, origin: String) {
        self.origin.borrow_mut().get_or_insert(origin);
    }

    /// Where this host really is, as ssh itself resolves it (`ssh -G`: the ssh_config
    /// applied): `user@hostname:port`. Two names for one machine (an alias and
    /// `root@127.0.0.1:2222`) give the same answer. Falls back to the name as given when
    /// ssh cannot say.
    pub async fn destination(&self) -> String {
        let fields = self.resolved().await;
        let field = |key: &str| {
            fields
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        match (field("user"), field("hostname"), field("port")) {
            (Some(u), Some(h), Some(p)) => format!("{u}@{h}:{p}"),
            _ => self.name(),
        }
    }

    /// What `ssh -G` says of this host (the ssh_config applied), `key value` per line;
    /// empty when ssh cannot say.
    pub(super) async fn resolved(&self) -> Vec<(String, String)> {
        let mut cmd = tokio::process::Command::new("ssh");
        cmd.arg("-G");
        if let Some(cfg) = &self.settings.config {
            cmd.arg("-F").arg(cfg);
        }
        if let Some(p) = self.spec.port {
            cmd.arg("-p").arg(p.to_string());
        }
        if let Some(u) = &self.spec.user {
            cmd.arg("-l").arg(u);
        }
        cmd.arg("--").arg(&self.spec.host);
        cmd.stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let Ok(out) = cmd.output().await else {
            return Vec::new();
        };
        if !out.status.success() {
            return Vec::new();
        }
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Everything that decides where and as whom this host is reached, as one string.
    pub(super) fn spec_key(&self) -> String {
        let s = &self.spec;
        format!(
            "{:?}@{}:{:?} i={:?} j={:?}",
            s.user, s.host, s.port, s.identity, s.jump
        )
    }

    /// The `ssh` options this host needs: config, port, identity, jump.
    fn option_args(&self) -> Vec<OsString> {
        let mut words: Vec<OsString> = Vec::new();
        if let Some(cfg) = &self.settings.config {
            words.extend(["-F".into(), cfg.clone().into()]);
        }
        if let Some(p) = self.spec.port {
            words.extend(["-p".into(), p.to_string().into()]);
        }
        if let Some(id) = &self.spec.identity {
            words.extend(["-i".into(), id.clone().into()]);
        }
        if let Some(j) = &self.spec.jump {
            words.extend(["-J".into(), j.into()]);
        }
        words
    }

    /// The `ssh` words that reach this host: its options, then the destination.
    pub(super) fn reach_args(&self) -> Vec<OsString> {
        let mut words = self.option_args();
        if let Some(u) = &self.spec.user {
            words.extend(["-l".into(), u.into()]);
        }
        words.extend(["--".into(), self.spec.host.clone().into()]);
        words
    }

    /// The channels a command waits for (see `CHANNELS`).
    pub(super) fn channels(&self) -> &Semaphore {
        &self.channels
    }

    /// The `ssh …` words a user would type to run a command here by hand.
    pub fn command_prefix(&self) -> String {
        let mut words: Vec<OsString> = vec!["ssh".into()];
        words.extend(self.option_args());
        let dest = match &self.spec.user {
            Some(u) => format!("{u}@{}", self.spec.host),
            None => self.spec.host.clone(),
        };
        words.push(dest.into());
        quote::join(&words)
    }

    /// The copy-pastable command line: `ssh … host -- 'the remote command line'`.
    pub fn render(&self, argv: &[OsString], stdin: Option<&[u8]>) -> String {
        let remote = quote::join(argv);
        let line = format!(
            "{} -- {}",
            self.command_prefix(),
            quote::quote_word(std::ffi::OsStr::new(&remote))
        );
        match stdin {
            Some(input) => {
                use std::os::unix::ffi::OsStrExt;
                format!(
                    "printf %s {} | {line}",
                    quote::quote_word(std::ffi::OsStr::from_bytes(input))
                )
            }
            None => line,
        }
    }

    /// The master connection, opened now if needed (no interruption while connecting).
    pub async fn connected(&self) -> Result<Rc<Session>, String> {
        let quiet = |_: super::Stream, _: &str, _: bool| {};
        let cancel = crate::base::cancel::Cancel::default();
        let io = ExecIo {
            on_line: &quiet,
            deadline: None,
            cancel: &cancel,
            abort_at: u32::MAX,
            on_group: None,
        };
        self.session(&io).await
    }

    async fn session(&self, io: &ExecIo<'_>) -> Result<Rc<Session>, String> {
        if let Some(s) = self.session.borrow().clone() {
            return Ok(s);
        }
        let _guard = self.connecting.lock().await;
        if let Some(s) = self.session.borrow().clone() {
            return Ok(s);
        }
        if let Some(keep) = self.settings.keep {
            let (session, key) = tokio::select! {
                r = self.kept_master(keep) => r?,
                _ = wait_for_abort(io) => return Err("interrupted while connecting".into()),
            };
            let session = Rc::new(session);
            self.boot_id.borrow_mut().take();
            *self.host_key.borrow_mut() = key;
            *self.session.borrow_mut() = Some(session.clone());
            return Ok(session);
        }
        // runbook starts the master itself (as `keep.rs` does) rather than through
        // openssh's builder: its log must say which host key it verified.
        let dir = tempfile::Builder::new()
            .prefix(".ssh-connection")
            .tempdir_in(&self.settings.control_dir)
            .map_err(|e| {
                format!(
                    "cannot connect to {}: cannot make a directory for its control socket in {}: {e}",
                    self.name(),
                    self.settings.control_dir.display()
                )
            })?;
        let socket = dir.path().join("master");
        let log = dir.path().join("log");
        let persist = Duration::from_secs(MASTER_IDLE_SECS);
        let mut cmd = tokio::process::Command::new("ssh");
        cmd.args(self.master_args(&socket, &log, persist))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        // ConnectTimeout bounds the TCP connect; this bounds the whole handshake too.
        let limit = self.spec.connect_timeout + Duration::from_secs(5);
        let status = tokio::select! {
            r = tokio::time::timeout(limit, cmd.status()) => r,
            _ = wait_for_abort(io) => return Err("interrupted while connecting".into()),
        };
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        match status {
            Ok(Ok(st)) if st.success() => {}
            Ok(Ok(_)) => return Err(self.connect_message(&master_said(&said))),
            Ok(Err(e)) => {
                return Err(format!(
                    "cannot connect to {}: cannot run ssh: {e}",
                    self.name()
                ))
            }
            Err(_) => {
                return Err(format!(
                    "cannot connect to {}: no answer within {}s",
                    self.name(),
                    limit.as_secs()
                ))
            }
        }
        // The master goes on logging (at the level that named the key) for as long as it
        // runs: its log is unlinked now, so none of that stays on disk.
        let _ = std::fs::remove_file(&log);
        let session = Rc::new(Session::new_native_mux(dir));
        self.boot_id.borrow_mut().take();
        *self.host_key.borrow_mut() = verified_key(&said);
        *self.session.borrow_mut() = Some(session.clone());
        Ok(session)
    }

    /// The host key the current connection verified, if runbook opened it.
    pub fn host_key(&self) -> Option<String> {
        self.host_key.borrow().clone()
    }

    /// "cannot connect to HOST: CAUSE", with what to do about a host key.
    pub(super) fn connect_message(&self, cause: &str) -> String {
        // ssh's own lines end in CR LF (it writes for a terminal).
        let cause = cause.trim().replace("\r\n", " ").replace('\n', " ");
        let mut msg = format!("cannot connect to {}: {cause}", self.name());
        if let Some(origin) = self.origin.borrow().as_deref() {
            msg.push_str(&format!(" ({} is {origin})", self.name()));
        }
        let known = match &self.settings.config {
            Some(cfg) => format!("the known_hosts file set in {}", cfg.display()),
            None => "~/.ssh/known_hosts (or the UserKnownHostsFile your ssh config sets)".into(),
        };
        let by_hand = self.command_prefix();
        if cause.contains("IDENTIFICATION HAS CHANGED") {
            msg.push_str(&format!(
                "\nthe host key of {} has CHANGED since it was recorded in {known}: the host was reinstalled, \
                 or someone is in the middle. If you know why, remove the old key (ssh-keygen -R HOST) \
                 and connect once by hand (`{by_hand}`) to check and accept the new fingerprint. \
                 --trust-new-hosts never accepts a changed key",
                self.name()
            ));
        } else if cause.contains("Host key verification failed") {
            msg.push_str(&format!(
                "\nthe host key of {} is not in {known}. Connect once by hand (`{by_hand}`) and compare the \
                 fingerprint with the one the host's admin gives you, or re-run with --trust-new-hosts to \
                 accept keys of hosts never seen before (changed keys are still refused)",
                self.name()
            ));
        }
        msg
    }

    /// Forgets a connection that broke, so that a retry opens a fresh one (and its
    /// sessions, which went with it).
    fn drop_session(&self) {
        self.session.borrow_mut().take();
        self.boot_id.borrow_mut().take();
        self.host_key.borrow_mut().take();
        drop(self.sessions.clear());
    }

    /// A channel running `line` with all three streams piped: the process of a session.
    pub(super) async fn open_channel(
        &self,
        line: OsString,
        io: &ExecIo<'_>,
    ) -> Result<super::session::Proc, String> {
        let session = self.session(io).await?;
        let mut cmd = Session::to_raw_command(session.clone(), line);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match cmd.spawn().await {
            Ok(c) => Ok(super::session::Proc::Ssh(c)),
            Err(e) => Err(self
                .lost_or(
                    &session,
                    format!("cannot open a session on {}: {e}", self.name()),
                )
                .await
                .into()),
        }
    }

    /// Whether the master still runs; when it does not, it is forgotten and the error
    /// says the connection was lost.
    pub(super) async fn alive(&self) -> Result<(), String> {
        let Some(session) = self.session.borrow().clone() else {
            return Ok(());
        };
        if session.check().await.is_err() {
            self.drop_session();
            return Err(format!("connection lost to {}", self.name()));
        }
        Ok(())
    }

    /// The boot id a command on the current connection reported, if one did.
    pub fn boot_id(&self) -> Option<String> {
        self.boot_id.borrow().clone()
    }

    /// Remembers the boot id a command on the current connection reported.
    pub fn learn_boot_id(&self, boot_id: &str) {
        if self.session.borrow().is_some() {
            *self.boot_id.borrow_mut() = Some(boot_id.to_string());
        }
    }

    /// Runs a command line (rendered by `quote`) as a channel on the master connection.
    pub async fn run(
        &self,
        line: OsString,
        stdin: Option<Vec<u8>>,
        timeout: Option<Duration>,
        io: &ExecIo<'_>,
        kill: Option<&KillFn<'_>>,
    ) -> Result<ExecOutcome, TargetError> {
        let started = Instant::now();
        // The channel limit is taken by the caller, with the command's slot (`slots.rs`),
        // before `action_started`; kill commands skip it, since they must get through
        // while the commands they stop hold every channel.
        let session = self.session(io).await?;
        let mut cmd = session.raw_command(&line);
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = match cmd.spawn().await {
            Ok(c) => c,
            Err(e) => {
                return Err(self
                    .lost_or(
                        &session,
                        format!("cannot start the command on {}: {e}", self.name()),
                    )
                    .await)
            }
        };
        if let (Some(data), Some(mut input)) = (stdin, child.stdin().take()) {
            tokio::task::spawn_local(async move {
                let _ = input.write_all(&data).await;
                let _ = input.shutdown().await;
            });
        }
        let mut out = ExecOutcome::default();
        let (own, deadline) = pump::effective_deadline(timeout, started, io);
        // A command with a kill was wrapped to report its group first
        // (`wrap::report_pgid_then_exec`, `wrap::killable`): before the command itself
        // starts, so it cannot print a report of its own ahead of that one.
        let mut pump = Pump::new(
            child.stdout().take().expect("piped"),
            child.stderr().take().expect("piped"),
            kill.map(|_| super::pump::PGID_MARKER.as_bytes().to_vec()),
        );
        if let Some(stop) = pump.run(own, deadline, io, &mut out).await {
            if let Some(kill) = kill {
                if let Some(pgid) = pump.group_after_stop(io, &mut out, pump::REPORT_WAIT).await {
                    kill(pgid).await;
                }
            }
            match stop {
                Stop::Timeout => out.timed_out = true,
                Stop::Deadline => out.deadline_hit = true,
                Stop::Interrupted => out.interrupted = true,
            }
            // The remote side should be gone now: read what it said while dying, but do
            // not wait on a channel that hangs.
            let finish = async {
                pump.drain(io, &mut out).await;
                child.wait().await
            };
            match tokio::time::timeout(Duration::from_secs(5), finish).await {
                Ok(Ok(status)) => out.code = status.code(),
                _ => out.code = None,
            }
            out.duration = started.elapsed();
            return Ok(out);
        }
        match child.wait().await {
            Ok(status) if status.code() == Some(255) => {
                // 255 is what ssh reports for a dropped connection too: ask the master.
                if session.check().await.is_err() {
                    self.drop_session();
                    return Err(TargetError::ConnectionLost(format!(
                        "connection lost to {} (the command's exit status is unknown)",
                        self.name()
                    )));
                }
                out.code = Some(255);
            }
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt;
                out.code = status.code();
                out.signal = status.signal();
            }
            Err(openssh::Error::Remote(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                out.code = Some(127);
            }
            Err(openssh::Error::RemoteProcessTerminated) => {
                if session.check().await.is_err() {
                    self.drop_session();
                    return Err(TargetError::ConnectionLost(format!(
                        "connection lost to {} while the command ran",
                        self.name()
                    )));
                }
                out.code = None;
                out.signal = Some(libc::SIGKILL);
            }
            Err(e) => {
                return Err(self
                    .lost_or(
                        &session,
                        format!("the command on {} failed: {e}", self.name()),
                    )
                    .await);
            }
        }
        out.duration = started.elapsed();
        Ok(out)
    }

    /// A failure on a channel is "connection lost" when the master is gone; else `other`.
    async fn lost_or(&self, session: &Session, other: String) -> TargetError {
        if session.check().await.is_err() {
            self.drop_session();
            TargetError::ConnectionLost(format!("connection lost to {}", self.name()))
        } else {
            TargetError::Failed(other)
        }
    }

    /// Closes the master connection (end of run).
    pub async fn close(&self) {
        self.sessions.close_all().await;
        self.boot_id.borrow_mut().take();
        let session = self.session.borrow_mut().take();
        if self.settings.keep.is_some() {
            // Kept for the next run: the master ends by itself after its idle time.
            return;
        }
        if let Some(s) = session {
            if let Ok(s) = Rc::try_unwrap(s) {
                let _ = tokio::time::timeout(Duration::from_secs(5), s.close()).await;
            }
        }
    }
}

/// The `LogLevel` a master runs at: the lowest that logs `Server host key: TYPE FP`.
pub(super) const MASTER_LOG_LEVEL: &str = "LogLevel=DEBUG1";

/// What a master that failed said, without its debug lines (`MASTER_LOG_LEVEL`).
pub(super) fn master_said(log: &str) -> String {
    log.lines()
        .filter(|l| !l.starts_with("debug"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The host key a master's log says it verified: `ssh-ed25519 SHA256:…` from
/// `debug1: Server host key: ssh-ed25519 SHA256:…`. The master connected, so that key
/// passed the known_hosts check (strict, or accept-new for a host never seen).
pub(super) fn verified_key(log: &str) -> Option<String> {
    log.lines()
        .filter_map(|l| l.split_once("Server host key: ").map(|(_, k)| k.trim()))
        .next_back()
        .filter(|k| !k.is_empty())
        .map(str::to_string)
}

async fn wait_for_abort(io: &ExecIo<'_>) {
    loop {
        if io.cancel.count() > io.abort_at {
            return;
        }
        io.cancel.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_usual_forms() {
        let s = SshSpec::parse("root@gpu-node-1.example:2222").unwrap();
        assert_eq!(
            (s.user.as_deref(), s.host.as_str(), s.port),
            (Some("root"), "gpu-node-1.example", Some(2222))
        );
        let s = SshSpec::parse("ssh://admin@node.example").unwrap();
        assert_eq!((s.user.as_deref(), s.port), (Some("admin"), None));
        let s = SshSpec::parse("[::1]:22").unwrap();
        assert_eq!((s.host.as_str(), s.port), ("::1", Some(22)));
        assert_eq!(s.display(), "[::1]:22");
        assert!(SshSpec::parse("root@host:99999").is_err());
        assert!(SshSpec::parse("root@ho st").is_err());
        assert!(SshSpec::parse("a;b").is_err());
    }
}
