//! `POST /hooks/<forge>`: a forge's pull-request and review events, authenticated the forge's
//! way (one module per forge), then only used to wake the loop early when the event names an
//! approval pull request (its source branch is one of sluice's `sluice/...` branches) and
//! says something that may change an approval: merged, closed, reopened, reviewed.
//!
//! As on `/hooks/git`, nothing in a body is trusted: the loop fetches and asks the forge's API
//! itself; the event only saves waiting for the next poll, which stays the fallback. The same
//! shared secret, body-size limit and replay memory serve both endpoints (`webhook.rs`), so a
//! bad signature is 401, an oversized body 413 and a replayed body wakes nothing here too.
//! Push events sent to `/hooks/<forge>` wake the loop as on `/hooks/git`.
//!
//! Each forge is one entry of [`HOOKS`] (its path, event header and way of authenticating)
//! and one module that reads its events and nothing else.

mod azure_devops;
mod bitbucket;
mod forgejo;
mod gitea;
mod github;
mod gitlab;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tracing::{info, warn};

use super::webhook::{
    already_received, delivery, disabled, first_delivery, header_str, refused, same_secret,
    verify_hmac, wake,
};
use super::ServerState;
use crate::gitops::APPROVAL_PREFIX;

/// How one forge's webhooks arrive: one line of [`HOOKS`].
pub(super) struct Hook {
    /// The path segment: `/hooks/<key>`.
    pub key: &'static str,
    /// The header naming the event (`X-GitHub-Event`, ...); `None` when the forge puts it in
    /// the body (Azure DevOps).
    pub event_header: Option<&'static str>,
    pub auth: Auth,
    /// Reads an authenticated body: `event` is the event header's value (empty without one).
    pub parse: fn(event: &str, body: &[u8]) -> Result<Event, String>,
}

/// How a forge proves a webhook comes from it, with the shared secret.
pub(super) enum Auth {
    /// `<header>: <prefix><hex HMAC-SHA256(secret, body)>`, in the first of `headers` sent.
    Hmac {
        headers: &'static [&'static str],
        prefix: &'static str,
    },
    /// The secret itself in `header` (GitLab's `X-Gitlab-Token`).
    Token { header: &'static str },
    /// HTTP basic authentication whose password is the secret; the user name is not checked
    /// (Azure DevOps asks for one, any will do).
    BasicPassword,
}

/// Every forge's hook, one entry each; `/hooks/git` keeps taking push events from any of them.
/// Forgejo still sends Gitea's headers too, so either signature header is taken from it.
pub(super) const HOOKS: [Hook; 6] = [
    Hook {
        key: "github",
        event_header: Some("x-github-event"),
        auth: Auth::Hmac {
            headers: &["x-hub-signature-256"],
            prefix: "sha256=",
        },
        parse: github::parse,
    },
    Hook {
        key: "gitlab",
        event_header: Some("x-gitlab-event"),
        auth: Auth::Token {
            header: "x-gitlab-token",
        },
        parse: gitlab::parse,
    },
    Hook {
        key: "gitea",
        event_header: Some("x-gitea-event"),
        auth: Auth::Hmac {
            headers: &["x-gitea-signature"],
            prefix: "",
        },
        parse: gitea::parse,
    },
    Hook {
        key: "forgejo",
        event_header: Some("x-forgejo-event"),
        auth: Auth::Hmac {
            headers: &["x-forgejo-signature", "x-gitea-signature"],
            prefix: "",
        },
        parse: forgejo::parse,
    },
    Hook {
        key: "bitbucket",
        event_header: Some("x-event-key"),
        auth: Auth::Hmac {
            headers: &["x-hub-signature"],
            prefix: "sha256=",
        },
        parse: bitbucket::parse,
    },
    Hook {
        key: "azure-devops",
        event_header: None,
        auth: Auth::BasicPassword,
        parse: azure_devops::parse,
    },
];

