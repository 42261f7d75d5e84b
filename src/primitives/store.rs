//! The artifact store: where `artifact.capture` keeps packed caches and `artifact.restore`
//! finds them. A directory (by default `<state>/artifacts`, or the `store = DIR` option)
//! with two kinds of file:
//!
//! - `objects/<sha256>.tar.gz`: one packed directory, named by the sha256 of its bytes
//!   (content-addressed: the same cache captured twice is one object);
//! - `manifests/<id>.json`: one artifact ([`Manifest`]): its name, key, paths, sizes,
//!   where and when it was made, and the objects it is made of.
//!
//! Every file is written by `fsx::write`: a new file with an unpredictable name in the
//! same directory, fsynced, then renamed (an object: linked, never replacing one), so a
//! reader sees a file whole or not at all. A manifest is written only after all its
//! objects, so a listed artifact is always complete, and two captures at once write
//! different manifests (their ids hash their times and runs) and, for the same bytes,
//! the same object once. `prune` deletes manifests first and objects that no manifest
//! names only once they are an hour old, so a capture between its objects and its
//! manifest never loses an object.

use crate::fsx;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The key: field → value, from the environment (see `artifact::key_from`).
pub type Key = BTreeMap<String, String>;

/// One captured directory of an artifact.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Part {
    /// The path as the runbook gave it (`~/.triton/cache`): what `restore` is asked for.
    pub path: String,
    /// Where it was on the target it was captured from.
    pub resolved: String,
    /// The object's name: the sha256 of the archive's bytes.
    pub sha256: String,
    /// The archive's size.
    pub archive_bytes: u64,
    /// The regular files in it and their apparent size (`cache.size`'s measure).
    pub bytes: u64,
    pub files: u64,
}

/// One artifact, as `manifests/<id>.json` holds it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub id: String,
    pub name: String,
    pub key: Key,
    pub paths: Vec<String>,
    pub parts: Vec<Part>,
    pub files: u64,
    pub bytes: u64,
    pub archive_bytes: u64,
    /// The target it was captured on (`local`, `ssh://gpu1`, …).
    pub source: String,
    /// Which machine that was (host key, machine id, containers), where it was asked.
    /// Left out when absent, so a manifest written before it seals to the same id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_identity: Option<crate::targets::identity::Identity>,
    pub run_id: Option<String>,
    /// UTC, RFC 3339.
    pub created: String,
    /// Seconds since the epoch, for sorting and ages.
    pub created_unix: u64,
    /// The throughput the run's gate measured, as the runbook passed it to
    /// `artifact.capture { throughput = N }` (null when it passed none).
    pub throughput: Option<f64>,
}

impl Manifest {
    /// The id: the first 16 hex digits of the sha256 of the manifest without it. It
    /// covers the time and the run, so two captures are two artifacts.
    pub fn seal(mut self) -> Manifest {
        self.id = String::new();
        let text = serde_json::to_vec(&self).expect("a manifest serialises");
        self.id = hex(&sha2::Sha256::digest(&text))[..16].to_string();
        self
    }

    /// `2 h ago` (or `just now`).
    pub fn age(&self) -> String {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let s = now.saturating_sub(self.created_unix);
        match s {
            0..60 => "just now".into(),
            60..3600 => format!("{} min ago", s / 60),
            3600..86400 => format!("{} h ago", s / 3600),
            _ => format!("{} days ago", s / 86400),
        }
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256(bytes: &[u8]) -> String {
    hex(&sha2::Sha256::digest(bytes))
}

/// A store directory.
#[derive(Debug, Clone)]
pub struct Store {
    pub dir: PathBuf,
}

/// How old an object no manifest names must be before `prune` deletes it.
const ORPHAN_AGE: Duration = Duration::from_secs(3600);

impl Store {
    /// The store `store = …` names, or the default one in the state dir. Only a local
    /// directory is built: a store over ssh is refused with a clear message.
    pub fn open(given: Option<&str>, state_dir: Option<&Path>) -> Result<Store, String> {
        match given {
            Some(s) if s.starts_with("ssh://") => Err(format!(
                "store = {s:?}: a store over ssh is not built yet; give a local directory"
            )),
            Some(s) if !s.starts_with('/') => Err(format!(
                "store = {s:?}: give an absolute path to a directory"
            )),
            Some(s) => Ok(Store { dir: s.into() }),
            None => state_dir
                .map(|d| Store {
                    dir: d.join("artifacts"),
                })
                .ok_or_else(|| {
                    "the default store is in the state dir, which only a run has; give store = DIR"
                        .into()
                }),
        }
    }

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
            // The same bytes are there already (content-addressed): checked by `verify`.
            Err(e) if matches!(e.why, fsx::Why::Exists) => Ok(sha),
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
            let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let m: Manifest = serde_json::from_slice(&text)
                .map_err(|e| format!("{}: not an artifact manifest: {e}", path.display()))?;
            out.push(m);
        }
        out.sort_by(|a, b| {
            (b.created_unix, &b.created, &b.id).cmp(&(a.created_unix, &a.created, &a.id))
        });
        Ok(out)
    }

