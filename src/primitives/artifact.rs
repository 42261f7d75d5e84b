//! Known-good compile caches: `artifact.capture` packs cache directories on a target into
//! the store (`store.rs`: a directory here, or `ssh://HOST/DIR` on a team's file server),
//! `artifact.restore` puts the newest one whose key matches the target's environment
//! back, `artifact.list` lists them.
//!
//! The key is read from the environment (`fingerprint.take`: torch with its build tag,
//! triton, CUDA, driver, GPU and compute capability, python, platform, git HEAD and the
//! compile-relevant variables), never typed from memory; the runbook's `key` adds or
//! overrides fields. A restore whose key does not match restores nothing and says, field
//! by field, what differs.
//!
//! Paths follow `cache.clear`'s rules (`cache::locate`): resolved on the target, strictly
//! inside a cache root, not in use. Packing and extracting are `sh/pack.sh` and
//! `sh/unpack.sh` (POSIX sh, tar, gzip: busybox's too), each reaching its path from its
//! root as the cache scripts do. An archive is checked here before it is sent: its
//! sha256 against its name, then every entry ([`check_archive`]); one bad entry refuses
//! the restore with nothing written. `unpack.sh` extracts into a staging directory beside
//! the cache, checks again, keeps the old cache aside (`PATH.runbook-kept-…`, as
//! `cache.clear { keep = true }` names it) and renames.
//!
//! A command's output is bounded (`targets::CAPTURE_LIMIT`, 8 MiB), so `pack.sh` writes
//! the archive to a new file beside the cache (mktemp: unpredictable, 0600) and it comes
//! back in 6 MiB reads (`chunk.sh`, which deletes it after the last); each read's bytes
//! are counted and passed on to the store as they come (`store::Upload`: kept in memory
//! for a store here, appended over ssh for one on another machine), and the whole is
//! named by its sha256, taken here. A restore reads the archive from the store, checks
//! it, and sends it as the command's stdin.

use super::cache::{self, Located};
use super::fingerprint::{self, Fingerprint, Scope};
use super::store::{Fault, Key, Manifest, Part, Store, Upload};
use super::{human_bytes, human_size, Cmd, Ran, Result, Step};
use crate::actions::events::{Event, Level};
use crate::base::script;
use serde::Serialize;
use std::io::Read;

/// What one read of the packed archive brings back: under what a command's output may
/// hold (`targets::CAPTURE_LIMIT`, 8 MiB).
const CHUNK_MIB: u64 = 6;

/// What `capture` and `restore` are asked.
#[derive(Debug)]
pub struct Request {
    pub name: String,
    pub paths: Vec<String>,
    /// Fields added to or overriding the key read from the environment.
    pub key: Key,
    /// Where the key's python, torch and git HEAD are read (`fingerprint.take`'s scope).
    pub scope: Scope,
    pub store: Store,
    /// Act even while processes use the paths.
    pub force: bool,
    /// What the run's gate measured (a capture records it in the manifest).
    pub throughput: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Captured {
    /// nil in a dry-run: the id hashes what is captured.
    pub id: Option<String>,
    pub bytes: u64,
    pub files: u64,
    pub archive_bytes: u64,
    pub key: Option<Key>,
    pub store: String,
    pub changed: bool,
    pub planned: bool,
}

/// One field whose value differs between an artifact and the target.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KeyDiff {
    pub field: String,
    pub artifact: Option<String>,
    pub here: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Restored {
    pub restored: bool,
    /// Why nothing was restored (no artifact, a key mismatch).
    pub reason: Option<String>,
    pub id: Option<String>,
    pub diff: Vec<KeyDiff>,
    /// Where each cache that was there was kept aside (nil in a dry-run, where the name
    /// is made at run time).
    pub kept: Vec<String>,
    pub changed: bool,
    pub planned: bool,
}

/// An artifact name: a plain file-name-like word (it is shown and matched, never a path).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    match ok {
        true => Ok(()),
        false => Err(format!(
            "name {name:?}: use letters, digits, '-', '_' and '.' (not first), at most 100"
        )),
    }
}

