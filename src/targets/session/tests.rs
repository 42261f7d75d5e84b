use super::protocol::keep_from;
use super::*;
use crate::base::cancel::Cancel;
use crate::targets::Group;

/// A shell the loop is tested under: one of the harness's (`testing::shells`), the
/// loop given to it as `sh -c LOOP sh`, or as runbook starts it (`session-start.sh`,
/// here: dash under bash with job control).
struct LoopShell {
    name: String,
    argv: Vec<OsString>,
    path: String,
    /// Whether the loop runs under bash (its commands' parent is bash).
    under_bash: bool,
    _shell: Option<crate::testing::Shell>,
}

impl std::fmt::Display for LoopShell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

/// dash, bash --posix and busybox ash as they are (setsid per command), then as runbook
/// starts the loop.
fn loop_shells() -> Vec<LoopShell> {
    let mut out: Vec<LoopShell> = crate::testing::shells()
        .into_iter()
        .map(|sh| {
            let mut argv = sh.argv().to_vec();
            argv.extend([
                "-c".into(),
                crate::base::script::SESSION.body.into(),
                "sh".into(),
            ]);
            LoopShell {
                name: sh.name.to_string(),
                argv,
                path: sh.path().to_string(),
                under_bash: sh.name.starts_with("bash"),
                _shell: Some(sh),
            }
        })
        .collect();
    let mut argv = loop_argv();
    argv[0] = "dash".into();
    out.push(LoopShell {
        name: "dash, started as runbook starts it (under bash)".into(),
        argv,
        path: out[0].path.clone(),
        under_bash: true,
        _shell: None,
    });
    out
}

/// Runs the loop under `shell` on `input`.
fn run_loop(shell: &LoopShell, input: &[u8]) -> (Vec<u8>, Vec<u8>) {
    run_loop_with(shell, input, None)
}

