//! Secrets never leak: not at the cut of a tail, not across the 64 KiB split of a long
//! line, not across two writes of the command, not in `show`, not in an error raised at
//! load, and not from a command whose output is the secret (`secret_output`). A secret
//! that is an ordinary word masks what runbooks and commands print, never the names,
//! paths and ids runbook writes itself.
//!
//! Secrets come in through `RUNBOOK_PARAM_TOKEN` (so that no argv holds them) and reach
//! commands through `env`; every check reads what a user could see: stdout (`--json`),
//! stderr, and every run record.
use crate::common::*;

const SECRET: &str = "S3CR3T-TOKEN-VALUE-123456";

/// Pieces of `SECRET` long enough that none occurs by chance, one across each place a
/// cut could fall.
const PIECES: &[&str] = &[
    "S3CR3T-TOK",
    "TOKEN-VAL",
    "VALUE-123",
    "E-123456",
    "3CR3T-TOKEN",
];

fn assert_nothing_of_the_secret(what: &str, text: &str) {
    assert!(!text.contains(SECRET), "{what} shows the secret:\n{text}");
    for p in PIECES {
        assert!(
            !text.contains(p),
            "{what} shows a piece of the secret ({p}):\n{text}"
        );
    }
}

/// Runs `body` (the steps) under a header with a secret `token` param, `--json`.
fn run(env: &Env, body: &str) -> (i32, String, String) {
    let rb = env.write(
        "leak.lua",
        &subst(
            r#"runbook { name = "leak", params = { token = { type = "string", secret = true, required = true } } }
local here = target("local")
@body@"#,
            &[("body", &body)],
        ),
    );
    let out = Run::new(env, &rb)
        .yes()
        .json()
        .env("RUNBOOK_PARAM_TOKEN", SECRET)
        .run();
    let (stdout, stderr) = (out.stdout_text(), out.stderr_text());
    assert_nothing_of_the_secret("stdout (--json)", &stdout);
    assert_nothing_of_the_secret("stderr", &stderr);
    assert_nothing_of_the_secret("the run record", &env.all_records());
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

/// `action_finished.stdout_tail` keeps the last 4 KiB: the cut falls inside the secret.
#[test]
fn a_secret_at_the_cut_of_a_tail_is_masked() {
    let env = Env::new();
    for keep in [1, 5, 10, 20, 24] {
        let (code, stdout, _) = run(
            &env,
            &subst(
                r#"step("print", function()
  here:exec({ "sh", "-c", 'printf "%s" "$TOKEN"; head -c @bytes@ /dev/zero | tr "\\000" b' }, { env = { TOKEN = params.token }, read_only = true })
end)"#,
                &[("bytes", &(4096 - keep))],
            ),
        );
        assert_eq!(code, 0, "{stdout}");
        assert!(stdout.contains("\"stdout_tail\""), "{stdout}");
    }
}

/// A line over 64 KiB is cut into pieces: the secret straddles the cut.
#[test]
fn a_secret_across_the_split_of_a_long_line_is_masked() {
    let env = Env::new();
    for before in [65536 - 1, 65536 - 10, 65536 - 24] {
        let (code, stdout, _) = run(
            &env,
            &subst(
                r#"step("print", function()
  here:exec({ "sh", "-c", 'head -c @before@ /dev/zero | tr "\\000" a; printf "%s\\n" "$TOKEN"' }, { env = { TOKEN = params.token }, read_only = true })
end)"#,
                &[("before", &before)],
            ),
        );
        assert_eq!(code, 0, "{stdout}");
        assert!(stdout.contains("***"), "the secret shows as *** somewhere");
    }
}

/// The command writes the secret in two writes, 200 ms apart.
#[test]
fn a_secret_written_in_two_pieces_is_masked() {
    let env = Env::new();
    let (code, stdout, _) = run(
        &env,
        r#"step("print", function()
  here:exec({ "sh", "-c", 'printf "%s" "${TOKEN%%-VALUE*}"; sleep 0.2; printf "%s\n" "-VALUE${TOKEN#*-VALUE}"' }, { env = { TOKEN = params.token }, read_only = true })
end)"#,
    );
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains(r#""line":"***""#), "{stdout}");
}

