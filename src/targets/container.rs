//! Containers a target runs commands in: each is entered with its own tool on the parent
//! target (`pct exec`, `lxc-attach`, `docker exec`, `podman exec`, `kubectl exec`), and
//! the command's argv stays the tool's argv, word for word.
//!
//! Docker, Podman and Kubernetes carry a command's words as JSON strings (the engine's
//! API, then the runtime's process spec), which hold only UTF-8: the real `docker` and
//! `podman` were seen to turn a byte `\xff` into U+FFFD. For them a command with a word
//! that is not UTF-8 travels armoured (`sh/utf8_argv.sh`) and is decoded back to its
//! bytes inside the container.

use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Container {
    /// A Proxmox VE container: `pct exec CTID -- argv`.
    Pct(u32),
    /// A plain LXC container: `lxc-attach -n NAME --clear-env -- argv`.
    Lxc {
        name: String,
        /// `--keep-env` instead: the container's commands see the environment of the
        /// `lxc-attach` that entered it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        keep_env: bool,
    },
    /// `docker exec -i [-u USER] NAME argv`.
    Docker {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<String>,
    },
    /// `podman exec -i [-u USER] NAME argv`.
    Podman {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<String>,
    },
    /// `kubectl exec -i [--context=C] [--namespace=NS] [--container=C] POD -- argv`.
    Kube {
        pod: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        container: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<String>,
    },
}

impl Container {
    /// A Docker or Podman container, its name (or id) and the user commands run as.
    pub fn engine(podman: bool, name: &str, user: Option<&str>) -> Result<Container, String> {
        if !is_engine_name(name) {
            return Err(format!(
                "'{name}' is not a container name or id (letters, digits, '_', '.', '-', starting with a letter or digit)"
            ));
        }
        if let Some(u) = user {
            if !is_user(u) {
                return Err(format!(
                    "user: '{u}' is not a user (NAME, UID, NAME:GROUP or UID:GID)"
                ));
            }
        }
        let (name, user) = (name.to_string(), user.map(str::to_string));
        Ok(if podman {
            Container::Podman { name, user }
        } else {
            Container::Docker { name, user }
        })
    }

    pub fn lxc(name: &str, keep_env: bool) -> Result<Container, String> {
        if !is_lxc_name(name) {
            return Err(format!(
                "'{name}' is not an LXC container name (letters, digits, '_', '.', '-', starting with a letter, digit or '_')"
            ));
        }
        Ok(Container::Lxc {
            name: name.to_string(),
            keep_env,
        })
    }

    pub fn kube(
        pod: &str,
        container: Option<&str>,
        namespace: Option<&str>,
        context: Option<&str>,
    ) -> Result<Container, String> {
        if !is_dns_subdomain(pod) {
            return Err(format!(
                "'{pod}' is not a pod name (lower-case letters, digits, '-' and '.', at most 253)"
            ));
        }
        for (what, v) in [("container", container), ("namespace", namespace)] {
            if let Some(v) = v {
                if !is_dns_label(v) {
                    return Err(format!(
                        "{what}: '{v}' is not a {what} name (lower-case letters, digits and '-', at most 63)"
                    ));
                }
            }
        }
        if let Some(c) = context {
            if c.is_empty() || c.starts_with('-') || c.chars().any(char::is_control) {
                return Err(format!(
                    "context: '{c}' is not a kubeconfig context name (not empty, not starting with '-')"
                ));
            }
        }
        Ok(Container::Kube {
            pod: pod.to_string(),
            container: container.map(str::to_string),
            namespace: namespace.map(str::to_string),
            context: context.map(str::to_string),
        })
    }

    /// Checks a container read back from a record as the constructors check a runbook's.
    pub fn validated(self) -> Result<Container, String> {
        match &self {
            Container::Pct(_) => Ok(self),
            Container::Lxc { name, keep_env } => Container::lxc(name, *keep_env),
            Container::Docker { name, user } => Container::engine(false, name, user.as_deref()),
            Container::Podman { name, user } => Container::engine(true, name, user.as_deref()),
            Container::Kube {
                pod,
                container,
                namespace,
                context,
            } => Container::kube(
                pod,
                container.as_deref(),
                namespace.as_deref(),
                context.as_deref(),
            ),
        }
    }

