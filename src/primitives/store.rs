//! The artifact store: where `artifact.capture` keeps packed caches and `artifact.restore`
//! finds them. A directory with two kinds of file:
//!
//! - `objects/<sha256>.tar.gz`: one packed directory, named by the sha256 of its bytes
//!   (content-addressed: the same cache captured twice is one object);
//! - `manifests/<id>.json`: one artifact ([`Manifest`]): its name, key, paths, sizes,
//!   where and when it was made, and the objects it is made of.
//!
//! The directory is on this machine ([`local`]: by default `<state>/artifacts`, or
//! `store = "/DIR"`) or on a team's file server ([`remote`]: `store = "ssh://HOST/DIR"`,
//! HOST as `target()` takes it: an inventory name, an ssh_config `Host`, `user@host`),
//! reached over runbook's own connection to HOST. Both keep the same promises:
//!
//! - a file gets its name only once whole: it is written under a new, unpredictable
//!   name in the same directory, then renamed; an object is linked, so an object that
//!   is there is never replaced; a reader sees a file whole or not at all;
//! - a manifest is written only after all its objects, so a listed artifact is always
//!   complete; two captures at once write different manifests (their ids hash their
//!   times and runs) and, for the same bytes, the same object once;
//! - an object is checked against its sha256 by the side that restores it, before
//!   anything is extracted ([`checked`]);
//! - `prune` keeps the newest N artifacts of each name and key, deletes manifests first,
//!   and objects no manifest names only once they are an hour old (an object a capture
//!   finds already there gets its time renewed), so a capture between its objects and
//!   its manifest never loses an object.

use crate::primitives::{Error as StepError, Step};
use crate::targets::registry::Registry;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, SystemTime};

pub mod local;
pub mod remote;

pub use local::Local;
pub use remote::Remote;

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
        self.id = crate::base::hex::hex(&sha2::Sha256::digest(&text))[..16].to_string();
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

pub fn sha256(bytes: &[u8]) -> String {
    crate::base::hex::hex(&sha2::Sha256::digest(bytes))
}

/// How old an object no manifest names must be before `prune` deletes it.
const ORPHAN_AGE: Duration = Duration::from_secs(3600);

/// Why a store operation did not complete: a message for the user (the caller says
/// which primitive or command it was), or the step being stopped (Ctrl-C, its timeout)
/// while a command ran on the store's machine.
#[derive(Debug)]
pub enum Fault {
    Msg(String),
    Stop(StepError),
}

impl From<String> for Fault {
    fn from(m: String) -> Self {
        Fault::Msg(m)
    }
}

/// Where artifacts are kept: a directory here, or one on another machine over ssh.
#[derive(Debug)]
pub enum Store {
    Local(Local),
    Remote(Remote),
}

impl Store {
    /// The store `store = …` (or `--store`) names, or the default one in the state dir:
    ///
    /// - `/DIR`: a directory on this machine;
    /// - `ssh://HOST/DIR`: the directory `/DIR` on HOST, HOST resolved by `targets` as
    ///   `target(HOST)` resolves it (an inventory name first, then an ssh_config `Host`,
    ///   or `user@host[:port]`, or a plain host name), so it shares the run's connection
    ///   to HOST.
    ///
    /// Anything else (a relative path, a bare host name, another scheme) is refused with
    /// the spellings above.
    pub fn open(
        given: Option<&str>,
        state_dir: Option<&Path>,
        targets: &Registry,
    ) -> Result<Store, String> {
        let Some(s) = given else {
            return state_dir
                .map(|d| {
                    Store::Local(Local {
                        dir: d.join("artifacts"),
                    })
                })
                .ok_or_else(|| {
                    "the default store is in the state dir, which only a run has; give store = DIR"
                        .into()
                });
        };
        let spellings = "give an absolute directory on this machine (\"/srv/artifacts\") or ssh://HOST/DIR for one on another machine (HOST: an inventory name, an ssh_config Host or user@host[:port]; DIR: absolute there)";
        if let Some(rest) = s.strip_prefix("ssh://") {
            return remote::Remote::open(s, rest, targets, spellings).map(Store::Remote);
        }
        if s.contains("://") {
            return Err(format!(
                "store = {s:?}: only ssh:// reaches a store on another machine; {spellings}"
            ));
        }
        if !s.starts_with('/') {
            // A bare inventory name or ssh_config Host: a host, not a directory (any word
            // could be a plain host name: only a named one is said to be a host).
            let host = !s.contains(['@', '.', ':', '/']) && targets.knows(s);
            let hint = match host {
                true => format!(" ({s:?} is a host: its store is spelled \"ssh://{s}/DIR\")"),
                false => String::new(),
            };
            return Err(format!(
                "store = {s:?}: not an absolute path{hint}; {spellings}"
            ));
        }
        Ok(Store::Local(Local { dir: s.into() }))
    }

    /// How the store is named in previews, results and messages: its directory, or
    /// `ssh://HOST/DIR` as given.
    pub fn label(&self) -> String {
        match self {
            Store::Local(l) => l.dir.display().to_string(),
            Store::Remote(r) => r.label.clone(),
        }
    }

