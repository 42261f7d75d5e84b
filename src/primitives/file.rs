//! `file.put`, `file.template`, `file.get`: files on targets.
//!
//! A put is one read and at most one change, both through `Step`, so it works on every
//! target and previews, plans and locks as any primitive:
//! 1. a read (`file-read.sh`, runs in `--dry-run` too) says what is at the path: a file
//!    (its mode, owner, size, sha256 and, up to [`DIFF_MAX`], its bytes), nothing, or
//!    something never replaced (a link, a directory);
//! 2. no change when the bytes, and the mode and owner where given, are already those;
//! 3. else one change (`file-put.sh`): the bytes go on its stdin (never in an argv:
//!    ARG_MAX, and `ps` shows every argv), the command names the sha256 the file had when
//!    it was read and the one it will have, so a plan binds both (a file that changed
//!    since it was read is refused on the target, and in an apply its command is not the
//!    planned one); the bytes reach a new file of an unpredictable name in the same
//!    directory, renamed over the path. The preview and the plan show the diff
//!    ([`diff::render`]) under it.
//!
//! Rendering a template happens before all this, here (`template.rs`): the target gets
//! bytes, never a template.

mod diff;
mod probe;
pub mod template;

use super::{human_bytes, needs_from, Cmd, Ran, Result, Step};
use crate::base::script;
use crate::primitives::store::sha256;
use probe::{Found, Stat};
use serde::Serialize;

/// Files up to this size are read whole for the diff (and diffed); a bigger one is
/// told by its size and digest.
pub const DIFF_MAX: usize = 256 * 1024;

/// `file.get`'s default `max_bytes`.
pub const GET_DEFAULT: u64 = 1024 * 1024;

/// The most `file.get` reads: what a command's output keeps in memory
/// (`targets::CAPTURE_LIMIT`), less room for the lines before the bytes.
pub const GET_MAX: u64 = (crate::targets::CAPTURE_LIMIT - 4096) as u64;

/// A file's mode, as given: permission bits in octal (`"0644"`, `"755"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode(pub u32);

impl Mode {
    /// `"0644"`, `"644"`, `"2775"`: three or four octal digits. A number is refused by
    /// the Lua side (`0644` in Lua is the decimal 644).
    pub fn parse(text: &str) -> Result<Mode, String> {
        let ok = (3..=4).contains(&text.len()) && text.bytes().all(|b| (b'0'..=b'7').contains(&b));
        match ok {
            true => Ok(Mode(u32::from_str_radix(text, 8).unwrap_or_default())),
            false => Err(format!(
                "mode must be three or four octal digits, like \"0644\"; got {text:?}"
            )),
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04o}", self.0)
    }
}

/// A file's owner, as given: `USER` or `USER:GROUP`, names or numeric ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub user: String,
    pub group: Option<String>,
}

impl Owner {
    pub fn parse(text: &str) -> Result<Owner, String> {
        let name_ok = |n: &str| {
            !n.is_empty()
                && !n.starts_with('-')
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-$".contains(&b))
        };
        let (user, group) = match text.split_once(':') {
            Some((u, g)) => (u, Some(g)),
            None => (text, None),
        };
        match name_ok(user) && group.is_none_or(name_ok) {
            true => Ok(Owner {
                user: user.into(),
                group: group.map(str::to_string),
            }),
            false => Err(format!(
                "owner must be USER or USER:GROUP (names or numeric ids), like \"www-data:www-data\"; got {text:?}"
            )),
        }
    }

    /// Whether the file `stat` describes has this owner (by name or by id).
    fn holds(&self, stat: &Stat) -> bool {
        let is = |given: &str, name: &str, id: u32| given == name || given == id.to_string();
        is(&self.user, &stat.user, stat.uid)
            && self
                .group
                .as_deref()
                .is_none_or(|g| is(g, &stat.group, stat.gid))
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.group {
            Some(g) => write!(f, "{}:{g}", self.user),
            None => f.write_str(&self.user),
        }
    }
}

