//! What previews show: runbook's scripts by name with every argument (`venv-build.sh
//! UV VENV … torch==2.11.0`), never a script's text; `runbook script NAME` prints the
//! text, so a preview line runs by hand as `sh -c "$(runbook script NAME)" sh ARG…`;
//! `--json` and the record carry each body once per run, by sha256.
//!
//! The clean-reset previews (on this machine, and in a container on a Proxmox node
//! behind SSH: a real sshd and the pct double, see common/sshd.rs) are snapshots.
use crate::common::sshd::Fleet;
use crate::common::*;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin!("runbook").to_path_buf()
}

/// The demo project's checkout with `train.py` changed since its commit.
fn hacked_repo(dir: &Path) -> PathBuf {
    let repo = demo_repo(dir);
    std::fs::write(repo.join("train.py"), "raise SystemExit('hacked')\n").unwrap();
    repo
}

/// A cache dir holding `bytes` in one file.
fn cache_of(dir: &Path, bytes: usize) {
    std::fs::create_dir_all(dir.join("fx")).unwrap();
    std::fs::write(dir.join("fx/a.kernel"), vec![b'k'; bytes]).unwrap();
}

fn sets(pairs: &[(&str, String)]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|(k, v)| ["--set".to_string(), format!("{k}={v}")])
        .collect()
}

/// The preview with what differs between machines and runs replaced: `replace` (paths
/// of this test), run ids, durations, git revisions, where uv is.
fn stable(text: &str, replace: &[(&Path, &str)]) -> String {
    let mut text = text.to_string();
    for (from, to) in replace {
        text = text.replace(&from.display().to_string(), to);
    }
    for (re, to) in [
        (r"\b\d{8}-\d{6}-[0-9a-f]{4}\b", "[RUN]"),
        (r"\b\d+(\.\d+)?(ms|s)\b", "[DUR]"),
        (r"\b[0-9a-f]{40}\b", "[REV]"),
        (r"\b[0-9a-f]{7}\b", "[REV]"),
        (r"(venv-build\.sh uv=)\S+", "${1}[UV]"),
        // A known-good fingerprint's file is named by the machine (fingerprint.rs).
        (r"\bm-[0-9a-f]{16}\b", "[MACHINE]"),
    ] {
        text = regex::Regex::new(re)
            .unwrap()
            .replace_all(&text, to)
            .into_owned();
    }
    text
}

/// What item 3 of issue 11 asks of the clean-reset preview, whatever the target.
fn reads_in_one_screen(preview: &str, venv: &str, log: &str) {
    let lines = preview.lines().count();
    assert!(lines <= 80, "{lines} lines:\n{preview}");
    for want in [
        "venv-build.sh ".to_string(),
        format!(" venv={venv} python=python3 mode=fresh verify='import torch; print(torch.__version__, torch.version.cuda)' --index-url https://download.pytorch.org/whl/cu128 torch==2.11.0\n"),
        "move aside [CACHE1] (293.0 KiB, 1 file)".into(),
        "move aside [CACHE2] (1.5 KiB, 1 file)".into(),
        "restore 1 file in [REPO] to [REV]: train.py (+1 -34)".into(),
        "build venv {venv} (python python3, torch==2.11.0 from https://download.pytorch.org/whl/cu128, fresh)".replace("{venv}", venv),
        format!("start job preview-train in the background: {venv}/bin/python [REPO]/train.py 400 (in [REPO], log {log}, env TORCHINDUCTOR_CACHE_DIR)"),
        format!("$ cd [REPO] && env TORCHINDUCTOR_CACHE_DIR=[CACHE1] proc-spawn.sh name=preview-train log={log} {venv}/bin/python [REPO]/train.py 400\n"),
        "env PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=[CACHE1] TORCHINDUCTOR_COMPILE_THREADS=1 ".into(),
    ] {
        assert!(preview.contains(&want), "no {want:?} in:\n{preview}");
    }
    for never in ["sh -c", "more lines of the script", "#"] {
        assert!(!preview.contains(never), "{never:?} in:\n{preview}");
    }
}

