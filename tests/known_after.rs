//! Values known only after apply (issue 25, item 13): a change that uses an earlier
//! change's output (`mktemp -d`, then `touch DIR/file`) is planned and shown with
//! `(known after apply)` there, and the real run lets only that change's real output
//! stand in that place: a command that differs anywhere else is refused. Through a
//! confirmed `run` on a real pty (`script`), through `plan`/`apply`, on this machine and
//! over a real sshd.
use crate::common::sshd::Fleet;
use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `mktemp -d` under `base`, then a file in it whose name comes from `base/name` (a read).
/// `extra` is Lua that runs after (with `dir` and `here` in scope).
fn runbook(env: &Env, target: &str, extra: &str) -> PathBuf {
    env.write(
        "known.lua",
        &subst(
            r#"runbook { name = "known-after", params = { base = { type = "path", required = true } } }
local here = target("@target@")
local dir
step("make a directory", function()
  local r = here:exec({ "mktemp", "-d", "--", params.base .. "/made.XXXXXX" })
  dir = r.stdout:gsub("%s+$", "")
end)
step("fill it", function()
  local name = here:exec({ "cat", "--", params.base .. "/name" }, { read_only = true }).stdout
  name = name:match("^%s*(.-)%s*$")
  here:exec({ "touch", dir .. "/" .. name })
  @extra@
end)
"#,
            &[("target", &target), ("extra", &extra)],
        ),
    )
}

fn plan_file(env: &Env) -> PathBuf {
    env.tmp.path().join("plan.json")
}

/// `runbook plan RB --set base=BASE ARGS… -o plan.json`, which must succeed.
fn make_plan(env: &Env, rb: &Path, base: &Path, args: &[&std::ffi::OsStr]) -> Output {
    Run::cmd(env, ["plan"])
        .arg(rb)
        .set("base", base)
        .args(args)
        .arg("-o")
        .arg(plan_file(env))
        .expect_exit(0)
        .run()
}

/// `runbook apply plan.json --yes`, which must exit `code`.
fn apply(env: &Env, code: i32) -> Output {
    Run::cmd(env, ["apply"])
        .arg(plan_file(env))
        .arg("--yes")
        .expect_exit(code)
        .run()
}

/// `mktemp` made one directory under `base`, and the file is in it.
fn assert_the_file_is_in_the_made_directory(base: &Path, said: &str) {
    let dirs = made(base);
    assert_eq!(dirs.len(), 1, "{said}");
    assert!(dirs[0].join("file").exists(), "{said}");
}

/// `mktemp` made one directory under `base`, and nothing is in it.
fn assert_the_made_directory_is_empty(base: &Path, said: &str) {
    let dirs = made(base);
    assert_eq!(dirs.len(), 1, "the mktemp ran: {said}");
    assert!(
        std::fs::read_dir(&dirs[0]).unwrap().next().is_none(),
        "{said}"
    );
}

fn made(base: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(base)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("made.")
        })
        .collect();
    out.sort();
    out
}

fn setup(env: &Env) -> PathBuf {
    let base = env.scratch();
    std::fs::write(base.join("name"), "file\n").unwrap();
    base
}

/// Confirmed on a terminal: the confirmation shows `(known after apply)` where the
/// directory goes, "y" runs both changes to the end, and the file is in the directory
/// `mktemp` made.
#[test]
fn a_confirmed_run_uses_the_output_of_an_earlier_change() {
    let env = Env::new();
    let base = setup(&env);
    let rb = runbook(&env, "local", "");
    let (code, screen) = Run::new(&env, &rb).set("base", &base).on_terminal("y\n");
    assert_eq!(code, 0, "{screen}");
    assert!(
        screen.contains("    - on local: touch '(known after apply)/file'")
            || screen.contains("    - on local: touch (known after apply)/file"),
        "{screen}"
    );
    assert!(
        screen
            .contains("where it says (known after apply): what change 1 (on local: mktemp -d -- "),
        "{screen}"
    );
    assert_the_file_is_in_the_made_directory(&base, &screen);
}

