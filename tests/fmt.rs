//! `runbook fmt [--check] [PATH…]`: StyLua formatting with the settings of the nearest
//! `stylua.toml`/`.stylua.toml`; directories walked for `*.lua` (hidden and git-ignored
//! files skipped; the current directory when no PATH); a file that does not parse (or
//! that StyLua cannot check) is `file:line:col`, exit 2, and left as it is while the
//! others are formatted; no write follows a link; `--check` writes nothing, names each
//! unformatted file with a diff, exit 1. Every Lua file this repository ships passes
//! `--check` under its `stylua.toml`.

use crate::common::*;

const UGLY: &str = "local  x={1,2,3}\nif x then print( x ) end\n";

fn read(env: &Env, name: &str) -> String {
    std::fs::read_to_string(env.tmp.path().join(name)).unwrap()
}

#[test]
fn formats_files_in_place_and_names_them() {
    let env = Env::new();
    env.write("a.lua", UGLY);
    env.write("ok.lua", "local x = 1\n");
    let out = Run::cmd(&env, ["fmt", "a.lua", "ok.lua"])
        .expect_exit(0)
        .run();
    // Only the file that changed is named.
    assert_eq!(out.stdout_str(), "a.lua\n", "{}", out.describe());
    // No stylua.toml here: runbook's own style (a short `if` stays on its line).
    assert_eq!(
        read(&env, "a.lua"),
        "local x = { 1, 2, 3 }\nif x then print(x) end\n"
    );
    assert_eq!(read(&env, "ok.lua"), "local x = 1\n");
    // Formatted output is its own fixed point.
    Run::cmd(&env, ["fmt", "--check", "a.lua"])
        .expect_exit(0)
        .run();
}

#[test]
fn check_writes_nothing_names_files_with_a_diff_and_exits_1() {
    let env = Env::new();
    env.write("a.lua", UGLY);
    env.write("ok.lua", "local x = 1\n");
    let out = Run::cmd(&env, ["fmt", "--check", "a.lua", "ok.lua"])
        .expect_exit(1)
        .run();
    let said = out.stdout_str();
    assert!(said.starts_with("would reformat a.lua\n"), "{said}");
    assert!(
        said.contains("@@ -1,2 +1,2 @@\n-local  x={1,2,3}\n"),
        "{said}"
    );
    assert!(said.contains("\n+local x = { 1, 2, 3 }\n"), "{said}");
    assert!(!said.contains("ok.lua"), "{said}");
    assert!(
        out.stderr_str()
            .contains("1 of 2 file(s) would be reformatted"),
        "{}",
        out.describe()
    );
    assert_eq!(read(&env, "a.lua"), UGLY);
}

#[test]
fn settings_come_from_the_nearest_stylua_toml() {
    let env = Env::new();
    env.write(
        "stylua.toml",
        "indent_type = \"Spaces\"\nindent_width = 3\n",
    );
    env.write("sub/deeper/a.lua", UGLY);
    // A nearer one wins, dotted name too.
    env.write(
        "other/.stylua.toml",
        "indent_type = \"Spaces\"\nindent_width = 1\n",
    );
    env.write("other/b.lua", UGLY);
    Run::cmd(&env, ["fmt", "sub/deeper/a.lua", "other/b.lua"])
        .expect_exit(0)
        .run();
    assert!(read(&env, "sub/deeper/a.lua").contains("\n   print(x)\n"));
    assert!(read(&env, "other/b.lua").contains("\n print(x)\n"));
}

#[test]
fn bad_settings_name_the_file_and_line() {
    let env = Env::new();
    env.write("stylua.toml", "indent_width = 2\ncolumn_widht = 80\n");
    env.write("a.lua", UGLY);
    let out = Run::cmd(&env, ["fmt", "a.lua"]).expect_exit(2).run();
    let err = out.stderr_str();
    assert!(err.contains("stylua.toml:2: not StyLua settings"), "{err}");
    assert!(err.contains("column_widht"), "{err}");
    assert_eq!(read(&env, "a.lua"), UGLY);
}

#[test]
fn bad_lua_is_file_line_and_the_others_are_formatted() {
    let env = Env::new();
    env.write("a.lua", UGLY);
    env.write("broken.lua", "local x = 1\nlocal = 2\n");
    let out = Run::cmd(&env, ["fmt", "a.lua", "broken.lua"])
        .expect_exit(2)
        .run();
    let err = out.stderr_str();
    assert!(err.contains("broken.lua:2:"), "{err}");
    // One file that does not parse does not stop the others.
    assert_eq!(
        read(&env, "a.lua"),
        "local x = { 1, 2, 3 }\nif x then print(x) end\n"
    );
    assert_eq!(read(&env, "broken.lua"), "local x = 1\nlocal = 2\n");
}