#[test]
fn clean_reset_preview_on_this_machine() {
    require_uv!();
    let env = Env::new();
    let work = env.scratch();
    let repo = hacked_repo(&work);
    let (inductor, triton) = (work.join("inductor"), work.join("triton"));
    cache_of(&inductor, 300_000);
    cache_of(&triton, 1_500);
    let stderr = Run::new(&env, "clean-reset")
        .dry_run()
        .args(sets(&[
            ("venv", work.join("venv").display().to_string()),
            ("repo", repo.display().to_string()),
            ("torch", "2.11.0".into()),
            ("warmup", "warmup.py".into()),
            ("train", "train.py 400".into()),
            ("log", work.join("train.log").display().to_string()),
            ("job", "preview-train".into()),
            (
                "cache_dirs",
                format!("{} {}", inductor.display(), triton.display()),
            ),
        ]))
        .expect_exit(0)
        .run()
        .stderr_text();
    let preview = stable(
        &stderr,
        &[
            (&repo, "[REPO]"),
            (&env.state(), "[STATE]"),
            (&inductor, "[CACHE1]"),
            (&triton, "[CACHE2]"),
            (&work, "[WORK]"),
        ],
    );
    reads_in_one_screen(&preview, "[WORK]/venv", "[WORK]/train.log");
    insta::assert_snapshot!("clean_reset_local", preview);
}

