//! The dashboard's routes: `/` (overview, `?namespace=&phase=`), `/canaries/{ns}/{name}`,
//! `/releases/{ns}/{name}` (a canary with waves), their live fragments under `/fragments/`,
//! the JSON API (`/api/v1/canaries`, `/api/v1/canaries/{ns}/{name}`,
//! `/api/v1/releases/{ns}/{name}`) and the embedded assets. Every answer carries a strict
//! Content-Security-Policy (scripts only from this server, no inline script or style, no
//! framing), `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`. With
//! `--dashboard-auth-file`, a request without the credentials gets 401 and no data.
//!
//! The model is read on a blocking thread (`crate::dashboard`, cached by head commit); these
//! handlers only choose the page and the status code.

use std::sync::Arc;

use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::dashboard::auth::Auth;
use crate::dashboard::pages::{self, Filter};
use crate::dashboard::{Dashboard, DashboardError};

/// The policy every dashboard answer carries.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; \
     base-uri 'none'; frame-ancestors 'none'";

/// What the dashboard's handlers share.
#[derive(Clone)]
pub struct DashboardState {
    pub dashboard: Dashboard,
    pub auth: Option<Arc<Auth>>,
}

/// The dashboard's routes, behind the authentication and headers layers.
pub fn routes(state: DashboardState) -> Router {
    let auth = state.auth.clone();
    Router::new()
        .route("/", get(overview_page))
        .route("/canaries/{namespace}/{name}", get(canary_page))
        .route("/fragments/overview", get(overview_fragment))
        .route(
            "/fragments/canaries/{namespace}/{name}",
            get(canary_fragment),
        )
        .route("/releases/{namespace}/{name}", get(release_page))
        .route(
            "/fragments/releases/{namespace}/{name}",
            get(release_fragment),
        )
        .route("/api/v1/releases/{namespace}/{name}", get(api_release))
        .route("/api/v1/canaries", get(api_overview))
        .route("/api/v1/canaries/{namespace}/{name}", get(api_canary))
        .route("/assets/dashboard.js", get(js))
        .route("/assets/dashboard.css", get(css))
        .layer(axum::middleware::from_fn(
            move |req: Request, next: Next| authenticate(auth.clone(), req, next),
        ))
        .layer(axum::middleware::from_fn(secure_headers))
        .with_state(state)
}

async fn secure_headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn authenticate(auth: Option<Arc<Auth>>, req: Request, next: Next) -> Response {
    let Some(auth) = auth else {
        return next.run(req).await;
    };
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if auth.admits(given) {
        return next.run(req).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, auth.challenge())],
        "credentials required\n",
    )
        .into_response()
}

/// Runs a blocking read of the model off the async workers.
async fn read<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, DashboardError> + Send + 'static,
) -> Result<T, Response> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(DashboardError::NotReady(why))) => Err(failure(
            StatusCode::SERVICE_UNAVAILABLE,
            "Not read yet",
            &format!("The config repo is not read yet ({why}); try again in a moment."),
        )),
        Ok(Err(DashboardError::Read(e))) => {
            tracing::warn!(error = %format!("{e:#}"), "Dashboard cannot read the config repo");
            Err(failure(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Cannot read the config repo",
                &format!("{e:#}"),
            ))
        }
        Err(_) => Err(failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal error",
            "the dashboard's reader stopped",
        )),
    }
}

fn failure(status: StatusCode, title: &str, message: &str) -> Response {
    match pages::error(title, message) {
        Ok(page) => (status, Html(page)).into_response(),
        Err(_) => (status, format!("{title}: {message}\n")).into_response(),
    }
}

fn html(page: anyhow::Result<String>) -> Response {
    match page {
        Ok(page) => Html(page).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "Dashboard page failed to render");
            (StatusCode::INTERNAL_SERVER_ERROR, "page failed to render\n").into_response()
        }
    }
}

fn not_found(namespace: &str, name: &str) -> Response {
    failure(
        StatusCode::NOT_FOUND,
        "No such canary",
        &format!("The repo has no canary {namespace}/{name}."),
    )
}

async fn overview_page(State(s): State<DashboardState>, Query(f): Query<Filter>) -> Response {
    let d = s.dashboard.clone();
    match read(move || d.overview()).await {
        Ok(o) => html(pages::overview(&o, &f)),
        Err(r) => r,
    }
}

async fn overview_fragment(State(s): State<DashboardState>, Query(f): Query<Filter>) -> Response {
    let d = s.dashboard.clone();
    match read(move || d.overview()).await {
        Ok(o) => html(pages::overview_fragment(&o, &f)),
        Err(r) => r,
    }
}

async fn api_overview(State(s): State<DashboardState>) -> Response {
    let d = s.dashboard.clone();
    match read(move || d.overview()).await {
        Ok(o) => Json(o.as_ref().clone()).into_response(),
        Err(r) => r,
    }
}

/// The canary's model with the head it was read at, or the error answer.
async fn detail(
    s: DashboardState,
    namespace: String,
    name: String,
) -> Result<(String, Arc<crate::dashboard::Detail>), Response> {
    let d = s.dashboard.clone();
    let (ns, n) = (namespace.clone(), name.clone());
    let (head, found) = read(move || {
        let head = d.overview()?.head.clone();
        Ok((head, d.canary(&ns, &n)?))
    })
    .await?;
    match found {
        Some(detail) => Ok((head, detail)),
        None => Err(not_found(&namespace, &name)),
    }
}

/// The answer of a page of one canary or release: its model (`found`, with the head it was
/// read at) shown by `show`, or the error answer.
fn answer<T>(
    found: Result<(String, T), Response>,
    show: impl FnOnce(&str, &T) -> Response,
) -> Response {
    match found {
        Ok((head, model)) => show(&head, &model),
        Err(r) => r,
    }
}

async fn canary_page(
    State(s): State<DashboardState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    answer(detail(s, namespace, name).await, |head, d| {
        html(pages::canary(head, d))
    })
}

async fn canary_fragment(
    State(s): State<DashboardState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    answer(detail(s, namespace, name).await, |head, d| {
        html(pages::canary_fragment(head, d))
    })
}

async fn api_canary(
    State(s): State<DashboardState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    answer(detail(s, namespace, name).await, |_, d| {
        Json(d.as_ref().clone()).into_response()
    })
}

/// The release's model with the head it was read at, or the error answer.
async fn release(
    s: DashboardState,
    namespace: String,
    name: String,
) -> Result<(String, crate::dashboard::model::ReleaseView), Response> {
    let d = s.dashboard.clone();
    let (ns, n) = (namespace.clone(), name.clone());
    let (head, found) = read(move || {
        let head = d.overview()?.head.clone();
        Ok((head, d.release(&ns, &n)?))
    })
    .await?;
    match found {
        Some(release) => Ok((head, release)),
        None => Err(failure(
            StatusCode::NOT_FOUND,
            "No such release",
            &format!("The repo has no canary with waves {namespace}/{name}."),
        )),
    }
}

async fn release_page(
    State(s): State<DashboardState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    answer(release(s, namespace, name).await, |head, r| {
        html(pages::release(head, r))
    })
}

async fn release_fragment(
    State(s): State<DashboardState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    answer(release(s, namespace, name).await, |head, r| {
        html(pages::release_fragment(head, r))
    })
}

async fn api_release(
    State(s): State<DashboardState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    answer(release(s, namespace, name).await, |_, r| {
        Json(r.clone()).into_response()
    })
}

async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        pages::JS,
    )
        .into_response()
}

async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        pages::CSS,
    )
        .into_response()
}
