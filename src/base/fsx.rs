//! Writing a file of the user's (`init`, `new`, `fmt`) without following a link out of
//! the place it belongs to.
//!
//! A cloned repository can ship `.runbook/types/runbook.lua` as a link to `~/.bashrc`, or
//! a dangling `.luarc.json` whose target lies anywhere: a plain write follows either. So a
//! write here names a trusted directory (the one the user named: `init DIR`, `new --dir`,
//! the directory that holds a file `fmt` formats) and a path below it, and:
//!
//! - walks the path one directory at a time with `O_NOFOLLOW` file descriptors (creating
//!   missing ones with `mkdirat` where asked), so a directory on the way that is a link
//!   is refused, and one swapped for a link mid-way is not followed either;
//! - refuses a destination that is a link (rather than silently replacing the link);
//! - writes a new file with an unpredictable name (`O_CREAT|O_EXCL|O_NOFOLLOW`) in that
//!   directory, fsyncs it and renames it over the destination (or, where nothing may be
//!   overwritten, links it there), so the destination is whole or as it was.
//!
//! Everything goes through the directory's descriptor: nothing is resolved by path twice.

use std::ffi::{CString, OsStr};
use std::io::Write as _;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The permissions a written file gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// 0600, whatever the file had: it may say more than its owner wants shown (a plan
    /// names hosts, paths and commands: `plan -o`).
    Private,
    /// A new file: 0666 less the umask, as any editor makes it. A file replaced keeps its
    /// own permissions.
    Usual,
}

/// Whether an existing destination may be replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replace {
    Yes,
    /// The destination must not exist (`runbook new` never overwrites).
    No,
}

/// Why a file was not written: nothing was (neither it nor a file beside it).
#[derive(Debug)]
pub struct Refused {
    /// The destination, as the user would name it (the trusted directory joined with the
    /// path below it).
    pub path: PathBuf,
    pub why: Why,
}

#[derive(Debug)]
pub enum Why {
    /// The destination, or a directory on the way to it (`at`), is a symbolic link.
    Link {
        at: PathBuf,
        to: Option<PathBuf>,
    },
    /// A directory on the way (`at`) is something else than a directory.
    NotDirectory {
        at: PathBuf,
    },
    /// The destination is there and is not a plain file (a directory, a socket, …).
    NotFile,
    /// The destination is there and `Replace::No` was asked.
    Exists,
    /// The path below the trusted directory is not plain names (`..`, absolute).
    NotBelow,
    Io(std::io::Error),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.path.display();
        let nothing = "nothing was written";
        match &self.why {
            Why::Link { at, to } => {
                let what = if *at == self.path {
                    "is a symbolic link".to_string()
                } else {
                    format!("{} on the way is a symbolic link", at.display())
                };
                let to = to
                    .as_ref()
                    .map(|t| format!(" (to {})", t.display()))
                    .unwrap_or_default();
                write!(
                    f,
                    "{path}: {what}{to}; runbook does not write through a link, {nothing} (replace the link with a plain file or directory)"
                )
            }
            Why::NotDirectory { at } => {
                write!(f, "{path}: {} is not a directory; {nothing}", at.display())
            }
            Why::NotFile => write!(f, "{path}: is not a plain file; {nothing}"),
            Why::Exists => write!(f, "{path}: already exists; {nothing}"),
            Why::NotBelow => write!(
                f,
                "{path}: not a path below the directory it is written in; {nothing}"
            ),
            Why::Io(e) => write!(f, "{path}: {e}; {nothing}"),
        }
    }
}

impl std::error::Error for Refused {}

type Result<T> = std::result::Result<T, Refused>;

/// Writes `bytes` to `root/rel` as the module says: no link followed below `root`
/// (which the user named, and is trusted as it is). `dirs`: create the directories of
/// `rel` that are missing.
pub fn write(
    root: &Path,
    rel: &Path,
    bytes: &[u8],
    mode: Mode,
    replace: Replace,
    dirs: bool,
) -> Result<()> {
    let path = root.join(rel);
    let refuse = |why: Why| Refused {
        path: path.clone(),
        why,
    };
    let (parents, name) = split(rel).ok_or_else(|| refuse(Why::NotBelow))?;
    let dir = match walk(root, &parents, dirs).map_err(&refuse)? {
        Some(d) => d,
        None => {
            return Err(refuse(Why::Io(std::io::Error::from(
                std::io::ErrorKind::NotFound,
            ))))
        }
    };
    let existing = match lstat_at(&dir, &name) {
        Ok(st) => Some(st),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(refuse(Why::Io(e))),
    };
    if let Some(st) = &existing {
        if let Some(why) = refusal_for(st, &path, &dir, &name, replace) {
            return Err(refuse(why));
        }
    }
    let tmp = temp_name(&name);
    let file = open_at(
        &dir,
        &tmp,
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        match mode {
            Mode::Private => 0o600,
            Mode::Usual => 0o666,
        },
    )
    .map_err(|e| refuse(Why::Io(e)))?;
    let mut file = std::fs::File::from(file);
    let keep = match (mode, &existing) {
        (Mode::Private, _) => Some(0o600),
        (Mode::Usual, Some(st)) => Some(st.st_mode & 0o7777),
        (Mode::Usual, None) => None,
    };
    let written = file
        .write_all(bytes)
        .and_then(|()| match keep {
            // SAFETY: fchmod on a descriptor this function owns.
            Some(m) => cvt(unsafe { libc::fchmod(file.as_raw_fd(), m as libc::mode_t) }),
            None => Ok(()),
        })
        .and_then(|()| file.sync_all())
        .and_then(|()| match replace {
            Replace::Yes => rename_at(&dir, &tmp, &name),
            Replace::No => {
                // link() fails if the name is there (even as a dangling link), so the check
                // and the creation are one step; then the temporary name goes.
                let linked = link_at(&dir, &tmp, &name);
                let _ = unlink_at(&dir, &tmp);
                linked
            }
        });
    if let Err(e) = written {
        let _ = unlink_at(&dir, &tmp);
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            return Err(refuse(Why::Exists));
        }
        return Err(refuse(Why::Io(e)));
    }
    // The rename is durable once the directory is; a failure here loses nothing written.
    // SAFETY: fsync on a descriptor this function owns.
    unsafe { libc::fsync(dir.as_raw_fd()) };
    Ok(())
}