    /// The program that enters the container, on the parent target.
    pub fn tool(&self) -> &'static str {
        match self {
            Container::Pct(_) => "pct",
            Container::Lxc { .. } => "lxc-attach",
            Container::Docker { .. } => "docker",
            Container::Podman { .. } => "podman",
            Container::Kube { .. } => "kubectl",
        }
    }

    /// How the container is named after its parent's name (`node/ct200`,
    /// `node/docker:trainer`), and what its run lock is keyed by after the parent's
    /// destination: the user is part of it, since each user has a lock of their own.
    pub fn label(&self) -> String {
        match self {
            Container::Pct(id) => format!("ct{id}"),
            Container::Lxc { name, .. } => format!("lxc:{name}"),
            Container::Docker { name, user } | Container::Podman { name, user } => {
                let user = user.as_deref().map(|u| format!("{u}@")).unwrap_or_default();
                format!("{}:{user}{name}", self.tool())
            }
            Container::Kube {
                pod,
                container,
                namespace,
                context,
            } => {
                let mut s = String::from("kube:");
                if let Some(ns) = namespace {
                    s.push_str(&format!("{ns}/"));
                }
                s.push_str(pod);
                if let Some(c) = container {
                    s.push_str(&format!(":{c}"));
                }
                if let Some(ctx) = context {
                    s.push_str(&format!("@{ctx}"));
                }
                s
            }
        }
    }

    /// The argv that runs `argv` in this container, for the parent to run.
    pub fn wrap(&self, argv: Vec<OsString>) -> Vec<OsString> {
        let mut out: Vec<OsString> = Vec::new();
        let mut push = |w: &str| out.push(w.into());
        match self {
            Container::Pct(id) => {
                push("pct");
                push("exec");
                push(&id.to_string());
                push("--");
            }
            Container::Lxc { name, keep_env } => {
                push("lxc-attach");
                push("-n");
                push(name);
                push(if *keep_env {
                    "--keep-env"
                } else {
                    "--clear-env"
                });
                push("--");
            }
            Container::Docker { name, user } | Container::Podman { name, user } => {
                push(self.tool());
                push("exec");
                // Standard input is how env values and the command's own input arrive.
                push("-i");
                if let Some(u) = user {
                    push("-u");
                    push(u);
                }
                // Everything after the name is the command's (docker's flag parsing
                // stops at the first word that is not a flag).
                push(name);
            }
            Container::Kube {
                pod,
                container,
                namespace,
                context,
            } => {
                push("kubectl");
                push("exec");
                push("-i");
                if let Some(c) = context {
                    push(&format!("--context={c}"));
                }
                if let Some(ns) = namespace {
                    push(&format!("--namespace={ns}"));
                }
                if let Some(c) = container {
                    push(&format!("--container={c}"));
                }
                push(pod);
                push("--");
            }
        }
        match self {
            Container::Pct(_) | Container::Lxc { .. } => out.extend(argv),
            _ => out.extend(armoured(argv)),
        }
        out
    }

    /// When the tool on `parent` refused to enter the container (the command never
    /// started there), what it said, as a target error: the container is missing or not
    /// running, the tool or the container's `sh` is missing. `None` for anything else.
    pub fn refused(&self, parent: &str, stderr: &str) -> Option<String> {
        let line = |needle: &str| {
            stderr
                .lines()
                .find(|l| l.contains(needle))
                .map(|l| l.trim().to_string())
        };
        let tool = self.tool();
        let this = match self {
            Container::Pct(id) => format!("container {id} on {parent}"),
            Container::Lxc { name, .. } => format!("LXC container '{name}' on {parent}"),
            Container::Docker { name, .. } => format!("Docker container '{name}' on {parent}"),
            Container::Podman { name, .. } => format!("Podman container '{name}' on {parent}"),
            Container::Kube { pod, .. } => format!("pod '{pod}' (from {parent})"),
        };
        let needs_sh = format!(
            "needs sh in {this}: runbook runs every command there through a POSIX sh and setsid"
        );
        // A missing tool: the remote shell's "not found", or this machine's spawn error
        // (which the caller reports itself).
        let missing_tool = [
            format!("{tool}: not found"),
            format!("{tool}: command not found"),
        ];
        for m in &missing_tool {
            if let Some(l) = line(m) {
                return Some(format!("needs {tool} on {parent} to reach {this} ({l})"));
            }
        }
        let known: Vec<(String, String)> = match self {
            // pct runs lxc-attach, whose words for a missing program are the same.
            Container::Pct(_) => vec![
                ("does not exist".into(), format!("{this} does not exist")),
                ("not running".into(), format!("{this} is not running")),
                ("Failed to exec \"sh\"".into(), needs_sh.clone()),
            ],
            Container::Lxc { .. } => vec![
                (
                    "Failed to get init pid".into(),
                    format!("{this} is not running or does not exist"),
                ),
                ("Failed to exec \"sh\"".into(), needs_sh.clone()),
            ],
            Container::Docker { user, .. } | Container::Podman { user, .. } => {
                let no_user = format!(
                    "{this} has no user '{}'",
                    user.as_deref().unwrap_or_default()
                );
                let mut v = vec![
                    ("No such container".into(), format!("{this} does not exist")),
                    (
                        "no container with name or ID".into(),
                        format!("{this} does not exist"),
                    ),
                    ("is not running".into(), format!("{this} is not running")),
                    (
                        "can only create exec sessions on running containers".into(),
                        format!("{this} is not running"),
                    ),
                    ("is paused".into(), format!("{this} is paused")),
                    ("is restarting".into(), format!("{this} is restarting")),
                    (
                        "Cannot connect to the Docker daemon".into(),
                        format!("cannot reach the Docker daemon on {parent}"),
                    ),
                    (
                        "permission denied while trying to connect to the Docker daemon".into(),
                        format!("the user on {parent} may not use Docker"),
                    ),
                    ("unable to find user".into(), no_user),
                ];
                // The engines' words for an exec whose program is missing: docker's
                // `exec: "sh": executable file not found`, podman's (crun's)
                // ``executable file `sh` not found``.
                for sh in ["\"sh\": executable file not found", "`sh` not found"] {
                    v.push((sh.into(), needs_sh.clone()));
                }
                v
            }
            Container::Kube {
                pod,
                container,
                namespace,
                context,
            } => {
                let ns = namespace
                    .as_deref()
                    .map(|n| format!("namespace {n}"))
                    .unwrap_or_else(|| "the context's default namespace".into());
                let c = container.as_deref().unwrap_or("(default)");
                let mut v = vec![
                    (
                        format!("pods \"{pod}\" not found"),
                        format!("no pod '{pod}' in {ns} (from {parent})"),
                    ),
                    (
                        "(NotFound): namespaces".into(),
                        format!("{ns} does not exist (from {parent})"),
                    ),
                    (
                        "is not valid for pod".into(),
                        format!("{this} has no container '{c}'"),
                    ),
                    (
                        "cannot exec into a container in a completed pod".into(),
                        format!("{this} has completed"),
                    ),
                    (
                        "unable to upgrade connection: container not found".into(),
                        format!("container '{c}' of {this} is not running"),
                    ),
                    (
                        "to the server".into(),
                        format!("cannot reach the Kubernetes API server from {parent}"),
                    ),
                    ("\"sh\": executable file not found".into(), needs_sh.clone()),
                ];
                if let Some(ctx) = context {
                    v.push((
                        format!("context \"{ctx}\" does not exist"),
                        format!("kubectl on {parent} has no context '{ctx}'"),
                    ));
                }
                v
            }
        };
        known
            .iter()
            .find_map(|(needle, what)| Some(format!("{what} ({tool}: {})", line(needle)?)))
    }
}

