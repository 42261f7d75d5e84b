//! `runbook audit verify`: each run record checked against its own chain (`base/chain.rs`)
//! and against the index of runs (`run/index.rs`), and the index against its chain.
//!
//! The chain finds a line edited, dropped or moved inside a record; the index finds what
//! the record cannot show of itself: a record deleted, cut short, its last line edited, a
//! line added after it was closed, or the record of another run put in its place.

use crate::base::chain::{self, Break, Checker};
use crate::base::error::{Error, Result};
use crate::run::index::{self, Entry};
use crate::run::state;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// What the check found of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every line holds, it ends with `run_finished`, and the index agrees.
    Ok { lines: u64, last: String },
    /// Every line holds as far as the record goes, but the run did not end in it: it was
    /// killed, is still running, or its record broke off (`why`). Not a failure.
    Incomplete {
        lines: u64,
        last: String,
        why: &'static str,
    },
    /// Written before records were chained: nothing to check it against. Not a failure.
    Unchained,
    /// No line was written, and the index does not say there were any. Not a failure.
    Empty,
    /// The first thing wrong: the first bad line (1-based) when there is one.
    Bad { line: Option<u64>, what: String },
}

impl Verdict {
    pub fn failed(&self) -> bool {
        matches!(self, Verdict::Bad { .. })
    }

    fn bad(line: impl Into<Option<u64>>, what: impl Into<String>) -> Self {
        Verdict::Bad {
            line: line.into(),
            what: what.into(),
        }
    }
}

/// One record's verdict.
#[derive(Debug, Clone)]
pub struct Checked {
    pub run_id: String,
    pub path: PathBuf,
    pub verdict: Verdict,
}

/// What the check found of the index itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexVerdict {
    /// Every line holds.
    Ok {
        lines: u64,
    },
    /// There is no index, and no chained record that it should list.
    None,
    Bad(String),
}

#[derive(Debug)]
pub struct Audit {
    pub records: Vec<Checked>,
    pub index_path: PathBuf,
    pub index: IndexVerdict,
}

/// What the index says of one run.
#[derive(Debug, Default)]
struct Listed {
    /// Its last `closed` line: the record's line count and last hash.
    closed: Option<(u64, String)>,
}

