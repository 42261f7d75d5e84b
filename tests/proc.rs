//! `proc.spawn`, `proc.wait_for`, `proc.stop`: detached jobs that outlive the run (and
//! its SSH connection), waiting on their logs, stopping them.
use crate::common::running::{alive, gone_within};
use crate::common::sshd::Fleet;
use crate::common::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A job that prints a throughput line five times a second.
const TICKER: &str =
    r#"{ "sh", "-c", 'i=0; while :; do i=$((i+1)); echo "step $i 21.5 Ktok/s"; sleep 0.2; done' }"#;

/// Whether the job `pid` is gone within 5 s.
fn wait_dead(pid: u32) -> bool {
    gone_within(pid as i32, Duration::from_secs(5))
}

/// Kills the process groups of the jobs a test started, whatever happens to the test.
struct Reaper(Vec<u32>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = std::process::Command::new("kill")
                .args(["-s", "KILL", "--", &format!("-{pid}")])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

/// An environment whose local pid files go to its own XDG_RUNTIME_DIR.
struct Setup {
    env: Env,
    runtime: PathBuf,
}

impl Setup {
    fn new() -> Self {
        let env = Env::new();
        let runtime = env.tmp.path().join("xdg-runtime");
        std::fs::create_dir_all(&runtime).unwrap();
        Setup { env, runtime }
    }

    /// `run FILE --json --yes` with the run lock where runbook puts it by itself (in its
    /// own directory under this XDG_RUNTIME_DIR), not in the test's lock file.
    fn run_with_own_lock(&self, file: &Path) -> Output {
        self.run(file).yes().env_remove("RUNBOOK_LOCK_FILE").run()
    }

    /// `run FILE --json` with this XDG_RUNTIME_DIR.
    fn run(&self, file: &Path) -> Run<'_> {
        Run::new(&self.env, file)
            .json()
            .env("XDG_RUNTIME_DIR", &self.runtime)
    }
}

/// The value of `key=` in the first log line that has it.
fn logged(logs: &[String], key: &str) -> String {
    let prefix = format!("{key}=");
    logs.iter()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {key}= in {logs:?}"))
        .to_string()
}

#[test]
fn a_job_outlives_the_run_and_a_later_run_stops_it() {
    let s = Setup::new();
    let log = s.env.scratch().join("ticker.log");
    let rb = s.env.write(
        "spawn.lua",
        &subst(
            r#"
runbook { name = "spawn" }
local here = target("local")
step("start", function()
  local job = proc.spawn(here, { name = "ticker", log = "@log@", cmd = @TICKER@ })
  log.info("pid=" .. job.pid)
  log.info("name=" .. job.name .. " " .. job.log)
  local m = proc.wait_for(here, { file = "@log@", pattern = "step ([0-9]+) (?P<rate>[0-9.]+) Ktok/s", timeout = "10s" })
  log.info("rate=" .. m[2] .. " " .. m.captures[2] .. " " .. m.captures.rate)
  log.info("line=" .. m.line)
end)
"#,
            &[("log", &log.display()), ("TICKER", &TICKER)],
        ),
    );
    let t0 = Instant::now();
    let out = s.run(&rb).yes().run();
    let logs = out.logs();
    out.assert_exit(0);
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "the run returned promptly"
    );
    let pid: u32 = logged(&logs, "pid").parse().unwrap();
    let _reaper = Reaper(vec![pid]);
    assert_eq!(logged(&logs, "name"), format!("ticker {}", log.display()));
    assert_eq!(logged(&logs, "rate"), "21.5 21.5 21.5");
    assert!(logged(&logs, "line").ends_with(" 21.5 Ktok/s"));

    // The run is over; the job is not.
    assert!(alive(pid as i32), "the job survived the end of the run");
    let pid_file = s.runtime.join("runbook/proc-ticker.pid");
    let recorded = std::fs::read_to_string(&pid_file).unwrap();
    assert_eq!(
        recorded.split_whitespace().next(),
        Some(pid.to_string().as_str())
    );
    let size = std::fs::metadata(&log).unwrap().len();
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        std::fs::metadata(&log).unwrap().len() > size,
        "and still writes its log"
    );

    let stop = s.env.write(
        "stop.lua",
        r#"
runbook { name = "stop" }
local here = target("local")
step("stop", function()
  local r = proc.stop(here, { name = "ticker" })
  log.info("first=" .. r.pid .. " " .. tostring(r.was_running) .. " " .. tostring(r.killed))
  r = proc.stop(here, { name = "ticker" })
  log.info("again=" .. tostring(r.was_running) .. " " .. tostring(r.killed))
end)
"#,
    );
    let out = s.run(&stop).yes().run();
    let logs = out.logs();
    out.assert_exit(0);
    assert_eq!(logged(&logs, "first"), format!("{pid} true false"));
    assert_eq!(
        logged(&logs, "again"),
        "false false",
        "a job that is not running is no error"
    );
    assert!(wait_dead(pid), "TERM ended the job");
    assert!(!pid_file.exists(), "the pid file is gone");
}

