//! Notifications for the events people care about (a rollout started, waits for approval,
//! was promoted, was rolled back) to Slack, Microsoft Teams, Discord or a generic JSON
//! webhook, configured in `.sluice/config.yaml`. The webhook URLs are secrets, so the settings
//! name the environment variable that holds each one; a repo never stores them.
//!
//! [`alerts`] sends Flagger's per-canary alerts (`analysis.alerts`) the same way, each
//! AlertProvider type one module of [`crate::alert_kinds`] and one line of its registry.

pub mod alerts;

use serde_json::json;
use tracing::warn;

use crate::core::decide::{Action, Decision, DriftStep};
use crate::manifest::model::Canary;
use crate::manifest::settings::{Channel, Target};

/// The events worth a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Started,
    WaitingForApproval,
    Promoted,
    RolledBack,
    /// The promotion failed: all traffic on the canary (Flagger 1.44's failed promotion).
    PromotionFailed,
    /// Files sluice owns were changed outside sluice: the canary holds, or they were restored.
    Drift,
    /// A wave's cluster does not answer: the wave holds (the commit that says so is made
    /// once per outage).
    ClusterUnreachable,
}

impl Event {
    pub fn name(self) -> &'static str {
        match self {
            Event::Started => "started",
            Event::WaitingForApproval => "waitingForApproval",
            Event::Promoted => "promoted",
            Event::RolledBack => "rolledBack",
            Event::PromotionFailed => "promotionFailed",
            Event::Drift => "drift",
            Event::ClusterUnreachable => "clusterUnreachable",
        }
    }

    /// The event a committed decision is, if any.
    pub fn of(decision: &Decision) -> Option<Event> {
        match &decision.action {
            Action::StartRollout | Action::Restart => Some(Event::Started),
            Action::WaitApproval(_) | Action::WaitRollout => Some(Event::WaitingForApproval),
            Action::Finalise => Some(Event::Promoted),
            Action::Promote if decision.status.phase == crate::core::status::Phase::Succeeded => {
                Some(Event::Promoted)
            }
            Action::Rollback { .. } => Some(Event::RolledBack),
            Action::PromotionFailed { .. } => Some(Event::PromotionFailed),
            Action::Drift(DriftStep::Hold { .. } | DriftStep::Restore { .. }) => Some(Event::Drift),
            Action::Unreachable => Some(Event::ClusterUnreachable),
            Action::Hold
            | Action::Initialize
            | Action::Cancel
            | Action::AdvanceCanary { .. }
            | Action::AdvanceIteration { .. }
            | Action::FailedCheck
            | Action::Measured
            | Action::Promote
            | Action::AdvancePrimary { .. }
            | Action::ApprovalMerged
            | Action::Pause
            | Action::Resume
            | Action::Queued
            | Action::Drift(DriftStep::Resolved) => None,
        }
    }
}

/// The JSON body one channel expects for a message; `page` is the canary's dashboard page
/// (`dashboard.url` in the settings), linked when set.
pub fn payload(
    channel: Channel,
    canary: &Canary,
    event: Event,
    decision: &Decision,
    page: Option<&str>,
) -> serde_json::Value {
    let s = &decision.status;
    let mut text = format!(
        "{}: {} (primary {} %, canary {} %)",
        canary.id,
        decision
            .events
            .last()
            .map(String::as_str)
            .unwrap_or_default(),
        s.primary_weight,
        s.canary_weight
    );
    if let Some(page) = page {
        text.push_str(&format!(" {page}"));
    }
    let mut body = match channel {
        Channel::Slack => json!({"text": text}),
        Channel::Discord => json!({"content": text}),
        Channel::Teams => json!({
            "@type": "MessageCard",
            "@context": "https://schema.org/extensions",
            "summary": format!("sluice: {} {}", canary.id, event.name()),
            "themeColor": if matches!(event, Event::RolledBack | Event::PromotionFailed | Event::Drift | Event::ClusterUnreachable) { "d63333" } else { "2e7d32" },
            "title": format!("sluice: {} {}", canary.id, event.name()),
            "text": text,
        }),
        Channel::Webhook => json!({
            "canary": canary.id.to_string(),
            "namespace": canary.id.namespace.to_string(),
            "name": canary.base_name().to_string(),
            "event": event.name(),
            "phase": s.phase.as_str(),
            "message": decision.events.join("; "),
            "weights": {"primary": s.primary_weight, "canary": s.canary_weight},
            "revision": s.canary_revision.clone().unwrap_or_else(|| s.promoted_revision.clone()),
        }),
    };
    if let (Channel::Webhook, Some(page), Some(fields)) = (channel, page, body.as_object_mut()) {
        fields.insert("url".into(), json!(page));
    }
    body
}

/// Sends a decision's notification to every target; failures are logged, never fatal.
/// `url_of` looks up the variable holding a target's URL (the environment read at start);
/// `client` is the process's pooled client (`runtime::Runtime::http`).
pub async fn send(
    client: &reqwest::Client,
    targets: &[Target],
    url_of: impl Fn(&str) -> Option<String>,
    canary: &Canary,
    decision: &Decision,
    page: Option<&str>,
) {
    let Some(event) = Event::of(decision) else {
        return;
    };
    // A confirm-* hook's `muteAlert` silences its wait everywhere, as in Flagger.
    if alerts::approval_muted(canary, decision) {
        return;
    }
    for target in targets {
        let Some(url) = url_of(&target.url_env) else {
            warn!(variable = %target.url_env, "Notification skipped: its URL variable is not set");
            continue;
        };
        let body = payload(target.channel, canary, event, decision, page);
        let sent = client
            .post(&url)
            .timeout(std::time::Duration::from_secs(10))
            .json(&body)
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => {}
            Ok(r) => {
                warn!(canary = %canary.id, variable = %target.url_env, status = r.status().as_u16(), "Notification refused")
            }
            Err(e) => {
                warn!(canary = %canary.id, variable = %target.url_env, error = %crate::http_client::describe(&e), "Notification failed")
            }
        }
    }
}
