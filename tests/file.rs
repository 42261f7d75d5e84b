//! `file.put`, `file.template`, `file.get` for real: on this machine, through a real
//! sshd (the host and a `pct` container behind it), and in a real busybox LXC container.
//! The diff is in the preview and the plan, secrets masked; a second run changes
//! nothing; a saved plan writes exactly the bytes that were reviewed, or refuses.
use crate::common::lxc::{changes_started, Ct, CtRun, EnvMode};
use crate::common::sshd::Fleet;
use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const TOKEN: &str = "s3cr3t-file-TOKEN-9";

/// The template every test renders: a list, a secret, a number.
const TEMPLATE: &str = "# {{ name }}\n{% for u in upstreams %}\nserver {{ u }};\n{% endfor %}\ntoken = {{ token }}\nport = {{ port }}\n";

/// A runbook that puts `a.conf` (`content` as given), renders `app.conf` from the
/// template, and reads `a.conf` back, in `@dir@` on `@target@`; it logs each result.
fn runbook(target: &str, dir: &str, content: &str, extra: &str) -> String {
    subst(
        r#"runbook { name = "files", params = { token = { type = "string", secret = true, required = true }, port = { type = "number", default = 80 } } }
local box = @target@
local function show(what, r)
  log.info(("%s changed=%s created=%s planned=%s backup=%s"):format(what, tostring(r.changed),
    tostring(r.created), tostring(r.planned), tostring(r.backup)))
end
step("files", function()
  show("put", file.put(box, { path = "@dir@/a.conf", content = "@content@", mode = "0640"@extra@ }))
  show("template", file.template(box, { path = "@dir@/app.conf", src = "templates/app.conf.j2",
    vars = { name = "app", upstreams = { "app1.example:8000", "app2.example:8000" }, token = params.token, port = params.port } }))
  local got = file.get(box, "@dir@/a.conf", { missing_ok = true })
  if got then log.info("got " .. got.content .. " " .. got.mode .. " " .. got.size) else log.info("got nothing") end
end)
"#,
        &[
            ("target", &target),
            ("dir", &dir),
            ("content", &content),
            ("extra", &extra),
        ],
    )
}

fn write_runbook(env: &Env, body: &str) -> std::path::PathBuf {
    env.write("templates/app.conf.j2", TEMPLATE);
    env.write("files.lua", body)
}

fn rendered(port: u32) -> String {
    format!("# app\nserver app1.example:8000;\nserver app2.example:8000;\ntoken = {TOKEN}\nport = {port}\n")
}

/// The diffs of the planned changes, in order.
fn diffs(out: &Output) -> Vec<Option<String>> {
    pick!(
        out.run_events(),
        Event::ActionPlanned { effect: Effect::Change, diff, .. } => diff.clone()
    )
}

/// `runbook plan RB -o PLAN`.
fn plan_to<'e>(env: &'e Env, rb: &Path, plan: &Path) -> Run<'e> {
    Run::cmd(
        env,
        [
            "plan".as_ref(),
            rb.as_os_str(),
            "-o".as_ref(),
            plan.as_os_str(),
        ],
    )
}

