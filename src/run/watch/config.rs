//! The watch file: what `runbook watch` looks for, and what it proposes when it finds it.
//! TOML, read into typed values here, once, at start: every mistake is named with the
//! file and its line (a value's own, where it has one; the table's, for a key missing
//! from it), before anything is contacted.
//!
//! ```toml
//! [watch]
//! plans = "plans"                  # where plans are written (relative to this file)
//! interval = "30s"                 # how often triggers are looked at (a trigger's own wins)
//! listen = "127.0.0.1:9095"        # Alertmanager's webhook receiver: loopback, or unix:PATH
//!
//! [[notify]]
//! url = "http://127.0.0.1:8080/runbook"
//! format = "json"                  # or "slack": {"text": …}
//!
//! [[trigger]]
//! name = "slow-training"
//! kind = "log"                     # log | gpu_health | alertmanager
//! target = "gpu1"
//! file = "/var/log/train.log"
//! pattern = '([0-9.]+) Ktok/s'     # one capture group: the number
//! below = "0.8 * known_good"       # or a number
//! for = "10m"
//! runbook = "clean-reset"
//! params = { host = "gpu1", venv = "/opt/venv" }
//! ```

use crate::base::project::HttpUrl;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// How often triggers are looked at when neither the file nor the trigger says.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);
/// How long a proposal waits for a decision before it expires.
pub const DEFAULT_EXPIRE: Duration = Duration::from_secs(24 * 3600);
/// How long after a proposal is closed no new one is made for its trigger and target.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(3600);
/// The known-good fingerprint a `known_good` threshold reads, as clean-reset saves it.
pub const DEFAULT_KNOWN_GOOD: &str = "clean-reset";

/// A watch file, read and checked.
#[derive(Debug)]
pub struct WatchFile {
    /// The file, as given (for messages).
    pub shown: String,
    /// Its state's name in the state dir (`[watch] name`, else the file's stem).
    pub name: String,
    /// Where plans are written: absolute.
    pub plans: PathBuf,
    pub listen: Option<Listen>,
    pub notify: Vec<Notify>,
    pub triggers: Vec<Trigger>,
}

/// Where Alertmanager's webhook is received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A loopback address: anything else on the network could make plans.
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(a) => write!(f, "http://{a}/"),
            Listen::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Notify {
    pub url: HttpUrl,
    pub format: Format,
}

/// The body a notification is POSTed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `{"event", "summary", "markdown", "plan", …}` (docs/watch.md).
    Json,
    /// `{"text": …}`, which Slack's incoming webhooks and their look-alikes take.
    Slack,
}

#[derive(Debug, Clone)]
pub struct Trigger {
    pub name: String,
    /// `FILE:LINE` of its table, for messages.
    pub at: String,
    pub when: When,
    /// The runbook to plan, found as `runbook plan` finds it (from the working directory).
    pub runbook: String,
    /// Its params, as `--set KEY=VALUE` gives them.
    pub params: Vec<(String, String)>,
    pub interval: Duration,
    pub cooldown: Duration,
    pub expire: Duration,
    /// Apply a plan by itself once it carries the approvals the policy asks.
    pub auto_apply: bool,
}

/// What sets a trigger off.
#[derive(Debug, Clone)]
pub enum When {
    Log(LogMetric),
    GpuHealth(GpuHealth),
    Alert(Alert),
}

impl When {
    pub fn kind(&self) -> &'static str {
        match self {
            When::Log(_) => "log",
            When::GpuHealth(_) => "gpu_health",
            When::Alert(_) => "alertmanager",
        }
    }
}

/// `kind = "log"`: a number in a log, below a threshold for a while.
#[derive(Debug, Clone)]
pub struct LogMetric {
    pub target: String,
    pub file: String,
    /// One capture group: the number.
    pub pattern: regex::Regex,
    pub below: Threshold,
    /// How long every value must stay below.
    pub hold: Duration,
    /// The known-good fingerprint's name (`below = "F * known_good"`).
    pub known_good: String,
    /// The artifact store its compile cache is in (default: the state dir's).
    pub store: Option<String>,
}

/// `below = 12.5`, or `"0.8 * known_good"`: a fraction of the throughput the known-good
/// fingerprint's compile cache was captured with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    Value(f64),
    KnownGood(f64),
}

