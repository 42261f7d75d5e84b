//! fingerprint.take / save / load / diff, driving the real binary on the local machine.
mod common;
use common::*;

#[test]
fn take_save_load_and_diff() {
    let env = Env::new();
    let repo = env.scratch().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let st = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(args)
            .status()
            .unwrap();
        assert!(st.success());
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("model.py"), "x = 1\n").unwrap();
    git(&["add", "."]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.invalid",
        "commit",
        "-qm",
        "one",
    ]);
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
    let first = env.cmd().arg("run").arg(&rb).arg("--yes").output().unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(env.state().join("fingerprints/good.json").exists());
    // Something changes: a dirty file and the cache vanishes.
    std::fs::write(repo.join("model.py"), "x = 2  # hack\n").unwrap();
    std::fs::remove_dir_all(&cache).unwrap();
    let out = env.cmd().arg("run").arg(&rb).arg("--yes").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("changed: git dirty files nil ->  M model.py"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("changed: cache {}", cache.display())),
        "{stderr}"
    );
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
    let out = env
        .cmd()
        .arg("run")
        .arg(&rb)
        .arg("--dry-run")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("dry-run: would save fingerprint 'good'"));
    assert!(!env.state().join("fingerprints/good.json").exists());
}