#[test]
fn stop_kills_a_job_that_ignores_term() {
    let s = Setup::new();
    let log = s.env.scratch().join("stubborn.log");
    let rb = s.env.write(
        "stubborn.lua",
        &subst(
            r#"
runbook { name = "stubborn" }
local here = target("local")
step("start and stop", function()
  local job = proc.spawn(here, { name = "stubborn", log = "@log@",
    cmd = { "sh", "-c", 'trap "" TERM; echo ready; while :; do sleep 0.1; done' } })
  log.info("pid=" .. job.pid)
  proc.wait_for(here, { file = "@log@", pattern = "^ready$", from_start = true, timeout = "10s" })
  local r = proc.stop(here, { pid = job.pid, timeout = "500ms" })
  log.info("stop=" .. r.pid .. " " .. tostring(r.was_running) .. " " .. tostring(r.killed))
end)
"#,
            &[("log", &log.display())],
        ),
    );
    let out = s.run(&rb).yes().run();
    let logs = out.logs();
    let pid: u32 = logged(&logs, "pid").parse().unwrap();
    let _reaper = Reaper(vec![pid]);
    out.assert_exit(0);
    assert_eq!(logged(&logs, "stop"), format!("{pid} true true"));
    assert!(wait_dead(pid), "KILL ended it");
}

#[test]
fn wait_for_times_out_with_the_last_lines() {
    let s = Setup::new();
    let log = s.env.scratch().join("loading.log");
    let rb = s.env.write(
        "slow.lua",
        &subst(
            r#"
runbook { name = "slow" }
local here = target("local")
step("wait", function()
  local job = proc.spawn(here, { name = "loader", log = "@log@",
    cmd = { "sh", "-c", 'i=0; while :; do i=$((i+1)); echo "loading shard $i"; sleep 0.1; done' } })
  log.info("pid=" .. job.pid)
  local ok, err = pcall(proc.wait_for, here, { file = "@missing@", pattern = "x", timeout = "1s" })
  log.info("missing=" .. tostring(err))
  proc.wait_for(here, { file = "@log@", pattern = "[0-9.]+ Ktok/s", timeout = "2s" })
end)
step("clean up", { always = true }, function() proc.stop(here, { name = "loader" }) end)
"#,
            &[
                ("log", &log.display()),
                ("missing", &s.env.scratch().join("nope.log").display()),
            ],
        ),
    );
    let t0 = Instant::now();
    let out = s.run(&rb).yes().run();
    let logs = out.logs();
    let pid: u32 = logged(&logs, "pid").parse().unwrap();
    let _reaper = Reaper(vec![pid]);
    out.assert_exit(1);
    assert!(t0.elapsed() < Duration::from_secs(15));
    let missing = logged(&logs, "missing");
    assert!(
        missing.contains("within 1.0s") && missing.contains("does not exist"),
        "{missing}"
    );
    let error = out.step_error(FAILED);
    assert!(error.contains("slow.lua:"), "names the line: {error}");
    assert!(
        error.contains(&format!(
            "no line of {} matched /[0-9.]+ Ktok/s/ within 2.0s",
            log.display()
        )),
        "{error}"
    );
    assert!(
        error.contains("last lines:") && error.contains("\n  loading shard "),
        "shows the log's last lines: {error}"
    );
    assert!(wait_dead(pid), "the always step stopped it");
}

