//! Forgejo (and Codeberg): Gitea's payloads under its own names, `X-Forgejo-Event` and
//! `X-Forgejo-Signature: <hex HMAC-SHA256>`. Forgejo also still sends the `X-Gitea-*` headers;
//! either signature is accepted.

use super::Event;

pub(super) fn parse(event: &str, body: &[u8]) -> Result<Event, String> {
    super::gitea::parse(event, body)
}

#[cfg(test)]
pub(super) fn samples() -> Vec<super::tests::Sample> {
    super::gitea::shared_samples()
}
