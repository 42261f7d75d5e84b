use super::*;
use crate::targets::Target;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

fn salt() -> Salt {
    Salt("00".into())
}

/// The masker of a run without secrets.
fn plain(text: &str) -> String {
    text.to_string()
}

fn seen<'a>(step: usize, command: &'a str) -> Seen<'a> {
    Seen {
        step,
        step_name: "s",
        target: "local",
        destination: "local",
        command,
        shown: command,
        stdin: None,
        summary: command,
        destructive: false,
        may_delete: false,
        diff: None,
    }
}

fn plan(changes: &[(usize, &str)]) -> Plan {
    let mut rec = Recording::new(salt());
    for (step, command) in changes {
        rec.change(&seen(*step, command));
    }
    Plan {
        format: FORMAT,
        runbook_version: env!("CARGO_PKG_VERSION").into(),
        created: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        created_by: "me@here".into(),
        mode: "dry-run".into(),
        runbook: PlannedRunbook {
            name: "t".into(),
            description: None,
            path: "t.lua".into(),
            file: None,
            shipped: None,
            sha256: "ab".repeat(32),
        },
        modules: Vec::new(),
        salt: rec.salt,
        params: BTreeMap::new(),
        reached_with: ReachedWith::default(),
        targets: Vec::new(),
        steps: Vec::new(),
        changes: rec.changes,
        reads: rec.reads,
    }
}

#[test]
fn the_confirmed_changes_run_in_order_and_nothing_else() {
    let mut e = Enforcer::new(&plan(&[(0, "rm -rf -- /x/A"), (1, "touch b")]));
    e.step_attempt(0);
    assert!(e.allow(&seen(0, "rm -rf -- /x/A"), &plain).is_ok());
    e.step_attempt(1);
    let err = e.allow(&seen(1, "rm -rf -- /x/B"), &plain).unwrap_err();
    assert!(
        err.contains("confirmed: touch b") && err.contains("now:       rm -rf -- /x/B"),
        "{err}"
    );
    // Sticky: the confirmed change itself no longer runs either.
    assert!(e.allow(&seen(1, "touch b"), &plain).is_err());
}

#[test]
fn a_retry_repeats_its_steps_changes() {
    let mut e = Enforcer::new(&plan(&[(0, "a"), (0, "b"), (1, "c")]));
    e.step_attempt(0);
    assert!(e.allow(&seen(0, "a"), &plain).is_ok());
    e.step_attempt(0);
    assert!(e.allow(&seen(0, "a"), &plain).is_ok());
    assert!(e.allow(&seen(0, "b"), &plain).is_ok());
    e.step_attempt(1);
    assert!(e.allow(&seen(1, "c"), &plain).is_ok());
    assert!(e
        .allow(&seen(1, "d"), &plain)
        .unwrap_err()
        .contains("nothing more in this step"));
}

/// A change the user saw in a later step does not run in an earlier one (review F2).
#[test]
fn a_confirmed_change_does_not_run_in_another_step() {
    let mut e = Enforcer::new(&plan(&[(2, "rm -f canary")]));
    e.step_attempt(0);
    let err = e.allow(&seen(0, "rm -f canary"), &plain).unwrap_err();
    assert!(err.contains("confirmed for another step"), "{err}");
}

/// After a failure the run skips steps; an `always` step's confirmed change still
/// runs (review F3).
#[test]
fn skipped_steps_changes_are_passed_over() {
    let mut e = Enforcer::new(&plan(&[
        (0, "touch started"),
        (1, "touch more"),
        (2, "rm -f started"),
    ]));
    e.step_attempt(0);
    assert!(e.allow(&seen(0, "touch started"), &plain).is_ok());
    // step 1 skipped; step 2 (always) runs
    e.step_attempt(2);
    assert!(e.allow(&seen(2, "rm -f started"), &plain).is_ok());
    // a step with no confirmed change may make none
    e.step_attempt(3);
    assert!(e.allow(&seen(3, "touch x"), &plain).is_err());
}

