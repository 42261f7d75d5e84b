//! Values known only after apply (Terraform's "(known after apply)").
//!
//! A dry-run plans a change without running it, so what the change prints is not known:
//! `mktemp -d`, then `touch DIR/file`. Its `stdout` is a placeholder instead, a word
//! unique to that change: this pass's random key and the change's number, nothing but
//! letters, digits and `_` (no quoting changes it, trimming keeps it whole). Wherever a
//! placeholder stands in a later change (its argv, env, cwd or standard input), the plan
//! records that change as a template with a hole there: people read `(known after
//! apply)`, and the digest is over the command with each hole as a marker that names the
//! change whose output stands in it. A NUL is part of the marker, and no command can hold
//! one, so no real command matches a template by itself.
//!
//! The real run knows the outputs. A change of a step whose planned changes have holes is
//! read back into a template ([`KnownAfter::templates`]): some places where the real
//! output of a named earlier change stands are taken as that change's hole, and the
//! result must be the planned template exactly. So a command may differ from the plan
//! only where a hole is, and only by the output of the very change the hole names.
//!
//! Where a placeholder cannot be followed, the safe side is taken: a read whose command
//! holds one does not run in the dry-run (it is planned, as offline); a placeholder taken
//! apart (`:sub`), changed (`:upper`) or read as a number is no longer one, and what it
//! became differs from the real value at apply, which stops the run before that change.

use crate::targets::ExecRequest;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// What people read where a value known only after apply stands.
pub const SHOWN: &str = "(known after apply)";

/// What the placeholders of one VM start with, before its key.
const PREFIX: &str = "RUNBOOK_KNOWN_AFTER_APPLY_";

/// How many readings of one command [`KnownAfter::templates`] tries at most: each place an
/// output stands may be a hole or not. Past this the command is taken as different (the
/// safe side); real commands have a hole or two.
const MAX_TEMPLATES: usize = 256;

/// The placeholders of one VM: its random key.
#[derive(Debug, Clone)]
pub struct KnownAfter {
    key: String,
}

/// The marker a digest holds for the output of change `n` (0-based, in the plan's order).
pub fn marker(n: usize) -> Vec<u8> {
    format!("\0known after apply: change {}\0", n + 1).into_bytes()
}

impl KnownAfter {
    pub fn random() -> Self {
        use std::io::Read;
        let mut bytes = [0u8; 8];
        let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
        if read.is_err() {
            // No /dev/urandom: still unlike any other VM's, and no runbook can name it in
            // advance.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            bytes = (nanos ^ u64::from(std::process::id()).rotate_left(40)).to_le_bytes();
        }
        KnownAfter {
            key: bytes.iter().map(|b| format!("{b:02X}")).collect(),
        }
    }

    fn prefix(&self) -> String {
        format!("{PREFIX}{}_", self.key)
    }

    /// The placeholder for the output of change `n`.
    pub fn token(&self, n: usize) -> String {
        format!("{}{n}_", self.prefix())
    }

