//! "What you saw is what runs": the changes a confirmation showed, and the check that
//! holds a real run to them.
//!
//! The confirmation pass (a silent dry-run) records every change it plans. Once the user
//! confirmed them, the real run compares each change, when it is reached, with the next
//! confirmed one: same step, same target, same exact command, same standard input. A
//! difference stops the run before that change, and every later change is refused too.
//! Each attempt of a step starts at that step's own first confirmed change: a retry does
//! its changes again, and the changes of steps the run skipped (after a failure, a false
//! `when`) are passed over, so an `always` cleanup step keeps its place.

use sha2::{Digest, Sha256};

/// One change as planned or as about to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub step: usize,
    pub target: String,
    /// The exact command line (the target's own rendering), unmasked.
    pub command: String,
    /// The command as messages show it (`actions::shown`: scripts by name).
    pub shown: String,
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
        self.step == other.step && self.same_but_step(other)
    }

    /// The same command on the same target with the same input, in whatever step.
    fn same_but_step(&self, other: &Change) -> bool {
        self.target == other.target
            && self.command == other.command
            && self.stdin_digest == other.stdin_digest
    }
}

/// Holds a real run to the changes that were confirmed.
#[derive(Debug, Default)]
pub struct Enforcer {
    confirmed: Vec<Change>,
    /// Which confirmed changes ran (in this attempt of their step).
    used: Vec<bool>,
    /// The step whose attempt runs now.
    step: Option<usize>,
    /// Set at the first difference: nothing changes after that.
    broken: Option<String>,
}

impl Enforcer {
    pub fn new(confirmed: Vec<Change>) -> Self {
        Enforcer {
            used: vec![false; confirmed.len()],
            confirmed,
            ..Default::default()
        }
    }

    /// An attempt of `step` starts: its confirmed changes are all to run again (a retry
    /// repeats them). Steps run in order, so the changes of steps the run skipped are
    /// simply never asked for.
    pub fn step_attempt(&mut self, step: usize) {
        self.step = Some(step);
        for (c, used) in self.confirmed.iter().zip(self.used.iter_mut()) {
            if c.step == step {
                *used = false;
            }
        }
    }

    /// Allows `now` when it is one of its step's confirmed changes not run yet (in any
    /// order within the step: `parallel()` items finish in any order); otherwise says
    /// why not, showing both versions (`step_name` names the step of `now`).
    pub fn allow(&mut self, now: &Change, step_name: &str) -> Result<(), String> {
        if let Some(why) = &self.broken {
            return Err(format!(
                "no change runs after the run left the confirmed plan ({why})"
            ));
        }
        let open: Vec<usize> = (0..self.confirmed.len())
            .filter(|&i| !self.used[i] && self.confirmed[i].step == now.step)
            .collect();
        if let Some(&i) = open.iter().find(|&&i| self.confirmed[i].same(now)) {
            self.used[i] = true;
            return Ok(());
        }
        let mut lines = vec![format!(
            "step \"{step_name}\": this change is not one that was confirmed for this step; stopped before it, and nothing further is changed"
        )];
        match open.first().map(|&i| &self.confirmed[i]) {
            Some(want) => {
                if want.target != now.target {
                    lines.push(format!("  confirmed on: {}", want.target));
                    lines.push(format!("  now on:       {}", now.target));
                }
                lines.push(format!("  confirmed: {}", want.shown));
                lines.push(format!("  now:       {}", now.shown));
                if want.command == now.command && want.stdin_digest != now.stdin_digest {
                    lines.push("  (the same command, with different standard input)".into());
                }
            }
            None => {
                let elsewhere = self.confirmed.iter().any(|c| c.same_but_step(now));
                lines.push(format!(
                    "  confirmed: nothing more in this step{}",
                    if elsewhere {
                        " (this command was confirmed for another step)"
                    } else {
                        ""
                    }
                ));
                lines.push(format!("  now:       {}", now.shown));
            }
        }
        self.broken = Some(format!("step \"{step_name}\""));
        Err(lines.join("\n"))
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
            shown: command.into(),
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
            .contains("nothing more in this step"));
    }

    /// A change the user saw in a later step does not run in an earlier one (review F2).
    #[test]
    fn a_confirmed_change_does_not_run_in_another_step() {
        let mut e = Enforcer::new(vec![change(2, "rm -f canary")]);
        e.step_attempt(0);
        let err = e.allow(&change(0, "rm -f canary"), "early").unwrap_err();
        assert!(err.contains("confirmed for another step"), "{err}");
    }

    /// After a failure the run skips steps; an `always` step's confirmed change still
    /// runs (review F3).
    #[test]
    fn skipped_steps_changes_are_passed_over() {
        let mut e = Enforcer::new(vec![
            change(0, "touch started"),
            change(1, "touch more"),
            change(2, "rm -f started"),
        ]);
        e.step_attempt(0);
        assert!(e.allow(&change(0, "touch started"), "work").is_ok());
        // step 1 skipped; step 2 (always) runs
        e.step_attempt(2);
        assert!(e.allow(&change(2, "rm -f started"), "cleanup").is_ok());
        // a step with no confirmed change may make none
        e.step_attempt(3);
        assert!(e.allow(&change(3, "touch x"), "extra").is_err());
    }

    /// `parallel()` items finish in any order: within a step, any confirmed change may
    /// come next, each once.
    #[test]
    fn within_a_step_the_order_is_free_but_each_change_runs_once() {
        let mut e = Enforcer::new(vec![change(0, "touch a"), change(0, "touch b")]);
        e.step_attempt(0);
        assert!(e.allow(&change(0, "touch b"), "fan").is_ok());
        assert!(e.allow(&change(0, "touch a"), "fan").is_ok());
        assert!(e.allow(&change(0, "touch a"), "fan").is_err());
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
