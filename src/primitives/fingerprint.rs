//! Environment fingerprints: "what does this box look like", saved when it works, so that
//! the next incident starts from "what changed since it last worked" rather than from a
//! hunch. One read command gathers everything on the target.
//!
//! A known-good fingerprint is kept per machine (`NAME/MACHINE.json`): the machine is
//! the target's identity (`targets/identity.rs`: machine id and containers on the way,
//! not the name it was reached by), so a second host is never compared with the first
//! one's known-good. Files of the earlier layout (`NAME.json`, one per name) stay
//! readable, for the target name they were taken on, until a save writes the machine's.

use super::{Cmd, Result, Step};
use crate::base::script;
use crate::targets::identity::Identity;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What `fingerprint.take` looks at.
#[derive(Debug, Default)]
pub struct Scope {
    /// A venv whose python, torch and packages are described; else `python3` on PATH.
    pub venv: Option<String>,
    pub python: Option<String>,
    pub repo: Option<String>,
    pub caches: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CacheSize {
    pub bytes: u64,
    pub files: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Fingerprint {
    pub target: String,
    pub taken_at: String,
    pub python: Option<String>,
    pub torch: Option<String>,
    pub cuda: Option<String>,
    pub driver: Option<String>,
    #[serde(default)]
    pub gpus: Vec<String>,
    /// Each GPU's compute capability (`9.0`), where nvidia-smi knows it.
    #[serde(default)]
    pub compute_caps: Vec<String>,
    /// `uname -s -m`: `Linux x86_64`.
    #[serde(default)]
    pub platform: Option<String>,
    /// The compile-relevant environment: `TORCHINDUCTOR_*`, `TRITON_*`,
    /// `TORCH_CUDA_ARCH_LIST`, name → value.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// name → version, every distribution the python sees.
    #[serde(default)]
    pub packages: BTreeMap<String, String>,
    pub packages_hash: Option<String>,
    pub git_head: Option<String>,
    #[serde(default)]
    pub git_dirty: Vec<String>,
    /// path → size; absent caches are not listed.
    #[serde(default)]
    pub caches: BTreeMap<String, CacheSize>,
    /// Which machine it describes (`targets/identity.rs`), where one was asked: none
    /// with `--offline`, or where nothing may be contacted (`runbook test`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Identity>,
    /// The compile cache artifact that goes with this environment (`artifact.capture`'s
    /// id), when the runbook that saves it names one.
    #[serde(default)]
    pub artifact: Option<String>,
    #[serde(default)]
    pub planned: bool,
}

pub async fn take(step: &Step<'_>, scope: &Scope) -> Result<Fingerprint> {
    let py = match (&scope.venv, &scope.python) {
        (Some(v), _) => format!("{}/bin/python", v.trim_end_matches('/')),
        (None, Some(p)) => p.clone(),
        (None, None) => "python3".into(),
    };
    let mut args = vec![py, scope.repo.clone().unwrap_or_default()];
    args.extend(scope.caches.iter().cloned());
    let ran = step
        .read(
            Cmd::script(&script::FINGERPRINT, args).timeout(std::time::Duration::from_secs(120)),
            "fingerprint: python, torch, packages, GPUs, git, caches",
        )
        .await?;
    let mut fp = parse(&ran.stdout());
    fp.target = step.target.name();
    fp.taken_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    fp.planned = ran.planned();
    if !fp.planned {
        fp.identity = identity(step).await?;
    }
    Ok(fp)
}

/// Which machine the step's target is, as the run's locks asked it (once per target per
/// run); `None` where nothing may be contacted.
pub async fn identity(step: &Step<'_>) -> Result<Option<Identity>> {
    if step.offline() && !step.target.is_local() {
        return Ok(None);
    }
    let found = step.ctx.locks.identity(step.target).await.map_err(|e| {
        step.fail(format!(
            "cannot tell which machine {} is: {e}",
            step.target.name()
        ))
    })?;
    Ok(found.map(|f| f.identity))
}

fn non_empty(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

pub fn parse(text: &str) -> Fingerprint {
    let mut fp = Fingerprint::default();
    for line in text.lines() {
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        match key {
            "@python" => fp.python = non_empty(value),
            "@torch" => fp.torch = non_empty(value),
            "@cuda" => fp.cuda = non_empty(value),
            "@pkg" => {
                if let Some((n, v)) = value.split_once("==") {
                    fp.packages.insert(n.to_string(), v.to_string());
                }
            }
            "@gpu" => {
                let (name, driver) = value.rsplit_once(", ").unwrap_or((value, ""));
                fp.gpus.push(name.trim().to_string());
                if fp.driver.is_none() {
                    fp.driver = non_empty(driver);
                }
            }
            "@cc" => fp.compute_caps.push(value.trim().to_string()),
            "@platform" => fp.platform = non_empty(value),
            "@env" => {
                if let Some((n, v)) = value.split_once('=') {
                    fp.env.insert(n.to_string(), v.to_string());
                }
            }
            "@head" => fp.git_head = non_empty(value),
            "@dirty" => fp.git_dirty.push(value.trim_end().to_string()),
            "@cache" => {
                let mut parts = value.splitn(3, ' ');
                if let (Some(b), Some(f), Some(p)) = (parts.next(), parts.next(), parts.next()) {
                    fp.caches.insert(
                        p.to_string(),
                        CacheSize {
                            bytes: b.trim().parse().unwrap_or(0),
                            files: f.trim().parse().unwrap_or(0),
                        },
                    );
                }
            }
            _ => {}
        }
    }
    if !fp.packages.is_empty() {
        use sha2::Digest;
        let listing: String = fp
            .packages
            .iter()
            .map(|(n, v)| format!("{n}=={v}\n"))
            .collect();
        let digest = sha2::Sha256::digest(listing.as_bytes());
        fp.packages_hash = Some(crate::base::hex::hex(&digest));
    }
    fp
}

/// One difference between two fingerprints.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Change {
    pub what: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// What changed from `a` (e.g. the known-good one) to `b` (now), most telling first.
/// A planned fingerprint (`--offline`) read nothing: its values are unknown, not absent,
/// so nothing is reported as changed.
pub fn diff(a: &Fingerprint, b: &Fingerprint) -> Vec<Change> {
    let mut out = Vec::new();
    if a.planned || b.planned {
        return out;
    }
    let mut field = |what: &str, x: &Option<String>, y: &Option<String>| {
        if x != y {
            out.push(Change {
                what: what.to_string(),
                before: x.clone(),
                after: y.clone(),
            });
        }
    };
    field("torch", &a.torch, &b.torch);
    field("cuda", &a.cuda, &b.cuda);
    field("python", &a.python, &b.python);
    field("driver", &a.driver, &b.driver);
    field("git head", &a.git_head, &b.git_head);
    let gpus =
        |f: &Fingerprint| (!f.gpus.is_empty()).then(|| format!("{} × {}", f.gpus.len(), f.gpus[0]));
    field("gpus", &gpus(a), &gpus(b));
    let dirty = |f: &Fingerprint| (!f.git_dirty.is_empty()).then(|| f.git_dirty.join(", "));
    field("git dirty files", &dirty(a), &dirty(b));
    for (name, v) in &a.packages {
        match b.packages.get(name) {
            Some(w) if w == v => {}
            other => field(
                &format!("package {name}"),
                &Some(v.clone()),
                &other.cloned(),
            ),
        }
    }
    for (name, w) in &b.packages {
        if !a.packages.contains_key(name) {
            field(&format!("package {name}"), &None, &Some(w.clone()));
        }
    }
    let size = |c: Option<&CacheSize>| c.map(|c| super::human_size(c.bytes, c.files));
    let paths: std::collections::BTreeSet<&String> =
        a.caches.keys().chain(b.caches.keys()).collect();
    for p in paths {
        let (x, y) = (a.caches.get(p), b.caches.get(p));
        // Sizes drift with every compile; only a cache appearing or vanishing is news.
        if x.is_some() != y.is_some() {
            field(&format!("cache {p}"), &size(x), &size(y));
        }
    }
    out
}

/// A fingerprint name: a plain file name.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        || name.starts_with('.')
    {
        return Err(format!(
            "fingerprint name '{name}': use letters, digits, '-', '_' and '.'"
        ));
    }
    Ok(())
}

fn short_hash(text: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(text.as_bytes());
    crate::base::hex::hex(&digest[..8])
}

/// The file name a fingerprint's machine is kept under: its machine id and the
/// containers on the way (`m-…`), not its host key, which a target on this machine
/// reached as `local` has none of; by the target's name (`t-…`) where no machine was
/// asked (`runbook test`).
pub fn machine(fp: &Fingerprint) -> String {
    match &fp.identity {
        Some(id) => {
            let mut text = format!("machine-id {}\n", id.machine_id);
            for c in &id.containers {
                text.push_str(&format!("in {c}\n"));
            }
            format!("m-{}", short_hash(&text))
        }
        None => format!("t-{}", short_hash(&fp.target)),
    }
}

/// Where the known-good `name` of the machine `fp` describes is kept in `state_dir`; an
/// error for a name that is not a plain file name.
pub fn store(state_dir: &Path, name: &str, fp: &Fingerprint) -> Result<PathBuf, String> {
    check_name(name)?;
    Ok(state_dir
        .join("fingerprints")
        .join(name)
        .join(format!("{}.json", machine(fp))))
}

/// The earlier layout's file: one per name, whatever the machine.
fn legacy(state_dir: &Path, name: &str) -> Result<PathBuf, String> {
    check_name(name)?;
    Ok(state_dir.join("fingerprints").join(format!("{name}.json")))
}

pub fn save(state_dir: &Path, name: &str, fp: &Fingerprint) -> Result<PathBuf, String> {
    let path = store(state_dir, name, fp)?;
    let rel = path.strip_prefix(state_dir).expect("below the state dir");
    let text = serde_json::to_string_pretty(fp).map_err(|e| e.to_string())?;
    // A new file of an unpredictable name, then renamed, no link followed below the
    // state dir: a crash never leaves half a known-good, two saves never share a file.
    use crate::base::fsx::{Mode, Replace};
    crate::base::fsx::write(
        state_dir,
        rel,
        text.as_bytes(),
        Mode::Private,
        Replace::Yes,
        true,
    )
    .map_err(|e| e.to_string())?;
    Ok(path)
}

/// What `load` found for a machine.
#[derive(Debug, PartialEq)]
pub enum Loaded {
    /// The machine's known-good.
    Found(Fingerprint),
    /// An earlier layout's file (one per name) that was taken on a target of this name:
    /// read as this machine's until a save writes the machine's own.
    Legacy(Fingerprint),
    /// A file for this machine id whose host key or containers differ: another machine
    /// with a copied machine id (a cloned image), not compared.
    OtherMachine(Vec<String>),
    None,
}

fn read(path: &Path) -> Result<Option<Fingerprint>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// The known-good `name` of the machine `now` describes. A planned `now` (`--offline`)
/// names no machine: nothing is loaded.
pub fn load(state_dir: &Path, name: &str, now: &Fingerprint) -> Result<Loaded, String> {
    check_name(name)?;
    if now.planned {
        return Ok(Loaded::None);
    }
    if let Some(fp) = read(&store(state_dir, name, now)?)? {
        if let (Some(saved), Some(here)) = (&fp.identity, &now.identity) {
            let differ = Identity::differences(saved, here);
            if !differ.is_empty() {
                return Ok(Loaded::OtherMachine(differ));
            }
        }
        return Ok(Loaded::Found(fp));
    }
    let old = legacy(state_dir, name)?;
    match read(&old)? {
        Some(fp) if fp.target == now.target => Ok(Loaded::Legacy(fp)),
        _ => Ok(Loaded::None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "@python 3.12.3\n@torch 2.11.0+cu128\n@cuda 12.8\n@pkg torch==2.11.0+cu128\n@pkg numpy==2.1.0\n\
                          @gpu NVIDIA H200, 580.65.06\n@gpu NVIDIA H200, 580.65.06\n@cc 9.0\n@platform Linux x86_64\n@env TORCHINDUCTOR_MAX_AUTOTUNE=1\n@head abc123\n@dirty  M dflash_model.py\n\
                          @cache 344727 12345 /tmp/torchinductor_root\n";

    #[test]
    fn parses_every_fact() {
        let fp = parse(SAMPLE);
        assert_eq!(fp.python.as_deref(), Some("3.12.3"));
        assert_eq!(fp.torch.as_deref(), Some("2.11.0+cu128"));
        assert_eq!(fp.driver.as_deref(), Some("580.65.06"));
        assert_eq!(fp.gpus.len(), 2);
        assert_eq!(fp.compute_caps, vec!["9.0"]);
        assert_eq!(fp.platform.as_deref(), Some("Linux x86_64"));
        assert_eq!(fp.env["TORCHINDUCTOR_MAX_AUTOTUNE"], "1");
        assert_eq!(fp.packages["numpy"], "2.1.0");
        assert_eq!(fp.git_dirty, vec![" M dflash_model.py"]);
        assert_eq!(
            fp.caches["/tmp/torchinductor_root"],
            CacheSize {
                bytes: 344727,
                files: 12345
            },
            "BYTES FILES PATH, bytes as they are"
        );
        assert!(fp.packages_hash.is_some());
    }

    #[test]
    fn diff_says_what_changed() {
        let good = parse(SAMPLE);
        let mut now = good.clone();
        now.torch = Some("2.9.0".into());
        now.packages.insert("torch".into(), "2.9.0".into());
        now.packages.insert("sglang".into(), "0.5".into());
        now.caches.clear();
        let changes = diff(&good, &now);
        let whats: Vec<&str> = changes.iter().map(|c| c.what.as_str()).collect();
        assert_eq!(
            whats,
            vec![
                "torch",
                "package torch",
                "package sglang",
                "cache /tmp/torchinductor_root"
            ]
        );
        assert_eq!(
            changes[3].before.as_deref(),
            Some("336.6 KiB, 12,345 files")
        );
        assert!(diff(&good, &good).is_empty());
    }

    fn on(machine_id: &str, host_key: Option<&str>, target: &str) -> Fingerprint {
        let mut fp = parse(SAMPLE);
        fp.target = target.into();
        fp.identity = Some(Identity {
            host_key: host_key.map(str::to_string),
            machine_id: machine_id.into(),
            containers: Vec::new(),
        });
        fp
    }

    #[test]
    fn names_are_checked_and_round_trip_per_machine() {
        let dir = tempfile::tempdir().unwrap();
        assert!(save(dir.path(), "../x", &Fingerprint::default()).is_err());
        let a = on("aaaa", Some("ssh-ed25519 SHA256:a"), "ssh://gpu1.example");
        save(dir.path(), "known-good", &a).unwrap();
        assert_eq!(
            load(dir.path(), "known-good", &a).unwrap(),
            Loaded::Found(a.clone())
        );
        assert_eq!(
            load(dir.path(), "missing", &a).unwrap(),
            Loaded::None,
            "no such name"
        );
        // Another machine under the same name has none yet.
        let b = on("bbbb", Some("ssh-ed25519 SHA256:b"), "ssh://gpu2.example");
        assert_eq!(load(dir.path(), "known-good", &b).unwrap(), Loaded::None);
        // The same machine reached another way (as `local`: no host key) finds it.
        let here = on("aaaa", None, "local");
        assert!(matches!(
            load(dir.path(), "known-good", &here).unwrap(),
            Loaded::Found(_)
        ));
        // A cloned machine id behind another host key is another machine.
        let clone = on("aaaa", Some("ssh-ed25519 SHA256:c"), "ssh://gpu3.example");
        let Loaded::OtherMachine(why) = load(dir.path(), "known-good", &clone).unwrap() else {
            panic!("a clone was compared");
        };
        assert!(why[0].starts_with("host key:"), "{why:?}");
        // Offline: nothing was read, no machine is named, nothing is loaded.
        let offline = Fingerprint {
            planned: true,
            ..Default::default()
        };
        assert_eq!(
            load(dir.path(), "known-good", &offline).unwrap(),
            Loaded::None
        );
    }

    /// A file of the earlier layout (`NAME.json`) is read for the target name it was
    /// taken on, and only for it, until the machine's own file is written.
    #[test]
    fn earlier_files_are_read_for_their_own_target() {
        let dir = tempfile::tempdir().unwrap();
        let old = on("aaaa", None, "ssh://gpu1.example");
        let legacy_file = dir.path().join("fingerprints/known-good.json");
        std::fs::create_dir_all(legacy_file.parent().unwrap()).unwrap();
        let mut written = old.clone();
        written.identity = None;
        std::fs::write(&legacy_file, serde_json::to_string(&written).unwrap()).unwrap();
        assert_eq!(
            load(dir.path(), "known-good", &old).unwrap(),
            Loaded::Legacy(written)
        );
        let other = on("bbbb", None, "ssh://gpu2.example");
        assert_eq!(
            load(dir.path(), "known-good", &other).unwrap(),
            Loaded::None
        );
        save(dir.path(), "known-good", &old).unwrap();
        assert_eq!(
            load(dir.path(), "known-good", &old).unwrap(),
            Loaded::Found(old)
        );
    }

    #[test]
    fn an_offline_fingerprint_shows_no_drift() {
        let good = parse(SAMPLE);
        let offline = Fingerprint {
            planned: true,
            ..Default::default()
        };
        assert!(diff(&good, &offline).is_empty());
        assert!(diff(&offline, &good).is_empty());
    }
}
