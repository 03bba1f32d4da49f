//! The daemon's HTTP endpoints, on up to four listeners:
//!
//! - the main one: `POST /hooks/git` (pushes), `POST /hooks/<forge>` (pull-request events), `/metrics` unless it has a listener of its own (and
//!   `/healthz`, `/readyz`, kept for setups that probe it);
//! - the probe listener: `/healthz` and `/readyz` only, for the kubelet. It has its own
//!   connection budget, so a flood of connections to the main listener (which the cluster
//!   reaches through a Service) cannot fail the probes and get the pod restarted;
//! - `/metrics` alone, when `--metrics-listen` gives it an address of its own (so a
//!   NetworkPolicy can admit scrapes from the monitoring namespace and webhooks from the
//!   ingress's, each on its own port);
//! - the read-only dashboard, only where `--dashboard-listen` asks for it: its own listener,
//!   or the main one when told so by giving the main listener's address. It is never served
//!   on the webhook listener by default, since that is the one exposed through an ingress.
//!
//! The server only reports and wakes: the loop records what it did through [`Metrics`], marks
//! readiness with [`ServerState::set_ready`], and waits on [`ServerState::woken`] to start a
//! tick early when a forge reports a push. Nothing here reads git, decides or writes; a webhook
//! body is only authenticated, never trusted for content (the loop fetches and looks itself).
//!
//! The server must never starve the loop: each listener serves within its [`Limits`]
//! (`listener.rs`); a signed body delivered again is answered but wakes nothing
//! (`webhook.rs`), and wake-ups coalesce: however many arrive while one is pending, the loop
//! sees one. `/metrics` is encoded by `metrics.rs`.

mod dashboard;
mod listener;
mod metrics;
mod pr_events;
mod webhook;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::sync::Notify;

pub use dashboard::{DashboardState, CONTENT_SECURITY_POLICY};
pub use listener::Limits;
pub use metrics::Metrics;
pub use webhook::{MAX_WEBHOOK_BODY, REMEMBERED_DELIVERIES, REPLAY_WINDOW, WEBHOOK_SECRET_ENV};

use listener::serve_app;
use metrics::OPENMETRICS;
use pr_events::forge_hook;
use webhook::{git_hook, Replays};