impl std::fmt::Display for Threshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Threshold::Value(v) => write!(f, "{v}"),
            Threshold::KnownGood(k) => write!(f, "{k} * known_good"),
        }
    }
}

/// `kind = "gpu_health"`: `gpu.health` on a target says critical.
#[derive(Debug, Clone)]
pub struct GpuHealth {
    pub target: String,
    /// Only Xids this recent count (default: since boot).
    pub since: Option<Duration>,
}

/// `kind = "alertmanager"`: a firing alert whose labels match.
#[derive(Debug, Clone)]
pub struct Alert {
    /// Labels the alert must carry, with these values.
    pub matchers: BTreeMap<String, String>,
    /// The label that names the target.
    pub target_label: String,
    /// The targets an alert may name; `None`: the inventory's hosts.
    pub targets: Option<Vec<String>>,
    /// param → the label whose value it takes.
    pub label_params: Vec<(String, String)>,
}

// ------------------------------------------------------------------ as written

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    watch: Option<RawWatch>,
    #[serde(default)]
    notify: Vec<RawNotify>,
    #[serde(default)]
    trigger: Vec<Spanned<RawTrigger>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWatch {
    name: Option<Name>,
    plans: Option<String>,
    interval: Option<Dur>,
    listen: Option<Listen>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNotify {
    url: HttpUrl,
    format: Option<Format>,
}

/// One `[[trigger]]` as written: one flat table whatever its kind (as `[[sink]]` is in
/// runbook.toml), so a wrong key is named at its own line; the keys of the other kinds
/// are refused after, each at its line.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTrigger {
    name: Option<Spanned<Name>>,
    kind: Option<Spanned<Kind>>,
    runbook: Option<Spanned<String>>,
    #[serde(default)]
    params: BTreeMap<String, Spanned<ParamValue>>,
    interval: Option<Dur>,
    cooldown: Option<Dur>,
    expire: Option<Dur>,
    #[serde(default)]
    auto_apply: bool,
    // log, gpu_health
    target: Option<Spanned<String>>,
    // log
    file: Option<Spanned<String>>,
    pattern: Option<Spanned<Pattern>>,
    below: Option<Spanned<Threshold>>,
    #[serde(rename = "for")]
    hold: Option<Spanned<Dur>>,
    known_good: Option<Spanned<String>>,
    store: Option<Spanned<String>>,
    // gpu_health
    since: Option<Spanned<Dur>>,
    // alertmanager
    #[serde(rename = "match")]
    matchers: Option<Spanned<BTreeMap<String, String>>>,
    target_label: Option<Spanned<String>>,
    targets: Option<Spanned<Vec<String>>>,
    label_params: Option<Spanned<BTreeMap<String, String>>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Log,
    GpuHealth,
    Alertmanager,
}

/// A trigger's or the watch's name: it names files (plans, state), so it is a plain word.
struct Name(String);

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            return Err(serde::de::Error::custom(format!(
                "name {:?}: letters, digits, '-' and '_' only (it names files), at most 64",
                crate::base::printable::line(&s)
            )));
        }
        Ok(Name(s))
    }
}

struct Dur(Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let t = crate::base::duration::parse(&s).map_err(serde::de::Error::custom)?;
        if t.is_zero() {
            return Err(serde::de::Error::custom(format!(
                "'{s}': must be more than 0"
            )));
        }
        Ok(Dur(t))
    }
}

struct Pattern(regex::Regex);

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let re = regex::Regex::new(&s)
            .map_err(|e| serde::de::Error::custom(format!("pattern is not a regex: {e}")))?;
        // Group 0 is the whole match: one more is the number.
        if re.captures_len() != 2 {
            return Err(serde::de::Error::custom(format!(
                "pattern {s:?} has {} capture groups; it needs exactly one, around the number (e.g. '([0-9.]+) Ktok/s'; (?:…) groups without capturing)",
                re.captures_len() - 1
            )));
        }
        Ok(Pattern(re))
    }
}

impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Given {
            Int(i64),
            Float(f64),
            Text(String),
        }
        let bad = |what: &str| {
            serde::de::Error::custom(format!(
                "below = {what}: give a number (below = 12.5) or a fraction of the known-good figure (below = \"0.8 * known_good\")"
            ))
        };
        let finite = |v: f64, what: &str| -> Result<f64, D::Error> {
            if v.is_finite() && v >= 0.0 {
                Ok(v)
            } else {
                Err(bad(what))
            }
        };
        match Given::deserialize(d)? {
            Given::Int(i) => Ok(Threshold::Value(finite(i as f64, &i.to_string())?)),
            Given::Float(f) => Ok(Threshold::Value(finite(f, &f.to_string())?)),
            Given::Text(t) => {
                let shown = format!("{:?}", crate::base::printable::line(&t));
                let words: Vec<&str> = t.split('*').map(str::trim).collect();
                match words.as_slice() {
                    ["known_good"] => Ok(Threshold::KnownGood(1.0)),
                    [k, "known_good"] | ["known_good", k] => {
                        let k: f64 = k.parse().map_err(|_| bad(&shown))?;
                        Ok(Threshold::KnownGood(finite(k, &shown)?))
                    }
                    [v] => Ok(Threshold::Value(finite(
                        v.parse().map_err(|_| bad(&shown))?,
                        &shown,
                    )?)),
                    _ => Err(bad(&shown)),
                }
            }
        }
    }
}

impl<'de> Deserialize<'de> for Listen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if let Some(path) = s.strip_prefix("unix:") {
            if !path.starts_with('/') {
                return Err(serde::de::Error::custom(format!(
                    "listen = {s:?}: a unix socket is unix:/ABSOLUTE/PATH"
                )));
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        let addr: SocketAddr = s.parse().map_err(|_| {
            serde::de::Error::custom(format!(
                "listen = {s:?}: give 127.0.0.1:PORT (or [::1]:PORT), or unix:/PATH"
            ))
        })?;
        if !addr.ip().is_loopback() {
            return Err(serde::de::Error::custom(format!(
                "listen = {s:?}: only a loopback address (127.0.0.1, ::1): whatever reaches the listener can make plans; put a proxy that checks who calls in front of it"
            )));
        }
        Ok(Listen::Tcp(addr))
    }
}

/// A param's value: what `--set` could give, as its text.
struct ParamValue(String);

impl<'de> Deserialize<'de> for ParamValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match toml::Value::deserialize(d)? {
            toml::Value::String(s) => Ok(ParamValue(s)),
            toml::Value::Integer(i) => Ok(ParamValue(i.to_string())),
            toml::Value::Float(f) => Ok(ParamValue(f.to_string())),
            toml::Value::Boolean(b) => Ok(ParamValue(b.to_string())),
            other => Err(serde::de::Error::custom(format!(
                "params: a value is a string, a number or true/false (as --set gives it), not {}",
                other.type_str()
            ))),
        }
    }
}

// ------------------------------------------------------------------ reading

/// Reads and checks `path`; an error names the file and the line.
pub fn read(path: &Path) -> Result<WatchFile, String> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read watch file {shown}: {e}"))?;
    let line = |at: usize| text[..at.min(text.len())].matches('\n').count() + 1;
    let raw: Raw = toml::from_str(&text).map_err(|e| {
        let at = e
            .span()
            .map_or(String::new(), |s| format!(":{}", line(s.start)));
        format!("{shown}{at}: {}", e.message().trim())
    })?;
    let dir = std::fs::canonicalize(path)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."));
    let watch = raw.watch.unwrap_or(RawWatch {
        name: None,
        plans: None,
        interval: None,
        listen: None,
    });
    let name = match watch.name {
        Some(n) => n.0,
        None => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .filter(|s| {
                s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            })
            .ok_or_else(|| {
                format!("{shown}: its name cannot name the state file: give [watch] name = \"…\"")
            })?,
    };
    let plans = dir.join(watch.plans.as_deref().unwrap_or("plans"));
    let interval = watch.interval.map_or(DEFAULT_INTERVAL, |d| d.0);
    let notify = raw
        .notify
        .into_iter()
        .map(|n| Notify {
            url: n.url,
            format: n.format.unwrap_or(Format::Json),
        })
        .collect();
    let mut triggers: Vec<Trigger> = Vec::new();
    for t in raw.trigger {
        let at_line = line(t.span().start);
        let trigger = trigger(t.into_inner(), interval, &|s| line(s))
            .map_err(|(l, why)| format!("{shown}:{}: {why}", l.unwrap_or(at_line)))?;
        let trigger = Trigger {
            at: format!("{shown}:{at_line}"),
            ..trigger
        };
        if triggers.iter().any(|o| o.name == trigger.name) {
            return Err(format!(
                "{shown}:{at_line}: a second trigger named {:?} (names tell proposals apart)",
                trigger.name
            ));
        }
        triggers.push(trigger);
    }
    if triggers.is_empty() {
        return Err(format!(
            "{shown}: no [[trigger]]: nothing to watch (docs/watch.md)"
        ));
    }
    let alerts = triggers.iter().any(|t| matches!(t.when, When::Alert(_)));
    if alerts && watch.listen.is_none() {
        return Err(format!(
            "{shown}: an alertmanager trigger needs [watch] listen = \"127.0.0.1:PORT\" (or unix:/PATH), where Alertmanager's webhook_config sends"
        ));
    }
    Ok(WatchFile {
        shown,
        name,
        plans,
        listen: watch.listen,
        notify,
        triggers,
    })
}

