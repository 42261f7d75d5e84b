//! Editor types (`runbook init`) and skeletons (`runbook new`), held to the real checker:
//! `emmylua_check` (the `emmylua_check` crate, which scripts/test installs) reads the
//! `.luarc.json` and `.runbook/types/` that `runbook init` writes. Every shipped runbook,
//! example and stdlib module checks with no diagnostic at all, a wrong option name or type
//! is one, and every skeleton `runbook new` writes passes both `runbook check` and the
//! types. Without `emmylua_check` the tests that need it skip, unless
//! `RUNBOOK_REQUIRE_EMMYLUA=1` (scripts/test sets it): then they fail.
use crate::common::*;

use std::path::{Path, PathBuf};

/// `emmylua_check` on PATH or in cargo's bin directory, where `cargo install` puts it.
fn emmylua() -> Option<PathBuf> {
    let cargo_bin = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .map(|c| c.join("bin"));
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(cargo_bin)
        .map(|d| d.join("emmylua_check"))
        .find(|p| p.is_file());
    if found.is_none() {
        if std::env::var("RUNBOOK_REQUIRE_EMMYLUA").as_deref() == Ok("1") {
            panic!("emmylua_check is required here (RUNBOOK_REQUIRE_EMMYLUA=1) but is not installed: cargo install --locked emmylua_check");
        }
        eprintln!("skipped: no emmylua_check (cargo install --locked emmylua_check)");
    }
    found
}

/// One diagnostic: where (1-based line), its code and message, and the source text it
/// points at.
#[derive(Debug)]
struct Diag {
    file: PathBuf,
    line: usize,
    code: String,
    message: String,
    text: String,
}

/// What `emmylua_check` says about every Lua file under `workspace`, with the config
/// found there: each file it checked, and its diagnostics (hints included).
fn check(emmylua: &Path, workspace: &Path) -> (Vec<PathBuf>, Vec<Diag>) {
    let out = std::process::Command::new(emmylua)
        .arg("--output-format")
        .arg("json")
        .arg(workspace)
        .output()
        .expect("emmylua_check runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let files: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "emmylua_check printed no JSON ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let (mut checked, mut diags) = (Vec::new(), Vec::new());
    for f in files.as_array().expect("a list of files") {
        let file = PathBuf::from(f["file"].as_str().unwrap());
        let source = std::fs::read_to_string(&file).unwrap_or_default();
        let lines: Vec<&str> = source.lines().collect();
        for d in f["diagnostics"].as_array().unwrap() {
            let start = &d["range"]["start"];
            let line = start["line"].as_u64().unwrap() as usize;
            let col = start["character"].as_u64().unwrap() as usize;
            let text = lines
                .get(line)
                .map(|l| l.chars().skip(col).collect())
                .unwrap_or_default();
            diags.push(Diag {
                file: file.clone(),
                line: line + 1,
                code: d["code"].as_str().unwrap_or_default().to_string(),
                message: d["message"].as_str().unwrap_or_default().to_string(),
                text,
            });
        }
        checked.push(file);
    }
    (checked, diags)
}

fn lua_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            lua_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "lua") {
            out.push(p);
        }
    }
}

/// `runbook init` in the test's temp dir, which must succeed.
fn init(env: &Env) -> Output {
    Run::cmd(env, ["init"]).expect_exit(0).run()
}

fn same_file(a: &Path, b: &Path) -> bool {
    a.canonicalize().ok() == b.canonicalize().ok()
}

