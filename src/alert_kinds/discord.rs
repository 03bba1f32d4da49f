//! Discord, through its Slack-compatible endpoint (Flagger's `pkg/notifier/discord.go`): the
//! hook URL with `/slack` appended, Slack's body.

use serde_json::Value;

use super::service::{AlertService, Card};
use super::slack;

/// `spec.type: discord`.
pub(crate) struct Discord;

impl AlertService for Discord {
    const TYPE: &'static str = "discord";
    const BEARER_TOKEN: bool = false;

    /// `/slack` appended, unless the address ends so already.
    fn post_url(mut url: reqwest::Url, address: &str) -> reqwest::Url {
        if !address.ends_with("/slack") {
            let path = format!("{}/slack", url.path().trim_end_matches('/'));
            url.set_path(&path);
        }
        url
    }

    fn payload(card: &Card) -> Value {
        slack::attachment(card, if card.error { "danger" } else { "good" })
    }
}
