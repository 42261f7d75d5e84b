//! Review by a second person (issue 29, items 1, 2 and 5): a plan signed by its author,
//! approved by others with real `ssh-keygen -Y` keys listed in an `allowed_signers` file,
//! and `apply` refusing whatever the policy in `runbook.toml` does not allow, before
//! anything changes.
use crate::common::*;
use std::path::{Path, PathBuf};

/// Three people's keys (bob has two) and the allowed_signers file that names them.
struct People {
    dir: PathBuf,
}

impl People {
    fn new(env: &Env) -> People {
        let dir = env.scratch().join("keys");
        std::fs::create_dir_all(&dir).unwrap();
        let mut signers = String::new();
        for (key, who) in [
            ("alice", "alice@example.invalid"),
            ("bob", "bob@example.invalid"),
            ("bob2", "bob@example.invalid"),
            ("carol", "carol@example.invalid"),
            ("mallory", ""),
        ] {
            let out = std::process::Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C", key, "-f"])
                .arg(dir.join(key))
                .output()
                .unwrap();
            assert!(out.status.success(), "ssh-keygen: {out:?}");
            if !who.is_empty() {
                let public = std::fs::read_to_string(dir.join(format!("{key}.pub"))).unwrap();
                let mut words = public.split_whitespace();
                signers.push_str(&format!(
                    "{who} {} {}\n",
                    words.next().unwrap(),
                    words.next().unwrap()
                ));
            }
        }
        std::fs::write(dir.join("allowed_signers"), signers).unwrap();
        People { dir }
    }

    fn key(&self, who: &str) -> PathBuf {
        self.dir.join(who)
    }
}

/// A runbook that reads a directory and deletes a cache in it: a `[deletes]` change on
/// the inventory host `box` (this machine), in group `gpu`.
fn setup(env: &Env, policy: &str) -> (People, PathBuf) {
    let people = People::new(env);
    let work = env.scratch().join("work");
    std::fs::create_dir_all(work.join("cache/a")).unwrap();
    std::fs::write(work.join("cache/a/k"), "kernel").unwrap();
    env.write(
        "inventory.toml",
        "[hosts.box]\naddress = \"local\"\n\n[groups]\ngpu = [\"box\"]\n",
    );
    env.write(
        "runbook.toml",
        &subst(
            "[policy]\nallowed_signers = \"@signers@\"\n@policy@\n",
            &[
                ("signers", &people.dir.join("allowed_signers").display()),
                ("policy", &policy),
            ],
        ),
    );
    let rb = env.write(
        "reset.lua",
        &subst(
            r#"runbook { name = "reset" }
local box = target("box")
step("clear the cache", function()
  cache.clear(box, { "@cache@" })
end)
"#,
            &[("cache", &work.join("cache").display())],
        ),
    );
    (people, rb)
}

fn plan_file(env: &Env) -> PathBuf {
    env.tmp.path().join("P.json")
}

fn make_signed_plan(env: &Env, people: &People, rb: &Path) {
    Run::cmd(env, ["plan"])
        .arg(rb)
        .args(["--inventory", "inventory.toml", "-o"])
        .arg(plan_file(env))
        .arg("--sign")
        .arg("--key")
        .arg(people.key("alice"))
        .expect_exit(0)
        .run();
}

fn approve<'e>(env: &'e Env, people: &People, who: &str) -> Run<'e> {
    Run::cmd(env, ["approve"])
        .arg(plan_file(env))
        .arg("--yes")
        .arg("--key")
        .arg(people.key(who))
}

fn apply<'e>(env: &'e Env) -> Run<'e> {
    Run::cmd(env, ["apply"])
        .arg(plan_file(env))
        .args(["--yes", "--json"])
}

