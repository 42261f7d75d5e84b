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
        .stderr_has("dry-run: would save fingerprint 'good'")
        .run();
    assert!(!env.state().join("fingerprints/good.json").exists());
}
