//! Proof that a restored compile cache was used, and Mega-Cache, with real processes:
//! `warmup.run { expect_cache = "hit" }`, `runbook.torch`'s `warmup`, `capture` and
//! `restore`, against the stdlib-only stand-in for torch in tests/fixtures/fake_torch
//! (its caches laid out as inductor lays them out, its counters where torch keeps them),
//! in venvs of their own, locally and over a real sshd (common/sshd.rs).
use crate::common::sshd::Fleet;
use crate::common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type Fields = BTreeMap<String, String>;

/// A venv (no pip) whose python imports the fake torch at `version`, through a .pth file.
fn fake_venv(dir: &Path, version: &str) -> PathBuf {
    let ok = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "python3 -m venv");
    let purelib = std::process::Command::new(dir.join("bin/python"))
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ])
        .output()
        .unwrap();
    let purelib = PathBuf::from(String::from_utf8(purelib.stdout).unwrap().trim());
    let fixture = repo().join("tests/fixtures/fake_torch");
    std::fs::write(
        purelib.join("fake_torch.pth"),
        format!("{}\n", fixture.display()),
    )
    .unwrap();
    set_version(dir, version);
    dir.to_path_buf()
}

/// The torch version the venv's fake torch reports (an upgrade in place).
fn set_version(venv: &Path, version: &str) {
    std::fs::write(venv.join("fake-torch-version"), version).unwrap();
}

/// One op of the test runbook on `node`, its results as `result\tk=v\t…` log lines.
const RUNBOOK: &str = r#"
runbook {
  name = "torch-cache",
  params = {
    op = { required = true }, venv = { required = true }, cache = { required = true },
    trainer = { required = true }, node = { default = "local" }, graphs = { default = "3" },
    mode = { default = "auto" }, on_miss = { default = "warn" }, wrapper = { default = "torch" },
    mega = { default = "" }, home = { default = "" },
  },
}
local torch = require("runbook.torch")
local t = target(params.node)
local env = { TORCHINDUCTOR_CACHE_DIR = params.cache }

local function result(r)
  local keys = {}
  for k, v in pairs(r) do
    if type(v) ~= "table" then keys[#keys + 1] = k .. "=" .. tostring(v) end
  end
  table.sort(keys)
  log.info("result\t" .. table.concat(keys, "\t"))
end

step(params.op, function()
  if params.op == "warm" then
    local o = {
      venv = params.venv, script = params.trainer, args = { params.graphs }, env = env,
      expect_cache = "hit", on_miss = params.on_miss,
    }
    local w
    if params.wrapper == "torch" then
      if params.mega ~= "" then o.mega = params.mega end
      w = torch.warmup(t, o)
    else
      w = warmup.run(t, o)
    end
    local r = {}
    for k, v in pairs(w.cache_hit or {}) do r[k] = v end
    local c = w.torch and w.torch.counters or {}
    for k, v in pairs(c) do r["counter." .. k] = v end
    if w.torch then
      r.torch = w.torch.torch
      r.inductor = w.torch.inductor
      if w.torch.mega then
        r["mega.saved"] = w.torch.mega.saved
        r["mega.reason"] = w.torch.mega.reason
        r["mega.path"] = w.torch.mega.path
        r["mega.inductor"] = w.torch.mega.artifacts.inductor
      end
    end
    result(r)
  elseif params.op == "capture" then
    local a = torch.capture(t, { name = "tiny", mode = params.mode, venv = params.venv, paths = { params.cache } })
    result({ mode = a.mode, id = a.id, files = a.files })
  elseif params.op == "restore" then
    local r = torch.restore(t, {
      name = "tiny", mode = params.mode, venv = params.venv, paths = { params.cache }, env = env,
    })
    result({
      mode = r.mode, restored = r.restored, reason = r.reason, mega_reason = r.mega_reason,
      loaded = r.loaded and r.loaded.inductor,
    })
  elseif params.op == "wipe" then
    cache.clear(t, { params.cache })
    result({ wiped = true })
  end
end)
"#;

struct Case {
    env: Env,
    runbook: PathBuf,
    venv: PathBuf,
    cache: PathBuf,
    home: PathBuf,
    trainer: PathBuf,
}

impl Case {
    fn new() -> Case {
        let env = Env::new();
        let scratch = env.scratch();
        let home = scratch.join("home");
        std::fs::create_dir_all(home.join(".cache")).unwrap();
        Case {
            runbook: env.write("torch_cache.lua", RUNBOOK),
            venv: fake_venv(&scratch.join("venv"), "2.11.0+cpu"),
            cache: scratch.join("inductor"),
            trainer: repo().join("tests/fixtures/fake_trainer.py"),
            home,
            env,
        }
    }

    /// The op with these params; HOME is the case's own (torch.caches' megacache is in it).
    fn op(&self, op: &str, extra: &[(&str, &str)]) -> Run<'_> {
        let mut r = Run::new(&self.env, &self.runbook)
            .yes()
            .json()
            .env("HOME", &self.home)
            .set("op", op)
            .set("venv", &self.venv)
            .set("cache", &self.cache)
            .set("trainer", &self.trainer);
        for (k, v) in extra {
            r = r.set(k, v);
        }
        r
    }

    fn ok(&self, op: &str, extra: &[(&str, &str)]) -> (Fields, Output) {
        let out = self.op(op, extra).run();
        out.assert_exit(0);
        let r = result(&out);
        (r, out)
    }

    /// FX graph cache entries in the cache, counted here (not by runbook).
    fn entries(&self) -> usize {
        fn walk(d: &Path) -> usize {
            std::fs::read_dir(d).map_or(0, |rd| {
                rd.flatten()
                    .map(|e| match e.file_type().unwrap().is_dir() {
                        true => walk(&e.path()),
                        false => 1,
                    })
                    .sum()
            })
        }
        walk(&self.cache.join("fxgraph"))
    }
}