    /// Where this VM's placeholders stand in `bytes`: (start, end, change), in order.
    pub fn find(&self, bytes: &[u8]) -> Vec<(usize, usize, usize)> {
        let prefix = self.prefix();
        let prefix = prefix.as_bytes();
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(found) = find_from(bytes, prefix, at) {
            let digits = found + prefix.len();
            let end = digits
                + bytes[digits..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
            match std::str::from_utf8(&bytes[digits..end])
                .ok()
                .and_then(|d| d.parse().ok())
            {
                Some(n) if bytes.get(end) == Some(&b'_') => {
                    out.push((found, end + 1, n));
                    at = end + 1;
                }
                _ => at = found + 1,
            }
        }
        out
    }

    pub fn holds(&self, bytes: &[u8]) -> bool {
        !self.find(bytes).is_empty()
    }

    /// Whether any part of `req` holds a placeholder.
    pub fn in_request(&self, req: &ExecRequest) -> bool {
        req.argv.iter().any(|w| self.holds(w.as_bytes()))
            || req.env.iter().any(|(_, v)| self.holds(v.as_bytes()))
            || req.cwd.as_deref().is_some_and(|c| self.holds(c.as_bytes()))
            || req.stdin.as_deref().is_some_and(|s| self.holds(s))
    }

    /// `text` as people read it: each placeholder as `(known after apply)`.
    pub fn shown(&self, text: &str) -> String {
        String::from_utf8_lossy(&self.replaced(text.as_bytes(), |_| SHOWN.as_bytes().to_vec()))
            .into_owned()
    }

    /// `event` (any serde value: `events.rs` uses this module) with every
    /// placeholder in its text as `(known after apply)`.
    pub fn shown_event<E: serde::Serialize + serde::de::DeserializeOwned>(&self, event: E) -> E {
        let Ok(text) = serde_json::to_string(&event) else {
            return event;
        };
        if !text.contains(&self.prefix()) {
            return event;
        }
        // Placeholders are letters, digits and `_`: nothing JSON escapes.
        serde_json::from_str(&self.shown(&text)).unwrap_or(event)
    }

    /// `bytes` with each placeholder as the [`marker`] of its change (what digests are
    /// over), and those changes in order.
    pub fn marked(&self, bytes: &[u8]) -> (Vec<u8>, Vec<usize>) {
        let sources = self.find(bytes).into_iter().map(|(_, _, n)| n).collect();
        (self.replaced(bytes, marker), sources)
    }

    fn replaced(&self, bytes: &[u8], with: impl Fn(usize) -> Vec<u8>) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len());
        let mut last = 0;
        for (start, end, n) in self.find(bytes) {
            out.extend_from_slice(&bytes[last..start]);
            out.extend(with(n));
            last = end;
        }
        out.extend_from_slice(&bytes[last..]);
        out
    }

    /// The ways `req` reads as a template: any places where an output of `fills` stands
    /// (`(change, forms of what it printed)`) taken as that change's placeholder, the
    /// others left as they are; every place a hole first. At most
    /// [`MAX_TEMPLATES`]; an empty fill is no hole (it stands everywhere).
    pub fn templates(
        &self,
        req: &ExecRequest,
        fills: &[(usize, Vec<Vec<u8>>)],
    ) -> Vec<ExecRequest> {
        let mut parts: Vec<Vec<u8>> = req.argv.iter().map(|w| w.as_bytes().to_vec()).collect();
        parts.extend(req.env.iter().map(|(_, v)| v.as_bytes().to_vec()));
        parts.push(req.cwd.clone().unwrap_or_default().into_bytes());
        parts.push(req.stdin.clone().unwrap_or_default());
        let options: Vec<Vec<Vec<u8>>> = parts.iter().map(|p| self.readings(p, fills)).collect();
        let mut out = Vec::new();
        let mut pick = vec![0usize; options.len()];
        loop {
            out.push(self.rebuilt(req, &options, &pick));
            if out.len() >= MAX_TEMPLATES {
                break;
            }
            // The next combination, odometer-wise.
            let mut i = 0;
            while i < pick.len() {
                pick[i] += 1;
                if pick[i] < options[i].len() {
                    break;
                }
                pick[i] = 0;
                i += 1;
            }
            if i == pick.len() {
                break;
            }
        }
        out
    }

    fn rebuilt(&self, req: &ExecRequest, options: &[Vec<Vec<u8>>], pick: &[usize]) -> ExecRequest {
        let at = |i: usize| options[i][pick[i]].clone();
        let n = req.argv.len();
        let e = req.env.len();
        ExecRequest {
            argv: (0..n).map(|i| OsString::from_vec(at(i))).collect(),
            env: req
                .env
                .iter()
                .enumerate()
                .map(|(j, (k, _))| (k.clone(), OsString::from_vec(at(n + j))))
                .collect(),
            cwd: req
                .cwd
                .as_ref()
                .map(|_| String::from_utf8_lossy(&at(n + e)).into_owned()),
            stdin: req.stdin.as_ref().map(|_| at(n + e + 1)),
            timeout: req.timeout,
            secret_output: req.secret_output,
            detach: req.detach.clone(),
        }
    }

    /// One part of a request read every way: each set of non-overlapping places where a
    /// fill stands replaced by its placeholder, the most first, down to none.
    fn readings(&self, part: &[u8], fills: &[(usize, Vec<Vec<u8>>)]) -> Vec<Vec<u8>> {
        let mut spots: Vec<(usize, usize, usize)> = Vec::new();
        for (n, forms) in fills {
            for form in forms.iter().filter(|f| !f.is_empty()) {
                let mut at = 0;
                while let Some(found) = find_from(part, form, at) {
                    spots.push((found, found + form.len(), *n));
                    at = found + 1;
                }
            }
        }
        spots.sort();
        spots.dedup();
        let mut out = Vec::new();
        let mut chosen = Vec::new();
        self.choose(part, &spots, 0, 0, &mut chosen, &mut out);
        out
    }

    /// Every choice of spots from `spots[i..]` that start at or after `free`.
    fn choose(
        &self,
        part: &[u8],
        spots: &[(usize, usize, usize)],
        i: usize,
        free: usize,
        chosen: &mut Vec<(usize, usize, usize)>,
        out: &mut Vec<Vec<u8>>,
    ) {
        if out.len() >= MAX_TEMPLATES {
            return;
        }
        if i == spots.len() {
            let mut text = Vec::with_capacity(part.len());
            let mut last = 0;
            for &(start, end, n) in chosen.iter() {
                text.extend_from_slice(&part[last..start]);
                text.extend_from_slice(self.token(n).as_bytes());
                last = end;
            }
            text.extend_from_slice(&part[last..]);
            out.push(text);
            return;
        }
        // Taken first: the reading with every place a hole comes first, the likeliest.
        let (start, end, _) = spots[i];
        if start >= free {
            chosen.push(spots[i]);
            self.choose(part, spots, i + 1, end, chosen, out);
            chosen.pop();
        }
        self.choose(part, spots, i + 1, free, chosen, out);
    }
}

