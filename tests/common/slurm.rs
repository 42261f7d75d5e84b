//! A real Slurm cluster for tests (Debian's `slurm-wlm` + `munge`) on this one machine:
//! its own munge key and munged socket, a slurm.conf in a private temp dir (linuxproc,
//! no cgroups, ports on loopback that were free), slurmctld and three slurmd, one per
//! node `n1`…`n3` (slurmd's `-N`: several nodes on one host, each with this host's CPUs
//! and memory as `slurmd -C` reports them), and a running `sleep` job on all three whose
//! allocation tests attach to. Three nodes, so that a launch on several nodes is real.
//!
//! One cluster per test binary, started on first use and shared (`cluster()`). The
//! daemons run under a small supervisor whose stdin is a pipe this process holds: when
//! the test binary exits, however it exits, the pipe closes and the supervisor cancels
//! every job of the cluster and stops the daemons, so no slurmstepd or `sleep` is left.
//!
//! When Slurm is not installed or does not start, the tests skip with a message, unless
//! `RUNBOOK_REQUIRE_SLURM=1` (scripts/test sets it and installs the packages): then they
//! fail.
#![allow(dead_code)]

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub struct Cluster {
    pub dir: PathBuf,
    /// `SLURM_CONF` for every client command (srun, sinfo, squeue, runbook itself).
    pub conf: PathBuf,
    /// The nodes' names; `node` is the first.
    pub nodes: Vec<String>,
    pub node: String,
    pub partition: String,
    /// A running job (`sleep`) on the node.
    pub job: u64,
    /// Closing it (this process ending) stops the cluster.
    _supervisor: Mutex<ChildStdin>,
    _keep: tempfile::TempDir,
}

/// Starts the daemons, then waits for the node to be up; cancels all jobs and stops them
/// when stdin closes (see the module doc). `$1`: the directory, `$2`: slurm.conf.
const SUPERVISOR: &str = r#"
dir=$1; export SLURM_CONF="$2"
munged -F -f --socket="$dir/munge.sock" --key-file="$dir/munge.key" \
  --log-file="$dir/log/munged.log" --pid-file="$dir/munged.pid" \
  --seed-file="$dir/munged.seed" </dev/null >/dev/null 2>&1 &
m=$!
i=0; while [ ! -S "$dir/munge.sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
slurmctld -D -f "$SLURM_CONF" </dev/null >"$dir/log/slurmctld.out" 2>&1 &
c=$!
d=
for n in n1 n2 n3; do
  mkdir -p "$dir/spool/$n"
  slurmd -D -f "$SLURM_CONF" -N "$n" </dev/null >"$dir/log/slurmd-$n.out" 2>&1 &
  d="$d $!"
done
echo started
read -r _
jobs=$(squeue -h -o %i 2>/dev/null)
[ -n "$jobs" ] && scancel $jobs 2>/dev/null
i=0; while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
# Give slurmstepd its KillWait to end what the cancelled steps left, then stop the
# daemons, for good if TERM is not enough.
sleep 3
kill $d $c $m
i=0; while kill -0 $d $c $m 2>/dev/null && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done
kill -9 $d $c $m 2>/dev/null
wait
# The directory is this harness's own temp dir (the Cluster is never dropped).
rm -rf -- "$dir"
"#;

pub fn available() -> bool {
    [
        "/usr/sbin/slurmctld",
        "/usr/sbin/slurmd",
        "/usr/sbin/munged",
    ]
    .iter()
    .all(|p| Path::new(p).exists())
}

/// The cluster (started once per test process), or `None` (the test skips) when Slurm
/// is not there and not required.
pub fn cluster() -> Option<&'static Cluster> {
    static READY: OnceLock<Result<Cluster, String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        if !available() {
            return Err(
                "slurm-wlm and munge are not installed (scripts/test installs them)".into(),
            );
        }
        start()
    });
    match ready {
        Ok(c) => Some(c),
        Err(why) if std::env::var("RUNBOOK_REQUIRE_SLURM").as_deref() == Ok("1") => {
            panic!("Slurm is required here (RUNBOOK_REQUIRE_SLURM=1) but: {why}")
        }
        Err(why) => {
            eprintln!("skipped: no Slurm cluster ({why})");
            None
        }
    }
}