fn approvals(env: &Env) -> Vec<serde_json::Value> {
    let mut p = plan_file(env).into_os_string();
    p.push(".approvals");
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_plan_runs_once_its_author_signed_and_another_person_approved() {
    let env = Env::new();
    let (people, rb) = setup(&env, "approvers = 1");
    make_signed_plan(&env, &people, &rb);
    let signed = approvals(&env);
    assert_eq!(signed.len(), 1);
    assert_eq!(signed[0]["role"], "author");

    // Not approved yet: refused, nothing changed.
    let out = apply(&env).expect_exit(2).run();
    let err = out.stderr_text();
    assert!(
        err.contains("needs\n  - 1 approval(s) by someone other than the author, 0 valid"),
        "{err}"
    );
    assert!(env.scratch().join("work/cache/a/k").exists());

    // The author approving their own plan is refused and writes nothing.
    let out = approve(&env, &people, "alice").expect_exit(2).run();
    assert!(
        out.stderr_text()
            .contains("alice@example.invalid is its author, and an author's approval never counts"),
        "{}",
        out.describe()
    );
    assert_eq!(approvals(&env).len(), 1);
    // A key allowed_signers does not list approves nothing.
    let out = approve(&env, &people, "mallory").expect_exit(2).run();
    assert!(
        out.stderr_text().contains("does not list"),
        "{}",
        out.describe()
    );

    // Bob approves after the reads are run again: same answers.
    let out = approve(&env, &people, "bob").expect_exit(0).run();
    let said = out.stderr_text();
    assert!(
        said.contains("signed by its author: alice@example.invalid"),
        "{said}"
    );
    assert!(said.contains("every read gave the same answer"), "{said}");
    assert!(
        said.contains("approved by bob@example.invalid until "),
        "{said}"
    );

    // Carol applies: the record names the author, the approver and who applied.
    let out = apply(&env).expect_exit(0).run();
    assert!(
        !env.scratch().join("work/cache/a").exists(),
        "{}",
        out.describe()
    );
    match out.events().first() {
        Some(Event::RunStarted {
            author,
            approvers,
            plan,
            ..
        }) => {
            assert_eq!(author.as_deref(), Some("alice@example.invalid"));
            assert_eq!(approvers, &["bob@example.invalid".to_string()]);
            assert!(plan.is_some());
        }
        other => panic!("{other:?}"),
    }
    // history and log say who made, approved and applied it.
    let history = Run::cmd(&env, ["history"])
        .expect_exit(0)
        .run()
        .stdout_text();
    assert!(
        history
            .contains("  signed alice@example.invalid, approved bob@example.invalid, applied by "),
        "{history}"
    );
    let log = Run::cmd(&env, ["log", "last"])
        .expect_exit(0)
        .run()
        .stdout_text();
    assert!(
        log.contains("by alice@example.invalid, approved by bob@example.invalid, applied by "),
        "{log}"
    );
    assert!(log.contains(".jsonl (verified)"), "{log}");
    assert!(history.contains(" verified "), "{history}");
    // One byte edited in the record: history says so.
    let record = latest_record_file(&env.state());
    let mut text = std::fs::read(&record).unwrap();
    let at = text.len() / 2;
    text[at] = if text[at] == b'a' { b'b' } else { b'a' };
    std::fs::write(&record, text).unwrap();
    let history = Run::cmd(&env, ["history"])
        .expect_exit(0)
        .run()
        .stdout_text();
    assert!(history.contains(" TAMPERED "), "{history}");
}

#[test]
fn two_keys_of_one_person_count_once_and_a_rule_asks_more_for_deletes_on_a_group() {
    let env = Env::new();
    let (people, rb) = setup(
        &env,
        "approvers = 1\n\n[[policy.rule]]\ngroup = \"gpu\"\ndeletes = true\napprovers = 2",
    );
    make_signed_plan(&env, &people, &rb);
    approve(&env, &people, "bob").expect_exit(0).run();
    approve(&env, &people, "bob2").expect_exit(0).run();
    let err = apply(&env).expect_exit(2).run().stderr_text();
    assert!(
        err.contains("2 approval(s) by someone other than the author, 1 valid (the policy asks 2: 1 for every plan, 2 for a [deletes] change on group gpu)"),
        "{err}"
    );
    assert!(
        err.contains("bob@example.invalid approved already (counted once)"),
        "{err}"
    );
    approve(&env, &people, "carol").expect_exit(0).run();
    apply(&env).expect_exit(0).run();
}

#[test]
fn an_expired_approval_or_one_of_another_plan_does_not_count() {
    let env = Env::new();
    let (people, rb) = setup(&env, "approvers = 1");
    make_signed_plan(&env, &people, &rb);
    approve(&env, &people, "bob")
        .args(["--ttl", "1s"])
        .expect_exit(0)
        .run();
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let err = apply(&env).expect_exit(2).run().stderr_text();
    assert!(err.contains(".approvals:2: expired at "), "{err}");

    // Bob's approval of another plan (the same runbook planned again) is not this one's.
    let other = env.tmp.path().join("other.json");
    Run::cmd(&env, ["plan"])
        .arg(&rb)
        .args(["--inventory", "inventory.toml", "-o"])
        .arg(&other)
        .arg("--sign")
        .arg("--key")
        .arg(people.key("alice"))
        .expect_exit(0)
        .run();
    Run::cmd(&env, ["approve"])
        .arg(&other)
        .arg("--yes")
        .arg("--key")
        .arg(people.key("bob"))
        .expect_exit(0)
        .run();
    let theirs = std::fs::read_to_string(env.tmp.path().join("other.json.approvals")).unwrap();
    let mut mine = plan_file(&env).into_os_string();
    mine.push(".approvals");
    let mut text = std::fs::read_to_string(&mine).unwrap();
    text.push_str(theirs.lines().nth(1).unwrap());
    text.push('\n');
    std::fs::write(&mine, text).unwrap();
    let err = apply(&env).expect_exit(2).run().stderr_text();
    assert!(err.contains(".approvals:3: signed another plan"), "{err}");

    // An edited approval (its expiry pushed out) no longer verifies.
    let mut lines: Vec<serde_json::Value> = approvals(&env);
    lines[1]["expires"] = "2999-01-01T00:00:00Z".into();
    let edited: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&mine, edited).unwrap();
    let err = apply(&env).expect_exit(2).run().stderr_text();
    assert!(
        err.contains(".approvals:2: the signature does not verify"),
        "{err}"
    );
}