type Bad = (Option<usize>, String);

/// A kind-specific key: its name, where it is (when given), the kinds that take it.
type KeyOfKinds<'a> = (&'a str, Option<std::ops::Range<usize>>, &'a [Kind]);

/// One trigger, checked: an error with the line of what is wrong (`None`: the table's).
fn trigger(
    t: RawTrigger,
    interval: Duration,
    line: &dyn Fn(usize) -> usize,
) -> Result<Trigger, Bad> {
    let at = |s: std::ops::Range<usize>| Some(line(s.start));
    let missing = |key: &str, why: &str| (None, format!("this trigger needs `{key}` ({why})"));
    let name = t
        .name
        .ok_or_else(|| missing("name", "it names its plans and its state"))?
        .into_inner()
        .0;
    let kind = t
        .kind
        .ok_or_else(|| missing("kind", "log, gpu_health or alertmanager"))?;
    let kind_word = match *kind.get_ref() {
        Kind::Log => "log",
        Kind::GpuHealth => "gpu_health",
        Kind::Alertmanager => "alertmanager",
    };
    let runbook = t
        .runbook
        .ok_or_else(|| missing("runbook", "the runbook to plan when it fires"))?;
    if runbook.get_ref().trim().is_empty() {
        return Err((at(runbook.span()), "runbook = \"\": name a runbook".into()));
    }
    let mut params = Vec::new();
    for (key, value) in t.params {
        if key.is_empty() || key.contains(char::is_control) {
            return Err((
                at(value.span()),
                format!("params: {key:?} is no param name"),
            ));
        }
        let text = value.get_ref().0.clone();
        if text.contains(|c: char| c.is_control() && c != '\t') {
            return Err((
                at(value.span()),
                format!("params: {key}: a control character in the value"),
            ));
        }
        params.push((key, text));
    }
    // Keys of another kind: named at their own line.
    let others: [KeyOfKinds; 12] = [
        (
            "target",
            t.target.as_ref().map(|s| s.span()),
            &[Kind::Log, Kind::GpuHealth],
        ),
        ("file", t.file.as_ref().map(|s| s.span()), &[Kind::Log]),
        (
            "pattern",
            t.pattern.as_ref().map(|s| s.span()),
            &[Kind::Log],
        ),
        ("below", t.below.as_ref().map(|s| s.span()), &[Kind::Log]),
        ("for", t.hold.as_ref().map(|s| s.span()), &[Kind::Log]),
        (
            "known_good",
            t.known_good.as_ref().map(|s| s.span()),
            &[Kind::Log],
        ),
        ("store", t.store.as_ref().map(|s| s.span()), &[Kind::Log]),
        (
            "since",
            t.since.as_ref().map(|s| s.span()),
            &[Kind::GpuHealth],
        ),
        (
            "match",
            t.matchers.as_ref().map(|s| s.span()),
            &[Kind::Alertmanager],
        ),
        (
            "target_label",
            t.target_label.as_ref().map(|s| s.span()),
            &[Kind::Alertmanager],
        ),
        (
            "targets",
            t.targets.as_ref().map(|s| s.span()),
            &[Kind::Alertmanager],
        ),
        (
            "label_params",
            t.label_params.as_ref().map(|s| s.span()),
            &[Kind::Alertmanager],
        ),
    ];
    for (key, span, kinds) in others {
        if let Some(span) = span {
            if !kinds.contains(kind.get_ref()) {
                return Err((at(span), format!("a {kind_word} trigger takes no `{key}`")));
            }
        }
    }
    let target = |t: Option<Spanned<String>>| -> Result<String, Bad> {
        let t = t.ok_or_else(|| {
            missing(
                "target",
                "where to look: an inventory name, user@host or local",
            )
        })?;
        if t.get_ref().trim().is_empty() || t.get_ref().contains(char::is_control) {
            return Err((at(t.span()), "target: give a target's name".into()));
        }
        Ok(t.into_inner())
    };
    let when = match kind.into_inner() {
        Kind::Log => {
            let file = t
                .file
                .ok_or_else(|| missing("file", "the log to follow on the target"))?;
            if !file.get_ref().starts_with('/') {
                return Err((
                    at(file.span()),
                    format!(
                        "file = {:?}: an absolute path on the target",
                        crate::base::printable::line(file.get_ref())
                    ),
                ));
            }
            let known_good = match t.known_good {
                Some(k) => {
                    crate::primitives::fingerprint::check_name(k.get_ref())
                        .map_err(|e| (at(k.span()), format!("known_good: {e}")))?;
                    k.into_inner()
                }
                None => DEFAULT_KNOWN_GOOD.to_string(),
            };
            When::Log(LogMetric {
                target: target(t.target)?,
                file: file.into_inner(),
                pattern: t
                    .pattern
                    .ok_or_else(|| {
                        missing("pattern", "a regex whose one capture group is the number")
                    })?
                    .into_inner()
                    .0,
                below: t
                    .below
                    .ok_or_else(|| missing("below", "a number, or \"0.8 * known_good\""))?
                    .into_inner(),
                hold: t
                    .hold
                    .ok_or_else(|| {
                        missing("for", "how long the number must stay below, e.g. \"10m\"")
                    })?
                    .into_inner()
                    .0,
                known_good,
                store: t.store.map(Spanned::into_inner),
            })
        }
        Kind::GpuHealth => When::GpuHealth(GpuHealth {
            target: target(t.target)?,
            since: t.since.map(|s| s.into_inner().0),
        }),
        Kind::Alertmanager => {
            let label = t.target_label.ok_or_else(|| {
                missing(
                    "target_label",
                    "the alert label that names the target, e.g. \"instance\"",
                )
            })?;
            let targets = match t.targets {
                Some(list) if list.get_ref().is_empty() => {
                    return Err((
                        at(list.span()),
                        "targets = []: no alert could name a target".into(),
                    ))
                }
                other => other.map(Spanned::into_inner),
            };
            When::Alert(Alert {
                matchers: t.matchers.map(Spanned::into_inner).unwrap_or_default(),
                target_label: label.into_inner(),
                targets,
                label_params: t
                    .label_params
                    .map(Spanned::into_inner)
                    .unwrap_or_default()
                    .into_iter()
                    .collect(),
            })
        }
    };
    Ok(Trigger {
        name,
        at: String::new(),
        when,
        runbook: runbook.into_inner(),
        params,
        interval: t.interval.map_or(interval, |d| d.0),
        cooldown: t.cooldown.map_or(DEFAULT_COOLDOWN, |d| d.0),
        expire: t.expire.map_or(DEFAULT_EXPIRE, |d| d.0),
        auto_apply: t.auto_apply,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> Result<WatchFile, String> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.toml");
        std::fs::write(&p, text).unwrap();
        read(&p)
    }

    const FULL: &str = r#"[watch]
plans = "out"
interval = "5s"
listen = "unix:/run/runbook/watch.sock"

[[notify]]
url = "http://127.0.0.1:8080/hook"
format = "slack"

[[trigger]]
name = "slow"
kind = "log"
target = "gpu1"
file = "/var/log/train.log"
pattern = '([0-9.]+) Ktok/s'
below = "0.8 * known_good"
for = "10m"
runbook = "clean-reset"
params = { host = "gpu1", ct = 200, fast = true }
cooldown = "2h"

[[trigger]]
name = "gpu"
kind = "gpu_health"
target = "gpu1"
since = "1h"
interval = "5m"
runbook = "gpu-health"
auto_apply = true

[[trigger]]
name = "am"
kind = "alertmanager"
match = { alertname = "TrainingSlow" }
target_label = "instance"
targets = ["gpu1", "gpu2"]
label_params = { host = "instance" }
runbook = "clean-reset"
"#;

    #[test]
    fn reads_every_kind() {
        let w = read_text(FULL).unwrap();
        assert_eq!(w.name, "w");
        assert!(w.plans.ends_with("out") && w.plans.is_absolute());
        assert_eq!(
            w.listen,
            Some(Listen::Unix("/run/runbook/watch.sock".into()))
        );
        assert_eq!(w.notify[0].format, Format::Slack);
        let [slow, gpu, am] = &w.triggers[..] else {
            panic!()
        };
        let When::Log(m) = &slow.when else { panic!() };
        assert_eq!(m.below, Threshold::KnownGood(0.8));
        assert_eq!(m.hold, Duration::from_secs(600));
        assert_eq!(m.known_good, "clean-reset");
        assert_eq!(slow.interval, Duration::from_secs(5));
        assert_eq!(slow.cooldown, Duration::from_secs(7200));
        assert_eq!(slow.expire, DEFAULT_EXPIRE);
        assert!(slow.at.ends_with("w.toml:10"), "{}", slow.at);
        assert_eq!(
            slow.params,
            [
                ("ct".into(), "200".into()),
                ("fast".into(), "true".into()),
                ("host".into(), "gpu1".into())
            ]
        );
        let When::GpuHealth(g) = &gpu.when else {
            panic!()
        };
        assert_eq!(g.since, Some(Duration::from_secs(3600)));
        assert_eq!(gpu.interval, Duration::from_secs(300));
        assert!(gpu.auto_apply && !slow.auto_apply);
        let When::Alert(a) = &am.when else { panic!() };
        assert_eq!(
            a.targets.as_deref(),
            Some(&["gpu1".to_string(), "gpu2".to_string()][..])
        );
        assert_eq!(
            a.label_params,
            [("host".to_string(), "instance".to_string())]
        );
    }

    #[test]
    fn thresholds() {
        let t = |v: &str| -> Result<Threshold, String> {
            #[derive(Deserialize)]
            struct T {
                below: Threshold,
            }
            toml::from_str::<T>(&format!("below = {v}"))
                .map(|t| t.below)
                .map_err(|e| e.message().to_string())
        };
        assert_eq!(t("12").unwrap(), Threshold::Value(12.0));
        assert_eq!(t("12.5").unwrap(), Threshold::Value(12.5));
        assert_eq!(t("\"7\"").unwrap(), Threshold::Value(7.0));
        assert_eq!(t("\"known_good\"").unwrap(), Threshold::KnownGood(1.0));
        assert_eq!(t("\"0.8*known_good\"").unwrap(), Threshold::KnownGood(0.8));
        assert_eq!(
            t("\"known_good * 0.5\"").unwrap(),
            Threshold::KnownGood(0.5)
        );
        for bad in [
            "-1",
            "\"0.8 * known\"",
            "\"x\"",
            "\"1 * 2 * known_good\"",
            "nan",
        ] {
            assert!(t(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn each_mistake_is_named_at_its_line() {
        let base =
            "[[trigger]]\nname = \"g\"\nkind = \"gpu_health\"\ntarget = \"h\"\nrunbook = \"r\"\n";
        let cases = [
            (format!("{base}interval = \"0s\"\n"), ":6:", "more than 0"),
            (format!("{base}for = \"1m\"\n"), ":6:", "takes no `for`"),
            (format!("{base}colour = 1\n"), ":6:", "colour"),
            ("[[trigger]]\nname = \"a b\"\n".into(), ":2:", "letters, digits"),
            ("[[trigger]]\nkind = \"log\"\n".into(), ":1:", "needs `name`"),
            (format!("{base}\n[[trigger]]\nname = \"g\"\nkind = \"gpu_health\"\ntarget = \"h\"\nrunbook = \"r\"\n"), ":7:", "a second trigger named"),
            ("[watch]\ninterval = \"5s\"\n".into(), "", "no [[trigger]]"),
            (base.replace("gpu_health", "alertmanager").replace("target = \"h\"\n", "target_label = \"i\"\n"), "", "needs [watch] listen"),
            (format!("{base}params = {{ k = [1] }}\n"), ":6:", "params"),
            ("[watch]\nlisten = \"unix:rel.sock\"\n".into(), ":2:", "unix:/ABSOLUTE/PATH"),
        ];
        for (text, line, word) in cases {
            let err = read_text(&text).unwrap_err();
            assert!(err.contains(&format!("w.toml{line}")), "{text}: {err}");
            assert!(err.contains(word), "{text}: {err}");
        }
    }
}
