//! Reads sent once, for a run that changes nothing. A `run` without `--yes` makes its
//! plan with a dry-run first, whose reads really run (that is how the plan knows sizes,
//! versions and files), then the real run runs the same steps. When that plan changes
//! nothing (a report, a health check, a fleet survey), the real run would send exactly
//! the reads the dry-run sent moments before: the GPU probe, the fingerprint (a python
//! that imports torch, seconds), the git status. So the dry-run keeps what each read
//! answered, and the real run is answered from that instead.
//!
//! A plan that changes anything gets none of this: any read may decide what is changed
//! (is the job running now, which directory is idle), and the world may have moved while
//! the user read the plan, so those reads are sent again and compared with the plan
//! (`engine::run` installs the kept reads only for a plan without changes; an
//! adversarial review showed both ways a replayed read would hide such a move).
//!
//! The answer is only ever the same read's: the same step, target (and where it
//! resolved), exact command line, standard input and secrecy, kept less than
//! [`FRESH_FOR`] ago. Answering stops for good at the first change the real run makes
//! anyway (runbook's stop of an earlier run's command on `--resume`, a change the plan did
//! not have), at a wait (`sleep`, a poll's pause) and at a retry (each is there to see
//! something new). A read that did not run to its end (a timeout, a signal, a lost
//! connection) is never kept.
//!
//! What a kept read answers goes through the real run as if it had run: its lines
//! become `output` events (masked there), its `action_started` says `replayed`, and a
//! secret output is registered as a secret again.

use crate::targets::{ExecOutcome, Stream};
use std::time::{Duration, Instant};

/// How old a kept answer may be (from when its read ran) to answer the real run.
pub const FRESH_FOR: Duration = Duration::from_secs(300);

/// The most kept in all (output and the lines it came in, of every kept read); past it,
/// later reads are simply sent again.
const KEPT_MAX: usize = 64 << 20;

/// What identifies a read: two reads with the same key are the same command, given the
/// same input, on the same target.
pub struct Key<'a> {
    pub step: usize,
    pub target: &'a str,
    pub destination: &'a str,
    /// The exact command line the target runs (`Target::render`: env and cwd included).
    pub command: &'a str,
    pub stdin: Option<&'a [u8]>,
    pub secret_output: bool,
}

impl Key<'_> {
    fn matches(&self, k: &Kept) -> bool {
        self.step == k.step
            && self.target == k.target
            && self.destination == k.destination
            && self.command == k.command
            && self.stdin == k.stdin.as_deref()
            && self.secret_output == k.secret_output
    }
}

/// One line, or piece of a line cut at 64 KiB, as the read's `on_line` saw it (before
/// masking): (stream, text, continues).
pub type Piece = (Stream, String, bool);

struct Kept {
    step: usize,
    target: String,
    destination: String,
    command: String,
    stdin: Option<Vec<u8>>,
    secret_output: bool,
    pieces: Vec<Piece>,
    /// Taken by the answer (each kept read answers once).
    out: Option<ExecOutcome>,
    /// When the read ended.
    at: Instant,
}

/// A read answered from the dry-run: its lines in the order they came, and its outcome.
pub struct Answer {
    pub pieces: Vec<Piece>,
    pub out: ExecOutcome,
}

#[derive(Default)]
pub struct KeptReads {
    kept: Vec<Kept>,
    bytes: usize,
    /// Set at the first change, at a retry: every read is sent from then on.
    stopped: bool,
}

impl KeptReads {
    /// The dry-run's read `key` ran and answered `out`, in `pieces`.
    pub fn keep(&mut self, key: &Key, pieces: Vec<Piece>, out: &ExecOutcome) {
        self.keep_at(key, pieces, out, Instant::now());
    }

    fn keep_at(&mut self, key: &Key, pieces: Vec<Piece>, out: &ExecOutcome, at: Instant) {
        let whole = out.code.is_some() && !out.timed_out && !out.deadline_hit && !out.interrupted;
        let lines: usize = pieces.iter().map(|(_, p, _)| p.len() + 8).sum();
        let size = out.stdout.len() + out.stderr.len() + lines + key.command.len();
        if !whole || self.bytes + size > KEPT_MAX {
            return;
        }
        self.bytes += size;
        self.kept.push(Kept {
            step: key.step,
            target: key.target.into(),
            destination: key.destination.into(),
            command: key.command.into(),
            stdin: key.stdin.map(<[u8]>::to_vec),
            secret_output: key.secret_output,
            pieces,
            out: Some(out.clone()),
            at,
        });
    }

    /// The answer for the real run's read `key`: the first kept read of the same key not
    /// used yet (a loop that polls gets the dry-run's answers in their order), unless
    /// answering has stopped.
    pub fn answer(&mut self, key: &Key) -> Option<Answer> {
        self.answer_at(key, Instant::now())
    }

    fn answer_at(&mut self, key: &Key, now: Instant) -> Option<Answer> {
        if self.stopped {
            return None;
        }
        let k = self.kept.iter_mut().find(|k| {
            k.out.is_some() && key.matches(k) && now.saturating_duration_since(k.at) <= FRESH_FOR
        })?;
        Some(Answer {
            pieces: std::mem::take(&mut k.pieces),
            out: k.out.take()?,
        })
    }