fn mode_of(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn writes_once_shows_the_diff_and_then_changes_nothing() {
    let env = Env::new();
    let dir = env.scratch().join("etc");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.display().to_string();
    let rb = write_runbook(&env, &runbook("target(\"local\")", &d, "x = 1\\n", ""));
    let run = || Run::new(&env, &rb).env("RUNBOOK_PARAM_TOKEN", TOKEN).json();

    // The dry-run: both diffs, the secret masked, nothing written; the read of a file a
    // planned change writes finds nothing yet.
    let out = run().dry_run().expect_exit(0).run();
    let planned = diffs(&out);
    assert_eq!(planned.len(), 2, "{}", out.describe());
    let put = planned[0].as_deref().unwrap();
    assert_eq!(
        put,
        format!("--- /dev/null\n+++ {d}/a.conf\n@@ -0,0 +1 @@\n+x = 1")
    );
    let template = planned[1].as_deref().unwrap();
    assert!(template.contains("+token = ***\n"), "{template}");
    assert!(
        template.contains("+server app2.example:8000;\n"),
        "{template}"
    );
    assert!(
        !out.stdout_text().contains(TOKEN),
        "the secret is masked everywhere"
    );
    assert!(!dir.join("a.conf").exists() && !dir.join("app.conf").exists());
    assert_eq!(
        out.logs(),
        vec![
            "put changed=true created=true planned=true backup=nil",
            "template changed=true created=true planned=true backup=nil",
            "got nothing",
        ]
    );
    // The commands name the content by its size and digest, never as text.
    let shown = pick!(
        out.run_events(),
        Event::ActionPlanned { effect: Effect::Change, command, summary, .. } => (summary.clone(), command.clone())
    );
    assert_eq!(shown[0].0, format!("create {d}/a.conf (6 B, mode 0640)"));
    assert!(
        shown[0]
            .1
            .starts_with(&format!("file-put.sh {d}/a.conf old=none new=")),
        "{}",
        shown[0].1
    );
    assert!(
        shown[0]
            .1
            .contains(" mode=0640 < (stdin: 6 bytes of data, sha256 "),
        "{}",
        shown[0].1
    );
    assert!(!shown[0].1.contains("x = 1"), "{}", shown[0].1);
    // A saved plan has the diffs, the secret masked in them too.
    let plan = env.tmp.path().join("files-plan.json");
    plan_to(&env, &rb, &plan)
        .env("RUNBOOK_PARAM_TOKEN", TOKEN)
        .expect_exit(0)
        .run();
    let saved = std::fs::read_to_string(&plan).unwrap();
    assert!(saved.contains("+token = ***"), "{saved}");
    assert!(!saved.contains(TOKEN), "{saved}");

    // The real run writes both; the record has the diff, never the secret.
    let out = run().yes().expect_exit(0).run();
    assert_eq!(
        std::fs::read_to_string(dir.join("a.conf")).unwrap(),
        "x = 1\n"
    );
    assert_eq!(mode_of(&dir.join("a.conf")), 0o640);
    assert_eq!(
        std::fs::read_to_string(dir.join("app.conf")).unwrap(),
        rendered(80)
    );
    assert_eq!(
        out.logs(),
        vec![
            "put changed=true created=true planned=false backup=nil",
            "template changed=true created=true planned=false backup=nil",
            "got x = 1\n 0640 6",
        ]
    );
    let started = pick!(
        env.last_record(),
        Event::ActionStarted { effect: Effect::Change, diff, .. } => diff.clone()
    );
    assert_eq!(started.len(), 2);
    assert!(started[1].as_deref().unwrap().contains("+token = ***"));
    assert!(!env.all_records().contains(TOKEN));
    let dir_names = |d: &Path| {
        let mut n: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    };
    assert_eq!(
        dir_names(&dir),
        vec!["a.conf", "app.conf"],
        "no temp file left"
    );

    // Again: the same bytes and mode, no change at all.
    let out = run().yes().expect_exit(0).run();
    assert_eq!(changes_started(&out), 0, "{}", out.describe());
    assert_eq!(
        &out.logs()[..2],
        [
            "put changed=false created=false planned=false backup=nil",
            "template changed=false created=false planned=false backup=nil",
        ]
    );

    // New content and a new param: each diff says what changes; backup keeps the old.
    let rb = write_runbook(
        &env,
        &runbook("target(\"local\")", &d, "x = 2\\n", ", backup = true"),
    );
    let out = Run::new(&env, &rb)
        .env("RUNBOOK_PARAM_TOKEN", TOKEN)
        .set("port", "81")
        .json()
        .dry_run()
        .expect_exit(0)
        .run();
    let planned = diffs(&out);
    assert_eq!(
        planned[0].as_deref().unwrap(),
        format!("--- {d}/a.conf (before)\n+++ {d}/a.conf (after)\n@@ -1 +1 @@\n-x = 1\n+x = 2")
    );
    let template = planned[1].as_deref().unwrap();
    assert!(template.contains("\n-port = 80\n+port = 81"), "{template}");
    assert!(template.contains("\n token = ***\n"), "{template}");
    let out = Run::new(&env, &rb)
        .env("RUNBOOK_PARAM_TOKEN", TOKEN)
        .set("port", "81")
        .json()
        .yes()
        .expect_exit(0)
        .run();
    let backup = out.logs()[0].split("backup=").nth(1).unwrap().to_string();
    assert!(
        backup.starts_with(&format!("{d}/a.conf.")) && backup.ends_with("Z~"),
        "{backup}"
    );
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), "x = 1\n");
    assert_eq!(
        std::fs::read_to_string(dir.join("a.conf")).unwrap(),
        "x = 2\n"
    );
    assert_eq!(mode_of(&dir.join("a.conf")), 0o640, "the mode given");

    // Only the mode differs: set, the bytes as they are, no diff.
    std::fs::set_permissions(dir.join("a.conf"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = Run::new(&env, &rb)
        .env("RUNBOOK_PARAM_TOKEN", TOKEN)
        .set("port", "81")
        .json()
        .yes()
        .expect_exit(0)
        .run();
    let changed = pick!(
        out.run_events(),
        Event::ActionStarted { effect: Effect::Change, summary, diff, .. } => (summary.clone(), diff.clone())
    );
    assert_eq!(
        changed,
        vec![(
            format!("set mode of {d}/a.conf (mode 0600 → 0640, the old file kept as a backup)"),
            None
        )]
    );
    assert_eq!(mode_of(&dir.join("a.conf")), 0o640);
    assert_eq!(
        std::fs::read_to_string(dir.join("a.conf")).unwrap(),
        "x = 2\n"
    );
}

/// A plan holds the run to the bytes that were reviewed and to the file as it was read:
/// the plan shows the diff (text and Markdown), apply writes exactly those bytes; a file
/// on the target that changed after the plan, or a `src` beside the runbook that did,
/// is refused before anything is written.
#[test]
fn a_saved_plan_writes_the_reviewed_bytes_or_refuses() {
    let env = Env::new();
    let dir = env.scratch().join("srv");
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("app.ini");
    std::fs::write(&conf, "a = 1\nb = 2\n").unwrap();
    env.write("files/app.ini", "a = 1\nb = 3\n");
    let rb = env.write(
        "deploy.lua",
        &subst(
            r#"runbook { name = "deploy" }
step("config", function()
  file.put(target("local"), { path = "@conf@", src = "files/app.ini" })
end)
"#,
            &[("conf", &conf.display())],
        ),
    );
    let plan = env.tmp.path().join("plan.json");
    let make = || plan_to(&env, &rb, &plan).expect_exit(0).run();
    let apply = || {
        Run::cmd(
            &env,
            [
                "apply".as_ref(),
                plan.as_os_str(),
                "--yes".as_ref(),
                "--json".as_ref(),
            ],
        )
        .run()
    };

    let shown = make().stdout_text();
    assert!(
        shown.contains("-b = 2\n") && shown.contains("+b = 3\n"),
        "{shown}"
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let diff = saved["changes"][0]["diff"].as_str().unwrap();
    assert!(
        diff.ends_with("@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 3"),
        "{diff}"
    );
    assert!(saved["changes"][0]["stdin_sha256"].is_string());
    let md = Run::cmd(
        &env,
        [
            "plan".as_ref(),
            plan.as_os_str(),
            "--format".as_ref(),
            "md".as_ref(),
        ],
    )
    .expect_exit(0)
    .run()
    .stdout_text();
    assert!(
        md.contains("   - what it does to the file:\n\n     ```diff\n")
            && md.contains("     +b = 3\n"),
        "{md}"
    );
    let out = apply();
    assert_eq!(out.code(), 0, "{}", out.step_errors());
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), "a = 1\nb = 3\n");

    // The file on the target changed after the plan: not written.
    env.write("files/app.ini", "a = 1\nb = 4\n");
    make();
    std::fs::write(&conf, "edited by hand\n").unwrap();
    let out = apply();
    assert_ne!(out.code(), 0, "{}", out.describe());
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), "edited by hand\n");
    assert!(
        out.step_errors().contains("not one that was confirmed"),
        "{}",
        out.describe()
    );

    // The bytes beside the runbook changed after the plan: not written either.
    std::fs::write(&conf, "a = 1\nb = 3\n").unwrap();
    make();
    env.write("files/app.ini", "a = 1\nb = 5\n");
    let out = apply();
    assert_ne!(out.code(), 0, "{}", out.describe());
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), "a = 1\nb = 3\n");
    // The command names the new bytes' sha256 as well as its stdin holding them.
    assert!(
        out.step_errors().contains("not one that was confirmed"),
        "{}",
        out.describe()
    );
}

