//! Flagger's per-canary alerts (`analysis.alerts`), sent as Flagger sends them: on the same
//! events, with the same words, filtered by each alert's severity, silenced by `muteAlert`,
//! and posted in the JSON each service gets from Flagger's `pkg/notifier/` (Slack, Microsoft
//! Teams, Discord through its Slack-compatible endpoint, Rocket.Chat, Google Chat).
//!
//! Like the repo's notifications, alerts go out after the push, for decisions that reached
//! the remote, and a failed send is a warning, never a failed tick. A provider's `secretRef`
//! is read from what the operator mapped in ([`Secrets`]); when it is not mapped the alert is
//! skipped with a warning that names the variable or file to set.
//!
//! Flagger's `Cluster` field (its `-cluster-name` flag) has no sluice equivalent and is not
//! sent.

use std::time::Duration;

use serde_json::Value;
use tracing::warn;

use crate::alert_kinds::service::Card;
use crate::alert_kinds::{self, Registered};

use crate::core::decide::{Action, Decision, RollbackCause};
use crate::core::status::{Gate, Phase};
use crate::http_client::HttpClients;
use crate::manifest::model::{Alert, AlertKind, AlertTarget, Canary, Severity, Strategy, Target};
use crate::secrets::Secrets;

/// How long Flagger gives a notification (`pkg/notifier/client.go`).
const TIMEOUT: Duration = Duration::from_secs(5);

/// One call of Flagger's `alert(canary, message, metadata, severity)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub text: String,
    /// Whether the canary's metadata fields go with it ([`fields`]).
    pub metadata: bool,
    pub severity: Severity,
}

fn message(text: impl Into<String>, metadata: bool, severity: Severity) -> Message {
    Message {
        text: text.into(),
        metadata,
        severity,
    }
}

/// Whether `muteAlert` silences the wait a decision starts.
pub fn approval_muted(canary: &Canary, decision: &Decision) -> bool {
    let alerts = &canary.analysis.alerts;
    match &decision.action {
        Action::WaitRollout | Action::WaitApproval(Gate::Rollout) => alerts.mute_rollout,
        Action::WaitApproval(Gate::TrafficIncrease) => alerts.mute_traffic_increase,
        Action::WaitApproval(Gate::Promotion) => alerts.mute_promotion,
        _ => false,
    }
}

/// The alerts Flagger sends for what a committed decision did (`pkg/controller/scheduler.go`
/// and `scheduler_hooks.go`), oldest first.
pub fn messages(canary: &Canary, decision: &Decision) -> Vec<Message> {
    let new_revision = || {
        message(
            "New revision detected, progressing canary analysis.",
            true,
            Severity::Info,
        )
    };
    let waiting = |text: &str| {
        if approval_muted(canary, decision) {
            Vec::new()
        } else {
            vec![message(text, false, Severity::Warn)]
        }
    };
    match &decision.action {
        Action::Initialize => vec![message(
            format!("New {} detected, initialization completed.", kind(canary)),
            true,
            Severity::Info,
        )],
        Action::StartRollout => vec![new_revision()],
        // Only with skipAnalysis does the primary take the new revision in one step: Flagger
        // announces the revision, then the skipped analysis, in the same pass.
        Action::Promote if decision.status.phase == Phase::Succeeded => vec![
            new_revision(),
            message(
                "Canary analysis was skipped, promotion finished.",
                false,
                Severity::Info,
            ),
        ],
        Action::Finalise => vec![message(
            "Canary analysis completed successfully, promotion finished.",
            false,
            Severity::Info,
        )],
        Action::WaitRollout | Action::WaitApproval(Gate::Rollout) => {
            waiting("Canary is waiting for approval.")
        }
        Action::WaitApproval(Gate::TrafficIncrease) => {
            waiting("Canary traffic increase is waiting for approval.")
        }
        Action::WaitApproval(Gate::Promotion) => {
            waiting("Canary promotion is waiting for approval.")
        }
        Action::Rollback { reason, cause } => vec![match cause {
            RollbackCause::FailedChecks { failed } => message(
                format!("Failed checks threshold reached {failed}"),
                false,
                Severity::Error,
            ),
            RollbackCause::ProgressDeadline => message(
                format!(
                    "Progress deadline exceeded: the last change was not applied within {}s",
                    canary.progress_deadline.as_secs()
                ),
                false,
                Severity::Error,
            ),
            RollbackCause::Webhook => {
                message("Rolling back manual webhook invoked", false, Severity::Warn)
            }
            // sluice's own manual rollback; Flagger's closest is the rollback webhook above.
            RollbackCause::Manual => {
                message(format!("Rolling back {reason}"), false, Severity::Warn)
            }
        }],
        // Flagger 1.44's `handleFailedPromotion` alert.
        Action::PromotionFailed { reason } => vec![message(
            format!("Promotion failed, primary not ready: {reason}"),
            false,
            Severity::Error,
        )],
        // A new revision mid-analysis restarts it without an alert, as in Flagger.
        Action::Restart
        | Action::Hold
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
        // Drift and cluster outages are sluice's own gates (Flagger has none): the repo's
        // notifications carry them.
        | Action::Drift(_)
        | Action::Unreachable
        | Action::Queued => Vec::new(),
    }
}