#[test]
fn init_writes_the_types_and_a_luarc() {
    let env = Env::new();
    init(&env);
    let root = env.tmp.path();
    let luarc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".luarc.json")).unwrap()).unwrap();
    assert_eq!(luarc["runtime"]["version"], "Lua 5.4");
    assert_eq!(luarc["workspace"]["library"][0], ".runbook/types");
    let types = std::fs::read_to_string(root.join(".runbook/types/runbook.lua")).unwrap();
    assert!(types.starts_with("---@meta\n"), "{}", &types[..200]);
    // Generated from the reference: every function it documents is defined, every
    // options struct is a class of its own.
    for needle in [
        "function cache.clear(t, paths, opts) end",
        "function Target:exec(argv, opts) end",
        "function step(name, opts, fn) end",
        "---@class runbook.TargetCommandOptions : {",
        "---@field keep_last? integer `keep_last`",
        "---@class runbook.ExecResult",
        "---@type table<string, any>\nparams = {}",
    ] {
        assert!(types.contains(needle), "runbook.lua lacks {needle:?}");
    }
    for module in ["text", "torch"] {
        let written =
            std::fs::read_to_string(root.join(format!(".runbook/types/runbook/{module}.lua")))
                .unwrap();
        let source =
            std::fs::read_to_string(repo().join(format!("stdlib/runbook/{module}.lua"))).unwrap();
        assert_eq!(written, source, "the stdlib module {module} as it ships");
    }

    // Every init writes the types again; a .luarc.json of the user's own is kept as it
    // is, and init says what it lacks.
    std::fs::write(root.join(".runbook/types/runbook.lua"), "-- edited\n").unwrap();
    let theirs = "{ \"diagnostics\": { \"globals\": [\"vim\"] } }\n";
    std::fs::write(root.join(".luarc.json"), theirs).unwrap();
    let out = init(&env);
    assert_eq!(
        std::fs::read_to_string(root.join(".runbook/types/runbook.lua")).unwrap(),
        types
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".luarc.json")).unwrap(),
        theirs
    );
    let said = out.stderr_str();
    assert!(
        said.contains("kept ./.luarc.json")
            && said.contains("\"workspace.library\": [\".runbook/types\"]")
            && said.contains("\"runtime.version\": \"Lua 5.4\""),
        "{}",
        out.describe()
    );

    Run::cmd(&env, ["init", "no-such-dir"])
        .expect_exit(2)
        .stderr_has("init no-such-dir: no such directory")
        .run();
}

fn symlink(to: &Path, at: &Path) {
    std::os::unix::fs::symlink(to, at).unwrap();
}

/// A cloned project can ship its types, a directory on the way to them, or `.luarc.json`
/// as a link out of it (to ~/.bashrc, or dangling, to anywhere): init writes through
/// none of them. It exits 2 naming the path, and writes nothing at all.
#[test]
fn init_never_writes_through_a_link() {
    let env = Env::new();
    let root = env.tmp.path();
    let outside = tempfile::tempdir().unwrap();
    let bashrc = outside.path().join("bashrc");
    std::fs::write(&bashrc, "mine\n").unwrap();
    let nothing_written = |out: &Output| {
        assert!(
            out.stderr_str().contains("nothing was written"),
            "{}",
            out.describe()
        );
        assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "mine\n");
        assert_eq!(
            std::fs::read_dir(outside.path()).unwrap().count(),
            1,
            "nothing was made outside the project"
        );
        assert!(
            !root.join(".runbook/types/runbook").exists(),
            "no stdlib module written"
        );
    };

    std::fs::create_dir_all(root.join(".runbook/types")).unwrap();
    symlink(&bashrc, &root.join(".runbook/types/runbook.lua"));
    let out = Run::cmd(&env, ["init"])
        .expect_exit(2)
        .stderr_has("./.runbook/types/runbook.lua: is a symbolic link")
        .run();
    nothing_written(&out);
    assert!(!root.join(".luarc.json").exists(), "{}", out.describe());

    // A dangling `.luarc.json`: its target is not created.
    std::fs::remove_file(root.join(".runbook/types/runbook.lua")).unwrap();
    symlink(&outside.path().join("made"), &root.join(".luarc.json"));
    let out = Run::cmd(&env, ["init"])
        .expect_exit(2)
        .stderr_has("./.luarc.json: is a symbolic link")
        .run();
    nothing_written(&out);
    assert!(!root.join(".runbook/types/runbook.lua").exists());

    // A directory on the way.
    std::fs::remove_file(root.join(".luarc.json")).unwrap();
    std::fs::remove_dir_all(root.join(".runbook")).unwrap();
    symlink(outside.path(), &root.join(".runbook"));
    let out = Run::cmd(&env, ["init"])
        .expect_exit(2)
        .stderr_has("./.runbook on the way is a symbolic link")
        .run();
    nothing_written(&out);
    assert!(!root.join(".luarc.json").exists());
}

