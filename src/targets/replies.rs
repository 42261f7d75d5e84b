//! Replies: what each command of a run answered, saved from a real run (`runbook run
//! --save-replies R.jsonl`) and played back by `runbook test`, which contacts no target.
//! The format is JSON Lines (docs/authoring.md, "Testing a runbook without hosts"): a
//! header line, then one reply per command, in the order the commands ran.
//!
//! Both happen here, beneath every primitive and above every transport: the registry
//! wraps each target it makes in a `Target::Replies`, so whatever runs a command
//! (`exec`, `shell`, `cache.*`, `venv.build`, …) is saved or answered the same way, and
//! how a transport reaches a host does not matter. The run locks and runbook's own short
//! commands (stopping a process group, finding orphans) are not replies: in a test the
//! lock is taken at once and nothing else is contacted.

use super::{ExecIo, ExecOutcome, ExecRequest, Stream, Target, TargetError};
use crate::base::{quote, secrets};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

/// The `runbook_replies` of the header line: the version of this format.
pub const VERSION: u32 = 1;

/// The first line of a replies file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    runbook_replies: u32,
    /// The runbook the replies were saved from, as it was named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    runbook: Option<String>,
    /// `runbook X.Y.Z`: what saved them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    saved_by: Option<String>,
}

/// One command and what it answered. The command is the argv as argv (each word a JSON
/// string), with its env, cwd and a digest of its stdin; for one of runbook's own
/// scripts (`sh -c BODY sh ARG…`), the script's name and its arguments, so a reply
/// still answers when a new runbook version changes the script's text.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// The argv; for a `script`, its arguments (the words after `sh -c BODY sh`).
    pub argv: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Hex sha256 of the stdin it was given (secrets masked first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin_sha256: Option<String>,
    /// The exit code; null when a signal ended it (`signal`) or it never ran (`error`).
    #[serde(default)]
    pub code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Its own `timeout` ran out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    #[serde(default)]
    pub stdout: String,
    /// Its stdout, hex, when it is not text (an archive `artifact.capture` reads back):
    /// `stdout` as text would not give those bytes back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_hex: Option<String>,
    #[serde(default)]
    pub stderr: String,
    /// It could not be run at all: the target could not be reached, a container refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long it ran, in milliseconds.
    #[serde(default)]
    pub ms: u64,
}

/// What a command is matched by: everything in a reply but its result.
#[derive(Debug, Clone, PartialEq)]
struct Key {
    target: String,
    script: Option<String>,
    argv: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    stdin_sha256: Option<String>,
}

impl Reply {
    fn key(&self) -> Key {
        Key {
            target: self.target.clone(),
            script: self.script.clone(),
            argv: self.argv.clone(),
            env: self.env.clone(),
            cwd: self.cwd.clone(),
            stdin_sha256: self.stdin_sha256.clone(),
        }
    }

    fn outcome(&self) -> Result<ExecOutcome, String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let stdout = match &self.stdout_hex {
            Some(h) => from_hex(h).ok_or("a reply's stdout_hex is not hex digits")?,
            None => self.stdout.clone().into_bytes(),
        };
        Ok(ExecOutcome {
            code: self.code,
            signal: self.signal,
            stdout,
            stderr: self.stderr.clone().into_bytes(),
            duration: Duration::from_millis(self.ms),
            timed_out: self.timed_out,
            ..Default::default()
        })
    }
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if digits.len() % 2 != 0 {
        return None;
    }
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

impl Key {
    /// The command as one line, for messages: `cd DIR && env K=V ARGV…` (a script by its
    /// name, as previews show it), then the stdin digest.
    fn line(&self) -> String {
        let mut argv: Vec<OsString> = self.script.iter().map(OsString::from).collect();
        argv.extend(self.argv.iter().map(OsString::from));
        let env: Vec<(String, OsString)> = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.into()))
            .collect();
        let mut line = quote::render_with(&argv, &env, self.cwd.as_deref(), None);
        if let Some(d) = &self.stdin_sha256 {
            line.push_str(&format!(" <stdin sha256 {}…>", &d[..12.min(d.len())]));
        }
        line
    }

    /// The parts a diff compares, one per line.
    fn parts(&self) -> Vec<String> {
        let mut out = vec![format!("target {}", self.target)];
        let word = if self.script.is_some() { "arg" } else { "argv" };
        out.extend(self.script.iter().map(|s| format!("script {s}")));
        out.extend(
            self.argv
                .iter()
                .map(|w| format!("{word} {}", quote::quote_word(w.as_ref()))),
        );
        out.extend(
            self.env
                .iter()
                .map(|(k, v)| format!("env {k}={}", quote::quote_word(v.as_ref()))),
        );
        out.extend(self.cwd.iter().map(|c| format!("cwd {c}")));
        out.extend(
            self.stdin_sha256
                .iter()
                .map(|d| format!("stdin sha256 {d}")),
        );
        out
    }
}

