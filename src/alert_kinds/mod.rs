//! Alert kinds, the types of Flagger's AlertProviders: each one module behind the
//! [`AlertService`](service::AlertService) trait (`slack.rs`, `msteams.rs`, `discord.rs`,
//! `rocket.rs`, `gchat.rs`), listed once in the registry [`ALERT_KINDS`]. The AlertProvider
//! reader (`manifest::alert_provider`) parses `spec.type` through it and the sender
//! (`notify::alerts`) dispatches on it, so nothing else names a kind. The core carries the
//! parsed kind ([`AlertKind`]) without knowing any. This module uses neither.

use serde_json::Value;

mod discord;
mod gchat;
mod msteams;
mod rocket;
pub mod service;
mod slack;

use crate::core::model::AlertKind;
use service::{AlertService, Card};

/// Every alert kind, in the order messages list them.
const ALERT_KINDS: &[Registered] = &[
    Registered::of::<slack::Slack>(),
    Registered::of::<msteams::MsTeams>(),
    Registered::of::<discord::Discord>(),
    Registered::of::<rocket::Rocket>(),
    Registered::of::<gchat::GChat>(),
];

/// One kind's registry entry, built from its [`AlertService`].
pub(crate) struct Registered {
    kind: &'static str,
    pub(crate) bearer_token: bool,
    post_url: fn(reqwest::Url, &str) -> reqwest::Url,
    pub(crate) payload: fn(&Card) -> Value,
}

impl Registered {
    const fn of<T: AlertService>() -> Registered {
        Registered {
            kind: T::TYPE,
            bearer_token: T::BEARER_TOKEN,
            post_url: T::post_url,
            payload: T::payload,
        }
    }

    /// Where to post for a provider whose URL is `address`: an http(s) URL with a host,
    /// as the kind wants it.
    pub(crate) fn post_url(&self, address: &str) -> Result<reqwest::Url, String> {
        let url = reqwest::Url::parse(address)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
            .ok_or_else(|| "the address is not an http:// or https:// URL".to_string())?;
        Ok((self.post_url)(url, address))
    }
}

/// The kind `spec.type` spells `text`, if sluice sends it.
pub fn parse(text: &str) -> Option<AlertKind> {
    ALERT_KINDS
        .iter()
        .find(|e| e.kind == text)
        .map(|e| AlertKind::registered(e.kind))
}

/// Every `spec.type` sluice sends, in registry order.
pub fn types() -> impl Iterator<Item = &'static str> {
    ALERT_KINDS.iter().map(|e| e.kind)
}

/// The registry entry of `kind`; an error for a kind the registry did not make.
pub(crate) fn service(kind: AlertKind) -> Result<&'static Registered, String> {
    ALERT_KINDS
        .iter()
        .find(|e| e.kind == kind.as_str())
        .ok_or_else(|| format!("alert provider type {:?} is not registered", kind.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What every registered kind must say and provide: a unique lowercase type that parses
    /// back, its type in the docs' Alerts section, a post URL on the address's host, and a
    /// JSON object body, at every severity, that carries the message, the workload and every
    /// metadata field.
    #[test]
    fn every_registered_alert_kind_provides_what_the_registry_asks() {
        let docs = include_str!("../../docs/operations.md");
        let alerts = docs
            .split("### Alerts")
            .nth(1)
            .and_then(|s| s.split("\n### ").next())
            .unwrap();
        let fields = [
            (
                "Target".to_string(),
                "Deployment/app-field.prod".to_string(),
            ),
            (
                "Progress deadline".to_string(),
                "deadline-field".to_string(),
            ),
        ];
        let mut seen = Vec::new();
        for (i, e) in ALERT_KINDS.iter().enumerate() {
            let kind = e.kind;
            assert!(
                !kind.is_empty() && kind.chars().all(|c| c.is_ascii_lowercase()),
                "alert kind {i}: type {kind:?}"
            );
            assert!(!seen.contains(&kind), "{kind}: listed twice");
            seen.push(kind);
            let parsed = parse(kind).unwrap();
            assert_eq!(parsed.as_str(), kind);
            assert_eq!(service(parsed).unwrap().kind, kind);
            assert!(
                alerts.contains(&format!("`{kind}`")),
                "{kind}: not named in docs/operations.md's Alerts section"
            );
            let url = e.post_url("https://hooks.example/a/b").unwrap();
            assert_eq!(url.host_str(), Some("hooks.example"), "{kind}");
            assert!(url.path().starts_with("/a/b"), "{kind}: {url}");
            assert!(e.post_url("hooks.example/a").is_err(), "{kind}");
            let card = |error: bool| Card {
                channel: "chan-x",
                username: "user-x",
                workload: "app-x.prod",
                text: "the message text",
                fields: &fields,
                error,
            };
            for error in [false, true] {
                let body = (e.payload)(&card(error));
                assert!(body.is_object(), "{kind}: {body}");
                let text = body.to_string();
                for part in ["the message text", "app-x.prod"]
                    .into_iter()
                    .chain(fields.iter().flat_map(|(n, v)| [n.as_str(), v.as_str()]))
                {
                    assert!(text.contains(part), "{kind}: {part:?} missing from {text}");
                }
            }
        }
    }
}
