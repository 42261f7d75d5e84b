//! Turns the names runbooks use (`"local"`, `"root@host:22"`, an inventory name, an
//! ssh_config alias) into targets, and keeps one connection per host for the whole run.

use super::replies::Replies;
use super::ssh::{SshHost, SshSettings, SshSpec};
use super::Target;
use crate::base::inventory::{self, Inventory};
use crate::base::limit::Limit;
use crate::base::suggest;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;

/// What the command line says about reaching machines.
#[derive(Debug, Clone, Default)]
pub struct RemoteSettings {
    pub ssh: SshSettings,
    pub inventory: Option<Rc<Inventory>>,
    /// `--lock-wait`: how long to wait for another run's lock on a target.
    pub lock_wait: std::time::Duration,
    /// `run --save-replies` / `runbook test`: every target's commands are saved to these,
    /// or answered from them (see `replies.rs`).
    pub replies: Option<Rc<Replies>>,
    /// `--limit`: which hosts of a group `targets()` keeps.
    pub limit: Option<Rc<Limit>>,
}

pub struct Registry {
    settings: Rc<SshSettings>,
    inventory: Option<Rc<Inventory>>,
    hosts: RefCell<HashMap<SshSpec, Rc<SshHost>>>,
    replies: Option<Rc<Replies>>,
    limit: Option<Rc<Limit>>,
    /// Shared by every Slurm target of the run, so that their commands can share launches.
    slurm: Rc<super::slurm::Launcher>,
    /// What each target is, by name (`identity.rs`), asked once per run (`Locks`).
    identities: super::identity::Known,
}

impl Registry {
    pub fn new(remote: RemoteSettings) -> Self {
        let mut ssh = remote.ssh;
        // The command line's `--keep-connections` wins over the inventory's; 0: close.
        ssh.keep = ssh
            .keep
            .or(remote.inventory.as_ref().and_then(|i| i.keep_connections))
            .filter(|d| !d.is_zero());
        Registry {
            settings: Rc::new(ssh),
            inventory: remote.inventory,
            hosts: RefCell::new(HashMap::new()),
            replies: remote.replies,
            limit: remote.limit,
            slurm: Rc::default(),
            identities: Default::default(),
        }
    }

    /// `--limit`, if the run has one.
    pub fn limit(&self) -> Option<&Limit> {
        self.limit.as_deref()
    }

    /// Whether `--limit` keeps the host or node named `name` (all are kept without one).
    pub fn keeps(&self, name: &str) -> bool {
        self.limit.as_ref().is_none_or(|l| l.keeps(name))
    }

    /// The inventory's `vars` of the host `name` resolves to, if it is one of its hosts
    /// (as `resolve` reads names: `local` and `slurm:` are never the inventory's).
    pub fn vars(&self, name: &str) -> Option<toml::Table> {
        if name == "local" || name == "localhost" || name.starts_with("slurm:") {
            return None;
        }
        Some(self.inventory.as_ref()?.host(name)?.vars.clone())
    }

    /// The replies every target's commands go to, if any.
    pub fn replies(&self) -> Option<&Rc<Replies>> {
        self.replies.as_ref()
    }

    /// `target`, with this run's replies at its base (every target the registry makes
    /// has them, so a container on it has them too).
    fn answered(&self, target: Target) -> Rc<Target> {
        match &self.replies {
            Some(replies) => Rc::new(Target::Replies {
                inner: Rc::new(target),
                replies: replies.clone(),
            }),
            None => Rc::new(target),
        }
    }

    /// The run's answers to "which machine is this target" (`Locks` keeps them).
    pub fn identities(&self) -> super::identity::Known {
        self.identities.clone()
    }

    /// This machine.
    pub fn local(&self) -> Rc<Target> {
        self.answered(Target::Local)
    }

    /// The target for an SSH spec; the same host always gets the same connection.
    pub fn ssh(&self, spec: SshSpec) -> Rc<Target> {
        self.answered(Target::Ssh(self.host(spec)))
    }