/// The dry-run preview shows it too, and no placeholder leaks into what people read.
#[test]
fn the_preview_says_known_after_apply() {
    let env = Env::new();
    let base = setup(&env);
    let rb = runbook(&env, "local", r#"log.info("made " .. dir)"#);
    let out = Run::new(&env, &rb)
        .set("base", &base)
        .dry_run()
        .expect_exit(0)
        .run();
    let said = format!("{}{}", out.stdout_text(), out.stderr_text());
    assert!(
        said.contains("touch '(known after apply)/file'")
            || said.contains("touch (known after apply)/file"),
        "{said}"
    );
    assert!(said.contains("made (known after apply)"), "{said}");
    assert!(!said.contains("RUNBOOK_KNOWN_AFTER"), "{said}");
    assert!(made(&base).is_empty());
}

/// `plan -o` then `apply`: the plan's text shows `(known after apply)`, its JSON names
/// the change whose output stands there, and the apply makes both changes.
#[test]
fn a_plan_with_a_value_known_after_apply_applies() {
    let env = Env::new();
    let base = setup(&env);
    let rb = runbook(&env, "local", "");
    let out = make_plan(&env, &rb, &base, &[]);
    assert!(
        out.stdout_text().contains("(known after apply)/file"),
        "{}",
        out.describe()
    );
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(plan_file(&env)).unwrap()).unwrap();
    let touch = &plan["changes"][1];
    assert_eq!(touch["known_after"], serde_json::json!([0]), "{plan:#}");
    assert!(touch["command"]
        .as_str()
        .unwrap()
        .contains("(known after apply)/file"));
    assert!(
        !plan.to_string().contains("RUNBOOK_KNOWN_AFTER"),
        "{plan:#}"
    );
    let md = Run::cmd(&env, ["plan"])
        .arg(plan_file(&env))
        .args(["--format", "md"])
        .expect_exit(0)
        .run();
    assert!(
        md.stdout_text().contains("(known after apply)/file"),
        "{}",
        md.describe()
    );
    let out = apply(&env, 0);
    assert_the_file_is_in_the_made_directory(&base, &out.describe());
}

/// The second change differs from the plan elsewhere too (the name a read gives changed
/// between plan and apply): refused before it, though the hole itself would fit.
#[test]
fn a_change_that_differs_elsewhere_too_is_refused() {
    let env = Env::new();
    let base = setup(&env);
    let rb = runbook(&env, "local", "");
    make_plan(&env, &rb, &base, &[]);
    std::fs::write(base.join("name"), "other\n").unwrap();
    let out = apply(&env, 1);
    let said = out.stderr_text();
    assert!(
        said.contains("this change is not one that was confirmed for this step")
            && said.contains("confirmed: touch (known after apply)/file")
            && said.contains("/other"),
        "{}",
        out.describe()
    );
    assert_the_made_directory_is_empty(&base, &out.describe());
}

/// The same through a confirmed `run` on a terminal: the name comes from a read that
/// answers something new every time, so after the "y" the real command differs beside the
/// hole too, and it is refused before it.
#[test]
fn a_confirmed_run_whose_change_differs_elsewhere_too_is_refused() {
    let env = Env::new();
    let base = setup(&env);
    let rb = env.write(
        "uuid.lua",
        r#"runbook { name = "uuid", params = { base = { type = "path", required = true } } }
local here = target("local")
step("make and fill", function()
  local dir = here:exec({ "mktemp", "-d", "--", params.base .. "/made.XXXXXX" }).stdout:gsub("%s+$", "")
  local name = here:exec({ "cat", "/proc/sys/kernel/random/uuid" }, { read_only = true }).stdout
  here:exec({ "touch", dir .. "/" .. name:gsub("%s+$", "") })
end)
"#,
    );
    let (code, screen) = Run::new(&env, &rb).set("base", &base).on_terminal("y\n");
    assert_eq!(code, 1, "{screen}");
    assert!(
        screen.contains("this change is not one that was confirmed for this step")
            && screen.contains("confirmed: touch (known after apply)/"),
        "{screen}"
    );
    assert_the_made_directory_is_empty(&base, &screen);
}