/// `secret_output = true`: the output is masked while the command runs (it is not
/// known as a secret yet) and is a secret from then on.
#[test]
fn secret_output_masks_a_secret_the_command_prints() {
    let env = Env::new();
    let made = "gen-42-tok-abcdef";
    let (code, stdout, stderr) = run(
        &env,
        r#"step("mint", function()
  local r = here:exec({ "sh", "-c", 'echo "gen-$((6*7))-tok-abcdef"' }, { secret_output = true, read_only = true })
  log.info("minted " .. r.stdout)
  if r.stdout ~= "gen-42-tok-abcdef\n" then fail("the runbook gets the value itself") end
end)"#,
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    for (what, text) in [
        ("stdout", &stdout),
        ("stderr", &stderr),
        ("record", &env.all_records()),
    ] {
        assert!(
            !text.contains(made),
            "{what} shows the command's secret output:\n{text}"
        );
    }
    assert!(stdout.contains("minted ***"), "{stdout}");
}

/// `show` prints step names; one built from a secret param is masked.
#[test]
fn show_masks_a_step_name_made_from_a_secret() {
    let env = Env::new();
    let rb = env.write(
        "named.lua",
        r#"runbook { name = "named", params = { token = { type = "string", secret = true } } }
step("deploy with " .. (params.token or "none"), function() end)
"#,
    );
    let stdout = Run::cmd(&env, ["show".as_ref(), rb.as_os_str()])
        .env("RUNBOOK_PARAM_TOKEN", SECRET)
        .expect_exit(0)
        .run()
        .stdout_text();
    assert_nothing_of_the_secret("show", &stdout);
    assert!(stdout.contains("deploy with ***"), "{stdout}");
}

/// An error raised by the runbook's top level, with the secret in its message.
#[test]
fn an_error_at_load_time_masks_the_secret() {
    let env = Env::new();
    let rb = env.write(
        "load_error.lua",
        r#"runbook { name = "load-error", params = { token = { type = "string", secret = true, required = true } } }
error("bad token " .. params.token)
"#,
    );
    for cmd in ["run", "check"] {
        let stderr = Run::cmd(&env, [cmd.as_ref(), rb.as_os_str()])
            .env("RUNBOOK_PARAM_TOKEN", SECRET)
            .expect_exit(2)
            .run()
            .stderr_text();
        assert_nothing_of_the_secret(cmd, &stderr);
        assert!(stderr.contains("bad token ***"), "{cmd}: {stderr}");
    }
}

/// A secret that is an ordinary word (`deploy`, also the runbook's name) masks output,
/// not runbook's own fields: the record's runbook name and path, `history`, `--resume`.
/// And runbook warns that such a short secret mangles output.
#[test]
fn a_secret_that_is_an_ordinary_word_leaves_runbooks_own_fields_alone() {
    let env = Env::new();
    let rb = env.write(
        "deploy.lua",
        r#"runbook { name = "deploy", params = { word = { type = "string", secret = true, required = true } } }
local here = target("local")
step("say", function() here:exec({ "echo", "we deploy today" }, { read_only = true }) end)
"#,
    );
    Run::new(&env, &rb)
        .yes()
        .env("RUNBOOK_PARAM_WORD", "deploy")
        .expect_exit(0)
        .stderr_has("param 'word' is a secret of only 6 characters")
        .run();
    let events = env.last_record();
    let Event::RunStarted { runbook, path, .. } = &events[0] else {
        panic!("{:#?}", events[0])
    };
    assert_eq!(runbook, "deploy", "{:#?}", events[0]);
    assert!(path.ends_with("deploy.lua"), "{:#?}", events[0]);
    let out_line = pick!(events, Event::Output { line, .. } => line)
        .into_iter()
        .next()
        .expect("an output event");
    assert_eq!(out_line, "we *** today", "output is still masked");
    Run::cmd(&env, ["history"]).stdout_has("deploy").run();
    // --resume last finds the run.
    Run::new(&env, &rb)
        .yes()
        .args(["--resume", "last"])
        .env("RUNBOOK_PARAM_WORD", "deploy")
        .expect_exit(0)
        .run();
}