#[test]
fn a_target_that_changed_is_shown_at_approval_and_refused_at_apply() {
    let env = Env::new();
    let (people, rb) = setup(&env, "approvers = 1");
    make_signed_plan(&env, &people, &rb);
    // The cache grew after the plan was made: what would be deleted is not what was read.
    std::fs::write(env.scratch().join("work/cache/a/new"), vec![b'x'; 4096]).unwrap();
    let out = approve(&env, &people, "bob").expect_exit(2).run();
    let said = out.stderr_text();
    assert!(
        said.contains("the targets no longer read as the plan says:"),
        "{said}"
    );
    assert!(said.contains("answers otherwise now"), "{said}");
    assert!(said.contains("not approved: the targets changed"), "{said}");
    assert_eq!(approvals(&env).len(), 1);

    // Approved while it held, then the target changes: apply refuses before the change.
    std::fs::remove_file(env.scratch().join("work/cache/a/new")).unwrap();
    approve(&env, &people, "bob").expect_exit(0).run();
    std::fs::write(env.scratch().join("work/cache/a/new"), vec![b'x'; 4096]).unwrap();
    let out = apply(&env).expect_exit(2).run();
    let err = out.stderr_text();
    assert!(
        err.contains(
            "refused, nothing was changed: change 1: field \"summary\" is not what the change is"
        ),
        "{err}"
    );
    assert!(
        env.scratch().join("work/cache/a/new").exists(),
        "nothing was deleted"
    );
}

#[test]
fn without_a_policy_nothing_is_asked_and_a_bad_policy_names_its_line() {
    let env = Env::new();
    let (people, rb) = setup(&env, "approvers = 1");
    std::fs::remove_file(env.tmp.path().join("runbook.toml")).unwrap();
    make_signed_plan(&env, &people, &rb);
    let err = approve(&env, &people, "bob")
        .expect_exit(2)
        .run()
        .stderr_text();
    assert!(err.contains("runbook.toml has no [policy]"), "{err}");
    env.write(
        "runbook.toml",
        "[policy]\nallowed_signers = \"x\"\naprovers = 2\n",
    );
    let err = apply(&env).expect_exit(2).run().stderr_text();
    assert!(
        err.contains("runbook.toml:3: unknown field `aprovers`"),
        "{err}"
    );
    std::fs::remove_file(env.tmp.path().join("runbook.toml")).unwrap();
    apply(&env).expect_exit(0).run();
}

/// A key whose private half only ssh-agent holds: `--key KEY.pub`.
#[test]
fn an_approval_signed_through_ssh_agent() {
    let env = Env::new();
    let (people, rb) = setup(&env, "approvers = 1");
    make_signed_plan(&env, &people, &rb);
    let sock = env.scratch().join("agent.sock");
    let agent = std::process::Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&sock)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _agent = Kill(agent);
    for _ in 0..100 {
        if sock.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let added = std::process::Command::new("ssh-add")
        .arg("-q")
        .arg(people.key("bob"))
        .env("SSH_AUTH_SOCK", &sock)
        .output()
        .unwrap();
    assert!(added.status.success(), "ssh-add: {added:?}");
    // The private key is not where approve could read it.
    std::fs::rename(people.key("bob"), env.scratch().join("elsewhere")).unwrap();
    Run::cmd(&env, ["approve"])
        .arg(plan_file(&env))
        .arg("--yes")
        .arg("--key")
        .arg(people.dir.join("bob.pub"))
        .env("SSH_AUTH_SOCK", &sock)
        .expect_exit(0)
        .run();
    apply(&env).expect_exit(0).run();
}
