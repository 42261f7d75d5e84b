//! Shipping events to the sinks of `runbook.toml` (`[[sink]]`), with real receivers: a
//! real rsyslogd (Debian's `rsyslog`, imtcp on a loopback port this test picks, writing
//! to a file in the test's temp dir), an HTTP receiver in this test (a thread on
//! 127.0.0.1), and a directory.
//!
//! What is checked is what a receiver gets: every event of the run record, once each by
//! its `id`, in order, secrets masked; a receiver killed mid-run and started again gets
//! them all the same; one that is down when the run ends gets them from the next run,
//! first, or from `runbook ship`; one that never answers costs the run at most the wait
//! at its end.
//!
//! rsyslogd is started by the test (`rsyslogd -n -f CONFIG -i PIDFILE`). Where it is not
//! installed the rsyslog tests skip with a message, unless `RUNBOOK_REQUIRE_RSYSLOG=1`
//! (scripts/test sets it and installs the package): then they fail.
use crate::common::*;
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECRET: &str = "S3CR3T-SHIPPED-TOKEN-98765";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One shipped event as a receiver got it: its id's parts and the record's line.
#[derive(Debug, Clone)]
struct Got {
    id: String,
    run: String,
    seq: u64,
    /// The event as the record has it (`ts`, `event`, …).
    event: serde_json::Value,
}

fn parse_shipped(text: &str) -> Got {
    let mut v: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("not a shipped event ({e}): {text}"));
    let id = v.remove("id").unwrap().as_str().unwrap().to_string();
    let run = v.remove("run").unwrap().as_str().unwrap().to_string();
    let seq = v.remove("seq").unwrap().as_u64().unwrap();
    let event = v.remove("record").unwrap();
    assert!(v.is_empty(), "{text}");
    assert_eq!(id, format!("{run}:{seq}"), "{text}");
    Got {
        id,
        run,
        seq,
        event,
    }
}

