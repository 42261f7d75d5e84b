//! Real LXC containers for the tests, made and started by this harness and reached
//! through `tests/bin/lxc/pct`, which does what Proxmox's `pct exec` does.
//!
//! Four containers, named by their VMID as on Proxmox:
//! - 931 `Busybox`: `lxc-create -t busybox`, nothing but busybox (Debian's, which has no
//!   `flock` applet): what an Alpine CT looks like, minus flock.
//! - 932 `BusyboxUtil`: the same, plus util-linux's `flock` and `setsid` (as on Alpine
//!   after `apk add util-linux`): busybox userland that can take runbook's run lock.
//! - 933 `Minbase`: `debootstrap --variant=minbase` of the host's Debian suite: GNU
//!   coreutils, findutils, util-linux, bash, no python3, git or procps.
//! - 934 `Debian`: minbase plus `python3` and `git`, and this machine's uv copied into
//!   /usr/local/bin.
//!
//! The Debian root filesystems are built once per machine and kept as tarballs in
//! `$RUNBOOK_TEST_CACHE` (default /var/cache/runbook-tests, root's, never world-writable),
//! named by suite, architecture and package list, so CI that keeps that directory pays for
//! debootstrap once. The containers themselves stay between runs; each carries a marker
//! (`runbook-test` beside its config) written last, so a container left half-made, made by
//! another version of this harness, or that no longer starts is destroyed and made again.
//! Making and starting happen under one lock (`lxc.lock` in the cache directory), so
//! parallel test binaries, and other checkouts on the same machine, never race; a running
//! container with the right marker is never touched.
//!
//! PID 1 of the Debian containers is LXC's own `init.lxc` (bind-mounted from the host),
//! which reaps orphans as an init must; a minbase system has no init of its own.
//!
//! Without LXC (not root, `lxc-create` or `debootstrap` missing, a container that cannot
//! start) the tests skip with a message, unless `RUNBOOK_REQUIRE_LXC=1` (scripts/test sets
//! it): then they fail.
#![allow(dead_code)]

use super::{subst, Effect, Event, Output, Run};
use std::ffi::OsString;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Busybox,
    BusyboxUtil,
    Minbase,
    Debian,
}

pub const ALL: [Kind; 4] = [
    Kind::Busybox,
    Kind::BusyboxUtil,
    Kind::Minbase,
    Kind::Debian,
];

impl Kind {
    pub fn vmid(self) -> &'static str {
        match self {
            Kind::Busybox => "931",
            Kind::BusyboxUtil => "932",
            Kind::Minbase => "933",
            Kind::Debian => "934",
        }
    }

    /// Packages debootstrap adds to minbase (sorted: part of the cache key).
    fn packages(self) -> &'static [&'static str] {
        match self {
            Kind::Debian => &["git", "python3"],
            _ => &[],
        }
    }

    fn debian(self) -> bool {
        matches!(self, Kind::Minbase | Kind::Debian)
    }

    /// What the container's marker says: a container whose marker differs is made again.
    /// Bump the version when what `make` produces changes.
    fn marker(self) -> String {
        match self {
            Kind::Busybox => "busybox v1".into(),
            Kind::BusyboxUtil => "busybox + util-linux flock, setsid v1".into(),
            Kind::Minbase | Kind::Debian => format!(
                "{} + init.lxc{} v1",
                rootfs_key(self.packages()),
                if self == Kind::Debian { " + uv" } else { "" }
            ),
        }
    }

    fn index(self) -> usize {
        ALL.iter().position(|k| *k == self).unwrap()
    }
}

/// A container that runs, ready for commands.
pub struct Ct {
    pub kind: Kind,
    pub vmid: &'static str,
}

/// The container of `kind`, made and started if needed (once per test process); `None`
/// when LXC is not there and not required.
pub fn container(kind: Kind) -> Option<Ct> {
    static READY: [OnceLock<Result<(), String>>; 4] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    let ready = READY[kind.index()].get_or_init(|| {
        let _lock = Lock::take()?;
        ensure(kind)
    });
    match ready {
        Ok(()) => Some(Ct {
            kind,
            vmid: kind.vmid(),
        }),
        Err(why) if std::env::var("RUNBOOK_REQUIRE_LXC").as_deref() == Ok("1") => {
            panic!("LXC is required here (RUNBOOK_REQUIRE_LXC=1) but: {why}")
        }
        Err(why) => {
            eprintln!("skipped: no LXC container {} ({why})", kind.vmid());
            None
        }
    }
}