/// Checks a path on a target as `file.*` takes it: absolute and tidy (no empty, `.` or
/// `..` part, no trailing `/`), so that what the preview names is the file written.
pub fn check_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') || path == "/" {
        return Err(format!(
            "the path must be an absolute path of a file, like \"/etc/app.conf\"; got {path:?} (a relative one would depend on where commands start on the target)"
        ));
    }
    if path.contains('\0') {
        return Err("the path holds a NUL byte".into());
    }
    if path[1..]
        .split('/')
        .any(|p| p.is_empty() || p == "." || p == "..")
    {
        return Err(format!(
            "the path {path:?} has an empty, '.' or '..' part (or ends with '/'): give it as it is"
        ));
    }
    Ok(())
}

/// What `file.put` (or `file.template`, `what`) was asked to do.
#[derive(Debug, Clone)]
pub struct PutSpec {
    /// `file.put` or `file.template`, for messages.
    pub what: &'static str,
    pub path: String,
    pub content: Vec<u8>,
    pub mode: Option<Mode>,
    pub owner: Option<Owner>,
    pub backup: bool,
    /// Show the content's diff (`diff = false`: sizes and digests only).
    pub diff: bool,
}

/// What `file.put` gives back to Lua.
#[derive(Debug, Serialize)]
pub struct Put {
    pub path: String,
    /// It was (or in a dry-run would be) written, or its mode or owner set.
    pub changed: bool,
    /// There was no file at the path (nil: not looked at, `--offline`).
    pub created: Option<bool>,
    /// Where `backup = true` kept the file as it was.
    pub backup: Option<String>,
    pub bytes: u64,
    pub sha256: String,
    pub planned: bool,
}

/// Writes `spec.content` to `spec.path` on the step's target, unless it holds that
/// already (see the top of this file).
pub async fn put(step: &Step<'_>, spec: &PutSpec) -> Result<Put> {
    let what = spec.what;
    let path = spec.path.as_str();
    check_path(path).map_err(|e| step.fail(format!("{what}: {e}")))?;
    let new_sha = sha256(&spec.content);
    let found = read(step, what, path, DIFF_MAX as u64).await?;
    let target = step.target.name();
    let refuse = |why: &str| {
        step.fail(format!(
            "{what}: {path} on {target} is {why}; nothing was written"
        ))
    };
    let stat = match &found {
        None | Some(Found::Missing) => None,
        Some(Found::File(stat)) => Some(stat),
        Some(Found::Link) => {
            return Err(refuse(
                "a symbolic link (file.* never writes through one: give the path it points to)",
            ))
        }
        Some(Found::Dir) => return Err(refuse("a directory")),
        Some(Found::Other) => return Err(refuse("not a regular file")),
    };
    let mut result = Put {
        path: path.to_string(),
        changed: true,
        created: found.as_ref().map(|f| *f == Found::Missing),
        backup: None,
        bytes: spec.content.len() as u64,
        sha256: new_sha.clone(),
        planned: false,
    };
    let same_bytes = stat.is_some_and(|s| s.sha256 == new_sha);
    let mode_change = match (stat, spec.mode) {
        (Some(s), Some(m)) if s.mode != m.0 => Some((s.mode_text(), m.to_string())),
        _ => None,
    };
    let owner_change = match (stat, &spec.owner) {
        (Some(s), Some(o)) if !o.holds(s) => {
            Some((format!("{}:{}", s.user, s.group), o.to_string()))
        }
        _ => None,
    };
    if same_bytes && mode_change.is_none() && owner_change.is_none() {
        result.changed = false;
        return Ok(result);
    }
    let before = match (&found, stat) {
        (_, Some(s)) => match &s.content {
            Some(bytes) => diff::Before::Read(bytes),
            None => diff::Before::Unread {
                size: s.size,
                sha256: &s.sha256,
            },
        },
        _ => diff::Before::Missing,
    };
    let mask = |text: &str| step.ctx.bus.mask(text);
    // Offline, nothing was read: no diff can be told.
    let shown = match found {
        None => None,
        Some(_) => diff::render(path, before, &spec.content, &mask, spec.diff),
    };
    let summary = summary(
        spec,
        found.as_ref(),
        stat,
        shown.as_ref(),
        &mode_change,
        &owner_change,
    );
    let mut words = vec![
        path.to_string(),
        format!(
            "old={}",
            match (&found, stat) {
                (None, _) => "unknown",
                (_, Some(s)) => s.sha256.as_str(),
                _ => "none",
            }
        ),
        format!("new={new_sha}"),
    ];
    if let Some(m) = spec.mode {
        words.push(format!("mode={m}"));
    }
    if let Some(o) = &spec.owner {
        words.push(format!("owner={o}"));
    }
    if spec.backup {
        words.push("backup=yes".into());
    }
    let mut cmd = Cmd::script(&script::FILE_PUT, words);
    // The same bytes (only the mode or owner change): the script copies the file's own.
    if !same_bytes {
        cmd.stdin = Some(spec.content.clone());
    }
    cmd.stdin_data = true;
    cmd.diff = shown.map(|d| d.text);
    // Not marked as deleting: what the new content drops is in the diff, line by line
    // (`backup = true` keeps it), and a configuration edit marked so would teach
    // reviewers to pass over the mark.
    let ran = step.change(cmd, summary, false).await?;
    if ran.planned() {
        result.planned = true;
        return Ok(result);
    }
    if !ran.ok() {
        return Err(failed(step, what, &ran));
    }
    result.backup = ran
        .stdout()
        .lines()
        .find_map(|l| l.strip_prefix("backup="))
        .map(str::to_string);
    Ok(result)
}

