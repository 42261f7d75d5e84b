//! Clearing compile caches safely: `cache.clear`, `cache.restore`, `cache.size`.
//!
//! Everything about a path is looked up on the target, as the target's user, by one read
//! command (`PROBE`): the user's home, each path with every symlink followed, what it is,
//! its size, filesystems mounted under it, processes using it, and copies kept beside it.
//! The decision is made here, for every path of the call, before anything changes: one
//! refused path means nothing is deleted. Each change (a deletion, a move aside, a
//! restore) is then one action, a script given the cache root and the resolved path as
//! arguments, so the dry-run preview shows the exact command. The probe's answer is never trusted at
//! the moment of the change: the script reaches the path again from its root, one name at
//! a time (`cd -P`, checked with `pwd -P`), acts on it by its own name in the directory
//! that holds it, and does not delete across a mount. A user who owns a directory on the
//! way can swap it for a symlink after the probe; the change then fails, inside the root.
//!
//! Beside this file, which holds the calls and the changes they make: `cache/probe.rs`
//! (the probe's answer, read into what it saw of each path) and `cache/rules.rs` (the
//! rules a path must pass before anything changes, each refusal's message).

mod probe;
mod rules;

use super::{human_bytes, human_size, thousands, Cmd, Ran, Result, Step};
use crate::actions::events::Event;
use crate::base::script;
use probe::{parse, Found, Kept, Kind, Probe, ProbeError};
use rules::{blocks_restore, in_use, refusal, under, usable_roots};
use serde::Serialize;

pub(crate) use rules::tidy;

/// Where caches live, besides the runbook header's `cache_roots`. `~` is the home of the
/// user commands run as on the target.
pub const BUILTIN_ROOTS: &[&str] = &["/tmp", "/var/tmp", "~/.cache", "~/.triton"];

/// The suffix of a copy set aside by `keep = true`, before its UTC timestamp.
const KEPT: &str = ".runbook-kept-";

/// One path's outcome in `cache.clear`.
#[derive(Debug, Clone, Serialize)]
pub struct Cleared {
    pub path: String,
    /// `resolved` and `existed` are unknown (nil) with `--offline`, where nothing is
    /// looked at; `bytes` and `files` are 0 then, so arithmetic on them still works.
    pub resolved: Option<String>,
    pub existed: Option<bool>,
    pub bytes: u64,
    pub files: u64,
    pub changed: bool,
    pub kept_as: Option<String>,
    /// The older kept copies deleted (planned, in a dry-run) so that no more than
    /// `keep_last` remain; empty without `keep`, and with `--offline`.
    pub pruned: Vec<String>,
    /// What deleting them frees (`size_of`'s bytes, like `bytes`).
    pub pruned_bytes: u64,
    pub planned: bool,
}

/// One path's outcome in `cache.restore`.
#[derive(Debug, Clone, Serialize)]
pub struct Restored {
    pub path: String,
    pub restored_from: Option<String>,
    pub changed: bool,
    pub planned: bool,
}

/// One path's size, from `cache.size`.
#[derive(Debug, Clone, Serialize)]
pub struct Size {
    pub path: String,
    /// As in `Cleared`: nil, nil, 0, 0 with `--offline`.
    pub resolved: Option<String>,
    pub existed: Option<bool>,
    pub bytes: u64,
    pub files: u64,
    /// `bytes` and `files` as every preview shows them (`348.6 MiB, 9 files`).
    pub size: String,
    pub planned: bool,
}

#[derive(Debug, Clone, Copy)]
pub struct ClearOpts {
    /// Move aside (`P.runbook-kept-<time>`) instead of deleting.
    pub keep: bool,
    /// With `keep`: how many kept copies of a path remain after the clear, the one just
    /// made included; older ones are deleted. At least 1.
    pub keep_last: usize,
    /// Clear even while processes use files under the path.
    pub force: bool,
}

/// Every clean-reset keeps another copy of caches that are hundreds of MiB: two (this
/// one and the one before) are enough to roll back, and bound the pile.
pub const KEEP_LAST: usize = 2;

impl Default for ClearOpts {
    fn default() -> Self {
        ClearOpts {
            keep: false,
            keep_last: KEEP_LAST,
            force: false,
        }
    }
}

