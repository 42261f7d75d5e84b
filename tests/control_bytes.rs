//! Control bytes in what a person reads (issue 25, item 6): a name that carries ESC and
//! CR (a directory another user made in a shared cache) is shown escaped, `\x1b`, `\r`,
//! on a real terminal (`script` gives runbook a pty), in the preview, the confirmation,
//! progress, `runbook plan` in text and Markdown, and `runbook log`; while the command
//! that runs, and what the record keeps, stay byte-exact.

use crate::common::run::Run;
use crate::common::{Effect, Env, Event};

/// Erases the line it is printed on, goes back to its start and writes over it.
const NAME: &str = "d\x1b[2Kgone\rOVERWRITE";
const ESCAPED: &str = "d\\x1b[2Kgone\\rOVERWRITE";

/// What a terminal showed holds the name escaped, and none of its raw control bytes.
/// (A pty turns each newline into CR LF, and runbook's own colours and progress redraws
/// use ESC: what is looked for is the name's own bytes, around its text.)
fn assert_escaped(what: &str, screen: &str) {
    assert!(
        !screen.contains("\x1b[2Kgone") && !screen.contains("\rOVERWRITE"),
        "{what}: the name's control bytes reached the terminal raw:\n{screen:?}"
    );
    assert!(
        screen.contains(ESCAPED),
        "{what}: the name is not shown escaped:\n{screen:?}"
    );
}

fn setup(env: &Env) -> (std::path::PathBuf, std::path::PathBuf) {
    let cache = env.scratch().join("cache");
    std::fs::create_dir_all(cache.join(NAME)).unwrap();
    let rb = env.write(
        "names.lua",
        r#"runbook { name = "names", params = { dir = { type = "path", required = true } } }
local here = target("local")
step("touch what another user named", function()
  local r = here:exec({ "sh", "-c", 'for d in "$1"/*; do printf "%s\n" "${d##*/}"; done', "sh", params.dir }, { read_only = true })
  for name in r.stdout:gmatch("[^\n]+") do
    local path = params.dir .. "/" .. name
    here:exec({ "sh", "-c", 'printf "%s\n" "${1##*/}"; sleep 0.6; touch "$1/made"', "sh", path })
  end
end)
"#,
    );
    (cache, rb)
}

#[test]
fn control_bytes_in_a_name_are_shown_escaped_and_run_as_they_are() {
    let env = Env::new();
    let (cache, rb) = setup(&env);
    let set = format!("dir={}", cache.display());

    // The dry-run preview.
    let (code, screen) = Run::new(&env, &rb)
        .args(["--dry-run", "--set", &set])
        .env("TERM", "xterm")
        .on_terminal("");
    assert_eq!(code, 0, "{screen}");
    assert_escaped("the preview", &screen);

    // `runbook plan`, text and Markdown.
    for format in ["text", "md"] {
        let (code, screen) = Run::cmd(&env, ["plan"])
            .arg(&rb)
            .args(["--format", format, "--set", &set])
            .env("TERM", "xterm")
            .on_terminal("");
        assert_eq!(code, 0, "{screen}");
        assert_escaped(&format!("runbook plan --format {format}"), &screen);
    }

    // The confirmation and the progress (a spinner's line shows the latest output).
    let (code, screen) = Run::new(&env, &rb)
        .args(["--set", &set])
        .env("TERM", "xterm")
        .on_terminal("y\n");
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("Proceed?"), "{screen}");
    assert_escaped("the confirmation and progress", &screen);

    // What ran is what the name is, byte for byte.
    assert!(
        cache.join(NAME).join("made").exists(),
        "the command did not act on the name as it is:\n{screen}"
    );
    let events = env.last_record();
    let started =
        pick!(events, Event::ActionStarted { effect: Effect::Change, command, .. } => command)
            .into_iter()
            .next()
            .expect("a change started");
    assert!(
        started.contains(NAME),
        "the record keeps the command as it is: {started:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Output { line, .. } if line == NAME)),
        "the record keeps the output as it is"
    );

    // `runbook log`, and with -v the command lines of the run too.
    for args in [&["log", "last"][..], &["log", "last", "-v"][..]] {
        let (code, screen) = Run::cmd(&env, args.iter().copied())
            .env("TERM", "xterm")
            .on_terminal("");
        assert_eq!(code, 0, "{screen}");
        assert_escaped("runbook log", &screen);
    }
    let (code, screen) = Run::cmd(&env, ["run", "-v"])
        .arg(&rb)
        .args(["--yes", "--set", &set])
        .env("TERM", "xterm")
        .on_terminal("");
    assert_eq!(code, 0, "{screen}");
    assert_escaped("run -v", &screen);
}