/// What `write` would refuse at `root/rel` before writing anything, without creating
/// anything: lets a command that writes several files refuse before the first one.
pub fn check(root: &Path, rel: &Path, replace: Replace) -> Result<()> {
    let path = root.join(rel);
    let refuse = |why: Why| Refused {
        path: path.clone(),
        why,
    };
    let (parents, name) = split(rel).ok_or_else(|| refuse(Why::NotBelow))?;
    let Some(dir) = walk(root, &parents, false).map_err(&refuse)? else {
        // A directory on the way is missing: nothing below it can be a link.
        return Ok(());
    };
    match lstat_at(&dir, &name) {
        Ok(st) => match refusal_for(&st, &path, &dir, &name, replace) {
            Some(why) => Err(refuse(why)),
            None => Ok(()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(refuse(Why::Io(e))),
    }
}

fn refusal_for(
    st: &libc::stat,
    path: &Path,
    dir: &OwnedFd,
    name: &CString,
    replace: Replace,
) -> Option<Why> {
    match st.st_mode & libc::S_IFMT {
        libc::S_IFLNK => Some(Why::Link {
            at: path.to_path_buf(),
            to: read_link_at(dir, name),
        }),
        libc::S_IFREG if replace == Replace::No => Some(Why::Exists),
        libc::S_IFREG => None,
        _ if replace == Replace::No => Some(Why::Exists),
        _ => Some(Why::NotFile),
    }
}

/// The directory names of `rel` and its file name, or `None` when `rel` is not plain
/// names (`..`, absolute, empty).
fn split(rel: &Path) -> Option<(Vec<CString>, CString)> {
    let mut names = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => names.push(cstring(n)?),
            Component::CurDir => {}
            _ => return None,
        }
    }
    let name = names.pop()?;
    Some((names, name))
}

fn cstring(s: &OsStr) -> Option<CString> {
    CString::new(s.as_bytes()).ok()
}

/// Opens `root` (following links: the user named it), then each of `parents` below it
/// without following one. `None` when one is missing and `create` is false.
fn walk(
    root: &Path,
    parents: &[CString],
    create: bool,
) -> std::result::Result<Option<OwnedFd>, Why> {
    let root = if root.as_os_str().is_empty() {
        Path::new(".")
    } else {
        root
    };
    let root_c = cstring(root.as_os_str()).ok_or(Why::NotBelow)?;
    // SAFETY: a plain open of a NUL-terminated path; the descriptor is owned below.
    let fd = unsafe {
        libc::open(
            root_c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(Why::Io(std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let mut dir = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut at = root.to_path_buf();
    for name in parents {
        at.push(OsStr::from_bytes(name.as_bytes()));
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let next = match open_at(&dir, name, flags, 0) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                // SAFETY: mkdirat relative to a descriptor this function owns.
                let made = cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o777) });
                match made {
                    Ok(()) => open_at(&dir, name, flags, 0),
                    // Made by someone else meanwhile: opened as any other, links refused.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        open_at(&dir, name, flags, 0)
                    }
                    Err(e) => Err(e),
                }
            }
            other => other,
        };
        dir = match next {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            // ELOOP (a link, with O_NOFOLLOW) or ENOTDIR: say which from what it is.
            Err(e) => {
                return Err(
                    match lstat_at(&dir, name).map(|st| st.st_mode & libc::S_IFMT) {
                        Ok(libc::S_IFLNK) => Why::Link {
                            to: read_link_at(&dir, name),
                            at,
                        },
                        Ok(libc::S_IFDIR) | Err(_) => Why::Io(e),
                        Ok(_) => Why::NotDirectory { at },
                    },
                )
            }
        };
    }
    Ok(Some(dir))
}

