//! Nodes of a Slurm cluster, reached through the scheduler: every command is a job step,
//! `srun --nodes=1 --ntasks=1 --nodelist=NODE [--jobid=JOB --overlap] -- argv`, started
//! on this machine (a login node), so a command on a job's node runs inside that job's
//! allocation (its environment, cgroup and GPUs) and one without a job gets a step
//! allocation of its own that fails fast (`--immediate`) instead of queueing.
//!
//! srun runs here as a local process with runbook's environment (`SLURM_CONF` and the
//! like reach it), and passes that environment on to the task as srun does. The command's
//! own `env` travels on standard input (`with_env.sh`, as on every remote hop), never in
//! srun's argv. On the node the task is `sh/slurm_task.sh` around the killable wrapper:
//! it names its step and task, and reports the command's exit status in band.
//!
//! A timeout or Ctrl-C cancels the step (`scancel JOB.STEP`): slurmd stops every process
//! of it (TERM, then KILL after the cluster's KillWait), and srun here is stopped too.
//!
//! Several identical commands started at the same time on nodes of the same job (or the
//! same partition) are one launch: `srun --nodes=N --ntasks=N --ntasks-per-node=1
//! --nodelist=a,b,… --label`, Slurm's own tree fan-out, with each task's output, group and
//! exit status sent back to the command it belongs to (`Launcher`).
//!
//! Which nodes a selection (`targets("slurm:partition=gpu")`) names is read in
//! `slurm/selection.rs`.

use super::pump::PGID_MARKER;
use super::{local, ExecIo, ExecOutcome, ExecRequest, Group, Stream, Target};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::rc::Rc;
use std::time::Duration;

mod selection;
pub use selection::{is_selection, Selection};

/// How long a new step allocation may wait for the node unless told otherwise.
pub const DEFAULT_IMMEDIATE: Duration = Duration::from_secs(10);

const TASK_MARKER: &str = "\u{1e}runbook-slurm-task=";
const EXIT_MARKER: &str = "\u{1e}runbook-slurm-exit=";

/// Where a Slurm target's commands run, as a record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SlurmSpec {
    pub node: String,
    /// A running job whose allocation the steps join (`--jobid=JOB --overlap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<u64>,
    /// The partition a step allocation of its own comes from (no job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// `--immediate`: how long a step may wait for resources, in whole seconds.
    pub immediate_s: u64,
}

