//! Warm-up: run a script that fills the compile caches (torch inductor, triton, …) and
//! prove it did, by measuring each expected cache before and after.
//!
//! The run is a change (it fills caches), so `--dry-run` only plans it; the measurements
//! are reads. Every output line of the script already becomes an `output` event (the
//! spinner shows the latest); what this adds is a warning when the script stays silent
//! for long, since a compile that prints nothing for minutes looks exactly like a hang.

use super::{human_size, Cmd, Ran, Result, Script, Step};
use crate::duration;
use crate::events::{Event, Sink, Stamped};
use crate::targets::ExecRequest;
use serde::Serialize;
use std::cell::Cell;
use std::ffi::OsString;
use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

/// What `warmup.run` runs.
#[derive(Debug, Clone)]
pub struct Spec {
    pub python: String,
    pub script: String,
    pub args: Vec<OsString>,
    /// The caller's variables, sorted; the defaults below are added unless set here.
    pub env: Vec<(String, std::ffi::OsString)>,
    pub cwd: Option<String>,
    pub timeout: Option<Duration>,
    /// `TORCHINDUCTOR_COMPILE_THREADS=1`: inductor's parallel compile workers are the
    /// usual way a warm-up deadlocks or runs out of memory.
    pub single_threaded: bool,
    pub expect_cache: Vec<String>,
    /// Warn after this long without an output line; `None`: never.
    pub quiet_warning: Option<Duration>,
}

/// One expected cache, measured before and after (files, bytes); nil where it did not
/// exist or was not measured (`--offline`, or after a planned run).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CacheGrowth {
    pub path: String,
    pub files_before: Option<u64>,
    pub bytes_before: Option<u64>,
    pub files_after: Option<u64>,
    pub bytes_after: Option<u64>,
    pub grew: Option<bool>,
    /// `filled` (it grew), `warm` (it did not grow, but was full before and after: a
    /// warm-up on a warm cache compiles nothing new) or `empty` (nothing in it after).
    pub state: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub ok: bool,
    /// Seconds the script ran.
    pub duration: f64,
    pub caches: Vec<CacheGrowth>,
    pub planned: bool,
}

/// Prints `BYTES FILES` or `missing` for each path, one line each, in order
/// (`sh/measure.sh`): `size_of` (`sh/size.sh`), the size `cache.size` reports. `~/` means
/// the target user's home; a symlinked cache dir is followed.
pub(crate) const MEASURE: &str = concat!(
    include_str!("sh/measure.sh"),
    include_str!("sh/size.sh"),
    "main \"$@\"\n"
);
pub(crate) static MEASURE_SCRIPT: Script = Script::new(
    "warmup-measure.sh",
    "warmup.run",
    "src/primitives/sh/measure.sh",
    MEASURE,
);

pub async fn run(step: &Step<'_>, spec: &Spec) -> Result<Outcome> {
    let mut caches: Vec<CacheGrowth> = spec
        .expect_cache
        .iter()
        .map(|p| CacheGrowth {
            path: p.clone(),
            ..Default::default()
        })
        .collect();
    step.need(
        "warmup.run",
        &spec.python,
        "it runs the warm-up script",
        &environment(spec),
        spec.cwd.as_deref(),
    )
    .await?;
    if let Some(before) = measure(step, &spec.expect_cache, "before").await? {
        for (c, m) in caches.iter_mut().zip(before) {
            (c.files_before, c.bytes_before) = m.unzip();
        }
    }

    let mut argv: Vec<OsString> = vec![spec.python.clone().into(), spec.script.clone().into()];
    argv.extend(spec.args.iter().cloned());
    let shown = crate::quote::join(&argv);
    let summary = format!("warm-up: {shown}");
    let mut cmd = Cmd::new(argv);
    cmd.env = environment(spec);
    if let Some(dir) = &spec.cwd {
        cmd = cmd.cwd(dir);
    }
    if let Some(t) = spec.timeout {
        cmd = cmd.timeout(t);
    }
    let ran = match spec.quiet_warning {
        Some(after) if !step.dry_run() && !after.is_zero() => {
            run_watched(step, cmd, summary, after).await?
        }
        _ => step.change(cmd, summary, false).await?,
    };
    let out = match &ran {
        Ran::Planned { .. } => {
            return Ok(Outcome {
                ok: true,
                duration: 0.0,
                caches,
                planned: true,
            })
        }
        Ran::Done { out, .. } => out,
    };
    let target = step.target.name();
    if !ran.ok() {
        let head = out.failed("warm-up", Some(&target), spec.timeout);
        let tail = out.stderr_tail(crate::targets::failure::TAIL_LINES);
        return Err(step.fail(format!("{head}: {shown}{tail}")));
    }

    if let Some(after) = measure(step, &spec.expect_cache, "after").await? {
        for (c, m) in caches.iter_mut().zip(after) {
            (c.files_after, c.bytes_after) = m.unzip();
            c.grew = Some(grew(c));
            c.state = Some(state(c).into());
        }
    }
    for c in &caches {
        let how = match c.state.as_deref() {
            Some("filled") => "filled",
            Some("warm") => "already warm (nothing new compiled)",
            _ => continue,
        };
        log(
            step,
            format!(
                "{}: {how}: {} → {}",
                c.path,
                size(c.files_before, c.bytes_before),
                size(c.files_after, c.bytes_after)
            ),
        );
    }
    let stale: Vec<String> = caches
        .iter()
        .filter(|c| c.state.as_deref() == Some("empty"))
        .map(|c| {
            format!(
                "{}: {} → {}",
                c.path,
                size(c.files_before, c.bytes_before),
                size(c.files_after, c.bytes_after)
            )
        })
        .collect();
    if !stale.is_empty() {
        return Err(step.fail(format!(
            "warm-up on {target} ran but left its caches empty: {}",
            stale.join("; ")
        )));
    }
    Ok(Outcome {
        ok: true,
        duration: out.duration.as_secs_f64(),
        caches,
        planned: false,
    })
}

