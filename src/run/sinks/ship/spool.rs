//! The spool: each sink's events of a run in a file of their own,
//! `<state>/spool/<sink>/<created>-<run>.jsonl` (`created`: nanoseconds since the epoch,
//! so that names sort as the runs started, which run ids do only to the second),
//! written before they are sent (write-ahead), and beside it `….sent`, how far the
//! sink confirmed. A run's file is locked (`flock`)
//! for as long as its process lives, so the next run can tell a file whose run is over,
//! and take it (lock it) to send what is left, oldest run first; a file is removed once
//! every line of it was confirmed.

use super::line::Line;
use crate::base::project::Sink;
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// At most this much of a spool is read and sent at once: a backlog goes out in batches
/// a receiver takes (rsyslog reads any amount; a webhook's body is held whole).
const BATCH_BYTES: usize = 1 << 20;
const BATCH_LINES: usize = 2000;

/// One sink's directory in the spool.
pub struct SpoolDir {
    pub path: PathBuf,
}

impl SpoolDir {
    /// `<state>/spool/<kind>-<digest of where it ships to>`, made (0700) if missing: a
    /// sink whose address changes starts a directory of its own, so what was meant for
    /// one receiver never goes to another.
    pub fn open(state: &Path, sink: &Sink) -> io::Result<SpoolDir> {
        let digest = Sha256::digest(sink.describe().as_bytes());
        let hex: String = crate::base::hex::hex(&digest[..6]);
        let path = state.join("spool").join(format!("{}-{hex}", sink.kind()));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)?;
        // For whoever looks in the directory: which sink it is.
        let about = path.join("sink");
        if !about.exists() {
            std::fs::write(&about, format!("{}\n", sink.describe()))?;
        }
        Ok(SpoolDir { path })
    }

    /// This run's spool file, new and locked.
    pub fn create(&self, run: &str) -> io::Result<Writer> {
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let path = self.path.join(format!("{created:020}-{run}.jsonl"));
        // Only this user reads it, as the run record (it holds the same events).
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .mode(0o600)
            .open(&path)?;
        if !try_lock(&file) {
            return Err(io::Error::other("locked by another process"));
        }
        Ok(Writer { path, file, end: 0 })
    }

    /// The spool files of other runs than the one of `own`, oldest first.
    pub fn leftovers(&self, own: Option<&Path>) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.path) else {
            return Vec::new();
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .filter(|p| Some(p.as_path()) != own)
            .collect();
        found.sort();
        found
    }
}

/// Appends this run's events to its spool file; holds the file's lock.
pub struct Writer {
    pub path: PathBuf,
    file: File,
    end: u64,
}

impl Writer {
    /// One event's line, in one write; the file's length after it.
    pub fn append(&mut self, text: &str) -> io::Result<u64> {
        let mut line = Vec::with_capacity(text.len() + 1);
        line.extend_from_slice(text.as_bytes());
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.end += line.len() as u64;
        Ok(self.end)
    }
}

/// How far a spool file was confirmed: the last event's `seq` and the offset after it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    pub seq: u64,
    pub offset: u64,
}

/// The next lines to send, and where the cursor goes once they are confirmed.
pub struct Batch {
    pub lines: Vec<Line>,
    pub after: Cursor,
    /// It is as big as a batch may be: more may be waiting.
    pub full: bool,
}

/// Reads a spool file from its cursor and moves the cursor.
pub struct Reader {
    path: PathBuf,
    file: File,
    pub sent: Cursor,
}

impl Reader {
    /// This run's own file (its [`Writer`] holds the lock).
    pub fn own(path: &Path) -> io::Result<Reader> {
        let file = File::open(path)?;
        Ok(Reader {
            path: path.to_path_buf(),
            file,
            sent: Cursor::default(),
        })
    }

