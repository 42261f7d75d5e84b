//! `warmup.run` with small python3 scripts standing in for a torch warm-up: they write
//! files into a cache dir (or not), print what they see, stay silent for a while.
use crate::common::sshd::Fleet;
use crate::common::*;
use std::path::{Path, PathBuf};

/// Writes N files into CACHE, printing its TORCHINDUCTOR_COMPILE_THREADS and a marker file,
/// then stays silent for PAUSE seconds.
const SCRIPT: &str = r#"import os, sys, time
cache, n, pause, marker = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
print("threads=" + str(os.environ.get("TORCHINDUCTOR_COMPILE_THREADS")))
print("cwd=" + os.getcwd())
open(marker, "w").close()
os.makedirs(cache, exist_ok=True)
for i in range(n):
    with open(os.path.join(cache, "kernel_%d_%d.py" % (time.time_ns(), i)), "w") as f:
        f.write("x" * 100)
time.sleep(pause)
print("done")
"#;

struct Case {
    env: Env,
    script: PathBuf,
    cache: PathBuf,
    marker: PathBuf,
}

impl Case {
    fn new() -> Case {
        let env = Env::new();
        let script = env.write("warm.py", SCRIPT);
        let scratch = env.scratch();
        Case {
            cache: scratch.join("cache"),
            marker: scratch.join("ran"),
            script,
            env,
        }
    }

    /// A runbook calling `warmup.run(here, { script, args = { cache, n, pause, marker }, EXTRA })`
    /// and logging the result as JSON-ish lines.
    fn runbook(&self, n: u32, pause: f64, extra: &str) -> PathBuf {
        self.env.write(
            "warm.lua",
            &subst(
                r#"
runbook { name = "warm" }
local here = target("local")
step("warm", function()
  local r = warmup.run(here, {
    script = "@script@", args = { "@cache@", @n@, @pause@, "@marker@" }, @extra@
  })
  log.info("ok=" .. tostring(r.ok) .. " planned=" .. tostring(r.planned)
    .. " duration=" .. type(r.duration) .. " caches=" .. #r.caches)
  for _, c in ipairs(r.caches) do
    log.info(("cache %s %s/%s -> %s/%s grew=%s"):format(c.path, tostring(c.files_before),
      tostring(c.bytes_before), tostring(c.files_after), tostring(c.bytes_after), tostring(c.grew)))
  end
end)
"#,
                &[
                    ("script", &self.script.display()),
                    ("cache", &self.cache.display()),
                    ("n", &n),
                    ("pause", &pause),
                    ("marker", &self.marker.display()),
                    ("extra", &extra),
                ],
            ),
        )
    }

    fn run(&self, file: &Path, args: &[&str]) -> Output {
        Run::new(&self.env, file).yes().json().args(args).run()
    }
}

#[test]
fn a_warm_up_that_fills_its_cache_passes() {
    let c = Case::new();
    let rb = c.runbook(5, 0.0, &format!("expect_cache = \"{}\"", c.cache.display()));
    let out = c.run(&rb, &[]);
    out.assert_exit(0);
    let info = out.logs_at(Level::Info);
    assert!(
        info.contains(&"ok=true planned=false duration=number caches=1".to_string()),
        "{info:?}"
    );
    let line = info.iter().find(|l| l.starts_with("cache ")).unwrap();
    assert!(
        line.starts_with(&format!("cache {} nil/nil -> 5/", c.cache.display())),
        "{line}"
    );
    assert!(line.ends_with("grew=true"), "{line}");
    // Every line the script printed arrived as an output event, the env default included.
    let lines = out.output_lines();
    assert!(lines.contains(&"threads=1".to_string()), "{lines:?}");
    assert!(lines.contains(&"done".to_string()), "{lines:?}");
    assert_eq!(std::fs::read_dir(&c.cache).unwrap().count(), 5);

    // A second run adds files to a cache that already exists: it grew again.
    let out = c.run(&rb, &[]);
    out.assert_exit(0);
    let info = out.logs_at(Level::Info);
    let line = info.iter().find(|l| l.starts_with("cache ")).unwrap();
    assert!(line.contains(" 5/") && line.contains(" -> 10/"), "{line}");
}

#[test]
fn a_warm_up_that_leaves_a_cache_empty_fails_naming_it() {
    let c = Case::new();
    std::fs::create_dir_all(&c.cache).unwrap();
    std::fs::write(c.cache.join("old"), "x").unwrap();
    let never = c.env.scratch().join("never-made");
    let rb = c.runbook(
        0,
        0.0,
        &subst(
            r#"expect_cache = { "@cache@", "@never@" }"#,
            &[("cache", &c.cache.display()), ("never", &never.display())],
        ),
    );
    let out = c.run(&rb, &[]);
    out.assert_exit(1);
    let err = out.step_error(FAILED);
    assert!(
        err.contains("warm-up on local ran but left its caches empty"),
        "{err}"
    );
    // The 1-byte file alone (the directory's own size counts for nothing); unchanged.
    let size = "1 B, 1 file";
    // The cache that was full before and is unchanged is already warm: not a failure,
    // but said so.
    assert!(!err.contains(&c.cache.display().to_string()), "{err}");
    let said = out.stdout_text() + &out.stderr_text();
    let warm = format!(
        "{}: already warm (nothing new compiled): {size} → {size}",
        c.cache.display()
    );
    assert!(said.contains(&warm), "{said}");
    assert!(
        err.contains(&format!("{}: missing → missing", never.display())),
        "{err}"
    );
    assert!(c.marker.exists(), "the script did run");
}

#[test]
fn single_threaded_can_be_turned_off_and_env_wins() {
    let c = Case::new();
    let rb = c.runbook(0, 0.0, "single_threaded = false");
    let out = c.run(&rb, &[]);
    out.assert_exit(0);
    assert!(out.output_lines().contains(&"threads=None".to_string()));

    let rb = c.runbook(
        0,
        0.0,
        "env = { TORCHINDUCTOR_COMPILE_THREADS = \"4\" }, cwd = \"/\"",
    );
    let out = c.run(&rb, &[]);
    out.assert_exit(0);
    let lines = out.output_lines();
    assert!(lines.contains(&"threads=4".to_string()), "{lines:?}");
    assert!(lines.contains(&"cwd=/".to_string()), "{lines:?}");
}

#[test]
fn venv_picks_its_python() {
    let c = Case::new();
    let venv = c.env.scratch().join("venv");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    let python = venv.join("bin/python");
    std::fs::write(&python, "#!/bin/sh\necho via-venv\nexec python3 \"$@\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let rb = c.runbook(1, 0.0, &format!("venv = \"{}/\"", venv.display()));
    let out = c.run(&rb, &[]);
    out.assert_exit(0);
    assert!(out.output_lines().contains(&"via-venv".to_string()));
    let started = pick!(
        out.events(),
        Event::ActionStarted { effect: Effect::Change, command, .. } => command.clone()
    )
    .into_iter()
    .next()
    .unwrap();
    assert!(
        started.contains(&format!(
            "{}/bin/python {}",
            venv.display(),
            c.script.display()
        )),
        "{started}"
    );

