//! The one shape of a "command failed" message, for `t:exec` and every primitive:
//! `WHAT failed (WHY) on TARGET` (without `on TARGET` where the caller's own prefix names
//! it), then the last lines the command wrote on stderr, each on
//! a line of its own, indented. What a primitive puts around it is its own; these words
//! are the same everywhere.

use super::ExecOutcome;
use std::fmt::Display;
use std::time::Duration;

/// How many lines of stderr a failure shows unless its caller needs more (a build log).
pub const TAIL_LINES: usize = 5;

impl ExecOutcome {
    /// Why it did not succeed: `timed out after 30s`, `killed by signal 9`, `exit code 3`.
    /// `timeout` is the command's own, for the words of a timeout.
    pub fn why(&self, timeout: Option<Duration>) -> String {
        if self.timed_out {
            match timeout {
                Some(t) => format!("timed out after {}", crate::base::duration::short(t)),
                None => "timed out".to_string(),
            }
        } else if let Some(sig) = self.signal {
            format!("killed by signal {sig}")
        } else {
            match self.code {
                Some(code) => format!("exit code {code}"),
                None => "no exit status".to_string(),
            }
        }
    }

    /// `WHAT failed (WHY) on TARGET`: the head of the message; [`Self::stderr_tail`] ends it.
    pub fn failed(
        &self,
        what: impl Display,
        target: Option<&str>,
        timeout: Option<Duration>,
    ) -> String {
        let why = self.why(timeout);
        match target {
            Some(t) => format!("{what} failed ({why}) on {t}"),
            None => format!("{what} failed ({why})"),
        }
    }

    /// The last `n` lines of stderr that are not blank, for the end of a message.
    pub fn stderr_tail(&self, n: usize) -> String {
        tail(&String::from_utf8_lossy(&self.stderr), n)
    }
}

/// The last `n` lines of `text` that are not blank, each on a line of its own after a
/// newline, indented by two spaces (a line a script wrote for the user, `runbook: …`,
/// without that prefix); empty when there are none.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| format!("\n  {}", l.trim_end().trim_start_matches("runbook: ")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(code: Option<i32>, signal: Option<i32>, timed_out: bool, stderr: &str) -> ExecOutcome {
        ExecOutcome {
            code,
            signal,
            timed_out,
            stderr: stderr.as_bytes().to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn one_shape_for_every_way_a_command_fails() {
        let said = "warming\n\nTraceback\n  line 3\nruntime: boom\n\n";
        let o = out(Some(3), None, false, said);
        assert_eq!(
            format!(
                "{}{}",
                o.failed("warm-up", Some("local"), None),
                o.stderr_tail(2)
            ),
            "warm-up failed (exit code 3) on local\n    line 3\n  runtime: boom"
        );
        let t = Some(Duration::from_millis(300));
        assert_eq!(out(None, Some(9), true, "").why(t), "timed out after 300ms");
        assert_eq!(out(None, Some(9), true, "").why(None), "timed out");
        assert_eq!(out(None, Some(9), false, "").why(t), "killed by signal 9");
        assert_eq!(out(None, None, false, "").why(t), "no exit status");
        assert_eq!(tail("\n \n", 5), "");
        assert_eq!(
            tail("runbook: already running (pid 4)\n", 5),
            "\n  already running (pid 4)"
        );
    }
}
