//! A command's two lines, rendered once per action: the exact line a plan holds the run
//! to, and the line people see (previews, `runbook log`, messages, events).

use crate::base::script::Script;
use crate::targets::{ExecRequest, Target};

/// What an action's command is, as text.
pub struct Rendered {
    /// The exact line the target renders: what a confirmed plan holds the run to (its
    /// digest). Input that is no text (artifact.restore's archive, megabytes) is left out
    /// of it as `< (binary stdin)`: the plan holds the run to its digest all the same.
    pub line: String,
    /// The line people see: see [`shown`].
    pub shown: String,
}

impl Rendered {
    /// `req` is given back as it came; its input is only set aside while the line is
    /// rendered (no copy of megabytes of it).
    pub fn of(target: &Target, req: &mut ExecRequest, script: Option<&Script>) -> Rendered {
        let binary_stdin = req
            .stdin
            .as_deref()
            .is_some_and(|s| std::str::from_utf8(s).is_err());
        let line = match binary_stdin {
            true => {
                let input = req.stdin.take();
                let line = format!("{} < (binary stdin)", target.render(req));
                req.stdin = input;
                line
            }
            false => target.render(req),
        };
        // A plain command is shown as it runs: the line just rendered.
        let shown = match shown_as_rendered(target, req, script) && !binary_stdin {
            true => line.clone(),
            false => shown(target, req, script),
        };
        Rendered { line, shown }
    }
}

/// Whether people see a command as its target renders it: no script of runbook's own in
/// it and no wrapper a remote hop needs for env and cwd.
fn shown_as_rendered(target: &Target, req: &ExecRequest, script: Option<&Script>) -> bool {
    let wrapped = !target.is_local() && (!req.env.is_empty() || req.cwd.is_some());
    script.is_none() && !wrapped
}

/// A command as people see it (previews, `runbook log`, messages, the `command` of
/// events): the exact, copy-pastable line the target renders, except where that line
/// would carry a script: runbook's own (shown as `NAME ARG…`, printed by `runbook
/// script NAME`) or the wrappers a remote hop needs for env and cwd. Such a command is
/// shown as it runs on its target (`cd DIR && env K=V NAME ARG…`), which the events name.
pub fn shown(target: &Target, req: &ExecRequest, script: Option<&Script>) -> String {
    if shown_as_rendered(target, req, script) {
        return target.render(req);
    }
    let named: Vec<std::ffi::OsString>;
    // A script's arguments, named as its header says (`pid='' timeout_ms=60000`), go
    // after the line made of the rest.
    let mut args = String::new();
    let argv = match script {
        Some(s) if req.argv.len() >= 4 && req.argv[2] == s.body => {
            named = vec![s.name.into()];
            for a in s.shown_args(&req.argv[4..]) {
                args.push(' ');
                args.push_str(&a);
            }
            &named
        }
        _ => &req.argv,
    };
    // Input that is no text (artifact.restore's archive) is named by its size and digest:
    // pasted as a word it is noise, megabytes of it. The plan holds its digest either way.
    if let Some(input) = req
        .stdin
        .as_deref()
        .filter(|s| std::str::from_utf8(s).is_err())
    {
        use sha2::Digest;
        let digest: String = sha2::Sha256::digest(input)
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        let line = crate::base::quote::render_with(argv, &req.env, req.cwd.as_deref(), None);
        return format!(
            "{line}{args} < (stdin: {} bytes of binary data, sha256 {digest}…)",
            input.len()
        );
    }
    crate::base::quote::render_with(argv, &req.env, req.cwd.as_deref(), req.stdin.as_deref())
        + &args
}
