//! The one place where an argv becomes text for a shell.
//!
//! Everywhere else a command is an argv (`Vec<OsString>`): a list of words that reaches
//! `execve` as is. Only when something must be *shown* (the dry-run preview, the run record)
//! or, later, sent through a remote shell, is it rendered here, so quoting has one
//! implementation and one set of tests (including a round-trip through a real `sh`).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// Rejects what cannot travel as an argv: an empty command, NUL bytes (execve cannot
/// carry them and a shell would silently truncate at them).
pub fn validate_argv(argv: &[OsString]) -> Result<(), String> {
    if argv.is_empty() {
        return Err(
            "the command is empty: give at least the program, e.g. { \"ls\", \"-l\" }".into(),
        );
    }
    if argv[0].is_empty() {
        return Err("the program name (argv[1]) is an empty string".into());
    }
    for (i, word) in argv.iter().enumerate() {
        if word.as_bytes().contains(&0) {
            return Err(format!(
                "argument {} contains a NUL byte, which no command line can carry",
                i + 1
            ));
        }
    }
    Ok(())
}

fn is_safe_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_./=:,+@%^".contains(&b)
}

/// Quotes one word for a POSIX shell so that the shell yields exactly these bytes back.
/// Safe words stay bare for readability; everything else is single-quoted, with a single
/// quote written as `'\''`. Inside single quotes nothing is special (`$`, backticks,
/// backslashes, newlines, globs), which is why this form round-trips byte for byte,
/// whatever the bytes (UTF-8 or not).
pub fn quote_bytes(bytes: &[u8]) -> Vec<u8> {
    if !bytes.is_empty() && bytes.iter().all(|&b| is_safe_byte(b)) && bytes[0] != b'=' {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(bytes.len() + 2);
    out.push(b'\'');
    for &b in bytes {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
    out
}

/// The command line a remote shell gets: byte-exact, for sending.
pub fn join_bytes(argv: &[OsString]) -> OsString {
    let mut out = Vec::new();
    for (i, w) in argv.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        out.extend(quote_bytes(w.as_bytes()));
    }
    OsString::from_vec(out)
}

/// A word as people see it: `quote_bytes`, when the word is UTF-8 text. A word that is
/// not is shown in `$'…'` (the quoting of bash, zsh, ksh and busybox sh), each byte that
/// is not UTF-8 as `\xNN`, a backslash as `\\`, a quote as `\'`: every byte is named,
/// no two words read the same (a `\xff` typed in the word reads `\\xff`), and pasted
/// into one of those shells it is the very word. Never U+FFFD, which would show `\xfe`
/// and `\xff` alike.
pub fn quote_word(word: &OsStr) -> String {
    let bytes = word.as_bytes();
    if std::str::from_utf8(bytes).is_ok() {
        return String::from_utf8(quote_bytes(bytes)).expect("quoting UTF-8 adds ASCII");
    }
    let mut out = String::from("$'");
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\'' => out.push_str("\\'"),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('\'');
    out
}

/// Renders an argv as one shell command line, for showing (each word as `quote_word`
/// shows it).
pub fn join(argv: &[OsString]) -> String {
    argv.iter()
        .map(|w| quote_word(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A copy-pastable command line for a local command with its working directory,
/// environment and standard input, e.g. `cd /tmp/x && printf %s 'hi' | env A=1 tee f1`.
pub fn render_with(
    argv: &[OsString],
    env: &[(String, OsString)],
    cwd: Option<&str>,
    stdin: Option<&[u8]>,
) -> String {
    let mut out = String::new();
    if let Some(dir) = cwd {
        out.push_str("cd ");
        out.push_str(&quote_word(OsStr::new(dir)));
        out.push_str(" && ");
    }
    if let Some(input) = stdin {
        out.push_str("printf %s ");
        out.push_str(&quote_word(OsStr::from_bytes(input)));
        out.push_str(" | ");
    }
    if !env.is_empty() {
        out.push_str("env ");
        for (k, v) in env {
            let mut word = OsString::from(format!("{k}="));
            word.push(v);
            out.push_str(&quote_word(&word));
            out.push(' ');
        }
    }
    out.push_str(&join(argv));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::os::unix::ffi::OsStringExt;
    use std::process::Command;

    fn os(s: &str) -> OsString {
        OsString::from(s)
    }

    #[test]
    fn bare_words_stay_bare() {
        assert_eq!(
            join(&[os("ls"), os("-la"), os("/tmp/x.txt")]),
            "ls -la /tmp/x.txt"
        );
    }

    #[test]
    fn special_words_are_single_quoted() {
        assert_eq!(quote_word(&os("")), "''");
        assert_eq!(quote_word(&os("a b")), "'a b'");
        assert_eq!(quote_word(&os("it's")), "'it'\\''s'");
        assert_eq!(quote_word(&os("$HOME")), "'$HOME'");
        assert_eq!(quote_word(&os("*.txt")), "'*.txt'");
        assert_eq!(quote_word(&os("~root")), "'~root'");
    }

    /// Bytes that are not UTF-8 are named (`\xff`), never U+FFFD; what is shown runs
    /// as that very word in bash and in busybox sh.
    #[test]
    fn bytes_that_are_not_utf8_show_escaped_and_paste_back() {
        let bytes = |b: &[u8]| OsString::from_vec(b.to_vec());
        let fe = bytes(b"/tmp/caf\xe9-\xfe");
        let ff = bytes(b"/tmp/caf\xe9-\xff");
        assert_eq!(quote_word(&ff), "$'/tmp/caf\\xe9-\\xff'");
        assert_ne!(quote_word(&fe), quote_word(&ff));
        let tricky = bytes(b"it's \\xff \xff \xc3\xa9");
        assert_eq!(quote_word(&tricky), "$'it\\'s \\\\xff \\xff \u{e9}'");
        assert_eq!(
            join(&[os("touch"), ff.clone()]),
            "touch $'/tmp/caf\\xe9-\\xff'"
        );
        assert!(!join(std::slice::from_ref(&ff)).contains('\u{fffd}'));
        // dash has no `$'…'` (before 0.5.13): the shown line is for a person's shell.
        for sh in crate::testing::shells().iter().filter(|s| s.name != "dash") {
            for word in [&fe, &ff, &tricky] {
                let line = format!("printf %s {}", quote_word(word));
                let out = sh.run(&line, &[] as &[&str]);
                assert_eq!(out.stdout, word.as_bytes(), "{}: {line}", sh.name);
            }
        }
    }

    #[test]
    fn nul_and_empty_are_rejected() {
        assert!(validate_argv(&[]).is_err());
        assert!(validate_argv(&[os("")]).is_err());
        let with_nul = OsString::from_vec(b"a\0b".to_vec());
        let err = validate_argv(&[os("echo"), with_nul]).unwrap_err();
        assert!(err.contains("argument 2"), "{err}");
    }

    #[test]
    fn render_with_cwd_and_env() {
        let line = render_with(
            &[os("touch"), os("f 1")],
            &[("A".into(), "x y".into())],
            Some("/tmp/my dir"),
            Some(b"hi\n"),
        );
        assert_eq!(
            line,
            "cd '/tmp/my dir' && printf %s 'hi\n' | env 'A=x y' touch 'f 1'"
        );
    }

    /// Runs the rendered line through a real `sh` that prints each argument NUL-terminated,
    /// and checks that the very same bytes come back.
    fn round_trip(words: &[String]) {
        let mut argv = vec![os("printf"), os("%s\\0")];
        argv.extend(words.iter().map(|w| os(w)));
        let line = join(&argv);
        let out = Command::new("sh").arg("-c").arg(&line).output().unwrap();
        assert!(out.status.success(), "sh failed for {line:?}");
        let expected: Vec<u8> = words
            .iter()
            .flat_map(|w| w.bytes().chain(std::iter::once(0)))
            .collect();
        assert_eq!(out.stdout, expected, "line was {line:?}");
    }

    #[test]
    fn nasty_words_round_trip() {
        round_trip(&[
            "".into(),
            "'".into(),
            "\"".into(),
            "$(touch /tmp/pwned)".into(),
            "`id`".into(),
            "\\".into(),
            "a\nb".into(),
            "*".into(),
            "-n".into(),
            "ünïcødé ✓".into(),
            "#comment".into(),
            "~".into(),
            "a=b".into(),
            "=x".into(),
        ]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn random_words_round_trip(words in proptest::collection::vec("[^\u{0}]{0,12}", 1..6)) {
            round_trip(&words);
        }
    }
}
