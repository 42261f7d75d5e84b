//! Clearing compile caches safely: `cache.clear`, `cache.restore`, `cache.size`.
//!
//! Everything about a path is looked up on the target, as the target's user, by one read
//! command (`PROBE`): the user's home, each path with every symlink followed, what it is,
//! its size, filesystems mounted under it, processes using it, and copies kept beside it.
//! The decision is made here, for every path of the call, before anything changes: one
//! refused path means nothing is deleted. Each deletion is then one change action,
//! `rm -rf -- RESOLVED`, so the dry-run preview shows the exact command.

use super::{human_bytes, thousands, Cmd, Ran, Step};
use crate::events::Event;
use serde::Serialize;

/// Where caches live, besides the runbook header's `cache_roots`. `~` is the home of the
/// user commands run as on the target.
pub const BUILTIN_ROOTS: &[&str] = &["/tmp", "/var/tmp", "~/.cache", "~/.triton"];

/// The suffix of a copy set aside by `keep = true`, before its UTC timestamp.
const KEPT: &str = ".runbook-kept-";

/// Looks at the roots and paths on the target. Arguments: the mode, the number of roots,
/// the roots, the paths. Mode `clear` measures and scans (mounts, processes) only paths
/// strictly inside a root: a refused `/` or `/usr` must not cost a walk of the disk;
/// `restore` measures those; `size` measures every path. Prints tab-separated records
/// (see `parse`) and `end` last, so a cut-off answer shows.
const PROBE: &str = r#"mode=$1; nroots=$2; shift 2
cd / || exit 1 # our own working directory must not count as a process using a path
nl='
'
expand() {
  case $1 in
    '~') printf '%s\n' "$HOME" ;;
    '~/'*) printf '%s/%s\n' "$HOME" "${1#'~/'}" ;;
    *) printf '%s\n' "$1" ;;
  esac
}
canon() { # $1 with every symlink followed; a part that does not exist yet is kept as is
  p=$1 rest=
  while [ ! -e "$p" ] && [ ! -L "$p" ]; do
    rest=/${p##*/}$rest; p=${p%/*}; p=${p:-/}
  done
  r=$(readlink -f "$p" 2>/dev/null) || r=$p
  [ "$r" = / ] && r=
  r=$r$rest
  printf '%s\n' "${r:-/}"
}
links() { # "DIR<tab>TARGET" for the cwd and every open file of every process
  if find /proc/self/cwd -maxdepth 0 -printf '' 2>/dev/null; then
    find /proc/[0-9]*/cwd /proc/[0-9]*/fd -maxdepth 1 -type l -printf '%h\t%l\n' 2>/dev/null
  else # no GNU find: one readlink per link, slower
    for l in /proc/[0-9]*/cwd /proc/[0-9]*/fd/*; do
      printf '%s\t%s\n' "${l%/*}" "$(readlink "$l" 2>/dev/null)"
    done
  fi
}
holders() { # pids of the processes with an open file, a mapped file or their cwd under $1
  if [ -d /proc/self/fd ]; then
    { links | D=$1 awk -F'\t' 'BEGIN { d = ENVIRON["D"] }
        $2 == d || index($2, d "/") == 1 { split($1, a, "/"); print a[3] }'
      grep -sHF -- " $1/" /proc/[0-9]*/maps | sed -n 's|^/proc/\([0-9]*\)/maps:.*|\1|p'
    } | sort -un
  elif command -v lsof >/dev/null 2>&1; then
    lsof -t +D "$1" 2>/dev/null
  fi
}
printf 'home\t%s\t%s\n' "$HOME" "$(canon "${HOME:-/nonexistent}")"
roots= i=0
while [ "$i" -lt "$nroots" ]; do
  i=$((i + 1)); e=$(expand "$1"); shift
  r=$(canon "$e"); roots=$roots$r$nl
  printf 'root\t%s\t%s\t%s\n' "$i" "$e" "$r"