/// A reply as read, and the line it is on.
#[derive(Debug)]
struct Entry {
    line: usize,
    reply: Reply,
}

#[derive(Debug)]
struct Book {
    /// The file as the user named it.
    file: String,
    entries: Vec<Entry>,
    used: RefCell<Vec<bool>>,
    /// What each command that had no reply was told (the first one is the cause).
    missed: RefCell<Vec<String>>,
}

#[derive(Debug)]
enum Kind {
    Record(RefCell<Vec<Reply>>),
    Replay(Book),
}

/// A run's replies: saved as its commands answer, or answering them.
pub struct Replies {
    kind: Kind,
    /// runbook's own scripts, `(name, body)`: a reply names one rather than holding it.
    scripts: Vec<(&'static str, &'static str)>,
    /// While above 0, commands run and are not saved (`run`'s confirmation pass: its
    /// reads run again in the real run, which is what a test replays).
    paused: Cell<u32>,
}

impl std::fmt::Debug for Replies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::Record(r) => write!(f, "Replies(recording, {})", r.borrow().len()),
            Kind::Replay(b) => write!(f, "Replies(from {}, {})", b.file, b.entries.len()),
        }
    }
}

/// Saving stops while this lives (see `Replies::pause`).
pub struct Paused(Rc<Replies>);

impl Drop for Paused {
    fn drop(&mut self) {
        self.0.paused.set(self.0.paused.get().saturating_sub(1));
    }
}

impl Replies {
    /// Replies to be saved from a real run.
    pub fn recorder(scripts: Vec<(&'static str, &'static str)>) -> Replies {
        Replies {
            kind: Kind::Record(RefCell::new(Vec::new())),
            scripts,
            paused: Cell::new(0),
        }
    }

