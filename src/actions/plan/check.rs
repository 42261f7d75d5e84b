//! What a plan is checked against before anything runs: its age, the params, the
//! targets as they resolve now, the modules, the runbook file and the plan file itself
//! (every field a person reads is bound to what runs: docs/plans.md).

use super::*;

use crate::base::params::Header;
use crate::targets::identity::Identity;
use crate::targets::{Hop, Target};
use std::time::{Duration, SystemTime};

impl Plan {
    /// Refuses a plan made by another version of runbook, or older than `max_age` (any
    /// age when `None`: approvals that expire bound it instead).
    pub fn check_made(&self, max_age: Option<Duration>, now: SystemTime) -> Result<(), String> {
        let mut problems = Vec::new();
        if self.runbook_version != env!("CARGO_PKG_VERSION") {
            problems.push(format!(
                "it was made by runbook {}, and this is runbook {}: the commands it holds the run to may differ between versions",
                self.runbook_version,
                env!("CARGO_PKG_VERSION")
            ));
        }
        match humantime::parse_rfc3339(&self.created) {
            Err(e) => problems.push(format!("its \"created\" time '{}' is not RFC 3339: {e}", self.created)),
            Ok(at) => match now.duration_since(at) {
                Ok(age) if max_age.is_some_and(|max| age > max) => problems.push(format!(
                    "it was made {} ago ({}), more than --max-age {}: what it read may no longer hold",
                    humantime::format_duration(Duration::from_secs(age.as_secs())),
                    self.created,
                    humantime::format_duration(max_age.unwrap_or_default())
                )),
                Ok(_) => {}
                // A little clock skew between machines is normal; more is not.
                Err(e) if e.duration() > Duration::from_secs(300) => problems.push(format!(
                    "it was made in the future ({}, {} from now): check the clocks",
                    self.created,
                    humantime::format_duration(Duration::from_secs(e.duration().as_secs()))
                )),
                Err(_) => {}
            },
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("\n"))
        }
    }

    /// How the params that will run differ from the plan's.
    pub fn param_differences(&self, header: &Header) -> Vec<String> {
        let mut out = Vec::new();
        for spec in &header.params {
            let now = header.values.get(&spec.name).cloned().flatten();
            let Some(planned) = self.params.get(&spec.name) else {
                out.push(format!(
                    "param '{}' is not in the plan (the runbook declares it now)",
                    spec.name
                ));
                continue;
            };
            if spec.secret || planned.secret {
                let digest = now.map(|v| self.salt.digest(v.display().as_bytes()));
                if !planned.secret || digest != planned.sha256 {
                    out.push(format!(
                        "secret param '{}' is not the one planned ({}); give it with --set {}=… or RUNBOOK_PARAM_{}",
                        spec.name,
                        match (&planned.sha256, &digest) {
                            (Some(_), None) => "unset now",
                            (None, Some(_)) => "it was unset",
                            _ => "a different value",
                        },
                        spec.name,
                        spec.name.to_ascii_uppercase()
                    ));
                }
                continue;
            }
            let now = now.map_or(serde_json::Value::Null, |v| v.to_json());
            let then = planned.value.clone().unwrap_or(serde_json::Value::Null);
            if now != then {
                out.push(format!("param '{}': planned {then}, now {now}", spec.name));
            }
        }
        for name in self.params.keys() {
            if !header.params.iter().any(|s| &s.name == name) {
                out.push(format!(
                    "param '{name}' was planned, and the runbook no longer declares it"
                ));
            }
        }
        out
    }

    /// How the modules a runbook would load now differ from the plan's: `now(name)` is
    /// the module as `require` would load it now (or why it cannot be).
    pub fn module_differences(
        &self,
        now: impl Fn(&str) -> Result<PlannedModule, String>,
    ) -> Vec<String> {
        self.modules
            .iter()
            .filter_map(|m| match now(&m.name) {
                Ok(found) => module_difference(&self.modules, &found),
                Err(e) => Some(format!(
                    "module '{}' ({}): planned sha256 {}…, now: {e}",
                    m.name,
                    m.path,
                    &m.sha256[..12.min(m.sha256.len())]
                )),
            })
            .collect()
    }
}

