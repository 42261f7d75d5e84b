//! The cache scripts themselves, run under dash, bash and busybox sh (with busybox's
//! applets only, as on an Alpine-like target) on temp dirs: what they delete, what they
//! refuse, and that a symlink or a mount on the way never takes them outside the root.
//! Mounts need root (CI runs as root); without it those tests fail and say so.

use super::{parse, Kept, Kind};
use crate::base::script::{CACHE_DELETE, CACHE_MOVE_ASIDE, CACHE_PROBE, CACHE_RESTORE};
use crate::testing::shells;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn text(o: &Output) -> String {
    format!(
        "exit {:?}, stdout {:?}, stderr {:?}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A cache root and, beside it, a directory outside it with a canary file.
struct Scene {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

impl Scene {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("canary"), "stay").unwrap();
        Scene {
            _tmp: tmp,
            root,
            outside,
        }
    }

    fn canary_ok(&self) -> bool {
        std::fs::read_to_string(self.outside.join("canary")).is_ok_and(|t| t == "stay")
    }
}

/// A cache tree with what a walk must get right: nested dirs, names with spaces, a
/// newline, a leading dash, dot files, and a symlink out of the root (removed, not
/// followed).
fn make_cache(dir: &Path, outside: &Path) {
    for d in [
        "a/b/c",
        "with space/x",
        "-dash",
        ".hidden/.more",
        "new\nline",
        "ends in a newline\n",
        "..dots",
    ] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
        std::fs::write(dir.join(d).join("f"), "x").unwrap();
    }
    std::fs::write(dir.join(".dotfile"), "x").unwrap();
    std::fs::write(dir.join("a/b/c/-rf"), "x").unwrap();
    symlink(outside, dir.join("a/out")).unwrap();
    symlink(outside.join("canary"), dir.join("canary-link")).unwrap();
}

#[test]
fn delete_deletes_the_path_and_nothing_around_it_under_every_shell() {
    for sh in shells() {
        let sc = Scene::new();
        let cache = sc.root.join("p q/cache");
        make_cache(&cache, &sc.outside);
        std::fs::write(sc.root.join("p q/sibling"), "x").unwrap();
        let o = sh.run(CACHE_DELETE.body, &[s(&sc.root), s(&cache)]);
        assert!(o.status.success(), "{}: {}", sh.name, text(&o));
        assert!(!cache.exists(), "{}: the cache is still there", sh.name);
        assert!(sc.root.join("p q/sibling").exists(), "{}", sh.name);
        assert!(
            sc.canary_ok(),
            "{}: the canary outside was touched",
            sh.name
        );
        // A file, and a path that is gone already.
        std::fs::write(sc.root.join("p q/file"), "x").unwrap();
        let o = sh.run(
            CACHE_DELETE.body,
            &[s(&sc.root), s(&sc.root.join("p q/file"))],
        );
        assert!(
            o.status.success() && !sc.root.join("p q/file").exists(),
            "{}: {}",
            sh.name,
            text(&o)
        );
        let o = sh.run(CACHE_DELETE.body, &[s(&sc.root), s(&cache)]);
        assert!(o.status.success(), "{}: {}", sh.name, text(&o));
    }
}

#[test]
fn delete_refuses_symlinks_on_the_way_and_paths_outside_the_root_under_every_shell() {
    for sh in shells() {
        let sc = Scene::new();
        std::fs::create_dir_all(sc.outside.join("cache")).unwrap();
        std::fs::write(sc.outside.join("cache/f"), "x").unwrap();
        symlink(&sc.outside, sc.root.join("link")).unwrap();
        symlink(sc.outside.join("cache"), sc.root.join("cache-link")).unwrap();
        let linked_root = sc.root.with_extension("link");
        symlink(&sc.root, &linked_root).unwrap();
        let cases: Vec<(Vec<String>, &str)> = vec![
            (
                vec![s(&sc.root).into(), format!("{}/link/cache", s(&sc.root))],
                "link is not a directory any more",
            ),
            (
                vec![s(&sc.root).into(), format!("{}/cache-link", s(&sc.root))],
                "is a symlink now",
            ),
            (
                vec![s(&sc.root).into(), s(&sc.outside.join("cache")).into()],
                "is not inside the cache root",
            ),
            (
                vec![s(&sc.root).into(), s(&sc.root).into()],
                "is not inside",
            ),
            (
                vec![
                    s(&sc.root).into(),
                    format!("{}/../outside/cache", s(&sc.root)),
                ],
                "part",
            ),
            (vec!["/".into(), "/tmp".into()], "/ is never a cache root"),
            (vec!["".into(), "/x/y".into()], "not an absolute path"),
            (
                vec![
                    s(&linked_root).into(),
                    format!("{}/link/cache", s(&linked_root)),
                ],
                "(swapped for a symlink?)",
            ),
        ];
        for (args, why) in &cases {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = sh.run(CACHE_DELETE.body, &args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                o.status.code() == Some(1) && err.contains(why),
                "{}: {args:?}: expected '{why}': {}",
                sh.name,
                text(&o)
            );
            assert!(
                sc.outside.join("cache/f").exists() && sc.canary_ok(),
                "{}: {args:?}",
                sh.name
            );
        }
    }
}

