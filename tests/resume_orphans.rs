//! `--resume` after a run that was killed (`kill -9`) or lost its connection while a
//! command ran: the command outlives that run, and the resumed run must stop it (named in
//! its record) before it runs the step again, so that one copy runs, never two; or refuse
//! when it cannot check. A process that only has the same number is never touched.
//!
//! Locally, over SSH (common/sshd.rs: sshd on this machine, so the test sees the remote
//! processes) and in a container behind SSH (the `pct` double).
use crate::common;
use crate::common::argv::lua_path;
use crate::common::running::{alive, gone_within, Reap, Running};
use crate::common::sshd::Fleet;
use crate::common::*;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// helpers

/// Where the loop keeps its files: under /var/tmp, which a container (the pct double,
/// with its own /tmp) sees too. Removed when dropped.
struct Scratch(#[allow(dead_code)] tempfile::TempDir);

/// A runbook whose second step runs, on `on` (a Lua expression for a target), a shell
/// loop that appends its pid to `pids`, then a heartbeat to `pids.PID` every 0.1 s, until
/// `stop` exists.
fn heartbeat_runbook(env: &Env, on: &str) -> (PathBuf, PathBuf, PathBuf, Scratch) {
    let scratch = tempfile::Builder::new()
        .prefix("runbook-orphans-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let pids = scratch.path().join("pids");
    let stop = scratch.path().join("stop");
    let rb = env.write(
        "orphan.lua",
        &subst(
            r#"
runbook { name = "orphan" }
local on = @on@
step("prepare", function()
  target("local"):exec({ "true" })
end)
step("beat", function()
  on:exec({ "sh", "-c", 'echo $$ >> "$1"; while [ ! -e "$2" ]; do date +%s%N >> "$1.$$"; sleep 0.1; done', "sh", @pids@, @stop@ })
end)
"#,
            &[("on", &on), ("pids", &lua_path(&pids)), ("stop", &lua_path(&stop))],
        ),
    );
    (rb, pids, stop, Scratch(scratch))
}

/// `runbook run RB --yes`, against `fleet` when there is one.
fn orphan_run<'e>(env: &'e Env, rb: &Path, fleet: Option<&Fleet>) -> Run<'e> {
    let run = Run::new(env, rb).yes();
    match fleet {
        Some(f) => run.ssh(f),
        None => run,
    }
}