    let rb = c.runbook(1, 0.0, "venv = \"/v\", python = \"python3\"");
    let err = c.run(&rb, &[]).step_error(FAILED);
    assert!(err.contains("give `venv` or `python`, not both"), "{err}");
}

#[test]
fn dry_run_plans_the_warm_up_and_measures_before() {
    let c = Case::new();
    std::fs::create_dir_all(&c.cache).unwrap();
    std::fs::write(c.cache.join("old"), "abc").unwrap();
    let rb = c.runbook(3, 0.0, &format!("expect_cache = \"{}\"", c.cache.display()));
    let out = c.run(&rb, &["--dry-run"]);
    out.assert_exit(0);
    assert!(!c.marker.exists(), "the script did not run");
    let info = out.logs_at(Level::Info);
    assert!(
        info.contains(&"ok=true planned=true duration=number caches=1".to_string()),
        "{info:?}"
    );
    let line = info.iter().find(|l| l.starts_with("cache ")).unwrap();
    assert!(
        line.starts_with(&format!("cache {} 1/", c.cache.display()))
            && line.ends_with("-> nil/nil grew=nil"),
        "{line}"
    );
    let evs = out.events();
    let planned = pick!(evs, Event::ActionPlanned { effect, command, .. } => (*effect, command));
    assert_eq!(planned.len(), 1, "{planned:?}");
    let (effect, command) = planned[0];
    assert_eq!(effect, Effect::Change);
    assert!(
        command.starts_with("env PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1 python3 "),
        "{command}"
    );

    // Offline: nothing runs, nothing is measured.
    let out = c.run(&rb, &["--dry-run", "--offline"]);
    out.assert_exit(0);
    let info = out.logs_at(Level::Info);
    let line = info.iter().find(|l| l.starts_with("cache ")).unwrap();
    assert!(line.ends_with("nil/nil -> nil/nil grew=nil"), "{line}");
}

