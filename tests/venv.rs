//! `venv.build` with the real uv, offline: the packages are tiny wheels written by
//! tests/fixtures/venv/make_wheels.py and installed with `no_index` + `find_links`.
use crate::common::sshd::Fleet;
use crate::common::*;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The interpreter the venvs are built with: the one on this machine (uv must never
/// download one in a test).
fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A Lua string literal for any path or snippet.
fn lua(s: &str) -> String {
    format!("[==[{s}]==]")
}

struct Case {
    env: Env,
    wheels: PathBuf,
    venv: PathBuf,
    python: String,
}

impl Case {
    fn new() -> Case {
        let env = Env::new();
        let wheels = env.tmp.path().join("wheels");
        std::fs::create_dir_all(&wheels).unwrap();
        let st = Command::new("python3")
            .arg(repo().join("tests/fixtures/venv/make_wheels.py"))
            .arg(&wheels)
            .status()
            .expect("python3");
        assert!(st.success(), "make_wheels.py failed");
        let venv = env.scratch().join("venv");
        Case {
            env,
            wheels,
            venv,
            python: python(),
        }
    }

    /// A runbook with one step that builds the venv on `target` with the given extra
    /// options (Lua table fields), logging the result as `result <json-ish>` lines.
    fn runbook(&self, target: &str, extra: &str) -> PathBuf {
        let body = subst(
            r#"
runbook { name = "venv" }
local t = target(@target@)
step("build", function()
  local v = venv.build(t, {
    path = @path@, python = @python@, no_index = true, find_links = @wheels@,
    @extra@
  })
  log.info("path=" .. v.path)
  log.info("python=" .. tostring(v.python))
  log.info("hash=" .. tostring(v.hash))
  log.info("changed=" .. tostring(v.changed) .. " planned=" .. tostring(v.planned))
  for _, p in ipairs(v.packages) do log.info("package=" .. p.name .. "==" .. p.version) end
end)
"#,
            &[
                ("target", &lua(target)),
                ("path", &lua(&self.venv.display().to_string())),
                ("python", &lua(&self.python)),
                ("wheels", &lua(&self.wheels.display().to_string())),
                ("extra", &extra),
            ],
        );
        self.env.write("venv.lua", &body)
    }

    /// `runbook run` with its own uv cache, so tests share nothing.
    fn run(&self, target: &str, extra: &str, args: &[&str]) -> Output {
        let file = self.runbook(target, extra);
        Run::new(&self.env, file)
            .env("UV_CACHE_DIR", self.env.tmp.path().join("uv-cache"))
            .yes()
            .json()
            .args(args)
            .run()
    }

    /// `run` on local with no extra args, which must fail (exit 1): the failed step's error.
    fn failure(&self, extra: &str) -> String {
        self.run("local", extra, &[])
            .assert_exit(1)
            .step_error(FAILED)
    }

    /// What `import rbdemo` gives in the venv's python, or the error.
    fn rbdemo_version(&self) -> Result<String, String> {
        python_says(
            &self.venv.join("bin/python"),
            "import rbdemo; print(rbdemo.VERSION)",
        )
    }

    /// Build directories left beside the venv.
    fn leftovers(&self) -> Vec<String> {
        let name = self
            .venv
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        std::fs::read_dir(self.venv.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("{name}.")))
            .collect()
    }

    fn assert_no_leftovers(&self) {
        assert!(self.leftovers().is_empty(), "{:?}", self.leftovers());
    }
}

