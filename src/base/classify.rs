//! Whether a command deletes: the class a runbook's own command (`t:exec`, `t:shell`) is
//! given from its argv. A guess (runbook cannot know what an unknown program does), but a
//! conservative one: it looks through the wrappers that run another command (`sudo`,
//! `env`, `timeout`, `xargs`, `sh -c SCRIPT`, …) to the program that runs, reads a shell
//! script's words, and says "may delete" where it cannot read what runs (a variable in the
//! command position, `eval`, a sourced file, a script on standard input). A read
//! (`read_only = true`) runs during a dry-run, so anything but [`Class::Safe`] is refused
//! for one; a change of any class but safe is marked in every preview and plan.
//!
//! What a program does is judged by its name and flags only (never by running it or by
//! reading files): `rm`, `find -delete`, `rsync --delete`, `git clean`, `dd of=`, a `>`
//! that overwrites a file. Interpreters other than the shell (`python -c`, `perl -e`,
//! `awk`) are not parsed: their code is searched for names of calls that delete, write
//! or run a program, and code that builds those names at run time is not caught.

use std::ffi::OsString;

/// What a command does to what is there already, as far as its words tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Nothing in it deletes or overwrites.
    Safe,
    /// It may: a shell script with parts runbook cannot read, or a program that
    /// overwrites what may be there (`mv`, `tee`, `>`).
    MayDelete,
    /// It deletes, rebuilds or overwrites something.
    Deletes,
}

/// The class of `argv` (a program and its arguments, as `t:exec` gets them).
pub fn argv(argv: &[OsString]) -> Class {
    let words: Vec<Word> = argv
        .iter()
        .map(|w| Word::literal(w.to_string_lossy().into_owned()))
        .collect();
    command(&words, 0)
}

/// How deep wrappers and scripts inside scripts are followed; deeper is unreadable.
const DEPTH: usize = 12;

/// One word of a command: its text once quotes are removed, and whether an expansion
/// decides it (`$x`, `$(…)`, a glob), so that its text is not what runs.
#[derive(Debug, Clone)]
struct Word {
    text: String,
    /// Holds a parameter or command expansion, or an unquoted glob.
    dynamic: bool,
    /// Holds an unquoted expansion: it may become several words (a `$FLAGS`).
    splits: bool,
}

impl Word {
    fn literal(text: String) -> Word {
        Word {
            text,
            dynamic: false,
            splits: false,
        }
    }
}

/// The program's name as the shell finds it: the last part of its path.
fn base(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

/// Programs whose whole purpose is to delete or overwrite.
const DELETERS: &[&str] = &[
    "rm",
    "rmdir",
    "unlink",
    "shred",
    "truncate",
    "wipefs",
    "mkswap",
    "mke2fs",
    "blkdiscard",
    "srm",
];

/// Shells: `-c SCRIPT` is read; a file or standard input is not.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "ash", "zsh", "ksh", "mksh", "posh", "yash", "hush",
];

/// The class of one command's words, looking through wrappers.
fn command(words: &[Word], depth: usize) -> Class {
    let Some(first) = words.first() else {
        return Class::Safe;
    };
    if depth > DEPTH || first.dynamic {
        return Class::MayDelete;
    }
    let rest = &words[1..];
    let name = base(&first.text);
    match name {
        n if DELETERS.contains(&n) || n.starts_with("mkfs") => Class::Deletes,
        n if SHELLS.contains(&n) => shell(rest, depth),
        "busybox" | "builtin" | "nohup" | "coproc" => match (name, rest.first()) {
            // `coproc NAME { …; }`: a name before the command.
            ("coproc", Some(w)) if rest.len() > 1 && is_name(&w.text) => {
                let body = match rest[1].text.as_str() {
                    "{" => &rest[2..],
                    _ => &rest[1..],
                };
                command(rest, depth + 1).max(command(body, depth + 1))
            }
            _ => command(rest, depth + 1),
        },
        "sudo" => wrapped(rest, SUDO, depth),
        "doas" => wrapped(rest, Opts::new("uC").shell("s").assigns(), depth),
        "env" => env(rest, depth),
        "nice" => wrapped(rest, Opts::new("n").long(&["adjustment"]), depth),
        "ionice" => match rest
            .iter()
            .any(|w| w.text == "-p" || w.text == "-P" || w.text == "-u")
        {
            // Sets the class of running processes: runs nothing.
            true => Class::Safe,
            false => wrapped(rest, Opts::new("cn").long(&["class", "classdata"]), depth),
        },
        "stdbuf" => wrapped(
            rest,
            Opts::new("ioe").long(&["input", "output", "error"]),
            depth,
        ),
        "setsid" | "exec" => wrapped(rest, Opts::new("a"), depth),
        "flock" => flock(rest, depth),
        "taskset" => match rest
            .iter()
            .any(|w| w.text.starts_with('-') && w.text.contains('p'))
        {
            // `taskset -p MASK PID`: sets a running process's affinity, runs nothing.
            true => Class::Safe,
            false => after_operands(rest, "", &[], 1, depth),
        },
        "chrt" => match rest.iter().any(|w| {
            w.text.starts_with('-') && !w.text.starts_with("--") && w.text.contains(['p', 'm'])
                || w.text == "--pid"
                || w.text == "--max"
        }) {
            true => Class::Safe,
            false => after_operands(
                rest,
                "TPD",
                &["sched-runtime", "sched-period", "sched-deadline"],
                1,
                depth,
            ),
        },
        "unshare" => wrapped(
            rest,
            Opts::new("SGRw")
                .long(&[
                    "setuid",
                    "setgid",
                    "root",
                    "wd",
                    "propagation",
                    "setgroups",
                    "map-user",
                    "map-group",
                    "map-users",
                    "map-groups",
                    "load-interp",
                ])
                .bare_shell(),
            depth,
        ),
        "nsenter" => wrapped(
            rest,
            Opts::new("tSG")
                .long(&["target", "setuid", "setgid"])
                .bare_shell(),
            depth,
        ),
        "setpriv" => wrapped(
            rest,
            Opts::new("").long(&[
                "reuid",
                "regid",
                "ruid",
                "rgid",
                "euid",
                "egid",
                "groups",
                "inh-caps",
                "ambient-caps",
                "bounding-set",
                "securebits",
                "pdeathsig",
                "selinux-label",
                "apparmor-profile",
                "landlock-access",
                "landlock-rule",
                "ptracer",
            ]),
            depth,
        ),
        "strace" | "ltrace" => match rest.iter().any(|w| w.text.starts_with("-o")) {
            // `-o FILE` writes its trace over FILE.
            true => Class::MayDelete,
            false => wrapped(rest, Opts::new("eopsuabIEOSPXn"), depth),
        },
        "watch" => watch(rest, depth),
        "script" => script(rest, depth),
        "sg" => match rest.get(1..) {
            // `sg GROUP [-c] COMMAND`: COMMAND is a script for /bin/sh.
            Some(cmd) if !cmd.is_empty() => {
                let cmd = match cmd[0].text.as_str() {
                    "-c" => &cmd[1..],
                    _ => cmd,
                };
                match cmd.iter().any(|w| w.dynamic) {
                    true => Class::MayDelete,
                    false => script_in(&join(cmd), depth),
                }
            }
            // A shell on standard input.
            _ => Class::MayDelete,
        },
        "ssh" => ssh(rest, depth),
        "ip" => match rest.iter().position(|w| w.text == "exec") {
            // `ip netns exec NAME CMD`, `ip vrf exec NAME CMD`.
            Some(i) => command(rest.get(i + 2..).unwrap_or_default(), depth + 1).max(
                match rest.len() > i + 2 {
                    true => Class::Safe,
                    false => Class::MayDelete,
                },
            ),
            None => Class::Safe,
        },
        "docker" | "podman" => container(rest, depth),
        "time" => wrapped(rest, Opts::new("fo").long(&["format", "output"]), depth),
        "timeout" => after_operands(rest, "sk", &["signal", "kill-after"], 1, depth),
        "chroot" => match after_operands(rest, "", &["userspec", "groups"], 1, depth) {
            // No command: an interactive shell, reading standard input.
            Class::Safe if operands(rest, "", &["userspec", "groups"]) < 2 => Class::MayDelete,
            c => c,
        },
        "xargs" => xargs(rest, depth),
        "command" => match rest.iter().any(|w| w.text == "-v" || w.text == "-V") {
            true => Class::Safe,
            false => wrapped(rest, Opts::new(""), depth),
        },
        // Code runbook cannot read: a file, or text made at run time.
        "." | "source" => Class::MayDelete,
        "eval" => match rest.iter().any(|w| w.dynamic) {
            true => Class::MayDelete,
            false => script_in(&join(rest), depth),
        },
        // An alias is a script that runs wherever its name later stands (dash expands
        // aliases in scripts).
        "alias" => rest
            .iter()
            .filter_map(|w| w.text.split_once('=').map(|(_, v)| (w, v)))
            .map(|(w, v)| match w.dynamic {
                true => Class::MayDelete,
                false => script_in(v, depth),
            })
            .max()
            .unwrap_or(Class::Safe),
        // `runuser -u USER CMD`: CMD; the `su` form runs a shell.
        "runuser"
            if rest
                .iter()
                .any(|w| w.text == "-u" || w.text.starts_with("--user")) =>
        {
            wrapped(
                rest,
                Opts::new("ugGsw").long(&[
                    "user",
                    "group",
                    "supp-group",
                    "shell",
                    "whitelist-environment",
                ]),
                depth,
            )
        }
        // `su [USER] -c COMMAND`: COMMAND is a script for the user's shell.
        "su" | "runuser" => match rest
            .iter()
            .position(|w| w.text == "-c" || w.text == "--command")
        {
            Some(i) => match rest.get(i + 1) {
                Some(w) if !w.dynamic => script_in(&w.text, depth),
                _ => Class::MayDelete,
            },
            None => match rest.iter().find_map(|w| w.text.strip_prefix("--command=")) {
                Some(script) => script_in(script, depth),
                // A login shell on standard input, or on a terminal.
                None => Class::MayDelete,
            },
        },
        "trap" => match rest.first() {
            Some(w) if !w.dynamic => script_in(&w.text, depth),
            Some(_) => Class::MayDelete,
            None => Class::Safe,
        },
        "dd" => flags(rest, |w| w.starts_with("of=")),
        "export" | "readonly" | "declare" | "typeset" | "local" => match rest.iter().any(|w| {
            w.text
                .split_once('=')
                .is_some_and(|(n, _)| dangerous_name(n) || n.starts_with('-'))
        }) {
            true => Class::MayDelete,
            false => Class::Safe,
        },
        // Programs that write over a file that may be there.
        "cp" | "install" | "patch" | "rename" | "chattr" => match rest.iter().any(|w| {
            matches!(
                w.text.as_str(),
                "-n" | "--no-clobber" | "--help" | "--version"
            )
        }) {
            true => Class::Safe,
            false => Class::MayDelete,
        },
        "ln" => match rest.iter().any(|w| {
            w.text == "--force"
                || w.text.starts_with('-') && !w.text.starts_with("--") && w.text.contains('f')
        }) {
            true => Class::MayDelete,
            false => Class::Safe,
        },
        "sed" => match rest.iter().any(|w| {
            w.text.starts_with("--in-place")
                || w.text.starts_with('-')
                    && !w.text.starts_with("--")
                    && w.text[1..]
                        .split(['e', 'f', 'l'])
                        .next()
                        .is_some_and(|l| l.contains('i'))
        }) {
            true => Class::MayDelete,
            false => flags(rest, |_| false),
        },
        "tar" => tar(rest),
        "curl" => match rest.iter().any(|w| {
            let t = w.text.as_str();
            t.starts_with("--output")
                || t.starts_with("--remote-name")
                || t.starts_with("--config")
                || t.starts_with('-') && !t.starts_with("--") && t.contains(['o', 'O', 'K', 'D'])
        }) {
            true => Class::MayDelete,
            false => Class::Safe,
        },
        "wget" => match rest.iter().any(|w| {
            matches!(
                w.text.as_str(),
                "--spider" | "-O-" | "-qO-" | "--output-document=-"
            )
        }) || rest
            .windows(2)
            .any(|p| p[0].text.ends_with('O') && p[1].text == "-")
        {
            true => Class::Safe,
            false => Class::MayDelete,
        },
        n if INTERPRETERS.iter().any(|i| {
            n.strip_prefix(i)
                .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
        }) =>
        {
            interpreter(n, rest)
        }
        "find" => find(rest, depth),
        "rsync" => match flags(rest, |w| {
            w.starts_with("--delete") || w == "--del" || w == "--remove-source-files"
        }) {
            Class::Safe if !rest.iter().any(|w| w.text == "--list-only") => Class::MayDelete,
            c => c,
        },
        "git" => git(rest),
        "mv" => match rest
            .iter()
            .any(|w| w.text == "-n" || w.text == "--no-clobber")
        {
            true => Class::Safe,
            // Onto a name that may be taken: what was there is gone.
            false => Class::MayDelete,
        },
        "tee" => tee(rest),
        // Runners of the command after their `--` (runbook's own container hops too).
        "pct" | "lxc-attach" | "kubectl" => match rest.iter().position(|w| w.text == "--") {
            Some(i) => command(&rest[i + 1..], depth + 1),
            None if rest.iter().any(|w| {
                matches!(
                    w.text.as_str(),
                    "delete" | "destroy" | "rollback" | "restore" | "delsnapshot"
                )
            }) =>
            {
                Class::Deletes
            }
            // `lxc-attach -n NAME` runs a shell; `pct enter`, `kubectl exec POD CMD` (the
            // old form) and `lxc-attach -n NAME CMD` a command runbook did not find.
            None if name == "lxc-attach"
                || rest
                    .iter()
                    .any(|w| matches!(w.text.as_str(), "exec" | "enter" | "push" | "cp")) =>
            {
                Class::MayDelete
            }
            None => Class::Safe,
        },
        _ => unknown(name, rest),
    }
}

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
struct Opts {
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
    const fn new(short: &'static str) -> Opts {
        Opts {
            short,
            long: &[],
            shell: "",
            assigns: false,
            bare_shell: false,
        }
    }
    const fn bare_shell(mut self) -> Opts {
        self.bare_shell = true;
        self
    }
    const fn long(mut self, long: &'static [&'static str]) -> Opts {
        self.long = long;
        self
    }
    const fn shell(mut self, letters: &'static str) -> Opts {
        self.shell = letters;
        self
    }
    const fn assigns(mut self) -> Opts {
        self.assigns = true;
        self
    }
}