/// Checks the record of `which` (a run id, a unique prefix of one, or `last`), or with
/// `None` every record there is and every run the index lists; and the index.
pub fn verify(state_dir: &Path, which: Option<&str>) -> Result<Audit> {
    let index_path = index::path(state_dir);
    let read = index::read(&index_path).map_err(|e| Error::io(&index_path, e))?;
    let mut listed: BTreeMap<String, Listed> = BTreeMap::new();
    // The runs the index lists, in the order they started (their `opened` lines).
    let mut started = Vec::new();
    for (_, entry) in read.iter().flat_map(|r| r.entries.iter()) {
        // Which run applied a plan (written before that run's record is made: a run
        // refused then has none), and which gave it back: they list no record.
        if matches!(
            entry,
            Entry::PlanApplied { .. } | Entry::PlanReleased { .. }
        ) {
            continue;
        }
        let l = listed.entry(entry.run_id().to_string()).or_insert_with(|| {
            started.push(entry.run_id().to_string());
            Listed::default()
        });
        if let Entry::Closed { lines, last, .. } = entry {
            l.closed = Some((*lines, last.clone()));
        }
    }
    let runs = state::runs_dir(state_dir);
    let mut unlisted = BTreeSet::new();
    match std::fs::read_dir(&runs) {
        Ok(entries) => {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                match name.strip_suffix(".jsonl") {
                    Some(id) if !listed.contains_key(id) => {
                        unlisted.insert(id.to_string());
                    }
                    _ => {}
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(&runs, e)),
    }
    // Records the index does not list (made before it, mostly) first, then the index's.
    let all: Vec<String> = unlisted.into_iter().chain(started).collect();
    let ids = match which {
        None => all,
        Some(which) => vec![pick(&all, which, state_dir)?],
    };
    let mut records = Vec::new();
    for run_id in ids {
        let path = runs.join(format!("{run_id}.jsonl"));
        let verdict = match File::open(&path) {
            Ok(file) => {
                check_record(file, &run_id, listed.get(&run_id)).map_err(|e| Error::io(&path, e))?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Verdict::bad(None, "record deleted (the index lists it)")
            }
            Err(e) => return Err(Error::io(&path, e)),
        };
        records.push(Checked {
            run_id,
            path,
            verdict,
        });
    }
    let index = match read {
        Some(r) => match r.broken {
            Some(why) => IndexVerdict::Bad(why),
            None => IndexVerdict::Ok { lines: r.lines },
        },
        // Without it, every chained record says "not in the index"; the index says why.
        None if records.iter().any(|r| r.verdict.failed()) => {
            IndexVerdict::Bad("missing (a chained record needs it)".into())
        }
        None => IndexVerdict::None,
    };
    Ok(Audit {
        records,
        index_path,
        index,
    })
}

/// The run `which` names among `ids` (the records there are and the runs the index
/// lists, the index's last: `last` is the run the index saw start last).
fn pick(ids: &[String], which: &str, state_dir: &Path) -> Result<String> {
    let none = || {
        Error::NoSuchRun(format!(
            "no run '{which}' in {} (see `runbook history`)",
            state_dir.display()
        ))
    };
    if which == "last" {
        return ids.last().cloned().ok_or_else(none);
    }
    if ids.iter().any(|id| id == which) {
        return Ok(which.to_string());
    }
    let matches: Vec<&String> = ids.iter().filter(|id| id.starts_with(which)).collect();
    match matches[..] {
        [one] => Ok(one.clone()),
        [] => Err(none()),
        _ => Err(Error::NoSuchRun(format!(
            "'{which}' matches {} runs; give more of the run id",
            matches.len()
        ))),
    }
}

/// One record, read line by line: its chain, then what the index says of it.
fn check_record(file: File, run_id: &str, listed: Option<&Listed>) -> std::io::Result<Verdict> {
    let mut reader = BufReader::new(file);
    let mut checker = Checker::new(&chain::record_genesis(run_id));
    let mut buf = Vec::new();
    let mut torn = false;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        let Some(line) = buf.strip_suffix(b"\n") else {
            // The last line, without its newline: cut off while it was written.
            torn = true;
            break;
        };
        match checker.feed(line) {
            Ok(()) => {}
            Err(Break::Unchained) if listed.is_some() => {
                return Ok(Verdict::bad(
                    1,
                    "line 1: edited (it has no seq and prev, but the index lists this run)",
                ))
            }
            Err(Break::Unchained) => return Ok(Verdict::Unchained),
            Err(Break::Genesis) => {
                return Ok(Verdict::bad(
                    1,
                    format!(
                        "line 1: edited, or another run's record (its prev is not run {run_id}'s genesis)"
                    ),
                ))
            }
            Err(b) => return Ok(Verdict::bad(b.line(), b.to_string())),
        }
    }
    let n = checker.chain().lines();
    let last = checker.chain().last().to_string();
    let finished = checker.last_event() == Some("run_finished");
    let Some(listed) = listed else {
        return Ok(if n == 0 && !torn {
            Verdict::Empty
        } else {
            Verdict::bad(
                None,
                "not in the index (it has no line for this run: taken out, or the index replaced)",
            )
        });
    };
    let incomplete = |why| Verdict::Incomplete {
        lines: n,
        last: last.clone(),
        why,
    };
    Ok(match &listed.closed {
        Some((want, _)) if n < *want && n == 0 => {
            Verdict::bad(1, format!("truncated: empty (the index says {want} lines)"))
        }
        Some((want, _)) if n < *want => Verdict::bad(
            n + 1,
            format!("truncated after line {n} (the index says {want} lines)"),
        ),
        Some((want, _)) if n > *want || (torn && finished) => Verdict::bad(
            want + 1,
            format!(
                "line {}: added after the record was closed (the index says {want} lines)",
                want + 1
            ),
        ),
        Some((_, hash)) if *hash != last => Verdict::bad(
            n,
            format!("line {n}: edited (its hash does not match the index's last hash)"),
        ),
        Some(_) if torn => incomplete("its record broke off: its last line was cut off"),
        Some(_) if finished => Verdict::Ok { lines: n, last },
        Some(_) if n == 0 => Verdict::Empty,
        Some(_) => incomplete("no run_finished: its record broke off"),
        None if finished && !torn => Verdict::bad(
            None,
            "ends with run_finished, but the index has no closed line for it (the index's last lines taken out?)",
        ),
        None if n == 0 && !torn => Verdict::Empty,
        None => incomplete("no run_finished: killed, or still running"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::chain::Chain;

    /// A record of `n` lines for `id` in `state`, listed and (when `close`) closed in the
    /// index, ending with `run_finished` when `finish`.
    fn record(state: &Path, id: &str, n: u64, finish: bool, close: bool) -> PathBuf {
        std::fs::create_dir_all(state.join("runs")).unwrap();
        let idx = index::path(state);
        index::append(&idx, Entry::Opened { run_id: id.into() }).unwrap();
        let mut chain = Chain::new(&chain::record_genesis(id));
        let mut text = String::new();
        for i in 1..=n {
            let event = if finish && i == n {
                "run_finished"
            } else {
                "log"
            };
            let (seq, prev) = chain.next();
            let line = format!(r#"{{"event":"{event}","seq":{seq},"prev":"{prev}"}}"#);
            chain.push(line.as_bytes());
            text += &(line + "\n");
        }
        let path = state.join("runs").join(format!("{id}.jsonl"));
        std::fs::write(&path, text).unwrap();
        if close {
            let closed = Entry::Closed {
                run_id: id.into(),
                lines: n,
                last: chain.last().into(),
            };
            index::append(&idx, closed).unwrap();
        }
        path
    }

    fn only(state: &Path) -> Verdict {
        let a = verify(state, None).unwrap();
        assert_eq!(a.records.len(), 1, "{a:?}");
        a.records[0].verdict.clone()
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn write(path: &Path, lines: &[String]) {
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }

    #[test]
    fn a_whole_record_is_ok() {
        let dir = tempfile::tempdir().unwrap();
        record(dir.path(), "a", 4, true, true);
        assert!(matches!(only(dir.path()), Verdict::Ok { lines: 4, .. }));
        let a = verify(dir.path(), Some("last")).unwrap();
        assert_eq!(a.index, IndexVerdict::Ok { lines: 2 });
    }

    #[test]
    fn cut_short_edited_at_the_end_or_grown_after_closing() {
        let dir = tempfile::tempdir().unwrap();
        let p = record(dir.path(), "a", 5, true, true);
        let all = lines(&p);
        write(&p, &all[..3]);
        assert_eq!(
            only(dir.path()),
            Verdict::bad(4, "truncated after line 3 (the index says 5 lines)")
        );
        let mut edited = all.clone();
        edited[4] = edited[4].replace("run_finished", "run_finishee");
        write(&p, &edited);
        assert_eq!(
            only(dir.path()),
            Verdict::bad(
                5,
                "line 5: edited (its hash does not match the index's last hash)"
            )
        );
        let mut more = all.clone();
        more.push(all[4].clone());
        write(&p, &more);
        assert!(matches!(
            only(dir.path()),
            Verdict::Bad { line: Some(6), .. }
        ));
    }

    #[test]
    fn a_killed_run_is_incomplete_and_a_deleted_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = record(dir.path(), "a", 3, false, false);
        assert!(matches!(
            only(dir.path()),
            Verdict::Incomplete { lines: 3, why, .. } if why.contains("killed")
        ));
        std::fs::remove_file(&p).unwrap();
        assert_eq!(
            only(dir.path()),
            Verdict::bad(None, "record deleted (the index lists it)")
        );
    }

    #[test]
    fn records_before_chaining_are_unchained_unless_the_index_lists_them() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("runs")).unwrap();
        let old = dir.path().join("runs/old.jsonl");
        std::fs::write(&old, "{\"event\":\"run_started\"}\n").unwrap();
        let a = verify(dir.path(), None).unwrap();
        assert_eq!(a.records[0].verdict, Verdict::Unchained);
        assert_eq!(a.index, IndexVerdict::None);
        // The same record once the index lists its run: its links were taken out.
        index::append(
            &index::path(dir.path()),
            Entry::Opened {
                run_id: "old".into(),
            },
        )
        .unwrap();
        assert!(only(dir.path()).failed());
    }

    #[test]
    fn a_record_renamed_to_another_run_breaks_at_line_one() {
        let dir = tempfile::tempdir().unwrap();
        let a = record(dir.path(), "a", 2, true, true);
        let b = record(dir.path(), "b", 2, true, true);
        std::fs::copy(&a, &b).unwrap();
        let found = verify(dir.path(), Some("b")).unwrap();
        assert!(
            matches!(&found.records[0].verdict, Verdict::Bad { line: Some(1), what } if what.contains("another run's")),
            "{found:?}"
        );
    }

    #[test]
    fn no_index_with_chained_records_is_bad() {
        let dir = tempfile::tempdir().unwrap();
        record(dir.path(), "a", 2, true, true);
        std::fs::remove_file(index::path(dir.path())).unwrap();
        let a = verify(dir.path(), None).unwrap();
        assert!(a.records[0].verdict.failed());
        assert!(matches!(a.index, IndexVerdict::Bad(_)));
        assert!(matches!(
            verify(dir.path(), Some("zzz")),
            Err(Error::NoSuchRun(_))
        ));
    }
}
