//! GitHub App authentication: the App's private key signs a JWT (RS256, `iat` 60 s in the
//! past against clock drift, `exp` 9 minutes ahead: GitHub refuses more than 10), the JWT buys
//! an installation access token (`POST /app/installations/{id}/access_tokens`), and that token
//! (one hour on github.com) authenticates the REST API and git over https (user
//! `x-access-token`). The installation is the one given, or found once with
//! `GET /repos/{owner}/{repo}/installation`.
//!
//! Tokens are cached with their `expires_at` and bought again [`REFRESH_MARGIN`] before it, by
//! the runtime's clock (`now` is passed in; a stepped clock steps through expiries in tests),
//! so a token that is about to expire is never handed out.
//!
//! The private key never leaves [`AppKey`] (its `Debug` shows nothing, errors never quote the
//! PEM), and neither the JWT nor a token is logged or put in an error.

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine;
use jiff::{SignedDuration, Timestamp};
use reqwest::header::{ACCEPT, AUTHORIZATION};
use reqwest::{Method, Url};
use ring::signature::{RsaKeyPair, RSA_PKCS1_SHA256};
use serde::Deserialize;

use super::ForgeToken;
use crate::http_client::read_body;

/// A token is bought again this long before it expires, so no request carries one that
/// expires on the way.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

/// How far in the past the JWT's `iat` is put (GitHub's advice, against clock drift).
const IAT_SKEW: i64 = 60;

/// The JWT's lifetime from `iat`: GitHub refuses more than 10 minutes.
const JWT_LIFETIME: i64 = 9 * 60;

/// Answers larger than this are refused.
const MAX_ANSWER: usize = 1 << 20;

/// Why the App could not get an installation token. Never holds the key, the JWT or a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppError {
    /// The private key is not a PEM RSA key GitHub issued.
    #[error("GitHub App private key: {0}; give the PEM file GitHub generated for the App (BEGIN RSA PRIVATE KEY, or BEGIN PRIVATE KEY)")]
    Key(String),
    /// GitHub answered a status that retrying will not fix.
    #[error("GitHub App: {what} answered {status}: {message}; {hint}")]
    Refused {
        what: &'static str,
        status: u16,
        message: String,
        hint: &'static str,
    },
    /// No answer, a timeout, 5xx or 429: retry later.
    #[error("GitHub App: {what} failed: {reason}; will retry")]
    Transient { what: &'static str, reason: String },
}

impl AppError {
    pub fn is_transient(&self) -> bool {
        matches!(self, AppError::Transient { .. })
    }
}

/// The App's RSA private key. `Debug` never shows it.
pub struct AppKey(RsaKeyPair);

impl fmt::Debug for AppKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AppKey(***)")
    }
}

impl AppKey {
    /// The key in a PEM text: PKCS#1 (`RSA PRIVATE KEY`, what GitHub hands out) or PKCS#8
    /// (`PRIVATE KEY`, after `openssl pkcs8`). Errors never quote the text.
    pub fn from_pem(text: &str) -> Result<AppKey, AppError> {
        let (label, der) = pem_body(text)?;
        let pair = match label {
            "RSA PRIVATE KEY" => RsaKeyPair::from_der(&der),
            "PRIVATE KEY" => RsaKeyPair::from_pkcs8(&der),
            _ => return Err(AppError::Key(format!("a PEM block of type {label:?}"))),
        };
        pair.map(AppKey)
            .map_err(|e| AppError::Key(format!("not a usable RSA key ({e})")))
    }

