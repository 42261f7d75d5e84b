//! Programs that run another command or script (`sudo`, `env`, `timeout`, `xargs`,
//! `flock`, `watch`, `script`, `ssh`, `docker exec`, `sh -c`): each rule skips the
//! wrapper's own options to find what it runs, and classes that through
//! [`super::command`] (an argv) or [`script_in`] (a script).

use super::parser::script_in;
use super::words::{dangerous_name, is_assignment, is_name, join, quiet_file, Word};
use super::{command, Class};

/// Whether `w` is an option of a wrapper, and how many words it takes with it (itself,
/// or itself and its argument): `short` lists the letters that take an argument (in the
/// same word, `-uroot`, or the next), `long` the long options that do (`--user=x` or
/// `--user x`). `None`: not an option (the command, or an operand).
fn option_width(w: &Word, short: &str, long: &[&str]) -> Option<usize> {
    let t = &w.text;
    if w.dynamic || !t.starts_with('-') || t == "-" {
        return None;
    }
    if let Some(name) = t.strip_prefix("--") {
        if name.is_empty() {
            return Some(1);
        }
        return Some(match name.contains('=') || !long.contains(&name) {
            true => 1,
            false => 2,
        });
    }
    // A cluster of letters: the first that takes an argument takes the rest of the word,
    // or the next word when it ends the word. `nice -10` is a number, one word.
    let letters: Vec<char> = t[1..].chars().collect();
    for (i, c) in letters.iter().enumerate() {
        if short.contains(*c) {
            return Some(if i + 1 == letters.len() { 2 } else { 1 });
        }
    }
    Some(1)
}

/// The options of a wrapper, as [`wrapped`] skips them.
#[derive(Clone, Copy)]
pub(super) struct Opts {
    /// Letters that take an argument (`-uroot`, `-u root`).
    short: &'static str,
    /// Long options that take one (`--user=root`, `--user root`).
    long: &'static [&'static str],
    /// Letters that make it run its command through a shell, or a shell on standard
    /// input when there is none (`sudo -s`, `sudo -i`).
    shell: &'static str,
    /// `NAME=VALUE` words may come before the command.
    assigns: bool,
    /// Without a command it runs a shell (`unshare`, `nsenter`): on standard input.
    bare_shell: bool,
}

impl Opts {
    pub(super) const fn new(short: &'static str) -> Opts {
        Opts {
            short,
            long: &[],
            shell: "",
            assigns: false,
            bare_shell: false,
        }
    }
    pub(super) const fn bare_shell(mut self) -> Opts {
        self.bare_shell = true;
        self
    }
    pub(super) const fn long(mut self, long: &'static [&'static str]) -> Opts {
        self.long = long;
        self
    }
    pub(super) const fn shell(mut self, letters: &'static str) -> Opts {
        self.shell = letters;
        self
    }
    pub(super) const fn assigns(mut self) -> Opts {
        self.assigns = true;
        self
    }
}

pub(super) const SUDO: Opts = Opts::new("ugCDhprtTUR")
    .long(&[
        "user",
        "group",
        "close-from",
        "chdir",
        "host",
        "prompt",
        "role",
        "type",
        "command-timeout",
        "other-user",
        "chroot",
    ])
    .shell("si")
    .assigns();

/// A wrapper's command: after its options (and `NAME=VALUE` words, where it takes
/// them), classed as a command of its own. No command: the wrapper alone, which runs
/// nothing but for `sudo -s`/`-i` and `doas -s` (a shell on standard input).
pub(super) fn wrapped(rest: &[Word], o: Opts, depth: usize) -> Class {
    let (short, long) = (o.short, o.long);
    let mut i = 0;
    let mut shell_flag = false;
    while i < rest.len() {
        let w = &rest[i];
        if w.text == "--" && !w.dynamic {
            i += 1;
            break;
        }
        if o.assigns && !w.dynamic && is_assignment(&w.text) {
            if dangerous_name(w.text.split('=').next().unwrap_or_default()) {
                return Class::MayDelete;
            }
            i += 1;
            continue;
        }
        let Some(width) = option_width(w, short, long) else {
            break;
        };
        let t = w.text.as_str();
        if t == "--shell" || t == "--login" && o.shell.contains('i') {
            shell_flag = !o.shell.is_empty();
        } else if !t.starts_with("--") {
            // The letters before the first that takes an argument.
            let letters = t[1..].split(|c| short.contains(c)).next().unwrap_or("");
            shell_flag |= letters.chars().any(|c| o.shell.contains(c));
        }
        i += width;
    }
    let cmd: Vec<Word> = rest.get(i..).unwrap_or_default().to_vec();
    match (cmd.is_empty(), shell_flag) {
        (true, true) => Class::MayDelete,
        (true, false) if o.bare_shell => Class::MayDelete,
        (true, false) => Class::Safe,
        // `sudo -s CMD`: CMD runs through the shell.
        (false, true) => match cmd.iter().any(|w| w.dynamic) {
            true => Class::MayDelete,
            false => script_in(&join(&cmd), depth).max(command(&cmd, depth + 1)),
        },
        (false, false) => command(&cmd, depth + 1),
    }
}

