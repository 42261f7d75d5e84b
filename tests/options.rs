//! Every options table the Lua API takes is read the same way: an unknown key is refused
//! naming the line, the function and the closest known option; a value of the wrong type
//! is refused naming the option and what it takes. One case per function, through the
//! real binary.
use crate::common::*;

/// Where the call goes: at the top level of the file (declarations, target handles), or
/// inside a step (everything that runs).
#[derive(Clone, Copy)]
enum At {
    Header,
    TopLevel,
    Step,
}

/// `(where, call, what the error says after "FILE:LINE: ")`.
type Case = (At, &'static str, &'static str);

const UNKNOWN: &[Case] = &[
    (
        At::Header,
        r#"runbook { name = "o", descripton = "x" }"#,
        "runbook{}: unknown option 'descripton'; did you mean 'description'?; known: name, description, params, cache_roots",
    ),
    (
        At::Header,
        r#"runbook { name = "o", params = { n = { tpye = "string" } } }"#,
        "param 'n': unknown option 'tpye'; did you mean 'type'?; known: type, default, required, help, secret, choices",
    ),
    (
        At::TopLevel,
        r#"step("t", { retires = 2 }, function() end)"#,
        "step(\"t\"): unknown option 'retires'; did you mean 'retries'?; known: retries, delay, timeout, when, always, confirm",
    ),
    (
        At::TopLevel,
        r#"local h = ssh("h.example", { prot = 22 })"#,
        "ssh(): unknown option 'prot'; did you mean 'port'?; known: user, port, identity, jump, connect_timeout",
    ),
    (
        At::TopLevel,
        r#"local c = here:lxc("web", { keep_evn = true })"#,
        "lxc(): unknown option 'keep_evn'; did you mean 'keep_env'?; known: keep_env",
    ),
    (
        At::TopLevel,
        r#"local c = here:docker("web", { usr = "app" })"#,
        "docker(): unknown option 'usr'; did you mean 'user'?; known: user",
    ),
    (
        At::TopLevel,
        r#"local c = here:podman("web", { usre = "app" })"#,
        "podman(): unknown option 'usre'; did you mean 'user'?; known: user",
    ),
    (
        At::TopLevel,
        r#"local c = here:kube("pod-0", { namespce = "ml" })"#,
        "kube(): unknown option 'namespce'; did you mean 'namespace'?; known: container, namespace, context",
    ),
    (
        At::Step,
        r#"here:exec({ "true" }, { chek = false })"#,
        "exec: unknown option 'chek'; did you mean 'check'?; known: check, timeout, env, cwd, stdin, read_only, destructive, summary, secret_output",
    ),
    (
        At::Step,
        r#"here:shell("true", { summry = "x" })"#,
        "shell: unknown option 'summry'; did you mean 'summary'?",
    ),
    (
        At::Step,
        r#"parallel({ 1 }, function() end, { limt = 2 })"#,
        "parallel(): unknown option 'limt'; did you mean 'limit'?; known: limit",
    ),
    (
        At::Step,
        r#"cache.clear(here, "/tmp/x", { kep = true })"#,
        "cache.clear(): unknown option 'kep'; did you mean 'keep'?; known: keep, keep_last, force",
    ),
    (
        At::Step,
        r#"cache.restore(here, "/tmp/x", { forse = true })"#,
        "cache.restore(): unknown option 'forse'; did you mean 'force'?; known: force",
    ),
    (
        At::Step,
        r#"venv.build(here, { path = "/opt/v", pakages = { "x" } })"#,
        "venv.build(): unknown option 'pakages'; did you mean 'packages'?",
    ),
    (
        At::Step,
        r#"git.restore(here, { repo = "/r", rve = "HEAD" })"#,
        "git.restore(): unknown option 'rve'; did you mean 'rev'?; known: repo, paths, rev",
    ),
    (
        At::Step,
        r#"proc.spawn(here, { cmd = { "true" }, log = "/tmp/l", nmae = "x" })"#,
        "proc.spawn(): unknown option 'nmae'; did you mean 'name'?; known: cmd, log, cwd, env, name",
    ),
    (
        At::Step,
        r#"proc.wait_for(here, { file = "/tmp/l", pattern = "x", form_start = true })"#,
        "proc.wait_for(): unknown option 'form_start'; did you mean 'from_start'?",
    ),
    (
        At::Step,
        r#"proc.stop(here, { name = "x", timout = 1 })"#,
        "proc.stop(): unknown option 'timout'; did you mean 'timeout'?; known: name, pid, timeout",
    ),
    (
        At::Step,
        r#"warmup.run(here, { script = "w.py", expect_cahce = "/tmp/x" })"#,
        "warmup.run(): unknown option 'expect_cahce'; did you mean 'expect_cache'?",
    ),
    (
        At::Step,
        r#"gpu.require(here, { cuont = 1 })"#,
        "gpu.require(): unknown option 'cuont'; did you mean 'count'?; known: count, idle, min_free_mib, name",
    ),
    (
        At::Step,
        r#"fingerprint.take(here, { vnev = "/opt/v" })"#,
        "fingerprint.take(): unknown option 'vnev'; did you mean 'venv'?; known: venv, python, repo, caches",
    ),
];