fn result(out: &Output) -> Fields {
    out.logs()
        .iter()
        .find_map(|m| m.strip_prefix("result\t").map(str::to_string))
        .unwrap_or_else(|| panic!("no result line: {}", out.describe()))
        .split('\t')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Without the wrapper the graphs are counted as files: a cold cache misses (3 new
/// entries, a warning, the step passes), a warm one hits, another torch misses again,
/// and `on_miss = "fail"` fails the step with the same words.
#[test]
fn expect_hit_counts_the_graphs_a_warm_up_still_compiled() {
    let c = Case::new();
    let plain = [("wrapper", "none")];
    let (r, out) = c.ok("warm", &plain);
    assert_eq!(r["hit"], "false", "{r:?}");
    assert_eq!(r["graphs_compiled"], "3");
    assert_eq!(r["counted_by"], "entries");
    assert_eq!(r["entries_after"], "3");
    assert!(
        !r.contains_key("entries_before"),
        "no fxgraph/ before: {r:?}"
    );
    assert_eq!(r["dir"], c.cache.display().to_string());
    assert_eq!(c.entries(), 3);
    let warns = out.logs_at(Level::Warn);
    assert!(
        warns.iter().any(|w| w.starts_with(
            "warm-up on local: the restored cache missed: 3 graphs compiled (FX graph cache entries in "
        ) && w.contains("/fxgraph: none → 3, 3 new)")),
        "{warns:?}"
    );
    // Not run under the wrapper: the command is the script itself, and no report.
    assert!(!r.contains_key("torch"), "{r:?}");

    let (r, out) = c.ok("warm", &plain);
    assert_eq!(r["hit"], "true", "{r:?}");
    assert_eq!(r["graphs_compiled"], "0");
    assert_eq!(
        (r["entries_before"].as_str(), r["entries_after"].as_str()),
        ("3", "3")
    );
    assert!(
        out.logs_at(Level::Warn).is_empty(),
        "{:?}",
        out.logs_at(Level::Warn)
    );
    assert!(out
        .logs_at(Level::Info)
        .iter()
        .any(|l| l.starts_with("warm-up on local: cache hit, nothing compiled (")));

    // Another torch: its keys differ, every graph compiles again.
    set_version(&c.venv, "2.10.0+cpu");
    let (r, _) = c.ok("warm", &plain);
    assert_eq!(
        (r["hit"].as_str(), r["graphs_compiled"].as_str()),
        ("false", "3")
    );
    assert_eq!(c.entries(), 6);

    set_version(&c.venv, "2.9.1+cpu");
    let out = c
        .op(
            "warm",
            &[("wrapper", "none"), ("on_miss", "fail"), ("graphs", "1")],
        )
        .run();
    out.assert_exit(1);
    let err = out.step_error(FAILED);
    assert!(
        err.contains("warm-up on local: the restored cache missed: 1 graph compiled"),
        "{err}"
    );
}

/// Under the wrapper the graphs are counted by inductor's own counters, read as the
/// script exits; the dir it reports is the one the count found from the same
/// environment, also with torch's default (TMPDIR, the user name) rather than
/// TORCHINDUCTOR_CACHE_DIR.
#[test]
fn torch_warmup_reads_inductors_own_counters() {
    let c = Case::new();
    let (r, out) = c.ok("warm", &[("graphs", "4")]);
    assert_eq!(r["counted_by"], "counters", "{r:?}");
    assert_eq!(r["counter.fxgraph_cache_miss"], "4");
    assert_eq!(r["counter.fxgraph_cache_hit"], "0");
    assert_eq!(r["counter.autograd_cache_miss"], "1");
    assert_eq!(r["graphs_compiled"], "4");
    assert_eq!(r["torch"], "2.11.0+cpu");
    assert_eq!(r["inductor"], r["dir"]);
    let warns = out.logs_at(Level::Warn);
    assert!(
        warns.iter().any(|w| w.contains(
            "the restored cache missed: 4 graphs compiled (inductor's counters: 0 hit, 4 miss, 0 bypass; "
        )),
        "{warns:?}"
    );
    // The preview names the wrapper, and the script's own output still streams.
    let started: Vec<String> = pick!(
        out.events(),
        Event::ActionStarted { effect: Effect::Change, command, .. } => command.clone()
    );
    assert!(
        started[0].contains(&format!(
            "warmup-torch.sh python={}/bin/python mega='' script={} 4",
            c.venv.display(),
            c.trainer.display()
        )),
        "{started:?}"
    );
    assert!(out.output_lines().contains(&"step 2 done".to_string()));

    let (r, _) = c.ok("warm", &[("graphs", "4")]);
    assert_eq!(r["counter.fxgraph_cache_hit"], "4", "{r:?}");
    assert_eq!(r["counter.fxgraph_cache_miss"], "0");
    assert_eq!(r["hit"], "true");

    // torch's default dir: TMPDIR/torchinductor_USER, found alike by the count and by
    // (fake) inductor in the script.
    let tmp = c.env.scratch().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    let rb = c.env.write(
        "default_dir.lua",
        &subst(
            r#"
runbook { name = "default-dir" }
local torch = require("runbook.torch")
step("warm", function()
  local w = torch.warmup(target("local"), {
    venv = "@venv@", script = "@trainer@", args = { 2 }, expect_cache = "hit",
    env = { TMPDIR = "@tmp@", USER = "ops:1" },
  })
  log.info("dir=" .. w.cache_hit.dir .. " inductor=" .. w.torch.inductor .. " compiled=" .. w.cache_hit.graphs_compiled)
end)
"#,
            &[
                ("venv", &c.venv.display()),
                ("trainer", &c.trainer.display()),
                ("tmp", &tmp.display()),
            ],
        ),
    );
    let out = Run::new(&c.env, &rb)
        .yes()
        .json()
        .env_remove("TORCHINDUCTOR_CACHE_DIR")
        .env_remove("LOGNAME")
        .run();
    out.assert_exit(0);
    let dir = tmp.join("torchinductor_ops_1").display().to_string();
    assert!(
        out.logs_at(Level::Info)
            .contains(&format!("dir={dir} inductor={dir} compiled=2")),
        "{:?}",
        out.logs_at(Level::Info)
    );
}

/// The wrapper runs the script as python would: its folder first on sys.path, its exit
/// status kept, a report after an exception too; a script that ends with os._exit
/// leaves no report, which is said, and the warm-up still passes.
#[test]
fn the_wrapper_runs_the_script_as_python_would() {
    let c = Case::new();
    let dir = c.env.scratch().join("proj");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("helper.py"), "GRAPHS = 2\n").unwrap();
    let script = dir.join("warm.py");
    let body = |tail: &str| {
        format!(
            "import sys, torch\nfrom helper import GRAPHS\nassert sys.argv[1:] == ['3'], sys.argv\nassert __name__ == '__main__'\ntorch.compile('p', graphs=GRAPHS)()\n{tail}\n"
        )
    };
    let trainer = [("trainer", script.to_str().unwrap())];
    std::fs::write(&script, body("print('fine')")).unwrap();
    let (r, _) = c.ok("warm", &trainer);
    assert_eq!(r["counter.fxgraph_cache_miss"], "2", "{r:?}");

    std::fs::write(&script, body("sys.exit(3)")).unwrap();
    let out = c.op("warm", &trainer).run();
    out.assert_exit(1);
    let err = out.step_error(FAILED);
    assert!(err.contains("warm-up failed (exit code 3)"), "{err}");

    std::fs::write(&script, body("raise RuntimeError('CUDA out of memory')")).unwrap();
    let err = c.op("warm", &trainer).run().step_error(FAILED);
    assert!(err.contains("RuntimeError: CUDA out of memory"), "{err}");

    std::fs::write(&script, body("import os\nos._exit(0)")).unwrap();
    let (r, out) = c.ok("warm", &trainer);
    assert_eq!(r["counted_by"], "entries", "no counters: {r:?}");
    assert_eq!(
        r["hit"], "true",
        "the 2 graphs were cached by the first run"
    );
    let warns = out.logs_at(Level::Warn);
    assert!(
        warns.iter().any(|w| w.starts_with(
            "warm-up: the script left no torch report (it exited without running Python's exit handlers"
        )),
        "{warns:?}"
    );
}

/// Mega-Cache: the warm-up saves it, capture packs it (auto picks it), the cache is
/// wiped, restore puts the file back and loads it with torch's own call, and the next
/// warm-up compiles nothing. Another torch finds no match and compiles.
#[test]
fn mega_cache_capture_wipe_restore_then_a_hit() {
    let c = Case::new();
    let (r, _) = c.ok("warm", &[("mega", "tiny")]);
    assert_eq!(r["mega.saved"], "true", "{r:?}");
    assert_eq!(r["mega.inductor"], "3");
    let file = c.home.join(".cache/runbook-megacache/tiny/megacache.bin");
    assert_eq!(r["mega.path"], file.display().to_string());
    assert!(std::fs::metadata(&file).unwrap().len() > 0);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(file.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);

    let (r, _) = c.ok("capture", &[]);
    assert_eq!(r["mode"], "mega", "{r:?}");
    assert_eq!(r["files"], "1");
    c.ok("wipe", &[]);
    std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
    assert_eq!(c.entries(), 0);

    let (r, _) = c.ok("restore", &[]);
    assert_eq!(r["mode"], "mega", "{r:?}");
    assert_eq!(r["restored"], "true");
    assert_eq!(r["loaded"], "3");
    assert_eq!(c.entries(), 3, "load_cache_artifacts wrote the graphs back");
    let (r, _) = c.ok("warm", &[]);
    assert_eq!(r["hit"], "true", "{r:?}");
    assert_eq!(r["counter.fxgraph_cache_hit"], "3");

    // Another torch: the key differs, nothing restored, and the reason names torch.
    set_version(&c.venv, "2.10.0+cpu");
    let (r, _) = c.ok("restore", &[("mode", "mega")]);
    assert_eq!(r["restored"], "false", "{r:?}");
    assert!(
        r["reason"].contains("torch: 2.11.0+cpu (artifact) ≠ 2.10.0+cpu (here)"),
        "{r:?}"
    );
}

/// torch before 2.7 has no Mega-Cache: the warm-up says so, capture in auto mode falls
/// back to the cache files, restore in auto mode finds no Mega-Cache artifact and puts
/// the files back; the warm-up after it hits. mode = "mega" refuses clearly.
#[test]
fn before_torch_2_7_files_are_the_fallback() {
    let c = Case::new();
    set_version(&c.venv, "2.6.0+cpu");
    let (r, _) = c.ok("warm", &[("mega", "tiny")]);
    assert_eq!(r["mega.saved"], "false", "{r:?}");
    assert!(
        r["mega.reason"].contains("torch 2.6.0+cpu has no torch.compiler.save_cache_artifacts (Mega-Cache needs torch 2.7 or later)"),
        "{r:?}"
    );
    let out = c.op("capture", &[("mode", "mega")]).run();
    out.assert_exit(1);
    let err = out.step_error(FAILED);
    assert!(
        err.contains("torch.capture: no Mega-Cache file at ")
            && err.contains("run torch.warmup(t, { mega = \"tiny\", … }) first"),
        "{err}"
    );
    let (r, out) = c.ok("capture", &[]);
    assert_eq!(r["mode"], "files", "{r:?}");
    assert!(out
        .logs_at(Level::Info)
        .iter()
        .any(|l| l.starts_with("torch.capture: no Mega-Cache file at ")));
    c.ok("wipe", &[]);
    let (r, _) = c.ok("restore", &[]);
    assert_eq!(r["mode"], "files", "{r:?}");
    assert_eq!(r["restored"], "true");
    assert_eq!(r["mega_reason"], "no artifact 'tiny.mega' in the store");
    assert_eq!(c.entries(), 3);
    let (r, _) = c.ok("warm", &[]);
    assert_eq!(
        (r["hit"].as_str(), r["counter.fxgraph_cache_hit"].as_str()),
        ("true", "3")
    );
}

/// Over a real sshd: the count, the wrapper's counters and a files capture/restore work
/// on a remote target the same way (the store is this machine's).
#[test]
fn over_ssh_a_restored_cache_is_proven_by_the_counters() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let c = Case::new();
    let node = [("node", "node1")];
    let on = |op: &str, extra: &[(&str, &str)]| {
        let out = c.op(op, extra).ssh(&fleet).run();
        out.assert_exit(0);
        result(&out)
    };
    let r = on("warm", &node);
    assert_eq!(
        (r["hit"].as_str(), r["counter.fxgraph_cache_miss"].as_str()),
        ("false", "3"),
        "{r:?}"
    );
    let r = on("capture", &[("node", "node1"), ("mode", "files")]);
    assert_eq!(r["mode"], "files");
    on("wipe", &node);
    assert_eq!(c.entries(), 0);
    let r = on("restore", &[("node", "node1"), ("mode", "files")]);
    assert_eq!(r["restored"], "true", "{r:?}");
    let r = on("warm", &node);
    assert_eq!(r["hit"], "true", "{r:?}");
    assert_eq!(r["counter.fxgraph_cache_hit"], "3");
    assert_eq!(r["counted_by"], "counters");
}

