use crate::common::*;

#[test]
fn quickstart_runs_for_real() {
    let env = Env::new();
    let dir = env.scratch().join("qs");
    Run::new(&env, repo().join("examples/quickstart.lua"))
        .yes()
        .set("dir", &dir)
        .expect_exit(0)
        .run();
    assert!(!dir.exists(), "clean up removed the dir");
}

/// Every class of error ends with the exit code README documents, with its message on
/// stderr; a run that ran and failed adds no `error:` line to its own summary.
#[test]
fn each_error_class_ends_with_its_documented_code() {
    let env = Env::new();
    let ok = env.write(
        "ok.lua",
        "runbook { name = \"ok\" }\nstep(\"s\", function() end)\n",
    );
    env.write("broken.lua", "runbook { name = \"broken\" \nstep(\n");
    env.write("noheader.lua", "local x = 1\n");
    env.write(
        "typo.lua",
        "runbook { name = \"typo\" }\nstep(\"s\", function() lgo.info(1) end)\n",
    );
    env.write(
        "params.lua",
        "runbook { name = \"p\", params = { n = { type = \"integer\" } } }\n",
    );
    env.write("bad.toml", "[hosts.a]\nno_such_key = 1\n");
    let scratch = env.scratch();
    env.write(
        "change.lua",
        &subst(
            r#"runbook { name = "change" }
local here = target("local")
step("s", function() here:exec({ "touch", "@scratch@/changed" }) end)
"#,
            &[("scratch", &scratch.display())],
        ),
    );
    env.write(
        "fail.lua",
        "runbook { name = \"fail\" }\nstep(\"s\", function() fail(\"no good\") end)\n",
    );
    let not_a_dir = env.write("file-not-dir", "");
    let ok = ok.to_str().unwrap();
    let state_in_file = format!("{}/state", not_a_dir.display());
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["--no-such-flag"],
            2,
            "unexpected argument '--no-such-flag'",
        ),
        (
            &["run", "nosuch.lua"],
            2,
            "error: no such runbook file: nosuch.lua",
        ),
        (
            &["run", "nosuchname"],
            2,
            "error: no runbook 'nosuchname': looked for",
        ),
        (&["run", "broken.lua"], 2, "error: broken.lua:2: "),
        (
            &["run", "noheader.lua"],
            2,
            "error: noheader.lua: missing header",
        ),
        (
            &["run", "typo.lua"],
            2,
            "error: typo.lua:2: unknown global 'lgo'",
        ),
        (
            &["run", "params.lua", "--set", "n=x"],
            2,
            "error: params.lua:1: --set n: param 'n': expected an integer",
        ),
        (
            &["run", ok, "--inventory", "bad.toml"],
            2,
            "error: inventory bad.toml",
        ),
        (
            &["run", ok, "--ssh-config", "nosuch"],
            2,
            "error: --ssh-config nosuch: no such file",
        ),
        (
            &["check", ok, "broken.lua"],
            2,
            "error: 1 of 2 runbook(s) failed the check",
        ),
        (
            &["docs", "nosuchtopic"],
            2,
            "error: no docs for 'nosuchtopic'",
        ),
        (&["list", "nosuchdir"], 2, "error: cannot list nosuchdir: "),
        (&["log", "nosuchrun"], 2, "error: no run 'nosuchrun' in "),
        (
            &["run", ok, "--resume", "last"],
            2,
            "error: --resume last: no earlier run found in ",
        ),
        (&["run", "change.lua"], 2, "needs confirmation:\n"),
        (
            &["run", ok, "--yes", "--state-dir", &state_in_file],
            2,
            "error: cannot keep the run record in ",
        ),
        (&["run", "fail.lua", "--yes"], 1, "no good"),
        (&["run", ok, "--yes"], 0, ""),
    ];
    for (argv, want, needle) in cases {
        let o = Run::cmd(&env, *argv).run();
        let err = o.stderr_text();
        let what = format!("runbook {}: {:?}\n{err}", argv.join(" "), o.status);
        assert_eq!(o.status.code(), Some(*want), "{what}");
        assert!(err.contains(needle), "wants {needle:?}: {what}");
        if *want < 2 {
            assert!(!err.lines().any(|l| l.starts_with("error:")), "{what}");
        }
    }
    assert!(!scratch.join("changed").exists(), "nothing was changed");
    for argv in [&["--help"][..], &["--version"], &["run", "--help"]] {
        let o = Run::cmd(&env, argv).expect_exit(0).run();
        assert!(!o.stdout.is_empty() && o.stderr.is_empty(), "{argv:?}");
    }
}

