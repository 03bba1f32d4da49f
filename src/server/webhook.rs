//! `POST /hooks/git`: a forge's push or pull-request event, authenticated and then only used
//! to wake the loop early (the loop fetches and looks for itself; nothing in a body is
//! trusted).
//!
//! Replays are refused by what is signed, the body, never by the delivery id header
//! (`X-GitHub-Delivery`, `X-Gitea-Delivery`, `X-Gitlab-Event-UUID`), which anyone holding one
//! signed delivery can change at will: the same body within [`REPLAY_WINDOW`] is answered but
//! wakes nothing. A forge's own redelivery of an event is the same body, so it is absorbed the
//! same way. Two genuine events never share a body (each names its commits), and a wake-up
//! missed would only wait for the next poll.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hashlink::LruCache;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tracing::{info, warn};

use super::ServerState;

/// Environment variable holding the shared webhook secret.
pub const WEBHOOK_SECRET_ENV: &str = "SLUICE_WEBHOOK_SECRET";

/// Largest webhook body accepted (GitHub caps payloads at 25 MB; push and pull-request
/// payloads are far smaller, and the body is buffered before it is authenticated).
pub const MAX_WEBHOOK_BODY: usize = 5 * 1024 * 1024;

/// Bodies remembered to refuse replays: far more than a forge delivers in [`REPLAY_WINDOW`],
/// little memory (a SHA-256 digest and a time each).
pub const REMEMBERED_DELIVERIES: usize = 4096;

/// How long a body is remembered: a replay after it wakes the loop once more, so a captured
/// delivery is worth at most one early tick per window.
pub const REPLAY_WINDOW: Duration = Duration::from_secs(10 * 60);

/// Headers carrying a forge's delivery id (GitHub, Gitea, Forgejo, GitLab, Bitbucket Cloud):
/// logged, never trusted.
const DELIVERY_HEADERS: [&str; 5] = [
    "x-github-delivery",
    "x-gitea-delivery",
    "x-forgejo-delivery",
    "x-gitlab-event-uuid",
    "x-request-uuid",
];

/// The authenticated bodies of the last [`REPLAY_WINDOW`], by digest, the oldest forgotten
/// first; cheap to clone.
#[derive(Clone)]
pub(super) struct Replays(Arc<Mutex<LruCache<[u8; 32], Timestamp>>>);

impl Replays {
    pub(super) fn new() -> Replays {
        Replays(Arc::new(Mutex::new(LruCache::new(REMEMBERED_DELIVERIES))))
    }

    /// Records `body` as received at `now` (the runtime's clock); `false` when the same body
    /// was received within [`REPLAY_WINDOW`] before (a replay, or a forge delivering the event
    /// again). A body recorded after `now` (a clock set back) counts as recent.
    fn first(&self, body: &[u8], now: Timestamp) -> bool {
        let digest: [u8; 32] = Sha256::digest(body).into();
        let mut seen = match self.0.lock() {
            Ok(seen) => seen,
            Err(poisoned) => poisoned.into_inner(),
        };
        let window = SignedDuration::try_from(REPLAY_WINDOW).unwrap_or(SignedDuration::MAX);
        let recent = seen
            .get(&digest)
            .is_some_and(|at| now.duration_since(*at) < window);
        if !recent {
            seen.insert(digest, now);
        }
        !recent
    }
}

/// Which forge signed a webhook, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Auth {
    /// GitHub, Gitea, Forgejo: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`.
    HubSignature,
    /// Gitea/Gogs without the Hub header: `X-Gitea-Signature: <hex HMAC-SHA256>`.
    GiteaSignature,
    /// GitLab: `X-Gitlab-Token: <secret>`.
    GitlabToken,
}

