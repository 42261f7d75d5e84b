//! Every error message a user can meet, as a snapshot (tests/snapshots/errors__*.snap):
//! one test per variant of `error::Error` (src/base/error.rs), each with the ways to get
//! there, and the shapes of a failed step (a primitive's bad option, a failed command
//! with the end of its stderr, timeouts, a missing program, a lost host, a held lock,
//! Ctrl-C). Each snapshot is the exit code and what runbook printed on stderr (on the
//! terminal, for the prompt), with the test's temp dir, run ids, measured durations,
//! pids, ports and the user and host redacted.
use crate::common;
use crate::common::sshd::Fleet;
use crate::common::*;

use std::time::Duration;

/// The snapshot `name` of `text`, redacted.
fn snap(name: &str, text: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(true);
    settings.set_omit_expression(true);
    for (re, to) in [
        (r"/tmp/\.tmp\w+", "[TMP]"),
        (r"/var/tmp/runbook-doubles-\w+", "[DOUBLES]"),
        (r"\b\d{8}-\d{6}-[0-9a-f]{4}\b", "[RUN]"),
        // Measured: after a step's name, and in the summary (given durations stay).
        (r"(?m)  \d+(\.\d+)?(ms|s)$", "  [DUR]"),
        (r"(?m)  \d+m\d{2}s$", "  [DUR]"),
        (r"· \d+(\.\d+)?(ms|s) ·", "· [DUR] ·"),
        (r"· \d+m\d{2}s ·", "· [DUR] ·"),
        (r"\(pid \d+\)", "(pid [PID])"),
        (
            r"since \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC",
            "since [TIME]",
        ),
        (r"127\.0\.0\.1(\]?):\d+", "127.0.0.1$1:[PORT]"),
        (r"port \d+", "port [PORT]"),
        (r"by (uid \d+|[\w.-]+)@\S+ \(pid", "by [USER]@[HOST] (pid"),
        (r#""ts":"[^"]+""#, r#""ts":"[TS]""#),
        (r"\r\n", "\n"),
    ] {
        settings.add_filter(re, to);
    }
    settings.add_filter(&regex::escape(&repo().display().to_string()), "[REPO]");
    settings.bind(|| insta::assert_snapshot!(name, text));
}

/// `exit N`, then stderr.
fn said(out: &Output) -> String {
    format!("exit {}\n{}", out.code(), out.stderr_str())
}

/// Runs `runbook WORDS…` in `env` and snapshots it as `name`, expecting `code`.
fn case(env: &Env, name: &str, words: &[&str], code: i32) {
    snap(name, &said(&Run::cmd(env, words).expect_exit(code).run()));
}

/// A temp dir with the files the cases below name.
fn scene() -> Env {
    let env = Env::new();
    for (name, text) in [
        ("ok.lua", "runbook { name = \"ok\" }\nstep(\"s\", function() end)\n"),
        ("broken.lua", "runbook { name = \"broken\" \nstep(\n"),
        ("noheader.lua", "local x = 1\n"),
        ("steps_first.lua", "step(\"s\", function() end)\n"),
        (
            "badfield.lua",
            "runbook { name = \"f\", descripton = \"typo\" }\n",
        ),
        ("notatable.lua", "runbook(\"name\")\n"),
        (
            "typo.lua",
            "runbook { name = \"typo\" }\nstep(\"s\", function() lgo.info(1) end)\n",
        ),
        ("toperr.lua", "runbook { name = \"top\" }\nerror(\"boom at the top\")\n"),
        (
            "topexec.lua",
            "runbook { name = \"topexec\" }\ntarget(\"local\"):exec({ \"true\" })\n",
        ),
        (
            "norequire.lua",
            "runbook { name = \"norequire\" }\nlocal m = require(\"helpers\")\n",
        ),
        (
            "io.lua",
            "runbook { name = \"io\" }\nlocal f = io.open(\"/etc/passwd\")\n",
        ),
        (
            "params.lua",
            "runbook { name = \"p\", params = {\n  n = { type = \"integer\", required = true },\n  color = { choices = { \"red\", \"blue\" }, default = \"red\" },\n} }\nstep(\"s\", function() end)\n",
        ),
    ] {
        env.write(name, text);
    }
    env
}

#[test]
fn flags() {
    let env = scene();
    case(&env, "flags_unknown", &["--no-such-flag"], 2);
    case(&env, "flags_unknown_subcommand", &["frobnicate"], 2);
    case(&env, "flags_missing_file", &["run"], 2);
    case(&env, "flags_missing_value", &["run", "ok.lua", "--set"], 2);
    case(
        &env,
        "flags_bad_duration",
        &["run", "ok.lua", "--timeout", "soon"],
        2,
    );
}

#[test]
fn usage() {
    let env = scene();
    case(
        &env,
        "usage_ssh_config",
        &["run", "ok.lua", "--ssh-config", "nosuch"],
        2,
    );
    case(&env, "usage_docs_topic", &["docs", "nosuchtopic"], 2);
    case(&env, "usage_list_dir", &["list", "nosuchdir"], 2);
    case(&env, "usage_script", &["script", "venv-biuld"], 2);
}

/// `runbook new` over a file that is there; its and `init`'s bad arguments (usage).
#[test]
fn file_exists() {
    let env = scene();
    case(&env, "file_exists_new", &["new", "ok"], 2);
    case(&env, "usage_new_name", &["new", "../ok"], 2);
    case(&env, "usage_init_dir", &["init", "nosuchdir"], 2);
}

/// `init`, `new` and `fmt` refusing to write through a link (`Error::Write`, exit 2).
#[test]
fn write() {
    let env = scene();
    let types = env.tmp.path().join(".runbook/types");
    std::fs::create_dir_all(&types).unwrap();
    std::os::unix::fs::symlink("../../../home/me/.bashrc", types.join("runbook.lua")).unwrap();
    case(&env, "write_through_a_link", &["init"], 2);
    std::os::unix::fs::symlink("elsewhere.lua", env.tmp.path().join("linked.lua")).unwrap();
    case(&env, "write_new_through_a_link", &["new", "linked"], 2);
}

#[test]
fn no_runbook() {
    let env = scene();
    case(&env, "no_runbook_file", &["run", "nosuch.lua"], 2);
    case(&env, "no_runbook_name", &["run", "nosuchname"], 2);
    std::fs::create_dir_all(env.tmp.path().join("adir.lua")).unwrap();
    case(&env, "no_runbook_unreadable", &["run", "adir.lua"], 2);
}

#[test]
fn runbook_file() {
    let env = scene();
    case(&env, "runbook_syntax", &["run", "broken.lua"], 2);
    case(&env, "runbook_missing_header", &["run", "noheader.lua"], 2);
    case(
        &env,
        "runbook_step_before_header",
        &["run", "steps_first.lua"],
        2,
    );
    case(&env, "runbook_header_field", &["run", "badfield.lua"], 2);
    case(
        &env,
        "runbook_header_not_a_table",
        &["run", "notatable.lua"],
        2,
    );
    case(&env, "runbook_unknown_global", &["run", "typo.lua"], 2);
    case(&env, "runbook_top_level_error", &["run", "toperr.lua"], 2);
    case(
        &env,
        "runbook_exec_at_top_level",
        &["run", "topexec.lua"],
        2,
    );
    case(
        &env,
        "runbook_require_missing",
        &["run", "norequire.lua"],
        2,
    );
    case(&env, "runbook_sandbox", &["run", "io.lua"], 2);
    env.write(
        "forever.lua",
        "runbook { name = \"forever\" }\nwhile true do end\n",
    );
    case(
        &env,
        "runbook_top_level_too_long",
        &["check", "forever.lua"],
        2,
    );
}

#[test]
fn params() {
    let env = scene();
    case(&env, "params_missing", &["run", "params.lua"], 2);
    case(
        &env,
        "params_type",
        &["run", "params.lua", "--set", "n=x"],
        2,
    );
    case(
        &env,
        "params_unknown",
        &["run", "params.lua", "--set", "n=1", "--set", "colour=red"],
        2,
    );
    case(
        &env,
        "params_choice",
        &["run", "params.lua", "--set", "n=1", "--set", "color=green"],
        2,
    );
    case(
        &env,
        "params_not_key_value",
        &["run", "params.lua", "--set", "n"],
        2,
    );
    let out = Run::new(&env, "params.lua")
        .env("RUNBOOK_PARAM_N", "seven")
        .expect_exit(2)
        .run();
    snap("params_from_the_environment", &said(&out));
    // With --json, an error before the run is one `error` event on stdout.
    let out = Run::new(&env, "params.lua").json().expect_exit(2).run();
    snap("params_missing_json", &out.stdout_text());
}

#[test]
fn inventory() {
    let env = scene();
    env.write("unknown_key.toml", "[hosts.a]\nno_such_key = 1\n");
    env.write("syntax.toml", "[hosts.a\n");
    env.write("via.toml", "[hosts.a]\nvia = \"nowhere\"\npct = 200\n");
    for (name, file) in [
        ("inventory_unknown_key", "unknown_key.toml"),
        ("inventory_syntax", "syntax.toml"),
        ("inventory_via", "via.toml"),
        ("inventory_missing", "nosuch.toml"),
    ] {
        case(&env, name, &["run", "ok.lua", "--inventory", file], 2);
    }
}

#[test]
fn check_failed() {
    let env = scene();
    case(
        &env,
        "check_failed",
        &["check", "ok.lua", "broken.lua", "typo.lua"],
        2,
    );
}

/// `fmt`: Lua that does not parse, settings StyLua does not take (`Error::Format`, exit
/// 2), and `--check` finding a file to format (`Error::Unformatted`, exit 1).
#[test]
fn format() {
    let env = scene();
    case(&env, "format_bad_lua", &["fmt", "ok.lua", "broken.lua"], 2);
    env.write("conf/stylua.toml", "indent_width = 2\ncolumn_widht = 80\n");
    env.write("conf/a.lua", "local x = 1\n");
    case(&env, "format_bad_settings", &["fmt", "conf/a.lua"], 2);
    env.write("ugly.lua", "local  x=1\n");
    case(
        &env,
        "unformatted",
        &["fmt", "--check", "ugly.lua", "ok.lua"],
        1,
    );
}

#[test]
fn no_such_run() {
    let env = scene();
    case(&env, "no_such_run_log", &["log", "nosuchrun"], 2);
    case(&env, "no_such_run_log_last", &["log", "last"], 2);
    for _ in 0..2 {
        Run::new(&env, "ok.lua").yes().expect_exit(0).run();
    }
    case(&env, "no_such_run_ambiguous", &["log", "2"], 2);
}

#[test]
fn resume() {
    let env = scene();
    case(
        &env,
        "resume_no_earlier_run",
        &["run", "ok.lua", "--resume", "last"],
        2,
    );
    case(
        &env,
        "resume_no_such_run",
        &["run", "ok.lua", "--resume", "nosuch"],
        2,
    );
    Run::new(&env, "ok.lua").dry_run().expect_exit(0).run();
    let dry = run_id(&env.last_record());
    case(
        &env,
        "resume_a_dry_run",
        &["run", "ok.lua", "--resume", &dry],
        2,
    );
    Run::new(&env, "params.lua")
        .yes()
        .set("n", "1")
        .expect_exit(0)
        .run();
    let other = run_id(&env.last_record());
    case(
        &env,
        "resume_another_runbook",
        &["run", "ok.lua", "--resume", &other],
        2,
    );
    case(
        &env,
        "resume_params_differ",
        &["run", "params.lua", "--set", "n=2", "--resume", "last"],
        2,
    );
    env.write(
        "params.lua",
        "runbook { name = \"p\", params = { n = { type = \"integer\" } } }\nstep(\"s\", function() end)\n",
    );
    case(
        &env,
        "resume_file_changed",
        &["run", "params.lua", "--set", "n=1", "--resume", "last"],
        2,
    );
}

#[test]
fn confirmation() {
    let env = scene();
    let dir = env.scratch();
    env.write(
        "change.lua",
        &subst(
            r#"runbook { name = "change" }
local here = target("local")
step("make", function() here:exec({ "touch", "@dir@/made" }) end)
step("clear", function() here:exec({ "rm", "-f", "--", "@dir@/made" }) end)
"#,
            &[("dir", &dir.display())],
        ),
    );
    case(&env, "needs_confirmation", &["run", "change.lua"], 2);
    // An answer on stdin that is not a terminal confirms nothing.
    Run::new(&env, "change.lua")
        .stdin("y\n")
        .expect_exit(2)
        .stderr_has("needs confirmation")
        .run();
    let (code, shown) = Run::new(&env, "change.lua").on_terminal("n\n");
    snap("not_confirmed", &format!("exit {code}\n{shown}"));
    env.write(
        "plan_fails.lua",
        "runbook { name = \"plan-fails\" }\nlocal here = target(\"local\")\n\
         step(\"make\", function() here:exec({ \"touch\", \"/nonexistent/made\" }) end)\n\
         step(\"look\", function() here:exec({ \"sh\", \"-c\", \"echo no such file >&2; exit 1\" }, { read_only = true }) end)\n",
    );
    case(&env, "plan_failed", &["run", "plan_fails.lua"], 2);
    assert!(!dir.join("made").exists(), "nothing was changed");
}

#[test]
fn record_and_state_dir() {
    let env = scene();
    let file = env.write("a-file", "");
    let inside = format!("{}/state", file.display());
    case(
        &env,
        "record_cannot_be_kept",
        &["run", "ok.lua", "--yes", "--state-dir", &inside],
        2,
    );
    case(
        &env,
        "io_state_dir",
        &["history", "--state-dir", file.to_str().unwrap()],
        2,
    );
}

/// With 4 open files allowed (stdin, stdout, stderr and one), runbook cannot make its
/// async runtime.
#[test]
fn startup() {
    let env = scene();
    let out = Run::new(&env, "ok.lua").nofile(4).expect_exit(2).run();
    snap("startup", &said(&out));
}

/// The run ran and a step failed: the failed command's line and the end of its stderr,
/// the steps after it skipped, the `always` step run, the summary.
#[test]
fn run_failed() {
    let env = scene();
    env.write(
        "fail.lua",
        "runbook { name = \"fail\" }\nlocal here = target(\"local\")\n\
         step(\"copy\", function()\n  here:exec({ \"sh\", \"-c\", \"for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo line $i >&2; done; echo No space left on device >&2; exit 3\" })\nend)\n\
         step(\"after\", function() end)\n\
         step(\"clean up\", { always = true }, function() end)\n",
    );
    let out = Run::new(&env, "fail.lua").yes().expect_exit(1).run();
    snap("run_failed_command", &said(&out));
    env.write(
        "fail_msg.lua",
        "runbook { name = \"fail-msg\" }\nstep(\"check\", function() fail(\"expected at least 3 files, found 1\") end)\n\
         step(\"nil\", { always = true }, function() local t = nil; return t.field end)\n",
    );
    let out = Run::new(&env, "fail_msg.lua").yes().expect_exit(1).run();
    snap("run_failed_fail_and_lua_error", &said(&out));
}

/// The shapes a failed step takes, each in a run of its own (a step after a failed one
/// would be skipped).
#[test]
fn step_failures() {
    let env = scene();
    let empty = env.scratch().join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let host_refuses = subst(
        r#"ssh("127.0.0.1", { port = @port@, connect_timeout = "2s" }):exec({ "true" }, { read_only = true })"#,
        &[("port", &port)],
    );
    // The options with a misspelt key are built before the call: one written in the call
    // is refused as the file loads (tests/typos.rs); this is the run's own refusal.
    let cases: &[(&str, &str, &str)] = &[
        (
            "unknown_option",
            "",
            r#"local o = { timeuot = "1s" }; here:exec({ "true" }, o)"#,
        ),
        (
            "option_type",
            "",
            r#"here:exec({ "true" }, { read_only = "yes" })"#,
        ),
        ("not_a_path_list", "", "cache.size(here, true)"),
        (
            "primitive_option",
            "",
            "local o = { cuont = 8 }; gpu.require(here, o)",
        ),
        ("not_an_argv", "", r#"here:exec("rm -rf /tmp/x")"#),
        (
            "command_timeout",
            "",
            r#"here:exec({ "sleep", "5" }, { read_only = true, timeout = "300ms" })"#,
        ),
        (
            "step_timeout",
            r#"{ timeout = "500ms" }, "#,
            r#"here:exec({ "sleep", "5" }, { read_only = true })"#,
        ),
        (
            "missing_program",
            "",
            r#"here:exec({ "no-such-program-here" }, { read_only = true })"#,
        ),
        ("missing_nvidia_smi", "", "gpu.probe(here)"),
        ("refused_deletion", "", r#"cache.clear(here, { "/etc" })"#),
        ("host_refuses", "", &host_refuses),
        (
            "parallel",
            "",
            r#"parallel({ 1, 2, 3 }, function(i) if i > 1 then fail("item " .. i .. " broke") end end)"#,
        ),
    ];
    for (name, opts, body) in cases {
        let file = format!("{name}.lua");
        env.write(
            &file,
            &subst(
                r#"runbook { name = "shape" }
local here = target("local")
step("@name@", @opts@function()
  @body@
end)
"#,
                &[("name", &name), ("opts", &opts), ("body", &body)],
            ),
        );
        let out = Run::new(&env, file.as_str())
            .yes()
            .env("PATH", format!("{}:/usr/bin:/bin", empty.display()))
            .timeout(Duration::from_secs(60))
            .expect_exit(1)
            .run();
        snap(&format!("step_{name}"), &said(&out));
    }
}

/// Another run holds a lock on the target that this one needs (it locks the whole
/// machine): the step fails naming that run, its runbook and since when.
#[test]
fn lock_held() {
    let env = scene();
    let started = env.scratch().join("started");
    env.write(
        "hold.lua",
        &subst(
            r#"runbook { name = "hold" }
local here = target("local")
step("hold", function()
  here:exec({ "touch", "@started@" })
  here:exec({ "sleep", "30" })
end)
"#,
            &[("started", &started.display())],
        ),
    );
    env.write(
        "change.lua",
        "runbook { name = \"change\", lock = \"machine\" }\nstep(\"change\", function() target(\"local\"):exec({ \"true\" }) end)\n",
    );
    let mut holder = Run::new(&env, "hold.lua").yes().spawn();
    holder.wait_file(&started, Duration::from_secs(20));
    let out = Run::new(&env, "change.lua").yes().expect_exit(1).run();
    snap("lock_held", &said(&out));
    holder.signal(libc::SIGTERM);
    assert_eq!(
        holder.code(Duration::from_secs(20)),
        143,
        "{}",
        holder.output()
    );
}

/// Ctrl-C: before the run started (while its plan is made), and in the middle of a step.
#[test]
fn interrupted() {
    let env = scene();
    let dir = env.scratch();
    env.write(
        "slow_plan.lua",
        &subst(
            r#"runbook { name = "slow-plan" }
local here = target("local")
step("s", function()
  here:exec({ "sh", "-c", 'touch "$1"; sleep 30', "sh", "@dir@/planning" }, { read_only = true })
  here:exec({ "touch", "@dir@/changed" })
end)
"#,
            &[("dir", &dir.display())],
        ),
    );
    let mut run = Run::new(&env, "slow_plan.lua").spawn();
    run.wait_file(&dir.join("planning"), Duration::from_secs(20));
    run.signal(libc::SIGINT);
    let code = run.code(Duration::from_secs(20));
    snap(
        "interrupted_before_the_run",
        &format!("exit {code}\n{}", run.stderr()),
    );

    env.write(
        "mid_step.lua",
        &subst(
            r#"runbook { name = "mid-step" }
local here = target("local")
step("long", function()
  here:exec({ "sh", "-c", 'touch "$1"; sleep 30', "sh", "@dir@/running" })
end)
step("later", function() end)
step("clean up", { always = true }, function() end)
"#,
            &[("dir", &dir.display())],
        ),
    );
    let mut run = Run::new(&env, "mid_step.lua").yes().spawn();
    run.wait_file(&dir.join("running"), Duration::from_secs(20));
    run.signal(libc::SIGINT);
    let code = run.code(Duration::from_secs(20));
    snap(
        "interrupted_mid_step",
        &format!("exit {code}\n{}", run.stderr()),
    );
}

/// Over SSH: an unknown host key, and a host killed in the middle of a command.
#[test]
fn remote() {
    require_sshd!();
    let mut fleet = Fleet::start(1);
    std::fs::write(fleet.known_hosts(), "").unwrap();
    let env = scene();
    env.write(
        "probe.lua",
        "runbook { name = \"probe\" }\nstep(\"probe\", function() target(\"node1\"):exec({ \"true\" }, { read_only = true }) end)\n",
    );
    let out = Run::new(&env, "probe.lua")
        .ssh(&fleet)
        .yes()
        .expect_exit(1)
        .run();
    snap("remote_unknown_host_key", &said(&out));
    fleet.write_client_files();
    let pid = env.scratch().join("remote.pid");
    env.write(
        "lost.lua",
        &subst(
            r#"runbook { name = "lost" }
step("long", function()
  target("node1"):exec({ "sh", "-c", 'echo $$ > "$1"; exec sleep 30', "sh", "@pid@" })
end)
"#,
            &[("pid", &pid.display())],
        ),
    );
    let mut run = Run::new(&env, "lost.lua").ssh(&fleet).yes().spawn();
    let remote = run.wait_pid(&pid, Duration::from_secs(20));
    let _reap = common::running::Reap(vec![remote]);
    fleet.node("node1").kill();
    let code = run.code(Duration::from_secs(20));
    snap(
        "remote_connection_lost",
        &format!("exit {code}\n{}", run.stderr()),
    );
}

/// `plan` and `apply`: a saved plan that is not one (PlanFile), a plan that could not be
/// made (PlanIncomplete, exit 1), and an apply refused because the runbook changed since
/// the plan (PlanRefused).
#[test]
fn saved_plans() {
    let env = scene();
    let dir = env.scratch();
    env.write("notaplan.json", "{\"format\": 1}\n");
    case(
        &env,
        "plan_file_missing",
        &["apply", "missing.json", "--yes"],
        2,
    );
    case(
        &env,
        "plan_file_not_a_plan",
        &["apply", "notaplan.json", "--yes"],
        2,
    );
    env.write(
        "plan_fails.lua",
        "runbook { name = \"plan-fails\" }\nlocal here = target(\"local\")\n\
         step(\"look\", function() here:exec({ \"sh\", \"-c\", \"echo no such file >&2; exit 1\" }, { read_only = true }) end)\n",
    );
    case(&env, "plan_incomplete", &["plan", "plan_fails.lua"], 1);
    let body = subst(
        r#"runbook { name = "change" }
local here = target("local")
step("make", function() here:exec({ "touch", "@dir@/made" }) end)
"#,
        &[("dir", &dir.display())],
    );
    env.write("change.lua", &body);
    Run::cmd(&env, ["plan", "change.lua", "-o", "p.json"])
        .expect_exit(0)
        .run();
    env.write("change.lua", &format!("{body}-- edited after the plan\n"));
    let out = Run::cmd(&env, ["apply", "p.json", "--yes"])
        .expect_exit(2)
        .run();
    // The file's content hash holds the temp dir's random name.
    let shown = regex::Regex::new(r"\b[0-9a-f]{12}…")
        .unwrap()
        .replace_all(&said(&out), "[SHA]…")
        .into_owned();
    snap("plan_refused", &shown);
    assert!(!dir.join("made").exists(), "nothing was changed");
}

/// `apply` of a plan file edited after it was made (issue 25 item 1): a command text that
/// is not the one its digest is of, refused before anything is used; a summary that is not
/// the real change's, refused as the run reaches it, before any change.
#[test]
fn edited_plans() {
    let env = scene();
    let dir = env.scratch();
    env.write(
        "clear.lua",
        &subst(
            r#"runbook { name = "clear" }
local here = target("local")
step("clear", function() here:exec({ "rm", "-rf", "--", "@dir@/junk" }) end)
"#,
            &[("dir", &dir.display())],
        ),
    );
    std::fs::create_dir_all(dir.join("junk")).unwrap();
    Run::cmd(&env, ["plan", "clear.lua", "-o", "p.json"])
        .expect_exit(0)
        .run();
    let made = std::fs::read_to_string(env.tmp.path().join("p.json")).unwrap();
    let plan: serde_json::Value = serde_json::from_str(&made).unwrap();
    let sha = regex::Regex::new(r"\b[0-9a-f]{12}…").unwrap();
    let made_by = regex::Regex::new(r"made \S+ by [^:]+:").unwrap();
    for (name, field, to) in [
        ("plan_unbound", "command", "rm -rf -- old-junk"),
        ("plan_misread", "summary", "delete old-junk"),
    ] {
        let mut edited = plan.clone();
        edited["changes"][0][field] = to.into();
        env.write("p.json", &serde_json::to_string_pretty(&edited).unwrap());
        let out = Run::cmd(&env, ["apply", "p.json", "--yes"])
            .expect_exit(2)
            .run();
        let shown = sha.replace_all(&said(&out), "[SHA]…").into_owned();
        let shown = made_by
            .replace_all(&shown, "made [TIME] by [WHO]:")
            .into_owned();
        snap(name, &shown);
        assert!(dir.join("junk").exists(), "{name}: nothing was changed");
    }
}

/// `runbook test`: a replies file that is wrong (exit 2), a command it has no reply for
/// (exit 3, with the closest recorded one and the difference).
#[test]
fn replies() {
    let env = scene();
    env.write(
        "probe.lua",
        "runbook { name = \"probe\" }\nstep(\"s\", function() target(\"root@gpu1.invalid\"):exec({ \"nvidia-smi\", \"-L\" }) end)\n",
    );
    env.write(
        "bad.jsonl",
        "{\"runbook_replies\":1}\n{\"target\":\"local\",\"argv\":[\"true\"],\"cdoe\":0}\n",
    );
    env.write(
        "other.jsonl",
        "{\"runbook_replies\":1}\n{\"target\":\"root@gpu1.invalid\",\"argv\":[\"nvidia-smi\",\"-q\"],\"code\":0}\n",
    );
    case(
        &env,
        "replies_file",
        &["test", "ok.lua", "--replies", "bad.jsonl"],
        2,
    );
    case(
        &env,
        "replies_missing",
        &["test", "ok.lua", "--replies", "nosuch.jsonl"],
        2,
    );
    case(
        &env,
        "test_diverged",
        &["test", "probe.lua", "--replies", "other.jsonl"],
        3,
    );
}
