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
//! vars = { cuda = "12.4", gpus = 8 }   # read in Lua as t.vars.cuda, t.vars.gpus
//!
//! [hosts.trainer]
//! via = "node1"      # a Proxmox container on node1
//! pct = 200
//!
//! [groups]
//! gpu = ["node1", "node2"]
//! training = ["slurm:job=4242"]          # the nodes of a running Slurm job
//! a100 = ["slurm:partition=a100", "slurm:login1"]
//! fleet = { hosts = ["login1"], children = ["gpu", "a100"] }   # nested groups
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
    /// `vars = { … }`: what runbooks read as `t.vars` (any TOML values; a date or time
    /// as its text).
    #[serde(default)]
    pub vars: toml::Table,
}

/// A group as loaded: its own members (hosts, or Slurm selections) and its children.
#[derive(Debug, Clone, Default)]
pub struct Group {
    pub hosts: Vec<String>,
    pub children: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InventoryFile {
    #[serde(default)]
    hosts: BTreeMap<String, HostEntry>,
    /// Each a list of members, or a table of its own members (`hosts`) and the groups
    /// whose members it has too (`children`, Ansible's word): read by `group_of`.
    #[serde(default)]
    groups: BTreeMap<String, toml::Value>,
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
    pub groups: BTreeMap<String, Group>,
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
        let groups = file
            .groups
            .into_iter()
            .map(|(name, v)| {
                group_of(&v)
                    .map(|g| (name.clone(), g))
                    .map_err(|e| format!("inventory {}: group '{name}': {e}", path.display()))
            })
            .collect::<Result<_, _>>()?;
        let mut hosts = file.hosts;
        for h in hosts.values_mut() {
            dates_as_text(&mut h.vars);
        }
        let inv = Inventory {
            path: path.to_path_buf(),
            hosts,
            groups,
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
        for (group, g) in &self.groups {
            for m in &g.hosts {
                // A Slurm node or selection (`slurm:partition=gpu`): the scheduler knows
                // it, not this file.
                if m.starts_with("slurm:") {
                    continue;
                }
                self.check_name(m, &format!("group '{group}'"))?;
            }
            for child in &g.children {
                if !self.groups.contains_key(child) {
                    return Err(format!(
                        "inventory {here}: group '{group}': children: no group '{child}'{}",
                        suggest::hint(child, self.groups.keys().map(String::as_str))
                    ));
                }
            }
            self.members_of(group, &mut Vec::new(), &mut Vec::new())?;
        }
        Ok(())
    }

    /// The members of `group` and of its children, depth first, each once; `on_path`
    /// holds the groups being expanded, so that a group among its own children is an
    /// error naming the loop.
    fn members_of(
        &self,
        group: &str,
        on_path: &mut Vec<String>,
        out: &mut Vec<String>,
    ) -> Result<(), String> {
        if let Some(at) = on_path.iter().position(|g| g == group) {
            let mut cycle = on_path[at..].to_vec();
            cycle.push(group.to_string());
            return Err(format!(
                "inventory {}: group '{}': its children lead back to it ({})",
                self.path.display(),
                on_path[at],
                cycle.join(" → ")
            ));
        }
        let Some(g) = self.groups.get(group) else {
            return Ok(());
        };
        on_path.push(group.to_string());
        for m in &g.hosts {
            if !out.contains(m) {
                out.push(m.clone());
            }
        }
        for child in &g.children {
            self.members_of(child, on_path, out)?;
        }
        on_path.pop();
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

    /// The members of a group, its children's included (each once, in the inventory's
    /// order: its own, then each child's).
    pub fn group(&self, name: &str) -> Result<Vec<String>, String> {
        if self.groups.contains_key(name) {
            let mut out = Vec::new();
            self.members_of(name, &mut Vec::new(), &mut out)?;
            return Ok(out);
        }
        Err({
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

    /// Whether a group has Slurm selections among its members: nodes this file does not
    /// name, which the scheduler lists when the group is used.
    pub fn has_slurm(&self) -> bool {
        self.groups
            .values()
            .any(|g| g.hosts.iter().any(|m| m.starts_with("slurm:")))
    }
}

/// A `[groups]` entry: `["a", "b"]`, or `{ hosts = ["a"], children = ["g"] }`.
fn group_of(v: &toml::Value) -> Result<Group, String> {
    fn names(v: &toml::Value, what: &str) -> Result<Vec<String>, String> {
        let bad = || format!("{what} is a list of names, like [\"node1\", \"node2\"]");
        v.as_array()
            .ok_or_else(bad)?
            .iter()
            .map(|n| n.as_str().map(str::to_string).ok_or_else(bad))
            .collect()
    }
    match v {
        toml::Value::Array(_) => Ok(Group {
            hosts: names(v, "a group")?,
            children: Vec::new(),
        }),
        toml::Value::Table(t) => {
            let mut g = Group::default();
            for (k, v) in t {
                match k.as_str() {
                    "hosts" => g.hosts = names(v, "hosts")?,
                    "children" => g.children = names(v, "children")?,
                    other => {
                        return Err(format!(
                            "unknown key '{other}': a group table has hosts and children{}",
                            suggest::hint(other, ["hosts", "children"])
                        ))
                    }
                }
            }
            Ok(g)
        }
        _ => {
            Err("give a list of hosts, or { hosts = [\"…\"], children = [\"other-group\"] }".into())
        }
    }
}

/// Dates and times in `vars` become their text: what a runbook compares and prints.
fn dates_as_text(table: &mut toml::Table) {
    fn walk(v: &mut toml::Value) {
        match v {
            toml::Value::Datetime(d) => *v = toml::Value::String(d.to_string()),
            toml::Value::Array(a) => a.iter_mut().for_each(walk),
            toml::Value::Table(t) => t.iter_mut().for_each(|(_, v)| walk(v)),
            _ => {}
        }
    }
    table.iter_mut().for_each(|(_, v)| walk(v));
}

/// The first `Host` line of an ssh_config file whose patterns take `name` (`*` and `?`
/// wildcards; a `!pattern` that matches rules the line out), as written after `Host`:
/// where ssh finds its settings for that name. `Include` and `Match` are not followed.
pub fn ssh_config_host(path: &Path, name: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let l = l.trim();
        let (key, rest) = l.split_once(char::is_whitespace)?;
        if !key.eq_ignore_ascii_case("host") {
            return None;
        }
        let patterns: Vec<&str> = rest.split_whitespace().collect();
        let ruled_out = patterns
            .iter()
            .filter_map(|p| p.strip_prefix('!'))
            .any(|p| crate::base::glob::matches(p, name));
        // `Host *` (settings for every host) says nothing of this one.
        let taken = patterns
            .iter()
            .filter(|p| !p.starts_with('!') && **p != "*")
            .any(|p| crate::base::glob::matches(p, name));
        (taken && !ruled_out).then(|| patterns.join(" "))
    })
}

/// A name a resolver can look up as it is: DNS labels of letters, digits and `-` (not at
/// either end), joined by dots. What `target()` takes as a plain host name.
pub fn plain_host(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
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
    fn nested_groups_and_host_vars() {
        let inv = load(
            r#"
            [hosts.a]
            address = "a.example"
            vars = { cuda = "12.4", gpus = 8, since = 2026-12-01, tags = ["x", 1979-05-27T07:32:00Z] }
            [hosts.b]
            address = "b.example"
            [hosts.c]
            address = "c.example"
            [groups]
            one = ["a"]
            two = { hosts = ["b", "a"], children = ["one"] }
            all = { hosts = ["c"], children = ["two", "one"] }
            "#,
        )
        .unwrap();
        assert_eq!(inv.group("all").unwrap(), ["c", "b", "a"], "each once");
        assert_eq!(inv.group("two").unwrap(), ["b", "a"]);
        let vars = &inv.host("a").unwrap().vars;
        assert_eq!(vars["gpus"].as_integer(), Some(8));
        assert_eq!(
            vars["since"].as_str(),
            Some("2026-12-01"),
            "a date as its text"
        );
        assert_eq!(vars["tags"][1].as_str(), Some("1979-05-27T07:32:00Z"));
        assert!(inv.host("b").unwrap().vars.is_empty());
        for (text, want) in [
            (
                "[groups]\na = { children = [\"b\"] }\nb = { children = [\"a\"] }\n",
                "its children lead back to it (a → b → a)",
            ),
            (
                "[groups]\na = { children = [\"nope\"] }\n",
                "group 'a': children: no group 'nope'",
            ),
            (
                "[groups]\na = { childs = [] }\n",
                "unknown key 'childs': a group table has hosts and children; did you mean 'children'?",
            ),
            ("[groups]\na = \"x\"\n", "give a list of hosts"),
            ("[groups]\na = [1]\n", "a group is a list of names"),
        ] {
            let e = load(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
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