/// The key a fingerprint gives, `extra` added over it. Fields absent here (no GPU, no
/// repo) are absent from the key, so they match only where they are absent too.
pub fn key_from(fp: &Fingerprint, extra: &Key) -> Key {
    let mut k = Key::new();
    let mut put = |f: &str, v: Option<&String>| {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            k.insert(f.to_string(), v.clone());
        }
    };
    put("torch", fp.torch.as_ref());
    put(
        "triton",
        fp.packages
            .get("triton")
            .or_else(|| fp.packages.get("pytorch-triton")),
    );
    put("cuda", fp.cuda.as_ref());
    put("driver", fp.driver.as_ref());
    let gpu = (!fp.gpus.is_empty()).then(|| fp.gpus[0].clone());
    put("gpu", gpu.as_ref());
    put("compute_capability", fp.compute_caps.first());
    put("python", fp.python.as_ref());
    put("platform", fp.platform.as_ref());
    put("git_head", fp.git_head.as_ref());
    for (n, v) in &fp.env {
        k.insert(format!("env.{n}"), v.clone());
    }
    for (n, v) in extra {
        k.insert(n.clone(), v.clone());
    }
    k
}

/// Every field that differs, in the key's order.
pub fn key_diff(artifact: &Key, here: &Key) -> Vec<KeyDiff> {
    let fields: std::collections::BTreeSet<&String> = artifact.keys().chain(here.keys()).collect();
    fields
        .into_iter()
        .filter(|f| artifact.get(*f) != here.get(*f))
        .map(|f| KeyDiff {
            field: f.clone(),
            artifact: artifact.get(f).cloned(),
            here: here.get(f).cloned(),
        })
        .collect()
}

/// `torch: 2.11.0+cu128 (artifact) ≠ 2.10.0+cu128 (here)`
pub fn diff_line(d: &KeyDiff) -> String {
    let v = |x: &Option<String>| x.clone().unwrap_or_else(|| "(none)".into());
    format!(
        "{}: {} (artifact) ≠ {} (here)",
        d.field,
        v(&d.artifact),
        v(&d.here)
    )
}

/// The target's key now: one read (in a dry-run too); `None` with `--offline`.
async fn key_here(step: &Step<'_>, req: &Request) -> Result<Option<Key>> {
    let fp = fingerprint::take(step, &req.scope).await?;
    Ok((!fp.planned).then(|| key_from(&fp, &req.key)))
}

fn log(step: &Step<'_>, level: Level, message: String) {
    step.ctx.bus.emit(Event::Log {
        step: step.ctx.step.get().map(|s| s.index),
        level,
        message,
    });
}

fn check(step: &Step<'_>, ran: &Ran, what: &str) -> Result<()> {
    if ran.ok() {
        return Ok(());
    }
    let target = step.target.name();
    Err(step.fail(ran.failure(format!("artifact: {what}"), Some(&target), None)))
}

/// Each path tidied as `cache.clear` reads it, or the call refused.
fn tidied(step: &Step<'_>, what: &str, paths: &[String]) -> Result<Vec<String>> {
    paths
        .iter()
        .map(|p| cache::tidy(p).map_err(|e| step.fail(format!("{what}: {p}: {e}"))))
        .collect()
}

