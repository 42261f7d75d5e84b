//! Files beside a runbook: the one rule for what a runbook may read on this machine
//! (`require`'s modules, `file.put`'s `src`, `file.template`'s templates). A path is
//! relative to the runbook's folder, made of plain names (no `/` at the start, no `.` or
//! `..`), and, links resolved, still inside that folder: a link out of it is refused, so
//! a runbook reads nothing of the machine it runs on but its own folder.

use std::path::{Component, Path, PathBuf};

/// `rel` below the folder `dir`, resolved (links followed), when it names something
/// inside `dir` by the rule above; `None` otherwise (or when it does not exist).
pub fn inside(dir: &Path, rel: &Path) -> Option<PathBuf> {
    let plain = rel.components().next().is_some()
        && rel.components().all(|c| matches!(c, Component::Normal(_)));
    if !plain {
        return None;
    }
    let resolved = std::fs::canonicalize(dir.join(rel)).ok()?;
    let dir = std::fs::canonicalize(dir).ok()?;
    resolved.starts_with(&dir).then_some(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_that_stay_inside() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("rb");
        std::fs::create_dir_all(dir.join("templates")).unwrap();
        std::fs::write(dir.join("templates/a.j2"), "a").unwrap();
        std::fs::write(root.path().join("outside"), "x").unwrap();
        std::os::unix::fs::symlink(root.path().join("outside"), dir.join("out")).unwrap();
        std::os::unix::fs::symlink("templates/a.j2", dir.join("in")).unwrap();
        let ok = |rel: &str| inside(&dir, Path::new(rel)).is_some();
        assert!(ok("templates/a.j2"));
        assert!(ok("in"), "a link that stays inside");
        assert!(!ok("out"), "a link out of the folder");
        assert!(!ok("../outside"));
        assert!(!ok("templates/../templates/a.j2"));
        assert!(!ok("./templates/a.j2"));
        assert!(!ok(&root.path().join("outside").display().to_string()));
        assert!(!ok(""));
        assert!(!ok("missing"));
    }
}