done
inside() { # whether $1 is strictly inside a root (the Rust side decides; this bounds work)
  set -f; IFS=$nl; found=1
  for root in $roots; do
    case $root in /) continue ;; esac # never a usable root
    case $1 in "$root"/?*) found=0 ;; esac
  done
  set +f; unset IFS
  return $found
}
i=0
for p in "$@"; do
  i=$((i + 1)); e=$(expand "$p"); r=$(canon "$e")
  if [ -L "$e" ]; then kind=link; elif [ -d "$e" ]; then kind=dir
  elif [ -e "$e" ]; then kind=file; else kind=absent; fi
  bytes=0 files=0 empty=0 look=
  if [ -e "$r" ] && { [ "$mode" = size ] || inside "$r"; }; then look=1; fi
  if [ -n "$look" ]; then
    bytes=$(du -sb "$r" 2>/dev/null | cut -f1) # apparent size (GNU); else disk usage
    if [ -z "$bytes" ]; then kib=$(du -sk "$r" 2>/dev/null | cut -f1); bytes=$((${kib:-0} * 1024)); fi
    files=$(find "$r" ! -type d 2>/dev/null | wc -l)
    if [ -d "$r" ] && [ -z "$(ls -A "$r" 2>/dev/null)" ]; then empty=1; fi
  fi
  printf 'path\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$e" "$r" "$kind" "$bytes" "$files" "$empty"
  for k in "$e"'.runbook-kept-'*; do
    if [ -e "$k" ] && [ ! -L "$k" ]; then printf 'kept\t%s\t%s\n' "$i" "$k"; fi
  done
  if [ "$mode" = clear ] && [ -n "$look" ]; then
    D=$r awk 'BEGIN { d = ENVIRON["D"] } $2 == d || index($2, d "/") == 1 { print $2 }' \
      /proc/self/mounts 2>/dev/null | while IFS= read -r m; do printf 'mount\t%s\t%s\n' "$i" "$m"; done
    for pid in $(holders "$r"); do
      [ "$pid" != $$ ] || continue
      cmd=$(tr '\0\t\n' '   ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-200)
      printf 'holder\t%s\t%s\t%s\n' "$i" "$pid" "${cmd:-?}"
    done
  fi
done
echo end"#;

/// Moves `$1` aside to `$1.runbook-kept-<UTC time>` (a name that sorts by time; `.N` is
/// added when one was kept in the same second) and prints the new name. The name is made
/// on the target, so a dry-run plans the same command a real run performs.
const MOVE_ASIDE: &str = r#"ts=$(date -u +%Y%m%dT%H%M%SZ); to=$1.runbook-kept-$ts; n=0
while [ -e "$to" ] || [ -L "$to" ]; do n=$((n + 1)); to=$1.runbook-kept-$ts.$n; done
mv -T -- "$1" "$to" && printf '%s\n' "$to""#;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Kind {
    #[default]
    Absent,
    Dir,
    File,
    Link,
}

/// One path as the probe saw it.
#[derive(Debug, Clone, Default)]
struct Found {
    /// Written with `~` (so it needs a HOME on the target).
    tilde: bool,
    /// With `~` replaced by the home.
    expanded: String,
    /// With every symlink followed.
    resolved: String,
    kind: Kind,
    bytes: u64,
    files: u64,
    empty: bool,
    kept: Vec<String>,
    mounts: Vec<String>,
    /// pid and command line.
    holders: Vec<(u32, String)>,
}

impl Found {
    fn exists(&self) -> bool {
        self.kind != Kind::Absent
    }

    /// `353 MB, 12,345 files`
    fn size(&self) -> String {
        let noun = if self.files == 1 { "file" } else { "files" };
        format!(
            "{}, {} {noun}",
            human_bytes(self.bytes),
            thousands(self.files)
        )
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Root {
    /// As written (`~/.cache`), for messages.
    given: String,
    expanded: String,
    resolved: String,
}

#[derive(Debug, Default)]
struct Probe {
    home: String,
    home_resolved: String,
    roots: Vec<Root>,
    paths: Vec<Found>,
}

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
    pub planned: bool,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct ClearOpts {
    /// Move aside (`P.runbook-kept-<time>`) instead of deleting.
    pub keep: bool,
    /// Clear even while processes use files under the path.
    pub force: bool,
}

/// `cache.clear`: validates every path, then deletes (or moves aside) each one that exists.
pub async fn clear(
    step: &Step<'_>,
    paths: &[String],
    opts: ClearOpts,
) -> mlua::Result<Vec<Cleared>> {
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
            planned: step.dry_run(),
        };
        if f.exists() {
            result.kept_as = if opts.keep {
                move_aside(step, &f.resolved, &f.size()).await?
            } else {
                delete(step, f).await?;
                None
            };
        }
        out.push(result);
    }
    Ok(out)
}

