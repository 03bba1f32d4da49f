//! Rocket.Chat's incoming webhook (Flagger's `pkg/notifier/rocket.go`): Slack's body with
//! Rocket.Chat's colours.

use serde_json::Value;

use super::service::{AlertService, Card};
use super::slack;

/// `spec.type: rocket`.
pub(crate) struct Rocket;

impl AlertService for Rocket {
    const TYPE: &'static str = "rocket";
    const BEARER_TOKEN: bool = false;

    fn post_url(url: reqwest::Url, _address: &str) -> reqwest::Url {
        url
    }

    fn payload(card: &Card) -> Value {
        slack::attachment(card, if card.error { "#FF0000" } else { "#0076D7" })
    }
}