#[test]
fn clean_reset_preview_in_a_container_behind_ssh() {
    require_sshd!();
    require_uv!();
    let fleet = Fleet::start(1);
    let ct = fleet.container(200);
    cache_of(&ct.join("tmp/torchinductor_root"), 300_000);
    cache_of(&ct.join("root/.triton/cache"), 1_500);
    let env = Env::new();
    // The container sees the node's files except /tmp and /root.
    let work = tempfile::Builder::new()
        .prefix("runbook-preview-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let repo = hacked_repo(work.path());
    let stderr = Run::new(&env, "clean-reset")
        .dry_run()
        .args(sets(&[
            ("host", "node1".into()),
            ("ct", "200".into()),
            ("venv", "/root/venv".into()),
            ("repo", repo.display().to_string()),
            ("torch", "2.11.0".into()),
            ("warmup", "warmup.py".into()),
            ("train", "train.py 400".into()),
            ("log", "/root/train.log".into()),
            ("job", "preview-train".into()),
            (
                "cache_dirs",
                "/tmp/torchinductor_root /root/.triton/cache".into(),
            ),
        ]))
        .ssh(&fleet)
        .expect_exit(0)
        .run()
        .stderr_text();
    let preview = stable(
        &stderr,
        &[
            (&repo, "[REPO]"),
            (&env.state(), "[STATE]"),
            (&fleet.ssh_config(), "[SSH_CONFIG]"),
            (Path::new("/tmp/torchinductor_root"), "[CACHE1]"),
            (Path::new("/root/.triton/cache"), "[CACHE2]"),
        ],
    );
    reads_in_one_screen(&preview, "/root/venv", "/root/train.log");
    // Commands without a script of runbook's stay the exact line to paste here.
    assert!(
        preview.contains("$ ssh -F [SSH_CONFIG] node1 -- 'pct exec 200 -- git -C [REPO] --literal-pathspecs checkout [REV] -- train.py'"),
        "{preview}"
    );
    insta::assert_snapshot!("clean_reset_pct_over_ssh", preview);
}

/// A runbook that runs one script twice (a read), and plans a deletion with another.
const TWICE: &str = r#"
runbook { name = "twice", params = { a = { required = true }, b = { required = true } } }
local here = target("local")
step("look", function()
  cache.size(here, { params.a, params.b })
  cache.size(here, { params.a })
end)
step("clear", function() cache.clear(here, { params.b }) end)
"#;

/// The caches `TWICE` looks at: `a` (4,000 bytes) and `b` (10 bytes, deleted).
fn twice_caches(env: &Env) -> (PathBuf, PathBuf) {
    let work = env.scratch();
    let (a, b) = (work.join("a"), work.join("b"));
    cache_of(&a, 4_000);
    cache_of(&b, 10);
    (a, b)
}

fn twice_args(a: &Path, b: &Path) -> Vec<String> {
    sets(&[
        ("a", a.display().to_string()),
        ("b", b.display().to_string()),
    ])
}

/// The command line of an action, as `-v` or the preview printed it after `$ ` or
/// `target: `, with the script's name replaced by `sh -c "$(runbook script NAME)" sh`
/// and its arguments' names taken off (`root=/tmp` is `/tmp`): what a user pastes.
/// (The words here have no space in them.)
fn by_hand(line: &str, name: &str) -> String {
    let short = name.strip_suffix(".sh").unwrap();
    let at = line
        .find(name)
        .unwrap_or_else(|| panic!("no {name} in {line}"));
    let named = regex::Regex::new(r"^[a-z_0-9]+=").unwrap();
    let values: Vec<String> = line[at + name.len()..]
        .split(' ')
        .map(|w| named.replace(w, "").into_owned())
        .collect();
    format!(
        "{}sh -c \"$(\"$RUNBOOK\" script {short})\" sh{}",
        &line[..at],
        values.join(" ")
    )
}

fn sh(line: &str, cwd: &Path) -> std::process::Output {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(line)
        .env("RUNBOOK", bin())
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// The line `-v` prints for a read, run by hand through `runbook script`, prints what
/// runbook's own run of it printed, byte for byte; the line a dry-run previews for a
/// deletion, run by hand, deletes what runbook deletes, saying the same.
#[test]
fn a_preview_line_runs_by_hand_through_runbook_script() {
    let env = Env::new();
    let (a, b) = twice_caches(&env);
    let rb = env.write("twice.lua", TWICE);

    // The read, for real with -v: the terminal line, the record's command, its output.
    let stderr = Run::new(&env, &rb)
        .args(twice_args(&a, &b))
        .arg("-v")
        .dry_run()
        .expect_exit(0)
        .run()
        .stderr_text();
    let record = env.last_record();
    let started = started_running(&record, "cache-probe.sh");
    assert_eq!(started.len(), 3, "two sizes and the clear's look");
    let Event::ActionStarted {
        command, action, ..
    } = started[0]
    else {
        unreachable!()
    };
    assert!(
        stderr.contains(&format!("      $ {command}\n")),
        "-v shows the record's command line:\n{stderr}"
    );
    assert!(
        command.starts_with("cache-probe.sh mode=size nroots=4 "),
        "{command}"
    );
    let printed = lines_of(&record, *action, Stream::Stdout);
    assert!(!printed.is_empty());
    let ran = sh(&by_hand(command, "cache-probe.sh"), env.tmp.path());
    assert!(ran.status.success(), "{ran:?}");
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout)
            .lines()
            .collect::<Vec<_>>(),
        printed
    );

    // The planned deletion, from the terminal preview.
    let planned = stderr
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("$ cache-delete.sh "))
        .unwrap_or_else(|| panic!("no planned deletion in:\n{stderr}"));
    assert!(b.exists(), "a dry-run deletes nothing");
    let line = format!("cache-delete.sh {planned}");
    let ran = sh(&by_hand(&line, "cache-delete.sh"), env.tmp.path());
    assert!(ran.status.success(), "{ran:?}");
    assert!(!b.exists() && a.exists(), "the line deleted b, and only b");

    // runbook's own run deletes the same way, with the same command and output.
    cache_of(&b, 10);
    let events = Run::new(&env, &rb)
        .args(twice_args(&a, &b))
        .yes()
        .json()
        .expect_exit(0)
        .run()
        .events();
    assert!(!b.exists());
    let delete = started_running(&events, "cache-delete.sh");
    let Some(Event::ActionStarted {
        command, action, ..
    }) = delete.first()
    else {
        panic!("the deletion ran: {events:#?}")
    };
    assert_eq!(command, &line);
    let said = lines_of(&events, *action, Stream::Stdout);
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout)
            .lines()
            .collect::<Vec<_>>(),
        said
    );
}