#[test]
fn the_same_name_is_refused_while_its_job_runs() {
    let s = Setup::new();
    let log = s.env.scratch().join("dup.log");
    let rb = s.env.write(
        "dup.lua",
        &subst(
            r#"
runbook { name = "dup" }
local here = target("local")
step("twice", function()
  local job = proc.spawn(here, { name = "dup", log = "@log@", cmd = { "sleep", "30" } })
  log.info("pid=" .. job.pid)
  local ok, err = pcall(proc.spawn, here, { name = "dup", log = "@log@", cmd = { "sleep", "30" } })
  log.info("second=" .. tostring(ok) .. " " .. tostring(err))
  proc.stop(here, { name = "dup" })
  local again = proc.spawn(here, { name = "dup", log = "@log@", cmd = { "sleep", "30" } })
  log.info("again=" .. again.pid)
  proc.stop(here, { name = "dup" })
end)
"#,
            &[("log", &log.display())],
        ),
    );
    let out = s.run(&rb).yes().run();
    let logs = out.logs();
    let pid: u32 = logged(&logs, "pid").parse().unwrap();
    let again: u32 = logged(&logs, "again").parse().unwrap_or(0);
    let _reaper = Reaper(vec![pid, again]);
    out.assert_exit(0);
    let second = logged(&logs, "second");
    assert!(
        second.starts_with("false ")
            && second.contains(&format!("a job named 'dup' is already running (pid {pid})")),
        "{second}"
    );
    assert_ne!(again, pid, "after a stop the name is free again");
    assert!(wait_dead(pid) && wait_dead(again));
}

#[test]
fn dry_run_starts_nothing_and_does_not_wait() {
    let s = Setup::new();
    let log = s.env.scratch().join("never.log");
    let rb = s.env.write(
        "dry.lua",
        &subst(
            r#"
runbook { name = "dry" }
local here = target("local")
step("all", function()
  local job = proc.spawn(here, { name = "never", log = "@log@", cwd = "/tmp", env = { X = "1" }, cmd = @TICKER@ })
  local m = proc.wait_for(here, { file = "@log@", pattern = "Ktok/s", timeout = "1m" })
  local st = proc.stop(here, { name = "never" })
  log.info("dry=" .. tostring(job.pid) .. " " .. tostring(job.planned) .. " " .. tostring(m.planned)
           .. " " .. tostring(m.line) .. " " .. tostring(st.was_running))
end)
"#,
            &[("log", &log.display()), ("TICKER", &TICKER)],
        ),
    );
    let t0 = Instant::now();
    let out = s.run(&rb).dry_run().run();
    let logs = out.logs();
    out.assert_exit(0);
    assert!(t0.elapsed() < Duration::from_secs(10), "did not wait");
    assert_eq!(logged(&logs, "dry"), "nil true true nil false");
    assert!(!log.exists(), "nothing was started");
    assert!(!s.runtime.join("runbook/proc-never.pid").exists());
    let planned: Vec<String> =
        pick!(out.run_events(), Event::ActionPlanned { summary, .. } => summary.clone());
    assert_eq!(planned.len(), 1, "{planned:?}");
    assert!(
        planned[0].starts_with("start job never in the background: sh -c "),
        "{}",
        planned[0]
    );
}