/// `cache.restore`: puts the newest kept copy of each path back.
pub async fn restore(
    step: &Step<'_>,
    paths: &[String],
    force: bool,
) -> mlua::Result<Vec<Restored>> {
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
            log(step, "info", message);
            out.push(Restored {
                path: given.clone(),
                restored_from: None,
                changed: false,
                planned: step.dry_run(),
            });
            continue;
        };
        if f.exists() {
            if f.kind == Kind::Dir && f.empty {
                let cmd = Cmd::new(["rmdir", "--", f.resolved.as_str()]);
                let ran = step
                    .change(cmd, format!("remove the empty {}", f.resolved), false)
                    .await?;
                check(step, &ran, "rmdir")?;
            } else {
                delete(step, f).await?;
            }
        }
        let cmd = Cmd::new(["mv", "-T", "--", kept.as_str(), f.resolved.as_str()]);
        let ran = step
            .change(cmd, format!("restore {} from {kept}", f.resolved), false)
            .await?;
        check(step, &ran, "mv")?;
        out.push(Restored {
            path: given.clone(),
            restored_from: Some(kept.clone()),
            changed: true,
            planned: step.dry_run(),
        });
    }
    Ok(out)
}

/// `cache.size`: how big each path is (a read; nothing is refused but relative paths).
pub async fn size(step: &Step<'_>, paths: &[String]) -> mlua::Result<Vec<Size>> {
    let Some((tidied, probe)) = look(step, paths, "size").await? else {
        return Ok(paths
            .iter()
            .map(|p| Size {
                path: p.clone(),
                resolved: None,
                existed: None,
                bytes: 0,
                files: 0,
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
                planned: false,
            }
        })
        .collect())
}

/// The paths tidied (or why not: the index into `probe.paths` for those sent), and what
/// the probe saw; `None` with `--offline`, where the probe is only planned.
type Looked = (Vec<Result<usize, String>>, Probe);

async fn look(step: &Step<'_>, paths: &[String], mode: &str) -> mlua::Result<Option<Looked>> {
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
    let ran = step.read(Cmd::sh(PROBE, args), summary).await?;
    if ran.planned() {
        return Ok(None);
    }
    check(step, &ran, "looking at the paths")?;
    let mut probe = parse(&ran.stdout(), &roots, sent.len())
        .map_err(|e| step.fail(format!("cache: unexpected answer from the target ({e})")))?;
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
async fn plan_offline(
    step: &Step<'_>,
    paths: &[String],
    opts: ClearOpts,
) -> mlua::Result<Vec<Cleared>> {
    let tidied: Vec<Result<String, String>> = paths.iter().map(|p| tidy(p)).collect();
    let refusals: Vec<String> = paths
        .iter()
        .zip(&tidied)
        .filter_map(|(given, t)| t.as_ref().err().map(|rule| format!("{given}: {rule}")))
        .collect();
    refuse(step, "cache.clear", &refusals, "nothing was deleted")?;
    let mut out = Vec::new();
    for (given, t) in paths.iter().zip(tidied) {
        let path = t.expect("refused above");
        let size = "size unknown with --offline";
        if opts.keep {
            move_aside(step, &path, size).await?;
        } else {
            let cmd = Cmd::new(["rm", "-rf", "--", path.as_str()]);
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
            planned: true,
        });
    }
    Ok(out)
}

async fn delete(step: &Step<'_>, f: &Found) -> mlua::Result<()> {
    let cmd = Cmd::new(["rm", "-rf", "--", f.resolved.as_str()]);
    let summary = format!("delete {} ({})", f.resolved, f.size());
    let ran = step.change(cmd, summary, true).await?;
    check(step, &ran, "rm")
}

/// Returns the kept copy's name (`None` in a dry-run, where the name is made at run time).
async fn move_aside(step: &Step<'_>, path: &str, size: &str) -> mlua::Result<Option<String>> {
    let summary = format!("move aside {path} ({size}) → {path}{KEPT}…");
    let ran = step
        .change(Cmd::sh(MOVE_ASIDE, [path]), summary, true)
        .await?;
    check(step, &ran, "mv")?;
    Ok(ran
        .outcome()
        .map(|_| ran.stdout().trim_end_matches('\n').to_string()))
}