/// A run's record, one JSON value per event.
fn record_of(env: &Env, run: &str) -> Vec<serde_json::Value> {
    let path = env.state().join("runs").join(format!("{run}.jsonl"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The run ids of the state dir's records, oldest first (by their first event's time:
/// ids sort by the second only).
fn runs(env: &Env) -> Vec<String> {
    let mut runs: Vec<(String, String)> = env
        .record_files()
        .iter()
        .map(|f| {
            let id = f.file_stem().unwrap().to_str().unwrap().to_string();
            let ts = record_of(env, &id)[0]["ts"].as_str().unwrap().to_string();
            (ts, id)
        })
        .collect();
    runs.sort();
    runs.into_iter().map(|(_, id)| id).collect()
}

/// Every event of each of `runs`' records is in `got` once (by id) and in order (the
/// runs one after the other, each from seq 1 with no gap), as the record has it.
/// Duplicates are dropped by id first, as a receiver would, when `dedup`; otherwise
/// there must be none. How many there were is the answer.
fn assert_every_event_once_in_order(
    what: &str,
    env: &Env,
    runs: &[String],
    got: &[Got],
    dedup: bool,
) -> usize {
    let mut seen = HashSet::new();
    let mut first: Vec<&Got> = Vec::new();
    for g in got {
        if seen.insert(g.id.clone()) {
            first.push(g);
        }
    }
    let duplicates = got.len() - first.len();
    assert!(
        dedup || duplicates == 0,
        "{what}: {duplicates} event(s) arrived twice: {:?}",
        got.iter().map(|g| &g.id).collect::<Vec<_>>()
    );
    let mut want = Vec::new();
    for run in runs {
        for (i, event) in record_of(env, run).into_iter().enumerate() {
            want.push((format!("{run}:{}", i + 1), event));
        }
    }
    let ids: Vec<&str> = first.iter().map(|g| g.id.as_str()).collect();
    let want_ids: Vec<&str> = want.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        ids, want_ids,
        "{what}: the events, by id, in order of arrival"
    );
    for (g, (_, event)) in first.iter().zip(&want) {
        assert_eq!(
            &g.event, event,
            "{what}: event {} differs from the record",
            g.id
        );
        assert_eq!(g.id, format!("{}:{}", g.run, g.seq));
    }
    duplicates
}

// ---------------------------------------------------------------- rsyslog

/// A real rsyslogd on a loopback port, writing what it gets from runbook to a file.
struct Rsyslog {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

/// Direct main queue: each message is written (omfile, flushed at each batch's end)
/// before imtcp reads on, so what rsyslogd read before it was killed is in the file,
/// and the test sees what runbook's confirmation (rsyslogd closing the connection)
/// promises. Messages up to 64 KiB (the default 8 KiB would cut long events).
const RSYSLOG_CONF: &str = r#"
global(workDirectory="@dir@" maxMessageSize="64k")
main_queue(queue.type="Direct")
module(load="imtcp")
input(type="imtcp" address="127.0.0.1" port="@port@")
template(name="shipped" type="string" string="%msgid% %structured-data% %msg%\n")
if $app-name == "runbook" then {
  action(type="omfile" file="@dir@/events.log" template="shipped")
}
"#;

impl Rsyslog {
    /// Started, or `None` (the test skips) when rsyslogd is not installed and not
    /// required.
    fn start(env: &Env) -> Option<Rsyslog> {
        let required = std::env::var("RUNBOOK_REQUIRE_RSYSLOG").as_deref() == Ok("1");
        if !Path::new("/usr/sbin/rsyslogd").exists() {
            assert!(
                !required,
                "rsyslogd is required here (RUNBOOK_REQUIRE_RSYSLOG=1) but /usr/sbin/rsyslogd is not installed (scripts/test installs rsyslog)"
            );
            eprintln!("skipped: rsyslog is not installed (scripts/test installs it)");
            return None;
        }
        let dir = env.tmp.path().join("rsyslog");
        std::fs::create_dir_all(&dir).unwrap();
        let mut r = Rsyslog {
            dir,
            port: free_port(),
            child: None,
        };
        let conf = subst(
            RSYSLOG_CONF,
            &[("dir", &r.dir.display()), ("port", &r.port)],
        );
        std::fs::write(r.dir.join("rsyslog.conf"), conf).unwrap();
        r.up();
        Some(r)
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Starts rsyslogd (again, on the same port) and waits until it takes connections.
    fn up(&mut self) {
        let pid = self.dir.join("rsyslogd.pid");
        let _ = std::fs::remove_file(&pid);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("rsyslogd.out"))
            .unwrap();
        let child = Command::new("/usr/sbin/rsyslogd")
            .arg("-n")
            .arg("-f")
            .arg(self.dir.join("rsyslog.conf"))
            .arg("-i")
            .arg(&pid)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start rsyslogd");
        self.child = Some(child);
        let port = self.port;
        let until = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "rsyslogd exited ({status}) before it listened:\n{}",
                    std::fs::read_to_string(self.dir.join("rsyslogd.out")).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < until,
                "rsyslogd did not listen on {port} within 20s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills rsyslogd (SIGKILL: no goodbye, as a crash or a host lost).
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// What it wrote: each line's MSGID and structured data checked against its JSON.
    fn got(&self) -> Vec<Got> {
        let text = std::fs::read_to_string(self.dir.join("events.log")).unwrap_or_default();
        text.lines()
            .map(|l| {
                let (msgid, rest) = l.split_once(' ').unwrap();
                let (sd, json) = rest.split_once("] ").unwrap();
                let g = parse_shipped(json);
                assert_eq!(
                    sd,
                    format!(
                        "[runbook@32473 id=\"{}\" run=\"{}\" seq=\"{}\"",
                        g.id, g.run, g.seq
                    ),
                    "{l}"
                );
                assert_eq!(msgid, g.event["event"].as_str().unwrap(), "{l}");
                g
            })
            .collect()
    }

    fn text(&self) -> String {
        std::fs::read_to_string(self.dir.join("events.log")).unwrap_or_default()
    }
}

impl Drop for Rsyslog {
    fn drop(&mut self) {
        self.kill();
    }
}

// ---------------------------------------------------------------- HTTP receiver

/// An HTTP receiver on 127.0.0.1 in a thread: each POST's body lines kept, in order,
/// then `200 OK`. Stopped, it no longer listens (connections are refused); started
/// again, it listens on the same port.
struct Receiver {
    port: u16,
    got: Arc<Mutex<Vec<String>>>,
    bodies: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    fn start() -> Receiver {
        let mut r = Receiver {
            port: 0,
            got: Arc::default(),
            bodies: Arc::default(),
            stop: Arc::default(),
            thread: None,
        };
        r.up();
        r
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/events", self.port)
    }

    fn up(&mut self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port)).unwrap();
        self.port = listener.local_addr().unwrap().port();
        self.stop.store(false, Ordering::SeqCst);
        let (got, bodies, stop) = (self.got.clone(), self.bodies.clone(), self.stop.clone());
        self.thread = Some(std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let _ = serve(conn, &got, &bodies);
            }
        }));
    }

    /// Stops listening: the thread ends after the request it serves, if any.
    fn down(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }

    fn got(&self) -> Vec<Got> {
        self.got
            .lock()
            .unwrap()
            .iter()
            .map(|l| parse_shipped(l))
            .collect()
    }

    fn count(&self) -> usize {
        self.got.lock().unwrap().len()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.down();
    }
}