#[test]
fn over_ssh_a_job_outlives_the_connection() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let ct = fleet.container(200);
    let env = Env::new();
    let node_log = env.scratch().join("node.log");
    // Pid files over this SSH go to the node's /tmp: a name no other test uses.
    let name = format!("ssh-ticker-{}", std::process::id());
    let rb = env.write(
        "spawn.lua",
        &subst(
            r#"
runbook { name = "spawn-remote" }
local node = target("node1")
local box = node:pct(200)
step("start", function()
  local a = proc.spawn(node, { name = "@name@", log = "@node_log@", cmd = @TICKER@ })
  log.info("node=" .. a.pid)
  local b = proc.spawn(box, { name = "ticker", log = "/root/job.log", cwd = "/root", cmd = @TICKER@ })
  log.info("box=" .. b.pid)
  proc.wait_for(node, { file = "@node_log@", pattern = "Ktok/s", timeout = "10s" })
  local m = proc.wait_for(box, { file = "/root/job.log", pattern = "([0-9.]+) Ktok/s", timeout = "10s" })
  log.info("rate=" .. m[1])
end)
"#,
            &[("name", &name), ("node_log", &node_log.display()), ("TICKER", &TICKER)],
        ),
    );
    let t0 = Instant::now();
    let out = Run::new(&env, &rb).ssh(&fleet).yes().json().run();
    let got = out.logs();
    let node_pid: u32 = logged(&got, "node").parse().unwrap();
    let box_pid: u32 = logged(&got, "box").parse().unwrap();
    let _reaper = Reaper(vec![node_pid, box_pid]);
    out.assert_exit(0);
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "the channels closed: the run did not wait for its jobs"
    );
    assert_eq!(logged(&got, "rate"), "21.5");
    assert!(
        alive(node_pid as i32) && alive(box_pid as i32),
        "both jobs outlived the run"
    );
    assert!(
        ct.join("root/.local/state/runbook/proc-ticker.pid")
            .exists(),
        "runbook's own directory in the container (root's home there)"
    );
    let size = std::fs::metadata(ct.join("root/job.log")).unwrap().len();
    std::thread::sleep(Duration::from_millis(600));
    assert!(std::fs::metadata(ct.join("root/job.log")).unwrap().len() > size);

    let stop = env.write(
        "stop.lua",
        &subst(
            r#"
runbook { name = "stop-remote" }
local node = target("node1")
step("stop", function()
  local a = proc.stop(node, { name = "@name@" })
  local b = proc.stop(node:pct(200), { name = "ticker" })
  log.info("stopped=" .. a.pid .. " " .. tostring(a.was_running) .. " " .. b.pid .. " " .. tostring(b.was_running))
end)
"#,
            &[("name", &name)],
        ),
    );
    let out = Run::new(&env, &stop).ssh(&fleet).yes().json().run();
    out.assert_exit(0);
    assert_eq!(
        logged(&out.logs(), "stopped"),
        format!("{node_pid} true {box_pid} true")
    );
    assert!(wait_dead(node_pid) && wait_dead(box_pid));
}

#[test]
fn wait_for_ends_at_the_step_timeout_and_on_sigint() {
    let s = Setup::new();
    let log = s.env.scratch().join("quiet.log");
    std::fs::write(&log, "nothing to see\n").unwrap();
    let ready = s.env.scratch().join("ready");
    let rb = s.env.write(
        "quiet.lua",
        &subst(
            r#"
runbook { name = "quiet", params = { limit = { default = "1m" } } }
local here = target("local")
step("wait", { timeout = params.limit }, function()
  here:exec({ "touch", "@ready@" })
  proc.wait_for(here, { file = "@log@", pattern = "never", timeout = "1m" })
end)
"#,
            &[("ready", &ready.display()), ("log", &log.display())],
        ),
    );
    let t0 = Instant::now();
    let out = s.run(&rb).yes().set("limit", "1s").run();
    out.assert_exit(1);
    assert!(t0.elapsed() < Duration::from_secs(6), "{:?}", t0.elapsed());
    assert!(
        out.step_error(FAILED).contains("timed out"),
        "{}",
        out.step_error(FAILED)
    );

    std::fs::remove_file(&ready).unwrap();
    let mut run = Run::new(&s.env, &rb)
        .yes()
        .env("XDG_RUNTIME_DIR", &s.runtime)
        .spawn();
    // The step started.
    run.wait_file(&ready, Duration::from_secs(10));
    // Let it get into its wait (a poll waiting on the target, or the pause between).
    std::thread::sleep(Duration::from_millis(1500));
    let sent = Instant::now();
    run.signal(libc::SIGINT);
    assert_eq!(run.code(Duration::from_secs(10)), 130, "{}", run.output());
    assert!(
        sent.elapsed() < Duration::from_secs(4),
        "ended {:?} after SIGINT",
        sent.elapsed()
    );
}

