//! The Lua sandbox holds: each escape attempt (files, programs, the environment, modules
//! from outside the runbook's folder, bytecode, endless loops, memory bombs, deep
//! recursion, the removed libraries, tampering with `_G` and `string`) fails with an
//! error that names the runbook file and line, exits with the documented code (2 when
//! the file never got to run a step, 1 when a step failed) and changes nothing.
//!
//! A removed global (`io`, `os`, `debug`, …) or a misspelt one read anywhere in the file,
//! step bodies included, is caught by the static check when the file loads (exit 2); the
//! strict `_G` metatable catches the same names at run time when they are computed
//! (`_G[name]`), which `dynamic_global.lua` covers.
//!
//! "Changes nothing" is checked with a canary: a file in the test's temp dir that the
//! escape would overwrite or delete, and that the step after the escape (or, for
//! load-time errors, the file's first step) would delete if it ran.
//!
//! The fixtures live in `tests/hostile/`; each test copies that folder into its
//! temp dir as `rb/` (so `require` sees the helper modules beside the runbooks, and
//! symlinks out of the folder can be made) and runs `rb/NAME.lua`, so messages name the
//! file as `rb/NAME.lua`. The line an error must name is marked `-- ESCAPE` in the
//! fixture.

use crate::common::*;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const FIXTURES: &str = "tests/hostile";
const CANARY: &str = "untouched\n";
/// How long any run may take before the test kills it and fails (a hang is a failure).
const HANG: Duration = Duration::from_secs(30);
/// How long a run that should stop at a 1s timeout may take, with room for a slow CI box.
const SOON: Duration = Duration::from_secs(8);

struct Sandbox {
    env: Env,
    canary: PathBuf,
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// The 1-based line of the fixture marked `-- ESCAPE`.
fn escape_line(fixture: &str) -> usize {
    let text = std::fs::read_to_string(repo().join(FIXTURES).join(fixture)).unwrap();
    let lines: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("-- ESCAPE"))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(lines.len(), 1, "{fixture} marks exactly one line -- ESCAPE");
    lines[0]
}

/// `rb/NAME.lua:LINE:`, how an error names the escape line.
fn loc(fixture: &str) -> String {
    format!("rb/{fixture}:{}:", escape_line(fixture))
}

impl Sandbox {
    fn new() -> Self {
        let env = Env::new();
        copy_dir(&repo().join(FIXTURES), &env.tmp.path().join("rb"));
        let canary = env.scratch().join("canary");
        std::fs::write(&canary, CANARY).unwrap();
        Sandbox { env, canary }
    }

    fn rb(&self) -> PathBuf {
        self.env.tmp.path().join("rb")
    }

    /// `runbook run rb/FIXTURE --yes --set canary=…` plus `extra`.
    fn run(&self, fixture: &str, extra: &[&str]) -> Output {
        self.run_limited(fixture, extra, HANG)
    }

    fn run_limited(&self, fixture: &str, extra: &[&str], limit: Duration) -> Output {
        let canary = format!("canary={}", self.canary.display());
        self.run_args(fixture, &[&["--set", &canary], extra].concat(), limit)
    }

    /// `runbook run rb/FIXTURE --yes` plus `args`, for fixtures without a canary param.
    fn run_plain(&self, fixture: &str) -> Output {
        self.run_args(fixture, &[], HANG)
    }

    fn run_args(&self, fixture: &str, args: &[&str], limit: Duration) -> Output {
        Run::new(&self.env, format!("rb/{fixture}"))
            .yes()
            .args(args)
            .timeout(limit)
            .run()
    }

    fn assert_canary_untouched(&self, o: &Output) {
        let now = std::fs::read_to_string(&self.canary).ok();
        assert_eq!(
            now.as_deref(),
            Some(CANARY),
            "the canary {} changed (or is gone): something escaped\n{o:?}",
            self.canary.display()
        );
    }

    /// Exit 2, `error: rb/FIXTURE:LINE: …MSG…`, no run record (no step ran), canary as it was.
    fn assert_refused_at_load(&self, o: &Output, fixture: &str, msg: &str) {
        assert_eq!(
            o.status.code(),
            Some(2),
            "an invalid runbook exits 2\n{o:?}"
        );
        let line = line_with(o, &format!("error: {} ", loc(fixture)));
        assert!(line.contains(msg), "the error says `{msg}`\n{o:?}");
        assert_eq!(
            self.env.record_count(),
            0,
            "the run never started, so there is no run record\n{o:?}"
        );
        self.assert_canary_untouched(o);
    }