/// `artifact.capture`: packs each path on the target and keeps it in the store.
pub async fn capture(step: &Step<'_>, req: &Request) -> Result<Captured> {
    let what = "artifact.capture";
    check_name(&req.name).map_err(|e| step.fail(format!("{what}: {e}")))?;
    let paths = tidied(step, what, &req.paths)?;
    let key = key_here(step, req).await?;
    let store = req.store.label();
    // A store that cannot be reached or written stops the capture before it packs.
    if !step.offline() {
        stored(step, what, req.store.probe(step).await)?;
    }
    let Some(found) =
        cache::locate(step, what, &req.paths, req.force, "nothing was captured").await?
    else {
        return plan_offline(step, req, key, store).await;
    };
    let missing: Vec<String> = req
        .paths
        .iter()
        .zip(&found)
        // A dry-run plans the pack of a directory that is not there yet: an earlier step
        // of the same run (a warm-up) may make it, and the run checks it again.
        .filter(|(_, f)| (f.exists || !step.dry_run()) && (!f.exists || !f.dir))
        .map(|(p, f)| match f.exists {
            false => format!("{p}: does not exist"),
            true => format!("{p}: is not a directory"),
        })
        .collect();
    if !missing.is_empty() {
        return Err(step.fail(format!(
            "{what} refused (nothing was captured):\n  {}",
            missing.join("\n  ")
        )));
    }
    let mut parts = Vec::new();
    let mut planned = false;
    for ((given, tidy), f) in req.paths.iter().zip(&paths).zip(&found) {
        // No size: what is packed is the directory as it is when the change runs, which
        // earlier steps of the run (a warm-up) change after a dry-run looked; a plan holds
        // the run to this line. The run's log says the size packed.
        let summary = format!(
            "pack {} into artifact '{}' in {store}",
            f.resolved, req.name
        );
        let cmd = Cmd::script(
            &script::ARTIFACT_PACK,
            [f.root.as_str(), f.resolved.as_str()],
        );
        let ran = step.change(cmd, summary, false).await?;
        if ran.planned() {
            planned = true;
            continue;
        }
        check(step, &ran, &format!("packing {given}"))?;
        let mut upload = req.store.upload();
        if let Err(e) = fetch(step, &ran.stdout(), given, &mut upload).await {
            upload.abort(step).await;
            drop_pack(step, &ran.stdout()).await;
            return Err(e);
        }
        let (sha, archive_bytes) = stored(step, what, upload.finish(step).await)?;
        parts.push(Part {
            path: tidy.clone(),
            resolved: f.resolved.clone(),
            sha256: sha,
            archive_bytes,
            bytes: f.bytes,
            files: f.files,
        });
    }
    let (bytes, files) = found
        .iter()
        .fold((0, 0), |(b, n), f| (b + f.bytes, n + f.files));
    if planned {
        return Ok(Captured {
            id: None,
            bytes,
            files,
            archive_bytes: 0,
            key,
            store,
            changed: true,
            planned: true,
        });
    }
    // Which machine it came from, not only the name it was reached by (as plans record it).
    let source_identity = fingerprint::identity(step).await?;
    let now = std::time::SystemTime::now();
    let m = Manifest {
        id: String::new(),
        name: req.name.clone(),
        key: key.clone().unwrap_or_default(),
        paths,
        archive_bytes: parts.iter().map(|p| p.archive_bytes).sum(),
        parts,
        files,
        bytes,
        source: step.target.name(),
        source_identity,
        run_id: step.ctx.run_id.borrow().clone(),
        created: humantime::format_rfc3339_seconds(now).to_string(),
        created_unix: now
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        throughput: req.throughput,
    }
    .seal();
    stored(step, what, req.store.put_manifest(step, &m).await)?;
    log(
        step,
        Level::Info,
        format!(
            "captured artifact {} '{}' ({}; {} packed) in {store}",
            m.id,
            m.name,
            human_size(m.bytes, m.files),
            human_bytes(m.archive_bytes)
        ),
    );
    Ok(Captured {
        id: Some(m.id),
        bytes,
        files,
        archive_bytes: m.archive_bytes,
        key,
        store,
        changed: true,
        planned: false,
    })
}

/// With `--offline` nothing is looked at: each pack is planned from the path as written
/// (its size unknown), as `cache.clear` plans offline.
async fn plan_offline(
    step: &Step<'_>,
    req: &Request,
    key: Option<Key>,
    store: String,
) -> Result<Captured> {
    for given in &req.paths {
        let (root, path) = cache::offline_root(step, given)
            .map_err(|e| step.fail(format!("artifact.capture: {given}: {e}")))?;
        let summary = format!(
            "pack {path} (size unknown with --offline) into artifact '{}' in {store}",
            req.name
        );
        let cmd = Cmd::script(&script::ARTIFACT_PACK, [root.as_str(), path.as_str()]);
        step.change(cmd, summary, false).await?;
    }
    Ok(Captured {
        id: None,
        bytes: 0,
        files: 0,
        archive_bytes: 0,
        key,
        store,
        changed: true,
        planned: true,
    })
}