    /// The artifact whose id is or starts with `id`.
    pub fn get(&self, id: &str) -> Result<Manifest, String> {
        let all = self.list()?;
        let found: Vec<&Manifest> = all
            .iter()
            .filter(|m| !id.is_empty() && m.id.starts_with(id))
            .collect();
        match found.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(format!(
                "no artifact {id:?} in {} (`runbook artifacts list` lists them)",
                self.dir.display()
            )),
            many => Err(format!(
                "{id:?} is the start of {} artifact ids; give more of it",
                many.len()
            )),
        }
    }

    /// An object's bytes, checked against its name: a stored archive that changed by one
    /// byte is refused here, before anything is extracted.
    pub fn read_object(&self, part: &Part) -> Result<Vec<u8>, String> {
        let path = self.dir.join(self.object(&part.sha256));
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let got = sha256(&bytes);
        if got != part.sha256 {
            return Err(format!(
                "{} is damaged: its sha256 is {got}, the manifest says {}",
                path.display(),
                part.sha256
            ));
        }
        Ok(bytes)
    }

    /// Deletes all but the newest `keep` artifacts of each name and key; returns the
    /// deleted ids. Objects no manifest names any more go too, once an hour old.
    pub fn prune(&self, keep: usize) -> Result<Vec<String>, String> {
        let all = self.list()?;
        let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
        let mut doomed = Vec::new();
        for m in &all {
            let k = (
                m.name.clone(),
                serde_json::to_string(&m.key).unwrap_or_default(),
            );
            let n = seen.entry(k).or_insert(0);
            *n += 1;
            if *n > keep {
                doomed.push(m.id.clone());
            }
        }
        for id in &doomed {
            let p = self.dir.join("manifests").join(format!("{id}.json"));
            std::fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        }
        let named: std::collections::BTreeSet<String> = self
            .list()?
            .iter()
            .flat_map(|m| m.parts.iter().map(|p| format!("{}.tar.gz", p.sha256)))
            .collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(name: &str, t: u64, sha: &str) -> Manifest {
        Manifest {
            id: String::new(),
            name: name.into(),
            key: Key::from([("torch".into(), "2.11.0+cu128".into())]),
            paths: vec!["/tmp/c".into()],
            parts: vec![Part {
                path: "/tmp/c".into(),
                resolved: "/tmp/c".into(),
                sha256: sha.into(),
                archive_bytes: 3,
                bytes: 3,
                files: 1,
            }],
            files: 1,
            bytes: 3,
            archive_bytes: 3,
            source: "local".into(),
            source_identity: None,
            run_id: None,
            created: t.to_string(),
            created_unix: t,
            throughput: None,
        }
        .seal()
    }

    #[test]
    fn objects_are_checked_and_prune_keeps_the_newest_per_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store {
            dir: dir.path().join("s"),
        };
        let sha = store.put_object(b"abc").unwrap();
        assert_eq!(
            store.put_object(b"abc").unwrap(),
            sha,
            "the same bytes, once"
        );
        for t in [1, 2, 3] {
            store.put_manifest(&manifest("a", t, &sha)).unwrap();
        }
        store.put_manifest(&manifest("b", 1, &sha)).unwrap();
        let all = store.list().unwrap();
        assert_eq!(all.len(), 4);
        assert_eq!(all[0].created_unix, 3, "newest first");
        assert_eq!(store.read_object(&all[0].parts[0]).unwrap(), b"abc");
        let removed = store.prune(1).unwrap();
        assert_eq!(removed.len(), 2);
        let names: Vec<(String, u64)> = store
            .list()
            .unwrap()
            .iter()
            .map(|m| (m.name.clone(), m.created_unix))
            .collect();
        assert_eq!(names, vec![("a".into(), 3), ("b".into(), 1)]);
        let obj = dir.path().join("s/objects").join(format!("{sha}.tar.gz"));
        std::fs::write(&obj, b"abd").unwrap();
        let e = store.read_object(&all[0].parts[0]).unwrap_err();
        assert!(e.contains("is damaged"), "{e}");
        assert!(store.get("").is_err());
        assert_eq!(store.get(&all[0].id[..6]).unwrap().id, all[0].id);
    }

    #[test]
    fn only_absolute_local_stores() {
        assert!(Store::open(Some("ssh://h/p"), None)
            .unwrap_err()
            .contains("not built yet"));
        assert!(Store::open(Some("rel"), None)
            .unwrap_err()
            .contains("absolute"));
        assert_eq!(
            Store::open(None, Some(Path::new("/s"))).unwrap().dir,
            PathBuf::from("/s/artifacts")
        );
    }

    /// Writers and a reader at once: eight threads each keep an object and a manifest
    /// while another lists the store over and over. Every listing parses whole (never a
    /// half-written manifest), and every listed artifact's objects are there and whole.
    #[test]
    fn concurrent_writers_and_a_reader_never_see_a_partial_artifact() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store {
            dir: dir.path().join("s"),
        };
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|sc| {
            let reader = sc.spawn(|| {
                let mut looks = 0;
                while !done.load(std::sync::atomic::Ordering::SeqCst) || looks == 0 {
                    for m in store
                        .list()
                        .expect("a listing never meets a partial manifest")
                    {
                        for p in &m.parts {
                            store
                                .read_object(p)
                                .expect("a listed artifact's object is whole");
                        }
                    }
                    looks += 1;
                }
                looks
            });
            let writers: Vec<_> = (0..8u64)
                .map(|i| {
                    let store = &store;
                    sc.spawn(move || {
                        for j in 0..10u64 {
                            let body = vec![(i * 10 + j) as u8; 200_000];
                            let sha = store.put_object(&body).unwrap();
                            store.put_object(&body).unwrap();
                            store
                                .put_manifest(&manifest("c", i * 100 + j, &sha))
                                .unwrap();
                        }
                    })
                })
                .collect();
            for w in writers {
                w.join().unwrap();
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            assert!(reader.join().unwrap() > 0);
        });
        assert_eq!(store.list().unwrap().len(), 80);
        let left: Vec<_> = std::fs::read_dir(store.dir.join("objects"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(left.is_empty(), "no temporary file left: {left:?}");
    }
}