/// Runs a command of the harness's own, its stdout on success.
pub fn sh(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn lxcpath() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        PathBuf::from(sh(&["lxc-config", "lxc.lxcpath"]).unwrap_or_else(|_| "/var/lib/lxc".into()))
    })
    .clone()
}

/// Where the root filesystem tarballs and the lock live: root's own directory, never one
/// another user can write (a planted tarball would become a container's root).
pub fn cache_dir() -> PathBuf {
    std::env::var_os("RUNBOOK_TEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/runbook-tests"))
}

fn checked_cache_dir() -> Result<PathBuf, String> {
    let dir = cache_dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let meta = std::fs::symlink_metadata(&dir).map_err(|e| e.to_string())?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err(format!(
            "{} must be a directory of uid {me} that no one else can write (mode {:o}, uid {})",
            dir.display(),
            meta.mode() & 0o7777,
            meta.uid()
        ));
    }
    Ok(dir)
}

/// The machine-wide lock for making and starting containers (flock on `lxc.lock`).
struct Lock(std::fs::File);

impl Lock {
    fn take() -> Result<Lock, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root: LXC containers need root here".into());
        }
        if sh(&["sh", "-c", "command -v lxc-create"]).is_err() {
            return Err("lxc-create is not installed (scripts/test installs lxc)".into());
        }
        let path = checked_cache_dir()?.join("lxc.lock");
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor this function owns; released when it closes.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(format!("cannot lock {}", path.display()));
        }
        Ok(Lock(file))
    }
}

fn state(vmid: &str) -> Option<String> {
    sh(&["lxc-info", "-n", vmid, "-s", "-H"]).ok()
}

fn marker_path(vmid: &str) -> PathBuf {
    lxcpath().join(vmid).join("runbook-test")
}

/// Makes the container when it is missing or not as this harness makes it, starts it,
/// and waits until a command runs in it; a container that will not come up is made again,
/// once.
fn ensure(kind: Kind) -> Result<(), String> {
    let vmid = kind.vmid();
    let current = state(vmid).is_some()
        && std::fs::read_to_string(marker_path(vmid)).ok().as_deref() == Some(&kind.marker());
    if current {
        match start(vmid) {
            Ok(()) => return Ok(()),
            Err(e) => eprintln!("lxc: container {vmid} does not come up ({e}); making it again"),
        }
    }
    destroy(vmid)?;
    let t0 = Instant::now();
    make(kind)?;
    start(vmid)?;
    eprintln!(
        "lxc: made container {vmid} ({:?}) in {:.1?}",
        kind,
        t0.elapsed()
    );
    Ok(())
}