    /// From now on every read is sent: a change is about to start, or a step is retried.
    pub fn stop(&mut self) {
        self.stopped = true;
        self.kept.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key<'a>(step: usize, command: &'a str, stdin: Option<&'a [u8]>) -> Key<'a> {
        Key {
            step,
            target: "node",
            destination: "root@node.example:22",
            command,
            stdin,
            secret_output: false,
        }
    }

    fn out(stdout: &str) -> ExecOutcome {
        ExecOutcome {
            code: Some(0),
            stdout: stdout.as_bytes().to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn a_read_is_answered_once_by_the_same_read_only() {
        let mut kept = KeptReads::default();
        let line = vec![(Stream::Stdout, "v1".to_string(), false)];
        kept.keep(&key(0, "cat -- /etc/x", None), line.clone(), &out("v1\n"));
        assert!(
            kept.answer(&key(1, "cat -- /etc/x", None)).is_none(),
            "another step"
        );
        assert!(
            kept.answer(&key(0, "cat -- /etc/y", None)).is_none(),
            "another command"
        );
        assert!(
            kept.answer(&key(0, "cat -- /etc/x", Some(b"in"))).is_none(),
            "another stdin"
        );
        let mut other_target = key(0, "cat -- /etc/x", None);
        other_target.destination = "root@other.example:22";
        assert!(kept.answer(&other_target).is_none(), "resolved elsewhere");
        let mut secret = key(0, "cat -- /etc/x", None);
        secret.secret_output = true;
        assert!(kept.answer(&secret).is_none(), "secrecy differs");
        let a = kept
            .answer(&key(0, "cat -- /etc/x", None))
            .expect("the same read");
        assert_eq!(a.out.stdout, b"v1\n");
        assert_eq!(a.pieces, line);
        assert!(
            kept.answer(&key(0, "cat -- /etc/x", None)).is_none(),
            "answered once"
        );
    }

    #[test]
    fn repeated_reads_are_answered_in_their_order() {
        let mut kept = KeptReads::default();
        for n in ["1", "2"] {
            kept.keep(&key(0, "poll", None), Vec::new(), &out(n));
        }
        assert_eq!(kept.answer(&key(0, "poll", None)).unwrap().out.stdout, b"1");
        assert_eq!(kept.answer(&key(0, "poll", None)).unwrap().out.stdout, b"2");
        assert!(kept.answer(&key(0, "poll", None)).is_none());
    }

    #[test]
    fn an_answer_older_than_fresh_for_is_not_used() {
        let mut kept = KeptReads::default();
        let then = Instant::now();
        kept.keep_at(&key(0, "date", None), Vec::new(), &out("1"), then);
        let late = then + FRESH_FOR + Duration::from_secs(1);
        assert!(kept.answer_at(&key(0, "date", None), late).is_none());
        assert!(kept
            .answer_at(&key(0, "date", None), then + FRESH_FOR)
            .is_some());
    }

    #[test]
    fn what_is_kept_is_bounded_lines_included() {
        let mut kept = KeptReads::default();
        let line = "x".repeat(1 << 20);
        let pieces: Vec<Piece> = (0..70)
            .map(|_| (Stream::Stdout, line.clone(), false))
            .collect();
        kept.keep(&key(0, "big", None), pieces, &out(""));
        assert!(kept.kept.is_empty(), "70 MiB of lines kept");
    }

    #[test]
    fn nothing_is_answered_after_a_stop() {
        let mut kept = KeptReads::default();
        kept.keep(&key(0, "a", None), Vec::new(), &out("x"));
        kept.stop();
        assert!(kept.answer(&key(0, "a", None)).is_none());
        kept.keep(&key(0, "a", None), Vec::new(), &out("x"));
        assert!(
            kept.answer(&key(0, "a", None)).is_none(),
            "stopped for good"
        );
    }

    #[test]
    fn a_read_that_did_not_run_to_its_end_is_not_kept() {
        let mut kept = KeptReads::default();
        let cut = [
            ExecOutcome {
                code: None,
                signal: Some(9),
                ..Default::default()
            },
            ExecOutcome {
                code: Some(0),
                timed_out: true,
                ..Default::default()
            },
            ExecOutcome {
                code: Some(0),
                deadline_hit: true,
                ..Default::default()
            },
            ExecOutcome {
                code: Some(0),
                interrupted: true,
                ..Default::default()
            },
        ];
        for o in &cut {
            kept.keep(&key(0, "a", None), Vec::new(), o);
        }
        assert!(kept.kept.is_empty());
        // A read that failed is an answer like any other.
        kept.keep(
            &key(0, "test -e /x", None),
            Vec::new(),
            &ExecOutcome {
                code: Some(1),
                ..Default::default()
            },
        );
        assert_eq!(
            kept.answer(&key(0, "test -e /x", None)).unwrap().out.code,
            Some(1)
        );
    }
}
