//! Containers other than Proxmox's: `t:lxc`, `t:docker`, `t:podman`, `t:kube`.
//!
//! - LXC and Podman are real here: this harness makes a busybox LXC container
//!   (`runbook-test-lxc`) and a busybox Podman container (`runbook-test-podman`, from an
//!   image it imports: no registry needed) and runs runbook against them.
//! - Docker and Kubernetes cannot run here: `tests/bin/docker` (also `podman`) and
//!   `tests/bin/kubectl` are doubles. They are held to the real tools: the real podman
//!   is asked the same things as its double and must answer the same; the real `docker`
//!   and `kubectl` clients, where installed, talk to recording fakes of the daemon and the
//!   API server (`tests/fixtures/fake_dockerd.py`, `fake_kube_api.py`), which show the
//!   argv they send and the words they fail with.
//!
//! Without LXC or Podman the real tests skip with a message, unless
//! `RUNBOOK_REQUIRE_LXC=1` or `RUNBOOK_REQUIRE_PODMAN=1`: then they fail.
use crate::common;
use crate::common::lxc::sh;
use crate::common::*;
use std::ffi::OsString;
use std::io::BufRead;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// helpers

fn started_commands(out: &Output) -> Vec<String> {
    pick!(out.run_events(), Event::ActionStarted { command, .. } => command.clone())
}

/// `runbook run NAME.lua --yes --json`, `body` after the header, 90 s at most.
fn ct<'e>(env: &'e Env, name: &str, body: &str) -> Run<'e> {
    let rb = env.write(
        &format!("{name}.lua"),
        &subst(
            r#"runbook { name = "@name@" }
@body@"#,
            &[("name", &name), ("body", &body)],
        ),
    );
    Run::new(env, rb)
        .yes()
        .json()
        .timeout(Duration::from_secs(90))
}

/// How many processes on this machine have `needle` in their command line (the
/// doubles' containers share this machine's PID namespace).
fn processes_with(needle: &str) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) {
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains(needle) {
                n += 1;
            }
        }
    }
    n
}