/// A secret placed in an argv is visible to every user of the machine: runbook says so,
/// in a dry-run as in a run.
#[test]
fn a_secret_in_an_argv_is_warned_about() {
    let env = Env::new();
    let (code, stdout, _) = run(
        &env,
        r#"step("leaky", function() here:exec({ "true", params.token }, { read_only = true }) end)"#,
    );
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("a secret is in the argv of"), "{stdout}");
}

/// `check` warns too: it plans the steps offline (nothing contacted, nothing changed)
/// and reports a secret placed in an argv, with the file; the check still passes.
#[test]
fn check_warns_about_a_secret_in_an_argv() {
    let env = Env::new();
    let rb = env.write(
        "leaky.lua",
        "runbook { name = \"leaky\", params = { token = { type = \"string\", secret = true, required = true } } }\nlocal here = target(\"local\")\nstep(\"leaky\", function() here:exec({ \"curl\", \"-H\", \"Authorization: \" .. params.token, \"https://api.example\" }) end)\n",
    );
    let stderr = Run::cmd(&env, ["check".as_ref(), rb.as_os_str()])
        .env("RUNBOOK_PARAM_TOKEN", SECRET)
        .expect_exit(0)
        .run()
        .stderr_text();
    assert!(
        stderr.contains("warning: ") && stderr.contains("leaky.lua: a secret is in the argv of"),
        "{stderr}"
    );
    assert_nothing_of_the_secret("check", &stderr);
}

/// The secret twice, about a tail's length apart: masking the second copy must not pull
/// the tail's cut into the first (found by review: 11 characters showed).
#[test]
fn two_copies_of_a_secret_around_the_tail_cut_are_masked() {
    let env = Env::new();
    for pad in [4096 - 15, 4096 - 10, 4096 - 20, 4096 - 1] {
        let (code, stdout, _) = run(
            &env,
            &subst(
                r#"step("print", function()
  here:exec({ "sh", "-c", 'printf "head\n%s%s%s\n" "$TOKEN" "$Q" "$TOKEN"' }, { env = { TOKEN = params.token, Q = string.rep("x", @pad@) }, read_only = true })
end)"#,
                &[("pad", &pad)],
            ),
        );
        assert_eq!(code, 0, "{stdout}");
    }
}

/// `check` stays bounded (5 s) even with looping `always` steps in its offline plan
/// (found by review: 5 s + 60 s per `always` step).
#[test]
fn check_with_looping_always_steps_stays_bounded() {
    let env = Env::new();
    let rb = env.write(
        "loops.lua",
        "runbook { name = \"loops\", params = { token = { type = \"string\", secret = true, default = \"s3cr3t-default-xyz\" } } }\nstep(\"loop\", function() while true do end end)\nstep(\"c1\", { always = true }, function() while true do end end)\nstep(\"c2\", { always = true }, function() while true do end end)\n",
    );
    let started = std::time::Instant::now();
    Run::cmd(&env, ["check".as_ref(), rb.as_os_str()])
        .timeout(std::time::Duration::from_secs(60))
        .expect_exit(0)
        .run();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "check took {:?}",
        started.elapsed()
    );
}

