//! A plan for people: one walk over it, two styles (terminal text and Markdown), every
//! text escaped for where it lands.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Text,
    Markdown,
}

/// One planned change as people read it: the dry-run preview (as each change is reached),
/// `run`'s confirmation, `runbook plan`'s text and its Markdown all render a change
/// through this, so what a reviewer approved and what the user confirmed read as what
/// they previewed: the same head (where, the summary's facts, destructive or not) and the
/// same command.
pub struct ChangeText<'a> {
    pub target: &'a str,
    pub summary: &'a str,
    /// The command as it runs on its target (named scripts by name): `actions::shown`.
    pub shown: &'a str,
    pub destructive: bool,
    /// Runbook cannot tell whether it deletes (`base/classify/`): marked as such.
    pub may_delete: bool,
    /// The exact command line, and whether it has standard input, where known (a plan;
    /// the preview's events carry only `shown`): the Markdown shows it when it differs.
    pub exact: Option<(&'a str, bool)>,
    /// What it does to a file's content (`Change::diff`), shown under the command.
    pub diff: Option<&'a str>,
}

/// A line of a change's command as `ChangeText::command` gives it.
#[derive(Debug, PartialEq, Eq)]
pub enum CommandLine {
    /// The first line (text puts `$ ` before it).
    First(String),
    /// A later line, exactly as it is in the command.
    More(String),
    /// Where lines of a long script were left out, and how many.
    Folded(usize),
}

impl CommandLine {
    /// What stands for the lines a fold left out.
    pub fn fold_note(n: usize) -> String {
        format!("… {n} more lines of the script (-v, --json, a saved plan or `runbook log` show it whole)")
    }
}

impl ChangeText<'_> {
    /// The change in text: its head after `lead`, its command lines under it, `indent`
    /// spaces in, folded as `command` says.
    pub fn text(&self, lead: &str, indent: usize, whole: bool) -> String {
        let indent = " ".repeat(indent);
        let mut out = format!("{lead}{}\n", self.head());
        for line in self.command(whole) {
            // A command's later lines are printed as they are, not indented: they are
            // often inside a quoted word (a script, a value with a newline), where spaces
            // added for looks would show a command that is not the one that runs.
            let line = match line {
                CommandLine::First(l) => format!("{indent}$ {}", crate::base::printable::line(&l)),
                CommandLine::More(l) => crate::base::printable::line(&l).into_owned(),
                CommandLine::Folded(n) => format!("{indent}  {}", CommandLine::fold_note(n)),
            };
            out.push_str(&format!("{line}\n"));
        }
        for line in self.diff_lines(whole) {
            out.push_str(&format!(
                "{indent}  {}\n",
                crate::base::printable::line(&line)
            ));
        }
        out
    }

    /// A diff longer than this many lines plus the three a fold would save is folded in
    /// text (a confirmation is no place for a whole new file): its first lines, and how
    /// many more there are.
    const DIFF_FOLD_AT: usize = 40;

    /// The diff's lines as text shows them, folded unless `whole`.
    pub fn diff_lines(&self, whole: bool) -> Vec<String> {
        let Some(diff) = self.diff else {
            return Vec::new();
        };
        let lines: Vec<&str> = diff.lines().collect();
        if whole || lines.len() <= Self::DIFF_FOLD_AT + 3 {
            return lines.iter().map(|l| l.to_string()).collect();
        }
        let mut out: Vec<String> = lines[..Self::DIFF_FOLD_AT]
            .iter()
            .map(|l| l.to_string())
            .collect();
        out.push(format!(
            "… {} more lines of the diff (-v, --json, a saved plan or --format md show it whole)",
            lines.len() - Self::DIFF_FOLD_AT
        ));
        out
    }

    /// The change as item `n` of a Markdown list: the head, the command shown, and the
    /// exact command in a `<details>` when it differs (every command whole).
    pub fn markdown(&self, n: usize) -> String {
        let mark = match (self.destructive, self.may_delete) {
            (true, _) => "**destructive** · ",
            (false, true) => "**may delete** · ",
            (false, false) => "",
        };
        let mut out = format!(
            "{n}. {mark}on {}: {}\n",
            code_span(&crate::base::printable::line(self.target)),
            md(&crate::base::printable::line(self.summary))
        );
        let (command, stdin) = self.exact.unwrap_or((self.shown, false));
        let exact = command == self.shown;
        let runs = if exact { "runs, exactly" } else { "runs" };
        out.push_str(&format!(
            "   - {runs}:{}",
            code_in_list(&crate::base::printable::block(self.shown))
        ));
        if !exact {
            out.push_str(&format!(
                "   <details><summary>the exact command{}</summary>\n\n{}   </details>\n",
                if stdin {
                    ", with its standard input"
                } else {
                    ""
                },
                code_block(&crate::base::printable::block(command), "   ")
            ));
        }
        if let Some(diff) = self.diff {
            out.push_str(&format!(
                "   - what it does to the file:\n\n{}",
                fenced(&crate::base::printable::block(diff), "     ", "diff")
            ));
        }
        out
    }

    /// A script is folded when it is longer than this many lines plus the three a fold
    /// would save.
    const FOLD_AT: usize = 4;

    /// `on TARGET: SUMMARY`, marked when it deletes, rebuilds or restores something, or
    /// may.
    pub fn head(&self) -> String {
        let mark = match (self.destructive, self.may_delete) {
            (true, _) => "  [deletes]",
            (false, true) => "  [may delete]",
            (false, false) => "",
        };
        format!(
            "on {}: {}{mark}",
            crate::base::printable::line(self.target),
            crate::base::printable::line(self.summary)
        )
    }

    /// The command's lines, when the summary does not already say it. A script of more than a few lines (a runbook's own `t:shell`;
    /// runbook's scripts are shown by name) is folded unless `whole`: its first lines and
    /// its last, which ends with the arguments (`sh -c '…' sh ARG…`: what it acts on).
    pub fn command(&self, whole: bool) -> Vec<CommandLine> {
        if self.shown == self.summary {
            return Vec::new();
        }
        let lines: Vec<&str> = self.shown.lines().collect();
        let lead = |n: usize, l: &str| {
            if n == 0 {
                CommandLine::First(l.to_string())
            } else {
                CommandLine::More(l.to_string())
            }
        };
        if whole || lines.len() <= Self::FOLD_AT + 3 {
            return lines.iter().enumerate().map(|(n, l)| lead(n, l)).collect();
        }
        let last = lines.len() - 1;
        let mut out: Vec<CommandLine> = lines[..Self::FOLD_AT]
            .iter()
            .enumerate()
            .map(|(n, l)| lead(n, l))
            .collect();
        out.push(CommandLine::Folded(last - Self::FOLD_AT));
        out.push(lead(last, lines[last]));
        out
    }
}