    /// An earlier run's file, if no process holds it (its run is over, and no other
    /// run sends it now) and it is still there once locked (another run may have sent
    /// and removed it meanwhile).
    pub fn leftover(path: &Path) -> Option<Reader> {
        let file = File::open(path).ok()?;
        if !try_lock(&file) {
            return None;
        }
        let same = match (file.metadata(), std::fs::metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        if !same {
            return None;
        }
        let sent = std::fs::read_to_string(cursor_path(path))
            .ok()
            .and_then(|t| {
                let (seq, offset) = t.trim().split_once(' ')?;
                Some(Cursor {
                    seq: seq.parse().ok()?,
                    offset: offset.parse().ok()?,
                })
            })
            .unwrap_or_default();
        Some(Reader {
            path: path.to_path_buf(),
            file,
            sent,
        })
    }

    pub fn len(&self) -> u64 {
        self.file.metadata().map(|m| m.len()).unwrap_or(0)
    }

    /// The whole lines after the cursor and before `end`, at most a batch of them. A
    /// line cut short (its run died while writing it) is never sent.
    pub fn next(&self, end: u64) -> io::Result<Batch> {
        let mut buf = Vec::new();
        let mut pos = self.sent.offset;
        while pos < end {
            let want = ((end - pos) as usize).min(256 << 10);
            let mut chunk = vec![0; want];
            let n = self.file.read_at(&mut chunk, pos)?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            pos += n as u64;
            if buf.len() >= BATCH_BYTES && buf.contains(&b'\n') {
                break;
            }
        }
        let mut lines = Vec::new();
        let mut after = self.sent;
        let mut start = 0;
        let mut full = false;
        while let Some(nl) = buf[start..].iter().position(|&b| b == b'\n') {
            let text = String::from_utf8_lossy(&buf[start..start + nl]);
            start += nl + 1;
            after.offset = self.sent.offset + start as u64;
            // A line that is not an event (a damaged file) is passed over, not sent.
            if let Some(line) = Line::parse(&text) {
                after.seq = line.seq;
                lines.push(line);
            }
            if lines.len() >= BATCH_LINES || (start >= BATCH_BYTES && !lines.is_empty()) {
                full = true;
                break;
            }
        }
        Ok(Batch { lines, after, full })
    }

    /// The sink confirmed a batch: the cursor moves past it (a new file renamed over the
    /// old, so it is one or the other after a crash, never half).
    pub fn confirm(&mut self, after: Cursor) -> io::Result<()> {
        let cursor = cursor_path(&self.path);
        let tmp = cursor.with_extension("sent.new");
        std::fs::write(&tmp, format!("{} {}\n", after.seq, after.offset))?;
        std::fs::rename(&tmp, &cursor)?;
        self.sent = after;
        Ok(())
    }

    /// Every line was confirmed: the file goes, then its cursor (a cursor left alone by
    /// a crash between the two is harmless; a file without its cursor would be sent
    /// again from its start).
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(cursor_path(&self.path));
    }
}

fn cursor_path(spool: &Path) -> PathBuf {
    spool.with_extension("sent")
}

/// An exclusive `flock` on `file` without waiting; held until the file is closed.
fn try_lock(file: &File) -> bool {
    // SAFETY: the descriptor is open for the call; flock has no memory effects.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::project::{Dir, Sink};

    fn event(run: &str, seq: u64) -> String {
        format!(
            r#"{{"id":"{run}:{seq}","run":"{run}","seq":{seq},"record":{{"ts":"t","event":"log","level":"info","message":"m"}}}}"#
        )
    }

    #[test]
    fn a_run_over_leaves_what_was_not_confirmed_to_the_next() {
        let state = tempfile::tempdir().unwrap();
        let sink = Sink::Dir(Dir {
            path: "/mnt/audit".into(),
        });
        let dir = SpoolDir::open(state.path(), &sink).unwrap();
        assert!(dir
            .path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("dir-"));
        let mut w = dir.create("r1").unwrap();
        let r1 = w.path.clone();
        assert!(r1.to_str().unwrap().ends_with("-r1.jsonl"));
        let mut end = 0;
        for seq in 1..=3 {
            end = w.append(&event("r1", seq)).unwrap();
        }
        // Its run is alive: locked, not a leftover anyone may take.
        assert_eq!(dir.leftovers(None), vec![r1.clone()]);
        assert!(dir.leftovers(Some(&r1)).is_empty());
        assert!(Reader::leftover(&r1).is_none());
        let mut own = Reader::own(&r1).unwrap();
        let b = own.next(end).unwrap();
        assert_eq!(b.lines.iter().map(|l| l.seq).collect::<Vec<_>>(), [1, 2, 3]);
        let first = own.next(b.lines[0].text.len() as u64 + 1).unwrap();
        assert_eq!(first.after.seq, 1);
        own.confirm(first.after).unwrap();
        // A line its run died writing.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&r1)
            .unwrap()
            .write_all(b"{\"id\":\"r1:4\"")
            .unwrap();
        drop(w);
        let mut left = Reader::leftover(&r1).unwrap();
        assert_eq!(left.sent.seq, 1);
        let b = left.next(left.len()).unwrap();
        assert_eq!(b.lines.iter().map(|l| l.seq).collect::<Vec<_>>(), [2, 3]);
        left.confirm(b.after).unwrap();
        assert!(left.next(left.len()).unwrap().lines.is_empty());
        left.remove();
        assert!(dir.leftovers(None).is_empty());
        assert!(!r1.with_extension("sent").exists());
        // Names sort as the runs started, whatever their ids.
        let (a, b) = (dir.create("z").unwrap(), dir.create("a").unwrap());
        assert_eq!(dir.leftovers(None), vec![a.path.clone(), b.path.clone()]);
    }
}
