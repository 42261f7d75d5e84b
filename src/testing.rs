//! Helpers for the unit tests only.

/// A directory with one link per busybox applet and nothing else: as a PATH, what an
/// Alpine-like target offers (its `rm`, `kill`, `setsid`, `find` are busybox's).
pub fn busybox_applets() -> tempfile::TempDir {
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("these tests need busybox (apt-get install busybox-static; scripts/test does)");
    let list = std::process::Command::new(busybox)
        .arg("--list")
        .output()
        .expect("busybox --list runs");
    assert!(list.status.success(), "busybox --list failed");
    let dir = tempfile::tempdir().unwrap();
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        std::os::unix::fs::symlink(busybox, dir.path().join(applet)).unwrap();
    }
    dir
}

/// The shells a target's scripts must work under, each with the PATH it gets: dash with
/// this machine's tools, and busybox sh with only `applets` (from [`busybox_applets`]).
pub fn posix_shells(applets: &tempfile::TempDir) -> [(String, String); 2] {
    let system = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    [
        ("dash".to_string(), system),
        (
            applets.path().join("sh").display().to_string(),
            applets.path().display().to_string(),
        ),
    ]
}