fn wait_gone(needle: &str, limit: Duration) -> bool {
    let t0 = Instant::now();
    while processes_with(needle) > 0 {
        if t0.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    true
}

/// The first `program` on PATH that is not one of the doubles in tests/bin.
fn real_program(program: &str) -> Option<PathBuf> {
    let doubles = repo().join("tests/bin");
    std::env::split_paths(&std::env::var_os("PATH")?)
        .filter(|d| d.canonicalize().ok() != doubles.canonicalize().ok())
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Skips (or fails, when `require` is set to 1) a test that needs what is not here.
fn unavailable(require: &str, why: &str) {
    if std::env::var(require).as_deref() == Ok("1") {
        panic!("{require}=1 but: {why}");
    }
    eprintln!("skipped: {why}");
}

// ---------------------------------------------------------------------------------------
// the doubles

/// The doubles' containers, in a temp dir: `docker/NAME`, `podman/NAME`,
/// `kube/CONTEXT/NS/POD/CONTAINER` (see tests/bin/docker and tests/bin/kubectl).
struct Doubles {
    dir: tempfile::TempDir,
}

impl Doubles {
    fn new() -> Doubles {
        let d = Doubles {
            dir: tempfile::tempdir().unwrap(),
        };
        for ct in ["docker/trainer", "docker/other", "podman/trainer"] {
            d.make(ct);
        }
        d.write("docker/stopped/state", "exited");
        d.write("docker/paused/state", "paused");
        d.write("podman/stopped/state", "exited");
        d.make("kube/default/ml/train-0/main");
        d.write("kube/default/ml/train-0/containers", "main\ninit\n");
        d.write("kube/default/ml/train-0/init/state", "waiting");
        d.write("kube/default/ml/done-0/phase", "Succeeded");
        d.make("kube/default/ml/done-0/main");
        d
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn make(&self, rel: &str) {
        std::fs::create_dir_all(self.path(rel)).unwrap();
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// `run` with the doubles first on PATH.
    fn on<'e>(&self, run: Run<'e>) -> Run<'e> {
        run.path_first(repo().join("tests/bin"))
            .env("DOCKER_DOUBLE_ROOT", self.path("docker"))
            .env("PODMAN_DOUBLE_ROOT", self.path("podman"))
            .env("KUBE_DOUBLE_ROOT", self.path("kube"))
    }

    fn run(&self, env: &Env, body: &str) -> Output {
        self.on(ct(env, "ct", body)).run()
    }
}

/// Each double's target, the preview's start, and where its container's /tmp is.
const ENGINES: &[(&str, &str, &str, &str)] = &[
    (
        "docker",
        r#"target("local"):docker("trainer")"#,
        "docker exec -i trainer sh -c ",
        "docker/trainer",
    ),
    (
        "podman",
        r#"target("local"):podman("trainer")"#,
        "podman exec -i trainer sh -c ",
        "podman/trainer",
    ),
    (
        "kube",
        r#"target("local"):kube("train-0", { namespace = "ml", container = "main" })"#,
        "kubectl exec -i --namespace=ml --container=main train-0 -- sh -c ",
        "kube/default/ml/train-0/main",
    ),
];

/// argv, env, cwd, stdin and exit codes arrive inside each container; a change takes the
/// run lock inside it (its own /root), and its file lands in the container's /tmp.
#[test]
fn commands_run_inside_docker_podman_and_kube() {
    let doubles = Doubles::new();
    for (name, target, preview, dir) in ENGINES {
        let env = Env::new();
        let made = format!("made-by-{name}-{}", std::process::id());
        let out = doubles.run(
            &env,
            &subst(
                r#"local t = @target@
step("inside", function()
  local r = t:exec({ "sh", "-c", 'pwd; printf "%s|%s|" "$X" "$1"; cat; : > /tmp/@made@', "sh", "a b" },
                   { env = { X = "x y\nz" }, cwd = "/tmp", stdin = "in" })
  if r.stdout ~= "/tmp\nx y\nz|a b|in" then fail("got " .. r.stdout) end
  local bad = t:exec({ "sh", "-c", "echo oops >&2; exit 7" }, { check = false, read_only = true })
  if bad.code ~= 7 then fail("exit code " .. tostring(bad.code)) end
  if not bad.stderr:find("oops", 1, true) then fail("stderr " .. bad.stderr) end
end)
"#,
                &[("target", &target), ("made", &made)],
            ),
        );
        out.assert_exit(0);
        assert!(
            doubles.path(dir).join("tmp").join(&made).exists(),
            "{name}: ran inside"
        );
        assert!(!Path::new("/tmp").join(&made).exists(), "{name}: not here");
        assert!(
            doubles
                .path(dir)
                .join("root/.local/state/runbook/lock")
                .exists(),
            "{name}: the lock is taken inside the container"
        );
        let commands = started_commands(&out);
        assert!(
            commands.iter().any(|c| c.starts_with(preview)),
            "{name}: the preview is the real command line: {commands:#?}"
        );
    }
}

/// A container that is missing, stopped, paused, completed, or lacks what was asked
/// for: the step fails with what is wrong and the tool's own words, even with
/// `check = false` (the command never ran); a change fails at the run lock the same way.
#[test]
fn containers_that_refuse_fail_the_step_saying_why() {
    let doubles = Doubles::new();
    let env = Env::new();
    let out = doubles.run(
        &env,
        r#"local here = target("local")
local cases = {
  { here:docker("nosuch"), "cannot run a command on local/docker:nosuch: Docker container 'nosuch' on local does not exist (docker: Error response from daemon: No such container: nosuch)" },
  { here:docker("stopped"), "Docker container 'stopped' on local is not running (docker: Error response from daemon: container " },
  { here:docker("paused"), "Docker container 'paused' on local is paused (docker: " },
  { here:docker("trainer", { user = "nosuchuser" }), "Docker container 'trainer' on local has no user 'nosuchuser' (docker: " },
  { here:podman("nosuch"), "Podman container 'nosuch' on local does not exist (podman: Error: no container with name or ID \"nosuch\" found" },
  { here:podman("stopped"), "Podman container 'stopped' on local is not running (podman: Error: can only create exec sessions on running containers" },
  { here:kube("nosuch", { namespace = "ml" }), "no pod 'nosuch' in namespace ml (from local) (kubectl: Error from server (NotFound): pods \"nosuch\" not found)" },
  { here:kube("train-0", { namespace = "gone" }), "namespace gone does not exist (from local) (kubectl: Error from server (NotFound): namespaces \"gone\" not found)" },
  { here:kube("train-0", { namespace = "ml", container = "nope" }), "pod 'train-0' (from local) has no container 'nope' (kubectl: Error from server (BadRequest): container nope is not valid for pod train-0)" },
  { here:kube("done-0", { namespace = "ml" }), "pod 'done-0' (from local) has completed (kubectl: error: cannot exec into a container in a completed pod; current phase is Succeeded)" },
  { here:kube("train-0", { namespace = "ml", container = "init" }), "container 'init' of pod 'train-0' (from local) is not running (kubectl: " },
  { here:kube("train-0", { context = "prod" }), "kubectl on local has no context 'prod' (kubectl: error: context \"prod\" does not exist)" },
}
step("refusals", function()
  for i, c in ipairs(cases) do
    local ok, err = pcall(function() return c[1]:exec({ "true" }, { check = false, read_only = true }) end)
    if ok then fail("case " .. i .. " ran") end
    if not tostring(err):find(c[2], 1, true) then fail("case " .. i .. ": " .. tostring(err)) end
  end
end)
step("a change", function() here:docker("nosuch"):exec({ "touch", "/tmp/x" }) end)
"#,
    );
    assert_eq!(out.status.code(), Some(1), "{}", out.describe());
    let errors = out.step_errors();
    assert!(
        errors.contains("cannot take the run lock on local/docker:nosuch: cannot run a command on local/docker:nosuch: Docker container 'nosuch' on local does not exist (docker: Error response from daemon: No such container: nosuch)"),
        "{errors}"
    );
    assert_eq!(
        errors.lines().count(),
        1,
        "only the change failed: {errors}"
    );
}

/// A step timeout stops the command's whole tree inside the container, a part that
/// ignores TERM included. The doubles run a command in a session of its own, as an
/// engine does, so killing the local `docker exec` alone would leave it running: only
/// runbook's kill through the same hop stops it.
#[test]
fn a_timeout_kills_the_tree_inside_each_container() {
    let doubles = Doubles::new();
    for (i, (name, target, _, _)) in ENGINES.iter().enumerate() {
        let needle = format!("sleep 317{i}");
        let env = Env::new();
        let t0 = Instant::now();
        let out = doubles.run(
            &env,
            &subst(
                r#"local t = @target@
step("stuck", { timeout = "2s" }, function()
  t:exec({ "sh", "-c", "trap '' TERM; @needle@ & @needle@" }, { read_only = true })
end)
"#,
                &[("target", &target), ("needle", &needle)],
            ),
        );
        assert_eq!(out.status.code(), Some(1), "{name}: {}", out.describe());
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{name}: {:?}",
            t0.elapsed()
        );
        assert!(
            wait_gone(&needle, Duration::from_secs(3)),
            "{name}: the tree survived the timeout ({} left)",
            processes_with(&needle)
        );
    }
}

/// Ctrl-C does the same: the tree inside the container is gone, the run says interrupted.
#[test]
fn ctrl_c_kills_the_tree_inside_the_container() {
    let doubles = Doubles::new();
    let env = Env::new();
    let needle = "sleep 3179";
    let mut run = doubles
        .on(ct(
            &env,
            "ctrl-c",
            &subst(
                r#"local t = target("local"):docker("trainer")
step("long", function()
  t:exec({ "sh", "-c", "trap '' TERM INT; @needle@ & @needle@" }, { read_only = true })
end)
"#,
                &[("needle", &needle)],
            ),
        ))
        .spawn();
    run.wait_for("the command", Duration::from_secs(30), || {
        (processes_with(needle) >= 2).then_some(())
    });
    run.signal(libc::SIGINT);
    assert_eq!(run.code(Duration::from_secs(20)), 130, "{}", run.output());
    assert!(
        wait_gone(needle, Duration::from_secs(3)),
        "the tree survived Ctrl-C"
    );
}

/// One run's lock on a container keeps a second run out of that container, and only
/// that one: another container on the same host is free.
#[test]
fn each_container_has_its_own_lock() {
    let doubles = Doubles::new();
    let env = Env::new();
    let mark = doubles.path("docker/trainer/tmp/holding");
    let mut holder = doubles
        .on(ct(
            &env,
            "holder",
            r#"step("hold", function()
  target("local"):docker("trainer"):exec({ "sh", "-c", ": > /tmp/holding; sleep 30" })
end)
"#,
        ))
        .spawn();
    holder.wait_file(&mark, Duration::from_secs(30));
    let second = Env::new();
    let change = |target: &str| {
        doubles
            .on(ct(
                &second,
                // Another run of the same runbook: runs of other runbooks go beside it.
                "holder",
                &subst(
                    r#"step("change", function() @target@:exec({ "true" }) end)
"#,
                    &[("target", &target)],
                ),
            ))
            .args(["--lock-wait", "0"])
            .run()
    };
    let same = change(r#"target("local"):docker("trainer")"#);
    assert_eq!(same.status.code(), Some(1), "{}", same.describe());
    let errors = same.step_errors();
    assert!(
        errors.contains("local/docker:trainer is locked by run "),
        "{errors}"
    );
    let other = change(r#"target("local"):docker("other")"#);
    other.assert_exit(0);
    holder.signal(libc::SIGTERM);
    assert_eq!(holder.code(Duration::from_secs(20)), 143);
}

// ---------------------------------------------------------------------------------------
// the doubles against the real clients

/// The real `docker` client, talking to a daemon that records what it is sent: it sends
/// the argv runbook gives it word for word as the exec's `Cmd` (so the double's reading
/// of its flags is right), a word that is not UTF-8 armoured so that `Cmd` decodes back to
/// the very bytes, and runbook turns its errors into what is wrong. The double says what
/// the real client says.
#[test]
fn the_real_docker_client_sends_our_argv_and_its_errors_read_clearly() {
    let (Some(docker), Ok(_)) = (real_program("docker"), sh(&["python3", "-c", "pass"])) else {
        eprintln!("skipped: no real docker client (or no python3) here");
        return;
    };
    let doubles = Doubles::new();
    let path = format!(
        "{}:{}",
        docker.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let daemon = |env: &Env, mode: &str| {
        let sock = env.tmp.path().join("docker.sock");
        let log = env.tmp.path().join(format!("{mode}.log"));
        let mut child = Command::new("python3")
            .arg(repo().join("tests/fixtures/fake_dockerd.py"))
            .args([sock.as_os_str(), mode.as_ref(), log.as_os_str()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(ready.trim(), "ready");
        (child, sock, log)
    };
    let words: [&[u8]; 6] = [
        b"printf",
        b"%s\\0",
        b"-n",
        b"--",
        b"a b",
        b"\xff\xe9t\xe9\\",
    ];
    for utf8 in [true, false] {
        let words: &[&[u8]] = if utf8 { &words[..5] } else { &words[..] };
        let env = Env::new();
        let (mut fake, sock, log) = daemon(&env, "stopped");
        let lua: Vec<String> = words.iter().map(|w| common::argv::lua_str(w)).collect();
        let out = ct(
            &env,
            "ct",
            &subst(
                r#"step("exec", function() target("local"):docker("trainer"):exec({ @argv@ }, { read_only = true }) end)
"#,
                &[("argv", &lua.join(", "))],
            ),
        )
        .env("PATH", &path)
        .env("DOCKER_HOST", format!("unix://{}", sock.display()))
        // The words as the client sends them for a command of its own (a session
        // sends them on stdin, after its loop: see tests/session.rs).
        .env("RUNBOOK_SESSIONS", "off")
        .run();
        let _ = fake.kill();
        let _ = fake.wait();
        let errors = out.step_errors();
        assert!(
            errors.contains("Docker container 'trainer' on local is not running (docker: Error response from daemon: container 0123456789abcdef"),
            "{}",
            out.describe()
        );
        let body: serde_json::Value = serde_json::from_str(
            std::fs::read_to_string(&log)
                .unwrap()
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(body["AttachStdin"], true, "{body}");
        assert_eq!(
            body["Env"],
            serde_json::Value::Null,
            "no env on the argv: {body}"
        );
        let sent: Vec<OsString> = body["Cmd"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().into())
            .collect();
        if utf8 {
            let tail: Vec<OsString> = words
                .iter()
                .map(|w| OsString::from_vec(w.to_vec()))
                .collect();
            assert_eq!(sent[sent.len() - tail.len()..], tail[..], "{sent:?}");
        }
        // What the container would run: the words, byte for byte, whatever the JSON held.
        let ran = Command::new(&sent[0]).args(&sent[1..]).output().unwrap();
        let want: Vec<u8> = words[2..]
            .iter()
            .flat_map(|w| w.iter().copied().chain([0]))
            .collect();
        assert_eq!(ran.stdout, want, "utf8={utf8}: {ran:?}");
    }

    // The client's words for a missing and a stopped container, and the double's.
    let id = regex::Regex::new("[0-9a-f]{64}").unwrap();
    for (mode, dir) in [("missing", "docker/nosuch"), ("stopped", "docker/stopped")] {
        let env = Env::new();
        let (mut fake, sock, _) = daemon(&env, mode);
        let name = dir.rsplit('/').next().unwrap();
        let real = Command::new(&docker)
            .args(["exec", "-i", name, "true"])
            .env("DOCKER_HOST", format!("unix://{}", sock.display()))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let _ = fake.kill();
        let _ = fake.wait();
        let double = Command::new(repo().join("tests/bin/docker"))
            .args(["exec", "-i", name, "true"])
            .env("DOCKER_DOUBLE_ROOT", doubles.path("docker"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let norm = |o: &std::process::Output| {
            let text = String::from_utf8_lossy(&o.stderr).replace(name, "NAME");
            (o.status.code(), id.replace_all(&text, "ID").into_owned())
        };
        assert_eq!(norm(&double), norm(&real), "{mode}");
    }
}

/// The real `kubectl`, talking to an API server that records what it is asked: the words
/// after `--` are the exec's `command`s one for one (a `--` and `-n` among them), and
/// its errors (from kubectl itself and from the API server) are the double's, word for
/// word, and read clearly in a step.
#[test]
fn the_real_kubectl_sends_our_argv_and_its_errors_read_clearly() {
    let (Some(kubectl), Ok(_)) = (real_program("kubectl"), sh(&["python3", "-c", "pass"])) else {
        eprintln!("skipped: no real kubectl (or no python3) here");
        return;
    };
    let doubles = Doubles::new();
    let api = |env: &Env, mode: &str| {
        let port_file = env.tmp.path().join("port");
        let log = env.tmp.path().join(format!("{mode}.log"));
        let child = Command::new("python3")
            .arg(repo().join("tests/fixtures/fake_kube_api.py"))
            .args([port_file.as_os_str(), mode.as_ref(), log.as_os_str()])
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while !port_file.exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the fake API server did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let port = std::fs::read_to_string(&port_file).unwrap();
        let config = env.write(
            "kubeconfig",
            &format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- cluster: {{server: \"http://127.0.0.1:{port}\"}}\n  name: c\n\
                 contexts:\n- context: {{cluster: c, user: u}}\n  name: default\ncurrent-context: default\n\
                 users:\n- name: u\n  user: {{token: t}}\n"
            ),
        );
        (child, config, log)
    };
    // Each mode: the pod runbook is pointed at, what the step says, and the double's setup.
    let cases = [
        ("missing", "nosuch", "no pod 'nosuch' in namespace ml (from local) (kubectl: Error from server (NotFound): pods \"nosuch\" not found)"),
        ("nons", "train-0", "namespace ml does not exist (from local) (kubectl: Error from server (NotFound): namespaces \"ml\" not found)"),
        ("done", "done-0", "pod 'done-0' (from local) has completed (kubectl: error: cannot exec into a container in a completed pod; current phase is Succeeded)"),
        ("nocontainer", "train-0", "pod 'train-0' (from local) has no container 'nope' (kubectl: Error from server (BadRequest): container nope is not valid for pod train-0)"),
    ];
    for (mode, pod, want) in cases {
        let env = Env::new();
        let (mut fake, config, log) = api(&env, mode);
        let container = if mode == "nocontainer" {
            "nope"
        } else {
            "main"
        };
        let out = ct(
            &env,
            "ct",
            &subst(
                r#"step("exec", function()
  target("local"):kube("@pod@", { namespace = "ml", container = "@container@" })
    :exec({ "printf", "%s|", "-n", "--", "a b&c=d" }, { read_only = true })
end)
"#,
                &[("pod", &pod), ("container", &container)],
            ),
        )
        .path_first(kubectl.parent().unwrap())
        .env("KUBECONFIG", &config)
        .env("RUNBOOK_SESSIONS", "off")
        .run();
        let errors = out.step_errors();
        assert!(errors.contains(want), "{mode}: {}", out.describe());
        // The double, given the same pod, says what the real kubectl said.
        let args = [
            "exec",
            "-i",
            "--namespace=ml",
            &format!("--container={container}"),
            pod,
            "--",
            "true",
        ];
        let real = Command::new(&kubectl)
            .args(args)
            .env("KUBECONFIG", &config)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let _ = fake.kill();
        let _ = fake.wait();
        let kube_root = if mode == "nons" {
            doubles.path("kube-empty")
        } else {
            doubles.path("kube")
        };
        std::fs::create_dir_all(kube_root.join("default")).unwrap();
        let double = Command::new(repo().join("tests/bin/kubectl"))
            .args(args)
            .env("KUBE_DOUBLE_ROOT", &kube_root)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let said = |o: &std::process::Output| {
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        };
        assert_eq!(said(&double), said(&real), "{mode}");
        if mode == "nocontainer" {
            let asked = std::fs::read_to_string(&log).unwrap();
            let exec = asked
                .lines()
                .find(|l| l.contains("/exec?"))
                .unwrap_or_else(|| panic!("no exec request: {asked}"));
            let words: Vec<String> = exec
                .split_once('?')
                .unwrap()
                .1
                .split('&')
                .filter_map(|kv| kv.strip_prefix("command="))
                .map(percent_decode)
                .collect();
            assert_eq!(words[..2], ["sh".to_string(), "-c".to_string()], "{exec}");
            assert_eq!(
                words[words.len() - 5..],
                ["printf", "%s|", "-n", "--", "a b&c=d"].map(String::from),
                "{exec}"
            );
        }
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

// ---------------------------------------------------------------------------------------
// real LXC

const LXC: &str = "runbook-test-lxc";

/// Makes the busybox container if it is not there, with the host's `flock` (Debian's
/// busybox has no flock applet; the template binds the host's /lib, so it runs there),
/// starts it and waits until a command runs in it.
fn lxc_make() -> Result<(), String> {
    let dir = PathBuf::from("/var/lib/lxc").join(LXC);
    if sh(&["lxc-info", "-n", LXC, "-s", "-H"]).is_err() {
        common::lxc::create_busybox(LXC)?;
    }
    let flock = dir.join("rootfs/bin/flock");
    if !flock.exists() {
        std::fs::copy("/usr/bin/flock", &flock).map_err(|e| format!("copying flock: {e}"))?;
    }
    if sh(&["lxc-info", "-n", LXC, "-s", "-H"])? != "RUNNING" {
        sh(&["lxc-start", "-n", LXC, "-d"])?;
    }
    let t0 = Instant::now();
    while sh(&["lxc-attach", "-n", LXC, "--", "true"]).is_err() {
        if t0.elapsed() > Duration::from_secs(20) {
            return Err(format!("container {LXC} did not come up"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

fn lxc() -> bool {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        if sh(&["lxc-create", "--version"]).is_err() {
            return Err("lxc is not installed".into());
        }
        lxc_make().or_else(|first| {
            // Left half-stopped by an earlier run: made again, once.
            let _ = sh(&["lxc-stop", "-n", LXC, "-k"]);
            let _ = sh(&["lxc-destroy", "-n", LXC, "-f"]);
            lxc_make().map_err(|again| format!("{first}; made again: {again}"))
        })
    });
    match ready {
        Ok(()) => true,
        Err(why) => {
            unavailable("RUNBOOK_REQUIRE_LXC", &format!("no LXC container ({why})"));
            false
        }
    }
}

/// What `script` prints inside, whatever its exit status (`grep -c` that counts 0 fails).
fn inside(program: &[&str], script: &str) -> String {
    let out = Command::new(program[0])
        .args(&program[1..])
        .args(["sh", "-c", script])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn in_lxc(script: &str) -> String {
    inside(&["lxc-attach", "-n", LXC, "--"], script)
}

/// argv, env, cwd, stdin and exit codes in a real LXC container under both env modes:
/// `--clear-env` (the default) keeps the client's environment out, `keep_env` lets it in.
#[test]
fn lxc_commands_run_inside_under_both_env_modes() {
    if !lxc() {
        return;
    }
    for (opts, client) in [("", "unset"), (", { keep_env = true }", "from-client")] {
        let env = Env::new();
        let out = ct(
            &env,
            "ct",
            &subst(
                r#"local box = target("local"):lxc("@LXC@"@opts@)
step("in the container", function()
  local r = box:exec({ "sh", "-c", 'cat /proc/1/comm; pwd; printf "%s|%s|%s|" "$X" "$1" "${RB_CLIENT_ONLY-unset}"; cat', "sh", "a b" },
                     { env = { X = "x y\nz" }, cwd = "/tmp", stdin = "in", read_only = true })
  if r.stdout ~= "init\n/tmp\nx y\nz|a b|@client@|in" then fail("got " .. r.stdout) end
  local bad = box:exec({ "sh", "-c", "exit 7" }, { check = false, read_only = true })
  if bad.code ~= 7 then fail("exit code " .. tostring(bad.code)) end
end)
"#,
                &[("LXC", &LXC), ("opts", &opts), ("client", &client)],
            ),
        )
        .env("RB_CLIENT_ONLY", "from-client")
        .expect_exit(0)
        .run();
        assert!(
            started_commands(&out)
                .iter()
                .any(|c| c.starts_with(&format!("lxc-attach -n {LXC} --"))),
            "{}",
            out.describe()
        );
    }
}

/// A timeout kills the tree inside the container's own PID namespace; a change takes
/// the run lock inside it; a container that is not there is a clear error.
#[test]
fn lxc_timeouts_locks_and_refusals() {
    if !lxc() {
        return;
    }
    in_lxc("rm -f /tmp/lxc-made");
    let env = Env::new();
    let t0 = Instant::now();
    let out = ct(
        &env,
        "ct",
        &subst(
            r#"local box = target("local"):lxc("@LXC@")
step("change", function() box:exec({ "touch", "/tmp/lxc-made" }) end)
step("missing", function()
  local ok, err = pcall(function() return target("local"):lxc("runbook-no-such-ct"):exec({ "true" }, { read_only = true }) end)
  if ok or not tostring(err):find("LXC container 'runbook-no-such-ct' on local is not running or does not exist (lxc-attach: ", 1, true) then
    fail(tostring(err))
  end
end)
step("stuck", { timeout = "2s" }, function()
  box:exec({ "sh", "-c", "trap '' TERM; sleep 3181 & sleep 3181" }, { read_only = true })
end)
"#,
            &[("LXC", &LXC)],
        ),
    )
    .expect_exit(1)
    .run();
    let errors = out.step_errors();
    assert_eq!(errors.lines().count(), 1, "only the timeout: {errors}");
    assert!(errors.contains("timed out"), "{errors}");
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    assert_eq!(in_lxc("ls /tmp/lxc-made"), "/tmp/lxc-made");
    assert_eq!(
        in_lxc("ls /root/.local/state/runbook/lock"),
        "/root/.local/state/runbook/lock",
        "the lock was taken inside"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        in_lxc("ps | grep -c '[s]leep 3181'"),
        "0",
        "the tree is gone inside"
    );
}

/// Random bytes reach the program through a real lxc-attach, here and behind ssh.
#[test]
fn random_byte_argv_round_trips_through_lxc() {
    if !lxc() {
        return;
    }
    let env = Env::new();
    let mut targets = vec![("lxc", format!(r#"target("local"):lxc("{LXC}")"#))];
    let fleet = common::sshd::available().then(|| common::sshd::Fleet::start(1));
    if fleet.is_some() {
        targets.push(("ssh+lxc", format!(r#"target("node1"):lxc("{LXC}")"#)));
    }
    let targets: Vec<(&str, &str)> = targets.iter().map(|(n, t)| (*n, t.as_str())).collect();
    common::argv::round_trips(&env, false, &targets, |rb| {
        let mut run = Run::new(&env, rb)
            .yes()
            .json()
            .timeout(Duration::from_secs(90));
        if let Some(f) = &fleet {
            run = run.ssh(f);
        }
        run.run()
    });
}

// ---------------------------------------------------------------------------------------
// real Podman

const PODMAN: &str = "runbook-test-podman";
const PODMAN_STOPPED: &str = "runbook-test-podman-stopped";
const IMAGE: &str = "localhost/runbook-test-busybox";

/// Copies `bin` into `root` at the same path, with the shared libraries it needs.
fn copy_with_libs(bin: &Path, root: &Path) -> Result<(), String> {
    let mut files = vec![bin.to_path_buf()];
    if let Ok(ldd) = sh(&["ldd", bin.to_str().unwrap()]) {
        files.extend(
            ldd.split_whitespace()
                .filter(|w| w.starts_with('/'))
                .map(PathBuf::from),
        );
    }
    for f in files {
        let to = root.join(f.strip_prefix("/").unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).map_err(|e| e.to_string())?;
        std::fs::copy(&f, &to).map_err(|e| format!("{}: {e}", f.display()))?;
    }
    Ok(())
}

/// An image of busybox and flock, imported from a tar (no registry is reachable here).
fn podman_image() -> Result<(), String> {
    if sh(&["podman", "image", "exists", IMAGE]).is_ok() {
        return Ok(());
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let root = dir.path().join("rootfs");
    let busybox = sh(&["sh", "-c", "command -v busybox"])?;
    copy_with_libs(Path::new(&busybox), &root)?;
    copy_with_libs(Path::new("/usr/bin/flock"), &root)?;
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| e.to_string())?;
    let inside = root.join(busybox.trim_start_matches('/'));
    if inside != bin.join("busybox") {
        std::fs::copy(&inside, bin.join("busybox")).map_err(|e| e.to_string())?;
    }
    for applet in sh(&[bin.join("busybox").to_str().unwrap(), "--list"])?.lines() {
        let link = bin.join(applet);
        if applet != "busybox" && !link.exists() {
            std::os::unix::fs::symlink("busybox", link).map_err(|e| e.to_string())?;
        }
    }
    for d in ["tmp", "root", "etc", "proc", "sys", "dev"] {
        std::fs::create_dir_all(root.join(d)).map_err(|e| e.to_string())?;
    }
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n")
        .map_err(|e| e.to_string())?;
    let tar = dir.path().join("image.tar");
    sh(&[
        "tar",
        "-C",
        root.to_str().unwrap(),
        "-cf",
        tar.to_str().unwrap(),
        ".",
    ])?;
    sh(&["podman", "import", "-q", tar.to_str().unwrap(), IMAGE]).map(|_| ())
}

/// Whether the container runs a command now. Podman's own `State.Running` is not
/// enough: a container whose processes were killed outside podman (a CI job's cgroup
/// torn down, the machine's /run kept) still reads "running", and every exec then fails
/// with crun's "the container ... is not running".
fn podman_answers() -> Result<(), String> {
    sh(&["podman", "exec", PODMAN, "true"]).map(|_| ())
}

/// What podman knows about a container that does not answer, for the failure message.
fn podman_state() -> String {
    let state = sh(&[
        "podman",
        "container",
        "inspect",
        "-f",
        "{{.State.Status}} (exit {{.State.ExitCode}}) {{.State.Error}}",
        PODMAN,
    ])
    .unwrap_or_else(|e| e);
    let logs = sh(&["podman", "logs", "--tail", "5", PODMAN]).unwrap_or_else(|e| e);
    format!("state: {state}; logs: {logs}")
}

/// Starts the container, the way this machine lets podman do it: see the report in
/// `podman()`.
fn podman_make() -> Result<Vec<String>, String> {
    podman_image()?;
    let _ = sh(&["podman", "rm", "-f", PODMAN, PODMAN_STOPPED]);
    let mut notes = Vec::new();
    let plain = [
        "run",
        "-d",
        "--name",
        PODMAN,
        "--network",
        "none",
        IMAGE,
        "/bin/sleep",
        "2147483647",
    ];
    let started = sh(&[&["podman"][..], &plain].concat()).and_then(|_| podman_answers());
    if let Err(e) = started {
        notes.push(format!("podman run with podman's defaults failed: {e}"));
        let _ = sh(&["podman", "rm", "-f", PODMAN]);
        // This machine's processes lack CAP_SYS_RESOURCE, so crun cannot raise the
        // rlimits podman asks for by default; and crun refuses cgroup v1 with a cgroup v2
        // hierarchy that has controllers ("hybrid mode"), which it does not use once the
        // v2 mount is out of its mount namespace.
        let limited = [
            "podman",
            "run",
            "-d",
            "--name",
            PODMAN,
            "--network",
            "none",
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
            IMAGE,
            "/bin/sleep",
            "2147483647",
        ];
        let script = "if mountpoint -q /sys/fs/cgroup/unified; then umount /sys/fs/cgroup/unified || exit 1; fi; exec \"$@\"";
        sh(&[
            &[
                "unshare",
                "-m",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
                "sh",
            ][..],
            &limited,
        ]
        .concat())?;
        podman_answers().map_err(|e| {
            format!(
                "the container started but runs nothing ({e}); {}",
                podman_state()
            )
        })?;
        notes.push("it starts with --ulimit nofile=1024:1024 --ulimit nproc=1024:1024, in a mount namespace without /sys/fs/cgroup/unified".into());
    }
    sh(&[
        "podman",
        "create",
        "--name",
        PODMAN_STOPPED,
        IMAGE,
        "/bin/true",
    ])?;
    Ok(notes)
}

fn podman() -> bool {
    static READY: OnceLock<Result<Vec<String>, String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        if sh(&["podman", "--version"]).is_err() {
            return Err("podman is not installed (apt-get install podman)".into());
        }
        if podman_answers().is_ok()
            && sh(&["podman", "container", "exists", PODMAN_STOPPED]).is_ok()
        {
            return Ok(Vec::new());
        }
        podman_make()
    });
    match ready {
        Ok(notes) => {
            for n in notes {
                eprintln!("podman: {n}");
            }
            true
        }
        Err(why) => {
            unavailable(
                "RUNBOOK_REQUIRE_PODMAN",
                &format!("no Podman container ({why})"),
            );
            false
        }
    }
}

fn in_podman(script: &str) -> String {
    inside(&["podman", "exec", PODMAN], script)
}

/// The real podman turns a byte that is not UTF-8 into U+FFFD (which is why runbook
/// armours such words); random bytes still reach the program through it.
#[test]
fn random_byte_argv_round_trips_through_real_podman() {
    if !podman() {
        return;
    }
    let out = Command::new("podman")
        .args(["exec", PODMAN, "printf", "%s"])
        .arg(OsString::from_vec(b"a\xffb".to_vec()))
        .output()
        .unwrap();
    assert_eq!(out.stdout, "a\u{fffd}b".as_bytes(), "{out:?}");
    let env = Env::new();
    let target = format!(r#"target("local"):podman("{PODMAN}")"#);
    common::argv::round_trips(&env, false, &[("podman", &target)], |rb| {
        Run::new(&env, rb)
            .yes()
            .json()
            .timeout(Duration::from_secs(90))
            .run()
    });
}

/// The podman double answers as the real podman does: the same exit codes, output and
/// words for a missing or stopped container, a command's code or signal, a missing
/// program, a missing command, a byte that is not UTF-8.
#[test]
fn the_podman_double_says_what_real_podman_says() {
    if !podman() {
        return;
    }
    let doubles = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(doubles.path().join(PODMAN)).unwrap();
    std::fs::create_dir_all(doubles.path().join(PODMAN_STOPPED)).unwrap();
    std::fs::write(doubles.path().join(PODMAN_STOPPED).join("state"), "exited").unwrap();
    let cases: Vec<Vec<OsString>> = vec![
        vec![
            "exec".into(),
            "-i".into(),
            "runbook-no-such-ct".into(),
            "true".into(),
        ],
        vec![
            "exec".into(),
            "-i".into(),
            PODMAN_STOPPED.into(),
            "true".into(),
        ],
        vec![
            "exec".into(),
            "-i".into(),
            PODMAN.into(),
            "sh".into(),
            "-c".into(),
            "echo out; echo err >&2; exit 7".into(),
        ],
        vec![
            "exec".into(),
            "-i".into(),
            PODMAN.into(),
            "sh".into(),
            "-c".into(),
            "kill -9 $$".into(),
        ],
        vec![
            "exec".into(),
            "-i".into(),
            PODMAN.into(),
            "runbook-no-such-program".into(),
        ],
        vec!["exec".into(), "-i".into(), PODMAN.into()],
        vec![
            // `-u` is not compared: with the workaround above, podman's exec cannot see
            // the container's /etc/passwd (its rootfs is mounted in the other namespace).
            "exec".into(),
            "-i".into(),
            PODMAN.into(),
            "printf".into(),
            "%s|".into(),
            "--".into(),
            "-n".into(),
            OsString::from_vec(b"\xe9\x80\xff".to_vec()),
        ],
        vec!["exec".into(), "-Z".into(), PODMAN.into(), "true".into()],
    ];
    for args in cases {
        let real = Command::new("podman")
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let double = Command::new(repo().join("tests/bin/podman"))
            .args(&args)
            .env("PODMAN_DOUBLE_ROOT", doubles.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let said = |o: &std::process::Output| {
            (
                o.status.code(),
                o.stdout.clone(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        };
        assert_eq!(said(&double), said(&real), "{args:?}");
    }
}

/// In the real Podman container: env, cwd, stdin and codes; a change under the run lock
/// inside it; a timeout that kills the tree in its PID namespace; missing and stopped
/// containers as clear errors.
#[test]
fn real_podman_runs_locks_times_out_and_refuses_clearly() {
    if !podman() {
        return;
    }
    in_podman("rm -f /tmp/podman-made");
    let env = Env::new();
    let out = ct(
        &env,
        "ct",
        &subst(
            r#"local box = target("local"):podman("@PODMAN@")
step("inside", function()
  local r = box:exec({ "sh", "-c", 'cat /proc/1/comm; pwd; printf "%s|%s|" "$X" "$1"; cat; touch /tmp/podman-made', "sh", "a b" },
                     { env = { X = "x y\nz" }, cwd = "/tmp", stdin = "in" })
  if r.stdout ~= "sleep\n/tmp\nx y\nz|a b|in" then fail("got " .. r.stdout) end
  local bad = box:exec({ "sh", "-c", "exit 7" }, { check = false, read_only = true })
  if bad.code ~= 7 then fail("exit code " .. tostring(bad.code)) end
end)
step("refusals", function()
  local cases = {
    { target("local"):podman("runbook-no-such-ct"), "Podman container 'runbook-no-such-ct' on local does not exist (podman: Error: no container with name or ID" },
    { target("local"):podman("@PODMAN_STOPPED@"), "Podman container '@PODMAN_STOPPED@' on local is not running (podman: Error: can only create exec sessions on running containers" },
  }
  for i, c in ipairs(cases) do
    local ok, err = pcall(function() return c[1]:exec({ "true" }, { read_only = true }) end)
    if ok or not tostring(err):find(c[2], 1, true) then fail("case " .. i .. ": " .. tostring(err)) end
  end
end)
step("stuck", { timeout = "2s" }, function()
  box:exec({ "sh", "-c", "trap '' TERM; sleep 3191 & sleep 3191" }, { read_only = true })
end)
"#,
            &[("PODMAN", &PODMAN), ("PODMAN_STOPPED", &PODMAN_STOPPED)],
        ),
    )
    .expect_exit(1)
    .run();
    let errors = out.step_errors();
    assert_eq!(errors.lines().count(), 1, "only the timeout: {errors}");
    assert!(errors.contains("timed out"), "{errors}");
    assert_eq!(in_podman("ls /tmp/podman-made"), "/tmp/podman-made");
    assert_eq!(
        in_podman("ls /root/.local/state/runbook/lock"),
        "/root/.local/state/runbook/lock",
        "the lock was taken inside"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        in_podman("ps | grep -c '[s]leep 3191'"),
        "0",
        "the tree is gone inside"
    );
}

/// `file.put` and `file.get` in the real busybox Podman container: written whole with its
/// mode, read back, and left alone the second time.
#[test]
fn files_are_put_and_read_in_real_podman() {
    if !podman() {
        return;
    }
    in_podman("rm -rf /tmp/rb-files && mkdir /tmp/rb-files");
    let env = Env::new();
    let body = subst(
        r#"local box = target("local"):podman("@PODMAN@")
step("files", function()
  local r = file.put(box, { path = "/tmp/rb-files/a.conf", content = "a = 1\n", mode = "0600" })
  local got = file.get(box, "/tmp/rb-files/a.conf")
  log.info(tostring(r.changed) .. " " .. got.content .. got.mode)
end)
"#,
        &[("PODMAN", &PODMAN)],
    );
    let out = ct(&env, "files", &body).expect_exit(0).run();
    assert_eq!(out.logs(), vec!["true a = 1\n0600"]);
    assert_eq!(in_podman("cat /tmp/rb-files/a.conf"), "a = 1");
    assert_eq!(in_podman("stat -c %a /tmp/rb-files/a.conf"), "600");
    let out = ct(&env, "files", &body).expect_exit(0).run();
    assert_eq!(out.logs(), vec!["false a = 1\n0600"]);
    assert!(
        !started_commands(&out)
            .iter()
            .any(|c| c.starts_with("file-put.sh")),
        "no change the second time"
    );
}