/// A hole holds only the output of the change it names: another value in its place (here
/// the directory of a second `mktemp`, not the one planned there) is refused.
#[test]
fn a_hole_holds_only_the_output_it_names() {
    let env = Env::new();
    let base = setup(&env);
    env.write(
        "swap.lua",
        r#"runbook { name = "swap", params = { base = { type = "path", required = true } } }
local here = target("local")
step("two directories", function()
  local a = here:exec({ "mktemp", "-d", "--", params.base .. "/made.XXXXXX" }).stdout:gsub("%s+$", "")
  local b = here:exec({ "mktemp", "-d", "--", params.base .. "/made.XXXXXX" }).stdout:gsub("%s+$", "")
  -- In the plan the placeholders differ; in a real run `a` and `b` are swapped when the
  -- first name sorts after the second: the planned hole is `a`'s.
  local pick = a
  if not a:find("KNOWN_AFTER", 1, true) and a > b then pick = b end
  here:exec({ "touch", pick .. "/file" })
end)
"#,
    );
    // Run until the swap happens (the names are random; each try leaves two directories).
    for _ in 0..20 {
        make_plan(&env, &env.tmp.path().join("swap.lua"), &base, &[]);
        let before = made(&base);
        let out = Run::cmd(&env, ["apply"])
            .arg(plan_file(&env))
            .arg("--yes")
            .run();
        let new: Vec<PathBuf> = made(&base)
            .into_iter()
            .filter(|d| !before.contains(d))
            .collect();
        assert_eq!(new.len(), 2, "{}", out.describe());
        let (first, second) = {
            let events = out.record();
            let started: Vec<String> =
                pick!(events, Event::ActionFinished { stdout_tail, .. } => stdout_tail.trim().to_string())
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect();
            (started[0].clone(), started[1].clone())
        };
        if first > second {
            out.assert_exit(1);
            assert!(
                out.stderr_text()
                    .contains("this change is not one that was confirmed"),
                "{}",
                out.describe()
            );
            assert!(!Path::new(&second).join("file").exists());
            return;
        }
        out.assert_exit(0);
    }
    panic!("the two names never came out in the other order");
}

/// A placeholder taken apart (`:sub`) is no longer one: what it became differs from the
/// real value, and the apply stops before that change (never a silent pass).
#[test]
fn a_placeholder_taken_apart_is_a_difference() {
    let env = Env::new();
    let base = setup(&env);
    let rb = runbook(
        &env,
        "local",
        r#"here:exec({ "touch", dir:sub(1, 12) .. "-cut" })"#,
    );
    make_plan(&env, &rb, &base, &[]);
    let out = apply(&env, 1);
    assert!(
        out.stderr_text()
            .contains("this change is not one that was confirmed"),
        "{}",
        out.describe()
    );
}

/// A read whose command holds the placeholder does not run in the dry-run (it cannot: its
/// command is not known); the plan lists it without a result.
#[test]
fn a_read_of_a_value_known_after_apply_is_planned_not_run() {
    let env = Env::new();
    let base = setup(&env);
    let rb = runbook(
        &env,
        "local",
        r#"local r = here:exec({ "ls", "--", dir }, { read_only = true })
  log.info("listed, planned: " .. tostring(r.planned))"#,
    );
    let out = Run::new(&env, &rb)
        .set("base", &base)
        .dry_run()
        .expect_exit(0)
        .run();
    let said = format!("{}{}", out.stdout_text(), out.stderr_text());
    assert!(said.contains("listed, planned: true"), "{said}");
    assert!(!said.contains("No such file"), "{said}");
}

/// Over a real sshd: the same runbook on an SSH target, planned and applied.
#[test]
fn over_ssh_a_plan_with_a_value_known_after_apply_applies() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let env = Env::new();
    let base = setup(&env);
    let rb = runbook(&env, &fleet.nodes[0].alias, "");
    let config = fleet.ssh_config();
    let out = make_plan(
        &env,
        &rb,
        &base,
        &["--ssh-config".as_ref(), config.as_os_str()],
    );
    assert!(
        out.stdout_text().contains("(known after apply)/file"),
        "{}",
        out.describe()
    );
    let out = apply(&env, 0);
    assert_the_file_is_in_the_made_directory(&base, &out.describe());
}