/// `cache.clear`: validates every path, then deletes (or moves aside) each one that exists.
pub async fn clear(step: &Step<'_>, paths: &[String], opts: ClearOpts) -> Result<Vec<Cleared>> {
    let Some((tidied, probe)) = look(step, paths, "clear").await? else {
        return plan_offline(step, paths, opts).await;
    };
    let mut refusals = Vec::new();
    for (given, t) in paths.iter().zip(&tidied) {
        let rule = match t {
            Err(rule) => Some(rule.clone()),
            Ok(i) => {
                refusal(&probe, &probe.paths[*i]).or_else(|| in_use(&probe.paths[*i], opts.force))
            }
        };
        if let Some(rule) = rule {
            refusals.push(format!("{given}: {rule}"));
        }
    }
    refuse(step, "cache.clear", &refusals, "nothing was deleted")?;
    let mut out = Vec::new();
    for (given, t) in paths.iter().zip(&tidied) {
        let f = &probe.paths[*t.as_ref().expect("refused above")];
        let mut result = Cleared {
            path: given.clone(),
            resolved: Some(f.resolved.clone()),
            existed: Some(f.exists()),
            bytes: f.bytes,
            files: f.files,
            changed: f.exists(),
            kept_as: None,
            pruned: Vec::new(),
            pruned_bytes: 0,
            planned: step.dry_run(),
        };
        let root = root_of(&probe, f);
        if f.exists() {
            result.kept_as = if opts.keep {
                move_aside(step, root, &f.resolved, &f.size()).await?
            } else {
                delete(step, root, f).await?;
                None
            };
        }
        if opts.keep {
            let pruned = prune(step, root, f, opts.keep_last).await?;
            result.changed |= !pruned.is_empty();
            result.pruned_bytes = pruned.iter().map(|k| k.bytes).sum();
            result.pruned = pruned.into_iter().map(|k| k.path.clone()).collect();
        }
        out.push(result);
    }
    Ok(out)
}

/// `cache.restore`: puts the newest kept copy of each path back.
pub async fn restore(step: &Step<'_>, paths: &[String], force: bool) -> Result<Vec<Restored>> {
    let Some((tidied, probe)) = look(step, paths, "restore").await? else {
        return Err(step.fail(
            "cache.restore: cannot plan with --offline: which kept copy to restore is only known by looking at the target",
        ));
    };
    let mut refusals = Vec::new();
    for (given, t) in paths.iter().zip(&tidied) {
        let rule = match t {
            Err(rule) => Some(rule.clone()),
            Ok(i) => {
                let f = &probe.paths[*i];
                refusal(&probe, f).or_else(|| blocks_restore(f, force))
            }
        };
        if let Some(rule) = rule {
            refusals.push(format!("{given}: {rule}"));
        }
    }
    refuse(step, "cache.restore", &refusals, "nothing was changed")?;
    let mut out = Vec::new();
    for (given, t) in paths.iter().zip(&tidied) {
        let f = &probe.paths[*t.as_ref().expect("refused above")];
        let Some(kept) = newest(&f.kept) else {
            // Like clearing an absent path: nothing to do. A dry-run may only have planned
            // the `keep = true` that would make one, so it says so.
            let message = if step.dry_run() {
                format!("cache.restore: {given} has no kept copy now (one that an earlier step would keep is restored in a real run)")
            } else {
                format!("cache.restore: {given} has no kept copy: nothing to restore")
            };
            log(step, crate::actions::events::Level::Info, message);
            out.push(Restored {
                path: given.clone(),
                restored_from: None,
                changed: false,
                planned: step.dry_run(),
            });
            continue;
        };
        let root = root_of(&probe, f);
        let empty_dir = f.kind == Kind::Dir && f.empty;
        if f.exists() && !empty_dir {
            delete(step, root, f).await?;
        }
        // restore.sh removes an empty directory in the way itself (only while it is empty).
        let cmd = Cmd::script(
            &script::CACHE_RESTORE,
            [root, f.resolved.as_str(), kept.path.as_str()],
        );
        let what = if f.exists() && empty_dir {
            " (in place of the empty directory there)"
        } else {
            ""
        };
        let summary = format!(
            "restore {} from {} ({}){what}",
            f.resolved,
            kept.path,
            human_size(kept.bytes, kept.files)
        );
        let ran = step.change(cmd, summary, false).await?;
        check(step, &ran, &format!("restoring {}", f.resolved))?;
        out.push(Restored {
            path: given.clone(),
            restored_from: Some(kept.path.clone()),
            changed: true,
            planned: step.dry_run(),
        });
    }
    Ok(out)
}