/// `parallel()` items finish in any order: among the changes one made, any may
/// come next, each once.
#[test]
fn a_parallels_changes_run_in_any_order_but_each_once() {
    let mut p = plan(&[(0, "touch a"), (0, "touch b")]);
    for c in &mut p.changes {
        c.parallel = true;
    }
    assert!(p.render(Style::Text, None, false).contains("in any order"));
    let mut e = Enforcer::new(&p);
    e.step_attempt(0);
    assert!(e.allow(&seen(0, "touch b"), &plain).is_ok());
    assert!(e.allow(&seen(0, "touch a"), &plain).is_ok());
    assert!(e.allow(&seen(0, "touch a"), &plain).is_err());
}

/// Every other change of a step runs in the order the plan shows (review: a plan
/// whose changes were swapped showed one order and ran another). One the step no
/// longer makes may be left out at its end, not passed over: a retry may pass over
/// what an earlier attempt made.
#[test]
fn a_steps_changes_run_in_the_order_shown() {
    let p = plan(&[(0, "backup"), (0, "delete"), (0, "report")]);
    let mut e = Enforcer::new(&p);
    e.step_attempt(0);
    let err = e.allow(&seen(0, "delete"), &plain).unwrap_err();
    assert!(
        err.contains("out of the order") && err.contains("change 1"),
        "{err}"
    );
    let mut e = Enforcer::new(&p);
    e.step_attempt(0);
    assert!(e.allow(&seen(0, "backup"), &plain).is_ok());
    e.step_attempt(0);
    assert!(e.allow(&seen(0, "delete"), &plain).is_ok());
    assert!(e.allow(&seen(0, "backup"), &plain).is_err());
    // And a plan listing a later step's change first does not hold together.
    let mut p = plan(&[(0, "a"), (1, "b")]);
    p.changes.swap(0, 1);
    assert!(
        p.unbound().iter().any(|w| w.contains("field \"step\"")),
        "{:?}",
        p.unbound()
    );
}

/// A `***` in a command is checked against its digest unless the recording masked it.
#[test]
fn only_a_masked_command_goes_unchecked() {
    let mut p = plan(&[(0, "echo one")]);
    p.changes[0].command = "echo *** two".into();
    assert!(p.unbound().iter().any(|w| w.contains("command_sha256")));
    p.changes[0].masked = true;
    assert!(p.unbound().iter().all(|w| !w.contains("command_sha256")));
}

#[test]
fn different_stdin_is_a_difference() {
    let mut rec = Recording::new(salt());
    rec.change(&Seen {
        stdin: Some(b"one"),
        ..seen(0, "tee f")
    });
    let mut p = plan(&[]);
    p.changes = rec.changes;
    let mut e = Enforcer::new(&p);
    e.step_attempt(0);
    let err = e
        .allow(
            &Seen {
                stdin: Some(b"two"),
                ..seen(0, "tee f")
            },
            &plain,
        )
        .unwrap_err();
    assert!(err.contains("different standard input"), "{err}");
}

/// The same name, somewhere else (an ssh_config alias that now points at another
/// machine): a difference, shown with both destinations.
#[test]
fn another_destination_is_a_difference() {
    let mut e = Enforcer::new(&plan(&[(0, "touch a")]));
    e.step_attempt(0);
    let err = e
        .allow(
            &Seen {
                destination: "root@app9.example:22",
                ..seen(0, "touch a")
            },
            &plain,
        )
        .unwrap_err();
    assert!(err.contains("(root@app9.example:22)"), "{err}");
}