/// Fails the step when a command that ran did not succeed, with its last error lines.
fn check(step: &Step<'_>, ran: &Ran, what: &str) -> mlua::Result<()> {
    if ran.ok() {
        return Ok(());
    }
    let stderr = ran.stderr();
    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
    let code = ran.outcome().and_then(|o| o.code).unwrap_or(-1);
    let mut msg = format!(
        "cache: {what} failed on {} (exit code {code})",
        step.target.name()
    );
    for line in tail.iter().rev() {
        msg.push_str("\n  ");
        msg.push_str(line);
    }
    Err(step.fail(msg))
}

/// One error for every refused path, so a call is fixed in one go.
fn refuse(step: &Step<'_>, what: &str, refusals: &[String], nothing: &str) -> mlua::Result<()> {
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

/// Tidies a path as written (`//`, `.`, a trailing `/`) or says why it is never a cache
/// directory. `~` and `~/…` stay: they are expanded on the target.
fn tidy(path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Err("is empty".into());
    }
    if path.chars().any(char::is_control) {
        return Err("contains a control character (tab, newline, …)".into());
    }
    let (prefix, rest) = if path == "~" || path.starts_with("~/") {
        ("~", &path[1..])
    } else if path.starts_with('~') {
        return Err("only ~ and ~/… are expanded (to the home of the target's user)".into());
    } else if path.starts_with('/') {
        ("", path)
    } else {
        return Err("is a relative path: give an absolute path (or ~/…)".into());
    };
    let parts: Vec<&str> = rest
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.contains(&"..") {
        return Err("contains a '..' component".into());
    }
    if parts.is_empty() {
        return Ok(if prefix.is_empty() {
            "/".into()
        } else {
            "~".into()
        });
    }
    Ok(format!("{prefix}/{}", parts.join("/")))
}

/// Whether `p` lies strictly inside directory `dir`.
fn under(p: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    p.len() > dir.len() + 1 && p.starts_with(dir) && p.as_bytes()[dir.len()] == b'/'
}

/// The roots paths may be under. A root that is `/` would allow everything, so it is
/// ignored (and not listed as allowed); `~` roots need a HOME on the target.
fn usable_roots(probe: &Probe) -> Vec<&Root> {
    probe
        .roots
        .iter()
        .filter(|r| r.resolved != "/" && !(r.given.starts_with('~') && probe.home.is_empty()))
        .collect()
}

/// The rule a path breaks, if any: each message names the rule.
fn refusal(probe: &Probe, f: &Found) -> Option<String> {
    let (e, r) = (f.expanded.as_str(), f.resolved.as_str());
    let home = probe.home_resolved.as_str();
    let roots = usable_roots(probe);
    if f.tilde && probe.home.is_empty() {
        return Some("uses ~, but HOME is not set on the target".into());
    }
    if e == "/" || r == "/" {
        return Some("is the root directory /".into());
    }
    if !home.is_empty() && (e == probe.home || r == home) {
        return Some(format!(
            "is the home directory ({home}) of the target's user"
        ));
    }
    if !home.is_empty() && under(home, r) {
        return Some(format!("holds the home directory {home}"));
    }
    if let Some(root) = probe
        .roots
        .iter()
        .find(|root| root.expanded == e || root.resolved == r)
    {
        return Some(format!(
            "is a cache root itself ({}); clear the directories inside it",
            root.given
        ));
    }
    if e.matches('/').count() == 1 || r.matches('/').count() == 1 {
        return Some("is a top-level directory".into());
    }
    let inside = roots.iter().any(|root| under(r, &root.resolved));
    let allowed = || {
        let list: Vec<&str> = roots.iter().map(|r| r.resolved.as_str()).collect();
        format!(
            "cache roots here: {}; a runbook adds more with cache_roots in its header",
            list.join(", ")
        )
    };
    if f.kind == Kind::Link {
        return Some(if inside {
            format!("is a symlink (to {r}): clear {r} itself, so the link is not left dangling")
        } else {
            format!(
                "is a symlink to {r}, which is outside the cache roots ({})",
                allowed()
            )
        });
    }
    if !inside {
        return Some(if e == r {
            format!("is not under a cache root ({})", allowed())
        } else {
            format!(
                "resolves to {r}, which is outside the cache roots ({})",
                allowed()
            )
        });
    }
    if let Some(m) = f.mounts.first() {
        return Some(format!(
            "has a filesystem mounted at {m}; unmount it first (rm would delete its files too)"
        ));
    }
    None
}

