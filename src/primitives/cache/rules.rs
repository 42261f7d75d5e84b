//! The rules a path of `cache.clear`, `cache.restore` and `cache.size` must pass, from
//! the path as written (`tidy`) and from what the probe saw of it (`refusal`, `in_use`,
//! `blocks_restore`). Each returns the message that names the rule broken, so a call's
//! refusals are listed together before anything changes.

use super::probe::{Found, Kind, Probe, Root};

/// Tidies a path as written (`//`, `.`, a trailing `/`) or says why it is never a cache
/// directory. `~` and `~/…` stay: they are expanded on the target.
pub(crate) fn tidy(path: &str) -> Result<String, String> {
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
pub(super) fn under(p: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    p.len() > dir.len() + 1 && p.starts_with(dir) && p.as_bytes()[dir.len()] == b'/'
}

/// The roots paths may be under. A root that is `/` would allow everything, so it is
/// ignored (and not listed as allowed); `~` roots need a HOME on the target.
pub(super) fn usable_roots(probe: &Probe) -> Vec<&Root> {
    probe
        .roots
        .iter()
        .filter(|r| r.resolved != "/" && !(r.given.starts_with('~') && probe.home.is_empty()))
        .collect()
}

/// The rule a path breaks, if any: each message names the rule.
pub(super) fn refusal(probe: &Probe, f: &Found) -> Option<String> {
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
            "has a filesystem mounted at {}; unmount it first (rm would delete its files too)",
            shown(m)
        ));
    }
    None
}

/// Processes using files under the path block a clear (a compile in flight) unless forced.
pub(super) fn in_use(f: &Found, force: bool) -> Option<String> {
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
pub(super) fn blocks_restore(f: &Found, force: bool) -> Option<String> {
    let occupied = f.exists() && !(f.kind == Kind::Dir && f.empty);
    (!f.kept.is_empty() && occupied && !force).then(|| {
        format!(
            "exists again and is not empty ({}); pass force = true to delete it and put the kept copy back",
            f.size()
        )
    })
}

/// A path for a message: control characters (a tab, a newline in a name) as `\t`, `\n`, ….
pub(super) fn shown(p: &str) -> String {
    p.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