#[test]
fn a_src_or_template_outside_the_runbooks_folder_is_refused() {
    let env = Env::new();
    env.write("secret.txt", "not for the target");
    env.write("rb/templates/t.j2", "{{ x }}");
    std::os::unix::fs::symlink(
        env.tmp.path().join("secret.txt"),
        env.tmp.path().join("rb/link"),
    )
    .unwrap();
    let out_dir = env.scratch();
    let cases = [
        ("file.put", "src = \"../secret.txt\""),
        ("file.put", "src = \"link\""),
        (
            "file.put",
            &format!("src = \"{}\"", env.tmp.path().join("secret.txt").display()) as &str,
        ),
        ("file.template", "src = \"templates/../../secret.txt\""),
    ];
    for (f, opt) in cases {
        let rb = env.write(
            "rb/rb.lua",
            &subst(
                r#"runbook { name = "outside" }
step("s", function() @f@(target("local"), { path = "@out@/x", @opt@ }) end)
"#,
                &[("f", &f), ("opt", &opt), ("out", &out_dir.display())],
            ),
        );
        let out = Run::new(&env, &rb).yes().json().expect_exit(1).run();
        let err = out.step_error(0);
        assert!(
            err.starts_with(&format!("{}:2: {f}(): src ", rb.display()))
                && err.contains("no such file beside the runbook"),
            "{opt}: {err}"
        );
        assert!(!out_dir.join("x").exists());
    }
    // A template's missing name: the template's file and line, nothing written.
    env.write("rb/templates/t.j2", "ok\n{{ missing }}\n");
    let rb = env.write(
        "rb/rb.lua",
        &subst(
            r#"runbook { name = "tpl" }
step("s", function() file.template(target("local"), { path = "@out@/x", src = "templates/t.j2", vars = { x = 1 } }) end)
"#,
            &[("out", &out_dir.display())],
        ),
    );
    let out = Run::new(&env, &rb).yes().json().expect_exit(1).run();
    assert_eq!(
        out.step_error(0),
        format!(
            "{}:2: file.template(): {}/templates/t.j2:2: undefined value: 'missing' is not in vars",
            rb.display(),
            env.tmp.path().join("rb").display()
        )
    );
}

