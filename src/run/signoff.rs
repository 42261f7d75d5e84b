//! Signed plans: the author's signature and the approvals of others, made and checked
//! with the SSH keys people already have (`ssh-keygen -Y sign` / `-Y verify`, OpenSSH 8.2
//! or later), against the team's policy (`runbook.toml`'s `[policy]`).
//!
//! What is signed is a short text naming the role, the plan file's sha256 and, for an
//! approval, when it expires; the signature's namespace is `runbook-plan`, so that a
//! signature made for anything else (a git commit, a file) never counts. Signatures sit
//! beside the plan in `PLAN.approvals`, one JSON object a line, appended: the author's
//! first (`plan -o PLAN --sign`), then each approval (`approve PLAN`). Who signed is never
//! taken from the file: it is the principal the `allowed_signers` file gives the key that
//! made the signature (`ssh-keygen -Y find-principals`), so one person with two keys is
//! one approver, and a key the file does not list is nobody.

use crate::base::project::Policy;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

/// The namespace of every signature runbook makes or accepts.
pub const NAMESPACE: &str = "runbook-plan";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Author,
    Approver,
}

/// One line of `PLAN.approvals`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    pub role: Role,
    /// sha256 of the plan file, hex.
    pub plan_sha256: String,
    /// RFC 3339, UTC: when it was made.
    pub signed: String,
    /// RFC 3339, UTC: after this an approval no longer counts (none for the author's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// `ssh-keygen -Y sign`'s armored signature of [`Signature::message`].
    pub signature: String,
}

impl Signature {
    /// The text that is signed: every field but the signature, one per line.
    pub fn message(&self) -> String {
        let role = match self.role {
            Role::Author => "author",
            Role::Approver => "approver",
        };
        let mut m = format!(
            "runbook-plan v1\nrole {role}\nplan-sha256 {}\nsigned {}\n",
            self.plan_sha256, self.signed
        );
        if let Some(e) = &self.expires {
            m.push_str(&format!("expires {e}\n"));
        }
        m
    }
}

/// `PLAN.approvals` beside `plan`.
pub fn approvals_path(plan: &Path) -> PathBuf {
    let mut p = plan.as_os_str().to_owned();
    p.push(".approvals");
    PathBuf::from(p)
}

/// Signs as `role` with the key at `key` (a private key file, or a public key whose
/// private half an ssh-agent holds).
pub fn sign(
    key: &Path,
    role: Role,
    plan_sha256: &str,
    ttl: Option<Duration>,
) -> Result<Signature, String> {
    let now = SystemTime::now();
    let mut sig = Signature {
        role,
        plan_sha256: plan_sha256.to_string(),
        signed: humantime::format_rfc3339_seconds(now).to_string(),
        expires: ttl.map(|t| humantime::format_rfc3339_seconds(now + t).to_string()),
        signature: String::new(),
    };
    let mut args: Vec<&std::ffi::OsStr> = vec!["-Y".as_ref(), "sign".as_ref()];
    // A public key: its private half is in the agent (`-U`, OpenSSH 8.9 on; older ones
    // find it there by themselves).
    let public = key.extension().is_some_and(|e| e == "pub");
    if public {
        args.push("-U".as_ref());
    }
    args.extend([
        "-n".as_ref(),
        NAMESPACE.as_ref(),
        "-f".as_ref(),
        key.as_os_str(),
    ]);
    let out = keygen(&args, sig.message().as_bytes())?;
    if !out.status.success() {
        return Err(format!(
            "ssh-keygen could not sign with {}: {}",
            key.display(),
            said(&out)
        ));
    }
    sig.signature = String::from_utf8_lossy(&out.stdout).into_owned();
    Ok(sig)
}

/// Appends `sig` to `PLAN.approvals` (made 0600 when new).
pub fn append(plan: &Path, sig: &Signature) -> Result<PathBuf, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = approvals_path(plan);
    let mut line = serde_json::to_string(sig).expect("a signature serializes");
    line.push('\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    f.write_all(line.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// What the signatures beside a plan establish under a policy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verified {
    pub author: Option<String>,
    /// Distinct approvers other than the author, in file order.
    pub approvers: Vec<String>,
    /// Each signature that does not count, and why (line number first).
    pub rejected: Vec<String>,
}