/// The pids the heartbeat loop wrote so far, one per copy started.
fn copies(pids: &Path) -> Vec<i32> {
    std::fs::read_to_string(pids)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Waits (while `run` runs) until `n` copies have started; returns their pids.
fn wait_copies(run: &mut Running, pids: &Path, n: usize) -> Vec<i32> {
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let found = copies(pids);
        if found.len() >= n {
            // Its first heartbeat too, so that "it beats" can be checked.
            if !beats(pids, found[n - 1]).is_empty() {
                return found;
            }
        }
        if let Some(status) = run.try_status() {
            panic!(
                "runbook exited ({status:?}) before copy {n} started\n{}",
                run.output()
            );
        }
        assert!(
            Instant::now() < until,
            "copy {n} did not start\n{}",
            run.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn beats(pids: &Path, pid: i32) -> Vec<u128> {
    std::fs::read_to_string(format!("{}.{pid}", pids.display()))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Starts the run, waits for its loop, kills runbook with SIGKILL: returns the pid of the
/// loop it leaves behind, checked to be still beating.
fn killed_run_leaves_a_copy(env: &Env, rb: &Path, pids: &Path, fleet: Option<&Fleet>) -> i32 {
    let mut first = orphan_run(env, rb, fleet).spawn();
    let pid = wait_copies(&mut first, pids, 1)[0];
    // The group reaches the record a moment after the command starts (over SSH and from
    // a container it travels back first): kill once it is there.
    let until = Instant::now() + Duration::from_secs(10);
    while !records(env)[0]
        .iter()
        .any(|e| matches!(e, Event::ActionPgid { step: 1, .. }))
    {
        assert!(Instant::now() < until, "no action_pgid\n{}", first.output());
        std::thread::sleep(Duration::from_millis(20));
    }
    first.signal(libc::SIGKILL);
    first.wait(Duration::from_secs(5));
    let before = beats(pids, pid).len();
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        alive(pid) && beats(pids, pid).len() > before,
        "the killed run's command should outlive it (that is what resume must handle)"
    );
    pid
}

/// All run records, in the order they started. A line still being written (a record
/// read while its run runs) is left out.
fn records(env: &Env) -> Vec<Vec<Event>> {
    let mut all: Vec<Vec<Stamped>> = std::fs::read_dir(env.state().join("runs"))
        .unwrap()
        .flatten()
        .map(|e| read_stamped_so_far(&e.path()))
        .filter(|r| !r.is_empty())
        .collect();
    all.sort_by_key(|r| r[0].ts.clone());
    all.into_iter()
        .map(|r| r.into_iter().map(|s| s.event).collect())
        .collect()
}

fn warnings(record: &[Event]) -> Vec<String> {
    logs(record, Some(Level::Warn))
}

/// The whole flow: kill -9 mid-command, the copy survives; a dry-run resume names it and
/// leaves it; a real resume stops it before it starts the step again, says so in its
/// record, and finishes with one copy having run at a time.
fn resume_stops_the_earlier_copy(fleet: Option<&Fleet>, on: &str, target_name: &str) {
    let env = Env::new();
    let (rb, pids, stop, _scratch) = heartbeat_runbook(&env, on);
    let old = killed_run_leaves_a_copy(&env, &rb, &pids, fleet);
    let _reap = Reap(vec![old]);

    let dry_err = orphan_run(&env, &rb, fleet)
        .args(["--resume", "last"])
        .dry_run()
        .expect_exit(0)
        .run()
        .stderr_text();
    assert!(alive(old), "a dry-run resume stops nothing");
    let dry_record = records(&env).pop().unwrap();
    assert!(
        matches!(&dry_record[0], Event::RunStarted { mode, .. } if mode == "dry-run"),
        "{dry_record:#?}"
    );
    let said = warnings(&dry_record).join("\n");
    assert!(
        said.contains(&format!("process group {old}")) && said.contains("a real resume stops it"),
        "the dry-run names what a real resume would stop: {said}\n{dry_err}"
    );

    resume_and_check(&env, &rb, &pids, &stop, fleet, old, target_name);
}

/// Resumes the last run, which left `old` running: the resumed run must stop it before
/// it starts its own copy, and say so in its record.
fn resume_and_check(
    env: &Env,
    rb: &Path,
    pids: &Path,
    stop: &Path,
    fleet: Option<&Fleet>,
    old: i32,
    target_name: &str,
) {
    let mut resumed = orphan_run(env, rb, fleet)
        .args(["--resume", "last"])
        .spawn();
    let both = wait_copies(&mut resumed, pids, 2);
    let new = both[1];
    let _reap_new = Reap(vec![old, new]);
    assert!(
        !alive(old),
        "the earlier copy (pid {old}) still runs beside the new one (pid {new})\n{}",
        resumed.output()
    );
    let (old_beats, new_beats) = (beats(pids, old), beats(pids, new));
    assert!(
        old_beats.last() < new_beats.first(),
        "the two copies ran at the same time\n{}",
        resumed.output()
    );
    std::fs::write(stop, "").unwrap();
    let code = resumed.code(Duration::from_secs(20));
    assert_eq!(code, 0, "{}", resumed.output());
    assert_eq!(copies(pids).len(), 2, "exactly one new copy");

    let record = records(env).pop().unwrap();
    assert!(
        matches!(
            &record[0],
            Event::RunStarted {
                resumed_from: Some(_),
                ..
            }
        ),
        "{record:?}"
    );
    let said = warnings(&record);
    assert_eq!(said.len(), 1, "{said:?}");
    let w = &said[0];
    for part in [
        "step \"beat\"",
        &format!("on {target_name}"),
        &format!("process group {old}"),
        "while [ ! -e",
        "stopped it before resuming",
    ] {
        assert!(w.contains(part), "the warning names {part:?}: {w}");
    }
    // The warning comes before the step runs again.
    let warn_at = record
        .iter()
        .position(|e| matches!(e, Event::Log { .. }))
        .unwrap();
    let step_at = record
        .iter()
        .position(|e| matches!(e, Event::StepStarted { name, .. } if name == "beat"))
        .unwrap();
    assert!(warn_at < step_at, "{record:#?}");
}

// ---------------------------------------------------------------------------------------
// local

#[test]
fn resume_stops_the_local_command_a_killed_run_left_running() {
    resume_stops_the_earlier_copy(None, r#"target("local")"#, "local");
}

/// The record is edited to point at a live, unrelated process group: with the number of
/// a process that started at another time, or one from another boot. Resume must leave it
/// alone (the recorded one ended; only its number lives on) and run the step.
#[test]
fn resume_never_stops_a_process_that_only_has_the_same_number() {
    let env = Env::new();
    let (rb, pids, stop, _scratch) = heartbeat_runbook(&env, r#"target("local")"#);
    let old = killed_run_leaves_a_copy(&env, &rb, &pids, None);
    // The recorded command ends by itself (as if it had been stopped by hand).
    unsafe {
        libc::kill(-old, libc::SIGKILL);
    }
    assert!(gone_within(old, Duration::from_secs(3)));
    std::fs::write(&stop, "").unwrap();

    let mut unrelated = std::process::Command::new("sleep")
        .arg("300")
        .process_group(0)
        .spawn()
        .unwrap();
    let other = unrelated.id() as i32;
    let _reap = Reap(vec![other]);
    let its_start = common::running::stat_fields(other).unwrap()[19].clone();
    let record_path = std::fs::read_dir(env.state().join("runs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .next()
        .unwrap();
    let original = std::fs::read_to_string(&record_path).unwrap();

    for (case, edit) in [
        ("a later process with the same number", None),
        ("a process from another boot", Some(its_start)),
    ] {
        let edited: Vec<String> = original
            .lines()
            .map(|line| {
                let mut ev = parse_record_line(line);
                if let Event::ActionPgid {
                    step: 1,
                    pgid,
                    start_time,
                    boot_id,
                    ..
                } = &mut ev.event
                {
                    *pgid = other as u32;
                    if let Some(start) = &edit {
                        *start_time = Some(start.parse().unwrap());
                        *boot_id = Some("00000000-0000-0000-0000-000000000000".into());
                    }
                }
                serde_json::to_string(&ev).unwrap()
            })
            .collect();
        std::fs::write(&record_path, edited.join("\n") + "\n").unwrap();
        let out = orphan_run(&env, &rb, None)
            .arg("--resume")
            .arg(record_path.file_stem().unwrap())
            .timeout(Duration::from_secs(30))
            .run();
        let err = out.stderr_text();
        assert_eq!(out.status.code(), Some(0), "{case}: {err}");
        assert!(
            alive(other),
            "{case}: resume killed an unrelated process (pid {other})"
        );
        let said = warnings(&records(&env).pop().unwrap());
        assert!(said.is_empty(), "{case}: {said:?}");
    }
    let _ = unrelated.kill();
    let _ = unrelated.wait();
}

/// A group still running whose leader is gone cannot be proved to be the recorded one:
/// resume refuses, names it, runs nothing and leaves no record.
#[test]
fn resume_refuses_when_it_cannot_prove_who_runs() {
    let env = Env::new();
    let (rb, pids, stop, _scratch) = heartbeat_runbook(&env, r#"target("local")"#);
    let old = killed_run_leaves_a_copy(&env, &rb, &pids, None);
    unsafe {
        libc::kill(-old, libc::SIGKILL);
    }
    assert!(gone_within(old, Duration::from_secs(3)));
    std::fs::write(&stop, "").unwrap();
    // A group of the test's own whose leader has exited (and been reaped): only its
    // background `sleep` is left in it.
    let out = std::process::Command::new("sh")
        .args(["-c", "sleep 300 >/dev/null 2>&1 & echo $$ $!"])
        .process_group(0)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let (group, sleeper) = text.trim().split_once(' ').unwrap();
    let (group, sleeper): (i32, i32) = (group.parse().unwrap(), sleeper.parse().unwrap());
    let _reap = Reap(vec![sleeper]);
    let record_path = std::fs::read_dir(env.state().join("runs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .next()
        .unwrap();
    let edited: Vec<String> = std::fs::read_to_string(&record_path)
        .unwrap()
        .lines()
        .map(|line| {
            let mut ev = parse_record_line(line);
            if let Event::ActionPgid { step: 1, pgid, .. } = &mut ev.event {
                *pgid = group as u32;
            }
            serde_json::to_string(&ev).unwrap()
        })
        .collect();
    std::fs::write(&record_path, edited.join("\n") + "\n").unwrap();
    let before = env.record_count();
    let err = orphan_run(&env, &rb, None)
        .args(["--resume", "last"])
        .timeout(Duration::from_secs(30))
        .expect_exit(2)
        .run()
        .stderr_text();
    assert!(
        err.contains(&format!("process group {group}")) && err.contains("step \"beat\""),
        "{err}"
    );
    assert!(err.contains("nothing was changed"), "{err}");
    assert!(alive(sleeper), "refusing stops nothing");
    assert_eq!(
        env.record_count(),
        before,
        "a refused resume leaves no record"
    );
    assert_eq!(copies(&pids).len(), 1, "the step did not run again");
}

// ---------------------------------------------------------------------------------------
// over SSH, and in a container behind it

#[test]
fn resume_stops_the_remote_command_a_killed_run_left_running() {
    require_sshd!();
    let fleet = Fleet::start(1);
    resume_stops_the_earlier_copy(Some(&fleet), r#"target("node1")"#, "node1");
}

#[test]
fn resume_stops_the_command_in_a_container_a_killed_run_left_running() {
    require_sshd!();
    let fleet = Fleet::start(1);
    fleet.container(200);
    resume_stops_the_earlier_copy(Some(&fleet), r#"target("node1"):pct(200)"#, "node1/ct200");
}

/// The host drops the connection mid-command: the run fails with "connection lost", the
/// command goes on there; once the host is back, resume stops it first.
#[test]
fn resume_after_a_lost_connection_stops_the_command_it_left() {
    require_sshd!();
    let mut fleet = Fleet::start(1);
    let env = Env::new();
    let (rb, pids, stop, _scratch) = heartbeat_runbook(&env, r#"target("node1")"#);
    let mut first = orphan_run(&env, &rb, Some(&fleet)).spawn();
    let old = wait_copies(&mut first, &pids, 1)[0];
    let _reap = Reap(vec![old]);
    fleet.node("node1").kill();
    assert_eq!(first.code(Duration::from_secs(15)), 1, "{}", first.output());
    std::thread::sleep(Duration::from_millis(300));
    assert!(alive(old), "the command outlives the lost connection");
    fleet.node("node1").start();
    resume_and_check(&env, &rb, &pids, &stop, Some(&fleet), old, "node1");
}

/// The host is unreachable: resume cannot check, so it refuses (exit 2), names the
/// command, and runs nothing.
#[test]
fn resume_refuses_when_the_host_cannot_be_reached() {
    require_sshd!();
    let mut fleet = Fleet::start(1);
    let env = Env::new();
    let (rb, pids, _stop, _scratch) = heartbeat_runbook(&env, r#"target("node1")"#);
    let old = killed_run_leaves_a_copy(&env, &rb, &pids, Some(&fleet));
    let _reap = Reap(vec![old]);
    fleet.node("node1").kill();
    let before = env.record_count();
    let err = orphan_run(&env, &rb, Some(&fleet))
        .args(["--resume", "last"])
        .timeout(Duration::from_secs(60))
        .expect_exit(2)
        .run()
        .stderr_text();
    for part in [
        "cannot check",
        "step \"beat\"",
        "node1",
        &format!("process group {old}"),
        "nothing was changed",
    ] {
        assert!(err.contains(part), "names {part:?}: {err}");
    }
    assert_eq!(
        env.record_count(),
        before,
        "a refused resume leaves no record"
    );
    assert_eq!(copies(&pids).len(), 1, "the step did not run again");
}

/// Every command's group reaches the record with what identifies it: locally, over SSH
/// (where only the first command on a connection reads the boot id) and in a container.
#[test]
fn every_command_is_recorded_with_its_group_start_time_and_boot_id() {
    require_sshd!();
    let fleet = Fleet::start(1);
    fleet.container(200);
    let env = Env::new();
    let rb = env.write(
        "ids.lua",
        r#"
runbook { name = "ids" }
step("run", function()
  target("local"):exec({ "true" })
  for _ = 1, 3 do target("node1"):exec({ "true" }) end
  target("node1"):pct(200):exec({ "true" })
end)
"#,
    );
    orphan_run(&env, &rb, Some(&fleet))
        .timeout(Duration::from_secs(60))
        .expect_exit(0)
        .run();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let record = records(&env).pop().unwrap();
    // (target, boot_id, start_time, via) of each group; its pgid is a number by its type.
    let groups = pick!(record, Event::ActionPgid { target, boot_id, start_time, via, .. }
        => (target.as_str(), boot_id.as_deref(), *start_time, via));
    let targets: Vec<&str> = groups.iter().map(|g| g.0).collect();
    assert_eq!(
        targets,
        ["local", "node1", "node1", "node1", "node1/ct200"],
        "{record:#?}"
    );
    for g in &groups {
        assert_eq!(g.1, Some(boot.trim()), "{g:?}");
        assert!(g.2.is_some(), "{g:?}");
    }
    assert!(groups[0].3.is_empty(), "local needs no route");
    assert!(
        matches!(&groups[1].3[0], Hop::Ssh { host, .. } if host == "node1"),
        "{:?}",
        groups[1].3
    );
    assert_eq!(groups[4].3[1], Hop::In(Container::Pct(200)));
}

/// A line a command prints that looks like a group report (`\036runbook-pgid=…`, naming
/// another process) is only its output, on every path: this machine, a host (a session,
/// and a channel of its own with sessions off) and a container behind it. Were it taken
/// for the command's group, a `--resume` after the run was killed would stop that
/// process (issue 25, item 8; before, a local command's was recorded).
#[test]
fn a_group_report_a_command_prints_is_only_its_output() {
    require_sshd!();
    let fleet = Fleet::start(1);
    fleet.container(200);
    let mut victim = std::process::Command::new("setsid")
        .args(["sleep", "600"])
        .spawn()
        .unwrap();
    let pid = victim.id();
    let env = Env::new();
    let rb = env.write(
        "forge.lua",
        &subst(
            r#"
runbook { name = "forge" }
step("forge", function()
  for _, t in ipairs({ target("local"), target("node1"), target("node1"):pct(200) }) do
    t:exec({ "sh", "-c", 'printf "\\036runbook-pgid=%s %s %s\\n" @pid@ "$(cat /proc/sys/kernel/random/boot_id)" "$(cat /proc/@pid@/stat)" >&2' })
  end
end)
"#,
            &[("pid", &pid)],
        ),
    );
    for sessions in ["on", "off"] {
        let out = orphan_run(&env, &rb, Some(&fleet))
            .env("RUNBOOK_SESSIONS", sessions)
            .timeout(Duration::from_secs(60))
            .expect_exit(0)
            .run();
        let record = out.record();
        let planted = pick!(record, Event::ActionPgid { pgid, .. } if *pgid == pid);
        assert!(planted.is_empty(), "sessions {sessions}: {planted:#?}");
        let said = pick!(record, Event::Output { line, .. }
            if line.starts_with(&format!("\u{1e}runbook-pgid={pid} ")))
        .len();
        assert_eq!(
            said, 3,
            "sessions {sessions}: the line is each command's output"
        );
    }
    let _ = victim.kill();
    let _ = victim.wait();
}
