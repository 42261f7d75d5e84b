//! `runbook test`: a runbook run against replies instead of hosts (see
//! `targets/replies.rs` and docs/authoring.md, "Testing a runbook without hosts").

use crate::actions::ctx::Mode;
use crate::base::error::{Error, Result};
use crate::cli::args::TestArgs;
use crate::run::engine::{self, Approval, RunRequest};
use crate::run::sinks::terminal::TerminalOptions;
use crate::run::source;
use crate::targets::replies::Replies;
use std::path::PathBuf;
use std::rc::Rc;

/// runbook's own scripts by the names replies give them.
pub fn scripts() -> Vec<(&'static str, &'static str)> {
    crate::base::script::PREVIEWED
        .iter()
        .map(|s| (s.name, s.body))
        .collect()
}

pub async fn test(args: TestArgs, verbose: bool, quiet: bool) -> Result<()> {
    let source = source::locate(&args.file)?;
    super::use_params_file(args.params.as_deref())?;
    let shown = args.replies.display().to_string();
    let text = std::fs::read(&args.replies)
        .map_err(|e| Error::Replies(format!("--replies {shown}: {e}")))?;
    let text = String::from_utf8(text)
        .map_err(|e| Error::Replies(format!("--replies {shown}: not UTF-8 text ({e})")))?;
    let replies = Rc::new(Replies::parse(&text, &shown, scripts()).map_err(Error::Replies)?);
    let mut remote = super::remote_settings(&args.remote)?;
    remote.replies = Some(replies.clone());
    // The run keeps a record as every run does, but in a place of its own: a test must
    // not read the user's fingerprints or add to their history.
    let state = PrivateDir::new()?;
    let ran = engine::run(RunRequest {
        source,
        mode: Mode::Real,
        sets: args.sets,
        approval: Approval::Yes,
        json: args.json,
        resume: None,
        retry_failed: false,
        state_dir: state.0.clone(),
        timeout: args.timeout.filter(|t| !t.is_zero()),
        term: TerminalOptions::detect(verbose, quiet),
        remote,
    })
    .await;
    drop(state);
    let unanswered = replies.unanswered();
    let unused = replies.unused();
    if let Some(first) = unanswered.first() {
        let more = match unanswered.len() {
            1 => String::new(),
            n => format!("\n({} more command(s) had no reply after it)", n - 1),
        };
        return Err(Error::TestDiverged(format!(
            "runbook test: {first}{more}\nthe runbook no longer runs what {shown} holds: change the runbook, or edit {shown} (or save it again with runbook run … --save-replies {shown})"
        )));
    }
    if !unused.is_empty() {
        let list = listing(&unused);
        if args.strict {
            return Err(Error::TestDiverged(format!(
                "runbook test --strict: {} repl{} in {shown} answered no command:\n{list}",
                unused.len(),
                if unused.len() == 1 { "y" } else { "ies" }
            )));
        }
        if !quiet {
            eprintln!(
                "warning: {} repl{} in {shown} answered no command (--strict makes this a failure):\n{list}",
                unused.len(),
                if unused.len() == 1 { "y" } else { "ies" }
            );
        }
    }
    if !quiet && !args.json {
        eprintln!(
            "runbook test: {} command(s) answered from {shown}; nothing was contacted",
            replies.count()
        );
    }
    ran
}

/// The first ten, then how many more.
fn listing(lines: &[String]) -> String {
    let mut out: Vec<String> = lines.iter().take(10).map(|l| format!("  {l}")).collect();
    if lines.len() > 10 {
        out.push(format!("  … and {} more", lines.len() - 10));
    }
    out.join("\n")
}

/// A directory only this user can enter, under a name nobody can guess, removed when
/// dropped.
struct PrivateDir(PathBuf);

impl PrivateDir {
    fn new() -> Result<PrivateDir> {
        use std::io::Read;
        use std::os::unix::fs::DirBuilderExt;
        let mut bytes = [0u8; 12];
        let tmp = std::env::temp_dir();
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .map_err(|e| Error::io("/dev/urandom", e))?;
        let name: String = crate::base::hex::hex(&bytes);
        let dir = tmp.join(format!("runbook-test-{name}"));
        // `create` fails on a name that exists: nothing planted there is used.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::io(&dir, e))?;
        Ok(PrivateDir(dir))
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            tracing::warn!("could not remove {}: {e}", self.0.display());
        }
    }
}