/// A node name, a partition name: what Slurm itself takes (and nothing srun would read
/// as a flag or a host list).
fn is_slurm_name(s: &str) -> bool {
    s.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && s.len() <= 255
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

impl SlurmSpec {
    pub fn new(
        node: &str,
        job: Option<u64>,
        partition: Option<&str>,
        immediate: Option<Duration>,
    ) -> Result<SlurmSpec, String> {
        if !is_slurm_name(node) {
            return Err(format!(
                "'{node}' is not a Slurm node name (letters, digits, '-', '_', '.', starting with a letter, digit or '_'; one node: use targets(\"slurm:nodes=…\") for a list)"
            ));
        }
        if let Some(p) = partition {
            if !is_slurm_name(p) {
                return Err(format!("partition: '{p}' is not a partition name"));
            }
            if job.is_some() {
                return Err(
                    "give job or partition, not both: a job's steps run in the job's own partition"
                        .into(),
                );
            }
        }
        if job == Some(0) {
            return Err("job: a job id is a whole number from 1".into());
        }
        let immediate = immediate.unwrap_or(DEFAULT_IMMEDIATE);
        Ok(SlurmSpec {
            node: node.to_string(),
            job,
            partition: partition.map(str::to_string),
            // srun takes whole seconds, and 0 would mean its own default (1 s).
            immediate_s: (immediate.as_secs() + u64::from(immediate.subsec_nanos() > 0)).max(1),
        })
    }

    /// `NODE`, `NODE?job=ID`, `NODE?partition=P&immediate=30s` (what follows `slurm:`).
    pub fn parse(text: &str) -> Result<SlurmSpec, String> {
        let (node, query) = text.split_once('?').unwrap_or((text, ""));
        let (mut job, mut partition, mut immediate) = (None, None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "job" => {
                    job = Some(
                        v.parse::<u64>()
                            .map_err(|_| format!("job: '{v}' is not a job id (a whole number)"))?,
                    )
                }
                "partition" => partition = Some(v),
                "immediate" => {
                    immediate = Some(
                        crate::base::duration::parse(v).map_err(|e| format!("immediate: {e}"))?,
                    )
                }
                other => {
                    return Err(format!(
                        "unknown setting '{other}'{} (job, partition, immediate)",
                        crate::base::suggest::hint(other, ["job", "partition", "immediate"])
                    ))
                }
            }
        }
        SlurmSpec::new(node, job, partition, immediate)
    }

    pub fn name(&self) -> String {
        match self.job {
            Some(j) => format!("slurm:{}?job={j}", self.node),
            None => format!("slurm:{}", self.node),
        }
    }

    /// The flags every launch of this spec shares (all but the node list and counts).
    fn common_flags(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = Vec::new();
        if let Some(j) = self.job {
            out.push(format!("--jobid={j}").into());
            // A step beside the job's own, sharing its resources: it needs none free.
            out.push("--overlap".into());
        }
        if let Some(p) = &self.partition {
            out.push(format!("--partition={p}").into());
        }
        out.push(format!("--immediate={}", self.immediate_s).into());
        // Informational lines ("job N queued…") are not the command's stderr.
        out.push("--quiet".into());
        out
    }

    /// `srun … --nodelist=NODE -- argv`: what runs `argv` on the node, from this machine.
    pub fn srun(&self, argv: Vec<OsString>) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec![
            "srun".into(),
            "--nodes=1".into(),
            "--ntasks=1".into(),
            format!("--nodelist={}", self.node).into(),
        ];
        out.extend(self.common_flags());
        out.push("--".into());
        out.extend(argv);
        out
    }

    /// One launch of `argv` on every node of `nodes`, one task each, output labelled by
    /// task.
    fn srun_many(&self, nodes: &[String], argv: Vec<OsString>) -> Vec<OsString> {
        let n = nodes.len();
        let mut out: Vec<OsString> = vec![
            "srun".into(),
            format!("--nodes={n}").into(),
            format!("--ntasks={n}").into(),
            "--ntasks-per-node=1".into(),
            format!("--nodelist={}", nodes.join(",")).into(),
        ];
        out.extend(self.common_flags());
        out.push("--label".into());
        out.push("--".into());
        out.extend(argv);
        out
    }
}

/// A Slurm node target: its spec and the launcher it shares with the run's other Slurm
/// targets.
#[derive(Debug)]
pub struct SlurmNode {
    pub spec: SlurmSpec,
    launcher: Rc<Launcher>,
}

impl SlurmNode {
    pub fn new(spec: SlurmSpec, launcher: Rc<Launcher>) -> Self {
        SlurmNode { spec, launcher }
    }

    pub fn name(&self) -> String {
        self.spec.name()
    }

    /// The run lock's key: the node, whichever job or partition reaches it (the lock
    /// lives on the node, so two names for it must not wait for each other).
    pub fn destination(&self) -> String {
        format!("slurm:{}", self.spec.node)
    }
}

/// Why srun could not start a command, from what it said: its own `srun: error:` lines
/// (an unknown node or job, no resources within `--immediate`, the controller down).
pub fn refused(stderr: &str) -> Option<String> {
    let said: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.trim().strip_prefix("srun: error: "))
        // A task's own exit is the command's business, not a refusal.
        .filter(|l| !l.contains(": task "))
        .collect();
    (!said.is_empty()).then(|| format!("srun: {}", said.join("; ")))
}

/// The Slurm node under a chain of containers, and the argv that runs `argv` inside
/// them, for the node to run.
fn below(target: &Target, argv: Vec<OsString>) -> Option<(Rc<SlurmNode>, Vec<OsString>)> {
    match target {
        Target::Slurm(n) => Some((n.clone(), argv)),
        Target::In { parent, ct, .. } => below(parent, ct.wrap(argv)),
        Target::Replies { inner, .. } => below(inner, argv),
        _ => None,
    }
}

/// Whether the chain ends at a Slurm node.
pub(super) fn on_slurm(target: &Target) -> bool {
    match target {
        Target::Slurm(_) => true,
        Target::In { parent, .. } => on_slurm(parent),
        Target::Replies { inner, .. } => on_slurm(inner),
        _ => false,
    }
}