    /// Exit 1, `✗ escape` then `rb/FIXTURE:LINE: …MSG…` on stderr and in the record,
    /// the step after it skipped, canary as it was.
    fn assert_step_failed(&self, o: &Output, fixture: &str, msg: &str) {
        let at = format!("{} ", loc(fixture));
        self.assert_step_failed_with(o, &at);
        let line = line_with(o, &at);
        assert!(line.contains(msg), "the error says `{msg}`\n{o:?}");
        let events = self.env.last_record();
        let error = step_error(&events, "escape");
        assert!(
            error.contains(&at) && error.contains(msg),
            "the record's error names the line and says `{msg}`: {error}"
        );
    }

    /// Like `assert_step_failed`, for a message that is not `FILE:LINE: …`.
    fn assert_step_failed_with(&self, o: &Output, want: &str) {
        assert_eq!(o.status.code(), Some(1), "a failed step exits 1\n{o:?}");
        let cross = o
            .stderr_str()
            .find("✗ escape")
            .unwrap_or_else(|| panic!("stderr has `✗ escape`\n{o:?}"));
        let msg = o
            .stderr_str()
            .find(want)
            .unwrap_or_else(|| panic!("stderr has `{want}`\n{o:?}"));
        assert!(cross < msg, "the message follows the ✗ line\n{o:?}");
        let events = self.env.last_record();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::StepSkipped { name, .. } if name == "after")),
            "the step after the escape was skipped: {events:#?}"
        );
        self.assert_canary_untouched(o);
    }
}

/// The stderr line that contains `want` (the test fails when none does).
fn line_with<'a>(o: &'a Output, want: &str) -> &'a str {
    o.stderr_str()
        .lines()
        .find(|l| l.contains(want))
        .unwrap_or_else(|| panic!("stderr has `{want}`\n{o:?}"))
}

fn assert_success(o: &Output) {
    assert_eq!(o.status.code(), Some(0), "the run succeeds\n{o:?}");
}

// ---------------------------------------------------------------------------------------
// 1. files

#[test]
fn io_open_in_a_step_is_refused_before_any_step_runs() {
    let sb = Sandbox::new();
    let o = sb.run("io_open_step.lua", &[]);
    sb.assert_refused_at_load(&o, "io_open_step.lua", "'io'");
}

#[test]
fn io_open_at_the_top_level_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run("io_open_top.lua", &[]);
    sb.assert_refused_at_load(
        &o,
        "io_open_top.lua",
        "'io' is not available in runbooks (sandbox)",
    );
}

// ---------------------------------------------------------------------------------------
// 2. programs and the environment

#[test]
fn os_execute_in_a_step_is_refused_before_any_step_runs() {
    let sb = Sandbox::new();
    let o = sb.run("os_execute_step.lua", &[]);
    sb.assert_refused_at_load(&o, "os_execute_step.lua", "'os'");
}

#[test]
fn os_getenv_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run("os_getenv_top.lua", &[]);
    sb.assert_refused_at_load(
        &o,
        "os_getenv_top.lua",
        "'os' is not available in runbooks (sandbox): runbooks cannot run programs or read the environment directly",
    );
}

// ---------------------------------------------------------------------------------------
// 3. require

/// A module outside the runbook's folder that require must never hand out.
fn plant_outside_modules(sb: &Sandbox) {
    let tmp = sb.env.tmp.path();
    std::fs::write(tmp.join("x.lua"), "return { escaped = true }\n").unwrap();
    std::fs::create_dir_all(tmp.join("outside")).unwrap();
    std::fs::write(tmp.join("outside/evil.lua"), "return { escaped = true }\n").unwrap();
    std::os::unix::fs::symlink("../outside/evil.lua", sb.rb().join("linked.lua")).unwrap();
    std::os::unix::fs::symlink("../outside", sb.rb().join("linkdir")).unwrap();
}

fn assert_require_refused(module: &str, msg: &str) {
    let sb = Sandbox::new();
    plant_outside_modules(&sb);
    let o = sb.run(
        "require_blocked.lua",
        &["--set", &format!("module={module}")],
    );
    sb.assert_step_failed(
        &o,
        "require_blocked.lua",
        &format!("require(\"{module}\"): {msg}"),
    );
}

#[test]
fn require_of_a_standard_library_name_is_refused() {
    assert_require_refused("os", "no module 'rb/os.lua' beside the runbook");
}

#[test]
fn require_of_a_parent_path_is_refused() {
    assert_require_refused(
        "../x",
        "module names are dotted words (e.g. \"runbook.text\" or \"helpers\"); paths, '..' and '/' are not allowed",
    );
}

#[test]
fn require_of_an_absolute_path_is_refused() {
    assert_require_refused("/etc/passwd", "module names are dotted words");
}

#[test]
fn require_of_a_module_symlinked_out_of_the_folder_is_refused() {
    assert_require_refused(
        "linked",
        "no module 'rb/linked.lua' beside the runbook (modules must be Lua files in the runbook's folder, not links out of it)",
    );
}

