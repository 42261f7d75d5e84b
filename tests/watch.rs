//! `runbook watch` (issue 31) with real parts: a fake trainer whose log drops from 20 to
//! 5 Ktok/s (tests/fixtures/slowing_trainer.py), a real Prometheus Alertmanager (Debian's
//! `prometheus-alertmanager`, started here on loopback with a config routing to the
//! watcher's listener, an alert POSTed to its API that it must deliver), `gpu.health`
//! through the GPU test doubles (tests/bin/nvidia-smi, tests/bin/gpu-node), a real sshd
//! that goes away and comes back, real `ssh-keygen` keys for the approvals, and an HTTP
//! receiver in this test for the notifications.
//!
//! What is checked: exactly one plan per incident (however long it lasts and however
//! often it is seen or alerted), none during the cooldown, no change made without the
//! approvals (and with them, only where `auto_apply` allows), a restarted watcher keeps
//! what it proposed, a target going away is said once.
//!
//! Alertmanager is started by the test (`prometheus-alertmanager --config.file …
//! --storage.path … --web.listen-address 127.0.0.1:PORT --cluster.listen-address=`).
//! Where it is not installed that test skips with a message, unless
//! `RUNBOOK_REQUIRE_ALERTMANAGER=1` (scripts/test sets it and installs the package).
use crate::common::running::Running;
use crate::common::sshd::{free_port, Fleet};
use crate::common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ALERTMANAGER: &str = "/usr/bin/prometheus-alertmanager";

// ---------------------------------------------------------------- notifications