/// Pid files (and the run lock) live in runbook's own directory for the target user:
/// 0700, owned by that user, never a symlink, never /tmp where another user could plant
/// them (hold the lock forever, feed `proc.stop` a pid to kill, point root at a link).
#[test]
fn pid_files_and_the_lock_live_in_a_private_directory() {
    use std::os::unix::fs::PermissionsExt;
    let s = Setup::new();
    let mut reaper = Reaper(Vec::new());
    let rb = s.env.write(
        "private.lua",
        r#"runbook { name = "private" }
local here = target("local")
step("start", function()
  local j = proc.spawn(here, { name = "quiet", cmd = { "sleep", "30" }, log = "/dev/null" })
  log.info("pid=" .. j.pid)
  log.info("pid_file=" .. j.pid_file)
end)
step("stop", function() proc.stop(here, { name = "quiet" }) end)
"#,
    );
    let out = s.run_with_own_lock(&rb);
    let logs = out.logs();
    if let Ok(pid) = logged(&logs, "pid").parse() {
        reaper.0.push(pid);
    }
    out.assert_exit(0);
    let dir = s.runtime.join("runbook");
    assert_eq!(
        logged(&logs, "pid_file"),
        dir.join("proc-quiet.pid").display().to_string()
    );
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "runbook's directory is private");
    assert!(dir.join("lock").exists(), "the run lock is there too");

    // A symlink planted where the directory goes is refused, and nothing is written
    // through it.
    let s = Setup::new();
    let elsewhere = s.env.scratch().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, s.runtime.join("runbook")).unwrap();
    let out = s.run(&rb).yes().run();
    out.assert_exit(1);
    assert!(
        out.step_error(FAILED).contains("is not a plain directory"),
        "{}",
        out.describe()
    );
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing went through the link"
    );
}

/// A job that prints its line at once: `wait_for` after the spawn still sees it (it reads
/// from where the log stood when the job started). And in a log appended to by an earlier
/// run, the earlier run's line never counts.
#[test]
fn wait_for_reads_the_job_output_from_where_it_started() {
    let s = Setup::new();
    let mut reaper = Reaper(Vec::new());
    let log = s.env.scratch().join("train.log");
    std::fs::write(&log, "step 1 25.0 Ktok/s\n").unwrap();
    let rb = s.env.write(
        "fast.lua",
        &subst(
            r#"runbook { name = "fast" }
local here = target("local")
step("start and wait", function()
  local j = proc.spawn(here, { name = "fast", log = "@log@",
    cmd = { "sh", "-c", 'echo "READY 12.5 Ktok/s"; exec sleep 30' } })
  log.info("pid=" .. j.pid)
  local m = proc.wait_for(here, { file = "@log@", pattern = "([0-9.]+) Ktok/s", timeout = "5s" })
  log.info("rate=" .. m[1])
  local again = proc.wait_for(here, { file = "@log@", pattern = "READY", timeout = "5s", since = j })
  log.info("since=" .. again.line)
end)
step("stop", function() proc.stop(here, { name = "fast" }) end)
"#,
            &[("log", &log.display())],
        ),
    );
    let out = s.run(&rb).yes().run();
    let logs = out.logs();
    if let Ok(pid) = logged(&logs, "pid").parse() {
        reaper.0.push(pid);
    }
    out.assert_exit(0);
    assert_eq!(
        logged(&logs, "rate"),
        "12.5",
        "the new run's rate, not the old line's"
    );
    assert_eq!(logged(&logs, "since"), "READY 12.5 Ktok/s");
}