/// What a person reads of a change is held to the real change, not only its
/// digests: a plan whose text of a change was edited stops the run before it, naming
/// the field; before any change ran, that is the plan refused.
#[test]
fn a_change_shown_otherwise_than_it_is_is_refused() {
    type Edit = fn(&mut Change);
    let edits: [(&str, Edit); 7] = [
        ("summary", |c| c.summary = "delete old-junk".into()),
        ("shown", |c| c.shown = "rm old-junk".into()),
        ("command", |c| c.command = "rm old-junk".into()),
        ("destructive", |c| c.destructive = true),
        ("may_delete", |c| c.may_delete = true),
        ("step_name", |c| c.step_name = "tidy".into()),
        ("target", |c| c.target = "staging".into()),
    ];
    for (field, edit) in edits {
        let mut p = plan(&[(0, "rm -rf -- /x/A")]);
        edit(&mut p.changes[0]);
        let mut e = Enforcer::new(&p);
        e.step_attempt(0);
        let err = e.allow(&seen(0, "rm -rf -- /x/A"), &plain).unwrap_err();
        assert!(
            err.contains(&format!(
                "change 1: field \"{field}\" is not what the change is"
            )),
            "{field}: {err}"
        );
        assert!(e.refused().is_some(), "{field}");
    }
    // After a change ran, the stop is no longer "nothing was changed".
    let mut p = plan(&[(0, "touch a"), (0, "touch b")]);
    p.changes[1].summary = "touch c".into();
    let mut e = Enforcer::new(&p);
    e.step_attempt(0);
    e.allow(&seen(0, "touch a"), &plain).unwrap();
    assert!(e.allow(&seen(0, "touch b"), &plain).is_err());
    assert_eq!(e.refused(), None);
    // A plan holds its texts masked; the real change, masked the same, is the plan's.
    let mask = |t: &str| t.replace("hunter2", crate::base::secrets::MASK);
    let mut p = plan(&[(0, "curl -u hunter2 x")]);
    for c in &mut p.changes {
        c.command = mask(&c.command);
        c.shown = mask(&c.shown);
        c.summary = mask(&c.summary);
    }
    let mut e = Enforcer::new(&p);
    e.step_attempt(0);
    e.allow(&seen(0, "curl -u hunter2 x"), &mask).unwrap();
}

/// The checks a plan file gets from itself alone, each naming the field.
#[test]
fn a_plan_file_that_does_not_hold_together_names_the_field() {
    let mut p = plan(&[(0, "touch a")]);
    p.steps = vec![PlannedStep {
        index: 0,
        name: "s".into(),
        outcome: "planned".into(),
        reason: None,
        confirm: false,
        notes: Vec::new(),
    }];
    assert_eq!(p.unbound(), Vec::<String>::new());
    let unbound = |edit: fn(&mut Plan)| {
        let mut q = p.clone();
        edit(&mut q);
        q.unbound().join("\n")
    };
    assert!(unbound(|q| q.changes[0].command = "touch b".into())
        .contains("change 1: field \"command\" does not match its command_sha256"));
    // Masked, the text cannot be checked against its digest: the run checks it. A
    // `***` the recording did not put there is checked as any text.
    assert_eq!(
        unbound(|q| {
            q.changes[0].command = "touch ***".into();
            q.changes[0].masked = true;
        }),
        ""
    );
    assert!(unbound(|q| q.changes[0].command = "touch ***".into())
        .contains("change 1: field \"command\" does not match its command_sha256"));
    assert!(unbound(|q| q.changes[0].step_name = "t".into())
        .contains("change 1: field \"step_name\" is \"t\", and step 1 of the plan is \"s\""));
    assert!(unbound(|q| q.changes[0].step = 4).contains("change 1: field \"step\" is 5"));
    assert!(unbound(|q| q.changes[0].target = "node1".into())
        .contains("change 1: field \"target\" is \"node1\", not one of the plan's targets"));
    assert!(unbound(|q| {
        let mut t = PlannedTarget::of(&Target::Local, "root@app1.example:22", None);
        t.name = "local".into();
        t.host = Some("app9.example".into());
        q.targets.push(t);
    })
    .contains(
        "target local: field \"host\" is not what its destination root@app1.example:22 says"
    ));
}