#[test]
fn a_long_silence_warns_while_it_runs() {
    let c = Case::new();
    let rb = c.runbook(1, 2.6, "quiet_warning = \"1s\"");
    let out = c.run(&rb, &[]);
    out.assert_exit(0);
    let warns = out.logs_at(Level::Warn);
    // About one per silent second (2.6 s of sleep), with slack for a slow machine.
    assert!(
        (1..=5).contains(&warns.len()),
        "one warning per silent second: {warns:?}"
    );
    assert!(
        warns[0].starts_with("warm-up on local: no output for 1.")
            && warns[0].contains("(running for "),
        "{warns:?}"
    );
    // The warning came while the script ran: before its last output line.
    let evs = out.events();
    let warn_at = evs
        .iter()
        .position(|e| {
            matches!(
                e,
                Event::Log {
                    level: Level::Warn,
                    ..
                }
            )
        })
        .unwrap();
    let done_at = evs
        .iter()
        .position(|e| matches!(e, Event::Output { line, .. } if line == "done"))
        .unwrap();
    assert!(warn_at < done_at);

    let rb = c.runbook(1, 1.5, "quiet_warning = false");
    let out = c.run(&rb, &[]);
    out.assert_exit(0);
    assert!(out.logs_at(Level::Warn).is_empty());
}

#[test]
fn a_failing_script_fails_with_its_error() {
    let c = Case::new();
    let rb = c.runbook(1, 0.0, "");
    std::fs::write(
        &c.script,
        "import sys\nprint('compiling')\nraise RuntimeError('CUDA out of memory')\n",
    )
    .unwrap();
    let out = c.run(&rb, &[]);
    out.assert_exit(1);
    let err = out.step_error(FAILED);
    assert!(
        err.contains("warm-up failed (exit code 1) on local: python3 "),
        "{err}"
    );
    assert!(err.contains("RuntimeError: CUDA out of memory"), "{err}");

    let rb = c.runbook(1, 0.0, "timeout = \"300ms\"");
    std::fs::write(&c.script, "import time\ntime.sleep(30)\n").unwrap();
    let err = c.run(&rb, &[]).step_error(FAILED);
    assert!(
        err.contains("warm-up failed (timed out after 300ms)"),
        "{err}"
    );

    // Written in the call, a misspelt option is refused as the file loads (exit 2,
    // before any step); the run's own refusal is in tests/options.rs.
    let rb = c.runbook(1, 0.0, "expect_cahce = \"/x\"");
    let out = c.run(&rb, &[]);
    out.assert_exit(2);
    assert!(
        out.stderr_str().contains(
            "unknown 'expect_cahce': warmup.run() takes no option 'expect_cahce'; did you mean 'expect_cache'?"
        ),
        "{}",
        out.describe()
    );
}

/// Inside container 200 over SSH: the cache is the container's own /tmp.
#[test]
fn warm_up_inside_a_container() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let ct = fleet.container(200);
    std::fs::write(ct.join("root/warm.py"), SCRIPT).unwrap();
    let env = Env::new();
    let rb = env.write(
        "remote_warm.lua",
        r#"
runbook { name = "remote-warm" }
step("warm", function()
  local r = warmup.run(target("node1"):pct(200), {
    script = "/root/warm.py", args = { "/tmp/inductor", 4, 0, "/tmp/ran" },
    cwd = "/root", expect_cache = { "/tmp/inductor" },
  })
  log.info("files_after=" .. r.caches[1].files_after)
end)
"#,
    );
    let out = Run::new(&env, &rb)
        .ssh(&fleet)
        .yes()
        .json()
        .expect_exit(0)
        .run();
    assert!(out
        .logs_at(Level::Info)
        .contains(&"files_after=4".to_string()));
    assert_eq!(
        std::fs::read_dir(ct.join("tmp/inductor")).unwrap().count(),
        4
    );
    assert!(out.output_lines().contains(&"threads=1".to_string()));
}