/// The task around the killable command (`sh/slurm_task.sh`), and its standard input:
/// the launch's token twice (the task's lines, then the group report), then the
/// command's own input. The token is drawn afresh for each launch, and the command never
/// sees it (in no argv, no environment, and read off its input before it starts), so a
/// line it prints cannot pass for one of runbook's: a task, a group or an exit.
fn task(inner: Vec<OsString>, stdin: Option<Vec<u8>>) -> (Vec<OsString>, Vec<u8>, Marks) {
    let marks = Marks::new(super::session::token());
    let mut argv: Vec<OsString> = vec![
        "sh".into(),
        "-c".into(),
        crate::base::script::SLURM_TASK.body.into(),
        "sh".into(),
    ];
    argv.extend(super::wrap::killable_with_token(inner));
    let mut input = format!("{0}\n{0}\n", marks.token).into_bytes();
    input.extend(stdin.unwrap_or_default());
    (argv, input, marks)
}

/// The starts of the lines a launch's tasks print for runbook, with its token.
struct Marks {
    token: String,
    task: String,
    exit: String,
    group: String,
}

impl Marks {
    fn new(token: String) -> Marks {
        Marks {
            task: format!("{TASK_MARKER}{token} "),
            exit: format!("{EXIT_MARKER}{token} "),
            group: format!("{PGID_MARKER}{token} "),
            token,
        }
    }

    /// Whether `line` is one of runbook's own (not the command's).
    fn ours(&self, line: &[u8]) -> bool {
        [&self.task, &self.exit, &self.group]
            .iter()
            .any(|m| line.starts_with(m.as_bytes()))
    }
}

/// `JOB.STEP RANK NODE` from a task marker.
fn parse_task(text: &str) -> Option<(String, u32, String)> {
    let mut w = text.split_whitespace();
    let step = w
        .next()
        .filter(|s| s.contains('.') && !s.starts_with('.'))?;
    let rank = w.next()?.parse().ok()?;
    Some((
        step.to_string(),
        rank,
        w.next().unwrap_or_default().to_string(),
    ))
}

/// Cancels a step (its whole process tree on the node), quietly: it may have ended.
async fn cancel_step(step: &str) {
    let run = tokio::process::Command::new("scancel")
        .arg(step)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(15), run).await {
        Ok(Ok(o)) if o.status.success() => {}
        // Already gone: what a second cancel finds when the first worked.
        Ok(Ok(o)) if String::from_utf8_lossy(&o.stderr).contains("Invalid job id") => {}
        Ok(Ok(o)) => tracing::warn!(
            "scancel {step}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Ok(Err(e)) => tracing::warn!("scancel {step}: {e}"),
        Err(_) => tracing::warn!("scancel {step}: no answer within 15s"),
    }
}

/// Removes runbook's own marker lines from a captured stream (a line that only looks
/// like one, without the token, is the command's and stays).
fn strip_markers(bytes: &mut Vec<u8>, marks: &Marks) {
    let kept: Vec<u8> = bytes
        .split_inclusive(|&b| b == b'\n')
        .filter(|l| !marks.ours(l))
        .flatten()
        .copied()
        .collect();
    *bytes = kept;
}

/// Runs a request on a chain that ends at a Slurm node.
pub(super) async fn exec(
    target: &Target,
    req: &ExecRequest,
    io: &ExecIo<'_>,
) -> Result<ExecOutcome, String> {
    let (inner, stdin) = super::wrap::env_and_cwd(req)?;
    if let Some(node) = target.slurm_node() {
        let launcher = node.launcher.clone();
        return launcher
            .run(node, target, inner, stdin, req.timeout, io)
            .await;
    }
    single(target, inner, stdin, req.timeout, io).await
}