/// A change that uses an earlier one's output is a template: `(known after apply)`
/// where the output stands, and in a real run only that change's real output may
/// stand there; the command may differ nowhere else.
#[test]
fn a_hole_holds_only_what_its_change_printed() {
    use crate::actions::known_after::{forms, KnownAfter};
    use crate::targets::ExecRequest;
    let planning = KnownAfter::random();
    let mut rec = Recording::new(salt()).with_known_after(planning.clone());
    assert_eq!(rec.change(&seen(0, "mktemp -d")), 0);
    assert_eq!(rec.change(&seen(0, "mktemp -d")), 1);
    let cmd = format!("touch {}/file", planning.token(0));
    rec.change(&seen(1, &cmd));
    assert_eq!(rec.changes[2].known_after, [0]);
    assert_eq!(rec.changes[2].command, "touch (known after apply)/file");
    assert_eq!(rec.changes[2].summary, "touch (known after apply)/file");
    let mut p = plan(&[]);
    p.changes = rec.changes;
    // The real run: its own placeholders read the real command back.
    let real = KnownAfter::random();
    let read_back = |e: &Enforcer, argv: &[&str]| -> Vec<Templated> {
        let req = ExecRequest {
            argv: argv.iter().map(Into::into).collect(),
            ..ExecRequest::default()
        };
        real.templates(&req, &e.fills())
            .into_iter()
            .map(|r| Templated {
                command: real.marked(Target::Local.render(&r).as_bytes()).0,
                stdin: None,
            })
            .collect()
    };
    let ran = |outputs: bool| {
        let mut e = Enforcer::new(&p);
        e.step_attempt(0);
        let a = e.allow(&seen(0, "mktemp -d"), &plain).unwrap();
        let b = e.allow(&seen(0, "mktemp -d"), &plain).unwrap();
        if outputs {
            e.output(a, b"/tmp/d.1\n");
            e.output(b, b"/tmp/d.2\n");
        }
        e.step_attempt(1);
        e
    };
    let mut e = ran(true);
    assert_eq!(e.fills(), vec![(0, forms(b"/tmp/d.1\n"))]);
    let t = read_back(&e, &["touch", "/tmp/d.1/file"]);
    assert!(e
        .allow_templated(&seen(1, "touch /tmp/d.1/file"), &t, &plain)
        .is_ok());
    // Another change's output in the hole, a difference beside it, or the exact
    // command without reading it back: refused.
    for argv in [["touch", "/tmp/d.2/file"], ["touch", "/tmp/d.1/file2"]] {
        let mut e = ran(true);
        let t = read_back(&e, &argv);
        let err = e
            .allow_templated(&seen(1, &argv.join(" ")), &t, &plain)
            .unwrap_err();
        assert!(
            err.contains("confirmed: touch (known after apply)/file"),
            "{err}"
        );
        assert!(err.contains("only what change 1 printed"), "{err}");
    }
    assert!(ran(true)
        .allow(&seen(1, "touch /tmp/d.1/file"), &plain)
        .is_err());
    // The change a hole names has not run (no output kept): nothing fits it.
    let mut e = ran(false);
    assert!(e.fills().is_empty());
    assert!(e
        .allow_templated(&seen(1, "touch /tmp/d.1/file"), &[], &plain)
        .is_err());
}

#[test]
fn modules_are_held_to_the_plan() {
    let m = |name: &str, sha: &str| PlannedModule {
        name: name.into(),
        path: format!("{name}.lua"),
        sha256: sha.repeat(32),
    };
    let mut held = Modules::default();
    held.load(m("top", "aa")).unwrap();
    let err = held.hold_to(&[m("top", "bb")]).unwrap_err();
    assert_eq!(
        err,
        ["module 'top' (top.lua): planned sha256 bbbbbbbbbbbb…, now aaaaaaaaaaaa…"]
    );
    let mut held = Modules::default();
    held.hold_to(&[m("a", "aa")]).unwrap();
    held.load(m("a", "aa")).unwrap();
    assert!(held
        .load(m("a", "cc"))
        .unwrap_err()
        .contains("planned sha256 aaaa"));
    assert!(held
        .load(m("b", "aa"))
        .unwrap_err()
        .contains("is not in the plan"));
    assert_eq!(held.loaded(), [m("a", "aa")]);
}

