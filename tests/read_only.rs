//! A read must not be able to destroy (issue 25, item 3): `read_only = true` on a command
//! runbook reads as deleting (through `sh -c`, `sudo`, `env`, `xargs`, `timeout`, …) is
//! refused at its call, FILE:LINE, in a dry-run, an offline dry-run, a plan and a real
//! run alike, and nothing is deleted; a command runbook cannot read shows as "may
//! delete" in the preview, the plan's text and its Markdown; harmless reads still run.
use crate::common::*;
use std::path::Path;

/// A directory with something in it for each deleting command to delete: `x`, `b/x`
/// (for `rsync --delete a/ b/`), untracked in a git repository (for `git clean`).
fn victim(env: &Env, name: &str) -> std::path::PathBuf {
    let dir = env.tmp.path().join(name);
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::write(dir.join("x"), "keep me\n").unwrap();
    std::fs::write(dir.join("b/x"), "keep me\n").unwrap();
    git(&dir, &["init", "-q"]);
    dir
}

fn intact(dir: &Path) -> bool {
    dir.join("x").is_file() && dir.join("b/x").is_file()
}

/// Each mode a read is refused in: `run --dry-run`, `run --dry-run --offline`,
/// `plan`, `run --yes`.
const MODES: &[&[&str]] = &[
    &["run", "--dry-run"],
    &["run", "--dry-run", "--offline"],
    &["plan"],
    &["run", "--yes"],
];

#[test]
fn a_read_that_deletes_is_refused_at_its_line_in_every_mode() {
    let env = Env::new();
    // Lua list literals, as a runbook writes them.
    let cases = [
        r#"{ "sh", "-c", "rm -rf x" }"#,
        r#"{ "sudo", "rm", "x" }"#,
        r#"{ "env", "rm", "x" }"#,
        r#"{ "env", "-i", "FOO=1", "rm", "x" }"#,
        r#"{ "xargs", "rm" }"#,
        r#"{ "find", ".", "-delete" }"#,
        r#"{ "git", "clean", "-fdx" }"#,
        r#"{ "rsync", "-a", "--delete", "a/", "b/" }"#,
        r#"{ "timeout", "5", "rm", "x" }"#,
    ];
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
        for mode in MODES {
            let out = Run::cmd(&env, mode.iter().copied()).arg(&rb).run();
            let stderr = out.stderr_text();
            let at = format!("read{n}.lua:4: exec: read_only = true on a command that");
            if out.code() == 0 || !stderr.contains(&at) || !intact(&dir) {
                wrong.push(format!(
                    "{argv} under {mode:?}: exit {}, intact {}: {stderr}",
                    out.code(),
                    intact(&dir)
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `t:shell` is read the same way; `destructive = false` does not make a deleting
/// command a read.
#[test]
fn a_shell_read_that_deletes_is_refused_even_when_called_harmless() {
    let env = Env::new();
    let dir = victim(&env, "shell");
    let rb = env.write(
        "shell.lua",
        &subst(
            r#"runbook { name = "shell" }
local here = target("local")
step("look", function()
  here:shell("ls; sudo -u root rm -f x", { read_only = true, destructive = false, cwd = @dir@ })
end)
"#,
            &[("dir", &format!("{:?}", dir.display().to_string()))],
        ),
    );
    for mode in MODES {
        let out = Run::cmd(&env, mode.iter().copied()).arg(&rb).run();
        assert_ne!(out.code(), 0, "{mode:?}: {}", out.describe());
        assert!(
            out.stderr_text()
                .contains("shell.lua:4: shell: read_only = true on a command that deletes"),
            "{mode:?}: {}",
            out.describe()
        );
        assert!(intact(&dir), "{mode:?}");
    }
}

/// A script runbook cannot read (`sh -c "$X"`: what runs is the variable's value) is
/// refused as a read, and as a change it is marked "may delete" in the preview, the
/// plan's text and its Markdown, and counted in the plan's summary line.
#[test]
fn an_unreadable_script_shows_may_delete_in_the_plan() {
    let env = Env::new();
    let rb = env.write(
        "unsure.lua",
        "runbook { name = \"unsure\" }\nlocal here = target(\"local\")\nstep(\"run it\", function()\n  here:shell('sh -c \"$X\"', { env = { X = \"true\" } })\n  here:exec({ \"rm\", \"-f\", \"/nonexistent/runbook-test\" })\nend)\n",
    );
    let preview = Run::new(&env, &rb).dry_run().expect_exit(0).run();
    let text = preview.stderr_text() + &preview.stdout_text();
    assert!(text.contains("[may delete]"), "{text}");
    let plan = Run::cmd(&env, ["plan".as_ref(), rb.as_os_str()])
        .expect_exit(0)
        .run()
        .stdout_text();
    assert!(
        plan.contains("sh -c: sh -c \"$X\"  [may delete]"),
        "plan text: {plan}"
    );
    assert!(
        plan.contains("rm -f /nonexistent/runbook-test  [deletes]"),
        "{plan}"
    );
    assert!(
        plan.contains("1 of them destructive") && plan.contains("1 that may delete"),
        "{plan}"
    );
    let saved = env.tmp.path().join("unsure.json");
    Run::cmd(
        &env,
        [
            "plan".as_ref(),
            rb.as_os_str(),
            "-o".as_ref(),
            saved.as_os_str(),
        ],
    )
    .expect_exit(0)
    .run();
    let md = Run::cmd(
        &env,
        [
            "plan".as_ref(),
            saved.as_os_str(),
            "--format".as_ref(),
            "md".as_ref(),
        ],
    )
    .expect_exit(0)
    .run()
    .stdout_text();
    assert!(
        md.contains("1. **may delete** · on `local`"),
        "markdown: {md}"
    );
    assert!(
        md.contains("2. **destructive** · on `local`"),
        "markdown: {md}"
    );
    // As a read it is refused like a deletion.
    let read = env.write(
        "unsure-read.lua",
        "runbook { name = \"unsure-read\" }\nlocal here = target(\"local\")\nstep(\"look\", function()\n  here:shell('sh -c \"$X\"', { env = { X = \"ls\" }, read_only = true })\nend)\n",
    );
    let out = Run::new(&env, &read).dry_run().run();
    assert!(
        out.stderr_text()
            .contains("unsure-read.lua:4: shell: read_only = true on a command that may delete"),
        "{}",
        out.describe()
    );
}

/// Reads that only look stay reads: they run in a dry-run and an offline one plans them.
#[test]
fn harmless_reads_stay_allowed() {
    let env = Env::new();
    let rb = env.write(
        "looks.lua",
        r#"runbook { name = "looks" }
local here = target("local")
step("look", function()
  here:exec({ "ls", "/" }, { read_only = true })
  here:exec({ "cat", "/etc/hostname" }, { read_only = true, check = false })
  here:exec({ "sh", "-c", "ls | wc -l" }, { read_only = true })
  here:shell("ls / 2>/dev/null | wc -l >&2", { read_only = true })
  here:shell('for f in /etc/host*; do [ -f "$f" ] && echo "$f"; done', { read_only = true })
end)
"#,
    );
    Run::new(&env, &rb).dry_run().expect_exit(0).run();
    Run::new(&env, &rb).dry_run().offline().expect_exit(0).run();
    Run::new(&env, &rb).yes().expect_exit(0).run();
}
