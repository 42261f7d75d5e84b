//! `kind = "dir"`: `PATH/RUN.jsonl`, one file per run, appended and fsynced batch by
//! batch (a shared NFS directory, say). The file itself says how far it got: before
//! the first batch after opening it, the last whole line is read back and its `seq`
//! taken, and a line cut short by a failed write is cut off; lines at or below that
//! `seq` are not written again. So each event is in the file once, in order, even when
//! a batch is sent again after a failure.

use super::line::{Destination, Line};
use crate::base::project::Dir as Config;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;

pub struct Dir {
    path: PathBuf,
    /// The run whose file is open, the file, and the last `seq` in it.
    open: Option<(String, File, u64)>,
}

impl Dir {
    pub fn new(config: &Config) -> Dir {
        Dir {
            path: config.path.clone(),
            open: None,
        }
    }

    fn write(&mut self, lines: &[Line]) -> std::io::Result<()> {
        let run = &lines[0].run;
        if self.open.as_ref().is_none_or(|(r, _, _)| r != run) {
            self.open = None;
            // Not made when missing: a directory that is not there is most often a
            // share not mounted, and the events would go to the local disk under it.
            if !self.path.is_dir() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such directory (not mounted?)",
                ));
            }
            // Readable by the directory's group too: who reads the store is decided
            // by the directory's owner and permissions.
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .read(true)
                .mode(0o640)
                .open(self.path.join(format!("{run}.jsonl")))?;
            let last = last_seq(&file)?;
            self.open = Some((run.clone(), file, last));
        }
        let Some((_, file, last)) = &mut self.open else {
            unreachable!("opened above")
        };
        let mut text = Vec::new();
        let mut new_last = *last;
        for line in lines.iter().filter(|l| l.seq > *last) {
            text.extend_from_slice(line.text.as_bytes());
            text.push(b'\n');
            new_last = line.seq;
        }
        if !text.is_empty() {
            file.write_all(&text)?;
        }
        file.sync_data()?;
        *last = new_last;
        Ok(())
    }
}

impl Destination for Dir {
    fn deliver(&mut self, lines: &[Line]) -> Result<(), String> {
        if lines.is_empty() {
            return Ok(());
        }
        self.write(lines).map_err(|e| {
            // Opened again, and read back again, before the next try.
            self.open = None;
            format!("{}: {e}", self.path.display())
        })
    }
}

/// The `seq` of the file's last whole line (0 for none); a last line without its line
/// break (a write that failed half way) is cut off first.
fn last_seq(file: &File) -> std::io::Result<u64> {
    let len = file.metadata()?.len();
    let mut window = 64u64 << 10;
    loop {
        let from = len.saturating_sub(window);
        let mut buf = vec![0; (len - from) as usize];
        file.read_exact_at(&mut buf, from)?;
        let whole = match buf.iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            None if from == 0 => 0,
            None => {
                window *= 4;
                continue;
            }
        };
        if whole < buf.len() {
            file.set_len(from + whole as u64)?;
            buf.truncate(whole);
        }
        if whole == 0 {
            return Ok(0);
        }
        let body = &buf[..whole - 1];
        let start = match body.iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            None if from == 0 => 0,
            None => {
                window *= 4;
                continue;
            }
        };
        return Ok(Line::parse(&String::from_utf8_lossy(&body[start..])).map_or(0, |l| l.seq));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64) -> Line {
        Line::parse(&format!(
            r#"{{"id":"r:{seq}","run":"r","seq":{seq},"record":{{"ts":"t","event":"log","level":"info","message":"m"}}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn each_event_once_after_a_batch_sent_again_and_a_torn_line() {
        let store = tempfile::tempdir().unwrap();
        let mut dir = Dir::new(&Config {
            path: store.path().to_path_buf(),
        });
        dir.deliver(&[line(1), line(2)]).unwrap();
        // A write that failed half way, then the same batch again from a new process.
        let file = store.path().join("r.jsonl");
        let mut f = OpenOptions::new().append(true).open(&file).unwrap();
        f.write_all(format!("{}\n", line(3).text).as_bytes())
            .unwrap();
        f.write_all(b"{\"id\":\"r:4\",\"ru").unwrap();
        let mut again = Dir::new(&Config {
            path: store.path().to_path_buf(),
        });
        again.deliver(&[line(3), line(4), line(5)]).unwrap();
        let seqs: Vec<u64> = std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .map(|l| Line::parse(l).unwrap().seq)
            .collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5]);
        let gone = Dir::new(&Config {
            path: store.path().join("not-mounted"),
        })
        .deliver(&[line(1)]);
        assert!(gone.unwrap_err().contains("not mounted"), "");
    }
}