/// `argv` unchanged when every word is UTF-8; otherwise `sh -c UTF8_ARGV sh WORD…` with
/// each word armoured: a backslash doubled, each byte that is not part of UTF-8 as
/// `\0NNN`, which `printf %b` (dash, bash, busybox) turns back into that byte.
pub fn armoured(argv: Vec<OsString>) -> Vec<OsString> {
    if argv
        .iter()
        .all(|w| std::str::from_utf8(w.as_bytes()).is_ok())
    {
        return argv;
    }
    let mut out: Vec<OsString> = vec![
        "sh".into(),
        "-c".into(),
        crate::base::script::UTF8_ARGV.body.into(),
        "sh".into(),
    ];
    out.extend(argv.iter().map(|w| OsString::from(armour(w.as_bytes()))));
    out
}

fn armour(mut bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    loop {
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                out.push_str(&s.replace('\\', "\\\\"));
                return out;
            }
            Err(e) => {
                let (good, rest) = bytes.split_at(e.valid_up_to());
                let good = std::str::from_utf8(good).expect("checked");
                out.push_str(&good.replace('\\', "\\\\"));
                let bad = e.error_len().unwrap_or(rest.len());
                for b in &rest[..bad] {
                    out.push_str(&format!("\\0{b:03o}"));
                }
                bytes = &rest[bad..];
            }
        }
    }
}

fn is_engine_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && b.all(|c| c.is_ascii_alphanumeric() || b"_.-".contains(&c))
        && s.len() <= 255
}

fn is_lxc_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || b"_.-".contains(&c))
        && s.len() <= 255
}