/// The workload kind, as Flagger's `spec.targetRef.kind`.
fn kind(canary: &Canary) -> &str {
    match &canary.target {
        Target::TargetRef { kind, .. } => kind,
        Target::Rollout { .. } => "Rollout",
        Target::Source { .. } | Target::RouteOnly { .. } => "Deployment",
    }
}

/// Flagger's `alertMetadata`: target, threshold, deadline and traffic routing.
pub fn fields(canary: &Canary) -> Vec<(String, String)> {
    let target = match &canary.target {
        Target::TargetRef { name, .. } | Target::Rollout { name, .. } => name.as_str(),
        Target::Source { .. } | Target::RouteOnly { .. } => canary.base_name().as_str(),
    };
    let mut out = vec![
        (
            "Target".to_string(),
            format!("{}/{target}.{}", kind(canary), canary.id.namespace),
        ),
        (
            "Failed checks threshold".to_string(),
            canary.analysis.threshold.to_string(),
        ),
        (
            "Progress deadline".to_string(),
            format!("{}s", canary.progress_deadline.as_secs()),
        ),
    ];
    let routing = match &canary.analysis.strategy {
        Strategy::AB { .. } => Some("A/B Testing".to_string()),
        Strategy::BlueGreen { .. } => Some("Blue/Green".to_string()),
        Strategy::Canary { .. } => canary.analysis.alerts.traffic_routing.clone(),
    };
    if let Some(routing) = routing {
        out.push(("Traffic routing".to_string(), routing));
    }
    out
}

/// The JSON Flagger posts to a provider of `alert`'s type; an error for a type the alert
/// registry did not make.
pub fn payload(alert: &Alert, canary: &Canary, m: &Message) -> Result<Value, String> {
    let service = alert_kinds::service(alert.provider.kind)?;
    Ok(body(service, alert, canary, m))
}

fn body(service: &Registered, alert: &Alert, canary: &Canary, m: &Message) -> Value {
    let workload = format!("{}.{}", canary.base_name(), canary.id.namespace);
    let fields = if m.metadata {
        fields(canary)
    } else {
        Vec::new()
    };
    (service.payload)(&Card {
        channel: &alert.provider.channel,
        username: &alert.provider.username,
        workload: &workload,
        text: &m.text,
        fields: &fields,
        error: m.severity == Severity::Error,
    })
}

/// Where Flagger posts for a provider type (Discord's Slack-compatible endpoint is the hook
/// URL with `/slack` appended, unless it ends so already).
pub fn post_url(kind: AlertKind, address: &str) -> Result<reqwest::Url, String> {
    alert_kinds::service(kind)?.post_url(address)
}

/// Sends every alert of `canary` that Flagger would send for `decision`. Failures are
/// logged, never returned.
pub async fn send(
    clients: &HttpClients,
    secrets: &Secrets,
    canary: &Canary,
    decision: &Decision,
    page: Option<&str>,
) {
    let alerts = &canary.analysis.alerts.alerts;
    if alerts.is_empty() {
        return;
    }
    for mut m in messages(canary, decision) {
        // The canary's dashboard page, when the repo names the dashboard (`dashboard.url`).
        if let Some(page) = page {
            m.text.push_str(&format!(" {page}"));
        }
        for alert in alerts.iter().filter(|a| a.severity.admits(m.severity)) {
            if let Err(error) = send_one(clients, secrets, canary, alert, &m).await {
                let provider = &alert.provider;
                warn!(
                    canary = %canary.id,
                    alert = %alert.name,
                    provider = %format!("{}/{}", provider.namespace, provider.name),
                    error = %error,
                    "Alert not sent"
                );
            }
        }
    }
}

