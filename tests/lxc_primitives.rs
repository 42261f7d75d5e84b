//! Every primitive in every real LXC container (common/lxc.rs: busybox 931, busybox with
//! util-linux's flock and setsid 932, Debian minbase 933, Debian with python3 and git
//! 934): it works there, or it fails before changing anything saying what it needs
//! ("needs PROGRAM on local/ctN (…)"). Each test is `NAME::<container>`; docs/programs.md
//! is the table of which programs each primitive needs and which test shows it where.
//! Runs alternate between Proxmox's two env modes (keep, as PVE 8; clear, as PVE 9).

use crate::common;
use crate::common::lxc::{self, changes_started, Ct, CtDir, CtRun, EnvMode, Kind};
use crate::common::*;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn assert_needs(out: &Output, what: &str, program: &str, ct: &Ct) {
    assert_eq!(out.status.code(), Some(1), "{}", out.describe());
    let want = format!("{what}: needs {program} on {} (", ct.target());
    assert!(
        out.step_error(FAILED).contains(&want),
        "no {want:?} in\n{}",
        out.describe()
    );
    assert_eq!(
        changes_started(out),
        0,
        "nothing changed: {}",
        out.describe()
    );
}

fn unique() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    100_000 + (nanos / 7 + std::process::id() * 131) % 800_000
}

/// A cache of two files, 8 bytes in all, at `NAME` in the test's directory.
fn fill_cache(dir: &CtDir<'_>, name: &str) -> String {
    dir.write(&format!("{name}/a/k"), "12345");
    dir.write(&format!("{name}/j"), "123")
}

/// A process inside the container with its working directory in `cwd`, started from
/// this machine with lxc-attach (so in the container's PID namespace); killed on drop,
/// there.
struct Holder<'a> {
    ct: &'a Ct,
    child: Child,
    pid: String,
}

