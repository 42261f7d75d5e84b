//! `venv.build`: a Python virtual environment built by uv on the target itself.
//!
//! Three phases, all through `Step`:
//! 1. a read (runs in `--dry-run` too) finds uv on the target and looks at what is at the
//!    venv path now;
//! 2. one change action, a small `sh` script, creates the venv, installs, verifies and
//!    (fresh builds) swaps it into place. One action rather than four because the
//!    clean-up of a half-built venv must happen on the target even when the build is
//!    killed (timeout, Ctrl-C, lost runbook) half-way, which only a trap in the same
//!    process can do, and because its command line must be identical in a dry-run and
//!    the real run: the `<ts>` of the build directory is therefore taken on the target;
//! 3. a read lists what ended up installed.

use super::{Cmd, Error, Ran, Result, Step};
use crate::base::script;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// Where `pip install --user uv` puts uv (the pip default for `--user` on Linux).
const USER_UV: &str = ".local/bin/uv";

/// What `venv.build` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct BuildSpec {
    /// Absolute path of the venv on the target.
    pub path: String,
    /// `--python` for `uv venv`: a version (`3.12`) or an interpreter path; `None` lets uv pick.
    pub python: Option<String>,
    /// Requirement specifiers, passed as argv to `uv pip install`.
    pub packages: Vec<String>,
    /// A requirements file on the target (`-r`).
    pub requirements: Option<String>,
    pub index: IndexOptions,
    /// Build beside the venv and swap it in (true), or install into it in place (false).
    pub fresh: bool,
    /// Python code run with the new venv's interpreter before it is put in place.
    pub verify: Option<String>,
    /// Install uv with `python3 -m pip install --user uv` when the target has none.
    pub install_uv: bool,
    /// uv's path on the target, when it is not where it is looked for.
    pub uv: Option<String>,
    /// For the build command (installs of large wheels take long: none by default).
    pub timeout: Option<Duration>,
    /// Run the build detached from the connection (`targets/detach.rs`); `None`: by its
    /// timeout.
    pub detach: Option<bool>,
}

/// Package index options, the same for `uv pip install` and for `pip install uv`.
#[derive(Debug, Clone, Default)]
pub struct IndexOptions {
    pub index_url: Option<String>,
    pub extra_index_urls: Vec<String>,
    pub find_links: Vec<String>,
    pub no_index: bool,
}

impl IndexOptions {
    /// Where packages come from, for a summary: ` from URL`, ` from the default index`,
    /// plus extra indexes and find-links dirs.
    fn described(&self) -> String {
        let mut from = Vec::new();
        if !self.no_index {
            from.push(
                self.index_url
                    .clone()
                    .unwrap_or_else(|| "the default index".into()),
            );
        }
        from.extend(self.extra_index_urls.iter().cloned());
        from.extend(self.find_links.iter().map(|d| format!("find-links {d}")));
        if from.is_empty() {
            " (no index)".to_string()
        } else {
            format!(" from {}", from.join(" + "))
        }
    }

    /// The flags both uv and pip understand with these exact names.
    fn args(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.no_index {
            out.push("--no-index".to_string());
        }
        if let Some(url) = &self.index_url {
            out.extend(["--index-url".to_string(), url.clone()]);
        }
        for url in &self.extra_index_urls {
            out.extend(["--extra-index-url".to_string(), url.clone()]);
        }
        for dir in &self.find_links {
            out.extend(["--find-links".to_string(), dir.clone()]);
        }
        out
    }

