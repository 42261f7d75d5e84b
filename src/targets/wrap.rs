//! Argv transformations for commands that run somewhere runbook cannot set up the
//! process itself (over SSH, inside a container): working directory and environment
//! become argv words, and a wrapper makes the remote process tree killable.
//!
//! All of it stays argv; `quote.rs` renders the final argv once for the remote shell.

use super::pump::PGID_MARKER;
use super::ExecRequest;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

/// `env K=V … sh -c 'cd -- "$1" || exit; shift; exec "$@"' sh DIR argv…`, or less when
/// there is no env or cwd. Values never enter a script text: they travel as arguments.
pub fn env_and_cwd(req: &ExecRequest) -> Result<Vec<OsString>, String> {
    let mut argv: Vec<OsString> = Vec::new();
    if !req.env.is_empty() {
        if req.argv[0].to_string_lossy().contains('=') && req.cwd.is_none() {
            return Err("with `env`, the program name cannot contain '='".into());
        }
        argv.push("env".into());
        for (k, v) in &req.env {
            argv.push(format!("{k}={v}").into());
        }
    }
    if let Some(dir) = &req.cwd {
        argv.extend([
            "sh".into(),
            "-c".into(),
            r#"cd -- "$1" || exit 1; shift; exec "$@""#.into(),
            "sh".into(),
        ]);
        argv.push(dir.into());
    }
    argv.extend(req.argv.iter().cloned());
    Ok(argv)
}

/// Shell that prints the marker for the shell's own process group (`$$`, a session
/// leader wherever it is used): the group, the boot id (unless `boot_id` is false: the
/// caller knows it) and the `/proc/$$/stat` line, so a later run can tell this group
/// from another that got its number (`Group::parse`). Only builtins, so no process is
/// started; `-` where there is no /proc. The variables are unset again, so the command's
/// environment is what it was.
fn report_group(boot_id: bool) -> String {
    let read_boot = if boot_id {
        "read -r _rb_b 2>/dev/null </proc/sys/kernel/random/boot_id; "
    } else {
        ""
    };
    format!(
        r#"_rb_b=- _rb_s=-; {read_boot}read -r _rb_s 2>/dev/null </proc/$$/stat; printf '{}%s %s %s\n' "$$" "$_rb_b" "$_rb_s" >&2; unset _rb_b _rb_s; "#,
        PGID_MARKER.replace('\u{1e}', "\\036")
    )
}

