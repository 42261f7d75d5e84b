//! Warm-up: run a script that fills the compile caches (torch inductor, triton, …) and
//! prove it did, by measuring each expected cache before and after.
//!
//! The run is a change (it fills caches), so `--dry-run` only plans it; the measurements
//! are reads.
//!
//! After a restore the proof is the opposite one: the warm-up should compile nothing.
//! `expect_hit` counts inductor's FX graph cache entries before and after (one file per
//! compiled graph), and with `torch_report` the script runs under a small wrapper
//! (`sh/warmup_torch.sh`) that prints inductor's own hit/miss counters as one JSON line
//! at exit, read here into [`TorchReport`]; the same wrapper saves torch's Mega-Cache
//! when asked (`mega_save`). Every output line of the script already becomes an `output` event (the
//! spinner shows the latest); what this adds is a warning when the script stays silent
//! for long, since a compile that prints nothing for minutes looks exactly like a hang.

use super::{human_size, Cmd, Ran, Result, Step};
use crate::actions::events::{Event, Sink, Stamped};
use crate::base::duration;
use crate::base::script;
use crate::targets::ExecRequest;
use serde::{Deserialize, Serialize};
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
    /// Run it detached from the connection (`targets/detach.rs`); `None`: by its timeout.
    pub detach: Option<bool>,
    /// `TORCHINDUCTOR_COMPILE_THREADS=1`: inductor's parallel compile workers are the
    /// usual way a warm-up deadlocks or runs out of memory.
    pub single_threaded: bool,
    pub expect_cache: Vec<String>,
    /// `expect_cache = "hit"`: the warm-up should compile nothing (what a restored cache
    /// is for); what it compiled anyway is reported, and fails the step with `on_miss`.
    pub expect_hit: Option<OnMiss>,
    /// Run the script under `warmup_torch.sh`, which reports torch's own counters.
    pub torch_report: bool,
    /// Where that wrapper saves torch's Mega-Cache at exit (implies `torch_report`).
    pub mega_save: Option<String>,
    /// Warn after this long without an output line; `None`: never.
    pub quiet_warning: Option<Duration>,
}

/// What a warm-up that still compiled does to the step, with `expect_cache = "hit"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMiss {
    /// A `warn` line and `hit = false` in the result; the step goes on (the cache is
    /// warm now, the restore just did not save the compile).
    Warn,
    /// The step fails with the same message.
    Fail,
}

/// The proof that a warm-up compiled nothing (`expect_cache = "hit"`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct HitCheck {
    /// Inductor's cache dir, as the warm-up's environment makes inductor choose it.
    pub dir: String,
    /// FX graph cache entries (files under `fxgraph/`, one per compiled graph) before and
    /// after; nil where it had none (no `fxgraph/`), or when not measured.
    pub entries_before: Option<u64>,
    pub entries_after: Option<u64>,
    /// Graphs inductor compiled: its `fxgraph_cache_miss + fxgraph_cache_bypass` counters
    /// when the torch report has them, else the new entries.
    pub graphs_compiled: Option<u64>,
    /// `counters` or `entries`: where `graphs_compiled` came from.
    pub counted_by: Option<String>,
    /// Nothing was compiled.
    pub hit: Option<bool>,
}

/// What `warmup_torch.sh` printed at the script's exit (the JSON line's fields).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TorchReport {
    /// `torch.__version__`; nil when the script never imported torch.
    pub torch: Option<String>,
    /// Inductor's cache dir, as inductor resolved it in that process.
    pub inductor: Option<String>,
    pub counters: Option<Counters>,
    pub mega: Option<MegaSaved>,
    /// Why a part could not be read.
    pub error: Option<String>,
}

/// The counters of `torch._dynamo.utils.counters` a cache check needs, by torch's names.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Counters {
    pub fxgraph_cache_hit: u64,
    pub fxgraph_cache_miss: u64,
    pub fxgraph_cache_bypass: u64,
    pub autograd_cache_hit: u64,
    pub autograd_cache_miss: u64,
    pub autograd_cache_bypass: u64,
    /// Generated code a cache hit had to write again (it was not in the cache): after a
    /// Mega-Cache load, whose artifacts carry no kernel binaries, each is rebuilt.
    pub fxgraph_lookup_write_file: u64,
}

/// `{"inductor": {NAME: N, ...}, "aot_autograd": {...}}`, torch's groups as the wrapper
/// copies them: the names read, the others (pattern matcher counts, …) left out.
impl<'de> Deserialize<'de> for Counters {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        type Group = std::collections::BTreeMap<String, u64>;
        #[derive(Deserialize)]
        struct Groups {
            #[serde(default)]
            inductor: Group,
            #[serde(default)]
            aot_autograd: Group,
        }
        let g = Groups::deserialize(d)?;
        let of = |group: &Group, k: &str| group.get(k).copied().unwrap_or(0);
        Ok(Counters {
            fxgraph_cache_hit: of(&g.inductor, "fxgraph_cache_hit"),
            fxgraph_cache_miss: of(&g.inductor, "fxgraph_cache_miss"),
            fxgraph_cache_bypass: of(&g.inductor, "fxgraph_cache_bypass"),
            autograd_cache_hit: of(&g.aot_autograd, "autograd_cache_hit"),
            autograd_cache_miss: of(&g.aot_autograd, "autograd_cache_miss"),
            autograd_cache_bypass: of(&g.aot_autograd, "autograd_cache_bypass"),
            fxgraph_lookup_write_file: of(&g.inductor, "fxgraph_lookup_write_file"),
        })
    }
}

