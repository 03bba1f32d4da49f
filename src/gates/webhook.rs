//! Flagger-compatible webhook calls: `POST` a JSON payload, read the answer.
//!
//! The payload is Flagger's `CanaryWebhookPayload`: `name`, `namespace`, `phase`, `checksum`
//! and, when not empty, `metadata` (the hook's `metadata` merged over the caller's; for event
//! hooks the caller's `eventMessage`/`eventType`/`timestamp` win, as in Flagger). A hook passes
//! when it answers with a status of at most 202 (Flagger's rule, so `203` and `204` fail).
//!
//! Retries follow Flagger's client (hashicorp go-retryablehttp): `retries` more attempts after
//! connection errors, timeouts, 429 and 5xx other than 501, waiting 1 s, 2 s, 4 s, ... (at most
//! 30 s; a 429/503 `Retry-After` in seconds is honoured up to that cap), run by `backon`. Other
//! statuses fail at once. The waits between attempts are the runtime's clock's (a test's
//! stepped clock jumps them); each attempt's `timeout` is network IO and stays the wall
//! clock's. Calls go out on the pooled
//! [`HttpClients`] the caller built once. The result is an observation for the core; nothing
//! here decides what a failure means.
//!
//! A failure's reason is sluice's own words (`HTTP 401 Unauthorized`), never the answer's
//! body: reasons are committed, and a hook may echo what it received. The body goes to the log
//! only, cut short with every credential redacted ([`crate::redact::answer`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};

use crate::clock::Clock;
use crate::core::observe::WebhookObservation;
use crate::core::status::Phase;
use crate::http_client::{self, HttpClients};
use crate::manifest::model::WebhookSpec;

/// Largest answer body read (only its start is logged).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// What every hook of one call receives; each hook adds its own `metadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookPayload {
    /// The canary's name and namespace.
    pub name: String,
    pub namespace: String,
    pub phase: Phase,
    /// Identifies the rolled-out configuration (sluice passes the source revision hash where
    /// Flagger hashes its tracked configs and last applied spec).
    pub checksum: String,
    /// Keys that hooks' own metadata cannot override (event hooks: `eventMessage`,
    /// `eventType`, `timestamp`). Empty for gate hooks.
    pub metadata: BTreeMap<String, String>,
}

#[derive(serde::Serialize)]
struct Body<'a> {
    name: &'a str,
    namespace: &'a str,
    phase: &'a str,
    checksum: &'a str,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    metadata: BTreeMap<&'a str, &'a str>,
}

impl WebhookPayload {
    /// The JSON body sent to one hook.
    pub fn body_for(&self, hook: &WebhookSpec) -> serde_json::Value {
        let mut metadata: BTreeMap<&str, &str> = hook
            .metadata
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        for (k, v) in &self.metadata {
            metadata.insert(k, v);
        }
        let body = Body {
            name: &self.name,
            namespace: &self.namespace,
            phase: self.phase.as_str(),
            checksum: &self.checksum,
            metadata,
        };
        serde_json::to_value(body).unwrap_or(serde_json::Value::Null)
    }
}

/// Waits between attempts: `min`, doubling, at most `max`; a server's `Retry-After` wins, up to
/// `max`. The schedule is backon's exponential backoff without jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub min: Duration,
    pub max: Duration,
}

impl Backoff {
    /// go-retryablehttp's defaults, which Flagger uses.
    pub const FLAGGER: Backoff = Backoff {
        min: Duration::from_secs(1),
        max: Duration::from_secs(30),
    };

    /// The waits before each of `retries` further attempts.
    fn schedule(&self, retries: u32) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.min.min(self.max))
            .with_max_delay(self.max)
            .with_factor(2.0)
            .with_max_times(retries as usize)
    }

    /// The wait before the next attempt: the server's `Retry-After` (capped at `max`) instead of
    /// the `scheduled` one; `None` (no attempts left) stays `None`.
    fn adjust(
        &self,
        retry_after: Option<Duration>,
        scheduled: Option<Duration>,
    ) -> Option<Duration> {
        scheduled.map(|wait| retry_after.map_or(wait, |d| d.min(self.max)))
    }
}

/// Calls every hook concurrently with Flagger's backoff, on the shared pooled clients,
/// waiting between attempts on `clock`; observations come back in `hooks` order.
pub async fn call_all(
    http: &HttpClients,
    hooks: &[&WebhookSpec],
    payload: &WebhookPayload,
    clock: &Arc<Clock>,
) -> Vec<WebhookObservation> {
    call_all_with(http, hooks, payload, Backoff::FLAGGER, clock).await
}

/// [`call_all`] with `backoff` (tests step a clock over Flagger's instead).
#[tracing::instrument(skip_all, fields(canary = %format_args!("{}/{}", payload.namespace, payload.name)))]
async fn call_all_with(
    http: &HttpClients,
    hooks: &[&WebhookSpec],
    payload: &WebhookPayload,
    backoff: Backoff,
    clock: &Arc<Clock>,
) -> Vec<WebhookObservation> {
    let handles: Vec<_> = hooks
        .iter()
        .map(|hook| {
            let hook = (*hook).clone();
            let body = payload.body_for(&hook);
            // Hooks with Flagger's `disableTLS` skip certificate checks.
            let client = http.get(hook.disable_tls).clone();
            let clock = Arc::clone(clock);
            tokio::spawn(async move { call_one(&client, &hook, &body, backoff, clock).await })
        })
        .collect();
    let mut out = Vec::with_capacity(handles.len());
    for (hook, handle) in hooks.iter().zip(handles) {
        let outcome = handle
            .await
            .unwrap_or_else(|e| Err(format!("webhook task failed: {e}")));
        out.push(WebhookObservation {
            name: hook.name.clone(),
            kind: hook.kind,
            outcome,
        });
    }
    out
}

