//! The Slurm target against a real cluster on this machine (tests/common/slurm.rs):
//! commands as job steps through srun, selections from the scheduler, one launch for a
//! `parallel` over nodes, cancelled steps, locks, secrets.

use crate::common;

use crate::common::slurm::Cluster;
use crate::common::{subst, Effect, Env, Event, Hop, Run};
use std::time::Duration;

fn run<'e>(env: &'e Env, c: &Cluster, rb: &std::path::Path) -> Run<'e> {
    Run::new(env, rb)
        .env("SLURM_CONF", &c.conf)
        .yes()
        .json()
        .timeout(Duration::from_secs(90))
}

/// The harness itself: the cluster answers and the sleep job runs on its nodes.
#[test]
fn the_test_cluster_runs_a_job_on_its_nodes() {
    let c = require_slurm!();
    let _one = c.serial();
    let nodes = c.client(&["squeue", "-h", "-j", &c.job.to_string(), "-o", "%T %N"]);
    assert_eq!(nodes, "RUNNING n[1-3]");
}

/// stdout and stderr apart, the command's own exit code (and no srun line about it),
/// stdin, cwd and env, on a node with an allocation of its own and inside the job.
#[test]
fn commands_run_as_steps_with_their_streams_codes_input_and_env() {
    let c = require_slurm!();
    let _one = c.serial();
    let env = Env::new();
    let scratch = env.scratch();
    let rb = env.write(
        "basics.lua",
        &subst(
            r#"runbook { name = "slurm-basics" }
local cases = { target("slurm:@n@"), target("slurm:@n@?job=@job@"), slurm("@n2@", { job = @job@, immediate = "5s" }) }
step("basics", function()
  for _, t in ipairs(cases) do
    local r = t:exec({ "sh", "-c", "echo out; echo err >&2; exit 3" }, { check = false, read_only = true })
    if r.code ~= 3 or r.stdout ~= "out\n" or r.stderr ~= "err\n" then
      fail(t.name .. ": " .. r.code .. " [" .. r.stdout .. "] [" .. r.stderr .. "]")
    end
    local r = t:exec({ "sh", "-c", 'pwd; printf "%s|%s|" "$A" "$SLURMD_NODENAME"; cat; printf "|%s" "${SLURM_JOB_ID}"' },
      { cwd = "@scratch@", stdin = "in\nput", env = { A = "a 'b' $x\nz" }, read_only = true })
    log.info(t.name .. "=" .. r.stdout)
  end
end)
"#,
            &[
                ("n", &c.node),
                ("job", &c.job),
                ("n2", &c.nodes[1]),
                ("scratch", &scratch.display()),
            ],
        ),
    );
    let out = run(&env, c, &rb).expect_exit(0).run();
    let logs = out.logs();
    let want = |name: &str, node: &str| {
        format!("{name}={}\na 'b' $x\nz|{node}|in\nput|", scratch.display())
    };
    let plain = logs
        .iter()
        .find(|l| l.starts_with(&format!("slurm:{}=", c.node)))
        .unwrap_or_else(|| panic!("{logs:?}"));
    assert!(
        plain.starts_with(&want(&format!("slurm:{}", c.node), &c.node)),
        "{plain}"
    );
    // Without a job, the step is an allocation of its own.
    assert!(!plain.ends_with(&format!("|{}", c.job)), "{plain}");
    for (name, node) in [
        (format!("slurm:{}?job={}", c.node, c.job), &c.node),
        (format!("slurm:{}?job={}", c.nodes[1], c.job), &c.nodes[1]),
    ] {
        let line = logs
            .iter()
            .find(|l| l.starts_with(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name}: {logs:?}"));
        assert_eq!(
            *line,
            format!("{}{}", want(&name, node), c.job),
            "in the job"
        );
    }
    // Records name the node and the job, and how to reach them again.
    let events = out.run_events();
    let started = pick!(events, Event::ActionPgid { .. });
    assert!(
        started.iter().any(|e| matches!(e, Event::ActionPgid { via, .. }
            if matches!(via.first(), Some(Hop::Slurm(s)) if s.node == c.nodes[1] && s.job == Some(c.job)))),
        "{started:?}"
    );
    assert!(c.wait_no_steps(Duration::from_secs(5)).is_empty());
}

/// A node srun does not know, or a job that is not there, fails the command as the
/// target's fault, naming it and what srun said, even with `check = false`.
#[test]
fn a_launch_srun_refuses_fails_naming_the_target() {
    let c = require_slurm!();
    let _one = c.serial();
    let env = Env::new();
    let rb = env.write(
        "refused.lua",
        r#"runbook { name = "slurm-refused" }
step("unknown node", function()
  local ok, e = pcall(function()
    target("slurm:nosuchnode"):exec({ "true" }, { check = false, read_only = true })
  end)
  log.info(tostring(e))
  target("slurm:n1?job=999999"):exec({ "true" }, { check = false, read_only = true })
end)
"#,
    );
    let out = run(&env, c, &rb).expect_exit(1).run();
    let err = format!("{}\n{:?}", out.step_errors(), out.logs());
    assert!(
        err.contains(
            "cannot run a command on slurm:nosuchnode: srun: Unable to allocate resources"
        ),
        "{err}"
    );
    assert!(
        err.contains("cannot run a command on slurm:n1?job=999999: srun: Unable to confirm allocation for job 999999"),
        "{err}"
    );
}

/// Random bytes reach the program through srun word for word, alone and in the job.
#[test]
fn random_byte_argv_round_trips_through_srun() {
    let c = require_slurm!();
    let _one = c.serial();
    let env = Env::new();
    let plain = format!(r#"target("slurm:{}")"#, c.node);
    let job = format!(r#"target("slurm:{}?job={}")"#, c.nodes[2], c.job);
    let targets = [("slurm", plain.as_str()), ("slurm+job", job.as_str())];
    common::argv::round_trips(&env, false, &targets, |rb| run(&env, c, rb).run());
}

/// A command's env value (a secret) reaches it on stdin: no process on the machine has
/// it in its argv while the command runs, srun's included.
#[test]
fn secret_env_values_stay_out_of_sruns_argv() {
    let c = require_slurm!();
    let _one = c.serial();
    let env = Env::new();
    let rb = env.write(
        "secret.lua",
        &subst(
            r#"
runbook { name = "slurm-secret", params = { token = { type = "string", secret = true, required = true } } }
local scan = [[
sleep 5 & holder=$!
n=0
for f in /proc/[0-9]*/cmdline; do
  c=$(tr '\000' ' ' < "$f" 2>/dev/null) || continue
  case $c in *"$TOKEN"*) echo "LEAK $f: $c"; n=$((n+1));; esac
done
kill "$holder"
[ "${TOKEN%%-*}:${#TOKEN}" = "s3cr3t:19" ] || { echo "wrong value"; exit 3; }
echo "checked, $n leaks"
]]
for _, t in ipairs({ target("slurm:@n@"), target("slurm:@n@?job=@job@") }) do
  step("on " .. t.name, function()
    local r = t:exec({ "sh", "-c", scan }, { env = { TOKEN = params.token }, read_only = true })
    if not r.stdout:find("checked, 0 leaks", 1, true) then fail(r.stdout) end
  end)
end
"#,
            &[("n", &c.node), ("job", &c.job)],
        ),
    );
    let stdout = run(&env, c, &rb)
        .env("RUNBOOK_PARAM_TOKEN", "s3cr3t-env-VALUE-42")
        .expect_exit(0)
        .run()
        .stdout_text();
    assert!(!stdout.contains("s3cr3t-env-VALUE-42"), "{stdout}");
}

/// A command's timeout cancels its step, even one whose tree ignores TERM: no step is
/// left in `squeue -s` and no process of it on the machine.
#[test]
fn a_timeout_cancels_the_step() {
    let c = require_slurm!();
    let _one = c.serial();
    let env = Env::new();
    let sleep = common::slurm::unique_sleep();
    let rb = env.write(
        "timeout.lua",
        &subst(
            r#"runbook { name = "slurm-timeout" }
step("stuck", function()
  for _, t in ipairs({ target("slurm:@n@"), target("slurm:@n@?job=@job@") }) do
    local r = t:exec({ "sh", "-c", "trap '' TERM; @sleep@ & wait; @sleep@" }, { timeout = "2s", check = false, read_only = true })
    if not r.timed_out then fail(t.name .. " did not time out") end
  end
end)
"#,
            &[("n", &c.node), ("job", &c.job), ("sleep", &sleep)],
        ),
    );
    run(&env, c, &rb).expect_exit(0).run();
    assert_eq!(
        c.wait_no_steps(Duration::from_secs(10)),
        Vec::<String>::new()
    );
    assert!(
        no_process(&sleep, Duration::from_secs(5)),
        "a sleep is left"
    );
}

fn no_process(pattern: &str, limit: Duration) -> bool {
    let end = std::time::Instant::now() + limit;
    loop {
        let st = std::process::Command::new("pgrep")
            .args(["-f", pattern])
            .output()
            .unwrap();
        if !st.status.success() {
            return true;
        }
        if std::time::Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Ctrl-C while a step runs: the run stops (130) and the step is cancelled.
#[test]
fn ctrl_c_cancels_the_step() {
    let c = require_slurm!();
    let _one = c.serial();
    let env = Env::new();
    let scratch = env.scratch();
    let sleep = common::slurm::unique_sleep();
    let rb = env.write(
        "ctrlc.lua",
        &subst(
            r#"runbook { name = "slurm-ctrl-c" }
step("long", function()
  target("slurm:@n@?job=@job@"):exec({ "sh", "-c", "echo $$ >> @pid@; trap '' TERM INT; @sleep@ & wait; @sleep@" }, { read_only = true })
end)
"#,
            &[
                ("n", &c.nodes[1]),
                ("job", &c.job),
                ("pid", &scratch.join("pid").display()),
                ("sleep", &sleep),
            ],
        ),
    );
    let mut running = run(&env, c, &rb).spawn();
    running.wait_file(&scratch.join("pid"), Duration::from_secs(20));
    assert_eq!(c.steps().len(), 1, "the step runs: {:?}", c.steps());
    running.signal(libc::SIGINT);
    assert_eq!(
        running.code(Duration::from_secs(20)),
        130,
        "{}",
        running.output()
    );
    assert_eq!(
        c.wait_no_steps(Duration::from_secs(10)),
        Vec::<String>::new(),
        "{}",
        running.output()
    );
    assert!(
        no_process(&sleep, Duration::from_secs(5)),
        "a sleep is left"
    );
}

/// Selections expand to one target per node: a partition's, a running job's (each
/// target in that job), a host list's, and an inventory group's.
#[test]
fn selections_list_the_nodes_the_scheduler_knows() {
    let c = require_slurm!();
    let _one = c.serial();
    let env = Env::new();
    env.write(
        "inventory.toml",
        &format!(
            "[groups]\ntraining = [\"slurm:job={}\", \"slurm:n2\"]\n",
            c.job
        ),
    );
    let rb = env.write(
        "select.lua",
        &subst(
            r#"runbook { name = "slurm-select" }
local function names(list)
  local out = {}
  for _, t in ipairs(list) do out[#out + 1] = t.name end
  return table.concat(out, " ")
end
step("select", function()
  log.info("partition: " .. names(targets("slurm:partition=@p@")))
  log.info("job: " .. names(targets("slurm:job=@job@")))
  log.info("nodes: " .. names(targets("slurm:nodes=n[2-3]&job=@job@")))
  log.info("group: " .. names(targets("training")))
end)
"#,
            &[("p", &c.partition), ("job", &c.job)],
        ),
    );
    let logs = run(&env, c, &rb).expect_exit(0).run().logs();
    let j = c.job;
    for want in [
        "partition: slurm:n1 slurm:n2 slurm:n3".to_string(),
        format!("job: slurm:n1?job={j} slurm:n2?job={j} slurm:n3?job={j}"),
        format!("nodes: slurm:n2?job={j} slurm:n3?job={j}"),
        format!("group: slurm:n1?job={j} slurm:n2?job={j} slurm:n3?job={j} slurm:n2"),
    ] {
        assert!(logs.contains(&want), "{want}\n{logs:?}");
    }
    // Bad selections fail at the line, naming what is wrong.
    let rb = env.write(
        "bad.lua",
        r#"runbook { name = "slurm-bad" }
step("bad", function() targets("slurm:partiton=x") end)
step("gone", function() targets("slurm:job=999999") end)
"#,
    );
    let out = run(&env, c, &rb).expect_exit(1).run();
    let err = out.step_errors();
    assert!(err.contains("bad.lua:2: targets(\"slurm:partiton=x\"): unknown setting 'partiton'; did you mean 'partition'?"), "{err}");
}

/// A `parallel` over a job's nodes running the same read is one srun launch for all of
/// them (counted by an srun on PATH that logs, then runs the real one); each node gets
/// its own output and exit code, and a node's failure is that node's.
#[test]
fn parallel_over_a_jobs_nodes_is_one_launch() {
    let c = require_slurm!();
    let _one = c.serial();
    let env = Env::new();
    let bin = env.tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = env.tmp.path().join("srun.log");
    let shim = bin.join("srun");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\nprintf 'launch %s %s %s %s %s\\n' \"$1\" \"$2\" \"$3\" \"$4\" \"$5\" >> {}\nexec /usr/bin/srun \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let rb = env.write(
        "fanout.lua",
        &subst(
            r#"runbook { name = "slurm-fanout" }
step("read everywhere", function()
  local rs = parallel(targets("slurm:job=@job@"), function(t)
    local r = t:exec({ "sh", "-c", 'echo "on $SLURMD_NODENAME"; echo "err $SLURMD_NODENAME" >&2; [ "$SLURMD_NODENAME" != n2 ] || exit 4' }, { read_only = true, check = false })
    return t.name .. "=" .. r.code .. ":" .. r.stdout .. ":" .. r.stderr
  end)
  for _, r in ipairs(rs) do log.info(r) end
end)
step("a node fails", function()
  parallel(targets("slurm:job=@job@"), function(t)
    t:exec({ "sh", "-c", '[ "$SLURMD_NODENAME" != n3 ]' }, { read_only = true })
  end)
end)
"#,
            &[("job", &c.job)],
        ),
    );
    let out = run(&env, c, &rb).path_first(&bin).expect_exit(1).run();
    let logs = out.logs();
    let j = c.job;
    for (n, code) in [("n1", 0), ("n2", 4), ("n3", 0)] {
        let want = format!("slurm:{n}?job={j}={code}:on {n}\n:err {n}");
        assert!(logs.contains(&want), "{want:?}\n{logs:?}");
    }
    let err = out.step_error("a node fails");
    assert!(err.contains("parallel(): 1 of 3 failed"), "{err}");
    assert!(err.contains(&format!("slurm:n3?job={j}: ")), "{err}");
    let launches = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = launches.lines().collect();
    assert_eq!(lines.len(), 2, "one launch per parallel: {launches}");
    assert!(
        lines[0].contains("--nodes=3 --ntasks=3 --ntasks-per-node=1 --nodelist=n1,n2,n3"),
        "{launches}"
    );
}

/// Two runs that change the same node exclude each other, whether they name it with
/// or without the job; the second is told who holds it.
#[test]
fn two_runs_on_one_node_exclude_each_other() {
    let c = require_slurm!();
    let _one = c.serial();
    let env = Env::new();
    let scratch = env.scratch();
    let holder = env.write(
        "holder.lua",
        &subst(
            r#"runbook { name = "slurm-holder" }
step("hold", function()
  target("slurm:@n@?job=@job@"):exec({ "sh", "-c", "touch @f@; sleep 6" })
end)
"#,
            &[
                ("n", &c.nodes[2]),
                ("job", &c.job),
                ("f", &scratch.join("holding").display()),
            ],
        ),
    );
    let other = env.write(
        "other.lua",
        &subst(
            r#"runbook { name = "slurm-other", lock = "machine" }
step("change", function() target("slurm:@n@"):exec({ "true" }) end)
"#,
            &[("n", &c.nodes[2])],
        ),
    );
    let mut first = run(&env, c, &holder)
        .env_remove("RUNBOOK_LOCK_FILE")
        .spawn();
    first.wait_file(&scratch.join("holding"), Duration::from_secs(20));
    let out = run(&env, c, &other)
        .env_remove("RUNBOOK_LOCK_FILE")
        .args(["--lock-wait", "0"])
        .expect_exit(1)
        .run();
    let err = out.step_errors();
    assert!(err.contains("slurm:n3 is locked by run"), "{err}");
    assert_eq!(first.code(Duration::from_secs(30)), 0, "{}", first.output());
}

/// Under `work/NODE/` for each node of the cluster: the demo repo with its training code
/// broken, and a stale inductor cache, as the example's clean reset finds them.
fn polluted_nodes(c: &Cluster, work: &std::path::Path) {
    for n in &c.nodes {
        let dir = work.join(n);
        let repo = common::demo_repo(&dir);
        std::fs::write(repo.join("train.py"), "raise SystemExit('hacked')\n").unwrap();
        std::fs::create_dir_all(dir.join("inductor")).unwrap();
        std::fs::write(dir.join("inductor/stale.kernel"), "old").unwrap();
    }
}

/// The shipped example resets every node of the running job, one node at a time and all
/// at once: each node's code is back at the known-good commit, its stale cache kept
/// aside and the cache warmed again, its venv fresh.
#[test]
fn the_example_resets_every_node_of_a_job() {
    let c = require_slurm!();
    let _one = c.serial();
    require_uv!();
    for all in ["false", "true"] {
        let env = Env::new();
        let work = env.scratch();
        polluted_nodes(c, &work);
        let rb = common::repo().join("examples/slurm/clean-reset.lua");
        let w = work.display();
        let out = run(&env, c, &rb)
            .set("job", c.job.to_string())
            .set("all_at_once", all)
            .set("venv", format!("{w}/{{node}}/venv"))
            .set("repo", format!("{w}/{{node}}/dflash"))
            .set("warmup", "warmup.py")
            .set("cache", format!("{w}/{{node}}/inductor"))
            .timeout(Duration::from_secs(240))
            .expect_exit(0)
            .run();
        let logs = out.logs();
        assert!(
            logs.iter()
                .any(|l| l.starts_with(&format!("job {} runs on 3 node(s)", c.job))),
            "{logs:?}"
        );
        for n in &c.nodes {
            let dir = work.join(n);
            let code = std::fs::read_to_string(dir.join("dflash/train.py")).unwrap();
            assert!(!code.contains("hacked"), "{n} (all at once: {all})");
            assert!(!dir.join("inductor/stale.kernel").exists(), "{n}");
            let warmed = std::fs::read_dir(dir.join("inductor")).unwrap().count();
            assert!(warmed > 0, "{n}: the warm-up filled the cache");
            assert!(dir.join("venv/bin/python").exists(), "{n}");
            let kept = std::fs::read_dir(&dir).unwrap().flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("inductor.runbook-kept-")
            });
            assert!(kept, "{n}: the stale cache is kept aside");
        }
        // Every command of the reset ran on the nodes through the job's steps.
        let started =
            pick!(out.run_events(), Event::ActionStarted { target, .. } => target.clone());
        for n in &c.nodes {
            let name = format!("slurm:{n}?job={}", c.job);
            assert!(started.contains(&name), "{name}");
        }
        assert!(c.wait_no_steps(Duration::from_secs(10)).is_empty());
    }
}

/// The example is planned and the plan applied on the job's nodes, one at a time: the
/// applied changes are the plan's, in order (what `tests/plan.rs` proves for the other
/// runbooks and examples).
#[test]
fn the_example_applies_exactly_its_plan() {
    let c = require_slurm!();
    let _one = c.serial();
    require_uv!();
    let env = Env::new();
    let work = env.scratch();
    polluted_nodes(c, &work);
    let rb = common::repo().join("examples/slurm/clean-reset.lua");
    let w = work.display();
    let plan_file = env.tmp.path().join("plan.json");
    let sets = [
        format!("job={}", c.job),
        "all_at_once=false".into(),
        format!("venv={w}/{{node}}/venv"),
        format!("repo={w}/{{node}}/dflash"),
        "warmup=warmup.py".into(),
        format!("cache={w}/{{node}}/inductor"),
    ];
    let mut plan = Run::cmd(&env, ["plan"]).env("SLURM_CONF", &c.conf).arg(&rb);
    for s in &sets {
        plan = plan.args(["--set", s]);
    }
    plan.arg("-o")
        .arg(&plan_file)
        .timeout(Duration::from_secs(120))
        .expect_exit(0)
        .run();
    let planned: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan_file).unwrap()).unwrap();
    let planned: Vec<(String, String)> = planned["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let text = |key: &str| c[key].as_str().unwrap().to_string();
            (text("target"), text("shown"))
        })
        .collect();
    assert!(planned.len() >= 3 * 3, "{planned:?}");
    let out = Run::cmd(&env, ["apply"])
        .env("SLURM_CONF", &c.conf)
        .arg(&plan_file)
        .args(["--yes", "--json"])
        .timeout(Duration::from_secs(240))
        .expect_exit(0)
        .run();
    let applied: Vec<(String, String)> = pick!(
        out.run_events(),
        Event::ActionStarted { effect: Effect::Change, target, command, .. }
            => (target.clone(), command.clone())
    );
    assert_eq!(applied, planned);
    for n in &c.nodes {
        let code = std::fs::read_to_string(work.join(n).join("dflash/train.py")).unwrap();
        assert!(!code.contains("hacked"), "{n}");
    }
    assert!(c.wait_no_steps(Duration::from_secs(10)).is_empty());
}