/// `cache.size`: how big each path is (a read; nothing is refused but relative paths).
pub async fn size(step: &Step<'_>, paths: &[String]) -> Result<Vec<Size>> {
    let Some((tidied, probe)) = look(step, paths, "size").await? else {
        return Ok(paths
            .iter()
            .map(|p| Size {
                path: p.clone(),
                resolved: None,
                existed: None,
                bytes: 0,
                files: 0,
                size: human_size(0, 0),
                planned: true,
            })
            .collect());
    };
    let refusals: Vec<String> = paths
        .iter()
        .zip(&tidied)
        .filter_map(|(given, t)| t.as_ref().err().map(|rule| format!("{given}: {rule}")))
        .collect();
    refuse(step, "cache.size", &refusals, "nothing was measured")?;
    Ok(paths
        .iter()
        .zip(&tidied)
        .map(|(given, t)| {
            let f = &probe.paths[*t.as_ref().expect("refused above")];
            Size {
                path: given.clone(),
                resolved: Some(f.resolved.clone()),
                existed: Some(f.exists()),
                bytes: f.bytes,
                files: f.files,
                size: human_size(f.bytes, f.files),
                planned: false,
            }
        })
        .collect())
}

/// A path resolved and checked as `cache.clear` checks it, for the primitives that act on
/// cache directories with scripts of their own (`artifact.capture`, `artifact.restore`).
#[derive(Debug, Clone)]
pub(crate) struct Located {
    /// The innermost cache root that holds it (what `descend` in `sh/lib.sh` starts from).
    pub root: String,
    pub resolved: String,
    pub exists: bool,
    /// A directory (not a file, nor a symlink: the rules refuse those).
    pub dir: bool,
    pub bytes: u64,
    pub files: u64,
}

impl Located {
    /// `336.6 MiB, 12,345 files`
    pub fn size(&self) -> String {
        human_size(self.bytes, self.files)
    }
}

/// Resolves `paths` on the target (one read, as `cache.clear` does: in a dry-run too)
/// and applies every rule of `cache.clear`, the processes using a path included unless
/// `force`: one refused path fails the call, naming each, before anything changes.
/// `None` with `--offline`, where nothing is looked at.
pub(crate) async fn locate(
    step: &Step<'_>,
    what: &str,
    paths: &[String],
    force: bool,
    nothing: &str,
) -> Result<Option<Vec<Located>>> {
    let Some((tidied, probe)) = look(step, paths, "clear").await? else {
        return Ok(None);
    };
    let mut refusals = Vec::new();
    for (given, t) in paths.iter().zip(&tidied) {
        let rule = match t {
            Err(rule) => Some(rule.clone()),
            Ok(i) => refusal(&probe, &probe.paths[*i]).or_else(|| in_use(&probe.paths[*i], force)),
        };
        if let Some(rule) = rule {
            refusals.push(format!("{given}: {rule}"));
        }
    }
    refuse(step, what, &refusals, nothing)?;
    Ok(Some(
        tidied
            .iter()
            .map(|t| {
                let f = &probe.paths[*t.as_ref().expect("refused above")];
                Located {
                    root: root_of(&probe, f).to_string(),
                    resolved: f.resolved.clone(),
                    exists: f.exists(),
                    dir: f.kind == Kind::Dir,
                    bytes: f.bytes,
                    files: f.files,
                }
            })
            .collect(),
    ))
}

/// With `--offline`, where nothing is resolved: the path as written (tidied) and the
/// innermost root that holds it as written, as `cache.clear` plans offline (an empty
/// root, which the scripts refuse, for a path under none), or the rule it breaks.
pub(crate) fn offline_root(step: &Step<'_>, path: &str) -> Result<(String, String), String> {
    let path = tidy(path)?;
    let roots: Vec<String> = roots(step).iter().filter_map(|r| tidy(r).ok()).collect();
    let root = roots
        .iter()
        .filter(|r| r.as_str() != "/" && under(&path, r))
        .max_by_key(|r| r.len())
        .cloned()
        .unwrap_or_default();
    Ok((root, path))
}

/// The name `keep = true` gives a copy set aside, before its time: artifact.restore's
/// `unpack.sh` keeps the cache it replaces under the same name, so `cache.restore` puts
/// it back.
pub(crate) const KEPT_SUFFIX: &str = KEPT;

/// The paths tidied (or why not: the index into `probe.paths` for those sent), and what
/// the probe saw; `None` with `--offline`, where the probe is only planned.
type Looked = (Vec<Result<usize, String>>, Probe);