    /// Whether a capture can keep an artifact here, asked before it packs anything (a
    /// read: in a dry-run too). A store on another machine must answer, and its directory
    /// be writable there; one here is made by the first capture.
    pub async fn probe(&self, step: &Step<'_>) -> Result<(), Fault> {
        match self {
            Store::Local(_) => Ok(()),
            Store::Remote(r) => r.probe(step).await,
        }
    }

    /// Every artifact, newest first. A manifest that cannot be read is an error naming
    /// its file: a store is not silently smaller than it is. A read of the store: it runs
    /// in a dry-run too (over ssh, as a read on the store's host).
    pub async fn list(&self, step: &Step<'_>) -> Result<Vec<Manifest>, Fault> {
        Ok(match self {
            Store::Local(l) => l.list()?,
            Store::Remote(r) => r.list(step).await?,
        })
    }

    /// The artifact whose id is or starts with `id`.
    pub async fn get(&self, step: &Step<'_>, id: &str) -> Result<Manifest, Fault> {
        Ok(find(&self.list(step).await?, id, &self.label())?)
    }

    /// An object's bytes, checked against its sha256 here, by the side that restores it.
    pub async fn read_object(&self, step: &Step<'_>, part: &Part) -> Result<Vec<u8>, Fault> {
        match self {
            Store::Local(l) => Ok(l.read_object(part)?),
            Store::Remote(r) => r.read_object(step, part).await,
        }
    }

    /// A new object, sent in pieces ([`Upload::push`]) as they come from the target.
    pub fn upload(&self) -> Upload<'_> {
        Upload {
            store: self,
            hasher: sha2::Sha256::new(),
            bytes: Vec::new(),
            size: 0,
            file: None,
        }
    }

    /// Keeps `m`, once all its objects are in the store: from now on it is listed.
    pub async fn put_manifest(&self, step: &Step<'_>, m: &Manifest) -> Result<(), Fault> {
        match self {
            Store::Local(l) => Ok(l.put_manifest(m)?),
            Store::Remote(r) => r.put_manifest(step, m).await,
        }
    }

    /// Deletes all but the newest `keep` artifacts of each name and key; returns the
    /// deleted ids. Objects no manifest names any more go too, once an hour old.
    pub async fn prune(&self, step: &Step<'_>, keep: usize) -> Result<Vec<String>, Fault> {
        match self {
            Store::Local(l) => Ok(l.prune(keep)?),
            Store::Remote(r) => r.prune(step, keep).await,
        }
    }
}

/// One object on its way into a store: its sha256 is taken piece by piece here, as the
/// pieces pass through. A local store keeps the pieces in memory and writes the object
/// once whole (`fsx::write`); a remote one appends each piece to a new file in the
/// store's `objects` directory there, which becomes the object only once its sha256 on
/// that machine is the one taken here.
pub struct Upload<'s> {
    store: &'s Store,
    hasher: sha2::Sha256,
    bytes: Vec<u8>,
    size: u64,
    /// The remote store's file this object is written to (after the first piece).
    file: Option<String>,
}

impl Upload<'_> {
    pub async fn push(&mut self, step: &Step<'_>, piece: Vec<u8>) -> Result<(), Fault> {
        self.hasher.update(&piece);
        self.size += piece.len() as u64;
        match self.store {
            Store::Local(_) => {
                self.bytes.extend_from_slice(&piece);
                Ok(())
            }
            Store::Remote(r) => r.push(step, &mut self.file, piece).await,
        }
    }

    /// The object whole, named by its sha256: returns it and the object's size.
    pub async fn finish(self, step: &Step<'_>) -> Result<(String, u64), Fault> {
        let sha = crate::base::hex::hex(&self.hasher.finalize());
        match self.store {
            Store::Local(l) => {
                let got = l.put_object(&self.bytes)?;
                debug_assert_eq!(got, sha);
            }
            Store::Remote(r) => r.finish(step, self.file, &sha).await?,
        }
        Ok((sha, self.size))
    }

    /// Drops what was sent (the capture failed): nothing of it is left in the store.
    pub async fn abort(self, step: &Step<'_>) {
        if let (Store::Remote(r), Some(file)) = (self.store, self.file) {
            r.abort(step, &file).await;
        }
    }
}

/// The one artifact of `all` whose id is or starts with `id` (`label`: the store).
fn find(all: &[Manifest], id: &str, label: &str) -> Result<Manifest, String> {
    let found: Vec<&Manifest> = all
        .iter()
        .filter(|m| !id.is_empty() && m.id.starts_with(id))
        .collect();
    match found.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(format!(
            "no artifact {id:?} in {label} (`runbook artifacts list` lists them)"
        )),
        many => Err(format!(
            "{id:?} is the start of {} artifact ids; give more of it",
            many.len()
        )),
    }
}

/// Newest first (then by id, so that the order is the same every time).
fn newest_first(mut all: Vec<Manifest>) -> Vec<Manifest> {
    all.sort_by(|a, b| {
        (b.created_unix, &b.created, &b.id).cmp(&(a.created_unix, &a.created, &a.id))
    });
    all
}

