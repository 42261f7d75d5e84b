//! Git on the target: what is checked out (`head`), what differs from it (`status`), and
//! putting tracked files back to a known-good commit (`restore`). Every command is
//! `git -C REPO …` run on the target itself, so it works the same over SSH and inside a
//! container; paths always come after `--`, and `--literal-pathspecs` keeps names with
//! `*` or `:` literal.

use super::{Cmd, Error, Ran, Result, Step};
use crate::targets::failure::TAIL_LINES;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What `git.head` returns.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Head {
    pub rev: String,
    pub short: String,
    /// `None` on a detached HEAD.
    pub branch: Option<String>,
    pub subject: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub planned: bool,
}

/// One line of `git status --porcelain=v1`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StatusEntry {
    /// Relative to the repository's top level.
    pub path: String,
    /// The two-letter `XY` code: `" M"`, `"M "`, `"A "`, `"??"`, `"R "`, …
    pub status: String,
    /// The old path of a rename or copy.
    pub from: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Status {
    pub clean: bool,
    pub files: Vec<StatusEntry>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub planned: bool,
}

/// What `git.restore` is asked to do.
#[derive(Debug, Clone)]
pub struct RestoreSpec {
    pub repo: String,
    /// `None`: every tracked file under `repo`.
    pub paths: Option<Vec<String>>,
    pub rev: String,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Restored {
    /// The full commit id `rev` named.
    pub rev: String,
    /// The paths (relative to `repo`) that differed from `rev` and were put back.
    pub files: Vec<String>,
    pub changed: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub planned: bool,
}

/// `git -C REPO ARGS…`
fn git<I, S>(repo: &str, args: I) -> Cmd
where
    I: IntoIterator<Item = S>,
    S: Into<std::ffi::OsString>,
{
    let mut argv: Vec<std::ffi::OsString> = vec!["git".into(), "-C".into(), repo.into()];
    argv.extend(args.into_iter().map(Into::into));
    Cmd::new(argv)
}

/// A failed git command's message: `WHAT failed (WHY) on TARGET` and git's last lines.
fn git_error(step: &Step<'_>, ran: &Ran, what: impl std::fmt::Display) -> Error {
    step.fail(ran.failure(what, Some(&step.target.name()), None))
}

/// `needs git on TARGET` where the shell found no git (exit 127). Every git primitive
/// reads before it changes anything, so this comes before any change.
fn missing_git(step: &Step<'_>, what: &str, ran: &Ran) -> Option<Error> {
    ran.outcome().filter(|o| o.code == Some(127)).map(|_| {
        step.fail(format!(
            "{what}: {}",
            super::needs(
                "git",
                &step.target.name(),
                "git.* runs git -C REPO there; install git in it"
            )
        ))
    })
}

/// Splits `-z` output into its NUL-terminated fields.
fn split_z(out: &[u8]) -> Vec<String> {
    out.split(|b| *b == 0)
        .filter(|f| !f.is_empty())
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect()
}

fn check_repo(step: &Step<'_>, what: &str, repo: &str) -> Result<()> {
    if repo.is_empty() {
        return Err(step.fail(format!("{what}: repo is empty")));
    }
    Ok(())
}

/// The commit at HEAD of `repo` (two reads).
pub async fn head(step: &Step<'_>, repo: &str) -> Result<Head> {
    check_repo(step, "git.head", repo)?;
    let cmd = git(
        repo,
        ["show", "-s", "--format=%H%x00%h%x00%s", "HEAD", "--"],
    );
    let Some(show) = read_or_fail(
        step,
        cmd,
        repo,
        format!("git HEAD of {repo}"),
        "git.head: reading HEAD of",
    )
    .await?
    else {
        return Ok(Head {
            planned: true,
            ..Head::default()
        });
    };
    let text = show.stdout();
    let mut parts = text.trim_end_matches('\n').splitn(3, '\0');
    let rev = parts.next().unwrap_or_default().to_string();
    let short = parts.next().unwrap_or_default().to_string();
    let subject = parts.next().unwrap_or_default().to_string();
    let branch = step
        .read(
            git(repo, ["symbolic-ref", "-q", "--short", "HEAD"]),
            format!("git branch of {repo}"),
        )
        .await?;
    let branch = match branch.outcome().and_then(|o| o.code) {
        Some(0) => Some(branch.stdout().trim().to_string()).filter(|b| !b.is_empty()),
        // 1: HEAD is detached.
        Some(1) => None,
        _ => {
            let what = format!("git.head: reading the branch of {repo}");
            return Err(git_error(step, &branch, what));
        }
    };
    Ok(Head {
        rev,
        short,
        branch,
        subject,
        planned: false,
    })
}

/// A git read: `None` when only planned (offline), an error naming the repo when git
/// fails (`failing` + " REPO failed (…)", then git's message).
async fn read_or_fail(
    step: &Step<'_>,
    cmd: Cmd,
    repo: &str,
    summary: String,
    failing: &str,
) -> Result<Option<Ran>> {
    let ran = step.read(cmd, summary).await?;
    if ran.planned() {
        return Ok(None);
    }
    if let Some(e) = missing_git(step, failing.split(':').next().unwrap_or("git"), &ran) {
        return Err(e);
    }
    if !ran.ok() {
        return Err(git_error(step, &ran, format!("{failing} {repo}")));
    }
    Ok(Some(ran))
}

/// `git status --porcelain=v1 -z`, parsed.
pub async fn status(step: &Step<'_>, repo: &str) -> Result<Status> {
    check_repo(step, "git.status", repo)?;
    let cmd = git(repo, ["status", "--porcelain=v1", "-z"]);
    let Some(ran) = read_or_fail(
        step,
        cmd,
        repo,
        format!("git status of {repo}"),
        "git.status: reading the status of",
    )
    .await?
    else {
        return Ok(Status {
            planned: true,
            ..Status::default()
        });
    };
    let files = parse_porcelain_z(&ran.outcome().map(|o| o.stdout.clone()).unwrap_or_default())
        .map_err(|e| step.fail(format!("git.status: {e}")))?;
    Ok(Status {
        clean: files.is_empty(),
        files,
        planned: false,
    })
}

/// Parses `git status --porcelain=v1 -z`: `XY PATH\0`, and for a rename or copy a second
/// field `ORIG\0` after it. Paths are raw bytes (no quoting with `-z`), so spaces and
/// newlines come through as they are.
pub fn parse_porcelain_z(out: &[u8]) -> Result<Vec<StatusEntry>, String> {
    let mut fields = out.split(|b| *b == 0).peekable();
    let mut entries = Vec::new();
    while let Some(field) = fields.next() {
        if field.is_empty() {
            continue;
        }
        if field.len() < 4 || field[2] != b' ' {
            return Err(format!(
                "unexpected git status output: {:?}",
                String::from_utf8_lossy(field)
            ));
        }
        let status = String::from_utf8_lossy(&field[..2]).into_owned();
        let path = String::from_utf8_lossy(&field[3..]).into_owned();
        let from = if status.contains('R') || status.contains('C') {
            fields
                .next()
                .map(|f| String::from_utf8_lossy(f).into_owned())
        } else {
            None
        };
        entries.push(StatusEntry { path, status, from });
    }
    Ok(entries)
}

/// `path` as a path relative to `repo`, refusing anything that leaves it: an absolute
/// path not under `repo`, or `..` climbing out. Lexical only; git checks the real tree.
pub fn repo_relative(repo: &str, path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Err("a path is empty".into());
    }
    let rel = if path.starts_with('/') {
        if !repo.starts_with('/') {
            return Err(format!(
                "'{path}' is absolute but the repo '{repo}' is not: give paths relative to the repo"
            ));
        }
        let repo_parts =
            normalize(repo).ok_or_else(|| format!("'{repo}' is not a valid repo path"))?;
        let parts =
            normalize(path).ok_or_else(|| format!("'{path}' is outside the repository {repo}"))?;
        if parts.len() < repo_parts.len() || parts[..repo_parts.len()] != repo_parts[..] {
            return Err(format!("'{path}' is outside the repository {repo}"));
        }
        parts[repo_parts.len()..].to_vec()
    } else {
        normalize(path).ok_or_else(|| format!("'{path}' is outside the repository {repo}"))?
    };
    if rel.is_empty() {
        Ok(".".into())
    } else {
        Ok(rel.join("/"))
    }
}

