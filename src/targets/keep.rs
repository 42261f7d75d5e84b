//! `--keep-connections DUR` (or `[ssh] keep_connections` in the inventory): each SSH
//! master outlives the run by DUR of idle time, at a control socket a later run finds,
//! so that run skips the handshake (on 2 cores, ~170 ms of CPU per host with OpenSSH's
//! default post-quantum key exchange).
//!
//! The socket is the one the user's ssh_config sets (`ControlPath`, as `ssh -G` expands
//! it), so runbook and the user's own `ssh` share one master; else runbook's own, named
//! by a digest of everything that decides where and how it connects, in a directory only
//! this user can enter (`$XDG_RUNTIME_DIR/runbook/ssh`, else
//! `~/.local/state/runbook/ssh`, 0700): never a predictable name in a world-writable
//! directory. A master found at the socket is used as it is; otherwise one is started
//! there (`ssh -M -N -f`, `ControlPersist` DUR) with the checks every master has (host
//! keys strict unless `--trust-new-hosts`, `BatchMode`).

use super::ssh::{SshHost, SshSettings};
use openssh::Session;
use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a master is given to connect and go to the background.
const START_LIMIT: Duration = Duration::from_secs(30);

impl SshHost {
    /// The master at the kept socket: found there, or started there now.
    /// With it, the host key that master verified, when runbook started it (one found
    /// at the socket says nothing of its key).
    pub(super) async fn kept_master(
        &self,
        keep: Duration,
    ) -> Result<(Session, Option<String>), String> {
        let resolved = self.resolved().await;
        let socket = match resolved
            .iter()
            .find_map(|(k, v)| (k == "controlpath" && v != "none").then(|| PathBuf::from(v)))
        {
            Some(p) => p,
            None => own_socket(&self.settings, &self.spec_key())?,
        };
        let found = Session::resume_mux(socket.clone().into_boxed_path(), None);
        if tokio::time::timeout(Duration::from_secs(5), found.check())
            .await
            .is_ok_and(|r| r.is_ok())
        {
            tracing::debug!("{}: using the master at {}", self.name(), socket.display());
            return Ok((found, None));
        }
        // A socket nobody answers on is left by a master that died: ssh itself unlinks
        // such a one before it listens there (it would not listen otherwise).
        if std::fs::symlink_metadata(&socket).is_ok_and(|m| {
            use std::os::unix::fs::FileTypeExt;
            m.file_type().is_socket()
        }) {
            let _ = std::fs::remove_file(&socket);
        }
        let log = socket.with_extension("log");
        let mut cmd = tokio::process::Command::new("ssh");
        cmd.args(self.master_args(&socket, &log, keep))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        let limit = self.spec.connect_timeout + START_LIMIT;
        let status = tokio::time::timeout(limit, cmd.status()).await;
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        match status {
            Ok(Ok(st)) if st.success() => {}
            Ok(Ok(_)) => return Err(self.connect_message(&super::ssh::master_said(&said))),
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
        Ok((
            Session::resume_mux(socket.into_boxed_path(), None),
            super::ssh::verified_key(&said),
        ))
    }

    /// `ssh -M -N -f …`: a master at `socket`, logging to `log`, that lives `keep` after
    /// its last client. Every master runbook starts, kept or not, starts so.
    pub(super) fn master_args(&self, socket: &Path, log: &Path, keep: Duration) -> Vec<OsString> {
        let secs = keep.as_secs() + u64::from(keep.subsec_nanos() > 0);
        // ssh takes whole seconds: round up, so that "0.5s" does not become
        // `ConnectTimeout=0`, which ssh reads as no timeout.
        let timeout = self.spec.connect_timeout.as_secs()
            + u64::from(self.spec.connect_timeout.subsec_nanos() > 0);
        let mut a: Vec<OsString> = vec![
            "-M".into(),
            "-N".into(),
            "-f".into(),
            "-E".into(),
            log.into(),
        ];
        let mut opt = |s: String| {
            a.push("-o".into());
            a.push(s.into());
        };
        opt("ControlMaster=yes".into());
        opt(format!("ControlPath={}", socket.display()));
        opt(format!("ControlPersist={secs}s"));
        opt(format!("ConnectTimeout={timeout}"));
        opt("ServerAliveInterval=10".into());
        opt("BatchMode=yes".into());
        opt(super::ssh::MASTER_LOG_LEVEL.into());
        // A key given for this host is the only one tried, as with the openssh crate.
        if self.spec.identity.is_some() {
            opt("IdentitiesOnly=yes".into());
        }
        opt(format!(
            "StrictHostKeyChecking={}",
            if self.settings.trust_new_hosts {
                "accept-new"
            } else {
                "yes"
            }
        ));
        a.extend(self.reach_args());
        a
    }
}

/// runbook's own socket for a host: `cm-DIGEST` in its private directory.
fn own_socket(settings: &SshSettings, key: &str) -> Result<PathBuf, String> {
    let base = match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(d) if d.is_dir() => d.join("runbook"),
        _ => match std::env::var_os("HOME") {
            Some(h) => PathBuf::from(h).join(".local/state/runbook"),
            None => {
                return Err(
                    "--keep-connections: neither XDG_RUNTIME_DIR nor HOME is set, so there is no private directory for the control sockets".into(),
                )
            }
        },
    };
    let dir = base.join("ssh");
    private_dir(&dir)?;
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(key.as_bytes());
    h.update([0]);
    h.update(
        settings
            .config
            .as_deref()
            .unwrap_or(Path::new(""))
            .as_os_str()
            .as_encoded_bytes(),
    );
    h.update([u8::from(settings.trust_new_hosts)]);
    let digest = crate::base::hex::hex(&h.finalize()[..10]);
    Ok(dir.join(format!("cm-{digest}")))
}

/// Makes `dir` (0700) or checks it: a directory, not a link, this user's, 0700.
fn private_dir(dir: &Path) -> Result<(), String> {
    let bad = |why: String| format!("--keep-connections: {}: {why}", dir.display());
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| bad(format!("cannot create it: {e}")))?;
    }
    let m = std::fs::symlink_metadata(dir).map_err(|e| bad(e.to_string()))?;
    if !m.is_dir() {
        return Err(bad(
            "not a directory (a symbolic link?); refusing to use it".into(),
        ));
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me {
        return Err(bad(format!(
            "belongs to uid {}, not {me}; refusing to use it",
            m.uid()
        )));
    }
    if m.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| bad(e.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_directory_is_private() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("a/ssh");
        private_dir(&d).unwrap();
        assert_eq!(std::fs::metadata(&d).unwrap().mode() & 0o777, 0o700);
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&d).unwrap();
        assert_eq!(std::fs::metadata(&d).unwrap().mode() & 0o777, 0o700);
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&d, &link).unwrap();
        let e = private_dir(&link).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
    }
}
