//! A store on another machine: `store = "ssh://HOST/DIR"`, the directory `/DIR` on HOST,
//! a team's file server. HOST is resolved as `target(HOST)` resolves it (an inventory
//! name first, its address, user, port, identity and jump; then an ssh_config `Host`
//! alias; or `user@host[:port]`), so the store's commands run over the run's own
//! connection to HOST (the one a target on HOST already has, or opens), in its session.
//!
//! Nothing is copied through a file in /tmp, on either side. The store's files are
//! written and read by small POSIX sh scripts there (`sh/store_*.sh`, with
//! `sh/store_lib.sh`), their data on stdin and stdout:
//!
//! - an object comes from the capturing target in pieces of at most 6 MiB (a command's
//!   output is bounded), each held in memory here only until it is appended, as the
//!   next command's stdin, to a new file in the store's `objects` directory
//!   (`store_put.sh start`: mktemp, an unpredictable name, 0600); its sha256 is taken
//!   here as the pieces pass. The file becomes `objects/SHA.tar.gz` only once its sha256
//!   there is the one taken here, by a hard link, which never replaces an object that
//!   is there (the same bytes, kept once);
//! - a manifest is written the same way and renamed into `manifests/` after all its
//!   objects, so a listed artifact is always whole;
//! - a restore reads an object back in 6 MiB pieces and checks its sha256 here, on the
//!   restoring side, before anything is sent to the target it is extracted on.
//!
//! Reading the store (listing, reading objects) is a read on HOST, as any primitive's:
//! it runs in a dry-run too, is recorded, and a plan holds it. Writing it is not a
//! command a plan can hold (its bytes are the archive, known only once the pack ran):
//! it is part of the capture's planned change, whose preview line names the store
//! (`pack PATH (…) into artifact 'NAME' in ssh://HOST/DIR`), and runs as runbook's own
//! storage does (the local store's writes, the run record), with no run lock: the
//! writes above are safe with any number of captures at once. `--offline` contacts no
//! store on another machine.

use super::{checked, doomed, named, newest_first, parse_manifest, Fault, Manifest, Part};
use crate::base::script;
use crate::primitives::{human_bytes, Cmd, Ran, Step};
use crate::targets::registry::Registry;
use crate::targets::{ExecIo, ExecOutcome, ExecRequest, Stream, Target};
use std::rc::Rc;

/// What one read of an object brings back: under what a command's output may hold
/// (`targets::CAPTURE_LIMIT`, 8 MiB).
const PIECE_MIB: u64 = 6;
const MIB: u64 = 1024 * 1024;

/// A store directory on another machine.
#[derive(Debug)]
pub struct Remote {
    /// The machine, as the run reaches it.
    pub target: Rc<Target>,
    /// The directory there: absolute, tidy.
    pub dir: String,
    /// `ssh://HOST/DIR`, as the runbook spelled it.
    pub label: String,
}

