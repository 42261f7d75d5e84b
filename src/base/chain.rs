//! The hash chain that makes a run record, and the index of runs, tamper-evident.
//!
//! Each line (a JSON object) names its place, `seq` (1 for the first line), and `prev`,
//! the sha256 of the line before it exactly as written (its bytes, without the newline);
//! the first line's `prev` is the sha256 of a genesis text that names what the lines are
//! (`runbook-record v1 RUN_ID`, `runbook-index v1`). A line edited, dropped or moved, or
//! a record passed off as another run's, then shows at the first line whose `seq` or
//! `prev` no longer fits. The place is written as well as the hash because a hash alone
//! cannot tell a dropped line from an edited one: both break the next line's `prev`,
//! one line apart.
//!
//! Writers keep a [`Chain`]; `runbook audit verify` feeds what it reads to a [`Checker`].

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// sha256 of `bytes`, as lowercase hex.
pub fn hash(bytes: &[u8]) -> String {
    crate::base::hex::hex(&Sha256::digest(bytes))
}

/// The genesis of a run's record: its run id is in it, so that a record renamed to
/// another run's id breaks at line 1.
pub fn record_genesis(run_id: &str) -> String {
    format!("runbook-record v1 {run_id}")
}

/// The genesis of the index of runs (`<state>/run-index.jsonl`).
pub const INDEX_GENESIS: &str = "runbook-index v1";

/// Where a chain being written stands: the place and the hash of its last line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    seq: u64,
    last: String,
}

impl Chain {
    /// A chain with no line yet.
    pub fn new(genesis: &str) -> Self {
        Chain {
            seq: 0,
            last: hash(genesis.as_bytes()),
        }
    }

    /// A chain whose last line, at place `seq`, is `line` (an appender that reopens it).
    pub fn after(seq: u64, line: &[u8]) -> Self {
        Chain {
            seq,
            last: hash(line),
        }
    }

    /// The `seq` and `prev` the next line carries.
    pub fn next(&self) -> (u64, String) {
        (self.seq + 1, self.last.clone())
    }

    /// The next line was written as `line`.
    pub fn push(&mut self, line: &[u8]) {
        self.push_hashed(hash(line));
    }

    /// The next line was written, and `hash` is its `hash` (made by whoever made the
    /// line, so that it is hashed once).
    pub fn push_hashed(&mut self, hash: String) {
        self.seq += 1;
        self.last = hash;
    }

    /// How many lines there are.
    pub fn lines(&self) -> u64 {
        self.seq
    }

    /// The hash of the last line (of the genesis when there is none).
    pub fn last(&self) -> &str {
        &self.last
    }
}

/// The first place where lines stop holding together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Break {
    /// Line 1 has neither `seq` nor `prev`: written before records were chained (or
    /// stripped of them, which the index tells apart).
    Unchained,
    /// A line that is not a JSON object.
    NotJson { line: u64 },
    /// A later line without `seq` and `prev`.
    NoLinks { line: u64 },
    /// The line at `line` says it was written as line `says`.
    Moved { line: u64, says: u64 },
    /// Line 1's `prev` is not the genesis the reader expects: another chain's first line.
    Genesis,
    /// `line`'s hash is not the next line's `prev`.
    Edited { line: u64 },
}

impl Break {
    /// The line it names (1-based), 0 for [`Break::Unchained`].
    pub fn line(&self) -> u64 {
        match self {
            Break::Unchained => 0,
            Break::Genesis => 1,
            Break::NotJson { line }
            | Break::NoLinks { line }
            | Break::Moved { line, .. }
            | Break::Edited { line } => *line,
        }
    }
}

impl std::fmt::Display for Break {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Break::Unchained => write!(f, "unchained (made before records were chained)"),
            Break::NotJson { line } => write!(f, "line {line}: edited (not a JSON object)"),
            Break::NoLinks { line } => write!(f, "line {line}: edited (it has no seq and prev)"),
            Break::Moved { line, says } => write!(
                f,
                "line {line}: out of order or dropped (it was written as line {says})"
            ),
            Break::Genesis => write!(
                f,
                "line 1: edited, or it is another chain's (its prev is not this one's genesis)"
            ),
            Break::Edited { line } => write!(
                f,
                "line {line}: edited (its hash does not match line {}'s prev)",
                line + 1
            ),
        }
    }
}

/// What a checker reads of each line: the links, and the event's name.
#[derive(Deserialize)]
struct Links {
    seq: Option<u64>,
    prev: Option<String>,
    event: Option<String>,
}