impl<'a> Holder<'a> {
    fn start(ct: &'a Ct, cwd: &str) -> Holder<'a> {
        let n = unique();
        let child = Command::new("lxc-attach")
            .args(["-n", ct.vmid, "--clear-env", "--", "sh", "-c"])
            .arg(format!("cd '{cwd}' && exec sleep {n}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        let pid = loop {
            if let Some(line) = ct.processes(&format!("sleep {n}")).first() {
                break line.split_whitespace().next().unwrap().to_string();
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the holder did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        Holder { ct, child, pid }
    }
}

impl Drop for Holder<'_> {
    fn drop(&mut self) {
        // Killing lxc-attach leaves what it started in the container running.
        let _ = self.ct.attach(&format!("kill -9 {}", self.pid));
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// cache.size measures with the container's find/stat (busybox's have no -printf);
// cache.clear sees a process using the cache in the container's own PID namespace and
// refuses, naming it by its pid there; then keep, restore and clear (busybox-only: the
// clear fails on the run lock, the cache untouched).
in_containers!(cache_size_clear_keep_restore, |ct: &Ct| {
    let env = Env::new();
    let dir = ct.dir();
    fill_cache(&dir, "cache");
    let cache = dir.at("cache");
    let roots = subst(r#"cache_roots = { "@dir@" }"#, &[("dir", &dir.path)]);
    let holder = Holder::start(ct, &dir.at("cache/a"));
    let out = CtRun::new(&env, &dir, EnvMode::Keep).header(&roots).go(
        &subst(
            r#"step("size", function()
  local s = cache.size(box, { "@cache@" })
  if s[1].bytes ~= 8 or s[1].files ~= 2 then fail(("got %s bytes, %s files"):format(s[1].bytes, s[1].files)) end
end)
step("in use", function()
  local ok, err = pcall(cache.clear, box, { "@cache@" })
  if ok then fail("cleared while in use") end
  log.info("refused: " .. tostring(err))
end)
"#,
            &[("cache", &cache)],
        ),
        &[],
    );
    out.assert_exit(0);
    let refused = out.logs().join("\n");
    assert!(
        refused.contains(&format!("is in use by pid {} (sleep ", holder.pid)),
        "the holder, by its pid in the container: {refused}"
    );
    drop(holder);
    assert!(dir.host.join("cache/a/k").exists());

    // PVE 9's --clear-env gives no HOME: `~` is still root's home (before: `/`, so
    // `~/…` named nothing and the `~/.cache` root was `/.cache`).
    let home_relative = format!("~/{}", cache.trim_start_matches("/root/"));
    let out = CtRun::new(&env, &dir, EnvMode::Clear).go(
        &subst(
            r#"step("size", function()
  local s = cache.size(box, { "@home_relative@" })
  log.info(s[1].resolved .. " " .. s[1].bytes)
end)
"#,
            &[("home_relative", &home_relative)],
        ),
        &[],
    );
    out.assert_exit(0);
    assert_eq!(out.logs(), vec![format!("{cache} 8")]);

    let kept = |dir: &CtDir<'_>| -> Vec<String> {
        std::fs::read_dir(&dir.host)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("cache.runbook-kept-"))
            .collect()
    };
    let step = |mode: EnvMode, body: &str| {
        CtRun::new(&env, &dir, mode).header(&roots).go(
            &format!("step(\"cache\", function()\n  {body}\nend)\n"),
            &[],
        )
    };
    let out = step(
        EnvMode::Clear,
        &subst(
            r#"cache.clear(box, { "@cache@" }, { keep = true })"#,
            &[("cache", &cache)],
        ),
    );
    out.assert_exit(0);
    assert!(!dir.host.join("cache").exists());
    assert_eq!(kept(&dir).len(), 1, "moved aside");
    let out = step(
        EnvMode::Keep,
        &subst(r#"cache.restore(box, { "@cache@" })"#, &[("cache", &cache)]),
    );
    out.assert_exit(0);
    assert_eq!(
        std::fs::read_to_string(dir.host.join("cache/a/k")).unwrap(),
        "12345"
    );
    assert!(kept(&dir).is_empty(), "restored");
    let out = step(
        EnvMode::Clear,
        &subst(r#"cache.clear(box, { "@cache@" })"#, &[("cache", &cache)]),
    );
    out.assert_exit(0);
    assert!(!dir.host.join("cache").exists(), "cleared");
});

// A job outlives the run that started it, inside the container; a later run (the other
// env mode) finds it by name, and KILLs it after TERM's timeout since it ignores TERM.
in_containers!(proc_spawn_wait_for_stop, |ct: &Ct| {
    let env = Env::new();
    let dir = ct.dir();
    let n = unique();
    dir.kill_on_drop(&format!("sleep {n}"));
    let job = format!("rbt-{n}");
    let log = dir.at("job.log");
    let out = lxc::run(
        &env,
        &dir,
        EnvMode::Keep,
        &subst(
            r#"step("start", function()
  local j = proc.spawn(box, { name = "@job@", log = "@log@", cwd = "@cwd@",
    cmd = { "sh", "-c", "trap '' TERM; echo ready in $PWD; exec sleep @n@" } })
  local m = proc.wait_for(box, { file = "@log@", pattern = "ready in (.*)", timeout = "20s" })
  log.info("pid=" .. j.pid .. " cwd=" .. m[1])
end)
"#,
            &[("job", &job), ("log", &log), ("cwd", &dir.path), ("n", &n)],
        ),
        &[],
    );
    out.assert_exit(0);
    let running = ct.processes(&format!("sleep {n}"));
    assert_eq!(running.len(), 1, "{running:?}");
    let pid = running[0].split_whitespace().next().unwrap();
    assert_eq!(
        out.logs(),
        vec![format!("pid={pid} cwd={}", dir.path)],
        "the pid is the job's in the container's PID namespace"
    );

    let out = lxc::run(
        &env,
        &dir,
        EnvMode::Clear,
        &subst(
            r#"step("stop", function()
  local s = proc.stop(box, { name = "@job@", timeout = "1s" })
  log.info(("pid=%s was_running=%s killed=%s"):format(s.pid, s.was_running, s.killed))
end)
"#,
            &[("job", &job)],
        ),
        &[],
    );
    out.assert_exit(0);
    assert_eq!(
        out.logs(),
        vec![format!("pid={pid} was_running=true killed=true")]
    );
    assert!(ct.processes(&format!("sleep {n}")).is_empty(), "stopped");
});

// A job that dies before its line comes ends `wait_for` at once with the log's last
// lines (not its 10 minute default timeout), and `proc.stop` of it, not running, removes
// its pid file inside the container: under busybox too.
in_containers!(proc_wait_for_a_dead_job, |ct: &Ct| {
    let env = Env::new();
    let dir = ct.dir();
    let job = format!("rbt-dies-{}", unique());
    let log = dir.at("dies.log");
    let t0 = Instant::now();
    let out = lxc::run(
        &env,
        &dir,
        EnvMode::Clear,
        &subst(
            r#"step("start, wait, stop", function()
  local j = proc.spawn(box, { name = "@job@", log = "@log@",
    cmd = { "sh", "-c", "echo loading; echo 'RuntimeError: boom' >&2; exit 1" } })
  local ok, err = pcall(proc.wait_for, box, { file = "@log@", pattern = "ready" })
  log.info("err=" .. tostring(err):gsub("\n", "|"))
  local s = proc.stop(box, { name = "@job@" })
  log.info(("stop=%s %s"):format(s.pid == j.pid, s.was_running))
end)
"#,
            &[("job", &job), ("log", &log)],
        ),
        &[],
    );
    out.assert_exit(0);
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
    let logs = out.logs();
    assert!(
        logs[0].starts_with("err=")
            && logs[0].contains(&format!("proc.wait_for: job {job} (pid "))
            && logs[0].contains("exited before a line")
            && logs[0].contains("last lines:|  loading|  RuntimeError: boom"),
        "{logs:?}"
    );
    assert_eq!(logs[1], "stop=true false");
    let gone = ct.inside(&format!(
        "test -e /root/.local/state/runbook/proc-{job}.pid && echo there || echo gone"
    ));
    assert_eq!(gone, "gone", "the pid file was removed");
});

/// A repository inside the container (Debian: made with its git), or a plain directory
/// with a file where there is no git; `f` holds "two" over a committed "one".
fn make_repo(ct: &Ct, dir: &CtDir<'_>) -> String {
    let r = dir.at("repo");
    if ct.kind == Kind::Debian {
        ct.inside(&format!(
            "cd '{}' && git init -q repo && cd repo && printf 'one\\n' > f && git add f && \
             git -c user.name=t -c user.email=t@example.invalid commit -qm first && printf 'two\\n' > f",
            dir.path
        ));
    } else {
        dir.write("repo/f", "two\n");
    }
    r
}

// git.head/status/restore with the container's git; without git, each says so before
// anything changed.
in_containers!(git_head_status_restore, |ct: &Ct| {
    let env = Env::new();
    let dir = ct.dir();
    let r = make_repo(ct, &dir);
    if ct.kind != Kind::Debian {
        for (what, call) in [
            ("git.status", format!("git.status(box, \"{r}\")")),
            ("git.head", format!("git.head(box, \"{r}\")")),
            (
                "git.restore",
                subst(r#"git.restore(box, { repo = "@r@" })"#, &[("r", &r)]),
            ),
        ] {
            let out = lxc::run(
                &env,
                &dir,
                EnvMode::Keep,
                &format!("step(\"git\", function() {call} end)\n"),
                &[],
            );
            assert_needs(&out, what, "git", ct);
        }
        assert_eq!(
            std::fs::read_to_string(dir.host.join("repo/f")).unwrap(),
            "two\n"
        );
        return;
    }
    let out = lxc::run(
        &env,
        &dir,
        EnvMode::Clear,
        &subst(
            r#"step("git", function()
  local h = git.head(box, "@r@")
  local s = git.status(box, "@r@")
  log.info(h.subject .. " " .. s.files[1].status .. " " .. s.files[1].path)
  local done = git.restore(box, { repo = "@r@" })
  log.info(("restored %s to %s"):format(table.concat(done.files, ","), done.rev == h.rev and "HEAD" or done.rev))
  if not git.status(box, "@r@").clean then fail("still dirty") end
end)
"#,
            &[("r", &r)],
        ),
        &[],
    );
    out.assert_exit(0);
    assert_eq!(out.logs(), vec!["first  M f", "restored f to HEAD"]);
    assert_eq!(
        std::fs::read_to_string(dir.host.join("repo/f")).unwrap(),
        "one\n"
    );
});

// venv.build with the container's uv and python3 from local wheels (Debian); elsewhere
// it names what is missing, uv first, then (with a uv given) a Python for uv to use.
in_containers!(venv_build, |ct: &Ct| {
    let env = Env::new();
    let dir = ct.dir();
    std::fs::create_dir_all(dir.host.join("wheels")).unwrap();
    let st = Command::new("python3")
        .arg(repo_root().join("tests/fixtures/venv/make_wheels.py"))
        .arg(dir.host.join("wheels"))
        .status()
        .unwrap();
    assert!(st.success(), "make_wheels.py");
    let build = |uv: &str| {
        lxc::run(
            &env,
            &dir,
            EnvMode::Keep,
            &subst(
                r#"step("venv", function()
  local v = venv.build(box, { path = "@venv@", no_index = true, find_links = "@wheels@",
    packages = { "rbdemo==2.0" }, verify = "import rbdemo"@uv@ })
  log.info("python " .. v.python .. " " .. v.packages[1].name .. "==" .. v.packages[1].version)
end)
"#,
                &[
                    ("venv", &dir.at("venv")),
                    ("wheels", &dir.at("wheels")),
                    ("uv", &uv),
                ],
            ),
            &[],
        )
    };
    if ct.kind != Kind::Debian {
        assert_needs(&build(""), "venv.build", "uv", ct);
        let uv = dir.copy(std::path::Path::new("/usr/local/bin/uv"), "uv");
        assert_needs(
            &build(&format!(", uv = \"{uv}\"")),
            "venv.build",
            "python3",
            ct,
        );
        assert!(!dir.host.join("venv").exists());
        return;
    }
    let out = build("");
    out.assert_exit(0);
    let said = out.logs();
    assert!(
        said.len() == 1 && said[0].starts_with("python 3.") && said[0].ends_with(" rbdemo==2.0"),
        "{said:?}"
    );
    assert_eq!(
        ct.inside(&format!(
            "{}/bin/python -c 'import rbdemo; print(rbdemo.VERSION)'",
            dir.at("venv")
        )),
        "2.0"
    );
    // A fresh build whose verify fails is rolled back: the old venv stays, and the run
    // counts no change (issue 33 item 6: it counted changed=1).
    let out = lxc::run(
        &env,
        &dir,
        EnvMode::Keep,
        &subst(
            r#"step("venv", function()
  venv.build(box, { path = "@venv@", no_index = true, find_links = "@wheels@",
    packages = { "rbdemo==1.0" }, verify = "import rbdemo; assert rbdemo.VERSION == '3'" })
end)
"#,
            &[("venv", &dir.at("venv")), ("wheels", &dir.at("wheels"))],
        ),
        &[],
    );
    out.assert_exit(1);
    assert!(
        out.step_error(FAILED).contains("verify failed"),
        "{}",
        out.describe()
    );
    let changed = pick!(out.run_events(), Event::RunFinished { changed, .. } => *changed);
    assert_eq!(changed, [0], "{}", out.describe());
    assert_eq!(
        ct.inside(&format!(
            "{}/bin/python -c 'import rbdemo; print(rbdemo.VERSION)'",
            dir.at("venv")
        )),
        "2.0"
    );
});

