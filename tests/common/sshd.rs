//! A real OpenSSH sshd on 127.0.0.1 for tests: throw-away host and client keys, its own
//! known_hosts and ssh_config, the `pct` test double first on the PATH of every session.
//! Several instances on distinct ports stand in for a fleet.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const SSHD: &str = "/usr/sbin/sshd";

/// Whether sshd is installed (scripts/test installs it; a bare `cargo test` may lack it).
pub fn available() -> bool {
    Path::new(SSHD).exists()
}

/// Skips the calling test with a message when sshd is missing, unless CI demands it.
#[macro_export]
macro_rules! require_sshd {
    () => {
        if !$crate::common::sshd::available() {
            if std::env::var_os("CI").is_some()
                || std::env::var_os("RUNBOOK_REQUIRE_SSHD").is_some()
            {
                panic!("sshd is required (scripts/test installs openssh-server)");
            }
            eprintln!(
                "skipped: {} not installed (run scripts/test, which installs openssh-server)",
                $crate::common::sshd::SSHD
            );
            return;
        }
    };
}

fn keygen(path: &Path) {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "runbook-test", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen");
    assert!(st.success());
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Node {
    pub alias: String,
    pub port: u16,
    pub config: PathBuf,
    /// Its host key (private; `.pub` beside it).
    pub host_key: PathBuf,
    /// A machine of its own (`Fleet::start_machines`): the /etc/machine-id it sees, in a
    /// mount namespace of its own.
    pub machine_id: Option<PathBuf>,
    child: Option<Child>,
}

/// A set of sshd instances sharing one host key and one client key.
pub struct Fleet {
    pub dir: tempfile::TempDir,
    pub nodes: Vec<Node>,
    /// A copy of the test doubles (tests/bin, tests/fixtures) where containers see them
    /// too: the pct double gives containers their own /tmp and /root, and a checkout may
    /// live under either.
    doubles: tempfile::TempDir,
    /// `pct` on the nodes is `tests/bin/lxc/pct` over this machine's real LXC containers
    /// (`start_with_real_lxc`), not the double.
    real_lxc: bool,
    /// Each node is a machine of its own (`start_machines`).
    machines: bool,
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

impl Fleet {
    /// Starts `n` sshd instances, aliases `node1`…`nodeN`.
    pub fn start(n: usize) -> Fleet {
        Fleet::start_as(n, false)
    }

    /// `start`, with `pct` on the nodes going to this machine's real LXC containers
    /// (common/lxc.rs), as on a Proxmox node.
    pub fn start_with_real_lxc(n: usize) -> Fleet {
        Fleet::start_as(n, true)
    }

    /// `start`, each node a machine of its own, as far as runbook can tell: its own host
    /// key, and its own /etc/machine-id (bind-mounted in a mount namespace of its own).
    pub fn start_machines(n: usize) -> Fleet {
        Fleet::start_with(n, false, true)
    }

    fn start_as(n: usize, real_lxc: bool) -> Fleet {
        Fleet::start_with(n, real_lxc, false)
    }

    fn start_with(n: usize, real_lxc: bool, machines: bool) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all("/run/sshd").ok();
        keygen(&d.join("host_ed25519"));
        keygen(&d.join("client_ed25519"));
        std::fs::copy(d.join("client_ed25519.pub"), d.join("authorized_keys")).unwrap();
        std::fs::create_dir_all(d.join("pct/ct")).unwrap();
        let doubles = tempfile::Builder::new()
            .prefix("runbook-doubles-")
            .tempdir_in("/var/tmp")
            .unwrap();
        copy_tree(
            &super::repo().join("tests/bin"),
            &doubles.path().join("tests/bin"),
        );
        copy_tree(
            &super::repo().join("tests/fixtures"),
            &doubles.path().join("tests/fixtures"),
        );
        let mut fleet = Fleet {
            dir,
            nodes: Vec::new(),
            doubles,
            real_lxc,
            machines,
        };
        for i in 1..=n {
            fleet.add_node(&format!("node{i}"));
        }
        fleet.write_client_files();
        for node in &mut fleet.nodes {
            node.start();
        }
        fleet
    }

    fn add_node(&mut self, alias: &str) {
        let d = self.dir.path();
        let port = free_port();
        let mut bin = self.doubles.path().join("tests/bin").display().to_string();
        if self.real_lxc {
            bin = format!("{bin}/lxc:{bin}");
        }
        let config = d.join(format!("sshd_{alias}.conf"));
        let (host_key, machine_id) = if self.machines {
            let key = d.join(format!("host_{alias}"));
            keygen(&key);
            let id = d.join(format!("machine-id-{alias}"));
            let digest = Command::new("sh")
                .args(["-c", "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'"])
                .output()
                .unwrap();
            std::fs::write(&id, [&digest.stdout[..], b"\n"].concat()).unwrap();
            (key, Some(id))
        } else {
            (d.join("host_ed25519"), None)
        };
        let text = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nAuthorizedKeysFile {auth}\nPidFile {d}/sshd_{alias}.pid\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nUseDNS no\nStrictModes no\n\
             PermitRootLogin yes\nMaxSessions 10\nLogLevel ERROR\n\
             SetEnv PATH={bin}:/usr/local/bin:/usr/bin:/bin SHLVL=1 PCT_DOUBLE_ROOT={d}/pct RUNBOOK_LOCK_FILE=/tmp/runbook-{alias}-{port}.lock\n",
            host = host_key.display(),
            auth = d.join("authorized_keys").display(),
            d = d.display(),
        );
        std::fs::write(&config, text).unwrap();
        self.nodes.push(Node {
            alias: alias.to_string(),
            port,
            config,
            host_key,
            machine_id,
            child: None,
        });
    }

    /// ssh_config (aliases → ports) and known_hosts for the client side.
    pub fn write_client_files(&self) {
        let d = self.dir.path();
        let mut known = String::new();
        let mut cfg = String::new();
        for n in &self.nodes {
            known.push_str(&format!("[127.0.0.1]:{} {}\n", n.port, n.host_key_line()));
            cfg.push_str(&format!(
                "Host {}\n  HostName 127.0.0.1\n  Port {}\n  User root\n",
                n.alias, n.port
            ));
        }
        cfg.push_str(&format!(
            "Host *\n  IdentityFile {}\n  IdentitiesOnly yes\n  UserKnownHostsFile {}\n  GlobalKnownHostsFile /dev/null\n  BatchMode yes\n  KexAlgorithms curve25519-sha256\n  LogLevel ERROR\n",
            d.join("client_ed25519").display(),
            d.join("known_hosts").display()
        ));
        std::fs::write(d.join("known_hosts"), known).unwrap();
        std::fs::write(d.join("ssh_config"), cfg).unwrap();
    }

    /// The nodes' copy of tests/bin (what their sessions' PATH starts with).
    pub fn doubles_bin(&self) -> PathBuf {
        self.doubles.path().join("tests/bin")
    }

    pub fn ssh_config(&self) -> PathBuf {
        self.dir.path().join("ssh_config")
    }

    pub fn known_hosts(&self) -> PathBuf {
        self.dir.path().join("known_hosts")
    }

    /// Creates container `ctid` in the pct double; returns its root dir on the node.
    pub fn container(&self, ctid: u32) -> PathBuf {
        let ct = self.dir.path().join(format!("pct/ct/{ctid}"));
        std::fs::create_dir_all(ct.join("tmp")).unwrap();
        std::fs::create_dir_all(ct.join("root")).unwrap();
        ct
    }

    pub fn node(&mut self, alias: &str) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|n| n.alias == alias)
            .expect("node")
    }

    /// `--ssh-config` args for runbook.
    pub fn args(&self) -> Vec<String> {
        vec![
            "--ssh-config".into(),
            self.ssh_config().display().to_string(),
        ]
    }
}

