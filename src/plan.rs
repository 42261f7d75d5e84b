//! "What you saw is what runs": the changes a confirmation showed, and the check that
//! holds a real run to them.
//!
//! The confirmation pass (a silent dry-run) records every change it plans. Once the user
//! confirmed them, the real run compares each change, when it is reached, with the next
//! confirmed one: same target, same exact command, same standard input. A difference
//! stops the run before that change, and every later change is refused too. A retried
//! step starts again from its own first confirmed change, so retries are no difference.

use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// One change as planned or as about to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub step: usize,
    pub target: String,
    /// The exact command line (the target's own rendering), unmasked.
    pub command: String,
    /// sha256 of the standard input, when there is one.
    pub stdin_digest: Option<String>,
    /// For showing: the change's one-line summary and whether it deletes.
    pub summary: String,
    pub destructive: bool,
}

impl Change {
    pub fn digest(stdin: Option<&[u8]>) -> Option<String> {
        stdin.map(|s| format!("{:x}", Sha256::digest(s)))
    }

    fn same(&self, other: &Change) -> bool {
        self.target == other.target
            && self.command == other.command
            && self.stdin_digest == other.stdin_digest
    }
}

/// Holds a real run to the changes that were confirmed.
#[derive(Debug, Default)]
pub struct Enforcer {
    confirmed: Vec<Change>,
    next: usize,
    /// Where each step's changes start in `confirmed` (set at its first attempt).
    step_first: HashMap<usize, usize>,
    /// Set at the first difference: nothing changes after that.
    broken: Option<String>,
}

impl Enforcer {
    pub fn new(confirmed: Vec<Change>) -> Self {
        Enforcer {
            confirmed,
            ..Default::default()
        }
    }

    /// An attempt of `step` starts: a retry does its changes again, from the step's first.
    pub fn step_attempt(&mut self, step: usize) {
        let first = *self.step_first.entry(step).or_insert(self.next);
        self.next = first;
    }

    /// Allows `now` when it is the next confirmed change; otherwise says why not, in
    /// words that show both versions (`step_name` names the step of `now`).
    pub fn allow(&mut self, now: &Change, step_name: &str) -> Result<(), String> {
        if let Some(why) = &self.broken {
            return Err(format!(
                "no change runs after the run left the confirmed plan ({why})"
            ));
        }
        let why = match self.confirmed.get(self.next) {
            Some(want) if want.same(now) => {
                self.next += 1;
                return Ok(());
            }
            Some(want) => {
                let mut lines = vec![format!(
                    "step \"{step_name}\": this change is not the one that was confirmed; stopped before it, and nothing further is changed"
                )];
                if want.target != now.target {
                    lines.push(format!("  confirmed on: {}", want.target));
                    lines.push(format!("  now on:       {}", now.target));
                }
                lines.push(format!("  confirmed: {}", want.command));
                lines.push(format!("  now:       {}", now.command));
                if want.command == now.command && want.stdin_digest != now.stdin_digest {
                    lines.push("  (the same command, with different standard input)".into());
                }
                lines.join("\n")
            }
            None => format!(
                "step \"{step_name}\": this change was not in the confirmed plan ({} confirmed changes all ran); stopped before it, and nothing further is changed\n  now: {}",
                self.confirmed.len(),
                now.command
            ),
        };
        self.broken = Some(format!("step \"{step_name}\""));
        Err(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(step: usize, command: &str) -> Change {
        Change {
            step,
            target: "local".into(),
            command: command.into(),
            stdin_digest: None,
            summary: command.into(),
            destructive: false,
        }
    }

    #[test]
    fn the_confirmed_changes_run_in_order_and_nothing_else() {
        let mut e = Enforcer::new(vec![change(0, "rm -rf -- /x/A"), change(1, "touch b")]);
        e.step_attempt(0);
        assert!(e.allow(&change(0, "rm -rf -- /x/A"), "clear").is_ok());
        e.step_attempt(1);
        let err = e.allow(&change(1, "rm -rf -- /x/B"), "next").unwrap_err();
        assert!(
            err.contains("confirmed: touch b") && err.contains("now:       rm -rf -- /x/B"),
            "{err}"
        );
        // Sticky: the confirmed change itself no longer runs either.
        assert!(e.allow(&change(1, "touch b"), "next").is_err());
    }

    #[test]
    fn a_retry_repeats_its_steps_changes() {
        let mut e = Enforcer::new(vec![change(0, "a"), change(0, "b"), change(1, "c")]);
        e.step_attempt(0);
        assert!(e.allow(&change(0, "a"), "s").is_ok());
        e.step_attempt(0);
        assert!(e.allow(&change(0, "a"), "s").is_ok());
        assert!(e.allow(&change(0, "b"), "s").is_ok());
        e.step_attempt(1);
        assert!(e.allow(&change(1, "c"), "t").is_ok());
        assert!(e
            .allow(&change(1, "d"), "t")
            .unwrap_err()
            .contains("not in the confirmed plan"));
    }

    #[test]
    fn different_stdin_is_a_difference() {
        let mut e = Enforcer::new(vec![Change {
            stdin_digest: Change::digest(Some(b"one")),
            ..change(0, "tee f")
        }]);
        e.step_attempt(0);
        let now = Change {
            stdin_digest: Change::digest(Some(b"two")),
            ..change(0, "tee f")
        };
        assert!(e
            .allow(&now, "s")
            .unwrap_err()
            .contains("different standard input"));
    }
}