    /// The replies in `text`, the file `file` (as the user named it). Errors name the
    /// line and what is wrong there.
    pub fn parse(
        text: &str,
        file: &str,
        scripts: Vec<(&'static str, &'static str)>,
    ) -> Result<Replies, String> {
        let mut header = None;
        let mut entries = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let trimmed = raw.trim();
            // A person editing replies may leave a note: `#` lines and blank lines are
            // not replies.
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let at = |e: String| format!("{file}:{line}: {e}");
            if header.is_none() {
                let h: Header = serde_json::from_str(trimmed).map_err(|e| {
                    at(format!(
                        "not a replies file: its first line must be the header {{\"runbook_replies\": {VERSION}, …}} ({e})"
                    ))
                })?;
                if h.runbook_replies != VERSION {
                    return Err(at(format!(
                        "replies format version {}; this runbook reads version {VERSION}",
                        h.runbook_replies
                    )));
                }
                header = Some(h);
                continue;
            }
            // serde counts this one line as line 1: say the column only.
            let reply: Reply = serde_json::from_str(trimmed).map_err(|e| {
                let text = e.to_string();
                let what = text
                    .rsplit_once(" at line ")
                    .map_or(text.as_str(), |(w, _)| w);
                at(format!("{what} (column {})", e.column()))
            })?;
            if reply.argv.is_empty() && reply.script.is_none() {
                return Err(at("`argv` is empty: a reply answers a command".into()));
            }
            match (&reply.error, reply.code, reply.signal) {
                (Some(_), None, None) | (None, Some(_), _) | (None, None, Some(_)) => {}
                (Some(_), _, _) => {
                    return Err(at(
                        "a reply with `error` (the command never ran) has no `code` or `signal`"
                            .into(),
                    ))
                }
                (None, None, None) => return Err(at(
                    "give `code` (the exit code), `signal`, or `error` (the command could not run)"
                        .into(),
                )),
            }
            if let Some(s) = &reply.script {
                if !scripts.iter().any(|(name, _)| name == s) {
                    let names = scripts.iter().map(|(n, _)| *n);
                    return Err(at(format!(
                        "no script '{s}'{} (see `runbook script`)",
                        crate::base::suggest::hint(s, names)
                    )));
                }
            }
            entries.push(Entry { line, reply });
        }
        if header.is_none() {
            return Err(format!(
                "{file}: empty: a replies file starts with the header {{\"runbook_replies\": {VERSION}, …}} (save one with runbook run … --save-replies {file})"
            ));
        }
        let used = RefCell::new(vec![false; entries.len()]);
        Ok(Replies {
            kind: Kind::Replay(Book {
                file: file.to_string(),
                entries,
                used,
                missed: RefCell::new(Vec::new()),
            }),
            scripts,
            paused: Cell::new(0),
        })
    }

    /// Whether commands are answered from replies (`runbook test`) instead of run.
    pub fn replaying(&self) -> bool {
        matches!(self.kind, Kind::Replay(_))
    }

    /// Stops saving until the guard is dropped.
    pub fn pause(self: &Rc<Self>) -> Paused {
        self.paused.set(self.paused.get() + 1);
        Paused(self.clone())
    }

    /// How many replies were saved, or answered a command.
    pub fn count(&self) -> usize {
        match &self.kind {
            Kind::Record(r) => r.borrow().len(),
            Kind::Replay(b) => b.used.borrow().iter().filter(|u| **u).count(),
        }
    }

    /// The saved replies as the file's text.
    pub fn to_text(&self, runbook: &str) -> String {
        let header = Header {
            runbook_replies: VERSION,
            runbook: Some(runbook.to_string()),
            saved_by: Some(format!("runbook {}", env!("CARGO_PKG_VERSION"))),
        };
        let mut out = serde_json::to_string(&header).expect("plain data") + "\n";
        if let Kind::Record(r) = &self.kind {
            for reply in r.borrow().iter() {
                out.push_str(&serde_json::to_string(reply).expect("plain data"));
                out.push('\n');
            }
        }
        out
    }

    /// Writes the saved replies to `path`: a new file beside it, renamed over it, so a
    /// run that cannot write leaves an earlier file as it was. Readable by its owner
    /// only: outputs can say more than their secrets, which are masked.
    pub fn save(&self, path: &Path, runbook: &str) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let written = f
            .write_all(self.to_text(runbook).as_bytes())
            .and_then(|()| f.sync_all())
            .and_then(|()| std::fs::rename(&tmp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// The report of each command that had no reply, the first one first.
    pub fn unanswered(&self) -> Vec<String> {
        match &self.kind {
            Kind::Replay(b) => b.missed.borrow().clone(),
            Kind::Record(_) => Vec::new(),
        }
    }

    /// `FILE:LINE: TARGET: COMMAND` for each reply no command used.
    pub fn unused(&self) -> Vec<String> {
        let Kind::Replay(b) = &self.kind else {
            return Vec::new();
        };
        let used = b.used.borrow();
        b.entries
            .iter()
            .zip(used.iter())
            .filter(|(_, u)| !**u)
            .map(|(e, _)| {
                let key = e.reply.key();
                format!("{}:{}: on {}: {}", b.file, e.line, key.target, key.line())
            })
            .collect()
    }

    /// The command as a reply names it, secrets masked (so a secret's value never
    /// reaches the file, and a test given another value still matches).
    fn key(&self, target: &Target, req: &ExecRequest) -> Key {
        let mask = |w: &str| secrets::mask_global(w);
        let words: Vec<String> = req
            .argv
            .iter()
            .map(|w| mask(&w.to_string_lossy()))
            .collect();
        let script = self.scripts.iter().find(|(_, body)| {
            req.argv.len() >= 4
                && req.argv[0] == "sh"
                && req.argv[1] == "-c"
                && req.argv[2] == *body
                && req.argv[3] == "sh"
        });
        let (script, argv) = match script {
            Some((name, _)) => (Some(name.to_string()), words[4..].to_vec()),
            None => (None, words),
        };
        Key {
            target: target.name(),
            script,
            argv,
            env: req
                .env
                .iter()
                .map(|(k, v)| (k.clone(), mask(&v.to_string_lossy())))
                .collect(),
            cwd: req.cwd.as_deref().map(mask),
            stdin_sha256: req.stdin.as_deref().map(|bytes| {
                let digest = match std::str::from_utf8(bytes) {
                    Ok(text) => Sha256::digest(mask(text).as_bytes()),
                    Err(_) => Sha256::digest(bytes),
                };
                format!("{digest:x}")
            }),
        }
    }

    /// Runs `req` on `target` and saves what it answered, or answers it from the
    /// replies without running anything.
    pub(super) async fn exec(
        &self,
        target: &Target,
        req: &ExecRequest,
        io: &ExecIo<'_>,
    ) -> Result<ExecOutcome, TargetError> {
        match &self.kind {
            Kind::Record(saved) => {
                let out = target.run_here(req, io).await;
                if self.paused.get() == 0 {
                    let reply = self.reply(target, req, &out);
                    saved.borrow_mut().push(reply);
                }
                out
            }
            Kind::Replay(book) => {
                let key = self.key(target, req);
                let found = {
                    let used = book.used.borrow();
                    book.entries
                        .iter()
                        .enumerate()
                        .find(|(i, e)| !used[*i] && e.reply.key() == key)
                        .map(|(i, _)| i)
                };
                let Some(i) = found else {
                    book.missed.borrow_mut().push(book.no_reply(&key));
                    // The whole report (the closest reply, the difference) ends the test.
                    return Err(format!(
                        "no reply in {} for `{}` on {} (the closest recorded command is shown at the end)",
                        book.file,
                        key.line(),
                        key.target
                    )
                    .into());
                };
                book.used.borrow_mut()[i] = true;
                let reply = &book.entries[i].reply;
                // Each line as it would have arrived, so the run's events and a
                // primitive watching its output see them.
                for (stream, text) in [
                    (Stream::Stdout, &reply.stdout),
                    (Stream::Stderr, &reply.stderr),
                ] {
                    for line in text.lines() {
                        (io.on_line)(stream, line, false);
                    }
                }
                reply.outcome().map_err(Into::into)
            }
        }
    }

    fn reply(
        &self,
        target: &Target,
        req: &ExecRequest,
        out: &Result<ExecOutcome, TargetError>,
    ) -> Reply {
        let key = self.key(target, req);
        let text = |b: &[u8]| secrets::mask_global(&String::from_utf8_lossy(b));
        let mut reply = Reply {
            target: key.target,
            script: key.script,
            argv: key.argv,
            env: key.env,
            cwd: key.cwd,
            stdin_sha256: key.stdin_sha256,
            code: None,
            signal: None,
            timed_out: false,
            stdout: String::new(),
            stdout_hex: None,
            stderr: String::new(),
            error: None,
            ms: 0,
        };
        match out {
            Ok(o) => {
                reply.code = o.code;
                reply.signal = o.signal;
                reply.timed_out = o.timed_out;
                // As the record has them: the output of a command that prints a secret
                // is the mask on either stream (its stdout becomes a secret only once it
                // returns, and its stderr may hold the secret too).
                let stream = |b: &[u8]| match (req.secret_output, b.is_empty()) {
                    (true, false) => secrets::MASK.to_string(),
                    _ => text(b),
                };
                match std::str::from_utf8(&o.stdout) {
                    // Bytes that are not text (an archive) are kept as they are, unless a
                    // secret stands in them (its text survives a lossy reading), and a
                    // secret output is the mask whatever it is.
                    Err(_)
                        if !req.secret_output
                            && text(&o.stdout) == String::from_utf8_lossy(&o.stdout) =>
                    {
                        reply.stdout_hex = Some(crate::base::hex::hex(&o.stdout))
                    }
                    Err(_) => reply.stdout = secrets::MASK.to_string(),
                    Ok(_) => reply.stdout = stream(&o.stdout),
                }
                reply.stderr = stream(&o.stderr);
                reply.ms = o.duration.as_millis() as u64;
                // Killed without a signal number known: say it was a signal all the same,
                // so the reply reads back.
                if reply.code.is_none() && reply.signal.is_none() {
                    reply.signal = Some(libc::SIGKILL);
                }
            }
            Err(e) => reply.error = Some(secrets::mask_global(e.message())),
        }
        reply
    }
}

impl Book {
    /// What a command with no reply is told: the command, the closest recorded one and
    /// how they differ.
    fn no_reply(&self, key: &Key) -> String {
        let mut out = format!(
            "no reply in {} for the command on {}:\n  {}",
            self.file,
            key.target,
            key.line()
        );
        let used = self.used.borrow();
        let same = self
            .entries
            .iter()
            .filter(|e| e.reply.key() == *key)
            .count();
        if same > 0 {
            out.push_str(&format!(
                "\n{} holds {same} repl{} for it, all used: the runbook ran it more often than the recorded run",
                self.file,
                if same == 1 { "y" } else { "ies" }
            ));
            return out;
        }
        let parts = key.parts();
        // Unused replies first (the one the runbook was most likely meant to reach), then
        // the fewest differing parts.
        let closest = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let theirs = e.reply.key().parts();
                (used[i], distance(&parts, &theirs), e)
            })
            .min_by_key(|(u, d, e)| (*d, *u, e.line));
        let Some((_, _, e)) = closest else {
            out.push_str(&format!("\n{} holds no replies", self.file));
            return out;
        };
        let theirs = e.reply.key();
        out.push_str(&format!(
            "\nclosest recorded ({}:{}, on {}):\n  {}\ndifference (- recorded, + ran):",
            self.file,
            e.line,
            theirs.target,
            theirs.line()
        ));
        for line in diff(&theirs.parts(), &parts) {
            out.push_str("\n  ");
            out.push_str(&line);
        }
        out
    }
}

