//! `kind = "log"`: a number in a log on a target, below a threshold for a while.
//!
//! The log is followed as `proc.wait_for` follows one (`proc_poll.sh`, one read per look
//! through the target's session): from where it ended when the watcher first looked,
//! then from where the last whole line ended, across restarts (`state.rs`). A log whose
//! inode changed (rotated: renamed and made anew) or that shrank (truncated) is read
//! again from its start. Each line the pattern matches gives a value; the trigger fires
//! once every value since some time has been below the threshold for `for`.
//!
//! `below = "0.8 * known_good"` is a fraction of the throughput the target's known-good
//! environment reached: the known-good fingerprint of this machine (`fingerprint.load`,
//! kept per machine) names the compile cache artifact saved with it, whose manifest
//! keeps the throughput the run's gate measured (`artifact.capture { throughput = N }`,
//! as clean-reset does once its throughput check passes).

use super::config::{LogMetric, Threshold};
use super::state::Follow;
use crate::primitives::fingerprint::{self, Fingerprint, Loaded};
use crate::primitives::proc::{self, match_line, CHUNK};
use crate::primitives::store::{Fault, Store};
use crate::primitives::{Error, Step};
use std::time::Duration;

/// Polls per look at most when the log grew by more than a chunk each.
const MAX_CHUNKS: usize = 16;
/// A line longer than this without its end is taken as it is.
const MAX_PENDING: usize = 64 * 1024;

/// What a look found out, besides a firing.
#[derive(Debug, Default, PartialEq)]
pub struct Seen {
    /// The log was rotated or truncated since the last look.
    pub rotated: bool,
    /// The log is not there.
    pub missing: bool,
    /// Values were read, and the threshold is not known (why).
    pub unjudged: Option<String>,
    /// Values read that are no number (the first one).
    pub not_a_number: Option<String>,
}

/// The known-good figure: the value, and where it comes from (for messages).
#[derive(Debug, Clone, PartialEq)]
pub struct KnownGood {
    pub value: f64,
    pub whence: String,
}

/// One look: new lines read and judged, `follow` moved on. `Some(why)` when the trigger
/// fires. `known` is asked for the known-good figure only when a value is to be judged
/// against it.
pub async fn look(
    step: &Step<'_>,
    m: &LogMetric,
    follow: &mut Follow,
    known: &mut Option<KnownGood>,
    now: u64,
    seen: &mut Seen,
) -> Result<Option<String>, Error> {
    let target = step.target.name();
    if follow.target != target || follow.file != m.file {
        *follow = Follow {
            target: target.clone(),
            file: m.file.clone(),
            ..Follow::default()
        };
        // The first look: from where the log ends now, as `tail -f` starts.
        let p = proc::poll(step, &m.file, None, 0, None, None, "watch").await?;
        follow.offset = p.start;
        follow.inode = p.inode;
        seen.missing = !p.exists;
        return Ok(None);
    }
    let mut values = Vec::new();
    for _ in 0..MAX_CHUNKS {
        let p = proc::poll(
            step,
            &m.file,
            Some(follow.offset),
            0,
            None,
            follow.inode.as_deref(),
            "watch",
        )
        .await?;
        if !p.exists {
            seen.missing = true;
            follow.offset = 0;
            follow.inode = None;
            break;
        }
        if p.start < follow.offset || (follow.inode.is_some() && p.inode != follow.inode) {
            seen.rotated = true;
        }
        let whole = p
            .bytes
            .iter()
            .rposition(|b| *b == b'\n' || *b == b'\r')
            .map_or(0, |i| i + 1);
        // A line still being written is read next time, whole; one that never ends is
        // taken as it is.
        let used = if whole == 0 && p.bytes.len() >= MAX_PENDING {
            p.bytes.len()
        } else {
            whole
        };
        for line in p.bytes[..used].split(|b| *b == b'\n' || *b == b'\r') {
            let line = String::from_utf8_lossy(line);
            let Some(found) = match_line(&m.pattern, &line) else {
                continue;
            };
            let text = found
                .captures
                .first()
                .cloned()
                .flatten()
                .unwrap_or_default();
            match text.trim().parse::<f64>() {
                Ok(v) if v.is_finite() => values.push(v),
                _ => {
                    seen.not_a_number.get_or_insert(text);
                }
            }
        }
        follow.offset = p.start + used as u64;
        follow.inode = p.inode;
        if p.bytes.len() < CHUNK {
            break;
        }
    }
    // Nothing new and nothing below: there is nothing to judge.
    if values.is_empty() && follow.below_since.is_none() {
        return Ok(None);
    }
    let threshold = match m.below {
        Threshold::Value(v) => v,
        Threshold::KnownGood(k) => {
            // Read when a value is to be judged, or to say what a silent log stays below.
            if known.is_none() {
                match known_good(step, m).await? {
                    Ok(kg) => *known = Some(kg),
                    Err(why) => {
                        seen.unjudged = Some(why);
                        follow.below_since = None;
                        follow.last = values.last().copied().or(follow.last);
                        return Ok(None);
                    }
                }
            }
            k * known.as_ref().map_or(0.0, |kg| kg.value)
        }
    };
    for v in values {
        if v < threshold {
            follow.below_since.get_or_insert(now);
        } else {
            follow.below_since = None;
        }
        follow.last = Some(v);
    }
    Ok(judge(m, follow, now, known.as_ref()))
}