#[test]
fn move_aside_and_restore_act_beside_the_path_under_every_shell() {
    for sh in shells() {
        let sc = Scene::new();
        let cache = sc.root.join("a/cache");
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::write(cache.join("f"), "known good").unwrap();
        let o = sh.run(CACHE_MOVE_ASIDE.body, &[s(&sc.root), s(&cache)]);
        assert!(o.status.success(), "{}: {}", sh.name, text(&o));
        let kept = String::from_utf8_lossy(&o.stdout).trim_end().to_string();
        assert!(
            kept.starts_with(&format!("{}.runbook-kept-2", cache.display())),
            "{}: {kept}",
            sh.name
        );
        assert!(
            !cache.exists() && Path::new(&kept).join("f").exists(),
            "{}",
            sh.name
        );
        // A second one in the same second gets .1.
        std::fs::create_dir_all(&cache).unwrap();
        let o = sh.run(CACHE_MOVE_ASIDE.body, &[s(&sc.root), s(&cache)]);
        let second = String::from_utf8_lossy(&o.stdout).trim_end().to_string();
        assert!(
            o.status.success() && second.starts_with(&format!("{}.runbook-kept-", cache.display())),
            "{}: {}",
            sh.name,
            text(&o)
        );
        assert_ne!(kept, second);
        // Restore in place of an empty directory; a non-empty one stops it.
        std::fs::create_dir_all(cache.join("new")).unwrap();
        let o = sh.run(CACHE_RESTORE.body, &[s(&sc.root), s(&cache), &kept]);
        assert!(
            o.status.code() == Some(1) && String::from_utf8_lossy(&o.stderr).contains("not empty"),
            "{}: {}",
            sh.name,
            text(&o)
        );
        std::fs::remove_dir(cache.join("new")).unwrap();
        let o = sh.run(CACHE_RESTORE.body, &[s(&sc.root), s(&cache), &kept]);
        assert!(o.status.success(), "{}: {}", sh.name, text(&o));
        assert_eq!(
            std::fs::read_to_string(cache.join("f")).unwrap(),
            "known good",
            "{}",
            sh.name
        );
        // A kept copy that is not beside the path, or not a kept copy of it, is refused.
        for (k, why) in [
            (
                format!("{}/elsewhere/cache.runbook-kept-1", s(&sc.root)),
                "is not beside",
            ),
            (format!("{}/a/other", s(&sc.root)), "is not a kept copy"),
        ] {
            let o = sh.run(CACHE_RESTORE.body, &[s(&sc.root), s(&cache), &k]);
            assert!(
                o.status.code() == Some(1) && String::from_utf8_lossy(&o.stderr).contains(why),
                "{}: {}",
                sh.name,
                text(&o)
            );
        }
        // Through a symlinked parent, nothing moves.
        symlink(&sc.outside, sc.root.join("l")).unwrap();
        let o = sh.run(
            CACHE_MOVE_ASIDE.body,
            &[s(&sc.root), &format!("{}/l/canary", s(&sc.root))],
        );
        assert!(
            o.status.code() == Some(1) && sc.canary_ok(),
            "{}: {}",
            sh.name,
            text(&o)
        );
    }
}

/// A mount made for a test, unmounted when it ends (before its temp dir is removed).
struct Mounted(PathBuf);