/// The forms a runbook may have used a change's output in: as printed, without its
/// trailing whitespace (`:gsub("%s+$", "")`), or trimmed at both ends. None for an output
/// of only whitespace: a hole cannot be found by it (such a command differs).
pub fn forms(stdout: &[u8]) -> Vec<Vec<u8>> {
    let space = |b: &u8| b" \t\n\r\x0b\x0c".contains(b);
    let end = stdout.len() - stdout.iter().rev().take_while(|b| space(b)).count();
    let start = stdout[..end].iter().take_while(|b| space(b)).count();
    // Nothing but whitespace: nothing a hole could be told by.
    if start == end {
        return Vec::new();
    }
    let mut out = vec![stdout.to_vec()];
    for form in [&stdout[..end], &stdout[start..end]] {
        if !out.iter().any(|f| f == form) {
            out.push(form.to_vec());
        }
    }
    out
}

fn find_from(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || from > hay.len() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(argv: &[&str]) -> ExecRequest {
        ExecRequest {
            argv: argv.iter().map(OsString::from).collect(),
            ..ExecRequest::default()
        }
    }

    #[test]
    fn a_placeholder_is_one_safe_word_that_trimming_keeps() {
        let k = KnownAfter::random();
        let t = k.token(3);
        assert!(
            t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "{t}"
        );
        assert_eq!(crate::base::quote::quote_word(t.as_ref()), t);
        assert_ne!(KnownAfter::random().token(3), t, "a key per VM");
        let text = format!("touch {t}/file {}", k.token(12));
        assert_eq!(
            k.find(text.as_bytes())
                .iter()
                .map(|f| f.2)
                .collect::<Vec<_>>(),
            [3, 12]
        );
        assert_eq!(
            k.shown(&text),
            "touch (known after apply)/file (known after apply)"
        );
        // Another VM's placeholder, or a piece of one, is plain text.
        assert!(!k.holds(KnownAfter::random().token(3).as_bytes()));
        assert!(!k.holds(&t.as_bytes()[1..]));
        assert!(!k.holds(&t.as_bytes()[..t.len() - 1]));
        let (marked, sources) = k.marked(text.as_bytes());
        assert_eq!(sources, [3, 12]);
        assert!(marked.starts_with(b"touch \0known after apply: change 4\0/file"));
    }

    #[test]
    fn forms_of_an_output() {
        assert_eq!(
            forms(b"/tmp/x\n"),
            [b"/tmp/x\n".to_vec(), b"/tmp/x".to_vec()]
        );
        assert_eq!(
            forms(b" a \n"),
            [b" a \n".to_vec(), b" a".to_vec(), b"a".to_vec()]
        );
        assert!(forms(b"\n").is_empty());
    }

    /// Where the output stands, the request reads as the template; the same value
    /// standing where the plan had it literally is read both ways.
    #[test]
    fn a_request_reads_back_as_its_template() {
        let k = KnownAfter::random();
        let fills = [(0, forms(b"/tmp/d.1\n"))];
        let t = k.token(0);
        let all = k.templates(&req(&["touch", "/tmp/d.1/file"]), &fills);
        let argvs: Vec<Vec<OsString>> = all.iter().map(|r| r.argv.clone()).collect();
        assert_eq!(
            argvs[0],
            vec![OsString::from("touch"), format!("{t}/file").into()]
        );
        assert!(argvs.contains(&req(&["touch", "/tmp/d.1/file"]).argv));
        let both = k.templates(&req(&["cp", "/tmp/d.1", "/tmp/d.1"]), &fills);
        assert_eq!(both.len(), 4);
        // Nothing to read back: the request as it is, only.
        assert_eq!(k.templates(&req(&["touch", "x"]), &fills).len(), 1);
        assert_eq!(
            k.templates(&req(&["touch", "x"]), &[(0, forms(b""))]).len(),
            1
        );
    }

    #[test]
    fn readings_are_bounded() {
        let k = KnownAfter::random();
        let word = "a".repeat(40);
        let all = k.templates(&req(&["echo", &word, &word]), &[(0, forms(b"a"))]);
        assert_eq!(all.len(), MAX_TEMPLATES);
    }
}
