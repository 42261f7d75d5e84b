//! What a terminal ends up showing, screen and scrollback, from the bytes a program
//! wrote to it: a small VT100 subset (text that wraps at the width, CR, LF, cursor up,
//! down, left, right, erase in line, erase below; colours ignored), enough for what
//! indicatif and runbook's own lines write. Every character is one column wide.
#![allow(dead_code)]

/// The rows the terminal holds after `bytes`, scrollback first, trailing blanks trimmed.
pub fn rows(bytes: &[u8], cols: usize) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let mut rows: Vec<Vec<char>> = vec![Vec::new()];
    let (mut r, mut c, mut wrap) = (0usize, 0usize, false);
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        while rows.len() <= r {
            rows.push(Vec::new());
        }
        match ch {
            '\x1b' => {
                if chars.peek() != Some(&'[') {
                    chars.next();
                    continue;
                }
                chars.next();
                let mut arg = String::new();
                let mut cmd = ' ';
                for a in chars.by_ref() {
                    if a.is_ascii_alphabetic() {
                        cmd = a;
                        break;
                    }
                    arg.push(a);
                }
                let n = arg.parse::<usize>().unwrap_or(1).max(1);
                wrap = false;
                match cmd {
                    'A' => r = r.saturating_sub(n),
                    'B' => r += n,
                    'C' => c = (c + n).min(cols - 1),
                    'D' => c = c.saturating_sub(n),
                    'G' => c = n - 1,
                    'K' if arg == "2" => rows[r].clear(),
                    'K' => rows[r].truncate(c),
                    'J' => {
                        rows[r].truncate(c);
                        rows.truncate(r + 1);
                    }
                    _ => {}
                }
            }
            '\r' => {
                c = 0;
                wrap = false;
            }
            '\n' => {
                r += 1;
                wrap = false;
            }
            ch => {
                if wrap {
                    r += 1;
                    c = 0;
                    wrap = false;
                    while rows.len() <= r {
                        rows.push(Vec::new());
                    }
                }
                let row = &mut rows[r];
                while row.len() < c {
                    row.push(' ');
                }
                if c < row.len() {
                    row[c] = ch;
                } else {
                    row.push(ch);
                }
                if c + 1 == cols {
                    wrap = true;
                } else {
                    c += 1;
                }
            }
        }
    }
    rows.into_iter()
        .map(|r| r.into_iter().collect::<String>().trim_end().to_string())
        .collect()
}

#[test]
fn wraps_and_erases_as_a_terminal() {
    assert_eq!(rows(b"abcdef\r\nx", 4), ["abcd", "ef", "x"]);
    assert_eq!(rows(b"spin 1\r\x1b[2Kspin 2\r\x1b[2Kdone\n", 10), ["done"]);
    assert_eq!(
        rows(b"one\ntwo\x1b[1A\r\x1b[2K\x1b[1B\r\x1b[2Kx", 10),
        ["", "x"]
    );
    assert_eq!(rows(b"\x1b[31mred\x1b[0m", 10), ["red"]);
}
