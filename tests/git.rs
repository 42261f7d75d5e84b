//! `git.restore`, `git.head`, `git.status` against real repositories made by the test,
//! locally and in a container over SSH.
use crate::common::sshd::Fleet;
use crate::common::*;
use std::path::Path;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap()
}

/// A repository with two commits: "first" (a.txt, "b c.txt", keep.txt) and "second"
/// (a.txt changed, added.txt added). Returns the two commit ids.
fn make_repo(dir: &Path) -> (String, String) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    write(dir, "a.txt", "one\n");
    write(dir, "b c.txt", "one\n");
    write(dir, "keep.txt", "same\n");
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "first"]);
    let first = git(dir, &["rev-parse", "HEAD"]);
    write(dir, "a.txt", "two\n");
    write(dir, "added.txt", "new\n");
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "second"]);
    let second = git(dir, &["rev-parse", "HEAD"]);
    (first, second)
}

/// `runbook run FILE --json`, with no git config from this machine.
fn git_run<'e>(env: &'e Env, file: &Path) -> Run<'e> {
    Run::new(env, file)
        .json()
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
}

/// Lua that logs a restore result as one line: `NAME rev changed planned file,file`.
const SHOW: &str = r#"
local function show(name, r)
  log.info(name .. " " .. r.rev .. " " .. tostring(r.changed) .. " " .. tostring(r.planned or false)
           .. " " .. table.concat(r.files, ","))
end
"#;

#[test]
fn restores_modified_files_to_head_and_to_an_older_commit() {
    let env = Env::new();
    let repo = env.scratch().join("repo");
    let (first, second) = make_repo(&repo);
    // Local damage: an edit, a deletion, an untracked file, a staged new file.
    write(&repo, "a.txt", "local edit\n");
    std::fs::remove_file(repo.join("b c.txt")).unwrap();
    write(&repo, "untracked.txt", "mine\n");
    write(&repo, "staged.txt", "staged\n");
    git(&repo, &["add", "staged.txt"]);
    let rb = env.write(
        "restore.lua",
        &subst(
            r#"
runbook { name = "restore" }
local here = target("local")
local R = "@repo@"
@SHOW@
step("to HEAD", function() show("head", git.restore(here, { repo = R })) end)
step("to the first commit", function()
  show("old", git.restore(here, { repo = R, rev = "HEAD~1", paths = { "a.txt", R .. "/added.txt" } }))
end)
"#,
            &[("repo", &repo.display()), ("SHOW", &SHOW)],
        ),
    );
    let out = git_run(&env, &rb).yes().expect_exit(0).run();
    let logs = out.logs();
    assert_eq!(
        logs[0],
        format!("head {second} true false a.txt,b c.txt,staged.txt")
    );
    assert_eq!(logs[1], format!("old {first} true false a.txt,added.txt"));
    assert_eq!(
        read(&repo, "a.txt"),
        "one\n",
        "a.txt is at the first commit"
    );
    assert_eq!(read(&repo, "b c.txt"), "one\n", "the deleted file is back");
    assert!(!repo.join("added.txt").exists(), "added since: removed");
    assert_eq!(read(&repo, "untracked.txt"), "mine\n", "untracked is kept");
    assert_eq!(
        read(&repo, "staged.txt"),
        "staged\n",
        "a staged new file is kept"
    );
    let status = git(&repo, &["status", "--porcelain"]);
    assert!(status.contains("?? staged.txt"), "and unstaged: {status}");
    // The restores were destructive changes, recorded as such.
    let changes = pick!(
        out.events(),
        Event::ActionStarted { effect: Effect::Change, command, .. } => command.clone()
    );
    assert!(changes.iter().any(|c| c.contains("checkout")));
}

