//! An adversarial review of issue 25's fixes (items 1, 2, 3, 9, 10, 11, 12, 13): each test
//! is an attack that still works when it was written, and passes once the break is fixed.
mod common;
use common::*;
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
/// (`/dev/fd/../..`), and common wrappers it does not know (`taskset`, `script -c`).
#[test]
fn review_reads_the_classifier_calls_safe_delete_in_a_dry_run() {
    let env = Env::new();
    let cases = [
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
    ];
    let mut wrong = Vec::new();
    for (n, argv) in cases.iter().enumerate() {
        let dir = victim(&env, &format!("case{n}"));
        let rb = env.write(
            &format!("read{n}.lua"),
            &format!(
                "runbook {{ name = \"read{n}\" }}\nlocal here = target(\"local\")\nstep(\"look\", function()\n  here:exec({argv}, {{ read_only = true, cwd = {dir:?}, stdin = \"x\\n\" }})\nend)\n",
                dir = dir.display().to_string()
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
    // `/dev/fd/../../..` is `/`: `> /dev/fd/../../../DIR/x` truncates DIR/x.
    let dir = victim(&env, "devfd");
    let rb = env.write(
        "devfd.lua",
        &format!(
            "runbook {{ name = \"devfd\" }}\nlocal here = target(\"local\")\nstep(\"look\", function()\n  here:shell(\"echo > /dev/fd/../../..{}/x\", {{ read_only = true }})\nend)\n",
            dir.display()
        ),
    );
    let out = Run::cmd(&env, ["run", "--dry-run"]).arg(&rb).run();
    if !intact(&dir) || out.code() == 0 {
        wrong.push(format!("> /dev/fd/../../..DIR/x: exit {}", out.code()));
    }
    assert!(wrong.is_empty(), "reads that deleted:\n{}", wrong.join("\n"));
}