/// `--json`: an error before the run is one `error` event with the exit code; a run that
/// ran and failed ends with its `run_finished` (exit code 1), and no `error` event.
#[test]
fn json_ends_with_the_exit_code_of_the_error_or_the_run() {
    let env = Env::new();
    env.write(
        "fail.lua",
        "runbook { name = \"fail\" }\nstep(\"s\", function() fail(\"no good\") end)\n",
    );
    let o = Run::new(&env, "fail.lua").yes().json().expect_exit(1).run();
    let lines = o.lines();
    assert!(
        lines.iter().all(|l| matches!(l, Line::Event(_))),
        "{lines:#?}"
    );
    let events = o.events();
    let last = events.last().unwrap();
    let Event::RunFinished {
        outcome, exit_code, ..
    } = last
    else {
        panic!("{last:?}")
    };
    assert_eq!(*outcome, RunOutcome::Failed, "{last:?}");
    assert_eq!(*exit_code, 1, "{last:?}");
    assert!(o.stderr.is_empty());

    let o = Run::new(&env, "nosuch.lua").json().expect_exit(2).run();
    let lines = o.lines();
    assert_eq!(lines.len(), 1);
    let Line::Error(error) = &lines[0] else {
        panic!("{lines:#?}")
    };
    assert_eq!(error.exit_code, 2);
    assert_eq!(error.message, "no such runbook file: nosuch.lua");
}

/// A signal before the run started (here: while the confirmation pass plans it) ends
/// with 128 + its number, writes no record, and, with `--json`, says so as an `error`.
#[test]
fn a_signal_before_the_run_starts_ends_with_its_code_and_no_record() {
    for (sig, want) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let env = Env::new();
        let scratch = env.scratch();
        env.write(
            "slow_plan.lua",
            &subst(
                r#"runbook { name = "slow-plan" }
local here = target("local")
step("s", function()
  here:exec({ "sh", "-c", 'touch "$1"; sleep 30', "sh", "@scratch@/planning" }, { read_only = true })
  here:exec({ "touch", "@scratch@/changed" })
end)
"#,
                &[("scratch", &scratch.display())],
            ),
        );
        let mut run = Run::new(&env, "slow_plan.lua").json().spawn();
        run.wait_file(
            &scratch.join("planning"),
            std::time::Duration::from_secs(10),
        );
        run.signal(sig);
        assert_eq!(
            run.code(std::time::Duration::from_secs(10)),
            want,
            "{}",
            run.output()
        );
        let lines = run.lines();
        assert_eq!(lines.len(), 1, "{}", run.output());
        let Line::Error(error) = &lines[0] else {
            panic!("{lines:#?}")
        };
        assert_eq!(error.exit_code, want);
        assert_eq!(error.message, "interrupted");
        assert_eq!(env.record_count(), 0, "no record");
        assert!(!scratch.join("changed").exists());
    }
}

/// Every option that takes paths reads them the same way (lua_api::path_list): one path
/// or a list of strings whose entries may also be named, nothing else.
#[test]
fn every_option_that_takes_paths_reads_them_the_same_way() {
    let env = Env::new();
    env.write(
        "paths.lua",
        r#"runbook { name = "paths" }
local here = target("local")
local calls = {
  ["cache.size(): paths"] = function(p) return cache.size(here, p) end,
  ["git.restore(): paths"] = function(p) return git.restore(here, { repo = "/nonexistent/repo", paths = p }) end,
  ["warmup.run(): expect_cache"] = function(p) return warmup.run(here, { script = "w.py", expect_cache = p }) end,
  ["fingerprint.take(): caches"] = function(p) return fingerprint.take(here, { caches = p }) end,
}
local bad = { { 1 }, { "/tmp/a", keep = true }, true }
step("try", function()
  for what, call in pairs(calls) do
    for i, p in ipairs(bad) do
      local ok, e = pcall(call, p)
      log.info(what .. " #" .. i .. " " .. (ok and "accepted" or tostring(e)))
    end
    local ok, e = pcall(call, { "/tmp/a", "/tmp/b", named = "/tmp/b" })
    log.info(what .. " good " .. (ok and "accepted" or tostring(e)))
  end
end)
"#,
    );
    let logs = Run::new(&env, "paths.lua")
        .dry_run()
        .offline()
        .json()
        .expect_exit(0)
        .run()
        .logs();
    assert_eq!(logs.len(), 16, "{logs:#?}");
    for what in [
        "cache.size(): paths",
        "git.restore(): paths",
        "warmup.run(): expect_cache",
        "fingerprint.take(): caches",
    ] {
        let of = |tag: &str| {
            logs.iter()
                .find(|l| l.starts_with(&format!("{what} {tag} ")))
                .unwrap_or_else(|| panic!("{what} {tag}: {logs:#?}"))
                .clone()
        };
        let rule = format!(
            "{what} is a path or a list of paths, e.g. {{ \"/tmp/torchinductor_root\" }}; got"
        );
        for (tag, got) in [
            ("#1", "integer at [1]"),
            (
                "#2",
                "a table with the entry 'keep' that is not in its list",
            ),
            ("#3", "boolean"),
        ] {
            let line = of(tag);
            assert!(line.contains("paths.lua:"), "names the line: {line}");
            assert!(line.contains(&format!("{rule} {got}")), "{line}");
        }
        assert!(!of("good").contains("list of paths"), "{}", of("good"));
    }
}