#[test]
fn dry_run_lists_the_files_and_changes_nothing() {
    let env = Env::new();
    let repo = env.scratch().join("repo");
    let (_, second) = make_repo(&repo);
    for f in ["a.txt", "b c.txt", "keep.txt"] {
        write(&repo, f, "edited\n");
    }
    let rb = env.write(
        "preview.lua",
        &subst(
            r#"
runbook { name = "preview" }
local here = target("local")
@SHOW@
step("restore", function() show("dry", git.restore(here, { repo = "@repo@" })) end)
"#,
            &[("SHOW", &SHOW), ("repo", &repo.display())],
        ),
    );
    let stderr = Run::new(&env, &rb)
        .dry_run()
        .expect_exit(0)
        .run()
        .stderr_text();
    let expected = format!(
        // Each file with the lines it differs by: what the restore undoes.
        "restore 3 files in {} to {}: a.txt (+1 -1), b c.txt (+1 -1), keep.txt (+1 -1)",
        repo.display(),
        &second[..7]
    );
    assert!(
        stderr.contains(&expected),
        "preview lacks {expected}:\n{stderr}"
    );
    for f in ["a.txt", "b c.txt", "keep.txt"] {
        assert_eq!(read(&repo, f), "edited\n", "{f} untouched");
    }
    let out = git_run(&env, &rb).dry_run().expect_exit(0).run();
    let logs = out.logs();
    assert_eq!(
        logs[0],
        format!("dry {second} true true a.txt,b c.txt,keep.txt")
    );
    let events = out.events();
    let planned = pick!(events, Event::ActionPlanned { .. });
    assert_eq!(planned.len(), 1, "{planned:?}");
    assert!(
        matches!(
            planned[0],
            Event::ActionPlanned {
                destructive: true,
                ..
            }
        ),
        "{planned:?}"
    );
}

#[test]
fn a_clean_tree_is_a_no_op() {
    let env = Env::new();
    let repo = env.scratch().join("repo");
    let (first, second) = make_repo(&repo);
    write(&repo, "untracked.txt", "mine\n");
    let rb = env.write(
        "noop.lua",
        &subst(
            r#"
runbook { name = "noop" }
local here = target("local")
@SHOW@
step("restore", function()
  show("noop", git.restore(here, { repo = "@repo@" }))
  show("keep", git.restore(here, { repo = "@repo@", rev = "@first@", paths = { "keep.txt" } }))
end)
"#,
            &[
                ("SHOW", &SHOW),
                ("repo", &repo.display()),
                ("first", &first),
            ],
        ),
    );
    let out = git_run(&env, &rb).expect_exit(0).run();
    let logs = out.logs();
    assert_eq!(logs[0], format!("noop {second} false false "));
    assert_eq!(logs[1], format!("keep {first} false false "));
    let evs = out.events();
    assert!(
        !evs.iter().any(is_change),
        "no change action at all: {evs:?}"
    );
    let finished = pick!(evs, Event::StepFinished { .. })[0];
    assert!(
        matches!(
            finished,
            Event::StepFinished {
                outcome: StepOutcome::Ok,
                ..
            }
        ),
        "not \"changed\": {finished:?}"
    );
}

#[test]
fn refuses_unknown_revs_and_paths_outside_the_repo() {
    let env = Env::new();
    let repo = env.scratch().join("repo");
    make_repo(&repo);
    write(&repo, "a.txt", "edited\n");
    let not_repo = env.scratch().join("plain");
    std::fs::create_dir_all(&not_repo).unwrap();
    let rb = env.write(
        "refuse.lua",
        &subst(
            r#"
runbook { name = "refuse" }
local here = target("local")
local R = "@repo@"
local function try(opts)
  local ok, err = pcall(git.restore, here, opts)
  if ok then fail("accepted " .. tostring(opts.rev) .. " " .. table.concat(opts.paths or {}, ",")) end
  log.info(tostring(err))
end
step("refuse", function()
  try({ repo = R, rev = "no-such-rev" })
  try({ repo = R, paths = { "../outside.txt" } })
  try({ repo = R, paths = { "/etc/passwd" } })
  try({ repo = R, paths = { "sub/../../x" } })
  try({ repo = "@plain@" })
end)
"#,
            &[("repo", &repo.display()), ("plain", &not_repo.display())],
        ),
    );
    let out = git_run(&env, &rb).yes().expect_exit(0).run();
    let logs = out.logs();
    assert_eq!(logs.len(), 5, "{logs:?}");
    assert!(
        logs[0].contains(&format!(
            "'no-such-rev' is not a commit in {}",
            repo.display()
        )),
        "{}",
        logs[0]
    );
    assert!(
        logs[0].contains("refuse.lua:"),
        "names the line: {}",
        logs[0]
    );
    assert!(
        logs[1].contains("'../outside.txt' is outside the repository"),
        "{}",
        logs[1]
    );
    assert!(
        logs[2].contains("'/etc/passwd' is outside the repository"),
        "{}",
        logs[2]
    );
    assert!(logs[3].contains("is outside the repository"), "{}", logs[3]);
    assert!(
        logs[4].contains("not a git repository"),
        "git's own words: {}",
        logs[4]
    );
    assert_eq!(read(&repo, "a.txt"), "edited\n");
    assert!(!out.events().iter().any(is_change), "nothing was changed");
}