/// One command, one step.
async fn single(
    target: &Target,
    inner: Vec<OsString>,
    stdin: Option<Vec<u8>>,
    timeout: Option<Duration>,
    io: &ExecIo<'_>,
) -> Result<ExecOutcome, String> {
    let (task, stdin, marks) = task(inner, stdin);
    let (node, argv) = below(target, task).expect("called for a Slurm chain");
    let argv = node.spec.srun(argv);
    let step: RefCell<Option<String>> = RefCell::new(None);
    let exit: Cell<Option<i32>> = Cell::new(None);
    let started = Cell::new(false);
    let on_line = |stream: Stream, line: &str, continues: bool| {
        if stream == Stream::Stderr {
            if let Some(rest) = line.strip_prefix(&marks.task) {
                // The task says it once, before the command starts.
                if step.borrow().is_none() {
                    if let Some((s, _, _)) = parse_task(rest) {
                        *step.borrow_mut() = Some(s);
                    }
                }
                return;
            }
            if let Some(rest) = line.strip_prefix(&marks.exit) {
                exit.set(rest.trim().parse().ok());
                return;
            }
        }
        (io.on_line)(stream, line, continues)
    };
    let on_group = |g: &Group| {
        started.set(true);
        if let Some(report) = io.on_group {
            report(g);
        }
    };
    let wrapped = ExecIo {
        on_line: &on_line,
        deadline: io.deadline,
        cancel: io.cancel,
        abort_at: io.abort_at,
        on_group: Some(&on_group),
    };
    let kill = |pgid: u32| -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>> {
        let known = step.borrow().clone();
        Box::pin(async move {
            match known {
                Some(s) => cancel_step(&s).await,
                None => target.kill_tree(pgid).await,
            }
        })
    };
    let spawn = local::Spawn {
        argv: &argv,
        env: &[],
        cwd: None,
        stdin: Some(stdin),
        timeout,
        group: Some(marks.group.as_bytes().to_vec()),
    };
    let mut out = local::run(spawn, &wrapped, Some(&kill)).await?;
    strip_markers(&mut out.stderr, &marks);
    let stopped = out.timed_out || out.deadline_hit || out.interrupted;
    if stopped {
        // The tree may have outlived srun (a task that ignores TERM): the step goes.
        let known = step.borrow().clone();
        if let Some(s) = known {
            cancel_step(&s).await;
        }
    }
    match exit.get() {
        Some(code) if !stopped => {
            out.code = Some(code);
            out.signal = None;
        }
        _ => {}
    }
    if !started.get() && !stopped && out.code != Some(0) {
        if let Some(why) = target.refused(&String::from_utf8_lossy(&out.stderr)) {
            return Err(format!("cannot run a command on {}: {why}", target.name()));
        }
    }
    Ok(out)
}

/// What a launch on several nodes tells each command in it.
enum Msg {
    Line(Stream, String, bool),
    Group(Group),
    Done(Result<ExecOutcome, String>),
}

/// Requests that may share one launch: the same spec but for the node, and the same
/// words, input and timeout.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    job: Option<u64>,
    partition: Option<String>,
    immediate_s: u64,
    argv: Vec<Vec<u8>>,
    stdin: Option<Vec<u8>>,
    timeout: Option<Duration>,
}

struct Member {
    node: String,
    tx: tokio::sync::mpsc::UnboundedSender<Msg>,
}

#[derive(Default)]
struct Batch {
    members: RefCell<Vec<Member>>,
}

/// Gathers identical commands started at the same moment on nodes of one job or
/// partition into one launch. The first command of a batch waits a few turns of the
/// runtime for others (`parallel` starts its items one after the other, each running up
/// to its command), then launches for all; the others wait for their share of it.
#[derive(Default)]
pub struct Launcher {
    open: RefCell<HashMap<Key, Rc<Batch>>>,
}

impl std::fmt::Debug for Launcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Launcher")
    }
}

/// How many turns of the runtime a batch stays open for commands still on their way.
const GATHER_TURNS: usize = 16;