const WRONG_TYPE: &[Case] = &[
    (
        At::Header,
        r#"runbook { name = { "o" } }"#,
        "runbook{}: option 'name' must be a string, got table",
    ),
    (
        At::Header,
        r#"runbook { name = "o", params = { n = { required = "yes" } } }"#,
        "param 'n': option 'required' must be a boolean, got string",
    ),
    (
        At::TopLevel,
        r#"step("t", { always = 1 }, function() end)"#,
        "step(\"t\"): option 'always' must be a boolean, got integer",
    ),
    (
        At::TopLevel,
        r#"step("t", { when = true }, function() end)"#,
        "step(\"t\"): option 'when' must be a function, got boolean",
    ),
    (
        At::TopLevel,
        r#"step("t", { retries = "2" }, function() end)"#,
        "step(\"t\"): option 'retries' must be a whole number from 0 to 1000, got string",
    ),
    (
        At::TopLevel,
        r#"local h = ssh("h.example", { user = { "root" } })"#,
        "ssh(): option 'user' must be a string, got table",
    ),
    (
        At::TopLevel,
        r#"local h = ssh("h.example", { connect_timeout = true })"#,
        "ssh(): option 'connect_timeout' must be a duration like \"30s\" or a number of seconds, got boolean",
    ),
    (
        At::TopLevel,
        r#"local c = here:lxc("web", { keep_env = "yes" })"#,
        "lxc(): option 'keep_env' must be a boolean, got string",
    ),
    (
        At::TopLevel,
        r#"local c = here:docker("web", { user = true })"#,
        "docker(): option 'user' must be a string, got boolean",
    ),
    (
        At::TopLevel,
        r#"local c = here:podman("web", { user = {} })"#,
        "podman(): option 'user' must be a string, got table",
    ),
    (
        At::TopLevel,
        r#"local c = here:kube("pod-0", { context = true })"#,
        "kube(): option 'context' must be a string, got boolean",
    ),
    (
        At::Step,
        r#"here:exec({ "true" }, { read_only = "yes" })"#,
        "exec: option 'read_only' must be a boolean, got string",
    ),
    (
        At::Step,
        r#"here:shell("true", { stdin = 5 })"#,
        "shell: option 'stdin' must be a string, got integer",
    ),
    (
        At::Step,
        r#"parallel({ 1 }, function() end, { limit = "2" })"#,
        "parallel(): option 'limit' must be a whole number of at least 1, got string",
    ),
    (
        At::Step,
        r#"cache.clear(here, "/tmp/x", { keep = "yes" })"#,
        "cache.clear(): option 'keep' must be a boolean, got string",
    ),
    (
        At::Step,
        r#"cache.restore(here, "/tmp/x", { force = 1 })"#,
        "cache.restore(): option 'force' must be a boolean, got integer",
    ),
    (
        At::Step,
        r#"venv.build(here, { path = "/opt/v", fresh = "yes" })"#,
        "venv.build(): option 'fresh' must be a boolean, got string",
    ),
    (
        At::Step,
        r#"git.restore(here, { repo = {} })"#,
        "git.restore(): option 'repo' must be a string, got table",
    ),
    (
        At::Step,
        r#"proc.spawn(here, { cmd = { "true" }, log = {} })"#,
        "proc.spawn(): option 'log' must be a string, got table",
    ),
    (
        At::Step,
        r#"proc.wait_for(here, { file = "/tmp/l", pattern = "x", from_start = "yes" })"#,
        "proc.wait_for(): option 'from_start' must be a boolean, got string",
    ),
    (
        At::Step,
        r#"proc.stop(here, { name = "x", timeout = {} })"#,
        "proc.stop(): option 'timeout' must be a duration like \"30s\" or a number of seconds, got table",
    ),
    (
        At::Step,
        r#"warmup.run(here, { script = "w.py", single_threaded = "no" })"#,
        "warmup.run(): option 'single_threaded' must be a boolean, got string",
    ),
    (
        At::Step,
        r#"gpu.require(here, { idle = "yes" })"#,
        "gpu.require(): option 'idle' must be a boolean, got string",
    ),
    (
        At::Step,
        r#"fingerprint.take(here, { repo = true })"#,
        "fingerprint.take(): option 'repo' must be a string, got boolean",
    ),
];

