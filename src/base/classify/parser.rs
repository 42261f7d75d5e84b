//! A shell script (`sh -c SCRIPT`, `eval`, `trap`, `$(…)`) read the way `sh` splits it
//! into commands, each then classed by [`super::command`]. Its own file because it is
//! the one part that reads characters, not words: quoting, expansions, redirections,
//! here-documents and compound commands.

use super::words::{dangerous_name, is_assignment, quiet_file, Word};
use super::{command, Class, DEPTH};

/// A script found inside a command (`sh -c`, `eval`, `trap`): one level deeper.
pub(super) fn script_in(text: &str, depth: usize) -> Class {
    shell_script(text, depth + 1)
}

pub(super) fn shell_script(text: &str, depth: usize) -> Class {
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
