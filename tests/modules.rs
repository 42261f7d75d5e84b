//! The Lua modules a runbook requires are part of what was reviewed (issue 25, item 3):
//! a plan records each one it loaded (a file beside the runbook, or the stdlib shipped
//! inside runbook) with the sha256 of its bytes, `apply` refuses before anything runs when
//! one differs, and the `require` of a held run refuses a module that is not the planned
//! one byte for byte, so a file swapped while the run goes on (by an earlier step's own
//! command) does not run either; a confirmed `run` holds to its in-memory plan the same way.
use crate::common::*;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn sha256_of(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A runbook in `rb/` whose first step touches `DIR/first`, and whose second step is the
/// first to require `lib.late` and touches what it names. `lib.helpers` is required at
/// the top, and so is `runbook.text` from the stdlib.
fn runbook(env: &Env) -> PathBuf {
    env.write(
        "rb/lib/helpers.lua",
        "return { path = function(dir, name) return dir .. '/' .. name end }\n",
    );
    env.write("rb/lib/late.lua", "return { name = 'second' }\n");
    env.write("rb/evil.lua", "return { name = 'evil' }\n");
    env.write(
        "rb/main.lua",
        r#"runbook { name = "modules", params = {
  dir = { type = "path", required = true },
  swap = { type = "boolean", default = false },
} }
local helpers = require("lib.helpers")
local text = require("runbook.text")
local here = target("local")
step("first", function()
  here:exec({ "touch", helpers.path(params.dir, "first") })
  if params.swap then
    -- An earlier step's own command replaces the module a later step loads.
    here:exec({ "cp", "--", params.dir .. "/../rb/evil.lua", params.dir .. "/../rb/lib/late.lua" })
  end
end)
step("second", function()
  local late = require("lib.late")
  here:exec({ "touch", helpers.path(params.dir, text.split(late.name)[1]) })
end)
"#,
    )
}

fn plan_file(env: &Env) -> PathBuf {
    env.tmp.path().join("plan.json")
}

fn make_plan(env: &Env, rb: &Path, swap: bool) -> Value {
    Run::cmd(env, ["plan"])
        .arg(rb)
        .set("dir", env.scratch())
        .set("swap", if swap { "true" } else { "false" })
        .arg("-o")
        .arg(plan_file(env))
        .expect_exit(0)
        .run();
    serde_json::from_str(&std::fs::read_to_string(plan_file(env)).unwrap()).unwrap()
}

fn apply(env: &Env) -> Output {
    Run::cmd(env, ["apply"])
        .arg(plan_file(env))
        .arg("--yes")
        .run()
}

/// Every module the plan pass loaded, with its path and the sha256 of its bytes, the
/// stdlib's as `shipped`; the plan's text and Markdown list them.
#[test]
fn a_plan_records_every_module_it_loaded() {
    let env = Env::new();
    let rb = runbook(&env);
    let plan = make_plan(&env, &rb, false);
    let modules = plan["modules"].as_array().expect("a modules list");
    let find = |name: &str| {
        modules
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {modules:?}"))
            .clone()
    };
    let helpers = find("lib.helpers");
    assert_eq!(helpers["path"], "lib/helpers.lua");
    let bytes = std::fs::read(env.tmp.path().join("rb/lib/helpers.lua")).unwrap();
    assert_eq!(helpers["sha256"], sha256_of(&bytes));
    // Required only inside a step: the plan pass ran that step.
    assert_eq!(find("lib.late")["path"], "lib/late.lua");
    let text = find("runbook.text");
    assert_eq!(text["path"], "shipped");
    assert_eq!(
        text["sha256"],
        sha256_of(&std::fs::read(repo().join("stdlib/runbook/text.lua")).unwrap())
    );
    let shown = Run::cmd(&env, ["plan"])
        .arg(plan_file(&env))
        .expect_exit(0)
        .run();
    assert!(
        shown.stdout_text().contains(&format!(
            "  lib.helpers (lib/helpers.lua, sha256 {}…)",
            &sha256_of(&bytes)[..12]
        )),
        "{}",
        shown.describe()
    );
    let md = Run::cmd(&env, ["plan"])
        .arg(plan_file(&env))
        .args(["--format", "md"])
        .expect_exit(0)
        .run();
    assert!(
        md.stdout_text()
            .contains("| `lib.helpers` | `lib/helpers.lua` | sha256 `"),
        "{}",
        md.describe()
    );
}

