//! Fault drills: the real `runbook` binary against real sshd instances (common/sshd.rs),
//! with the fault injected from outside while it runs, and the run record checked after.
//!
//! 1. the host's sshd dies mid-step, comes back, and `--resume last` finishes the run;
//! 2. SIGTERM on a remote host, SIGINT and SIGTERM inside a remote container (SIGINT on a
//!    remote host is `remote_failures.rs`, local commands are `interrupt.rs`);
//! 3. the state dir on a read-only or a full filesystem (real tmpfs mounts);
//! 4. a remote output flood: 5,000 lines/s for `RUNBOOK_DRILL_SECONDS` (default 60);
//! 5. 20 hosts in `parallel`, 3 of them down.
//!
//! Each drill prints what it measured (`cargo test --test suite drills:: -- --nocapture`);
//! docs/RELIABILITY.md lists the results.
use crate::common::mount::Mounted;
use crate::common::running::{alive, stat_fields, Reap, Running};
use crate::common::sshd::Fleet;
use crate::common::*;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// helpers

fn fixture(name: &str) -> PathBuf {
    repo().join("tests/runbooks/drills").join(name)
}

/// `--set NAME=VALUE` for a path.
fn set(name: &str, value: &Path) -> [String; 2] {
    ["--set".into(), format!("{name}={}", value.display())]
}

/// `runbook run FIXTURE --yes --json`.
fn drill<'e>(env: &'e Env, fixture_name: &str) -> Run<'e> {
    Run::new(env, fixture(fixture_name)).yes().json()
}

fn ppid(pid: i32) -> Option<i32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn cmdline(pid: i32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&raw).replace('\0', " ")
}

fn all_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Every live descendant of `root`.
fn descendants(root: i32) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = all_pids()
        .into_iter()
        .filter_map(|p| Some((p, ppid(p)?)))
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found.into_iter().filter(|&p| alive(p)).collect()
}

/// Live processes whose command line contains `needle`.
fn with_cmdline(needle: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    all_pids()
        .into_iter()
        .filter(|&p| p != me && alive(p) && cmdline(p).contains(needle))
        .collect()
}