impl Auth {
    /// Checks a request against the shared `secret`, in constant time; the error says what
    /// did not match, never the secret.
    fn check(&self, headers: &HeaderMap, body: &[u8], secret: &[u8]) -> Result<(), String> {
        match self {
            Auth::Hmac {
                headers: names,
                prefix,
            } => {
                let Some((name, value)) = names
                    .iter()
                    .find_map(|name| header_str(headers, name).map(|value| (name, value)))
                else {
                    return Err(format!("no {} header", names.join(" or ")));
                };
                let hex = value
                    .strip_prefix(prefix)
                    .ok_or_else(|| format!("{name} must look like {prefix}<hex>"))?;
                verify_hmac(secret, body, hex)
                    .then_some(())
                    .ok_or_else(|| format!("{name} does not match the body"))
            }
            Auth::Token { header } => match headers.get(*header) {
                Some(token) if same_secret(token.as_bytes(), secret) => Ok(()),
                Some(_) => Err(format!("{header} does not match")),
                None => Err(format!("no {header} header")),
            },
            Auth::BasicPassword => basic_password(headers)
                .filter(|password| same_secret(password, secret))
                .map(|_| ())
                .ok_or_else(|| {
                    "no Authorization: Basic header whose password is the webhook secret".into()
                }),
        }
    }
}

/// The password of an `Authorization: Basic <base64 user:password>` header.
fn basic_password(headers: &HeaderMap) -> Option<Vec<u8>> {
    use base64::Engine;
    let encoded = header_str(headers, "authorization")?.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let colon = decoded.iter().position(|b| *b == b':')?;
    Some(decoded[colon + 1..].to_vec())
}

/// What an authenticated webhook says, as far as waking goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Event {
    /// The forge checks the endpoint.
    Ping,
    /// Commits were pushed: wake as `/hooks/git` does.
    Push,
    /// Something happened to a pull request.
    Pull(PullEvent),
    /// An event sluice has no use for (an issue comment, a label, ...): answered, nothing woken.
    Ignored,
}

/// A pull-request (GitLab: merge-request) event: the parts that say whether to wake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PullEvent {
    /// `owner/name` (GitLab: the project path, Azure DevOps: `project/repository`): compared
    /// with `forge.repository`, and logged.
    pub repository: String,
    /// GitLab's numeric project id, which `forge.repository` may give instead of the path.
    pub repository_id: Option<u64>,
    /// The number humans see (GitHub/Gitea `number`, GitLab `iid`, Bitbucket and Azure DevOps
    /// `id`).
    pub number: u64,
    /// The source branch, without `refs/heads/`.
    pub head: String,
    pub change: Change,
}

/// What the event says happened to the pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    Merged,
    /// Closed (declined, abandoned) without merging.
    Closed,
    Reopened,
    /// A review, an approval or its withdrawal, a comment.
    Reviewed,
    /// Opened, edited, new commits, labels: nothing an approval waits on.
    Other,
}

impl PullEvent {
    /// Whether the event may change an approval sluice waits on.
    fn wakes(&self) -> bool {
        self.head.starts_with(APPROVAL_PREFIX) && self.change != Change::Other
    }

    /// Whether the event is about `configured` (`forge.repository`): the same name, ASCII
    /// case aside (forges resolve names without regard to case), or GitLab's project id.
    fn is_about(&self, configured: &str) -> bool {
        self.repository.eq_ignore_ascii_case(configured)
            || self
                .repository_id
                .is_some_and(|id| id.to_string() == configured)
    }
}

/// The fields GitHub, Gitea and Forgejo put in their `pull_request` (and review) payloads
/// alike: `{action, pull_request: {number, merged, head: {ref}}, repository: {full_name}}`.
#[derive(Deserialize)]
pub(super) struct GithubLikePayload {
    #[serde(default)]
    pub action: String,
    pub pull_request: GithubLikePull,
    pub repository: FullName,
}

#[derive(Deserialize)]
pub(super) struct GithubLikePull {
    pub number: u64,
    #[serde(default)]
    pub merged: bool,
    pub head: BranchRef,
}

#[derive(Deserialize)]
pub(super) struct BranchRef {
    #[serde(rename = "ref")]
    pub name: String,
}

#[derive(Deserialize)]
pub(super) struct FullName {
    pub full_name: String,
}

impl GithubLikePayload {
    /// The event, with `change` read from the payload by the caller's rule.
    pub fn into_event(self, change: Change) -> Event {
        Event::Pull(PullEvent {
            repository: self.repository.full_name,
            repository_id: None,
            number: self.pull_request.number,
            head: self.pull_request.head.name,
            change,
        })
    }

    /// `pull_request` actions as GitHub and Gitea name them.
    pub fn pull_request_change(&self) -> Change {
        match self.action.as_str() {
            "closed" if self.pull_request.merged => Change::Merged,
            "closed" => Change::Closed,
            "reopened" => Change::Reopened,
            _ => Change::Other,
        }
    }
}

/// `body` as JSON of type `T`; the error names the field that did not fit.
pub(super) fn json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    let mut de = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        format!("at {path}: {}", e.into_inner())
    })
}