/// The shipped `warm-cache`, twice on the same cache: the second warm-up finds every
/// kernel compiled and writes nothing (what real torch does on a warm cache). That is a
/// pass ("already warm"), not "did not fill its caches"; an empty cache still fails.
#[test]
fn warm_cache_passes_again_on_a_warm_cache() {
    let env = Env::new();
    let venv = env.scratch().join("venv");
    assert!(std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap()
        .success());
    let cache = env.scratch().join("inductor");
    let run = |script: &std::path::Path| {
        Run::new(&env, "warm-cache")
            .yes()
            .set("venv", &venv)
            .set("script", script)
            .set("cache_dirs", &cache)
    };
    let warmup = repo().join("examples/train/warmup.py");
    run(&warmup).expect_exit(0).stderr_has("filled").run();
    // The second run on a warm cache passes.
    run(&warmup).expect_exit(0).stderr_has("already warm").run();
    // A relative path (from where runbook runs): the script runs in its folder, by name.
    let sub = env.tmp.path().join("sub/train");
    std::fs::create_dir_all(&sub).unwrap();
    for f in ["warmup.py", "kernels.py"] {
        std::fs::copy(repo().join("examples/train").join(f), sub.join(f)).unwrap();
    }
    run(std::path::Path::new("sub/train/warmup.py"))
        .expect_exit(0)
        .stderr_has("already warm")
        .run();

    // A warm-up that leaves the cache empty fails.
    std::fs::remove_dir_all(&cache).unwrap();
    let idle = env.write("idle.py", "print('did nothing')\n");
    run(&idle)
        .expect_exit(1)
        .stderr_has("left its caches empty")
        .run();
}

/// `expect_cache = "hit"` inside container 200 over SSH, with torch's default cache dir
/// there (the container's own /tmp/torchinductor_USER): a script that writes FX graph
/// entries where inductor writes them is a miss with their count; run again, writing
/// nothing new, a hit. The count runs in the container, with the warm-up's environment.
#[test]
fn expect_hit_inside_a_container_uses_torchs_default_dir_there() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let ct = fleet.container(200);
    // One entry per "graph" at fxgraph/KEY[1:3]/KEY/HASH, skipped when it is there.
    std::fs::write(
        ct.join("root/graphs.py"),
        r#"import getpass, os, sys, tempfile
root = os.path.join(tempfile.gettempdir(), "torchinductor_" + getpass.getuser(), "fxgraph")
for i in range(int(sys.argv[1])):
    d = os.path.join(root, "%02d" % i, "f%02dkey" % i)
    if not os.path.isdir(d):
        os.makedirs(d)
        open(os.path.join(d, "hash"), "w").write("graph %d" % i)
print("graphs written under " + root)
"#,
    )
    .unwrap();
    let env = Env::new();
    let rb = env.write(
        "remote_hit.lua",
        r#"
runbook { name = "remote-hit" }
step("warm", function()
  local r = warmup.run(target("node1"):pct(200), { script = "/root/graphs.py", args = { 3 }, expect_cache = "hit" })
  local h = r.cache_hit
  log.info(("dir=%s hit=%s compiled=%s by=%s"):format(h.dir, tostring(h.hit), tostring(h.graphs_compiled), h.counted_by))
end)
"#,
    );
    let run = || {
        Run::new(&env, &rb)
            .ssh(&fleet)
            .yes()
            .json()
            .expect_exit(0)
            .run()
    };
    let user = String::from_utf8(
        std::process::Command::new("id")
            .arg("-un")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let dir = format!("/tmp/torchinductor_{}", user.trim());
    let out = run();
    let info = out.logs_at(Level::Info);
    assert!(
        info.contains(&format!("dir={dir} hit=false compiled=3 by=entries")),
        "{info:?}"
    );
    assert!(out
        .logs_at(Level::Warn)
        .iter()
        .any(|w| w
            .starts_with("warm-up on node1/ct200: the restored cache missed: 3 graphs compiled")));
    // In the container's /tmp, not the node's.
    assert_eq!(
        std::fs::read_dir(ct.join(format!("tmp/torchinductor_{}/fxgraph", user.trim())))
            .unwrap()
            .count(),
        3
    );
    let out = run();
    assert!(
        out.logs_at(Level::Info)
            .contains(&format!("dir={dir} hit=true compiled=0 by=entries")),
        "{:?}",
        out.logs_at(Level::Info)
    );
}
