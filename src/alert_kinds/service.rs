//! What one alert kind (an AlertProvider's `spec.type`) is: the [`AlertService`] trait each
//! kind's module implements, and the [`Card`] an alert is written from.
//!
//! Adding a kind: a module `alert_kinds/<type>.rs` with a unit-like type implementing
//! [`AlertService`] (no item has a default: the compiler asks for each), its type in the
//! Alerts section of `docs/operations.md` (a registry test checks it), and one line in
//! `alert_kinds/mod.rs`'s `ALERT_KINDS`.

use serde_json::Value;

/// One alert, as every kind's body is written from it (Flagger's `Post(workload, namespace,
/// message, fields, severity)` with the provider's `channel` and `username`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card<'a> {
    /// `spec.channel` of the provider.
    pub channel: &'a str,
    /// `spec.username` of the provider.
    pub username: &'a str,
    /// `<name>.<namespace>` of the canary.
    pub workload: &'a str,
    /// The message.
    pub text: &'a str,
    /// Flagger's `alertMetadata` (name, value), or none.
    pub fields: &'a [(String, String)],
    /// Whether the alert has severity `error` (Flagger colours it red).
    pub error: bool,
}

/// One AlertProvider type, as Flagger's `pkg/notifier/` posts to it.
pub(crate) trait AlertService {
    /// `spec.type`, as Flagger's CRD spells it. Unique across kinds.
    const TYPE: &'static str;
    /// Whether a `secretRef`'s optional `token` key goes with each post as a bearer token
    /// (Flagger: Slack only).
    const BEARER_TOKEN: bool;

    /// The URL to post to, from the provider's checked http(s) `url` (`address` as written).
    fn post_url(url: reqwest::Url, address: &str) -> reqwest::Url;

    /// The JSON body of one alert.
    fn payload(card: &Card) -> Value;
}