/// How many operands (words that are not options) `rest` has, options skipped.
pub(super) fn operands(rest: &[Word], short: &str, long: &[&str]) -> usize {
    let mut i = 0;
    while i < rest.len() {
        match option_width(&rest[i], short, long) {
            Some(_) if rest[i].text == "--" => return rest.len() - i - 1,
            Some(n) => i += n,
            None => return rest.len() - i,
        }
    }
    0
}

/// A wrapper whose command follows `skip` operands of its own (`timeout DURATION CMD`,
/// `chroot DIR CMD`).
pub(super) fn after_operands(
    rest: &[Word],
    short: &str,
    long: &[&str],
    skip: usize,
    depth: usize,
) -> Class {
    let mut i = 0;
    while i < rest.len() {
        if rest[i].text == "--" && !rest[i].dynamic {
            i += 1;
            break;
        }
        match option_width(&rest[i], short, long) {
            Some(n) => i += n,
            None => break,
        }
    }
    command(rest.get(i + skip..).unwrap_or_default(), depth + 1)
}

/// `env [OPTIONS] [NAME=VALUE…] [COMMAND…]`. Options come in clusters (`-iS STRING`,
/// `-iu NAME`); `-S`/`--split-string` splits its string into the command's first
/// words. Any word with a `=` before the command is an assignment (env takes
/// `BASH_FUNC_x%%=…` too, which the shell's rule would not).
pub(super) fn env(rest: &[Word], depth: usize) -> Class {
    let mut i = 0;
    let mut split: Option<String> = None;
    while i < rest.len() {
        let w = &rest[i];
        if w.dynamic {
            return Class::MayDelete;
        }
        let t = w.text.as_str();
        if t == "--" {
            i += 1;
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let takes = ["unset", "chdir", "split-string", "argv0", "block-signal"];
            // getopt takes any unambiguous prefix of a long option.
            let full = takes
                .iter()
                .find(|f| f.starts_with(name) && !name.is_empty());
            let arg = match (full, value) {
                (Some(_), Some(v)) => Some(v.to_string()),
                (Some(f), None) if *f != "block-signal" => {
                    i += 1;
                    match rest.get(i) {
                        Some(n) if !n.dynamic => Some(n.text.clone()),
                        _ => return Class::MayDelete,
                    }
                }
                _ => None,
            };
            if full == Some(&"split-string") {
                split = Some(split.unwrap_or_default() + " " + &arg.unwrap_or_default());
            }
            i += 1;
            continue;
        }
        if t.len() > 1 && t.starts_with('-') {
            let letters: Vec<char> = t[1..].chars().collect();
            for (k, c) in letters.iter().enumerate() {
                if "uCSaP".contains(*c) {
                    let arg = match k + 1 < letters.len() {
                        true => letters[k + 1..].iter().collect::<String>(),
                        false => {
                            i += 1;
                            match rest.get(i) {
                                Some(n) if !n.dynamic => n.text.clone(),
                                _ => return Class::MayDelete,
                            }
                        }
                    };
                    if *c == 'S' {
                        split = Some(split.unwrap_or_default() + " " + &arg);
                    }
                    break;
                }
            }
            i += 1;
            continue;
        }
        if let Some((name, _)) = t.split_once('=') {
            if dangerous_name(name) || !is_name(name) {
                return Class::MayDelete;
            }
            i += 1;
            continue;
        }
        break;
    }
    let mut cmd = Vec::new();
    if let Some(s) = split {
        // env's own quoting and `${VAR}` are not read: plain words only.
        if s.contains(['\\', '$', '\'', '"', '#']) {
            return Class::MayDelete;
        }
        cmd.extend(s.split_whitespace().map(|w| Word::literal(w.into())));
    }
    cmd.extend(rest.get(i..).unwrap_or_default().iter().cloned());
    command(&cmd, depth + 1)
}