fn serve(
    conn: TcpStream,
    got: &Mutex<Vec<String>>,
    bodies: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut head = String::new();
    reader.read_line(&mut head)?;
    assert!(head.starts_with("POST /events HTTP/1.1"), "{head:?}");
    let mut length = 0;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (name, value) = h.split_once(':').unwrap();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.trim().parse().unwrap();
        }
        if name.eq_ignore_ascii_case("content-type") {
            assert_eq!(value.trim(), "application/x-ndjson");
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let body = String::from_utf8(body).unwrap();
    got.lock().unwrap().extend(body.lines().map(str::to_string));
    bodies.lock().unwrap().push(body);
    let mut conn = conn;
    conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
    Ok(())
}

// ---------------------------------------------------------------- the tests

/// `runbook.toml` in the test's temp dir (the runs' current dir), from `[[sink]]` tables.
fn sinks(env: &Env, tables: &[String]) {
    env.write("runbook.toml", &tables.join("\n"));
}

fn syslog_sink(r: &Rsyslog) -> String {
    format!(
        "[[sink]]\nkind = \"syslog\"\naddress = \"{}\"\nfacility = \"local0\"\n",
        r.address()
    )
}

fn webhook_sink(r: &Receiver) -> String {
    format!("[[sink]]\nkind = \"webhook\"\nurl = \"{}\"\n", r.url())
}

fn dir_sink(dir: &Path) -> String {
    format!("[[sink]]\nkind = \"dir\"\npath = \"{}\"\n", dir.display())
}

fn dir_got(dir: &Path, run: &str) -> Vec<Got> {
    std::fs::read_to_string(dir.join(format!("{run}.jsonl")))
        .unwrap_or_default()
        .lines()
        .map(parse_shipped)
        .collect()
}

/// The files left in the spool (but each sink's `sink` note).
fn spooled(env: &Env) -> Vec<String> {
    let mut left = Vec::new();
    for d in std::fs::read_dir(env.state().join("spool"))
        .into_iter()
        .flatten()
    {
        for f in std::fs::read_dir(d.unwrap().path()).unwrap() {
            let name = f.unwrap().file_name().to_string_lossy().into_owned();
            if name != "sink" {
                left.push(name);
            }
        }
    }
    left
}

const WITH_A_SECRET: &str = r#"runbook { name = "ship", params = { token = { type = "string", secret = true, required = true } } }
local here = target("local")
step("use the token", function()
  log.info("the token is " .. params.token)
  here:exec({ "sh", "-c", 'echo "out $TOKEN"; echo "ünïcödé and a tab\there"' }, { env = { TOKEN = params.token } })
end)
step("fail", function()
  here:exec({ "sh", "-c", "echo bad >&2; exit 3" })
end)
"#;

