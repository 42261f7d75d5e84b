use super::*;
use std::path::Path;

/// A gzipped tar made by the tar crate's builder, with headers set by hand, so that
/// each hostile entry is exactly what is tested.
pub(crate) fn archive(entries: &[(&str, tar::EntryType, u32, &str)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    for (name, kind, mode, link) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(*kind);
        h.set_mode(*mode);
        h.set_size(0);
        // Set the raw name field: `set_path` refuses `..` and absolute names itself.
        let raw = &mut h.as_old_mut().name;
        raw[..name.len()].copy_from_slice(name.as_bytes());
        if !link.is_empty() {
            h.set_link_name(link).unwrap();
        }
        h.set_cksum();
        b.append(&h, std::io::empty()).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

#[test]
fn hostile_entries_are_each_refused() {
    use tar::EntryType as T;
    let ok = archive(&[
        ("./", T::Directory, 0o755, ""),
        ("./a", T::Regular, 0o644, ""),
        ("./d/l", T::Symlink, 0o777, "../a"),
    ]);
    assert_eq!(check_archive(&ok), Ok(Listing { entries: 3 }));
    let cases: &[(&str, tar::EntryType, u32, &str, &str)] = &[
        ("/etc/x", T::Regular, 0o644, "", "absolute"),
        ("./a/../../x", T::Regular, 0o644, "", "'..'"),
        ("./l", T::Symlink, 0o777, "/etc", "absolute target"),
        ("./d/l", T::Symlink, 0o777, "../../etc", "leads out"),
        ("./l", T::Symlink, 0o777, "a/../../x", "after a name"),
        ("./h", T::Link, 0o644, "./a", "hard link"),
        ("./f", T::Fifo, 0o644, "", "fifo"),
        ("./c", T::Char, 0o644, "", "device"),
        ("./s", T::Regular, 0o4755, "", "setuid"),
        ("./g", T::Directory, 0o2755, "", "setuid/setgid"),
    ];
    for (name, kind, mode, link, why) in cases {
        let e = check_archive(&archive(&[(name, *kind, *mode, link)])).unwrap_err();
        assert!(e[0].contains(why), "{name}: {e:?}");
    }
    let through = archive(&[
        ("./l", T::Symlink, 0o777, "d"),
        ("./l/x", T::Regular, 0o644, ""),
    ]);
    assert!(
        check_archive(&through).unwrap_err()[0].contains("through the symlink ./l")
            || check_archive(&through).unwrap_err()[0].contains("through the symlink l")
    );
    assert!(check_archive(b"not gzip").is_err());
}

#[test]
fn keys_come_from_the_fingerprint_and_diff_by_field() {
    let fp = fingerprint::parse(
        "@python 3.12.3\n@torch 2.11.0+cu128\n@cuda 12.8\n@pkg triton==3.5.0\n@gpu NVIDIA H200, 580.65.06\n@cc 9.0\n@platform Linux x86_64\n@env TRITON_CACHE_DIR=/x\n",
    );
    let k = key_from(&fp, &Key::from([("model".into(), "dflash".into())]));
    assert_eq!(k["torch"], "2.11.0+cu128");
    assert_eq!(k["triton"], "3.5.0");
    assert_eq!(k["gpu"], "NVIDIA H200");
    assert_eq!(k["driver"], "580.65.06");
    assert_eq!(k["compute_capability"], "9.0");
    assert_eq!(k["env.TRITON_CACHE_DIR"], "/x");
    assert_eq!(k["model"], "dflash");
    let mut here = k.clone();
    here.insert("torch".into(), "2.10.0+cu128".into());
    here.remove("model");
    let d = key_diff(&k, &here);
    assert_eq!(
        d.iter().map(diff_line).collect::<Vec<_>>(),
        vec![
            "model: dflash (artifact) ≠ (none) (here)",
            "torch: 2.11.0+cu128 (artifact) ≠ 2.10.0+cu128 (here)"
        ]
    );
    assert!(check_name("dflash-known.good_1").is_ok());
    assert!(check_name("../x").is_err());
    assert!(check_name(".x").is_err());
}

/// pack.sh and unpack.sh themselves, under dash (GNU tar, gzip) and busybox sh with
/// only busybox's applets on PATH (its tar and gzip): a directory packed, put back
/// byte for byte in place of another (which is kept aside), and an archive holding a
/// setuid file or a fifo (which the Rust check refuses first) refused by the script
/// too, with the directory there left as it was and no staging directory behind.
#[test]
fn pack_and_unpack_under_dash_and_busybox() {
    use std::os::unix::fs::PermissionsExt;
    for sh in crate::testing::shells() {
        let shell = sh.name;
        let root = tempfile::tempdir().unwrap();
        let r = root.path().canonicalize().unwrap();
        let src = r.join("src");
        std::fs::create_dir_all(src.join("sub")).unwrap();
        std::fs::write(src.join("a"), b"one\0two\n").unwrap();
        std::fs::write(src.join("sub/b"), vec![7u8; 70_000]).unwrap();
        std::os::unix::fs::symlink("../a", src.join("sub/l")).unwrap();
        std::fs::set_permissions(src.join("a"), std::fs::Permissions::from_mode(0o640)).unwrap();
        let run = |body: &str, args: &[&str], stdin: &[u8]| {
            use std::io::Write;
            let mut c = sh
                .command(body, args)
                .env("HOME", r.as_os_str())
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            c.stdin.take().unwrap().write_all(stdin).unwrap();
            c.wait_with_output().unwrap()
        };
        let rs = r.to_str().unwrap();
        let answer = run(
            script::ARTIFACT_PACK.body,
            &[rs, src.to_str().unwrap()],
            b"",
        );
        assert!(answer.status.success(), "{shell}: {answer:?}");
        let answer = String::from_utf8(answer.stdout).unwrap();
        let (size, file) = answer.trim().split_once(' ').unwrap();
        assert!(
            file.starts_with(&format!("{rs}/.src.runbook-pack.")),
            "{shell}: {file}"
        );
        let mode = std::fs::metadata(file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{shell}: the archive is private");
        let packed = run(script::ARTIFACT_CHUNK.body, &[file, "0", "6", "1"], b"");
        assert!(packed.status.success(), "{shell}: {packed:?}");
        assert_eq!(packed.stdout.len().to_string(), size, "{shell}");
        assert!(
            !Path::new(file).exists(),
            "{shell}: the last piece deletes it"
        );
        assert!(check_archive(&packed.stdout).is_ok(), "{shell}");
        let refused = run(
            script::ARTIFACT_CHUNK.body,
            &[src.join("a").to_str().unwrap(), "0", "6", "1"],
            b"",
        );
        assert!(!refused.status.success(), "{shell}: only pack.sh's files");
        assert!(src.join("a").exists());
        let dst = r.join("dst");
        std::fs::create_dir_all(&dst).unwrap();
        std::fs::write(dst.join("old"), b"old").unwrap();
        let out = run(
            script::ARTIFACT_UNPACK.body,
            &[rs, dst.to_str().unwrap()],
            &packed.stdout,
        );
        assert!(out.status.success(), "{shell}: {out:?}");
        let kept = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(kept.contains("dst.runbook-kept-"), "{shell}: {kept}");
        assert_eq!(std::fs::read(format!("{kept}/old")).unwrap(), b"old");
        assert_eq!(std::fs::read(dst.join("a")).unwrap(), b"one\0two\n");
        assert_eq!(std::fs::read(dst.join("sub/b")).unwrap(), vec![7u8; 70_000]);
        assert_eq!(
            std::fs::read_link(dst.join("sub/l")).unwrap(),
            Path::new("../a")
        );
        let mode = std::fs::metadata(dst.join("a"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640, "{shell}");
        use tar::EntryType as T;
        // A fifo is refused after extraction, with the directory there left as it
        // was; a setuid bit either refuses the same way (busybox keeps the mode) or
        // never reaches the disk (GNU tar drops it under --no-same-permissions).
        for (bad, must_fail) in [
            (
                archive(&[("./", T::Directory, 0o755, ""), ("./f", T::Fifo, 0o644, "")]),
                true,
            ),
            (
                archive(&[
                    ("./", T::Directory, 0o755, ""),
                    ("./s", T::Regular, 0o4755, ""),
                ]),
                false,
            ),
        ] {
            let out = run(
                script::ARTIFACT_UNPACK.body,
                &[rs, dst.to_str().unwrap()],
                &bad,
            );
            if out.status.success() {
                assert!(!must_fail, "{shell}: {out:?}");
                let mode = std::fs::metadata(dst.join("s"))
                    .unwrap()
                    .permissions()
                    .mode();
                assert_eq!(mode & 0o6000, 0, "{shell}: the setuid bit was kept");
                let kept = String::from_utf8_lossy(&out.stdout).trim().to_string();
                std::fs::remove_dir_all(&dst).unwrap();
                std::fs::rename(&kept, &dst).unwrap();
                continue;
            }
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("left as it was"), "{shell}: {err}");
            assert_eq!(std::fs::read(dst.join("a")).unwrap(), b"one\0two\n");
            let left: Vec<String> = std::fs::read_dir(&r)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("staging"))
                .collect();
            assert!(left.is_empty(), "{shell}: {left:?}");
        }
        let err = run(
            script::ARTIFACT_UNPACK.body,
            &[rs, dst.to_str().unwrap()],
            b"not gzip",
        );
        assert!(!err.status.success(), "{shell}");
        assert_eq!(std::fs::read(dst.join("a")).unwrap(), b"one\0two\n");
    }
}
