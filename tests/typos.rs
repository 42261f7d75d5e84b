//! Misspelt API names are caught when a runbook loads, before any step runs: a global,
//! a function of an API table (`cache.clera`), a stdlib module's function, a target
//! handle's method (`here:exce`) or field (`box.nmae`), a param (`params.imgae`), an
//! option in a table written in the call (`{ read_onyl = true }`). Each is reported at `file:line`
//! with a "did you mean", by `check` and by `run` (dry-run, plan and apply load the same
//! way), with exit 2; and the run changes nothing: its first step, before the typo, would
//! create a file, which must not exist afterwards.
//!
//! Correct runbooks that look like typos to a careless check (a local `cache` or
//! `target` shadowing the API, user tables, stdlib modules, method calls on values that
//! are not handles) load and run without a word.

use crate::common::*;

/// A runbook whose first step makes `made` (a change that must not happen) and whose
/// second step, on line 7, holds `typo`.
fn with_typo(env: &Env, typo: &str) -> String {
    let made = env.scratch().join("made");
    let body = subst(
        r#"runbook { name = "typo", description = "a misspelt API name in its second step", params = { image = { default = "x" } } }
local here = target("local")
local text = require("runbook.text")
local box = here:pct(200)
step("first: a change", function() here:exec({ "touch", "@made@" }) end)
step("second", function()
  @typo@
end)
"#,
        &[("made", &made.display()), ("typo", &typo)],
    );
    env.write("typo.lua", &body);
    "typo.lua".into()
}

/// Each kind of typo: what is written on line 7, and the message check and run give.
const CASES: &[(&str, &str)] = &[
    (
        "lgo.info('x')",
        "typo.lua:7: unknown global 'lgo'; did you mean 'log'?",
    ),
    (
        "cache.clera(here, '/tmp/x')",
        "typo.lua:7: unknown 'cache.clera': the API table 'cache' has no 'clera'; did you mean 'cache.clear'?",
    ),
    (
        "artifact.captrue(here, { name = 'x', paths = '/tmp/x' })",
        "typo.lua:7: unknown 'artifact.captrue': the API table 'artifact' has no 'captrue'; did you mean 'artifact.capture'?",
    ),
    (
        "artifact.restore(here, { name = 'x', paths = '/tmp/x', requier = true })",
        "typo.lua:7: unknown 'requier': artifact.restore() takes no option 'requier'; did you mean 'require'?",
    ),
    (
        "local n = text.linse('a')",
        "typo.lua:7: unknown 'text.linse': module 'runbook.text' has no 'linse'; did you mean 'text.lines'?",
    ),
    (
        "here:exce({ 'true' })",
        "typo.lua:7: unknown 'here:exce': a target handle has no method 'exce'; did you mean 'here:exec'?",
    ),
    (
        "box:shel('true')",
        "typo.lua:7: unknown 'box:shel': a target handle has no method 'shel'; did you mean 'box:shell'?",
    ),
    (
        "here:exec({ 'true' }, { read_onyl = true })",
        "typo.lua:7: unknown 'read_onyl': here:exec() takes no option 'read_onyl'; did you mean 'read_only'?",
    ),
    (
        "cache.clear(here, '/tmp/x', { kep = true })",
        "typo.lua:7: unknown 'kep': cache.clear() takes no option 'kep'; did you mean 'keep'?",
    ),
    (
        "log.info(params.imgae)",
        "typo.lua:7: unknown 'params.imgae': the runbook declares no param 'imgae'; did you mean 'params.image'?",
    ),
    (
        "log.info(here.nmae)",
        "typo.lua:7: unknown 'here.nmae': a target handle has no field or method 'nmae'; did you mean 'here.name'?",
    ),
];

#[test]
fn check_reports_each_kind_of_typo_with_its_line_and_exits_2() {
    for (typo, said) in CASES {
        let env = Env::new();
        let file = with_typo(&env, typo);
        let out = Run::cmd(&env, ["check", &file]).expect_exit(2).run();
        assert!(
            out.stderr_str().contains(said),
            "{typo}\n{}",
            out.describe()
        );
        assert!(!env.scratch().join("made").exists());
    }
}

#[test]
fn run_refuses_at_load_and_changes_nothing() {
    for (typo, said) in CASES {
        for extra in [&["--yes"][..], &["--dry-run"][..]] {
            let env = Env::new();
            let file = with_typo(&env, typo);
            let out = Run::cmd(&env, ["run", &file])
                .args(extra)
                .expect_exit(2)
                .run();
            assert!(
                out.stderr_str().contains(said),
                "{typo}\n{}",
                out.describe()
            );
            assert!(
                !env.scratch().join("made").exists(),
                "the step before the typo ran: {typo}"
            );
            // Refused while loading: no run was recorded.
            assert_eq!(env.record_count(), 0, "{typo}");
        }
    }
}

#[test]
fn plan_refuses_too() {
    let env = Env::new();
    let file = with_typo(&env, CASES[3].0);
    let out = Run::cmd(&env, ["plan", &file]).expect_exit(2).run();
    assert!(out.stderr_str().contains(CASES[3].1), "{}", out.describe());
}

