//! Long-lived commands that hold something (a lock) for as long as runbook keeps their
//! stdin open. Closing stdin, or runbook dying, ends them: nothing is left held.

use super::ssh::SshHost;
use super::{Base, Target};
use std::ffi::OsString;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};

pub enum Holder {
    /// `runbook test`: nothing is contacted, so the lock is taken at once.
    Nothing,
    Local(tokio::process::Child),
    Ssh(openssh::Child<std::rc::Rc<openssh::Session>>),
}

impl Holder {
    /// Closes the command's stdin and waits (briefly) for it to end.
    pub async fn release(self) {
        match self {
            Holder::Nothing => {}
            Holder::Local(mut child) => {
                drop(child.stdin.take());
                if tokio::time::timeout(Duration::from_secs(3), child.wait())
                    .await
                    .is_err()
                {
                    let _ = child.kill().await;
                }
            }
            Holder::Ssh(mut child) => {
                drop(child.stdin().take());
                let _ = tokio::time::timeout(Duration::from_secs(3), child.wait()).await;
            }
        }
    }
}

/// The first line the holding command prints (its answer); without one, what it said on
/// stderr (e.g. `pct`'s "does not exist"), so the caller can say why.
async fn answer(
    out: impl AsyncRead + Unpin,
    err: impl AsyncRead + Unpin,
) -> Result<String, String> {
    let mut line = String::new();
    match BufReader::new(out).read_line(&mut line).await {
        Ok(n) if n > 0 => Ok(line.trim_end().to_string()),
        _ => {
            let mut text = String::new();
            let mut limited = BufReader::new(err).take(4096);
            let _ = tokio::time::timeout(Duration::from_secs(2), limited.read_to_string(&mut text))
                .await;
            Err(text.trim().to_string())
        }
    }
}

impl Target {
    /// Starts `argv` on this target with stdin held open and returns it with the first
    /// line it printed.
    pub async fn hold(
        &self,
        argv: Vec<OsString>,
    ) -> Result<(Holder, Result<String, String>), String> {
        if self.replaying() {
            return Ok((Holder::Nothing, Ok("locked".into())));
        }
        match self.flatten(argv) {
            (Base::Local, argv) => {
                let mut cmd = tokio::process::Command::new(&argv[0]);
                cmd.args(&argv[1..])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .kill_on_drop(true);
                super::local::detach(&mut cmd);
                let mut child = cmd.spawn().map_err(|e| {
                    format!("cannot start {} on local: {e}", argv[0].to_string_lossy())
                })?;
                let said = answer(
                    child.stdout.take().expect("piped"),
                    child.stderr.take().expect("piped"),
                )
                .await;
                Ok((Holder::Local(child), said))
            }
            (Base::Ssh(host), argv) => host.hold(&argv).await,
        }
    }
}

impl SshHost {
    pub async fn hold(
        &self,
        argv: &[OsString],
    ) -> Result<(Holder, Result<String, String>), String> {
        let session = self.connected().await?;
        let line = crate::base::quote::join_bytes(argv);
        let mut cmd = openssh::Session::to_raw_command(session, line);
        cmd.stdin(openssh::Stdio::piped())
            .stdout(openssh::Stdio::piped())
            .stderr(openssh::Stdio::piped());
        let mut child = cmd
            .spawn()
            .await
            .map_err(|e| format!("cannot start a command on {}: {e}", self.name()))?;
        let said = answer(
            child.stdout().take().expect("piped"),
            child.stderr().take().expect("piped"),
        )
        .await;
        Ok((Holder::Ssh(child), said))
    }
}