/// `run_loop` with SHLVL in the loop's environment, or none.
fn run_loop_with(shell: &LoopShell, input: &[u8], shlvl: Option<&str>) -> (Vec<u8>, Vec<u8>) {
    use std::io::Write;
    let mut cmd = std::process::Command::new(&shell.argv[0]);
    cmd.env_remove("SHLVL");
    if let Some(v) = shlvl {
        cmd.env("SHLVL", v);
    }
    let mut child = cmd
        .env("PATH", &shell.path)
        .args(&shell.argv[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.stdout, out.stderr)
}

/// Runs the loop under `shell` on `requests` as runbook sends them: each once the
/// frame before it ended on both streams (the loop then ends the last command's
/// copiers, `_rb_unfwd`).
fn run_loop_each(shell: &LoopShell, requests: &[(Vec<u8>, String)]) -> (Vec<u8>, Vec<u8>) {
    use std::io::{Read, Write};
    use std::sync::{Arc, Mutex};
    let mut child = std::process::Command::new(&shell.argv[0])
        .env("PATH", &shell.path)
        .args(&shell.argv[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let reader = |mut r: Box<dyn Read + Send>, into: Arc<Mutex<Vec<u8>>>| {
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                into.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let (out, err) = (Arc::default(), Arc::default());
    let ro = reader(Box::new(child.stdout.take().unwrap()), Arc::clone(&out));
    let re = reader(Box::new(child.stderr.take().unwrap()), Arc::clone(&err));
    let mut stdin = child.stdin.take().unwrap();
    for (req, token) in requests {
        stdin.write_all(req).unwrap();
        let end = format!("\x1e{token} end").into_bytes();
        let until = Instant::now() + Duration::from_secs(20);
        while [&out, &err]
            .iter()
            .any(|b| find(&b.lock().unwrap(), &end).is_none())
        {
            assert!(Instant::now() < until, "{shell}: no end of frame");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    drop(stdin);
    child.wait().unwrap();
    ro.join().unwrap();
    re.join().unwrap();
    let take = |b: Arc<Mutex<Vec<u8>>>| std::mem::take(&mut *b.lock().unwrap());
    (take(out), take(err))
}

fn collect(
    token: &str,
    out: &[u8],
    err: &[u8],
) -> (ExecOutcome, Vec<(Stream, String)>, Option<u32>) {
    let lines = RefCell::new(Vec::new());
    let on_line = |s: Stream, l: &str, _: bool| lines.borrow_mut().push((s, l.to_string()));
    let cancel = Cancel::default();
    let pgid = Cell::new(None);
    let on_group = |g: &Group| pgid.set(Some(g.pgid));
    let io = ExecIo {
        on_line: &on_line,
        deadline: None,
        cancel: &cancel,
        abort_at: u32::MAX,
        on_group: Some(&on_group),
    };
    let mut frame = Frame::new(token);
    let mut o = ExecOutcome::default();
    // Byte by byte: a frame line or a command line cut anywhere still reads right.
    let mut po = Vec::new();
    for b in out {
        po.push(*b);
        frame.take(Stream::Stdout, &mut po, &io, &mut o);
    }
    let mut pe = Vec::new();
    for b in err {
        pe.push(*b);
        frame.take(Stream::Stderr, &mut pe, &io, &mut o);
    }
    assert!(
        frame.done(),
        "{:?} {:?}",
        String::from_utf8_lossy(out),
        String::from_utf8_lossy(err)
    );
    o.code = frame.status;
    (o, lines.into_inner(), pgid.get())
}

/// The loop under every shell a target may have: argv, env, cwd and stdin arrive as
/// sent, the streams stay apart, the status comes back, and the group is the
/// command's own.
#[test]
fn the_loop_runs_commands_as_sent_in_every_shell() {
    let dir = tempfile::tempdir().unwrap();
    let weird = dir.path().join("a dir 'q' $x");
    std::fs::create_dir(&weird).unwrap();
    let value = "v a l'ue \\n \\c %s $(id)\nline two\n";
    let req = ExecRequest {
        argv: vec![
            "sh".into(),
            "-c".into(),
            "pwd; printf '%s|' \"$X\" \"$1\"; echo; cat; echo; echo oops >&2; cut -d' ' -f5 /proc/self/stat; exit 7".into(),
            "sh".into(),
            std::ffi::OsString::from_vec(b"\xff\n'\"$HOME".to_vec()),
        ],
        env: vec![("X".into(), value.into())],
        cwd: Some(weird.to_str().unwrap().into()),
        stdin: Some(b"in\0put\\n\nend".to_vec()),
        ..Default::default()
    };
    use std::os::unix::ffi::OsStringExt;
    let (r1, t1) = request(&req, Mode::Group).unwrap();
    let (r2, t2) = request(
        &ExecRequest {
            argv: vec!["true".into()],
            ..Default::default()
        },
        Mode::Group,
    )
    .unwrap();
    let input = [(r1, t1.clone()), (r2, t2.clone())];
    for shell in loop_shells() {
        let (out, err) = run_loop_each(&shell, &input);
        let (o, lines, pgid) = collect(&t1, &out, &err);
        assert_eq!(o.code, Some(7), "{shell}: {lines:?}");
        let want_out = format!(
            "{}\n{value}|\u{fffd}\n'\"$HOME|\nin\0put\\n\nend",
            weird.display()
        );
        let got: Vec<&str> = lines
            .iter()
            .filter(|(s, _)| *s == Stream::Stdout)
            .map(|(_, l)| l.as_str())
            .collect();
        let pg = got.last().unwrap().to_string();
        assert_eq!(
            Some(pg.parse::<u32>().unwrap()),
            pgid,
            "{shell}: the reported group is the command's"
        );
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert_eq!(stdout, format!("{want_out}\n{pg}\n"), "{shell}");
        assert_eq!(o.stderr, b"oops\n", "{shell}");
        // The second command's frame follows, whole.
        let (o2, _, _) = collect(&t2, &out, &err);
        assert_eq!(o2.code, Some(0), "{shell}");
    }
}

/// A command that prints a frame line of its own (another token, a guess) is only
/// printing: its frame ends where the loop ends it.
#[test]
fn a_command_cannot_end_its_own_frame() {
    let forged = "\x1eaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa end 0\n\x1erunbook-session ready 1\n";
    let req = ExecRequest {
        argv: vec![
            "sh".into(),
            "-c".into(),
            "printf \"$1\"; printf \"$1\" >&2; printf 'partial'; exit 4".into(),
            "sh".into(),
            forged.into(),
        ],
        ..Default::default()
    };
    let (r, t) = request(&req, Mode::Group).unwrap();
    for shell in loop_shells() {
        let (out, err) = run_loop(&shell, &r);
        let (o, _, _) = collect(&t, &out, &err);
        assert_eq!(o.code, Some(4), "{shell}");
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            format!("{forged}partial")
        );
        assert_eq!(String::from_utf8_lossy(&o.stderr), forged);
    }
    assert_ne!(token(), token());
    assert_eq!(token().len(), 32);
}

/// A request cut short (runbook gave up while sending it) runs nothing: not a
/// half-read request, and not a command with half its stdin.
#[test]
fn a_request_cut_short_runs_nothing() {
    let req = ExecRequest {
        argv: vec!["sh".into(), "-c".into(), "echo RAN; cat".into()],
        stdin: Some(b"line one\nline two\n".to_vec()),
        ..Default::default()
    };
    let (r, _) = request(&req, Mode::Group).unwrap();
    // The request's own line, then its stdin's.
    let line_end = r.iter().position(|&b| b == b'\n').unwrap() + 1;
    for shell in loop_shells() {
        for cut in [line_end - 4, line_end + 5, r.len() - 2] {
            let (out, _) = run_loop(&shell, &r[..cut]);
            assert!(
                !String::from_utf8_lossy(&out).contains("RAN"),
                "{shell}, cut at {cut}: {}",
                String::from_utf8_lossy(&out)
            );
        }
        let (out, _) = run_loop(&shell, &r);
        assert!(String::from_utf8_lossy(&out).contains("RAN"), "{shell}");
    }
}

/// As runbook starts it, the loop runs in bash where there is one (job control, no
/// setsid), and each command still leads a group of its own.
#[test]
fn the_loop_starts_under_bash_where_there_is_one() {
    let req = ExecRequest {
        argv: vec![
            "sh".into(),
            "-c".into(),
            "cat /proc/$PPID/comm; cut -d' ' -f1,5 /proc/$$/stat".into(),
        ],
        ..Default::default()
    };
    let (r, t) = request(&req, Mode::Group).unwrap();
    for shell in loop_shells() {
        let (out, err) = run_loop(&shell, &r);
        let (o, _, pgid) = collect(&t, &out, &err);
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let (parent, ids) = text.trim().split_once('\n').unwrap();
        let (pid, pg) = ids.split_once(' ').unwrap();
        assert_eq!(pid, pg, "{shell}: leads its group");
        assert_eq!(pgid, pg.parse().ok(), "{shell}");
        if shell.under_bash {
            assert_eq!(parent, "bash", "{shell}");
        } else {
            assert_ne!(parent, "bash", "{shell}");
        }
    }
    // And a command's environment is what it is under dash (bash's SHLVL put back;
    // where there was none, bash's exec leaves SHLVL=0), but for `_`, which shells
    // set for the commands they run (bash drops the one it was given).
    let env_of = |shell: &LoopShell, shlvl: Option<&str>| {
        let (r, t) = request(
            &ExecRequest {
                argv: vec!["env".into()],
                ..Default::default()
            },
            Mode::Group,
        )
        .unwrap();
        let (out, err) = run_loop_with(shell, &r, shlvl);
        let (o, _, _) = collect(&t, &out, &err);
        let mut lines: Vec<String> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| (shlvl.is_some() || *l != "SHLVL=0") && !l.starts_with("_="))
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    };
    let shells = loop_shells();
    let started = shells.last().unwrap();
    for shlvl in [None, Some("4")] {
        let dash = env_of(&shells[0], shlvl);
        assert!(dash.iter().any(|l| l.starts_with("PATH=")), "{dash:?}");
        assert_eq!(dash, env_of(started, shlvl), "SHLVL {shlvl:?}");
    }
}

/// A command stopped (SIGSTOP) and continued later ends with its own status, and
/// the loop waits for it meanwhile: job control alone would hand back 147 at once.
#[test]
fn a_stopped_command_is_waited_for() {
    let marker = format!("rb-stop-{}", token());
    let req = ExecRequest {
        argv: vec![
            "sh".into(),
            "-c".into(),
            "kill -STOP $$; exit 5".into(),
            marker.clone().into(),
        ],
        ..Default::default()
    };
    let (r, t) = request(&req, Mode::Group).unwrap();
    for shell in loop_shells() {
        let stopped = std::thread::spawn({
            let marker = marker.clone();
            move || continue_when_stopped(&marker)
        });
        let started = Instant::now();
        let (out, err) = run_loop(&shell, &r);
        let waited = stopped.join().unwrap();
        let (o, _, _) = collect(&t, &out, &err);
        assert_eq!(o.code, Some(5), "{shell}");
        assert!(started.elapsed() >= waited, "{shell}");
    }
}

/// Finds the process whose argv holds `marker`, waits until it is stopped, lets it
/// stay stopped for a while, continues it; returns how long it was kept stopped.
fn continue_when_stopped(marker: &str) -> Duration {
    let until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < until {
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            if !String::from_utf8_lossy(&cmdline).contains(marker) {
                continue;
            }
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            if stat
                .rsplit_once(") ")
                .is_some_and(|(_, r)| r.starts_with('T'))
            {
                let kept = Duration::from_millis(1500);
                std::thread::sleep(kept);
                // SAFETY: kill only sends a signal, to the test's own command.
                unsafe { libc::kill(pid, libc::SIGCONT) };
                return kept;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no stopped process with {marker}");
}

#[test]
fn a_frame_line_cut_anywhere_waits_and_text_does_not() {
    let m = b"\x1eabc ";
    assert_eq!(keep_from(b"line\n", m), 5);
    assert_eq!(keep_from(b"line\n\x1ea", m), 5);
    assert_eq!(keep_from(b"line\x1eab", m), 4);
    assert_eq!(keep_from(b"line\x1ex", m), 6);
}

/// A local tool that outlives the end of its input (srun while it ends its step) is
/// sent TERM at the end of the run, and gets time to act on it, before any KILL.
#[test]
fn closing_sends_term_before_kill() {
    let dir = tempfile::tempdir().unwrap();
    let said = dir.path().join("said");
    let script = format!(
        "trap 'echo TERM > {}; exit 0' TERM; printf '\\036runbook-session ready 1\\n'; exec 0</dev/null; while :; do sleep 0.1; done",
        said.display()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    let took = local.block_on(&rt, async {
        let cancel = Cancel::default();
        let on_line = |_: Stream, _: &str, _: bool| {};
        let io = ExecIo {
            on_line: &on_line,
            deadline: None,
            cancel: &cancel,
            abort_at: u32::MAX,
            on_group: None,
        };
        let pool = Pool::new(1);
        let proc = spawn_local(&["sh".into(), "-c".into(), script.into()]).unwrap();
        let s = pool.start(proc, &io).await.unwrap();
        let started = Instant::now();
        s.close().await;
        started.elapsed()
    });
    assert!(took >= CLOSE_WAIT, "{took:?}");
    assert!(took < CLOSE_WAIT + CLOSE_TERM_WAIT, "{took:?}");
    assert_eq!(std::fs::read_to_string(&said).unwrap(), "TERM\n");
}