#[test]
fn require_through_a_folder_symlinked_out_of_the_folder_is_refused() {
    assert_require_refused(
        "linkdir.evil",
        "no module 'rb/linkdir/evil.lua' beside the runbook",
    );
}

#[test]
fn require_of_a_path_at_the_top_level_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run("require_top.lua", &[]);
    sb.assert_refused_at_load(
        &o,
        "require_top.lua",
        "require(\"/etc/passwd\"): module names are dotted words",
    );
}

#[test]
fn require_of_the_stdlib_and_of_files_beside_the_runbook_works() {
    let sb = Sandbox::new();
    let o = sb.run_plain("require_ok.lua");
    assert_success(&o);
    for want in [
        "text: trimmed",
        "helper: hello runbook from helper.lua",
        "util: 42",
        "same table: true",
    ] {
        assert!(o.stderr_str().contains(want), "stderr has `{want}`\n{o:?}");
    }
}

// ---------------------------------------------------------------------------------------
// 4. bytecode and loading code

#[test]
fn load_of_bytecode_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run("load_bytecode.lua", &[]);
    sb.assert_step_failed(
        &o,
        "load_bytecode.lua",
        "load: bytecode is not allowed in runbooks (text chunks only)",
    );
}

#[test]
fn string_dump_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run("string_dump.lua", &[]);
    sb.assert_step_failed(
        &o,
        "string_dump.lua",
        "string.dump is disabled in runbooks (bytecode is not allowed)",
    );
}

#[test]
fn dofile_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run("dofile_top.lua", &[]);
    sb.assert_refused_at_load(
        &o,
        "dofile_top.lua",
        "'dofile' is not available in runbooks (sandbox): load code with require() from a file beside the runbook",
    );
}

#[test]
fn loadfile_in_a_step_is_refused_before_any_step_runs() {
    let sb = Sandbox::new();
    let o = sb.run("loadfile_step.lua", &[]);
    sb.assert_refused_at_load(&o, "loadfile_step.lua", "'loadfile'");
}

#[test]
fn load_of_text_still_works_and_only_as_text() {
    let sb = Sandbox::new();
    let o = sb.run_plain("load_text_ok.lua");
    assert_success(&o);
    for want in [
        "text chunk: 2",
        "mode b, text chunk: 3",
        "reader with bytecode: nil attempt to load a binary chunk",
        "loaded chunk sees io: false",
    ] {
        assert!(o.stderr_str().contains(want), "stderr has `{want}`\n{o:?}");
    }
}