/// Through a real sshd: the host itself, and a container behind it (the `pct` double on
/// the node): the same writes, the same idempotence.
#[test]
fn through_a_real_sshd_and_a_container_behind_it() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let ct = fleet.container(200);
    let env = Env::new();
    let host_dir = env.scratch().join("node");
    std::fs::create_dir_all(&host_dir).unwrap();
    std::fs::create_dir_all(ct.join("root/etc-app")).unwrap();
    for (target, dir, on_disk) in [
        (
            "target(\"node1\")",
            host_dir.display().to_string(),
            host_dir.clone(),
        ),
        (
            "target(\"node1\"):pct(200)",
            "/root/etc-app".to_string(),
            ct.join("root/etc-app"),
        ),
    ] {
        let rb = write_runbook(&env, &runbook(target, &dir, "x = 1\\n", ", backup = true"));
        let run = || {
            Run::new(&env, &rb)
                .ssh(&fleet)
                .env("RUNBOOK_PARAM_TOKEN", TOKEN)
                .json()
                .yes()
                .expect_exit(0)
                .run()
        };
        let out = run();
        assert_eq!(changes_started(&out), 2, "{target}: {}", out.describe());
        assert_eq!(
            std::fs::read_to_string(on_disk.join("a.conf")).unwrap(),
            "x = 1\n",
            "{target}"
        );
        assert_eq!(mode_of(&on_disk.join("a.conf")), 0o640);
        assert_eq!(
            std::fs::read_to_string(on_disk.join("app.conf")).unwrap(),
            rendered(80)
        );
        assert_eq!(out.logs()[2], "got x = 1\n 0640 6", "{target}");
        let out = run();
        assert_eq!(changes_started(&out), 0, "{target}: {}", out.describe());
        assert!(!env.all_records().contains(TOKEN));
    }

    // Bytes over a session's inline stdin (1 MiB) and over the diff's limit: written
    // whole, told by sizes and digests, unchanged the second time (read by digest only).
    let big = host_dir.join("big.bin");
    let rb = env.write(
        "big.lua",
        &subst(
            r#"runbook { name = "big" }
step("big", function()
  file.put(target("node1"), { path = "@big@", content = string.rep("\0\1\2\255", 400000) })
end)
"#,
            &[("big", &big.display())],
        ),
    );
    let go = |mode: &str| {
        Run::new(&env, &rb)
            .ssh(&fleet)
            .json()
            .arg(mode)
            .expect_exit(0)
            .run()
    };
    let out = go("--dry-run");
    let planned = diffs(&out);
    assert!(
        planned[0]
            .as_deref()
            .unwrap()
            .starts_with("not diffed (over 256.0 KiB): before none (a new file); after 1.5 MiB (1600000 bytes), sha256 "),
        "{planned:?}"
    );
    let out = go("--yes");
    assert_eq!(changes_started(&out), 1, "{}", out.describe());
    assert_eq!(
        std::fs::read(&big).unwrap(),
        b"\0\x01\x02\xff".repeat(400_000)
    );
    let out = go("--yes");
    assert_eq!(changes_started(&out), 0, "{}", out.describe());
}