/// Why one attempt failed; `retry` says whether another attempt may help, `retry_after` is the
/// server's requested wait.
struct Failure {
    reason: String,
    retry: bool,
    retry_after: Option<Duration>,
}

async fn call_one(
    client: &reqwest::Client,
    hook: &WebhookSpec,
    body: &serde_json::Value,
    backoff: Backoff,
    clock: Arc<Clock>,
) -> Result<(), String> {
    let mut attempts = 0u32;
    let result = (|| {
        attempts += 1;
        attempt_once(client, hook, body)
    })
    .retry(backoff.schedule(hook.retries))
    .sleep(move |wait| {
        let clock = Arc::clone(&clock);
        async move { clock.pause(wait).await }
    })
    .when(|f: &Failure| f.retry)
    .adjust(|f: &Failure, scheduled| backoff.adjust(f.retry_after, scheduled))
    .notify(|f: &Failure, wait: Duration| {
        tracing::debug!(hook = %hook.name, reason = %f.reason, ?wait, "webhook attempt failed; retrying");
    })
    .await;
    result.map_err(|f| {
        if attempts > 1 {
            format!("{} (after {attempts} attempts)", f.reason)
        } else {
            f.reason
        }
    })
}

async fn attempt_once(
    client: &reqwest::Client,
    hook: &WebhookSpec,
    body: &serde_json::Value,
) -> Result<(), Failure> {
    let timeout = hook.timeout;
    let timed_out = || Failure {
        reason: format!("timed out after {}", http_client::human_duration(timeout)),
        retry: true,
        retry_after: None,
    };
    let exchange = async {
        let response = client
            .post(&hook.url)
            .json(body)
            .timeout(timeout)
            .send()
            .await?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = http_client::read_body(response, MAX_BODY_BYTES).await;
        Ok::<_, reqwest::Error>((status, retry_after, body))
    };
    let outcome = match tokio::time::timeout(timeout + Duration::from_secs(1), exchange).await {
        Err(_) => return Err(timed_out()),
        Ok(outcome) => outcome,
    };
    let (status, retry_after, body) = match outcome {
        Err(e) if e.is_timeout() => return Err(timed_out()),
        Err(e) => {
            // A bad URL or scheme does not get better by retrying; the network might.
            let retry = !(e.is_builder() || e.is_redirect());
            return Err(Failure {
                reason: http_client::describe(&e),
                retry,
                retry_after: None,
            });
        }
        Ok(parts) => parts,
    };
    let code = status.as_u16();
    if code <= 202 {
        // The answer counts even if its body could not be read whole.
        return Ok(());
    }
    let answer = match body {
        Ok(bytes) => crate::redact::answer(&bytes),
        Err(http_client::BodyError::TooLarge { .. }) => "(body too large)".to_string(),
        Err(http_client::BodyError::Transfer(e)) => {
            format!("(body unreadable: {})", http_client::describe(&e))
        }
    };
    tracing::info!(hook = %hook.name, status = code, %answer, "Webhook answered no");
    let reason = match status.canonical_reason() {
        Some(reason) => format!("HTTP {code} {reason}"),
        None => format!("HTTP {code}"),
    };
    Err(Failure {
        reason,
        retry: code == 429 || (code >= 500 && code != 501),
        retry_after: if code == 429 || code == 503 {
            retry_after
        } else {
            None
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::model::WebhookKind;

    fn hook(metadata: &[(&str, &str)]) -> WebhookSpec {
        WebhookSpec {
            name: "load-test".into(),
            kind: WebhookKind::Rollout,
            url: "http://127.0.0.1:1/".into(),
            timeout: Duration::from_secs(10),
            retries: 0,
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            disable_tls: false,
        }
    }

    fn payload() -> WebhookPayload {
        WebhookPayload {
            name: "podinfo".into(),
            namespace: "test".into(),
            phase: Phase::Progressing,
            checksum: "abc123".into(),
            metadata: BTreeMap::new(),
        }
    }

    #[test]
    fn body_has_flaggers_field_names_and_omits_empty_metadata() {
        assert_eq!(
            payload().body_for(&hook(&[])),
            serde_json::json!({"name": "podinfo", "namespace": "test", "phase": "Progressing", "checksum": "abc123"})
        );
        assert_eq!(
            payload().body_for(&hook(&[("cmd", "hey -z 1m")]))["metadata"],
            serde_json::json!({"cmd": "hey -z 1m"})
        );
    }

    #[test]
    fn event_keys_win_over_hook_metadata() {
        let mut p = payload();
        p.metadata.insert("eventType".into(), "Normal".into());
        let body = p.body_for(&hook(&[("eventType", "mine"), ("team", "a")]));
        assert_eq!(
            body["metadata"],
            serde_json::json!({"eventType": "Normal", "team": "a"})
        );
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_and_honours_retry_after() {
        use backon::BackoffBuilder;
        let b = Backoff::FLAGGER;
        let secs = Duration::from_secs;
        let waits: Vec<Duration> = b.schedule(7).build().collect();
        assert_eq!(
            waits,
            [
                secs(1),
                secs(2),
                secs(4),
                secs(8),
                secs(16),
                secs(30),
                secs(30)
            ]
        );
        assert_eq!(b.schedule(0).build().next(), None);
        assert_eq!(b.adjust(Some(secs(7)), Some(secs(1))), Some(secs(7)));
        assert_eq!(b.adjust(Some(secs(3600)), Some(secs(1))), Some(secs(30)));
        assert_eq!(b.adjust(None, Some(secs(4))), Some(secs(4)));
        // No attempts left: a Retry-After does not buy another one.
        assert_eq!(b.adjust(Some(secs(7)), None), None);
    }
}