/// The change in one line, for the preview and the plan: `create PATH (SIZE, mode M)`,
/// `write PATH (SIZE → SIZE, +A -R lines)`, `set mode of PATH: A → B`, and what else
/// changes with it.
fn summary(
    spec: &PutSpec,
    found: Option<&Found>,
    stat: Option<&Stat>,
    shown: Option<&diff::Diff>,
    mode_change: &Option<(String, String)>,
    owner_change: &Option<(String, String)>,
) -> String {
    let path = &spec.path;
    let size = human_bytes(spec.content.len() as u64);
    let mut facts = Vec::new();
    let head = match (found, stat) {
        (None, _) => {
            facts.push(size);
            facts.push("what is there was not read: --offline".into());
            format!("write {path}")
        }
        (_, None) => {
            facts.push(size);
            if let Some(m) = spec.mode {
                facts.push(format!("mode {m}"));
            }
            if let Some(o) = &spec.owner {
                facts.push(format!("owner {o}"));
            }
            format!("create {path}")
        }
        (_, Some(s)) if s.sha256 != sha256(&spec.content) => {
            facts.push(format!("{} → {size}", human_bytes(s.size)));
            if let Some((added, removed)) = shown.and_then(|d| d.lines) {
                facts.push(format!("+{added} -{removed} lines"));
            }
            format!("write {path}")
        }
        (_, Some(_)) => {
            let what: Vec<&str> = [
                mode_change.as_ref().map(|_| "mode"),
                owner_change.as_ref().map(|_| "owner"),
            ]
            .into_iter()
            .flatten()
            .collect();
            format!("set {} of {path}", what.join(" and "))
        }
    };
    if stat.is_some() {
        if let Some((from, to)) = mode_change {
            facts.push(format!("mode {from} → {to}"));
        }
        if let Some((from, to)) = owner_change {
            facts.push(format!("owner {from} → {to}"));
        }
        if spec.backup {
            facts.push("the old file kept as a backup".into());
        }
    }
    match facts.is_empty() {
        true => head,
        false => format!("{head} ({})", facts.join(", ")),
    }
}

