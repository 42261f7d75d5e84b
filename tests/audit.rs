//! `runbook audit verify`: real runs' records, then each way of tampering with them (a
//! byte edited, a line dropped, two lines swapped, the end cut off, the record deleted, a
//! line taken out of the index), each named by its first bad line; and the records that
//! are not tampered with but not whole either (a killed run, a run the watchdog ended, a
//! record made before records were chained), which verify without failing.
use crate::common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

const STEPS: &str = r#"
runbook { name = "audit-steps" }
local here = target("local")
step("one", function() here:exec({ "echo", "first" }) end)
step("two", function()
  here:exec({ "echo", "second" })
  here:exec({ "echo", "third" })
end)
step("three", function() here:exec({ "echo", "done" }) end)
"#;

/// Runs the three-step runbook once; its run id.
fn run(env: &Env) -> String {
    let rb = env.write("steps.lua", STEPS);
    let out = Run::new(env, &rb).yes().json().expect_exit(0).run();
    run_id_of(&out.events())
}

fn run_id_of(events: &[Event]) -> String {
    match events.first() {
        Some(Event::RunStarted { run_id, .. }) => run_id.clone(),
        other => panic!("no run_started: {other:?}"),
    }
}

fn record(env: &Env, id: &str) -> PathBuf {
    env.state().join("runs").join(format!("{id}.jsonl"))
}

fn index(env: &Env) -> PathBuf {
    env.state().join("run-index.jsonl")
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn write(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// `runbook audit verify WORDS…`, expecting `code`; its stdout.
fn verify(env: &Env, words: &[&str], code: i32) -> String {
    let mut all = vec!["audit", "verify"];
    all.extend(words);
    let out = Run::cmd(env, all).expect_exit(code).run();
    if code == 1 {
        assert!(
            out.stderr_text().contains("failed the verify"),
            "{}",
            out.describe()
        );
    }
    out.stdout_text()
}

/// The line `verify` printed for run `id`.
fn line_of(stdout: &str, id: &str) -> String {
    stdout
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_else(|| panic!("no line for {id}:\n{stdout}"))
        .to_string()
}

/// Checks that verify of `id` fails naming its record and `what`.
fn tampered(env: &Env, id: &str, what: &str) -> String {
    let out = verify(env, &[id], 1);
    let line = line_of(&out, id);
    assert!(
        line.contains("TAMPERED") && line.contains(&record(env, id).display().to_string()),
        "names the record: {line}"
    );
    assert!(line.contains(what), "expected {what:?} in: {line}");
    line
}

#[test]
fn intact_records_verify_and_carry_the_chain() {
    let env = Env::new();
    let (a, b) = (run(&env), run(&env));
    let n = lines(&record(&env, &a)).len();
    assert!(n > 10, "a record of a few steps: {n} lines");
    let out = verify(&env, &["--all"], 0);
    for id in [&a, &b] {
        let line = line_of(&out, id);
        assert!(
            line.contains(&format!("ok ({n} lines, last hash ")),
            "{line}"
        );
    }
    assert!(
        out.lines()
            .any(|l| l.starts_with("index") && l.contains("ok (4 lines")),
        "two runs, each opened and closed in the index:\n{out}"
    );
    assert!(line_of(&verify(&env, &["last"], 0), &b).contains("ok ("));

    // Each line names its place and the sha256 of the line before it.
    let text = lines(&record(&env, &a));
    for (i, l) in text.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["seq"], i as u64 + 1, "{l}");
        assert_eq!(v["prev"].as_str().unwrap().len(), 64, "{l}");
    }

    let json = verify(&env, &["--all", "--json"], 0);
    let parsed: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(parsed.len(), 3, "{json}");
    assert_eq!(parsed[0]["run_id"], a.as_str());
    assert_eq!(parsed[0]["status"], "ok");
    assert_eq!(parsed[0]["lines"], n as u64);
    assert_eq!(parsed[2]["status"], "ok");
    assert!(parsed[2]["index"].is_string());
}

#[test]
fn one_byte_edited_in_a_record_names_that_line() {
    let env = Env::new();
    let id = run(&env);
    let path = record(&env, &id);
    let mut bytes = std::fs::read(&path).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    let n = text.lines().count();
    let m = n / 2;
    // The first byte of line m's time stamp's milliseconds, one digit up.
    let start: usize = text.lines().take(m - 1).map(|l| l.len() + 1).sum();
    let at = start + text.lines().nth(m - 1).unwrap().find("Z\"").unwrap() - 1;
    bytes[at] = if bytes[at] == b'9' {
        b'0'
    } else {
        bytes[at] + 1
    };
    std::fs::write(&path, bytes).unwrap();
    let line = tampered(
        &env,
        &id,
        &format!(
            "line {m}: edited (its hash does not match line {}'s prev)",
            m + 1
        ),
    );
    eprintln!("{line}");
    // `--all` fails on it too, and names it the same way.
    assert!(line_of(&verify(&env, &["--all"], 1), &id).contains(&format!("line {m}: edited")));
}

#[test]
fn the_last_line_edited_is_found_by_the_index() {
    let env = Env::new();
    let id = run(&env);
    let path = record(&env, &id);
    let mut all = lines(&path);
    let n = all.len();
    all[n - 1] = all[n - 1].replace("\"ok\"", "\"failed\"");
    write(&path, &all);
    tampered(
        &env,
        &id,
        &format!("line {n}: edited (its hash does not match the index's last hash)"),
    );
}

#[test]
fn a_dropped_line_is_named() {
    let env = Env::new();
    let id = run(&env);
    let path = record(&env, &id);
    let mut all = lines(&path);
    all.remove(4);
    write(&path, &all);
    eprintln!(
        "{}",
        tampered(
            &env,
            &id,
            "line 5: out of order or dropped (it was written as line 6)"
        )
    );
}