/// Reads and checks every signature of `PLAN.approvals` against the plan's sha256, the
/// clock and `allowed_signers`.
pub fn verify(plan: &Path, plan_sha256: &str, policy: &Policy) -> Result<Verified, String> {
    let path = approvals_path(plan);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    if !policy.allowed_signers.is_file() {
        return Err(format!(
            "the policy's allowed_signers file {} cannot be read",
            policy.allowed_signers.display()
        ));
    }
    let shown = path.display();
    let now = SystemTime::now();
    let mut v = Verified::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("{shown}:{}", i + 1);
        let sig: Signature = match serde_json::from_str(line) {
            Ok(s) => s,
            Err(e) => {
                v.rejected.push(format!("{at}: not a signature line: {e}"));
                continue;
            }
        };
        if sig.plan_sha256 != plan_sha256 {
            v.rejected.push(format!(
                "{at}: signed another plan (sha256 {}…, this one is {}…)",
                short(&sig.plan_sha256),
                short(plan_sha256)
            ));
            continue;
        }
        if let Some(expires) = &sig.expires {
            match humantime::parse_rfc3339(expires) {
                Ok(t) if t > now => {}
                Ok(_) => {
                    v.rejected.push(format!("{at}: expired at {expires}"));
                    continue;
                }
                Err(_) => {
                    v.rejected
                        .push(format!("{at}: expires {expires:?} is not a time"));
                    continue;
                }
            }
        } else if sig.role == Role::Approver {
            v.rejected
                .push(format!("{at}: an approval without an expiry"));
            continue;
        }
        let who = match principal(&sig, &policy.allowed_signers) {
            Ok(who) => who,
            Err(why) => {
                v.rejected.push(format!("{at}: {why}"));
                continue;
            }
        };
        match sig.role {
            Role::Author if v.author.is_none() => v.author = Some(who),
            Role::Author => v
                .rejected
                .push(format!("{at}: a second author signature ({who})")),
            Role::Approver => {
                if v.author.as_deref() == Some(who.as_str()) {
                    v.rejected
                        .push(format!("{at}: {who} approved their own plan (not counted)"));
                } else if v.approvers.contains(&who) {
                    v.rejected
                        .push(format!("{at}: {who} approved already (counted once)"));
                } else {
                    v.approvers.push(who);
                }
            }
        }
    }
    Ok(v)
}

/// The principal `allowed_signers` gives the signature's key, once the signature is
/// verified as theirs, in runbook's namespace, over this very message.
pub fn principal(sig: &Signature, signers: &Path) -> Result<String, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temp dir: {e}"))?;
    let file = dir.path().join("sig");
    std::fs::write(&file, &sig.signature).map_err(|e| format!("cannot write a temp file: {e}"))?;
    let found = keygen(
        &[
            "-Y".as_ref(),
            "find-principals".as_ref(),
            "-s".as_ref(),
            file.as_os_str(),
            "-f".as_ref(),
            signers.as_os_str(),
        ],
        b"",
    )?;
    if !found.status.success() {
        return Err(format!(
            "signed with a key {} does not list",
            signers.display()
        ));
    }
    let names = String::from_utf8_lossy(&found.stdout).into_owned();
    for who in names.lines().map(str::trim).filter(|w| !w.is_empty()) {
        let ok = keygen(
            &[
                "-Y".as_ref(),
                "verify".as_ref(),
                "-f".as_ref(),
                signers.as_os_str(),
                "-I".as_ref(),
                who.as_ref(),
                "-n".as_ref(),
                NAMESPACE.as_ref(),
                "-s".as_ref(),
                file.as_os_str(),
            ],
            sig.message().as_bytes(),
        )?;
        if ok.status.success() {
            return Ok(who.to_string());
        }
    }
    Err("the signature does not verify (edited, or made for something else)".into())
}

fn keygen(args: &[&std::ffi::OsStr], stdin: &[u8]) -> Result<std::process::Output, String> {
    let mut child = Command::new("ssh-keygen")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run ssh-keygen (OpenSSH 8.2 or later signs plans): {e}"))?;
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin);
    }
    child
        .wait_with_output()
        .map_err(|e| format!("ssh-keygen: {e}"))
}

fn said(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

fn short(sha: &str) -> &str {
    &sha[..12.min(sha.len())]
}

/// How many approvers the policy asks of this plan: the global count, or more where a
/// rule matches one of its changes (`group`: a target of that inventory group, or a
/// container on one; `deletes`: a destructive change).
pub fn required(
    policy: &Policy,
    plan: &crate::actions::plan::Plan,
    groups: &dyn Fn(&str) -> Vec<String>,
) -> (u32, Vec<String>) {
    let mut need = policy.approvers;
    let mut why = vec![format!("{} for every plan", policy.approvers)];
    for rule in &policy.rule {
        let members = rule.group.as_deref().map(groups);
        let hits = plan.changes.iter().any(|c| {
            let in_group = match &members {
                None => true,
                Some(m) => {
                    let host = c.target.split('/').next().unwrap_or(&c.target);
                    m.iter().any(|n| n == &c.target || n == host)
                }
            };
            in_group && (!rule.deletes || c.destructive)
        });
        if hits && rule.approvers > need {
            need = rule.approvers;
            why.push(format!(
                "{} for {}{}",
                rule.approvers,
                if rule.deletes {
                    "a [deletes] change"
                } else {
                    "a change"
                },
                rule.group
                    .as_deref()
                    .map_or(String::new(), |g| format!(" on group {g}"))
            ));
        }
    }
    (need, why)
}

/// [`required`], with the groups of `inventory` (without one, no group has a member).
pub fn required_in(
    policy: &Policy,
    plan: &crate::actions::plan::Plan,
    inventory: Option<&crate::base::inventory::Inventory>,
) -> (u32, Vec<String>) {
    let groups = |name: &str| -> Vec<String> {
        inventory
            .and_then(|i| i.group(name).ok())
            .unwrap_or_default()
    };
    required(policy, plan, &groups)
}