/// Found by review: a symlink planted at the lock's holder file (or a pid file) inside
/// runbook's own directory is refused, not written through.
#[test]
fn symlinks_inside_the_private_directory_are_refused() {
    let s = Setup::new();
    let dir = s.runtime.join("runbook");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let victim = s.env.scratch().join("victim");
    std::fs::write(&victim, "VICTIM").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("lock.holder")).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("proc-quiet.pid")).unwrap();
    let rb = s.env.write(
        "planted.lua",
        r#"runbook { name = "planted" }
step("change", function() target("local"):exec({ "true" }) end)
step("job", function() proc.stop(target("local"), { name = "quiet" }) end)
"#,
    );
    let out = s.run_with_own_lock(&rb);
    out.assert_exit(1);
    assert!(
        out.step_error(FAILED).contains("is a symbolic link"),
        "{}",
        out.describe()
    );
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "VICTIM",
        "nothing was written through the link"
    );
}

/// A job that dies before its line comes ends the wait at once, not at its timeout
/// (10 minutes by default): the message names the job and shows the log's last lines. A
/// line it printed without a newline before exiting still matches. A later run's
/// `since = job` looks at that job too; `proc.stop` of the dead job removes its pid file.
#[test]
fn wait_for_fails_as_soon_as_its_job_is_gone() {
    let s = Setup::new();
    let log = s.env.scratch().join("dies.log");
    let last = s.env.scratch().join("last.log");
    let rb = s.env.write(
        "dies.lua",
        &subst(
            r#"runbook { name = "dies" }
local here = target("local")
step("start and wait", function()
  local j = proc.spawn(here, { name = "dies", log = "@log@",
    cmd = { "sh", "-c", 'echo "loading shard 1"; sleep 1; echo "CUDA out of memory" >&2; exit 3' } })
  log.info("pid=" .. j.pid)
  local ok, err = pcall(proc.wait_for, here, { file = "@log@", pattern = "Ktok/s" })
  log.info("err=" .. tostring(err):gsub("\n", "|"))
  proc.spawn(here, { name = "last", log = "@last@", cmd = { "printf", "ready at last" } })
  local m = proc.wait_for(here, { file = "@last@", pattern = "ready (.*)", timeout = "1m" })
  log.info("last=" .. m[1])
end)
"#,
            &[("log", &log.display()), ("last", &last.display())],
        ),
    );
    let t0 = Instant::now();
    let out = s.run(&rb).yes().run();
    let logs = out.logs();
    let pid: u32 = logged(&logs, "pid").parse().unwrap();
    let _reaper = Reaper(vec![pid]);
    out.assert_exit(0);
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "not the 10 minute timeout: {:?}",
        t0.elapsed()
    );
    let err = logged(&logs, "err");
    assert!(
        err.contains(&format!(
            "dies.lua:7: proc.wait_for: job dies (pid {pid}) exited before a line of {} matched /Ktok/s/",
            log.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("last lines:|  loading shard 1|  CUDA out of memory"),
        "{err}"
    );
    assert_eq!(
        logged(&logs, "last"),
        "at last",
        "an unfinished last line counts"
    );

    let pid_file = s.runtime.join("runbook/proc-dies.pid");
    assert!(pid_file.exists(), "the dead job's pid file is still there");
    let later = s.env.write(
        "later.lua",
        &subst(
            r#"runbook { name = "later" }
local here = target("local")
step("wait and stop", function()
  local ok, err = pcall(proc.wait_for, here, { file = "@log@", pattern = "Ktok/s",
    since = { name = "dies", log_offset = 0 } })
  log.info("since=" .. tostring(err):gsub("\n", "|"))
  local r = proc.stop(here, { name = "dies" })
  log.info(("stop=%s %s"):format(r.pid, r.was_running))
end)
"#,
            &[("log", &log.display())],
        ),
    );
    let t0 = Instant::now();
    let out = s.run(&later).yes().run();
    out.assert_exit(0);
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    let logs = out.logs();
    let since = logged(&logs, "since");
    assert!(
        since.contains(&format!("job dies (pid {pid}) exited before"))
            && since.contains("CUDA out of memory"),
        "{since}"
    );
    assert_eq!(logged(&logs, "stop"), format!("{pid} false"));
    assert!(
        !pid_file.exists(),
        "proc.stop removed the dead job's pid file"
    );
    let forgot: Vec<String> =
        pick!(out.run_events(), Event::ActionStarted { summary, .. } => summary.clone());
    assert!(
        forgot.contains(&format!(
            "remove the pid file of job dies (pid {pid} has exited)"
        )),
        "{forgot:?}"
    );
}

/// Over SSH: a job that dies on the node (and one in a container on it) ends the wait at
/// once with the log's last lines, and `proc.stop` removes their pid files there.
#[test]
fn over_ssh_a_dead_job_ends_the_wait_and_stop_removes_its_pid_file() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let ct = fleet.container(200);
    let env = Env::new();
    let node_log = env.scratch().join("node.log");
    let name = format!("ssh-dies-{}", std::process::id());
    let rb = env.write(
        "dies.lua",
        &subst(
            r#"runbook { name = "dies-remote" }
local node = target("node1")
step("start, wait, stop", function()
  for _, t in ipairs({ node, node:pct(200) }) do
    local log_file = t == node and "@node_log@" or "/root/dies.log"
    proc.spawn(t, { name = "@name@", log = log_file,
      cmd = { "sh", "-c", 'echo "Traceback: boom"; exit 1' } })
    local ok, err = pcall(proc.wait_for, t, { file = log_file, pattern = "Ktok/s", timeout = "5m" })
    log.info("err=" .. tostring(err):gsub("\n", "|"))
    local r = proc.stop(t, { name = "@name@" })
    log.info("was_running=" .. tostring(r.was_running))
  end
end)
"#,
            &[("name", &name), ("node_log", &node_log.display())],
        ),
    );
    let t0 = Instant::now();
    let out = Run::new(&env, &rb).ssh(&fleet).yes().json().run();
    out.assert_exit(0);
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    let errs: Vec<String> = out
        .logs()
        .into_iter()
        .filter_map(|l| l.strip_prefix("err=").map(str::to_string))
        .collect();
    assert_eq!(errs.len(), 2, "{errs:?}");
    for e in &errs {
        assert!(
            e.contains(&format!("job {name} (pid ")) && e.contains("|  Traceback: boom"),
            "{e}"
        );
    }
    assert_eq!(
        out.logs()
            .iter()
            .filter(|l| *l == "was_running=false")
            .count(),
        2
    );
    let home = std::env::var("HOME").unwrap();
    let on_node = Path::new(&home).join(format!(".local/state/runbook/proc-{name}.pid"));
    assert!(!on_node.exists(), "{}", on_node.display());
    assert!(!ct
        .join(format!("root/.local/state/runbook/proc-{name}.pid"))
        .exists());
}

