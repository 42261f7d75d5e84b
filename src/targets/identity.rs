//! Which machine a target is, whatever it was called: the host key each SSH connection on
//! the way verified, and what the machine (and the container) says of itself
//! (`sh/identity.sh`). A name is only a way there: `127.0.0.1` and `localhost`, `local`
//! and ssh to this machine, are one machine; two machines behind different
//! ProxyCommands with one private address are two.
//!
//! Two uses, two parts. What a plan records and `apply` compares ([`Identity`]) lasts as
//! long as the installation: host keys and machine ids, the containers on the way. What
//! run locks are keyed by ([`Found::lock_key`]) is what decides whether two names share
//! one lock file: the same machine in the same boot, the same user and lock directory,
//! and for a container the same container (as its tool names it) on that machine.

use super::{Container, Target};
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::pin::Pin;

/// What a target is, as a plan records it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The host key the SSH connection verified (`ssh-ed25519 SHA256:…`); none for this
    /// machine, a Slurm node (reached through srun) or a connection runbook did not
    /// open itself (a kept master found at the user's ControlPath).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_key: Option<String>,
    /// The machine's `/etc/machine-id` (`-`: it has none).
    pub machine_id: String,
    /// Inside a container: each container on the way (as its tool names it) and its own
    /// machine id, outermost first: `ct200 (machine-id 3f…)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<String>,
}

impl Identity {
    /// One line for messages: `host key ssh-ed25519 SHA256:…, machine-id 3f…, in ct200 (…)`.
    pub fn text(&self) -> String {
        let mut parts = Vec::new();
        if let Some(k) = &self.host_key {
            parts.push(format!("host key {k}"));
        }
        parts.push(format!("machine-id {}", self.machine_id));
        if !self.containers.is_empty() {
            parts.push(format!("in {}", self.containers.join(" / ")));
        }
        parts.join(", ")
    }

    /// Where `planned` and `found` differ, field by field (empty: the same machine). A
    /// host key only one side knows is no difference: the other connection was not
    /// opened by runbook; the machine id still is compared.
    pub fn differences(planned: &Identity, found: &Identity) -> Vec<String> {
        let mut out = Vec::new();
        if let (Some(a), Some(b)) = (&planned.host_key, &found.host_key) {
            if a != b {
                out.push(format!("host key: planned {a}, found {b}"));
            }
        }
        if planned.machine_id != found.machine_id {
            out.push(format!(
                "machine-id: planned {}, found {}",
                planned.machine_id, found.machine_id
            ));
        }
        if planned.containers != found.containers {
            out.push(format!(
                "container: planned {}, found {}",
                or_none(&planned.containers),
                or_none(&found.containers)
            ));
        }
        out
    }
}

fn or_none(list: &[String]) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        list.join(" / ")
    }
}

/// The answers a run got, by target name (`None`: nothing may be contacted).
pub type Known = std::rc::Rc<std::cell::RefCell<std::collections::HashMap<String, Option<Found>>>>;

/// What the probe found on a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub identity: Identity,
    /// What run locks are keyed by: names with one key share one lock file.
    pub lock_key: String,
}

/// The probe's `KEY VALUE` lines.
fn parse(out: &str) -> Option<(String, String)> {
    let field = |key: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
            .map(|v| v.trim().to_string())
    };
    let machine_id = field("machine-id")?;
    let key = format!(
        "boot {} uid {} machine-id {machine_id} lock-at {}",
        field("boot-id")?,
        field("uid")?,
        field("lock-at")?
    );
    Some((machine_id, key))
}

impl Target {
    /// Asks the target what it is (one short command, plus the connection's host key).
    /// `None` when nothing may be contacted (`runbook test`).
    pub fn identity(&self) -> Pin<Box<dyn Future<Output = Result<Option<Found>, String>> + '_>> {
        Box::pin(async move {
            if self.replaying() {
                return Ok(None);
            }
            match self {
                Target::Replies { inner, .. } | Target::Named { inner, .. } => {
                    return inner.identity().await
                }
                Target::In { parent, ct, .. } => {
                    return self.container_identity(parent, ct).await.map(Some)
                }
                Target::Local | Target::Ssh(_) | Target::Slurm(_) => {}
            }
            // The probe runs first: on SSH it opens the connection, which learns the key.
            let (machine_id, lock_key) = self.probe().await?;
            let host_key = match self {
                Target::Ssh(h) => h.host_key(),
                _ => None,
            };
            Ok(Some(Found {
                identity: Identity {
                    host_key,
                    machine_id,
                    containers: Vec::new(),
                },
                lock_key,
            }))
        })
    }

    /// A container's: the way there's, then what the container says of itself.
    async fn container_identity(&self, parent: &Target, ct: &Container) -> Result<Found, String> {
        let mut identity = parent
            .identity()
            .await?
            .map(|f| f.identity)
            .unwrap_or_default();
        let (machine_id, lock_key) = self.probe().await?;
        identity
            .containers
            .push(format!("{} (machine-id {machine_id})", ct.label()));
        Ok(Found { identity, lock_key })
    }

    async fn probe(&self) -> Result<(String, String), String> {
        let out = self
            .run_plain(vec![
                "sh".into(),
                "-c".into(),
                crate::base::script::IDENTITY.body.into(),
            ])
            .await?; // the error names the target and why nothing ran there
        let text = String::from_utf8_lossy(&out.stdout);
        match (out.code, parse(&text)) {
            (Some(0), Some(found)) => Ok(found),
            _ => Err(format!(
                "cannot tell which machine {} is: its identity probe said {}",
                self.name(),
                super::failure::tail(
                    &format!("{text}{}", String::from_utf8_lossy(&out.stderr)),
                    2
                )
                .trim()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_reads_back() {
        let (m, key) =
            parse("machine-id abc\nboot-id b-1\nuid 0\nlock-at /run/user/0/runbook\n").unwrap();
        assert_eq!(m, "abc");
        assert_eq!(
            key,
            "boot b-1 uid 0 machine-id abc lock-at /run/user/0/runbook"
        );
        assert!(parse("machine-id abc\n").is_none());
    }

    #[test]
    fn a_host_key_only_one_side_knows_is_no_difference() {
        let a = Identity {
            host_key: Some("ssh-ed25519 SHA256:a".into()),
            machine_id: "m1".into(),
            containers: Vec::new(),
        };
        let mut b = a.clone();
        b.host_key = None;
        assert!(Identity::differences(&a, &b).is_empty());
        b.machine_id = "m2".into();
        assert_eq!(
            Identity::differences(&a, &b),
            vec!["machine-id: planned m1, found m2".to_string()]
        );
        b.host_key = Some("ssh-ed25519 SHA256:b".into());
        assert_eq!(Identity::differences(&a, &b).len(), 2);
    }
}
