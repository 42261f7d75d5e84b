//! Detached commands (issue 30, item 2): a long command outlives the connection that
//! started it, and runbook follows it to its end across a dropped connection, exactly
//! once and with its whole output; `--resume` after runbook was killed outright follows
//! it again instead of starting a second copy.
use crate::common::running::{self, Running};
use crate::common::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long the long command runs: a line a second.
const SECONDS: u32 = 60;

/// A runbook whose one step runs a `SECONDS`-long command on `target` that counts its
/// starts in `marks/started` (a file on the target's filesystem) and prints `tick N` a
/// second, then `done` on stderr.
fn long_runbook(env: &Env, target: &str, marks: &Path, opts: &str) -> std::path::PathBuf {
    env.write(
        "long.lua",
        &subst(
            r#"runbook { name = "long" }
step("long", function()
  local r = @target@:exec({ "sh", "-c",
    'echo once >> "$1/started"; i=1; while [ "$i" -le "$2" ]; do echo "tick $i"; echo "$i" > "$1/progress"; i=$((i + 1)); sleep 1; done; echo done >&2',
    "sh", "@marks@", "@seconds@" }, @opts@)
  log.info("lines " .. select(2, r.stdout:gsub("\n", "")) .. ", stderr " .. r.stderr)
end)
"#,
            &[
                ("target", &target),
                ("marks", &marks.display()),
                ("seconds", &SECONDS),
                ("opts", &opts),
            ],
        ),
    )
}

/// The step ended ok, every tick came once and in order, and the command started once.
fn whole_and_once(out: &Output, started: &Path) {
    let ticks: Vec<String> = out
        .output_lines()
        .into_iter()
        .filter(|l| l.starts_with("tick "))
        .collect();
    let want: Vec<String> = (1..=SECONDS).map(|i| format!("tick {i}")).collect();
    assert_eq!(ticks, want, "{}", out.describe());
    assert!(out.output_lines().contains(&"done".to_string()));
    assert_eq!(
        std::fs::read_to_string(started).unwrap(),
        "once\n",
        "the command ran exactly once"
    );
    assert!(
        out.logs()
            .contains(&format!("lines {SECONDS}, stderr done")),
        "{:?}",
        out.logs()
    );
}

/// Waits until the command has printed `n` ticks (it writes its progress beside its
/// marks).
fn wait_ticks(run: &mut Running, marks: &Path, n: u32) {
    let progress = marks.join("progress");
    run.wait_for("the command's ticks", Duration::from_secs(60), || {
        let at: u32 = std::fs::read_to_string(&progress)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        (at >= n).then_some(())
    });
}

/// Runs the long command detached on `target` (over `fleet`'s node1), kills sshd 15 s
/// in (listener and every connection, as a crashed host's) and starts it again 5 s
/// later: runbook reconnects and follows the command to its end; the step is ok, with
/// every line once, and the command ran once. `marks`: where the command writes (as
/// the target sees it); `seen`: the same directory from here.
fn restart_midway(fleet: &mut sshd::Fleet, env: &Env, target: &str, marks: &str, seen: &Path) {
    let rb = long_runbook(env, target, Path::new(marks), "{ detach = true }");
    let mut run = Run::new(env, &rb).ssh(&*fleet).yes().json().spawn();
    wait_ticks(&mut run, seen, 15);
    fleet.node("node1").kill();
    std::thread::sleep(Duration::from_secs(5));
    fleet.node("node1").start();
    let code = run.code(Duration::from_secs(SECONDS as u64 + 60));
    let out = run.finish();
    assert_eq!(code, 0, "{}", out.describe());
    whole_and_once(&out, &seen.join("started"));
    let warnings = out.logs_at(Level::Warn).join("\n");
    assert!(
        warnings.contains("went away 1 time(s) while the detached command ran"),
        "{warnings}"
    );
}

#[test]
fn an_sshd_restart_midway_loses_nothing_and_runs_nothing_twice() {
    require_sshd!();
    let mut fleet = sshd::Fleet::start(1);
    let env = Env::new();
    let marks = env.scratch().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let at = marks.display().to_string();
    restart_midway(&mut fleet, &env, "target(\"node1\")", &at, &marks);
}