/// rsyslog, the webhook and the directory each get every event of the record, once, in
/// order, as the record has it, with the secret masked; the spool is empty after.
#[test]
fn every_sink_gets_every_event_once_in_order_secrets_masked() {
    let env = Env::new();
    let Some(rsyslog) = Rsyslog::start(&env) else {
        return;
    };
    let web = Receiver::start();
    let store = env.tmp.path().join("audit");
    std::fs::create_dir_all(&store).unwrap();
    sinks(
        &env,
        &[syslog_sink(&rsyslog), webhook_sink(&web), dir_sink(&store)],
    );
    let out = Run::new(&env, WITH_A_SECRET)
        .yes()
        .json()
        .env("RUNBOOK_PARAM_TOKEN", SECRET)
        .expect_exit(1)
        .run();
    let runs = runs(&env);
    assert_eq!(runs.len(), 1);
    // finish() waited for the confirmations: all there when the run has ended.
    assert_every_event_once_in_order("rsyslog", &env, &runs, &rsyslog.got(), false);
    assert_every_event_once_in_order("webhook", &env, &runs, &web.got(), false);
    assert_every_event_once_in_order("dir", &env, &runs, &dir_got(&store, &runs[0]), false);
    let shipped = [
        rsyslog.text(),
        web.bodies.lock().unwrap().concat(),
        std::fs::read_to_string(store.join(format!("{}.jsonl", runs[0]))).unwrap(),
    ];
    for (what, text) in ["rsyslog", "webhook", "dir"].iter().zip(&shipped) {
        assert!(!text.contains(SECRET), "{what} got the secret:\n{text}");
        assert!(text.contains("the token is ***"), "{what}:\n{text}");
        assert!(text.contains("out ***"), "{what}:\n{text}");
        assert!(text.contains("ünïcödé"), "{what}:\n{text}");
    }
    assert!(spooled(&env).is_empty(), "{:?}\n{out:?}", spooled(&env));
    assert!(!out.stderr_text().contains("not delivered"), "{out:?}");
}

/// Ten steps of 0.3 s each: time to kill a receiver after a few events and bring it back.
const SLOW: &str = r#"runbook { name = "slow" }
local here = target("local")
for i = 1, 10 do
  step("step " .. i, function()
    here:exec({ "sh", "-c", "echo step " .. i .. "; sleep 0.3" })
  end)
end
"#;

/// rsyslogd killed (SIGKILL) after a few events and started again a second later on the
/// same port, while the run goes on: every event arrives, in order, by the run's end.
/// A batch rsyslogd read before it died but whose confirmation it never sent is sent
/// again: such duplicates are dropped by id, as a receiver would (how many is printed).
#[test]
fn rsyslog_killed_mid_run_and_restarted_gets_every_event_in_order() {
    let env = Env::new();
    let Some(mut rsyslog) = Rsyslog::start(&env) else {
        return;
    };
    sinks(&env, &[syslog_sink(&rsyslog)]);
    let mut running = Run::new(&env, SLOW).yes().json().spawn();
    running.wait_for("5 events at rsyslog", Duration::from_secs(60), || {
        (rsyslog.got().len() >= 5).then_some(())
    });
    rsyslog.kill();
    let before = rsyslog.got().len();
    std::thread::sleep(Duration::from_secs(1));
    rsyslog.up();
    assert_eq!(
        running.code(Duration::from_secs(120)),
        0,
        "{}",
        running.output()
    );
    let got = rsyslog.got();
    assert!(got.len() > before, "nothing arrived after the restart");
    let dups = assert_every_event_once_in_order("rsyslog", &env, &runs(&env), &got, true);
    eprintln!(
        "rsyslog: {} events, {dups} sent twice around the kill",
        got.len()
    );
    assert!(spooled(&env).is_empty(), "{:?}", spooled(&env));
}

/// The webhook's receiver stops after a few events and comes back a second later on the
/// same port: every event arrives once, in order (a request is answered or refused
/// whole, so nothing is sent twice).
#[test]
fn webhook_down_mid_run_and_back_gets_every_event_once_in_order() {
    let env = Env::new();
    let mut web = Receiver::start();
    let store = env.tmp.path().join("audit");
    std::fs::create_dir_all(&store).unwrap();
    sinks(&env, &[webhook_sink(&web), dir_sink(&store)]);
    let mut running = Run::new(&env, SLOW).yes().json().spawn();
    running.wait_for("5 events at the webhook", Duration::from_secs(60), || {
        (web.count() >= 5).then_some(())
    });
    web.down();
    let before = web.count();
    std::thread::sleep(Duration::from_secs(1));
    web.up();
    assert_eq!(
        running.code(Duration::from_secs(120)),
        0,
        "{}",
        running.output()
    );
    assert!(
        web.count() > before + 5,
        "the events of the second it was down"
    );
    let runs = runs(&env);
    assert_every_event_once_in_order("webhook", &env, &runs, &web.got(), false);
    assert_every_event_once_in_order("dir", &env, &runs, &dir_got(&store, &runs[0]), false);
    assert!(spooled(&env).is_empty(), "{:?}", spooled(&env));
}

const QUICK: &str = r#"runbook { name = "quick" }
step("one", function()
  log.info("one")
end)
"#;