/// Checks lines one by one, as they are read: a record can be tens of megabytes.
#[derive(Debug, Clone)]
pub struct Checker {
    chain: Chain,
    last_event: Option<String>,
}

impl Checker {
    pub fn new(genesis: &str) -> Self {
        Checker {
            chain: Chain::new(genesis),
            last_event: None,
        }
    }

    /// The next line (without its newline); the first break stops the check.
    pub fn feed(&mut self, line: &[u8]) -> Result<(), Break> {
        let at = self.chain.lines() + 1;
        let links: Links = serde_json::from_slice(line).map_err(|_| Break::NotJson { line: at })?;
        let (Some(seq), Some(prev)) = (links.seq, links.prev) else {
            return Err(if at == 1 {
                Break::Unchained
            } else {
                Break::NoLinks { line: at }
            });
        };
        if seq != at {
            return Err(Break::Moved {
                line: at,
                says: seq,
            });
        }
        if prev != self.chain.last() {
            return Err(if at == 1 {
                Break::Genesis
            } else {
                Break::Edited { line: at - 1 }
            });
        }
        self.chain.push(line);
        self.last_event = links.event;
        Ok(())
    }

    /// The lines that held together, and the hash of the last.
    pub fn chain(&self) -> &Chain {
        &self.chain
    }

    /// The `event` of the last line that held.
    pub fn last_event(&self) -> Option<&str> {
        self.last_event.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` lines of a chain from `genesis`, as a writer makes them.
    fn written(genesis: &str, n: u64) -> Vec<String> {
        let mut chain = Chain::new(genesis);
        (0..n)
            .map(|i| {
                let (seq, prev) = chain.next();
                let line = format!(r#"{{"event":"e{i}","seq":{seq},"prev":"{prev}"}}"#);
                chain.push(line.as_bytes());
                line
            })
            .collect()
    }

    fn check(genesis: &str, lines: &[String]) -> Result<Checker, Break> {
        let mut c = Checker::new(genesis);
        for l in lines {
            c.feed(l.as_bytes())?;
        }
        Ok(c)
    }

    #[test]
    fn an_intact_chain_holds_and_ends_where_the_writer_did() {
        let lines = written("g", 5);
        let c = check("g", &lines).unwrap();
        let mut w = Chain::new("g");
        for l in &lines {
            w.push(l.as_bytes());
        }
        assert_eq!(c.chain(), &w);
        assert_eq!(c.chain().lines(), 5);
        assert_eq!(c.last_event(), Some("e4"));
        assert_eq!(Chain::after(5, lines[4].as_bytes()), w);
    }

    #[test]
    fn one_byte_edited_names_that_line() {
        let mut lines = written("g", 5);
        lines[2] = lines[2].replace("e2", "e9");
        let broken = check("g", &lines).unwrap_err();
        assert_eq!(broken, Break::Edited { line: 3 });
        assert_eq!(
            broken.to_string(),
            "line 3: edited (its hash does not match line 4's prev)"
        );
    }

    #[test]
    fn dropped_swapped_and_duplicated_lines_are_out_of_order() {
        let lines = written("g", 5);
        let mut dropped = lines.clone();
        dropped.remove(2);
        assert_eq!(
            check("g", &dropped).unwrap_err(),
            Break::Moved { line: 3, says: 4 }
        );
        let mut swapped = lines.clone();
        swapped.swap(1, 2);
        assert_eq!(
            check("g", &swapped).unwrap_err(),
            Break::Moved { line: 2, says: 3 }
        );
        let mut twice = lines.clone();
        twice.insert(3, lines[2].clone());
        assert_eq!(
            check("g", &twice).unwrap_err(),
            Break::Moved { line: 4, says: 3 }
        );
    }

    #[test]
    fn another_chains_lines_break_at_line_one() {
        let lines = written("runbook-record v1 A", 3);
        assert_eq!(
            check("runbook-record v1 B", &lines).unwrap_err(),
            Break::Genesis
        );
    }

    #[test]
    fn lines_without_links_are_unchained_at_the_start_and_edits_later() {
        let old = vec![r#"{"event":"run_started"}"#.to_string()];
        assert_eq!(check("g", &old).unwrap_err(), Break::Unchained);
        let mut lines = written("g", 3);
        lines[1] = r#"{"event":"e1"}"#.into();
        assert_eq!(check("g", &lines).unwrap_err(), Break::NoLinks { line: 2 });
        lines[1] = "{not json".into();
        assert_eq!(check("g", &lines).unwrap_err(), Break::NotJson { line: 2 });
    }

    #[test]
    fn hash_is_sha256_hex() {
        assert_eq!(
            hash(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
