//! fingerprint.take / save / load / diff, driving the real binary on the local machine.
mod common;
use common::*;

#[test]
fn take_save_load_and_diff() {
    let env = Env::new();
    let repo = env.scratch().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("model.py"), "x = 1\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "one"]);
    let cache = env.scratch().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("k"), vec![0u8; 10_000]).unwrap();
    let rb = env.write(
        "fp.lua",
        &format!(
            r#"
runbook {{ name = "fp" }}
local here = target("local")
local scope = {{ repo = "{repo}", caches = {{ "{cache}" }} }}
step("first", {{ when = function() return fingerprint.load("good") == nil end }}, function()
  local fp = fingerprint.take(here, scope)
  if not fp.python then fail("no python version") end
  if not fp.git_head or #fp.git_head ~= 40 then fail("no git head: " .. tostring(fp.git_head)) end
  if not fp.caches["{cache}"] then fail("cache not measured") end
  fingerprint.save("good", fp)
end)
step("later", function()
  local good = fingerprint.load("good")
  if not good then fail("not saved") end
  local now = fingerprint.take(here, scope)
  local changes = fingerprint.diff(good, now)
  for _, c in ipairs(changes) do log.warn("changed: " .. c.what .. " " .. tostring(c.before) .. " -> " .. tostring(c.after)) end
end)
"#,
            repo = repo.display(),
            cache = cache.display()
        ),
    );
    Run::new(&env, &rb).yes().expect_exit(0).run();
    assert!(env.state().join("fingerprints/good.json").exists());
    // Something changes: a dirty file and the cache vanishes.
    std::fs::write(repo.join("model.py"), "x = 2  # hack\n").unwrap();
    std::fs::remove_dir_all(&cache).unwrap();
    Run::new(&env, &rb)
        .yes()
        .expect_exit(0)
        .stderr_has("changed: git dirty files nil ->  M model.py")
        .stderr_has(format!("changed: cache {}", cache.display()))
        .run();
}

#[test]
fn dry_run_saves_nothing() {
    let env = Env::new();
    let rb = env.write(
        "fp.lua",
        r#"
runbook { name = "fp" }
step("save", function() fingerprint.save("good", fingerprint.take(target("local"), {})) end)
"#,
    );
    Run::new(&env, &rb)
        .dry_run()
        .expect_exit(0)
        .stderr_has("on local: save fingerprint 'good'")
        .run();
    assert!(!env.state().join("fingerprints/good.json").exists());
}

/// `fingerprint.save` is a change like a command's: in the plan (`on local: save
/// fingerprint 'good'`), made by the apply where it was planned, and refused once the
/// run has left the plan. Before, an `always` step saved the known-good even after the
/// run had stopped at a change nobody confirmed.
#[test]
fn save_is_held_to_the_plan() {
    let env = Env::new();
    let dir = env.scratch();
    let rb = env.write(
        "fp.lua",
        &format!(
            r#"
runbook {{ name = "fp" }}
local here = target("local")
step("touch what the file names", function()
  local which = here:exec({{ "cat", "{dir}/which" }}, {{ read_only = true }}).stdout
  here:exec({{ "touch", "{dir}/" .. which }})
end)
step("save", {{ always = true }}, function()
  fingerprint.save("good", fingerprint.take(here, {{}}))
end)
"#,
            dir = dir.display()
        ),
    );
    let plan = env.tmp.path().join("plan.json");
    let make_plan = || {
        let os = std::ffi::OsStr::new;
        Run::cmd(
            &env,
            [os("plan"), rb.as_os_str(), os("-o"), plan.as_os_str()],
        )
        .expect_exit(0)
        .run()
    };
    let apply = |code| {
        let os = std::ffi::OsStr::new;
        Run::cmd(&env, [os("apply"), plan.as_os_str(), os("--yes")])
            .expect_exit(code)
            .run()
    };
    let saved = env.state().join("fingerprints/good.json");

    std::fs::write(dir.join("which"), "A").unwrap();
    let planned = make_plan();
    assert!(
        planned
            .stdout_str()
            .contains("on local: save fingerprint 'good'"),
        "{}",
        planned.describe()
    );
    std::fs::write(dir.join("which"), "B").unwrap();
    let out = apply(1);
    assert!(!dir.join("B").exists(), "{}", out.describe());
    assert!(
        out.stderr_str()
            .contains("no change runs after the run left the confirmed plan"),
        "{}",
        out.describe()
    );
    assert!(!saved.exists(), "saved after the run left the plan");

    std::fs::write(dir.join("which"), "A").unwrap();
    make_plan();
    let out = apply(0);
    assert!(dir.join("A").exists(), "{}", out.describe());
    assert!(saved.exists(), "{}", out.describe());
    let events = env.last_record();
    assert!(
        events.iter().any(|e| e["event"] == "action_started"
            && e["target"] == "local"
            && e["summary"] == "save fingerprint 'good'"),
        "{events:#?}"
    );
}