    /// `ssh`, saying where its name came from (`origin`: the inventory, an ssh_config
    /// Host, a plain host name), which a host that cannot be reached says.
    fn ssh_from(&self, spec: SshSpec, origin: String) -> Rc<Target> {
        let host = self.host(spec);
        host.set_origin(origin);
        self.answered(Target::Ssh(host))
    }

    /// The one host (and connection) of a spec in this run.
    fn host(&self, spec: SshSpec) -> Rc<SshHost> {
        self.hosts
            .borrow_mut()
            .entry(spec.clone())
            .or_insert_with(|| Rc::new(SshHost::new(spec, self.settings.clone())))
            .clone()
    }

    /// The target for a Slurm node.
    pub fn slurm(&self, spec: super::slurm::SlurmSpec) -> Rc<Target> {
        self.answered(Target::Slurm(Rc::new(super::slurm::SlurmNode::new(
            spec,
            self.slurm.clone(),
        ))))
    }

    pub fn resolve(&self, name: &str) -> Result<Rc<Target>, String> {
        if name == "local" || name == "localhost" {
            return Ok(self.local());
        }
        // `slurm:` is Slurm's (a host named "slurm" is still `ssh://slurm:22`).
        if let Some(rest) = name.strip_prefix("slurm:") {
            if super::slurm::is_selection(rest) {
                return Err(format!(
                    "'{name}' is a selection of several nodes: use targets(\"{name}\")"
                ));
            }
            return super::slurm::SlurmSpec::parse(rest).map(|s| self.slurm(s));
        }
        if let Some(inv) = &self.inventory {
            if inv.host(name).is_some() {
                return self.inventory_target(inv, name);
            }
        }
        let looks_like_address = name.contains(['@', ':']) || name.starts_with("ssh://");
        if looks_like_address {
            return SshSpec::parse(name).map(|spec| self.ssh(spec));
        }
        // As ssh would take it: a Host of the ssh_config, else a name the resolver looks
        // up. Where it came from goes with it, for the messages of a host that cannot be
        // reached (a typo of an inventory name is a plain host name too).
        let config = self.config_path();
        if let Some((cfg, host)) = config
            .as_ref()
            .and_then(|c| Some((c, inventory::ssh_config_host(c, name)?)))
        {
            let origin = format!("from `Host {host}` in {}", cfg.display());
            return SshSpec::parse(name).map(|spec| self.ssh_from(spec, origin));
        }
        let inv = match &self.inventory {
            Some(i) => format!("inventory {}", i.path.display()),
            None => "no inventory (./inventory.toml or --inventory)".into(),
        };
        let known: Vec<String> = self
            .inventory
            .iter()
            .flat_map(|inv| inv.hosts.keys().cloned())
            .chain(self.aliases())
            .collect();
        let hint = suggest::hint(name, known.iter().map(String::as_str));
        if inventory::plain_host(name) {
            let config = config.map_or("your ssh config".into(), |c| c.display().to_string());
            let origin = match &self.inventory {
                Some(i) => format!(
                    "a plain host name: in neither the inventory {} nor a Host of {config}{hint}",
                    i.path.display()
                ),
                None => format!("a plain host name: no Host of {config} takes it{hint}"),
            };
            return SshSpec::parse(name).map(|spec| self.ssh_from(spec, origin));
        }
        // A dotted name ssh takes though a resolver may not (`db_1.internal`).
        if name.contains('.') {
            return SshSpec::parse(name).map(|spec| self.ssh(spec));
        }
        Err(format!(
            "unknown target '{name}'{hint}: give \"local\", user@host[:port], a host name, an inventory name ({inv}) or a Host of your ssh config"
        ))
    }

    /// Whether `name` is a host the inventory or a Host line of the ssh_config names (not
    /// merely a name a resolver might know).
    pub fn knows(&self, name: &str) -> bool {
        self.inventory
            .as_ref()
            .is_some_and(|i| i.host(name).is_some())
            || self
                .config_path()
                .is_some_and(|c| inventory::ssh_config_host(&c, name).is_some())
    }