/// Processes using files under the path block a clear (a compile in flight) unless forced.
fn in_use(f: &Found, force: bool) -> Option<String> {
    if force || f.holders.is_empty() {
        return None;
    }
    let named: Vec<String> = f
        .holders
        .iter()
        .take(5)
        .map(|(pid, cmd)| format!("pid {pid} ({cmd})"))
        .collect();
    let more = match f.holders.len() {
        n if n > 5 => format!(" and {} more", n - 5),
        _ => String::new(),
    };
    Some(format!(
        "is in use by {}{more}: a process has files open under it (a compile in flight?); wait for it, or pass force = true to clear it anyway",
        named.join(", ")
    ))
}

/// Why the kept copy cannot be put back, if there is one and it cannot.
fn blocks_restore(f: &Found, force: bool) -> Option<String> {
    let occupied = f.exists() && !(f.kind == Kind::Dir && f.empty);
    (!f.kept.is_empty() && occupied && !force).then(|| {
        format!(
            "exists again and is not empty ({}); pass force = true to delete it and put the kept copy back",
            f.size()
        )
    })
}

fn log(step: &Step<'_>, level: &str, message: String) {
    step.ctx.bus.emit(Event::Log {
        step: step.ctx.step.get().map(|s| s.index),
        level: level.into(),
        message,
    });
}

/// The most recently kept copy: names sort by their UTC time, then by the `.N` added
/// within one second (compared as a number, so `.10` comes after `.9`).
fn newest(kept: &[String]) -> Option<&String> {
    kept.iter().max_by_key(|k| {
        let stamp = k.rsplit(KEPT).next().unwrap_or_default();
        let (time, n) = match stamp.split_once('.') {
            Some((t, n)) => (t, n.parse::<u64>().unwrap_or(0)),
            None => (stamp, 0),
        };
        (time.to_string(), n)
    })
}

fn parse(out: &str, roots: &[String], npaths: usize) -> Result<Probe, String> {
    let mut probe = Probe {
        paths: vec![Found::default(); npaths],
        ..Default::default()
    };
    let mut ended = false;
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
            ["root", i, expanded, resolved] => {
                let i = index(i, roots.len())?;
                probe.roots.push(Root {
                    given: roots[i].clone(),
                    expanded: tidy_abs(expanded),
                    resolved: tidy_abs(resolved),
                });
            }
            ["path", i, expanded, resolved, kind, bytes, files, empty] => {
                let p = &mut probe.paths[index(i, npaths)?];
                p.expanded = tidy_abs(expanded);
                p.resolved = tidy_abs(resolved);
                p.kind = match *kind {
                    "dir" => Kind::Dir,
                    "file" => Kind::File,
                    "link" => Kind::Link,
                    "absent" => Kind::Absent,
                    _ => return Err(format!("bad kind in: {line}")),
                };
                p.bytes = num(bytes)?;
                p.files = num(files)?;
                p.empty = *empty == "1";
            }
            ["kept", i, name] => probe.paths[index(i, npaths)?].kept.push(name.to_string()),
            ["mount", i, m] => probe.paths[index(i, npaths)?].mounts.push(m.to_string()),
            ["holder", i, pid, cmd] => {
                let pid = num(pid)? as u32;
                probe.paths[index(i, npaths)?]
                    .holders
                    .push((pid, cmd.trim().to_string()));
            }
            ["end"] => ended = true,
            _ => return Err(format!("unexpected line: {line}")),
        }
    }
    if !ended {
        return Err("the answer was cut off".into());
    }
    Ok(probe)
}

