//! Webhook calls against a real local HTTP server: Flagger's status rule, timeouts, retries
//! and the payload.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice::clock::Clock;
use sluice::core::observe::WebhookObservation;
use sluice::core::status::Phase;
use sluice::gates::webhook::{call_all, WebhookPayload};
use sluice::http_client::HttpClients;
use sluice::manifest::model::{WebhookKind, WebhookSpec};

use crate::support::metrics::{closed_port_url, Canned, Server};

/// A stepped clock (`SLUICE_CLOCK=stepped`, as the runtime builds it): Flagger's waits of
/// 1 s, 2 s, 4 s ... between attempts are jumped, not waited, and the clock moves by them.
fn stepped() -> Arc<Clock> {
    Arc::new(Clock::named(Some("stepped")).expect("a stepped clock"))
}

fn hook(name: &str, url: &str) -> WebhookSpec {
    WebhookSpec {
        name: name.into(),
        kind: WebhookKind::PreRollout,
        url: url.into(),
        timeout: Duration::from_secs(5),
        retries: 0,
        metadata: BTreeMap::new(),
        disable_tls: false,
    }
}

fn clients() -> HttpClients {
    HttpClients::new().expect("clients")
}

fn payload() -> WebhookPayload {
    WebhookPayload {
        name: "podinfo".into(),
        namespace: "test".into(),
        phase: Phase::Progressing,
        checksum: "7d1f9c".into(),
        metadata: BTreeMap::new(),
    }
}

async fn outcome_for(canned: Vec<Canned>, retries: u32) -> (Result<(), String>, usize) {
    let server = Server::start(canned).await;
    let mut h = hook("h", &server.url());
    h.retries = retries;
    let obs = call_all(&clients(), &[&h], &payload(), &stepped()).await;
    (obs[0].outcome.clone(), server.requests().len())
}

#[tokio::test]
async fn status_up_to_202_passes_like_flagger() {
    for status in [200, 201, 202] {
        let (outcome, _) = outcome_for(vec![Canned::new(status, "ok")], 0).await;
        assert_eq!(outcome, Ok(()), "{status}");
    }
}

#[tokio::test]
async fn status_above_202_fails_with_its_code_never_the_body() {
    // The body is the hook's text: it goes to the log (redacted), never into a commit.
    let (outcome, calls) = outcome_for(vec![Canned::new(400, "approval missing\n")], 3).await;
    assert_eq!(outcome, Err("HTTP 400 Bad Request".into()));
    assert_eq!(calls, 1, "4xx is not retried");
    // Flagger's rule is `status > 202`: a 204 No Content is a failure too.
    let (outcome, _) = outcome_for(vec![Canned::new(204, "")], 0).await;
    assert_eq!(outcome, Err("HTTP 204 No Content".into()));
}

#[tokio::test]
async fn server_errors_are_retried_then_reported() {
    let (outcome, calls) = outcome_for(vec![Canned::new(500, "boom")], 2).await;
    assert_eq!(
        outcome,
        Err("HTTP 500 Internal Server Error (after 3 attempts)".into())
    );
    assert_eq!(calls, 3);
    let (outcome, calls) = outcome_for(vec![Canned::new(500, "boom")], 0).await;
    assert_eq!(outcome, Err("HTTP 500 Internal Server Error".into()));
    assert_eq!(calls, 1);
}

#[tokio::test]
async fn retries_wait_flaggers_schedule_on_the_runtime_clock() {
    let server = Server::start(vec![Canned::new(503, "busy")]).await;
    let mut h = hook("h", &server.url());
    h.retries = 3;
    let clock = stepped();
    let (start, real) = (clock.now(), Instant::now());
    let obs = call_all(&clients(), &[&h], &payload(), &clock).await;
    assert_eq!(
        obs[0].outcome,
        Err("HTTP 503 Service Unavailable (after 4 attempts)".into())
    );
    assert_eq!(
        clock.now().duration_since(start),
        jiff::SignedDuration::from_secs(1 + 2 + 4),
        "go-retryablehttp's 1 s, 2 s, 4 s, on the clock"
    );
    assert!(
        real.elapsed() < Duration::from_secs(5),
        "{:?}",
        real.elapsed()
    );
}