/// A dry-run counts the graphs before (a read) and plans the warm-up; bad options are
/// clear errors naming the option.
#[test]
fn dry_run_and_bad_options() {
    let c = Case::new();
    c.ok("warm", &[]);
    let out = c.op("warm", &[]).dry_run().run();
    out.assert_exit(0);
    let r = result(&out);
    assert_eq!(r["entries_before"], "3", "{r:?}");
    assert!(
        !r.contains_key("hit") && !r.contains_key("entries_after"),
        "{r:?}"
    );

    let bad = |opts: &str| {
        let rb = c.env.write(
            "bad.lua",
            &subst(
                r#"runbook { name = "bad" }
step("w", function() warmup.run(target("local"), { script = "w.py", @opts@ }) end)
"#,
                &[("opts", &opts)],
            ),
        );
        let out = Run::new(&c.env, &rb).yes().json().run();
        assert_ne!(out.code(), 0, "{}", out.describe());
        out.step_errors() + &out.stderr_text()
    };
    let text = bad("on_miss = \"stop\", expect_cache = \"hit\"");
    assert!(
        text.contains("warmup.run(): on_miss is \"warn\" or \"fail\", got \"stop\""),
        "{text}"
    );
    let text = bad("on_miss = \"fail\"");
    assert!(
        text.contains("on_miss goes with expect_cache = \"hit\""),
        "{text}"
    );
    let text = bad("mega_save = \"rel/m.bin\"");
    assert!(
        text.contains("warmup.run(): mega_save is a file path on the target, absolute or ~/…"),
        "{text}"
    );
    let text = bad("expect_cache = 3");
    assert!(text.contains("is a path or a list of paths"), "{text}");
}
