//! The GitHub App side of the GitHub fake (`support/forge.rs`), from GitHub's documented App
//! API: `GET /repos/{owner}/{repo}/installation` and
//! `POST /app/installations/{id}/access_tokens` take a JWT signed RS256 by the App's key
//! (checked with its public key: issuer, `iat`, `exp` at most 10 minutes later), the token
//! answered expires after [`TOKEN_LIFE`], and every pull-request call must carry a token
//! issued here.
//!
//! The fake knows the daemon's (stepped) time only from the JWTs it signs (`iat` is 60 s
//! back), so it holds sluice to what makes an expired token impossible to send: each call
//! carries the newest token, and a token is replaced while it is still valid at the new JWT's
//! time. Anything else is written down in [`AppSide::problems`].

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use jiff::{SignedDuration, Timestamp};
use ring::signature::{UnparsedPublicKey, RSA_PKCS1_2048_8192_SHA256};
use serde_json::{json, Value};

/// The App id the settings name (`forge.githubApp.appId`).
pub(crate) const APP_ID: &str = "12345";
/// The installation of the App on `acme/fleet`.
pub(crate) const INSTALLATION: u64 = 42;
/// How long a token lives: an hour on GitHub, 5½ minutes here, so that sluice (which
/// replaces a token 5 minutes before it expires) needs a new one after 30 s of its clock.
const TOKEN_LIFE: SignedDuration = SignedDuration::from_secs(330);

/// What the fake GitHub saw of the App.
#[derive(Default)]
pub(crate) struct AppSide {
    /// The App's public key, PKCS#1 DER.
    public_der: Vec<u8>,
    /// The daemon's time as its newest JWT says (`iat` + 60 s).
    now: Option<Timestamp>,
    /// Every installation token issued, oldest first, with its expiry.
    pub(crate) issued: Vec<(String, Timestamp)>,
    /// Each pull-request call: `METHOD path` and the token it carried.
    pub(crate) calls: Vec<(String, String)>,
    /// Anything sluice must never do: an unknown, superseded or expired token sent, a token
    /// replaced only after it expired, a bad JWT.
    pub(crate) problems: Vec<String>,
}

pub(crate) type Shared = Arc<Mutex<AppSide>>;

impl AppSide {
    pub(crate) fn new(public_der: Vec<u8>) -> Shared {
        Arc::new(Mutex::new(AppSide {
            public_der,
            ..AppSide::default()
        }))
    }

    /// The daemon's time from the App JWT in `headers`, if it is one the App signed.
    fn jwt_time(&mut self, headers: &HeaderMap) -> Option<Timestamp> {
        let jwt = bearer(headers)?;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let (message, signature) = jwt.rsplit_once('.')?;
        let key = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &self.public_der);
        if key
            .verify(message.as_bytes(), &b64.decode(signature).ok()?)
            .is_err()
        {
            self.problems
                .push("a JWT not signed by the App's key".into());
            return None;
        }
        let (header, claims) = message.split_once('.')?;
        let decode =
            |part: &str| -> Option<Value> { serde_json::from_slice(&b64.decode(part).ok()?).ok() };
        let (header, claims) = (decode(header)?, decode(claims)?);
        let (iat, exp) = (claims["iat"].as_i64()?, claims["exp"].as_i64()?);
        if header["alg"] != "RS256" || claims["iss"] != APP_ID || exp <= iat || exp - iat > 600 {
            self.problems
                .push(format!("a JWT GitHub refuses: {claims}"));
            return None;
        }
        let now = Timestamp::from_second(iat + 60).ok()?;
        self.now = self.now.max(Some(now));
        Some(now)
    }

    /// A new installation token at the JWT's time `now`, valid [`TOKEN_LIFE`].
    fn issue(&mut self, now: Timestamp) -> (String, Timestamp) {
        if let Some((token, expires)) = self.issued.last() {
            if now >= *expires {
                self.problems
                    .push(format!("{token} replaced only after it expired"));
            }
        }
        let token = format!("ghs_fake{}", self.issued.len() + 1);
        let expires = now + TOKEN_LIFE;
        self.issued.push((token.clone(), expires));
        (token, expires)
    }

    /// Whether a pull-request call carrying `headers` may go on; writes down what is wrong.
    fn admit(&mut self, call: String, headers: &HeaderMap) -> bool {
        let token = bearer(headers).unwrap_or_default().to_string();
        self.admit_token(call, token)
    }

    /// Whether a call carrying installation token `token` may go on: the newest token,
    /// unexpired at the newest JWT's time; writes down what is wrong.
    fn admit_token(&mut self, call: String, token: String) -> bool {
        let newest = self.issued.len();
        let problem = match self.issued.iter().position(|(t, _)| *t == token) {
            None => Some(format!("{call}: a token never issued")),
            Some(i) if self.now >= Some(self.issued[i].1) => {
                Some(format!("{call}: {token}, expired"))
            }
            Some(i) if i + 1 < newest => Some(format!("{call}: {token}, superseded")),
            Some(_) => None,
        };
        self.calls.push((call, token));
        match problem {
            Some(p) => {
                self.problems.push(p);
                false
            }
            None => true,
        }
    }
}