#[test]
fn two_swapped_lines_are_named() {
    let env = Env::new();
    let id = run(&env);
    let path = record(&env, &id);
    let mut all = lines(&path);
    all.swap(3, 4);
    write(&path, &all);
    tampered(
        &env,
        &id,
        "line 4: out of order or dropped (it was written as line 5)",
    );
}

#[test]
fn a_truncated_record_is_named() {
    let env = Env::new();
    let id = run(&env);
    let path = record(&env, &id);
    let all = lines(&path);
    let n = all.len();
    write(&path, &all[..n - 2]);
    eprintln!(
        "{}",
        tampered(
            &env,
            &id,
            &format!("truncated after line {} (the index says {n} lines)", n - 2),
        )
    );
}

#[test]
fn a_deleted_record_is_named_and_the_others_still_verify() {
    let env = Env::new();
    let (a, b) = (run(&env), run(&env));
    std::fs::remove_file(record(&env, &a)).unwrap();
    let out = verify(&env, &["--all"], 1);
    let line = line_of(&out, &a);
    assert!(
        line.contains("record deleted (the index lists it)"),
        "{line}"
    );
    assert!(line_of(&out, &b).contains("ok ("), "{out}");
    eprintln!("{line}");
    // By its id too: the index still knows it.
    tampered(&env, &a, "record deleted");
}

#[test]
fn a_line_taken_out_of_the_index_is_named() {
    let env = Env::new();
    let (a, b) = (run(&env), run(&env));
    let mut all = lines(&index(&env));
    assert_eq!(all.len(), 4);
    // The first run's `closed` line.
    all.remove(1);
    write(&index(&env), &all);
    let out = verify(&env, &["--all"], 1);
    let said = out
        .lines()
        .find(|l| l.starts_with("index"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        said.contains("TAMPERED the index itself")
            && said.contains("line 2: out of order or dropped (it was written as line 3)"),
        "{said}"
    );
    eprintln!("{said}");
    // The run it was about has lost where its record ends.
    assert!(
        line_of(&out, &a).contains("the index has no closed line"),
        "{out}"
    );
    assert!(line_of(&out, &b).contains("ok ("), "{out}");
}

#[test]
fn a_killed_run_is_incomplete_but_intact() {
    let env = Env::new();
    let scratch = env.scratch();
    let rb = env.write(
        "killed.lua",
        r#"
runbook { name = "audit-killed", params = { dir = { type = "path", required = true } } }
local here = target("local")
step("one", function() here:exec({ "echo", "first" }) end)
step("wait", function()
  here:shell("touch started; while [ ! -e stop ]; do sleep 0.05; done", { cwd = params.dir })
end)
"#,
    );
    let mut running = Run::new(&env, &rb).yes().set("dir", &scratch).spawn();
    running.wait_file(&scratch.join("started"), Duration::from_secs(20));
    running.signal(libc::SIGKILL);
    running.wait(Duration::from_secs(5));
    // The step's loop ends by itself: nothing is left running.
    std::fs::write(scratch.join("stop"), "").unwrap();
    let id = env
        .record_files()
        .pop()
        .unwrap()
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let out = verify(&env, &["--all"], 0);
    let line = line_of(&out, &id);
    assert!(
        line.contains("incomplete (no run_finished: killed, or still running):")
            && line.contains("chain intact"),
        "{line}"
    );
    eprintln!("{line}");
    // Cut short now, it is still a record that holds: the index never knew its end.
    // What the chain does find is a line taken out of it.
    let path = record(&env, &id);
    let mut all = lines(&path);
    all.remove(1);
    write(&path, &all);
    tampered(&env, &id, "line 2: out of order or dropped");
}

/// The watchdog writes a stuck step's end from its own thread: chained after the sink's.
#[test]
fn a_run_the_watchdog_ended_verifies() {
    let env = Env::new();
    let fixture = repo().join("tests/runbooks/interrupt/stuck_step.lua");
    let mut running = Run::new(&env, &fixture)
        .yes()
        .set("dir", env.scratch())
        .spawn();
    running.wait_file(&env.scratch().join("started"), Duration::from_secs(20));
    // Well into the string.find.
    std::thread::sleep(Duration::from_millis(500));
    running.signal(libc::SIGTERM);
    assert_eq!(running.code(Duration::from_secs(30)), 143);
    let events = env.complete_record();
    let id = run_id_of(&events);
    let line = line_of(&verify(&env, &[&id], 0), &id);
    assert!(line.contains("ok ("), "{line}");
}

#[test]
fn records_made_before_chaining_do_not_fail_all() {
    let env = Env::new();
    let id = run(&env);
    // The same record as a run from before records were chained wrote it: no links, and
    // not in the index.
    let old = "20200101-000000-0000";
    let unlinked: Vec<String> = lines(&record(&env, &id))
        .iter()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            o.remove("seq");
            o.remove("prev");
            serde_json::to_string(&v).unwrap()
        })
        .collect();
    write(&record(&env, old), &unlinked);
    let out = verify(&env, &["--all"], 0);
    assert!(
        line_of(&out, old).contains("unchained (made before records were chained): not checked"),
        "{out}"
    );
    assert!(
        out.contains("1 record(s) made before records were chained were not checked"),
        "{out}"
    );
    // The links taken out of a record the index lists is an edit.
    write(&record(&env, &id), &unlinked);
    tampered(&env, &id, "line 1: edited (it has no seq and prev");
}

#[test]
fn no_such_run_is_exit_2() {
    let env = Env::new();
    run(&env);
    verify(&env, &["nosuchrun"], 2);
}