/// A secret with a `'` in it: a preview, a plan and a record show commands quoted, where
/// a `'` is written `'\''`, so the value as given is not in them; the quoted form is
/// masked too. A step named from the secret is masked in a saved plan (JSON and
/// Markdown) as in the run, and a failing `secret_output` command's stderr is not shown.
#[test]
fn a_quoted_secret_and_a_step_named_from_one_are_masked_in_plans_and_runs() {
    let env = Env::new();
    let secret = "pa'ss-S3CR3T-TOKEN-VALUE-123456";
    let rb = env.write(
        "quoted.lua",
        r#"runbook { name = "quoted", params = { token = { type = "string", secret = true, required = true } } }
local here = target("local")
step("rotate " .. params.token, function()
  here:exec({ "sh", "-c", "cat >/dev/null" }, { env = { TOKEN = params.token }, stdin = "Authorization: " .. params.token .. "\n" })
end)
step("mint", function()
  here:exec({ "sh", "-c", 'printf "%s\n" "$TOKEN" >&2; exit 3' }, { env = { TOKEN = params.token }, secret_output = true })
end)
"#,
    );
    let plan = env.tmp.path().join("quoted.json");
    let mut seen = String::new();
    let mut take = |out: &Output| {
        seen.push_str(&out.stdout_text());
        seen.push_str(&out.stderr_text());
    };
    take(
        &Run::new(&env, &rb)
            .dry_run()
            .env("RUNBOOK_PARAM_TOKEN", secret)
            .run(),
    );
    take(
        &Run::cmd(
            &env,
            [
                "plan".as_ref(),
                rb.as_os_str(),
                "-o".as_ref(),
                plan.as_os_str(),
            ],
        )
        .env("RUNBOOK_PARAM_TOKEN", secret)
        .expect_exit(0)
        .run(),
    );
    take(
        &Run::cmd(
            &env,
            [
                "plan".as_ref(),
                plan.as_os_str(),
                "--format".as_ref(),
                "md".as_ref(),
            ],
        )
        .expect_exit(0)
        .run(),
    );
    let real = Run::new(&env, &rb)
        .yes()
        .json()
        .env("RUNBOOK_PARAM_TOKEN", secret)
        .expect_exit(1)
        .run();
    take(&real);
    take(&Run::cmd(&env, ["log", "last"]).expect_exit(0).run());
    let saved = std::fs::read_to_string(&plan).unwrap();
    for (what, text) in [
        ("output", &seen),
        ("plan", &saved),
        ("records", &env.all_records()),
    ] {
        for piece in ["S3CR3T", "pa'\\''ss", "TOKEN-VALUE"] {
            assert!(!text.contains(piece), "{what} shows {piece}:\n{text}");
        }
    }
    assert!(saved.contains("rotate ***"), "{saved}");
    assert!(seen.contains("env 'TOKEN=***'"), "{seen}");
    let failed = pick!(real.run_events(), Event::StepFinished { error, .. } => error.clone());
    let error = failed[1].as_deref().unwrap();
    assert!(
        error.contains("exit code 3") && error.ends_with("exit 3'"),
        "no stderr tail: {error}"
    );
}

/// `RUNBOOK_PARAM_*` (how a secret is given) is taken out of runbook's environment, so
/// no command inherits it: `srun` would pass it on to every task, and a command could
/// print it in a form the masker does not know.
#[test]
fn no_command_inherits_the_params_given_in_the_environment() {
    let env = Env::new();
    let (code, stdout, stderr) = run(
        &env,
        r#"step("look", function()
  local r = here:exec({ "sh", "-c", "env | grep -c '^RUNBOOK_PARAM_' || true" }, { read_only = true })
  log.info("inherited " .. r.stdout:gsub("%s", ""))
  if params.token == nil then fail("the param itself is lost") end
end)"#,
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("inherited 0"), "{stdout}");
}