/// Whether a target a plan used still resolves to the same place, and is the same machine:
/// reached again the way the runbook would reach it now (an inventory name through the
/// inventory, anything else by its route), where does it lead, and what does the machine
/// there say it is? Asks each target (one short command), before anything runs.
pub async fn target_differences(
    plan: &Plan,
    registry: &crate::targets::registry::Registry,
    inventory: Option<&crate::base::inventory::Inventory>,
    locks: &crate::actions::locks::Locks,
) -> Vec<String> {
    let mut out = Vec::new();
    for t in &plan.targets {
        let by_name = inventory.is_some_and(|inv| inv.host(&t.name).is_some());
        let now = if by_name {
            registry.resolve(&t.name)
        } else {
            Target::from_route(&t.route, registry)
        };
        let now = match now {
            Ok(now) => now,
            Err(e) => {
                out.push(format!(
                    "target {}: cannot be reached as planned: {e}",
                    t.name
                ));
                continue;
            }
        };
        if now.route() != t.route {
            out.push(format!(
                "target {}: planned by way of {}, now {}",
                t.name,
                route_text(&t.route),
                route_text(&now.route())
            ));
            continue;
        }
        let dest = now.destination().await;
        if dest != t.destination {
            out.push(format!(
                "target {}: planned at {}, now resolves to {}",
                t.name, t.destination, dest
            ));
            continue;
        }
        let Some(planned) = &t.identity else {
            out.push(format!(
                "target {}: the plan does not say which machine it is (made with --offline?); make the plan without --offline to apply it there",
                t.name
            ));
            continue;
        };
        // Through the run's locks: the identity checked here is the one its locks are
        // keyed by, asked once on the connection the run goes on using.
        match locks.identity(&now).await {
            // `runbook test`: nothing is contacted.
            Ok(None) => {}
            Ok(Some(found)) => {
                let diff = Identity::differences(planned, &found.identity);
                if !diff.is_empty() {
                    out.push(format!(
                        "target {}: another machine than the one planned ({}):\n    planned: {}\n    found:   {}",
                        t.name,
                        diff.join("; "),
                        planned.text(),
                        found.identity.text()
                    ));
                }
            }
            Err(e) => out.push(format!("target {}: {e}", t.name)),
        }
    }
    out
}

/// `change 1` or `changes 1 and 3`: the changes holes name, numbered from 1 as the
/// plan's text and Markdown number them.
pub(super) fn changes_named(sources: &[usize]) -> String {
    let mut n: Vec<usize> = sources.iter().map(|s| s + 1).collect();
    n.sort();
    n.dedup();
    let list: Vec<String> = n.iter().map(|i| i.to_string()).collect();
    match list.as_slice() {
        [one] => format!("change {one}"),
        [rest @ .., last] => format!("changes {} and {last}", rest.join(", ")),
        [] => "no change".into(),
    }
}

fn route_text(route: &[Hop]) -> String {
    if route.is_empty() {
        return "this machine".into();
    }
    serde_json::to_string(route).unwrap_or_default()
}

// What a plan binds (docs/plans.md): every field a person reads of a plan is checked
// against what apply holds before anything runs, where it can be: against the rest of
// the plan file (`unbound`), the runbook file (`runbook_path_differs`), the runbook as it
// loads (`loaded_differences`); the rest, against the real change (`Enforcer::allow`).