/// An HTTP receiver on 127.0.0.1 in a thread: each POST's body kept (as JSON), `200 OK`.
struct Receiver {
    port: u16,
    got: Arc<Mutex<Vec<serde_json::Value>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let got: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
        let stop: Arc<AtomicBool> = Arc::default();
        let (g, s) = (got.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                if let Some(body) = read_post(conn) {
                    g.lock().unwrap().push(body);
                }
            }
        });
        Receiver {
            port,
            got,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    fn got(&self) -> Vec<serde_json::Value> {
        self.got.lock().unwrap().clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One POST's JSON body, answered 200; `None` for anything else.
fn read_post(conn: TcpStream) -> Option<serde_json::Value> {
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut reader = BufReader::new(conn.try_clone().ok()?);
    let mut head = String::new();
    reader.read_line(&mut head).ok()?;
    if !head.starts_with("POST /hook HTTP/1.1") {
        return None;
    }
    let mut length = 0;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (name, value) = h.split_once(':')?;
        if name.eq_ignore_ascii_case("content-length") {
            length = value.trim().parse().ok()?;
        }
        if name.eq_ignore_ascii_case("content-type") {
            assert_eq!(value.trim(), "application/json");
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let mut conn = conn;
    conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .ok()?;
    serde_json::from_slice(&body).ok()
}

/// POSTs `body` to `127.0.0.1:port` `path` as JSON: the status code.
fn post(port: u16, path: &str, body: &str) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP answer: {answer:?}"))
}

fn get_status(port: u16, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.split(' ').nth(1).and_then(|c| c.parse().ok())
}

// ---------------------------------------------------------------- the scene

/// The runbook every trigger proposes: it reads, then makes one change (a marker file):
/// the marker there means a change was made.
fn restart_runbook(env: &Env) -> PathBuf {
    let marker = marker(env);
    env.write(
        "restart.lua",
        &subst(
            r#"runbook {
  name = "restart",
  description = "restart the training job",
  params = { host = { default = "local" } },
}
local box = target(params.host)
step("look", function()
  box:exec({ "true" }, { read_only = true })
end)
step("restart", function()
  box:exec({ "touch", "@marker@" })
end)
"#,
            &[("marker", &marker.display())],
        ),
    )
}

fn marker(env: &Env) -> PathBuf {
    env.tmp.path().join("restarted")
}

fn plans(env: &Env) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(env.tmp.path().join("plans"))
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The watcher's saved state.
fn state(env: &Env) -> serde_json::Value {
    let text = std::fs::read_to_string(env.state().join("watch/watch.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn statuses(env: &Env) -> Vec<String> {
    state(env)["proposals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["status"].as_str().unwrap().to_string())
        .collect()
}

fn watch_file(env: &Env, body: &str) -> PathBuf {
    env.write("watch.toml", body)
}

fn watcher<'e>(env: &'e Env, file: &Path) -> Run<'e> {
    Run::cmd(env, ["watch"]).arg(file)
}

/// The fake trainer, killed when dropped.
struct Trainer {
    child: Child,
    log: PathBuf,
    switch: PathBuf,
}

impl Trainer {
    fn start(env: &Env) -> Trainer {
        let log = env.tmp.path().join("train.log");
        let switch = env.tmp.path().join("slow");
        let child = Command::new("python3")
            .arg(repo().join("tests/fixtures/slowing_trainer.py"))
            .arg(&log)
            .arg(&switch)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Trainer { child, log, switch }
    }

    fn slow_down(&self) {
        std::fs::write(&self.switch, "").unwrap();
    }
}

impl Drop for Trainer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `found` holds, failing with the watcher's output after `limit`.
fn until(w: &mut Running, what: &str, limit: Duration, found: impl FnMut() -> bool) {
    let mut found = found;
    w.wait_for(what, limit, || found().then_some(()));
}

/// Holds for `d` while checking that `ok` stays true.
fn stays(w: &Running, what: &str, d: Duration, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        assert!(ok(), "{what}\n{}", w.output());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGTERM ends the watcher cleanly: exit 0, saying so.
fn stop(mut w: Running) -> String {
    w.signal(libc::SIGTERM);
    let code = w.code(Duration::from_secs(15));
    assert_eq!(code, 0, "{}", w.output());
    let said = w.stderr();
    assert!(said.contains("stopped (SIGTERM); state saved in"), "{said}");
    said
}

// ---------------------------------------------------------------- the tests

#[test]
fn a_trainer_that_slows_down_gets_one_plan_per_incident_and_nothing_without_approval() {
    let env = Env::new();
    let rb = restart_runbook(&env);
    let hook = Receiver::start();
    let trainer = Trainer::start(&env);
    let file = watch_file(
        &env,
        &subst(
            r#"[watch]
interval = "300ms"

[[notify]]
url = "@url@"

[[trigger]]
name = "slow-training"
kind = "log"
target = "local"
file = "@log@"
pattern = '([0-9.]+) Ktok/s'
below = 16
for = "2s"
runbook = "@rb@"
cooldown = "4s"
"#,
            &[
                ("url", &hook.url()),
                ("log", &trainer.log.display()),
                ("rb", &rb.display()),
            ],
        ),
    );
    let mut w = watcher(&env, &file).spawn();
    until(
        &mut w,
        "the watcher following the log",
        Duration::from_secs(30),
        || {
            std::fs::read_to_string(env.state().join("watch/watch.json"))
                .is_ok_and(|s| s.contains("\"offset\""))
        },
    );
    // At 20 Ktok/s nothing is proposed.
    stays(&w, "a plan at full speed", Duration::from_secs(3), || {
        plans(&env).is_empty()
    });
    trainer.slow_down();
    until(&mut w, "a plan", Duration::from_secs(30), || {
        plans(&env).len() == 1
    });
    let plan = plans(&env).remove(0);
    let said = w.stderr();
    assert!(
        said.contains("trigger slow-training on local: /([0-9.]+) Ktok/s/ in ")
            && said.contains("has been below 16 for ")
            && said.contains("(last 5); planning "),
        "{said}"
    );
    // The incident goes on: still one plan, and one notification.
    stays(
        &w,
        "a second plan for the same incident",
        Duration::from_secs(3),
        || plans(&env).len() == 1,
    );
    until(&mut w, "the notification", Duration::from_secs(10), || {
        hook.got().len() == 1
    });
    let note = &hook.got()[0];
    assert_eq!(note["event"], "proposed");
    assert_eq!(note["trigger"], "slow-training");
    assert_eq!(note["target"], "local");
    assert_eq!(note["plan"], plan.display().to_string());
    let markdown = std::fs::read_to_string(plan.with_extension("md")).unwrap();
    assert_eq!(note["markdown"], markdown);
    assert!(markdown.starts_with("# Plan: restart"), "{markdown}");
    assert!(
        markdown.contains(&marker(&env).display().to_string()),
        "{markdown}"
    );
    // The Markdown is `runbook plan PLAN.json --format md`'s, of the very file.
    let shown = Run::cmd(&env, ["plan"])
        .arg(&plan)
        .args(["--format", "md"])
        .expect_exit(0)
        .run();
    assert_eq!(shown.stdout_text(), markdown);
    let summary = note["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("slow-training on local: /([0-9.]+) Ktok/s/ in "),
        "{summary}"
    );
    assert!(
        summary.ends_with("proposed: restart (1 change(s)), waiting for a decision"),
        "{summary}"
    );
    assert!(note["approve"]
        .as_str()
        .unwrap()
        .ends_with(&format!("runbook approve {}", plan.display())));
    // Nothing was changed: no marker, no run.
    assert!(!marker(&env).exists());
    assert_eq!(env.record_count(), 0, "a plan is no run");
    assert_eq!(statuses(&env), ["pending"]);

    // A restart keeps what it proposed: no second plan for the incident going on.
    let said = stop(w);
    assert_eq!(
        said.matches("proposed slow-training-local-").count(),
        1,
        "{said}"
    );
    let mut w = watcher(&env, &file).spawn();
    until_said(
        &mut w,
        "waiting for a decision, from before: slow-training-local-",
        Duration::from_secs(20),
    );
    stays(
        &w,
        "a plan after the restart",
        Duration::from_secs(3),
        || plans(&env).len() == 1,
    );
    assert_eq!(hook.got().len(), 1, "told once, across the restart");

    // Rejected: closed, then none during the cooldown, then one again.
    let id = plan.file_stem().unwrap().to_str().unwrap().to_string();
    watcher(&env, &file)
        .args(["--reject", &id, "--reason", "not during the demo"])
        .expect_exit(0)
        .stderr_has(format!("rejected {id}"))
        .run();
    until(
        &mut w,
        "the rejection taken",
        Duration::from_secs(10),
        || statuses(&env) == ["rejected"],
    );
    let closed = Instant::now();
    stays(
        &w,
        "a plan during the cooldown",
        Duration::from_millis(2500),
        || plans(&env).len() == 1,
    );
    until_said(
        &mut w,
        "no plan while it cools down",
        Duration::from_secs(5),
    );
    until(
        &mut w,
        "a plan after the cooldown",
        Duration::from_secs(20),
        || plans(&env).len() == 2,
    );
    assert!(
        closed.elapsed() >= Duration::from_secs(3),
        "{:?}",
        closed.elapsed()
    );
    // The plan file is written before the state that records it.
    until(
        &mut w,
        "the new proposal in the state",
        Duration::from_secs(10),
        || statuses(&env) == ["rejected", "pending"],
    );
    assert!(
        state(&env)["proposals"][0]["outcome"]
            .as_str()
            .unwrap()
            .ends_with(": not during the demo"),
        "{}",
        state(&env)
    );
    until(
        &mut w,
        "the second notification",
        Duration::from_secs(10),
        || hook.got().len() == 2,
    );
    stop(w);
    assert!(!marker(&env).exists(), "nothing applied without approval");
    assert_eq!(env.record_count(), 0);
}

/// Waits until the watcher said `text`, failing with its output after `limit` (or when
/// it exits first).
fn until_said(w: &mut Running, text: &str, limit: Duration) {
    let end = Instant::now() + limit;
    loop {
        if w.stderr().contains(text) {
            return;
        }
        if let Some(status) = w.try_status() {
            panic!(
                "the watcher exited ({status:?}) before it said {text:?}\n{}",
                w.output()
            );
        }
        assert!(
            Instant::now() < end,
            "{text:?} not said within {limit:?}\n{}",
            w.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A log trigger looked at with `--once` on a log that starts with `first`: the log and
/// the watch file.
fn log_scene(env: &Env, first: &str, below: &str) -> (PathBuf, PathBuf) {
    let rb = restart_runbook(env);
    let log = env.tmp.path().join("train.log");
    std::fs::write(&log, format!("{first}\n")).unwrap();
    let file = watch_file(
        env,
        &subst(
            r#"[[trigger]]
name = "slow"
kind = "log"
target = "local"
file = "@log@"
pattern = '([0-9.]+) Ktok/s'
below = @below@
for = "1s"
runbook = "@rb@"
"#,
            &[
                ("log", &log.display()),
                ("rb", &rb.display()),
                ("below", &below),
            ],
        ),
    );
    (log, file)
}

fn append(log: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(log).unwrap();
    writeln!(f, "{line}").unwrap();
}

/// Where `runbook` finds the GPU doubles first (nvidia-smi, dmesg, journalctl, dcgmi).
fn doubles_path() -> String {
    format!(
        "{}:{}:{}",
        repo().join("tests/bin/gpu-node").display(),
        repo().join("tests/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn a_rotated_log_is_read_from_its_start_and_once_looks_once() {
    let env = Env::new();
    let (log, file) = log_scene(&env, "step 1: 20.0 Ktok/s", "16");
    let once = || watcher(&env, &file).arg("--once").expect_exit(0).run();
    // The first look starts where the log ends.
    once();
    assert_eq!(state(&env)["follows"]["slow"]["offset"], 20);
    // Rotated: moved aside, a new log whose lines are slow.
    std::fs::rename(&log, env.tmp.path().join("train.log.1")).unwrap();
    std::fs::write(
        &log,
        "step 2: 5.0 Ktok/s\nstep 3: 5.0 Ktok/s\nstep 4: 5.0 Ktok/s\n",
    )
    .unwrap();
    let out = once();
    assert!(
        out.stderr_text()
            .contains("was rotated or truncated: read from its start"),
        "{}",
        out.stderr_text()
    );
    assert_eq!(state(&env)["follows"]["slow"]["last"], 5.0);
    assert!(plans(&env).is_empty(), "below for less than `for`");
    std::thread::sleep(Duration::from_millis(1100));
    std::fs::write(
        &log,
        "step 2: 5.0 Ktok/s\nstep 3: 5.0 Ktok/s\nstep 4: 5.0 Ktok/s\nstep 5: 4.0 Ktok/s\n",
    )
    .unwrap();
    let out = once();
    assert_eq!(plans(&env).len(), 1, "{}", out.stderr_text());
    // A value at or above the threshold ends the incident.
    append(&log, "step 6: 19.0 Ktok/s");
    once();
    assert_eq!(
        state(&env)["follows"]["slow"]["below_since"],
        serde_json::Value::Null
    );
    assert_eq!(plans(&env).len(), 1);
}

#[test]
fn below_a_fraction_of_the_known_good_throughput() {
    let env = Env::new();
    let (log, file) = log_scene(&env, "20.0 Ktok/s", "\"0.8 * known_good\"");
    let once = || watcher(&env, &file).arg("--once").expect_exit(0).run();
    once();
    append(&log, "15.0 Ktok/s");
    let out = once();
    assert!(
        out.stderr_text().contains("values are read but not judged: there is no known-good fingerprint 'clean-reset' of local's machine"),
        "{}",
        out.stderr_text()
    );
    // The known-good, as clean-reset leaves it: the compile cache captured with the
    // throughput its check measured, and the fingerprint that names it.
    let cache = env.tmp.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("k"), "kernel").unwrap();
    let good = env.write(
        "good.lua",
        &subst(
            r#"runbook { name = "good" }
step("save the known-good", function()
  local a = artifact.capture(target("local"), { name = "compile-cache", paths = "@cache@", throughput = 20 })
  local fp = fingerprint.take(target("local"), {})
  fp.artifact = a.id
  fingerprint.save("clean-reset", fp)
end)
"#,
            &[("cache", &cache.display())],
        ),
    );
    Run::new(&env, &good).yes().expect_exit(0).run();
    append(&log, "17.0 Ktok/s");
    once();
    assert_eq!(
        state(&env)["follows"]["slow"]["below_since"],
        serde_json::Value::Null,
        "17 is not below 16"
    );
    append(&log, "15.0 Ktok/s");
    once();
    assert!(plans(&env).is_empty());
    std::thread::sleep(Duration::from_millis(1100));
    append(&log, "15.5 Ktok/s");
    let out = once();
    assert_eq!(plans(&env).len(), 1, "{}", out.stderr_text());
    let said = out.stderr_text();
    assert!(
        said.contains("has been below 16 (0.8 × the known-good 20, artifact ")
            && said.contains(" of known-good 'clean-reset')"),
        "{said}"
    );
}

/// `gpu.health` through the test doubles, on an inventory host that is this machine.
fn gpu_once<'e>(env: &'e Env, file: &Path, smi: &str) -> Run<'e> {
    watcher(env, file)
        .arg("--once")
        .env("PATH", doubles_path())
        .env("NVIDIA_SMI_FIXTURE", smi)
        .env("KMSG_FIXTURE", "clean")
}

fn gpu_scene(env: &Env, extra: &str) -> PathBuf {
    let rb = restart_runbook(env);
    gpu_scene_of(env, &rb, extra)
}

/// A `gpu_health` trigger on `node1` (this machine) proposing `rb`, `extra` lines added.
fn gpu_scene_of(env: &Env, rb: &Path, extra: &str) -> PathBuf {
    env.write("inventory.toml", "[hosts.node1]\naddress = \"local\"\n");
    watch_file(
        env,
        &subst(
            r#"[[trigger]]
name = "gpu"
kind = "gpu_health"
target = "node1"
runbook = "@rb@"
params = { host = "node1" }
@extra@
"#,
            &[("rb", &rb.display()), ("extra", &extra)],
        ),
    )
}

#[test]
fn gpu_health_turning_critical_proposes_one_plan() {
    let env = Env::new();
    let file = gpu_scene(&env, "");
    gpu_once(&env, &file, "d570-h200x4").expect_exit(0).run();
    assert!(plans(&env).is_empty(), "a sound machine");
    let out = gpu_once(&env, &file, "d550-h100x2-remap-pending")
        .expect_exit(0)
        .run();
    let said = out.stderr_text();
    assert!(
        said.contains("trigger gpu on node1: gpu.health on node1 is critical: GPU 1: a memory row remap is pending"),
        "{said}"
    );
    assert_eq!(plans(&env).len(), 1);
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plans(&env)[0]).unwrap()).unwrap();
    assert_eq!(plan["params"]["host"]["value"], "node1");
    assert!(plan["reached_with"]["inventory"]
        .as_str()
        .unwrap()
        .ends_with("inventory.toml"));
    // Still critical: still the one plan.
    gpu_once(&env, &file, "d550-h100x2-remap-pending")
        .expect_exit(0)
        .run();
    assert_eq!(plans(&env).len(), 1);
    assert!(!marker(&env).exists());
}

/// Three people's keys: the watcher's own (it signs as author), bob and carol.
fn keys(env: &Env) -> PathBuf {
    let dir = env.tmp.path().join("keys");
    std::fs::create_dir_all(&dir).unwrap();
    let mut signers = String::new();
    for (key, who) in [
        ("watcher", "watcher@example.invalid"),
        ("bob", "bob@example.invalid"),
    ] {
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", key, "-f"])
            .arg(dir.join(key))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let public = std::fs::read_to_string(dir.join(format!("{key}.pub"))).unwrap();
        let mut w = public.split_whitespace();
        signers.push_str(&format!(
            "{who} {} {}\n",
            w.next().unwrap(),
            w.next().unwrap()
        ));
    }
    std::fs::write(dir.join("allowed_signers"), signers).unwrap();
    env.write(
        "runbook.toml",
        &format!(
            "[policy]\nallowed_signers = \"{}\"\napprovers = 1\n",
            dir.join("allowed_signers").display()
        ),
    );
    dir
}

#[test]
fn the_watcher_applies_only_what_the_policy_approved_and_auto_apply_allows() {
    let env = Env::new();
    let keys = keys(&env);
    let file = gpu_scene(&env, "auto_apply = true");
    let with_key = |r: Run<'_>| -> Output {
        r.arg("--key")
            .arg(keys.join("watcher"))
            .expect_exit(0)
            .run()
    };
    let critical = "d550-h100x2-remap-pending";
    let out = with_key(gpu_once(&env, &file, critical));
    let plan = plans(&env).remove(0);
    assert!(
        out.stderr_text()
            .contains("not applied yet: it lacks 0 of 1 approval(s)"),
        "{}",
        out.stderr_text()
    );
    // Signed by the watcher as its author.
    let approvals = std::fs::read_to_string(format!("{}.approvals", plan.display())).unwrap();
    assert!(approvals.contains("\"role\":\"author\""), "{approvals}");
    // Looked at again: still not applied, nothing changed.
    with_key(gpu_once(&env, &file, critical));
    assert!(!marker(&env).exists());
    assert_eq!(env.record_count(), 0);
    assert_eq!(statuses(&env), ["pending"]);
    // Bob approves (his approve runs the plan's reads again: the doubles on PATH).
    let path = doubles_path();
    Run::cmd(&env, ["approve"])
        .arg(&plan)
        .args(["--yes", "--key"])
        .arg(keys.join("bob"))
        .env("PATH", &path)
        .expect_exit(0)
        .run();
    let out = with_key(gpu_once(&env, &file, critical));
    let said = out.stderr_text();
    assert!(
        said.contains("it carries the approvals the policy asks, and auto_apply allows it"),
        "{said}"
    );
    assert!(said.contains("applied: applied by the watcher"), "{said}");
    assert!(marker(&env).exists(), "applied");
    assert_eq!(statuses(&env), ["applied"]);
    // The run record names the plan, its author and its approver.
    let runs = Run::cmd(&env, ["history"]).expect_exit(0).run();
    assert_eq!(env.record_count(), 1, "{}", runs.stdout_text());
    let first = &env.last_record_stamped()[0];
    let text = serde_json::to_string(first).unwrap();
    assert!(
        text.contains("\"author\":\"watcher@example.invalid\""),
        "{text}"
    );
    assert!(text.contains("bob@example.invalid"), "{text}");
    // Without auto_apply an approved plan waits for a person's apply.
    std::fs::remove_file(marker(&env)).unwrap();
    let file = gpu_scene(&env, "cooldown = \"1s\"\nauto_apply = false");
    std::thread::sleep(Duration::from_millis(1100));
    with_key(gpu_once(&env, &file, critical));
    let second = plans(&env).pop().unwrap();
    assert_ne!(second, plan);
    Run::cmd(&env, ["approve"])
        .arg(&second)
        .args(["--yes", "--key"])
        .arg(keys.join("bob"))
        .env("PATH", &path)
        .expect_exit(0)
        .run();
    with_key(gpu_once(&env, &file, critical));
    assert!(
        !marker(&env).exists(),
        "auto_apply = false: never applied by the watcher"
    );
    assert_eq!(statuses(&env), ["applied", "pending"]);
    // A person applies it: the watcher sees the run that names it.
    Run::cmd(&env, ["apply"])
        .arg(&second)
        .arg("--yes")
        .env("PATH", &path)
        .expect_exit(0)
        .run();
    assert!(marker(&env).exists());
    with_key(gpu_once(&env, &file, "d570-h200x4"));
    assert_eq!(statuses(&env), ["applied", "applied"]);
    assert!(
        state(&env)["proposals"][1]["outcome"]
            .as_str()
            .unwrap()
            .starts_with("applied by "),
        "{}",
        state(&env)
    );
}

#[test]
fn sigterm_while_the_watcher_applies_stops_the_apply_and_the_watcher_cleanly() {
    let env = Env::new();
    let keys = keys(&env);
    let rb = env.write(
        "slow.lua",
        &subst(
            r#"runbook { name = "slow", params = { host = { default = "local" } } }
local box = target(params.host)
step("drain", function()
  box:exec({ "sleep", "30" })
end)
step("reset", function()
  box:exec({ "touch", "@marker@" })
end)
"#,
            &[("marker", &marker(&env).display())],
        ),
    );
    let file = gpu_scene_of(&env, &rb, "auto_apply = true\ninterval = \"300ms\"");
    let critical = "d550-h100x2-remap-pending";
    // Proposed (signed by the watcher), then approved by bob.
    gpu_once(&env, &file, critical)
        .arg("--key")
        .arg(keys.join("watcher"))
        .expect_exit(0)
        .run();
    let plan = plans(&env).remove(0);
    Run::cmd(&env, ["approve"])
        .arg(&plan)
        .args(["--yes", "--key"])
        .arg(keys.join("bob"))
        .expect_exit(0)
        .run();
    let mut w = gpu_once(&env, &file, critical)
        .args(["--key"])
        .arg(keys.join("watcher"))
        .spawn();
    // `--once` waits for its apply: the apply's run has started its slow step.
    until(
        &mut w,
        "the watcher's apply running",
        Duration::from_secs(60),
        || {
            env.record_count() == 1
                && env
                    .last_record()
                    .iter()
                    .any(|e| matches!(e, Event::StepStarted { name, .. } if name == "drain"))
        },
    );
    w.signal(libc::SIGTERM);
    let code = w.code(Duration::from_secs(30));
    assert_eq!(code, 0, "{}", w.output());
    let said = w.stderr();
    assert!(
        said.contains("stopping: waiting for the apply of"),
        "{said}"
    );
    assert!(
        said.contains("failed: the watcher's runbook apply ended with exit 143"),
        "{said}"
    );
    assert_eq!(statuses(&env), ["failed"]);
    assert!(
        !marker(&env).exists(),
        "the apply stopped before its next change"
    );
    let record = env.last_record();
    assert!(
        record.iter().any(|e| matches!(
            e,
            Event::RunFinished {
                outcome: RunOutcome::Interrupted,
                ..
            }
        )),
        "{record:?}"
    );
}

#[test]
fn auto_apply_without_a_policy_and_other_mistakes_are_refused_at_their_line() {
    let env = Env::new();
    let rb = restart_runbook(&env);
    let rb = rb.display().to_string();
    let cases: Vec<(String, &str, &str)> = vec![
        (
            format!("[[trigger]]\nname = \"g\"\nkind = \"gpu_health\"\ntarget = \"local\"\nrunbook = \"{rb}\"\nauto_apply = true\n"),
            "watch.toml:1:",
            "auto_apply needs a [policy] in runbook.toml",
        ),
        (
            format!("[[trigger]]\nname = \"g\"\nkind = \"gpu_health\"\ntarget = \"local\"\nrunbook = \"{rb}\"\nfile = \"/x\"\n"),
            "watch.toml:6:",
            "a gpu_health trigger takes no `file`",
        ),
        (
            format!("[[trigger]]\nname = \"l\"\nkind = \"log\"\ntarget = \"local\"\nfile = \"/x\"\npattern = '(\\d+) (\\d+)'\nbelow = 1\nfor = \"1m\"\nrunbook = \"{rb}\"\n"),
            "watch.toml:6:",
            "has 2 capture groups",
        ),
        (
            format!("[[trigger]]\nname = \"l\"\nkind = \"log\"\ntarget = \"local\"\nfile = \"/x\"\npattern = '(\\d+)'\nbelow = \"0.8 * known_bad\"\nfor = \"1m\"\nrunbook = \"{rb}\"\n"),
            "watch.toml:7:",
            "below = \"0.8 * known_bad\"",
        ),
        (
            format!("[[trigger]]\nname = \"l\"\nkind = \"log\"\ntarget = \"local\"\nfile = \"/x\"\npattern = '(\\d+)'\nbelow = 1\nrunbook = \"{rb}\"\n"),
            "watch.toml:1:",
            "needs `for`",
        ),
        (
            format!("[watch]\nlisten = \"0.0.0.0:9095\"\n\n[[trigger]]\nname = \"a\"\nkind = \"alertmanager\"\ntarget_label = \"node\"\nrunbook = \"{rb}\"\n"),
            "watch.toml:2:",
            "only a loopback address",
        ),
        (
            // Any name ssh could resolve is a target (a plain host name); one it could
            // not is refused at its line.
            format!("[[trigger]]\nname = \"g\"\nkind = \"gpu_health\"\ntarget = \"no such host\"\nrunbook = \"{rb}\"\n"),
            "watch.toml:1:",
            "unknown target 'no such host'",
        ),
        (
            "[[trigger]]\nname = \"g\"\nkind = \"gpu_health\"\ntarget = \"local\"\nrunbook = \"no-such-runbook\"\n".to_string(),
            "watch.toml:1:",
            "no-such-runbook",
        ),
        (
            format!("[[trigger]]\nname = \"g\"\nkind = \"gpu_healht\"\ntarget = \"local\"\nrunbook = \"{rb}\"\n"),
            "watch.toml:3:",
            "gpu_healht",
        ),
        (
            format!("[[notify]]\nurl = \"https://hooks.example/x\"\n\n[[trigger]]\nname = \"g\"\nkind = \"gpu_health\"\ntarget = \"local\"\nrunbook = \"{rb}\"\n"),
            "watch.toml:2:",
            "https is not supported",
        ),
    ];
    for (text, at, what) in cases {
        let file = watch_file(&env, &text);
        let out = watcher(&env, &file).arg("--once").expect_exit(2).run();
        let said = out.stderr_text();
        assert!(said.contains(at) && said.contains(what), "{text}\n{said}");
    }
    assert!(plans(&env).is_empty());
    // The example in examples/ reads.
    watcher(&env, &repo().join("examples/watch.toml"))
        .arg("--list")
        .expect_exit(0)
        .stderr_has("no proposals yet")
        .run();
}

#[test]
fn a_target_that_goes_away_is_said_once_and_looked_at_again() {
    require_sshd!();
    let env = Env::new();
    let mut fleet = Fleet::start(1);
    let rb = restart_runbook(&env);
    let log = env.tmp.path().join("remote.log");
    std::fs::write(&log, "20.0 Ktok/s\n").unwrap();
    let file = watch_file(
        &env,
        &subst(
            r#"[watch]
interval = "300ms"

[[trigger]]
name = "slow"
kind = "log"
target = "node1"
file = "@log@"
pattern = '([0-9.]+) Ktok/s'
below = 16
for = "1h"
runbook = "@rb@"
"#,
            &[("log", &log.display()), ("rb", &rb.display())],
        ),
    );
    let mut w = watcher(&env, &file).args(fleet.args()).spawn();
    until(
        &mut w,
        "the log followed over ssh",
        Duration::from_secs(30),
        || {
            std::fs::read_to_string(env.state().join("watch/watch.json"))
                .is_ok_and(|s| s.contains("\"offset\": 12"))
        },
    );
    fleet.node("node1").kill();
    until_said(
        &mut w,
        "trigger slow: cannot look at node1: ",
        Duration::from_secs(30),
    );
    // Looked at again and again, said once.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        w.stderr().matches("cannot look at node1").count(),
        1,
        "{}",
        w.output()
    );
    fleet.node("node1").start();
    until_said(
        &mut w,
        "trigger slow: node1 answers again",
        Duration::from_secs(30),
    );
    // And followed on from where it was.
    std::fs::write(&log, "20.0 Ktok/s\n19.0 Ktok/s\n").unwrap();
    until(&mut w, "the new line read", Duration::from_secs(30), || {
        state(&env)["follows"]["slow"]["last"] == 19.0
    });
    stop(w);
}

// ---------------------------------------------------------------- Alertmanager

struct Alertmanager {
    dir: PathBuf,
    port: u16,
    child: Child,
}

impl Alertmanager {
    /// Started and ready, or `None` (the test skips) when it is not installed and not
    /// required.
    fn start(env: &Env, webhook: &str) -> Option<Alertmanager> {
        let required = std::env::var("RUNBOOK_REQUIRE_ALERTMANAGER").as_deref() == Ok("1");
        if !Path::new(ALERTMANAGER).exists() {
            assert!(
                !required,
                "Alertmanager is required here (RUNBOOK_REQUIRE_ALERTMANAGER=1) but {ALERTMANAGER} is not installed (scripts/test installs prometheus-alertmanager)"
            );
            eprintln!(
                "skipped: prometheus-alertmanager is not installed (scripts/test installs it)"
            );
            return None;
        }
        let dir = env.tmp.path().join("alertmanager");
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let config = subst(
            r#"route:
  receiver: runbook
  group_by: ['alertname', 'node']
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: runbook
    webhook_configs:
      - url: '@url@'
        send_resolved: false
"#,
            &[("url", &webhook)],
        );
        std::fs::write(dir.join("alertmanager.yml"), config).unwrap();
        let port = free_port();
        let out = std::fs::File::create(dir.join("alertmanager.out")).unwrap();
        let child = Command::new(ALERTMANAGER)
            .arg(format!(
                "--config.file={}",
                dir.join("alertmanager.yml").display()
            ))
            .arg(format!("--storage.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start alertmanager");
        let mut am = Alertmanager { dir, port, child };
        let until = Instant::now() + Duration::from_secs(30);
        while get_status(port, "/-/ready") != Some(200) {
            if let Some(status) = am.child.try_wait().unwrap() {
                panic!(
                    "alertmanager exited ({status}) before it was ready:\n{}",
                    am.said()
                );
            }
            assert!(
                Instant::now() < until,
                "alertmanager not ready within 30s:\n{}",
                am.said()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(am)
    }

    fn said(&self) -> String {
        std::fs::read_to_string(self.dir.join("alertmanager.out")).unwrap_or_default()
    }

    /// Fires an alert through Alertmanager's own API, as Prometheus does.
    fn fire(&self, labels: &str) {
        let body = format!(
            r#"[{{"labels":{labels},"annotations":{{"summary":"training is slow"}},"generatorURL":"http://prometheus.example/graph"}}]"#
        );
        let code = post(self.port, "/api/v2/alerts", &body);
        assert_eq!(code, 200, "{}", self.said());
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_alert_alertmanager_delivers_proposes_one_plan_for_its_target() {
    let env = Env::new();
    let rb = restart_runbook(&env);
    env.write(
        "inventory.toml",
        "[hosts.gpu1]\naddress = \"local\"\n\n[hosts.gpu2]\naddress = \"local\"\n",
    );
    let hook = Receiver::start();
    let port = free_port();
    let Some(am) = Alertmanager::start(&env, &format!("http://127.0.0.1:{port}/alerts")) else {
        return;
    };
    let file = watch_file(
        &env,
        &subst(
            r#"[watch]
listen = "127.0.0.1:@port@"

[[notify]]
url = "@url@"
format = "slack"

[[trigger]]
name = "am"
kind = "alertmanager"
match = { alertname = "TrainingSlow" }
target_label = "node"
label_params = { host = "node" }
runbook = "@rb@"
"#,
            &[("port", &port), ("url", &hook.url()), ("rb", &rb.display())],
        ),
    );
    let mut w = watcher(&env, &file).spawn();
    until_said(
        &mut w,
        &format!("listening for Alertmanager's webhook at http://127.0.0.1:{port}/"),
        Duration::from_secs(20),
    );
    am.fire(r#"{"alertname":"TrainingSlow","node":"gpu1","severity":"page"}"#);
    until(
        &mut w,
        "a plan from the alert",
        Duration::from_secs(60),
        || plans(&env).len() == 1,
    );
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plans(&env)[0]).unwrap()).unwrap();
    assert_eq!(plan["params"]["host"]["value"], "gpu1");
    assert!(
        w.stderr().contains(
            "trigger am on gpu1: alert firing: alertname=TrainingSlow, node=gpu1, severity=page"
        ),
        "{}",
        w.output()
    );
    until(
        &mut w,
        "the Slack-style notification",
        Duration::from_secs(10),
        || hook.got().len() == 1,
    );
    let text = hook.got()[0]["text"].as_str().unwrap().to_string();
    assert!(text.starts_with("am on gpu1: alert firing"), "{text}");
    assert!(text.contains("approve: cd "), "{text}");
    // The same incident alerted again (another alert of its group: Alertmanager sends
    // the group anew): still one plan. An alert for a host the inventory does not have
    // is not taken.
    am.fire(r#"{"alertname":"TrainingSlow","node":"gpu1","severity":"critical"}"#);
    am.fire(r#"{"alertname":"TrainingSlow","node":"gpu9"}"#);
    until_said(
        &mut w,
        "names target \"gpu9\", which is not a host of the inventory",
        Duration::from_secs(60),
    );
    stays(&w, "a second plan for gpu1", Duration::from_secs(3), || {
        plans(&env).len() == 1
    });
    // Another target is another incident.
    am.fire(r#"{"alertname":"TrainingSlow","node":"gpu2"}"#);
    until(&mut w, "a plan for gpu2", Duration::from_secs(60), || {
        plans(&env).len() == 2
    });
    // What is not Alertmanager's payload is refused, and said.
    assert_eq!(post(port, "/alerts", "{\"nope\":1}"), 400);
    assert_eq!(plans(&env).len(), 2);
    stop(w);
    assert!(!marker(&env).exists());
    drop(am);
}

#[test]
fn alerts_posted_on_a_unix_socket_listener() {
    let env = Env::new();
    let rb = restart_runbook(&env);
    env.write("inventory.toml", "[hosts.gpu1]\naddress = \"local\"\n");
    let socket = env.tmp.path().join("watch.sock");
    let file = watch_file(
        &env,
        &subst(
            r#"[watch]
listen = "unix:@socket@"

[[trigger]]
name = "am"
kind = "alertmanager"
match = { alertname = "TrainingSlow" }
target_label = "node"
targets = ["gpu1"]
label_params = { host = "node" }
runbook = "@rb@"
"#,
            &[("socket", &socket.display()), ("rb", &rb.display())],
        ),
    );
    let mut w = watcher(&env, &file).spawn();
    until_said(
        &mut w,
        &format!(
            "listening for Alertmanager's webhook at unix:{}",
            socket.display()
        ),
        Duration::from_secs(20),
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "only the watcher's user may connect");
    let ask = |request: String| -> String {
        let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer
    };
    let body = r#"{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"TrainingSlow","node":"gpu1"}}]}"#;
    let answer = ask(format!(
        "POST /alerts HTTP/1.1\r\nHost: watch\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    until(
        &mut w,
        "a plan from the alert",
        Duration::from_secs(60),
        || plans(&env).len() == 1,
    );
    let answer = ask("GET / HTTP/1.1\r\nHost: watch\r\n\r\n".into());
    assert!(answer.starts_with("HTTP/1.1 405 "), "{answer}");
    stop(w);
    assert!(!socket.exists(), "the socket is removed at the end");
}