fn is_user(s: &str) -> bool {
    let part = |p: &str| {
        let mut b = p.bytes();
        b.next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
            && b.all(|c| c.is_ascii_alphanumeric() || b"_.-".contains(&c))
    };
    match s.split_once(':') {
        Some((u, g)) => part(u) && part(g),
        None => part(s),
    }
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    fn os(s: &str) -> OsString {
        s.into()
    }

    #[test]
    fn each_tool_gets_the_argv_after_its_own_words() {
        let argv = vec![os("printf"), os("%s"), os("-n"), os("--")];
        let ct = |c: Container| {
            c.wrap(argv.clone())
                .iter()
                .map(|w| w.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(ct(Container::Pct(200)), "pct exec 200 -- printf %s -n --");
        assert_eq!(
            ct(Container::lxc("web", false).unwrap()),
            "lxc-attach -n web --clear-env -- printf %s -n --"
        );
        assert_eq!(
            ct(Container::engine(false, "trainer", Some("app")).unwrap()),
            "docker exec -i -u app trainer printf %s -n --"
        );
        assert_eq!(
            ct(Container::engine(true, "trainer", None).unwrap()),
            "podman exec -i trainer printf %s -n --"
        );
        assert_eq!(
            ct(Container::kube("train-0", Some("main"), Some("ml"), Some("gke_p_z_c")).unwrap()),
            "kubectl exec -i --context=gke_p_z_c --namespace=ml --container=main train-0 -- printf %s -n --"
        );
    }

    #[test]
    fn names_that_a_tool_would_read_as_flags_are_refused() {
        assert!(Container::engine(false, "-privileged", None).is_err());
        assert!(Container::engine(false, "a b", None).is_err());
        assert!(Container::engine(false, "ok", Some("--privileged")).is_err());
        assert!(Container::engine(false, "ok", Some("app:staff")).is_ok());
        assert!(Container::lxc("-n", false).is_err());
        assert!(Container::lxc("a/b", false).is_err());
        assert!(Container::kube("Trainer", None, None, None).is_err());
        assert!(Container::kube("train-0.x", None, None, None).is_ok());
        assert!(Container::kube("p", Some("-c"), None, None).is_err());
        assert!(Container::kube("p", None, None, Some("--kubeconfig=/x")).is_err());
        let e = Container::engine(false, "", None).unwrap_err();
        assert!(e.contains("not a container name"), "{e}");
    }

    /// Armoured words come back as the very bytes under dash, bash (in a UTF-8 locale)
    /// and busybox sh, trailing newlines, backslashes and escapes included.
    #[test]
    fn armoured_words_decode_to_their_bytes_in_every_shell() {
        let words: Vec<OsString> = vec![
            os("printf"),
            os("%s\\0"),
            OsString::from_vec(b"a\xffb".to_vec()),
            OsString::from_vec((1u8..=255).collect()),
            os("\\n \\c \\0101 %b\n\n"),
            os(""),
            os("-n"),
            OsString::from_vec(b"\xe9\x80\n".to_vec()),
        ];
        let argv = armoured(words.clone());
        assert_eq!(argv[0], "sh");
        for w in &argv {
            assert!(std::str::from_utf8(w.as_bytes()).is_ok(), "{w:?}");
        }
        let want: Vec<u8> = words[2..]
            .iter()
            .flat_map(|w| w.as_bytes().iter().copied().chain([0]))
            .collect();
        for sh in crate::testing::shells() {
            let shell = sh.name;
            let out = sh
                .command(argv[2].to_str().unwrap(), &argv[4..])
                .env("LC_ALL", "C.UTF-8")
                .output()
                .unwrap();
            assert!(out.status.success(), "{shell}: {out:?}");
            assert_eq!(out.stdout, want, "{shell}");
        }
        // All UTF-8: nothing to armour, the argv is as given.
        assert_eq!(
            armoured(vec![os("ls"), os("é\\")]),
            vec![os("ls"), os("é\\")]
        );
    }

    #[test]
    fn refusals_name_the_container_and_keep_the_tools_words() {
        let d = Container::engine(false, "trainer", None).unwrap();
        let e = d
            .refused(
                "root@h.example",
                "Error response from daemon: No such container: trainer\n",
            )
            .unwrap();
        assert_eq!(
            e,
            "Docker container 'trainer' on root@h.example does not exist (docker: Error response from daemon: No such container: trainer)"
        );
        let k = Container::kube("p", Some("c"), Some("ml"), None).unwrap();
        let e = k
            .refused(
                "local",
                "Error from server (NotFound): pods \"p\" not found\n",
            )
            .unwrap();
        assert!(e.starts_with("no pod 'p' in namespace ml"), "{e}");
        assert!(k
            .refused("local", "cat: x: No such file or directory: not found")
            .is_none());
        let e = d.refused("h", "sh: 1: exec: docker: not found\n").unwrap();
        assert!(e.starts_with("needs docker on h"), "{e}");
        assert!(d.refused("h", "some output of the command\n").is_none());
    }

    #[test]
    fn a_recorded_container_reads_back_and_is_checked() {
        let c = Container::kube("p", None, Some("ml"), None).unwrap();
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(json, r#"{"kube":{"pod":"p","namespace":"ml"}}"#);
        let back: Container = serde_json::from_str(&json).unwrap();
        assert_eq!(back.clone().validated().unwrap(), c);
        let bad: Container = serde_json::from_str(r#"{"docker":{"name":"-x"}}"#).unwrap();
        assert!(bad.validated().is_err());
        assert_eq!(
            serde_json::to_string(&Container::Pct(200)).unwrap(),
            r#"{"pct":200}"#
        );
    }
}