    /// The key in key `key` of Secret `namespace/name`, as the operator mapped it (a mounted
    /// Secret volume, or its variable): read with the same confinement as every `secretRef`
    /// ([`crate::secrets`]). The PEM and each of its lines are handed to [`crate::redact`], so
    /// no log carries them.
    pub fn from_secret(
        secrets: &crate::secrets::Secrets,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<AppKey, AppError> {
        let pem = secrets
            .require(namespace, name, key)
            .map_err(|e| AppError::Key(e.to_string()))?;
        for line in pem.lines() {
            crate::redact::remember(line);
        }
        AppKey::from_pem(&pem)
    }

    /// A JWT issued by `issuer` (the App id or client id) at `now`, signed RS256.
    pub fn jwt(&self, issuer: &str, now: Timestamp) -> Result<String, AppError> {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let iat = now.as_second() - IAT_SKEW;
        let header = b64.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
        let claims = serde_json::json!({"iat": iat, "exp": iat + JWT_LIFETIME, "iss": issuer});
        let claims = b64.encode(claims.to_string());
        let message = format!("{header}.{claims}");
        let mut signature = vec![0; self.0.public().modulus_len()];
        self.0
            .sign(
                &RSA_PKCS1_SHA256,
                &ring::rand::SystemRandom::new(),
                message.as_bytes(),
                &mut signature,
            )
            .map_err(|_| AppError::Key("signing failed".into()))?;
        Ok(format!("{message}.{}", b64.encode(signature)))
    }
}

/// The label and decoded body of the one PEM block in `text`.
fn pem_body(text: &str) -> Result<(&str, Vec<u8>), AppError> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let label = lines
        .next()
        .and_then(|l| l.strip_prefix("-----BEGIN "))
        .and_then(|l| l.strip_suffix("-----"))
        .ok_or_else(|| AppError::Key("no -----BEGIN ...----- line first".into()))?;
    let end = format!("-----END {label}-----");
    let mut body = String::new();
    let mut ended = false;
    for line in lines.by_ref() {
        if line == end {
            ended = true;
            break;
        }
        body.push_str(line);
    }
    if !ended {
        return Err(AppError::Key(format!("no {end} line")));
    }
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|_| AppError::Key("the PEM body is not base64".into()))?;
    Ok((label, der))
}

/// An installation token and when it expires.
struct Installed {
    token: ForgeToken,
    expires_at: Timestamp,
}

/// The App's installation tokens for one repository, bought when needed and cached until
/// [`REFRESH_MARGIN`] before they expire. Shared by the REST API and git; the lock is held
/// across no request.
pub struct AppTokens {
    http: reqwest::Client,
    /// The API base (`https://api.github.com`, `https://HOST/api/v3`).
    base: Url,
    issuer: String,
    /// `owner/name`, to find the installation.
    repository: String,
    key: AppKey,
    installation: Mutex<Option<u64>>,
    cached: Mutex<Option<Installed>>,
}

impl fmt::Debug for AppTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppTokens")
            .field("base", &self.base.as_str())
            .field("issuer", &self.issuer)
            .field("repository", &self.repository)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Installation {
    id: u64,
}

#[derive(Deserialize)]
struct AccessToken {
    token: String,
    expires_at: Timestamp,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    message: String,
}

impl AppTokens {
    /// Tokens of the App `issuer` (App id or client id) with `key`, for `repository`
    /// (`owner/name`) on the API at `base`; `installation` when the operator gave it,
    /// otherwise it is looked up at the first need.
    pub fn new(
        http: reqwest::Client,
        base: Url,
        issuer: String,
        repository: String,
        key: AppKey,
        installation: Option<u64>,
    ) -> AppTokens {
        AppTokens {
            http,
            base,
            issuer,
            repository,
            key,
            installation: Mutex::new(installation),
            cached: Mutex::new(None),
        }
    }

    /// A token valid for at least [`REFRESH_MARGIN`] after `now`: the cached one, or one
    /// bought now.
    pub async fn token(&self, now: Timestamp) -> Result<ForgeToken, AppError> {
        let margin = SignedDuration::try_from(REFRESH_MARGIN).unwrap_or(SignedDuration::ZERO);
        if let Some(cached) = self
            .cached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            if now
                .saturating_add(margin)
                .is_ok_and(|t| t < cached.expires_at)
            {
                return Ok(cached.token.clone());
            }
        }
        let installation = self.installation(now).await?;
        let path = format!("app/installations/{installation}/access_tokens");
        let answer: AccessToken = self
            .call(Method::POST, &path, now, "creating an installation token")
            .await?;
        crate::redact::remember(&answer.token);
        let token = ForgeToken::new(answer.token);
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = Some(Installed {
            token: token.clone(),
            expires_at: answer.expires_at,
        });
        Ok(token)
    }

    /// The installation id: given, found before, or looked up now.
    async fn installation(&self, now: Timestamp) -> Result<u64, AppError> {
        if let Some(id) = *self.installation.lock().unwrap_or_else(|e| e.into_inner()) {
            return Ok(id);
        }
        let path = format!("repos/{}/installation", self.repository);
        let found: Installation = self
            .call(Method::GET, &path, now, "finding the App's installation")
            .await?;
        *self.installation.lock().unwrap_or_else(|e| e.into_inner()) = Some(found.id);
        Ok(found.id)
    }

    /// One App-authenticated call (a fresh JWT) to `path` below the API base.
    async fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        now: Timestamp,
        what: &'static str,
    ) -> Result<T, AppError> {
        let url = self
            .base
            .join(&format!(
                "{}/{path}",
                self.base.path().trim_end_matches('/')
            ))
            .map_err(|e| AppError::Transient {
                what,
                reason: format!("bad URL: {e}"),
            })?;
        let jwt = self.key.jwt(&self.issuer, now)?;
        let mut auth = reqwest::header::HeaderValue::from_str(&format!("Bearer {jwt}"))
            .map_err(|_| AppError::Key("the JWT is not a header value".into()))?;
        auth.set_sensitive(true);
        let response = self
            .http
            .request(method, url)
            .header(AUTHORIZATION, auth)
            .header(ACCEPT, "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28")
            .send()
            .await
            .map_err(|e| AppError::Transient {
                what,
                reason: if e.is_timeout() {
                    "timed out".into()
                } else {
                    "no answer".into()
                },
            })?;
        let status = response.status();
        let body = read_body(response, MAX_ANSWER)
            .await
            .map_err(|_| AppError::Transient {
                what,
                reason: "the answer could not be read".into(),
            })?;
        if status.is_success() {
            return serde_json::from_slice(&body).map_err(|e| AppError::Refused {
                what,
                status: status.as_u16(),
                message: format!("unreadable answer: {e}"),
                hint: "check forge.apiUrl points at GitHub's API",
            });
        }
        let message: String = serde_json::from_slice::<Message>(&body)
            .map(|m| m.message)
            .unwrap_or_default()
            .chars()
            .take(300)
            .collect();
        if status.is_server_error() || status.as_u16() == 429 {
            return Err(AppError::Transient {
                what,
                reason: format!("{status} {message}"),
            });
        }
        let hint = match status.as_u16() {
            401 => "check the App id (or client id) and that the key is the App's current one",
            404 => "install the App on the repository (or give the right installation id)",
            _ => "check the App's permissions: contents read/write, pull requests read/write, metadata read",
        };
        Err(AppError::Refused {
            what,
            status: status.as_u16(),
            message,
            hint,
        })
    }
}

