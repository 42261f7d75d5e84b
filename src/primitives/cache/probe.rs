//! What the probe (`sh/probe.sh`, run by `look`) saw of the cache roots and of each
//! path, read from its answer: one tab-separated record per fact, every root and path
//! answered exactly once, the answer ended by `end`. Anything else is refused, not
//! guessed at, because every rule and change is decided from what this reads.

use crate::primitives::human_size;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Kind {
    #[default]
    Absent,
    Dir,
    File,
    Link,
}

/// One path as the probe saw it.
#[derive(Debug, Clone, Default)]
pub(super) struct Found {
    /// Written with `~` (so it needs a HOME on the target).
    pub(super) tilde: bool,
    /// With `~` replaced by the home.
    pub(super) expanded: String,
    /// With every symlink followed.
    pub(super) resolved: String,
    pub(super) kind: Kind,
    pub(super) bytes: u64,
    pub(super) files: u64,
    pub(super) empty: bool,
    pub(super) kept: Vec<Kept>,
    pub(super) mounts: Vec<String>,
    /// pid and command line.
    pub(super) holders: Vec<(u32, String)>,
}

impl Found {
    pub(super) fn exists(&self) -> bool {
        self.kind != Kind::Absent
    }

    /// `336.6 MiB, 12,345 files`
    pub(super) fn size(&self) -> String {
        human_size(self.bytes, self.files)
    }
}

/// A copy `keep = true` set aside beside a path, as the probe saw it (sizes measured in
/// the `clear` and `restore` modes only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Kept {
    pub(super) path: String,
    pub(super) bytes: u64,
    pub(super) files: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Root {
    /// As written (`~/.cache`), for messages.
    pub(super) given: String,
    pub(super) expanded: String,
    pub(super) resolved: String,
}

#[derive(Debug, Default)]
pub(super) struct Probe {
    pub(super) home: String,
    pub(super) home_resolved: String,
    pub(super) roots: Vec<Root>,
    pub(super) paths: Vec<Found>,
}

/// Why the probe's answer cannot be used.
#[derive(Debug)]
pub(super) enum ProbeError {
    /// A root or path leads to a name that cannot be answered safely: refused.
    Unusable(String),
    /// Not what probe.sh writes.
    Bad(String),
}

/// Every malformed answer is `Bad` (so `?` works on the parsers' own messages).
impl From<String> for ProbeError {
    fn from(e: String) -> Self {
        ProbeError::Bad(e)
    }
}

pub(super) fn parse(out: &str, roots: &[String], paths: &[String]) -> Result<Probe, ProbeError> {
    let npaths = paths.len();
    let mut probe = Probe {
        paths: vec![Found::default(); npaths],
        ..Default::default()
    };
    let mut ended = false;
    // Each root and each path is answered once, in its own record: one more would be
    // forged (cache.rs never asks twice), one missing would leave a default behind.
    let mut root_seen = vec![false; roots.len()];
    let mut path_seen = vec![false; npaths];
    let once = |seen: &mut Vec<bool>, i: usize, what: &str| -> Result<(), String> {
        if std::mem::replace(&mut seen[i], true) {
            return Err(format!("{what} {} answered twice", i + 1));
        }
        Ok(())
    };
    for line in out.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let index = |s: &str, len: usize| -> Result<usize, String> {
            match s.parse::<usize>() {
                Ok(i) if (1..=len).contains(&i) => Ok(i - 1),
                _ => Err(format!("bad index in: {line}")),
            }
        };
        let num = |s: &str| {
            s.trim()
                .parse::<u64>()
                .map_err(|_| format!("bad number in: {line}"))
        };
        match f.as_slice() {
            ["home", home, resolved] => {
                probe.home = tidy_abs(home);
                probe.home_resolved = if home.is_empty() {
                    String::new()
                } else {
                    tidy_abs(resolved)
                };
            }
            ["unusable", "home", "0"] => {
                probe.home = String::new();
                probe.home_resolved = String::new();
            }
            ["unusable", "root", i] => {
                let i = index(i, roots.len())?;
                return Err(ProbeError::Unusable(format!(
                    "the cache root {} leads to a name with a tab or a newline in it on the target; refusing to use it",
                    roots[i]
                )));
            }
            ["unusable", "path", i] => {
                let i = index(i, npaths)?;
                return Err(ProbeError::Unusable(format!(
                    "{} leads to a name with a tab or a newline in it on the target (through a symlink?); refusing to touch it",
                    paths[i]
                )));
            }
            ["root", i, expanded, resolved] => {
                let i = index(i, roots.len())?;
                once(&mut root_seen, i, "root")?;
                probe.roots.push(Root {
                    given: roots[i].clone(),
                    expanded: tidy_abs(expanded),
                    resolved: tidy_abs(resolved),
                });
            }
            ["path", i, expanded, resolved, kind, bytes, files, empty] => {
                let i = index(i, npaths)?;
                once(&mut path_seen, i, "path")?;
                let p = &mut probe.paths[i];
                p.expanded = tidy_abs(expanded);
                p.resolved = tidy_abs(resolved);
                p.kind = match *kind {
                    "dir" => Kind::Dir,
                    "file" => Kind::File,
                    "link" => Kind::Link,
                    "absent" => Kind::Absent,
                    _ => return Err(format!("bad kind in: {line}").into()),
                };
                p.bytes = num(bytes)?;
                p.files = num(files)?;
                p.empty = *empty == "1";
            }
            ["kept", i, bytes, files, name] => {
                let kept = Kept {
                    path: name.to_string(),
                    bytes: num(bytes)?,
                    files: num(files)?,
                };
                probe.paths[index(i, npaths)?].kept.push(kept);
            }
            ["mount", i, m] => probe.paths[index(i, npaths)?].mounts.push(unescape(m)),
            ["holder", i, pid, cmd] => {
                let pid = num(pid)? as u32;
                probe.paths[index(i, npaths)?]
                    .holders
                    .push((pid, cmd.trim().to_string()));
            }
            ["end"] => ended = true,
            _ => return Err(format!("unexpected line: {line}").into()),
        }
    }
    if !ended {
        return Err(ProbeError::Bad("the answer was cut off".into()));
    }
    if root_seen.contains(&false) || path_seen.contains(&false) {
        return Err(ProbeError::Bad(
            "a root or a path is missing from the answer".into(),
        ));
    }
    Ok(probe)
}

/// A path as `/proc/self/mounts` writes it, decoded: the kernel writes a space, tab,
/// newline and backslash as `\040`, `\011`, `\012`, `\134` (any `\` and three octal
/// digits up to `\377` is decoded, as `mounts_under` in `sh/lib.sh` does).
pub(super) fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let digit = |j: usize, max: u8| b.get(j).filter(|c| (b'0'..=max).contains(c));
        match (
            b[i],
            digit(i + 1, b'3'),
            digit(i + 2, b'7'),
            digit(i + 3, b'7'),
        ) {
            (b'\\', Some(x), Some(y), Some(z)) => {
                out.push((x - b'0') * 64 + (y - b'0') * 8 + (z - b'0'));
                i += 4;
            }
            (c, ..) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `//`, `/./` and a trailing `/` removed from an absolute path the target printed.
pub(super) fn tidy_abs(p: &str) -> String {
    let parts: Vec<&str> = p
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    if p.is_empty() {
        String::new()
    } else {
        format!("/{}", parts.join("/"))
    }
}
