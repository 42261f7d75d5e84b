//! `kind = "alertmanager"`: what Alertmanager's webhook delivers (its `webhook_config`,
//! the JSON of version 4: `{"version":"4","status":…,"alerts":[{"status","labels",…}]}`),
//! matched to triggers. A firing alert whose labels carry a trigger's `match` sets it off
//! on the target its `target_label` names, with params taken from other labels.
//!
//! What an alert says comes from whoever could POST to the listener: a target it names
//! must be one the trigger lists (`targets`) or, without a list, a host of the inventory;
//! a label's value becomes a param's value as it is, one argv word where the runbook uses
//! it, never shell text; control characters are refused.

use super::config::{Trigger, When};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The longest label value taken (a host name, an instance).
const MAX_LABEL: usize = 256;

/// One alert of a webhook payload.
#[derive(Debug, Clone, Deserialize)]
pub struct Alert {
    /// `firing` or `resolved`.
    pub status: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct Payload {
    alerts: Vec<Alert>,
}

/// A webhook's body: its alerts, or why it is not Alertmanager's payload.
pub fn parse(body: &[u8]) -> Result<Vec<Alert>, String> {
    serde_json::from_slice::<Payload>(body)
        .map(|p| p.alerts)
        .map_err(|e| {
            format!("not an Alertmanager webhook payload (a JSON object with \"alerts\"): {e}")
        })
}

/// A trigger set off by an alert.
#[derive(Debug, Clone, PartialEq)]
pub struct Incident {
    /// Its index among the watch file's triggers.
    pub trigger: usize,
    pub target: String,
    /// Params from the alert's labels (after the trigger's own).
    pub sets: Vec<(String, String)>,
    pub why: String,
}

/// The incidents `alerts` set off, and what could not be taken (each said in words).
/// `known` tells whether a name is a host of the inventory.
pub fn incidents(
    triggers: &[Trigger],
    alerts: &[Alert],
    known: &dyn Fn(&str) -> bool,
) -> (Vec<Incident>, Vec<String>) {
    let mut out = Vec::new();
    let mut refused = Vec::new();
    for alert in alerts.iter().filter(|a| a.status == "firing") {
        for (i, t) in triggers.iter().enumerate() {
            let When::Alert(a) = &t.when else { continue };
            let matches = a
                .matchers
                .iter()
                .all(|(k, v)| alert.labels.get(k) == Some(v));
            if !matches {
                continue;
            }
            let named = describe(&alert.labels);
            let label = |name: &str| -> Result<String, String> {
                let v = alert.labels.get(name).ok_or_else(|| {
                    format!(
                        "trigger {}: an alert ({named}) without the label {name:?}",
                        t.name
                    )
                })?;
                if v.is_empty() || v.len() > MAX_LABEL || v.contains(char::is_control) {
                    return Err(format!(
                        "trigger {}: label {name} = {:?} of an alert ({named}) is empty, too long or holds a control character",
                        t.name,
                        crate::base::printable::line(v)
                    ));
                }
                Ok(v.clone())
            };
            let target = match label(&a.target_label) {
                Ok(v) => v,
                Err(e) => {
                    refused.push(e);
                    continue;
                }
            };
            let allowed = match &a.targets {
                Some(list) => list.contains(&target),
                None => known(&target),
            };
            if !allowed {
                refused.push(format!(
                    "trigger {}: an alert ({named}) names target {target:?}, which is not {}: not taken",
                    t.name,
                    match &a.targets {
                        Some(_) => "one of its `targets`",
                        None => "a host of the inventory (list the targets an alert may name with `targets`)",
                    }
                ));
                continue;
            }
            let mut sets = Vec::new();
            let mut bad = None;
            for (param, from) in &a.label_params {
                match label(from) {
                    Ok(v) => sets.push((param.clone(), v)),
                    Err(e) => {
                        bad = Some(e);
                        break;
                    }
                }
            }
            if let Some(e) = bad {
                refused.push(e);
                continue;
            }
            out.push(Incident {
                trigger: i,
                target,
                sets,
                why: format!("alert firing: {named}"),
            });
        }
    }
    (out, refused)
}

/// `alertname=X, instance=Y`: the labels, escaped, for messages.
fn describe(labels: &BTreeMap<String, String>) -> String {
    let mut v: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                crate::base::printable::line(k),
                crate::base::printable::line(v)
            )
        })
        .collect();
    // The alert's name first: it is what a person knows it by.
    if let Some(i) = v.iter().position(|s| s.starts_with("alertname=")) {
        let name = v.remove(i);
        v.insert(0, name);
    }
    v.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::watch::config::Alert as Spec;
    use std::time::Duration;

    fn trigger(targets: Option<Vec<String>>) -> Trigger {
        Trigger {
            name: "am".into(),
            at: "w.toml:1".into(),
            when: When::Alert(Spec {
                matchers: [("alertname".to_string(), "TrainingSlow".to_string())].into(),
                target_label: "node".into(),
                targets,
                label_params: vec![("host".into(), "node".into())],
            }),
            runbook: "r".into(),
            params: Vec::new(),
            interval: Duration::from_secs(1),
            cooldown: Duration::from_secs(1),
            expire: Duration::from_secs(1),
            auto_apply: false,
        }
    }

    #[test]
    fn a_firing_alert_that_matches_names_its_target_and_params() {
        let body = br#"{"version":"4","status":"firing","alerts":[
            {"status":"firing","labels":{"alertname":"TrainingSlow","node":"gpu1"}},
            {"status":"resolved","labels":{"alertname":"TrainingSlow","node":"gpu2"}},
            {"status":"firing","labels":{"alertname":"Other","node":"gpu1"}},
            {"status":"firing","labels":{"alertname":"TrainingSlow","node":"evil\u001b[2J"}},
            {"status":"firing","labels":{"alertname":"TrainingSlow","node":"gpu9"}},
            {"status":"firing","labels":{"alertname":"TrainingSlow"}}
        ]}"#;
        let alerts = parse(body).unwrap();
        let known = |n: &str| n == "gpu1" || n == "gpu2";
        let (found, refused) = incidents(&[trigger(None)], &alerts, &known);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].target, "gpu1");
        assert_eq!(
            found[0].sets,
            vec![("host".to_string(), "gpu1".to_string())]
        );
        assert_eq!(
            found[0].why,
            "alert firing: alertname=TrainingSlow, node=gpu1"
        );
        assert_eq!(refused.len(), 3, "{refused:?}");
        assert!(refused[0].contains("control character"), "{}", refused[0]);
        assert!(!refused[0].contains('\u{1b}'), "{}", refused[0]);
        assert!(refused[1].contains("\"gpu9\", which is not a host of the inventory"));
        assert!(refused[2].contains("without the label \"node\""));
        let (found, _) = incidents(&[trigger(Some(vec!["gpu9".into()]))], &alerts, &known);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].target, "gpu9");
        assert!(parse(b"[]").is_err());
    }
}