/// `flock [OPTIONS] FILE|DIR COMMAND…`, `flock [OPTIONS] FILE -c SCRIPT`, `flock FD`.
pub(super) fn flock(rest: &[Word], depth: usize) -> Class {
    let mut i = 0;
    while i < rest.len() {
        if rest[i].text == "--" {
            i += 1;
            break;
        }
        match option_width(&rest[i], "wEo", &["timeout", "wait", "conflict-exit-code"]) {
            Some(n) => i += n,
            None => break,
        }
    }
    let after = rest.get(i + 1..).unwrap_or_default();
    match after.first().map(|w| w.text.as_str()) {
        Some("-c" | "--command") => match after.get(1) {
            Some(w) if !w.dynamic => script_in(&w.text, depth),
            _ => Class::MayDelete,
        },
        _ => command(after, depth + 1),
    }
}

/// `watch [OPTIONS] COMMAND…`: the words joined run through `sh -c` (with `-x`, as an
/// argv).
pub(super) fn watch(rest: &[Word], depth: usize) -> Class {
    let mut i = 0;
    let mut exec = false;
    while i < rest.len() {
        let t = rest[i].text.as_str();
        exec |= t == "--exec" || t.starts_with('-') && !t.starts_with("--") && t.contains('x');
        match option_width(&rest[i], "nq", &["interval", "equexit"]) {
            Some(n) => i += n,
            None => break,
        }
    }
    let cmd = rest.get(i..).unwrap_or_default();
    match (exec, cmd.iter().any(|w| w.dynamic)) {
        (true, _) => command(cmd, depth + 1),
        (false, true) => Class::MayDelete,
        (false, false) => script_in(&join(cmd), depth),
    }
}

/// `script [OPTIONS] [FILE]`: `-c COMMAND` runs through the user's shell, and FILE (the
/// typescript) is written over; without `-c`, an interactive shell.
pub(super) fn script(rest: &[Word], depth: usize) -> Class {
    let mut i = 0;
    while i < rest.len() {
        let t = rest[i].text.as_str();
        let arg = |i: usize| {
            rest.get(i + 1)
                .filter(|w| !w.dynamic)
                .map(|w| w.text.clone())
        };
        let found = if let Some(v) = t.strip_prefix("--command=") {
            Some(v.to_string())
        } else if t == "--command" {
            arg(i)
        } else if t.starts_with('-') && !t.starts_with("--") {
            match t[1..].split_once('c') {
                Some((_, "")) => arg(i),
                Some((_, v)) => Some(v.to_string()),
                None => {
                    i += 1;
                    continue;
                }
            }
        } else {
            i += 1;
            continue;
        };
        return match found {
            // The typescript file is overwritten too, unless it is /dev/null.
            Some(s) => {
                script_in(&s, depth).max(match rest.last().is_some_and(|w| quiet_file(&w.text)) {
                    true => Class::Safe,
                    false => Class::MayDelete,
                })
            }
            None => Class::MayDelete,
        };
    }
    Class::MayDelete
}

/// `ssh [OPTIONS] HOST [COMMAND…]`: the words after HOST are joined into one script for
/// the remote shell; without them, a login shell reads standard input.
pub(super) fn ssh(rest: &[Word], depth: usize) -> Class {
    let mut i = 0;
    while i < rest.len() {
        if rest[i].text == "--" {
            i += 1;
            break;
        }
        if matches!(rest[i].text.as_str(), "-V" | "-G") {
            return Class::Safe;
        }
        match option_width(&rest[i], "BbcDEeFIiJLlmOopQRSWw", &[]) {
            Some(n) => i += n,
            None => break,
        }
    }
    let cmd = rest.get(i + 1..).unwrap_or_default();
    match (cmd.is_empty(), cmd.iter().any(|w| w.dynamic)) {
        (true, _) | (_, true) => Class::MayDelete,
        (false, false) => script_in(&join(cmd), depth),
    }
}