fn cvt(r: libc::c_int) -> std::io::Result<()> {
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn open_at(
    dir: &OwnedFd,
    name: &CString,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> std::io::Result<OwnedFd> {
    // SAFETY: openat relative to an owned descriptor with a NUL-terminated name.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode as libc::c_uint) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn lstat_at(dir: &OwnedFd, name: &CString) -> std::io::Result<libc::stat> {
    // SAFETY: `st` is written whole by fstatat on success and only read then.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        cvt(libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        ))?;
        Ok(st)
    }
}

fn read_link_at(dir: &OwnedFd, name: &CString) -> Option<PathBuf> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: readlinkat writes at most `buf.len()` bytes into `buf`.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    (n >= 0).then(|| {
        buf.truncate(n as usize);
        PathBuf::from(OsStr::from_bytes(&buf))
    })
}

fn rename_at(dir: &OwnedFd, from: &CString, to: &CString) -> std::io::Result<()> {
    // SAFETY: both names are relative to the same owned descriptor.
    cvt(unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) })
}

fn link_at(dir: &OwnedFd, from: &CString, to: &CString) -> std::io::Result<()> {
    // SAFETY: both names are relative to the same owned descriptor; flags 0: the
    // temporary file is linked itself, never a link it might be.
    cvt(unsafe {
        libc::linkat(
            dir.as_raw_fd(),
            from.as_ptr(),
            dir.as_raw_fd(),
            to.as_ptr(),
            0,
        )
    })
}

fn unlink_at(dir: &OwnedFd, name: &CString) -> std::io::Result<()> {
    // SAFETY: unlinkat relative to an owned descriptor.
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) })
}

/// `.NAME.RANDOM.tmp`: hidden, beside the destination, not guessable by someone who
/// would plant a file (or a link) there first; `O_EXCL` refuses one anyway.
fn temp_name(name: &CString) -> CString {
    use std::io::Read as _;
    let mut bytes = [0u8; 12];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        // No /dev/urandom (a chroot without /dev): still unlikely to collide, and O_EXCL
        // makes a collision an error, never a write elsewhere.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let mixed = nanos ^ ((std::process::id() as u128) << 64) ^ (&bytes as *const _ as u128);
        bytes.copy_from_slice(&mixed.to_le_bytes()[..12]);
    }
    let hex: String = crate::base::hex::hex(&bytes);
    let mut out = b".".to_vec();
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(format!(".{hex}.tmp").as_bytes());
    CString::new(out).expect("no NUL: made of a CString and hex")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn writes_and_replaces_whole() {
        let d = tmp();
        let rel = Path::new("a/b/c.txt");
        write(d.path(), rel, b"one", Mode::Usual, Replace::Yes, true).unwrap();
        write(d.path(), rel, b"two", Mode::Usual, Replace::Yes, true).unwrap();
        assert_eq!(std::fs::read(d.path().join(rel)).unwrap(), b"two");
        // Nothing left beside it.
        assert_eq!(std::fs::read_dir(d.path().join("a/b")).unwrap().count(), 1);
    }

    #[test]
    fn a_link_on_the_way_or_at_the_end_is_refused() {
        let d = tmp();
        let outside = tmp();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "mine").unwrap();
        std::os::unix::fs::symlink(&victim, d.path().join("f")).unwrap();
        let e = write(
            d.path(),
            Path::new("f"),
            b"x",
            Mode::Usual,
            Replace::Yes,
            false,
        )
        .unwrap_err();
        assert!(matches!(e.why, Why::Link { .. }), "{e}");
        assert!(e.to_string().contains("nothing was written"), "{e}");
        assert!(check(d.path(), Path::new("f"), Replace::Yes).is_err());
        std::os::unix::fs::symlink(outside.path(), d.path().join("dir")).unwrap();
        let e = write(
            d.path(),
            Path::new("dir/sub/g"),
            b"x",
            Mode::Usual,
            Replace::Yes,
            true,
        )
        .unwrap_err();
        assert!(matches!(e.why, Why::Link { .. }), "{e}");
        assert!(!outside.path().join("sub").exists());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine");
        // A dangling link: its target is not created.
        std::os::unix::fs::symlink(outside.path().join("new"), d.path().join("h")).unwrap();
        for replace in [Replace::Yes, Replace::No] {
            assert!(write(d.path(), Path::new("h"), b"x", Mode::Usual, replace, false).is_err());
        }
        assert!(!outside.path().join("new").exists());
    }

    #[test]
    fn modes_are_private_or_kept() {
        use std::os::unix::fs::PermissionsExt;
        let d = tmp();
        let p = d.path().join("f");
        std::fs::write(&p, "x").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write(
            d.path(),
            Path::new("f"),
            b"y",
            Mode::Usual,
            Replace::Yes,
            false,
        )
        .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&p), 0o640);
        write(
            d.path(),
            Path::new("f"),
            b"z",
            Mode::Private,
            Replace::Yes,
            false,
        )
        .unwrap();
        assert_eq!(mode(&p), 0o600);
        let e = write(
            d.path(),
            Path::new("f"),
            b"w",
            Mode::Usual,
            Replace::No,
            false,
        )
        .unwrap_err();
        assert!(matches!(e.why, Why::Exists), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "z");
    }
}