/// `--json` and the record carry each script's body once, in a `script` event before
/// the first action that runs it, keyed by the sha256 `runbook script NAME | sha256sum`
/// gives; actions name it and never hold it. `runbook log` names scripts too; with -v
/// it shows each body once.
#[test]
fn the_record_and_json_carry_each_body_once() {
    let env = Env::new();
    let (a, b) = twice_caches(&env);
    let rb = env.write("twice.lua", TWICE);
    let out = Run::new(&env, &rb)
        .args(twice_args(&a, &b))
        .yes()
        .json()
        .expect_exit(0)
        .run();
    for (what, events) in [("--json", out.events()), ("record", env.last_record())] {
        let scripts = pick!(events, Event::Script { name, sha256, body } => (name, sha256, body));
        let names: Vec<&str> = scripts.iter().map(|(name, _, _)| name.as_str()).collect();
        assert_eq!(names, ["cache-probe.sh", "cache-delete.sh"], "{what}");
        let pos = |want: &dyn Fn(&Event) -> bool| events.iter().position(want).unwrap();
        for (name, sha256, body) in &scripts {
            let printed = Run::cmd(&env, ["script", name]).expect_exit(0).run();
            assert_eq!(printed.stdout, body.as_bytes(), "{what}: {name}");
            let sha = format!("{:x}", Sha256::digest(&printed.stdout));
            assert_eq!(sha256.as_str(), sha, "{what}: {name}");
            let body_at = pos(&|e| matches!(e, Event::Script { name: n, .. } if n == *name));
            let users: Vec<(usize, &Event)> = events
                .iter()
                .enumerate()
                .filter(|(_, e)| script_of(e).is_some_and(|s| &s.name == *name))
                .collect();
            assert!(!users.is_empty(), "{what}: nothing runs {name}");
            for (at, u) in &users {
                assert_eq!(script_of(u).unwrap().sha256, sha);
                assert!(*at > body_at, "{what}: {name} used before its body came");
                let (Event::ActionPlanned { command, .. } | Event::ActionStarted { command, .. }) =
                    u
                else {
                    unreachable!()
                };
                assert!(command.starts_with(&format!("{name} ")), "{command}");
            }
        }
        let cache_probes = started_running(&events, "cache-probe.sh").len();
        assert!(
            cache_probes >= 3,
            "{what}: one body for {cache_probes} runs"
        );
        let text = serde_json::to_string(&events).unwrap();
        let probe_body = scripts[0].2.as_str();
        let line = probe_body.lines().find(|l| l.len() > 40).unwrap();
        let escaped = serde_json::to_string(line).unwrap();
        let copies = text.matches(&escaped[1..escaped.len() - 1]).count();
        assert_eq!(copies, 1, "{what}: the body once, in its script event");
    }

    let text = Run::cmd(&env, ["log", "last"])
        .expect_exit(0)
        .run()
        .stdout_text();
    assert!(
        text.contains(&format!(
            "local: cache-delete.sh root=/tmp path={}",
            b.display()
        )),
        "{text}"
    );
    assert!(!text.contains("script cache-probe.sh (sha256"), "{text}");
    let text = Run::cmd(&env, ["log", "last", "-v"]).run().stdout_text();
    assert_eq!(
        text.matches("script cache-probe.sh (sha256").count(),
        1,
        "{text}"
    );
    assert!(text.contains("      ┊ canon() {"), "{text}");
}

/// `runbook script` lists the scripts; an unknown name is a usage error naming the
/// closest one.
#[test]
fn runbook_script_lists_prints_and_refuses() {
    let env = Env::new();
    let text = Run::cmd(&env, ["script"])
        .expect_exit(0)
        .run()
        .stdout_text();
    for name in [
        "venv-build.sh",
        "cache-delete.sh",
        "proc-spawn.sh",
        "fingerprint.sh",
    ] {
        assert!(text.contains(name), "{text}");
    }
    let bad = Run::cmd(&env, ["script", "venv-biuld"])
        .expect_exit(2)
        .run();
    let err = bad.stderr_str();
    assert!(
        err.contains("no script 'venv-biuld'; did you mean 'venv-build'?")
            && err.contains("cache-delete"),
        "{err}"
    );
    assert!(bad.stdout.is_empty());
}
