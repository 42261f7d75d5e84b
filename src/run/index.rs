//! The index of runs, `<state>/run-index.jsonl`: an `opened` line when a run's record is
//! made, before its first event, and a `closed` line when the run ends, with the record's
//! line count and the hash of its last line. The index is chained as records are
//! (`base/chain.rs`, genesis `runbook-index v1`), so a line taken out of it shows.
//!
//! It is what a record cannot say of itself: that it existed (a deleted record), and
//! where it ended (a record cut short, or its last line edited). It lives beside `runs/`,
//! not in it, so that `runs/` holds records only.
//!
//! It also says which run applied each saved plan (`plan_applied`): a plan is spent once
//! applied, and a second `apply` of it (or of a copy, reformatted or not) is refused;
//! unless that run ended without success and without changing anything
//! (`plan_released`).
//!
//! Runs append to it concurrently: each append holds an exclusive lock on the file
//! while it reads the last line and writes its own (one write, O_APPEND, mode 0600).

use crate::base::chain::{self, Chain, Checker};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub fn path(state: &Path) -> PathBuf {
    state.join("run-index.jsonl")
}

/// What an index line says of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Entry {
    /// The record was made; its first event is about to be written.
    Opened { run_id: String },
    /// The run ended (or was ended by the watchdog): its record has `lines` lines, the
    /// last of which hashes to `last` (the genesis's hash when there is none).
    Closed {
        run_id: String,
        lines: u64,
        last: String,
    },
    /// The run is about to apply a saved plan: the plan file's sha256, and the plan's
    /// own id (`Plan::id`, the same for a copy of the file however it is reformatted).
    /// Written before the run's record is made; the plan is spent from then on.
    PlanApplied {
        run_id: String,
        plan: String,
        plan_id: String,
    },
    /// The run that claimed a plan ended without success and without changing anything
    /// (refused, a lock held elsewhere, a failed read, Ctrl-C): the plan is not spent.
    PlanReleased { run_id: String },
}