impl Mounted {
    fn new(args: &[&str], at: &Path) -> Self {
        let o = Command::new("mount")
            .args(args)
            .arg(at)
            .output()
            .expect("running mount");
        assert!(
            o.status.success(),
            "this test mounts a filesystem, which needs root (CI runs as root): mount {args:?} {}: {}",
            at.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        Mounted(at.to_path_buf())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// A bind mount under the path (the path has a space: `/proc/self/mounts` says `\040`)
/// is seen by the delete's own look and refused; a filesystem mounted there is never
/// entered even where the mount list cannot be read (`/proc` hidden in a mount
/// namespace): GNU rm's --one-file-system or the walk's device check stop at it.
#[test]
fn delete_never_crosses_a_mount_under_every_shell() {
    for sh in shells() {
        let sc = Scene::new();
        let cache = sc.root.join("with space/cache");
        let sub = cache.join("sub dir");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(cache.join("f"), "x").unwrap();
        {
            let _bind = Mounted::new(&["--bind", s(&sc.outside)], &sub);
            let o = sh.run(CACHE_DELETE.body, &[s(&sc.root), s(&cache)]);
            assert!(
                o.status.code() == Some(1)
                    && String::from_utf8_lossy(&o.stderr).contains("a filesystem is mounted at"),
                "{}: {}",
                sh.name,
                text(&o)
            );
            assert!(
                sc.canary_ok() && cache.join("f").exists(),
                "{}: {}",
                sh.name,
                text(&o)
            );
        }
        {
            let _tmpfs = Mounted::new(&["-t", "tmpfs", "runbook-test"], &sub);
            std::fs::write(sub.join("canary"), "stay").unwrap();
            std::fs::create_dir_all(cache.join("a/b")).unwrap();
            let c = sh.command(CACHE_DELETE.body, &[s(&sc.root), s(&cache)]);
            let mut hidden = Command::new("unshare");
            hidden
                .args([
                    "-m",
                    "sh",
                    "-c",
                    "mount -t tmpfs none /proc && exec \"$0\" \"$@\"",
                ])
                .arg(c.get_program())
                .args(c.get_args())
                .env("PATH", sh.path())
                .current_dir("/");
            let o = hidden.output().expect("unshare");
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                o.status.code() == Some(1)
                    && (err.contains("on another filesystem") || err.contains("different device")),
                "{}: {}",
                sh.name,
                text(&o)
            );
            assert_eq!(
                std::fs::read_to_string(sub.join("canary")).unwrap(),
                "stay",
                "{}",
                sh.name
            );
        }
    }
}

/// Swaps two names in a directory again and again (`renameat2` `RENAME_EXCHANGE`) on a
/// thread until dropped, or until one of them is gone.
struct Swapper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Swapper {
    fn start(a: &Path, b: &Path) -> Self {
        use std::os::unix::ffi::OsStrExt;
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
        let (a, b, flag) = (c(a), c(b), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut n = 0;
            while !flag.load(Ordering::Relaxed) {
                // SAFETY: two valid NUL-terminated paths.
                let r = unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        a.as_ptr(),
                        libc::AT_FDCWD,
                        b.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    )
                };
                if r != 0 {
                    break; // the delete got to the names: the race is over
                }
                n += 1;
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
            n
        });
        Swapper {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Inside the tree being deleted, a directory is swapped for a symlink to a directory
/// outside the root holding files of the same names, again and again. Busybox `rm -rf`
/// walks by path names and deletes some of those files; the delete script never does,
/// under any shell.
#[test]
fn delete_survives_a_directory_swapped_for_a_symlink_mid_walk_under_every_shell() {
    const TRIES: usize = 30;
    for sh in shells() {
        let sc = Scene::new();
        let names: Vec<String> = (0..200).map(|i| format!("f{i}")).collect();
        for n in &names {
            std::fs::write(sc.outside.join(n), "stay").unwrap();
        }
        for _ in 0..TRIES {
            let cache = sc.root.join("cache");
            std::fs::create_dir_all(cache.join("sub")).unwrap();
            for n in &names {
                std::fs::write(cache.join("sub").join(n), "x").unwrap();
            }
            symlink(&sc.outside, cache.join("other")).unwrap();
            let swapper = Swapper::start(&cache.join("sub"), &cache.join("other"));
            let o = sh.run(CACHE_DELETE.body, &[s(&sc.root), s(&cache)]);
            drop(swapper);
            let lost: Vec<&String> = names
                .iter()
                .filter(|n| !sc.outside.join(n).exists())
                .collect();
            assert!(
                lost.is_empty(),
                "{}: deleted outside the root: {lost:?}; {}",
                sh.name,
                text(&o)
            );
            let _ = std::fs::remove_dir_all(&cache); // never follows a symlink
        }
        assert!(sc.canary_ok(), "{}", sh.name);
    }
}

/// The probe under every shell: a bind mount under a path with a space and one whose name
/// has a tab (written `\040`, `\011` by the kernel) are both seen, decoded; kept copies
/// are listed beside the resolved path.
#[test]
fn the_probe_sees_mounts_decoded_and_kept_copies_under_every_shell() {
    for sh in shells() {
        let sc = Scene::new();
        let cache = sc.root.join("a b/cache");
        let spaced = cache.join("sub dir");
        let tabbed = cache.join("t\tab");
        std::fs::create_dir_all(&spaced).unwrap();
        std::fs::create_dir_all(&tabbed).unwrap();
        let kept = sc.root.join("a b/cache.runbook-kept-20250101T000000Z");
        std::fs::create_dir_all(kept.join("d")).unwrap();
        std::fs::write(kept.join("d/k"), vec![b'k'; 3000]).unwrap();
        symlink(sc.root.join("a b"), sc.root.join("link")).unwrap();
        let _m1 = Mounted::new(&["--bind", s(&sc.outside)], &spaced);
        let _m2 = Mounted::new(&["--bind", s(&sc.outside)], &tabbed);
        let through = format!("{}/link/cache", s(&sc.root));
        let o = sh.run(CACHE_PROBE.body, &["clear", "1", s(&sc.root), &through]);
        assert!(o.status.success(), "{}: {}", sh.name, text(&o));
        let probe = parse(
            &String::from_utf8_lossy(&o.stdout),
            &[s(&sc.root).into()],
            std::slice::from_ref(&through),
        )
        .unwrap_or_else(|e| panic!("{}: {e:?}: {}", sh.name, text(&o)));
        let f = &probe.paths[0];
        assert_eq!(
            (f.kind, f.resolved.as_str()),
            (Kind::Dir, s(&cache)),
            "{}",
            sh.name
        );
        let mut mounts = f.mounts.clone();
        mounts.sort();
        assert_eq!(
            mounts,
            vec![s(&spaced).to_string(), s(&tabbed).to_string()],
            "{}: {}",
            sh.name,
            text(&o)
        );
        assert_eq!(
            f.kept,
            vec![Kept {
                path: s(&kept).to_string(),
                bytes: 3000,
                files: 1
            }],
            "{}: measured like the path itself",
            sh.name
        );
    }
}

/// The probe under every shell: a path that leads (through a symlink) to names with a
/// newline or a tab, or that ends in a newline, is answered as unusable and never
/// printed, so it cannot add records of its own; a kept copy with one is left out.
#[test]
fn the_probe_never_prints_a_name_with_a_newline_or_a_tab_under_every_shell() {
    use super::ProbeError;
    for sh in shells() {
        let sc = Scene::new();
        let forged = format!(
            "A\tdir\t0\t0\t0\nroot\t1\t{o}\t{o}\npath\t1\t{o}/v\t{o}/v",
            o = s(&sc.outside)
        );
        let full = sc.root.join(&forged);
        std::fs::create_dir_all(&full).unwrap();
        symlink(full.parent().unwrap(), sc.root.join("lnk")).unwrap();
        std::fs::create_dir_all(sc.root.join("nl\n")).unwrap();
        symlink(sc.root.join("nl\n"), sc.root.join("lnk2")).unwrap();
        let plain = sc.root.join("plain");
        std::fs::create_dir_all(plain.join("d")).unwrap();
        std::fs::create_dir_all(sc.root.join("plain.runbook-kept-x\nroot")).unwrap();
        for path in [
            format!("{}/lnk/v", s(&sc.root)),
            format!("{}/lnk2", s(&sc.root)),
        ] {
            let o = sh.run(CACHE_PROBE.body, &["clear", "1", s(&sc.root), &path]);
            assert!(o.status.success(), "{}: {}", sh.name, text(&o));
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(out.contains("unusable\tpath\t1\n"), "{}: {out}", sh.name);
            assert!(!out.contains(s(&sc.outside)), "{}: printed: {out}", sh.name);
            let e = parse(&out, &[s(&sc.root).into()], std::slice::from_ref(&path)).unwrap_err();
            assert!(
                matches!(&e, ProbeError::Unusable(m) if m.starts_with(&path)),
                "{}: {e:?}",
                sh.name
            );
        }
        let o = sh.run(CACHE_PROBE.body, &["clear", "1", s(&sc.root), s(&plain)]);
        let out = String::from_utf8_lossy(&o.stdout);
        let probe = parse(&out, &[s(&sc.root).into()], &[s(&plain).into()])
            .unwrap_or_else(|e| panic!("{}: {e:?}: {out}", sh.name));
        assert!(probe.paths[0].kept.is_empty(), "{}: {out}", sh.name);
        assert!(sc.canary_ok(), "{}", sh.name);
    }
}

/// One size for a directory under every shell, whichever primitive measures it: the
/// cache probe (`cache.size`, `cache.clear`'s preview), `fingerprint.take` and
/// `warmup.run` all say the apparent bytes of the regular files and how many there are.
/// The tree has what used to make them disagree: directories (4 KiB each on ext4 in
/// `du -b`), a sparse file (its blocks are not its size), a symlink out (not followed),
/// a fifo and an empty directory (nothing), a name with a newline (one file).
#[test]
fn every_measure_says_the_same_size_under_every_shell() {
    use crate::primitives::{fingerprint, warmup};
    for sh in shells() {
        let sc = Scene::new();
        let cache = sc.root.join("c");
        std::fs::create_dir_all(cache.join("sub/deeper")).unwrap();
        std::fs::create_dir_all(cache.join("empty")).unwrap();
        std::fs::write(cache.join("a"), vec![b'a'; 100]).unwrap();
        std::fs::write(cache.join("sub/deeper/new\nline"), vec![b'b'; 200]).unwrap();
        let sparse = std::fs::File::create(cache.join("sub/sparse")).unwrap();
        sparse.set_len(5 * 1024 * 1024).unwrap();
        std::fs::write(sc.outside.join("big"), vec![b'x'; 70_000]).unwrap();
        symlink(sc.outside.join("big"), cache.join("link-out")).unwrap();
        let fifo = Command::new("mkfifo")
            .arg(cache.join("fifo"))
            .status()
            .unwrap();
        assert!(fifo.success());
        let want = (5 * 1024 * 1024 + 300, 3);

        let o = sh.run(CACHE_PROBE.body, &["size", "1", s(&sc.root), s(&cache)]);
        let probe = parse(
            &String::from_utf8_lossy(&o.stdout),
            &[s(&sc.root).into()],
            &[s(&cache).into()],
        )
        .unwrap_or_else(|e| panic!("{}: {e:?}: {}", sh.name, text(&o)));
        let f = &probe.paths[0];
        assert_eq!((f.bytes, f.files), want, "{}: cache probe", sh.name);

        let o = sh.run(
            crate::base::script::FINGERPRINT.body,
            &["/nonexistent/python", "", s(&cache)],
        );
        let fp = fingerprint::parse(&String::from_utf8_lossy(&o.stdout));
        let c = &fp.caches[s(&cache)];
        assert_eq!(
            (c.bytes, c.files),
            want,
            "{}: fingerprint: {}",
            sh.name,
            text(&o)
        );

        // Through a symlink to the cache, as a warm-up's cache dir may be.
        let link = sc.root.join("c-link");
        symlink(&cache, &link).unwrap();
        let o = sh.run(
            crate::base::script::WARMUP_MEASURE.body,
            &[s(&link), s(&cache.join("nothing"))],
        );
        let out = String::from_utf8_lossy(&o.stdout);
        let sizes: Vec<_> = out.lines().map(warmup::parse_size).collect();
        assert_eq!(
            sizes,
            vec![Some((want.1, want.0)), None],
            "{}: warm-up measure: {}",
            sh.name,
            text(&o)
        );
    }
}