impl Node {
    /// `TYPE BASE64` of its host key, as known_hosts holds it.
    pub fn host_key_line(&self) -> String {
        let public = std::fs::read_to_string(self.host_key.with_extension("pub")).unwrap();
        public
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    }

    pub fn start(&mut self) {
        let mut cmd = match &self.machine_id {
            None => Command::new(SSHD),
            Some(id) => {
                // Its own /etc/machine-id, seen only in its own mount namespace (`exec`s
                // all the way down: the child is sshd itself, for `kill`).
                let mut c = Command::new("unshare");
                c.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
                    .arg("mount --bind \"$1\" /etc/machine-id && shift && exec \"$@\"")
                    .arg("sh")
                    .arg(id)
                    .arg(SSHD);
                c
            }
        };
        let child = cmd
            .args(["-D", "-e", "-f"])
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sshd");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "sshd on port {} did not start",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Restarts it with `vars` set in every session's environment (sshd's `SetEnv`, which
    /// wins over what sshd sets itself): its own HOME, its own nvidia-smi fixture.
    pub fn set_env(&mut self, vars: &[(&str, &str)]) {
        let text = std::fs::read_to_string(&self.config).unwrap();
        let extra: String = vars.iter().map(|(k, v)| format!("{k}={v} ")).collect();
        let text = text.replacen("SetEnv ", &format!("SetEnv {extra}"), 1);
        std::fs::write(&self.config, text).unwrap();
        self.kill();
        self.start();
    }

    /// Kills the listener and every session process of this instance (dropping live
    /// connections), as a crashed or rebooted host would.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Session processes are children of the listener but outlive it, and carry nothing
        // that names this instance but the port they serve: kill what holds connections
        // on it (never this test process, which may hold sockets of its own there).
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "for p in $(ss -Htnp state established '( sport = :{0} )' 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do [ \"$p\" = {1} ] || kill -KILL $p; done",
                self.port,
                std::process::id()
            ))
            .status();
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            n.kill();
        }
    }
}