fn start(vmid: &str) -> Result<(), String> {
    if state(vmid).as_deref() != Some("RUNNING") {
        // A container whose init died is STOPPED but may still hold its monitor.
        let _ = sh(&["lxc-stop", "-n", vmid, "-k"]);
        sh(&["lxc-start", "-n", vmid, "-d"])?;
    }
    let t0 = Instant::now();
    while sh(&["lxc-attach", "-n", vmid, "--clear-env", "--", "true"]).is_err() {
        if t0.elapsed() > Duration::from_secs(20) {
            return Err(format!("container {vmid} did not come up"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// Removes the container whatever state it is in (also a directory lxc-destroy no longer
/// recognises as a container).
fn destroy(vmid: &str) -> Result<(), String> {
    let dir = lxcpath().join(vmid);
    if state(vmid).is_some() {
        let _ = sh(&["lxc-stop", "-n", vmid, "-k"]);
        let _ = sh(&["lxc-destroy", "-n", vmid, "-f"]);
    }
    if dir.exists() {
        remove_tree(&dir)?;
    }
    Ok(())
}

/// `rm -rf --one-file-system`: a half-made container may still have a bind mount inside.
fn remove_tree(dir: &Path) -> Result<(), String> {
    sh(&[
        "rm",
        "-rf",
        "--one-file-system",
        "--",
        &dir.display().to_string(),
    ])
    .map(|_| ())
}

/// `lxc-create` of container `name` from LXC's busybox template, without a network (the
/// tests need none, and this machine has no bridge); its directory.
pub fn create_busybox(name: &str) -> Result<PathBuf, String> {
    sh(&["lxc-create", "-n", name, "-t", "busybox"])?;
    let dir = lxcpath().join(name);
    let config = dir.join("config");
    let text = std::fs::read_to_string(&config).map_err(|e| e.to_string())?;
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("lxc.net.0."))
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        + "lxc.net.0.type = empty\n";
    std::fs::write(&config, text).map_err(|e| e.to_string())?;
    Ok(dir)
}

fn make(kind: Kind) -> Result<(), String> {
    let vmid = kind.vmid();
    let dir = lxcpath().join(vmid);
    match kind {
        Kind::Busybox | Kind::BusyboxUtil => {
            create_busybox(vmid)?;
            if kind == Kind::BusyboxUtil {
                // The busybox template binds the host's /lib and /usr/lib into the
                // container, so util-linux's binaries run there as they are.
                let bin = dir.join("rootfs/usr/local/bin");
                std::fs::create_dir_all(&bin).map_err(|e| e.to_string())?;
                for prog in ["flock", "setsid"] {
                    let from = which(prog)?;
                    std::fs::copy(&from, bin.join(prog))
                        .map_err(|e| format!("copy {}: {e}", from.display()))?;
                }
            }
        }
        Kind::Minbase | Kind::Debian => {
            let tarball = rootfs_tarball(kind.packages())?;
            let cache = checked_cache_dir()?;
            let conf = cache.join(format!("lxc-{vmid}.conf"));
            std::fs::write(&conf, debian_config(vmid, &dir)).map_err(|e| e.to_string())?;
            // lxc-create wants the rootfs the config names to exist already.
            let rootfs = dir.join("rootfs");
            std::fs::create_dir_all(&rootfs).map_err(|e| e.to_string())?;
            std::fs::set_permissions(&rootfs, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| e.to_string())?;
            sh(&[
                "lxc-create",
                "-n",
                vmid,
                "-t",
                "none",
                "-B",
                "dir",
                "-f",
                &conf.display().to_string(),
            ])?;
            sh(&[
                "tar",
                "--numeric-owner",
                "-xpzf",
                &tarball.display().to_string(),
                "-C",
                &rootfs.display().to_string(),
            ])?;
            if kind == Kind::Debian {
                // Not a pyenv shim (a script that needs pyenv): the binary scripts/test
                // puts there.
                let uv = PathBuf::from("/usr/local/bin/uv");
                if !uv.exists() {
                    return Err(
                        "no uv binary in /usr/local/bin (scripts/test puts one there)".into(),
                    );
                }
                std::fs::copy(&uv, rootfs.join("usr/local/bin/uv"))
                    .map_err(|e| format!("copy {}: {e}", uv.display()))?;
            }
        }
    }
    std::fs::write(marker_path(vmid), kind.marker()).map_err(|e| e.to_string())
}

fn which(prog: &str) -> Result<PathBuf, String> {
    sh(&["sh", "-c", &format!("command -v {prog}")])
        .map(PathBuf::from)
        .map_err(|_| format!("{prog} is not installed on this machine"))
}

/// The container's whole config: LXC's common settings, no network, and LXC's own init
/// in front of a process that only waits (a minbase system has no init).
fn debian_config(vmid: &str, dir: &Path) -> String {
    format!(
        "lxc.include = /usr/share/lxc/config/common.conf\n\
         lxc.arch = {arch}\n\
         lxc.uts.name = {vmid}\n\
         lxc.rootfs.path = dir:{rootfs}\n\
         lxc.net.0.type = empty\n\
         lxc.apparmor.profile = generated\n\
         lxc.apparmor.allow_nesting = 1\n\
         lxc.mount.entry = /usr/sbin/init.lxc.static usr/sbin/init.lxc none ro,bind,create=file 0 0\n\
         lxc.init.cmd = /usr/sbin/init.lxc -n {vmid} -- /bin/sleep infinity\n",
        arch = std::env::consts::ARCH,
        rootfs = dir.join("rootfs").display(),
    )
}

/// The host's Debian suite (`VERSION_CODENAME`), else bookworm; `RUNBOOK_TEST_SUITE`
/// overrides it.
fn suite() -> String {
    if let Ok(s) = std::env::var("RUNBOOK_TEST_SUITE") {
        return s;
    }
    let release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let field = |name: &str| {
        release
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .map(|v| v.trim_matches('"').to_string())
    };
    match (field("ID").as_deref(), field("VERSION_CODENAME")) {
        (Some("debian"), Some(code)) if !code.is_empty() => code,
        _ => "bookworm".into(),
    }
}

fn arch() -> String {
    sh(&["dpkg", "--print-architecture"]).unwrap_or_else(|_| "amd64".into())
}

/// `debian-bookworm-amd64-minbase` or `…-minbase+git+python3`: the cache key.
fn rootfs_key(packages: &[&str]) -> String {
    let mut key = format!("debian-{}-{}-minbase", suite(), arch());
    for p in packages {
        key.push('+');
        key.push_str(p);
    }
    key
}

/// The cached root filesystem for minbase plus `packages`, built with debootstrap when it
/// is not there yet (under the lock; the tarball appears by rename, whole or not at all).
fn rootfs_tarball(packages: &[&str]) -> Result<PathBuf, String> {
    let cache = checked_cache_dir()?;
    let key = rootfs_key(packages);
    let tarball = cache.join(format!("{key}.tar.gz"));
    if tarball.exists() {
        return Ok(tarball);
    }
    if sh(&["sh", "-c", "command -v debootstrap"]).is_err() {
        return Err("debootstrap is not installed (scripts/test installs it)".into());
    }
    // What a build killed half-way left (we hold the lock: no build runs now).
    let build = cache.join(format!("build-{key}"));
    if build.exists() {
        remove_tree(&build)?;
    }
    let part_prefix = format!("{key}.tar.gz.part-");
    for e in std::fs::read_dir(&cache)
        .map_err(|e| e.to_string())?
        .flatten()
    {
        if e.file_name().to_string_lossy().starts_with(&part_prefix) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let mirror = std::env::var("RUNBOOK_TEST_MIRROR")
        .unwrap_or_else(|_| "http://deb.debian.org/debian".into());
    let log = cache.join(format!("{key}.debootstrap.log"));
    let mut args: Vec<String> = vec![
        "1800".into(),
        "debootstrap".into(),
        "--variant=minbase".into(),
    ];
    if !packages.is_empty() {
        args.push(format!("--include={}", packages.join(",")));
    }
    args.extend([suite(), build.display().to_string(), mirror]);
    let t0 = Instant::now();
    eprintln!(
        "lxc: building {key} with debootstrap (once; cached in {})",
        cache.display()
    );
    let status = Command::new("timeout")
        .args(&args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).map_err(|e| e.to_string())?)
        .stderr(Stdio::from(
            std::fs::File::options()
                .append(true)
                .open(&log)
                .map_err(|e| e.to_string())?,
        ))
        .status()
        .map_err(|e| format!("debootstrap: {e}"))?;
    if !status.success() {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(8).collect();
        let _ = remove_tree(&build);
        return Err(format!(
            "debootstrap {key} failed ({status}); the end of {}:\n{}",
            log.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    let built = t0.elapsed();
    // The package archives and lists are apt's download cache: half the size, no use here.
    sh(&[
        "sh",
        "-c",
        r#"rm -f -- "$1"/var/cache/apt/archives/*.deb "$1"/var/cache/apt/*.bin; rm -rf -- "$1"/var/lib/apt/lists/*"#,
        "sh",
        &build.display().to_string(),
    ])?;
    let part = cache.join(format!("{key}.tar.gz.part-{}", std::process::id()));
    sh(&[
        "tar",
        "--numeric-owner",
        "-czf",
        &part.display().to_string(),
        "-C",
        &build.display().to_string(),
        ".",
    ])?;
    std::fs::rename(&part, &tarball).map_err(|e| e.to_string())?;
    remove_tree(&build)?;
    eprintln!(
        "lxc: built {key}: debootstrap {built:.1?}, with the tarball {:.1?}",
        t0.elapsed()
    );
    Ok(tarball)
}

/// How runbook's commands reach the container: Proxmox's two `pct exec` env modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvMode {
    /// PVE 8: `lxc-attach --keep-env`, runbook's own environment goes in.
    Keep,
    /// PVE 9: `lxc-attach --clear-env`.
    Clear,
}

impl EnvMode {
    pub fn word(self) -> &'static str {
        match self {
            EnvMode::Keep => "keep",
            EnvMode::Clear => "clear",
        }
    }
}

impl Ct {
    /// The target name runbook gives it (`local/ct931`).
    pub fn target(&self) -> String {
        format!("local/ct{}", self.vmid)
    }

    /// `target("local"):pct(VMID)` as Lua.
    pub fn lua(&self) -> String {
        format!("target(\"local\"):pct({})", self.vmid)
    }

    pub fn rootfs(&self) -> PathBuf {
        lxcpath().join(self.vmid).join("rootfs")
    }

    /// `sh -c SCRIPT` inside the container, as root, with LXC's default PATH.
    pub fn attach(&self, script: &str) -> std::process::Output {
        Command::new("lxc-attach")
            .args(["-n", self.vmid, "--clear-env", "--", "sh", "-c", script])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// `attach`'s stdout, trimmed; the script must succeed.
    pub fn inside(&self, script: &str) -> String {
        let out = self.attach(script);
        assert!(
            out.status.success(),
            "in container {}: {script}: {}",
            self.vmid,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The processes in the container (its own PID namespace) whose command line holds
    /// `needle`, as `PID ARGS` lines: read from /proc, since minbase has no ps.
    pub fn processes(&self, needle: &str) -> Vec<String> {
        let out = Command::new("lxc-attach")
            .args(["-n", self.vmid, "--clear-env", "--", "sh", "-c"])
            .arg(
                r#"for d in /proc/[0-9]*; do
  s=$(cat "$d/stat" 2>/dev/null) || continue
  s=${s##*) }; case $s in Z*) continue ;; esac
  a=$(tr '\0\n' '  ' < "$d/cmdline" 2>/dev/null)
  case $a in *"$1"*) printf '%s %s\n' "${d#/proc/}" "$a" ;; esac
done"#,
            )
            .args(["sh", needle])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            // The scan's own shell and its children hold the needle too.
            .filter(|l| !l.contains("for d in /proc"))
            .map(str::to_string)
            .collect()
    }

    /// A fresh directory of this test's own inside the container (`/root/rbt/…`).
    pub fn dir(&self) -> CtDir<'_> {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "t{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let path = format!("/root/rbt/{name}");
        let host = self.rootfs().join(path.trim_start_matches('/'));
        std::fs::create_dir_all(&host).unwrap();
        CtDir {
            ct: self,
            path,
            host,
            needles: Default::default(),
        }
    }
}

/// A directory inside the container for one test: `path` as the container sees it,
/// `host` as this machine does (the container's root is a plain directory). Dropping it
/// kills what still runs from it in the container and removes it.
pub struct CtDir<'a> {
    pub ct: &'a Ct,
    pub path: String,
    pub host: PathBuf,
    /// More command-line needles whose processes are killed on drop (`kill_on_drop`).
    needles: std::cell::RefCell<Vec<String>>,
}

impl CtDir<'_> {
    /// Processes whose command line holds `needle` are killed when this is dropped too
    /// (a test's processes that do not name its directory), so a failing test leaves
    /// nothing running in the container.
    pub fn kill_on_drop(&self, needle: &str) {
        self.needles.borrow_mut().push(needle.to_string());
    }

    /// `PATH/NAME` inside the container.
    pub fn at(&self, name: &str) -> String {
        format!("{}/{name}", self.path)
    }

    /// Writes a file (parents made), as the container will see it at `at(name)`.
    pub fn write(&self, name: &str, text: &str) -> String {
        let p = self.host.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        self.at(name)
    }

    /// Copies a file or tree of this machine into the directory, keeping modes.
    pub fn copy(&self, from: &Path, name: &str) -> String {
        let to = self.host.join(name);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        let st = Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(&to)
            .status()
            .unwrap();
        assert!(st.success(), "cp {} {}", from.display(), to.display());
        self.at(name)
    }
}

impl Drop for CtDir<'_> {
    fn drop(&mut self) {
        let mut needles = self.needles.take();
        needles.push(self.path.clone());
        for line in needles.iter().flat_map(|n| self.ct.processes(n)) {
            if let Some(pid) = line.split_whitespace().next() {
                let _ = self.ct.attach(&format!("kill -9 {pid}"));
            }
        }
        let _ = remove_tree(&self.host);
    }
}

/// `runbook run` of `body` (after a header and `local box = <the container>`) with the
/// LXC `pct` first on PATH, in `mode`, with `extra` args. In keep mode the run lock is a
/// file in the test's directory (runbook's environment reaches the container); in clear
/// mode it is the container's own default, shared by the tests, so the run waits for it.
pub fn run(env: &super::Env, dir: &CtDir<'_>, mode: EnvMode, body: &str, extra: &[&str]) -> Output {
    CtRun::new(env, dir, mode).go(body, extra)
}

/// A run with more to it than `run`: fields of the `runbook {}` header, directories in
/// front of PATH (they exist in the container only: PATH reaches it in keep mode), more
/// environment.
pub struct CtRun<'a> {
    env: &'a super::Env,
    dir: &'a CtDir<'a>,
    mode: EnvMode,
    pub header: String,
    pub path_first: Vec<String>,
    pub vars: Vec<(String, String)>,
}

impl<'a> CtRun<'a> {
    pub fn new(env: &'a super::Env, dir: &'a CtDir<'a>, mode: EnvMode) -> Self {
        CtRun {
            env,
            dir,
            mode,
            header: String::new(),
            path_first: Vec::new(),
            vars: Vec::new(),
        }
    }

    pub fn header(mut self, fields: &str) -> Self {
        self.header = fields.to_string();
        self
    }

    pub fn path_first(mut self, dir: &str) -> Self {
        self.path_first.push(dir.to_string());
        self
    }

    pub fn var(mut self, k: &str, v: &str) -> Self {
        self.vars.push((k.into(), v.into()));
        self
    }

    /// Runs `body` `--yes --json` with `extra`, three minutes at most.
    pub fn go(&self, body: &str, extra: &[&str]) -> Output {
        let header = if self.header.is_empty() {
            String::new()
        } else {
            format!(", {}", self.header)
        };
        let rb = self.env.write(
            "ct.lua",
            &subst(
                r#"runbook { name = "real-ct"@header@ }
local box = @ct@
@body@"#,
                &[
                    ("header", &header),
                    ("ct", &self.dir.ct.lua()),
                    ("body", &body),
                ],
            ),
        );
        let path_first: Vec<&str> = self.path_first.iter().map(String::as_str).collect();
        let mut run = on_ct(Run::new(self.env, rb), self.dir, self.mode, &path_first);
        for (k, v) in &self.vars {
            run = run.env(k, v);
        }
        run = run.yes().json().args(extra);
        if self.mode == EnvMode::Clear {
            // The container's own lock, which the other tests in it take too.
            run = run.args(["--lock-wait", "2m"]);
        }
        run.timeout(Duration::from_secs(180)).run()
    }
}

/// `run` as `CtRun` sets it up: the LXC `pct` (and `path_first`) first on PATH, `mode`,
/// and the run lock where `mode` puts it.
pub fn on_ct<'e>(run: Run<'e>, dir: &CtDir<'_>, mode: EnvMode, path_first: &[&str]) -> Run<'e> {
    let mut path: Vec<OsString> = path_first.iter().map(OsString::from).collect();
    path.push(super::repo().join("tests/bin/lxc").into_os_string());
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let path = path.join(std::ffi::OsStr::new(":"));
    let run = run.env("PATH", path).env("PCT_ENV", mode.word());
    match mode {
        EnvMode::Keep => run.env("RUNBOOK_LOCK_FILE", dir.at("runbook.lock")),
        EnvMode::Clear => run.env_remove("RUNBOOK_LOCK_FILE"),
    }
}

/// How many change actions ran (started, not only planned).
pub fn changes_started(out: &Output) -> usize {
    pick!(
        out.run_events(),
        Event::ActionStarted {
            effect: Effect::Change,
            ..
        }
    )
    .len()
}

/// Generates one test per container kind: `NAME::busybox`, `NAME::busybox_util`,
/// `NAME::minbase`, `NAME::debian`, each calling `$body(&Ct)`. A kind that is skipped
/// (no LXC, not required) passes with a message.
#[macro_export]
macro_rules! in_containers {
    ($name:ident, [$($kind:ident),+], $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                #[allow(non_snake_case)]
                fn $kind() {
                    if let Some(ct) = $crate::common::lxc::container($crate::in_containers!(@kind $kind)) {
                        ($body)(&ct)
                    }
                }
            )+
        }
    };
    ($name:ident, $body:expr) => {
        $crate::in_containers!($name, [busybox, busybox_util, minbase, debian], $body);
    };
    (@kind busybox) => { $crate::common::lxc::Kind::Busybox };
    (@kind busybox_util) => { $crate::common::lxc::Kind::BusyboxUtil };
    (@kind minbase) => { $crate::common::lxc::Kind::Minbase };
    (@kind debian) => { $crate::common::lxc::Kind::Debian };
}
