//! `runbook watch FILE`: from the first sign of trouble to a recovery plan waiting for a
//! yes. The watch file (`config.rs`) declares triggers: a number in a log below a
//! threshold for a while (`log_metric.rs`), `gpu.health` critical on a target
//! (`gpu_health.rs`), an Alertmanager webhook (`http.rs`, `alerts.rs`). When one fires,
//! the plan of its runbook is made and written (`propose.rs`), people are told
//! (`notify.rs`), and it waits: one plan per trigger and target until it is applied,
//! rejected or expired, then a cooldown (`decide.rs`, `state.rs`). Nothing is applied
//! unless the watch file allows it for that trigger and the plan carries the approvals
//! the policy asks.
//!
//! A service: it runs in the foreground and says what it does one line at a time on
//! stderr; SIGTERM (or Ctrl-C) ends it cleanly, exit 0, its state saved; a target that
//! cannot be reached is said once and looked at again at each interval; what it proposed
//! and where it is in each log survive a restart. `--once` looks at every trigger once,
//! decides what is pending, and exits (cron, tests).
//!
//! The reads of triggers run through a context of their own, as a dry-run's reads do
//! (`Step::read` in a `Mode::DryRun` context: no change can be made through it), one
//! registry of connections kept for the life of the watcher.

pub mod alerts;
pub mod config;
pub mod decide;
pub mod gpu_health;
pub mod http;
pub mod log_metric;
pub mod notify;
pub mod propose;
pub mod state;

use crate::actions::ctx::{Ctx, Mode};
use crate::actions::plan::ReachedWith;
use crate::base::cancel::{self, Cancel};
use crate::base::error::{Error, Result};
use crate::base::project::Policy;
use crate::primitives::Step;
use crate::targets::registry::RemoteSettings;
use config::{Trigger, WatchFile, When};
use log_metric::KnownGood;
use notify::{Event, Message};
use propose::{Fired, NotMade, Planner};
use state::{unix, Proposal, State, Status};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

/// How long a known-good figure is used before it is read again.
const KNOWN_GOOD_FOR: Duration = Duration::from_secs(600);

/// What `runbook watch` is started with.
pub struct Options {
    pub file: WatchFile,
    pub state_dir: PathBuf,
    pub remote: RemoteSettings,
    /// What plans record of how targets are reached, and the working directory.
    pub reached_with: ReachedWith,
    /// `runbook.toml`'s policy: plans are signed, and applied only with its approvals.
    pub policy: Option<Policy>,
    /// The author's key plans are signed with (with a policy).
    pub sign: Option<PathBuf>,
    pub once: bool,
}

/// The watcher's own `runbook apply`: its exit code and last lines.
type Applying = tokio::task::JoinHandle<std::result::Result<(i32, String), String>>;

/// The watcher's signal to stop (SIGTERM, SIGINT) came.
struct Stop;

struct Watcher {
    file: WatchFile,
    planner: Planner,
    store: state::Store,
    state: State,
    policy: Option<Policy>,
    ctx: Ctx,
    cancel: Rc<Cancel>,
    /// Keys of what was said once and still holds (a target down, a plan that fails).
    said: HashSet<String>,
    known: HashMap<String, (Option<KnownGood>, Instant)>,
    /// When each trigger is looked at next.
    next: Vec<Instant>,
    /// The watcher's own apply in progress: the proposal and the child's outcome.
    applying: Option<(String, Applying)>,
    dirty: bool,
}

/// One line of the watcher's log, on stderr, with the time: what a person or journald
/// reads.
fn say(msg: &str) {
    eprintln!(
        "{} {}",
        state::rfc3339(SystemTime::now()),
        crate::base::printable::block(msg)
    );
}