fn python_says(python: &Path, code: &str) -> Result<String, String> {
    let out = Command::new(python)
        .args(["-c", code])
        .current_dir("/")
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn hash_of(lines: &str) -> String {
    Sha256::digest(lines.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn fresh_build_installs_verifies_and_reports() {
    let _uv = require_uv!();
    let case = Case::new();
    let out = case.run(
        "local",
        r#"packages = { "rbdemo==1.0" }, verify = "import rbdemo""#,
        &[],
    );
    out.assert_exit(0);
    assert_eq!(case.rbdemo_version(), Ok("1.0".to_string()));
    let logs = out.logs();
    let version = python_says(
        Path::new(&case.python),
        "import platform; print(platform.python_version())",
    )
    .unwrap();
    for want in [
        format!("path={}", case.venv.display()),
        format!("python={version}"),
        "package=rbdemo==1.0".to_string(),
        format!("hash={}", hash_of("rbdemo==1.0\n")),
        "changed=true planned=false".to_string(),
    ] {
        assert!(logs.contains(&want), "no {want:?} in {logs:?}");
    }
    case.assert_no_leftovers();

    // A second fresh build replaces it; the console script still works after the rename
    // (the venv is built relocatable), and the old venv is gone.
    let out = case.run("local", r#"packages = { "rbdemo==2.0" }"#, &[]);
    out.assert_exit(0);
    assert_eq!(case.rbdemo_version(), Ok("2.0".to_string()));
    let script = Command::new(case.venv.join("bin/rbdemo")).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&script.stdout).trim(), "2.0");
    case.assert_no_leftovers();
    let summary = pick!(
        out.run_events(),
        Event::ActionStarted { effect: Effect::Change, summary, .. } => summary.clone()
    )
    .into_iter()
    .next()
    .expect("the build action");
    assert!(
        summary.ends_with(&format!(
            "(python {}, rbdemo==2.0 from find-links {}, fresh)",
            case.python,
            case.wheels.display()
        )),
        "{summary}"
    );
}

#[test]
fn dry_run_plans_the_build_and_builds_nothing() {
    let _uv = require_uv!();
    let case = Case::new();
    let out = case.run(
        "local",
        r#"packages = { "rbdemo==1.0" }, verify = "import rbdemo""#,
        &["--dry-run"],
    );
    out.assert_exit(0);
    assert!(!case.venv.exists(), "a dry-run built the venv");
    case.assert_no_leftovers();
    let events = out.run_events();
    let planned = pick!(events, Event::ActionPlanned { .. });
    assert_eq!(planned.len(), 1, "{planned:?}");
    let Event::ActionPlanned {
        effect,
        summary,
        command,
        ..
    } = planned[0]
    else {
        unreachable!()
    };
    assert_eq!(*effect, Effect::Change);
    assert_eq!(
        *summary,
        format!(
            "build venv {} (python {}, rbdemo==1.0 from find-links {}, fresh)",
            case.venv.display(),
            case.python,
            case.wheels.display()
        )
    );
    assert!(
        command.starts_with("env UV_PYTHON_DOWNLOADS=never venv-build.sh ")
            && command.ends_with(" rbdemo==1.0"),
        "{command}"
    );
    // The probe for uv is a read, so it ran.
    let reads = pick!(events, Event::ActionStarted { .. });
    assert!(
        reads.iter().all(|e| matches!(
            e,
            Event::ActionStarted {
                effect: Effect::Read,
                ..
            }
        )) && !reads.is_empty(),
        "{reads:?}"
    );
    assert!(out
        .logs()
        .contains(&"changed=true planned=true".to_string()));

    // Fidelity: the real run starts exactly the change the dry-run planned.
    let real = case.run(
        "local",
        r#"packages = { "rbdemo==1.0" }, verify = "import rbdemo""#,
        &[],
    );
    real.assert_exit(0);
    let started = pick!(
        real.run_events(),
        Event::ActionStarted { effect: Effect::Change, command, .. } => command.clone()
    );
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0], *command);
}

