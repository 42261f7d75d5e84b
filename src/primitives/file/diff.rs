//! What a change does to a file's content, as people read it in the preview, the
//! confirmation and the plan (Ansible's `--diff`): a unified diff of the file as it was
//! read and as it will be, secrets masked; a file that is no text, or too big to diff,
//! is told by its sizes and digests instead.

use super::DIFF_MAX;
use crate::primitives::human_bytes;

/// What the target holds at the path now.
#[derive(Debug, Clone, Copy)]
pub enum Before<'a> {
    /// Nothing: the file is new.
    Missing,
    /// Its bytes, read whole.
    Read(&'a [u8]),
    /// Too big to be read for a diff: its size and sha256.
    Unread { size: u64, sha256: &'a str },
}

/// The diff of one change, and its counts for the summary.
#[derive(Debug, PartialEq, Eq)]
pub struct Diff {
    /// Unified diff lines, or one line of sizes and digests.
    pub text: String,
    /// Lines added and removed; `None` when the content was not diffed.
    pub lines: Option<(usize, usize)>,
}

/// The diff of `before` and `after` at `path`; `None` when the bytes are the same (only
/// the owner or mode change). Both sides are masked before they are compared, so a
/// secret (of several lines too) reads `***`, as in every event. `shown = false`
/// (`diff = false`): sizes and digests only.
pub fn render(
    path: &str,
    before: Before<'_>,
    after: &[u8],
    mask: &dyn Fn(&str) -> String,
    shown: bool,
) -> Option<Diff> {
    if let Before::Read(old) = before {
        if old == after {
            return None;
        }
    }
    let summed = |why: &str| Diff {
        text: format!("{why}: before {}; after {}", side(before), sized(after)),
        lines: None,
    };
    if !shown {
        return Some(summed("content not shown (diff = false)"));
    }
    let old = match before {
        Before::Missing => Some(""),
        Before::Read(bytes) => text(bytes),
        Before::Unread { .. } => None,
    };
    let too_big = after.len() > DIFF_MAX || matches!(before, Before::Unread { .. });
    if too_big {
        return Some(summed(&format!(
            "not diffed (over {})",
            human_bytes(DIFF_MAX as u64)
        )));
    }
    let (Some(old), Some(new)) = (old, text(after)) else {
        return Some(summed("binary content"));
    };
    let (old, new) = (mask(old), mask(new));
    let (from, to) = match before {
        Before::Missing => ("/dev/null".to_string(), path.to_string()),
        _ => (format!("{path} (before)"), format!("{path} (after)")),
    };
    let diff = similar::TextDiff::from_lines(&old, &new);
    let (mut added, mut removed) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    let text = diff
        .unified_diff()
        .context_radius(3)
        .missing_newline_hint(true)
        .header(&from, &to)
        .to_string();
    Some(Diff {
        text: text.trim_end_matches('\n').to_string(),
        lines: Some((added, removed)),
    })
}

/// Text a diff can show: UTF-8 without NUL (a NUL is what tells `diff` a binary file).
fn text(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes)
        .ok()
        .filter(|t| !t.contains('\0'))
}

fn side(before: Before<'_>) -> String {
    match before {
        Before::Missing => "none (a new file)".into(),
        Before::Read(bytes) => sized(bytes),
        Before::Unread { size, sha256 } => described(size, sha256),
    }
}

fn sized(bytes: &[u8]) -> String {
    described(bytes.len() as u64, &crate::primitives::store::sha256(bytes))
}

/// `1.2 KiB (1234 bytes), sha256 3f2a9c41d0e1b2a4…`: a file's size and the start of its
/// digest, as the shown command names its stdin.
fn described(size: u64, sha256: &str) -> String {
    let short = &sha256[..16.min(sha256.len())];
    match size < 1024 {
        true => format!("{size} bytes, sha256 {short}…"),
        false => format!("{} ({size} bytes), sha256 {short}…", human_bytes(size)),
    }
}
