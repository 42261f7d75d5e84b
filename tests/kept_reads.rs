//! Reads are sent once (issue 14, item 4) in a run that changes nothing: `run` without
//! `--yes` makes its plan with a dry-run whose reads really run, and when that plan has
//! no change, the real run after it is answered with what they answered, up to its first
//! wait or retry. A plan with a change sends every read again.
//!
//! Each read here appends a line to a counter file on the real machine and prints the
//! count, so the file says how many times the read was really sent.
use crate::common::*;
use std::path::Path;

/// A read that counts how often it is sent, in `file`.
fn counted(file: &Path) -> String {
    subst(
        r#"here:exec({ "sh", "-c", 'echo x >> "$1"; wc -l < "$1"', "sh", "@file@" }, { read_only = true })"#,
        &[("file", &file.display())],
    )
}

fn sent(file: &Path) -> usize {
    std::fs::read_to_string(file)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn started(events: &[Event]) -> Vec<&Event> {
    pick!(events, Event::ActionStarted { .. })
}

/// Whether each action that started was answered from the plan's dry-run.
fn replayed(events: &[Event]) -> Vec<bool> {
    pick!(events, Event::ActionStarted { replayed, .. } => *replayed)
}

/// A runbook of reads only needs no confirmation, so `run` without `--yes` makes its
/// plan and runs at once: each read is sent once, by the dry-run, and the real run is
/// answered (its record says so) with the same output, a secret output masked as well.
#[test]
fn a_run_of_reads_sends_each_read_once() {
    let env = Env::new();
    let a = env.scratch().join("a");
    let body = subst(
        r#"runbook { name = "reads", description = "reads only" }
local here = target("local")
step("look", function()
  local r = @read@
  log.info("count " .. r.stdout)
  local tok = here:exec({ "sh", "-c", "printf 'tok-%s-9' K33P" }, { read_only = true, secret_output = true })
  log.info("token " .. tok.stdout)
end)
"#,
        &[("read", &counted(&a))],
    );
    let file = env.write("reads.lua", &body);
    let out = Run::new(&env, &file).expect_exit(0).run();
    assert_eq!(sent(&a), 1, "sent twice:\n{}", out.describe());
    let events = env.last_record();
    let reads = started(&events);
    assert_eq!(reads.len(), 2, "{reads:#?}");
    assert!(replayed(&events).iter().all(|r| *r), "{reads:#?}");
    // What the answer printed flows through the real run as if it had run.
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Output { line, .. } if line == "1")),
        "{events:#?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Log { message, .. } if message == "count 1")),
        "{events:#?}"
    );
    let all = env.all_records();
    assert!(
        !all.contains("tok-K33P-9"),
        "the secret output shows:\n{all}"
    );
    assert!(
        !out.stderr_str().contains("tok-K33P-9"),
        "{}",
        out.describe()
    );

    // --yes makes no plan: the read is sent once, and really.
    Run::new(&env, &file).yes().expect_exit(0).run();
    assert_eq!(sent(&a), 2);
    let events = env.last_record();
    assert!(replayed(&events).iter().all(|r| !r), "{events:#?}");
}

/// A wait (`sleep`) and a retry are there to see something new: the reads after them
/// are sent again. A read that failed is an answer like any other (the first attempt is
/// answered with the dry-run's failure, the retry is sent and succeeds).
#[test]
fn reads_after_a_wait_or_in_a_retry_are_sent() {
    let env = Env::new();
    let (a, b, c) = (
        env.scratch().join("a"),
        env.scratch().join("b"),
        env.scratch().join("c"),
    );
    let waits = subst(
        r#"runbook { name = "waits", description = "reads around a wait" }
local here = target("local")
step("before and after a wait", function()
  @a@
  sleep(0)
  @b@
end)
"#,
        &[("a", &counted(&a)), ("b", &counted(&b))],
    );
    let file = env.write("waits.lua", &waits);
    let out = Run::new(&env, &file).expect_exit(0).run();
    assert_eq!(sent(&a), 1, "before the wait: answered\n{}", out.describe());
    assert_eq!(
        sent(&b),
        2,
        "after the wait: sent again\n{}",
        out.describe()
    );

    let flaky = subst(
        r#"runbook { name = "flaky", description = "a read that passes on its fourth try" }
local here = target("local")
step("flaky", { retries = 2, delay = 0 }, function()
  local r = @c@
  if tonumber(r.stdout) < 4 then fail("only " .. r.stdout) end
end)
"#,
        &[("c", &counted(&c))],
    );
    let file = env.write("flaky.lua", &flaky);
    let out = Run::new(&env, &file).expect_exit(0).run();
    // Dry-run: 1, 2, 3 (three attempts, all failed). Real run: attempt 1 answered with
    // the dry-run's first answer (1, fails), attempt 2 sent (4) and passes.
    assert_eq!(sent(&c), 4, "{}", out.describe());
    let events = env.last_record();
    assert_eq!(replayed(&events), [true, false], "{events:#?}");
}

/// A plan that changes anything keeps no answers: any read may decide what is changed,
/// and the world may have moved while the plan was read. Found by review: a read in one
/// step picked the directory that the next step deleted; answered from the dry-run, the
/// run deleted what had become the busy one. Sent again, it stops before the change.
/// (A change needs a confirmation, so the run is on a terminal: util-linux `script`.)
#[test]
fn a_run_that_changes_anything_sends_every_read_again() {
    let env = Env::new();
    let dir = env.scratch();
    for d in ["dir1", "dir2"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
        std::fs::write(dir.join(d).join("f"), "x").unwrap();
    }
    let a = dir.join("a");
    let body = subst(
        r#"runbook { name = "pick", description = "a pick, then its delete in the next step" }
local here = target("local")
local picked
step("pick the idle one", function()
  -- Answers dir1 the first time it is sent, dir2 after (the world moved).
  local r = @read@
  picked = "dir" .. r.stdout:gsub("%s", "")
end)
step("delete it", function() here:exec({ "rm", "-rf", "--", "@dir@/" .. picked }) end)
"#,
        &[("read", &counted(&a)), ("dir", &dir.display())],
    );
    let file = env.write("pick.lua", &body);
    let (code, screen) = Run::new(&env, &file).on_terminal("y\n");
    assert_eq!(code, 1, "{screen}");
    assert_eq!(sent(&a), 2, "the pick was not sent again:\n{screen}");
    assert!(dir.join("dir1/f").exists(), "{screen}");
    assert!(
        dir.join("dir2/f").exists(),
        "dir2 was never confirmed:\n{screen}"
    );
    assert!(
        screen.contains(&format!("now:       rm -rf -- {}/dir2", dir.display())),
        "{screen}"
    );
    let events = env.last_record();
    assert!(replayed(&events).iter().all(|r| !r), "{events:#?}");
}
