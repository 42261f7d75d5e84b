//! A store that is a directory on this machine (the state dir's `artifacts`, or
//! `store = "/DIR"`). Every file is written by `fsx::write`: a new file with an
//! unpredictable name in the same directory, fsynced, then renamed (an object: linked,
//! never replacing one), so a reader sees a file whole or not at all.

use super::{doomed, sha256, Manifest, Part, ORPHAN_AGE};
use crate::base::fsx;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Local {
    pub dir: PathBuf,
}

impl Local {
    fn object(&self, sha: &str) -> PathBuf {
        Path::new("objects").join(format!("{sha}.tar.gz"))
    }

    /// The store's own directory, made where missing (fsx makes the ones below it).
    fn made(&self) -> Result<(), String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))
    }

    /// Keeps `bytes` as an object; returns its sha256.
    pub fn put_object(&self, bytes: &[u8]) -> Result<String, String> {
        self.made()?;
        let sha = sha256(bytes);
        match fsx::write(
            &self.dir,
            &self.object(&sha),
            bytes,
            fsx::Mode::Private,
            fsx::Replace::No,
            true,
        ) {
            Ok(()) => Ok(sha),
            // The same bytes are there already (content-addressed: checked by `verify`).
            // Its time is renewed, so that a prune running now, which deletes only
            // objects no manifest names that are an hour old, keeps it for the manifest
            // this capture is about to write.
            Err(e) if matches!(e.why, fsx::Why::Exists) => {
                let path = self.dir.join(self.object(&sha));
                let _ = std::fs::File::options()
                    .write(true)
                    .open(&path)
                    .and_then(|f| f.set_modified(std::time::SystemTime::now()));
                Ok(sha)
            }
            Err(e) => Err(e.to_string()),
        }
    }

    pub fn put_manifest(&self, m: &Manifest) -> Result<(), String> {
        self.made()?;
        let text = serde_json::to_vec_pretty(m).map_err(|e| e.to_string())?;
        let rel = Path::new("manifests").join(format!("{}.json", m.id));
        fsx::write(
            &self.dir,
            &rel,
            &text,
            fsx::Mode::Private,
            fsx::Replace::Yes,
            true,
        )
        .map_err(|e| e.to_string())
    }

    /// Every artifact, newest first. A manifest that cannot be read is an error naming
    /// its file: a store is not silently smaller than it is.
    pub fn list(&self) -> Result<Vec<Manifest>, String> {
        let dir = self.dir.join("manifests");
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("{}: {e}", dir.display())),
        };
        let mut out = Vec::new();
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            // fsx's temporary files start with a dot.
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            let text = match std::fs::read(&path) {
                Ok(t) => t,
                // Pruned since the directory was read: not in the store any more.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(format!("{}: {e}", path.display())),
            };
            out.push(super::parse_manifest(&text, &path.display().to_string())?);
        }
        Ok(super::newest_first(out))
    }

    /// An object's bytes, checked against its name: a stored archive that changed by one
    /// byte is refused here, before anything is extracted.
    pub fn read_object(&self, part: &Part) -> Result<Vec<u8>, String> {
        let path = self.dir.join(self.object(&part.sha256));
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        super::checked(bytes, part, &path.display().to_string())
    }

    /// See [`super::Store::prune`].
    pub fn prune(&self, keep: usize) -> Result<Vec<String>, String> {
        let doomed = doomed(&self.list()?, keep);
        for id in &doomed {
            let p = self.dir.join("manifests").join(format!("{id}.json"));
            std::fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        }
        let named = super::named(&self.list()?);
        let objects = self.dir.join("objects");
        if let Ok(entries) = std::fs::read_dir(&objects) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let old = e
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > ORPHAN_AGE);
                if !named.contains(&name) && old && !name.starts_with('.') {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        Ok(doomed)
    }
}