/// The cluster, or return from the calling test (skipped).
#[macro_export]
macro_rules! require_slurm {
    () => {
        match $crate::common::slurm::cluster() {
            Some(c) => c,
            None => return,
        }
    };
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn out(cmd: &mut Command) -> Result<String, String> {
    let o = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "{cmd:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// `CPUs=2 … RealMemory=24105` from `slurmd -C`: the node as slurmd will report it.
fn hardware() -> Result<(String, String), String> {
    let line = out(Command::new("slurmd").arg("-C"))?;
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .map(str::to_string)
            .ok_or_else(|| format!("slurmd -C has no {k}: {line}"))
    };
    Ok((field("CPUs")?, field("RealMemory")?))
}

fn start() -> Result<Cluster, String> {
    let keep = tempfile::Builder::new()
        .prefix("runbook-slurm-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let dir = keep.path().to_path_buf();
    for d in ["state", "spool", "log"] {
        std::fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
    }
    let host = out(Command::new("hostname").arg("-s"))?;
    let nodes: Vec<String> = ["n1", "n2", "n3"].map(String::from).to_vec();
    let (cpus, memory) = hardware()?;
    out(Command::new("mungekey")
        .args(["-c", "-b", "1024", "-f", "-k"])
        .arg(dir.join("munge.key")))?;
    let ctld_port = free_port();
    let node_lines: String = nodes
        .iter()
        .map(|n| {
            format!(
                "NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={} CPUs={cpus} RealMemory={memory} State=UNKNOWN\n",
                free_port()
            )
        })
        .collect();
    let d = dir.display();
    // One partition with the node. OverSubscribe=FORCE lets a few allocations share the
    // node's real CPUs (the sleep job holds one; a test's own srun allocations and lock
    // holders need more than this small VM has).
    let conf = format!(
        "ClusterName=runbooktest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=2
{node_lines}PartitionName=debug Nodes=n[1-3] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
"
    );
    let conf_path = dir.join("slurm.conf");
    std::fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
    let mut sup = Command::new("sh")
        .arg("-c")
        .arg(SUPERVISOR)
        .arg("sh")
        .arg(&dir)
        .arg(&conf_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("starting the Slurm supervisor: {e}"))?;
    let stdin = sup.stdin.take().expect("piped");
    {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(sup.stdout.take().expect("piped"))
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        if line.trim() != "started" {
            return Err("the Slurm supervisor did not start the daemons".into());
        }
    }
    let client = |args: &[&str]| {
        out(Command::new(args[0])
            .args(&args[1..])
            .env("SLURM_CONF", &conf_path))
    };
    let logs = || {
        [
            "slurmctld.log",
            "slurmd-n1.log",
            "munged.log",
            "slurmd-n1.out",
        ]
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(dir.join("log").join(f)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(5).collect();
            format!(
                "{f}: {}",
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
    };
    let until = |what: &str, f: &dyn Fn() -> bool| -> Result<(), String> {
        let end = Instant::now() + Duration::from_secs(30);
        while !f() {
            if Instant::now() > end {
                return Err(format!("{what} within 30s\n{}", logs()));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    };
    until("the nodes are idle", &|| {
        client(&["sinfo", "-h", "-N", "-o", "%t"])
            .is_ok_and(|s| s.lines().filter(|l| l.trim() == "idle").count() == 3)
    })?;
    let job: u64 = client(&[
        "sbatch",
        "--parsable",
        "--job-name=runbook-test-sleep",
        "--nodes=3",
        "--ntasks-per-node=1",
        "--output=/dev/null",
        "--wrap",
        "exec sleep 3600",
    ])?
    .trim()
    .parse()
    .map_err(|e| format!("sbatch's job id: {e}"))?;
    let id = job.to_string();
    until("the sleep job runs", &|| {
        client(&["squeue", "-h", "-j", &id, "-o", "%T"]).is_ok_and(|s| s.trim() == "RUNNING")
    })?;
    Ok(Cluster {
        dir,
        conf: conf_path,
        node: nodes[0].clone(),
        nodes,
        partition: "debug".into(),
        job,
        _supervisor: Mutex::new(stdin),
        _keep: keep,
    })
}

/// A `sleep` duration no other test process uses, so `pgrep -f "sleep N"` finds only
/// this process's.
pub fn unique_sleep() -> String {
    format!("sleep {}", 400_000 + std::process::id())
}

impl Cluster {
    /// One test at a time on the cluster: tests count the steps left in `squeue -s`, which
    /// another test's steps would be among.
    pub fn serial(&self) -> std::sync::MutexGuard<'static, ()> {
        static ONE: Mutex<()> = Mutex::new(());
        ONE.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A client command (`squeue`, `sbatch`, …) against this cluster; its stdout, trimmed.
    pub fn client(&self, args: &[&str]) -> String {
        out(Command::new(args[0])
            .args(&args[1..])
            .env("SLURM_CONF", &self.conf))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The steps running now (`squeue -s`), but the batch scripts' own.
    pub fn steps(&self) -> Vec<String> {
        self.client(&["squeue", "-s", "-h", "-o", "%i %j"])
            .lines()
            .filter(|l| !l.contains(".batch"))
            .map(str::to_string)
            .collect()
    }

    /// Waits up to `limit` for no step to be left (a cancelled step takes KillWait).
    pub fn wait_no_steps(&self, limit: Duration) -> Vec<String> {
        let end = Instant::now() + limit;
        loop {
            let steps = self.steps();
            if steps.is_empty() || Instant::now() > end {
                return steps;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