const SUDO: Opts = Opts::new("ugCDhprtTUR")
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
fn wrapped(rest: &[Word], o: Opts, depth: usize) -> Class {
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
fn operands(rest: &[Word], short: &str, long: &[&str]) -> usize {
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
fn after_operands(rest: &[Word], short: &str, long: &[&str], skip: usize, depth: usize) -> Class {
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

/// A shell variable's name.
fn is_name(w: &str) -> bool {
    !w.is_empty()
        && !w.starts_with(|c: char| c.is_ascii_digit())
        && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Environment variables that make a program run code of their choosing: bash imports
/// a function from `BASH_FUNC_NAME%%` (so `true` may be `rm x`), runs `$BASH_ENV` (and
/// `sh` `$ENV`) first, `PATH` decides which `ls` runs, the loader preloads
/// `LD_PRELOAD`, interpreters and git read options or code from theirs.
fn dangerous_name(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "BASH_ENV",
        "ENV",
        "PATH",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "IFS",
        "CDPATH",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONINSPECT",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "RUBYOPT",
        "RUBYLIB",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PAGER",
        "EDITOR",
        "VISUAL",
        "LESSOPEN",
        "LESSCLOSE",
        "SUDO_ASKPASS",
        "SSH_ASKPASS",
        "GCONV_PATH",
        "HOSTALIASES",
        "MALLOC_CHECK_",
        "TMPDIR",
    ];
    NAMES.contains(&name)
        || name.starts_with("BASH_FUNC_")
        || name.starts_with("LD_")
        // GIT_CONFIG_COUNT/KEY_n/VALUE_n set any config (an alias), GIT_SSH_COMMAND,
        // GIT_EXTERNAL_DIFF, GIT_PAGER, GIT_EDITOR, GIT_ASKPASS, GIT_EXEC_PATH run code.
        || name.starts_with("GIT_")
            && !matches!(name, "GIT_DIR" | "GIT_WORK_TREE" | "GIT_TERMINAL_PROMPT")
}

/// The class of a command's own environment (`env = { … }` in `t:exec`): one that
/// names a variable that makes programs run other code ([`dangerous_name`]) may delete.
pub fn env_vars<'a>(names: impl IntoIterator<Item = &'a str>) -> Class {
    match names.into_iter().any(dangerous_name) {
        true => Class::MayDelete,
        false => Class::Safe,
    }
}

/// `env [OPTIONS] [NAME=VALUE…] [COMMAND…]`. Options come in clusters (`-iS STRING`,
/// `-iu NAME`); `-S`/`--split-string` splits its string into the command's first
/// words. Any word with a `=` before the command is an assignment (env takes
/// `BASH_FUNC_x%%=…` too, which the shell's rule would not).
fn env(rest: &[Word], depth: usize) -> Class {
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
fn flock(rest: &[Word], depth: usize) -> Class {
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
fn watch(rest: &[Word], depth: usize) -> Class {
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
fn script(rest: &[Word], depth: usize) -> Class {
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
fn ssh(rest: &[Word], depth: usize) -> Class {
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
fn container(rest: &[Word], depth: usize) -> Class {
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

/// `tar`: listing (`-t`, `--list`) writes nothing; extracting writes over files, and
/// creating writes the archive; options that run a program are not read.
fn tar(rest: &[Word]) -> Class {
    let mut list = false;
    for (k, w) in rest.iter().enumerate() {
        let t = w.text.as_str();
        if w.dynamic {
            return Class::MayDelete;
        }
        if t == "--delete" {
            return Class::Deletes;
        }
        if [
            "--to-command",
            "--checkpoint-action",
            "--use-compress-program",
            "--info-script",
            "--new-volume-script",
            "--rsh-command",
            "--rmt-command",
            "--extract",
            "--get",
            "--create",
            "--append",
            "--update",
            "--concatenate",
            "--catenate",
            "--overwrite",
        ]
        .iter()
        .any(|o| t.starts_with(o))
        {
            return Class::MayDelete;
        }
        list |= t == "--list" || t == "--help" || t == "--version";
        // Short letters: `-tvf`, or the old style without a dash as the first word.
        let letters = match (t.strip_prefix('-'), k) {
            (Some(l), _) if !l.starts_with('-') => l,
            (None, 0) => t,
            _ => continue,
        };
        let letters = letters.split('f').next().unwrap_or_default();
        if letters.contains(['x', 'c', 'r', 'u', 'A', 'I', 'F']) {
            return Class::MayDelete;
        }
        list |= letters.contains('t');
    }
    match list {
        true => Class::Safe,
        false => Class::MayDelete,
    }
}

/// Interpreters whose `-c`/`-e` code is looked at for obvious deletion calls.
const INTERPRETERS: &[&str] = &[
    "python", "pypy", "perl", "ruby", "node", "nodejs", "deno", "bun", "awk", "gawk", "mawk",
    "nawk", "php", "lua", "luajit", "tclsh", "Rscript",
];

/// `python3 -c CODE`, `perl -e CODE`, `awk 'PROGRAM'`, …: runbook does not parse the
/// language; CODE that names a call that deletes, writes or runs another program
/// (`os.remove`, `shutil.rmtree`, `unlink`, `system`, `subprocess`, `open(…, "w")`) may
/// delete; code given in a file, on standard input, or as a module (`-m`) cannot be read
/// and may too. `--version`, `-V` only print.
fn interpreter(name: &str, rest: &[Word]) -> Class {
    const CALLS: &[&str] = &[
        "remove",
        "unlink",
        "rmtree",
        "rmdir",
        "system",
        "subprocess",
        "popen",
        "spawn",
        "exec",
        "eval",
        "shutil",
        "truncate",
        "rename",
        "replace",
        "write",
        "open(",
        "getline",
        "print >",
        "printf >",
        "print>",
        "printf>",
        "|",
        "`",
        "qx",
        "child_process",
        "fs.",
        "require",
        "import(",
        "__import__",
        "importlib",
        "compile",
        "ctypes",
        "os.",
        "pty",
        "Deno.",
        "Bun.",
        "io.",
        "file(",
        "sysopen",
        "chmod",
        "kill",
    ];
    let awk = name.contains("awk");
    let mut i = 0;
    while i < rest.len() {
        let w = &rest[i];
        let t = w.text.as_str();
        if w.dynamic {
            return Class::MayDelete;
        }
        if matches!(t, "--version" | "-V" | "--help" | "-h" | "-v") && !awk {
            return Class::Safe;
        }
        let code = if awk && !t.starts_with('-') {
            Some(t)
        } else if matches!(t, "-c" | "-e" | "-E" | "-p" | "--eval" | "--print") {
            rest.get(i + 1).map(|w| w.text.as_str())
        } else if awk && matches!(t, "-F" | "-v") {
            i += 2;
            continue;
        } else if t.starts_with('-') && !t.starts_with("--") && t.len() > 1 && !awk {
            // `-i` (perl: edit in place), `-m MODULE`, and other letters that read code
            // from elsewhere: not read.
            if t[1..].contains(['i', 'm', 'x', 'r', 'n', 'p', 'I']) && !t[1..].contains(['c', 'e'])
            {
                return Class::MayDelete;
            }
            i += 1;
            continue;
        } else if t.starts_with('-') {
            i += 1;
            continue;
        } else {
            // A file of code.
            return Class::MayDelete;
        };
        return match code {
            Some(code) if !CALLS.iter().any(|c| code.contains(c)) => Class::Safe,
            _ => Class::MayDelete,
        };
    }
    // No code: read from standard input.
    Class::MayDelete
}

/// Programs that take a command to run, which an unknown program's argv may name.
const RUNNERS: &[&str] = &[
    "sudo", "doas", "env", "xargs", "nohup", "timeout", "nice", "ionice", "setsid", "flock",
    "taskset", "chrt", "unshare", "nsenter", "runuser", "su", "setpriv", "strace", "watch",
    "script", "stdbuf", "chroot", "busybox", "eval", "exec", "command", "ssh",
];

/// Programs that only look, whatever words follow (`grep rm`, `which sh`, `man sudo`).
const LOOKERS: &[&str] = &[
    "echo",
    "printf",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "pgrep",
    "which",
    "type",
    "whereis",
    "man",
    "info",
    "test",
    "[",
    "[[",
    "ls",
    "cat",
    "stat",
    "file",
    "readlink",
    "realpath",
    "basename",
    "dirname",
    "id",
    "ps",
    "du",
    "df",
    "wc",
    "head",
    "tail",
    "sort",
    "uniq",
    "cut",
    "tr",
    "true",
    "false",
    ":",
    "sha256sum",
    "sha1sum",
    "md5sum",
    "dpkg",
    "rpm",
    "apt-cache",
    "hash",
    "getent",
    "printenv",
    "uname",
    "hostname",
    "date",
    "sleep",
    "nvidia-smi",
    "uptime",
    "free",
    "lsblk",
    "pidof",
    "apropos",
    "whatis",
    "expr",
    "seq",
];

/// A program runbook does not know: safe, unless a later word is itself a program that
/// deletes, a shell given `-c`, or a runner of commands (`foo rm x`, `foo sh -c …`,
/// `foo sudo …`): then it likely runs that command, and may delete.
fn unknown(name: &str, rest: &[Word]) -> Class {
    if LOOKERS.contains(&name) {
        return Class::Safe;
    }
    let runs = rest.iter().enumerate().any(|(k, w)| {
        let b = base(&w.text);
        let next = rest.get(k + 1).map(|n| n.text.as_str());
        !w.text.starts_with('-')
            && (DELETERS.contains(&b)
                || RUNNERS.contains(&b) && next.is_some()
                || SHELLS.contains(&b)
                    && next.is_some_and(|n| n.starts_with('-') && n.contains('c')))
    });
    match runs {
        true => Class::MayDelete,
        false => Class::Safe,
    }
}

/// `NAME=VALUE`, as `env` and the shell take them before a command.
fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// The words as one line of shell, for `eval WORDS` and `sudo -s WORDS`.
fn join(words: &[Word]) -> String {
    words
        .iter()
        .map(|w| w.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A program that deletes when one of its words says so; a word that may split into
/// several (an unquoted `$FLAGS`) may say so.
fn flags(rest: &[Word], deletes: impl Fn(&str) -> bool) -> Class {
    if rest.iter().any(|w| !w.dynamic && deletes(&w.text)) {
        Class::Deletes
    } else if rest.iter().any(|w| w.splits) {
        Class::MayDelete
    } else {
        Class::Safe
    }
}

/// `sh …`: `-c SCRIPT` is read; a script file, or one on standard input, is not.
fn shell(rest: &[Word], depth: usize) -> Class {
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
fn xargs(rest: &[Word], depth: usize) -> Class {
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

/// `find`: `-delete`, `-exec`/`-execdir`/`-ok`/`-okdir COMMAND… ;` (the command is
/// classed), and `-fprint`/`-fls FILE` (which overwrite FILE).
fn find(rest: &[Word], depth: usize) -> Class {
    let mut class = Class::Safe;
    let mut i = 0;
    while i < rest.len() {
        let t = rest[i].text.as_str();
        if rest[i].splits {
            class = class.max(Class::MayDelete);
        }
        match t {
            "-delete" => return Class::Deletes,
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => return Class::Deletes,
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let end = rest[i + 1..]
                    .iter()
                    .position(|w| w.text == ";" || w.text == "+")
                    .map_or(rest.len(), |p| i + 1 + p);
                class = class.max(command(&rest[i + 1..end], depth + 1));
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    class
}

/// `git`: `clean` (unless `-n`), `rm`, `reset --hard`, `checkout` of paths or with
/// `-f`, `restore`, `switch --discard-changes`, `stash drop|clear`, `branch -D`,
/// `gc --prune`, `prune`, `worktree remove|prune`, …; a `-c` that sets config which runs
/// a program (`alias.X=!…`, `core.pager`, …) may delete.
fn git(rest: &[Word]) -> Class {
    let mut i = 0;
    // Global options; `-C DIR` and `-c KEY=VALUE` take the next word.
    while i < rest.len() && rest[i].text.starts_with('-') {
        let t = rest[i].text.as_str();
        if t.starts_with("--config-env") || t.starts_with("--exec-path=") {
            return Class::MayDelete;
        }
        if t == "-c" {
            match rest.get(i + 1) {
                Some(v) if !v.dynamic && !runs_program(&v.text) => {}
                _ => return Class::MayDelete,
            }
        }
        i += match t {
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env" => 2,
            _ => 1,
        };
    }
    let Some(sub) = rest.get(i) else {
        return Class::Safe;
    };
    if sub.dynamic {
        return Class::MayDelete;
    }
    let args = &rest[i + 1..];
    let has = |f: &str| args.iter().any(|w| w.text == f);
    match sub.text.as_str() {
        "clean" if !(has("-n") || has("--dry-run")) => Class::Deletes,
        "rm" | "restore" => Class::Deletes,
        "reset" if has("--hard") || has("--merge") || has("--keep") => Class::Deletes,
        "checkout" if has("--") || has("-f") || has("--force") || has(".") => Class::Deletes,
        "switch" if has("--discard-changes") || has("-f") || has("--force") => Class::Deletes,
        "stash" if has("drop") || has("clear") => Class::Deletes,
        "branch" if has("-D") || has("--delete") || has("-d") => Class::Deletes,
        "gc" if args.iter().any(|w| w.text.starts_with("--prune")) => Class::Deletes,
        "prune" | "prune-packed" | "filter-branch" | "filter-repo" => Class::Deletes,
        "worktree" if has("remove") || has("prune") => Class::Deletes,
        "reflog" if has("expire") || has("delete") => Class::Deletes,
        "update-ref" if has("-d") => Class::Deletes,
        "tag" if has("-d") || has("--delete") => Class::Deletes,
        "checkout-index" if has("-f") || has("--force") => Class::Deletes,
        "read-tree" if has("-u") || has("--reset") => Class::Deletes,
        "submodule" if has("deinit") => Class::Deletes,
        "push"
            if has("--delete")
                || has("-d")
                || has("--force")
                || has("-f")
                || has("--mirror")
                || has("--prune") =>
        {
            Class::Deletes
        }
        // They write the work tree over: what was not committed may be lost.
        "merge" | "pull" | "rebase" | "am" | "apply" | "cherry-pick" | "revert" | "mv"
        | "sparse-checkout" | "lfs" => Class::MayDelete,
        "stash" if !(has("list") || has("show")) => Class::MayDelete,
        // Setting config can add an alias or a pager that runs later.
        "config"
            if !(args.len() == 1
                || args.iter().any(|w| {
                    w.text.starts_with("--get") || w.text == "-l" || w.text == "--list"
                })) =>
        {
            Class::MayDelete
        }
        _ if args.iter().any(|w| w.splits) => Class::MayDelete,
        _ => Class::Safe,
    }
}

/// A `git -c KEY=VALUE` whose value git runs as a program: an alias with `!`, a pager,
/// editor, ssh command, hook path, filter, diff or merge driver, credential helper.
fn runs_program(kv: &str) -> bool {
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    let key = key.to_ascii_lowercase();
    value.contains('!')
        || key.starts_with("alias.")
        || key.starts_with("pager.")
        || key.starts_with("filter.")
        || key.starts_with("diff.")
        || key.starts_with("merge.")
        || key.starts_with("credential")
        || key.starts_with("include")
        || key.starts_with("gpg.")
        || key.starts_with("ssh.")
        || key.ends_with("command")
        || key.ends_with("program")
        || key.ends_with("helper")
        || key.ends_with("hook")
        || matches!(
            key.as_str(),
            "core.pager"
                | "core.editor"
                | "core.sshcommand"
                | "core.fsmonitor"
                | "core.hookspath"
                | "core.askpass"
                | "core.gitproxy"
                | "core.worktree"
                | "sequence.editor"
                | "uploadpack.packobjectshook"
                | "receive.procreceiverefs"
        )
}

/// `tee FILE…` overwrites each FILE (not with `-a`).
fn tee(rest: &[Word]) -> Class {
    let mut files = false;
    let mut options = true;
    for w in rest {
        match w.text.as_str() {
            "--" if options => options = false,
            "-a" | "--append" if options => return Class::Safe,
            t if options && t.starts_with('-') && t.len() > 1 => {
                if t.starts_with("--") {
                    continue;
                }
                if t.contains('a') {
                    return Class::Safe;
                }
            }
            t => files |= !quiet_file(t),
        }
    }
    match files {
        true => Class::MayDelete,
        false => Class::Safe,
    }
}

/// Files that writing to loses nothing.
fn quiet_file(path: &str) -> bool {
    // Exactly these names: `/dev/fd/../../x` is `/x`.
    matches!(
        path,
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty"
    ) || path
        .strip_prefix("/dev/fd/")
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// A script found inside a command (`sh -c`, `eval`, `trap`): one level deeper.
fn script_in(text: &str, depth: usize) -> Class {
    shell_script(text, depth + 1)
}

fn shell_script(text: &str, depth: usize) -> Class {
    if depth > DEPTH {
        return Class::MayDelete;
    }
    let mut p = Parser {
        s: text.chars().collect(),
        i: 0,
        class: Class::Safe,
        depth,
        heredocs: Vec::new(),
    };
    p.list(false);
    if p.i < p.s.len() || !p.heredocs.is_empty() {
        // Stopped early, or a here-document whose body never came: not all was read.
        p.class = p.class.max(Class::MayDelete);
    }
    p.class
}

/// Reads a shell script the way `sh` splits it into commands, conservatively: each
/// simple command's words (quotes removed, expansions marked) are classed as a command;
/// command substitutions are read as scripts of their own; what it cannot follow makes
/// the script "may delete".
struct Parser {
    s: Vec<char>,
    i: usize,
    class: Class,
    depth: usize,
    /// Here-documents whose bodies start at the next newline: (delimiter, quoted, `<<-`).
    heredocs: Vec<(String, bool, bool)>,
}

/// Words that start or end a compound command, in command position.
const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "{", "}", "!",
];

impl Parser {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.s.get(self.i + n).copied()
    }

    fn unreadable(&mut self) {
        self.class = self.class.max(Class::MayDelete);
    }

    fn found(&mut self, c: Class) {
        self.class = self.class.max(c);
    }

    /// Commands until the end of the text or, `in_parens`, the `)` of `$(…)` or `<(…)`,
    /// which is consumed.
    fn list(&mut self, in_parens: bool) {
        let mut words: Vec<Word> = Vec::new();
        // `case WORD in`: patterns come until `)`; `for NAME in WORDS`: no command.
        let mut skipping_to_in = false;
        let mut for_words = false;
        let mut case_depth = 0usize;
        let mut pattern = false;
        // Subshells open: a `)` closes one, or else the `$(…)` being read.
        let mut open = 0usize;
        loop {
            self.blanks();
            let Some(c) = self.peek() else {
                if in_parens || open > 0 {
                    self.unreadable();
                }
                break;
            };
            match c {
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.i += 1;
                    }
                }
                '\n' | ';' | '&' | '|' => {
                    // Lookahead for `;;` (a case item ends) and `&>` (a redirection).
                    if c == '&' && self.peek_at(1) == Some('>') {
                        self.i += 1;
                        self.redirection(words.is_empty());
                        continue;
                    }
                    let double_semi = c == ';' && matches!(self.peek_at(1), Some(';' | '&'));
                    self.i += 1;
                    if matches!(self.peek(), Some('&' | '|')) && c != ';' && c != '\n' {
                        self.i += 1;
                    }
                    if double_semi {
                        self.i += 1;
                        pattern = case_depth > 0;
                    }
                    self.finish(&mut words);
                    for_words = false;
                    if c == '\n' {
                        self.bodies();
                    }
                }
                ')' => {
                    self.i += 1;
                    if pattern {
                        pattern = false;
                        continue;
                    }
                    self.finish(&mut words);
                    match (open, in_parens) {
                        (0, true) => return,
                        // A `)` that closes nothing: not a script `sh` would run.
                        (0, false) => self.unreadable(),
                        _ => open -= 1,
                    }
                }
                '(' if words.is_empty() => {
                    self.i += 1;
                    if pattern {
                        // `(a|b)`: a case pattern's optional opening parenthesis.
                    } else if self.peek() == Some('(') {
                        // `(( … ))`: arithmetic, which runs nothing unless it expands.
                        self.i += 1;
                        self.arithmetic();
                    } else {
                        // A subshell: its commands are read as these are.
                        open += 1;
                    }
                }
                '<' | '>' => self.redirection(words.is_empty()),
                _ => {
                    let Some(w) = self.word() else {
                        self.unreadable();
                        self.i = self.s.len();
                        break;
                    };
                    // An IO number: `2>file`.
                    if !w.dynamic
                        && !w.text.is_empty()
                        && w.text.chars().all(|c| c.is_ascii_digit())
                        && matches!(self.peek(), Some('<' | '>'))
                    {
                        continue;
                    }
                    if pattern {
                        if w.text == "esac" && !w.dynamic {
                            case_depth -= 1;
                            pattern = false;
                        }
                        continue;
                    }
                    if skipping_to_in {
                        if w.text == "in" && !w.dynamic {
                            skipping_to_in = false;
                            pattern = true;
                        }
                        continue;
                    }
                    if for_words {
                        continue;
                    }
                    if words.is_empty() && !w.dynamic {
                        match w.text.as_str() {
                            "case" => {
                                case_depth += 1;
                                skipping_to_in = true;
                                continue;
                            }
                            "esac" => {
                                case_depth = case_depth.saturating_sub(1);
                                continue;
                            }
                            "for" | "select" => {
                                for_words = true;
                                continue;
                            }
                            "function" => {
                                // Its name follows.
                                self.blanks();
                                let _ = self.word();
                                continue;
                            }
                            t if RESERVED.contains(&t) => continue,
                            t if is_assignment(t) => {
                                // `BASH_ENV=x sh -c …`, `PATH=… ls`: see `dangerous_name`.
                                if dangerous_name(t.split('=').next().unwrap_or_default()) {
                                    self.unreadable();
                                }
                                continue;
                            }
                            _ => {}
                        }
                        // `NAME() …`: a function's definition; its body is read as commands.
                        if self.peek() == Some('(') && self.peek_at(1) == Some(')') {
                            self.i += 2;
                            continue;
                        }
                    }
                    if words.is_empty() && w.dynamic && is_assignment(&w.text) {
                        // `x=$(…)`: the substitution was read as it went by.
                        if dangerous_name(w.text.split('=').next().unwrap_or_default()) {
                            self.unreadable();
                        }
                        continue;
                    }
                    words.push(w);
                }
            }
        }
        self.finish(&mut words);
    }

    /// Classes the command whose words were collected, and starts the next.
    fn finish(&mut self, words: &mut Vec<Word>) {
        if !words.is_empty() {
            let c = command(words, self.depth + 1);
            self.found(c);
            words.clear();
        }
    }

    /// Spaces, tabs and line continuations.
    fn blanks(&mut self) {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\r') => self.i += 1,
                Some('\\') if self.peek_at(1) == Some('\n') => self.i += 2,
                _ => return,
            }
        }
    }

    /// A redirection at `<` or `>` (after an IO number or `&`): an overwrite of a file
    /// may delete; `>>`, `<`, `<>` and duplications (`2>&1`) do not; `<<` starts a
    /// here-document, `<(`/`>(` a process substitution, read as a script.
    fn redirection(&mut self, _first: bool) {
        let c = self.peek().unwrap_or('>');
        self.i += 1;
        if self.peek() == Some('(') {
            self.i += 1;
            self.nested();
            return;
        }
        let mut overwrites = c == '>';
        match (c, self.peek()) {
            ('>', Some('>')) => {
                self.i += 1;
                overwrites = false;
            }
            ('>', Some('|')) => self.i += 1,
            ('>', Some('&')) | ('<', Some('&')) => {
                self.i += 1;
                self.blanks();
                let w = self.word();
                // `>&2`, `>&-`: a descriptor; `>& FILE` (bash) overwrites FILE.
                if let Some(w) = w {
                    let fd =
                        !w.dynamic && (w.text == "-" || w.text.chars().all(|c| c.is_ascii_digit()));
                    if c == '>' && !fd {
                        self.found(Class::MayDelete);
                    }
                }
                return;
            }
            ('<', Some('>')) => {
                self.i += 1;
                overwrites = false;
            }
            ('<', Some('<')) => {
                self.i += 1;
                if self.peek() == Some('<') {
                    // `<<< WORD`: a string on standard input.
                    self.i += 1;
                    self.blanks();
                    let _ = self.word();
                    return;
                }
                let strip = self.peek() == Some('-');
                if strip {
                    self.i += 1;
                }
                self.blanks();
                let start = self.i;
                match self.word() {
                    Some(w) => {
                        let quoted = self.s[start..self.i].iter().any(|c| "'\"\\".contains(*c));
                        self.heredocs.push((w.text, quoted, strip));
                    }
                    None => self.unreadable(),
                }
                return;
            }
            _ => {}
        }
        self.blanks();
        match self.word() {
            Some(w) if overwrites && (w.dynamic || !quiet_file(&w.text)) => {
                self.found(Class::MayDelete)
            }
            Some(_) => {}
            None => self.unreadable(),
        }
    }

    /// The bodies of the here-documents of the line that just ended: data for their
    /// command, unless an unquoted one expands a command (`$(…)`, a backquote).
    fn bodies(&mut self) {
        for (delim, quoted, strip) in std::mem::take(&mut self.heredocs) {
            let mut found = false;
            while self.i < self.s.len() {
                let end = self.s[self.i..]
                    .iter()
                    .position(|c| *c == '\n')
                    .map_or(self.s.len(), |p| self.i + p);
                let line: String = self.s[self.i..end].iter().collect();
                self.i = (end + 1).min(self.s.len());
                let line = if strip {
                    line.trim_start_matches('\t')
                } else {
                    &line
                };
                if line == delim {
                    found = true;
                    break;
                }
                if !quoted && (line.contains("$(") || line.contains('`')) {
                    self.unreadable();
                }
            }
            if !found {
                self.unreadable();
            }
        }
    }

    /// `$(( … ))` or `(( … ))` after its opening: to the matching `))`. A command
    /// substitution inside (`$(( start - $(date +%s) ))`) is read as the script it is; a
    /// backquote inside is not read.
    fn arithmetic(&mut self) {
        let mut depth = 0usize;
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                '(' => depth += 1,
                ')' if depth > 0 => depth -= 1,
                ')' if self.peek() == Some(')') => {
                    self.i += 1;
                    return;
                }
                '$' if self.peek() == Some('(') && self.peek_at(1) == Some('(') => {
                    self.i += 2;
                    self.arithmetic();
                }
                '$' if self.peek() == Some('(') => {
                    self.i += 1;
                    self.nested();
                }
                '`' => self.unreadable(),
                _ => {}
            }
        }
        self.unreadable();
    }

    /// A script inside this one (`$(…)`, a backquote, `<(…)`), read to its end.
    fn nested(&mut self) {
        if self.depth >= DEPTH {
            self.unreadable();
            self.i = self.s.len();
            return;
        }
        let heredocs = std::mem::take(&mut self.heredocs);
        self.depth += 1;
        self.list(true);
        self.depth -= 1;
        self.heredocs = heredocs;
    }

    /// One word, quotes removed; `None` where it cannot be read (an unterminated quote).
    fn word(&mut self) -> Option<Word> {
        let mut w = Word::literal(String::new());
        let start = self.i;
        let mut glob = false;
        // The unquoted characters, for brace expansion (`{rm,x}` is `rm x`, in bash).
        let mut unquoted = String::new();
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\r' | '\n' | ';' | '&' | '|' | '<' | '>' | ')' => break,
                '(' => {
                    // `NAME()` ends the name; a `(` inside a word is not POSIX.
                    break;
                }
                '`' => {
                    self.i += 1;
                    self.backquote()?;
                    w.dynamic = true;
                    w.splits = true;
                }
                '\\' => {
                    self.i += 1;
                    match self.peek() {
                        Some('\n') => self.i += 1,
                        Some(c) => {
                            w.text.push(c);
                            self.i += 1;
                        }
                        None => {}
                    }
                }
                '\'' => {
                    self.i += 1;
                    loop {
                        match self.peek() {
                            Some('\'') => {
                                self.i += 1;
                                break;
                            }
                            Some(c) => {
                                w.text.push(c);
                                self.i += 1;
                            }
                            None => return None,
                        }
                    }
                }
                '"' => {
                    self.i += 1;
                    self.double_quoted(&mut w)?;
                }
                '$' => {
                    self.i += 1;
                    if self.dollar(&mut w)? {
                        w.splits = true;
                    }
                }
                '*' | '?' | '[' => {
                    w.text.push(c);
                    glob = true;
                    self.i += 1;
                }
                c => {
                    w.text.push(c);
                    unquoted.push(c);
                    self.i += 1;
                }
            }
        }
        // A pattern matches file names, which decide the word; `[` and `[[` are tests.
        if glob && !matches!(w.text.as_str(), "[" | "[[") {
            w.dynamic = true;
        }
        if let Some(open) = unquoted.find('{') {
            let inner = &unquoted[open..];
            if inner
                .find('}')
                .is_some_and(|close| inner[..close].contains(',') || inner[..close].contains(".."))
            {
                w.dynamic = true;
                w.splits = true;
            }
        }
        if self.i == start {
            // Nothing a word is made of: a `(` where no word starts.
            if self.peek() == Some('(') {
                self.i += 1;
                return Some(w);
            }
            return None;
        }
        Some(w)
    }

    /// Inside `"…"`, after the opening quote, to the closing one.
    fn double_quoted(&mut self, w: &mut Word) -> Option<()> {
        loop {
            match self.peek()? {
                '"' => {
                    self.i += 1;
                    return Some(());
                }
                '\\' => {
                    self.i += 1;
                    let c = self.peek()?;
                    if !matches!(c, '$' | '`' | '"' | '\\' | '\n') {
                        w.text.push('\\');
                    }
                    if c != '\n' {
                        w.text.push(c);
                    }
                    self.i += 1;
                }
                '`' => {
                    self.i += 1;
                    self.backquote()?;
                    w.dynamic = true;
                }
                '$' => {
                    self.i += 1;
                    self.dollar(w)?;
                }
                c => {
                    w.text.push(c);
                    self.i += 1;
                }
            }
        }
    }

    /// After a `$`: an expansion (`$x`, `${…}`, `$(…)`, `$((…))`), which makes the word
    /// dynamic; `Some(true)` when it did. A lone `$` is itself.
    fn dollar(&mut self, w: &mut Word) -> Option<bool> {
        match self.peek() {
            Some('(') if self.peek_at(1) == Some('(') => {
                self.i += 2;
                self.arithmetic();
            }
            Some('(') => {
                self.i += 1;
                self.nested();
            }
            Some('{') => {
                self.i += 1;
                self.braced()?;
            }
            Some('\'') => {
                // `$'…'` (bash): escapes runbook does not decode.
                self.i += 1;
                loop {
                    match self.peek()? {
                        '\\' => self.i += 2,
                        '\'' => {
                            self.i += 1;
                            break;
                        }
                        _ => self.i += 1,
                    }
                }
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.i += 1;
                }
            }
            Some(c) if c.is_ascii_digit() || "@*#?-$!".contains(c) => self.i += 1,
            _ => {
                w.text.push('$');
                return Some(false);
            }
        }
        w.dynamic = true;
        w.text.push('$');
        Some(true)
    }

    /// `${…}` after its `{`, to the matching `}`: its words may hold quotes and
    /// expansions of their own (`${1:-$(id -un)}`).
    fn braced(&mut self) -> Option<()> {
        let mut scratch = Word::literal(String::new());
        loop {
            match self.peek()? {
                '}' => {
                    self.i += 1;
                    return Some(());
                }
                '\\' => self.i += 2,
                // A `'` is not taken as a quote: inside "${x:-'…'}" it quotes nothing
                // and a `$(…)` after it runs.
                '"' => {
                    self.i += 1;
                    self.double_quoted(&mut scratch)?;
                }
                '`' => {
                    self.i += 1;
                    self.backquote()?;
                }
                '$' => {
                    self.i += 1;
                    self.dollar(&mut scratch)?;
                }
                _ => self.i += 1,
            }
        }
    }

    /// A backquoted command after its opening backquote: its text (with `\` before a
    /// backquote, `$` or `\` removed, as the shell does) is read as a script.
    fn backquote(&mut self) -> Option<()> {
        let mut text = String::new();
        loop {
            match self.peek()? {
                '`' => {
                    self.i += 1;
                    break;
                }
                '\\' => {
                    let next = self.peek_at(1)?;
                    if !matches!(next, '`' | '$' | '\\') {
                        text.push('\\');
                    }
                    text.push(next);
                    self.i += 2;
                }
                c => {
                    text.push(c);
                    self.i += 1;
                }
            }
        }
        let c = shell_script(&text, self.depth + 1);
        self.found(c);
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(words: &[&str]) -> Class {
        argv(&words.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn argv_table() {
        use Class::*;
        let table: &[(&[&str], Class)] = &[
            (&["ls", "-l"], Safe),
            (&["cat", "/etc/hosts"], Safe),
            (&["rm", "x"], Deletes),
            (&["/bin/rm", "-rf", "x"], Deletes),
            (&["rmdir", "d"], Deletes),
            (&["unlink", "f"], Deletes),
            (&["shred", "f"], Deletes),
            (&["truncate", "-s0", "f"], Deletes),
            (&["mkfs.ext4", "/dev/sdb1"], Deletes),
            (&["wipefs", "-a", "/dev/sdb"], Deletes),
            (&["dd", "if=/dev/zero", "of=/dev/sdb"], Deletes),
            (&["dd", "if=/dev/sda", "bs=1M", "count=1"], Safe),
            (&["sudo", "rm", "x"], Deletes),
            (&["sudo", "-u", "root", "-E", "rm", "x"], Deletes),
            (&["sudo", "-uroot", "rm", "x"], Deletes),
            (&["sudo", "--user=root", "--", "rm", "x"], Deletes),
            (&["sudo", "-u", "rm", "ls"], Safe),
            (&["sudo", "-l"], Safe),
            (&["sudo", "-s"], MayDelete),
            (&["sudo", "-s", "rm x"], Deletes),
            (&["doas", "-u", "root", "rm", "x"], Deletes),
            (&["env", "rm", "x"], Deletes),
            (&["env", "-i", "FOO=1", "rm", "x"], Deletes),
            (&["env", "-u", "HOME", "-C", "/tmp", "rm", "x"], Deletes),
            (&["env", "-S", "rm -rf x"], Deletes),
            (&["env", "--split-string=rm -rf x"], Deletes),
            (&["env"], Safe),
            (&["env", "FOO=1", "ls"], Safe),
            (&["nice", "-n", "10", "rm", "x"], Deletes),
            (&["nice", "-10", "rm", "x"], Deletes),
            (&["ionice", "-c", "3", "rm", "x"], Deletes),
            (&["ionice", "-p", "42"], Safe),
            (&["nohup", "rm", "x"], Deletes),
            (&["timeout", "5", "rm", "x"], Deletes),
            (
                &["timeout", "-k", "1", "-s", "KILL", "5", "rm", "x"],
                Deletes,
            ),
            (&["timeout", "--signal=KILL", "5", "ls"], Safe),
            (&["stdbuf", "-oL", "rm", "x"], Deletes),
            (&["stdbuf", "-o", "L", "rm", "x"], Deletes),
            (&["chroot", "/srv", "rm", "x"], Deletes),
            (&["chroot", "/srv"], MayDelete),
            (&["setsid", "-w", "rm", "x"], Deletes),
            (&["xargs", "rm"], Deletes),
            (&["xargs", "-0", "-n", "1", "rm", "-f"], Deletes),
            (&["xargs", "-I{}", "rm", "{}"], Deletes),
            (&["xargs"], Safe),
            (&["xargs", "-n1", "echo"], Safe),
            (&["busybox", "rm", "x"], Deletes),
            (&["busybox", "ls"], Safe),
            (&["command", "rm", "x"], Deletes),
            (&["command", "-v", "rm"], Safe),
            (&["exec", "rm", "x"], Deletes),
            (&["time", "-p", "rm", "x"], Deletes),
            (&["find", ".", "-delete"], Deletes),
            (
                &["find", ".", "-name", "*.o", "-exec", "rm", "{}", ";"],
                Deletes,
            ),
            (&["find", ".", "-exec", "rm", "{}", "+"], Deletes),
            (&["find", ".", "-exec", "ls", "{}", ";", "-print"], Safe),
            (&["find", ".", "-name", "x"], Safe),
            (&["git", "clean", "-fdx"], Deletes),
            (&["git", "clean", "-n"], Safe),
            (&["git", "-C", "/repo", "clean", "-fd"], Deletes),
            (&["git", "reset", "--hard"], Deletes),
            (&["git", "reset", "HEAD~"], Safe),
            (&["git", "checkout", "--", "."], Deletes),
            (&["git", "checkout", "main"], Safe),
            (&["git", "status"], Safe),
            (&["git", "-C", "clean", "status"], Safe),
            (&["rsync", "-a", "--delete", "a/", "b/"], Deletes),
            (&["rsync", "-a", "--delete-after", "a/", "b/"], Deletes),
            (
                &["rsync", "-a", "--remove-source-files", "a/", "b/"],
                Deletes,
            ),
            // It writes over what is at the destination.
            (&["rsync", "-a", "a/", "b/"], MayDelete),
            (&["rsync", "--list-only", "host:/x/"], Safe),
            (&["mv", "a", "b"], MayDelete),
            (&["mv", "-n", "a", "b"], Safe),
            (&["tee", "f"], MayDelete),
            (&["tee", "-a", "f"], Safe),
            (&["tee", "/dev/null"], Safe),
            (&["tee"], Safe),
            (&["pct", "exec", "200", "--", "rm", "x"], Deletes),
            (
                &[
                    "lxc-attach",
                    "-n",
                    "web",
                    "--clear-env",
                    "--",
                    "sudo",
                    "rm",
                    "x",
                ],
                Deletes,
            ),
            (&["kubectl", "delete", "pod", "x"], Deletes),
            (&["kubectl", "get", "pods"], Safe),
            (&["sh", "-c", "rm -rf x"], Deletes),
            (&["bash", "-ec", "rm -rf x"], Deletes),
            (&["sh", "-c", "ls | wc -l"], Safe),
            (&["sh", "script.sh"], MayDelete),
            (&["sh"], MayDelete),
            (&["sh", "-s"], MayDelete),
            (&["bash", "--version"], Safe),
            (&["sudo", "sh", "-c", "rm -rf x"], Deletes),
            (&["env", "sudo", "timeout", "5", "xargs", "rm"], Deletes),
            (&["python3", "-c", "print(1)"], Safe),
            (&["eval", "rm x"], Deletes),
            (&["eval", "ls"], Safe),
            (&[".", "/etc/os-release"], MayDelete),
            (&["su", "-", "app", "-c", "rm -rf x"], Deletes),
            (&["su", "app", "-c", "ls"], Safe),
            (&["su", "app"], MayDelete),
            // Issue 25 item 3, the adversarial review: wrappers parsed wrongly.
            (&["env", "-iS", "/bin/rm x"], Deletes),
            (&["env", "-iS/bin/rm x"], Deletes),
            (&["env", "-vS", "rm", "x"], Deletes),
            (&["env", "--split-s=rm x"], Deletes),
            (&["env", "-iu", "HOME", "rm", "x"], Deletes),
            (&["env", "-S", "rm '$x'"], MayDelete),
            (
                &["env", "BASH_FUNC_true%%=() { rm x; }", "bash", "-c", "true"],
                MayDelete,
            ),
            (&["env", "BASH_ENV=e.sh", "bash", "-c", "true"], MayDelete),
            (&["env", "LD_PRELOAD=/tmp/x.so", "ls"], MayDelete),
            (&["env", "PATH=/tmp/evil", "ls"], MayDelete),
            (&["env", "GIT_CONFIG_COUNT=1", "git", "status"], MayDelete),
            (&["env", "LANG=C", "ls"], Safe),
            (&["sudo", "LD_PRELOAD=/tmp/x.so", "ls"], MayDelete),
            (&["xargs", "--replace", "rm", "{}"], Deletes),
            (&["xargs", "-i", "rm", "{}"], Deletes),
            (&["xargs", "-0i", "rm", "{}"], Deletes),
            (&["xargs", "-e", "rm", "x"], Deletes),
            (&["xargs", "-l", "rm"], Deletes),
            (&["xargs", "-I", "X", "rm", "X"], Deletes),
            (&["xargs", "-E", "rm", "ls"], Safe),
            // Wrappers it did not know, or knew only with `--`.
            (&["flock", "lk", "rm", "x"], Deletes),
            (&["flock", "-w", "5", "lk", "rm", "x"], Deletes),
            (&["flock", "lk", "-c", "rm x"], Deletes),
            (&["flock", "-n", "lk", "ls"], Safe),
            (&["runuser", "-u", "root", "rm", "x"], Deletes),
            (&["runuser", "-u", "root", "--", "rm", "x"], Deletes),
            (&["runuser", "root", "-c", "rm x"], Deletes),
            (&["runuser", "root"], MayDelete),
            (&["unshare", "rm", "x"], Deletes),
            (&["unshare", "-r", "-R", "/srv", "rm", "x"], Deletes),
            (&["unshare", "-m"], MayDelete),
            (&["nsenter", "-t", "1", "-m", "rm", "x"], Deletes),
            (&["nsenter", "-t", "1", "-m"], MayDelete),
            (&["taskset", "1", "rm", "x"], Deletes),
            (&["taskset", "-c", "0-3", "rm", "x"], Deletes),
            (&["taskset", "-p", "42"], Safe),
            (&["script", "-qc", "rm x", "/dev/null"], Deletes),
            (&["script", "-q", "-c", "ls", "/dev/null"], Safe),
            (&["script", "--command=rm x", "/dev/null"], Deletes),
            (&["script", "-c", "ls"], MayDelete),
            (&["script"], MayDelete),
            (&["chrt", "-f", "10", "rm", "x"], Deletes),
            (&["chrt", "-p", "42"], Safe),
            (&["strace", "-f", "rm", "x"], Deletes),
            (&["strace", "-e", "trace=open", "ls"], Safe),
            (&["strace", "-o", "out", "ls"], MayDelete),
            (&["watch", "-n", "1", "rm", "x"], Deletes),
            (&["watch", "-n1", "ls; rm x"], Deletes),
            (&["watch", "-x", "rm", "x"], Deletes),
            (&["watch", "ls"], Safe),
            (&["sg", "wheel", "-c", "rm x"], Deletes),
            (&["sg", "wheel", "rm x"], Deletes),
            (&["sg", "wheel"], MayDelete),
            (&["setpriv", "--reuid=1000", "rm", "x"], Deletes),
            (&["setpriv", "--reuid", "1000", "ls"], Safe),
            (&["ip", "netns", "exec", "blue", "rm", "x"], Deletes),
            (&["ip", "netns", "exec", "blue", "ls"], Safe),
            (&["ip", "addr", "show"], Safe),
            (&["su", "-c", "rm x"], Deletes),
            (&["docker", "exec", "-u", "root", "web", "rm", "x"], Deletes),
            (&["podman", "exec", "web", "ls"], Safe),
            (&["docker", "exec", "-it", "web"], MayDelete),
            (&["docker", "rm", "-f", "web"], Deletes),
            (&["podman", "system", "prune"], Deletes),
            (
                &["docker", "run", "-v", "/:/h", "alpine", "rm", "/h/x"],
                Deletes,
            ),
            (&["docker", "run", "-v", "/:/h", "alpine", "sh"], MayDelete),
            (&["podman", "ps"], Safe),
            (&["kubectl", "exec", "pod", "--", "rm", "x"], Deletes),
            (&["kubectl", "exec", "pod", "rm", "x"], MayDelete),
            (&["ssh", "host", "rm", "x"], Deletes),
            (
                &["ssh", "-p", "22", "-o", "BatchMode=yes", "host", "rm -rf x"],
                Deletes,
            ),
            (&["ssh", "host", "sh", "-c", "'rm x'"], Deletes),
            (&["ssh", "host", "ls"], Safe),
            (&["ssh", "host"], MayDelete),
            (&["lxc-attach", "-n", "web"], MayDelete),
            (&["lxc-attach", "-n", "web", "rm", "x"], MayDelete),
            (&["pct", "exec", "200", "--", "ls"], Safe),
            (&["pct", "destroy", "200"], Deletes),
            (&["pct", "enter", "200"], MayDelete),
            (&["time", "rm", "x"], Deletes),
            (&["nohup", "sh", "-c", "rm x"], Deletes),
            (&["stdbuf", "-oL", "ls"], Safe),
            (&["coproc", "rm", "x"], Deletes),
            (&["coproc", "NAME", "rm", "x"], Deletes),
            // An unknown program whose words name a program it may run.
            (&["mywrap", "rm", "x"], MayDelete),
            (&["mywrap", "--", "sh", "-c", "ls"], MayDelete),
            (&["mywrap", "sudo", "ls"], MayDelete),
            (&["grep", "rm", "notes.txt"], Safe),
            (&["which", "sudo", "rm"], Safe),
            (&["mywrap", "--version"], Safe),
            // git.
            (&["git", "-c", "alias.zap=!rm x", "zap"], MayDelete),
            (&["git", "-c", "core.pager=rm x", "log"], MayDelete),
            (&["git", "-c", "x.y=!z", "status"], MayDelete),
            (&["git", "-c", "core.sshCommand=rm x", "fetch"], MayDelete),
            (&["git", "--config-env=alias.x=V", "x"], MayDelete),
            (&["git", "-c", "color.ui=never", "status"], Safe),
            (
                &["git", "switch", "-q", "--discard-changes", "main"],
                Deletes,
            ),
            (&["git", "switch", "-f", "main"], Deletes),
            (&["git", "switch", "main"], Safe),
            (&["git", "restore", "x"], Deletes),
            (&["git", "checkout", "-f", "main"], Deletes),
            (&["git", "stash", "drop"], Deletes),
            (&["git", "stash", "clear"], Deletes),
            (&["git", "stash"], MayDelete),
            (&["git", "stash", "list"], Safe),
            (&["git", "branch", "-D", "old"], Deletes),
            (&["git", "gc", "--prune=now"], Deletes),
            (&["git", "worktree", "remove", "../w"], Deletes),
            (&["git", "worktree", "list"], Safe),
            (&["git", "push", "--force", "origin", "main"], Deletes),
            (&["git", "pull"], MayDelete),
            (&["git", "config", "alias.st", "!rm x"], MayDelete),
            (&["git", "config", "--get", "user.name"], Safe),
            (&["git", "log", "--oneline", "-3"], Safe),
            (&["git", "rev-parse", "HEAD"], Safe),
            (&["git", "diff", "--stat"], Safe),
            // Programs that write over a file.
            (&["cp", "/dev/null", "x"], MayDelete),
            (&["cp", "-n", "a", "b"], Safe),
            (&["install", "-m", "644", "a", "b"], MayDelete),
            (&["ln", "-sf", "a", "b"], MayDelete),
            (&["ln", "-f", "a", "b"], MayDelete),
            (&["ln", "-s", "a", "b"], Safe),
            (&["sed", "-i", "s/a/b/", "f"], MayDelete),
            (&["sed", "-ni.bak", "p", "f"], MayDelete),
            (&["sed", "--in-place", "s/a/b/", "f"], MayDelete),
            (&["sed", "-n", "1p", "f"], Safe),
            (&["sed", "-e", "s/i/j/", "f"], Safe),
            (&["tar", "-xf", "a.tar"], MayDelete),
            (&["tar", "xzf", "a.tgz"], MayDelete),
            (&["tar", "-czf", "out.tgz", "d"], MayDelete),
            (&["tar", "--delete", "-f", "a.tar", "x"], Deletes),
            (&["tar", "-tf", "a.tar"], Safe),
            (&["tar", "tvf", "a.tar"], Safe),
            (&["tar", "-tf", "a.tar", "--to-command=rm x"], MayDelete),
            (&["curl", "-o", "x", "https://e"], MayDelete),
            (&["curl", "-fsSL", "https://e"], Safe),
            (&["wget", "https://e"], MayDelete),
            (&["wget", "-qO-", "https://e"], Safe),
            // Interpreters: code that calls out, deletes or writes may delete.
            (
                &["python3", "-c", "import torch; print(torch.__version__)"],
                Safe,
            ),
            (
                &["python3", "-c", "import sys; print(sys.version.split()[0])"],
                Safe,
            ),
            (&["python3", "-c", "import os; os.remove('x')"], MayDelete),
            (
                &["python3", "-c", "import shutil; shutil.rmtree('d')"],
                MayDelete,
            ),
            (
                &["python3", "-c", "import subprocess; subprocess.run(['ls'])"],
                MayDelete,
            ),
            (&["python3", "-c", "open('x', 'w')"], MayDelete),
            (
                &["python3", "-c", "__import__('os').unlink('x')"],
                MayDelete,
            ),
            (&["python3", "script.py"], MayDelete),
            (&["python3", "-m", "http.server"], MayDelete),
            (&["python3", "--version"], Safe),
            (&["python3"], MayDelete),
            (&["perl", "-e", "unlink 'x'"], MayDelete),
            (&["perl", "-pi", "-e", "s/a/b/", "f"], MayDelete),
            (&["perl", "-e", "print 1"], Safe),
            (&["awk", "BEGIN{system(\"rm x\")}"], MayDelete),
            (&["awk", "{print > \"x\"}", "f"], MayDelete),
            (&["awk", "-F:", "{print $1}", "/etc/passwd"], Safe),
            (&["node", "-e", "require('fs').rmSync('x')"], MayDelete),
            (&["node", "-e", "console.log(1)"], Safe),
            // Ordinary reads stay reads.
            (&["ls", "-la", "/tmp"], Safe),
            (&["stat", "x"], Safe),
            (&["du", "-sk", "--", "/var/cache"], Safe),
            (&["df", "-Pk", "/tmp"], Safe),
            (&["grep", "-r", "x", "."], Safe),
            (&["nvidia-smi", "-L"], Safe),
            (&["ps", "aux"], Safe),
            (&["pgrep", "-f", "sleep"], Safe),
            (&["test", "-d", "/x"], Safe),
            (&["sha256sum", "--", "f"], Safe),
            (&["uv", "pip", "list"], Safe),
            (&["uptime"], Safe),
        ];
        let wrong: Vec<_> = table
            .iter()
            .filter(|(words, want)| of(words) != *want)
            .map(|(words, want)| format!("{words:?}: {:?}, not {want:?}", of(words)))
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn script_table() {
        use Class::*;
        let table: &[(&str, Class)] = &[
            ("ls | wc -l", Safe),
            ("rm -rf /tmp/x && echo done", Deletes),
            ("cd /x; /bin/rm f", Deletes),
            ("echo firm; ls", Safe),
            ("echo rm", Safe),
            ("'rm' -rf x", Deletes),
            ("r\"\"m x", Deletes),
            ("\\rm x", Deletes),
            ("if true; then rm x; fi", Deletes),
            ("for f in a b; do rm \"$f\"; done", Deletes),
            ("for rm in a b; do echo \"$rm\"; done", Safe),
            ("while read l; do echo \"$l\"; done", Safe),
            ("X=1 rm x", Deletes),
            ("X=$(rm -rf y) ls", Deletes),
            ("echo \"$(rm x)\"", Deletes),
            ("echo `rm x`", Deletes),
            ("echo \"$(hostname)\"", Safe),
            ("echo $(ls | wc -l)", Safe),
            ("$X", MayDelete),
            ("\"$CMD\" a b", MayDelete),
            ("$(echo rm) x", MayDelete),
            ("eval \"$X\"", MayDelete),
            ("curl -s https://x | sh", MayDelete),
            (". ./env.sh", MayDelete),
            ("source ./env.sh", MayDelete),
            ("echo hi > f", MayDelete),
            ("echo hi >| f", MayDelete),
            ("echo hi >> f", Safe),
            ("echo hi >/dev/null 2>&1", Safe),
            ("ls 2>/dev/null | sort -r", Safe),
            ("echo x >&2", Safe),
            ("cat < f", Safe),
            ("cat <<EOF\nrm -rf x\nEOF\nls", Safe),
            ("cat <<'EOF'\n$(rm x)\nEOF", Safe),
            ("cat <<EOF\n$(rm x)\nEOF", MayDelete),
            ("sh <<EOF\nls\nEOF", MayDelete),
            ("cat <<EOF\nnever ends", MayDelete),
            ("cat <<EOF > out\nx\nEOF", MayDelete),
            ("(cd /x && rm y)", Deletes),
            ("{ ls; rm y; }", Deletes),
            ("f() { rm -rf x; }; f", Deletes),
            ("case $x in a) rm y;; b) ls;; esac", Deletes),
            ("case $x in a) echo a;; *) ls;; esac", Safe),
            ("case \"$1\" in (a|b) echo a ;; esac; ls", Safe),
            ("echo $((1 + 2))", Safe),
            ("echo $(( $(rm x) ))", Deletes),
            ("left=$((start - $(date +%s%N)))", Safe),
            ("echo $(( 1 + $(( 2 * 3 )) ))", Safe),
            ("echo 'unterminated", MayDelete),
            ("echo $(ls", MayDelete),
            ("ls )", MayDelete),
            ("find . -delete", Deletes),
            ("git clean -fdx", Deletes),
            ("sudo rm -rf /", Deletes),
            ("command -v nvidia-smi >/dev/null && nvidia-smi -L", Safe),
            ("ls -1d -- \"$1\".old-* 2>/dev/null | sort -r", Safe),
            (
                "user=${1:-$(id -un)}\nif [ \"$user\" = \"$(id -un 2>/dev/null)\" ]; then home=$HOME\nelse home=$(getent passwd \"$user\" | cut -d: -f6); fi\nprintf '%s\\n' \"${X:-${TMPDIR:-/tmp}/t_$user}\"",
                Safe,
            ),
            ("mv -T -- \"$1\" \"$1.old-$(date +%Y%m%d)\"", MayDelete),
            ("ls # rm x", Safe),
            ("ls \\\n  -l", Safe),
            ("trap 'rm -f /tmp/x' EXIT; ls", Deletes),
            ("echo a && $X", MayDelete),
            ("xargs rm < list", Deletes),
            ("diff <(ls a) <(ls b)", Safe),
            ("diff <(rm a) b", Deletes),
            ("rsync $OPTS a/ b/", MayDelete),
            ("find \"$d\" -maxdepth 1", Safe),
            ("exec 3>/tmp/f", MayDelete),
            ("exec 2>/dev/null; ls", Safe),
            ("*", MayDelete),
            ("echo \"a\\\"b\" ; rm x", Deletes),
            ("echo '$(rm x)'", Safe),
            ("echo \"${x:-'$(rm y)'}\"", Deletes),
            ("[ -f x ] && rm x", Deletes),
            ("[ \"$x\" = y ] || exit 3", Safe),
            (
                "sleep 5 & holder=$!\nn=0\nfor f in /proc/[0-9]*/cmdline; do\n  c=$(tr '\\000' ' ' < \"$f\" 2>/dev/null) || continue\n  case $c in *\"$TOKEN\"*) echo \"LEAK $f: $c\"; n=$((n+1));; esac\ndone\nkill \"$holder\"\n[ \"${TOKEN%%-*}:${#TOKEN}\" = \"s3cr3t:19\" ] || { echo \"wrong value\"; exit 3; }\necho \"checked, $n leaks\"",
                Safe,
            ),
            ("echo x >> \"$3\"; echo \"$PPID\" >> \"$1\"; exec sleep 30 >/dev/null 2>&1", Safe),
            ("if [ -e \"$1/seen\" ]; then echo yes; else touch \"$1/seen\"; echo no; fi", Safe),
            ("tr \"\\000\" \" \" < /proc/$PPID/cmdline", Safe),
            ("read x </dev/tty", Safe),
            ("alias ls='rm -rf x'\nls", Deletes),
            ("alias ll='ls -l'", Safe),
            // Issue 25 item 3, the adversarial review: shell forms.
            ("{rm,x}", MayDelete),
            ("{/bin/rm,-f,x}", MayDelete),
            ("echo {a,b}", Safe),
            ("echo {}", Safe),
            ("coproc rm x; wait", Deletes),
            ("coproc NAME { rm x; }", Deletes),
            ("echo > /dev/fd/../../../tmp/x", MayDelete),
            ("echo > /dev/fd/3", Safe),
            ("echo >/dev/null 2>&1", Safe),
            ("BASH_ENV=e.sh bash -c true", MayDelete),
            ("PATH=/tmp/evil:$PATH ls", MayDelete),
            ("export LD_PRELOAD=/tmp/x.so; ls", MayDelete),
            ("export LANG=C; ls", Safe),
            ("ssh host 'rm -rf x'", Deletes),
            ("flock /tmp/lk rm x", Deletes),
            ("true() { rm x; }; true", Deletes),
        ];
        let wrong: Vec<_> = table
            .iter()
            .filter(|(text, want)| shell_script(text, 0) != *want)
            .map(|(text, want)| format!("{text:?}: {:?}, not {want:?}", shell_script(text, 0)))
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    /// Every script made of up to three of these pieces is read to an answer: no panic,
    /// no endless loop, whatever half a construct it holds.
    #[test]
    fn any_piece_of_shell_is_read_to_an_answer() {
        let pieces = [
            "rm", " ", "'", "\"", "\\", "$", "$(", "${", "$((", "`", "(", ")", "{", "}", ";", ";;",
            "&", "|", "\n", "<", "<<", "<<-", ">", ">&", "2>", "#", "case", "in", "esac", "for",
            "do", "=", "*", "x", "é", "\t",
        ];
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    let _ = shell_script(&format!("{a}{b}{c}"), 0);
                    // `rm` as the first word, whatever follows it, is never safe.
                    if [" ", ";", "&", "|", "\n", "\t", ">", "<"].contains(&b) {
                        let text = format!("rm{b}{c}{a}");
                        assert_ne!(shell_script(&text, 0), Class::Safe, "{text:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn deep_nesting_is_unreadable_not_a_crash() {
        let deep = "sh -c ".repeat(40) + "ls";
        assert_eq!(shell_script(&deep, 0), Class::MayDelete);
        let parens = "$(".repeat(200) + "ls" + &")".repeat(200);
        assert_eq!(shell_script(&format!("echo {parens}"), 0), Class::MayDelete);
    }
}