// warmup.run with the container's python3; without one it fails before running
// anything, saying so.
in_containers!(warmup_run, |ct: &Ct| {
    let env = Env::new();
    let dir = ct.dir();
    let script = dir.write(
        "warm.py",
        "import os, sys\nd = sys.argv[1]\nos.makedirs(d, exist_ok=True)\nfor i in range(3):\n    open(os.path.join(d, f'k{i}'), 'w').write('x' * 10)\nprint('compiled 3 kernels')\n",
    );
    let cache = dir.at("inductor");
    let out = lxc::run(
        &env,
        &dir,
        EnvMode::Clear,
        &subst(
            r#"step("warm", function()
  local w = warmup.run(box, { script = "@script@", args = { "@cache@" }, expect_cache = { "@cache@" } })
  log.info(("%s: %s files"):format(w.caches[1].state, w.caches[1].files_after))
end)
"#,
            &[("script", &script), ("cache", &cache)],
        ),
        &[],
    );
    if ct.kind != Kind::Debian {
        assert_needs(&out, "warmup.run", "python3", ct);
        assert!(!dir.host.join("inductor").exists());
        return;
    }
    out.assert_exit(0);
    assert!(
        out.logs().contains(&"filled: 3 files".to_string()),
        "{:?}",
        out.logs()
    );
});

