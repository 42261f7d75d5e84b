//! Detached commands (issue 30, item 2): a long command outlives the connection that
//! started it, and runbook follows it to its end across a dropped connection, exactly
//! once and with its whole output; `--resume` after runbook was killed outright follows
//! it again instead of starting a second copy.
use crate::common::running::Running;
use crate::common::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long the long command runs: a line a second.
const SECONDS: u32 = 60;

/// A runbook whose one step runs a `SECONDS`-long command on `target` that counts its
/// starts in `marks/started` (a file on the target's filesystem) and prints `tick N` a
/// second, then `done` on stderr.
fn long_runbook(env: &Env, target: &str, marks: &Path, opts: &str) -> std::path::PathBuf {
    env.write(
        "long.lua",
        &subst(
            r#"runbook { name = "long" }
step("long", function()
  local r = @target@:exec({ "sh", "-c",
    'echo once >> "$1/started"; i=1; while [ "$i" -le "$2" ]; do echo "tick $i"; echo "$i" > "$1/progress"; i=$((i + 1)); sleep 1; done; echo done >&2',
    "sh", "@marks@", "@seconds@" }, @opts@)
  log.info("lines " .. select(2, r.stdout:gsub("\n", "")) .. ", stderr " .. r.stderr)
end)
"#,
            &[
                ("target", &target),
                ("marks", &marks.display()),
                ("seconds", &SECONDS),
                ("opts", &opts),
            ],
        ),
    )
}

/// The step ended ok, every tick came once and in order, and the command started once.
fn whole_and_once(out: &Output, started: &Path) {
    let ticks: Vec<String> = out
        .output_lines()
        .into_iter()
        .filter(|l| l.starts_with("tick "))
        .collect();
    let want: Vec<String> = (1..=SECONDS).map(|i| format!("tick {i}")).collect();
    assert_eq!(ticks, want, "{}", out.describe());
    assert!(out.output_lines().contains(&"done".to_string()));
    assert_eq!(
        std::fs::read_to_string(started).unwrap(),
        "once\n",
        "the command ran exactly once"
    );
    assert!(
        out.logs()
            .contains(&format!("lines {SECONDS}, stderr done")),
        "{:?}",
        out.logs()
    );
}

/// Waits until the command has printed `n` ticks (it writes its progress beside its
/// marks).
fn wait_ticks(run: &mut Running, marks: &Path, n: u32) {
    let progress = marks.join("progress");
    run.wait_for("the command's ticks", Duration::from_secs(60), || {
        let at: u32 = std::fs::read_to_string(&progress)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        (at >= n).then_some(())
    });
}

/// sshd is killed (listener and every connection, as a crashed host's) 15 s into a 60 s
/// command and started again 5 s later: runbook reconnects and follows the command to
/// its end; the step is ok, with every line once, and the command ran once.
#[test]
fn an_sshd_restart_midway_loses_nothing_and_runs_nothing_twice() {
    require_sshd!();
    let mut fleet = sshd::Fleet::start(1);
    let env = Env::new();
    let marks = env.scratch().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let rb = long_runbook(&env, "target(\"node1\")", &marks, "{ detach = true }");
    let mut run = Run::new(&env, &rb).ssh(&fleet).yes().json().spawn();
    wait_ticks(&mut run, &marks, 15);
    fleet.node("node1").kill();
    std::thread::sleep(Duration::from_secs(5));
    fleet.node("node1").start();
    let code = run.code(Duration::from_secs(SECONDS as u64 + 60));
    let out = run.finish();
    assert_eq!(code, 0, "{}", out.describe());
    whole_and_once(&out, &marks.join("started"));
    let warnings = out.logs_at(Level::Warn).join("\n");
    assert!(
        warnings.contains("went away 1 time(s) while the detached command ran"),
        "{warnings}"
    );
}

/// The same command without `detach` dies with the connection: the step fails as a lost
/// connection (the contrast that makes the test above mean something).
#[test]
fn without_detach_a_restart_fails_the_step() {
    require_sshd!();
    let mut fleet = sshd::Fleet::start(1);
    let env = Env::new();
    let marks = env.scratch().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let rb = long_runbook(&env, "target(\"node1\")", &marks, "{ detach = false }");
    let mut run = Run::new(&env, &rb).ssh(&fleet).yes().json().spawn();
    wait_ticks(&mut run, &marks, 3);
    fleet.node("node1").kill();
    fleet.node("node1").start();
    let code = run.code(Duration::from_secs(60));
    let out = run.finish();
    assert_eq!(code, 1, "{}", out.describe());
    assert!(
        out.step_error("long").contains("connection lost"),
        "{}",
        out.describe()
    );
}

/// runbook killed outright (SIGKILL) while the command runs: the command goes on, and
/// `--resume` follows it again (its whole output, from the start) instead of starting a
/// second copy; the step ends ok.
#[test]
fn resume_after_kill_9_follows_the_running_command() {
    require_sshd!();
    let fleet = sshd::Fleet::start(1);
    let env = Env::new();
    let marks = env.scratch().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let rb = long_runbook(&env, "target(\"node1\")", &marks, "{ detach = true }");
    let mut run = Run::new(&env, &rb).ssh(&fleet).yes().json().spawn();
    wait_ticks(&mut run, &marks, 5);
    run.signal(libc::SIGKILL);
    run.wait(Duration::from_secs(10));
    let started = Instant::now();
    let out = Run::new(&env, &rb)
        .ssh(&fleet)
        .yes()
        .json()
        .args(["--resume", "last"])
        .timeout(Duration::from_secs(SECONDS as u64 + 60))
        .expect_exit(0)
        .run();
    whole_and_once(&out, &marks.join("started"));
    // It was followed, not run again: it ended within what was left of its minute.
    assert!(
        started.elapsed() < Duration::from_secs(SECONDS as u64 - 3),
        "{:?}",
        started.elapsed()
    );
    let warnings = out.logs_at(Level::Warn).join("\n");
    assert!(warnings.contains("ran detached (job "), "{warnings}");
}
