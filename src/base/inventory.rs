//! `inventory.toml`: named hosts (SSH addresses with options, or containers on another
//! host) and groups of them, so runbooks say `target("trainer")` or `targets("gpu")`.
//!
//! ```toml
//! [hosts.node1]
//! address = "root@gpu-node-1.example"   # or host/user/port fields; "local" for this machine
//! identity = "~/.ssh/id_ed25519"
//! jump = "bastion.example"
//! connect_timeout = "10s"
//!
//! [hosts.trainer]
//! via = "node1"      # a Proxmox container on node1
//! pct = 200
//!
//! [groups]
//! gpu = ["node1", "node2"]
//! training = ["slurm:job=4242"]          # the nodes of a running Slurm job
//! a100 = ["slurm:partition=a100", "slurm:login1"]
//!
//! [ssh]
//! keep_connections = "10m"   # as --keep-connections: masters outlive a run by this
//! ```

use crate::base::suggest;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    pub address: Option<String>,
    pub host: Option<String>,
    pub user: Option<String>,
    pub port: Option<u16>,
    pub identity: Option<String>,
    pub jump: Option<String>,
    pub connect_timeout: Option<String>,
    pub via: Option<String>,
    pub pct: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InventoryFile {
    #[serde(default)]
    hosts: BTreeMap<String, HostEntry>,
    #[serde(default)]
    groups: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    ssh: SshTable,
}

/// `[ssh]`: how every SSH host of the inventory is reached.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SshTable {
    keep_connections: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Inventory {
    pub path: PathBuf,
    pub hosts: BTreeMap<String, HostEntry>,
    pub groups: BTreeMap<String, Vec<String>>,
    /// `[ssh] keep_connections`: what `--keep-connections` is when not given.
    pub keep_connections: Option<std::time::Duration>,
}

impl Inventory {
    /// Loads and checks an inventory: every host says where it is, every `via` and group
    /// member exists, no `via` loops.
    pub fn load(path: &Path) -> Result<Inventory, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("inventory {}: {e}", path.display()))?;
        let file: InventoryFile =
            toml::from_str(&text).map_err(|e| format!("inventory {}: {e}", path.display()))?;
        let keep_connections = match &file.ssh.keep_connections {
            None => None,
            Some(t) => Some(crate::base::duration::parse(t).map_err(|e| {
                format!("inventory {}: [ssh] keep_connections: {e}", path.display())
            })?),
        };
        let inv = Inventory {
            path: path.to_path_buf(),
            hosts: file.hosts,
            groups: file.groups,
            keep_connections,
        };
        inv.validate()?;
        Ok(inv)
    }

    fn validate(&self) -> Result<(), String> {
        let here = self.path.display();
        for (name, h) in &self.hosts {
            let ssh = h.address.is_some() || h.host.is_some();
            match (ssh, &h.via, h.pct) {
                (true, None, None) | (false, Some(_), Some(_)) => {}
                (true, Some(_), _) | (true, _, Some(_)) => {
                    return Err(format!("inventory {here}: host '{name}': give either an address (address/host) or via + pct, not both"))
                }
                (false, Some(_), None) | (false, None, Some(_)) => {
                    return Err(format!("inventory {here}: host '{name}': a container needs both `via` (the node's name) and `pct` (its id)"))
                }
                (false, None, None) => {
                    return Err(format!("inventory {here}: host '{name}': say where it is: address = \"user@host\" (or \"local\"), or via + pct"))
                }
            }
            if let Some(via) = &h.via {
                self.check_name(via, &format!("host '{name}': via"))?;
                let mut seen = vec![name.as_str()];
                let mut cur = via.as_str();
                while let Some(next) = self.hosts.get(cur).and_then(|e| e.via.as_deref()) {
                    if seen.contains(&cur) {
                        return Err(format!(
                            "inventory {here}: host '{name}': `via` loops back through '{cur}'"
                        ));
                    }
                    seen.push(cur);
                    cur = next;
                }
            }
        }
        for (group, members) in &self.groups {
            for m in members {
                // A Slurm node or selection (`slurm:partition=gpu`): the scheduler knows
                // it, not this file.
                if m.starts_with("slurm:") {
                    continue;
                }
                self.check_name(m, &format!("group '{group}'"))?;
            }
        }
        Ok(())
    }

    fn check_name(&self, name: &str, what: &str) -> Result<(), String> {
        if self.hosts.contains_key(name) {
            return Ok(());
        }
        Err(format!(
            "inventory {}: {what}: no host '{name}'{}",
            self.path.display(),
            suggest::hint(name, self.hosts.keys().map(String::as_str))
        ))
    }

    pub fn host(&self, name: &str) -> Option<&HostEntry> {
        self.hosts.get(name)
    }

    pub fn group(&self, name: &str) -> Result<&[String], String> {
        self.groups.get(name).map(Vec::as_slice).ok_or_else(|| {
            let names: Vec<&str> = self.groups.keys().map(String::as_str).collect();
            format!(
                "no group '{name}' in {}{} (groups: {})",
                self.path.display(),
                suggest::hint(name, names.iter().copied()),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )
        })
    }
}

/// `Host` aliases declared in an ssh_config file (exact names only, no patterns).
pub fn ssh_config_aliases(path: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let (key, rest) = l.split_once(char::is_whitespace)?;
            key.eq_ignore_ascii_case("host").then_some(rest)
        })
        .flat_map(|rest| {
            rest.split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|a| !a.contains(['*', '?', '!']))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Inventory, String> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("inventory.toml");
        std::fs::write(&p, text).unwrap();
        Inventory::load(&p)
    }

    #[test]
    fn loads_hosts_containers_and_groups() {
        let inv = load(
            r#"
            [hosts.node1]
            address = "root@gpu-node-1.example"
            [hosts.trainer]
            via = "node1"
            pct = 200
            [groups]
            gpu = ["node1", "trainer"]
            "#,
        )
        .unwrap();
        assert_eq!(inv.group("gpu").unwrap().len(), 2);
        assert!(inv
            .group("gpus")
            .unwrap_err()
            .contains("did you mean 'gpu'"));
    }

    #[test]
    fn rejects_bad_entries() {
        assert!(load("[hosts.a]\nvia = \"b\"\npct = 1\n")
            .unwrap_err()
            .contains("no host 'b'"));
        assert!(load("[hosts.a]\npct = 1\n")
            .unwrap_err()
            .contains("needs both"));
        assert!(load("[hosts.a]\naddress = \"x\"\nbogus = 1\n")
            .unwrap_err()
            .contains("unknown field"));
        assert!(
            load("[hosts.a]\nvia = \"b\"\npct = 1\n[hosts.b]\nvia = \"a\"\npct = 2\n")
                .unwrap_err()
                .contains("loops")
        );
        assert!(
            load("[hosts.a]\naddress = \"x\"\n[groups]\ng = [\"nope\"]\n")
                .unwrap_err()
                .contains("group 'g'")
        );
    }

    #[test]
    fn reads_ssh_config_aliases() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config");
        std::fs::write(
            &p,
            "Host node1 node2\n  HostName 127.0.0.1\nHost *.example\nhost other\n",
        )
        .unwrap();
        assert_eq!(ssh_config_aliases(&p), vec!["node1", "node2", "other"]);
    }
}