#[cfg(test)]
mod tests {
    //! Against an HTTP-level fake of GitHub's App endpoints: it checks each JWT's signature
    //! with the App's public key and its `iat`/`exp`, issues installation tokens that expire
    //! after an hour of the test's clock, and refuses an expired token with 401.

    use std::collections::HashMap;
    use std::process::Command;
    use std::sync::{Arc, Mutex};

    use axum::extract::{Path, State};
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::{get, post};
    use axum::{Json, Router};
    use base64::Engine;
    use jiff::{SignedDuration, Timestamp};
    use ring::signature::{UnparsedPublicKey, RSA_PKCS1_2048_8192_SHA256};
    use serde_json::{json, Value};

    use super::*;
    use crate::clock::Clock;

    const APP_ID: &str = "12345";
    const INSTALLATION: u64 = 42;

    #[derive(Default)]
    struct Github {
        now: Option<Timestamp>,
        public_der: Vec<u8>,
        /// Every token issued, with its expiry.
        issued: HashMap<String, Timestamp>,
        lookups: usize,
        /// Tokens that reached a resource after they expired.
        expired_sent: Vec<String>,
    }

    type Shared = Arc<Mutex<Github>>;

    /// Checks the App JWT in `headers`: RS256 by the App's key, issued by the App, `iat` not
    /// in the future, `exp` not past and at most 10 minutes after `iat`.
    fn app_jwt_ok(github: &Github, headers: &HeaderMap) -> bool {
        let Some(jwt) = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        else {
            return false;
        };
        let parts: Vec<&str> = jwt.split('.').collect();
        let [header, claims, signature] = parts[..] else {
            return false;
        };
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let Ok(signature) = b64.decode(signature) else {
            return false;
        };
        let key = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &github.public_der);
        let message = format!("{header}.{claims}");
        if key.verify(message.as_bytes(), &signature).is_err() {
            return false;
        }
        let header: Value = serde_json::from_slice(&b64.decode(header).unwrap()).unwrap();
        let claims: Value = serde_json::from_slice(&b64.decode(claims).unwrap()).unwrap();
        let now = github.now.unwrap().as_second();
        let (iat, exp) = (
            claims["iat"].as_i64().unwrap(),
            claims["exp"].as_i64().unwrap(),
        );
        header["alg"] == "RS256"
            && claims["iss"] == APP_ID
            && iat <= now
            && now < exp
            && exp - iat <= 600
    }

    /// GitHub's 401 when the request does not carry a valid App JWT.
    fn unless_app(github: &Github, headers: &HeaderMap) -> Option<(StatusCode, Json<Value>)> {
        let message = json!({"message": "A JSON web token could not be decoded"});
        (!app_jwt_ok(github, headers)).then_some((StatusCode::UNAUTHORIZED, Json(message)))
    }

    async fn installation(
        State(gh): State<Shared>,
        headers: HeaderMap,
    ) -> (StatusCode, Json<Value>) {
        let mut gh = gh.lock().unwrap();
        if let Some(refusal) = unless_app(&gh, &headers) {
            return refusal;
        }
        gh.lookups += 1;
        (
            StatusCode::OK,
            Json(json!({"id": INSTALLATION, "app_id": 12345})),
        )
    }

    async fn access_tokens(
        State(gh): State<Shared>,
        Path(id): Path<u64>,
        headers: HeaderMap,
    ) -> (StatusCode, Json<Value>) {
        let mut gh = gh.lock().unwrap();
        if let Some(refusal) = unless_app(&gh, &headers) {
            return refusal;
        }
        if id != INSTALLATION {
            return (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"})));
        }
        let expires_at = gh.now.unwrap() + SignedDuration::from_hours(1);
        let token = format!("ghs_{}", gh.issued.len() + 1);
        gh.issued.insert(token.clone(), expires_at);
        (
            StatusCode::CREATED,
            Json(
                json!({"token": token, "expires_at": expires_at.to_string(), "permissions": {"contents": "write"}}),
            ),
        )
    }

    async fn pull(State(gh): State<Shared>, headers: HeaderMap) -> StatusCode {
        let mut gh = gh.lock().unwrap();
        let token = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("token "))
            })
            .unwrap_or_default()
            .to_string();
        match gh.issued.get(&token).copied() {
            Some(expires) if gh.now.unwrap() < expires => StatusCode::OK,
            Some(_) => {
                gh.expired_sent.push(token);
                StatusCode::UNAUTHORIZED
            }
            None => StatusCode::UNAUTHORIZED,
        }
    }

    /// A fresh RSA key, generated now by openssl: (PEM, public key as PKCS#1 DER).
    fn generated_key() -> (String, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let pem = dir.path().join("app.pem");
        let run = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .output()
                .expect("openssl runs");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            out.stdout
        };
        run(&[
            "genrsa",
            "-traditional",
            "-out",
            pem.to_str().unwrap(),
            "2048",
        ]);
        let der = run(&[
            "rsa",
            "-in",
            pem.to_str().unwrap(),
            "-RSAPublicKey_out",
            "-outform",
            "DER",
        ]);
        (std::fs::read_to_string(&pem).unwrap(), der)
    }

    async fn fake(public_der: Vec<u8>) -> (Shared, Url) {
        let gh: Shared = Arc::new(Mutex::new(Github {
            public_der,
            ..Github::default()
        }));
        let app = Router::new()
            .route("/repos/{owner}/{repo}/installation", get(installation))
            .route("/app/installations/{id}/access_tokens", post(access_tokens))
            .route("/repos/{owner}/{repo}/pulls/{n}", get(pull))
            .with_state(Arc::clone(&gh));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (gh, url)
    }

    fn client() -> reqwest::Client {
        crate::http_client::install_crypto_provider();
        reqwest::Client::builder().build().unwrap()
    }

    fn tokens(base: &Url, pem: &str, installation: Option<u64>) -> AppTokens {
        let key = AppKey::from_pem(pem).unwrap();
        AppTokens::new(
            client(),
            base.clone(),
            APP_ID.into(),
            "acme/fleet".into(),
            key,
            installation,
        )
    }

    async fn get_pull(base: &Url, token: &ForgeToken) -> u16 {
        client()
            .get(base.join("repos/acme/fleet/pulls/1").unwrap())
            .header("authorization", format!("Bearer {}", token.expose()))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    #[tokio::test]
    async fn fake_github_app_tokens_are_refreshed_before_they_expire_and_never_sent_expired() {
        let (pem, public_der) = generated_key();
        let (gh, base) = fake(public_der).await;
        let clock = Clock::named(Some("stepped@2026-03-01T08:00:00Z")).unwrap();
        let app = tokens(&base, &pem, None);
        // Five hours of the daemon's clock, a REST call every 7 minutes.
        for _ in 0..43 {
            clock.sleep(Duration::from_secs(7 * 60));
            gh.lock().unwrap().now = Some(clock.now());
            let token = app.token(clock.now()).await.unwrap();
            assert_eq!(get_pull(&base, &token).await, 200);
        }
        let gh_now = gh.lock().unwrap();
        assert_eq!(gh_now.expired_sent, Vec::<String>::new());
        assert_eq!(gh_now.lookups, 1, "the installation is looked up once");
        // A token lives an hour and is renewed 5 minutes early, at the next call: 6 in 5 hours.
        assert_eq!(gh_now.issued.len(), 6, "{:?}", gh_now.issued);
    }

    #[tokio::test]
    async fn fake_github_refuses_an_expired_token_and_a_jwt_of_another_key() {
        let (pem, public_der) = generated_key();
        let (gh, base) = fake(public_der).await;
        let t0: Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        gh.lock().unwrap().now = Some(t0);
        let app = tokens(&base, &pem, Some(INSTALLATION));
        let token = app.token(t0).await.unwrap();
        assert_eq!(
            gh.lock().unwrap().lookups,
            0,
            "the given installation is used"
        );
        // The fake's check can fail: the same token an hour later is refused and recorded.
        gh.lock().unwrap().now = Some(t0 + SignedDuration::from_mins(61));
        assert_eq!(get_pull(&base, &token).await, 401);
        assert_eq!(gh.lock().unwrap().expired_sent.len(), 1);

        let (other_pem, _) = generated_key();
        let stranger = tokens(&base, &other_pem, Some(INSTALLATION));
        let err = stranger
            .token(t0 + SignedDuration::from_mins(61))
            .await
            .unwrap_err();
        assert!(
            matches!(err, AppError::Refused { status: 401, .. }),
            "{err}"
        );
        // Neither the key nor a token shows in what is printed.
        let shown = format!(
            "{err} {err:?} {stranger:?} {:?}",
            AppKey::from_pem(&pem).unwrap()
        );
        let key_line = pem.lines().nth(1).unwrap();
        assert!(
            !shown.contains(key_line) && !shown.contains("ghs_"),
            "{shown}"
        );
    }

    #[test]
    fn a_jwt_claims_60_seconds_back_and_9_minutes_ahead() {
        let (pem, public_der) = generated_key();
        let key = AppKey::from_pem(&pem).unwrap();
        let now: Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        let jwt = key.jwt(APP_ID, now).unwrap();
        let gh = Github {
            now: Some(now),
            public_der,
            ..Github::default()
        };
        let mut headers = HeaderMap::new();
        headers.insert("authorization", format!("Bearer {jwt}").parse().unwrap());
        assert!(app_jwt_ok(&gh, &headers));
        let claims = jwt.split('.').nth(1).unwrap();
        let claims: Value = serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(claims)
                .unwrap(),
        )
        .unwrap();
        let t = now.as_second();
        assert_eq!(
            (claims["iat"].as_i64(), claims["exp"].as_i64()),
            (Some(t - 60), Some(t + 480))
        );
    }

    #[test]
    fn the_key_is_read_from_the_mounted_secret_and_kept_out_of_logs() {
        let (pem, public_der) = generated_key();
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("sluice-system/github-app");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("private-key.pem"), &pem).unwrap();
        let vars = [(
            crate::secrets::DIR_VAR.to_string(),
            dir.path().display().to_string(),
        )];
        let secrets = crate::secrets::Secrets::from_vars(vars.into_iter().collect());
        let key = AppKey::from_secret(&secrets, "sluice-system", "github-app", "private-key.pem")
            .unwrap();
        let now: Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        let gh = Github {
            now: Some(now),
            public_der,
            ..Github::default()
        };
        let mut headers = HeaderMap::new();
        let jwt = key.jwt(APP_ID, now).unwrap();
        headers.insert("authorization", format!("Bearer {jwt}").parse().unwrap());
        assert!(app_jwt_ok(&gh, &headers), "the mounted key signs");
        let line = pem.lines().nth(1).unwrap();
        assert!(!crate::redact::text(&format!("key line: {line}")).contains(line));
        // A name that leaves the Secret folder is refused before anything is read.
        let err =
            AppKey::from_secret(&secrets, "sluice-system", "github-app", "../../x").unwrap_err();
        assert!(err.to_string().contains("github-app"), "{err}");
        let err = AppKey::from_secret(&secrets, "sluice-system", "missing", "key").unwrap_err();
        assert!(err.to_string().contains("not mapped"), "{err}");
    }

    #[test]
    fn keys_that_are_not_rsa_pem_are_refused_without_quoting_them() {
        for text in [
            "",
            "hello",
            "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n",
            "-----BEGIN RSA PRIVATE KEY-----\n!!!!\n-----END RSA PRIVATE KEY-----\n",
            "-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0\n-----END RSA PRIVATE KEY-----\n",
            "-----BEGIN CERTIFICATE-----\nc2VjcmV0\n-----END CERTIFICATE-----\n",
        ] {
            let err = AppKey::from_pem(text).unwrap_err();
            assert!(!err.to_string().contains("c2VjcmV0"), "{err}");
        }
    }
}
