//! fingerprint.take / save / load / diff, driving the real binary on the local machine
//! and on two machines behind real sshd (common/sshd.rs), each with its own machine id.
use crate::common::sshd::Fleet;
use crate::common::*;
use std::path::{Path, PathBuf};

/// The known-good files saved under `name`, one per machine (`fingerprints/NAME/*.json`).
fn saved(state: &Path, name: &str) -> Vec<PathBuf> {
    let dir = state.join("fingerprints").join(name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

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
        &subst(
            r#"
runbook { name = "fp" }
local here = target("local")
local scope = { repo = "@repo@", caches = { "@cache@" } }
step("first", function()
  local fp = fingerprint.take(here, scope)
  if fingerprint.load("good", fp) then return end
  if not fp.python then fail("no python version") end
  if not fp.git_head or #fp.git_head ~= 40 then fail("no git head: " .. tostring(fp.git_head)) end
  if not fp.caches["@cache@"] then fail("cache not measured") end
  fingerprint.save("good", fp)
end)
step("later", function()
  local now = fingerprint.take(here, scope)
  local good = fingerprint.load("good", now)
  if not good then fail("not saved") end
  local changes = fingerprint.diff(good, now)
  for _, c in ipairs(changes) do log.warn("changed: " .. c.what .. " " .. tostring(c.before) .. " -> " .. tostring(c.after)) end
end)
"#,
            &[("repo", &repo.display()), ("cache", &cache.display())],
        ),
    );
    Run::new(&env, &rb).yes().expect_exit(0).run();
    let files = saved(&env.state(), "good");
    assert_eq!(files.len(), 1, "{files:?}");
    let fp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    let machine_id = std::fs::read_to_string("/etc/machine-id").unwrap();
    assert_eq!(
        fp["identity"]["machine_id"],
        machine_id.trim(),
        "kept by the machine it describes"
    );
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
        .stderr_has("on local: save fingerprint 'good' of local")
        .run();
    assert!(saved(&env.state(), "good").is_empty());
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
        &subst(
            r#"
runbook { name = "fp" }
local here = target("local")
step("touch what the file names", function()
  local which = here:exec({ "cat", "@dir@/which" }, { read_only = true }).stdout
  here:exec({ "touch", "@dir@/" .. which })
end)
step("save", { always = true }, function()
  fingerprint.save("good", fingerprint.take(here, {}))
end)
"#,
            &[("dir", &dir.display())],
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
    let saved = || !saved(&env.state(), "good").is_empty();

    std::fs::write(dir.join("which"), "A").unwrap();
    let planned = make_plan();
    assert!(
        planned
            .stdout_str()
            .contains("on local: save fingerprint 'good' of local"),
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
    assert!(!saved(), "saved after the run left the plan");

    std::fs::write(dir.join("which"), "A").unwrap();
    make_plan();
    let out = apply(0);
    assert!(dir.join("A").exists(), "{}", out.describe());
    assert!(saved(), "{}", out.describe());
    let events = env.last_record();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::ActionStarted { target, summary, .. }
            if target == "local" && summary == "save fingerprint 'good' of local")),
        "{events:#?}"
    );
}