/// `//`, `/./` and a trailing `/` removed from an absolute path the target printed.
fn tidy_abs(p: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn probe_with(found: Found) -> Probe {
        let roots = [
            ("/tmp", "/tmp"),
            ("/var/tmp", "/var/tmp"),
            ("~/.cache", "/root/.cache"),
        ];
        Probe {
            home: "/root".into(),
            home_resolved: "/root".into(),
            roots: roots
                .iter()
                .map(|(g, r)| Root {
                    given: g.to_string(),
                    expanded: r.to_string(),
                    resolved: r.to_string(),
                })
                .collect(),
            paths: vec![found],
        }
    }

    fn dir(e: &str, r: &str) -> Found {
        Found {
            expanded: e.into(),
            resolved: r.into(),
            kind: Kind::Dir,
            ..Default::default()
        }
    }

    fn rule(f: Found) -> String {
        let p = probe_with(f);
        refusal(&p, &p.paths[0]).unwrap_or_default()
    }

    #[test]
    fn tidies_or_refuses_paths_as_written() {
        assert_eq!(tidy("/tmp//x/./y/").unwrap(), "/tmp/x/y");
        assert_eq!(tidy("~").unwrap(), "~");
        assert_eq!(tidy("~/").unwrap(), "~");
        assert_eq!(tidy("~/.cache/x").unwrap(), "~/.cache/x");
        assert_eq!(tidy("///").unwrap(), "/");
        assert!(tidy("tmp/x").unwrap_err().contains("relative"));
        assert!(tidy("./x").unwrap_err().contains("relative"));
        assert!(tidy("/tmp/../etc").unwrap_err().contains("'..'"));
        assert!(tidy("~bob/x").unwrap_err().contains("only ~"));
        assert!(tidy("").unwrap_err().contains("empty"));
        assert!(tidy("/tmp/a\nb").unwrap_err().contains("control"));
    }

    #[test]
    fn each_rule_is_named() {
        assert!(rule(dir("/", "/")).contains("root directory"));
        assert!(rule(dir("/tmp", "/tmp")).contains("cache root itself"));
        assert!(rule(dir("/root/.cache", "/root/.cache")).contains("cache root itself"));
        assert!(rule(dir("/root", "/root")).contains("home directory"));
        assert!(rule(dir("/usr", "/usr")).contains("top-level"));
        assert!(rule(dir("/etc/x", "/etc/x")).contains("not under a cache root"));
        assert!(rule(dir("/tmp/x", "/etc/x")).contains("resolves to /etc/x"));
        let mut link = dir("/tmp/l", "/etc/secret");
        link.kind = Kind::Link;
        assert!(rule(link.clone()).contains("symlink to /etc/secret, which is outside"));
        link.resolved = "/tmp/real".into();
        assert!(rule(link).contains("clear /tmp/real itself"));
        let mut mounted = dir("/tmp/m", "/tmp/m");
        mounted.mounts.push("/tmp/m/sub".into());
        assert!(rule(mounted).contains("mounted at /tmp/m/sub"));
        assert_eq!(
            rule(dir("/tmp/torchinductor_root", "/tmp/torchinductor_root")),
            ""
        );
        assert_eq!(rule(dir("/root/.cache/x", "/root/.cache/x")), "");
    }

    #[test]
    fn a_root_that_is_slash_is_ignored() {
        let mut p = probe_with(dir("/etc/x", "/etc/x"));
        p.roots.push(Root {
            given: "/".into(),
            expanded: "/".into(),
            resolved: "/".into(),
        });
        assert!(refusal(&p, &p.paths[0])
            .unwrap()
            .contains("not under a cache root"));
    }

    #[test]
    fn processes_block_unless_forced() {
        let mut f = dir("/tmp/x", "/tmp/x");
        f.holders.push((42, "sleep 30".into()));
        assert!(in_use(&f, false).unwrap().contains("pid 42 (sleep 30)"));
        assert!(in_use(&f, false).unwrap().contains("force = true"));
        assert!(in_use(&f, true).is_none());
    }

    #[test]
    fn newest_kept_copy_sorts_by_time_then_counter() {
        let kept: Vec<String> = [
            "/tmp/x.runbook-kept-20250101T000000Z",
            "/tmp/x.runbook-kept-20250101T000000Z.10",
            "/tmp/x.runbook-kept-20250101T000000Z.9",
            "/tmp/x.runbook-kept-20240101T000000Z.99",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(newest(&kept).unwrap(), &kept[1]);
    }

    #[test]
    fn parses_the_probe_answer() {
        let out = "home\t/root\t/root\nroot\t1\t/tmp\t/tmp\npath\t1\t/tmp/x\t/tmp/x\tdir\t2048\t 3\t0\nkept\t1\t/tmp/x.runbook-kept-1\nholder\t1\t7\tsleep 30 \nend\n";
        let p = parse(out, &["/tmp".into()], 1).unwrap();
        assert_eq!(p.home, "/root");
        assert_eq!(p.roots[0].given, "/tmp");
        let f = &p.paths[0];
        assert_eq!((f.kind, f.bytes, f.files), (Kind::Dir, 2048, 3));
        assert_eq!(f.holders, vec![(7, "sleep 30".to_string())]);
        assert_eq!(f.size(), "2 KB, 3 files");
        assert!(
            parse("home\t/root\t/root\n", &[], 0).is_err(),
            "no end line"
        );
    }
}