/// What a git server (`git http-backend`, see `e2e/git_server.rs`) lets in with the App:
/// `Authorization: Basic` of user `x-access-token` and the newest unexpired installation
/// token, as GitHub's git over https takes it. Each request is one of [`AppSide::calls`]
/// (`git <n>`); a request without credentials is answered 401 (git asks again with them), a
/// wrong token is written down as a problem.
pub(crate) fn git_authorize(app: &Shared) -> crate::support::Authorize {
    let app = Arc::clone(app);
    Arc::new(move |header: Option<&str>| {
        let Some(header) = header else {
            return false;
        };
        let decoded = header
            .strip_prefix("Basic ")
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let mut app = app.lock().unwrap();
        let call = format!("git {}", app.calls.len() + 1);
        match decoded.split_once(':') {
            Some(("x-access-token", token)) => app.admit_token(call, token.to_string()),
            _ => {
                app.problems
                    .push(format!("{call}: not x-access-token basic auth: {header}"));
                false
            }
        }
    })
}

/// The `Authorization` token, after `Bearer ` or `token `.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get("authorization")?.to_str().ok()?;
    value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("token "))
}

fn unauthorized() -> (StatusCode, Json<Value>) {
    let message = json!({"message": "Bad credentials"});
    (StatusCode::UNAUTHORIZED, Json(message))
}

async fn installation(State(app): State<Shared>, headers: HeaderMap) -> (StatusCode, Json<Value>) {
    match app.lock().unwrap().jwt_time(&headers) {
        Some(_) => (StatusCode::OK, Json(json!({"id": INSTALLATION}))),
        None => unauthorized(),
    }
}

async fn access_tokens(
    State(app): State<Shared>,
    UrlPath(id): UrlPath<u64>,
    headers: HeaderMap,
) -> (StatusCode, Json<Value>) {
    let mut app = app.lock().unwrap();
    let Some(now) = app.jwt_time(&headers) else {
        return unauthorized();
    };
    if id != INSTALLATION {
        return (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"})));
    }
    let (token, expires) = app.issue(now);
    let answer = json!({"token": token, "expires_at": expires.to_string(),
        "permissions": {"contents": "write", "pull_requests": "write", "metadata": "read"}});
    (StatusCode::CREATED, Json(answer))
}

/// In front of the pull-request routes: only the newest unexpired installation token passes.
async fn installation_token_only(State(app): State<Shared>, req: Request, next: Next) -> Response {
    let call = format!("{} {}", req.method(), req.uri().path());
    if app.lock().unwrap().admit(call, req.headers()) {
        next.run(req).await
    } else {
        unauthorized().into_response()
    }
}

/// `routes` (the pull-request API) behind installation tokens, with the App endpoints.
pub(crate) fn with_app(routes: Router, app: &Shared) -> Router {
    let guard = axum::middleware::from_fn_with_state(Arc::clone(app), installation_token_only);
    let app_routes = Router::new()
        .route("/repos/{owner}/{repo}/installation", get(installation))
        .route("/app/installations/{id}/access_tokens", post(access_tokens))
        .with_state(Arc::clone(app));
    routes.route_layer(guard).merge(app_routes)
}

/// A fresh 2048-bit RSA key made by `openssl genrsa` in `dir`, as GitHub hands one out
/// (PKCS#1 PEM), and its public half as PKCS#1 DER.
pub(crate) fn generated_key(dir: &Path) -> (String, Vec<u8>) {
    let pem = dir.join("app.pem");
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let path = pem.to_str().unwrap();
    openssl(&["genrsa", "-traditional", "-out", path, "2048"]);
    let der = openssl(&["rsa", "-in", path, "-RSAPublicKey_out", "-outform", "DER"]);
    (std::fs::read_to_string(&pem).unwrap(), der)
}