impl Remote {
    /// `rest` is what follows `ssh://` in `given`.
    pub(super) fn open(
        given: &str,
        rest: &str,
        targets: &Registry,
        spellings: &str,
    ) -> Result<Remote, String> {
        let bad = |why: String| format!("store = {given:?}: {why}; {spellings}");
        let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if host.is_empty() {
            return Err(bad("no host after ssh://".into()));
        }
        let path = path.trim_end_matches('/');
        if path.is_empty() {
            return Err(bad(format!(
                "no directory after the host (ssh://{host}/DIR: the store's directory on {host})"
            )));
        }
        if path
            .split('/')
            .skip(1)
            .any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(bad(format!(
                "{path} is not a tidy path (no '.', '..' or '//')"
            )));
        }
        let target = targets
            .resolve(host)
            .map_err(|e| format!("store = {given:?}: {e}"))?;
        if target.is_local() {
            return Err(format!(
                "store = {given:?}: {host} is this machine; give the directory itself: store = {path:?}"
            ));
        }
        if target.slurm_node().is_some() {
            return Err(bad(format!("{host} is a Slurm node, not a file server")));
        }
        Ok(Remote {
            target,
            dir: path.to_string(),
            label: format!("ssh://{host}{path}"),
        })
    }

    /// `step`, running on the store's machine.
    fn on<'a>(&'a self, step: &Step<'a>) -> Step<'a> {
        Step {
            ctx: step.ctx,
            target: &self.target,
            at: step.at.clone(),
        }
    }

    fn contact(&self, step: &Step<'_>) -> Result<(), Fault> {
        match step.offline() {
            true => Err(Fault::Msg(format!(
                "the store {} is on another machine, which --offline does not contact",
                self.label
            ))),
            false => Ok(()),
        }
    }

    /// A read of the store: a read on its machine, as any primitive's.
    async fn read(&self, step: &Step<'_>, cmd: Cmd, summary: String) -> Result<ExecOutcome, Fault> {
        self.contact(step)?;
        let ran = self
            .on(step)
            .read(cmd, summary.clone())
            .await
            .map_err(|e| self.fault(e))?;
        if !ran.ok() {
            return Err(Fault::Msg(ran.failure(
                summary,
                Some(&self.target.name()),
                None,
            )));
        }
        match ran {
            Ran::Done { out, .. } => Ok(out),
            Ran::Planned { .. } => Err(Fault::Msg(format!("{summary} was only planned"))),
        }
    }

    fn fault(&self, e: crate::primitives::Error) -> Fault {
        match e {
            crate::primitives::Error::Failed { msg, .. } => {
                Fault::Msg(format!("the store {}: {msg}", self.label))
            }
            stop => Fault::Stop(stop),
        }
    }

    /// A write into the store, over the run's connection to its machine (see the module's
    /// doc for why it is no planned command of its own). Stops with the step.
    async fn write(&self, step: &Step<'_>, cmd: Cmd, what: &str) -> Result<ExecOutcome, Fault> {
        self.contact(step)?;
        if step.dry_run() {
            return Err(Fault::Msg(format!(
                "{what}: a dry-run writes nothing into the store {}",
                self.label
            )));
        }
        step.check_stopped().map_err(Fault::Stop)?;
        // As for any change: nothing more is written once the run record cannot say so.
        let ctx = step.ctx;
        if ctx.record_failed.borrow().as_ref().is_some_and(|f| f.get()) {
            return Err(Fault::Stop(
                step.stop(crate::base::abort::Why::RecordBroken),
            ));
        }
        let quiet = |_: Stream, _: &str, _: bool| {};
        let io = ExecIo {
            on_line: &quiet,
            deadline: ctx.deadline.get(),
            cancel: &ctx.cancel,
            abort_at: ctx.abort_at.get(),
            on_group: None,
        };
        let stopped = |stop: crate::targets::pump::Stop| {
            Fault::Stop(step.stop(match stop {
                crate::targets::pump::Stop::Interrupted => crate::base::abort::Why::Interrupted,
                _ => crate::base::abort::Why::TimedOut,
            }))
        };
        // The connection's channels are shared with the run's other commands.
        let _slot = self.target.slot(&io).await.map_err(stopped)?;
        let req = ExecRequest {
            argv: cmd.argv,
            stdin: cmd.stdin,
            ..Default::default()
        };
        let out = self
            .target
            .exec(&req, &io)
            .await
            .map_err(|e| Fault::Msg(format!("the store {}: {what}: {e}", self.label)))?;
        if out.interrupted {
            return Err(Fault::Stop(step.stop(crate::base::abort::Why::Interrupted)));
        }
        if out.deadline_hit {
            return Err(Fault::Stop(step.stop(crate::base::abort::Why::TimedOut)));
        }
        if out.code != Some(0) || out.timed_out {
            let head = out.failed(
                format!("{what} in {}", self.label),
                Some(&self.target.name()),
                None,
            );
            return Err(Fault::Msg(
                head + &out.stderr_tail(crate::targets::failure::TAIL_LINES),
            ));
        }
        Ok(out)
    }

    fn put(&self, args: &[&str], stdin: Option<Vec<u8>>) -> Cmd {
        let mut cmd = Cmd::script(
            &script::STORE_PUT,
            std::iter::once(self.dir.as_str()).chain(args.iter().copied()),
        );
        cmd.stdin = stdin;
        cmd
    }

    /// Whether the store can be written, before a capture packs anything: a read.
    pub(super) async fn probe(&self, step: &Step<'_>) -> Result<(), Fault> {
        let cmd = Cmd::script(&script::STORE_PROBE, [self.dir.as_str()]);
        self.read(
            step,
            cmd,
            format!("can artifacts be kept in {}?", self.label),
        )
        .await?;
        Ok(())
    }

    pub(super) async fn list(&self, step: &Step<'_>) -> Result<Vec<Manifest>, Fault> {
        let mut cmd = Cmd::script(&script::STORE_LIST, [self.dir.as_str()]);
        // Manifests are data for runbook, not lines for people (nor the record).
        cmd.binary_output = true;
        let out = self
            .read(step, cmd, format!("list the artifacts in {}", self.label))
            .await?;
        if out.stdout_truncated {
            return Err(Fault::Msg(format!(
                "the manifests in {} are more than one read brings back (8 MiB): prune it (runbook artifacts prune --keep N --store {})",
                self.label, self.label
            )));
        }
        let mut all = Vec::new();
        let mut records = out.stdout.split(|b| *b == 0x1e);
        if records.next().is_some_and(|before| !before.is_empty()) {
            return Err(Fault::Msg(format!(
                "the store {}: unexpected answer from store-list.sh",
                self.label
            )));
        }
        for record in records {
            let cut = record
                .iter()
                .position(|b| *b == b'\n')
                .unwrap_or(record.len());
            let (name, body) = record.split_at(cut);
            let at = format!("{}/manifests/{}", self.label, String::from_utf8_lossy(name));
            all.push(parse_manifest(body, &at)?);
        }
        Ok(newest_first(all))
    }

    pub(super) async fn read_object(&self, step: &Step<'_>, part: &Part) -> Result<Vec<u8>, Fault> {
        let at = format!("{}/objects/{}.tar.gz", self.label, part.sha256);
        let pieces = part.archive_bytes.div_ceil(PIECE_MIB * MIB).max(1);
        let mut bytes = Vec::new();
        for i in 0..pieces {
            let args = [
                self.dir.clone(),
                part.sha256.clone(),
                (i * PIECE_MIB).to_string(),
                PIECE_MIB.to_string(),
            ];
            let mut cmd = Cmd::script(&script::STORE_READ, args);
            cmd.binary_output = true;
            let summary = format!(
                "read object {} ({}) from {}, part {} of {pieces}",
                &part.sha256[..12.min(part.sha256.len())],
                human_bytes(part.archive_bytes),
                self.label,
                i + 1
            );
            let out = self.read(step, cmd, summary).await?;
            if out.stdout_truncated {
                return Err(Fault::Msg(format!("{at}: a piece came back cut")));
            }
            bytes.extend_from_slice(&out.stdout);
        }
        Ok(checked(bytes, part, &at)?)
    }

    /// Appends `piece` to the object's file there (made by the first piece).
    pub(super) async fn push(
        &self,
        step: &Step<'_>,
        file: &mut Option<String>,
        piece: Vec<u8>,
    ) -> Result<(), Fault> {
        match file {
            None => {
                let cmd = self.put(&["start", "objects"], Some(piece));
                let out = self.write(step, cmd, "storing an archive").await?;
                *file = Some(self.upload_named(&out, "objects")?);
            }
            Some(f) => {
                let cmd = self.put(&["append", f.as_str()], Some(piece));
                self.write(step, cmd, "storing an archive").await?;
            }
        }
        Ok(())
    }

    /// The file `store_put.sh start` made, from what it printed: in the store's `KIND`
    /// directory, or the answer is refused.
    fn upload_named(&self, out: &ExecOutcome, kind: &str) -> Result<String, Fault> {
        let name = String::from_utf8_lossy(&out.stdout)
            .trim_end_matches('\n')
            .to_string();
        let rest = name.strip_prefix(&format!("{}/{kind}/.upload.", self.dir));
        match rest {
            Some(r) if !r.contains('/') && !r.is_empty() => Ok(name),
            _ => Err(Fault::Msg(format!(
                "the store {}: unexpected answer from store-put.sh: {name:?}",
                self.label
            ))),
        }
    }

    /// The object whole: checked there against `sha`, then named by it.
    pub(super) async fn finish(
        &self,
        step: &Step<'_>,
        file: Option<String>,
        sha: &str,
    ) -> Result<(), Fault> {
        let Some(file) = file else {
            return Err(Fault::Msg(format!(
                "the store {}: an empty archive was not stored",
                self.label
            )));
        };
        let cmd = self.put(&["object", file.as_str(), sha], None);
        self.write(step, cmd, "storing an archive").await?;
        Ok(())
    }

    /// Removes an object's file that will not be finished. Best effort: one left by a
    /// lost connection is deleted by the next prune once an hour old.
    pub(super) async fn abort(&self, step: &Step<'_>, file: &str) {
        let cmd = self.put(&["abort", file], None);
        let _ = self
            .write(step, cmd, "removing an unfinished archive")
            .await;
    }

    pub(super) async fn put_manifest(&self, step: &Step<'_>, m: &Manifest) -> Result<(), Fault> {
        let text = serde_json::to_vec_pretty(m).map_err(|e| e.to_string())?;
        let what = "storing the manifest";
        let out = self
            .write(step, self.put(&["start", "manifests"], Some(text)), what)
            .await?;
        let file = self.upload_named(&out, "manifests")?;
        let cmd = self.put(&["manifest", file.as_str(), m.id.as_str()], None);
        self.write(step, cmd, what).await?;
        Ok(())
    }

    /// See [`super::Store::prune`]. The deletions are `store_prune.sh`'s, which takes
    /// only names of the store's own files, below its directory.
    pub(super) async fn prune(&self, step: &Step<'_>, keep: usize) -> Result<Vec<String>, Fault> {
        let doomed = doomed(&self.list(step).await?, keep);
        if !doomed.is_empty() {
            let names: Vec<String> = doomed
                .iter()
                .map(|id| format!("manifests/{id}.json"))
                .collect();
            self.delete(step, names).await?;
        }
        let named = named(&self.list(step).await?);
        let cmd = Cmd::script(&script::STORE_OLD, [self.dir.as_str()]);
        let old = self
            .read(step, cmd, format!("list old files in {}", self.label))
            .await?;
        let orphans: Vec<String> = String::from_utf8_lossy(&old.stdout)
            .lines()
            .filter(|l| match l.strip_prefix("objects/") {
                Some(n) if n.ends_with(".tar.gz") => !named.contains(n),
                _ => l.contains("/.upload."),
            })
            .map(str::to_string)
            .collect();
        if !orphans.is_empty() {
            self.delete(step, orphans).await?;
        }
        Ok(doomed)
    }

    async fn delete(&self, step: &Step<'_>, names: Vec<String>) -> Result<(), Fault> {
        let cmd = Cmd::script(
            &script::STORE_PRUNE,
            std::iter::once(self.dir.clone()).chain(names),
        );
        self.write(step, cmd, "pruning").await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The store scripts themselves, under dash (GNU tools) and busybox sh with only
    /// busybox's applets on PATH: an object sent in two pieces, refused when its sha256
    /// is not the one sent (nothing left), kept once for the same bytes; a manifest
    /// renamed whole and listed; an object read back in pieces; old files found and
    /// pruned, young and named ones not; and every name outside the store refused.
    #[test]
    fn store_scripts_under_dash_and_busybox() {
        for sh in crate::testing::shells() {
            let shell = sh.name;
            let root = tempfile::tempdir().unwrap();
            let dir = root.path().canonicalize().unwrap().join("store");
            let d = dir.to_str().unwrap();
            let run = |script: &crate::base::script::Script, args: &[&str], stdin: &[u8]| {
                use std::io::Write;
                let mut c = sh
                    .command(script.body, args)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                // A script that reads no stdin may have ended before it is written.
                let _ = c.stdin.take().unwrap().write_all(stdin);
                c.wait_with_output().unwrap()
            };
            let text =
                |o: &std::process::Output| String::from_utf8_lossy(&o.stdout).trim().to_string();
            let ok = |o: std::process::Output| {
                assert!(o.status.success(), "{shell}: {o:?}");
                o
            };
            let files = |kind: &str| -> Vec<String> {
                let mut v: Vec<String> = std::fs::read_dir(dir.join(kind))
                    .map(|e| {
                        e.flatten()
                            .map(|e| e.file_name().to_string_lossy().into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                v.sort();
                v
            };
            assert_eq!(
                text(&ok(run(&script::STORE_PROBE, &[d], b""))),
                "ok",
                "{shell}: not there yet"
            );
            assert!(
                ok(run(&script::STORE_LIST, &[d], b"")).stdout.is_empty(),
                "{shell}"
            );

            let body: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
            let sha = crate::primitives::store::sha256(&body);
            let (a, b) = body.split_at(1_234_567);
            let send = |sha: &str| {
                let file = text(&ok(run(&script::STORE_PUT, &[d, "start", "objects"], a)));
                assert!(
                    file.starts_with(&format!("{d}/objects/.upload.")),
                    "{shell}: {file}"
                );
                let mode = std::fs::metadata(&file).unwrap().permissions().mode();
                assert_eq!(mode & 0o777, 0o600, "{shell}: private until whole");
                ok(run(&script::STORE_PUT, &[d, "append", &file], b));
                run(&script::STORE_PUT, &[d, "object", &file, sha], b"")
            };
            let wrong = send(&"0".repeat(64));
            assert!(!wrong.status.success(), "{shell}");
            assert!(
                String::from_utf8_lossy(&wrong.stderr).contains("nothing was stored"),
                "{shell}"
            );
            assert!(
                files("objects").is_empty(),
                "{shell}: nothing left: {:?}",
                files("objects")
            );
            assert_eq!(text(&ok(send(&sha))), "new", "{shell}");
            let object = dir.join(format!("objects/{sha}.tar.gz"));
            assert_eq!(std::fs::read(&object).unwrap(), body, "{shell}");
            assert_eq!(
                text(&ok(send(&sha))),
                "kept",
                "{shell}: the same bytes, once"
            );
            assert_eq!(files("objects"), vec![format!("{sha}.tar.gz")], "{shell}");

            let m = text(&ok(run(
                &script::STORE_PUT,
                &[d, "start", "manifests"],
                b"{\"id\": 1}\n",
            )));
            ok(run(
                &script::STORE_PUT,
                &[d, "manifest", &m, "0123456789abcdef"],
                b"",
            ));
            assert_eq!(files("manifests"), vec!["0123456789abcdef.json"], "{shell}");
            let listed = ok(run(&script::STORE_LIST, &[d], b"")).stdout;
            assert_eq!(
                listed, b"\x1e0123456789abcdef.json\n{\"id\": 1}\n",
                "{shell}"
            );

            let mut back = Vec::new();
            for skip in ["0", "1", "2"] {
                back.extend(ok(run(&script::STORE_READ, &[d, &sha, skip, "1"], b"")).stdout);
            }
            assert_eq!(back, body, "{shell}: read back in 1 MiB pieces");

            // Old files: an orphan object, a dead upload, a named object; and a young one.
            let old_orphan = format!("{}.tar.gz", "e".repeat(64));
            let young = format!("{}.tar.gz", "f".repeat(64));
            for n in [old_orphan.as_str(), ".upload.AbCdEfGhIj", young.as_str()] {
                std::fs::write(dir.join("objects").join(n), b"x").unwrap();
            }
            let then = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
            for n in [old_orphan.as_str(), ".upload.AbCdEfGhIj"] {
                std::fs::File::options()
                    .write(true)
                    .open(dir.join("objects").join(n))
                    .unwrap()
                    .set_modified(then)
                    .unwrap();
            }
            let mut old: Vec<String> = text(&ok(run(&script::STORE_OLD, &[d], b"")))
                .lines()
                .map(str::to_string)
                .collect();
            old.sort();
            assert_eq!(
                old,
                vec![
                    "objects/.upload.AbCdEfGhIj".to_string(),
                    format!("objects/{old_orphan}")
                ],
                "{shell}"
            );
            let young_rel = format!("objects/{young}");
            let old_rel = format!("objects/{old_orphan}");
            let gone = ok(run(
                &script::STORE_PRUNE,
                &[
                    d,
                    &old_rel,
                    "objects/.upload.AbCdEfGhIj",
                    &young_rel,
                    "manifests/0123456789abcdef.json",
                ],
                b"",
            ));
            assert_eq!(
                text(&gone),
                format!("{old_rel}\nobjects/.upload.AbCdEfGhIj\nmanifests/0123456789abcdef.json"),
                "{shell}: the young orphan is kept"
            );
            assert!(dir.join(&young_rel).exists() && object.exists(), "{shell}");

            // Names outside the store, or not the store's own, are refused.
            let outside = root.path().join("outside");
            std::fs::write(&outside, b"keep").unwrap();
            let o = outside.to_str().unwrap();
            let dotdot = format!("{d}/objects/.upload.../../../outside");
            for (script, args) in [
                (&script::STORE_PUT, vec![d, "append", o]),
                (&script::STORE_PUT, vec![d, "abort", o]),
                (&script::STORE_PUT, vec![d, "abort", dotdot.as_str()]),
                (&script::STORE_PUT, vec![d, "start", "../x"]),
                (&script::STORE_PRUNE, vec![d, "../outside"]),
                (&script::STORE_PRUNE, vec![d, "objects/../../outside"]),
                (&script::STORE_PRUNE, vec![d, "manifests/x.json"]),
                (&script::STORE_READ, vec![d, "../../outside", "0", "1"]),
                (&script::STORE_LIST, vec!["relative/dir"]),
                (&script::STORE_LIST, vec!["/srv/../etc"]),
            ] {
                let out = run(script, &args, b"");
                assert!(!out.status.success(), "{shell}: {} {args:?}", script.name);
                assert!(
                    String::from_utf8_lossy(&out.stderr).contains("runbook store: "),
                    "{shell}: {out:?}"
                );
            }
            assert_eq!(std::fs::read(&outside).unwrap(), b"keep", "{shell}");

            // A link planted where the store keeps its files: nothing is written there.
            let planted = root.path().canonicalize().unwrap().join("planted");
            let elsewhere = root.path().join("elsewhere");
            std::fs::create_dir_all(&planted).unwrap();
            std::fs::create_dir_all(&elsewhere).unwrap();
            std::os::unix::fs::symlink(&elsewhere, planted.join("objects")).unwrap();
            let p = planted.to_str().unwrap();
            for (script, args) in [
                (&script::STORE_PROBE, vec![p]),
                (&script::STORE_PUT, vec![p, "start", "objects"]),
            ] {
                let out = run(script, &args, b"x");
                assert!(!out.status.success(), "{shell}: {}", script.name);
                assert!(
                    String::from_utf8_lossy(&out.stderr).contains("symbolic link"),
                    "{shell}: {out:?}"
                );
            }
            assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "{shell}");
        }
    }
}
