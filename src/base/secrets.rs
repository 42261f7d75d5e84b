//! Secret masking: every registered value is replaced by `***` in every event before any
//! sink sees it, so terminal, `--json`, previews and run records are masked in one place.
//! A process-wide copy of the values masks what does not travel as an event: errors
//! printed by `main`, panics, the text `show`/`check`/`list` print.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::sync::Mutex;

pub const MASK: &str = "***";

/// Event fields that runbook writes itself (ids, hashes, enums, the runbook's name and
/// path, who ran it where), left as they are: a secret that happens to be an ordinary
/// word must not break `history`, `--resume` or the record's own structure.
const STRUCTURAL: &[&str] = &[
    "event",
    "run_id",
    "content_hash",
    "resumed_from",
    "mode",
    "outcome",
    "effect",
    "stream",
    "level",
    "ts",
    "runbook",
    "path",
    "user",
    "host",
    "boot_id",
    "sha256",
    "plan",
];

/// Secrets shorter than this are likely to be ordinary text too: masking them mangles
/// output, so runbook warns.
pub const SHORT_SECRET: usize = 8;

/// Every secret registered anywhere in this process (see the module doc).
static GLOBAL: Mutex<Masker> = Mutex::new(Masker { values: Vec::new() });

/// Masks `text` with every secret this process knows.
pub fn mask_global(text: &str) -> String {
    GLOBAL.lock().unwrap_or_else(|e| e.into_inner()).mask(text)
}

#[derive(Default)]
pub struct Masker {
    // Longest first, so a secret that contains another is masked whole.
    values: Vec<String>,
}

impl Masker {
    /// Registers `value` (and, for a value of several lines, each line that is not
    /// short: output is masked line by line, so a PEM key printed as it is shows as
    /// one `***` a line). Returns false when it was known already.
    pub fn add(&mut self, value: &str) -> bool {
        let added = self.insert(value);
        if added {
            GLOBAL
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(value);
        }
        added
    }

    /// `add` without the process-wide copy (which is itself a `Masker`).
    fn insert(&mut self, value: &str) -> bool {
        if value.is_empty() || self.values.iter().any(|v| v == value) {
            return false;
        }
        let mut forms = vec![value.to_string()];
        if value.contains('\n') {
            // A short line (`==`, a blank) is no secret on its own: masked everywhere,
            // it would hide ordinary text; the lines around it are masked.
            forms.extend(
                value
                    .lines()
                    .map(str::trim)
                    .filter(|l| l.chars().count() >= SHORT_SECRET)
                    .map(str::to_string),
            );
        }
        // Output lines and error tails are shown trimmed (a token file with CRLF).
        forms.push(value.trim().to_string());
        // A preview shows commands quoted (quote.rs writes a ' as '\''), and a command
        // for ssh or a container is quoted again for each hop: as it is shown at each
        // of up to three hops (ssh, a container, `sh -c`).
        let mut quoted = value.to_string();
        for _ in 0..3 {
            if !quoted.contains('\'') {
                break;
            }
            quoted = quoted.replace('\'', "'\\''");
            forms.push(quoted.clone());
        }
        for f in forms {
            if !f.is_empty() && !self.values.contains(&f) {
                self.values.push(f);
            }
        }
        self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        true
    }

    /// Length in bytes of the longest secret.
    pub fn longest(&self) -> usize {
        self.values.first().map_or(0, |v| v.len())
    }

    /// Masks one piece of a line that output arrives in. `continues` says the line goes
    /// on in the next piece (a line over 64 KiB is cut): then the end of the piece that
    /// could be the start of a secret stays in `carry` and is masked with the next piece,
    /// so a secret across the cut is masked whole. Returns what can be shown now.
    pub fn mask_piece(&self, carry: &mut String, piece: &str, continues: bool) -> String {
        let mut text = std::mem::take(carry);
        text.push_str(piece);
        if !continues || self.values.is_empty() {
            return self.mask(&text);
        }
        let mut cut = text.len().saturating_sub(self.longest().saturating_sub(1));
        // A secret that spans the cut stays whole on the carried side.
        for v in &self.values {
            for (start, _) in text.match_indices(v.as_str()) {
                if start < cut && start + v.len() > cut {
                    cut = start;
                }
            }
        }
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        *carry = text.split_off(cut);
        self.mask(&text)
    }