impl Plan {
    /// What does not hold together in the plan file itself: a command text that is not
    /// the one its digest is of (where no secret is masked in it), a change's step or
    /// target that is not the plan's, a target shown otherwise than its destination. Each
    /// names the field; empty when none. Nothing outside the file is read, so a reviewer's
    /// `runbook plan PLAN.json` refuses such a plan as `apply` does.
    ///
    /// A check an editor of the file can redo (the salt is in the file) proves nothing on
    /// its own; these catch a text edited without its digest, and leave a plan whose
    /// digests were forged to the run, which does not make the forged change.
    pub fn unbound(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, c) in self.changes.iter().enumerate() {
            let n = i + 1;
            // Steps run in order, and so are their changes recorded: a plan listing them
            // otherwise shows an order that cannot run.
            if let Some(before) = i.checked_sub(1).map(|b| &self.changes[b]) {
                if before.step > c.step {
                    out.push(format!(
                        "change {n}: field \"step\" is {}, after change {i} of step {}: a plan lists its changes in the order they run, step by step",
                        c.step + 1,
                        before.step + 1
                    ));
                }
            }
            if !c.masked() && self.salt.digest(&c.digested_command()) != c.command_sha256 {
                out.push(format!(
                    "change {n}: field \"command\" does not match its command_sha256 (the text a reviewer reads is not the command the plan holds)"
                ));
            }
            match self.steps.iter().find(|s| s.index == c.step) {
                None => out.push(format!(
                    "change {n}: field \"step\" is {}, a step the plan does not have",
                    c.step + 1
                )),
                Some(s) if s.name != c.step_name => out.push(format!(
                    "change {n}: field \"step_name\" is {:?}, and step {} of the plan is {:?}",
                    c.step_name,
                    c.step + 1,
                    s.name
                )),
                Some(_) => {}
            }
            // runbook's own changes (`fingerprint.save`) are on this machine, unrecorded
            // among the targets.
            let own = c.target == "local" && c.destination == "local";
            match self.targets.iter().find(|t| t.name == c.target) {
                None if own => {}
                None => out.push(format!(
                    "change {n}: field \"target\" is {:?}, not one of the plan's targets",
                    c.target
                )),
                Some(t) if t.destination != c.destination => out.push(format!(
                    "change {n}: field \"destination\" is {}, and target {} of the plan is at {}",
                    c.destination, t.name, t.destination
                )),
                Some(_) => {}
            }
        }
        for t in &self.targets {
            let split = PlannedTarget::of(&Target::Local, &t.destination, None);
            let fields = [
                ("user", t.user != split.user),
                ("host", t.host != split.host),
                ("port", t.port != split.port),
                ("container", t.container != split.container),
            ];
            for (field, differs) in fields {
                if differs {
                    out.push(format!(
                        "target {}: field \"{field}\" is not what its destination {} says",
                        t.name, t.destination
                    ));
                }
            }
        }
        out
    }

    /// Whether the runbook the plan shows (`path`, as it was named) is the one apply
    /// loads (`file`, or a shipped one): `path` is resolved from the working directory,
    /// which apply has checked is the plan's.
    pub fn runbook_path_differs(&self) -> Option<String> {
        let r = &self.runbook;
        match (&r.shipped, &r.file) {
            (Some(_), Some(_)) => Some(
                "fields \"runbook.shipped\" and \"runbook.file\": a plan is of one runbook".into(),
            ),
            (Some(name), None) if r.path != format!("<shipped>/{name}.lua") => Some(format!(
                "field \"runbook.path\" is {:?}, and the plan is of the shipped runbook '{name}'",
                r.path
            )),
            (None, Some(file)) => {
                let resolved = std::fs::canonicalize(&r.path).ok();
                let same = resolved.as_deref() == Some(std::path::Path::new(file));
                (!same).then(|| {
                    let what = match resolved {
                        None => " (no such file here)".to_string(),
                        Some(p) if p.display().to_string() != r.path => {
                            format!(" (that is {})", p.display())
                        }
                        Some(_) => String::new(),
                    };
                    format!(
                        "field \"runbook.path\" is {:?}{what}, and the runbook of the plan is {file}",
                        r.path
                    )
                })
            }
            _ => None,
        }
    }

    /// How the plan's runbook fields and steps differ from the runbook as it loaded:
    /// its header's name and description, and each step's name and `confirm`, by index
    /// (`steps`: each declared step's name and whether it asks for confirmation). Texts
    /// are compared as the plan holds them, masked by `mask`.
    pub fn loaded_differences(
        &self,
        header: &Header,
        steps: &[(String, bool)],
        mask: &dyn Fn(&str) -> String,
    ) -> Vec<String> {
        let mut out = Vec::new();
        if header.name != self.runbook.name {
            out.push(format!(
                "field \"runbook.name\" is {:?}, and the runbook is {:?}",
                self.runbook.name, header.name
            ));
        }
        let description = header.description.as_deref().map(mask);
        if description != self.runbook.description {
            out.push(format!(
                "field \"runbook.description\" is {}, and the runbook's is {}",
                self.runbook
                    .description
                    .as_ref()
                    .map_or("none".into(), |d| format!("{d:?}")),
                description.map_or("none".into(), |d| format!("{d:?}"))
            ));
        }
        for s in &self.steps {
            let n = s.index + 1;
            match steps.get(s.index) {
                None => out.push(format!(
                    "step {n}: field \"index\": the runbook declares {} steps",
                    steps.len()
                )),
                Some((name, _)) if mask(name) != s.name => out.push(format!(
                    "step {n}: field \"name\" is {:?}, and the runbook's step {n} is {:?}",
                    s.name,
                    mask(name)
                )),
                Some((_, confirm)) if *confirm != s.confirm => out.push(format!(
                    "step {n}: field \"confirm\" is {}, and the runbook's step {n} has confirm = {confirm}",
                    s.confirm
                )),
                Some(_) => {}
            }
        }
        out
    }
}