#[test]
fn a_bytecode_runbook_file_is_refused() {
    let sb = Sandbox::new();
    std::fs::write(
        sb.rb().join("bytecode.lua"),
        b"\x1bLua\x54\x00\x19\x93\r\n\x1a\nrest of a chunk",
    )
    .unwrap();
    let o = sb.run("bytecode.lua", &[]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    // A bytecode file has no source lines to name; the file is named.
    assert!(
        o.stderr_str().contains(
            "error: rb/bytecode.lua: this is a precompiled (bytecode) chunk; runbooks must be Lua source text"
        ),
        "{o:?}"
    );
    assert_eq!(sb.env.record_count(), 0);
    sb.assert_canary_untouched(&o);
}

// ---------------------------------------------------------------------------------------
// 5. endless loops

fn assert_ended_soon(o: &Output) {
    assert!(
        o.took >= Duration::from_millis(900),
        "the loop ran until the 1s timeout\n{o:?}"
    );
    assert!(
        o.took < SOON,
        "the loop ended soon after the timeout\n{o:?}"
    );
}

#[test]
fn endless_loop_ends_at_the_step_timeout() {
    let sb = Sandbox::new();
    let o = sb.run("loop_step_timeout.lua", &[]);
    sb.assert_step_failed(&o, "loop_step_timeout.lua", "step timed out after 1.0s");
    assert_ended_soon(&o);
}

#[test]
fn endless_loop_ends_at_the_run_timeout() {
    let sb = Sandbox::new();
    let o = sb.run("loop_run_timeout.lua", &["--timeout", "1s"]);
    sb.assert_step_failed_with(&o, "the run's --timeout (1.0s) ran out");
    assert_ended_soon(&o);
}

#[test]
fn run_timeout_message_names_the_file_and_line() {
    let sb = Sandbox::new();
    let o = sb.run("loop_run_timeout.lua", &["--timeout", "1s"]);
    sb.assert_step_failed(&o, "loop_run_timeout.lua", "");
    assert!(o.stderr_str().contains("--timeout"), "{o:?}");
}

#[test]
fn pcall_cannot_swallow_the_timeout() {
    let sb = Sandbox::new();
    let o = sb.run("loop_pcall.lua", &[]);
    sb.assert_step_failed(&o, "loop_pcall.lua", "step timed out after 1.0s");
    assert_ended_soon(&o);
}

#[test]
fn coroutine_resume_cannot_swallow_the_timeout() {
    let sb = Sandbox::new();
    let o = sb.run("loop_coroutine.lua", &[]);
    sb.assert_step_failed(&o, "loop_coroutine.lua", "step timed out after 1.0s");
    assert_ended_soon(&o);
}

#[test]
fn xpcall_message_handler_cannot_outlive_the_timeout() {
    let sb = Sandbox::new();
    let o = sb.run_limited("loop_xpcall_handler.lua", &[], Duration::from_secs(6));
    sb.assert_step_failed(&o, "loop_xpcall_handler.lua", "step timed out after 1.0s");
    assert_ended_soon(&o);
}

#[test]
fn a_backtracking_pattern_ends_at_the_step_timeout() {
    let sb = Sandbox::new();
    // One call into C never returns to the VM, so the hook cannot stop it: the watchdog
    // ends the run 10 s past the deadline and closes the record.
    let o = sb.run_limited("pattern_backtrack.lua", &[], Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        o.stderr_str().contains("step timed out, but did not stop"),
        "{o:?}"
    );
    assert!(o.took < Duration::from_secs(20), "{o:?}");
    let events = sb.env.last_record();
    assert!(
        matches!(events.last(), Some(Event::RunFinished { .. })),
        "{events:#?}"
    );
    sb.assert_canary_untouched(&o);
}

/// The load budget is fixed (10s), so this test takes that long.
#[test]
fn endless_loop_at_the_top_level_ends_at_the_load_budget() {
    let sb = Sandbox::new();
    let o = sb.run("loop_top.lua", &[]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        o.stderr_str().contains(
            "error: rb/loop_top.lua:14: the top level of the file ran for over 10s; put work inside step() functions"
        ),
        "{o:?}"
    );
    assert!(o.took < Duration::from_secs(20), "{o:?}");
    assert_eq!(sb.env.record_count(), 0);
    sb.assert_canary_untouched(&o);
}

#[test]
fn endless_loop_at_the_top_level_names_the_line() {
    let sb = Sandbox::new();
    let o = sb.run("loop_top.lua", &[]);
    sb.assert_refused_at_load(&o, "loop_top.lua", "");
}

// ---------------------------------------------------------------------------------------
// 6. memory

#[test]
fn string_rep_of_2_gib_fails_cleanly() {
    let sb = Sandbox::new();
    let o = sb.run("memory_rep_2g.lua", &[]);
    // Lua refuses a string over 2^31-1 bytes before allocating anything ("resulting
    // string too large"); either that or the memory limit must stop the step at its line.
    let at = loc("memory_rep_2g.lua");
    assert!(
        o.stderr_str()
            .contains(&format!("{at} resulting string too large"))
            || o.stderr_str().contains("out of memory"),
        "{o:?}"
    );
    sb.assert_step_failed_with(&o, &at);
}

#[test]
fn string_rep_of_1_gib_hits_the_memory_limit() {
    let sb = Sandbox::new();
    let o = sb.run("memory_rep_1g.lua", &[]);
    sb.assert_step_failed_with(
        &o,
        "out of memory: the runbook went over its Lua memory limit (256 MiB)",
    );
}

#[test]
fn a_growing_table_hits_the_memory_limit() {
    let sb = Sandbox::new();
    let o = sb.run("memory_table.lua", &[]);
    sb.assert_step_failed_with(
        &o,
        "out of memory: the runbook went over its Lua memory limit (256 MiB)",
    );
}

#[test]
fn a_memory_bomb_at_the_top_level_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run("memory_top.lua", &[]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        o.stderr_str()
            .contains("out of memory: the runbook went over its Lua memory limit (256 MiB)"),
        "{o:?}"
    );
    assert_eq!(sb.env.record_count(), 0);
    sb.assert_canary_untouched(&o);
}

#[test]
fn memory_limit_errors_name_the_file_and_line() {
    let sb = Sandbox::new();
    let o = sb.run("memory_rep_1g.lua", &[]);
    sb.assert_step_failed(&o, "memory_rep_1g.lua", "out of memory");
    let o = sb.run("memory_table.lua", &[]);
    sb.assert_step_failed(&o, "memory_table.lua", "out of memory");
    // At the top level, before the instruction hook has seen any line, an allocation
    // failure can only be pinned to the file.
    let o = sb.run("memory_top.lua", &[]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        o.stderr_str()
            .contains("error: rb/memory_top.lua: out of memory"),
        "{o:?}"
    );
    sb.assert_canary_untouched(&o);
}

// ---------------------------------------------------------------------------------------
// 7. recursion

#[test]
fn deep_recursion_is_a_clean_error() {
    let sb = Sandbox::new();
    let o = sb.run("recursion.lua", &[]);
    sb.assert_step_failed(&o, "recursion.lua", "stack overflow");
}