/// The same inside a real LXC container (Debian minbase) that `pct` enters on the node
/// runbook reaches over SSH: the command runs on in the container while the node's sshd
/// is down.
#[test]
fn inside_a_real_container_over_ssh_too() {
    require_sshd!();
    let Some(ct) = lxc::container(lxc::Kind::Minbase) else {
        return;
    };
    let mut fleet = sshd::Fleet::start_with_real_lxc(1);
    let env = Env::new();
    let dir = ct.dir();
    dir.kill_on_drop("tick");
    let target = format!("target(\"node1\"):pct({})", ct.vmid);
    restart_midway(&mut fleet, &env, &target, &dir.at(""), &dir.host);
}

/// The same command without `detach` dies with the connection: the step fails as a lost
/// connection (the contrast that makes the test above mean something).
#[test]
fn without_detach_a_restart_fails_the_step() {
    require_sshd!();
    let mut fleet = sshd::Fleet::start(1);
    let env = Env::new();
    let marks = env.scratch().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let rb = long_runbook(&env, "target(\"node1\")", &marks, "{ detach = false }");
    let mut run = Run::new(&env, &rb).ssh(&fleet).yes().json().spawn();
    wait_ticks(&mut run, &marks, 3);
    fleet.node("node1").kill();
    fleet.node("node1").start();
    let code = run.code(Duration::from_secs(60));
    let out = run.finish();
    assert_eq!(code, 1, "{}", out.describe());
    assert!(
        out.step_error("long").contains("connection lost"),
        "{}",
        out.describe()
    );
}

/// runbook killed outright (SIGKILL) while the command runs: the command goes on, and
/// `--resume` follows it again (its whole output, from the start) instead of starting a
/// second copy; the step ends ok.
#[test]
fn resume_after_kill_9_follows_the_running_command() {
    require_sshd!();
    let fleet = sshd::Fleet::start(1);
    let env = Env::new();
    let marks = env.scratch().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let rb = long_runbook(&env, "target(\"node1\")", &marks, "{ detach = true }");
    let mut run = Run::new(&env, &rb).ssh(&fleet).yes().json().spawn();
    wait_ticks(&mut run, &marks, 5);
    run.signal(libc::SIGKILL);
    run.wait(Duration::from_secs(10));
    let started = Instant::now();
    let out = Run::new(&env, &rb)
        .ssh(&fleet)
        .yes()
        .json()
        .args(["--resume", "last"])
        .timeout(Duration::from_secs(SECONDS as u64 + 60))
        .expect_exit(0)
        .run();
    whole_and_once(&out, &marks.join("started"));
    // It was followed, not run again: it ended within what was left of its minute.
    assert!(
        started.elapsed() < Duration::from_secs(SECONDS as u64 - 3),
        "{:?}",
        started.elapsed()
    );
    let warnings = out.logs_at(Level::Warn).join("\n");
    assert!(warnings.contains("ran detached (job "), "{warnings}");
}