/// `0x1p-2` (a hex float) is Lua that `check` accepts and StyLua's output check cannot
/// read (it panicked there, ending fmt for the whole directory with a backtrace): the
/// file is named with its line and left as it is, the others are formatted, exit 2.
#[test]
fn a_number_stylua_cannot_check_is_file_line_and_the_others_are_formatted() {
    let env = Env::new();
    let hex = "local x = 1\nlocal  quarter = 0x1p-2\n";
    env.write("hex.lua", hex);
    env.write("sub/a.lua", UGLY);
    for check in [true, false] {
        let words: &[&str] = if check { &["fmt", "--check"] } else { &["fmt"] };
        let out = Run::cmd(&env, words.iter().copied())
            .env("RUST_BACKTRACE", "1")
            .expect_exit(2)
            .run();
        let err = out.stderr_str();
        assert!(err.contains("hex.lua:2:"), "{}", out.describe());
        assert!(err.contains("0x1p-2"), "{}", out.describe());
        for panic in ["panicked", "backtrace", "unreachable"] {
            assert!(!err.contains(panic), "{panic}: {}", out.describe());
        }
        if check {
            assert!(
                out.stdout_str().contains("would reformat sub/a.lua"),
                "{}",
                out.describe()
            );
            assert_eq!(read(&env, "sub/a.lua"), UGLY);
        } else {
            assert_eq!(out.stdout_str(), "sub/a.lua\n", "{}", out.describe());
            assert_eq!(
                read(&env, "sub/a.lua"),
                "local x = { 1, 2, 3 }\nif x then print(x) end\n"
            );
        }
        assert_eq!(read(&env, "hex.lua"), hex);
    }
}

/// fmt never writes through a link (a cloned repository can ship `x.lua` linked to a
/// file outside it): named on its own it is refused, exit 2, the file outside as it was;
/// a directory walk does not follow links at all.
#[test]
fn fmt_never_writes_through_a_link() {
    let env = Env::new();
    let outside = tempfile::tempdir().unwrap();
    let theirs = outside.path().join("theirs.lua");
    std::fs::write(&theirs, UGLY).unwrap();
    std::os::unix::fs::symlink(&theirs, env.tmp.path().join("link.lua")).unwrap();
    env.write("a.lua", UGLY);
    let out = Run::cmd(&env, ["fmt", "link.lua", "a.lua"])
        .expect_exit(2)
        .stderr_has("link.lua: is a symbolic link")
        .stderr_has("nothing was written")
        .run();
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), UGLY);
    assert_eq!(out.stdout_str(), "a.lua\n", "{}", out.describe());
    assert!(std::fs::symlink_metadata(env.tmp.path().join("link.lua"))
        .unwrap()
        .file_type()
        .is_symlink());
    env.write("b.lua", UGLY);
    Run::cmd(&env, ["fmt"]).expect_exit(0).run();
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), UGLY);
    assert_ne!(read(&env, "b.lua"), UGLY);
}

#[test]
fn no_path_formats_the_current_directory_recursively() {
    let env = Env::new();
    env.write("a.lua", UGLY);
    env.write("runbooks/b.lua", UGLY);
    env.write("notes.txt", UGLY);
    env.write(".hidden/c.lua", UGLY);
    // In a git repository, what .gitignore excludes is left alone, as StyLua's CLI does.
    std::fs::create_dir(env.tmp.path().join(".git")).unwrap();
    env.write(".gitignore", "vendor/\n");
    env.write("vendor/d.lua", UGLY);
    let out = Run::cmd(&env, ["fmt", "--check"]).expect_exit(1).run();
    let said = out.stdout_str();
    assert!(said.contains("would reformat a.lua"), "{said}");
    assert!(said.contains("would reformat runbooks/b.lua"), "{said}");
    for left in ["notes.txt", "c.lua", "d.lua"] {
        assert!(!said.contains(left), "{left}: {said}");
    }
    Run::cmd(&env, ["fmt"]).expect_exit(0).run();
    Run::cmd(&env, ["fmt", "--check"]).expect_exit(0).run();
    assert_eq!(read(&env, "vendor/d.lua"), UGLY);
    // A file named on the command line is formatted whatever its name or place.
    Run::cmd(&env, ["fmt", "vendor/d.lua"]).expect_exit(0).run();
    assert_ne!(read(&env, "vendor/d.lua"), UGLY);
}

#[test]
fn a_path_that_does_not_exist_is_a_usage_error() {
    let env = Env::new();
    let out = Run::cmd(&env, ["fmt", "nope.lua"]).expect_exit(2).run();
    assert!(
        out.stderr_str().contains("fmt nope.lua:"),
        "{}",
        out.describe()
    );
}

/// What CI checks (scripts/test): every shipped runbook, example and stdlib module is
/// formatted under the repository's stylua.toml.
#[test]
fn everything_this_repository_ships_is_formatted() {
    let env = Env::new();
    let root = repo();
    let mut words = vec!["fmt".into(), "--check".into()];
    for d in ["runbooks", "examples", "stdlib"] {
        words.push(root.join(d).into_os_string());
    }
    let out = Run::cmd(&env, words).run();
    assert_eq!(out.code(), 0, "{}", out.describe());
}