/// What a store operation gave, or the step's error for why not (`what`: the primitive).
pub(crate) fn stored<T>(step: &Step<'_>, what: &str, r: Result<T, Fault>) -> Result<T> {
    r.map_err(|f| match f {
        Fault::Msg(m) => step.fail(format!("{what}: {m}")),
        Fault::Stop(e) => e,
    })
}

/// Deletes the archive `pack.sh` left beside the cache (its answer: `SIZE FILE`) when
/// the capture stops before its last piece was read (which deletes it): chunk.sh's last
/// read, of nothing. Best effort: the capture's own error is what is reported.
async fn drop_pack(step: &Step<'_>, answer: &str) {
    let Some((_, file)) = answer.trim_end_matches('\n').split_once(' ') else {
        return;
    };
    let mut cmd = Cmd::script(&script::ARTIFACT_CHUNK, [file, "0", "0", "1"]);
    cmd.binary_output = true;
    let _ = step
        .read(cmd, format!("delete the unfinished archive {file}"))
        .await;
}

/// The archive `pack.sh` left in `FILE` (its answer: `SIZE FILE`), read back in pieces
/// and passed on to the store piece by piece (`upload`); the last read deletes the file.
async fn fetch(step: &Step<'_>, answer: &str, given: &str, upload: &mut Upload<'_>) -> Result<()> {
    let what = "artifact.capture";
    let (size, file) = answer
        .trim_end_matches('\n')
        .split_once(' ')
        .and_then(|(n, f)| Some((n.parse::<u64>().ok()?, f.to_string())))
        .ok_or_else(|| {
            step.fail(format!(
                "{what}: unexpected answer from pack.sh: {answer:?}"
            ))
        })?;
    let mib = 1024 * 1024;
    let pieces = size.div_ceil(CHUNK_MIB * mib).max(1);
    let mut got = 0u64;
    for i in 0..pieces {
        let last = if i + 1 == pieces { "1" } else { "0" };
        let args = [
            file.clone(),
            (i * CHUNK_MIB).to_string(),
            CHUNK_MIB.to_string(),
            last.to_string(),
        ];
        let mut cmd = Cmd::script(&script::ARTIFACT_CHUNK, args);
        cmd.binary_output = true;
        let summary = format!(
            "read the archive of {given} ({}), part {} of {pieces}",
            human_bytes(size),
            i + 1
        );
        let ran = step.read(cmd, summary).await?;
        check(
            step,
            &ran,
            &format!("reading the archive of {given} ({file})"),
        )?;
        let out = match ran {
            Ran::Done { out, .. } => out,
            Ran::Planned { .. } => unreachable!("a real run's read runs"),
        };
        got += out.stdout.len() as u64;
        let want = size.min((i + 1) * CHUNK_MIB * mib);
        if out.stdout_truncated || got != want {
            return Err(step.fail(format!(
                "{what}: the archive of {given} came back as {got} of {size} bytes; nothing was stored"
            )));
        }
        stored(step, what, upload.push(step, out.stdout).await)?;
    }
    Ok(())
}