#[test]
fn head_and_status_parse_odd_names() {
    let env = Env::new();
    let repo = env.scratch().join("repo");
    let (_, second) = make_repo(&repo);
    write(&repo, "b c.txt", "edited\n");
    write(&repo, "new\nline.txt", "x\n");
    git(&repo, &["mv", "keep.txt", "kept now.txt"]);
    let rb = env.write(
        "look.lua",
        &subst(
            r#"
runbook { name = "look" }
local here = target("local")
step("look", function()
  local h = git.head(here, "@repo@")
  log.info("head " .. h.rev .. " " .. h.short .. " " .. tostring(h.branch) .. " " .. h.subject)
  local s = git.status(here, "@repo@")
  log.info("clean " .. tostring(s.clean) .. " " .. #s.files)
  for _, f in ipairs(s.files) do log.info("[" .. f.status .. "|" .. f.path .. "|" .. tostring(f.from) .. "]") end
end)
"#,
            &[("repo", &repo.display())],
        ),
    );
    let out = git_run(&env, &rb).expect_exit(0).run();
    let logs = out.logs();
    assert_eq!(
        logs[0],
        format!("head {second} {} main second", &second[..7])
    );
    assert_eq!(logs[1], "clean false 3");
    let mut files = logs[2..].to_vec();
    files.sort();
    assert_eq!(
        files,
        vec![
            "[ M|b c.txt|nil]".to_string(),
            "[??|new\nline.txt|nil]".to_string(),
            "[R |kept now.txt|keep.txt]".to_string(),
        ]
    );

    // Detached HEAD, clean tree.
    git(&repo, &["reset", "-q", "--hard"]);
    git(&repo, &["clean", "-q", "-f"]);
    git(&repo, &["checkout", "-q", "--detach", "HEAD~1"]);
    let out = git_run(&env, &rb).expect_exit(0).run();
    let logs = out.logs();
    assert!(logs[0].ends_with(" nil first"), "{}", logs[0]);
    assert_eq!(logs[1], "clean true 0");
}

#[test]
fn restores_inside_a_container_over_ssh() {
    require_sshd!();
    let fleet = Fleet::start(1);
    let ct = fleet.container(200);
    // The container's /root/dflash is <container dir>/root/dflash on the node.
    let repo = ct.join("root/dflash");
    let (_, second) = make_repo(&repo);
    write(&repo, "a.txt", "broken\n");
    std::fs::remove_file(repo.join("keep.txt")).unwrap();
    let env = Env::new();
    let rb = env.write(
        "remote.lua",
        r#"
runbook { name = "remote-restore" }
local box = target("node1"):pct(200)
step("restore", function()
  local r = git.restore(box, { repo = "/root/dflash" })
  log.info(r.rev .. " " .. table.concat(r.files, ","))
  local h = git.head(box, "/root/dflash")
  log.info(h.short .. " " .. tostring(h.branch))
  log.info(tostring(git.status(box, "/root/dflash").clean))
end)
"#,
    );
    let logs = Run::new(&env, &rb)
        .ssh(&fleet)
        .yes()
        .json()
        .expect_exit(0)
        .run()
        .logs();
    assert_eq!(logs[0], format!("{second} a.txt,keep.txt"));
    assert_eq!(logs[1], format!("{} main", &second[..7]));
    assert_eq!(logs[2], "true");
    assert_eq!(read(&repo, "a.txt"), "two\n");
    assert_eq!(read(&repo, "keep.txt"), "same\n");
}
