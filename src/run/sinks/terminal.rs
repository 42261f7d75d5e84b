//! The human view on stderr: a spinner per running step (elapsed time and latest output
//! line), a ✓/✗ line per finished step, the dry-run preview, and a summary.
//!
//! When stderr is not a terminal the same information comes as plain lines, without bars
//! or colour; `NO_COLOR` turns colour off on a terminal too.

use crate::actions::events::{
    Effect, Event, Level, RunOutcome, Sink, Stamped, StepOutcome, Stream,
};
use crate::actions::plan::ChangeText;
use crate::base::duration;
use crate::base::printable;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::Write;
use std::sync::OnceLock;
use std::time::Duration;

/// The bars shared with the log writer, so that log lines print above the bars instead of
/// tearing them.
static BARS: OnceLock<MultiProgress> = OnceLock::new();

pub fn bars() -> &'static MultiProgress {
    BARS.get_or_init(|| {
        MultiProgress::with_draw_target(ProgressDrawTarget::term_like_with_hz(
            Box::new(Stderr(console::Term::buffered_stderr())),
            20,
        ))
    })
}

/// stderr as the bars draw on it, as wide as its window says (`columns`): console's own
/// size is 80 columns whenever the window's rows are unknown (0), and a line drawn for
/// 80 columns on a narrower screen wraps, and its first rows stay in the scrollback.
#[derive(Debug)]
struct Stderr(console::Term);