/// `artifact.restore`: the newest artifact of `name` for these paths whose key equals
/// the target's, checked, then put in place of each path.
pub async fn restore(step: &Step<'_>, req: &Request) -> Result<Restored> {
    let what = "artifact.restore";
    check_name(&req.name).map_err(|e| step.fail(format!("{what}: {e}")))?;
    let paths = tidied(step, what, &req.paths)?;
    let Some(here) = key_here(step, req).await? else {
        return Err(step.fail(format!(
            "{what}: cannot plan with --offline: the key is read from the target"
        )));
    };
    let store = req.store.label();
    let all = stored(step, what, req.store.list(step).await)?;
    let candidates: Vec<&Manifest> = all
        .iter()
        .filter(|m| m.name == req.name && m.paths == paths)
        .collect();
    let not_restored = |reason: String, id: Option<String>, diff: Vec<KeyDiff>| Restored {
        restored: false,
        reason: Some(reason),
        id,
        diff,
        kept: Vec::new(),
        changed: false,
        planned: step.dry_run(),
    };
    let Some(newest) = candidates.first() else {
        let reason = format!(
            "no artifact '{}' of {} in {store}",
            req.name,
            paths.join(", ")
        );
        log(
            step,
            Level::Warn,
            format!("{what}: {reason}; nothing was restored"),
        );
        return Ok(not_restored(reason, None, Vec::new()));
    };
    let Some(m) = candidates.iter().find(|m| m.key == here) else {
        let diff = key_diff(&newest.key, &here);
        let lines: Vec<String> = diff.iter().map(diff_line).collect();
        let reason = format!(
            "the key here differs from the newest artifact '{}' ({}, made {} on {}): {}",
            req.name,
            newest.id,
            newest.age(),
            newest.source,
            lines.join("; ")
        );
        log(
            step,
            Level::Warn,
            format!("{what}: {reason}; nothing was restored"),
        );
        return Ok(not_restored(reason, Some(newest.id.clone()), diff));
    };
    // The preview names the artifact and shows the key it matched on.
    let compared: Vec<String> = here.iter().map(|(f, v)| format!("{f} = {v} ✓")).collect();
    log(
        step,
        Level::Info,
        format!(
            "{what}: artifact {} '{}' in {store} ({}; {} packed), made {} on {}{}, matches the key here:\n  {}",
            m.id,
            m.name,
            human_size(m.bytes, m.files),
            human_bytes(m.archive_bytes),
            m.age(),
            m.source,
            m.run_id
                .as_ref()
                .map(|r| format!(" by run {r}"))
                .unwrap_or_default(),
            compared.join("\n  ")
        ),
    );
    // Checked whole before anything changes: every object's sha256, then every entry.
    let mut archives = Vec::new();
    for part in &m.parts {
        let bytes = match req.store.read_object(step, part).await {
            Ok(b) => b,
            Err(Fault::Msg(e)) => {
                return Err(step.fail(format!(
                    "{what}: artifact {}: {e}; nothing was restored",
                    m.id
                )))
            }
            Err(Fault::Stop(e)) => return Err(e),
        };
        check_archive(&bytes).map_err(|refused| {
            step.fail(format!(
                "{what}: artifact {} ({}) refused, nothing was restored:\n  {}",
                m.id,
                part.path,
                refused.join("\n  ")
            ))
        })?;
        archives.push(bytes);
    }
    let Some(found): Option<Vec<Located>> =
        cache::locate(step, what, &req.paths, req.force, "nothing was restored").await?
    else {
        return Err(step.fail(format!(
            "{what}: cannot plan with --offline: the paths are resolved on the target"
        )));
    };
    let mut kept = Vec::new();
    for ((part, f), bytes) in m.parts.iter().zip(&found).zip(archives) {
        let aside = match f.exists {
            true => format!(
                ", the one there ({}) kept aside as {}{}…",
                f.size(),
                f.resolved,
                cache::KEPT_SUFFIX
            ),
            false => String::new(),
        };
        let summary = format!(
            "restore {} from artifact {} ({}){aside}",
            f.resolved,
            m.id,
            human_size(part.bytes, part.files)
        );
        let mut cmd = Cmd::script(
            &script::ARTIFACT_UNPACK,
            [f.root.as_str(), f.resolved.as_str()],
        );
        cmd.stdin = Some(bytes);
        let ran = step.change(cmd, summary, true).await?;
        check(step, &ran, &format!("restoring {}", part.path))?;
        if let Some(k) = ran
            .outcome()
            .map(|_| ran.stdout().trim_end_matches('\n').to_string())
            .filter(|k| !k.is_empty())
        {
            kept.push(k);
        }
    }
    Ok(Restored {
        restored: true,
        reason: None,
        id: Some(m.id.clone()),
        diff: Vec::new(),
        kept,
        changed: true,
        planned: step.dry_run(),
    })
}