/// The components of a path with `.` dropped and `..` applied; `None` when `..` climbs
/// above the start.
fn normalize(path: &str) -> Option<Vec<&str>> {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(parts)
}

/// A rev is passed as one argument; one that starts with `-` would read as an option.
fn check_rev(rev: &str) -> Result<(), String> {
    if rev.is_empty() {
        return Err("rev is empty".into());
    }
    if rev.starts_with('-') {
        return Err(format!("'{rev}' is not a revision"));
    }
    Ok(())
}

/// "a.py, b.py, c.py" or "a.py, b.py, … (+8 more)".
/// The first files of a batch, each with the lines it differs by from the known-good
/// commit (`train.py (+3 -1)`) when the working tree's diff said.
fn list_preview(files: &[String], stats: &BTreeMap<String, String>) -> String {
    const SHOWN: usize = 5;
    let mut s = files
        .iter()
        .take(SHOWN)
        .map(|f| match stats.get(f).filter(|s| !s.is_empty()) {
            Some(stat) => format!("{f} ({stat})"),
            None => f.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ");
    if files.len() > SHOWN {
        s.push_str(&format!(", … (+{} more)", files.len() - SHOWN));
    }
    s
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// Paths per git command, so one command line stays well under any argv limit.
const BATCH_BYTES: usize = 64 * 1024;

fn batches(files: &[String]) -> Vec<&[String]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, f) in files.iter().enumerate() {
        if i > start && bytes + f.len() + 1 > BATCH_BYTES {
            out.push(&files[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += f.len() + 1;
    }
    if start < files.len() {
        out.push(&files[start..]);
    }
    out
}

/// `--name-only -z` or `--name-status -z` of a diff, by path.
async fn diff(
    step: &Step<'_>,
    spec: &RestoreSpec,
    args: &[&str],
    pathspecs: &[String],
    summary: String,
) -> Result<BTreeMap<String, String>> {
    let mut argv: Vec<String> = [
        "--literal-pathspecs",
        "diff",
        "-z",
        "--no-renames",
        "--relative",
        "--no-ext-diff",
    ]
    .map(String::from)
    .to_vec();
    argv.extend(args.iter().map(|s| s.to_string()));
    argv.push("--".into());
    argv.extend(pathspecs.iter().cloned());
    let ran = step.read(git(&spec.repo, argv), summary).await?;
    if ran.planned() {
        return Ok(BTreeMap::new());
    }
    if !ran.ok() {
        let what = format!("git.restore: comparing {} with {}", spec.repo, spec.rev);
        return Err(git_error(step, &ran, what));
    }
    let fields = split_z(&ran.outcome().map(|o| o.stdout.clone()).unwrap_or_default());
    let mut out = BTreeMap::new();
    if args.contains(&"--numstat") {
        // `ADDED<TAB>DELETED<TAB>PATH` (with --no-renames, never the two-path form); `-`
        // for both counts when git sees the file as binary.
        for record in fields {
            let mut parts = record.splitn(3, '\t');
            if let (Some(added), Some(deleted), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            {
                let stat = if added == "-" {
                    "binary".to_string()
                } else {
                    format!("+{added} -{deleted}")
                };
                out.insert(path.to_string(), stat);
            }
        }
    } else if args.contains(&"--name-status") {
        for pair in fields.chunks(2) {
            if let [status, path] = pair {
                out.insert(path.clone(), status.clone());
            }
        }
    } else {
        for path in fields {
            out.insert(path, String::new());
        }
    }
    Ok(out)
}

/// Puts the tracked files under `paths` (all of `repo` when `None`) back to `rev`, in the
/// index and the working tree. Reads first: which commit `rev` is and which files differ
/// from it (so a dry-run lists them and a no-op changes nothing); then at most three
/// changes: `git checkout REV -- files` for the files `rev` has, `git rm` for files added
/// since `rev` that a commit still holds, and `git rm --cached` (unstage, keep the file)
/// for new files no commit holds. Untracked files are never touched.
pub async fn restore(step: &Step<'_>, spec: &RestoreSpec) -> Result<Restored> {
    check_repo(step, "git.restore", &spec.repo)?;
    check_rev(&spec.rev).map_err(|e| step.fail(format!("git.restore: {e}")))?;
    let pathspecs: Vec<String> = match &spec.paths {
        None => vec![".".into()],
        Some(list) => {
            if list.is_empty() {
                return Err(step.fail(
                    "git.restore: paths is an empty list (leave it out to restore the whole tree)",
                ));
            }
            let mut out = Vec::new();
            for p in list {
                let rel = repo_relative(&spec.repo, p)
                    .map_err(|e| step.fail(format!("git.restore: {e}")))?;
                out.push(rel);
            }
            out
        }
    };
    let verify = step
        .read(
            git(
                &spec.repo,
                [
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    &format!("{}^{{commit}}", spec.rev),
                ],
            ),
            format!("which commit is {} in {}", spec.rev, spec.repo),
        )
        .await?;
    if verify.planned() {
        // --offline: nothing was looked at, so plan the restore as asked.
        let mut argv: Vec<String> = vec![
            "--literal-pathspecs".into(),
            "checkout".into(),
            spec.rev.clone(),
            "--".into(),
        ];
        argv.extend(pathspecs.iter().cloned());
        step.change(
            git(&spec.repo, argv),
            match &spec.paths {
                None => format!(
                    "restore every tracked file in {} to {}",
                    spec.repo, spec.rev
                ),
                Some(_) => format!(
                    "restore {} in {} to {}",
                    list_preview(&pathspecs, &BTreeMap::new()),
                    spec.repo,
                    spec.rev
                ),
            },
            true,
        )
        .await?;
        return Ok(Restored {
            rev: spec.rev.clone(),
            files: Vec::new(),
            changed: true,
            planned: true,
        });
    }
    if let Some(e) = missing_git(step, "git.restore", &verify) {
        return Err(e);
    }
    let sha = verify.stdout().trim().to_string();
    if !verify.ok() || sha.is_empty() {
        let said = crate::targets::failure::tail(&verify.stderr(), TAIL_LINES);
        let hint = if said.is_empty() {
            " (no such commit)".to_string()
        } else {
            format!(":{said}")
        };
        return Err(step.fail(format!(
            "git.restore: '{}' is not a commit in {}{hint}",
            spec.rev, spec.repo
        )));
    }
    let short: String = sha.chars().take(7).collect();
    // Working tree against REV: modified, deleted and added-since tracked files, with the
    // lines each differs by (what the restore undoes), for the summaries a reviewer reads.
    let worktree = diff(
        step,
        spec,
        &["--numstat", &sha],
        &pathspecs,
        format!("files in {} that differ from {short}", spec.repo),
    )
    .await?;
    // Index against REV: staged changes, with A = in the index but not in REV.
    let index = diff(
        step,
        spec,
        &["--cached", "--name-status", &sha],
        &pathspecs,
        format!("staged files in {} that differ from {short}", spec.repo),
    )
    .await?;
    // New in the index against HEAD: files no commit on this branch holds yet.
    let new_files = diff(
        step,
        spec,
        &["--cached", "--name-only", "--diff-filter=A", "HEAD"],
        &pathspecs,
        format!("new staged files in {}", spec.repo),
    )
    .await?;
    let all: BTreeSet<String> = worktree.keys().chain(index.keys()).cloned().collect();
    let files: Vec<String> = all.into_iter().collect();
    if files.is_empty() {
        return Ok(Restored {
            rev: sha,
            files,
            changed: false,
            planned: false,
        });
    }
    let not_in_rev = |f: &String| index.get(f).is_some_and(|s| s.starts_with('A'));
    let mut checkout = Vec::new();
    let mut remove = Vec::new();
    let mut unstage = Vec::new();
    for f in &files {
        if !not_in_rev(f) {
            checkout.push(f.clone());
        } else if new_files.contains_key(f) {
            unstage.push(f.clone());
        } else {
            remove.push(f.clone());
        }
    }
    let mut planned = change_in_batches(
        step,
        spec,
        &["--literal-pathspecs", "checkout", &sha, "--"],
        &checkout,
        &worktree,
        |n| format!("restore {} in {} to {short}", plural(n, "file"), spec.repo),
    )
    .await?;
    planned |= change_in_batches(
        step,
        spec,
        &[
            "--literal-pathspecs",
            "rm",
            "-q",
            "-f",
            "--ignore-unmatch",
            "--",
        ],
        &remove,
        &worktree,
        |n| {
            format!(
                "remove {} that {short} does not have from {}",
                plural(n, "tracked file"),
                spec.repo
            )
        },
    )
    .await?;
    planned |= change_in_batches(
        step,
        spec,
        &[
            "--literal-pathspecs",
            "rm",
            "-q",
            "-f",
            "--cached",
            "--ignore-unmatch",
            "--",
        ],
        &unstage,
        &worktree,
        |n| {
            format!(
                "unstage {} in {} (kept on disk)",
                plural(n, "new file"),
                spec.repo
            )
        },
    )
    .await?;
    Ok(Restored {
        rev: sha,
        files,
        changed: true,
        planned,
    })
}

/// `git ARGS… FILES…` as one change per batch of `files` (see `batches`), each summed up
/// as `what(files in the batch): first files…`; true when any was only planned.
async fn change_in_batches(
    step: &Step<'_>,
    spec: &RestoreSpec,
    args: &[&str],
    files: &[String],
    stats: &BTreeMap<String, String>,
    what: impl Fn(usize) -> String,
) -> Result<bool> {
    let mut planned = false;
    for batch in batches(files) {
        let mut argv: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        argv.extend(batch.iter().cloned());
        let summary = format!("{}: {}", what(batch.len()), list_preview(batch, stats));
        planned |= run_change(step, spec, git(&spec.repo, argv), summary).await?;
    }
    Ok(planned)
}

/// One destructive change; true when it was only planned.
async fn run_change(
    step: &Step<'_>,
    spec: &RestoreSpec,
    cmd: Cmd,
    summary: String,
) -> Result<bool> {
    let ran = step.change(cmd, summary, true).await?;
    if ran.planned() {
        return Ok(true);
    }
    if !ran.ok() {
        let what = format!("git.restore: restoring {} to {}", spec.repo, spec.rev);
        return Err(git_error(step, &ran, what));
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_repo() {
        assert_eq!(repo_relative("/root/dflash", "a/b.py").unwrap(), "a/b.py");
        assert_eq!(
            repo_relative("/root/dflash", "./a/../b.py").unwrap(),
            "b.py"
        );
        assert_eq!(
            repo_relative("/root/dflash/", "/root/dflash/x/y.py").unwrap(),
            "x/y.py"
        );
        assert_eq!(repo_relative("/root/dflash", "/root/dflash").unwrap(), ".");
        assert_eq!(repo_relative("/root/dflash", "sub/..").unwrap(), ".");
        for bad in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "/root/dflash2/x",
            "/root/dflash/../x",
            "",
        ] {
            assert!(repo_relative("/root/dflash", bad).is_err(), "{bad}");
        }
        assert!(repo_relative("dflash", "/root/dflash/x").is_err());
    }

    #[test]
    fn porcelain_z_keeps_odd_names() {
        let out = b" M a b.txt\0?? new\nline\0R  to.txt\0from.txt\0A  c\0";
        let e = parse_porcelain_z(out).unwrap();
        assert_eq!(e.len(), 4);
        assert_eq!(e[0].path, "a b.txt");
        assert_eq!(e[0].status, " M");
        assert_eq!(e[1].path, "new\nline");
        assert_eq!(e[1].status, "??");
        assert_eq!(e[2].path, "to.txt");
        assert_eq!(e[2].from.as_deref(), Some("from.txt"));
        assert_eq!(e[3].path, "c");
        assert!(parse_porcelain_z(b"").unwrap().is_empty());
        assert!(parse_porcelain_z(b"garbage\0").is_err());
    }

    #[test]
    fn previews_and_batches() {
        let files: Vec<String> = (1..=7).map(|i| format!("f{i}")).collect();
        let none = BTreeMap::new();
        assert_eq!(list_preview(&files[..2], &none), "f1, f2");
        assert_eq!(
            list_preview(&files, &none),
            "f1, f2, f3, f4, f5, … (+2 more)"
        );
        let stats = BTreeMap::from([
            ("f1".to_string(), "+3 -1".to_string()),
            ("f2".to_string(), "binary".to_string()),
        ]);
        assert_eq!(
            list_preview(&files[..3], &stats),
            "f1 (+3 -1), f2 (binary), f3"
        );
        assert_eq!(batches(&files).len(), 1);
        let big: Vec<String> = (0..3000).map(|i| format!("{i:040}")).collect();
        let b = batches(&big);
        assert!(b.len() > 1);
        assert_eq!(b.iter().map(|x| x.len()).sum::<usize>(), 3000);
        assert!(batches(&[]).is_empty());
        assert!(check_rev("-x").is_err());
        assert!(check_rev("HEAD~1").is_ok());
    }
}