pub async fn watch(o: Options) -> Result<()> {
    let cancel = Cancel::new();
    let _signals = cancel::watch_signals(cancel.clone());
    check(&o)?;
    let store = state::Store::open(&o.state_dir, &o.file.name).map_err(Error::Watch)?;
    let state = store.load().map_err(Error::Watch)?;
    make_plans_dir(&o.file)?;
    let mut ctx = Ctx::new(
        Mode::DryRun,
        o.file.shown.clone(),
        None,
        Vec::new(),
        cancel.clone(),
        o.remote.clone(),
        None,
    );
    *ctx.state_dir.get_mut() = Some(o.state_dir.clone());
    let now = Instant::now();
    let mut w = Watcher {
        next: vec![now; o.file.triggers.len()],
        planner: Planner {
            plans: o.file.plans.clone(),
            state_dir: o.state_dir.clone(),
            remote: o.remote,
            reached_with: o.reached_with,
            sign: o.sign,
        },
        file: o.file,
        store,
        state,
        policy: o.policy,
        ctx,
        cancel: cancel.clone(),
        said: HashSet::new(),
        known: HashMap::new(),
        applying: None,
        dirty: false,
    };
    w.hello(o.once);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let alerts_wanted = w
        .file
        .triggers
        .iter()
        .any(|t| matches!(t.when, When::Alert(_)));
    let mut _listener = None;
    if alerts_wanted && !o.once {
        if let Some(listen) = &w.file.listen {
            let l = Rc::new(http::Listener::bind(listen).await.map_err(Error::Watch)?);
            say(&format!(
                "listening for Alertmanager's webhook at {}",
                l.shown()
            ));
            tokio::task::spawn_local(serve(l.clone(), tx));
            _listener = Some(l);
        }
    } else if alerts_wanted {
        say("--once: alertmanager triggers are not looked at (alerts are received only while the watcher runs)");
    }
    loop {
        if w.round(o.once).await.is_err() || o.once {
            break;
        }
        w.save()?;
        let wake = w.next.iter().min().copied().unwrap_or(now) + Duration::from_millis(10);
        tokio::select! {
            _ = tokio::time::sleep_until(wake.into()) => {}
            Some(alerts) = rx.recv() => {
                if w.alerts(alerts).await.is_err() {
                    break;
                }
            }
            _ = cancel.notified() => {}
        }
        if cancel.interrupted().is_some() {
            break;
        }
    }
    w.wait_for_apply().await;
    w.save()?;
    w.ctx.targets.close_all().await;
    if let Some(signal) = cancel.interrupted() {
        say(&format!(
            "stopped ({}); state saved in {}",
            signal.name(),
            w.store.path.display()
        ));
    }
    Ok(())
}

/// What is wrong before anything starts: a trigger whose target or runbook cannot be
/// found, `auto_apply` without a policy to check approvals against.
fn check(o: &Options) -> Result<()> {
    let registry = crate::targets::registry::Registry::new(o.remote.clone());
    for t in &o.file.triggers {
        let bad = |why: String| Error::Watch(format!("{}: trigger {}: {why}", t.at, t.name));
        crate::run::source::locate(&t.runbook).map_err(|e| bad(e.to_string()))?;
        let named: Vec<&String> = match &t.when {
            When::Log(m) => vec![&m.target],
            When::GpuHealth(g) => vec![&g.target],
            When::Alert(a) => a.targets.iter().flatten().collect(),
        };
        for target in named {
            registry.resolve(target).map_err(&bad)?;
        }
        if t.auto_apply && o.policy.is_none() {
            return Err(bad(
                "auto_apply needs a [policy] in runbook.toml: without one no approval is asked, and a plan would be applied with nobody's yes".into(),
            ));
        }
    }
    Ok(())
}

fn make_plans_dir(file: &WatchFile) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if file.plans.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&file.plans)
        .map_err(|e| {
            Error::Watch(format!(
                "cannot make the plans directory {}: {e}",
                file.plans.display()
            ))
        })
}