/// The known-good is the machine's, not the runbook's: a second host (another machine id
/// and host key, another GPU model) is not compared with the first host's known-good
/// (before, it was, and showed a GPU change it never had), saves its own, and from then
/// on each host is compared with its own only. The same machine under another name (the
/// first host reached through a second alias) finds the first one's.
#[test]
fn each_host_is_compared_with_its_own_known_good() {
    require_sshd!();
    let mut fleet = Fleet::start_machines(2);
    fleet
        .node("node2")
        .set_env(&[("NVIDIA_SMI_FIXTURE", "a100x4")]);
    // node1 once more, under another alias: one machine, two names.
    let port = fleet.node("node1").port;
    let config = std::fs::read_to_string(fleet.ssh_config()).unwrap();
    std::fs::write(
        fleet.ssh_config(),
        format!("Host again\n  HostName 127.0.0.1\n  Port {port}\n  User root\n{config}"),
    )
    .unwrap();
    let env = Env::new();
    let rb = env.write(
        "fp.lua",
        r#"
runbook { name = "fp", params = { host = {} } }
local t = target(params.host)
step("drift", function()
  local now = fingerprint.take(t, {})
  local good = fingerprint.load("good", now)
  if not good then
    log.info("no known-good for " .. t.name)
    fingerprint.save("good", now)
    return
  end
  local changes = fingerprint.diff(good, now)
  log.info(("%d change(s) on %s since %s"):format(#changes, t.name, good.target))
  for _, c in ipairs(changes) do log.warn("drift: " .. c.what .. ": " .. tostring(c.before) .. " -> " .. tostring(c.after)) end
end)
"#,
    );
    let run = |host: &str| {
        let out = Run::new(&env, &rb)
            .yes()
            .json()
            .set("host", host)
            .ssh(&fleet)
            .run();
        out.assert_exit(0);
        // What the runbook said, not save's own line.
        let logs = out.logs();
        logs.into_iter()
            .filter(|l| !l.starts_with("saved fingerprint"))
            .collect::<Vec<_>>()
    };
    assert_eq!(run("node1"), vec!["no known-good for node1"]);
    assert_eq!(
        run("node2"),
        vec!["no known-good for node2"],
        "node2 is another machine"
    );
    assert_eq!(saved(&env.state(), "good").len(), 2);
    assert_eq!(run("node2"), vec!["0 change(s) on node2 since node2"]);
    assert_eq!(run("node1"), vec!["0 change(s) on node1 since node1"]);
    assert_eq!(
        run("again"),
        vec!["0 change(s) on again since node1"],
        "one machine under two names"
    );
    let gpus: Vec<String> = saved(&env.state(), "good")
        .iter()
        .map(|f| {
            let fp: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            format!("{} {}", fp["target"], fp["gpus"][0])
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(
        gpus.len(),
        2,
        "each machine's own file, with its own GPUs: {gpus:?}"
    );
    assert!(
        gpus.iter()
            .any(|g| g.contains("node2") && g.contains("A100")),
        "{gpus:?}"
    );
}

/// A fingerprint taken with --offline read nothing: its values are unknown, so a diff
/// against a known-good reports no change (before, every value showed as gone), while
/// the same diff on values that were read does.
#[test]
fn an_offline_fingerprint_reports_no_drift() {
    let env = Env::new();
    let rb = env.write(
        "fp.lua",
        r#"
runbook { name = "fp" }
step("drift", function()
  local now = fingerprint.take(target("local"), {})
  local good = { target = "local", taken_at = "2026-01-01T00:00:00Z", python = "2.7.18", torch = "2.11.0+cu128" }
  local changes = fingerprint.diff(good, now)
  log.info(("planned=%s changes=%d"):format(tostring(now.planned), #changes))
end)
"#,
    );
    let logs = |offline: bool| {
        let mut r = Run::new(&env, &rb).dry_run().json();
        if offline {
            r = r.offline();
        }
        let out = r.run();
        out.assert_exit(0);
        out.logs()
    };
    assert_eq!(logs(true), vec!["planned=true changes=0"]);
    let read = logs(false);
    assert!(
        read[0].starts_with("planned=false changes=") && read[0] != "planned=false changes=0",
        "{read:?}"
    );
}

/// `fingerprint.load(name)` of before, with no fingerprint to say which machine: a clear
/// error at its line, not another machine's known-good.
#[test]
fn load_without_the_fingerprint_taken_now_is_refused_at_its_line() {
    let env = Env::new();
    let rb = env.write(
        "fp.lua",
        "runbook { name = \"fp\" }\nstep(\"load\", function()\n  fingerprint.load(\"good\")\nend)\n",
    );
    let out = Run::new(&env, &rb).yes().json().run();
    out.assert_exit(1);
    let error = out.step_error("load");
    assert!(
        error.contains("fp.lua:3:")
            && error.contains("fingerprint.load(): give the fingerprint taken now, fingerprint.load(name, fingerprint.take(t, …)): a known-good is kept per machine"),
        "{error}"
    );
}

/// torch's version is read from the `torch/version.py` its build wrote, without importing
/// torch (seconds with a real one, for every fingerprint and artifact key): a torch whose
/// import fails is still known by its version file. Where that file is missing, torch is
/// imported as before.
#[test]
fn torch_is_known_by_its_version_file_without_an_import() {
    let env = Env::new();
    let venv = env.scratch().join("venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    let site = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path()
        .join("site-packages");
    let torch = site.join("torch");
    std::fs::create_dir_all(&torch).unwrap();
    std::fs::write(
        torch.join("__init__.py"),
        "raise ImportError('importing torch is what this read must not do')\n",
    )
    .unwrap();
    std::fs::write(
        torch.join("version.py"),
        "from typing import Optional\n\n__all__ = ['__version__', 'cuda']\n\
         __version__ = '2.11.0+cu130'\ndebug = False\ncuda: Optional[str] = '13.0'\n",
    )
    .unwrap();
    let rb = env.write(
        "fp.lua",
        &subst(
            r#"
runbook { name = "fp-torch" }
step("take", function()
  local fp = fingerprint.take(target("local"), { venv = "@venv@" })
  log.info(("torch=%s cuda=%s"):format(tostring(fp.torch), tostring(fp.cuda)))
end)
"#,
            &[("venv", &venv.display())],
        ),
    );
    let out = Run::new(&env, &rb).yes().json().run();
    out.assert_exit(0);
    assert_eq!(out.logs(), vec!["torch=2.11.0+cu130 cuda=13.0".to_string()]);

    // No version file: torch itself says (this one has no torch.version, as the fake
    // torch of tests/fixtures has none).
    std::fs::remove_file(torch.join("version.py")).unwrap();
    std::fs::write(torch.join("__init__.py"), "__version__ = '2.4.1+cpu'\n").unwrap();
    let out = Run::new(&env, &rb).yes().json().run();
    out.assert_exit(0);
    assert_eq!(out.logs(), vec!["torch=2.4.1+cpu cuda=nil".to_string()]);
}
