//! Microsoft Teams' incoming webhook (Flagger's `pkg/notifier/teams.go`): a MessageCard whose
//! facts are the metadata fields.

use serde_json::{json, Value};

use super::service::{AlertService, Card};

/// `spec.type: msteams`.
pub(crate) struct MsTeams;

impl AlertService for MsTeams {
    const TYPE: &'static str = "msteams";
    const BEARER_TOKEN: bool = false;

    fn post_url(url: reqwest::Url, _address: &str) -> reqwest::Url {
        url
    }

    fn payload(card: &Card) -> Value {
        let facts: Vec<Value> = card
            .fields
            .iter()
            .map(|(name, value)| json!({"name": name, "value": value}))
            .collect();
        json!({
            "@type": "MessageCard",
            "@context": "http://schema.org/extensions",
            "themeColor": if card.error { "FF0000" } else { "0076D7" },
            "summary": card.workload,
            "sections": [{
                "activityTitle": card.text,
                "activitySubtitle": card.workload,
                "facts": facts,
            }],
        })
    }
}