#[test]
fn recursion_through_a_metamethod_is_a_clean_error() {
    let sb = Sandbox::new();
    let o = sb.run("recursion_metamethod.lua", &[]);
    sb.assert_step_failed(&o, "recursion_metamethod.lua", "C stack overflow");
}

#[test]
fn deep_recursion_at_the_top_level_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run("recursion_top.lua", &[]);
    sb.assert_refused_at_load(&o, "recursion_top.lua", "stack overflow");
}

#[test]
fn a_module_that_requires_itself_is_a_clean_error() {
    let sb = Sandbox::new();
    let o = sb.run("recursion_require.lua", &[]);
    sb.assert_step_failed_with(&o, "circular require (require_cycle → require_cycle)");
}

#[test]
fn a_module_that_requires_itself_names_the_file_and_line() {
    let sb = Sandbox::new();
    let o = sb.run("recursion_require.lua", &[]);
    sb.assert_step_failed(&o, "recursion_require.lua", "");
}

// ---------------------------------------------------------------------------------------
// 8. removed libraries and tampering

#[test]
fn debug_in_a_step_is_refused_before_any_step_runs() {
    let sb = Sandbox::new();
    let o = sb.run("debug_step.lua", &[]);
    sb.assert_refused_at_load(&o, "debug_step.lua", "'debug'");
}

/// What the sandbox says about each removed global, as the strict `_G` metatable words it.
const REMOVED: &[(&str, &str)] = &[
    ("io", "'io' is not available in runbooks (sandbox): runbooks cannot open files directly; run a command on a target"),
    ("os", "'os' is not available in runbooks (sandbox): runbooks cannot run programs or read the environment directly; use t:exec() or t:shell() on a target"),
    ("debug", "'debug' is not available in runbooks (sandbox): the debug library could break the sandbox"),
    ("package", "'package' is not available in runbooks (sandbox): modules come from require(\"runbook.NAME\") or Lua files beside the runbook"),
    ("dofile", "'dofile' is not available in runbooks (sandbox): load code with require() from a file beside the runbook"),
    ("loadfile", "'loadfile' is not available in runbooks (sandbox): load code with require() from a file beside the runbook"),
];

#[test]
fn removed_globals_looked_up_at_run_time_are_refused_with_a_reason() {
    for (name, reason) in REMOVED {
        let sb = Sandbox::new();
        let o = sb.run("dynamic_global.lua", &["--set", &format!("name={name}")]);
        sb.assert_step_failed(&o, "dynamic_global.lua", reason);
    }
}

#[test]
fn removed_globals_in_a_step_are_refused_with_a_reason() {
    for (fixture, name) in [
        ("io_open_step.lua", "io"),
        ("os_execute_step.lua", "os"),
        ("debug_step.lua", "debug"),
        ("loadfile_step.lua", "loadfile"),
    ] {
        let sb = Sandbox::new();
        let o = sb.run(fixture, &[]);
        let reason = REMOVED.iter().find(|(n, _)| *n == name).unwrap().1;
        sb.assert_refused_at_load(&o, fixture, reason);
    }
}

#[test]
fn package_is_absent_with_a_reason() {
    let sb = Sandbox::new();
    let o = sb.run("package_top.lua", &[]);
    sb.assert_refused_at_load(
        &o,
        "package_top.lua",
        "'package' is not available in runbooks (sandbox): modules come from require(\"runbook.NAME\") or Lua files beside the runbook",
    );
}

#[test]
fn tampering_with_globals_and_string_reaches_nothing() {
    let sb = Sandbox::new();
    let o = sb.run("tamper.lua", &[]);
    assert!(
        o.stderr_str().contains("trimmed: ok"),
        "the stdlib still works\n{o:?}"
    );
    // Without the strict-globals metatable `io` is a plain nil: the checks before the
    // escape line passed (else `fail` would name their line) and io.open finds nothing.
    sb.assert_step_failed(
        &o,
        "tamper.lua",
        "attempt to index a nil value (field 'io')",
    );
}

// ---------------------------------------------------------------------------------------
// 9. unknown globals

#[test]
fn a_misspelt_global_at_the_top_level_suggests_the_name() {
    let sb = Sandbox::new();
    let o = sb.run("unknown_global_top.lua", &[]);
    sb.assert_refused_at_load(
        &o,
        "unknown_global_top.lua",
        "unknown global 'targt'; did you mean 'target'?",
    );
}

#[test]
fn a_misspelt_global_in_a_step_suggests_the_name_before_any_step_runs() {
    let sb = Sandbox::new();
    let o = sb.run("unknown_global_step.lua", &[]);
    sb.assert_refused_at_load(
        &o,
        "unknown_global_step.lua",
        "unknown global 'prams'; did you mean 'params'?",
    );
}