    /// The ssh_config names are looked up in: `--ssh-config`, else `~/.ssh/config`.
    fn config_path(&self) -> Option<PathBuf> {
        match &self.settings.config {
            Some(p) => Some(p.clone()),
            None => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".ssh/config")),
        }
    }

    fn inventory_target(&self, inv: &Inventory, name: &str) -> Result<Rc<Target>, String> {
        let h = inv.host(name).expect("checked by the caller");
        if let (Some(via), Some(ctid)) = (&h.via, h.pct) {
            let parent = self.inventory_target(inv, via)?;
            return Ok(Rc::new(Target::In {
                parent,
                ct: super::Container::Pct(ctid),
                label: Some(name.to_string()),
            }));
        }
        if h.address.as_deref() == Some("local") {
            return Ok(Rc::new(Target::Named {
                inner: self.local(),
                label: name.to_string(),
            }));
        }
        let mut spec = match (&h.address, &h.host) {
            (Some(a), _) => SshSpec::parse(a),
            (None, Some(host)) => SshSpec::parse(host),
            (None, None) => unreachable!("validated on load"),
        }
        .map_err(|e| format!("inventory {}: host '{name}': {e}", inv.path.display()))?;
        if h.user.is_some() {
            spec.user = h.user.clone();
        }
        if h.port.is_some() {
            spec.port = h.port;
        }
        spec.identity = h.identity.as_deref().map(expand_home);
        spec.jump = h.jump.clone();
        spec.alias = Some(name.to_string());
        let origin = format!("from the inventory {}", inv.path.display());
        if let Some(t) = &h.connect_timeout {
            let bad = |e: String| {
                format!(
                    "inventory {}: host '{name}': connect_timeout: {e}",
                    inv.path.display()
                )
            };
            let d = crate::base::duration::parse(t).map_err(bad)?;
            // As in ssh(): connecting must end by itself.
            if d.is_zero() {
                return Err(bad("must be more than 0 (the default is 10s)".into()));
            }
            spec.connect_timeout = d;
        }
        Ok(self.ssh_from(spec, origin))
    }

    pub fn group(&self, name: &str) -> Result<Vec<Member>, String> {
        let Some(inv) = &self.inventory else {
            return Err(format!("targets(\"{name}\"): groups come from an inventory, and there is none (./inventory.toml or --inventory FILE)"));
        };
        let members = inv.group(name)?;
        members
            .into_iter()
            .map(|m| match m.strip_prefix("slurm:") {
                Some(sel) if super::slurm::is_selection(sel) => Ok(Member::Slurm(sel.to_string())),
                Some(_) => self
                    .resolve(&m)
                    .map_err(|e| format!("inventory {}: group '{name}': {e}", inv.path.display()))
                    .map(|t| Member::Target(t, toml::Table::new())),
                None => self
                    .inventory_target(inv, &m)
                    .map(|t| Member::Target(t, self.vars(&m).unwrap_or_default())),
            })
            .collect()
    }

    fn aliases(&self) -> Vec<String> {
        let path = match &self.settings.config {
            Some(p) => p.clone(),
            None => match std::env::var_os("HOME") {
                Some(h) => PathBuf::from(h).join(".ssh/config"),
                None => return Vec::new(),
            },
        };
        inventory::ssh_config_aliases(&path)
    }

    /// Closes every connection this run opened, all at once: each waits for its
    /// sessions' loops and its master to end (a few ms a host, measured: one after the
    /// other made closing 1.2 s of a 3.7 s run over 200 hosts).
    pub async fn close_all(&self) {
        let hosts: Vec<Rc<SshHost>> = self.hosts.borrow().values().cloned().collect();
        let closing: Vec<_> = hosts
            .into_iter()
            .map(|h| tokio::task::spawn_local(async move { h.close().await }))
            .collect();
        super::session::local().close_all().await;
        for c in closing {
            let _ = c.await;
        }
    }
}

/// A member of an inventory group: a target, or a Slurm selection (what follows
/// `slurm:`), whose nodes the scheduler lists when the group is used.
pub enum Member {
    /// A target, with its inventory `vars`.
    Target(Rc<Target>, toml::Table),
    Slurm(String),
}

pub fn expand_home(p: &str) -> PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(p),
    }
}