/// Polls up to `limit` for all of `pids` to be gone; returns the survivors, described.
fn survivors(pids: &[i32], limit: Duration) -> Vec<String> {
    let until = Instant::now() + limit;
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || Instant::now() >= until {
            return left
                .iter()
                .map(|p| format!("{p}: {}", cmdline(*p)))
                .collect();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn record_path(env: &Env, run_id: &str) -> PathBuf {
    env.state().join("runs").join(format!("{run_id}.jsonl"))
}

fn record_of(env: &Env, run_id: &str) -> Vec<Event> {
    complete_record(&record_path(env, run_id))
}

/// The run ids in the state dir.
fn run_ids(env: &Env) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(env.state().join("runs"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_str()?
                        .strip_suffix(".jsonl")
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

fn started_steps(events: &[Event]) -> Vec<usize> {
    pick!(events, Event::StepStarted { index, .. } => *index)
}

/// The `reason` of the `step_skipped` of the step at `index` (the test fails when it was
/// not skipped).
fn skip_reason(events: &[Event], index: usize) -> String {
    match step_skipped(events, index) {
        Some(Event::StepSkipped { reason, .. }) => reason.clone(),
        _ => panic!("step {index} was not skipped: {events:#?}"),
    }
}

/// The run's end: (outcome, exit code, failed steps).
fn run_end(events: &[Event]) -> (RunOutcome, i32, usize) {
    match events.last() {
        Some(Event::RunFinished {
            outcome,
            exit_code,
            failed,
            ..
        }) => (*outcome, *exit_code, *failed),
        _ => panic!("the events end with run_finished: {events:#?}"),
    }
}

// ---------------------------------------------------------------------------------------
// 1: sshd dies while a step runs; the host comes back; --resume last finishes the run

#[test]
fn host_lost_mid_step_then_resume_finishes_the_run() {
    require_sshd!();
    let mut fleet = Fleet::start(1);
    let env = Env::new();
    let dir = env.scratch();
    let mut args = set("dir", &dir).to_vec();
    args.extend(fleet.args());

    let mut run = drill(&env, "host_lost.lua").args(&args).spawn();
    let long = run.wait_pid(&dir.join("long.pid"), Duration::from_secs(10));
    let _reap = Reap(vec![long]);
    let killed = Instant::now();
    fleet.node("node1").kill();
    let code = run.code(Duration::from_secs(15));
    let noticed = killed.elapsed();
    let out = run.output();
    assert_eq!(code, 1, "{out}");
    assert!(
        noticed < Duration::from_secs(5),
        "noticing the dead host took {noticed:?}"
    );
    // With no terminal to hang up, the remote command outlives its connection: there is
    // nothing left to ask the host to kill it with.
    let orphan = alive(long);
    drop(_reap);
    assert!(survivors(&[long], Duration::from_secs(2)).is_empty());

    let ids = run_ids(&env);
    assert_eq!(ids.len(), 1, "{ids:?}");
    let first_id = ids[0].clone();
    let first = record_of(&env, &first_id);
    assert_eq!(step_outcome(&first, 0), StepOutcome::Changed);
    let err = step_error(&first, 1);
    assert!(err.contains("connection lost to node1"), "{err}\n{out}");
    assert_eq!(skip_reason(&first, 2), "an earlier step failed");
    assert_ne!(step_outcome(&first, 3), StepOutcome::Failed);
    assert_eq!(file_lines(&dir.join("always.log")), ["ran"]);
    assert_eq!(run_end(&first), (RunOutcome::Failed, 1, 1));

    // The host comes back on the same port; the long step can now finish.
    fleet.node("node1").start();
    std::fs::write(dir.join("go"), "").unwrap();
    let resumed_at = Instant::now();
    let o = drill(&env, "host_lost.lua")
        .args(["--resume", "last"])
        .args(&args)
        .timeout(Duration::from_secs(60))
        .expect_exit(0)
        .run();
    let resume_took = resumed_at.elapsed();
    let show = o.describe();
    let ids = run_ids(&env);
    assert_eq!(ids.len(), 2, "{ids:?}");
    let second_id = ids.iter().find(|i| **i != first_id).unwrap();
    let second = record_of(&env, second_id);
    let Event::RunStarted { resumed_from, .. } = &second[0] else {
        panic!("the record starts with run_started: {second:#?}")
    };
    assert_eq!(resumed_from.as_deref(), Some(first_id.as_str()), "{show}");
    assert_eq!(skip_reason(&second, 0), format!("done in run {first_id}"));
    assert_eq!(started_steps(&second), [1, 2, 3], "{show}");
    for i in 1..=3 {
        assert_ne!(step_outcome(&second, i), StepOutcome::Failed, "step {i}");
    }
    assert_eq!(run_end(&second).0, RunOutcome::Ok);
    // What ran where, from the host's side.
    assert_eq!(file_lines(&dir.join("prepare.log")), ["prepared"]);
    assert_eq!(file_lines(&dir.join("long.log")), ["done"]);
    assert_eq!(file_lines(&dir.join("after.log")), ["after"]);
    assert_eq!(file_lines(&dir.join("always.log")), ["ran", "ran"]);
    eprintln!(
        "drill 1: dead host noticed in {noticed:?}; remote command orphaned by the lost \
         connection: {orphan}; resumed run took {resume_took:?}"
    );
}

// ---------------------------------------------------------------------------------------
// 2: SIGINT / SIGTERM while a remote process tree runs

/// The remote tree of the drill's `long` step: the shell, its background child, and the
/// shell's ancestors up to (not including) the sshd session that started them: the
/// wrappers (`pct`, `unshare`, `setsid`) a container hop adds.
fn remote_tree(shell: i32, child: i32) -> Vec<i32> {
    let mut tree = vec![child, shell];
    let mut p = shell;
    while let Some(parent) = ppid(p) {
        if parent <= 1 || comm(parent).starts_with("sshd") {
            break;
        }
        tree.push(parent);
        p = parent;
    }
    tree
}

fn signal_remote(sig: i32, code: i32, name: &str, container: bool) {
    let fleet = Fleet::start(1);
    let env = Env::new();
    let dir = env.scratch();
    let (piddir_remote, piddir_here) = if container {
        let ct = fleet.container(200);
        (PathBuf::from("/root"), ct.join("root"))
    } else {
        (dir.clone(), dir.clone())
    };
    let mut args = set("dir", &dir).to_vec();
    args.extend(set("piddir", &piddir_remote));
    if container {
        args.extend(["--set".into(), "ctid=200".into()]);
    }
    args.extend(fleet.args());
    let mut run = drill(&env, "signal_remote.lua").args(&args).spawn();
    let shell = run.wait_pid(&piddir_here.join("shell.pid"), Duration::from_secs(10));
    let child: i32 = std::fs::read_to_string(piddir_here.join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let remote = remote_tree(shell, child);
    // This machine's side: runbook's own children, and the SSH master (which daemonizes,
    // so it is found by the ssh_config this fleet's runs use).
    let mut local = descendants(run.pid());
    let masters: Vec<i32> = with_cmdline(&fleet.ssh_config().display().to_string())
        .into_iter()
        .filter(|&p| comm(p) == "ssh")
        .collect();
    local.extend(masters.iter().copied());
    let _reap = Reap(remote.iter().chain(&local).copied().collect());
    assert!(
        remote.iter().all(|&p| alive(p)),
        "the remote tree runs before the signal"
    );
    assert!(!masters.is_empty(), "an ssh master serves the run");
    let described: Vec<String> = remote
        .iter()
        .chain(&local)
        .map(|p| format!("{p} {}", comm(*p)))
        .collect();

    let sent = Instant::now();
    run.signal(sig);
    let got = run.code(Duration::from_secs(10));
    let took = sent.elapsed();
    let out = run.output();
    assert_eq!(got, code, "exit code after {name}\n{out}");
    assert!(
        took < Duration::from_secs(5),
        "runbook took {took:?} to stop after {name}\n{out}"
    );
    let left = survivors(&remote, Duration::from_secs(3));
    assert!(
        left.is_empty(),
        "remote processes survived {name}: {left:#?}"
    );
    let left = survivors(&local, Duration::from_secs(3));
    assert!(
        left.is_empty(),
        "local processes survived {name}: {left:#?}"
    );
    assert!(dir.join("always").exists(), "the always step ran\n{out}");
    assert!(!dir.join("later").exists(), "the later step did not run");

    let ids = run_ids(&env);
    assert_eq!(ids.len(), 1, "{ids:?}");
    let events = record_of(&env, &ids[0]);
    let (outcome, exit_code, _) = run_end(&events);
    assert_eq!((outcome, exit_code), (RunOutcome::Interrupted, code));
    let err = step_error(&events, 0);
    assert!(err.contains(&format!("interrupted ({name})")), "{err}");
    assert_eq!(skip_reason(&events, 1), "the run was interrupted");
    assert_ne!(step_outcome(&events, 2), StepOutcome::Failed);
    eprintln!(
        "drill 2: {name} {}: exit {got} after {took:?}; gone: {described:?}",
        if container {
            "in a container on a remote host"
        } else {
            "on a remote host"
        }
    );
}

#[test]
fn sigterm_stops_the_remote_tree_and_the_local_one() {
    require_sshd!();
    signal_remote(libc::SIGTERM, 143, "SIGTERM", false);
}

#[test]
fn sigint_stops_the_tree_in_a_remote_container() {
    require_sshd!();
    signal_remote(libc::SIGINT, 130, "SIGINT", true);
}

#[test]
fn sigterm_stops_the_tree_in_a_remote_container() {
    require_sshd!();
    signal_remote(libc::SIGTERM, 143, "SIGTERM", true);
}

// ---------------------------------------------------------------------------------------
// 3: a state dir that cannot take the record: nothing may change

fn statvfs(dir: &Path) -> libc::statvfs {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path and a zeroed out-struct of the right type.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        assert_eq!(libc::statvfs(c.as_ptr(), &mut st), 0);
        st
    }
}

/// Runs the one-change drill with `--state-dir STATE`: it must exit 2 before its step,
/// say why, and leave `changed` uncreated.
fn refuses_without_a_record(env: &Env, state: &Path, why: &str) -> String {
    let dir = env.scratch();
    let stderr = Run::new(env, fixture("state_dir.lua"))
        .yes()
        .arg("--state-dir")
        .arg(state)
        .args(set("dir", &dir))
        .timeout(Duration::from_secs(30))
        .expect_exit(2)
        .run()
        .stderr_text();
    assert!(
        !dir.join("changed").exists(),
        "the first step's change happened without a record\n{stderr}"
    );
    assert!(stderr.contains(why), "names the cause ({why}): {stderr}");
    assert!(
        stderr.contains(&state.display().to_string()),
        "names the state dir: {stderr}"
    );
    assert!(
        stderr.contains("--state-dir"),
        "says how to choose another place: {stderr}"
    );
    assert!(
        !stderr.contains("✓") && !stderr.contains("✗"),
        "no step ran: {stderr}"
    );
    stderr
}

#[test]
fn read_only_state_dir_refuses_to_start() {
    let env = Env::new();
    let state = env.tmp.path().join("ro-state");
    let Some(mount) = Mounted::tmpfs(&state, "size=1m,mode=0755") else {
        return;
    };
    // Earlier runs' records are there; the filesystem then turned read-only.
    std::fs::create_dir_all(state.join("runs")).unwrap();
    mount.remount("ro");
    let stderr = refuses_without_a_record(&env, &state, "Read-only file system");
    assert_eq!(
        std::fs::read_dir(state.join("runs")).unwrap().count(),
        0,
        "nothing was written"
    );
    eprintln!("drill 3 (read-only): {}", stderr.trim());
}

#[test]
fn full_state_dir_refuses_to_start() {
    let env = Env::new();
    let state = env.tmp.path().join("full-state");
    let Some(_mount) = Mounted::tmpfs(&state, "size=64k,mode=0755") else {
        return;
    };
    std::fs::create_dir_all(state.join("runs")).unwrap();
    let fill = Command::new("dd")
        .args(["if=/dev/zero", "bs=4096", "status=none"])
        .arg(format!("of={}", state.join("fill").display()))
        .output()
        .unwrap();
    assert!(!fill.status.success(), "dd stops at ENOSPC");
    let st = statvfs(&state);
    let (free, total, block) = (st.f_bavail, st.f_blocks, st.f_bsize);
    assert!(
        free < 1,
        "less than one block left: {} of {} bytes",
        free * block,
        total * block
    );
    let stderr = refuses_without_a_record(&env, &state, "No space left on device");
    // What was left behind: at most an empty record file, which `history` ignores.
    let left: Vec<u64> = std::fs::read_dir(state.join("runs"))
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .collect();
    assert!(left.iter().all(|&len| len == 0), "{left:?}");
    // history still works.
    Run::cmd(
        &env,
        [
            "history".as_ref(),
            "--state-dir".as_ref(),
            state.as_os_str(),
        ],
    )
    .expect_exit(0)
    .run();
    eprintln!(
        "drill 3 (full): {}\n  left in runs/: {} empty file(s)",
        stderr.trim(),
        left.len()
    );
}

/// The state dir fills up in the middle of a run (here: the first step's output fills a
/// 64 KiB filesystem). From then on nothing is recorded, so no further change may start,
/// and the run must not report success.
#[test]
fn state_dir_filling_mid_run_stops_further_changes() {
    let env = Env::new();
    let state = env.tmp.path().join("filling-state");
    let Some(_mount) = Mounted::tmpfs(&state, "size=64k,mode=0755") else {
        return;
    };
    let dir = env.scratch();
    let o = Run::new(&env, fixture("state_fills.lua"))
        .yes()
        .arg("--state-dir")
        .arg(&state)
        .args(set("dir", &dir))
        .timeout(Duration::from_secs(30))
        .run();
    let stderr = o.stderr_text();
    assert!(
        stderr.contains("No space left on device"),
        "says why: {stderr}"
    );
    assert!(
        !dir.join("changed").exists(),
        "a change ran after the record stopped being kept\n{stderr}"
    );
    assert_ne!(o.status.code(), Some(0), "{stderr}");
}

// ---------------------------------------------------------------------------------------
// 4: a flood of remote output

/// VmRSS and VmHWM of a live process, in KiB.
fn memory_kib(pid: i32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// What memory a run used: the largest VmRSS sampled while it ran, and its peak (VmHWM,
/// the kernel's high-water mark of runbook's own memory, which also covers a spike
/// between two samples). Not `ru_maxrss` from `wait4`: at `exec` Linux folds the
/// spawning process's high-water mark into the child's, so it reports this test
/// process's peak whenever that is larger (`/bin/true` spawned by a 300 MiB process
/// reports 313 MiB). Once every test file shared one binary it read 161 MiB here.
struct Memory {
    sampled_kib: u64,
    peak_kib: u64,
    samples: u64,
    /// `ru_maxrss`, printed beside the peak to show the difference, never asserted.
    maxrss_kib: u64,
}

/// Samples runbook's memory every 100 ms until it exits; returns its exit code. Fails the test after `limit`.
fn watch_memory(run: &mut Running, limit: Duration) -> (Option<i32>, Memory) {
    let pid = run.pid();
    let started = Instant::now();
    let mut m = Memory {
        sampled_kib: 0,
        peak_kib: 0,
        samples: 0,
        maxrss_kib: 0,
    };
    loop {
        if let Some((rss, hwm)) = memory_kib(pid) {
            m.sampled_kib = m.sampled_kib.max(rss);
            m.peak_kib = m.peak_kib.max(hwm);
            m.samples += 1;
        }
        let mut status = 0;
        // SAFETY: waits only for the child this test started; the structs are owned here.
        let (got, ru) = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            let got = libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru);
            (got, ru)
        };
        if got == pid {
            m.maxrss_kib = ru.ru_maxrss as u64;
            let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
            return (code, m);
        }
        if started.elapsed() > limit {
            panic!("runbook did not end within {limit:?}\n{}", run.output());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[derive(serde::Deserialize)]
struct Ev {
    event: String,
    #[serde(default)]
    stream: Option<String>,
    #[serde(default)]
    line: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[test]
fn output_flood_keeps_memory_bounded_and_records_every_line() {
    require_sshd!();
    const RATE: u64 = 5000;
    const LIMIT_KIB: u64 = 150 * 1024;
    let seconds: u64 = std::env::var("RUNBOOK_DRILL_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let expected = seconds * RATE;
    let fleet = Fleet::start(1);
    let env = Env::new();
    let mut args: Vec<String> = vec![
        "--set".into(),
        format!("seconds={seconds}"),
        "--set".into(),
        format!("rate={RATE}"),
    ];
    args.extend(fleet.args());
    let started = Instant::now();
    let mut run = drill(&env, "flood.lua").args(&args).spawn();
    let (code, mem) = watch_memory(&mut run, Duration::from_secs(seconds * 2 + 30));
    let took = started.elapsed();
    assert_eq!(code, Some(0), "{}", run.output());

    let ids = run_ids(&env);
    assert_eq!(ids.len(), 1);
    let path = env.state().join("runs").join(format!("{}.jsonl", ids[0]));
    let text = std::fs::read_to_string(&path).unwrap();
    let record_bytes = text.len();
    assert!(text.ends_with('\n'));
    let (mut count, mut stderr_lines, mut captured) = (0u64, 0u64, String::new());
    let mut last_kind = String::new();
    for (i, l) in text.lines().enumerate() {
        let ev: Ev = serde_json::from_str(l)
            .unwrap_or_else(|e| panic!("record line {} is not JSON ({e}): {l}", i + 1));
        match ev.event.as_str() {
            "output" if ev.stream.as_deref() == Some("stdout") => {
                count += 1;
                let want =
                    format!("line {count} of the flood 0123456789abcdefghijklmnopqrstuvwxyz");
                let line = ev.line.unwrap_or_default();
                assert!(
                    line == want,
                    "output event {count} (record line {}) is {line:?}, expected {want:?}",
                    i + 1
                );
            }
            "output" => stderr_lines += 1,
            "log" => captured = ev.message.unwrap_or_default(),
            _ => {}
        }
        last_kind = ev.event;
    }
    assert_eq!(last_kind, "run_finished");
    assert_eq!(
        count, expected,
        "every line printed is in the record, in order"
    );
    assert_eq!(stderr_lines, 0);
    assert!(
        mem.peak_kib < LIMIT_KIB,
        "runbook's peak RSS was {} MiB (limit {} MiB)",
        mem.peak_kib / 1024,
        LIMIT_KIB / 1024
    );
    eprintln!(
        "drill 4: {count} lines in {took:.1?} ({:.0} lines/s), peak RSS {:.1} MiB (max sampled \
         VmRSS {:.1} MiB, {} samples; ru_maxrss {:.1} MiB), record {:.1} MiB; {captured}",
        count as f64 / took.as_secs_f64(),
        mem.peak_kib as f64 / 1024.0,
        mem.sampled_kib as f64 / 1024.0,
        mem.samples,
        mem.maxrss_kib as f64 / 1024.0,
        record_bytes as f64 / (1024.0 * 1024.0),
    );
}

/// The flood's other shape: one line of 100 MiB with no newline. Memory must stay bounded
/// here too (the line is output, not something runbook has to hold whole), and every byte
/// must still reach the record.
#[test]
fn one_huge_line_keeps_memory_bounded() {
    const MIB: u64 = 100;
    const LIMIT_KIB: u64 = 150 * 1024;
    let env = Env::new();
    let started = Instant::now();
    let mut run = drill(&env, "long_line.lua")
        .arg(format!("--set=mib={MIB}"))
        .spawn();
    let (code, mem) = watch_memory(&mut run, Duration::from_secs(120));
    let took = started.elapsed();
    assert_eq!(code, Some(0), "{}", run.output());
    let ids = run_ids(&env);
    let path = env.state().join("runs").join(format!("{}.jsonl", ids[0]));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut bytes = 0u64;
    for l in text.lines() {
        let ev: Ev = serde_json::from_str(l).unwrap();
        if ev.event == "output" {
            let line = ev.line.unwrap_or_default();
            assert!(line.bytes().all(|b| b == b'a'));
            bytes += line.len() as u64;
        }
    }
    eprintln!(
        "drill 4b: a {MIB} MiB line in {took:.1?}: peak RSS {:.1} MiB, {bytes} bytes in the record",
        mem.peak_kib as f64 / 1024.0
    );
    assert_eq!(bytes, MIB * 1024 * 1024, "every byte is in the record");
    assert!(
        mem.peak_kib < LIMIT_KIB,
        "runbook's peak RSS was {} MiB for one {MIB} MiB line (limit {} MiB)",
        mem.peak_kib / 1024,
        LIMIT_KIB / 1024
    );
}

// ---------------------------------------------------------------------------------------
// 5: 20 hosts in parallel, 3 of them down

/// The two 20-host drills run one after the other: 40 sshd instances and 40 handshakes
/// at once on a 2-core machine, beside the output flood, is a load test of its own.
static FLEET20: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs fleet20.lua on the 20 hosts of `fleet`, which must fail (exit 1) with a marker
/// made by every host but the `failing` ones; returns how long the run took.
fn run_fleet20(env: &Env, fleet: &Fleet, failing: &[&str], limit: Duration) -> Duration {
    let marks = env.scratch();
    let started = Instant::now();
    let o = drill(env, "fleet20.lua")
        .args(set("dir", &marks))
        .ssh(fleet)
        .timeout(limit)
        .run();
    let took = started.elapsed();
    let errors: Vec<String> = o
        .stdout_text()
        .lines()
        .filter(|l| l.contains("\"error\""))
        .map(str::to_string)
        .collect();
    let show = format!("{:?}\n{}\n{}", o.status, o.stderr_text(), errors.join("\n"));
    assert_eq!(o.status.code(), Some(1), "{show}");
    for i in 1..=20 {
        let name = format!("node{i}");
        assert_eq!(
            marks.join(&name).exists(),
            !failing.contains(&name.as_str()),
            "{name}'s marker\n{show}"
        );
    }
    took
}

#[test]
fn twenty_hosts_in_parallel_with_three_down() {
    require_sshd!();
    let _one_fleet = FLEET20.lock().unwrap_or_else(|e| e.into_inner());
    const DOWN: [&str; 3] = ["node4", "node11", "node17"];
    let mut fleet = Fleet::start(20);
    for n in DOWN {
        fleet.node(n).kill();
    }
    let env = Env::new();
    let took = run_fleet20(&env, &fleet, &DOWN, Duration::from_secs(90));
    let ids = run_ids(&env);
    let events = record_of(&env, &ids[0]);
    let err = step_error(&events, 0);
    assert!(err.contains("3 of 20 failed"), "{err}");
    let failed_lines: Vec<&str> = err.lines().skip(1).collect();
    assert_eq!(failed_lines.len(), 3, "one line per failed host: {err}");
    for (line, host) in failed_lines.iter().zip(DOWN) {
        assert!(
            line.trim_start().starts_with(&format!("{host}: ")),
            "{line}"
        );
        assert!(
            line.contains(&format!("cannot connect to {host}")),
            "{line}"
        );
        assert!(line.contains("Connection refused"), "the cause: {line}");
    }
    let oks = logs(&events, None)
        .iter()
        .filter(|m| m.ends_with(": ok"))
        .count();
    assert_eq!(oks, 17, "{events:#?}");
    assert!(step_skipped(&events, 1).is_none());
    assert_ne!(step_outcome(&events, 1), StepOutcome::Failed);
    assert_eq!(run_end(&events).1, 1);
    eprintln!("drill 5: 17 of 20 hosts changed, 3 refused, in {took:?}\n{err}");
}

/// The same fleet, with the 3 hosts silent instead of down (they accept the TCP connection
/// and never answer, as a hung or firewalled host does): each fails after its connect
/// timeout (10 s), and the other 17 must not wait behind them.
#[test]
fn twenty_hosts_in_parallel_with_three_silent() {
    require_sshd!();
    let _one_fleet = FLEET20.lock().unwrap_or_else(|e| e.into_inner());
    const SILENT: [&str; 3] = ["node4", "node11", "node17"];
    let mut fleet = Fleet::start(20);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming() {
            held.push(s);
        }
    });
    for n in SILENT {
        fleet.node(n).kill();
        fleet.node(n).port = port;
    }
    fleet.write_client_files();
    let env = Env::new();
    let took = run_fleet20(&env, &fleet, &SILENT, Duration::from_secs(120));
    let id = &run_ids(&env)[0];
    let events = record_of(&env, id);
    let err = step_error(&events, 0);
    assert!(err.contains("3 of 20 failed"), "{err}");
    for host in SILENT {
        assert!(
            err.lines().any(
                |l| l.trim_start().starts_with(&format!("{host}: ")) && l.contains("timed out")
            ),
            "{host} failed on its connect timeout: {err}"
        );
    }
    // The healthy hosts' changes start at once, not one connect timeout per silent host
    // listed before them; the silent hosts time out together.
    let stamped = read_stamped(&record_path(&env, id));
    let first = chrono_ms(&stamped[0].ts);
    let latest_start = stamped
        .iter()
        .filter(|s| matches!(s.event, Event::ActionStarted { .. }))
        .map(|s| chrono_ms(&s.ts) - first)
        .max()
        .unwrap();
    assert!(
        latest_start < 5_000,
        "the last healthy host started its change {latest_start} ms into the run\n{err}"
    );
    assert!(
        took < Duration::from_secs(20),
        "3 silent hosts with a 10 s connect timeout held the run for {took:?}"
    );
    eprintln!("drill 5b: 17 of 20 hosts changed, 3 silent, in {took:?}, last change started after {latest_start} ms");
}

/// Milliseconds since the epoch of an RFC 3339 UTC timestamp as events carry them.
fn chrono_ms(ts: &str) -> i64 {
    let t = humantime::parse_rfc3339(ts).unwrap_or_else(|e| panic!("{ts}: {e}"));
    t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}