/// The Markdown of a plan stays Markdown: a CR in a command (CommonMark reads it as a
/// line break, and a line of backticks after it would close the code block) is escaped.
#[test]
fn a_plans_markdown_keeps_a_cr_inside_its_code() {
    let env = Env::new();
    let (cache, rb) = setup(&env);
    let set = format!("dir={}", cache.display());
    let out = Run::cmd(&env, ["plan"])
        .arg(&rb)
        .args(["--format", "md", "--set", &set])
        .run();
    out.assert_exit(0);
    let md = out.stdout_text();
    assert!(!md.contains('\r') && !md.contains('\x1b'), "{md:?}");
    assert!(md.contains(ESCAPED), "{md}");
}

/// A runbook from elsewhere names its steps as it likes: `show`, `list` and `check`
/// print them escaped too.
#[test]
fn show_list_and_check_escape_a_runbooks_own_names() {
    let env = Env::new();
    let rb = env.write(
        "named.lua",
        r#"runbook { name = "na\27[2Kme", description = "de\rsc" }
step("st\27[2Kep", function() end)
"#,
    );
    for args in [&["show"][..], &["check"][..]] {
        let out = Run::cmd(&env, args.iter().copied()).arg(&rb).run();
        out.assert_exit(0);
        let text = out.stdout_text();
        assert!(
            !text.contains('\x1b') && !text.contains('\r'),
            "{args:?}: {text:?}"
        );
        assert!(text.contains("na\\x1b[2Kme"), "{args:?}: {text}");
    }
    let out = Run::cmd(&env, ["list"]).arg(rb.parent().unwrap()).run();
    out.assert_exit(0);
    let text = out.stdout_text();
    assert!(!text.contains('\x1b') && !text.contains('\r'), "{text:?}");
    assert!(text.contains("de\\rsc"), "{text}");
}

/// Bytes that are not UTF-8 in a command (issue 33 item 6): shown named, `\xff` in
/// `$'…'`, never as U+FFFD (which shows `\xfe` and `\xff` alike), in the preview, the
/// plan's text and Markdown and `runbook log`, here and over a real sshd; the command
/// itself runs with the very bytes.
#[test]
fn bytes_that_are_not_utf8_in_a_command_are_shown_named() {
    crate::require_sshd!();
    let fleet = crate::common::sshd::Fleet::start(1);
    let env = Env::new();
    let dir = env.scratch();
    let rb = env.write(
        "bytes.lua",
        &crate::common::subst(
            r#"runbook { name = "bytes" }
step("touch", function()
  target("local"):exec({ "touch", "@dir@/here-caf\xe9-\xff" })
  target("node1"):exec({ "touch", "@dir@/there-caf\xe9-\xfe" })
end)
"#,
            &[("dir", &dir.display())],
        ),
    );
    let here = format!("touch $'{}/here-caf\\xe9-\\xff'", dir.display());
    let there = format!("{}/there-caf\\xe9-\\xfe", dir.display());
    let shown = |what: &str, text: &str| {
        assert!(
            text.contains(&here) && text.contains(&there),
            "{what}: {text}"
        );
        assert!(!text.contains('\u{fffd}'), "{what}: {text}");
    };
    let dry = Run::new(&env, &rb)
        .ssh(&fleet)
        .dry_run()
        .expect_exit(0)
        .run();
    shown("preview", &(dry.stdout_text() + &dry.stderr_text()));
    let text = Run::cmd(&env, ["plan"])
        .arg(&rb)
        .ssh(&fleet)
        .expect_exit(0)
        .run();
    shown("plan", &text.stdout_text());
    let md = Run::cmd(&env, ["plan", "--format", "md"])
        .arg(&rb)
        .ssh(&fleet)
        .expect_exit(0)
        .run();
    shown("markdown", &md.stdout_text());
    Run::new(&env, &rb).ssh(&fleet).yes().expect_exit(0).run();
    let log = Run::cmd(&env, ["log", "last"]).expect_exit(0).run();
    shown("log", &log.stdout_text());
    use std::os::unix::ffi::OsStrExt;
    let mut made: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().as_bytes().to_vec())
        .collect();
    made.sort();
    assert_eq!(
        made,
        [
            b"here-caf\xe9-\xff".to_vec(),
            b"there-caf\xe9-\xfe".to_vec()
        ],
        "the commands ran with the very bytes"
    );
}