/// What `check_archive` counted.
#[derive(Debug, PartialEq)]
pub struct Listing {
    pub entries: u64,
}

/// Reads a gzipped tar through and refuses, entry by entry, what a cache never holds and
/// what could write outside the directory it is extracted into: absolute names, `..`,
/// names through a symlink of the archive, symlinks whose target is absolute or climbs
/// out of the archive, hard links, devices, fifos, and setuid/setgid modes. Every refusal
/// is listed (at most 10), so one look shows what is wrong.
pub fn check_archive(gz: &[u8]) -> Result<Listing, Vec<String>> {
    let mut refused = Vec::new();
    let mut links: Vec<String> = Vec::new();
    let mut entries = 0;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(gz));
    let iter = archive
        .entries()
        .map_err(|e| vec![format!("not a gzipped tar: {e}")])?;
    for entry in iter {
        let mut entry = entry.map_err(|e| vec![format!("not a gzipped tar: {e}")])?;
        entries += 1;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let header = entry.header();
        let kind = header.entry_type();
        let mode = header.mode().unwrap_or(0);
        let parts = match components(&name) {
            Ok(p) => p,
            Err(why) => {
                refused.push(format!("{name}: {why}"));
                continue;
            }
        };
        let joined = parts.join("/");
        if let Some(l) = links.iter().find(|l| joined.starts_with(&format!("{l}/"))) {
            refused.push(format!(
                "{name}: lies through the symlink {l} of the archive"
            ));
        }
        use tar::EntryType as T;
        match kind {
            T::Regular | T::Directory | T::Continuous => {}
            T::Symlink => {
                let to = entry
                    .link_name_bytes()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                if let Some(why) = link_escapes(&parts, &to) {
                    refused.push(format!("{name}: a symlink to {to}, {why}"));
                }
                links.push(joined);
            }
            T::Link => refused.push(format!("{name}: a hard link (not kept in an artifact)")),
            T::Char | T::Block => refused.push(format!("{name}: a device")),
            T::Fifo => refused.push(format!("{name}: a fifo")),
            other => refused.push(format!(
                "{name}: an entry of type {:?}",
                other.as_byte() as char
            )),
        }
        if mode & 0o6000 != 0 {
            refused.push(format!("{name}: setuid/setgid (mode {mode:o})"));
        }
        // Read through, so a cut or corrupt stream is found here too.
        if let Err(e) = std::io::copy(&mut entry, &mut std::io::sink()) {
            return Err(vec![format!("{name}: unreadable: {e}")]);
        }
    }
    let _ = archive.into_inner().read_to_end(&mut Vec::new());
    if refused.is_empty() {
        return Ok(Listing { entries });
    }
    refused.truncate(10);
    Err(refused)
}

/// The names of an entry below the extraction directory (`./a/b` → `a`, `b`).
fn components(name: &str) -> Result<Vec<&str>, &'static str> {
    if name.starts_with('/') {
        return Err("an absolute name");
    }
    let parts: Vec<&str> = name
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.contains(&"..") {
        return Err("a name with '..'");
    }
    Ok(parts)
}

/// Why a symlink at `at` (its names) pointing to `to` could lead out of the archive:
/// only `..` at the start, no deeper than the link itself lies, then plain names.
fn link_escapes(at: &[&str], to: &str) -> Option<&'static str> {
    if to.starts_with('/') {
        return Some("an absolute target");
    }
    let mut up = 0;
    let mut named = false;
    for p in to.split('/').filter(|p| !p.is_empty() && *p != ".") {
        match (p, named) {
            ("..", false) => up += 1,
            ("..", true) => return Some("'..' after a name"),
            _ => named = true,
        }
    }
    (up >= at.len()).then_some("which leads out of the directory")
}

#[cfg(test)]
mod tests;