/// Proves the run above would have changed something: without the typo the first step
/// makes its file.
#[test]
fn without_the_typo_the_first_step_runs() {
    let env = Env::new();
    let file = with_typo(&env, "here:exec({ 'true' })");
    Run::cmd(&env, ["run", &file, "--yes"]).expect_exit(0).run();
    assert!(env.scratch().join("made").exists());
}

#[test]
fn every_typo_in_a_file_is_reported_in_line_order() {
    let env = Env::new();
    env.write(
        "many.lua",
        r#"runbook { name = "many" }
local here = target("local")
step("s", function()
  here:exce({ "true" })
  cache.clera(here, "/tmp/x")
  lgo.info("x")
end)
"#,
    );
    let out = Run::cmd(&env, ["check", "many.lua"]).expect_exit(2).run();
    let err = out.stderr_str();
    let at = |s: &str| err.find(s).unwrap_or_else(|| panic!("{s} in\n{err}"));
    assert!(at("many.lua:4: unknown 'here:exce'") < at("many.lua:5: unknown 'cache.clera'"));
    assert!(at("many.lua:5:") < at("many.lua:6: unknown global 'lgo'"));
}

/// Locals that shadow API names, user tables, user modules, handles reassigned, values
/// that are not handles: all correct, and the run does what it says.
#[test]
fn correct_runbooks_with_shadowing_are_not_reported() {
    let env = Env::new();
    let made = env.scratch().join("made");
    env.write(
        "helpers.lua",
        "local M = {}\nfunction M.greet(t) return 'hi ' .. t.name end\nreturn M\n",
    );
    let body = subst(
        r#"runbook { name = "shadows", description = "names that look like typos and are not" }
local helpers = require("helpers")
local text = require("runbook.text")
function text.shout(s) return s:upper() end
local cache = { clera = function() return "mine" end }
local here = target("local")
local function target(name) return { exce = function() return name end } end
local other = target("x")
local box = { shel = function() end, nmae = "box" }
step("run", function()
  local s = cache.clera() .. other:exce() .. text.shout("x") .. helpers.greet(here)
  local here = { exce = function(self, v) return v end }
  box.shel()
  log.info(s .. box.nmae .. here:exce("!") .. ("x"):rep(2))
  for _, t in ipairs({ { name = "n", run = function() end } }) do t:run() end
  parallel({ 1, 2 }, function(n) return n end)
end)
step("touch", function() local h = _G.target("local"); h:exec({ "touch", "@made@" }) end)
"#,
        &[("made", &made.display())],
    );
    env.write("shadows.lua", &body);
    let out = Run::cmd(&env, ["check", "shadows.lua"]).run();
    assert_eq!(out.code(), 0, "{}", out.describe());
    assert!(!out.stderr_str().contains("unknown"), "{}", out.describe());
    Run::cmd(&env, ["run", "shadows.lua", "--yes"])
        .expect_exit(0)
        .run();
    assert!(made.exists());
}

/// Every runbook that ships, and every example, passes `check` (the stdlib modules are
/// held to it by the unit test `lint::typos::tests::shipped_files_are_clean`).
#[test]
fn shipped_runbooks_and_examples_pass() {
    let env = Env::new();
    let root = repo();
    let mut files = Vec::new();
    for dir in ["runbooks", "examples", "examples/fleet"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "lua") {
                files.push(e.path().display().to_string());
            }
        }
    }
    assert!(files.len() >= 9, "{files:?}");
    let mut words = vec!["check".to_string()];
    words.extend(files);
    let out = Run::cmd(&env, &words).run();
    assert_eq!(out.code(), 0, "{}", out.describe());
}

/// Found by review: a helper module that wraps `step` (taking an option of its own), a
/// runbook that replaces `cache.clear`, a key written with an escape: all correct, and
/// not reported; the options of what is still the API's are checked all the same.
#[test]
fn options_of_a_replaced_api_function_are_not_checked() {
    let env = Env::new();
    env.write(
        "helpers.lua",
        "local raw_step = step\nfunction step(name, opts, fn)\n  opts.tags = nil\n  return raw_step(name, opts, fn)\nend\nreturn {}\n",
    );
    env.write(
        "wraps.lua",
        r#"runbook { name = "wraps", description = "API functions wrapped by the runbook" }
require("helpers")
local here = target("local")
local orig = cache.clear
function cache.clear(t, p, o) o = o or {}; o.dry = nil; return orig(t, p, o) end
step("a", { tags = { "db" }, timeout = "1m" }, function()
  here:exec({ "true" }, { ["read\95only"] = true })
  cache.clear(here, "/tmp/x", { dry = true })
end)
"#,
    );
    let out = Run::cmd(&env, ["check", "wraps.lua"]).run();
    assert_eq!(out.code(), 0, "{}", out.describe());
    env.write(
        "still.lua",
        r#"runbook { name = "still", description = "a wrapped cache.clear, an unwrapped parallel" }
local here = target("local")
local orig = cache.clear
function cache.clear(t, p, o) return orig(t, p, o) end
step("a", function() parallel({ 1 }, function() end, { limt = 2 }) end)
"#,
    );
    Run::cmd(&env, ["check", "still.lua"])
        .expect_exit(2)
        .stderr_has(
            "still.lua:5: unknown 'limt': parallel() takes no option 'limt'; did you mean 'limit'?",
        )
        .run();
}
