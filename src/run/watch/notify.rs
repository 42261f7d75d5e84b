//! Telling people: each `[[notify]]` URL is POSTed a message when a plan is proposed
//! (and when the watcher applied one, or its apply failed), as the event sinks' webhook
//! POSTs (`sinks/ship/webhook.rs`: plain HTTP/1.1, a 2xx confirms). A proposal not yet
//! confirmed by a URL is sent to it again at each look until it is.
//!
//! `format = "json"` (the default) sends [`Message`] as it is; `"slack"` sends
//! `{"text": …}`, which Slack's incoming webhooks and their look-alikes (Mattermost,
//! Rocket.Chat, Teams' workflows) take: the summary, the plan's path and the commands
//! to review and approve it (a plan's Markdown is too long for a chat message).

use super::config::{Format, Notify};
use serde::Serialize;

/// What happened, for a notification.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// A plan waits for a decision.
    Proposed,
    /// The watcher applied it (its approvals were there and `auto_apply` allows it).
    Applied,
    /// The watcher's apply of it failed or was refused.
    ApplyFailed,
}

/// The JSON a `format = "json"` URL receives.
#[derive(Debug, Clone, Serialize)]
pub struct Message {
    pub event: Event,
    /// The proposal's id (stable across retries: a receiver drops repeats by it).
    pub id: String,
    pub trigger: String,
    pub target: String,
    /// One line: what set it off and what is proposed.
    pub summary: String,
    /// The plan as `runbook plan PLAN.json --format md` renders it.
    pub markdown: String,
    /// The plan file (absolute), and its sha256.
    pub plan: String,
    pub sha256: String,
    /// How to review it, approve it and apply it.
    pub review: String,
    pub approve: String,
    pub apply: String,
}

impl Message {
    /// The body `format` asks for.
    pub fn body(&self, format: Format) -> Vec<u8> {
        let value = match format {
            Format::Json => serde_json::to_value(self).expect("a message serializes"),
            Format::Slack => {
                let mut text = format!(
                    "{}\nplan: {} (sha256 {})",
                    self.summary,
                    self.plan,
                    &self.sha256[..12.min(self.sha256.len())]
                );
                if self.event == Event::Proposed {
                    text.push_str(&format!(
                        "\nreview: {}\napprove: {}\napply: {}",
                        self.review, self.approve, self.apply
                    ));
                }
                serde_json::json!({ "text": text })
            }
        };
        serde_json::to_vec(&value).expect("a message serializes")
    }
}

/// Sends `msg` to each URL of `to` not in `done`, on a thread each may block on (a
/// receiver gets `ANSWER` to answer): the URLs that confirmed it, and why each other
/// did not.
pub async fn send(to: &[Notify], msg: &Message, done: &[String]) -> (Vec<String>, Vec<String>) {
    let mut confirmed = Vec::new();
    let mut failed = Vec::new();
    for n in to.iter().filter(|n| !done.contains(&n.url.text)) {
        let body = msg.body(n.format);
        let url = n.url.clone();
        let sent = tokio::task::spawn_blocking(move || {
            crate::run::sinks::ship::webhook::post(&url, "application/json", &body)
        })
        .await
        .unwrap_or_else(|e| Err(format!("{}: {e}", n.url.text)));
        match sent {
            Ok(()) => confirmed.push(n.url.text.clone()),
            Err(e) => failed.push(e),
        }
    }
    (confirmed, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_slack_bodies() {
        let m = Message {
            event: Event::Proposed,
            id: "slow-gpu1-20260101-000000".into(),
            trigger: "slow".into(),
            target: "gpu1".into(),
            summary: "slow on gpu1: plan of clean-reset".into(),
            markdown: "# plan\n".into(),
            plan: "/w/plans/p.json".into(),
            sha256: "0123456789abcdef".into(),
            review: "runbook plan /w/plans/p.json --format md".into(),
            approve: "runbook approve /w/plans/p.json".into(),
            apply: "runbook apply /w/plans/p.json".into(),
        };
        let json: serde_json::Value = serde_json::from_slice(&m.body(Format::Json)).unwrap();
        assert_eq!(json["event"], "proposed");
        assert_eq!(json["markdown"], "# plan\n");
        assert_eq!(json["plan"], "/w/plans/p.json");
        let slack: serde_json::Value = serde_json::from_slice(&m.body(Format::Slack)).unwrap();
        let text = slack["text"].as_str().unwrap();
        assert!(
            text.starts_with(
                "slow on gpu1: plan of clean-reset\nplan: /w/plans/p.json (sha256 0123456789ab)"
            ),
            "{text}"
        );
        assert!(
            text.contains("approve: runbook approve /w/plans/p.json"),
            "{text}"
        );
        assert_eq!(slack.as_object().unwrap().len(), 1);
    }
}
