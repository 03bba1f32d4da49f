//! The daemon's HTTP endpoints: `/healthz`, `/readyz`, `/metrics` and `POST /hooks/git`.
//!
//! The server only reports and wakes: the loop records what it did through [`Metrics`], marks
//! readiness with [`ServerState::set_ready`], and waits on [`ServerState::woken`] to start a
//! tick early when a forge reports a push. Nothing here reads git, decides or writes; a webhook
//! body is only authenticated, never trusted for content (the loop fetches and looks itself).
//!
//! The server must never starve the loop: it holds at most [`Limits::max_connections`]
//! connections (more are closed at once, so a flood of idle sockets cannot use up the
//! process's file descriptors that git and the tick need), a client gets
//! [`Limits::header_timeout`] to send a request's headers (so half-open and idle connections
//! go) and [`Limits::request_timeout`] for the whole request. A delivery a forge already
//! delivered (same delivery id) is answered but wakes nothing, and wake-ups coalesce: however
//! many arrive while one is pending, the loop sees one.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use hashlink::LruCache;
use hmac::{Hmac, KeyInit, Mac};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::{watch, Notify, Semaphore};
use tracing::{debug, info, warn};

/// Environment variable holding the shared webhook secret.
pub const WEBHOOK_SECRET_ENV: &str = "SLUICE_WEBHOOK_SECRET";

/// Largest webhook body accepted (GitHub caps payloads at 25 MB; push and pull-request
/// payloads are far smaller, and the body is buffered before it is authenticated).
pub const MAX_WEBHOOK_BODY: usize = 5 * 1024 * 1024;

/// Delivery ids remembered to refuse replays: far more than a forge delivers between two
/// ticks, little memory (an id is a UUID).
pub const REMEMBERED_DELIVERIES: usize = 4096;

/// Headers carrying a forge's delivery id (GitHub, Gitea/Forgejo, GitLab).
const DELIVERY_HEADERS: [&str; 3] = [
    "x-github-delivery",
    "x-gitea-delivery",
    "x-gitlab-event-uuid",
];

/// What one client may hold of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; one more is closed as soon as it is accepted. Probes,
    /// scrapes and webhooks need a handful; this keeps the server's file descriptors far
    /// below a process's usual limit of 1024.
    pub max_connections: usize,
    /// Time to send a request's headers, from the connection's start or the previous
    /// response: a connection that sends nothing is closed.
    pub header_timeout: Duration,
    /// Time to read a request's body and answer it.
    pub request_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 128,
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
        }
    }
}

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CanaryLabels {
    namespace: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    namespace: String,
    name: String,
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    kind: String,
}

struct MetricsInner {
    registry: Registry,
    weight: Family<CanaryLabels, Gauge>,
    phase: Family<PhaseLabels, Gauge>,
    failed_checks: Family<CanaryLabels, Gauge>,
    analysis_seconds: Family<CanaryLabels, Gauge<f64, AtomicU64>>,
    ticks: Counter,
    push_retries: Counter,
    errors: Family<ErrorLabels, Counter>,
    /// Last phase recorded per canary, so its series can be set back to 0.
    phases: Mutex<HashMap<(String, String), String>>,
}

/// sluice's Prometheus metrics; cheap to clone, shared by the loop and the server.
#[derive(Clone)]
pub struct Metrics(Arc<MetricsInner>);

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// `sluice_http_connections_opened_total{endpoint}`, read from the pooled clients at scrape time.
#[derive(Debug)]
struct HttpConnections(crate::http_client::Endpoints);

impl Collector for HttpConnections {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let opened = self.0.connections_opened();
        if opened.is_empty() {
            return Ok(());
        }
        let mut family = encoder.encode_descriptor(
            "http_connections_opened",
            "Connections opened by the pooled HTTP client of each Prometheus endpoint",
            None,
            MetricType::Counter,
        )?;
        for (endpoint, count) in opened {
            let labels = [("endpoint", endpoint)];
            ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::build(None)
    }

    /// The metrics, plus the connections `endpoints`' pooled clients opened
    /// (`sluice_http_connections_opened_total{endpoint="http://prom:9090"}`).
    pub fn with_connections(endpoints: crate::http_client::Endpoints) -> Metrics {
        Metrics::build(Some(endpoints))
    }

