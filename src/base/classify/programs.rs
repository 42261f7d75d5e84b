//! What a program that is not a wrapper does, judged by its name and flags: the tables
//! of programs that delete, that only look, that run commands (for a program runbook does
//! not know), and the rules for `tar`, interpreters' `-c` code, `find`, `git` and `tee`.

use super::words::{base, quiet_file, Word};
use super::{command, Class};

/// Programs whose whole purpose is to delete or overwrite.
pub(super) const DELETERS: &[&str] = &[
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
pub(super) const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "ash", "zsh", "ksh", "mksh", "posh", "yash", "hush",
];

/// `tar`: listing (`-t`, `--list`) writes nothing; extracting writes over files, and
/// creating writes the archive; options that run a program are not read.
pub(super) fn tar(rest: &[Word]) -> Class {
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
pub(super) const INTERPRETERS: &[&str] = &[
    "python", "pypy", "perl", "ruby", "node", "nodejs", "deno", "bun", "awk", "gawk", "mawk",
    "nawk", "php", "lua", "luajit", "tclsh", "Rscript",
];

/// `python3 -c CODE`, `perl -e CODE`, `awk 'PROGRAM'`, …: runbook does not parse the
/// language; CODE that names a call that deletes, writes or runs another program
/// (`os.remove`, `shutil.rmtree`, `unlink`, `system`, `subprocess`, `open(…, "w")`) may
/// delete; code given in a file, on standard input, or as a module (`-m`) cannot be read
/// and may too. `--version`, `-V` only print.
pub(super) fn interpreter(name: &str, rest: &[Word]) -> Class {
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
pub(super) fn unknown(name: &str, rest: &[Word]) -> Class {
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

/// A program that deletes when one of its words says so; a word that may split into
/// several (an unquoted `$FLAGS`) may say so.
pub(super) fn flags(rest: &[Word], deletes: impl Fn(&str) -> bool) -> Class {
    if rest.iter().any(|w| !w.dynamic && deletes(&w.text)) {
        Class::Deletes
    } else if rest.iter().any(|w| w.splits) {
        Class::MayDelete
    } else {
        Class::Safe
    }
}

/// `find`: `-delete`, `-exec`/`-execdir`/`-ok`/`-okdir COMMAND… ;` (the command is
/// classed), and `-fprint`/`-fls FILE` (which overwrite FILE).
pub(super) fn find(rest: &[Word], depth: usize) -> Class {
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
pub(super) fn git(rest: &[Word]) -> Class {
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
pub(super) fn tee(rest: &[Word]) -> Class {
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