async fn send_one(
    clients: &HttpClients,
    secrets: &Secrets,
    canary: &Canary,
    alert: &Alert,
    m: &Message,
) -> Result<(), String> {
    let provider = &alert.provider;
    let service = alert_kinds::service(provider.kind)?;
    let (address, token) = match &provider.target {
        AlertTarget::Address(url) => (url.clone(), None),
        AlertTarget::Secret(secret) => {
            let ns = provider.namespace.as_str();
            let address = secrets
                .require(ns, secret.as_str(), "address")
                .map_err(|e| e.to_string())?;
            // Flagger sends the `token` key as a bearer token, to Slack only.
            let token = if service.bearer_token {
                secrets
                    .get(ns, secret.as_str(), "token")
                    .map_err(|e| e.to_string())?
                    .filter(|t| !t.is_empty())
            } else {
                None
            };
            (address, token)
        }
    };
    let url = service
        .post_url(&address)
        .map_err(|e| match &provider.target {
            AlertTarget::Secret(s) => {
                format!("Secret {}/{s} key \"address\": {e}", provider.namespace)
            }
            AlertTarget::Address(_) => e,
        })?;
    let proxied;
    let client = match &provider.proxy {
        Some(proxy) => {
            proxied = crate::http_client::proxied_client(proxy)?;
            &proxied
        }
        None => clients.get(false),
    };
    let mut request = client
        .post(url)
        .timeout(TIMEOUT)
        .json(&body(service, alert, canary, m));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request
        .send()
        .await
        .map_err(|e| crate::http_client::describe(&e))?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let body = crate::http_client::read_body(response, 64 * 1024)
        .await
        .unwrap_or_default();
    Err(format!(
        "{} answered {}: {}",
        provider.kind.as_str(),
        status.as_u16(),
        crate::redact::answer(&body)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::load::load;
    use crate::manifest::settings::Settings;
    use crate::yaml::snapshot::Snapshot;
    use serde_json::json;

    /// A canary with one alert to a provider of type `kind`.
    fn canary(kind: &str, analysis: &str) -> Canary {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "apiVersion: flagger.app/v1beta1
kind: Canary
metadata: {{name: podinfo, namespace: prod}}
spec:
  provider: traefik
  progressDeadlineSeconds: 120
  targetRef: {{apiVersion: apps/v1, kind: Deployment, name: podinfo-app}}
  service: {{port: 80}}
  analysis:
    threshold: 3
{analysis}
    alerts:
      - {{name: a, providerRef: {{name: p}}}}
---
apiVersion: flagger.app/v1beta1
kind: AlertProvider
metadata: {{name: p, namespace: prod}}
spec: {{type: {kind}, channel: ops, username: bot, address: 'http://127.0.0.1:9/hook'}}
"
        );
        std::fs::write(dir.path().join("c.yaml"), text).unwrap();
        let loaded = load(&Snapshot::read(dir.path()), &Settings::default());
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        loaded.canaries.into_iter().next().unwrap()
    }

    const STEPS: &str = "    stepWeights: [5, 25, 50]";

    fn body(kind: &str, severity: Severity, metadata: bool) -> Value {
        let c = canary(kind, STEPS);
        let m = message("Failed checks threshold reached 3", metadata, severity);
        payload(&c.analysis.alerts.alerts[0], &c, &m).unwrap()
    }

    #[test]
    fn severities_filter_as_flagger_does() {
        use Severity::*;
        let table = [
            (Info, [true, true, true]),
            (Warn, [false, true, true]),
            (Error, [false, false, true]),
        ];
        for (alert, sends) in table {
            for (event, want) in [Info, Warn, Error].into_iter().zip(sends) {
                assert_eq!(alert.admits(event), want, "{alert:?} for {event:?}");
            }
        }
    }

    #[test]
    fn slack_gets_flaggers_attachment_with_metadata_fields() {
        assert_eq!(
            body("slack", Severity::Info, true),
            json!({
                "channel": "ops",
                "username": "bot",
                "icon_url": "",
                "icon_emoji": ":rocket:",
                "attachments": [{
                    "color": "good",
                    "author_name": "podinfo.prod",
                    "text": "Failed checks threshold reached 3",
                    "mrkdwn_in": ["text"],
                    "fields": [
                        {"title": "Target", "value": "Deployment/podinfo-app.prod", "short": false},
                        {"title": "Failed checks threshold", "value": "3", "short": false},
                        {"title": "Progress deadline", "value": "120s", "short": false},
                        {"title": "Traffic routing", "value": "Weight steps: 5,25,50 max: 0", "short": false},
                    ],
                }],
            })
        );
    }

    #[test]
    fn errors_are_red_in_every_format() {
        let slack = body("slack", Severity::Error, false);
        assert_eq!(slack["attachments"][0]["color"], "danger");
        assert_eq!(slack["attachments"][0]["fields"], json!([]));
        assert_eq!(
            body("discord", Severity::Error, false)["attachments"][0]["color"],
            "danger"
        );
        assert_eq!(
            body("rocket", Severity::Error, false)["attachments"][0]["color"],
            "#FF0000"
        );
        assert_eq!(
            body("rocket", Severity::Warn, false)["attachments"][0]["color"],
            "#0076D7"
        );
        assert_eq!(
            body("msteams", Severity::Error, false)["themeColor"],
            "FF0000"
        );
        assert_eq!(
            body("msteams", Severity::Warn, false)["themeColor"],
            "0076D7"
        );
    }

    #[test]
    fn teams_gets_flaggers_message_card() {
        assert_eq!(
            body("msteams", Severity::Info, true),
            json!({
                "@type": "MessageCard",
                "@context": "http://schema.org/extensions",
                "themeColor": "0076D7",
                "summary": "podinfo.prod",
                "sections": [{
                    "activityTitle": "Failed checks threshold reached 3",
                    "activitySubtitle": "podinfo.prod",
                    "facts": [
                        {"name": "Target", "value": "Deployment/podinfo-app.prod"},
                        {"name": "Failed checks threshold", "value": "3"},
                        {"name": "Progress deadline", "value": "120s"},
                        {"name": "Traffic routing", "value": "Weight steps: 5,25,50 max: 0"},
                    ],
                }],
            })
        );
    }

    #[test]
    fn google_chat_gets_flaggers_card() {
        let c = canary("gchat", "    iterations: 4");
        let m = message(
            "New Deployment detected, initialization completed.",
            true,
            Severity::Info,
        );
        let target =
            "Target<br><font color=#848484><strong>Deployment/podinfo-app.prod</strong></font>";
        assert_eq!(
            payload(&c.analysis.alerts.alerts[0], &c, &m).unwrap(),
            json!({
                "cards": [{
                    "header": {
                        "title": "Flagger",
                        "subtitle": "podinfo.prod",
                        "imageUrl": "https://flagger.app/favicon.png",
                    },
                    "sections": [
                        {"widgets": [{"textParagraph": {"text": "<font color=#848484><strong>New Deployment detected, initialization completed.</strong></font>"}}]},
                        {"widgets": [{"textParagraph": {"text": target}}]},
                        {"widgets": [{"textParagraph": {"text": "Failed checks threshold<br><font color=#848484><strong>3</strong></font>"}}]},
                        {"widgets": [{"textParagraph": {"text": "Progress deadline<br><font color=#848484><strong>120s</strong></font>"}}]},
                        {"widgets": [{"textParagraph": {"text": "Traffic routing<br><font color=#848484><strong>Blue/Green</strong></font>"}}]},
                    ],
                }],
            })
        );
    }

    #[test]
    fn discord_posts_to_its_slack_compatible_endpoint() {
        let url = |a: &str| {
            post_url(alert_kinds::parse("discord").unwrap(), a)
                .unwrap()
                .to_string()
        };
        assert_eq!(
            url("https://discord.com/api/webhooks/1/abc"),
            "https://discord.com/api/webhooks/1/abc/slack"
        );
        assert_eq!(
            url("https://discord.com/api/webhooks/1/abc/"),
            "https://discord.com/api/webhooks/1/abc/slack"
        );
        assert_eq!(
            url("https://discord.com/api/webhooks/1/abc/slack"),
            "https://discord.com/api/webhooks/1/abc/slack"
        );
        assert_eq!(
            post_url(
                alert_kinds::parse("slack").unwrap(),
                "https://hooks.slack.com/x"
            )
            .unwrap()
            .to_string(),
            "https://hooks.slack.com/x"
        );
        assert!(post_url(alert_kinds::parse("slack").unwrap(), "hooks.slack.com/x").is_err());
    }
}