// In every kind of container (busybox's: its sh, stat, mktemp, ln and sha256sum are
// busybox's applets; Debian minbase's: coreutils), reached as Proxmox's two env modes
// reach it.
in_containers!(put_template_get, |ct: &Ct| {
    let env = Env::new();
    let dir = ct.dir();
    env.write("templates/app.conf.j2", TEMPLATE);
    let body = |content: &str, extra: &str| {
        let rb = runbook("box", &dir.path, content, extra);
        // CtRun writes its own header and `box`: only the steps of this runbook.
        rb[rb.find("local function show").unwrap()..]
            .replace("params.token", "\"tok\"")
            .replace("params.port", "8080")
    };
    let out = CtRun::new(&env, &dir, EnvMode::Clear).go(&body("x = 1\\n", ""), &[]);
    out.assert_exit(0);
    assert_eq!(changes_started(&out), 2, "{}", out.describe());
    assert_eq!(
        std::fs::read_to_string(dir.host.join("a.conf")).unwrap(),
        "x = 1\n"
    );
    assert_eq!(mode_of(&dir.host.join("a.conf")), 0o640);
    assert!(std::fs::read_to_string(dir.host.join("app.conf"))
        .unwrap()
        .contains("port = 8080\n"));
    assert_eq!(out.logs()[2], "got x = 1\n 0640 6");
    let out = CtRun::new(&env, &dir, EnvMode::Keep).go(&body("x = 1\\n", ""), &[]);
    out.assert_exit(0);
    assert_eq!(changes_started(&out), 0, "{}", out.describe());
    let out = CtRun::new(&env, &dir, EnvMode::Keep).go(&body("x = 2\\n", ", backup = true"), &[]);
    out.assert_exit(0);
    assert_eq!(changes_started(&out), 1, "{}", out.describe());
    assert_eq!(
        std::fs::read_to_string(dir.host.join("a.conf")).unwrap(),
        "x = 2\n"
    );
    let backup = out.logs()[0].split("backup=").nth(1).unwrap().to_string();
    let on_host = dir.host.join(Path::new(&backup).file_name().unwrap());
    assert_eq!(std::fs::read_to_string(on_host).unwrap(), "x = 1\n");
});
