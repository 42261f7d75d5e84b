//! A command's two lines, rendered once per action: the exact line a plan holds the run
//! to, and the line people see (previews, `runbook log`, messages, events).

use crate::base::script::Script;
use crate::targets::{ExecRequest, Target};

/// What an action's command is, as text.
pub struct Rendered {
    /// The exact line the target renders: what a confirmed plan holds the run to (its
    /// digest). Input that is no text (artifact.restore's archive, megabytes) is left out
    /// of it as `< (binary stdin)`, a file's content (`file.put`) as `< (stdin data)`:
    /// the plan holds the run to its digest all the same.
    pub line: String,
    /// The line people see: see [`shown`].
    pub shown: String,
}

impl Rendered {
    /// `req` is given back as it came; its input is only set aside while the line is
    /// rendered (no copy of megabytes of it). `stdin_data`: its input is a file's bytes
    /// (`Action::stdin_data`), named by size and digest even when it is text.
    pub fn of(
        target: &Target,
        req: &mut ExecRequest,
        script: Option<&Script>,
        stdin_data: bool,
    ) -> Rendered {
        let input = Input::of(req.stdin.as_deref(), stdin_data);
        let line = match input {
            Input::Text => target.render(req),
            _ => {
                let stdin = req.stdin.take();
                let line = format!("{} < {}", target.render(req), input.marker());
                req.stdin = stdin;
                line
            }
        };
        // A plain command is shown as it runs: the line just rendered.
        let shown = match shown_as_rendered(target, req, script) && input == Input::Text {
            true => line.clone(),
            false => shown_as(target, req, script, input),
        };
        Rendered { line, shown }
    }
}

/// What a command's standard input is, for the lines people read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    /// None, or text pasted as it is (`printf %s '…' |`).
    Text,
    /// Bytes that are no text (artifact.restore's archive).
    Binary,
    /// A file's content (`file.put`): text or not, the diff shows what it changes, and
    /// pasted whole it would be the file again, megabytes of it.
    Data,
}

impl Input {
    fn of(stdin: Option<&[u8]>, data: bool) -> Input {
        match stdin {
            None => Input::Text,
            Some(s) if std::str::from_utf8(s).is_err() => Input::Binary,
            Some(_) if data => Input::Data,
            Some(_) => Input::Text,
        }
    }

    /// What stands for the input in the exact line.
    fn marker(self) -> &'static str {
        match self {
            Input::Data => "(stdin data)",
            _ => "(binary stdin)",
        }
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
    shown_as(target, req, script, Input::of(req.stdin.as_deref(), false))
}

fn shown_as(target: &Target, req: &ExecRequest, script: Option<&Script>, input: Input) -> String {
    if shown_as_rendered(target, req, script) && input == Input::Text {
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
    // Input that is no text (artifact.restore's archive), or a file's content, is named
    // by its size and digest: pasted as a word it is noise, megabytes of it. The plan
    // holds its digest either way.
    if let (Some(bytes), Input::Binary | Input::Data) = (req.stdin.as_deref(), input) {
        use sha2::Digest;
        let digest = crate::base::hex::hex(&sha2::Sha256::digest(bytes)[..8]);
        let line = crate::base::quote::render_with(argv, &req.env, req.cwd.as_deref(), None);
        let what = match input {
            Input::Binary => "binary data",
            _ => "data",
        };
        return format!(
            "{line}{args} < (stdin: {} bytes of {what}, sha256 {digest}…)",
            bytes.len()
        );
    }
    crate::base::quote::render_with(argv, &req.env, req.cwd.as_deref(), req.stdin.as_deref())
        + &args
}