pub(super) fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Checks a webhook's authentication against `secret`, in constant time.
fn authenticate(headers: &HeaderMap, body: &[u8], secret: &[u8]) -> Result<Auth, &'static str> {
    if let Some(value) = header_str(headers, "x-hub-signature-256") {
        let hex = value
            .strip_prefix("sha256=")
            .ok_or("X-Hub-Signature-256 must look like sha256=<hex>")?;
        return verify_hmac(secret, body, hex)
            .then_some(Auth::HubSignature)
            .ok_or("X-Hub-Signature-256 does not match the body");
    }
    if let Some(hex) = header_str(headers, "x-gitea-signature") {
        return verify_hmac(secret, body, hex)
            .then_some(Auth::GiteaSignature)
            .ok_or("X-Gitea-Signature does not match the body");
    }
    if let Some(token) = headers.get("x-gitlab-token") {
        return same_secret(token.as_bytes(), secret)
            .then_some(Auth::GitlabToken)
            .ok_or("X-Gitlab-Token does not match");
    }
    Err("no X-Hub-Signature-256, X-Gitea-Signature or X-Gitlab-Token header")
}

/// Whether `given` is `secret`. Compares digests so neither the secret's length nor its
/// content leaks through timing.
pub(super) fn same_secret(given: &[u8], secret: &[u8]) -> bool {
    let given = Sha256::digest(given);
    let expected = Sha256::digest(secret);
    bool::from(given.as_slice().ct_eq(expected.as_slice()))
}

/// Whether `signature` (hex) is HMAC-SHA256(`secret`, `body`), compared in constant time.
pub(super) fn verify_hmac(secret: &[u8], body: &[u8], signature: &str) -> bool {
    let Ok(tag) = hex::decode(signature.trim()) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    // verify_slice compares in constant time (and rejects a tag of the wrong length).
    mac.verify_slice(&tag).is_ok()
}

pub(super) async fn git_hook(
    State(state): State<ServerState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(secret) = state.webhook_secret.clone() else {
        return disabled();
    };
    let auth = match authenticate(&headers, &body, &secret) {
        Ok(auth) => auth,
        Err(why) => return refused(&state, why),
    };
    let event = header_str(&headers, "x-github-event")
        .or_else(|| header_str(&headers, "x-gitea-event"))
        .or_else(|| header_str(&headers, "x-gitlab-event"))
        .unwrap_or("unknown");
    if event == "ping" {
        return (StatusCode::OK, "pong\n").into_response();
    }
    let delivery = delivery(&headers);
    if !first_delivery(&state, &body, event, delivery) {
        return already_received();
    }
    info!(event, auth = ?auth, delivery, "Git webhook received, waking the loop");
    wake(&state)
}

/// The answer when no webhook secret is configured: every hook is refused.
pub(super) fn disabled() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "webhooks are disabled: no secret is configured. Set {WEBHOOK_SECRET_ENV} \
             (e.g. from the sluice-credentials Secret) and give the forge's webhook the same \
             secret (GitHub/Gitea: \"Secret\", GitLab: \"Secret token\")\n"
        ),
    )
        .into_response()
}

/// The answer to a webhook whose authentication failed (`why`, never the secret).
pub(super) fn refused(state: &ServerState, why: &str) -> Response {
    warn!(reason = why, "Rejected webhook");
    state.metrics.error("webhook_auth");
    (StatusCode::UNAUTHORIZED, format!("unauthorized: {why}\n")).into_response()
}

/// The delivery id a forge put in its headers, for the log only.
pub(super) fn delivery(headers: &HeaderMap) -> Option<&str> {
    DELIVERY_HEADERS
        .iter()
        .find_map(|name| header_str(headers, name))
}

/// Records an authenticated `body`; false (and logged) when it is a replay. Recorded only once
/// authenticated, so unsigned requests cannot fill the memory.
pub(super) fn first_delivery(
    state: &ServerState,
    body: &[u8],
    event: &str,
    delivery: Option<&str>,
) -> bool {
    let first = state.replays.first(body, state.clock.now());
    if !first {
        info!(
            event,
            delivery, "Webhook body received before; ignored as a replay"
        );
    }
    first
}

/// The answer to a replayed body: received, nothing woken.
pub(super) fn already_received() -> Response {
    (
        StatusCode::OK,
        "already received: this body was delivered before\n",
    )
        .into_response()
}