/// A run while rsyslogd is down says so and keeps its events; the next run, once it is
/// back, sends them first, then its own; the spool is empty after.
#[test]
fn a_run_while_rsyslog_is_down_is_shipped_first_by_the_next_run() {
    let env = Env::new();
    let Some(mut rsyslog) = Rsyslog::start(&env) else {
        return;
    };
    sinks(&env, &[syslog_sink(&rsyslog)]);
    rsyslog.kill();
    let first = Run::new(&env, QUICK).yes().run();
    first.assert_exit(0);
    assert!(
        first.stderr_text().contains(&format!(
            "sink syslog {}: 5 event(s) of this run not delivered",
            rsyslog.address()
        )),
        "{first:?}"
    );
    assert_eq!(spooled(&env).len(), 1, "{:?}", spooled(&env));
    rsyslog.up();
    Run::new(&env, QUICK).yes().run().assert_exit(0);
    assert_every_event_once_in_order("rsyslog", &env, &runs(&env), &rsyslog.got(), false);
    assert!(spooled(&env).is_empty(), "{:?}", spooled(&env));
}

/// `runbook ship` sends what runs left while the webhook was down, with no run; exit 1
/// while it is still down.
#[test]
fn runbook_ship_sends_what_earlier_runs_left() {
    let env = Env::new();
    let mut web = Receiver::start();
    sinks(&env, &[webhook_sink(&web)]);
    web.down();
    for _ in 0..2 {
        Run::new(&env, QUICK).yes().run().assert_exit(0);
    }
    Run::cmd(&env, ["ship", "--wait", "5s"])
        .expect_exit(1)
        .stderr_has("2 earlier run(s) not sent whole")
        .run();
    web.up();
    Run::cmd(&env, ["ship"]).expect_exit(0).run();
    assert_every_event_once_in_order("webhook", &env, &runs(&env), &web.got(), false);
    assert!(spooled(&env).is_empty(), "{:?}", spooled(&env));
}

/// What a sink that is down costs a run: nothing to speak of when it refuses
/// connections; the wait at the end (2 s) when it takes the connection and never
/// answers. Measured against the same run without a sink.
#[test]
fn a_dead_sink_costs_the_run_a_bounded_wait_at_most() {
    let env = Env::new();
    let time = |env: &Env| {
        let started = Instant::now();
        Run::new(env, SLOW).yes().run().assert_exit(0);
        started.elapsed()
    };
    let base = time(&env);
    // Refused: nothing listens on the port.
    let refused = free_port();
    sinks(
        &env,
        &[format!(
            "[[sink]]\nkind = \"syslog\"\naddress = \"127.0.0.1:{refused}\"\n"
        )],
    );
    let with_refused = time(&env);
    // Takes the connection (the kernel's backlog), never reads nor answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let env2 = Env::new();
    sinks(
        &env2,
        &[format!(
            "[[sink]]\nkind = \"webhook\"\nurl = \"http://127.0.0.1:{silent_port}/\"\n"
        )],
    );
    let with_silent = time(&env2);
    eprintln!(
        "a 10-step run of 3 s: {base:?} alone, {with_refused:?} with a sink refusing connections, {with_silent:?} with one that never answers"
    );
    assert!(
        with_refused < base + Duration::from_millis(1000),
        "refused: {with_refused:?} against {base:?}"
    );
    assert!(
        with_silent < base + Duration::from_millis(3500),
        "silent: {with_silent:?} against {base:?}"
    );
    drop(silent);
}

/// Dry-runs ship nothing (they change nothing) and start no spool; a wrong
/// `runbook.toml` stops a real run before anything runs, naming its line.
#[test]
fn only_real_runs_ship_and_a_wrong_sink_is_named_at_its_line() {
    let env = Env::new();
    let web = Receiver::start();
    sinks(&env, &[webhook_sink(&web)]);
    Run::new(&env, QUICK).dry_run().run().assert_exit(0);
    assert_eq!(web.count(), 0);
    assert!(!env.state().join("spool").exists());
    env.write(
        "runbook.toml",
        "[[sink]]\nkind = \"webhook\"\nurl = \"https://siem.invalid/in\"\n",
    );
    let records = env.record_count();
    let out = Run::new(&env, QUICK).yes().expect_exit(2).run();
    assert!(
        out.stderr_text()
            .contains("runbook.toml:3: url \"https://siem.invalid/in\": https is not supported"),
        "{out:?}"
    );
    assert_eq!(
        env.record_count(),
        records,
        "refused before the run started"
    );
}