// ---------------------------------------------------------------------------------------
// 9. more of the hostile corpus: string metatables, cache paths that climb out,
//    coroutine tricks, huge strings

#[test]
fn the_string_metatable_leads_nowhere() {
    let sb = Sandbox::new();
    let o = sb.run("string_metatable.lua", &[]);
    sb.assert_step_failed(
        &o,
        "string_metatable.lua",
        "attempt to index a string value",
    );
}

#[test]
fn cache_paths_climbing_out_are_refused() {
    let sb = Sandbox::new();
    let o = sb.run("cache_escape_dotdot.lua", &[]);
    sb.assert_step_failed(
        &o,
        "cache_escape_dotdot.lua",
        "cache.clear refused (nothing was deleted)",
    );
    assert!(
        o.stderr_str().contains("contains a '..' component"),
        "{o:?}"
    );
}

#[test]
fn cache_roots_slash_and_homes_are_refused() {
    let sb = Sandbox::new();
    let o = sb.run("cache_escape_roots.lua", &[]);
    sb.assert_step_failed(&o, "cache_escape_roots.lua", "refused");
    for path in ["/tmp", "/root", "/etc"] {
        assert!(std::path::Path::new(path).exists(), "{path} is still there");
    }
}

#[test]
fn cache_clear_through_a_symlink_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run("cache_escape_symlink.lua", &[]);
    sb.assert_step_failed(&o, "cache_escape_symlink.lua", "symlink");
}

#[test]
fn coroutine_wrap_cannot_swallow_the_timeout() {
    let sb = Sandbox::new();
    let o = sb.run("loop_coroutine_wrap.lua", &[]);
    sb.assert_step_failed(&o, "loop_coroutine_wrap.lua", "step timed out after 1.0s");
}

#[test]
fn a_string_doubled_until_huge_hits_the_memory_limit() {
    let sb = Sandbox::new();
    let o = sb.run("memory_concat.lua", &[]);
    sb.assert_step_failed(&o, "memory_concat.lua", "out of memory");
}

// ---------------------------------------------------------------------------------------
// 10. the corners the instruction hook does not reach: finalizers, to-be-closed handlers,
//     functions that turn errors into values, long C calls at load time, commands where
//     runbook cannot supervise them, errors raised inside Lua's C code

/// The watchdog's grace (src/run/watchdog.rs) and room for a slow CI box.
const GRACE: Duration = Duration::from_secs(10);
const PAST_GRACE: Duration = Duration::from_secs(18);

#[test]
fn a_finalizer_at_the_top_level_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run("gc_loop_top.lua", &[]);
    sb.assert_refused_at_load(
        &o,
        "gc_loop_top.lua",
        "setmetatable: finalizers (__gc) are not allowed in runbooks",
    );
}

#[test]
fn a_finalizer_for_when_the_vm_closes_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run("gc_loop_close.lua", &[]);
    sb.assert_refused_at_load(&o, "gc_loop_close.lua", "finalizers (__gc) are not allowed");
}

#[test]
fn a_finalizer_in_a_step_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run("gc_loop_step.lua", &[]);
    sb.assert_step_failed(&o, "gc_loop_step.lua", "finalizers (__gc) are not allowed");
}

/// `check`, `show` and `list` load files too, and have no run to stop.
#[test]
fn check_show_and_list_refuse_a_finalizer_quickly() {
    let sb = Sandbox::new();
    let file = sb.rb().join("gc_loop_top.lua");
    for args in [
        vec!["check", file.to_str().unwrap()],
        vec!["show", file.to_str().unwrap()],
    ] {
        let started = Instant::now();
        let out = Run::cmd(&sb.env, &args).timeout(HANG).expect_exit(2).run();
        let stderr = out.stderr_str();
        assert!(
            stderr.contains("finalizers (__gc) are not allowed"),
            "{args:?}: {stderr}"
        );
        assert!(
            started.elapsed() < SOON,
            "{args:?} took {:?}",
            started.elapsed()
        );
    }
    let only = sb.env.scratch().join("only");
    std::fs::create_dir_all(&only).unwrap();
    std::fs::copy(&file, only.join("gc_loop_top.lua")).unwrap();
    let started = Instant::now();
    let out = Run::cmd(&sb.env, ["list".as_ref(), only.as_os_str()])
        .timeout(HANG)
        .run();
    assert!(out.status.code().is_some(), "list ends by itself");
    assert!(
        started.elapsed() < SOON,
        "list took {:?}",
        started.elapsed()
    );
}

#[test]
fn a_close_handler_is_refused() {
    let sb = Sandbox::new();
    let o = sb.run("close_handler.lua", &[]);
    sb.assert_step_failed(
        &o,
        "close_handler.lua",
        "setmetatable: to-be-closed handlers (__close) are not allowed in runbooks",
    );
}