/// Markdown-escapes ordinary text (summaries, names, notes).
pub(super) fn md(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    for (i, &c) in chars.iter().enumerate() {
        // An `_` inside a word (`torchinductor_root`) is no emphasis in GitHub's Markdown.
        let inside_word = c == '_'
            && i > 0
            && chars[i - 1].is_alphanumeric()
            && chars.get(i + 1).is_some_and(|n| n.is_alphanumeric());
        if "\\`*_[]<>|#~".contains(c) && !inside_word {
            out.push('\\');
        }
        out.push(c);
    }
    out.replace('\n', " ")
}

/// A code span that holds any text (a fence longer than any backtick run in it).
pub(super) fn code_span(text: &str) -> String {
    let text = text.replace('\n', " ");
    let run = longest_backtick_run(&text);
    let fence = "`".repeat(run + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

/// A command after `- runs:` in a list item: inline when it is one line, else a block
/// under it (a code span would fold its lines into one).
fn code_in_list(text: &str) -> String {
    if text.contains('\n') {
        format!("\n\n{}", code_block(text, "     "))
    } else {
        format!(" {}\n", code_span(text))
    }
}

/// A fenced block holding `text` as it is, each line after `indent`.
fn code_block(text: &str, indent: &str) -> String {
    fenced(text, indent, "sh")
}

/// A fenced block of `lang` holding `text` as it is, each line after `indent`.
fn fenced(text: &str, indent: &str, lang: &str) -> String {
    let fence = "`".repeat(longest_backtick_run(text).max(2) + 1);
    let mut out = format!("{indent}{fence}{lang}\n");
    for line in text.lines() {
        out.push_str(&format!("{indent}{line}\n"));
    }
    out.push_str(&format!("{indent}{fence}\n"));
    out
}

fn longest_backtick_run(text: &str) -> usize {
    let (mut best, mut cur) = (0, 0);
    for c in text.chars() {
        if c == '`' {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

/// Text in a table cell: GitHub's tables split cells at `|` even inside code spans.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

impl Plan {
    fn short_sha(&self) -> &str {
        &self.runbook.sha256[..self.runbook.sha256.len().min(12)]
    }

    fn steps_with_changes(&self) -> usize {
        let mut steps: Vec<usize> = self.changes.iter().map(|c| c.step).collect();
        steps.dedup();
        steps.len()
    }

    /// The changes, step by step: what `run` shows before it asks, and the heart of
    /// every rendering of a plan. `whole`: long scripts unfolded in text (Markdown always
    /// has them whole).
    pub fn render_changes(&self, style: Style, whole: bool) -> String {
        let mut out = String::new();
        let mut current = None;
        for (i, c) in self.changes.iter().enumerate() {
            if current != Some(c.step) {
                current = Some(c.step);
                match style {
                    Style::Text => out.push_str(&format!(
                        "  step \"{}\":\n",
                        crate::base::printable::line(&c.step_name)
                    )),
                    Style::Markdown => out.push_str(&format!(
                        "\n### Step {}: {}\n\n",
                        c.step + 1,
                        md(&c.step_name)
                    )),
                }
            }
            // The changes of one parallel() run in any order among themselves (the
            // enforcer holds every other change of a step to the order shown).
            let starts_group = c.parallel
                && (i == 0 || {
                    let b = &self.changes[i - 1];
                    !b.parallel || b.step != c.step
                });
            if starts_group {
                let last = (i..self.changes.len())
                    .take_while(|&j| self.changes[j].parallel && self.changes[j].step == c.step)
                    .last()
                    .unwrap_or(i);
                let what = format!(
                    "changes {} to {}, in any order (made by one parallel()):",
                    i + 1,
                    last + 1
                );
                match style {
                    Style::Text => out.push_str(&format!("    {what}\n")),
                    Style::Markdown => out.push_str(&format!("\n*{what}*\n\n")),
                }
            }
            let text = ChangeText {
                target: &c.target,
                summary: &c.summary,
                shown: &c.shown,
                destructive: c.destructive,
                may_delete: c.may_delete,
                exact: Some((&c.command, c.stdin_sha256.is_some())),
                diff: c.diff.as_deref(),
            };
            match style {
                Style::Text => out.push_str(&text.text("    - ", 8, whole)),
                Style::Markdown => out.push_str(&text.markdown(i + 1)),
            }
            if !c.known_after.is_empty() {
                out.push_str(&self.holes_note(c, style));
            }
        }
        out
    }

    /// What stands where a change says `(known after apply)`: the output of which
    /// earlier change.
    fn holes_note(&self, c: &Change, style: Style) -> String {
        let mut sources = c.known_after.clone();
        sources.sort();
        sources.dedup();
        let named: Vec<String> = sources
            .iter()
            .map(|&n| {
                let head = self
                    .changes
                    .get(n)
                    .map(|s| format!("on {}: {}", s.target, s.summary))
                    .unwrap_or_else(|| "a change this plan does not have".into());
                match style {
                    Style::Text => format!("change {} ({head})", n + 1),
                    Style::Markdown => format!("change {} ({})", n + 1, md(&head)),
                }
            })
            .collect();
        let what = format!(
            "where it says {}: what {} printed, once it has run",
            crate::actions::known_after::SHOWN,
            named.join(" and ")
        );
        match style {
            Style::Text => format!("        {what}\n"),
            Style::Markdown => format!("   - {what}\n"),
        }
    }

    /// The Lua modules the plan loaded, as text lines or Markdown rows.
    fn module_lines(&self, style: Style) -> String {
        let mut out = String::new();
        if self.modules.is_empty() {
            return out;
        }
        match style {
            Style::Text => out.push_str("modules:\n"),
            Style::Markdown => {
                out.push_str("\n## Lua modules\n\n| module | file | digest |\n|---|---|---|\n")
            }
        }
        for m in &self.modules {
            let short = &m.sha256[..12.min(m.sha256.len())];
            match style {
                Style::Text => {
                    out.push_str(&format!("  {} ({}, sha256 {short}…)\n", m.name, m.path))
                }
                Style::Markdown => out.push_str(&format!(
                    "| {} | {} | sha256 {} |\n",
                    cell(&code_span(&m.name)),
                    cell(&code_span(&m.path)),
                    code_span(short)
                )),
            }
        }
        out
    }

    /// The whole plan: header, params, targets, changes, skipped steps and notes; `saved`
    /// is the plan file (as named, and its sha256), when there is one: what `apply` takes
    /// and what its record and `history` name.
    /// `whole`: as for `render_changes`.
    pub fn render(&self, style: Style, saved: Option<(&str, &str)>, whole: bool) -> String {
        // Whatever else of the plan's text holds a control character is shown escaped.
        let text = match style {
            Style::Text => self.render_text(saved, whole),
            Style::Markdown => self.render_markdown(saved),
        };
        crate::base::printable::block(&text).into_owned()
    }

    /// Each param: its value as text, or what is known about it (unset, a secret).
    fn param_rows(&self) -> Vec<(&str, Result<String, &'static str>)> {
        self.params
            .iter()
            .map(|(k, p)| {
                let v = match (p.secret, &p.sha256, &p.value) {
                    (true, Some(_), _) => {
                        Err("secret: set; the plan holds only a salted sha256 of it")
                    }
                    (true, None, _) => Err("secret: unset"),
                    (false, _, None | Some(serde_json::Value::Null)) => Err("unset"),
                    (false, _, Some(serde_json::Value::String(s))) => Ok(s.clone()),
                    (false, _, Some(v)) => Ok(v.to_string()),
                };
                (k.as_str(), v)
            })
            .collect()
    }

    fn target_text(t: &PlannedTarget) -> String {
        let mut s = match (&t.user, &t.host, t.port) {
            (Some(u), Some(h), Some(p)) => format!("{u}@{h} port {p}"),
            (None, Some(h), Some(p)) => format!("{h} port {p}"),
            (_, Some(h), None) => h.clone(),
            _ => "this machine".into(),
        };
        if let Some(c) = &t.container {
            s.push_str(&format!(", container {}", c.trim_start_matches("ct")));
        }
        // The machine itself, as apply compares it: a name is only a way there.
        if let Some(id) = &t.identity {
            s.push_str(&format!(" ({})", id.text()));
        }
        s
    }

    /// The ssh_config and inventory the targets are reached with, each path through
    /// `path`: apply uses them (a `Match exec` in an ssh_config runs a command), so every
    /// rendering of a plan names them. None when the plan names neither.
    fn reached_with_text(&self, path: impl Fn(&str) -> String) -> Option<String> {
        let r = &self.reached_with;
        let mut parts: Vec<String> = [("ssh_config", &r.ssh_config), ("inventory", &r.inventory)]
            .into_iter()
            .filter_map(|(what, p)| Some(format!("{what} {}", path(p.as_deref()?))))
            .collect();
        if let Some(limit) = &r.limit {
            parts.push(format!("--limit {}", path(limit)));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    fn summary_line(&self) -> String {
        let destructive = self.changes.iter().filter(|c| c.destructive).count();
        let mut s = format!(
            "{} in {}",
            count(self.changes.len(), "change", "changes"),
            count(self.steps_with_changes(), "step", "steps")
        );
        if destructive > 0 {
            s.push_str(&format!(
                ", {destructive} of them destructive (delete, rebuild or restore something)"
            ));
        }
        let may = self.changes.iter().filter(|c| c.may_delete).count();
        if may > 0 {
            s.push_str(&format!(
                ", {may} that may delete (runbook cannot tell from the command)"
            ));
        }
        s
    }

    fn render_text(&self, saved: Option<(&str, &str)>, whole: bool) -> String {
        let mut out = format!(
            "plan for {} ({}, sha256 {}…), made {} by {} with runbook {}{}\n",
            self.runbook.name,
            self.runbook.path,
            self.short_sha(),
            self.created,
            self.created_by,
            self.runbook_version,
            if self.mode == "dry-run-offline" {
                " offline (reads did not run)"
            } else {
                ""
            }
        );
        if let Some((path, sha)) = saved {
            out.push_str(&format!(
                "plan file: {path} (sha256 {}…): apply it with runbook apply {path}\n",
                &sha[..12.min(sha.len())]
            ));
        }
        let params = self.param_rows();
        if !params.is_empty() {
            out.push_str("params:\n");
            for (k, v) in params {
                // Quoted, so that an empty value or one with spaces reads as what it is.
                let v = v.map_or_else(|note| format!("({note})"), |v| format!("{v:?}"));
                out.push_str(&format!("  {k} = {v}\n"));
            }
        }
        if !self.targets.is_empty() {
            out.push_str("targets:\n");
            for t in &self.targets {
                out.push_str(&format!("  {}: {}\n", t.name, Self::target_text(t)));
            }
        }
        if let Some(reached) = self.reached_with_text(|p| p.to_string()) {
            out.push_str(&format!("reached with: {reached}\n"));
        }
        out.push_str(&self.module_lines(Style::Text));
        out.push_str(&format!("{}:\n", self.summary_line()));
        out.push_str(&self.render_changes(Style::Text, whole));
        for s in &self.steps {
            if s.outcome == "skipped" {
                out.push_str(&format!(
                    "  step \"{}\" is skipped: {}\n",
                    s.name,
                    s.reason.as_deref().unwrap_or("")
                ));
            }
            for n in &s.notes {
                out.push_str(&format!(
                    "  step \"{}\" says ({}): {}\n",
                    s.name, n.level, n.message
                ));
            }
        }
        out
    }

    fn render_markdown(&self, saved: Option<(&str, &str)>) -> String {
        let mut out = format!("# Plan: {}\n\n", md(&self.runbook.name));
        if let Some(d) = &self.runbook.description {
            out.push_str(&format!("{}\n\n", md(d)));
        }
        out.push_str(
            "Made by running the runbook's reads; nothing was changed. Applying this plan makes \
             exactly the changes listed below, in this order, and stops before any change that \
             differs from them.\n\n",
        );
        out.push_str("| | |\n|---|---|\n");
        out.push_str(&format!(
            "| runbook | {} (sha256 {}) |\n",
            cell(&code_span(&self.runbook.path)),
            code_span(self.short_sha())
        ));
        out.push_str(&format!(
            "| made | {} by {} with runbook {}{} |\n",
            md(&self.created),
            md(&self.created_by),
            md(&self.runbook_version),
            if self.mode == "dry-run-offline" {
                ", offline (reads did not run)"
            } else {
                ""
            }
        ));
        out.push_str(&format!("| changes | {} |\n", md(&self.summary_line())));
        if let Some(reached) = self.reached_with_text(|p| cell(&code_span(p))) {
            out.push_str(&format!("| reached with | {reached} |\n"));
        }
        let (file, sha) = saved.unwrap_or(("PLAN.json", ""));
        if !sha.is_empty() {
            out.push_str(&format!(
                "| plan file | {} (sha256 {}: what the record of its apply names) |\n",
                cell(&code_span(file)),
                code_span(&sha[..12.min(sha.len())])
            ));
        }
        out.push_str(&format!(
            "| apply | {} (refused if the runbook, params or targets differ, or once the plan is older than --max-age, 1h by default) |\n",
            cell(&code_span(&format!("runbook apply {file}")))
        ));
        let params = self.param_rows();
        if !params.is_empty() {
            out.push_str("\n## Params\n\n| param | value |\n|---|---|\n");
            for (k, v) in params {
                let shown = match v {
                    Ok(v) if v.is_empty() => "*empty*".to_string(),
                    Ok(v) => cell(&code_span(&v)),
                    Err(note) => format!("*{}*", md(note)),
                };
                out.push_str(&format!("| {} | {shown} |\n", md(k)));
            }
        }
        if !self.targets.is_empty() {
            out.push_str("\n## Targets\n\n| target | where |\n|---|---|\n");
            for t in &self.targets {
                out.push_str(&format!(
                    "| {} | {} |\n",
                    cell(&code_span(&t.name)),
                    md(&Self::target_text(t))
                ));
            }
        }
        out.push_str(&self.module_lines(Style::Markdown));
        out.push_str("\n## Changes\n");
        if self.changes.is_empty() {
            out.push_str("\nNone: this runbook only reads.\n");
        } else {
            out.push_str(&self.render_changes(Style::Markdown, true));
        }
        let skipped: Vec<&PlannedStep> = self
            .steps
            .iter()
            .filter(|s| s.outcome == "skipped")
            .collect();
        if !skipped.is_empty() {
            out.push_str("\n## Skipped steps\n\n");
            for s in skipped {
                out.push_str(&format!(
                    "- Step {}: {}: {}\n",
                    s.index + 1,
                    md(&s.name),
                    md(s.reason.as_deref().unwrap_or(""))
                ));
            }
        }
        let noted: Vec<&PlannedStep> = self.steps.iter().filter(|s| !s.notes.is_empty()).collect();
        if !noted.is_empty() {
            out.push_str("\n## What the steps said\n\n");
            for s in noted {
                for n in &s.notes {
                    out.push_str(&format!(
                        "- Step {} ({}), {}: {}\n",
                        s.index + 1,
                        md(&s.name),
                        n.level,
                        md(&n.message)
                    ));
                }
            }
        }
        if !self.reads.is_empty() {
            out.push_str(&format!(
                "\n<details><summary>What the plan read ({})</summary>\n\n",
                html(&count(self.reads.len(), "read", "reads"))
            ));
            for r in &self.reads {
                out.push_str(&format!(
                    "- Step {}, on {}: {}\n",
                    r.step + 1,
                    code_span(&r.target),
                    md(&r.summary)
                ));
            }
            out.push_str("\n</details>\n");
        }
        out
    }
}
