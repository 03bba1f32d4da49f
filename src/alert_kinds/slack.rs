//! Slack's incoming webhook (Flagger's `pkg/notifier/slack.go`): an attachment whose colour
//! says the severity. Discord and Rocket.Chat take the same body ([`attachment`]).

use serde_json::{json, Value};

use super::service::{AlertService, Card};

/// `spec.type: slack`.
pub(crate) struct Slack;

impl AlertService for Slack {
    const TYPE: &'static str = "slack";
    const BEARER_TOKEN: bool = true;

    fn post_url(url: reqwest::Url, _address: &str) -> reqwest::Url {
        url
    }

    fn payload(card: &Card) -> Value {
        attachment(card, if card.error { "danger" } else { "good" })
    }
}

/// Slack's message with one attachment of `color`, as Flagger sends it to Slack-compatible
/// services.
pub(crate) fn attachment(card: &Card, color: &str) -> Value {
    let fields: Vec<Value> = card
        .fields
        .iter()
        .map(|(title, value)| json!({"title": title, "value": value, "short": false}))
        .collect();
    json!({
        "channel": card.channel,
        "username": card.username,
        "icon_url": "",
        "icon_emoji": ":rocket:",
        "attachments": [{
            "color": color,
            "author_name": card.workload,
            "text": card.text,
            "mrkdwn_in": ["text"],
            "fields": fields,
        }],
    })
}