// fingerprint.take reads whatever the container has: python and git where they are,
// nil where not, cache sizes everywhere (busybox's find and stat included).
in_containers!(fingerprint_take, |ct: &Ct| {
    let env = Env::new();
    let dir = ct.dir();
    fill_cache(&dir, "cache");
    let r = make_repo(ct, &dir);
    let out = lxc::run(
        &env,
        &dir,
        EnvMode::Keep,
        &subst(
            r#"step("fp", function()
  local fp = fingerprint.take(box, { repo = "@r@", caches = { "@cache@" } })
  local c = fp.caches["@cache@"]
  log.info(("python=%s head=%s dirty=%d cache=%d/%d"):format(tostring(fp.python), tostring(fp.git_head ~= nil), #fp.git_dirty, c.bytes, c.files))
end)
"#,
            &[("r", &r), ("cache", &dir.at("cache"))],
        ),
        &[],
    );
    out.assert_exit(0);
    let said = out.logs();
    let line = said.first().cloned().unwrap_or_default();
    if ct.kind == Kind::Debian {
        assert!(line.starts_with("python=3."), "{line}");
        assert!(line.ends_with(" head=true dirty=1 cache=8/2"), "{line}");
    } else {
        assert_eq!(line, "python=nil head=false dirty=0 cache=8/2");
    }
});

// gpu.probe with the nvidia-smi double inside the container, on its PATH there (the
// double is POSIX sh + awk, so it runs in the busybox containers too); without it on
// PATH, gpu.probe says what it needs.
in_containers!(gpu_probe, |ct: &Ct| {
    let env = Env::new();
    let dir = ct.dir();
    let probe = "step(\"gpu\", function()\n  local g = gpu.probe(box)\n  log.info(#g .. \" \" .. g[1].name)\nend)\n";
    let out = lxc::run(&env, &dir, EnvMode::Keep, probe, &[]);
    assert_needs(&out, "gpu.probe", "nvidia-smi", ct);
    dir.copy(
        &repo_root().join("tests/bin/nvidia-smi"),
        "tests/bin/nvidia-smi",
    );
    dir.copy(
        &repo_root().join("tests/fixtures/nvidia-smi"),
        "tests/fixtures/nvidia-smi",
    );
    let bin = dir.at("tests/bin");
    let out = CtRun::new(&env, &dir, EnvMode::Keep)
        .path_first(&bin)
        .var("NVIDIA_SMI_FIXTURE", "h200x8")
        .go(probe, &[]);
    out.assert_exit(0);
    assert_eq!(out.logs(), vec!["8 NVIDIA H200"]);
});

fn repo_root() -> std::path::PathBuf {
    common::repo()
}

// artifact.capture packs the cache with the container's own tar and gzip (busybox's in
// the busybox ones), artifact.restore checks it here and extracts it there with them:
// the cache comes back byte for byte, its executable bit too, and the cache it replaces
// is kept aside. The run lock is taken without flock in the busybox one (mkdir).
in_containers!(artifact_capture_and_restore, |ct: &Ct| {
    let env = Env::new();
    let dir = ct.dir();
    fill_cache(&dir, "cache");
    dir.write("cache/a/kernel.so", "\x7fELF not really");
    ct.attach(&format!("chmod 755 '{}'", dir.at("cache/a/kernel.so")));
    let cache = dir.at("cache");
    let store = env.tmp.path().join("store");
    let roots = subst(r#"cache_roots = { "@dir@" }"#, &[("dir", &dir.path)]);
    let out = CtRun::new(&env, &dir, EnvMode::Keep).header(&roots).go(
        &subst(
            r#"step("capture", function()
  local c = artifact.capture(box, { name = "ct", paths = "@cache@", store = "@store@" })
  log.info(("captured %d files, %d bytes"):format(c.files, c.bytes))
end)
"#,
            &[("cache", &cache), ("store", &store.display())],
        ),
        &[],
    );
    out.assert_exit(0);
    assert!(
        out.logs().iter().any(|l| l == "captured 3 files, 23 bytes"),
        "{}",
        out.describe()
    );

    // The cache changes after the capture: the restore puts the captured one back.
    dir.write("cache/a/k", "changed");
    std::fs::remove_file(dir.host.join("cache/j")).unwrap();
    let out = CtRun::new(&env, &dir, EnvMode::Clear).header(&roots).go(
        &subst(
            r#"step("restore", function()
  local r = artifact.restore(box, { name = "ct", paths = "@cache@", store = "@store@", require = true })
  log.info(("restored=%s kept=%s"):format(tostring(r.restored), tostring(r.kept and r.kept[1])))
end)
"#,
            &[("cache", &cache), ("store", &store.display())],
        ),
        &[],
    );
    out.assert_exit(0);
    let read = |p: &str| std::fs::read_to_string(dir.host.join(p)).unwrap();
    assert_eq!(
        (read("cache/a/k"), read("cache/j")),
        ("12345".into(), "123".into())
    );
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(dir.host.join("cache/a/kernel.so"))
            .unwrap()
            .permissions()
            .mode()
    };
    assert_eq!(mode & 0o777, 0o755, "the executable bit comes back");
    let said = out.logs();
    let kept = said
        .iter()
        .find_map(|l| l.strip_prefix("restored=true kept="))
        .unwrap_or_else(|| panic!("{}", out.describe()));
    assert!(kept.contains("cache.runbook-kept-"), "{said:?}");
    let kept_here = dir.host.join(kept.rsplit('/').next().unwrap());
    assert_eq!(
        std::fs::read_to_string(kept_here.join("a/k")).unwrap(),
        "changed",
        "the cache that was there is kept aside"
    );
});