/// The answer to `/hooks/<forge>` for a forge sluice does not know.
fn unknown_forge(forge: &str) -> Response {
    let known: Vec<&str> = HOOKS.iter().map(|h| h.key).collect();
    (
        StatusCode::NOT_FOUND,
        format!(
            "no webhook /hooks/{forge}: expected /hooks/git (push events from any forge) or \
             /hooks/<forge> with <forge> one of {}\n",
            known.join(", ")
        ),
    )
        .into_response()
}

pub(super) async fn forge_hook(
    State(state): State<ServerState>,
    Path(forge): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(hook) = HOOKS.iter().find(|h| h.key == forge) else {
        return unknown_forge(&forge);
    };
    let Some(secret) = state.webhook_secret.clone() else {
        return disabled();
    };
    if let Err(why) = hook.auth.check(&headers, &body, &secret) {
        return refused(&state, &why);
    }
    let event = hook
        .event_header
        .and_then(|name| header_str(&headers, name))
        .unwrap_or_default();
    let parsed = match (hook.parse)(event, &body) {
        Ok(parsed) => parsed,
        Err(why) => {
            warn!(forge = hook.key, event, reason = %why, "Unreadable webhook");
            state.metrics.error("webhook_body");
            return (
                StatusCode::BAD_REQUEST,
                format!("cannot read this {} {event} event: {why}\n", hook.key),
            )
                .into_response();
        }
    };
    let delivery = delivery(&headers);
    match parsed {
        Event::Ping => (StatusCode::OK, "pong\n").into_response(),
        Event::Ignored => {
            (StatusCode::OK, "ignored: sluice does not use this event\n").into_response()
        }
        Event::Pull(pull) if !pull.wakes() => (
            StatusCode::OK,
            "ignored: not an approval pull request, or nothing an approval waits on\n",
        )
            .into_response(),
        Event::Push => {
            if !first_delivery(&state, &body, event, delivery) {
                return already_received();
            }
            info!(
                forge = hook.key,
                event, delivery, "Push webhook received, waking the loop"
            );
            wake(&state)
        }
        Event::Pull(pull) => {
            let configured = state.forge_repositories();
            if !configured.is_empty() && !configured.iter().any(|c| pull.is_about(c)) {
                let configured = configured.join(", ");
                info!(
                    forge = hook.key,
                    repository = %pull.repository,
                    configured = %configured,
                    number = pull.number,
                    delivery,
                    "Pull-request webhook about another repository, ignored"
                );
                return (
                    StatusCode::ACCEPTED,
                    format!(
                        "ignored: the event is about repository {}, sluice watches {configured} \
                         (forge.repository)\n",
                        pull.repository
                    ),
                )
                    .into_response();
            }
            if !first_delivery(&state, &body, event, delivery) {
                return already_received();
            }
            info!(
                forge = hook.key,
                repository = %pull.repository,
                number = pull.number,
                branch = %pull.head,
                change = ?pull.change,
                delivery,
                "Pull-request webhook received, waking the loop"
            );
            wake(&state)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One documented sample: its event header value, the body, what it says.
    pub(super) type Sample = (&'static str, &'static str, Event);

    pub(super) fn pull(repository: &str, number: u64, head: &str, change: Change) -> Event {
        Event::Pull(PullEvent {
            repository: repository.to_string(),
            repository_id: None,
            number,
            head: head.to_string(),
            change,
        })
    }

    fn hook(key: &str) -> &'static Hook {
        HOOKS.iter().find(|h| h.key == key).unwrap()
    }

    #[test]
    fn every_documented_sample_reads_as_expected() {
        let samples = [
            ("github", github::samples()),
            ("gitlab", gitlab::samples()),
            ("gitea", gitea::samples()),
            ("forgejo", forgejo::samples()),
            ("bitbucket", bitbucket::samples()),
            ("azure-devops", azure_devops::samples()),
        ];
        for (forge, list) in &samples {
            for (event, body, expected) in list {
                let got = (hook(forge).parse)(event, body.as_bytes());
                assert_eq!(got.as_ref(), Ok(expected), "{forge} {event}");
            }
        }
        for hook in &HOOKS {
            assert!(
                samples.iter().any(|(f, l)| *f == hook.key && !l.is_empty()),
                "{} has no sample",
                hook.key
            );
        }
    }

    /// The headers `forge` authenticates a `body` with under `secret`.
    fn signed(forge: &str, body: &[u8], secret: &str) -> HeaderMap {
        use base64::Engine;
        use hmac::{Hmac, KeyInit, Mac};
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(body);
        let hex = hex::encode(mac.finalize().into_bytes());
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("sluice:{secret}"));
        let (name, value) = match forge {
            "github" => ("x-hub-signature-256", format!("sha256={hex}")),
            "gitlab" => ("x-gitlab-token", secret.to_string()),
            "gitea" => ("x-gitea-signature", hex),
            "forgejo" => ("x-forgejo-signature", hex),
            "bitbucket" => ("x-hub-signature", format!("sha256={hex}")),
            "azure-devops" => ("authorization", format!("Basic {basic}")),
            other => panic!("no signing rule for {other}"),
        };
        let mut headers = HeaderMap::new();
        headers.insert(name, value.parse().unwrap());
        headers
    }

    #[test]
    fn each_forge_takes_its_own_signature_and_refuses_others() {
        let body = br#"{"action":"closed"}"#;
        for hook in &HOOKS {
            let check =
                |headers: &HeaderMap, body: &[u8]| hook.auth.check(headers, body, b"s3cret");
            assert_eq!(
                check(&signed(hook.key, body, "s3cret"), body),
                Ok(()),
                "{}",
                hook.key
            );
            assert!(
                check(&signed(hook.key, body, "other"), body).is_err(),
                "{}",
                hook.key
            );
            assert!(check(&HeaderMap::new(), body).is_err(), "{}", hook.key);
            let tampered = br#"{"action":"opened"}"#;
            let by_body = check(&signed(hook.key, body, "s3cret"), tampered);
            // GitLab and Azure DevOps send the secret itself, not a signature of the body.
            if !matches!(hook.key, "gitlab" | "azure-devops") {
                assert!(by_body.is_err(), "{}: a changed body", hook.key);
            }
            for other in HOOKS.iter().filter(|o| o.key != hook.key) {
                let theirs = signed(other.key, body, "s3cret");
                let same_header = matches!(
                    (hook.key, other.key),
                    ("gitea", "forgejo") | ("forgejo", "gitea")
                );
                if !same_header {
                    assert!(
                        check(&theirs, body).is_err(),
                        "{} took {}'s",
                        hook.key,
                        other.key
                    );
                }
            }
        }
    }

    #[test]
    fn bodies_that_do_not_fit_are_errors_not_panics() {
        for hook in &HOOKS {
            for event in [
                "",
                "pull_request",
                "Merge Request Hook",
                "pullrequest:fulfilled",
            ] {
                for body in ["", "{}", "[]", "null", "{\"pull_request\":1}", "\u{0}"] {
                    let got = (hook.parse)(event, body.as_bytes());
                    if let Ok(Event::Pull(_)) = got {
                        panic!("{} {event} {body:?}: {got:?}", hook.key);
                    }
                }
            }
        }
    }

    #[test]
    fn only_approval_branches_and_approval_changes_wake() {
        let event = |head: &str, change| PullEvent {
            repository: "a/b".into(),
            repository_id: None,
            number: 1,
            head: head.into(),
            change,
        };
        assert!(event("sluice/shop/web/promote", Change::Merged).wakes());
        assert!(event("sluice/shop/web/2", Change::Reviewed).wakes());
        assert!(!event("sluice/shop/web/2", Change::Other).wakes());
        assert!(!event("feature/x", Change::Merged).wakes());
    }

    #[test]
    fn an_event_is_about_the_configured_repository_only() {
        let event = |repository: &str, repository_id| PullEvent {
            repository: repository.into(),
            repository_id,
            number: 1,
            head: "sluice/shop/web/2".into(),
            change: Change::Merged,
        };
        assert!(event("acme/fleet", None).is_about("acme/fleet"));
        assert!(event("Acme/Fleet", None).is_about("acme/fleet"));
        assert!(!event("acme/fleet-fork", None).is_about("acme/fleet"));
        assert!(!event("evil/fleet", None).is_about("acme/fleet"));
        assert!(event("group/sub/fleet", Some(42)).is_about("42"));
        assert!(!event("group/sub/fleet", Some(42)).is_about("43"));
        assert!(!event("42", None).is_about("group/sub/fleet"));
    }

    #[test]
    fn the_keys_are_distinct_path_segments() {
        for (i, a) in HOOKS.iter().enumerate() {
            assert_ne!(a.key, "git", "/hooks/git is the push endpoint");
            assert!(a.key.chars().all(|c| c.is_ascii_lowercase() || c == '-'));
            assert!(HOOKS[i + 1..].iter().all(|b| b.key != a.key));
        }
    }
}