/// `torch.compiler.save_cache_artifacts()` at the script's exit, written to `mega_save`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MegaSaved {
    pub saved: bool,
    /// The file it wrote (`mega_save` as given).
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub bytes: Option<u64>,
    /// Artifacts by kind (`inductor`, `aot_autograd`, `autotune`, `pgo`, …).
    #[serde(default)]
    pub artifacts: std::collections::BTreeMap<String, u64>,
    /// Why nothing was saved.
    #[serde(default)]
    pub reason: Option<String>,
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
    /// With `expect_cache = "hit"`.
    pub cache_hit: Option<HitCheck>,
    /// With `torch_report` (or `mega_save`): nil when the script left no report (killed,
    /// `os._exit`) or in a dry-run.
    pub torch: Option<TorchReport>,
    pub planned: bool,
}

/// The prefix of the wrapper's report line on stderr.
const REPORT: &str = "runbook-warmup-report ";

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
    let mut hit = match spec.expect_hit {
        Some(_) => graphs(step, spec, "before")
            .await?
            .map(|(dir, n)| HitCheck {
                dir,
                entries_before: n,
                ..Default::default()
            }),
        None => None,
    };

    let mut argv: Vec<OsString> = vec![spec.python.clone().into(), spec.script.clone().into()];
    argv.extend(spec.args.iter().cloned());
    let shown = crate::base::quote::join(&argv);
    let summary = format!("warm-up: {shown}");
    let wrapped = spec.torch_report || spec.mega_save.is_some();
    let mut cmd = match wrapped {
        // The same python, script and arguments, after the wrapper's own two.
        true => Cmd::script(
            &script::WARMUP_TORCH,
            [
                spec.python.clone().into(),
                spec.mega_save.clone().unwrap_or_default().into(),
            ]
            .into_iter()
            .chain(argv[1..].iter().cloned())
            .collect::<Vec<OsString>>(),
        ),
        false => Cmd::new(argv),
    };
    cmd.env = environment(spec);
    if let Some(dir) = &spec.cwd {
        cmd = cmd.cwd(dir);
    }
    if let Some(t) = spec.timeout {
        cmd = cmd.timeout(t);
    }
    cmd.detach = spec.detach;
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
                cache_hit: hit,
                torch: None,
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

    let torch = match wrapped {
        true => report(step, out, spec),
        false => None,
    };

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
    if let (Some(on_miss), Some(h)) = (spec.expect_hit, hit.as_mut()) {
        if let Some((_, n)) = graphs(step, spec, "after").await? {
            h.entries_after = n;
        }
        judge(h, torch.as_ref().and_then(|t| t.counters.as_ref()));
        let message = hit_message(&target, h, torch.as_ref());
        let idle = torch
            .as_ref()
            .and_then(|t| t.counters.as_ref())
            .is_some_and(|c| {
                c.fxgraph_cache_hit + c.fxgraph_cache_miss + c.fxgraph_cache_bypass == 0
            });
        match h.hit {
            Some(false) if on_miss == OnMiss::Fail => return Err(step.fail(message)),
            Some(false) => warn(step, message),
            // A hit in name only: the script never asked inductor for a graph, so it
            // proves nothing about the cache.
            _ if idle => warn(step, message),
            _ => log(step, message),
        }
    }
    Ok(Outcome {
        ok: true,
        duration: out.duration.as_secs_f64(),
        caches,
        cache_hit: hit,
        torch,
        planned: false,
    })
}

/// The wrapper's last report line on stderr, read as JSON; `None` (said in a warning)
/// when there is none: the script ended without running Python's exit handlers.
fn report(step: &Step<'_>, out: &crate::targets::ExecOutcome, spec: &Spec) -> Option<TorchReport> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().rev().find_map(|l| l.strip_prefix(REPORT));
    let parsed = line.map(serde_json::from_str::<TorchReport>);
    match parsed {
        Some(Ok(mut r)) => {
            if let Some(m) = r.mega.as_mut().filter(|m| m.saved) {
                m.path = spec.mega_save.clone();
            }
            Some(r)
        }
        Some(Err(e)) => {
            warn(step, format!("warm-up: the torch report did not read: {e}"));
            None
        }
        None => {
            let cut = match out.stderr_truncated {
                true => {
                    " (its stderr was longer than runbook keeps: the report may be past the cut)"
                }
                false => {
                    " (it exited without running Python's exit handlers: os._exit, or a signal)"
                }
            };
            warn(
                step,
                format!("warm-up: the script left no torch report{cut}"),
            );
            None
        }
    }
}