async fn look(step: &Step<'_>, paths: &[String], mode: &str) -> Result<Option<Looked>> {
    let mut sent: Vec<String> = Vec::new();
    let tidied: Vec<Result<usize, String>> = paths
        .iter()
        .map(|p| {
            tidy(p).map(|t| {
                sent.push(t);
                sent.len() - 1
            })
        })
        .collect();
    let roots = roots(step);
    let mut args: Vec<String> = vec![mode.into(), roots.len().to_string()];
    args.extend(roots.iter().cloned());
    args.extend(sent.iter().cloned());
    let summary = format!("cache.{mode}: look at {}", sent.join(", "));
    let ran = step
        .read(Cmd::script(&script::CACHE_PROBE, args), summary)
        .await?;
    if ran.planned() {
        return Ok(None);
    }
    check(step, &ran, "looking at the paths")?;
    let mut probe = parse(&ran.stdout(), &roots, &sent).map_err(|e| {
        step.fail(match e {
            ProbeError::Unusable(why) => format!("cache.{mode}: {why}"),
            ProbeError::Bad(e) => format!("cache: unexpected answer from the target ({e})"),
        })
    })?;
    for (found, path) in probe.paths.iter_mut().zip(&sent) {
        found.tilde = path.starts_with('~');
    }
    Ok(Some((tidied, probe)))
}

/// The built-in roots and the runbook header's `cache_roots`.
fn roots(step: &Step<'_>) -> Vec<String> {
    let mut roots: Vec<String> = BUILTIN_ROOTS.iter().map(|r| r.to_string()).collect();
    if let Some(h) = step.ctx.header.borrow().as_ref() {
        roots.extend(h.cache_roots.iter().cloned());
    }
    roots
}

/// With `--offline` nothing is looked at: the changes are planned from the paths as
/// written (sizes unknown); only the rules that need no target are checked.
async fn plan_offline(step: &Step<'_>, paths: &[String], opts: ClearOpts) -> Result<Vec<Cleared>> {
    let tidied: Vec<Result<String, String>> = paths.iter().map(|p| tidy(p)).collect();
    let refusals: Vec<String> = paths
        .iter()
        .zip(&tidied)
        .filter_map(|(given, t)| t.as_ref().err().map(|rule| format!("{given}: {rule}")))
        .collect();
    refuse(step, "cache.clear", &refusals, "nothing was deleted")?;
    // Nothing is resolved offline, so the commands are planned with the path and the
    // innermost root that holds it as written (`~` is expanded by the scripts on the
    // target); a path under no root as written gets an empty root, which the script
    // refuses, as a real run would refuse or resolve it.
    let roots: Vec<String> = roots(step).iter().filter_map(|r| tidy(r).ok()).collect();
    let mut out = Vec::new();
    for (given, t) in paths.iter().zip(tidied) {
        let path = t.expect("refused above");
        let root = roots
            .iter()
            .filter(|r| r.as_str() != "/" && under(&path, r))
            .max_by_key(|r| r.len())
            .map_or("", String::as_str);
        let size = "size unknown with --offline";
        if opts.keep {
            move_aside(step, root, &path, size).await?;
            // Which copies exist is only known by looking; say what a real run adds.
            log(
                step,
                crate::actions::events::Level::Info,
                format!(
                    "cache.clear: {path}: with --offline the kept copies are not looked at; a real run also deletes those beyond the newest {} (keep_last)",
                    opts.keep_last
                ),
            );
        } else {
            let cmd = Cmd::script(&script::CACHE_DELETE, [root, path.as_str()]);
            step.change(cmd, format!("delete {path} ({size})"), true)
                .await?;
        }
        out.push(Cleared {
            path: given.clone(),
            resolved: None,
            existed: None,
            bytes: 0,
            files: 0,
            changed: true,
            kept_as: None,
            pruned: Vec::new(),
            pruned_bytes: 0,
            planned: true,
        });
    }
    Ok(out)
}

/// The innermost usable root that holds the resolved path: the one `delete.sh` and the
/// other changes descend from. `refusal` has made sure there is one.
fn root_of<'p>(probe: &'p Probe, f: &Found) -> &'p str {
    usable_roots(probe)
        .into_iter()
        .filter(|root| under(&f.resolved, &root.resolved))
        .max_by_key(|root| root.resolved.len())
        .map(|root| root.resolved.as_str())
        .expect("a path that passed the rules is inside a root")
}

async fn delete(step: &Step<'_>, root: &str, f: &Found) -> Result<()> {
    let cmd = Cmd::script(&script::CACHE_DELETE, [root, f.resolved.as_str()]);
    let summary = format!("delete {} ({})", f.resolved, f.size());
    let ran = step.change(cmd, summary, true).await?;
    check(step, &ran, &format!("deleting {}", f.resolved))
}