/// `runbook new` never writes through a link either: a dangling one would create its
/// target wherever it points.
#[test]
fn new_never_writes_through_a_link() {
    let env = Env::new();
    let root = env.tmp.path();
    let outside = tempfile::tempdir().unwrap();
    symlink(&outside.path().join("made"), &root.join("fresh.lua"));
    let out = Run::cmd(&env, ["new", "fresh"])
        .expect_exit(2)
        .stderr_has("fresh.lua: is a symbolic link")
        .stderr_has("nothing was written")
        .run();
    assert!(!outside.path().join("made").exists(), "{}", out.describe());
    let bashrc = outside.path().join("bashrc");
    std::fs::write(&bashrc, "mine\n").unwrap();
    symlink(&bashrc, &root.join("other.lua"));
    Run::cmd(&env, ["new", "other"])
        .expect_exit(2)
        .stderr_has("other.lua: is a symbolic link")
        .run();
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "mine\n");
    // Where nothing is in the way, it writes as before (a plain file, not executable).
    Run::cmd(&env, ["new", "plain"]).expect_exit(0).run();
    let meta = std::fs::symlink_metadata(root.join("plain.lua")).unwrap();
    assert!(meta.file_type().is_file());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o111, 0);
}

#[test]
fn shipped_runbooks_examples_and_stdlib_type_check_clean() {
    let Some(emmylua) = emmylua() else { return };
    let env = Env::new();
    init(&env);
    let root = env.tmp.path();
    let mut files = Vec::new();
    for dir in ["runbooks", "examples"] {
        lua_files(&repo().join(dir), &mut files);
    }
    assert!(files.len() >= 9, "{files:?}");
    let mut copies = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(repo()).unwrap();
        let to = root.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(f, &to).unwrap();
        copies.push(to);
    }
    let (checked, diags) = check(&emmylua, root);
    for c in &copies {
        assert!(
            checked.iter().any(|f| same_file(f, c)),
            "emmylua_check did not check {}: {checked:?}",
            c.display()
        );
    }
    assert!(
        diags.is_empty(),
        "shipped Lua with diagnostics under runbook's types:\n{diags:#?}"
    );

    // The stdlib modules, and the definitions themselves, as a workspace of their own.
    let types = root.join(".runbook/types");
    let (checked, diags) = check(&emmylua, &types);
    for name in ["runbook.lua", "runbook/text.lua", "runbook/torch.lua"] {
        assert!(
            checked.iter().any(|f| same_file(f, &types.join(name))),
            "emmylua_check did not check {name}: {checked:?}"
        );
    }
    assert!(
        diags.is_empty(),
        "the stdlib or the definitions have diagnostics:\n{diags:#?}"
    );
}

#[test]
fn a_wrong_option_name_or_type_is_a_diagnostic_naming_it() {
    let Some(emmylua) = emmylua() else { return };
    let env = Env::new();
    init(&env);
    let good = "runbook { name = \"good\", params = { n = { type = \"integer\", default = 1 } } }\n\
                local here = target(\"local\")\n\
                step(\"s\", { retries = 2, timeout = \"1m\", when = function() return true end }, function()\n\
                \x20 here:exec({ \"ls\" }, { read_only = true, check = false, env = { A = \"1\" } })\n\
                \x20 cache.clear(here, \"/tmp/x\", { keep = true, keep_last = 2 })\n\
                end)\n";
    env.write("good.lua", good);
    // Line by line: the wrong name (or the option with the wrong type), as a diagnostic
    // must name it.
    let cases = [
        (
            "step(\"a\", { retries = 2, timout = \"1m\" }, function() end)",
            "timout",
        ),
        (
            "step(\"b\", { always = \"yes\" }, function() end)",
            "always",
        ),
        (
            "here:exec({ \"ls\" }, { read_only = true, chek = false })",
            "chek",
        ),
        (
            "here:exec({ \"ls\" }, { read_only = \"yes\" })",
            "read_only",
        ),
        (
            "cache.clear(here, \"/tmp/x\", { keep = true, keeep_last = 2 })",
            "keeep_last",
        ),
        ("ssh(\"h.example\", { port = \"22\" })", "port"),
        ("runbook { nme = \"bad\" }", "nme"),
    ];
    let mut bad = String::from("local here = target(\"local\")\n");
    for (line, _) in &cases {
        bad.push_str(line);
        bad.push('\n');
    }
    env.write("bad.lua", &bad);
    let (_, diags) = check(&emmylua, env.tmp.path());
    let about = |name: &str| -> Vec<&Diag> {
        diags
            .iter()
            .filter(|d| d.file.file_name().is_some_and(|f| f == name))
            .collect()
    };
    assert!(about("good.lua").is_empty(), "{:#?}", about("good.lua"));
    for (i, (line, option)) in cases.iter().enumerate() {
        let at = i + 2;
        let found: Vec<&Diag> = about("bad.lua")
            .into_iter()
            .filter(|d| d.line == at)
            .collect();
        assert!(
            found.iter().any(|d| d.code.ends_with("type-mismatch")
                && (d.message.contains(option) || d.text.starts_with(option))),
            "bad.lua:{at}: `{line}`: no diagnostic naming '{option}': {found:#?}"
        );
    }
}