/// A failed `file-put.sh` or `file-read.sh`, worded once: its `needs` line for the
/// target, else the reason it gave (`runbook file: …`), else the command's failure.
fn failed(step: &Step<'_>, what: &str, ran: &Ran) -> super::Error {
    let target = step.target.name();
    let stderr = ran.stderr();
    let reason = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("runbook file: "));
    match (needs_from(&stderr, &target), reason) {
        (Some(needs), _) => step.fail(format!("{what}: {needs}")),
        (None, Some(reason)) if ran.outcome().is_some_and(|o| o.code == Some(1)) => {
            step.fail(format!("{what} on {target}: {reason}"))
        }
        _ => step.fail(ran.failure(what, Some(&target), None)),
    }
}

/// What is at `path`, with its bytes when at most `max`; `None` when the read was only
/// planned (`--offline`).
async fn read(step: &Step<'_>, what: &str, path: &str, max: u64) -> Result<Option<Found>> {
    let mut cmd = Cmd::script(&script::FILE_READ, [path.to_string(), max.to_string()]);
    cmd.binary_output = true;
    let ran = step.read(cmd, format!("look at {path}")).await?;
    let Some(out) = ran.outcome() else {
        return Ok(None);
    };
    if !ran.ok() {
        return Err(failed(step, what, &ran));
    }
    if out.stdout_truncated {
        return Err(step.fail(format!(
            "{what}: {path} on {}: its bytes came back cut (over {})",
            step.target.name(),
            human_bytes(crate::targets::CAPTURE_LIMIT as u64)
        )));
    }
    probe::parse(&out.stdout).map(Some).map_err(|e| {
        step.fail(format!(
            "{what}: reading {path} on {}: {e}",
            step.target.name()
        ))
    })
}

/// What `file.get` gives back to Lua (its bytes beside it: `Got::content`).
#[derive(Debug, Serialize)]
pub struct Got {
    pub path: String,
    pub size: Option<u64>,
    /// `0644`.
    pub mode: Option<String>,
    pub owner: Option<String>,
    pub group: Option<String>,
    pub sha256: Option<String>,
    /// `--offline`: nothing was read.
    pub planned: bool,
    /// The file's bytes (nil offline); the Lua side makes them a string.
    #[serde(skip)]
    pub content: Option<Vec<u8>>,
}

/// Reads the file `path` on the step's target, at most `max` bytes of it (more is an
/// error naming its size). `None`: nothing is there and `missing_ok`.
pub async fn get(step: &Step<'_>, path: &str, max: u64, missing_ok: bool) -> Result<Option<Got>> {
    const WHAT: &str = "file.get";
    check_path(path).map_err(|e| step.fail(format!("{WHAT}: {e}")))?;
    let target = step.target.name();
    let Some(found) = read(step, WHAT, path, max).await? else {
        return Ok(Some(Got {
            path: path.into(),
            size: None,
            mode: None,
            owner: None,
            group: None,
            sha256: None,
            planned: true,
            content: None,
        }));
    };
    let refuse = |why: &str| Err(step.fail(format!("{WHAT}: {path} on {target} {why}")));
    let stat = match found {
        Found::File(stat) => stat,
        Found::Missing if missing_ok => return Ok(None),
        Found::Missing => return refuse("does not exist (missing_ok = true to get nil instead)"),
        Found::Link => {
            return refuse("is a symbolic link (file.get reads none: give the path it points to)")
        }
        Found::Dir => return refuse("is a directory"),
        Found::Other => return refuse("is not a regular file"),
    };
    let Some(content) = stat.content.clone() else {
        if stat.size <= max {
            return refuse("changed while it was read (try again)");
        }
        return refuse(&format!(
            "is {} bytes ({}), over max_bytes ({max})",
            stat.size,
            human_bytes(stat.size),
        ));
    };
    Ok(Some(Got {
        path: path.into(),
        size: Some(content.len() as u64),
        mode: Some(stat.mode_text()),
        owner: Some(stat.user.clone()),
        group: Some(stat.group.clone()),
        sha256: Some(stat.sha256.clone()),
        planned: false,
        content: Some(content),
    }))
}

#[cfg(test)]
mod tests;
