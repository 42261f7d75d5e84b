//! What one word of a command says on its own, before any rule reads the command: the
//! program it names, whether it is a variable's name or an assignment, whether an
//! environment name makes programs run other code, whether a file is one that writing to
//! loses nothing. Every other file of `classify/` reads words through these, so this one
//! uses none of them.

/// One word of a command: its text once quotes are removed, and whether an expansion
/// decides it (`$x`, `$(…)`, a glob), so that its text is not what runs.
#[derive(Debug, Clone)]
pub(super) struct Word {
    pub(super) text: String,
    /// Holds a parameter or command expansion, or an unquoted glob.
    pub(super) dynamic: bool,
    /// Holds an unquoted expansion: it may become several words (a `$FLAGS`).
    pub(super) splits: bool,
}

impl Word {
    pub(super) fn literal(text: String) -> Word {
        Word {
            text,
            dynamic: false,
            splits: false,
        }
    }
}

/// The program's name as the shell finds it: the last part of its path.
pub(super) fn base(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

/// A shell variable's name.
pub(super) fn is_name(w: &str) -> bool {
    !w.is_empty()
        && !w.starts_with(|c: char| c.is_ascii_digit())
        && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `NAME=VALUE`, as `env` and the shell take them before a command.
pub(super) fn is_assignment(w: &str) -> bool {
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
pub(super) fn join(words: &[Word]) -> String {
    words
        .iter()
        .map(|w| w.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Environment variables that make a program run code of their choosing: bash imports
/// a function from `BASH_FUNC_NAME%%` (so `true` may be `rm x`), runs `$BASH_ENV` (and
/// `sh` `$ENV`) first, `PATH` decides which `ls` runs, the loader preloads
/// `LD_PRELOAD`, interpreters and git read options or code from theirs.
pub(super) fn dangerous_name(name: &str) -> bool {
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

/// Files that writing to loses nothing.
pub(super) fn quiet_file(path: &str) -> bool {
    // Exactly these names: `/dev/fd/../../x` is `/x`.
    matches!(
        path,
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty"
    ) || path
        .strip_prefix("/dev/fd/")
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}
