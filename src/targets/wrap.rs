//! Argv transformations for commands that run somewhere runbook cannot set up the
//! process itself (over SSH, inside a container): working directory and environment
//! become argv words, and a wrapper makes the remote process tree killable.
//!
//! All of it stays argv; `quote.rs` renders the final argv once for the remote shell.

use super::pump::PGID_MARKER;
use super::ExecRequest;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

/// `sh -c WITH_ENV sh [sh -c 'cd -- "$1" …' sh DIR] argv…` and the standard input that
/// carries the environment in front of the command's own, or less when there is no env
/// or cwd. Values never enter a script text or an argv: the working directory travels as
/// an argument, environment values on standard input (an argv is readable by every user
/// of the machine in /proc/PID/cmdline, on every hop).
pub fn env_and_cwd(req: &ExecRequest) -> Result<(Vec<OsString>, Option<Vec<u8>>), String> {
    let mut argv: Vec<OsString> = Vec::new();
    let mut stdin = req.stdin.clone();
    if !req.env.is_empty() {
        let mut header = Vec::new();
        for (k, v) in &req.env {
            check_env_name(k)?;
            header.extend_from_slice(k.as_bytes());
            header.push(b'\n');
            header.extend_from_slice(&escape_for_printf_b(v.as_bytes()));
            header.push(b'\n');
        }
        header.push(b'\n');
        header.extend_from_slice(req.stdin.as_deref().unwrap_or_default());
        stdin = Some(header);
        argv.extend([
            "sh".into(),
            "-c".into(),
            crate::base::script::WITH_ENV.body.into(),
            "sh".into(),
        ]);
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
    Ok((argv, stdin))
}

/// A name a remote shell can `export`, or why not.
pub fn check_env_name(k: &str) -> Result<(), String> {
    let name_ok = k
        .bytes()
        .next()
        .is_some_and(|b| b == b'_' || b.is_ascii_alphabetic())
        && k.bytes().all(|b| b == b'_' || b.is_ascii_alphanumeric());
    if name_ok {
        Ok(())
    } else {
        Err(format!(
            "env: '{k}' is not a variable name a remote shell can set (letters, digits and _, not starting with a digit)"
        ))
    }
}

/// One line for `printf %b`: backslash and newline escaped, every other byte as is.
fn escape_for_printf_b(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    for &b in value {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            _ => out.push(b),
        }
    }
    out
}

/// Shell that prints the marker for the shell's own process group (`$$`, a session
/// leader wherever it is used): the group, the boot id (unless `boot_id` is false: the
/// caller knows it) and the `/proc/$$/stat` line, so a later run can tell this group
/// from another that got its number (`Group::parse`). Only builtins, so no process is
/// started; `-` where there is no /proc. The variables are unset again, so the command's
/// environment is what it was. `token`: the report carries, after the marker, a token
/// read from the first line of standard input (see `killable_with_token`).
fn report_group(boot_id: bool, token: bool) -> String {
    let read_boot = if boot_id {
        "read -r _rb_b 2>/dev/null </proc/sys/kernel/random/boot_id; "
    } else {
        ""
    };
    let (read_token, format, token_arg, unset) = if token {
        (
            "IFS= read -r _rb_k || exit 125; ",
            "%s %s %s %s",
            r#""$_rb_k" "#,
            " _rb_k",
        )
    } else {
        ("", "%s %s %s", "", "")
    };
    format!(
        r#"_rb_b=- _rb_s=-; {read_token}{read_boot}read -r _rb_s 2>/dev/null </proc/$$/stat; printf '{}{format}\n' {token_arg}"$$" "$_rb_b" "$_rb_s" >&2; unset _rb_b _rb_s{unset}; "#,
        PGID_MARKER.replace('\u{1e}', "\\036")
    )
}

/// Runs argv as the leader of a new session (so of a new process group), after printing
/// that group (`report_group`) on stderr for `kill_tree` and the run record.
///
/// `setsid` runs in a subshell: a subshell is never a process-group leader, so setsid(2)
/// succeeds without forking and the subshell's exit status is the command's. That works
/// with util-linux's `setsid` and with busybox's, which has no `-w` (an Alpine-like
/// container has only busybox: `setsid -w` failed every command there).
pub fn killable(argv: Vec<OsString>) -> Vec<OsString> {
    killable_as(argv, false)
}

/// `killable` for a command that could print before the report is read (a Slurm task's
/// lines come through srun, where runbook cannot tell who wrote one): the report is
/// `PGID_MARKER TOKEN PGID …`, TOKEN the first line of standard input, which the
/// wrapper reads before the command starts and which is in no argv or environment.
pub fn killable_with_token(argv: Vec<OsString>) -> Vec<OsString> {
    killable_as(argv, true)
}