impl Entry {
    pub fn run_id(&self) -> &str {
        match self {
            Entry::Opened { run_id }
            | Entry::Closed { run_id, .. }
            | Entry::PlanApplied { run_id, .. }
            | Entry::PlanReleased { run_id } => run_id,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Line {
    ts: String,
    #[serde(flatten)]
    entry: Entry,
    seq: u64,
    prev: String,
}

/// Appends `entry` to the index at `path`, chained to its last line.
pub fn append(path: &Path, entry: Entry) -> std::io::Result<()> {
    append_to(&mut open_locked(path)?, entry)
}

/// The run that applied the plan whose file has sha256 `plan` or whose id is `plan_id`,
/// if one did.
pub fn applied_by(path: &Path, plan: &str, plan_id: &str) -> std::io::Result<Option<String>> {
    match File::open(path) {
        Ok(mut f) => find_applied(&mut f, plan, plan_id),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Records that `run_id` applies the plan (`plan`: its file's sha256; `plan_id`: its id),
/// unless a run did already: then that run's id, and nothing is written. The look and
/// the write are under the index's lock, so of two applies of one plan at once, one
/// goes ahead.
pub fn claim_plan(
    path: &Path,
    run_id: &str,
    plan: &str,
    plan_id: &str,
) -> std::io::Result<Option<String>> {
    let mut file = open_locked(path)?;
    if let Some(earlier) = find_applied(&mut file, plan, plan_id)? {
        return Ok(Some(earlier));
    }
    append_to(
        &mut file,
        Entry::PlanApplied {
            run_id: run_id.into(),
            plan: plan.into(),
            plan_id: plan_id.into(),
        },
    )?;
    Ok(None)
}

/// Records that the run `run_id`, which claimed a plan, ended without success and
/// without changing anything: the plan may be applied again.
pub fn release_plan(path: &Path, run_id: &str) -> std::io::Result<()> {
    append(
        path,
        Entry::PlanReleased {
            run_id: run_id.into(),
        },
    )
}

/// The run whose `plan_applied` line names that plan and which did not release it, read
/// from the start of `file`.
fn find_applied(file: &mut File, plan: &str, plan_id: &str) -> std::io::Result<Option<String>> {
    file.seek(SeekFrom::Start(0))?;
    let mut reader = BufReader::new(file);
    let mut buf = Vec::new();
    let (mut claims, mut released) = (Vec::new(), std::collections::HashSet::new());
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        // Only the lines that can be one, parsed: the index has a line per run start and end.
        if !buf.windows(5).any(|w| w == b"plan_") {
            continue;
        }
        match serde_json::from_slice::<Line>(buf.trim_ascii_end()).map(|l| l.entry) {
            Ok(Entry::PlanApplied {
                run_id,
                plan: p,
                plan_id: id,
            }) if p == plan || id == plan_id => claims.push(run_id),
            Ok(Entry::PlanReleased { run_id }) => {
                released.insert(run_id);
            }
            _ => {}
        }
    }
    Ok(claims.into_iter().find(|run| !released.contains(run)))
}

/// The index file, made if missing (0600), under its exclusive lock.
fn open_locked(path: &Path) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    lock(&file)?;
    Ok(file)
}

/// Appends `entry` to `file`, locked, chained to its last line.
fn append_to(file: &mut File, entry: Entry) -> std::io::Result<()> {
    let (chain, torn) = tail(file)?;
    let (seq, prev) = chain.next();
    let line = Line {
        ts: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        entry,
        seq,
        prev,
    };
    let mut bytes = Vec::new();
    // A line cut off while it was written (the disk filled) is ended here, and counts as
    // a line of the chain: `audit verify` names it rather than this one.
    if torn {
        bytes.push(b'\n');
    }
    serde_json::to_writer(&mut bytes, &line)?;
    bytes.push(b'\n');
    file.write_all(&bytes)?;
    file.sync_data()
}

/// Takes the exclusive lock on `file`, held until it is closed: another run's line cannot
/// come between the last line read here and this one. (`File::lock` is newer than the
/// crate's minimum Rust.)
fn lock(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock on a descriptor `file` owns and keeps open for the call.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Where the index's chain stands, read from its end; whether its last line is torn.
fn tail(file: &mut File) -> std::io::Result<(Chain, bool)> {
    const TAIL: u64 = 64 * 1024;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok((Chain::new(chain::INDEX_GENESIS), false));
    }
    let start = len.saturating_sub(TAIL);
    file.seek(SeekFrom::Start(start))?;
    let mut end = Vec::new();
    file.read_to_end(&mut end)?;
    let torn = !end.ends_with(b"\n");
    let body = if torn {
        &end[..]
    } else {
        &end[..end.len() - 1]
    };
    let last = match body.iter().rposition(|&b| b == b'\n') {
        Some(nl) => &body[nl + 1..],
        None if start == 0 => body,
        // One line longer than the tail read: not one this module wrote.
        None => return tail_by_counting(file, torn, body),
    };
    #[derive(Deserialize)]
    struct Seq {
        seq: u64,
    }
    match serde_json::from_slice::<Seq>(last) {
        Ok(Seq { seq }) if !torn => Ok((Chain::after(seq, last), false)),
        _ => tail_by_counting(file, torn, last),
    }
}

/// The chain's place when the last line does not say it (torn or edited): its number.
fn tail_by_counting(file: &mut File, torn: bool, last: &[u8]) -> std::io::Result<(Chain, bool)> {
    file.seek(SeekFrom::Start(0))?;
    let mut newlines = 0u64;
    let mut buf = [0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        newlines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
    }
    let seq = if torn { newlines + 1 } else { newlines };
    Ok((Chain::after(seq, last), torn))
}

/// The index as `audit verify` reads it.
#[derive(Debug, Default)]
pub struct Index {
    /// Every line that is an entry, in order, with its line number (after a break too:
    /// what the rest says is still worth comparing).
    pub entries: Vec<(u64, Entry)>,
    /// The lines that held together.
    pub lines: u64,
    /// Where the chain first broke, or a last line without its newline.
    pub broken: Option<String>,
}

/// Reads the index at `path`; `None` when there is none.
pub fn read(path: &Path) -> std::io::Result<Option<Index>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut reader = BufReader::new(file);
    let mut checker = Checker::new(chain::INDEX_GENESIS);
    let mut read = Index::default();
    let mut buf = Vec::new();
    let mut n = 0u64;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        n += 1;
        let complete = buf.ends_with(b"\n");
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        if let Ok(l) = serde_json::from_slice::<Line>(line) {
            read.entries.push((n, l.entry));
        }
        if read.broken.is_some() {
            continue;
        }
        if !complete {
            read.broken = Some(format!("line {n}: cut off (no newline at its end)"));
        } else if let Err(b) = checker.feed(line) {
            read.broken = Some(match b {
                chain::Break::Unchained => "line 1: edited (it has no seq and prev)".to_string(),
                b => b.to_string(),
            });
        }
    }
    read.lines = checker.chain().lines();
    Ok(Some(read))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opened(id: &str) -> Entry {
        Entry::Opened { run_id: id.into() }
    }

    #[test]
    fn appends_chain_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path());
        append(&p, opened("a")).unwrap();
        append(&p, opened("b")).unwrap();
        let closed = Entry::Closed {
            run_id: "a".into(),
            lines: 3,
            last: "x".into(),
        };
        append(&p, closed.clone()).unwrap();
        let r = read(&p).unwrap().unwrap();
        assert_eq!(r.broken, None);
        assert_eq!(r.lines, 3);
        assert_eq!(
            r.entries,
            vec![(1, opened("a")), (2, opened("b")), (3, closed)]
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(read(&dir.path().join("none")).unwrap().is_none());
    }

    #[test]
    fn a_plan_is_claimed_once_unless_released() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path());
        assert_eq!(applied_by(&p, "sha", "id").unwrap(), None, "no index yet");
        assert_eq!(claim_plan(&p, "r1", "sha", "id").unwrap(), None);
        append(&p, opened("r1")).unwrap();
        // By the file's sha256, or by the plan's id (a reformatted copy).
        assert_eq!(
            claim_plan(&p, "r2", "sha", "other").unwrap().as_deref(),
            Some("r1")
        );
        assert_eq!(applied_by(&p, "copy", "id").unwrap().as_deref(), Some("r1"));
        assert_eq!(applied_by(&p, "x", "y").unwrap(), None, "another plan");
        release_plan(&p, "r1").unwrap();
        assert_eq!(applied_by(&p, "sha", "id").unwrap(), None, "given back");
        assert_eq!(claim_plan(&p, "r3", "copy", "id").unwrap(), None);
        assert_eq!(applied_by(&p, "sha", "id").unwrap().as_deref(), Some("r3"));
        let r = read(&p).unwrap().unwrap();
        assert_eq!(r.broken, None, "the claims are chained as any line");
        assert_eq!(r.lines, 4);
    }

    #[test]
    fn a_line_taken_out_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path());
        for id in ["a", "b", "c"] {
            append(&p, opened(id)).unwrap();
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let kept: Vec<&str> = text
            .lines()
            .enumerate()
            .filter(|(i, _)| *i != 1)
            .map(|(_, l)| l)
            .collect();
        std::fs::write(&p, kept.join("\n") + "\n").unwrap();
        let r = read(&p).unwrap().unwrap();
        assert_eq!(
            r.broken.as_deref(),
            Some("line 2: out of order or dropped (it was written as line 3)")
        );
    }

    #[test]
    fn an_append_after_a_torn_line_ends_it_and_chains_on() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path());
        append(&p, opened("a")).unwrap();
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(br#"{"ts":"x","ev"#).unwrap();
        drop(f);
        append(&p, opened("b")).unwrap();
        let r = read(&p).unwrap().unwrap();
        assert_eq!(
            r.broken.as_deref(),
            Some("line 2: edited (not a JSON object)")
        );
        assert_eq!(r.entries, vec![(1, opened("a")), (3, opened("b"))]);
        let text = std::fs::read_to_string(&p).unwrap();
        let third: serde_json::Value = serde_json::from_str(text.lines().nth(2).unwrap()).unwrap();
        assert_eq!(third["seq"], 3);
        assert_eq!(third["prev"], chain::hash(br#"{"ts":"x","ev"#));
    }
}