/// The caller's environment plus the warm-up defaults it did not set itself.
fn environment(spec: &Spec) -> Vec<(String, std::ffi::OsString)> {
    let mut env = spec.env.clone();
    let mut default = |k: &str, v: &str| {
        if !env.iter().any(|(name, _)| name == k) {
            env.push((k.into(), v.into()));
        }
    };
    if spec.single_threaded {
        default("TORCHINDUCTOR_COMPILE_THREADS", "1");
    }
    // A piped python buffers stdout in blocks: progress would arrive at the end, and the
    // silence warning would fire on a script that is printing.
    default("PYTHONUNBUFFERED", "1");
    env.sort();
    env
}

/// A warm-up did its job when each cache holds files afterwards, and it either grew or
/// was already full before (then the warm-up found everything compiled).
fn state(c: &CacheGrowth) -> &'static str {
    match c.files_after {
        Some(n) if n > 0 && grew(c) => "filled",
        Some(n) if n > 0 && c.files_before.unwrap_or(0) > 0 => "warm",
        // Files after but none before always counts as growth: what is left is a cache
        // with nothing in it (or missing) afterwards.
        _ => "empty",
    }
}

/// One info line into the step's output (masked like every event).
fn log(step: &Step<'_>, message: String) {
    step.ctx.bus.emit(crate::events::Event::Log {
        step: step.ctx.step.get().map(|s| s.index),
        level: crate::events::Level::Info,
        message,
    });
}

/// A cache grew when it exists now and has more files or more bytes than before.
fn grew(c: &CacheGrowth) -> bool {
    match (c.files_after, c.bytes_after) {
        (Some(files), Some(bytes)) => {
            files > c.files_before.unwrap_or(0) || bytes > c.bytes_before.unwrap_or(0)
        }
        _ => false,
    }
}

fn size(files: Option<u64>, bytes: Option<u64>) -> String {
    match (files, bytes) {
        (Some(f), Some(b)) => human_size(b, f),
        _ => "missing".into(),
    }
}

/// (files, bytes) per path, `None` for a missing one; the outer `None` when the read was
/// only planned (or there is nothing to measure).
async fn measure(
    step: &Step<'_>,
    paths: &[String],
    when: &str,
) -> Result<Option<Vec<Option<(u64, u64)>>>> {
    if paths.is_empty() {
        return Ok(None);
    }
    let ran = step
        .read(
            Cmd::script(&MEASURE_SCRIPT, paths).timeout(Duration::from_secs(300)),
            format!("warm-up: measure caches {when}"),
        )
        .await?;
    if ran.planned() {
        return Ok(None);
    }
    let target = step.target.name();
    if !ran.ok() {
        let what = "warm-up: measuring the caches";
        return Err(step.fail(ran.failure(what, Some(&target), None)));
    }
    let stdout = ran.stdout();
    let sizes: Vec<Option<(u64, u64)>> = stdout.lines().map(parse_size).collect();
    if sizes.len() != paths.len() {
        return Err(step.fail(format!(
            "warm-up: unexpected output measuring the caches on {target}: {stdout}"
        )));
    }
    Ok(Some(sizes))
}

/// `BYTES FILES` as (files, bytes); `None` for `missing`.
pub(crate) fn parse_size(line: &str) -> Option<(u64, u64)> {
    let (bytes, files) = line.trim().split_once(' ')?;
    Some((files.parse().ok()?, bytes.parse().ok()?))
}

/// When the watched command last showed a sign of life, and which action it is.
struct Silence {
    step: usize,
    target: String,
    /// The command line as `action_started` shows it (masked like every event).
    command: String,
    /// Actions up to this id started before the warm-up did.
    after_action: u64,
    action: Cell<Option<u64>>,
    /// The last output line, or the start, or the last warning.
    last_output: Cell<Instant>,
    last_warned: Cell<Option<Instant>>,
}

/// Watches the event stream for the warm-up's `action_started` and `output` events. It is
/// taken off the bus when the warm-up ends; it holds the watch weakly all the same, so a
/// warm-up cut short (an error, Ctrl-C) cannot leave it pointing at freed state.
struct SilenceSink(Weak<Silence>);