/// What the handlers share with the loop.
#[derive(Clone)]
pub struct ServerState {
    metrics: Metrics,
    ready: Arc<AtomicBool>,
    wake: Arc<Notify>,
    webhook_secret: Option<Arc<[u8]>>,
    /// Bodies of authenticated webhooks, to refuse replays.
    replays: Replays,
    /// The runtime's clock: when a body was received, for the replay window.
    clock: Arc<crate::clock::Clock>,
    /// The read-only dashboard at `/` of the main listener, when told to serve it there.
    dashboard: Option<DashboardState>,
    /// Whether the main listener answers `/metrics` (false when it has a listener of its own).
    metrics_on_main: bool,
    /// What the last tick held for lack of a cluster, one line each (`/readyz` details).
    details: Arc<std::sync::Mutex<Vec<String>>>,
    /// Who holds each shard, one line each, as this replica last saw the Leases (`--shards`).
    shards: Arc<std::sync::Mutex<Vec<String>>>,
    /// The `forge.repository` of each config repo, as their last ticks read them; pull-request
    /// events about another repository wake nothing. Empty before the first tick and without a
    /// forge.
    forge_repositories: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ServerState {
    /// `webhook_secret`: the shared secret forges sign with; `None` (or empty) disables
    /// `/hooks/git`. `clock` is the runtime's.
    pub fn new(
        metrics: Metrics,
        webhook_secret: Option<String>,
        clock: Arc<crate::clock::Clock>,
    ) -> ServerState {
        ServerState {
            metrics,
            ready: Arc::new(AtomicBool::new(false)),
            wake: Arc::new(Notify::new()),
            webhook_secret: webhook_secret
                .filter(|s| !s.is_empty())
                .map(|s| Arc::from(s.into_bytes())),
            replays: Replays::new(),
            clock,
            dashboard: None,
            metrics_on_main: true,
            details: Arc::default(),
            shards: Arc::default(),
            forge_repositories: Arc::default(),
        }
    }

    /// Serves the dashboard (`/`, `/canaries/...`, `/api/v1/...`) on the main listener too
    /// (only when the operator gave the dashboard the main listener's address).
    pub fn with_dashboard(mut self, dashboard: DashboardState) -> ServerState {
        self.dashboard = Some(dashboard);
        self
    }

    /// `/metrics` is served on a listener of its own ([`serve_metrics`]), not the main one.
    pub fn without_metrics_on_main(mut self) -> ServerState {
        self.metrics_on_main = false;
        self
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

    /// Sets the `/readyz` details: the waves the last tick held because their cluster does
    /// not answer (each `NS/NAME: why`, naming the cluster). They do not make the daemon
    /// unready: restarting sluice would not bring a cluster back.
    pub fn set_details(&self, details: Vec<String>) {
        let mut held = self.details.lock().unwrap_or_else(|e| e.into_inner());
        *held = details;
    }

    /// Sets the `/readyz` lines of `--shards`: who holds each shard, as last seen.
    pub fn set_shards(&self, lines: Vec<String>) {
        let mut shards = self.shards.lock().unwrap_or_else(|e| e.into_inner());
        *shards = lines;
    }

    fn shards(&self) -> Vec<String> {
        let shards = self.shards.lock().unwrap_or_else(|e| e.into_inner());
        shards.clone()
    }

    /// Sets the `forge.repository` of the settings each repo's last tick read (one per
    /// repo that has a forge; several with `--repo` given several times).
    pub fn set_forge_repositories(&self, repositories: Vec<String>) {
        let mut held = self
            .forge_repositories
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *held = repositories;
    }

    fn forge_repositories(&self) -> Vec<String> {
        let held = self
            .forge_repositories
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        held.clone()
    }

    fn details(&self) -> Vec<String> {
        let held = self.details.lock().unwrap_or_else(|e| e.into_inner());
        held.clone()
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

/// The main routes (`/hooks/git`, `/metrics` unless it has its own listener, the probes too,
/// as before the probe listener, and the dashboard when the state has one), for tests or
/// embedding; every request answered within `request_timeout`.
pub fn router(state: ServerState, request_timeout: Duration) -> Router {
    let dashboard = state.dashboard.clone();
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz));
    let app = if state.metrics_on_main {
        app.route("/metrics", get(metrics))
    } else {
        app
    };
    let app = app
        .route("/hooks/git", post(git_hook))
        .route("/hooks/{forge}", post(forge_hook))
        .layer(DefaultBodyLimit::max(MAX_WEBHOOK_BODY))
        .with_state(state);
    let app = match dashboard {
        Some(d) => app.merge(dashboard::routes(d)),
        None => app,
    };
    app.layer(axum::middleware::from_fn(
        move |req: Request, next: Next| within(request_timeout, req, next),
    ))
}

/// `sluice dashboard`'s routes: the dashboard and `/healthz`, within `request_timeout`.
pub fn dashboard_router(state: DashboardState, request_timeout: Duration) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .merge(dashboard::routes(state))
        .layer(axum::middleware::from_fn(
            move |req: Request, next: Next| within(request_timeout, req, next),
        ))
}

/// Serves [`dashboard_router`] with the default [`Limits`] until `shutdown` resolves.
pub async fn serve_dashboard(
    listener: tokio::net::TcpListener,
    state: DashboardState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_dashboard_counted(listener, state, Metrics::new(), shutdown).await
}

/// [`serve_dashboard`], counting its connections in `metrics` (the daemon's own listener for
/// the dashboard reports with the others).
pub async fn serve_dashboard_counted(
    listener: tokio::net::TcpListener,
    state: DashboardState,
    metrics: Metrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = Limits::default();
    let app = dashboard_router(state, limits.request_timeout);
    serve_app(listener, app, metrics, limits, shutdown).await
}

/// The metrics listener's route: `/metrics` alone.
pub fn metrics_router(state: ServerState, request_timeout: Duration) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .layer(axum::middleware::from_fn(
            move |req: Request, next: Next| within(request_timeout, req, next),
        ))
        .with_state(state)
}

/// Serves [`metrics_router`] with the default [`Limits`] until `shutdown` resolves: `/metrics`
/// on an address of its own (`--metrics-listen`).
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    state: ServerState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = Limits::default();
    let app = metrics_router(state.clone(), limits.request_timeout);
    serve_app(listener, app, state.metrics, limits, shutdown).await
}

/// The probe listener's routes: `/healthz` and `/readyz` only.
pub fn probe_router(state: ServerState, request_timeout: Duration) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
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

/// Serves the main routes ([`router`]) with the default [`Limits`] until `shutdown`
/// resolves, then finishes the requests in flight.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: ServerState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, state, Limits::default(), shutdown).await
}

/// Serves the main routes within `limits` until `shutdown` resolves, then finishes the
/// requests in flight (each within the request timeout) and closes idle connections.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    state: ServerState,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(state.clone(), limits.request_timeout);
    serve_app(listener, app, state.metrics, limits, shutdown).await
}

/// Serves the probes ([`probe_router`]) within [`Limits::probes`] until `shutdown` resolves:
/// the kubelet's own listener, so nothing done to the main one can fail its probes.
pub async fn serve_probes(
    listener: tokio::net::TcpListener,
    state: ServerState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = Limits::probes();
    let app = probe_router(state.clone(), limits.request_timeout);
    serve_app(listener, app, state.metrics, limits, shutdown).await
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<ServerState>) -> Response {
    if state.is_ready() {
        let mut body = "ready\n".to_string();
        for line in state.details() {
            body.push_str(&format!("held: {line}\n"));
        }
        for line in state.shards() {
            body.push_str(&format!("{line}\n"));
        }
        (StatusCode::OK, body).into_response()
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
