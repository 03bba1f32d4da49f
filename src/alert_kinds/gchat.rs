//! Google Chat's incoming webhook (Flagger's `pkg/notifier/google_chat.go`): a card with one
//! paragraph for the message and one per metadata field.

use serde_json::{json, Value};

use super::service::{AlertService, Card};

/// `spec.type: gchat`.
pub(crate) struct GChat;

impl AlertService for GChat {
    const TYPE: &'static str = "gchat";
    const BEARER_TOKEN: bool = false;

    fn post_url(url: reqwest::Url, _address: &str) -> reqwest::Url {
        url
    }

    fn payload(card: &Card) -> Value {
        let paragraph = |text: String| json!({"widgets": [{"textParagraph": {"text": text}}]});
        let mut sections = vec![paragraph(format!(
            "<font color=#848484><strong>{}</strong></font>",
            card.text
        ))];
        sections.extend(card.fields.iter().map(|(name, value)| {
            paragraph(format!(
                "{name}<br><font color=#848484><strong>{value}</strong></font>"
            ))
        }));
        json!({
            "cards": [{
                "header": {
                    "title": "Flagger",
                    "subtitle": card.workload,
                    "imageUrl": "https://flagger.app/favicon.png",
                },
                "sections": sections,
            }],
        })
    }
}