#[test]
fn a_failed_fresh_build_leaves_the_old_venv_working() {
    let _uv = require_uv!();
    let case = Case::new();
    let out = case.run("local", r#"packages = { "rbdemo==1.0" }"#, &[]);
    out.assert_exit(0);

    // A package that the index does not have: uv fails half-way.
    let error = case.failure(r#"packages = { "rbdemo==2.0", "rbdemo-missing==9.9" }"#);
    assert!(
        error.contains("rbdemo-missing") && error.contains("was left as it was"),
        "{error}"
    );
    assert_eq!(case.rbdemo_version(), Ok("1.0".to_string()));
    case.assert_no_leftovers();

    // A verify that raises: the new venv is complete but never put in place.
    let error = case.failure(
        r#"packages = { "rbdemo==2.0" }, verify = "import rbdemo; assert rbdemo.VERSION == '3', 'wrong rbdemo'""#,
    );
    assert!(
        error.contains("AssertionError: wrong rbdemo") && error.contains("verify failed"),
        "{error}"
    );
    // The check is shown as a command line that reads back as the code it ran: through
    // `quote`, not pasted into sh text (which gave `-c 'import rbdemo; … == '3', …''`).
    let check = error
        .lines()
        .find_map(|l| l.trim().strip_prefix("cd / && "))
        .unwrap_or_else(|| panic!("no check line in: {error}"));
    let (python, code) = check.split_once(" -c ").unwrap();
    assert!(
        python.starts_with(&format!("{}.runbook-new-", case.venv.display()))
            && python.ends_with("/bin/python"),
        "{check}"
    );
    let read_back = Command::new("sh")
        .args(["-c", r#"eval "set -- $1"; printf %s "$1""#, "sh", code])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&read_back.stdout),
        "import rbdemo; assert rbdemo.VERSION == '3', 'wrong rbdemo'",
        "{check}"
    );
    assert_eq!(case.rbdemo_version(), Ok("1.0".to_string()));
    case.assert_no_leftovers();

    // A venv that verifies where it was built but not once moved to PATH: the old one
    // is put back.
    let error = case.failure(
        r#"packages = { "rbdemo==2.0" }, verify = "import sys; assert '.runbook-new-' in sys.prefix""#,
    );
    assert!(
        error.contains("failed its check once moved") && error.contains("the old one is back"),
        "{error}"
    );
    assert_eq!(case.rbdemo_version(), Ok("1.0".to_string()));
    case.assert_no_leftovers();
}

#[test]
fn a_timed_out_build_is_cleaned_up_on_the_target() {
    let _uv = require_uv!();
    let case = Case::new();
    let out = case.run("local", r#"packages = { "rbdemo==1.0" }"#, &[]);
    out.assert_exit(0);
    // The verify hangs; the timeout stops the build, and its trap removes the new dir.
    let error = case.failure(
        r#"packages = { "rbdemo==2.0" }, verify = "import time; time.sleep(60)", timeout = "3s""#,
    );
    assert!(error.contains("timed out after 3.0s"), "{error}");
    assert_eq!(case.rbdemo_version(), Ok("1.0".to_string()));
    case.assert_no_leftovers();
}

#[test]
fn a_first_build_that_fails_leaves_no_venv() {
    let _uv = require_uv!();
    let case = Case::new();
    let out = case.run(
        "local",
        r#"packages = { "rbdemo==1.0" }, verify = "import sys; assert '.runbook-new-' in sys.prefix""#,
        &[],
    );
    out.assert_exit(1);
    assert!(
        !case.venv.exists(),
        "a venv that failed its check was left at PATH"
    );
    case.assert_no_leftovers();
}

#[test]
fn in_place_install_creates_then_updates() {
    let _uv = require_uv!();
    let case = Case::new();
    let out = case.run(
        "local",
        r#"packages = { "rbdemo==1.0" }, fresh = false"#,
        &[],
    );
    out.assert_exit(0);
    assert_eq!(case.rbdemo_version(), Ok("1.0".to_string()));
    let marker = case.venv.join("kept-by-in-place");
    std::fs::write(&marker, "").unwrap();
    let out = case.run(
        "local",
        r#"packages = { "rbdemo==2.0" }, fresh = false"#,
        &[],
    );
    out.assert_exit(0);
    assert_eq!(case.rbdemo_version(), Ok("2.0".to_string()));
    assert!(marker.exists(), "an in-place install replaced the venv");
    assert!(out.logs().contains(&"package=rbdemo==2.0".to_string()));
    case.assert_no_leftovers();
}

#[test]
fn refuses_to_replace_something_that_is_not_a_venv() {
    let _uv = require_uv!();
    let case = Case::new();
    std::fs::create_dir_all(&case.venv).unwrap();
    std::fs::write(case.venv.join("precious"), "data").unwrap();
    let error = case.failure(r#"packages = { "rbdemo==1.0" }"#);
    assert!(error.contains("is not a virtual environment"), "{error}");
    assert_eq!(
        std::fs::read_to_string(case.venv.join("precious")).unwrap(),
        "data"
    );
    case.assert_no_leftovers();
}

#[test]
fn missing_uv_is_a_clear_error() {
    let case = Case::new();
    if ["/usr/bin/uv", "/bin/uv"]
        .iter()
        .any(|p| Path::new(p).exists())
    {
        eprintln!("skipped: uv is in /usr/bin or /bin, so no PATH can hide it");
        return;
    }
    let home = case.env.tmp.path().join("empty-home");
    std::fs::create_dir_all(&home).unwrap();
    let file = case.runbook("local", r#"packages = { "rbdemo==1.0" }"#);
    let run = |args: &[&str], extra_opts: Option<&str>| {
        let file = match extra_opts {
            Some(extra) => case.runbook("local", extra),
            None => file.clone(),
        };
        Run::new(&case.env, file)
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &home)
            .yes()
            .json()
            .args(args)
            .run()
    };

    let out = run(&[], None);
    out.assert_exit(1);
    let error = out.step_error(FAILED);
    for want in [
        "venv.build: needs uv on local (",
        "~/.local/bin/uv",
        "install_uv = true",
        "uv = \"/path/to/uv\"",
    ] {
        assert!(error.contains(want), "no {want:?} in: {error}");
    }
    assert!(!case.venv.exists());

    // A dry-run says so too, before anything is planned.
    let out = run(&["--dry-run"], None);
    out.assert_exit(1);
    assert!(out.step_error(FAILED).contains("needs uv on local"));

    // With install_uv, the dry-run plans installing uv, then the build with that uv.
    let out = run(
        &["--dry-run"],
        Some(r#"packages = { "rbdemo==1.0" }, install_uv = true"#),
    );
    out.assert_exit(0);
    let planned = pick!(out.run_events(), Event::ActionPlanned { command, .. } => command.clone());
    assert_eq!(planned.len(), 2, "{planned:?}");
    let install = &planned[0];
    assert!(
        install.contains("python3 -m pip install --user --no-index --find-links")
            && install.ends_with(" uv"),
        "{install}"
    );
    let build = &planned[1];
    assert!(
        build.contains(&format!("{}/.local/bin/uv", home.display())),
        "{build}"
    );

    // The torch wheel index holds no uv: pip searches it besides the default index, the
    // build (uv) searches it instead of the default one.
    let torch = "https://download.pytorch.org/whl/cu128";
    let out = run(
        &["--dry-run"],
        Some(&subst(
            r#"packages = { "torch==2.11.0" }, index_url = "@torch@", install_uv = true"#,
            &[("torch", &torch)],
        )),
    );
    out.assert_exit(0);
    let planned = pick!(out.run_events(), Event::ActionPlanned { command, .. } => command.clone());
    let install = &planned[0];
    assert!(
        install.contains(&format!("--extra-index-url {torch} "))
            && !install.contains("--index-url "),
        "{install}"
    );
    let build = &planned[1];
    assert!(
        build.contains(&format!(" --index-url {torch} ")) && build.ends_with(" torch==2.11.0"),
        "{build}"
    );
}

#[test]
fn options_are_checked_before_anything_runs() {
    let case = Case::new();
    for (extra, want) in [
        (r#"packages = { "--pre" }"#, "packages holds the option"),
        (
            r#"fresh = "yes""#,
            "option 'fresh' must be a boolean, got string",
        ),
    ] {
        let error = case.failure(extra);
        assert!(error.contains(want), "{extra}: {error}");
    }
    // A misspelt option written in the call: refused as the file loads, before any step
    // (the run's own refusal of a table built elsewhere: tests/options.rs).
    let file = case.runbook("local", r#"pakages = { "x" }"#);
    Run::new(&case.env, &file)
        .yes()
        .expect_exit(2)
        .stderr_has(
            "unknown 'pakages': venv.build() takes no option 'pakages'; did you mean 'packages'?",
        )
        .run();
    let rb = case.env.write(
        "relative.lua",
        r#"runbook { name = "r" }
step("s", function() venv.build(target("local"), { path = "venv" }) end)"#,
    );
    Run::new(&case.env, rb)
        .yes()
        .expect_exit(1)
        .stderr_has("path must be an absolute path")
        .run();
}

#[test]
fn fresh_build_over_ssh() {
    require_sshd!();
    let uv = require_uv!();
    let fleet = Fleet::start(1);
    let case = Case::new();
    // `runbook run` of the build on node1 (the uv cache is the node's own).
    let run_on_node1 = |extra: &str| {
        let file = case.runbook("node1", extra);
        Run::new(&case.env, &file).ssh(&fleet).yes().json().run()
    };
    // The sshd session's PATH (/usr/local/bin:/usr/bin:/bin) may not hold uv (pyenv, a
    // user install): give its path.
    let extra = subst(
        r#"packages = { "rbdemo==1.0" }, verify = "import rbdemo", uv = @uv@"#,
        &[("uv", &lua(&uv))],
    );
    let out = run_on_node1(&extra);
    out.assert_exit(0);
    assert_eq!(case.rbdemo_version(), Ok("1.0".to_string()));
    assert!(out.logs().contains(&"package=rbdemo==1.0".to_string()));
    let build = pick!(
        out.run_events(),
        Event::ActionStarted { effect: Effect::Change, target, .. } => target.clone()
    )
    .into_iter()
    .next()
    .expect("the build action");
    assert_eq!(build, "node1");
    case.assert_no_leftovers();

    // Stopped half-way over SSH, the build cleans up after itself there too.
    let extra = subst(
        r#"packages = { "rbdemo==2.0" }, verify = "import time; time.sleep(60)", timeout = "3s", uv = @uv@"#,
        &[("uv", &lua(&uv))],
    );
    let out = run_on_node1(&extra);
    out.assert_exit(1);
    assert!(
        out.step_error(FAILED).contains("timed out"),
        "{}",
        out.describe()
    );
    assert_eq!(case.rbdemo_version(), Ok("1.0".to_string()));
    // Rolled back: no change counted (issue 33 item 6).
    let changed = pick!(out.run_events(), Event::RunFinished { changed, .. } => *changed);
    assert_eq!(changed, [0], "{}", out.describe());
    // The remote clean-up finishes right after runbook has given up waiting for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !case.leftovers().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    case.assert_no_leftovers();
}

/// A PEP 503 "simple" index of the fixture wheels, served on 127.0.0.1 by Python's own
/// http.server (its directory listings are the HTML pages the simple API is), for as
/// long as it lives: the stand-in for a company's mirror.
struct Mirror {
    child: std::process::Child,
    url: String,
}

impl Mirror {
    fn serve(wheels: &Path, root: &Path) -> Mirror {
        let project = root.join("simple/rbdemo");
        std::fs::create_dir_all(&project).unwrap();
        for e in std::fs::read_dir(wheels).unwrap().flatten() {
            std::fs::copy(e.path(), project.join(e.file_name())).unwrap();
        }
        let mut child = Command::new("python3")
            .args([
                "-u",
                "-m",
                "http.server",
                "0",
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(root)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("python3 -m http.server");
        // "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let port = line
            .split(" port ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        Mirror {
            url: format!("http://127.0.0.1:{port}/simple"),
            child,
        }
    }

    /// The request lines the server logged, once it is stopped.
    fn requests(&mut self) -> String {
        self.child.kill().unwrap();
        let mut log = String::new();
        std::io::Read::read_to_string(self.child.stderr.as_mut().unwrap(), &mut log).unwrap();
        log
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The shipped `venv-rebuild` with `index_url`: uv installs from that mirror (and only
/// from it), and the build command the preview shows names it.
#[test]
fn venv_rebuild_installs_from_the_index_url_mirror() {
    let _uv = require_uv!();
    let case = Case::new();
    let mut mirror = Mirror::serve(&case.wheels, &case.env.tmp.path().join("mirror"));
    let url = mirror.url.clone();
    let run = |extra: &[&str]| {
        Run::new(&case.env, "venv-rebuild")
            .env("UV_CACHE_DIR", case.env.tmp.path().join("uv-cache"))
            .json()
            .set("venv", &case.venv)
            .set("python", &case.python)
            .set("packages", "rbdemo==2.0")
            .set("verify", "import rbdemo")
            .set("index_url", &url)
            .args(extra)
            .run()
    };
    let dry = run(&["--dry-run"]);
    dry.assert_exit(0);
    let planned = pick!(dry.run_events(), Event::ActionPlanned { command, .. } => command.clone());
    let command = &planned[0];
    assert!(
        command.ends_with(&format!(" --index-url {url} rbdemo==2.0")),
        "{command}"
    );
    let out = run(&["--yes"]);
    out.assert_exit(0);
    assert_eq!(case.rbdemo_version(), Ok("2.0".to_string()));
    let started = pick!(
        out.run_events(),
        Event::ActionStarted { effect: Effect::Change, command, .. } => command.clone()
    );
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0], planned[0]);
    let requests = mirror.requests();
    assert!(
        requests.contains("GET /simple/rbdemo/ HTTP")
            && requests.contains("GET /simple/rbdemo/rbdemo-2.0-py3-none-any.whl"),
        "uv asked the mirror for the package: {requests}"
    );
}

/// `venv-rebuild --dry-run --offline` with torch: the build command names the wheel
/// index `cuda` and `index_url` choose, or none for `cuda=pypi`; bad values are refused
/// before anything runs (exit 2), a URL with credentials without echoing them.
#[test]
fn venv_rebuild_previews_the_wheel_index() {
    let env = Env::new();
    let preview = |sets: &[&str]| {
        let mut run = Run::new(&env, "venv-rebuild")
            .dry_run()
            .offline()
            .json()
            .set("venv", "/opt/venv")
            .set("torch", "2.11.0");
        for s in sets {
            run = run.args(["--set", s]);
        }
        run.run()
    };
    let build = |out: &Output| -> String {
        out.assert_exit(0);
        pick!(out.run_events(), Event::ActionPlanned { command, .. } => command.clone())
            .into_iter()
            .find(|c| c.contains("torch==2.11.0"))
            .unwrap_or_else(|| panic!("no build planned: {}", out.describe()))
    };
    for (sets, tail) in [
        (
            &[][..],
            " --index-url https://download.pytorch.org/whl/cu128 torch==2.11.0",
        ),
        (
            &["cuda=cpu"][..],
            " --index-url https://download.pytorch.org/whl/cpu torch==2.11.0",
        ),
        (&["cuda=pypi"][..], "' torch==2.11.0"),
        (
            &["cuda=pypi", "index_url=https://pypi.mirror.example/simple"][..],
            " --index-url https://pypi.mirror.example/simple torch==2.11.0",
        ),
        (
            &["index_url=https://pypi.mirror.example/simple"][..],
            " --index-url https://pypi.mirror.example/simple torch==2.11.0",
        ),
    ] {
        let command = build(&preview(sets));
        assert!(command.ends_with(tail), "{sets:?}: {command}");
        assert_eq!(
            command.matches("--index-url").count(),
            tail.matches("--index-url").count()
        );
    }
    for (set, want) in [
        (
            "cuda=cu12",
            r#"torch.index: cuda: give a CUDA build like "cu128" (cu + 3 digits), "cpu", or "pypi""#,
        ),
        (
            "index_url=ftp://m.example/simple",
            r#"torch.index: index_url must be an http://, https:// or file:/// URL of a package index, e.g. "https://pypi.mirror.example/simple", got "ftp://m.example/simple""#,
        ),
        (
            "index_url=https://me:hunter2@m.example/simple",
            "torch.index: index_url carries credentials",
        ),
    ] {
        let out = preview(&[set]);
        let stderr = out.stderr_text();
        assert_eq!(out.status.code(), Some(2), "{set}: {}", out.describe());
        assert!(
            stderr.contains("venv-rebuild.lua:") && stderr.contains(want),
            "{set}: {stderr}"
        );
        assert!(
            !stderr.contains("hunter2") && !out.stdout_text().contains("hunter2"),
            "{stderr}"
        );
        assert!(
            !out.lines().iter().any(|l| matches!(
                l,
                Line::Event(Stamped {
                    event: Event::ActionPlanned { .. },
                    ..
                })
            )),
            "{set}: nothing is planned"
        );
    }
}