#[test]
fn a_read_that_returns_something_else_is_a_warning_until_its_target_changed() {
    let mut rec = Recording::new(salt());
    rec.read(&seen(0, "cat which"), Some((Some(0), b"A\n")));
    rec.read(&seen(0, "cat which"), Some((Some(0), b"A\n")));
    rec.read(&seen(1, "cat which"), Some((Some(0), b"A\n")));
    let mut p = plan(&[(0, "touch x")]);
    p.reads = rec.reads;
    let mut e = Enforcer::new(&p);
    e.step_attempt(0);
    assert_eq!(
        e.read(&seen(0, "cat which"), Some(0), Some(b"A\n"), &plain),
        Ok(None)
    );
    let warned = e
        .read(&seen(0, "cat which"), Some(1), Some(b"B\n"), &plain)
        .unwrap()
        .unwrap();
    assert!(warned.contains("exit code 0 then, 1 now"), "{warned}");
    e.allow(&seen(0, "touch x"), &plain).unwrap();
    e.step_attempt(1);
    // After this run changed the target, its reads are expected to differ.
    assert_eq!(
        e.read(&seen(1, "cat which"), Some(0), Some(b"B\n"), &plain),
        Ok(None)
    );
}

/// Held to a saved plan, a read and a note are shown as the plan shows them (review:
/// an edited summary and note were shown and applied): before any change a
/// difference refuses the plan; after one it is a warning.
#[test]
fn a_saved_plans_reads_and_notes_are_held_to_the_run() {
    let mut rec = Recording::new(salt());
    rec.read(&seen(0, "cat which"), Some((Some(0), b"A\n")));
    let mut p = plan(&[(0, "touch x")]);
    p.reads = rec.reads;
    p.reads[0].summary = "verified the backup".into();
    let mut e = Enforcer::new(&p).hold_texts();
    e.step_attempt(0);
    let err = e
        .read(&seen(0, "cat which"), Some(0), Some(b"A\n"), &plain)
        .unwrap_err();
    assert!(err.contains("read 1: field \"summary\""), "{err}");
    assert!(e.refused().is_some() && e.allow(&seen(0, "touch x"), &plain).is_err());
    let mut p = plan(&[(0, "touch x")]);
    p.steps = vec![PlannedStep {
        index: 0,
        name: "s".into(),
        outcome: "planned".into(),
        reason: None,
        confirm: false,
        notes: vec![Note {
            level: crate::actions::events::Level::Info,
            message: "backup verified".into(),
        }],
    }];
    let info = crate::actions::events::Level::Info;
    let mut e = Enforcer::new(&p).hold_texts();
    e.step_attempt(0);
    assert_eq!(e.note(0, info, "backup verified"), Ok(None));
    e.allow(&seen(0, "touch x"), &plain).unwrap();
    assert!(e.note(0, info, "took 3s").unwrap().is_some());
    let mut e = Enforcer::new(&p).hold_texts();
    e.step_attempt(0);
    let err = e.note(0, info, "backup missing").unwrap_err();
    assert!(err.contains("field \"steps[].notes\""), "{err}");
    // The branches of a parallel() say theirs in the order they finish.
    let mut q = p.clone();
    q.steps[0].notes = ["node1: up", "node2: up"]
        .map(|m| Note {
            level: info,
            message: m.into(),
        })
        .to_vec();
    let mut e = Enforcer::new(&q).hold_texts();
    e.step_attempt(0);
    assert_eq!(e.note(0, info, "node2: up"), Ok(None));
    assert_eq!(e.note(0, info, "node1: up"), Ok(None));
    let err = e.note(0, info, "node1: up").unwrap_err();
    assert!(err.contains("saying nothing more"), "said once only: {err}");
    // An in-memory plan (`run`'s confirmation) is the run's own: not held.
    let mut e = Enforcer::new(&p);
    e.step_attempt(0);
    assert_eq!(e.note(0, info, "backup missing"), Ok(None));
}