/// Takes the webhook's POSTs; each one's alerts go to the watcher's loop.
async fn serve(l: Rc<http::Listener>, tx: tokio::sync::mpsc::UnboundedSender<Vec<alerts::Alert>>) {
    let mut said = false;
    loop {
        match l.accept().await {
            Ok(conn) => {
                said = false;
                tokio::task::spawn_local(take(conn, tx.clone()));
            }
            Err(e) => {
                if !said {
                    say(&format!(
                        "the listener cannot take a connection: {e}; trying again"
                    ));
                    said = true;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// One webhook request: answered 200 once its alerts are queued, else with why not.
async fn take(
    mut conn: Box<dyn http::Conn>,
    tx: tokio::sync::mpsc::UnboundedSender<Vec<alerts::Alert>>,
) {
    let req = match tokio::time::timeout(http::READ_LIMIT, http::read_request(&mut conn)).await {
        Err(_) => return http::respond(&mut conn, 408, "the request took too long").await,
        Ok(Err(http::Refusal(code, why))) => return http::respond(&mut conn, code, &why).await,
        Ok(Ok(r)) => r,
    };
    if req.method != "POST" {
        return http::respond(&mut conn, 405, "POST Alertmanager's webhook payload here").await;
    }
    match alerts::parse(&req.body) {
        Ok(a) => {
            let _ = tx.send(a);
            http::respond(&mut conn, 200, "ok").await
        }
        Err(why) => {
            say(&format!("a POST to {} refused: {why}", req.path));
            http::respond(&mut conn, 400, &why).await
        }
    }
}

impl Watcher {
    fn hello(&self, once: bool) {
        let names: Vec<String> = self
            .file
            .triggers
            .iter()
            .map(|t| format!("{} ({})", t.name, t.when.kind()))
            .collect();
        say(&format!(
            "watching {}{}: {}; plans in {}; state in {}",
            self.file.shown,
            if once { " once" } else { "" },
            names.join(", "),
            self.file.plans.display(),
            self.store.path.display()
        ));
        let pending: Vec<&str> = self
            .state
            .proposals
            .iter()
            .filter(|p| p.status == Status::Pending)
            .map(|p| p.id.as_str())
            .collect();
        if !pending.is_empty() {
            say(&format!(
                "waiting for a decision, from before: {}",
                pending.join(", ")
            ));
        }
        if self.file.notify.is_empty() {
            say("no [[notify]]: proposals are only said here");
        }
    }

    /// Says `msg` unless `key` was said and still holds.
    fn once(&mut self, key: String, msg: &str) {
        if self.said.insert(key) {
            say(msg);
        }
    }

    /// `key` no longer holds: whether it had been said.
    fn over(&mut self, key: &str) -> bool {
        self.said.remove(key)
    }

    fn save(&mut self) -> Result<()> {
        if self.dirty {
            self.store.save(&mut self.state).map_err(Error::Watch)?;
            self.dirty = false;
        }
        Ok(())
    }

    /// Looks at each trigger that is due (every one with `--once`), then at the
    /// proposals waiting for a decision.
    async fn round(&mut self, once: bool) -> std::result::Result<(), Stop> {
        for i in 0..self.file.triggers.len() {
            let now = Instant::now();
            if !once && self.next[i] > now {
                continue;
            }
            self.next[i] = now + self.file.triggers[i].interval;
            self.look(i).await?;
            self.save().map_err(|e| {
                say(&e.to_string());
                Stop
            })?;
        }
        self.housekeeping().await
    }

    /// One look at trigger `i`.
    async fn look(&mut self, i: usize) -> std::result::Result<(), Stop> {
        let t = self.file.triggers[i].clone();
        let target_name = match &t.when {
            When::Log(m) => m.target.clone(),
            When::GpuHealth(g) => g.target.clone(),
            When::Alert(_) => return Ok(()),
        };
        let down = format!("down:{}", t.name);
        let target = match self.ctx.targets.resolve(&target_name) {
            Ok(t) => t,
            Err(e) => {
                self.once(down, &format!("trigger {}: {e}", t.name));
                return Ok(());
            }
        };
        let step = Step {
            ctx: &self.ctx,
            target: &target,
            at: t.at.clone(),
        };
        let mut noticed = None;
        let looked = match &t.when {
            When::Log(m) => {
                let mut follow = self.state.follows.get(&t.name).cloned().unwrap_or_default();
                let before = follow.clone();
                let mut known = match self.known.get(&t.name) {
                    Some((k, at)) if at.elapsed() < KNOWN_GOOD_FOR => k.clone(),
                    _ => None,
                };
                let had_known = known.clone();
                let mut seen = log_metric::Seen::default();
                let r = log_metric::look(
                    &step,
                    m,
                    &mut follow,
                    &mut known,
                    unix(SystemTime::now()),
                    &mut seen,
                )
                .await;
                if known != had_known {
                    self.known.insert(t.name.clone(), (known, Instant::now()));
                }
                if follow != before {
                    self.state.follows.insert(t.name.clone(), follow);
                    self.dirty = true;
                }
                noticed = Some(seen);
                r
            }
            When::GpuHealth(g) => gpu_health::look(&step, g).await,
            When::Alert(_) => Ok(None),
        };
        drop(step);
        if let (When::Log(m), Some(seen), true) = (&t.when, noticed, looked.is_ok()) {
            self.seen(&t, m, &target_name, seen);
        }
        match looked {
            Ok(fired) => {
                if self.over(&down) {
                    say(&format!("trigger {}: {target_name} answers again", t.name));
                }
                if let Some(why) = fired {
                    self.fire(i, &target_name, Vec::new(), why).await?;
                }
                Ok(())
            }
            Err(crate::primitives::Error::Stop(_)) => Err(Stop),
            Err(e) => {
                self.once(
                    down,
                    &format!(
                        "trigger {}: cannot look at {target_name}: {e}; looked at again every {} (said once)",
                        t.name,
                        humantime::format_duration(t.interval)
                    ),
                );
                Ok(())
            }
        }
    }

    /// What a log look noticed, said (once for what lasts).
    fn seen(&mut self, t: &Trigger, m: &config::LogMetric, target: &str, seen: log_metric::Seen) {
        let missing = format!("missing:{}", t.name);
        if seen.missing {
            self.once(
                missing,
                &format!(
                    "trigger {}: {} is not on {target} (yet): it is looked for at each look",
                    t.name, m.file
                ),
            );
        } else if self.over(&missing) {
            say(&format!(
                "trigger {}: {} is on {target} now",
                t.name, m.file
            ));
        }
        if seen.rotated {
            say(&format!(
                "trigger {}: {} on {target} was rotated or truncated: read from its start",
                t.name, m.file
            ));
        }
        let unjudged = format!("unjudged:{}", t.name);
        match seen.unjudged {
            Some(why) => self.once(
                unjudged,
                &format!("trigger {}: values are read but not judged: {why}", t.name),
            ),
            None => {
                self.over(&unjudged);
            }
        }
        if let Some(text) = seen.not_a_number {
            self.once(
                format!("nan:{}", t.name),
                &format!(
                    "trigger {}: the pattern's group matched {text:?}, which is no number: such lines are passed over",
                    t.name
                ),
            );
        }
    }

    /// Alerts the webhook received.
    async fn alerts(&mut self, got: Vec<alerts::Alert>) -> std::result::Result<(), Stop> {
        let inventory = self.planner.remote.inventory.clone();
        let known = |name: &str| inventory.as_ref().is_some_and(|i| i.host(name).is_some());
        let (incidents, refused) = alerts::incidents(&self.file.triggers, &got, &known);
        for r in refused {
            self.once(format!("alert:{r}"), &r);
        }
        for inc in incidents {
            self.fire(inc.trigger, &inc.target, inc.sets, inc.why)
                .await?;
        }
        self.save().map_err(|e| {
            say(&e.to_string());
            Stop
        })
    }

    /// Trigger `i` fired on `target`: a plan, unless one waits already or it cools down.
    async fn fire(
        &mut self,
        i: usize,
        target: &str,
        sets: Vec<(String, String)>,
        why: String,
    ) -> std::result::Result<(), Stop> {
        let t = self.file.triggers[i].clone();
        let now = SystemTime::now();
        if self.state.pending(&t.name, target).is_some() {
            return Ok(());
        }
        if let Some(p) = self
            .state
            .cooling(&t.name, target, t.cooldown.as_secs(), unix(now))
        {
            let until = p
                .closed_unix
                .unwrap_or(0)
                .saturating_add(t.cooldown.as_secs());
            let (id, status) = (p.id.clone(), p.status.word());
            self.once(
                format!("cool:{id}"),
                &format!(
                    "trigger {} on {target}: {why}; no plan while it cools down (until {}, after {id} was {status})",
                    t.name,
                    state::rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(until))
                ),
            );
            return Ok(());
        }
        say(&format!(
            "trigger {} on {target}: {why}; planning {}",
            t.name, t.runbook
        ));
        let fired = Fired {
            trigger: &t,
            target,
            sets,
            why,
        };
        let failing = format!("plan:{}:{target}", t.name);
        let (proposal, message) = match propose::propose(&self.planner, fired, now).await {
            Ok(made) => made,
            Err(NotMade::Interrupted) => return Err(Stop),
            Err(NotMade::Failed(e)) => {
                self.once(
                    failing,
                    &format!(
                        "trigger {} on {target}: no plan: {e}; tried again when it fires again (said once)",
                        t.name
                    ),
                );
                return Ok(());
            }
        };
        self.over(&failing);
        say(&format!(
            "proposed {}: {} (Markdown: {}); waiting for a decision: {}",
            proposal.id,
            proposal.plan.display(),
            proposal.markdown.display(),
            message.approve
        ));
        self.state.proposals.push(proposal);
        self.dirty = true;
        // Saved before anyone is told: a crash now must not make a second plan.
        self.save().map_err(|e| {
            say(&e.to_string());
            Stop
        })?;
        let last = self.state.proposals.len() - 1;
        self.tell(last, &message).await;
        Ok(())
    }

    /// Sends the proposal's notification to the URLs that have not confirmed it.
    async fn tell(&mut self, idx: usize, message: &Message) {
        if self.file.notify.is_empty() {
            return;
        }
        let done = self.state.proposals[idx].notified.clone();
        let (confirmed, failed) = notify::send(&self.file.notify, message, &done).await;
        let id = self.state.proposals[idx].id.clone();
        if !confirmed.is_empty() {
            say(&format!("{id}: told {}", confirmed.join(", ")));
            self.state.proposals[idx].notified.extend(confirmed);
            self.dirty = true;
        }
        for e in failed {
            self.once(
                format!("notify:{id}:{e}"),
                &format!("{id}: cannot notify: {e}; sent again at each look until it is taken"),
            );
        }
    }

    /// The proposals waiting for a decision: closed when decided, expired; applied
    /// where allowed and approved; told again where a notification was not taken.
    async fn housekeeping(&mut self) -> std::result::Result<(), Stop> {
        self.finish_apply().await;
        let pending: Vec<usize> = (0..self.state.proposals.len())
            .filter(|&i| self.state.proposals[i].status == Status::Pending)
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        let runs = match crate::run::state::list_runs(&self.planner.state_dir) {
            Ok(r) => r,
            Err(e) => {
                self.once("runs".into(), &format!("cannot read the run records: {e}"));
                Vec::new()
            }
        };
        let now = unix(SystemTime::now());
        for i in pending {
            let p = self.state.proposals[i].clone();
            let trigger = self
                .file
                .triggers
                .iter()
                .find(|t| t.name == p.trigger)
                .cloned();
            let expire = trigger
                .as_ref()
                .map_or(config::DEFAULT_EXPIRE, |t| t.expire)
                .as_secs();
            if self.applying.as_ref().is_some_and(|(id, _)| *id == p.id) {
                continue;
            }
            if let Some((status, why)) = decide::decided(&p, &runs, now, expire) {
                self.close(i, status, why);
                continue;
            }
            if let (Some(t), Some(policy)) = (&trigger, &self.policy) {
                if t.auto_apply && self.applying.is_none() && self.cancel.interrupted().is_none() {
                    self.maybe_apply(i, &policy.clone());
                }
            }
            let told = &self.state.proposals[i].notified;
            if self.file.notify.iter().any(|n| !told.contains(&n.url.text)) {
                let markdown = std::fs::read_to_string(&p.markdown).unwrap_or_default();
                let m = propose::message(
                    &p,
                    Event::Proposed,
                    p.summary.clone(),
                    markdown,
                    &self.planner.reached_with,
                );
                self.tell(i, &m).await;
            }
        }
        if self.cancel.interrupted().is_some() {
            return Err(Stop);
        }
        Ok(())
    }

    fn close(&mut self, i: usize, status: Status, why: String) {
        let p = &mut self.state.proposals[i];
        p.status = status;
        p.closed_unix = Some(unix(SystemTime::now()));
        p.outcome = Some(why.clone());
        self.dirty = true;
        say(&format!("{} {}: {why}", p.id, status.word()));
    }

    /// Starts the watcher's own apply of proposal `i` if it carries its approvals.
    fn maybe_apply(&mut self, i: usize, policy: &Policy) {
        let p = self.state.proposals[i].clone();
        let inventory = self.planner.remote.inventory.clone();
        match decide::approvals(&p, policy, inventory.as_deref()) {
            Ok(Some(missing)) => self.once(
                format!("approvals:{}:{missing}", p.id),
                &format!("{}: not applied yet: it lacks {missing}", p.id),
            ),
            Err(e) => self.once(format!("approvals:{}", p.id), &format!("{}: {e}", p.id)),
            Ok(None) => {
                say(&format!(
                    "{}: it carries the approvals the policy asks, and auto_apply allows it: runbook apply {}",
                    p.id,
                    p.plan.display()
                ));
                let (plan, dir, cancel) = (
                    p.plan.clone(),
                    self.planner.state_dir.clone(),
                    self.cancel.clone(),
                );
                let since = cancel.count();
                let task = tokio::task::spawn_local(async move {
                    decide::apply(&plan, &dir, &cancel, since).await
                });
                self.applying = Some((p.id.clone(), task));
            }
        }
    }

    /// At the end (`--once`, or a signal): waits for the watcher's own apply, if one
    /// runs, and records how it ended. A signal, before or while it waits, was passed on
    /// to the apply (`decide::apply`); the wait is then said.
    async fn wait_for_apply(&mut self) {
        let Some((id, mut task)) = self.applying.take() else {
            return;
        };
        let mut said = false;
        let done = loop {
            if self.cancel.interrupted().is_some() && !said {
                said = true;
                say(&format!(
                    "stopping: waiting for the apply of {id}, which was told to stop (a second signal stops it harder)"
                ));
                // The signal was answered: the watcher is stopping by itself, waiting for
                // its apply to stop (a service manager kills what is left once the watcher
                // is gone). The watchdog's backstop stays for a second signal.
                crate::run::watchdog::disarm();
            }
            tokio::select! {
                r = &mut task => break r.unwrap_or_else(|e| Err(e.to_string())),
                _ = self.cancel.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        };
        self.applied(&id, done).await;
    }

    /// The watcher's apply, if it ended: its outcome recorded.
    async fn finish_apply(&mut self) {
        let done = self
            .applying
            .as_ref()
            .is_some_and(|(_, task)| task.is_finished());
        if !done {
            return;
        }
        let (id, task) = self.applying.take().expect("checked above");
        let result = task.await.unwrap_or_else(|e| Err(e.to_string()));
        self.applied(&id, result).await;
    }

    /// Records how the watcher's apply of `id` ended, and tells people.
    async fn applied(&mut self, id: &str, result: std::result::Result<(i32, String), String>) {
        let Some(i) = self.state.proposals.iter().position(|p| p.id == id) else {
            return;
        };
        let (status, why, event) = match result {
            Ok((0, _)) => {
                let sha = &self.state.proposals[i].sha256;
                let run = crate::run::state::list_runs(&self.planner.state_dir)
                    .unwrap_or_default()
                    .into_iter()
                    .find(|r| r.plan.as_deref() == Some(sha.as_str()))
                    .map_or(String::new(), |r| format!(" in run {}", r.id));
                (
                    Status::Applied,
                    format!("applied by the watcher (runbook apply{run})"),
                    Event::Applied,
                )
            }
            Ok((code, said)) => (
                Status::Failed,
                format!("the watcher's runbook apply ended with exit {code}:\n{said}"),
                Event::ApplyFailed,
            ),
            Err(e) => (
                Status::Failed,
                format!("the watcher could not apply it: {e}"),
                Event::ApplyFailed,
            ),
        };
        self.close(i, status, why.clone());
        let p: Proposal = self.state.proposals[i].clone();
        let summary = format!("{}: {why}", p.id);
        let m = propose::message(
            &p,
            event,
            summary,
            String::new(),
            &self.planner.reached_with,
        );
        if !self.file.notify.is_empty() {
            let (_, failed) = notify::send(&self.file.notify, &m, &[]).await;
            for e in failed {
                say(&format!("{}: cannot notify: {e}", p.id));
            }
        }
    }
}