/// Containers compose as for SSH: `slurm(node):pct(200)` runs `pct exec 200 -- argv`
/// as the step's task on the node (the `pct` double, which srun finds on the PATH it
/// passes on), env and exit code included; a missing container fails saying so.
#[test]
fn a_container_on_a_slurm_node() {
    let c = require_slurm!();
    let _one = c.serial();
    let env = Env::new();
    let root = env.tmp.path().join("pct");
    std::fs::create_dir_all(root.join("ct/200/tmp")).unwrap();
    std::fs::create_dir_all(root.join("ct/200/root")).unwrap();
    let rb = env.write(
        "pct.lua",
        &subst(
            r#"runbook { name = "slurm-pct" }
step("in the container", function()
  local box = slurm("@n@", { job = @job@ }):pct(200)
  local r = box:exec({ "sh", "-c", 'echo "$A" >> /tmp/in-ct; cat /tmp/in-ct; exit 5' }, { env = { A = "v a l" }, check = false, read_only = true })
  log.info(box.name .. "=" .. r.code .. ":" .. r.stdout)
end)
step("missing", function()
  slurm("@n@", { job = @job@ }):pct(999):exec({ "true" }, { check = false, read_only = true })
end)
"#,
            &[("n", &c.nodes[1]), ("job", &c.job)],
        ),
    );
    let out = run(&env, c, &rb)
        .path_first(common::repo().join("tests/bin"))
        .env("PCT_DOUBLE_ROOT", &root)
        .expect_exit(1)
        .run();
    let logs = out.logs();
    let want = format!("slurm:{}?job={}/ct200=5:v a l", c.nodes[1], c.job);
    assert!(logs.contains(&want), "{want}\n{logs:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("ct/200/tmp/in-ct")).unwrap(),
        "v a l\n"
    );
    let err = out.step_error("missing");
    assert!(err.contains("cannot run a command on slurm:"), "{err}");
    assert!(err.contains("999"), "{err}");
    // The session's step (srun, then pct exec) ends with the run.
    assert_eq!(
        c.wait_no_steps(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

/// A step of the cluster's job that is not runbook's: `sleep N` on `node`, and its id
/// (`JOB.STEP`) once `squeue` shows it.
// The child is the caller's to wait for (clippy sees only the panics on the way).
#[allow(clippy::zombie_processes)]
fn foreign_step(c: &Cluster, node: &str, sleep: &str) -> (std::process::Child, String) {
    let mut child = std::process::Command::new("srun")
        .args([
            format!("--jobid={}", c.job),
            "--overlap".into(),
            "--nodes=1".into(),
            "--ntasks=1".into(),
            format!("--nodelist={node}"),
            "--quiet".into(),
            "sh".into(),
            "-c".into(),
            sleep.into(),
        ])
        .env("SLURM_CONF", &c.conf)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("srun starts");
    let end = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(id) = c.steps().iter().find_map(|l| {
            let (id, name) = l.split_once(' ')?;
            (name == "sh").then(|| id.to_string())
        }) {
            return (child, id);
        }
        if std::time::Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the foreign step never ran");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A command's own stderr cannot speak for runbook (issue 25, item 8): a task line it
/// prints, naming another step of the job, is only its output, and its timeout cancels
/// its own step, never that one.
#[test]
fn a_forged_task_line_does_not_get_another_step_cancelled() {
    let c = require_slurm!();
    let _one = c.serial();
    let env = Env::new();
    let (mut victim, id) = foreign_step(
        c,
        &c.nodes[2],
        &format!("sleep {}", 500_000 + std::process::id()),
    );
    let rb = env.write(
        "forged-task.lua",
        &subst(
            r#"runbook { name = "slurm-forged-task" }
step("forge", function()
  local r = target("slurm:@n@?job=@job@"):exec({ "sh", "-c", "printf '\\036runbook-slurm-task=%s 0 @n@\\n' @id@ >&2; printf '\\036runbook-slurm-exit=0\\n' >&2; exec sleep 60" },
    { timeout = "3s", check = false, read_only = true })
  if not r.timed_out then fail("did not time out: " .. r.code) end
  log.info("stderr=" .. r.stderr)
end)
"#,
            &[("n", &c.node), ("job", &c.job), ("id", &id)],
        ),
    );
    let out = run(&env, c, &rb).expect_exit(0).run();
    // runbook's own step went; the other one runs on.
    let end = std::time::Instant::now() + Duration::from_secs(10);
    let left = loop {
        let left: Vec<String> = c.steps();
        if left.len() <= 1 || std::time::Instant::now() > end {
            break left;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let still = left.iter().any(|l| l.starts_with(&format!("{id} ")));
    // Gone already where it was cancelled (scancel then fails).
    let _ = std::process::Command::new("scancel")
        .arg(&id)
        .env("SLURM_CONF", &c.conf)
        .output();
    let _ = victim.wait();
    assert!(still, "the foreign step {id} was cancelled: {left:?}");
    assert_eq!(left.len(), 1, "{left:?}");
    let logs = out.logs();
    assert!(
        logs.iter()
            .any(|l| l.contains(&format!("\u{1e}runbook-slurm-task={id} 0 "))),
        "the forged line is the command's output: {logs:?}"
    );
    assert_eq!(
        c.wait_no_steps(Duration::from_secs(10)),
        Vec::<String>::new()
    );
}

/// A group report a command prints on its own stderr (here in a launch on all of a job's
/// nodes, where every task's lines come through one srun) is only output: it is not
/// recorded as the command's group, and `--resume` after the run was killed does not
/// stop the process it named.
#[test]
fn a_forged_group_report_is_not_stopped_by_resume() {
    let c = require_slurm!();
    let _one = c.serial();
    let env = Env::new();
    let scratch = env.scratch();
    // The victim: a process of this machine (the nodes' too) leading its own group.
    let mut victim = std::process::Command::new("setsid")
        .args(["sleep", &(600_000 + std::process::id()).to_string()])
        .spawn()
        .unwrap();
    let pid = victim.id();
    std::thread::sleep(Duration::from_millis(300));
    let rb = env.write(
        "forged-group.lua",
        &subst(
            r#"runbook { name = "slurm-forged-group" }
step("fan", function()
  parallel(targets("slurm:job=@job@"), function(t)
    t:exec({ "sh", "-c", '[ -e @done@ ] && exit 0; printf "\\036runbook-pgid=%s %s %s\\n" @pid@ "$(cat /proc/sys/kernel/random/boot_id)" "$(cat /proc/@pid@/stat)" >&2; sleep 1; touch @dir@/"$SLURMD_NODENAME"; exec sleep 60' }, { read_only = true })
  end)
end)
"#,
            &[
                ("job", &c.job),
                ("done", &scratch.join("done").display()),
                ("pid", &pid),
                ("dir", &scratch.display()),
            ],
        ),
    );
    let mut first = Run::new(&env, &rb)
        .env("SLURM_CONF", &c.conf)
        .yes()
        .json()
        .spawn();
    for n in &c.nodes {
        first.wait_file(&scratch.join(n), Duration::from_secs(30));
    }
    std::thread::sleep(Duration::from_millis(500));
    first.signal(libc::SIGKILL);
    let _ = first.wait(Duration::from_secs(10));
    let planted: Vec<Event> = env
        .last_record()
        .into_iter()
        .filter(|e| matches!(e, Event::ActionPgid { pgid, .. } if *pgid == pid))
        .collect();
    std::fs::write(scratch.join("done"), "").unwrap();
    let resumed = run(&env, c, &rb).args(["--resume", "last"]).run();
    let alive = victim.try_wait().unwrap().is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(
        alive,
        "--resume stopped the process a command named: {}",
        resumed.describe()
    );
    assert!(
        planted.is_empty(),
        "the forged group was recorded: {planted:?}"
    );
    resumed.assert_exit(0);
    assert_eq!(
        c.wait_no_steps(Duration::from_secs(15)),
        Vec::<String>::new()
    );
}

/// `file.put` and `file.get` on a node, as job steps: the bytes reach the node through
/// srun's stdin whole (a NUL and no last newline included), and the second run changes
/// nothing.
#[test]
fn files_are_put_and_read_on_a_node() {
    let c = require_slurm!();
    let _one = c.serial();
    let env = Env::new();
    let path = env.scratch().join("node.conf");
    let rb = env.write(
        "files.lua",
        &subst(
            r#"runbook { name = "slurm-files" }
local node = target("slurm:@n@")
step("files", function()
  local r = file.put(node, { path = "@path@", content = "a\0b\nno newline", mode = "0640" })
  local got = file.get(node, "@path@")
  log.info(tostring(r.changed) .. " " .. #got.content .. " " .. got.mode .. " " .. got.sha256)
end)
"#,
            &[("n", &c.node), ("path", &path.display())],
        ),
    );
    let want = b"a\0b\nno newline";
    let sha = {
        use sha2::Digest;
        sha2::Sha256::digest(want)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let out = run(&env, c, &rb).expect_exit(0).run();
    assert_eq!(out.logs(), vec![format!("true 14 0640 {sha}")]);
    assert_eq!(std::fs::read(&path).unwrap(), want);
    let out = run(&env, c, &rb).expect_exit(0).run();
    assert_eq!(out.logs(), vec![format!("false 14 0640 {sha}")]);
}