#[test]
fn digests_are_salted() {
    let (a, b) = (Salt("aa".into()), Salt("bb".into()));
    assert_ne!(a.digest(b"hunter2"), b.digest(b"hunter2"));
    assert_ne!(a.digest(b"hunter2"), file_sha256(b"hunter2"));
    assert_ne!(Salt::random(), Salt::random());
}

#[test]
fn a_plan_round_trips_and_unknown_formats_are_refused() {
    let p = plan(&[(0, "touch a")]);
    let text = p.to_json();
    assert_eq!(Plan::parse(&text, "p.json").unwrap(), p);
    let future = text.replacen("\"format\": 1", "\"format\": 2", 1);
    let err = Plan::parse(&future, "p.json").unwrap_err();
    assert!(
        err.contains("plan format 2 is not one this runbook"),
        "{err}"
    );
    let err = Plan::parse("{}", "p.json").unwrap_err();
    assert!(err.contains("no \"format\" field"), "{err}");
    let err = Plan::parse("[1,", "p.json").unwrap_err();
    assert!(err.contains("not JSON"), "{err}");
}

#[test]
fn an_old_plan_is_refused() {
    let mut p = plan(&[]);
    let now = SystemTime::now();
    assert!(p.check_made(Some(Duration::from_secs(3600)), now).is_ok());
    p.created = humantime::format_rfc3339_seconds(now - Duration::from_secs(7200)).to_string();
    let err = p
        .check_made(Some(Duration::from_secs(3600)), now)
        .unwrap_err();
    assert!(err.contains("made 2h ago"), "{err}");
    p.created = humantime::format_rfc3339_seconds(now + Duration::from_secs(7200)).to_string();
    assert!(p
        .check_made(Some(Duration::from_secs(3600)), now)
        .unwrap_err()
        .contains("in the future"));
}

#[test]
fn markdown_holds_any_text() {
    assert_eq!(md("a*b_c|d _e_"), "a\\*b_c\\|d \\_e\\_");
    assert_eq!(code_span("rm `x`"), "`` rm `x` ``");
    assert_eq!(code_span("plain"), "`plain`");
}

#[test]
fn a_destination_is_split_into_its_parts() {
    let t = PlannedTarget::of(&Target::Local, "root@127.0.0.1:2222/ct200", None);
    assert_eq!(t.user.as_deref(), Some("root"));
    assert_eq!(t.host.as_deref(), Some("127.0.0.1"));
    assert_eq!(t.port, Some(2222));
    assert_eq!(t.container.as_deref(), Some("ct200"));
    let l = PlannedTarget::of(&Target::Local, "local", None);
    assert_eq!((l.user, l.host, l.port), (None, None, None));
    let v6 = PlannedTarget::of(&Target::Local, "u@::1:22", None);
    assert_eq!((v6.host.as_deref(), v6.port), (Some("::1"), Some(22)));
}