/// On a node of the real Slurm cluster, inside its job: every command there is an srun
/// job step, and killing runbook outright kills those srun clients (its connection to
/// the node). The detached command runs on; `--resume` follows it again to its end.
#[test]
fn on_a_slurm_node_resume_after_kill_9_follows_it() {
    let c = require_slurm!();
    let _one = c.serial();
    let env = Env::new();
    let marks = env.scratch().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let target = format!("target(\"slurm:{}?job={}\")", c.node, c.job);
    let rb = long_runbook(&env, &target, &marks, "{ detach = true }");
    let mut run = Run::new(&env, &rb)
        .env("SLURM_CONF", &c.conf)
        .yes()
        .json()
        .spawn();
    wait_ticks(&mut run, &marks, 5);
    // As a crash takes them all: runbook and the srun clients it has running (left
    // behind, one waiting for a step slot goes on retrying and starts a step long after
    // this test, which the next Slurm test would count).
    let _ = std::process::Command::new("pkill")
        .args(["-KILL", "-P", &run.pid().to_string()])
        .status();
    run.signal(libc::SIGKILL);
    run.wait(Duration::from_secs(10));
    let out = Run::new(&env, &rb)
        .env("SLURM_CONF", &c.conf)
        .yes()
        .json()
        .args(["--resume", "last"])
        .timeout(Duration::from_secs(SECONDS as u64 + 90))
        .expect_exit(0)
        .run();
    whole_and_once(&out, &marks.join("started"));
    // Nothing of it is left as a job step (the other Slurm tests count them).
    assert_eq!(
        c.wait_no_steps(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

/// `runbook ps` lists a detached command a killed run left on an SSH host, with its
/// run and step; `runbook stop RUN` ends it (its whole group) without resuming the run;
/// then `ps` finds nothing.
#[test]
fn ps_lists_what_a_killed_run_left_and_stop_ends_it() {
    require_sshd!();
    let fleet = sshd::Fleet::start(1);
    let env = Env::new();
    let marks = env.scratch().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let rb = long_runbook(&env, "target(\"node1\")", &marks, "{ detach = true }");
    let mut run = Run::new(&env, &rb).ssh(&fleet).yes().json().spawn();
    wait_ticks(&mut run, &marks, 2);
    let id = run_id(&run.events());
    run.signal(libc::SIGKILL);
    run.wait(Duration::from_secs(10));
    let ps = Run::cmd(&env, ["ps"]).ssh(&fleet).expect_exit(0).run();
    let text = ps.stdout_text();
    let row = text
        .lines()
        // Other tests' commands run on the same machine (the test sshd is this
        // machine's root): this run's row.
        .find(|l| l.starts_with("node1 ") && l.contains(&id))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        row.contains(&id) && row.contains(" long ") && row.contains(" running "),
        "{text}"
    );
    assert!(row.contains("(detached, job "), "{text}");
    let stop = Run::cmd(&env, ["stop", &id])
        .ssh(&fleet)
        .expect_exit(0)
        .run();
    assert!(
        stop.stdout_text()
            .starts_with("stopped the command of step \"long\""),
        "{}",
        stop.describe()
    );
    let at = std::fs::read_to_string(marks.join("progress")).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        std::fs::read_to_string(marks.join("progress")).unwrap(),
        at,
        "it stopped"
    );
    let ps = Run::cmd(&env, ["ps", "node1"])
        .ssh(&fleet)
        .expect_exit(0)
        .run();
    assert!(!ps.stdout_text().contains(&id), "{}", ps.stdout_text());
}

/// A detached command's timeout stops its whole tree (a child that ignores TERM
/// included), as for any command.
#[test]
fn a_timeout_stops_the_detached_tree() {
    let env = Env::new();
    let pidfile = env.scratch().join("child.pid");
    let rb = env.write(
        "stuck.lua",
        &subst(
            r#"runbook { name = "stuck" }
step("stuck", function()
  target("local"):exec({ "sh", "-c", "sh -c 'trap \"\" TERM; echo $$ > @pid@; exec sleep 300' & sleep 300" },
    { detach = true, timeout = "2s" })
end)
"#,
            &[("pid", &pidfile.display())],
        ),
    );
    let out = Run::new(&env, &rb)
        .yes()
        .json()
        .timeout(Duration::from_secs(30))
        .expect_exit(1)
        .run();
    assert!(
        out.step_error("stuck").contains("timed out"),
        "{}",
        out.describe()
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        running::gone_within(pid, Duration::from_secs(5)),
        "the TERM-ignoring child was killed"
    );
}

/// A network namespace of the test's own, joined to this one by a veth pair on a
/// link-local /30, with an sshd of its own inside; dropped with it.
struct Netns {
    name: String,
    host_if: String,
    addr: String,
    sshd: Option<std::process::Child>,
}

impl Netns {
    fn ip(args: &[&str]) {
        let st = std::process::Command::new("ip")
            .args(args)
            .status()
            .expect("ip (iproute2)");
        assert!(st.success(), "ip {args:?} failed");
    }

    fn new() -> Netns {
        let id = std::process::id() % 60000;
        let name = format!("rb-detach-{id}");
        let host_if = format!("rbd{id}a");
        let ns_if = format!("rbd{id}b");
        // 169.254.0.0/16 is link-local: no real or private network's addresses.
        let (a, b) = (1 + (id / 64) % 250, (id % 64) * 4);
        let host_addr = format!("169.254.{a}.{}", b + 1);
        let addr = format!("169.254.{a}.{}", b + 2);
        Netns::ip(&["netns", "add", &name]);
        let ns = Netns {
            name: name.clone(),
            host_if: host_if.clone(),
            addr: addr.clone(),
            sshd: None,
        };
        Netns::ip(&[
            "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if,
        ]);
        Netns::ip(&["link", "set", &ns_if, "netns", &name]);
        Netns::ip(&["addr", "add", &format!("{host_addr}/30"), "dev", &host_if]);
        Netns::ip(&["link", "set", &host_if, "up"]);
        let with_mask = format!("{addr}/30");
        for args in [
            ["addr", "add", with_mask.as_str(), "dev", ns_if.as_str()],
            ["link", "set", ns_if.as_str(), "up", ""],
            ["link", "set", "lo", "up", ""],
        ] {
            let mut all = vec!["netns", "exec", name.as_str(), "ip"];
            all.extend(args.iter().copied().filter(|a| !a.is_empty()));
            Netns::ip(&all);
        }
        ns
    }

    /// Starts `node`'s sshd again inside the namespace, listening on its address.
    fn start_sshd(&mut self, node: &sshd::Node) {
        let text = std::fs::read_to_string(&node.config)
            .unwrap()
            .replace(
                "ListenAddress 127.0.0.1",
                &format!("ListenAddress {}", self.addr),
            )
            .replace("PidFile ", "PidFile /dev/null\n#");
        let config = node.config.with_extension("netns.conf");
        std::fs::write(&config, text).unwrap();
        let child = std::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.name,
                "/usr/sbin/sshd",
                "-D",
                "-e",
                "-f",
            ])
            .arg(&config)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("sshd in the namespace");
        self.sshd = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect((self.addr.as_str(), node.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "sshd in {} did not start",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn link(&self, up: bool) {
        Netns::ip(&["link", "set", &self.host_if, if up { "up" } else { "down" }]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Some(mut c) = self.sshd.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.host_if])
            .status();
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// The host is in a network namespace of its own, reached over a veth link, and the
/// link is dropped for 10 s in the middle of the 60 s command: the step ends ok with the
/// whole output, and the command ran once.
#[test]
fn a_link_dropped_for_ten_seconds_loses_nothing() {
    require_sshd!();
    let fleet = sshd::Fleet::start(1);
    let mut ns = Netns::new();
    let node = &fleet.nodes[0];
    ns.start_sshd(node);
    let env = Env::new();
    // node1's client settings, at the namespace's address.
    let config = env.scratch().join("ssh_config");
    let known = env.scratch().join("known_hosts");
    std::fs::write(
        &known,
        format!("[{}]:{} {}\n", ns.addr, node.port, node.host_key_line()),
    )
    .unwrap();
    std::fs::write(
        &config,
        format!(
            "Host netnode\n  HostName {}\n  Port {}\n  User root\n  IdentityFile {}\n  IdentitiesOnly yes\n  UserKnownHostsFile {}\n  GlobalKnownHostsFile /dev/null\n  BatchMode yes\n  LogLevel ERROR\n",
            ns.addr,
            node.port,
            fleet.dir.path().join("client_ed25519").display(),
            known.display()
        ),
    )
    .unwrap();
    let marks = env.scratch().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let rb = long_runbook(&env, "target(\"netnode\")", &marks, "{ detach = true }");
    let mut run = Run::new(&env, &rb)
        .ssh(config.as_path())
        .yes()
        .json()
        .spawn();
    wait_ticks(&mut run, &marks, 15);
    ns.link(false);
    std::thread::sleep(Duration::from_secs(10));
    ns.link(true);
    let code = run.code(Duration::from_secs(SECONDS as u64 + 90));
    let out = run.finish();
    assert_eq!(code, 0, "{}", out.describe());
    whole_and_once(&out, &marks.join("started"));
    // Whether ssh noticed the outage (and runbook reconnected) or TCP carried the
    // connection across it depends on timing; either way nothing may be lost.
    eprintln!("warnings: {:?}", out.logs_at(Level::Warn));
}

/// Ctrl-C (SIGINT to runbook) stops a detached command's whole tree on the SSH host, as
/// for any command: its progress stops, and nothing of it is left for `ps`.
#[test]
fn ctrl_c_stops_the_detached_command_on_the_host() {
    require_sshd!();
    let fleet = sshd::Fleet::start(1);
    let env = Env::new();
    let marks = env.scratch().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let rb = long_runbook(&env, "target(\"node1\")", &marks, "{ detach = true }");
    let mut run = Run::new(&env, &rb).ssh(&fleet).yes().json().spawn();
    wait_ticks(&mut run, &marks, 2);
    let id = run_id(&run.events());
    run.signal(libc::SIGINT);
    assert_eq!(run.code(Duration::from_secs(20)), 130);
    let at = std::fs::read_to_string(marks.join("progress")).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        std::fs::read_to_string(marks.join("progress")).unwrap(),
        at,
        "it stopped"
    );
    let ps = Run::cmd(&env, ["ps", "node1"])
        .ssh(&fleet)
        .expect_exit(0)
        .run();
    assert!(!ps.stdout_text().contains(&id), "{}", ps.stdout_text());
}