/// Edit distance between two lists of parts (insert, delete, replace: 1 each).
fn distance(a: &[String], b: &[String]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, x) in a.iter().enumerate() {
        let mut row = vec![i + 1; b.len() + 1];
        for (j, y) in b.iter().enumerate() {
            row[j + 1] = (prev[j] + usize::from(x != y))
                .min(prev[j + 1] + 1)
                .min(row[j] + 1);
        }
        prev = row;
    }
    prev[b.len()]
}

/// `- PART` for what only `old` has and `+ PART` for what only `new` has, in order (a
/// longest-common-subsequence diff; the parts both have are left out).
fn diff(old: &[String], new: &[String]) -> Vec<String> {
    let (n, m) = (old.len(), new.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if old[i] == new[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && old[i] == new[j] {
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("- {}", old[i]));
            i += 1;
        } else {
            out.push(format!("+ {}", new[j]));
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "{\"runbook_replies\":1}\n";

    /// Bytes that are not text come back as they were (an archive read back), and a
    /// stdout_hex that is not hex is refused rather than read as something else.
    #[test]
    fn stdout_that_is_not_text_comes_back_byte_for_byte() {
        let bytes: Vec<u8> = vec![0x1f, 0x8b, 0x08, 0x00, 0xff, 0xfe, b'\n', 0x00];
        let line = format!(
            "{{\"target\":\"local\",\"argv\":[\"cat\"],\"code\":0,\"stdout_hex\":\"{}\"}}",
            crate::base::hex::hex(&bytes)
        );
        let reply: Reply = serde_json::from_str(&line).unwrap();
        assert_eq!(reply.outcome().unwrap().stdout, bytes);
        let bad: Reply = serde_json::from_str(
            "{\"target\":\"local\",\"argv\":[\"cat\"],\"code\":0,\"stdout_hex\":\"1f8\"}",
        )
        .unwrap();
        assert!(bad.outcome().is_err());
        assert_eq!(from_hex("zz"), None);
    }

    fn book(lines: &str) -> Result<Replies, String> {
        Replies::parse(
            &format!("{HEADER}{lines}"),
            "R.jsonl",
            vec![("probe.sh", "BODY")],
        )
    }

    #[test]
    fn a_diff_shows_what_changed_in_order() {
        let p = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            diff(&p("a b c d"), &p("a x c d e")),
            vec!["- b", "+ x", "+ e"]
        );
        assert_eq!(distance(&p("a b c"), &p("a c")), 1);
    }

    #[test]
    fn bad_lines_are_named() {
        let e = book("{\"target\":\"local\",\"argv\":[\"true\"],\"cdoe\":0}\n")
            .err()
            .unwrap();
        assert!(e.starts_with("R.jsonl:2: unknown field `cdoe`"), "{e}");
        let e = book("{\"target\":\"local\",\"argv\":[\"true\"]}\n")
            .err()
            .unwrap();
        assert!(e.contains("R.jsonl:2: give `code`"), "{e}");
        let e = book("{\"target\":\"local\",\"script\":\"prbe.sh\",\"argv\":[],\"code\":0}\n")
            .err()
            .unwrap();
        assert!(e.contains("did you mean 'probe.sh'"), "{e}");
        let e = Replies::parse("{\"runbook_replies\":2}\n", "R.jsonl", vec![])
            .err()
            .unwrap();
        assert!(e.contains("version 2"), "{e}");
        let e = Replies::parse("# only a note\n", "R.jsonl", vec![])
            .err()
            .unwrap();
        assert!(e.contains("empty"), "{e}");
        // Notes and blank lines are not replies.
        let ok =
            book("# a note\n\n{\"target\":\"local\",\"argv\":[\"true\"],\"code\":0}\n").unwrap();
        assert_eq!(ok.unused().len(), 1);
        assert!(
            ok.unused()[0].starts_with("R.jsonl:4: on local: true"),
            "{:?}",
            ok.unused()
        );
    }
}