impl Sink for SilenceSink {
    fn emit(&mut self, ev: &Stamped) {
        let Some(w) = self.0.upgrade() else { return };
        match &ev.event {
            Event::ActionStarted {
                step,
                action,
                target,
                command,
                ..
            } if w.action.get().is_none()
                && *action > w.after_action
                && *step == w.step
                && *target == w.target
                && *command == w.command =>
            {
                w.action.set(Some(*action));
                w.last_output.set(Instant::now());
            }
            Event::Output { action, .. } if w.action.get() == Some(*action) => {
                w.last_output.set(Instant::now());
            }
            _ => {}
        }
    }
}

/// Runs the warm-up while a timer, on the same runtime thread, looks at when its last
/// output line came: after `quiet` without one it emits a `warn` log event, and again
/// after each further `quiet`. The output lines themselves are seen through a sink on
/// the event bus, so nothing about the command changes (no wrapper process, streams
/// kept apart, the same kill path on timeout or Ctrl-C).
async fn run_watched(step: &Step<'_>, cmd: Cmd, summary: String, quiet: Duration) -> Result<Ran> {
    let ctx = step.ctx;
    let req = ExecRequest {
        argv: cmd.argv.clone(),
        env: cmd.env.clone(),
        cwd: cmd.cwd.clone(),
        ..Default::default()
    };
    let silence = Rc::new(Silence {
        step: ctx.step.get().map(|s| s.index).unwrap_or(0),
        target: step.target.name(),
        command: ctx
            .bus
            .mask(&crate::actions::shown(step.target, &req, None)),
        after_action: ctx.action_seq.get(),
        action: Cell::new(None),
        last_output: Cell::new(Instant::now()),
        last_warned: Cell::new(None),
    });
    let watcher = ctx
        .bus
        .add_sink(Box::new(SilenceSink(Rc::downgrade(&silence))));
    let started = Instant::now();
    let warn = async {
        loop {
            let since = match silence.last_warned.get() {
                Some(w) if w > silence.last_output.get() => w,
                _ => silence.last_output.get(),
            };
            tokio::time::sleep_until((since + quiet).into()).await;
            let quiet_for = silence.last_output.get().elapsed();
            if silence.action.get().is_none() || quiet_for < quiet {
                continue;
            }
            silence.last_warned.set(Some(Instant::now()));
            ctx.bus.emit(Event::Log {
                step: ctx.step.get().map(|s| s.index),
                level: crate::events::Level::Warn,
                message: format!(
                    "warm-up on {}: no output for {} (running for {}); a long compile is \
                     often silent, but check it is not stuck",
                    silence.target,
                    duration::short(quiet_for),
                    duration::short(started.elapsed())
                ),
            });
        }
    };
    let run = step.change(cmd, summary, false);
    let ran = tokio::select! {
        ran = run => ran,
        _ = warn => unreachable!("the silence watch never ends"),
    };
    ctx.bus.remove_sink(watcher);
    ran
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec {
            python: "python3".into(),
            script: "w.py".into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            timeout: None,
            single_threaded: true,
            expect_cache: Vec::new(),
            quiet_warning: None,
        }
    }

    #[test]
    fn defaults_join_the_callers_environment() {
        let env = environment(&spec());
        assert_eq!(
            env,
            vec![
                ("PYTHONUNBUFFERED".to_string(), "1".into()),
                ("TORCHINDUCTOR_COMPILE_THREADS".to_string(), "1".into()),
            ]
        );
        let mine = Spec {
            env: vec![("TORCHINDUCTOR_COMPILE_THREADS".into(), "4".into())],
            single_threaded: true,
            ..spec()
        };
        assert!(environment(&mine).contains(&("TORCHINDUCTOR_COMPILE_THREADS".into(), "4".into())));
        let multi = Spec {
            single_threaded: false,
            ..spec()
        };
        assert!(!environment(&multi)
            .iter()
            .any(|(k, _)| k == "TORCHINDUCTOR_COMPILE_THREADS"));
    }

    #[test]
    fn growth_means_more_files_or_bytes() {
        let c = |fb, bb, fa, ba| CacheGrowth {
            path: "/c".into(),
            files_before: fb,
            bytes_before: bb,
            files_after: fa,
            bytes_after: ba,
            grew: None,
            state: None,
        };
        assert!(grew(&c(None, None, Some(1), Some(10))));
        assert!(grew(&c(Some(1), Some(10), Some(1), Some(11))));
        assert!(!grew(&c(Some(1), Some(10), Some(1), Some(10))));
        assert!(!grew(&c(None, None, None, None)));
        assert!(!grew(&c(None, None, Some(0), Some(0))));
        assert_eq!(state(&c(None, None, Some(3), Some(30))), "filled");
        assert_eq!(state(&c(Some(14), Some(122), Some(14), Some(122))), "warm");
        assert_eq!(state(&c(Some(14), Some(122), Some(0), Some(0))), "empty");
        assert_eq!(state(&c(None, None, None, None)), "empty");
        assert_eq!(parse_size("4096 3"), Some((3, 4096)), "BYTES FILES");
        assert_eq!(parse_size("missing"), None);
        assert_eq!(size(Some(1200), Some(4096)), "4.0 KiB, 1,200 files");
    }
}