impl Launcher {
    async fn run(
        &self,
        node: &Rc<SlurmNode>,
        target: &Target,
        inner: Vec<OsString>,
        stdin: Option<Vec<u8>>,
        timeout: Option<Duration>,
        io: &ExecIo<'_>,
    ) -> Result<ExecOutcome, String> {
        let spec = &node.spec;
        let key = Key {
            job: spec.job,
            partition: spec.partition.clone(),
            immediate_s: spec.immediate_s,
            argv: inner.iter().map(|w| w.as_bytes().to_vec()).collect(),
            stdin: stdin.clone(),
            timeout,
        };
        let open = self.open.borrow().get(&key).cloned();
        if let Some(batch) = open {
            let fresh = !batch.members.borrow().iter().any(|m| m.node == spec.node);
            if fresh {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                batch.members.borrow_mut().push(Member {
                    node: spec.node.clone(),
                    tx,
                });
                while let Some(msg) = rx.recv().await {
                    match msg {
                        Msg::Line(s, l, c) => (io.on_line)(s, &l, c),
                        Msg::Group(g) => {
                            if let Some(report) = io.on_group {
                                report(&g);
                            }
                        }
                        Msg::Done(result) => return result,
                    }
                }
                return Err(format!(
                    "cannot run a command on {}: the launch it shared with other nodes ended early",
                    target.name()
                ));
            }
            return single(target, inner, stdin, timeout, io).await;
        }
        let batch = Rc::new(Batch::default());
        self.open.borrow_mut().insert(key.clone(), batch.clone());
        let mut seen = 0;
        for turn in 0..GATHER_TURNS {
            tokio::task::yield_now().await;
            let now = batch.members.borrow().len();
            if turn >= 2 && now == seen {
                break;
            }
            seen = now;
        }
        self.open.borrow_mut().remove(&key);
        let others: Vec<Member> = std::mem::take(&mut *batch.members.borrow_mut());
        if others.is_empty() {
            return single(target, inner, stdin, timeout, io).await;
        }
        many(spec, target, inner, stdin, timeout, io, others).await
    }
}

/// `N: text` (srun --label; the number may be padded): the task and its line.
fn split_label(line: &[u8]) -> Option<(u32, &[u8])> {
    let start = line.iter().position(|&b| b != b' ')?;
    let rest = &line[start..];
    let colon = rest.iter().position(|&b| b == b':')?;
    let rank = std::str::from_utf8(&rest[..colon]).ok()?.parse().ok()?;
    let text = rest[colon + 1..]
        .strip_prefix(b" ")
        .unwrap_or(&rest[colon + 1..]);
    Some((rank, text))
}

/// A line of output: its stream, its text, whether it continues in the next.
type Line = (Stream, String, bool);

