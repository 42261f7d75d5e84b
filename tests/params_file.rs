//! `runbook run FILE --params PARAMS.toml`: params from a TOML file, `--set` winning over
//! it, every error naming `FILE:LINE`, and a secret refused from a file others can read.
mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;

const RUNBOOK: &str = r#"
runbook {
  name = "params-file",
  params = {
    dir = { type = "path", required = true },
    n = { type = "integer", default = 1 },
    fast = { type = "boolean", default = false },
    token = { secret = true, default = "" },
  },
}
step("show", function()
  log.info(("got dir=%s n=%d fast=%s token=%s"):format(params.dir, params.n, tostring(params.fast), params.token))
end)
"#;

fn file(env: &Env, name: &str, body: &str, mode: u32) -> std::path::PathBuf {
    let p = env.write(name, body);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

#[test]
fn values_come_from_the_file_and_set_wins() {
    let env = Env::new();
    let rb = env.write("p.lua", RUNBOOK);
    let params = file(
        &env,
        "p.toml",
        "# the demo's\ndir = \"/tmp/x\"\nn = 3\nfast = true\n",
        0o644,
    );
    let out = Run::new(&env, &rb)
        .arg("--params")
        .arg(&params)
        .json()
        .yes()
        .run();
    out.assert_exit(0);
    assert!(
        out.logs()
            .iter()
            .any(|l| l == "got dir=/tmp/x n=3 fast=true token="),
        "{:?}",
        out.logs()
    );
    let out = Run::new(&env, &rb)
        .arg("--params")
        .arg(&params)
        .set("n", "7")
        .json()
        .yes()
        .run();
    out.assert_exit(0);
    assert!(
        out.logs()
            .iter()
            .any(|l| l == "got dir=/tmp/x n=7 fast=true token="),
        "{:?}",
        out.logs()
    );
}

#[test]
fn errors_name_the_file_and_line() {
    let env = Env::new();
    let rb = env.write("p.lua", RUNBOOK);
    let cases = [
        (
            "dir = \"/tmp/x\"\n\ndri = \"/y\"\n",
            ":3: unknown param 'dri'; did you mean 'dir'?",
        ),
        (
            "dir = \"/tmp/x\"\nn = \"three\"\n",
            ":2: param 'n': expected an integer, got 'three'",
        ),
        (
            "dir = \"/tmp/x\"\nn = [1, 2]\n",
            ":2: n: an array; a param is a string, number or boolean",
        ),
        ("dir = \"/tmp/x\"\nn = \n", ":2: not TOML"),
    ];
    for (body, want) in cases {
        let params = file(&env, "bad.toml", body, 0o644);
        let out = Run::new(&env, &rb).arg("--params").arg(&params).yes().run();
        out.assert_exit(2);
        let text = out.stderr_text();
        assert!(
            text.contains(&format!("{}{want}", params.display())),
            "{body}: {text}"
        );
    }
    let out = Run::new(&env, &rb)
        .args(["--params", "/no/such.toml"])
        .yes()
        .run();
    out.assert_exit(2);
    assert!(
        out.stderr_text().contains("--params /no/such.toml"),
        "{}",
        out.describe()
    );
}

#[test]
fn a_secret_is_refused_unless_the_file_is_private() {
    let env = Env::new();
    let rb = env.write("p.lua", RUNBOOK);
    let body = "dir = \"/tmp/x\"\ntoken = \"hunter2-secret\"\n";
    let open = file(&env, "open.toml", body, 0o644);
    let out = Run::new(&env, &rb).arg("--params").arg(&open).yes().run();
    out.assert_exit(2);
    let text = out.stderr_text();
    assert!(
        text.contains(":2: param 'token' is a secret") && text.contains("chmod 600"),
        "{text}"
    );
    assert!(
        !text.contains("hunter2"),
        "the secret is never shown: {text}"
    );
    let private = file(&env, "private.toml", body, 0o600);
    let out = Run::new(&env, &rb)
        .arg("--params")
        .arg(&private)
        .json()
        .yes()
        .run();
    out.assert_exit(0);
    assert!(
        !out.stdout_text().contains("hunter2-secret"),
        "masked in every event"
    );
    assert!(out
        .logs()
        .iter()
        .any(|l| l.starts_with("got dir=/tmp/x") && !l.contains("hunter2")));
}

/// The README's main command takes examples/train/params.toml, and that file holds the
/// values the README gave with `--set` before (run from the checkout: `repo = "."`).
#[test]
fn the_demo_params_file_is_the_readme_command() {
    let env = Env::new();
    let params_of = |out: &Output| {
        out.events()
            .into_iter()
            .find(|e| e["event"] == "run_started")
            .map(|e| e["params"].clone())
            .unwrap()
    };
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(
        readme.lines().any(|l| l
            == "cargo run --release -- run clean-reset --params examples/train/params.toml --yes"),
        "the README's main command"
    );
    let from_file = Run::new(&env, "clean-reset")
        .arg("--params")
        .arg(repo().join("examples/train/params.toml"))
        .args(["--dry-run", "--offline"])
        .json()
        .run();
    from_file.assert_exit(0);
    let mut run = Run::new(&env, "clean-reset")
        .args(["--dry-run", "--offline"])
        .json();
    for (k, v) in [
        ("repo", "."),
        ("code_paths", "examples/train"),
        ("warmup", "examples/train/warmup.py"),
        ("train", "examples/train/train.py 400"),
        ("venv", "/tmp/runbook-demo/venv"),
        ("log", "/tmp/runbook-demo/train.log"),
        ("cache_dirs", "/tmp/runbook-demo/inductor"),
        ("min_throughput", "1"),
    ] {
        run = run.set(k, v);
    }
    let from_sets = run.run();
    from_sets.assert_exit(0);
    assert_eq!(params_of(&from_file), params_of(&from_sets));
}