/// Wakes the loop and says so.
pub(super) fn wake(state: &ServerState) -> Response {
    // One stored wake-up however many deliveries arrive before the loop takes it.
    state.wake.notify_one();
    (StatusCode::ACCEPTED, "accepted: reconciling soon\n").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    fn sign(secret: &[u8], body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
        mac.update(body);
        hex::encode(mac.finalize().into_bytes())
    }

    #[test]
    fn github_documented_example_signature() {
        // The example from GitHub's "Validating webhook deliveries" documentation.
        let secret = b"It's a Secret to Everybody";
        let body = b"Hello, World!";
        let sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(format!("sha256={}", sign(secret, body)), sig);
        let h = headers(&[("x-hub-signature-256", sig)]);
        assert_eq!(authenticate(&h, body, secret), Ok(Auth::HubSignature));
        assert!(authenticate(&h, b"Hello, World?", secret).is_err());
        assert!(authenticate(&h, body, b"other").is_err());
    }

    #[test]
    fn malformed_signatures_are_rejected_without_panicking() {
        let secret = b"s";
        for bad in [
            "",
            "sha256=",
            "sha256=zz",
            "sha256=abc",
            "sha1=0000",
            "sha256=\u{e9}",
        ] {
            let mut h = HeaderMap::new();
            if let Ok(v) = bad.parse() {
                h.insert("x-hub-signature-256", v);
            }
            assert!(authenticate(&h, b"{}", secret).is_err(), "{bad:?}");
        }
        assert!(authenticate(&HeaderMap::new(), b"{}", secret).is_err());
    }

    #[test]
    fn gitea_and_gitlab() {
        let secret = b"topsecret";
        let body = br#"{"ref":"refs/heads/main"}"#;
        let h = headers(&[("x-gitea-signature", &sign(secret, body))]);
        assert_eq!(authenticate(&h, body, secret), Ok(Auth::GiteaSignature));
        let h = headers(&[("x-gitlab-token", "topsecret")]);
        assert_eq!(authenticate(&h, body, secret), Ok(Auth::GitlabToken));
        let h = headers(&[("x-gitlab-token", "topsecre")]);
        assert!(authenticate(&h, body, secret).is_err());
    }

    #[test]
    fn signatures_that_are_not_hex_are_refused() {
        let body = b"{}";
        let good = sign(b"s3cret", body);
        assert!(verify_hmac(b"s3cret", body, &good));
        assert!(verify_hmac(b"s3cret", body, &good.to_uppercase()));
        assert!(!verify_hmac(b"s3cret", body, &good[1..]), "odd length");
        assert!(!verify_hmac(
            b"s3cret",
            body,
            &good.replace(|c: char| c.is_ascii_digit(), "g")
        ));
        assert!(!verify_hmac(b"s3cret", body, ""));
    }

    #[test]
    fn the_same_body_is_a_replay_within_the_window_only() {
        let replays = Replays::new();
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert!(replays.first(b"{\"after\":\"1\"}", t0));
        assert!(!replays.first(b"{\"after\":\"1\"}", t0 + Duration::from_secs(1)));
        assert!(replays.first(b"{\"after\":\"2\"}", t0 + Duration::from_secs(1)));
        assert!(
            !replays.first(
                b"{\"after\":\"1\"}",
                t0 + REPLAY_WINDOW - Duration::from_secs(1)
            ),
            "a replay does not extend the window"
        );
        assert!(replays.first(b"{\"after\":\"1\"}", t0 + REPLAY_WINDOW));
    }

    #[test]
    fn the_memory_is_bounded() {
        let replays = Replays::new();
        let now = Timestamp::now();
        for i in 0..REMEMBERED_DELIVERIES + 1 {
            assert!(replays.first(i.to_string().as_bytes(), now));
        }
        assert_eq!(replays.0.lock().unwrap().len(), REMEMBERED_DELIVERIES);
        assert!(replays.first(b"0", now), "the oldest was forgotten");
    }
}