    /// The flags for `pip install uv`: the same, except that `index_url` is added to the
    /// default index rather than replacing it. It is usually a wheel index for torch
    /// (download.pytorch.org/whl/cu128), which holds no uv, so as the only index it made
    /// every `install_uv` fail; a private mirror given there is still searched.
    fn args_for_uv(&self) -> Vec<String> {
        IndexOptions {
            index_url: None,
            extra_index_urls: self
                .index_url
                .iter()
                .chain(&self.extra_index_urls)
                .cloned()
                .collect(),
            ..self.clone()
        }
        .args()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Package {
    pub name: String,
    pub version: String,
}

/// The result `venv.build` gives back to Lua.
#[derive(Debug, Serialize)]
pub struct Built {
    pub path: String,
    /// The venv's Python version; when only planned, the requested `python` (if any).
    pub python: Option<String>,
    pub packages: Vec<Package>,
    /// sha256 of the sorted `name==version` lines; `None` when only planned.
    pub hash: Option<String>,
    pub changed: bool,
    pub planned: bool,
}

/// Builds (or, in a dry-run, plans) the venv described by `spec` on the step's target.
pub async fn build(step: &Step<'_>, spec: &BuildSpec) -> Result<Built> {
    let probe = probe(
        step,
        spec.uv.as_deref(),
        spec.python.as_deref(),
        &spec.path,
        spec.timeout,
    )
    .await?;
    if let Some(p) = &probe {
        if p.venv == VenvState::NotVenv {
            return Err(fail(
                step,
                format!(
                    "{} exists and is not a virtual environment (no pyvenv.cfg): refusing to replace it",
                    spec.path
                ),
            ));
        }
    }
    let uv = find_or_install_uv(step, spec, probe.as_ref()).await?;
    if let Some(p) = &probe {
        // A venv is made (fresh, or in place where none is yet): uv needs a Python.
        let makes = spec.fresh || p.venv == VenvState::Missing;
        if let (true, Some(_), Some(why)) = (makes, &p.uv, &p.no_python) {
            let wanted = match &spec.python {
                None => "python3".to_string(),
                Some(v) if v.contains('/') => v.clone(),
                Some(v) => format!("python {v}"),
            };
            return Err(step.fail(format!(
                "venv.build: {}",
                super::needs(
                    &wanted,
                    &step.target.name(),
                    &format!(
                        "uv makes the venv with an installed Python and never downloads one: {why}"
                    )
                )
            )));
        }
    }
    // Replacing an existing venv deletes it; unknown (offline plan) counts as existing.
    let replaces = probe.as_ref().is_none_or(|p| p.venv != VenvState::Missing);
    let destructive = spec.fresh && replaces;
    let ran = step
        .change(build_cmd(spec, &uv), summary(spec), destructive)
        .await?;
    if ran.planned() {
        return Ok(Built {
            path: spec.path.clone(),
            python: spec.python.clone(),
            packages: Vec::new(),
            hash: None,
            changed: true,
            planned: true,
        });
    }
    if !ran.ok() {
        // A fresh build that fails leaves the venv as it was (the new one is removed, the
        // old one put back): no change to count.
        if spec.fresh {
            step.ctx.mark_rolled_back();
        }
        return Err(fail(step, failure(&ran, spec)));
    }
    let (python, packages) = installed(step, &spec.path, &uv).await?;
    Ok(Built {
        path: spec.path.clone(),
        python: Some(python),
        hash: Some(packages_hash(&packages)),
        packages,
        changed: true,
        planned: false,
    })
}

/// An error naming the Lua line (from `step.fail`) and the target.
fn fail(step: &Step<'_>, msg: impl std::fmt::Display) -> Error {
    step.fail(format!("venv.build on {}: {msg}", step.target.name()))
}

// ---------------------------------------------------------------------------------------
// Phase 1: what is on the target

#[derive(Debug, Clone, PartialEq, Eq)]
enum VenvState {
    Missing,
    Venv,
    /// Something that is not a venv: never replaced.
    NotVenv,
}

#[derive(Debug, Clone)]
struct Probe {
    home: String,
    /// uv's path, when it ran (`uv --version` succeeded).
    uv: Option<String>,
    /// uv's words when it found no Python to make a venv with (`uv python find`).
    no_python: Option<String>,
    /// `python3` on PATH (what `install_uv` runs pip with).
    python3: bool,
    venv: VenvState,
}

/// `None` when the read was only planned (`--dry-run --offline`).
async fn probe(
    step: &Step<'_>,
    uv: Option<&str>,
    python: Option<&str>,
    path: &str,
    timeout: Option<Duration>,
) -> Result<Option<Probe>> {
    let mut cmd = Cmd::script(
        &script::VENV_PROBE,
        [uv.unwrap_or(""), path, python.unwrap_or("")],
    )
    .env("UV_PYTHON_DOWNLOADS", "never");
    cmd.timeout = timeout;
    let ran = step
        .read(cmd, format!("look for uv and the venv at {path}"))
        .await?;
    if ran.planned() {
        return Ok(None);
    }
    if !ran.ok() {
        return Err(fail(step, ran.failure("looking for uv", None, timeout)));
    }
    Ok(Some(parse_probe(&ran.stdout())))
}

fn parse_probe(text: &str) -> Probe {
    let mut p = Probe {
        home: String::new(),
        uv: None,
        no_python: None,
        python3: false,
        venv: VenvState::Missing,
    };
    for line in text.lines() {
        match line.split_once('=') {
            Some(("home", v)) => p.home = v.to_string(),
            Some(("uv", v)) => p.uv = Some(v.to_string()),
            Some(("no_python", v)) => p.no_python = Some(v.trim().to_string()),
            Some(("python3", _)) => p.python3 = true,
            Some(("venv", "yes")) => p.venv = VenvState::Venv,
            Some(("venv", "other")) => p.venv = VenvState::NotVenv,
            _ => {}
        }
    }
    p
}

/// The uv to build with: the probe's, else (with `install_uv`) one installed now, else a
/// clear error.
async fn find_or_install_uv(
    step: &Step<'_>,
    spec: &BuildSpec,
    probe: Option<&Probe>,
) -> Result<String> {
    let Some(probe) = probe else {
        // Offline plan: nothing was looked at; show the command with the uv we would look for.
        return Ok(spec.uv.clone().unwrap_or_else(|| "uv".to_string()));
    };
    if let Some(uv) = &probe.uv {
        return Ok(uv.clone());
    }
    if let Some(given) = &spec.uv {
        return Err(fail(
            step,
            format!("uv = \"{given}\" does not run there (`{given} --version` failed)"),
        ));
    }
    let target = step.target.name();
    if !spec.install_uv {
        return Err(step.fail(format!(
            "venv.build: {}",
            super::needs(
                "uv",
                &target,
                "venv.build builds with it; looked on PATH, at ~/.local/bin/uv and \
                 ~/.cargo/bin/uv. Install it there (`python3 -m pip install --user uv`, or see \
                 https://docs.astral.sh/uv/getting-started/installation/), give its path with \
                 `uv = \"/path/to/uv\"`, or pass `install_uv = true` to install it with pip \
                 (needs a reachable package index)"
            )
        )));
    }
    if !probe.python3 {
        return Err(step.fail(format!(
            "venv.build: {}",
            super::needs(
                "python3",
                &target,
                "install_uv = true installs uv with `python3 -m pip install --user uv`, and \
                 there is no uv there either"
            )
        )));
    }
    install_uv(step, spec, &probe.home).await
}

/// `python3 -m pip install --user uv`, with the build's index options (its `index_url` as
/// an extra index: `IndexOptions::args_for_uv`). pip refuses
/// `--user` installs into a distribution's "externally managed" Python (PEP 668) unless
/// told otherwise; a `--user` install does not touch the system's packages, so it is told.
async fn install_uv(step: &Step<'_>, spec: &BuildSpec, home: &str) -> Result<String> {
    let mut argv: Vec<String> = ["python3", "-m", "pip", "install", "--user"]
        .map(String::from)
        .to_vec();
    argv.extend(spec.index.args_for_uv());
    argv.push("uv".to_string());
    let mut cmd = Cmd::new(argv)
        .env("PIP_BREAK_SYSTEM_PACKAGES", "1")
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1");
    cmd.timeout = spec.timeout;
    let ran = step
        .change(cmd, "install uv with pip (--user)", false)
        .await?;
    let uv = format!("{}/{USER_UV}", home.trim_end_matches('/'));
    if ran.planned() {
        return Ok(uv);
    }
    if !ran.ok() {
        let what = "installing uv with `python3 -m pip install --user uv`";
        return Err(fail(
            step,
            format!(
                "{}; install_uv needs network access to PyPI, or index_url/find_links that \
                 hold a uv wheel:{}",
                ran.failed(what, None, spec.timeout),
                ran.stderr_tail(10)
            ),
        ));
    }
    match probe(
        step,
        Some(&uv),
        spec.python.as_deref(),
        &spec.path,
        spec.timeout,
    )
    .await?
    {
        Some(Probe {
            uv: Some(found), ..
        }) => Ok(found),
        _ => Err(fail(
            step,
            format!("pip installed uv, but {uv} does not run (is PYTHONUSERBASE set?)"),
        )),
    }
}

// ---------------------------------------------------------------------------------------
// Phase 2: the build

/// `$1` uv, `$2` venv path, `$3` python for `uv venv` (empty: uv's choice), `$4` `fresh` or
/// `in-place`, `$5` verify code (empty: only check that the interpreter starts); the rest
/// are the arguments of `uv pip install` (none: create only).
///
/// Fresh: build in `PATH.runbook-new-<ts>` (relocatable, because it is renamed after the
/// build), verify, then swap with two renames. A true atomic exchange
/// (renameat2 RENAME_EXCHANGE, `mv --exchange`) is not available from portable sh: it
/// needs coreutils 9.5+ and a filesystem that supports it. So for the moment between the
/// two renames PATH does not exist; a failed second rename puts the old venv back. The
/// venv is checked again where it finally lives, and the old one is restored if that
/// fails; only then is the old one deleted (a venv with torch is gigabytes: keeping every
/// previous one would fill disks). Any failure, or a kill, removes the half-built dir
/// (EXIT trap; the signal traps make sh run it) and leaves PATH untouched. A failed verify
/// exits 4 after naming the venv it ran in (see `VERIFY_FAILED`): `failure` renders the check
/// as a command line with `quote`, as no text pasted together in sh could (the code is
/// any Python, quotes included). SIGPIPE is
/// ignored because runbook stops reading the output when it stops a command: sh's own
/// notice about the killed child would otherwise kill sh before its trap. Leftovers of a
/// build killed too hard to clean up are removed by the next fresh build of that PATH.
fn build_cmd(spec: &BuildSpec, uv: &str) -> Cmd {
    let mode = if spec.fresh { "fresh" } else { "in-place" };
    let mut args: Vec<String> = vec![
        uv.to_string(),
        spec.path.clone(),
        spec.python.clone().unwrap_or_default(),
        mode.to_string(),
        spec.verify.clone().unwrap_or_default(),
    ];
    if !spec.packages.is_empty() || spec.requirements.is_some() {
        args.extend(spec.index.args());
        if let Some(req) = &spec.requirements {
            args.extend(["-r".to_string(), req.clone()]);
        }
        args.extend(spec.packages.iter().cloned());
    }
    // A missing python must be an error, not a download of one.
    let mut cmd = Cmd::script(&script::VENV_BUILD, args).env("UV_PYTHON_DOWNLOADS", "never");
    cmd.timeout = spec.timeout;
    cmd.detach = spec.detach;
    cmd
}

/// `build venv /opt/venv (python 3.12, torch==2.11.0 numpy from https://…/cu128, fresh)`:
/// every package spec (the first few when there are many) and the index they come from,
/// the facts a reviewer approves.
fn summary(spec: &BuildSpec) -> String {
    const SHOWN: usize = 8;
    let python = match &spec.python {
        Some(p) => format!("python {p}"),
        None => "uv's default python".to_string(),
    };
    let mut what = Vec::new();
    if !spec.packages.is_empty() {
        let mut list = spec
            .packages
            .iter()
            .take(SHOWN)
            .map(|p| crate::base::quote::quote_word(std::ffi::OsStr::new(p)))
            .collect::<Vec<_>>()
            .join(" ");
        if spec.packages.len() > SHOWN {
            list.push_str(&format!(" … (+{} more)", spec.packages.len() - SHOWN));
        }
        what.push(list);
    }
    if let Some(req) = &spec.requirements {
        what.push(format!("-r {req}"));
    }
    let mut what = if what.is_empty() {
        "no packages".to_string()
    } else {
        what.join(" + ")
    };
    if !spec.packages.is_empty() || spec.requirements.is_some() {
        what.push_str(&spec.index.described());
    }
    let mode = if spec.fresh { "fresh" } else { "in place" };
    format!("build venv {} ({python}, {what}, {mode})", spec.path)
}

/// What `BUILD` writes on stderr before the venv whose check failed (`say "verify
/// failed in $dir"`, then exit 4).
const VERIFY_FAILED: &str = "venv.build: verify failed in ";

/// The check that failed, as a command line to paste: `cd / && DIR/bin/python -c CODE`,
/// DIR being the venv it ran in as the script named it (the new one beside PATH for a
/// fresh build), rendered by `quote` so any code, quotes and all, reads back as it was.
fn failed_check(stderr: &str, spec: &BuildSpec) -> String {
    let dir = stderr
        .lines()
        .filter_map(|l| l.strip_prefix(VERIFY_FAILED))
        .find(|d| d.starts_with(spec.path.as_str()))
        .unwrap_or(&spec.path);
    let argv: Vec<std::ffi::OsString> = vec![
        format!("{dir}/bin/python").into(),
        "-c".into(),
        spec.verify.clone().unwrap_or_else(|| "pass".into()).into(),
    ];
    crate::base::quote::render_with(&argv, &[], Some("/"), None)
}

fn failure(ran: &Ran, spec: &BuildSpec) -> String {
    let Some(out) = ran.outcome() else {
        return "not run".to_string();
    };
    if out.code == Some(4) && !out.timed_out {
        let stderr = ran.stderr();
        let (what, kept) = if spec.fresh {
            (
                "the new venv",
                format!("it was removed and {} was left as it was", spec.path),
            )
        } else {
            (
                spec.path.as_str(),
                format!("{} may be partly updated (fresh = false)", spec.path),
            )
        };
        let rest: Vec<&str> = stderr
            .lines()
            .filter(|l| !l.starts_with(VERIFY_FAILED))
            .collect();
        return format!(
            "verify failed: {what} did not pass its check; {kept}. The check:\n  {}{}",
            failed_check(&stderr, spec),
            crate::targets::failure::tail(&rest.join("\n"), 20)
        );
    }
    let kept = if spec.fresh {
        format!("{} was left as it was", spec.path)
    } else {
        format!("{} may be partly updated (fresh = false)", spec.path)
    };
    let building = format!("building {}", spec.path);
    let head = out.failed(building, None, spec.timeout);
    format!("{head}; {kept}:{}", out.stderr_tail(20))
}

// ---------------------------------------------------------------------------------------
// Phase 3: what was installed

async fn installed(step: &Step<'_>, path: &str, uv: &str) -> Result<(String, Vec<Package>)> {
    let ran = step
        .read(
            Cmd::script(&script::VENV_LIST, [uv, path]),
            format!("list the packages in {path}"),
        )
        .await?;
    if !ran.ok() {
        let what = format!("built {path}, but listing its packages");
        return Err(fail(step, ran.failure(what, None, None)));
    }
    parse_list(&ran.stdout()).map_err(|e| fail(step, e))
}

fn parse_list(stdout: &str) -> Result<(String, Vec<Package>), String> {
    let (python, json) = stdout
        .split_once('\n')
        .ok_or_else(|| format!("unexpected output listing packages: {stdout:?}"))?;
    let mut packages: Vec<Package> = serde_json::from_str(json.trim())
        .map_err(|e| format!("could not read `uv pip list` output ({e}): {json:?}"))?;
    packages.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((python.trim().to_string(), packages))
}

/// sha256 (hex) of the sorted `name==version` lines, each ending in a newline: two venvs
/// with the same packages have the same hash, whatever the order uv listed them in.
pub fn packages_hash(packages: &[Package]) -> String {
    let mut lines: Vec<String> = packages
        .iter()
        .map(|p| format!("{}=={}\n", p.name, p.version))
        .collect();
    lines.sort();
    let digest = Sha256::digest(lines.concat().as_bytes());
    crate::base::hex::hex(&digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe under dash and under busybox sh (busybox applets only), read back by
    /// `parse_probe`: a venv, something else, nothing; a uv that answers `--version`.
    #[test]
    fn probe_answers_what_parse_probe_reads_under_dash_and_busybox() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        std::fs::create_dir_all(&venv).unwrap();
        std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        let other = dir.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        let uv = dir.path().join("uv");
        std::fs::write(&uv, "#!/bin/sh\necho 'uv 0.9.0'\n").unwrap();
        std::fs::set_permissions(&uv, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        for sh in crate::testing::shells() {
            let shell = sh.name;
            let probe = |at: &std::path::Path| {
                let out = sh
                    .command(script::VENV_PROBE.body, &[uv.as_path(), at])
                    .env("HOME", dir.path())
                    .output()
                    .unwrap();
                parse_probe(&String::from_utf8_lossy(&out.stdout))
            };
            let p = probe(&venv);
            assert!(matches!(p.venv, VenvState::Venv), "{shell}");
            assert_eq!(p.uv.as_deref(), uv.to_str(), "{shell}");
            assert_eq!(p.home, dir.path().display().to_string(), "{shell}");
            assert!(matches!(probe(&other).venv, VenvState::NotVenv), "{shell}");
            assert!(
                matches!(probe(&dir.path().join("none")).venv, VenvState::Missing),
                "{shell}"
            );
        }
    }

    fn spec() -> BuildSpec {
        BuildSpec {
            path: "/opt/venv".into(),
            python: Some("3.12".into()),
            packages: vec!["torch==2.11.0".into(), "numpy".into(), "rich".into()],
            fresh: true,
            ..Default::default()
        }
    }

    /// The check is shown as a command line `quote` rendered: the code's own quotes
    /// survive (pasted into sh text they closed the quoting: `-c 'assert x.V=='9''`), and
    /// the venv is the one the check ran in, as the script named it.
    #[test]
    fn a_failed_check_reads_back_as_the_code_it_ran() {
        assert!(
            script::VENV_BUILD
                .body
                .contains(r#"say "verify failed in $dir"; exit 4"#),
            "VERIFY_FAILED matches what BUILD says"
        );
        let mut s = spec();
        s.verify = Some("import x; assert x.V=='9'".into());
        let stderr =
            "AssertionError\nvenv.build: verify failed in /opt/venv.runbook-new-20250101T000000Z\n";
        assert_eq!(
            failed_check(stderr, &s),
            r#"cd / && /opt/venv.runbook-new-20250101T000000Z/bin/python -c 'import x; assert x.V=='\''9'\'''"#
        );
        assert_eq!(
            failed_check("", &s),
            r#"cd / && /opt/venv/bin/python -c 'import x; assert x.V=='\''9'\'''"#,
            "no line naming the venv: the path itself"
        );
    }

    #[test]
    fn summary_reads_like_a_sentence() {
        assert_eq!(
            summary(&spec()),
            "build venv /opt/venv (python 3.12, torch==2.11.0 numpy rich from the default index, fresh)"
        );
        let s = BuildSpec {
            python: None,
            packages: vec!["a".into()],
            requirements: Some("/r.txt".into()),
            fresh: false,
            ..spec()
        };
        assert_eq!(
            summary(&s),
            "build venv /opt/venv (uv's default python, a + -r /r.txt from the default index, in place)"
        );
        let s = BuildSpec {
            packages: (1..=10).map(|i| format!("p{i}")).collect(),
            index: IndexOptions {
                index_url: Some("https://download.pytorch.org/whl/cu128".into()),
                extra_index_urls: vec!["https://pypi.example/simple".into()],
                ..Default::default()
            },
            ..spec()
        };
        assert_eq!(
            summary(&s),
            "build venv /opt/venv (python 3.12, p1 p2 p3 p4 p5 p6 p7 p8 … (+2 more) from \
             https://download.pytorch.org/whl/cu128 + https://pypi.example/simple, fresh)"
        );
    }

    #[test]
    fn install_arguments_follow_the_fixed_ones() {
        let s = BuildSpec {
            requirements: Some("/r.txt".into()),
            index: IndexOptions {
                index_url: Some("https://i".into()),
                extra_index_urls: vec!["https://e".into()],
                find_links: vec!["/w".into()],
                no_index: true,
            },
            ..spec()
        };
        let cmd = build_cmd(&s, "/u/uv");
        let args: Vec<String> = cmd.argv[4..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "/u/uv",
                "/opt/venv",
                "3.12",
                "fresh",
                "",
                "--no-index",
                "--index-url",
                "https://i",
                "--extra-index-url",
                "https://e",
                "--find-links",
                "/w",
                "-r",
                "/r.txt",
                "torch==2.11.0",
                "numpy",
                "rich"
            ]
        );
        assert_eq!(
            cmd.env,
            vec![("UV_PYTHON_DOWNLOADS".into(), "never".into())]
        );
    }

    #[test]
    fn no_packages_means_no_install_arguments() {
        let s = BuildSpec {
            packages: vec![],
            index: IndexOptions {
                no_index: true,
                ..Default::default()
            },
            ..spec()
        };
        assert_eq!(build_cmd(&s, "uv").argv.len(), 4 + 5);
    }

    #[test]
    fn hash_ignores_order() {
        let a = vec![
            Package {
                name: "b".into(),
                version: "2".into(),
            },
            Package {
                name: "a".into(),
                version: "1".into(),
            },
        ];
        let mut b = a.clone();
        b.reverse();
        assert_eq!(packages_hash(&a), packages_hash(&b));
        // printf 'a==1\nb==2\n' | sha256sum
        assert_eq!(
            packages_hash(&a),
            "913f6e401ad06e0320887eef9ef4dfecb5098d4a55775ff40a415044cdbc22c0"
        );
        assert_ne!(packages_hash(&a), packages_hash(&a[..1]));
    }

    #[test]
    fn reads_the_probe_and_the_list() {
        let p = parse_probe(
            "home=/root\nuv=/root/.local/bin/uv\nuv_version=uv 0.9\nvenv=yes\nvenv_python=3.12.1\n",
        );
        assert_eq!(p.home, "/root");
        assert_eq!(p.uv.as_deref(), Some("/root/.local/bin/uv"));
        assert_eq!(p.venv, VenvState::Venv);
        assert_eq!(
            parse_probe("home=/x\nvenv=other\n").venv,
            VenvState::NotVenv
        );
        assert!(parse_probe("home=/x\nvenv=none\n").uv.is_none());

        let (py, pk) = parse_list(
            "3.11.2\n[{\"name\":\"rich\",\"version\":\"13\"},{\"name\":\"attrs\",\"version\":\"1\",\"editable_project_location\":\"/x\"}]\n",
        )
        .unwrap();
        assert_eq!(py, "3.11.2");
        assert_eq!(pk[0].name, "attrs");
        assert_eq!(pk.len(), 2);
        assert!(parse_list("garbage").is_err());
    }
}