/// A long script folds to its first lines and its last (its arguments), saying how
/// many were left out; a short one, or one asked for whole, is shown as it is; a
/// command its summary already says is not repeated.
#[test]
fn a_change_reads_the_same_wherever_it_is_shown() {
    let script: String = (1..=10).map(|n| format!("line {n}\n")).collect();
    let text = ChangeText {
        target: "local",
        summary: "sh -c: …",
        shown: script.trim_end(),
        destructive: true,
        may_delete: false,
        exact: None,
        diff: None,
    };
    assert_eq!(text.head(), "on local: sh -c: …  [deletes]");
    let folded = text.command(false);
    assert_eq!(folded.len(), 6);
    assert_eq!(folded[0], CommandLine::First("line 1".into()));
    assert_eq!(folded[4], CommandLine::Folded(5));
    assert_eq!(folded[5], CommandLine::More("line 10".into()));
    assert_eq!(text.command(true).len(), 10);
    let shown = text.text("  ~ ", 6, false);
    assert!(shown.contains("\n      $ line 1\nline 2\n"), "{shown}");
    assert!(text
        .markdown(3)
        .starts_with("3. **destructive** · on `local`: "));
    let plain = ChangeText {
        target: "local",
        summary: "true",
        shown: "true",
        destructive: false,
        may_delete: false,
        exact: None,
        diff: None,
    };
    assert_eq!(plain.head(), "on local: true");
    let unsure = ChangeText {
        may_delete: true,
        ..plain
    };
    assert_eq!(unsure.head(), "on local: true  [may delete]");
    assert!(unsure
        .markdown(1)
        .starts_with("1. **may delete** · on `local`"));
    assert!(plain.command(false).is_empty());
    assert_eq!(plain.text("- ", 4, false), "- on local: true\n");
}

/// A file's diff is held as its summary is: the same command and input whose diff reads
/// otherwise (a plan edited after it was made) is stopped before it, naming the field.
#[test]
fn a_diff_that_reads_otherwise_is_refused() {
    let mut rec = Recording::new(salt());
    rec.change(&Seen {
        stdin: Some(b"new\n"),
        diff: Some("--- /x (before)\n+++ /x (after)\n-old\n+new"),
        ..seen(0, "file-put.sh /x")
    });
    let mut p = plan(&[]);
    p.changes = rec.changes;
    assert_eq!(
        p.changes[0].diff.as_deref(),
        Some("--- /x (before)\n+++ /x (after)\n-old\n+new")
    );
    let mut e = Enforcer::new(&p);
    e.step_attempt(0);
    let err = e
        .allow(
            &Seen {
                stdin: Some(b"new\n"),
                diff: Some("--- /x (before)\n+++ /x (after)\n-other\n+new"),
                ..seen(0, "file-put.sh /x")
            },
            &plain,
        )
        .unwrap_err();
    assert!(err.contains("field \"diff\""), "{err}");
    let mut e = Enforcer::new(&p);
    e.step_attempt(0);
    assert!(e
        .allow(
            &Seen {
                stdin: Some(b"new\n"),
                diff: Some("--- /x (before)\n+++ /x (after)\n-old\n+new"),
                ..seen(0, "file-put.sh /x")
            },
            &plain,
        )
        .is_ok());
}

/// The diff under a change: indented lines in text, folded past forty unless whole (a
/// control character shown escaped); a `diff` block in Markdown, always whole.
#[test]
fn a_changes_diff_is_shown_under_it() {
    let long: String = (1..=60).map(|n| format!("+line {n}\n")).collect();
    let diff = format!("--- /dev/null\n+++ /etc/x\n@@ -0,0 +1,60 @@\n{long}+bell \x07");
    let text = ChangeText {
        target: "web1",
        summary: "create /etc/x (1 KiB)",
        shown: "file-put.sh /etc/x old=none new=ab",
        destructive: false,
        may_delete: false,
        exact: None,
        diff: Some(&diff),
    };
    let folded = text.text("  ~ ", 6, false);
    assert!(
        folded.contains("\n        --- /dev/null\n        +++ /etc/x\n"),
        "{folded}"
    );
    assert!(
        folded.contains("        +line 37\n        … 24 more lines of the diff"),
        "{folded}"
    );
    assert!(!folded.contains("+line 38"), "{folded}");
    let whole = text.text("  ~ ", 6, true);
    assert!(whole.contains("+line 60\n        +bell \\x07\n"), "{whole}");
    let md = text.markdown(1);
    assert!(
        md.contains("   - what it does to the file:\n\n     ```diff\n     --- /dev/null\n"),
        "{md}"
    );
    assert!(md.contains("     +line 60\n"), "{md}");
}
