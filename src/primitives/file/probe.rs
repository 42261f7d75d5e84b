//! What `file-read.sh` found at a path: its answer read back (`key=value` lines, a line
//! `--`, then the file's bytes when they were sent).

/// What is at the path.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    Missing,
    /// A symbolic link: never followed, never replaced.
    Link,
    Dir,
    /// A device, a FIFO, a socket.
    Other,
    File(Stat),
}

/// A regular file as `file-read.sh` saw it.
#[derive(Debug, PartialEq, Eq)]
pub struct Stat {
    /// Its permission bits, as `stat -c %a` prints them (octal).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// Names of its owner and group (`UNKNOWN` where the target's files name none).
    pub user: String,
    pub group: String,
    pub sha256: String,
    /// Its bytes, when it was small enough to be sent.
    pub content: Option<Vec<u8>>,
}

impl Stat {
    /// `0644`: how modes are shown and given.
    pub fn mode_text(&self) -> String {
        format!("{:04o}", self.mode)
    }
}

/// Reads `file-read.sh`'s stdout. The error says what was not as the script writes it,
/// or that the bytes sent are not the ones whose digest came first (the file changed
/// while it was read).
pub fn parse(out: &[u8]) -> Result<Found, String> {
    let (head, body) = match out.windows(4).position(|w| w == b"\n--\n") {
        Some(i) => (&out[..i], &out[i + 4..]),
        None => return Err("its answer has no `--` line".into()),
    };
    let head = std::str::from_utf8(head).map_err(|_| "its answer is not text".to_string())?;
    let field = |key: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
    };
    match field("type") {
        Some("missing") => return Ok(Found::Missing),
        Some("link") => return Ok(Found::Link),
        Some("dir") => return Ok(Found::Dir),
        Some("other") => return Ok(Found::Other),
        Some("file") => {}
        other => return Err(format!("it said type {other:?}")),
    }
    let stat = field("stat").ok_or("it gave no stat= line")?;
    let words: Vec<&str> = stat.split_whitespace().collect();
    let [mode, uid, gid, size, user, group] = words[..] else {
        return Err(format!("its stat= line is {stat:?}"));
    };
    let bad = |what: &str| format!("its stat= line has {what} {stat:?}");
    let sha256 = field("sha256").unwrap_or_default();
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("its sha256= line is {sha256:?}"));
    }
    let size: u64 = size.parse().map_err(|_| bad("a size of"))?;
    let content = match body.is_empty() && size > 0 {
        true => None,
        false => {
            if crate::primitives::store::sha256(body) != sha256 {
                return Err("the file changed while it was read (its bytes are not the ones its sha256 was of); nothing was changed".into());
            }
            Some(body.to_vec())
        }
    };
    Ok(Found::File(Stat {
        mode: u32::from_str_radix(mode, 8).map_err(|_| bad("a mode of"))?,
        uid: uid.parse().map_err(|_| bad("a uid of"))?,
        gid: gid.parse().map_err(|_| bad("a gid of"))?,
        size,
        user: user.to_string(),
        group: group.to_string(),
        sha256: sha256.to_string(),
        content,
    }))
}