    fn build(endpoints: Option<crate::http_client::Endpoints>) -> Metrics {
        let mut registry = Registry::with_prefix("sluice");
        if let Some(endpoints) = endpoints {
            registry.register_collector(Box::new(HttpConnections(endpoints)));
        }
        let weight = Family::<CanaryLabels, Gauge>::default();
        let phase = Family::<PhaseLabels, Gauge>::default();
        let failed_checks = Family::<CanaryLabels, Gauge>::default();
        let analysis_seconds = Family::<CanaryLabels, Gauge<f64, AtomicU64>>::default();
        let ticks = Counter::default();
        let push_retries = Counter::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "canary_weight",
            "Traffic weight routed to the canary (percent)",
            weight.clone(),
        );
        registry.register(
            "canary_phase",
            "Canary phase: 1 for the current phase, 0 for phases it was in before",
            phase.clone(),
        );
        registry.register(
            "canary_failed_checks",
            "Failed checks counted toward the canary's threshold",
            failed_checks.clone(),
        );
        registry.register(
            "canary_analysis_seconds",
            "Time spent on the canary's current analysis (seconds)",
            analysis_seconds.clone(),
        );
        registry.register(
            "reconcile_ticks",
            "Passes of the reconcile loop over all canaries",
            ticks.clone(),
        );
        registry.register(
            "push_retries",
            "Pushes retried after the remote rejected them (non-fast-forward)",
            push_retries.clone(),
        );
        registry.register("errors", "Errors by kind", errors.clone());
        Metrics(Arc::new(MetricsInner {
            registry,
            weight,
            phase,
            failed_checks,
            analysis_seconds,
            ticks,
            push_retries,
            errors,
            phases: Mutex::new(HashMap::new()),
        }))
    }

    /// Records one canary's state after a tick.
    pub fn record_canary(
        &self,
        namespace: &str,
        name: &str,
        phase: &str,
        weight: u8,
        failed: u32,
        analysis_secs: f64,
    ) {
        let m = &self.0;
        let canary = CanaryLabels {
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        m.weight.get_or_create(&canary).set(i64::from(weight));
        m.failed_checks
            .get_or_create(&canary)
            .set(i64::from(failed));
        let secs = if analysis_secs.is_finite() {
            analysis_secs
        } else {
            0.0
        };
        m.analysis_seconds.get_or_create(&canary).set(secs);
        let previous = match m.phases.lock() {
            Ok(mut phases) => {
                phases.insert((namespace.to_string(), name.to_string()), phase.to_string())
            }
            // A panic elsewhere while holding the lock: still record the new phase.
            Err(poisoned) => poisoned
                .into_inner()
                .insert((namespace.to_string(), name.to_string()), phase.to_string()),
        };
        if let Some(previous) = previous.filter(|p| p != phase) {
            m.phase
                .get_or_create(&PhaseLabels {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    phase: previous,
                })
                .set(0);
        }
        m.phase
            .get_or_create(&PhaseLabels {
                namespace: namespace.to_string(),
                name: name.to_string(),
                phase: phase.to_string(),
            })
            .set(1);
    }

    /// Counts one pass of the loop.
    pub fn tick(&self) {
        self.0.ticks.inc();
    }

    /// Counts `n` push retries.
    pub fn push_retry(&self, n: u32) {
        self.0.push_retries.inc_by(u64::from(n));
    }

    /// Counts one error of `kind` (e.g. `fetch`, `push`, `spec`, `metrics`, `sync`).
    pub fn error(&self, kind: &str) {
        self.0
            .errors
            .get_or_create(&ErrorLabels {
                kind: kind.to_string(),
            })
            .inc();
    }

    /// The registry in the OpenMetrics text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.0.registry)?;
        Ok(out)
    }
}

/// What the handlers share with the loop.
#[derive(Clone)]
pub struct ServerState {
    metrics: Metrics,
    ready: Arc<AtomicBool>,
    wake: Arc<Notify>,
    webhook_secret: Option<Arc<[u8]>>,
    /// Delivery ids of authenticated webhooks, the oldest forgotten first.
    deliveries: Arc<Mutex<LruCache<String, ()>>>,
}

impl ServerState {
    /// `webhook_secret`: the shared secret forges sign with; `None` (or empty) disables
    /// `/hooks/git`.
    pub fn new(metrics: Metrics, webhook_secret: Option<String>) -> ServerState {
        ServerState {
            metrics,
            ready: Arc::new(AtomicBool::new(false)),
            wake: Arc::new(Notify::new()),
            webhook_secret: webhook_secret
                .filter(|s| !s.is_empty())
                .map(|s| Arc::from(s.into_bytes())),
            deliveries: Arc::new(Mutex::new(LruCache::new(REMEMBERED_DELIVERIES))),
        }
    }

    /// Records a delivery id; `false` when it was seen already (a replay or a forge's
    /// redelivery of an event the loop already heard of).
    fn first_delivery(&self, id: &str) -> bool {
        let mut seen = match self.deliveries.lock() {
            Ok(seen) => seen,
            Err(poisoned) => poisoned.into_inner(),
        };
        seen.insert(id.to_string(), ()).is_none()
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Marks the daemon ready (call after the first successful fetch).
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }

    /// Marks the daemon not ready (a tick failed: the config repo could not be fetched or
    /// pushed).
    pub fn set_not_ready(&self) {
        self.ready.store(false, Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// Resolves at the next authenticated webhook (or at once if one arrived since the last
    /// wait: the wake-up is stored, never lost between two waits).
    pub async fn woken(&self) {
        self.wake.notified().await;
    }

    /// The wake-up channel itself, for callers that select on it.
    pub fn wake_handle(&self) -> Arc<Notify> {
        Arc::clone(&self.wake)
    }
}

/// The routes, for tests or embedding; every request answered within `request_timeout`.
pub fn router(state: ServerState, request_timeout: Duration) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/hooks/git", post(git_hook))
        .layer(DefaultBodyLimit::max(MAX_WEBHOOK_BODY))
        .layer(axum::middleware::from_fn(
            move |req: Request, next: Next| within(request_timeout, req, next),
        ))
        .with_state(state)
}

/// Answers 408 when reading the body and answering take longer than `limit`.
async fn within(limit: Duration, req: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => (StatusCode::REQUEST_TIMEOUT, "request took too long\n").into_response(),
    }
}