/// A manifest's text read back, or an error naming where it is.
fn parse_manifest(text: &[u8], at: &str) -> Result<Manifest, String> {
    serde_json::from_slice(text).map_err(|e| format!("{at}: not an artifact manifest: {e}"))
}

/// `bytes`, if their sha256 is the one `part` names: an archive changed by one byte is
/// refused here, before anything is extracted. `at`: where the object is, for the message.
fn checked(bytes: Vec<u8>, part: &Part, at: &str) -> Result<Vec<u8>, String> {
    let got = sha256(&bytes);
    if got != part.sha256 {
        return Err(format!(
            "{at} is damaged: its sha256 is {got}, the manifest says {}",
            part.sha256
        ));
    }
    Ok(bytes)
}

/// The ids `prune` deletes from `all` (newest first): all but the newest `keep` of each
/// name and key. Per name as well as key: two caches captured under different names (a
/// model's inductor cache, its triton cache) are different artifacts even where the
/// environment's key is the same.
fn doomed(all: &[Manifest], keep: usize) -> Vec<String> {
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut out = Vec::new();
    for m in all {
        let k = (
            m.name.clone(),
            serde_json::to_string(&m.key).unwrap_or_default(),
        );
        let n = seen.entry(k).or_insert(0);
        *n += 1;
        if *n > keep {
            out.push(m.id.clone());
        }
    }
    out
}

/// The object file names (`SHA.tar.gz`) the manifests `all` name.
fn named(all: &[Manifest]) -> BTreeSet<String> {
    all.iter()
        .flat_map(|m| m.parts.iter().map(|p| format!("{}.tar.gz", p.sha256)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

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
        let store = Local {
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
        assert!(find(&all, "", "s").is_err());
        assert_eq!(find(&all, &all[0].id[..6], "s").unwrap().id, all[0].id);
    }

    /// Each spelling of a store, and each one refused, with what the message says.
    #[test]
    fn store_spellings() {
        let targets = Registry::new(Default::default());
        let open = |s: Option<&str>| Store::open(s, Some(Path::new("/s")), &targets);
        match open(None).unwrap() {
            Store::Local(l) => assert_eq!(l.dir, PathBuf::from("/s/artifacts")),
            other => panic!("{other:?}"),
        }
        match open(Some("/srv/a")).unwrap() {
            Store::Local(l) => assert_eq!(l.dir, PathBuf::from("/srv/a")),
            other => panic!("{other:?}"),
        }
        match open(Some("ssh://root@files.example:2222/srv/artifacts/")).unwrap() {
            Store::Remote(r) => {
                assert_eq!(r.dir, "/srv/artifacts");
                assert_eq!(r.label, "ssh://root@files.example:2222/srv/artifacts");
                assert_eq!(r.target.name(), "root@files.example:2222");
            }
            other => panic!("{other:?}"),
        }
        for (bad, says) in [
            ("rel/dir", "not an absolute path"),
            ("s3://bucket/x", "only ssh://"),
            ("ssh://files.example", "no directory after the host"),
            ("ssh://files.example/", "no directory after the host"),
            ("ssh:///srv/a", "no host after ssh://"),
            ("ssh://files.example/srv/../etc", "not a tidy path"),
            ("ssh://files.example/srv//a", "not a tidy path"),
            ("ssh://no_such_name/srv/a", "unknown target 'no_such_name'"),
            ("ssh://localhost/srv/a", "is this machine"),
        ] {
            let e = open(Some(bad)).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(e.contains(&format!("{bad:?}")), "names what was given: {e}");
        }
        assert!(Store::open(None, None, &targets).is_err());
    }

    #[test]
    fn prune_keeps_the_newest_of_each_name_and_key() {
        let sha = "a".repeat(64);
        let mut other_key = manifest("a", 5, &sha);
        other_key.key.insert("torch".into(), "2.10.0+cu128".into());
        let other_key = other_key.seal();
        let all = newest_first(vec![
            manifest("a", 1, &sha),
            manifest("a", 3, &sha),
            manifest("a", 2, &sha),
            other_key.clone(),
            manifest("b", 1, &sha),
        ]);
        let gone = doomed(&all, 1);
        let kept: Vec<(String, u64)> = all
            .iter()
            .filter(|m| !gone.contains(&m.id))
            .map(|m| (m.name.clone(), m.created_unix))
            .collect();
        assert_eq!(
            kept,
            vec![("a".into(), 5), ("a".into(), 3), ("b".into(), 1)],
            "the newest of (a, 2.11), of (a, 2.10) and of b"
        );
    }

    /// Writers and a reader at once: eight threads each keep an object and a manifest
    /// while another lists the store over and over. Every listing parses whole (never a
    /// half-written manifest), and every listed artifact's objects are there and whole.
    #[test]
    fn concurrent_writers_and_a_reader_never_see_a_partial_artifact() {
        let dir = tempfile::tempdir().unwrap();
        let store = Local {
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
