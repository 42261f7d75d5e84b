//! `runbook run FILE --params PARAMS.toml`: params from a TOML file, `--set` winning over
//! it, every error naming `FILE:LINE`, and a secret refused from a file others can read.
use crate::common::*;
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
            .find_map(|e| match e {
                Event::RunStarted { params, .. } => Some(params),
                _ => None,
            })
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

/// `plan`, `check` and `test` take `--params` as `run` does: a plan made from the file
/// holds its values (and `apply` runs with them), `check` validates the file naming
/// FILE:LINE, and a saved plan, shown as it is, refuses one.
#[test]
fn plan_check_and_test_take_the_file_too() {
    let env = Env::new();
    let rb = env.write("p.lua", RUNBOOK);
    let params = file(&env, "p.toml", "dir = \"/tmp/x\"\nn = 3\n", 0o644);
    let saved = env.tmp.path().join("p.plan.json");
    Run::cmd(&env, ["plan"])
        .arg(&rb)
        .arg("--params")
        .arg(&params)
        .set("n", "5")
        .arg("-o")
        .arg(&saved)
        .run()
        .assert_exit(0);
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(
        plan["params"]["dir"]["value"], "/tmp/x",
        "the file's dir: {plan}"
    );
    assert_eq!(plan["params"]["n"]["value"], 5, "--set wins: {plan}");
    let out = Run::cmd(&env, ["apply"]).arg(&saved).json().yes().run();
    out.assert_exit(0);
    assert!(
        out.logs()
            .iter()
            .any(|l| l == "got dir=/tmp/x n=5 fast=false token="),
        "{}",
        out.describe()
    );
    let out = Run::cmd(&env, ["plan"])
        .arg(&saved)
        .arg("--params")
        .arg(&params)
        .run();
    out.assert_exit(2);
    assert!(out.stderr_text().contains("--params"), "{}", out.describe());

    Run::cmd(&env, ["check"])
        .arg(&rb)
        .arg("--params")
        .arg(&params)
        .run()
        .assert_exit(0);
    let bad = file(&env, "bad.toml", "dir = \"/tmp/x\"\nn = \"three\"\n", 0o644);
    let out = Run::cmd(&env, ["check"])
        .arg(&rb)
        .arg("--params")
        .arg(&bad)
        .run();
    out.assert_exit(2);
    assert!(
        out.stderr_text()
            .contains(&format!("{}:2: param 'n'", bad.display())),
        "{}",
        out.describe()
    );

    // `runbook test` answers from the replies a real run saved.
    let replies = env.tmp.path().join("r.jsonl");
    Run::new(&env, &rb)
        .arg("--params")
        .arg(&params)
        .arg("--save-replies")
        .arg(&replies)
        .yes()
        .run()
        .assert_exit(0);
    let out = Run::cmd(&env, ["test"])
        .arg(&rb)
        .arg("--params")
        .arg(&params)
        .arg("--replies")
        .arg(&replies)
        .json()
        .run();
    out.assert_exit(0);
    assert!(
        out.logs()
            .iter()
            .any(|l| l == "got dir=/tmp/x n=3 fast=false token="),
        "{}",
        out.describe()
    );
}

/// `apply --params`: a secret the plan holds only as a digest comes from a private file;
/// any other value in the file must be the plan's (the plan's would win over it unseen),
/// else apply is refused naming FILE:LINE, before anything runs.
#[test]
fn apply_takes_secrets_from_a_private_file_and_refuses_other_values() {
    let env = Env::new();
    let rb = env.write("p.lua", RUNBOOK);
    let made = file(
        &env,
        "made.toml",
        "dir = \"/tmp/x\"\nn = 3\ntoken = \"hunter2-secret\"\n",
        0o600,
    );
    let saved = env.tmp.path().join("p.plan.json");
    Run::cmd(&env, ["plan"])
        .arg(&rb)
        .arg("--params")
        .arg(&made)
        .arg("-o")
        .arg(&saved)
        .run()
        .assert_exit(0);
    assert!(!std::fs::read_to_string(&saved).unwrap().contains("hunter2"));
    // Another n in the file: refused, naming the line, nothing run.
    let other = file(
        &env,
        "other.toml",
        "dir = \"/tmp/x\"\nn = 4\ntoken = \"hunter2-secret\"\n",
        0o600,
    );
    let out = Run::cmd(&env, ["apply"])
        .arg(&saved)
        .arg("--params")
        .arg(&other)
        .yes()
        .run();
    out.assert_exit(2);
    let text = out.stderr_text();
    assert!(
        text.contains(&format!("{}:2: n = 4 here, 3 in the plan", other.display()))
            && !text.contains("hunter2"),
        "{text}"
    );
    // Another secret: refused by the digest check, as a --set one is.
    let wrong = file(
        &env,
        "wrong.toml",
        "dir = \"/tmp/x\"\ntoken = \"not-the-one\"\n",
        0o600,
    );
    let out = Run::cmd(&env, ["apply"])
        .arg(&saved)
        .arg("--params")
        .arg(&wrong)
        .yes()
        .run();
    out.assert_exit(2);
    assert!(
        out.stderr_text().contains("token") && !out.stderr_text().contains("not-the-one"),
        "{}",
        out.describe()
    );
    // The same file at apply (last: an apply spends its plan): the secret matches the
    // plan's digest, the rest is the plan's.
    let out = Run::cmd(&env, ["apply"])
        .arg(&saved)
        .arg("--params")
        .arg(&made)
        .json()
        .yes()
        .run();
    out.assert_exit(0);
    assert!(
        out.logs()
            .iter()
            .any(|l| l.starts_with("got dir=/tmp/x n=3") && !l.contains("hunter2")),
        "{}",
        out.describe()
    );
}