/// `docker`/`podman`: `exec [OPTIONS] CONTAINER COMMAND…` classes COMMAND; `run` and
/// `create` run an image's command with host paths it may mount; `rm`, `rmi`, `prune`
/// delete.
pub(super) fn container(rest: &[Word], depth: usize) -> Class {
    let Some(sub) = rest.iter().position(|w| !w.text.starts_with('-')) else {
        return Class::Safe;
    };
    let args = &rest[sub + 1..];
    match rest[sub].text.as_str() {
        "exec" => {
            let mut i = 0;
            while i < args.len() {
                match option_width(
                    &args[i],
                    "euw",
                    &[
                        "env",
                        "env-file",
                        "user",
                        "workdir",
                        "detach-keys",
                        "preserve-fds",
                    ],
                ) {
                    Some(n) => i += n,
                    None => break,
                }
            }
            let cmd = args.get(i + 1..).unwrap_or_default();
            match cmd.is_empty() {
                true => Class::MayDelete,
                false => command(cmd, depth + 1),
            }
        }
        "rm" | "rmi" | "prune" => Class::Deletes,
        _ if args
            .iter()
            .any(|w| matches!(w.text.as_str(), "rm" | "prune" | "reset")) =>
        {
            Class::Deletes
        }
        "run" | "create" | "start" | "cp" | "load" | "import" | "compose" | "commit" => {
            Class::MayDelete
        }
        _ => Class::Safe,
    }
}

/// `sh …`: `-c SCRIPT` is read; a script file, or one on standard input, is not.
pub(super) fn shell(rest: &[Word], depth: usize) -> Class {
    let mut i = 0;
    let mut reads_c = false;
    while i < rest.len() {
        let w = &rest[i];
        if w.dynamic {
            return Class::MayDelete;
        }
        let t = w.text.as_str();
        if t == "--" || t == "-" {
            i += 1;
            break;
        }
        if matches!(t, "--version" | "--help") {
            return Class::Safe;
        }
        if let Some(long) = t.strip_prefix("--") {
            i += match long {
                "rcfile" | "init-file" => 2,
                _ => 1,
            };
            continue;
        }
        if let Some(letters) = t.strip_prefix('-').or_else(|| t.strip_prefix('+')) {
            if letters.contains('c') {
                reads_c = true;
            }
            // `-o OPTION` takes the next word.
            i += if letters.ends_with('o') { 2 } else { 1 };
            continue;
        }
        break;
    }
    match (reads_c, rest.get(i)) {
        (true, Some(s)) if !s.dynamic => script_in(&s.text, depth),
        // A script made at run time, a file, or standard input.
        _ => Class::MayDelete,
    }
}

/// `xargs [OPTIONS] [COMMAND…]`: the command runs with words read from standard input
/// (`echo` when none is given).
pub(super) fn xargs(rest: &[Word], depth: usize) -> Class {
    // `-e`, `-i`, `-l` (and `--eof`, `--replace`, `--max-lines`) take their argument
    // only in the same word (`-i{}`, `--replace=R`): `xargs --replace rm {}` runs rm.
    let short = "adEILnPs";
    let long = [
        "arg-file",
        "delimiter",
        "max-args",
        "max-procs",
        "max-chars",
        "process-slot-var",
    ];
    let mut i = 0;
    while i < rest.len() {
        let w = &rest[i];
        let t = w.text.as_str();
        let width = match t.starts_with('-') && !t.starts_with("--") && !w.dynamic {
            // A cluster ends at the first of `e`, `i`, `l`: the rest is its argument.
            true => option_width(
                &Word::literal(t.split(['e', 'i', 'l']).next().unwrap_or("-").to_string()),
                short,
                &long,
            )
            .or(Some(1)),
            false => option_width(w, short, &long),
        };
        match width {
            Some(n) => i += n,
            None => break,
        }
    }
    command(&rest[i.min(rest.len())..], depth + 1)
}