/// The module swapped after the plan was made (and reviewed): apply refuses before
/// anything runs, naming the module and both digests.
#[test]
fn a_module_swapped_after_the_plan_is_refused_before_anything_runs() {
    let env = Env::new();
    let rb = runbook(&env);
    let plan = make_plan(&env, &rb, false);
    let planned = plan["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "lib.late")
        .unwrap()["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    let evil = b"return { name = 'evil' }\n";
    std::fs::write(env.tmp.path().join("rb/lib/late.lua"), evil).unwrap();
    let out = apply(&env);
    out.assert_exit(2);
    let said = out.stderr_text();
    assert!(
        said.contains("refused, nothing was changed")
            && said.contains(&format!(
                "module 'lib.late' (lib/late.lua): planned sha256 {}…, now {}…",
                &planned[..12],
                &sha256_of(evil)[..12]
            )),
        "{}",
        out.describe()
    );
    assert!(!env.scratch().join("first").exists(), "a step ran");
    assert_eq!(env.record_count(), 0);
    // A module gone is refused the same way.
    std::fs::remove_file(env.tmp.path().join("rb/lib/late.lua")).unwrap();
    let out = apply(&env);
    out.assert_exit(2);
    assert!(
        out.stderr_text()
            .contains("module 'lib.late' (lib/late.lua): planned sha256 "),
        "{}",
        out.describe()
    );
    assert!(!env.scratch().join("first").exists(), "a step ran");
}

/// The stdlib inside runbook is recorded too: a plan whose stdlib module is not this
/// runbook's (another version's) is refused.
#[test]
fn a_stdlib_module_that_differs_is_refused() {
    let env = Env::new();
    let rb = runbook(&env);
    let mut plan = make_plan(&env, &rb, false);
    for m in plan["modules"].as_array_mut().unwrap() {
        if m["name"] == "runbook.text" {
            m["sha256"] = Value::String("0".repeat(64));
        }
    }
    std::fs::write(
        plan_file(&env),
        serde_json::to_string_pretty(&plan).unwrap(),
    )
    .unwrap();
    let out = apply(&env);
    out.assert_exit(2);
    assert!(
        out.stderr_text()
            .contains("module 'runbook.text' (shipped): planned sha256 000000000000…, now "),
        "{}",
        out.describe()
    );
    assert!(!env.scratch().join("first").exists(), "a step ran");
}

/// The module is replaced while the apply runs, after apply's own check: by the first
/// step's command, before the second step is the first to require it. The `require`
/// refuses it, and the second step's change does not run.
#[test]
fn a_module_swapped_during_the_apply_is_refused_at_require() {
    let env = Env::new();
    let rb = runbook(&env);
    make_plan(&env, &rb, true);
    let out = apply(&env);
    out.assert_exit(1);
    let said = out.stderr_text();
    assert!(
        said.contains(
            "require(\"lib.late\"): refused: module 'lib.late' (lib/late.lua): planned sha256 "
        ),
        "{}",
        out.describe()
    );
    assert!(env.scratch().join("first").exists(), "{}", out.describe());
    assert!(!env.scratch().join("second").exists());
    assert!(!env.scratch().join("evil").exists());
}

/// A module the plan does not list (the list edited, or a step that loads one only at
/// apply) is refused at its `require`.
#[test]
fn a_module_not_in_the_plan_is_refused_at_require() {
    let env = Env::new();
    let rb = runbook(&env);
    let mut plan = make_plan(&env, &rb, false);
    plan["modules"]
        .as_array_mut()
        .unwrap()
        .retain(|m| m["name"] != "lib.late");
    std::fs::write(
        plan_file(&env),
        serde_json::to_string_pretty(&plan).unwrap(),
    )
    .unwrap();
    let out = apply(&env);
    out.assert_exit(1);
    assert!(
        out.stderr_text().contains(
            "require(\"lib.late\"): refused: module 'lib.late' (lib/late.lua) is not in the plan"
        ),
        "{}",
        out.describe()
    );
    assert!(!env.scratch().join("second").exists());
}

/// `run` without --yes holds to the plan it showed: a module changed between the
/// confirmation and the step that loads it is refused there too (on a real pty).
#[test]
fn a_confirmed_run_refuses_a_module_changed_after_the_confirmation() {
    let env = Env::new();
    let rb = runbook(&env);
    let (code, screen) = Run::new(&env, &rb)
        .set("dir", env.scratch())
        .set("swap", "true")
        .on_terminal("y\n");
    assert_eq!(code, 1, "{screen}");
    assert!(
        screen.contains(
            "require(\"lib.late\"): refused: module 'lib.late' (lib/late.lua): planned sha256 "
        ),
        "{screen}"
    );
    assert!(env.scratch().join("first").exists(), "{screen}");
    assert!(!env.scratch().join("second").exists(), "{screen}");
    assert!(!env.scratch().join("evil").exists(), "{screen}");
}

/// Unchanged modules apply as planned.
#[test]
fn unchanged_modules_apply() {
    let env = Env::new();
    let rb = runbook(&env);
    make_plan(&env, &rb, false);
    apply(&env).assert_exit(0);
    assert!(env.scratch().join("first").exists());
    assert!(env.scratch().join("second").exists());
}