    /// The last `max` bytes of `bytes` as text, with every secret that reaches into them
    /// masked, also one that starts before the cut (its part after the cut shows as the
    /// mask). Occurrences are found in a window wide enough to hold any secret that
    /// crosses the cut, and masked in the window's own coordinates, so masking one copy
    /// never moves the cut into another.
    pub fn masked_tail(&self, bytes: &[u8], max: usize) -> String {
        let start = bytes.len().saturating_sub(max + self.longest());
        let text = String::from_utf8_lossy(&bytes[start..]).into_owned();
        let mut cut = text.len().saturating_sub(max);
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        // Longest first, so a secret that contains another is masked whole.
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        for v in &self.values {
            for (at, _) in text.match_indices(v.as_str()) {
                let end = at + v.len();
                if !ranges.iter().any(|&(a, b)| at < b && a < end) {
                    ranges.push((at, end));
                }
            }
        }
        ranges.sort_unstable();
        let mut out = String::new();
        let mut pos = cut;
        for (a, b) in ranges {
            if b <= pos {
                continue;
            }
            if a > pos {
                out.push_str(&text[pos..a]);
            }
            out.push_str(MASK);
            pos = b;
        }
        out.push_str(&text[pos..]);
        out
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn mask(&self, text: &str) -> String {
        let mut out = text.to_string();
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), MASK);
            }
        }
        out
    }

    /// Masks every text inside the event (any serde value: `events.rs` sits above this
    /// module): messages, commands, output, param values.
    pub fn mask_event<E: Serialize + DeserializeOwned>(&self, event: E) -> E {
        if self.is_empty() {
            return event;
        }
        let Ok(mut value) = serde_json::to_value(&event) else {
            return event;
        };
        self.mask_value(&mut value, true);
        serde_json::from_value(value).unwrap_or(event)
    }

    /// `top`: the event's own fields. Only those are runbook's identifiers; below them
    /// (a param named `mode` or `host`) a key is the runbook's, and its value is masked.
    fn mask_value(&self, value: &mut serde_json::Value, top: bool) {
        use serde_json::Value;
        match value {
            Value::String(s) => *s = self.mask(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.mask_value(v, false)),
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    // Identifiers runbook made itself never hold a secret; masking a short
                    // secret that happens to occur in a run id or hash would break them.
                    if !(top && STRUCTURAL.contains(&k.as_str())) {
                        self.mask_value(v, false);
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::events::Event;

    #[test]
    fn only_the_events_own_identifiers_are_left_alone() {
        let mut m = Masker::default();
        m.add("S3CR3T-XYZZY-42");
        let event = serde_json::json!({
            "event": "run_started", "path": "/rb/S3CR3T-XYZZY-42.lua",
            "params": { "path": "PATH-S3CR3T-XYZZY-42", "host": "S3CR3T-XYZZY-42" },
        });
        let masked = m.mask_event(event);
        assert_eq!(
            masked["path"], "/rb/S3CR3T-XYZZY-42.lua",
            "runbook's own field"
        );
        assert_eq!(masked["params"]["path"], "PATH-***", "a param named path");
        assert_eq!(masked["params"]["host"], "***", "a param named host");
    }

    #[test]
    fn a_secret_is_masked_as_quoted_for_each_hop_and_trimmed() {
        use std::ffi::OsString;
        let mut m = Masker::default();
        m.add("pa'ss-S3CR3T-42\r");
        let word: OsString = "TOKEN=pa'ss-S3CR3T-42\r".into();
        let once = crate::base::quote::join(&[word]);
        let twice = crate::base::quote::join(&["sh".into(), "-c".into(), once.clone().into()]);
        let thrice = crate::base::quote::join(&["ssh".into(), twice.clone().into()]);
        for shown in [&once, &twice, &thrice] {
            let masked = m.mask(shown);
            assert!(!masked.contains("S3CR3T"), "{shown} -> {masked}");
        }
        assert_eq!(
            m.mask("line pa'ss-S3CR3T-42"),
            "line ***",
            "trimmed, as lines are shown"
        );
    }

    #[test]
    fn a_secret_across_a_cut_line_is_masked_whole() {
        let mut m = Masker::default();
        m.add("S3CR3T-TOKEN-VALUE-123456");
        let line = format!("{}S3CR3T-TOKEN-VALUE-123456 end", "x".repeat(100));
        for cut in 90..line.len() {
            let (a, b) = line.split_at(cut);
            let mut carry = String::new();
            let shown = m.mask_piece(&mut carry, a, true) + &m.mask_piece(&mut carry, b, false);
            assert!(carry.is_empty());
            assert_eq!(shown, format!("{}*** end", "x".repeat(100)), "cut at {cut}");
        }
    }

    #[test]
    fn a_tail_is_masked_before_it_is_cut() {
        let mut m = Masker::default();
        m.add("S3CR3T-TOKEN-VALUE-123456");
        let out = format!(
            "{}S3CR3T-TOKEN-VALUE-123456{}",
            "a".repeat(50),
            "b".repeat(10)
        );
        for max in 1..out.len() {
            let tail = m.masked_tail(out.as_bytes(), max);
            assert!(
                !tail.contains("VALUE") && !tail.contains("3456") && !tail.contains("56b"),
                "{max}: {tail}"
            );
        }
        // Two copies: masking the later one must not pull the cut into the earlier one.
        for gap in 0..80 {
            let out = format!(
                "S3CR3T-TOKEN-VALUE-123456{}S3CR3T-TOKEN-VALUE-123456",
                "x".repeat(gap)
            );
            for max in 1..out.len() {
                let tail = m.masked_tail(out.as_bytes(), max);
                for piece in ["TOKEN", "VALUE", "3456", "CR3T", "-123"] {
                    assert!(!tail.contains(piece), "gap {gap}, max {max}: {tail}");
                }
            }
        }
    }

    #[test]
    fn each_line_of_a_multi_line_secret_is_masked() {
        let mut m = Masker::default();
        m.add("-----BEGIN KEY-----\nAAAABBBBCCCC\n-----END KEY-----\n");
        assert_eq!(m.mask("got AAAABBBBCCCC here"), "got *** here");
        m.add("first line of it\nZz==\n  indented line of it\n");
        assert_eq!(m.mask("Zz== indented line of it"), "Zz== ***");
    }

    #[test]
    fn masks_longest_first_and_everywhere() {
        let mut m = Masker::default();
        m.add("abc");
        m.add("abcdef");
        m.add("");
        assert_eq!(m.mask("x abcdef y abc"), "x *** y ***");
        let ev = Event::Log {
            step: None,
            level: crate::actions::events::Level::Info,
            message: "token=abcdef".into(),
        };
        match m.mask_event(ev) {
            Event::Log { message, .. } => assert_eq!(message, "token=***"),
            other => panic!("{other:?}"),
        }
    }
}
