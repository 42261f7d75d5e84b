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
//!
//! The files beside this one: `words.rs` (what one word says on its own), `wrappers.rs`
//! (programs that run another command or script, and how each finds it), `programs.rs`
//! (what the other programs do, by their names and flags), `parser.rs` (a shell script
//! read into its commands). [`command`], here, sends a program's name to its rule, and
//! every rule that finds a command inside another (`sudo CMD`, `find -exec CMD`, a
//! script's commands) comes back to it: this file is the recursion's one hub, so none of
//! those files needs another that needs it back.

mod parser;
mod programs;
mod words;
mod wrappers;

use std::ffi::OsString;

use parser::script_in;
use programs::{find, flags, git, interpreter, tar, tee, unknown, DELETERS, INTERPRETERS, SHELLS};
use words::{base, dangerous_name, is_name, join, Word};
use wrappers::{
    after_operands, container, env, flock, operands, script, shell, ssh, watch, wrapped, xargs,
    Opts, SUDO,
};

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

/// The class of a command's own environment (`env = { … }` in `t:exec`): one that
/// names a variable that makes programs run other code ([`dangerous_name`]) may delete.
pub fn env_vars<'a>(names: impl IntoIterator<Item = &'a str>) -> Class {
    match names.into_iter().any(dangerous_name) {
        true => Class::MayDelete,
        false => Class::Safe,
    }
}

/// How deep wrappers and scripts inside scripts are followed; deeper is unreadable.
const DEPTH: usize = 12;

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

#[cfg(test)]
mod tests;