/// A 64 KiB cut that falls inside a multi-byte character of the secret: the character
/// waits for the next piece, so the secret is masked whole (decoded apart, its halves
/// were two U+FFFD and the rest of the secret showed). Over SSH's session and locally.
#[test]
fn a_cut_inside_a_character_of_the_secret_still_masks_it() {
    let env = Env::new();
    let secret = "S3CR3T-ÄTOKEN-VALUE-123456";
    let rb = env.write(
        "utf8.lua",
        r#"runbook { name = "utf8", params = { token = { type = "string", secret = true, required = true } } }
step("print", function()
  local r = target("local"):exec({ "sh", "-c", 'head -c 65528 /dev/zero | tr "\\000" a; printf "%s\\n" "$TOKEN"' }, { env = { TOKEN = params.token }, read_only = true })
  if not r.stdout:find(params.token, 1, true) then fail("the runbook gets the bytes whole") end
end)
"#,
    );
    let out = Run::new(&env, &rb)
        .yes()
        .json()
        .env("RUNBOOK_PARAM_TOKEN", secret)
        .expect_exit(0)
        .run();
    for (what, text) in [
        ("stdout", out.stdout_text()),
        ("records", env.all_records()),
    ] {
        for piece in ["TOKEN-VALUE", "\u{fffd}"] {
            assert!(!text.contains(piece), "{what} shows {piece:?}");
        }
    }
}

/// A secret of several lines (a PEM key) printed as it is: output is masked line by
/// line, so each of its lines is masked, on the terminal, in the record and in the
/// replies; a short line of it (`-----`, a base64 tail `Zz==`) is not a secret of its
/// own, so ordinary text that holds it stays readable.
#[test]
fn a_multi_line_secret_printed_as_it_is_is_masked_on_every_line() {
    let env = Env::new();
    let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACCxRk3YlN0KEYlinesOfAKeyThatMustNotLeak0123456789abcdef==\nZz==\n-----END OPENSSH PRIVATE KEY-----\n";
    let rb = env.write(
        "pem.lua",
        r#"runbook { name = "pem", params = { key = { type = "string", secret = true, required = true } } }
local here = target("local")
step("print", function()
  here:exec({ "sh", "-c", 'printf "%s\n" "$KEY"; printf "%s\n" "$KEY" >&2; echo "Zz== stays"' }, { env = { KEY = params.key } })
end)
"#,
    );
    let replies = env.tmp.path().join("R.jsonl");
    let out = Run::new(&env, &rb)
        .yes()
        .env("RUNBOOK_PARAM_KEY", pem)
        .arg("-v")
        .arg("--save-replies")
        .arg(&replies)
        .expect_exit(0)
        .run();
    let saved = std::fs::read_to_string(&replies).unwrap();
    for (what, text) in [
        ("terminal", out.stderr_text() + &out.stdout_text()),
        ("record", env.all_records()),
        ("replies", saved),
    ] {
        for piece in [
            "b3BlbnNzaC1rZXktdjEAAAAABG5v",
            "QyNTUxOQAAACCxRk3Y",
            "NotLeak0123",
        ] {
            assert!(!text.contains(piece), "{what} shows {piece}:\n{text}");
        }
        assert!(text.contains("***"), "{what}: {text}");
    }
    let record = env.all_records();
    assert!(
        record.contains("Zz== stays"),
        "a short line is no secret: {record}"
    );
}

/// `check` fills an unset secret param with a placeholder (`<token>`): that is not the
/// secret, so it is no "secret of only 7 characters".
#[test]
fn check_does_not_call_an_unset_secret_short() {
    let env = Env::new();
    let rb = env.write(
        "unset.lua",
        "runbook { name = \"unset\", params = { token = { type = \"string\", secret = true, required = true } } }\nlocal here = target(\"local\")\nstep(\"use\", function() here:exec({ \"true\" }, { env = { TOKEN = params.token } }) end)\n",
    );
    let out = Run::cmd(&env, ["check".as_ref(), rb.as_os_str()])
        .env_remove("RUNBOOK_PARAM_TOKEN")
        .expect_exit(0)
        .run();
    let stderr = out.stderr_text();
    assert!(!stderr.contains("secret of only"), "{stderr}");
    // A short secret that is given is still warned about.
    let given = Run::cmd(&env, ["check".as_ref(), rb.as_os_str()])
        .env("RUNBOOK_PARAM_TOKEN", "short")
        .expect_exit(0)
        .run()
        .stderr_text();
    assert!(given.contains("secret of only 5 characters"), "{given}");
}
