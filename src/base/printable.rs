//! Text made safe for a person's eyes: what a terminal or a Markdown viewer would act on
//! instead of showing is shown escaped, as `ls -b` shows a file name.
//!
//! Commands, paths and output lines come from the world, not from runbook: a directory
//! another user made in a shared cache can be named `x\r\x1b[2Kon local: ok`, and printed
//! as it is, it erases and rewrites the line of the confirmation that names it. So every
//! rendering a person reads (the preview, the confirmation, `runbook plan` in text and
//! Markdown, progress, `runbook log`) passes its data through here, while what runs and
//! what the record stores stay byte-exact (`quote.rs` renders argv; this only renders
//! that rendering for a screen).
//!
//! Escaped: the C0 controls (a newline too, unless the text is a block of lines), DEL,
//! the C1 controls U+0080–U+009F (a terminal may read U+009B as CSI), and the bidi
//! overrides and isolates U+202A–U+202E, U+2066–U+2069, which reorder what is shown
//! ("Trojan source"). `\t`, `\r`, `\n` by name, other bytes as `\xNN`, code points as
//! `\u{NNNN}`. A backslash stays a backslash: commands are full of them, and doubling
//! each would show a command other than the one that runs.

use std::borrow::Cow;

fn unsafe_char(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn escape_with(text: &str, keep_newlines: bool) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| unsafe_char(c) && !(keep_newlines && c == '\n'))
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' if keep_newlines => out.push('\n'),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 && unsafe_char(c) => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// One line of text for a person: every control character escaped, a newline too.
pub fn line(text: &str) -> Cow<'_, str> {
    escape_with(text, false)
}

/// A block of lines for a person (a script, a message of several lines): as `line`, but
/// a newline stays a line break.
pub fn block(text: &str) -> Cow<'_, str> {
    escape_with(text, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_show_escaped_and_the_rest_as_it_is() {
        assert_eq!(line("rm -rf '/c/a b'"), "rm -rf '/c/a b'");
        assert!(matches!(line("plain ünï ✓ \\n"), Cow::Borrowed(_)));
        assert_eq!(
            line("x\r\x1b[2Kon local: ok\n"),
            "x\\r\\x1b[2Kon local: ok\\n"
        );
        assert_eq!(line("\t\u{7f}\u{0}"), "\\t\\x7f\\x00");
        assert_eq!(line("a\u{9b}31mb"), "a\\u{009b}31mb");
        assert_eq!(
            line("if x \u{202e}\u{2066}fi\u{2069}"),
            "if x \\u{202e}\\u{2066}fi\\u{2069}"
        );
        // Just outside the ranges: shown.
        assert_eq!(line("\u{a0}\u{2029}\u{206a}"), "\u{a0}\u{2029}\u{206a}");
        assert_eq!(
            block("sh -c '\necho \x1b[2K\r'\n"),
            "sh -c '\necho \\x1b[2K\\r'\n"
        );
    }
}