/// The runbook with `call` in its place, and the `o.lua:LINE` of the call.
fn file(at: At, call: &str) -> (String, String) {
    let head = "runbook { name = \"o\" }\nlocal here = target(\"local\")\n";
    match at {
        At::Header => (format!("{call}\n"), "o.lua:1".into()),
        At::TopLevel => (format!("{head}{call}\n"), "o.lua:3".into()),
        At::Step => (
            format!("{head}step(\"s\", function()\n  {call}\nend)\n"),
            "o.lua:4".into(),
        ),
    }
}

/// `f(args, { … })` as `local o = { … }; f(args, o)`: a call whose options table is
/// built before it, which only the run itself can refuse (one written in the call is
/// refused as the file loads: `unknown_options_in_the_call_are_refused_as_the_file_loads`).
fn hoisted(call: &str) -> String {
    let at = call
        .rfind(", {")
        .expect("the options are the last argument");
    let opts = call[at + 2..].strip_suffix(')').expect("a call");
    format!("local o = {opts}; {}o)", &call[..at + 2])
}

fn check(cases: &[Case]) {
    let env = Env::new();
    let mut failed = Vec::new();
    for &(at, call, want) in cases {
        let hoist = matches!(at, At::Step) && want.contains("unknown option");
        let call = &if hoist {
            hoisted(call)
        } else {
            call.to_string()
        };
        let (text, line) = file(at, call);
        env.write("o.lua", &text);
        let out = env
            .cmd()
            .args(["run", "--dry-run", "--offline", "o.lua"])
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // Declarations are refused before the run (exit 2); a call fails its step (1).
        let code = if matches!(at, At::Step) { 1 } else { 2 };
        let expected = format!("{line}: {want}");
        if out.status.code() != Some(code) || !said.contains(&expected) {
            failed.push(format!(
                "{call}\n  want (exit {code}): {expected}\n  got (exit {:?}): {said}",
                out.status.code()
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn an_unknown_option_names_the_line_and_the_option_meant() {
    check(UNKNOWN);
}

/// The same misspelt options written in the call, inside a step: `check` finds them in
/// the source and the run is refused before any step (exit 2), with the option meant.
#[test]
fn unknown_options_in_the_call_are_refused_as_the_file_loads() {
    let env = Env::new();
    let mut failed = Vec::new();
    for &(at, call, want) in UNKNOWN.iter().filter(|(at, ..)| matches!(at, At::Step)) {
        let key = want
            .split("unknown option '")
            .nth(1)
            .and_then(|r| r.split('\'').next())
            .unwrap();
        let meant = want
            .split("did you mean '")
            .nth(1)
            .and_then(|r| r.split('\'').next())
            .unwrap();
        let (text, line) = file(at, call);
        env.write("o.lua", &text);
        let out = env.cmd().args(["check", "o.lua"]).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        let expected = format!("{line}: unknown '{key}': ");
        let option = format!("takes no option '{key}'; did you mean '{meant}'?");
        if out.status.code() != Some(2) || !said.contains(&expected) || !said.contains(&option) {
            failed.push(format!(
                "{call}\n  want (exit 2): {expected}… {option}\n  got (exit {:?}): {said}",
                out.status.code()
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn an_option_of_the_wrong_type_names_the_option_and_its_type() {
    check(WRONG_TYPE);
}