#[test]
fn a_close_handler_added_late_does_not_outlive_the_step_timeout() {
    let sb = Sandbox::new();
    let o = sb.run("close_added_late.lua", &[]);
    assert_ended_soon(&o);
    sb.assert_step_failed(&o, "close_added_late.lua", "step timed out after 1.0s");
}

/// What slips past setmetatable (a `__close` added to the metatable later) runs with the
/// hook off when the timed-out step unwinds: the watchdog ends the run within its grace,
/// with a complete record, and nothing after it runs.
#[test]
fn a_loop_with_the_hook_off_ends_within_the_watchdog_grace() {
    let sb = Sandbox::new();
    let o = sb.run_limited(
        "close_added_late_hook_off.lua",
        &[],
        Duration::from_secs(40),
    );
    assert!(o.took < Duration::from_secs(1) + PAST_GRACE, "{o:?}");
    assert!(o.took >= GRACE, "the watchdog waits its grace first: {o:?}");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let at = loc("close_added_late_hook_off.lua");
    assert!(
        line_with(&o, &at).contains("step timed out, but did not stop"),
        "{o:?}"
    );
    sb.assert_canary_untouched(&o);
    let events = sb.env.last_record();
    let last = events.last().unwrap();
    let Event::RunFinished { exit_code, .. } = last else {
        panic!("{events:#?}")
    };
    assert_eq!(*exit_code, 1, "{last:?}");
}

/// SIGTERM during Lua code that runs with the hook off ends the run within the grace
/// (before the watchdog, only SIGKILL ended it, with no record).
#[test]
fn a_signal_ends_a_loop_with_the_hook_off() {
    let sb = Sandbox::new();
    let canary = format!("canary={}", sb.canary.display());
    let mut run = Run::new(&sb.env, "rb/close_added_late_hook_off.lua")
        .yes()
        .args(["--set", &canary])
        .set("t", "1h")
        .spawn();
    std::thread::sleep(Duration::from_secs(2));
    run.signal(libc::SIGTERM);
    let signalled = Instant::now();
    let code = run.code(Duration::from_secs(40));
    assert_eq!(code, 143, "{}", run.output());
    assert!(
        signalled.elapsed() < PAST_GRACE,
        "took {:?}",
        signalled.elapsed()
    );
    let events = sb.env.last_record();
    let last = events.last().unwrap();
    let Event::RunFinished { outcome, .. } = last else {
        panic!("{events:#?}")
    };
    assert_eq!(*outcome, RunOutcome::Interrupted, "{last:?}");
    assert_eq!(
        std::fs::read_to_string(&sb.canary).unwrap(),
        CANARY,
        "the step after it never ran"
    );
}

#[test]
fn a_load_reader_cannot_swallow_the_timeout() {
    let sb = Sandbox::new();
    let o = sb.run("load_reader_swallow.lua", &[]);
    assert_ended_soon(&o);
    sb.assert_step_failed(&o, "load_reader_swallow.lua", "step timed out after 1.0s");
}

#[test]
fn load_cannot_name_its_chunk_after_another_file() {
    let sb = Sandbox::new();
    let o = sb.run("load_chunkname.lua", &[]);
    let want = format!(
        "[load at {}]:1: boom",
        loc("load_chunkname.lua").trim_end_matches(':')
    );
    sb.assert_step_failed_with(&o, &want);
    assert!(!o.stderr_str().contains("/etc/passwd"), "{o:?}");
}

/// The watchdog covers the top level too: a long C call there ends at the load budget
/// (10 s) plus the grace, exit 2, nothing changed; in `check` as in `run`.
#[test]
fn a_long_c_call_at_the_top_level_ends_within_the_load_budget_and_grace() {
    let sb = Sandbox::new();
    let o = sb.run_limited("pattern_top.lua", &[], Duration::from_secs(45));
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(o.took < Duration::from_secs(10) + PAST_GRACE, "{o:?}");
    assert!(
        o.stderr_str().contains("rb/pattern_top.lua")
            && o.stderr_str().contains("nothing was changed"),
        "{o:?}"
    );
    assert_eq!(sb.env.record_count(), 0, "{o:?}");
    sb.assert_canary_untouched(&o);
}

#[test]
fn a_signal_ends_a_long_c_call_at_the_top_level() {
    let sb = Sandbox::new();
    let canary = format!("canary={}", sb.canary.display());
    let mut run = Run::new(&sb.env, "rb/pattern_top.lua")
        .yes()
        .args(["--set", &canary])
        .spawn();
    std::thread::sleep(Duration::from_millis(500));
    run.signal(libc::SIGINT);
    let signalled = Instant::now();
    assert_eq!(run.code(Duration::from_secs(40)), 130, "{}", run.output());
    assert!(
        signalled.elapsed() < PAST_GRACE,
        "took {:?}",
        signalled.elapsed()
    );
}