#[test]
fn new_writes_a_skeleton_that_checks_for_every_target() {
    let emmylua = emmylua();
    let env = Env::new();
    init(&env);
    for target in ["local", "ssh", "pct"] {
        let name = format!("demo-{target}");
        Run::cmd(&env, ["new", &name, "--target", target])
            .expect_exit(0)
            .stdout_has(format!("wrote ./{name}.lua"))
            .run();
        let text = std::fs::read_to_string(env.tmp.path().join(format!("{name}.lua"))).unwrap();
        for part in [
            "runbook {\n",
            "params = {",
            "{ read_only = true }",
            "{ always = true }",
        ] {
            assert!(text.contains(part), "{name}.lua lacks {part:?}:\n{text}");
        }
        // The shipped runbooks' style: two-space indents, no tabs, short lines.
        assert!(
            text.lines().all(|l| !l.contains('\t')
                && l.len() <= 120
                && (l.len() - l.trim_start().len()) % 2 == 0),
            "{text}"
        );
        Run::cmd(&env, ["check", &format!("{name}.lua")])
            .expect_exit(0)
            .stdout_has(format!("ok: {name}.lua"))
            .run();
        Run::cmd(
            &env,
            ["run", &format!("{name}.lua"), "--dry-run", "--offline"],
        )
        .expect_exit(0)
        .run();
        // Formatted already, in the style `fmt` uses where no stylua.toml is found.
        Run::cmd(&env, ["fmt", "--check", &format!("{name}.lua")])
            .expect_exit(0)
            .run();
    }
    // Its real run is the run its plan showed: a confirmed run is held to the plan, so a
    // skeleton whose commands depend on a change's output would stop itself.
    let home = env.tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let (code, screen) = Run::cmd(&env, ["run", "demo-local.lua"])
        .env("HOME", &home)
        .on_terminal("y\n");
    assert_eq!(code, 0, "{screen}");
    assert!(!home.join(".cache/demo-local").exists(), "{screen}");
    let skeleton = std::fs::read_to_string(env.tmp.path().join("demo-ssh.lua")).unwrap();
    assert!(skeleton.contains("root@node1.example") && skeleton.contains("target(params.host)"));
    let pct = std::fs::read_to_string(env.tmp.path().join("demo-pct.lua")).unwrap();
    assert!(pct.contains("target(params.node):pct(params.ctid)"));

    // Never over a file: the refusal names it and leaves it as it was.
    let before = std::fs::read(env.tmp.path().join("demo-local.lua")).unwrap();
    Run::cmd(&env, ["new", "demo-local", "--target", "ssh"])
        .expect_exit(2)
        .stderr_has("./demo-local.lua: already exists")
        .run();
    assert_eq!(
        std::fs::read(env.tmp.path().join("demo-local.lua")).unwrap(),
        before
    );
    Run::cmd(&env, ["new", "../up"])
        .expect_exit(2)
        .stderr_has("a runbook name is letters, digits")
        .run();
    std::fs::create_dir(env.tmp.path().join("books")).unwrap();
    Run::cmd(&env, ["new", "there.lua", "--dir", "books"])
        .expect_exit(0)
        .run();
    assert!(env.tmp.path().join("books/there.lua").is_file());

    let Some(emmylua) = emmylua else { return };
    let (checked, diags) = check(&emmylua, env.tmp.path());
    assert!(checked.len() >= 4, "{checked:?}");
    assert!(diags.is_empty(), "skeletons with diagnostics:\n{diags:#?}");
}