/// Whether the values have been below for long enough: why, when they have.
fn judge(m: &LogMetric, follow: &Follow, now: u64, known: Option<&KnownGood>) -> Option<String> {
    let (since, last) = (follow.below_since?, follow.last?);
    let held = now.saturating_sub(since);
    if Duration::from_secs(held) < m.hold {
        return None;
    }
    let threshold = match (m.below, known) {
        (Threshold::Value(v), _) => format!("{v}"),
        (Threshold::KnownGood(k), Some(kg)) => format!(
            "{} ({k} × the known-good {}, {})",
            round(k * kg.value),
            round(kg.value),
            kg.whence
        ),
        (Threshold::KnownGood(_), None) => return None,
    };
    Some(format!(
        "/{}/ in {} on {} has been below {threshold} for {} (last {})",
        m.pattern.as_str(),
        m.file,
        follow.target,
        crate::base::duration::short(Duration::from_secs(held)),
        round(last)
    ))
}

fn round(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The throughput the known-good environment of this target's machine reached: `Err`
/// says why there is none (no known-good yet, one without a compile cache artifact, an
/// artifact without a throughput).
async fn known_good(step: &Step<'_>, m: &LogMetric) -> Result<Result<KnownGood, String>, Error> {
    let target = step.target.name();
    let state_dir = step.ctx.state_dir.borrow().clone();
    let Some(state_dir) = state_dir else {
        return Ok(Err("no state dir".into()));
    };
    let now = Fingerprint {
        target: target.clone(),
        identity: fingerprint::identity(step).await?,
        ..Fingerprint::default()
    };
    let name = &m.known_good;
    let fp = match fingerprint::load(&state_dir, name, &now).map_err(|e| step.fail(e))? {
        Loaded::Found(fp) | Loaded::Legacy(fp) => fp,
        Loaded::OtherMachine(differ) => {
            return Ok(Err(format!(
                "the known-good '{name}' kept for {target}'s machine id is of another machine ({})",
                differ.join("; ")
            )))
        }
        Loaded::None => {
            return Ok(Err(format!(
                "there is no known-good fingerprint '{name}' of {target}'s machine in {} yet (clean-reset saves one when its throughput check passes)",
                state_dir.display()
            )))
        }
    };
    let Some(id) = fp.artifact else {
        return Ok(Err(format!(
            "the known-good fingerprint '{name}' of {target} names no compile cache artifact, where the throughput it reached is kept: give a number (below = 12.5)"
        )));
    };
    let store = Store::open(m.store.as_deref(), Some(&state_dir), &step.ctx.targets)
        .map_err(|e| step.fail(e))?;
    let manifest = match store.get(step, &id).await {
        Ok(found) => found,
        Err(Fault::Stop(e)) => return Err(e),
        Err(Fault::Msg(e)) => {
            return Ok(Err(format!(
                "the known-good '{name}' of {target} names artifact {id}: {e}"
            )))
        }
    };
    match manifest.throughput {
        Some(v) => Ok(Ok(KnownGood {
            value: v,
            whence: format!("artifact {id} of known-good '{name}'"),
        })),
        None => Ok(Err(format!(
            "artifact {id} of the known-good '{name}' of {target} keeps no throughput (it was captured without `throughput = N`): give a number (below = 12.5)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metric(below: Threshold, hold: u64) -> LogMetric {
        LogMetric {
            target: "gpu1".into(),
            file: "/l".into(),
            pattern: regex::Regex::new("([0-9.]+) Ktok/s").unwrap(),
            below,
            hold: Duration::from_secs(hold),
            known_good: "clean-reset".into(),
            store: None,
        }
    }

    #[test]
    fn fires_once_every_value_has_been_below_for_long_enough() {
        let m = metric(Threshold::Value(16.0), 600);
        let mut f = Follow {
            target: "gpu1".into(),
            below_since: Some(1000),
            last: Some(5.0),
            ..Follow::default()
        };
        assert_eq!(judge(&m, &f, 1599, None), None);
        let why = judge(&m, &f, 1600, None).unwrap();
        assert!(why.contains("below 16 for 10m00s (last 5)"), "{why}");
        f.below_since = None;
        assert_eq!(judge(&m, &f, 5000, None), None);
        let m = metric(Threshold::KnownGood(0.8), 1);
        f.below_since = Some(1000);
        assert_eq!(
            judge(&m, &f, 2000, None),
            None,
            "no known-good, no judgement"
        );
        let kg = KnownGood {
            value: 20.0,
            whence: "artifact a1".into(),
        };
        let why = judge(&m, &f, 2000, Some(&kg)).unwrap();
        assert!(
            why.contains("below 16 (0.8 × the known-good 20, artifact a1)"),
            "{why}"
        );
    }
}
