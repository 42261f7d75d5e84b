//! Secret masking: every registered value is replaced by `***` in every event before any
//! sink sees it, so terminal, `--json`, previews and run records are masked in one place.

use crate::events::Event;

pub const MASK: &str = "***";

/// Event fields that runbook generates (ids, hashes, enums), left as they are.
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
    "boot_id",
];

#[derive(Default)]
pub struct Masker {
    // Longest first, so a secret that contains another is masked whole.
    values: Vec<String>,
}

impl Masker {
    pub fn add(&mut self, value: &str) {
        if value.is_empty() || self.values.iter().any(|v| v == value) {
            return;
        }
        self.values.push(value.to_string());
        self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
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

    /// Masks every text inside the event: messages, commands, output, param values.
    pub fn mask_event(&self, event: Event) -> Event {
        if self.is_empty() {
            return event;
        }
        let Ok(mut value) = serde_json::to_value(&event) else {
            return event;
        };
        self.mask_value(&mut value);
        serde_json::from_value(value).unwrap_or(event)
    }

    fn mask_value(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(s) => *s = self.mask(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.mask_value(v)),
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    // Identifiers runbook made itself never hold a secret; masking a short
                    // secret that happens to occur in a run id or hash would break them.
                    if !STRUCTURAL.contains(&k.as_str()) {
                        self.mask_value(v);
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

    #[test]
    fn masks_longest_first_and_everywhere() {
        let mut m = Masker::default();
        m.add("abc");
        m.add("abcdef");
        m.add("");
        assert_eq!(m.mask("x abcdef y abc"), "x *** y ***");
        let ev = Event::Log {
            step: None,
            level: "info".into(),
            message: "token=abcdef".into(),
        };
        match m.mask_event(ev) {
            Event::Log { message, .. } => assert_eq!(message, "token=***"),
            other => panic!("{other:?}"),
        }
    }
}