/// Returns the kept copy's name (`None` in a dry-run, where the name is made at run time).
async fn move_aside(step: &Step<'_>, root: &str, path: &str, size: &str) -> Result<Option<String>> {
    let summary = format!("move aside {path} ({size}) → {path}{KEPT}…");
    let ran = step
        .change(
            Cmd::script(&script::CACHE_MOVE_ASIDE, [root, path]),
            summary,
            true,
        )
        .await?;
    check(step, &ran, &format!("moving {path} aside"))?;
    Ok(ran
        .outcome()
        .map(|_| ran.stdout().trim_end_matches('\n').to_string()))
}

/// Deletes the kept copies of `f` beyond the newest `keep_last`, counting the one this
/// clear just set aside (when the path existed), oldest first. The copies are the ones
/// the probe listed, so a dry-run plans exactly the deletions a real run performs, each
/// with its size in the preview and the total in a log line. Each is an ordinary
/// deletion: `delete.sh` from the cache root, which reaches the copy again one name at a
/// time and never crosses a mount, so a copy swapped for a symlink since the probe fails
/// the step instead of deleting elsewhere. A copy made since the probe (another run) is
/// not seen, so never deleted: it is newer than everything pruned.
async fn prune<'f>(
    step: &Step<'_>,
    root: &str,
    f: &'f Found,
    keep_last: usize,
) -> Result<Vec<&'f Kept>> {
    let keep_old = keep_last.saturating_sub(usize::from(f.exists()));
    let mut doomed: Vec<&Kept> = by_age(&f.kept).into_iter().skip(keep_old).collect();
    if doomed.is_empty() {
        return Ok(doomed);
    }
    doomed.reverse();
    let bytes: u64 = doomed.iter().map(|k| k.bytes).sum();
    let files: u64 = doomed.iter().map(|k| k.files).sum();
    let n = doomed.len();
    log(
        step,
        crate::actions::events::Level::Info,
        format!(
            "cache.clear: {}: keeping the newest {keep_last} kept {}; deleting {n} older {} frees {} ({} {})",
            f.resolved,
            if keep_last == 1 { "copy" } else { "copies" },
            if n == 1 { "one" } else { "ones" },
            human_bytes(bytes),
            thousands(files),
            if files == 1 { "file" } else { "files" }
        ),
    );
    for k in &doomed {
        let cmd = Cmd::script(&script::CACHE_DELETE, [root, k.path.as_str()]);
        let summary = format!(
            "delete older kept copy {} ({})",
            k.path,
            human_size(k.bytes, k.files)
        );
        let ran = step.change(cmd, summary, true).await?;
        check(step, &ran, &format!("deleting the kept copy {}", k.path))?;
    }
    Ok(doomed)
}

/// Fails the step when a command that ran did not succeed, with its last error lines.
fn check(step: &Step<'_>, ran: &Ran, what: &str) -> Result<()> {
    if ran.ok() {
        return Ok(());
    }
    let target = step.target.name();
    Err(step.fail(ran.failure(format!("cache: {what}"), Some(&target), None)))
}

/// One error for every refused path, so a call is fixed in one go.
fn refuse(step: &Step<'_>, what: &str, refusals: &[String], nothing: &str) -> Result<()> {
    if refusals.is_empty() {
        return Ok(());
    }
    let mut msg = format!("{what} refused ({nothing}):");
    for r in refusals {
        msg.push_str("\n  ");
        msg.push_str(r);
    }
    Err(step.fail(msg))
}

fn log(step: &Step<'_>, level: crate::actions::events::Level, message: String) {
    step.ctx.bus.emit(Event::Log {
        step: step.ctx.step.get().map(|s| s.index),
        level,
        message,
    });
}

/// The most recently kept copy.
fn newest(kept: &[Kept]) -> Option<&Kept> {
    by_age(kept).into_iter().next()
}

/// Kept copies newest first: names sort by their UTC time, then by the `.N` added within
/// one second (compared as a number, so `.10` comes after `.9`).
fn by_age(kept: &[Kept]) -> Vec<&Kept> {
    let mut sorted: Vec<&Kept> = kept.iter().collect();
    sorted.sort_by_key(|k| {
        let stamp = k.path.rsplit(KEPT).next().unwrap_or_default();
        let (time, n) = match stamp.split_once('.') {
            Some((t, n)) => (t, n.parse::<u64>().unwrap_or(0)),
            None => (stamp, 0),
        };
        std::cmp::Reverse((time.to_string(), n))
    });
    sorted
}

#[cfg(test)]
#[path = "sh/tests.rs"]
mod script_tests;

#[cfg(test)]
mod tests;
