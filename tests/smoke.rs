mod common;
use common::*;

#[test]
fn quickstart_runs_for_real() {
    let env = Env::new();
    let dir = env.scratch().join("qs");
    env.cmd()
        .args([
            "run",
            &repo().join("examples/quickstart.lua").display().to_string(),
            "--yes",
        ])
        .args(["--set", &format!("dir={}", dir.display())])
        .assert()
        .success();
    assert!(!dir.exists(), "clean up removed the dir");
}
