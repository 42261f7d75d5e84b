//! An adversarial review of issue 25's fixes (items 1, 2, 3, 9, 10, 11, 12, 13): each test
//! is an attack that still works when it was written, and passes once the break is fixed.
use crate::common::*;
use std::path::Path;

fn victim(env: &Env, name: &str) -> std::path::PathBuf {
    let dir = env.tmp.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("x"), "keep me\n").unwrap();
    git(&dir, &["init", "-q"]);
    dir
}

fn intact(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("x")).is_ok_and(|s| s == "keep me\n")
}

/// Item 3: `read_only = true` on commands that delete `x` (each one checked by hand to
/// delete or empty it), which the classifier reads as safe: each runs in a dry-run.
/// Wrappers it knows but mis-parses (`env -iS`, `flock FILE CMD`, `xargs --replace`),
/// shell forms it does not read (bash brace expansion, `coproc`), `git -c alias.X=!…`,
/// overwriting programs beside `mv` (`cp`), a "quiet" file that is not
/// (`/dev/fd/../..`), common wrappers it does not know (`taskset`, `script -c`), runners
/// it knows only with `--` (`runuser`, `unshare`, as `flock`), and `git switch
/// --discard-changes` (here the file written after the commit is what is lost).
#[test]
fn review_reads_the_classifier_calls_safe_delete_in_a_dry_run() {
    let env = Env::new();
    let mut cases = vec![
        r#"{ "env", "-iS", "/bin/rm x" }"#,
        r#"{ "flock", "lk", "rm", "x" }"#,
        r#"{ "flock", "lk", "-c", "rm x" }"#,
        r#"{ "xargs", "--replace", "rm", "{}" }"#,
        r#"{ "bash", "-c", "{rm,x}" }"#,
        r#"{ "bash", "-c", "coproc rm x; wait" }"#,
        r#"{ "git", "-c", "alias.zap=!rm x", "zap" }"#,
        r#"{ "cp", "/dev/null", "x" }"#,
        r#"{ "taskset", "1", "rm", "x" }"#,
        r#"{ "script", "-qc", "rm x", "/dev/null" }"#,
        // bash imports a function from its environment: `true` is `rm x`.
        r#"{ "env", "BASH_FUNC_true%%=() { rm x; }", "bash", "-c", "true" }"#,
    ];
    // These two run their command only for root.
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    if root {
        cases.push(r#"{ "runuser", "-u", "root", "rm", "x" }"#);
        cases.push(r#"{ "unshare", "rm", "x" }"#);
    }
    let mut wrong = Vec::new();
    for (n, argv) in cases.iter().enumerate() {
        let dir = victim(&env, &format!("case{n}"));
        let rb = env.write(
            &format!("read{n}.lua"),
            &subst(
                r#"runbook { name = "read@n@" }
local here = target("local")
step("look", function()
  here:exec(@argv@, { read_only = true, cwd = @dir@, stdin = "x\n" })
end)
"#,
                &[
                    ("n", &n),
                    ("argv", &argv),
                    ("dir", &format!("{:?}", dir.display().to_string())),
                ],
            ),
        );
        let out = Run::cmd(&env, ["run", "--dry-run"]).arg(&rb).run();
        if !intact(&dir) || out.code() == 0 {
            wrong.push(format!(
                "{argv}: exit {}, x intact: {}",
                out.code(),
                intact(&dir)
            ));
        }
    }
    // The command's own env is not read at all: a function bash imports (`true` is
    // `rm x`), and `BASH_ENV`, a file bash runs first.
    for (n, env_table) in [
        r#"{ ["BASH_FUNC_true%%"] = "() { rm x; }" }"#,
        r#"{ BASH_ENV = "e.sh" }"#,
    ]
    .iter()
    .enumerate()
    {
        let dir = victim(&env, &format!("env{n}"));
        std::fs::write(dir.join("e.sh"), "rm x\n").unwrap();
        let rb = env.write(
            &format!("env{n}.lua"),
            &subst(
                r#"runbook { name = "env@n@" }
local here = target("local")
step("look", function()
  here:exec({ "bash", "-c", "true" }, { read_only = true, cwd = @dir@, env = @env_table@ })
end)
"#,
                &[
                    ("n", &n),
                    ("dir", &format!("{:?}", dir.display().to_string())),
                    ("env_table", &env_table),
                ],
            ),
        );
        let out = Run::cmd(&env, ["run", "--dry-run"]).arg(&rb).run();
        if !intact(&dir) || out.code() == 0 {
            wrong.push(format!(
                "bash -c true with env {env_table}: exit {}: {}",
                out.code(),
                out.stderr_text()
            ));
        }
    }
    // `git switch --discard-changes`: the edit made since the commit is lost.
    let dir = victim(&env, "switch");
    std::fs::write(dir.join("x"), "old\n").unwrap();
    git(&dir, &["add", "x"]);
    git(
        &dir,
        &[
            "-c",
            "user.email=a@b",
            "-c",
            "user.name=a",
            "commit",
            "-qm",
            "x",
        ],
    );
    std::fs::write(dir.join("x"), "keep me\n").unwrap();
    let branch = git(&dir, &["branch", "--show-current"]).trim().to_string();
    let rb = env.write(
        "switch.lua",
        &subst(
            r#"runbook { name = "switch" }
local here = target("local")
step("look", function()
  here:exec({ "git", "switch", "-q", "--discard-changes", @branch@ }, { read_only = true, cwd = @dir@ })
end)
"#,
            &[
                ("branch", &format!("{branch:?}")),
                ("dir", &format!("{:?}", dir.display().to_string())),
            ],
        ),
    );
    let out = Run::cmd(&env, ["run", "--dry-run"]).arg(&rb).run();
    if !intact(&dir) || out.code() == 0 {
        wrong.push(format!("git switch --discard-changes: exit {}", out.code()));
    }
    // `/dev/fd/../../..` is `/`: `> /dev/fd/../../../DIR/x` truncates DIR/x.
    let dir = victim(&env, "devfd");
    let rb = env.write(
        "devfd.lua",
        &subst(
            r#"runbook { name = "devfd" }
local here = target("local")
step("look", function()
  here:shell("echo > /dev/fd/../../..@dir@/x", { read_only = true })
end)
"#,
            &[("dir", &dir.display())],
        ),
    );
    let out = Run::cmd(&env, ["run", "--dry-run"]).arg(&rb).run();
    if !intact(&dir) || out.code() == 0 {
        wrong.push(format!("> /dev/fd/../../..DIR/x: exit {}", out.code()));
    }
    assert!(
        wrong.is_empty(),
        "reads that deleted:\n{}",
        wrong.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// Item 1: a saved plan's readable parts, edited.

fn plan_of(env: &Env, rb: &Path) -> serde_json::Value {
    let out = Run::cmd(env, ["plan"])
        .arg(rb)
        .arg("-o")
        .arg(env.tmp.path().join("plan.json"))
        .run();
    assert_eq!(out.code(), 0, "plan: {}", out.stderr_text());
    serde_json::from_str(&std::fs::read_to_string(env.tmp.path().join("plan.json")).unwrap())
        .unwrap()
}

fn save(env: &Env, plan: &serde_json::Value) {
    std::fs::write(
        env.tmp.path().join("plan.json"),
        serde_json::to_string_pretty(plan).unwrap(),
    )
    .unwrap();
}

fn apply_yes(env: &Env) -> (i32, String) {
    let out = Run::cmd(env, ["apply"])
        .arg(env.tmp.path().join("plan.json"))
        .arg("--yes")
        .run();
    (out.code(), out.stderr_text())
}

fn plan_text(env: &Env) -> String {
    let out = Run::cmd(env, ["plan"])
        .arg(env.tmp.path().join("plan.json"))
        .run();
    out.stdout_text()
}

/// A log each change appends its name to: the order the changes really ran in.
fn ran(env: &Env) -> String {
    std::fs::read_to_string(env.tmp.path().join("log")).unwrap_or_default()
}

/// The plan's changes put in another order: its text and Markdown ("applying this plan
/// makes exactly the changes listed below, in this order") show the backup first, and
/// apply deletes first. Across steps (the plan's order is not checked against the
/// steps') and within a step (any order is let through, for `parallel()`).
#[test]
fn review_reordered_changes_are_shown_in_an_order_that_does_not_run() {
    let mut wrong = Vec::new();
    for one_step in [false, true] {
        let env = Env::new();
        let log = env.tmp.path().join("log");
        let body = if one_step {
            subst(
                r#"runbook { name = "order" }
local here = target("local")
step("all", function()
  here:shell("echo delete >> @l@", { summary = "delete the data" })
  here:shell("echo backup >> @l@", { summary = "back up the data" })
end)
"#,
                &[("l", &log.display())],
            )
        } else {
            subst(
                r#"runbook { name = "order" }
local here = target("local")
step("delete", function()
  here:shell("echo delete >> @l@", { summary = "delete the data" })
end)
step("backup", function()
  here:shell("echo backup >> @l@", { summary = "back up the data" })
end)
"#,
                &[("l", &log.display())],
            )
        };
        let rb = env.write("order.lua", &body);
        let mut plan = plan_of(&env, &rb);
        let changes = plan["changes"].as_array_mut().unwrap();
        changes.swap(0, 1);
        save(&env, &plan);
        let text = plan_text(&env);
        let shown_backup_first = text.find("back up the data") < text.find("delete the data");
        let (code, stderr) = apply_yes(&env);
        if code != 2 && shown_backup_first && ran(&env) == "delete\nbackup\n" {
            wrong.push(format!(
                "one step: {one_step}: shown backup first:\n{text}\napply exit {code}, ran {:?}: {stderr}",
                ran(&env)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A `***` typed into a command that holds no secret turns off the check of its text
/// against its digest (`Change::masked`): the edited plan is shown, apply makes change 1
/// and only then refuses change 2, instead of refusing the plan before anything runs.
#[test]
fn review_a_fake_mask_defers_the_command_check_past_the_first_change() {
    let env = Env::new();
    let log = env.tmp.path().join("log");
    let rb = env.write(
        "mask.lua",
        &subst(
            r#"runbook { name = "mask" }
local here = target("local")
step("one", function()
  here:shell("echo one >> @l@")
end)
step("two", function()
  here:shell("echo two >> @l@")
end)
"#,
            &[("l", &log.display())],
        ),
    );
    let mut plan = plan_of(&env, &rb);
    plan["changes"][1]["command"] = "echo two >> /dev/null # *** harmless".into();
    save(&env, &plan);
    let (code, stderr) = apply_yes(&env);
    assert!(
        code == 2 && ran(&env).is_empty(),
        "apply exit {code}, ran {:?}: {stderr}",
        ran(&env)
    );
}

/// What a plan says it read and what its steps said are shown (text: "step … says";
/// Markdown: "What the plan read", "What the steps said") and never checked: an edited
/// plan tells the reviewer the backup was verified, and applies.
#[test]
fn review_edited_read_summaries_and_notes_are_shown_and_applied() {
    let env = Env::new();
    let log = env.tmp.path().join("log");
    let rb = env.write(
        "notes.lua",
        &subst(
            r#"runbook { name = "notes" }
local here = target("local")
step("one", function()
  local r = here:exec({ "true" }, { read_only = true, summary = "look at the backup" })
  log.info("backup missing")
  here:shell("echo one >> @l@")
end)
"#,
            &[("l", &log.display())],
        ),
    );
    let mut plan = plan_of(&env, &rb);
    plan["reads"][0]["summary"] = "verified the backup of /srv (sha256 matches)".into();
    plan["steps"][0]["notes"][0]["message"] = "backup verified".into();
    save(&env, &plan);
    let text = plan_text(&env);
    let (code, stderr) = apply_yes(&env);
    assert!(
        code == 2 || !text.contains("backup verified"),
        "shown:\n{text}\napply exit {code}, ran {:?}: {stderr}",
        ran(&env)
    );
}

// ---------------------------------------------------------------------------------------
// Item 2: the ssh_config and inventory apply reaches the targets with, as its prompt
// shows them.

/// `apply PLAN --ssh-config OTHER` (no `--yes`): the prompt names the plan's ssh_config,
/// and OTHER is the one the targets are then reached with (`ssh -G -F OTHER` runs its
/// `Match exec`). And an `inventory.toml` that came into the directory after the plan was
/// made is loaded and used, and the prompt names no inventory at all.
#[test]
fn review_the_prompt_names_another_ssh_config_and_inventory_than_apply_uses() {
    let env = Env::new();
    let dir = env.scratch();
    let planned = env.tmp.path().join("planned_config");
    let other = env.tmp.path().join("other_config");
    for cfg in [&planned, &other] {
        std::fs::write(
            cfg,
            "Host node1\n  HostName 127.0.0.1\n  Port 1\n  User root\n",
        )
        .unwrap();
    }
    let rb = repo().join("tests/runbooks/plan/remote.lua");
    let out = Run::cmd(&env, ["plan"])
        .arg(&rb)
        .args(["--offline", "--set", "host=node1", "--set"])
        .arg(format!("dir={}", dir.display()))
        .arg("--ssh-config")
        .arg(&planned)
        .arg("-o")
        .arg(env.tmp.path().join("plan.json"))
        .run();
    assert_eq!(out.code(), 0, "{}", out.stderr_text());
    std::fs::write(
        env.tmp.path().join("inventory.toml"),
        "[hosts.node1]\naddress = \"127.0.0.1\"\nport = 1\nuser = \"root\"\n",
    )
    .unwrap();
    let out = Run::cmd(&env, ["apply"])
        .arg(env.tmp.path().join("plan.json"))
        .arg("--ssh-config")
        .arg(&other)
        .run();
    let said = out.stderr_text();
    let other_shown = std::fs::canonicalize(&other).unwrap().display().to_string();
    assert!(
        said.contains(&other_shown) && said.contains("inventory.toml"),
        "the prompt must name the ssh_config ({other_shown}) and inventory apply uses: exit {}: {said}",
        out.code()
    );
}