fn killable_as(argv: Vec<OsString>, token: bool) -> Vec<OsString> {
    let inner = format!(r#"{}exec "$@""#, report_group(true, token));
    let outer = r#"command -v setsid >/dev/null 2>&1 || { echo "runbook: needs setsid on this target (util-linux or busybox)" >&2; exit 127; }
inner=$1; shift; ( exec setsid sh -c "$inner" sh "$@" )"#;
    let mut out: Vec<OsString> = vec![
        "sh".into(),
        "-c".into(),
        outer.into(),
        "sh".into(),
        inner.into(),
    ];
    out.extend(argv);
    out
}

/// For a command sshd starts directly: sshd already makes the command's shell the leader
/// of a new session, so the shell reports its own group and `exec`s the argv in place.
/// No extra process, unlike `killable`. The remote login shell reads this line, so it
/// uses nothing beyond what sh, bash and zsh all read alike. `boot_id`: see `report_group`.
pub fn report_pgid_then_exec(argv: &[OsString], boot_id: bool) -> OsString {
    let mut line = format!("{}exec ", report_group(boot_id, false)).into_bytes();
    line.extend_from_slice(crate::base::quote::join_bytes(argv).as_bytes());
    std::os::unix::ffi::OsStringExt::from_vec(line)
}

/// Stops a whole remote process group: TERM, up to 2 s to go, then KILL.
pub fn kill_tree(pgid: u32) -> Vec<OsString> {
    vec![
        "sh".into(),
        "-c".into(),
        crate::base::script::KILL_TREE.body.into(),
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
                .map(|(k, v)| (k.to_string(), OsString::from(v)))
                .collect(),
            cwd: cwd.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn plain_argv_is_untouched() {
        assert_eq!(
            env_and_cwd(&req(&["ls", "-l"], &[], None)).unwrap(),
            (vec![OsString::from("ls"), "-l".into()], None)
        );
    }

    /// Runs the wrapped argv with the wrapped stdin under `shell` (dash, busybox sh, …).
    fn run_under(shell: &[&str], argv: &[OsString], stdin: Option<Vec<u8>>) -> Vec<u8> {
        use std::io::Write;
        assert_eq!(argv[0], "sh");
        let mut child = Command::new(shell[0])
            .args(&shell[1..])
            .args(&argv[1..])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(&stdin.unwrap_or_default()).unwrap();
        drop(input);
        child.wait_with_output().unwrap().stdout
    }

    #[test]
    fn env_and_cwd_apply_and_values_stay_out_of_argv() {
        let dir = tempfile::tempdir().unwrap();
        let weird = dir.path().join("a dir $HOME 'q'");
        std::fs::create_dir(&weird).unwrap();
        let value = "v a l'ue \\n \\c %s $(id)\nline two\n\n";
        let (argv, stdin) = env_and_cwd(&ExecRequest {
            stdin: Some(b"own input\n".to_vec()),
            ..req(
                &["sh", "-c", "pwd; printf '%s|' \"$X\" \"$Y\"; cat"],
                &[("X", value), ("Y", "")],
                Some(weird.to_str().unwrap()),
            )
        })
        .unwrap();
        for word in &argv {
            assert!(
                !word.to_string_lossy().contains("l'ue"),
                "a value is in argv: {argv:?}"
            );
        }
        let want = format!("{}\n{value}||own input\n", weird.display());
        // Alpine-like containers have only busybox: it must work there too (scripts/test
        // installs busybox-static).
        assert!(
            Command::new("busybox").arg("true").status().is_ok(),
            "busybox is needed for this test (apt-get install busybox-static)"
        );
        for shell in [vec!["dash"], vec!["bash", "--posix"], vec!["busybox", "sh"]] {
            let out = run_under(&shell, &argv, stdin.clone());
            assert_eq!(String::from_utf8_lossy(&out), want, "under {shell:?}");
        }
    }

    #[test]
    fn env_names_a_shell_cannot_set_are_refused() {
        let err = env_and_cwd(&req(&["true"], &[("A-B", "x")], None)).unwrap_err();
        assert!(err.contains("'A-B' is not a variable name"), "{err}");
    }

    /// Under a PATH of busybox applets only (what an Alpine-like container has), the
    /// wrapper still starts a new group, reports it, and keeps the exit code.
    #[test]
    fn killable_works_with_busybox_setsid() {
        let dir = crate::testing::busybox_applets();
        let argv = killable(vec![
            "sh".into(),
            "-c".into(),
            "cut -d' ' -f5 /proc/self/stat; exit 9".into(),
        ]);
        let out = Command::new(dir.path().join("sh"))
            .args(&argv[1..])
            .env_clear()
            .env("PATH", dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(9), "{err}");
        let first = err.lines().next().unwrap_or_default();
        let group = first
            .strip_prefix(PGID_MARKER)
            .and_then(crate::targets::Group::parse)
            .unwrap_or_else(|| panic!("a group marker first: {err:?}"));
        let pgid = group.pgid;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            stdout.trim(),
            pgid.to_string(),
            "the command runs in the reported group"
        );
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
        for sh in crate::testing::shells() {
            let shell = sh.name;
            let mut victim = Command::new("sh")
                .args(["-c", "trap '' TERM; exec sleep 30"])
                .process_group(0)
                .spawn()
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(100));
            let argv = kill_tree(victim.id());
            let st = sh
                .command(argv[2].to_str().unwrap(), &argv[4..])
                .status()
                .unwrap();
            assert!(st.success(), "{shell}");
            let gone = victim.wait().unwrap();
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(gone.signal(), Some(libc::SIGKILL), "{shell}");
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