/// An exec in a coroutine the runbook made is refused before the command starts: its
/// command (which would delete the canary after 4 s) never runs, no action is recorded.
fn assert_exec_refused_in_coroutine(fixture: &str) {
    let sb = Sandbox::new();
    let o = sb.run(fixture, &[]);
    sb.assert_step_failed(
        &o,
        fixture,
        "exec() cannot run inside a coroutine made with coroutine.create/wrap",
    );
    let events = sb.env.last_record();
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::ActionStarted { .. })),
        "no command started: {events:#?}"
    );
    std::thread::sleep(Duration::from_secs(5));
    sb.assert_canary_untouched(&o);
}

#[test]
fn exec_in_a_coroutine_is_refused() {
    assert_exec_refused_in_coroutine("exec_coroutine.lua");
}

#[test]
fn exec_in_coroutine_wrap_is_refused() {
    assert_exec_refused_in_coroutine("exec_wrap.lua");
}

/// A tail call leaves no runbook line on the coroutine's stack: the line that resumed it
/// is named (it was the file alone).
#[test]
fn exec_in_a_tail_call_in_coroutine_wrap_names_the_line() {
    assert_exec_refused_in_coroutine("exec_wrap_tail.lua");
}

#[test]
fn exec_in_a_gsub_callback_says_commands_cannot_run_there() {
    let sb = Sandbox::new();
    let o = sb.run("exec_gsub.lua", &[]);
    sb.assert_step_failed(
        &o,
        "exec_gsub.lua",
        "exec() cannot run inside a callback that Lua calls from C",
    );
}

#[test]
fn exec_in_a_sort_comparator_says_commands_cannot_run_there() {
    let sb = Sandbox::new();
    let o = sb.run("exec_sort.lua", &[]);
    sb.assert_step_failed(
        &o,
        "exec_sort.lua",
        "exec() cannot run inside a callback that Lua calls from C",
    );
}

#[test]
fn c_stack_overflow_names_the_runbook_line() {
    let sb = Sandbox::new();
    let o = sb.run("tostring_recursive.lua", &[]);
    sb.assert_step_failed_with(&o, "rb/tostring_recursive.lua:");
    assert!(
        line_with(&o, "rb/tostring_recursive.lua:").contains("C stack overflow"),
        "{o:?}"
    );
}

#[test]
fn a_tostring_that_returns_no_string_names_the_runbook_line() {
    let sb = Sandbox::new();
    let o = sb.run("tostring_not_string.lua", &[]);
    sb.assert_step_failed(
        &o,
        "tostring_not_string.lua",
        "'__tostring' must return a string",
    );
}

/// The typo check reads the stdlib's names after the load, without its deadline: with
/// the runbook's own `require` (a global it may replace), an endless one hung `check`,
/// `list`, `plan` and `run` until a signal. It uses the sandbox's.
#[test]
fn a_replaced_require_does_not_run_after_the_load() {
    let env = Env::new();
    let rb = env.write(
        "req.lua",
        r#"runbook { name = "req", description = "replaces require" }
require = function(name) while true do end end
step("s", function() log.info("hi") end)
"#,
    );
    let started = Instant::now();
    let out = Run::cmd(&env, ["check".as_ref(), rb.as_os_str()])
        .timeout(SOON)
        .expect_exit(0)
        .run();
    assert!(started.elapsed() < SOON, "{}", out.describe());
    Run::new(&env, &rb).yes().timeout(SOON).expect_exit(0).run();
}

/// One Lua string put in many slots is one string to Lua's memory limit, and a copy per
/// slot once Rust takes it: an argv is refused past 4 MiB and a log message cut at 1 MiB,
/// where 64 slots of a 64 MiB string made the host abort on a 4 GiB allocation.
#[test]
fn a_string_repeated_into_an_argv_or_a_message_is_bounded() {
    let env = Env::new();
    let rb = env.write(
        "amp.lua",
        r#"runbook { name = "amp", description = "one string, many slots" }
local big = string.rep("A", 64 * 1024 * 1024)
step("log", function()
  local t = {}
  for i = 1, 64 do t[#t + 1] = big end
  log.info(table.unpack(t))
end)
step("argv", function()
  local argv = { "echo" }
  for i = 1, 64 do argv[#argv + 1] = big end
  target("local"):exec(argv)
end)
"#,
    );
    let out = Run::new(&env, &rb).yes().timeout(HANG).expect_exit(1).run();
    let err = out.stderr_text();
    assert!(err.contains("… (cut at 1 MiB)"), "{}", out.describe());
    assert!(
        err.contains("amp.lua:11: exec: argv is over 4 MiB"),
        "{}",
        out.describe()
    );
    assert!(env.all_records().contains("\"run_finished\""));
}