impl Plan {
    /// What differs between this plan and `now`, the same runbook planned again with this
    /// plan's salt (`approve`): each change that is not the planned one (target, command,
    /// input, step, or what its summary says), each read whose answer is not the one this
    /// plan saw, in plan order. Empty: the targets read as they did.
    pub fn drift(&self, now: &Plan) -> Vec<String> {
        let mut out = Vec::new();
        let n = self.changes.len().max(now.changes.len());
        for i in 0..n {
            match (self.changes.get(i), now.changes.get(i)) {
                (Some(a), Some(b)) if a.same(b) && a.summary == b.summary && a.diff == b.diff => {}
                (Some(a), Some(b)) if a.same(b) && a.summary == b.summary => out.push(format!(
                    "change {}: on {}: {}: the file reads otherwise now than the diff planned",
                    i + 1,
                    a.target,
                    line(&a.summary)
                )),
                (Some(a), Some(b)) if a.same(b) => out.push(format!(
                    "change {}: on {}: planned \"{}\", now \"{}\"",
                    i + 1,
                    a.target,
                    line(&a.summary),
                    line(&b.summary)
                )),
                (Some(a), Some(b)) => out.push(format!(
                    "change {}: planned on {}: {}; now on {}: {}",
                    i + 1,
                    a.target,
                    line(&a.summary),
                    b.target,
                    line(&b.summary)
                )),
                (Some(a), None) => out.push(format!(
                    "change {}: planned on {}: {}; not made now",
                    i + 1,
                    a.target,
                    line(&a.summary)
                )),
                (None, Some(b)) => out.push(format!(
                    "change {}: not planned; now on {}: {}",
                    i + 1,
                    b.target,
                    line(&b.summary)
                )),
                (None, None) => {}
            }
        }
        for r in &self.reads {
            let again = now.reads.iter().find(|x| {
                x.step == r.step && x.target == r.target && x.command_sha256 == r.command_sha256
            });
            match again {
                None => out.push(format!(
                    "read on {} ({}): not made now",
                    r.target,
                    line(&r.summary)
                )),
                Some(x) if x.result_sha256 != r.result_sha256 || x.exit_code != r.exit_code => out
                    .push(format!(
                        "read on {} ({}): answers otherwise now",
                        r.target,
                        line(&r.summary)
                    )),
                Some(_) => {}
            }
        }
        out
    }
}

fn line(text: &str) -> String {
    crate::base::printable::line(text).into_owned()
}