impl indicatif::TermLike for Stderr {
    fn width(&self) -> u16 {
        u16::try_from(columns()).unwrap_or(u16::MAX)
    }
    fn height(&self) -> u16 {
        self.0.size().0
    }
    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_up(n)
    }
    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_down(n)
    }
    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_right(n)
    }
    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_left(n)
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.0.write_line(s)
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.0.write_str(s)
    }
    fn clear_line(&self) -> std::io::Result<()> {
        self.0.clear_line()
    }
    fn flush(&self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Takes the spinners off the terminal while a question is asked mid-run, and puts them
/// back (`show`).
pub fn hide_bars() {
    let _ = bars().clear();
    bars().set_draw_target(ProgressDrawTarget::hidden());
}

pub fn show_bars() {
    bars().set_draw_target(ProgressDrawTarget::stderr());
}

/// `tracing` writes through this: lines go above the bars. It never fails: on an error
/// tracing-subscriber says so with eprintln!, which panics on a closed stderr
/// (`runbook run -v … 2>&1 | head`) and would end the run midway.
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = match BARS.get() {
            Some(bars) => bars.suspend(|| std::io::stderr().write_all(buf)),
            None => std::io::stderr().write_all(buf),
        };
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

#[derive(Clone, Copy)]
pub struct TerminalOptions {
    pub fancy: bool,
    pub color: bool,
    pub verbose: bool,
    pub quiet: bool,
    /// Lines go to stdout instead of stderr: `runbook log` replays a run as its output,
    /// so that `runbook log last | less` shows it.
    pub stdout: bool,
    /// Print the body of each of runbook's scripts the first time the run uses it
    /// (`-v`); otherwise commands name them only.
    pub scripts: bool,
}

/// stderr is a terminal that can move the cursor (progress lines redraw in place).
fn fancy_stderr() -> bool {
    use is_terminal::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("TERM").is_some_and(|t| t != "dumb")
}

/// Colour on stderr: only on such a terminal, and not when `NO_COLOR` is set. The
/// diagnostics (`tracing`) follow the same rule, so a log file or a CI log gets no
/// escape codes.
pub fn colour_stderr() -> bool {
    fancy_stderr() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

impl TerminalOptions {
    pub fn detect(verbose: bool, quiet: bool) -> Self {
        let fancy = fancy_stderr();
        let color = colour_stderr();
        TerminalOptions {
            fancy,
            color,
            verbose,
            quiet,
            stdout: false,
            scripts: verbose,
        }
    }
}

pub struct TerminalSink {
    opts: TerminalOptions,
    dry_run: bool,
    spinner: Option<ProgressBar>,
    /// The running step's name, as its spinner shows it (fitted to the width).
    spinning: String,
    planned_changes: usize,
    run_id: String,
}

impl TerminalSink {
    pub fn new(opts: TerminalOptions) -> Self {
        TerminalSink {
            opts,
            dry_run: false,
            spinner: None,
            spinning: String::new(),
            planned_changes: 0,
            run_id: String::new(),
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.opts.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    /// One line of the view. A closed stdout or stderr (`runbook run … | head`) must not
    /// stop the run: its cleanup (`always` steps) still runs and the record still has
    /// every line, so write errors are ignored here (println! would panic).
    fn line(&self, text: &str) {
        if self.opts.stdout {
            let _ = writeln!(std::io::stdout().lock(), "{text}");
            return;
        }
        // One write: stderr is unbuffered, and `writeln!` wrote the text and its newline
        // with a system call each.
        let err = || {
            let mut line = String::with_capacity(text.len() + 1);
            line.push_str(text);
            line.push('\n');
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        };
        match &self.spinner {
            Some(_) => bars().suspend(err),
            None => err(),
        }
    }

    fn start_spinner(&mut self, name: &str) {
        if !self.opts.fancy || self.opts.quiet {
            if !self.opts.quiet {
                self.line(&format!("→ {name}"));
            }
            return;
        }
        let pb = bars().add(ProgressBar::new_spinner());
        pb.set_style(
            ProgressStyle::with_template("{spinner:.cyan} {prefix} {elapsed:.dim} {msg:.dim}")
                .expect("static template"),
        );
        // One screen line, whatever the width: a line that wraps is redrawn from its last
        // row only, and its first rows stay in the scrollback, spinner and all.
        self.spinning = console::truncate_str(name, spinner_room(columns(), 0), "…").into_owned();
        pb.set_prefix(self.spinning.clone());
        pb.enable_steady_tick(Duration::from_millis(100));
        self.spinner = Some(pb);
    }

    /// The running step's latest output line, cut to what is left of the screen line.
    fn spin_message(&self, line: &str) {
        if let Some(pb) = &self.spinner {
            let used = console::measure_text_width(&self.spinning) + 1;
            let room = spinner_room(columns(), used);
            pb.set_message(console::truncate_str(line, room, "…").into_owned());
        }
    }

    fn stop_spinner(&mut self) {
        if let Some(pb) = self.spinner.take() {
            pb.finish_and_clear();
            bars().remove(&pb);
        }
    }
}

/// The columns of the terminal on stderr: its window size (a pty whose rows are unknown
/// still says its columns), else 80.
fn columns() -> usize {
    use std::os::fd::AsRawFd;
    // SAFETY: TIOCGWINSZ fills the winsize it is given, on a descriptor this process has.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(std::io::stderr().as_raw_fd(), libc::TIOCGWINSZ, &mut ws) } == 0;
    match (ok, ws.ws_col) {
        (true, cols) if cols > 0 => usize::from(cols),
        _ => 80,
    }
}

/// Display columns left on a spinner line `cols` wide once `used` are taken: the spinner
/// and its space, the elapsed time (up to `59m 59s`) and the spaces around it, and one
/// column spare (a line that fills the last column wraps on some terminals).
fn spinner_room(cols: usize, used: usize) -> usize {
    cols.saturating_sub(2 + 1 + 7 + 1 + 1 + used)
}

impl Sink for TerminalSink {
    fn emit(&mut self, stamped: &Stamped) {
        let quiet = self.opts.quiet;
        match &stamped.event {
            Event::RunStarted {
                run_id,
                runbook,
                path,
                mode,
                resumed_from,
                plan,
                author,
                approvers,
                user,
                ..
            } => {
                self.dry_run = mode != "real";
                self.run_id = run_id.clone();
                if quiet {
                    return;
                }
                let what = match mode.as_str() {
                    "dry-run" => self.paint("33;1", " DRY RUN: reads run, nothing is changed "),
                    "dry-run-offline" => {
                        self.paint("33;1", " DRY RUN (offline): no target is contacted ")
                    }
                    _ => String::new(),
                };
                self.line(&format!(
                    "{} {} · {} · run {run_id}{what}",
                    self.paint("1", "runbook"),
                    self.paint("1", &printable::line(runbook)),
                    printable::line(path),
                ));
                if let Some(prev) = resumed_from {
                    self.line(&format!("resuming run {prev}"));
                }
                if let (Some(plan), Some(author)) = (plan, author) {
                    self.line(&format!(
                        "plan {}… by {}, approved by {}, applied by {}",
                        &plan[..plan.len().min(12)],
                        printable::line(author),
                        match approvers.is_empty() {
                            true => "nobody".to_string(),
                            false => printable::line(&approvers.join(", ")).into_owned(),
                        },
                        printable::line(user)
                    ));
                }
            }
            Event::StepStarted {
                index,
                name,
                attempt,
                ..
            } => {
                let name = printable::line(name);
                if self.dry_run {
                    if !quiet {
                        self.line(&format!(
                            "{} {name}",
                            self.paint("1", &format!("step {}:", index + 1))
                        ));
                    }
                    return;
                }
                let label = if *attempt > 1 {
                    format!("{name} (attempt {attempt})")
                } else {
                    name.into_owned()
                };
                self.start_spinner(&label);
            }
            Event::StepSkipped { name, reason, .. } => {
                if !quiet {
                    self.line(&format!(
                        "{} {}  {}",
                        self.paint("2", "-"),
                        printable::line(name),
                        self.paint("2", &format!("skipped: {}", printable::line(reason)))
                    ));
                }
            }
            Event::StepFinished {
                name,
                outcome,
                duration_ms,
                error,
                ..
            } => {
                self.stop_spinner();
                let name = printable::line(name);
                let took = duration::short(Duration::from_millis(*duration_ms));
                match outcome {
                    StepOutcome::Failed => {
                        self.line(&format!(
                            "{} {name}  {}",
                            self.paint("31;1", "✗"),
                            self.paint("2", &took)
                        ));
                        if let Some(e) = error {
                            for l in e.lines() {
                                let l = printable::line(l);
                                self.line(&format!("    {}", self.paint("31", &l)));
                            }
                        }
                    }
                    other if !quiet => {
                        let tag = if *other == StepOutcome::Changed {
                            if self.dry_run {
                                self.paint("33", " (would change)")
                            } else {
                                self.paint("33", " (changed)")
                            }
                        } else {
                            String::new()
                        };
                        self.line(&format!(
                            "{} {name}{tag}  {}",
                            self.paint("32;1", "✓"),
                            self.paint("2", &took)
                        ));
                    }
                    _ => {}
                }
            }
            Event::ActionPlanned {
                step: _,
                target,
                effect,
                summary,
                command,
                destructive,
                may_delete,
                diff,
                ..
            } => {
                if quiet {
                    return;
                }
                if *effect == Effect::Change {
                    self.planned_changes += 1;
                }
                let mark = if *effect == Effect::Change {
                    self.paint("33", "~")
                } else {
                    self.paint("36", "?")
                };
                // The plan's own rendering of a change, so the preview reads as the
                // confirmation and `runbook plan` will.
                let change = ChangeText {
                    target,
                    summary,
                    shown: command,
                    destructive: *destructive,
                    may_delete: *may_delete,
                    exact: None,
                    diff: diff.as_deref(),
                };
                let text = change.text(&format!("  {mark} "), 6, self.opts.verbose);
                self.line(text.trim_end());
            }
            Event::ActionStarted {
                step: _,
                target,
                effect,
                summary,
                command,
                replayed,
                diff,
                ..
            } => {
                let (target, summary, command) = (
                    printable::line(target),
                    printable::line(summary),
                    printable::block(command),
                );
                if self.dry_run && !quiet {
                    // A read that really runs during a dry-run: its one-line summary (a
                    // primitive's probe script can be long); the command with -v.
                    self.line(&format!(
                        "  {} {}: {summary}  {}",
                        self.paint("36", "="),
                        self.paint("1", &target),
                        self.paint("2", "(read)")
                    ));
                    if self.opts.verbose && summary != command {
                        self.line(&format!("      $ {command}"));
                    }
                } else if self.opts.verbose {
                    let answered = match replayed {
                        true => self.paint("2", "  (answered by the confirmation's dry-run)"),
                        false => String::new(),
                    };
                    self.line(&format!(
                        "  {} {target}: {command}{answered}",
                        if *effect == Effect::Change { "$" } else { "=" }
                    ));
                    // What a write does to its file, whole (`-v`), as the plan showed it.
                    for l in diff.iter().flat_map(|d| d.lines()) {
                        self.line(&format!("      {}", printable::line(l)));
                    }
                }
            }
            Event::Output { stream, line, .. } => {
                let line = printable::line(line);
                if self.opts.verbose {
                    let tag = if *stream == Stream::Stderr {
                        self.paint("31", "│")
                    } else {
                        self.paint("2", "│")
                    };
                    self.line(&format!("    {tag} {line}"));
                } else {
                    self.spin_message(&line);
                }
            }
            Event::Script { name, sha256, body } => {
                if !self.opts.scripts || quiet {
                    return;
                }
                let short = name.strip_suffix(".sh").unwrap_or(name);
                self.line(&format!(
                    "  {} script {name} (sha256 {}…, `runbook script {short}` prints it):",
                    self.paint("36", "·"),
                    &sha256[..sha256.len().min(12)]
                ));
                // Not `│`, which marks a command's output lines.
                for l in body.lines() {
                    let l = printable::line(l);
                    self.line(&format!("      {} {l}", self.paint("2", "┊")));
                }
            }
            Event::ActionFinished { .. }
            | Event::ActionPgid { .. }
            | Event::ActionDetached { .. } => {}
            // Each item's line is a `log` event beside it; this one is for the record.
            Event::RolloutItem { .. } => {}
            Event::Log { level, message, .. } => {
                // A message of several lines (a command's output) stays under its step.
                let message =
                    printable::block(message.trim_end_matches('\n')).replace('\n', "\n    ");
                let text = match level {
                    Level::Warn => format!("  {} {message}", self.paint("33;1", "warning:")),
                    Level::Error => format!("  {} {message}", self.paint("31;1", "error:")),
                    _ if quiet => return,
                    // As documented: `log.debug` shows with -v only (the record keeps it).
                    Level::Debug if !self.opts.verbose => return,
                    _ => format!("  {} {message}", self.paint("36", "·")),
                };
                self.line(&text);
            }
            Event::RunFinished {
                outcome,
                ok,
                changed,
                failed,
                skipped,
                duration_ms,
                ..
            } => {
                self.stop_spinner();
                let took = duration::short(Duration::from_millis(*duration_ms));
                let head = match outcome {
                    RunOutcome::Ok => self.paint("32;1", "ok"),
                    RunOutcome::Interrupted => self.paint("31;1", "interrupted"),
                    RunOutcome::Failed => self.paint("31;1", "failed"),
                };
                if self.dry_run {
                    self.line(&format!(
                        "{head}: {} planned change(s) in {changed} step(s); ok={ok} failed={failed} skipped={skipped} · {took} · run {} · nothing was changed",
                        self.planned_changes, self.run_id
                    ));
                } else {
                    self.line(&format!(
                        "{head}: ok={ok} changed={changed} failed={failed} skipped={skipped} · {took} · run {}",
                        self.run_id
                    ));
                }
            }
        }
    }

    fn finish(&mut self) {
        self.stop_spinner();
    }
}