/// Serves with the default [`Limits`] until `shutdown` resolves, then finishes the requests
/// in flight.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: ServerState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, state, Limits::default(), shutdown).await
}

/// Serves within `limits` until `shutdown` resolves, then finishes the requests in flight
/// (each within the request timeout) and closes idle connections.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    state: ServerState,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        info!(%addr, "HTTP server listening");
    }
    let app = router(state.clone(), limits.request_timeout);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (closing, closed) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            // Out of file descriptors or a connection reset before it was accepted: the
            // listener itself is fine; wait a little rather than spin.
            Err(e) => {
                warn!(error = %e, "Cannot accept an HTTP connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            debug!("HTTP connection limit reached; closing a new connection");
            state.metrics.error("http_connection_limit");
            drop(stream);
            continue;
        };
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout);
        let connection =
            builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let mut closed = closed.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        debug!(error = %e, "HTTP connection ended");
                    }
                }
                _ = closed.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    let _ = closing.send(true);
    // Every slot back: each connection finished its request (bounded by the timeouts).
    let _ = slots.acquire_many(limits.max_connections as u32).await;
    Ok(())
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<ServerState>) -> Response {
    if state.is_ready() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the config repo has not been fetched yet, or the last tick failed\n",
        )
            .into_response()
    }
}

async fn metrics(State(state): State<ServerState>) -> Response {
    match state.metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, OPENMETRICS)], text).into_response(),
        Err(_) => {
            state.metrics.error("metrics_encode");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "could not encode metrics\n",
            )
                .into_response()
        }
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

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
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
        // Compare digests so neither the secret's length nor its content leaks through timing.
        let given = Sha256::digest(token.as_bytes());
        let expected = Sha256::digest(secret);
        return bool::from(given.as_slice().ct_eq(expected.as_slice()))
            .then_some(Auth::GitlabToken)
            .ok_or("X-Gitlab-Token does not match");
    }
    Err("no X-Hub-Signature-256, X-Gitea-Signature or X-Gitlab-Token header")
}

fn verify_hmac(secret: &[u8], body: &[u8], signature: &str) -> bool {
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

async fn git_hook(State(state): State<ServerState>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(secret) = state.webhook_secret.as_deref() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "webhooks are disabled: no secret is configured. Set {WEBHOOK_SECRET_ENV} \
                 (e.g. from the sluice-credentials Secret) and give the forge's webhook the same \
                 secret (GitHub/Gitea: \"Secret\", GitLab: \"Secret token\")\n"
            ),
        )
            .into_response();
    };
    let auth = match authenticate(&headers, &body, secret) {
        Ok(auth) => auth,
        Err(why) => {
            warn!(reason = why, "Rejected git webhook");
            state.metrics.error("webhook_auth");
            return (StatusCode::UNAUTHORIZED, format!("unauthorized: {why}\n")).into_response();
        }
    };
    let event = header_str(&headers, "x-github-event")
        .or_else(|| header_str(&headers, "x-gitea-event"))
        .or_else(|| header_str(&headers, "x-gitlab-event"))
        .unwrap_or("unknown");
    if event == "ping" {
        return (StatusCode::OK, "pong\n").into_response();
    }
    // Recorded only once authenticated, so unsigned requests cannot fill the memory.
    let delivery = DELIVERY_HEADERS
        .iter()
        .find_map(|name| header_str(&headers, name));
    if let Some(id) = delivery {
        if !state.first_delivery(id) {
            info!(event, delivery = id, "Git webhook delivered again; ignored");
            return (
                StatusCode::OK,
                "already received: this delivery was handled\n",
            )
                .into_response();
        }
    }
    info!(event, auth = ?auth, delivery, "Git webhook received, waking the loop");
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
    fn phase_series_switch_to_the_current_phase() {
        let m = Metrics::new();
        m.record_canary("prod", "podinfo", "Progressing", 20, 1, 30.0);
        m.record_canary("prod", "podinfo", "Promoting", 0, 0, f64::NAN);
        let text = m.encode().unwrap();
        assert!(text.contains(
            "sluice_canary_phase{namespace=\"prod\",name=\"podinfo\",phase=\"Progressing\"} 0"
        ));
        assert!(text.contains(
            "sluice_canary_phase{namespace=\"prod\",name=\"podinfo\",phase=\"Promoting\"} 1"
        ));
        assert!(text
            .contains("sluice_canary_analysis_seconds{namespace=\"prod\",name=\"podinfo\"} 0.0"));
    }
}