/// One launch for the leader (member 0, `io`) and `others`, split back per node.
async fn many(
    spec: &SlurmSpec,
    target: &Target,
    inner: Vec<OsString>,
    stdin: Option<Vec<u8>>,
    timeout: Option<Duration>,
    io: &ExecIo<'_>,
    others: Vec<Member>,
) -> Result<ExecOutcome, String> {
    let mut nodes = vec![spec.node.clone()];
    nodes.extend(others.iter().map(|m| m.node.clone()));
    let (task, stdin, marks) = task(inner, stdin);
    let argv = spec.srun_many(&nodes, task);
    // Task rank → member index (0: the leader), learnt from each task's marker; lines
    // of a task not yet known wait for it.
    let member_of: RefCell<HashMap<u32, usize>> = RefCell::new(HashMap::new());
    let waiting: RefCell<HashMap<u32, Vec<Line>>> = RefCell::new(HashMap::new());
    let step: RefCell<Option<String>> = RefCell::new(None);
    let exits: RefCell<HashMap<usize, i32>> = RefCell::new(HashMap::new());
    let started: RefCell<Vec<bool>> = RefCell::new(vec![false; nodes.len()]);
    let send = |i: usize, msg: Msg| {
        if i == 0 {
            match msg {
                Msg::Line(s, l, c) => (io.on_line)(s, &l, c),
                Msg::Group(g) => {
                    if let Some(report) = io.on_group {
                        report(&g)
                    }
                }
                Msg::Done(_) => {}
            }
        } else {
            let _ = others[i - 1].tx.send(msg);
        }
    };
    let on_line = |stream: Stream, line: &str, continues: bool| {
        let Some((rank, text)) = split_label(line.as_bytes()) else {
            // srun's own line: every command of the launch is told.
            for i in 0..nodes.len() {
                send(i, Msg::Line(stream, line.to_string(), continues));
            }
            return;
        };
        let text = String::from_utf8_lossy(text).into_owned();
        if let Some(rest) = text
            .strip_prefix(&marks.task)
            .filter(|_| !member_of.borrow().contains_key(&rank))
        {
            if let Some((s, _, node)) = parse_task(rest) {
                *step.borrow_mut() = Some(s);
                if let Some(i) = nodes.iter().position(|n| *n == node) {
                    member_of.borrow_mut().insert(rank, i);
                    for (s, l, c) in waiting.borrow_mut().remove(&rank).unwrap_or_default() {
                        send(i, Msg::Line(s, l, c));
                    }
                }
            }
            return;
        }
        let Some(i) = member_of.borrow().get(&rank).copied() else {
            waiting
                .borrow_mut()
                .entry(rank)
                .or_default()
                .push((stream, text, continues));
            return;
        };
        if let Some(rest) = text.strip_prefix(&marks.exit) {
            if let Ok(code) = rest.trim().parse() {
                exits.borrow_mut().insert(i, code);
            }
        } else if let Some(g) = text
            .strip_prefix(&marks.group)
            .filter(|_| !started.borrow()[i])
            .and_then(Group::parse)
        {
            started.borrow_mut()[i] = true;
            send(i, Msg::Group(g));
        } else {
            send(i, Msg::Line(stream, text, continues));
        }
    };
    let wrapped = ExecIo {
        on_line: &on_line,
        deadline: io.deadline,
        cancel: io.cancel,
        abort_at: io.abort_at,
        on_group: None,
    };
    let spawn = local::Spawn {
        argv: &argv,
        env: &[],
        cwd: None,
        stdin: Some(stdin),
        timeout,
        group: None,
    };
    let result = local::run(spawn, &wrapped, None).await;
    let out = match result {
        Ok(out) => out,
        Err(e) => {
            for m in &others {
                let _ = m.tx.send(Msg::Done(Err(e.clone())));
            }
            return Err(e);
        }
    };
    let stopped = out.timed_out || out.deadline_hit || out.interrupted;
    if stopped {
        let known = step.borrow().clone();
        if let Some(s) = known {
            cancel_step(&s).await;
        }
    }
    // Each command's share of the captured bytes, byte for byte.
    let mut shares: Vec<ExecOutcome> = (0..nodes.len()).map(|_| ExecOutcome::default()).collect();
    let members = member_of.borrow();
    for (stream, bytes) in [(Stream::Stdout, &out.stdout), (Stream::Stderr, &out.stderr)] {
        for line in bytes.split_inclusive(|&b| b == b'\n') {
            let (targets, text): (Vec<usize>, &[u8]) = match split_label(line) {
                Some((rank, text)) => match members.get(&rank) {
                    Some(&i) => (vec![i], text),
                    None => continue,
                },
                None => ((0..nodes.len()).collect(), line),
            };
            if marks.ours(text) {
                continue;
            }
            for i in targets {
                let store = match stream {
                    Stream::Stdout => &mut shares[i].stdout,
                    Stream::Stderr => &mut shares[i].stderr,
                };
                store.extend_from_slice(text);
            }
        }
    }
    let exits = exits.borrow();
    let started = started.borrow();
    let mut leader = None;
    for (i, mut share) in shares.into_iter().enumerate() {
        share.duration = out.duration;
        share.timed_out = out.timed_out;
        share.deadline_hit = out.deadline_hit;
        share.interrupted = out.interrupted;
        share.stdout_truncated = out.stdout_truncated;
        share.stderr_truncated = out.stderr_truncated;
        let result = match exits.get(&i) {
            Some(&code) if !stopped => {
                share.code = Some(code);
                Ok(share)
            }
            _ if stopped => {
                share.code = out.code;
                share.signal = out.signal;
                Ok(share)
            }
            _ => {
                let said = String::from_utf8_lossy(&share.stderr).into_owned();
                let name = if i == 0 {
                    target.name()
                } else {
                    SlurmSpec {
                        node: nodes[i].clone(),
                        ..spec.clone()
                    }
                    .name()
                };
                match refused(&said) {
                    Some(why) if !started[i] => {
                        Err(format!("cannot run a command on {name}: {why}"))
                    }
                    _ => {
                        // The task ended without its report (its node failed, or it was
                        // killed): srun's status stands for it.
                        share.code = out.code.filter(|&c| c != 0).or(Some(1));
                        Ok(share)
                    }
                }
            }
        };
        if i == 0 {
            leader = Some(result);
        } else {
            let _ = others[i - 1].tx.send(Msg::Done(result));
        }
    }
    leader.expect("the leader is member 0")
}

#[cfg(test)]
mod tests;
