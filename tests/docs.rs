//! The Lua API reference in docs/ is generated from the doc comments in src/lua_api/;
//! this keeps the checked-in copy true.
mod common;
use common::*;

#[test]
fn lua_api_reference_is_current() {
    let out = Env::new()
        .cmd()
        .args(["docs", "--markdown"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let generated = String::from_utf8(out.stdout).unwrap();
    let checked_in = std::fs::read_to_string(repo().join("docs/lua-api.md")).unwrap();
    assert!(
        generated == checked_in,
        "docs/lua-api.md is stale: run `cargo run -- docs --markdown > docs/lua-api.md`"
    );
}

#[test]
fn every_global_is_documented() {
    let reference = std::fs::read_to_string(repo().join("docs/lua-api.md")).unwrap();
    for name in [
        "runbook {",
        "step(",
        "target(",
        "t:exec(",
        "t:shell(",
        "log.info(",
        "fail(",
        "secret(",
        "sleep(",
    ] {
        assert!(
            reference.contains(&format!("### `{name}")) || reference.contains(name),
            "{name} is not in the reference"
        );
    }
}

#[test]
fn shipped_runbook_runs_by_name() {
    let env = Env::new();
    env.cmd()
        .args(["run", "env-report", "--dry-run", "--offline"])
        .assert()
        .success();
    env.cmd().args(["run", "env-report"]).assert().success();
}

#[test]
fn every_shipped_runbook_and_example_checks() {
    let env = Env::new();
    let mut files = Vec::new();
    for dir in ["runbooks", "examples", "examples/fleet"] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "lua") {
                files.push(e.path());
            }
        }
    }
    assert!(files.len() >= 8, "{files:?}");
    let out = env
        .cmd()
        .arg("check")
        .args(&files)
        .arg("--inventory")
        .arg(repo().join("examples/fleet/inventory.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