#[tokio::test]
async fn a_retry_that_succeeds_passes() {
    let canned = vec![
        Canned::new(503, "warming up"),
        Canned::new(500, "still"),
        Canned::new(200, "ok"),
    ];
    let (outcome, calls) = outcome_for(canned, 2).await;
    assert_eq!(outcome, Ok(()));
    assert_eq!(calls, 3);
}

#[tokio::test]
async fn not_implemented_is_not_retried() {
    let (outcome, calls) = outcome_for(vec![Canned::new(501, "")], 3).await;
    assert_eq!(outcome, Err("HTTP 501 Not Implemented".into()));
    assert_eq!(calls, 1);
}

#[tokio::test]
async fn slow_hooks_time_out_and_are_retried() {
    let server = Server::start(vec![Canned::new(200, "late").delay(Duration::from_secs(5))]).await;
    let mut h = hook("slow", &server.url());
    h.timeout = Duration::from_millis(200);
    h.retries = 1;
    let obs = call_all(&clients(), &[&h], &payload(), &stepped()).await;
    assert_eq!(
        obs[0].outcome,
        Err("timed out after 200ms (after 2 attempts)".into())
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn unreachable_hooks_fail_with_the_reason() {
    let url = closed_port_url().await;
    let mut h = hook("gone", &url);
    h.retries = 1;
    let obs = call_all(&clients(), &[&h], &payload(), &stepped()).await;
    let reason = obs[0].outcome.clone().unwrap_err();
    assert!(reason.starts_with("cannot connect"), "{reason}");
    assert!(reason.ends_with("(after 2 attempts)"), "{reason}");
}

#[tokio::test]
async fn payload_has_flaggers_fields_and_the_hooks_metadata() {
    let server = Server::start(vec![Canned::new(200, "")]).await;
    let mut h = hook("load-test", &format!("{}/gate/check", server.url()));
    h.metadata = BTreeMap::from([
        ("type".to_string(), "cmd".to_string()),
        (
            "cmd".to_string(),
            "hey -z 1m -q 10 http://podinfo-canary.test:9898/".to_string(),
        ),
    ]);
    let plain = hook("plain", &server.url());
    let obs = call_all(&clients(), &[&h, &plain], &payload(), &stepped()).await;
    assert!(obs.iter().all(|o| o.outcome.is_ok()), "{obs:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(r.method, "POST");
        assert_eq!(r.header("content-type"), Some("application/json"));
    }
    let body_sent_to = |path: &str| {
        requests
            .iter()
            .find(|r| r.path() == path)
            .unwrap_or_else(|| panic!("no hook called at {path}: {requests:?}"))
            .json()
    };
    assert_eq!(
        body_sent_to("/gate/check"),
        serde_json::json!({
            "name": "podinfo",
            "namespace": "test",
            "phase": "Progressing",
            "checksum": "7d1f9c",
            "metadata": {"type": "cmd", "cmd": "hey -z 1m -q 10 http://podinfo-canary.test:9898/"}
        })
    );
    assert_eq!(
        body_sent_to("/"),
        serde_json::json!({"name": "podinfo", "namespace": "test", "phase": "Progressing", "checksum": "7d1f9c"})
    );
}

#[tokio::test]
async fn call_all_keeps_hook_order_and_kinds() {
    let ok = Server::start(vec![Canned::new(202, "").delay(Duration::from_millis(300))]).await;
    let bad = Server::start(vec![Canned::new(400, "no")]).await;
    let mut a = hook("a", &ok.url());
    a.kind = WebhookKind::ConfirmRollout;
    let b = hook("b", &bad.url());
    let mut c = hook("c", &ok.url());
    c.kind = WebhookKind::Rollout;
    let obs = call_all(&clients(), &[&a, &b, &c], &payload(), &stepped()).await;
    assert_eq!(
        obs,
        vec![
            WebhookObservation {
                name: "a".into(),
                kind: WebhookKind::ConfirmRollout,
                outcome: Ok(()),
            },
            WebhookObservation {
                name: "b".into(),
                kind: WebhookKind::PreRollout,
                outcome: Err("HTTP 400 Bad Request".into()),
            },
            WebhookObservation {
                name: "c".into(),
                kind: WebhookKind::Rollout,
                outcome: Ok(()),
            },
        ]
    );
}

#[tokio::test]
async fn bad_urls_fail_without_panicking() {
    let h = hook("bad", "http://exa mple.com/");
    let obs = call_all(&clients(), &[&h], &payload(), &stepped()).await;
    assert!(obs[0].outcome.is_err(), "{obs:?}");
}
