//! Shell-style wildcards for names people type (`--limit 'gpu*'`, `history --target`):
//! `*` matches any text, `?` any one character, everything else itself. No `[…]`: names
//! like `gpu[01-08]` are Slurm's, and are matched as written.

/// Whether all of `text` matches `pattern`.
pub fn matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // The classic backtracking walk: on a mismatch, the last `*` takes one more
    // character. Linear in practice, never exponential.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        for (p, t) in [
            ("gpu*", "gpu01"),
            ("gpu*", "gpu"),
            ("*01", "gpu01"),
            ("g?u0*", "gpu07"),
            ("*", ""),
            ("a*b*c", "axxbyyc"),
            ("node1/ct*", "node1/ct200"),
            ("gpu[01-08]", "gpu[01-08]"),
        ] {
            assert!(matches(p, t), "{p} {t}");
        }
        for (p, t) in [
            ("gpu*", "cpu01"),
            ("gpu?", "gpu01"),
            ("a*b*c", "axxbyy"),
            ("node1", "node10"),
            ("", "x"),
        ] {
            assert!(!matches(p, t), "{p} {t}");
        }
    }
}