/// Fills in `graphs_compiled` and `hit`: inductor's own counters when there are any,
/// else the entries the warm-up added (which cannot see a graph inductor compiled
/// without caching it: a bypass).
fn judge(h: &mut HitCheck, counters: Option<&Counters>) {
    let (n, by) = match (counters, h.entries_after) {
        (Some(c), _) => (
            Some(c.fxgraph_cache_miss + c.fxgraph_cache_bypass),
            "counters",
        ),
        (None, Some(after)) => (
            Some(after.saturating_sub(h.entries_before.unwrap_or(0))),
            "entries",
        ),
        (None, None) => (Some(0), "entries"),
    };
    h.graphs_compiled = n;
    h.counted_by = Some(by.into());
    h.hit = n.map(|n| n == 0);
}

/// `warm-up on T: the restored cache missed: 3 graphs compiled (…)`, or the hit it was.
fn hit_message(target: &str, h: &HitCheck, torch: Option<&TorchReport>) -> String {
    let entries = |n: Option<u64>| n.map_or("none".to_string(), |n| n.to_string());
    let new = h
        .entries_after
        .unwrap_or(0)
        .saturating_sub(h.entries_before.unwrap_or(0));
    let mut detail = format!(
        "FX graph cache entries in {}/fxgraph: {} → {}, {new} new",
        h.dir,
        entries(h.entries_before),
        entries(h.entries_after)
    );
    let counters = torch.and_then(|t| t.counters.as_ref());
    if let Some(c) = counters
        .filter(|c| c.fxgraph_cache_hit + c.fxgraph_cache_miss + c.fxgraph_cache_bypass == 0)
    {
        return format!(
            "warm-up on {target}: nothing compiled, but no FX graph was looked up either \
             (does the script run a torch.compile'd model?); autograd cache: {} hit, {} miss ({detail})",
            c.autograd_cache_hit, c.autograd_cache_miss
        );
    }
    if let Some(c) = counters {
        detail = format!(
            "inductor's counters: {} hit, {} miss, {} bypass; {detail}",
            c.fxgraph_cache_hit, c.fxgraph_cache_miss, c.fxgraph_cache_bypass
        );
    }
    match (h.hit, h.graphs_compiled) {
        (Some(false), Some(n)) => format!(
            "warm-up on {target}: the restored cache missed: {n} {} compiled ({detail})",
            if n == 1 { "graph" } else { "graphs" }
        ),
        _ => format!("warm-up on {target}: cache hit, nothing compiled ({detail})"),
    }
}

/// (inductor's cache dir, its FX graph cache entries or `None` without `fxgraph/`), found
/// with the warm-up's own environment and cwd; `None` when only planned.
async fn graphs(step: &Step<'_>, spec: &Spec, when: &str) -> Result<Option<(String, Option<u64>)>> {
    let mut cmd = Cmd::script(&script::WARMUP_INDUCTOR_GRAPHS, Vec::<OsString>::new())
        .timeout(Duration::from_secs(300));
    cmd.env = environment(spec);
    if let Some(dir) = &spec.cwd {
        cmd = cmd.cwd(dir);
    }
    let ran = step
        .read(
            cmd,
            format!("warm-up: count inductor's compiled graphs {when}"),
        )
        .await?;
    if ran.planned() {
        return Ok(None);
    }
    let target = step.target.name();
    if !ran.ok() {
        let what = "warm-up: counting inductor's compiled graphs";
        return Err(step.fail(ran.failure(what, Some(&target), None)));
    }
    let stdout = ran.stdout();
    let parsed = stdout.split_once('\n').and_then(|(n, dir)| {
        let dir = dir.strip_suffix('\n')?.to_string();
        match n {
            "missing" => Some((dir, None)),
            n => n.parse().ok().map(|n| (dir, Some(n))),
        }
    });
    match parsed {
        Some(p) => Ok(Some(p)),
        None => Err(step.fail(format!(
            "warm-up: unexpected output counting inductor's graphs on {target}: {stdout}"
        ))),
    }
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
    emit(step, crate::actions::events::Level::Info, message);
}

/// One warn line into the step's output.
fn warn(step: &Step<'_>, message: String) {
    emit(step, crate::actions::events::Level::Warn, message);
}

fn emit(step: &Step<'_>, level: crate::actions::events::Level, message: String) {
    step.ctx.bus.emit(crate::actions::events::Event::Log {
        step: step.ctx.step.get().map(|s| s.index),
        level,
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
            Cmd::script(&script::WARMUP_MEASURE, paths).timeout(Duration::from_secs(300)),
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
        command: ctx.bus.mask(&crate::actions::perform::shown(
            step.target,
            &req,
            cmd.script,
        )),
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
                level: crate::actions::events::Level::Warn,
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
mod tests;