/// A preview names a script's arguments (issue 33 item 6): not `proc-stop.sh quiet ''
/// 60000` but `name=quiet pid='' timeout_ms=60000`.
#[test]
fn a_planned_stop_names_its_arguments() {
    let s = Setup::new();
    let start = s.env.write(
        "start.lua",
        r#"runbook { name = "start" }
step("start", function()
  local j = proc.spawn(target("local"), { name = "named", cmd = { "sleep", "30" }, log = "/dev/null" })
  log.info("pid=" .. j.pid)
end)
"#,
    );
    let out = s.run(&start).yes().run();
    let pid: u32 = logged(&out.logs(), "pid").parse().unwrap();
    let _reaper = Reaper(vec![pid]);
    out.assert_exit(0);
    let stop = s.env.write(
        "stop.lua",
        r#"runbook { name = "stop" }
step("stop", function() proc.stop(target("local"), { name = "named", timeout = "1m" }) end)
"#,
    );
    let dry = s.run(&stop).dry_run().run();
    dry.assert_exit(0);
    let planned = pick!(dry.run_events(), Event::ActionPlanned { command, .. } => command.clone());
    assert_eq!(
        planned,
        ["proc-stop.sh name=named pid='' timeout_ms=60000"],
        "{}",
        dry.describe()
    );
    s.run(&stop).yes().run().assert_exit(0);
    assert!(wait_dead(pid));
}