/// Runs argv as the leader of a new session (so of a new process group), after printing
/// that group (`report_group`) on stderr for `kill_tree` and the run record.
/// `setsid -w` keeps the exit status.
pub fn killable(argv: Vec<OsString>) -> Vec<OsString> {
    let script = format!(r#"{}exec "$@""#, report_group(true));
    let mut out: Vec<OsString> = vec![
        "setsid".into(),
        "-w".into(),
        "sh".into(),
        "-c".into(),
        script.into(),
        "sh".into(),
    ];
    out.extend(argv);
    out
}

/// For a command sshd starts directly: sshd already makes the command's shell the leader
/// of a new session, so the shell reports its own group and `exec`s the argv in place.
/// No extra process, unlike `killable`. The remote login shell reads this line, so it
/// uses nothing beyond what sh, bash and zsh all read alike. `boot_id`: see `report_group`.
pub fn report_pgid_then_exec(argv: &[OsString], boot_id: bool) -> OsString {
    let mut line = format!("{}exec ", report_group(boot_id)).into_bytes();
    line.extend_from_slice(crate::quote::join_bytes(argv).as_bytes());
    std::os::unix::ffi::OsStringExt::from_vec(line)
}

/// Stops a whole remote process group: TERM, up to 2 s to go, then KILL. dash and bash
/// want `kill -s SIG -- -PGID`, busybox (Alpine's `sh`) refuses the `--`: both are tried.
pub fn kill_tree(pgid: u32) -> Vec<OsString> {
    let script = r#"sig() { kill -s "$1" -- "-$2" 2>/dev/null || kill -s "$1" "-$2" 2>/dev/null; }
sig TERM "$1" || exit 0
i=0; while [ $i -lt 20 ]; do sig 0 "$1" || exit 0; sleep 0.1; i=$((i+1)); done
sig KILL "$1"; exit 0"#;
    vec![
        "sh".into(),
        "-c".into(),
        script.into(),
        "sh".into(),
        pgid.to_string().into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    fn req(argv: &[&str], env: &[(&str, &str)], cwd: Option<&str>) -> ExecRequest {
        ExecRequest {
            argv: argv.iter().map(OsString::from).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cwd: cwd.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn plain_argv_is_untouched() {
        assert_eq!(
            env_and_cwd(&req(&["ls", "-l"], &[], None)).unwrap(),
            vec![OsString::from("ls"), "-l".into()]
        );
    }

    #[test]
    fn env_and_cwd_apply_when_run_by_sh() {
        let dir = tempfile::tempdir().unwrap();
        let weird = dir.path().join("a dir $HOME 'q'");
        std::fs::create_dir(&weird).unwrap();
        let argv = env_and_cwd(&req(
            &["sh", "-c", "pwd; echo \"$X\""],
            &[("X", "v a l'ue")],
            Some(weird.to_str().unwrap()),
        ))
        .unwrap();
        let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(text, format!("{}\nv a l'ue\n", weird.display()));
    }

    #[test]
    fn killable_reports_its_group_and_keeps_the_exit_code() {
        let argv = killable(vec!["sh".into(), "-c".into(), "echo hi; exit 7".into()]);
        let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        assert_eq!(out.status.code(), Some(7));
        assert_eq!(out.stdout, b"hi\n");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.starts_with(PGID_MARKER), "{err:?}");
    }

    /// `kill_tree` stops a group that ignores TERM, whichever `sh` the target has
    /// (busybox's `kill` fails on `--` yet signals the rest: the KILL must still come).
    #[test]
    fn kill_tree_works_in_dash_bash_and_busybox() {
        for shell in [&["dash"][..], &["bash"], &["busybox", "sh"]] {
            if Command::new(shell[0]).arg("--help").output().is_err() {
                continue;
            }
            let mut victim = Command::new("sh")
                .args(["-c", "trap '' TERM; exec sleep 30"])
                .process_group(0)
                .spawn()
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(100));
            let argv = kill_tree(victim.id());
            let st = Command::new(shell[0])
                .args(&shell[1..])
                .args(&argv[1..])
                .status()
                .unwrap();
            assert!(st.success(), "{shell:?}");
            let gone = victim.wait().unwrap();
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(gone.signal(), Some(libc::SIGKILL), "{shell:?}");
        }
    }

    /// The marker names the group with its leader's start time and the boot id, in every
    /// shell a remote login may use, and leaves the command's environment as it was.
    #[test]
    fn the_marker_identifies_the_group_in_every_shell() {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        for shell in ["sh", "dash", "bash", "zsh", "busybox"] {
            let mut words: Vec<&str> = vec![shell];
            if shell == "busybox" {
                words.push("sh");
            }
            let Ok(probe) = Command::new(words[0])
                .args(&words[1..])
                .args(["-c", "true"])
                .output()
            else {
                continue;
            };
            if !probe.status.success() {
                continue;
            }
            let line = report_pgid_then_exec(
                &[
                    "sh".into(),
                    "-c".into(),
                    r#"echo "${_rb_s-unset} ${_rb_b-unset}""#.into(),
                ],
                true,
            );
            let out = Command::new(words[0])
                .args(&words[1..])
                .arg("-c")
                .arg(&line)
                .process_group(0)
                .output()
                .unwrap();
            assert_eq!(out.stdout, b"unset unset\n", "{shell}");
            let err = String::from_utf8(out.stderr).unwrap();
            let payload = err
                .strip_prefix(PGID_MARKER)
                .unwrap_or_else(|| panic!("{shell}: {err:?}"));
            let group = super::super::Group::parse(payload).unwrap();
            assert_eq!(group.boot_id.as_deref(), Some(boot.trim()), "{shell}");
            assert!(group.start_time.is_some(), "{shell}: {err:?}");
        }
    }
}
