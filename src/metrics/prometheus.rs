//! A Prometheus client for instant queries (`GET /api/v1/query`), as Flagger's provider does.
//!
//! [`Prometheus::query`] never fails by returning a number it did not read: every transport
//! problem, HTTP status >= 400, `status: error` answer, range vector, several series or
//! malformed body becomes [`MetricValue::Error`] with the reason; an empty vector is
//! [`MetricValue::NoData`]; `NaN` is returned as a value (the core fails it). Flagger takes the
//! last of several series silently; here several series are an error, since a threshold on
//! one arbitrary series is not what the user wrote.
//!
//! Credentials come from the environment (`SLUICE_PROMETHEUS_TOKEN`, or
//! `SLUICE_PROMETHEUS_USERNAME` + `SLUICE_PROMETHEUS_PASSWORD`), read once by the runtime context
//! (`runtime::Runtime::prometheus`); a bearer token wins over basic auth, as in Flagger. They
//! are the operator's, and the repo names the addresses queried, so they are sent only to the
//! origins the operator lists in `SLUICE_PROMETHEUS_ORIGINS` ([`PrometheusAccess::auth_for`]);
//! a process given them without that list does not start. A
//! MetricTemplate with a `secretRef` uses that Secret's `token` or `username`/`password`
//! instead (read by `metrics::plan` through [`crate::secrets::Secrets`]). This module judges
//! nothing.

use std::fmt;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value as Json;

use crate::core::observe::MetricValue;
use crate::http_client;
use crate::metrics::provider::{ClientInput, MetricBackend, ProviderFields, Series, Vendor};
use crate::metrics::vendor_http;
use crate::secrets::Secrets;
use crate::yaml::reader::Reader;

// Range queries for the statistical judge, on the same client.
pub mod range;

/// Flagger's Prometheus query timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

pub const TOKEN_VAR: &str = "SLUICE_PROMETHEUS_TOKEN";
pub const USERNAME_VAR: &str = "SLUICE_PROMETHEUS_USERNAME";
pub const PASSWORD_VAR: &str = "SLUICE_PROMETHEUS_PASSWORD";
/// The origins (`scheme://host[:port]`, comma-separated) the operator's credentials may be
/// sent to.
pub const ORIGINS_VAR: &str = "SLUICE_PROMETHEUS_ORIGINS";

/// The origins of `list` (the value of [`ORIGINS_VAR`]): each an `http(s)` URL with a host.
pub fn origins(list: &str) -> Result<Vec<url::Origin>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(|o| match url::Url::parse(o) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
                Ok(u.origin())
            }
            _ => Err(format!(
                "{ORIGINS_VAR}: {o:?} is not an http(s) address such as https://prometheus.monitoring:9090"
            )),
        })
        .collect()
}

/// How requests authenticate. `Debug` never prints secrets.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum Auth {
    #[default]
    None,
    Bearer(String),
    Basic {
        username: String,
        password: String,
    },
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::None => f.write_str("None"),
            Auth::Bearer(_) => f.write_str("Bearer(<redacted>)"),
            Auth::Basic { username, .. } => write!(f, "Basic({username}, <redacted>)"),
        }
    }
}

impl Auth {
    /// The credentials from `SLUICE_PROMETHEUS_TOKEN` or `_USERNAME`/`_PASSWORD` (the runtime
    /// context reads them at start): a token wins; a username needs a password.
    pub fn from_values(
        token: Option<String>,
        username: Option<String>,
        password: Option<String>,
    ) -> Result<Auth, String> {
        if let Some(token) = &token {
            crate::redact::remember(token);
        }
        if let (Some(username), Some(password)) = (&username, &password) {
            crate::redact::remember_basic(username, password);
        }
        match (token, username, password) {
            (Some(token), _, _) => Ok(Auth::Bearer(token)),
            (None, Some(username), Some(password)) => Ok(Auth::Basic { username, password }),
            (None, Some(_), None) => {
                Err(format!("{USERNAME_VAR} is set but {PASSWORD_VAR} is not"))
            }
            (None, None, Some(_)) => {
                Err(format!("{PASSWORD_VAR} is set but {USERNAME_VAR} is not"))
            }
            (None, None, None) => Ok(Auth::None),
        }
    }
}

/// What every Prometheus query of a process shares, built once at start: one pooled HTTP
/// client per Prometheus endpoint (with its bound on queries in flight and its count of
/// connections opened) and the credentials. Cloning is cheap.
#[derive(Debug, Clone)]
pub struct PrometheusAccess {
    http: http_client::HttpClients,
    endpoints: http_client::Endpoints,
    /// A bad credentials setting is kept, not raised: every query then fails with it, so the
    /// other adapters keep working and the metric says what to fix.
    auth: Result<Auth, String>,
    /// The Secrets the operator mapped in (`Runtime::secrets`), for the credentials a
    /// MetricTemplate's `secretRef` names.
    secrets: Secrets,
    /// The AWS credentials and endpoint of the environment, for CloudWatch templates.
    cloudwatch: crate::metrics::cloudwatch::CloudwatchEnv,
    /// Where the environment's credentials may be sent ([`ORIGINS_VAR`]).
    origins: Vec<url::Origin>,
    /// The runtime's clock: the end of a vendor query's window is its now.
    clock: std::sync::Arc<crate::clock::Clock>,
}

impl PrometheusAccess {
    /// Access whose credentials settings cannot be used: every query fails with `why`.
    pub fn unusable(http: http_client::HttpClients, why: String) -> PrometheusAccess {
        PrometheusAccess {
            http,
            endpoints: http_client::Endpoints::new(),
            auth: Err(why),
            secrets: Secrets::from_vars(Default::default()),
            cloudwatch: Default::default(),
            origins: Vec::new(),
            clock: std::sync::Arc::new(crate::clock::Clock::Wall),
        }
    }

    /// Access with the given credentials.
    pub fn new(http: http_client::HttpClients, auth: Auth) -> PrometheusAccess {
        PrometheusAccess {
            http,
            endpoints: http_client::Endpoints::new(),
            auth: Ok(auth),
            secrets: Secrets::from_vars(Default::default()),
            cloudwatch: Default::default(),
            origins: Vec::new(),
            clock: std::sync::Arc::new(crate::clock::Clock::Wall),
        }
    }

    /// This access reading `secretRef` credentials from `secrets` (the runtime context's;
    /// without it, only the default Secret folder is looked at).
    pub fn with_secrets(mut self, secrets: Secrets) -> PrometheusAccess {
        self.secrets = secrets;
        self
    }

    /// This access querying CloudWatch with `env` (the runtime context's AWS variables).
    pub fn with_cloudwatch(
        mut self,
        env: crate::metrics::cloudwatch::CloudwatchEnv,
    ) -> PrometheusAccess {
        self.cloudwatch = env;
        self
    }

    /// The AWS credentials and endpoint CloudWatch templates are queried with.
    pub fn cloudwatch(&self) -> &crate::metrics::cloudwatch::CloudwatchEnv {
        &self.cloudwatch
    }

    /// Where `secretRef` credentials are read.
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// This access reading the time from `clock` (the runtime's; the wall clock without it).
    pub fn with_clock(mut self, clock: std::sync::Arc<crate::clock::Clock>) -> PrometheusAccess {
        self.clock = clock;
        self
    }

    /// The time now on this access's clock, since the Unix epoch.
    pub fn unix_now(&self) -> std::time::Duration {
        let ms = self.clock.now().as_millisecond();
        std::time::Duration::from_millis(u64::try_from(ms).unwrap_or_default())
    }

    /// This access sending the environment's credentials to `origins` only.
    pub fn with_origins(mut self, origins: Vec<url::Origin>) -> PrometheusAccess {
        self.origins = origins;
        self
    }

    /// The credentials, or why the environment's settings cannot be used.
    pub fn auth(&self) -> Result<&Auth, &str> {
        self.auth.as_ref().map_err(String::as_str)
    }

    /// The environment's credentials for a query to `address`: none when there are none, and
    /// an error when `address` (which the repo names) is not at an origin the operator listed in
    /// [`ORIGINS_VAR`], so that no one who can push can have them sent to a server of theirs.
    pub fn auth_for(&self, address: &str) -> Result<Auth, String> {
        let auth = self.auth.clone()?;
        if auth == Auth::None {
            return Ok(auth);
        }
        let origin = url::Url::parse(address).map(|u| u.origin()).ok();
        match origin {
            Some(o) if self.origins.contains(&o) => Ok(auth),
            _ => Err(format!(
                "the operator's Prometheus credentials ({TOKEN_VAR} or {USERNAME_VAR}) are sent only to \
                 the origins {ORIGINS_VAR} lists, and {} is not one of them: add its origin there, or \
                 give the MetricTemplate a secretRef of its own",
                crate::url_credentials::redact_url(address)
            )),
        }
    }

    /// The pooled clients.
    pub fn http(&self) -> &http_client::HttpClients {
        &self.http
    }

    /// One pooled client per Prometheus endpoint; `/metrics` shows their connection counts.
    pub fn endpoints(&self) -> &http_client::Endpoints {
        &self.endpoints
    }
}

/// Where and how to query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrometheusConfig {
    /// `http(s)://host:port[/path]`; the API path is appended.
    pub address: String,
    pub timeout: Duration,
    pub auth: Auth,
    /// Extra request headers (a MetricTemplate's `spec.provider.headers`).
    pub headers: Vec<(String, String)>,
    /// Skip TLS certificate checks (a MetricTemplate's `insecureSkipVerify`).
    pub insecure_skip_verify: bool,
}

impl PrometheusConfig {
    /// An address with Flagger's defaults: 5 s timeout, no credentials, no headers.
    pub fn new(address: impl Into<String>) -> PrometheusConfig {
        PrometheusConfig {
            address: address.into(),
            timeout: DEFAULT_TIMEOUT,
            auth: Auth::None,
            headers: Vec::new(),
            insecure_skip_verify: false,
        }
    }
}

/// A configuration that cannot be used (terminal: retrying does not help).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrometheusError {
    #[error("invalid Prometheus address {address:?}: {reason}")]
    Address { address: String, reason: String },
    #[error("invalid Prometheus request header {name:?}: {reason}")]
    Header { name: String, reason: String },
    #[error("{0}")]
    Client(String),
}

/// A client for one Prometheus server.
#[derive(Debug, Clone)]
pub struct Prometheus {
    http: reqwest::Client,
    url: reqwest::Url,
    /// The address without credentials, for messages.
    shown: String,
    auth: Auth,
    headers: HeaderMap,
    timeout: Duration,
}

impl Prometheus {
    /// Builds a client with its own HTTP connection pool.
    pub fn new(config: &PrometheusConfig) -> Result<Prometheus, PrometheusError> {
        let http =
            http_client::client(config.insecure_skip_verify).map_err(PrometheusError::Client)?;
        Prometheus::with_client(http, config)
    }

    /// Builds a client on a shared HTTP client (whose TLS settings must match the config).
    pub fn with_client(
        http: reqwest::Client,
        config: &PrometheusConfig,
    ) -> Result<Prometheus, PrometheusError> {
        let bad = |reason: &str| PrometheusError::Address {
            address: config.address.clone(),
            reason: reason.to_string(),
        };
        let mut url =
            reqwest::Url::parse(config.address.trim()).map_err(|e| bad(&e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad("expected an http:// or https:// URL"));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(bad("expected a host"));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad("expected no query string or fragment"));
        }
        let path = format!("{}/api/v1/query", url.path().trim_end_matches('/'));
        url.set_path(&path);
        let mut shown_url = url.clone();
        let _ = shown_url.set_username("");
        let _ = shown_url.set_password(None);
        shown_url.set_path(url.path().trim_end_matches("/api/v1/query"));
        let shown = shown_url.as_str().trim_end_matches('/').to_string();

        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            let header = |reason: &str| PrometheusError::Header {
                name: name.clone(),
                reason: reason.to_string(),
            };
            let n = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| header("not a valid header name"))?;
            let v = HeaderValue::from_str(value)
                .map_err(|_| header("value has characters not allowed in a header"))?;
            headers.append(n, v);
        }
        Ok(Prometheus {
            http,
            url,
            shown,
            auth: config.auth.clone(),
            headers,
            timeout: config.timeout,
        })
    }

    /// This client, sending its queries through `http` instead (same TLS settings).
    pub fn on(self, http: reqwest::Client) -> Prometheus {
        Prometheus { http, ..self }
    }

    /// The query URL (`<address>/api/v1/query`).
    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// The address queries go to, without credentials (messages use the field directly).
    #[cfg(test)]
    pub fn address(&self) -> &str {
        &self.shown
    }

    /// Runs an instant query and reads the one value it must return.
    pub async fn query(&self, promql: &str) -> MetricValue {
        let query = collapse_whitespace(promql);
        tracing::debug!(prometheus = %self.shown, %query, "prometheus query");
        let request = self
            .get(self.url.clone())
            .query(&[("query", query.as_str())]);
        // A pooled keep-alive connection the server has closed (Prometheus restarted, or its
        // idle timeout won the race) is asked once more on a fresh one: the query is a GET.
        match vendor_http::get(request, self.timeout).await {
            Err(e) => self.error(e),
            Ok((status, body)) => {
                let value = parse_response(status, &body);
                if let MetricValue::Error(e) = &value {
                    vendor_http::log_unusable("Prometheus", &self.shown, status, &body, e);
                }
                match value {
                    MetricValue::Error(e) if status >= 400 => self.error(e),
                    other => other,
                }
            }
        }
    }

    /// A GET of `url` with this client's headers, timeout and credentials.
    fn get(&self, url: reqwest::Url) -> reqwest::RequestBuilder {
        let request = self
            .http
            .get(url)
            .headers(self.headers.clone())
            .timeout(self.timeout);
        match &self.auth {
            Auth::None => request,
            Auth::Bearer(token) => request.bearer_auth(token),
            Auth::Basic { username, password } => request.basic_auth(username, Some(password)),
        }
    }

    fn error(&self, reason: String) -> MetricValue {
        MetricValue::Error(format!("Prometheus {}: {reason}", self.shown))
    }
}

/// Prometheus, like Flagger, sees queries with runs of white space collapsed to one space.
pub fn collapse_whitespace(query: &str) -> String {
    query.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Reads an HTTP status and body from `/api/v1/query` into a value. Pure; never panics.
///
/// Errors are sluice's words: the status, Prometheus' `errorType` when it is one Prometheus
/// documents, and what was wrong with the answer's shape; never the body's text (the caller
/// logs it, redacted).
pub fn parse_response(status: u16, body: &[u8]) -> MetricValue {
    let json: Option<Json> = serde_json::from_slice(body).ok();
    let kind = json.as_ref().and_then(error_type);
    if status >= 400 {
        return MetricValue::Error(match kind {
            Some(kind) => format!("answered HTTP {status} ({kind})"),
            None => format!("answered HTTP {status}"),
        });
    }
    let Some(json) = json else {
        return MetricValue::Error(format!(
            "answered HTTP {status}: expected a JSON body, found other text"
        ));
    };
    match json.get("status").and_then(Json::as_str) {
        Some("success") => {}
        Some("error") => {
            return MetricValue::Error(match kind {
                Some(kind) => format!("answered status \"error\" ({kind})"),
                None => "answered status \"error\"".into(),
            })
        }
        Some(_) => {
            return MetricValue::Error(
                "expected status \"success\" or \"error\", found another".into(),
            )
        }
        None => {
            return MetricValue::Error(
                "expected status \"success\" or \"error\", found none".into(),
            )
        }
    }
    let Some(data) = json.get("data") else {
        return MetricValue::Error("answer has no \"data\"".into());
    };
    let result = data.get("result");
    match data.get("resultType").and_then(Json::as_str) {
        Some("vector") => {
            let Some(series) = result.and_then(Json::as_array) else {
                return MetricValue::Error("vector answer has no \"result\" list".into());
            };
            match series.as_slice() {
                [] => MetricValue::NoData,
                [one] => match one.get("value") {
                    Some(sample) => sample_value(sample),
                    None if one.get("histogram").is_some() => MetricValue::Error(
                        "query returned a native histogram; expected a number".into(),
                    ),
                    None => MetricValue::Error("series has no \"value\"".into()),
                },
                many => MetricValue::Error(format!(
                    "query returned {} series; expected one",
                    many.len()
                )),
            }
        }
        Some("scalar") => match result {
            Some(sample) => sample_value(sample),
            None => MetricValue::Error("scalar answer has no \"result\"".into()),
        },
        Some("matrix") => MetricValue::Error(
            "query returned a range vector (matrix); expected an instant vector or a scalar".into(),
        ),
        Some("string") => MetricValue::Error(
            "query returned a string; expected an instant vector or a scalar".into(),
        ),
        Some(_) => MetricValue::Error(
            "query returned an unknown result type; expected an instant vector or a scalar".into(),
        ),
        None => MetricValue::Error("answer has no \"resultType\"".into()),
    }
}

/// `[<unix time>, "<value>"]` -> the value. Prometheus writes floats as strings, including
/// `NaN`, `+Inf` and `-Inf`.
fn sample_value(sample: &Json) -> MetricValue {
    let text = match sample.as_array().map(Vec::as_slice) {
        Some([_, Json::String(text)]) => text,
        _ => {
            return MetricValue::Error(format!(
                "expected a sample [time, \"value\"], found {}",
                vendor_http::kind_of(sample)
            ))
        }
    };
    match text.parse::<f64>() {
        Ok(v) => MetricValue::Value(v),
        Err(_) => MetricValue::Error("expected a number, found other text".into()),
    }
}

/// The `errorType` of an error answer, when it is one of those Prometheus documents (so the
/// text is sluice's, not the server's).
fn error_type(json: &Json) -> Option<&'static str> {
    const KNOWN: [&str; 8] = [
        "bad_data",
        "timeout",
        "canceled",
        "execution",
        "internal",
        "unavailable",
        "not_found",
        "not_acceptable",
    ];
    let kind = json.get("errorType").and_then(Json::as_str)?;
    KNOWN.into_iter().find(|k| *k == kind)
}

/// A prometheus template's `spec.provider`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Overrides the canary's and the repo's Prometheus address.
    pub address: Option<String>,
    /// `headers`, one entry per value.
    pub headers: Vec<(String, String)>,
    /// Keys `token` (bearer), or `username` and `password` (basic auth), as Flagger reads
    /// them; without it, the environment's credentials (`SLUICE_PROMETHEUS_*`).
    pub secret_ref: Option<String>,
    pub insecure_skip_verify: bool,
}

impl MetricBackend for Prometheus {
    type Config = Config;
    const TYPE: &'static str = "prometheus";
    const READS: &'static [&'static str] = &["headers", "insecureSkipVerify"];
    /// The reader has always let a `region` pass on a prometheus template.
    const IGNORES: &'static [&'static str] = &["region"];
    const SECRET_KEYS: &'static [&'static str] = &["token", "username", "password"];
    const SERIES: Series = Series::Range { rank: 0 };
    const EXAMPLE: &'static str = "    type: prometheus\n    address: http://prometheus:9090\n";
    const ANSWER: (&'static str, f64) = (
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000.5,"99.5"]}]}}"#,
        99.5,
    );

    fn read(fields: &ProviderFields, _r: &mut Reader) -> Option<Config> {
        Some(Config {
            address: fields.address.clone(),
            headers: fields.headers.clone(),
            secret_ref: fields.secret_ref.clone(),
            insecure_skip_verify: fields.insecure_skip_verify,
        })
    }

    /// None: a Prometheus template's query goes to Prometheus with the canary's others
    /// (`metrics::plan`), its address, headers and credentials taken from the config.
    fn client(_config: &Config, _input: &ClientInput) -> Option<Result<Vendor, String>> {
        None
    }

    fn parse(status: u16, body: &[u8]) -> MetricValue {
        parse_response(status, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(data: &str) -> Vec<u8> {
        format!(r#"{{"status":"success","data":{data}}}"#).into_bytes()
    }

    #[test]
    fn one_sample_or_a_scalar_is_a_value() {
        let v = parse_response(
            200,
            &ok(
                r#"{"resultType":"vector","result":[{"metric":{},"value":[1700000000.5,"99.5"]}]}"#,
            ),
        );
        assert_eq!(v, MetricValue::Value(99.5));
        let v = parse_response(
            200,
            &ok(r#"{"resultType":"scalar","result":[1700000000,"1"]}"#),
        );
        assert_eq!(v, MetricValue::Value(1.0));
    }

    #[test]
    fn special_floats_parse_as_prometheus_writes_them() {
        for (text, check) in [
            ("NaN", f64::is_nan as fn(f64) -> bool),
            ("+Inf", |v: f64| v == f64::INFINITY),
            ("-Inf", |v: f64| v == f64::NEG_INFINITY),
            ("1e3", |v: f64| v == 1000.0),
        ] {
            let body = ok(&format!(
                r#"{{"resultType":"scalar","result":[1,"{text}"]}}"#
            ));
            match parse_response(200, &body) {
                MetricValue::Value(v) => assert!(check(v), "{text}: {v}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn empty_vector_is_no_data() {
        assert_eq!(
            parse_response(200, &ok(r#"{"resultType":"vector","result":[]}"#)),
            MetricValue::NoData
        );
    }

    #[test]
    fn several_series_are_an_error() {
        let body = ok(
            r#"{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"1"]},{"metric":{"a":"2"},"value":[1,"2"]},{"metric":{"a":"3"},"value":[1,"3"]}]}"#,
        );
        assert_eq!(
            parse_response(200, &body),
            MetricValue::Error("query returned 3 series; expected one".into())
        );
    }

    #[test]
    fn every_malformed_answer_is_an_error() {
        let cases: &[(u16, &[u8], &str)] = &[
            (200, br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]]}]}}"#, "range vector"),
            (200, br#"{"status":"success","data":{"resultType":"string","result":[1,"x"]}}"#, "returned a string"),
            (200, br#"{"status":"error","errorType":"bad_data","error":"parse error at char 5"}"#, "answered status \"error\" (bad_data)"),
            (200, br#"{"status":"error","errorType":"secret-123","error":"x"}"#, "answered status \"error\""),
            (200, b"<html>proxy says hi</html>", "expected a JSON body, found other text"),
            (200, b"", "expected a JSON body"),
            (200, br#"{"status":"success"}"#, "no \"data\""),
            (200, br#"{"status":"ok","data":{}}"#, "found another"),
            (200, br#"{"status":"success","data":{"result":[]}}"#, "no \"resultType\""),
            (200, br#"{"status":"success","data":{"resultType":"vector","result":{}}}"#, "no \"result\" list"),
            (200, br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}"#, "no \"value\""),
            (200, br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[1,{}]}]}}"#, "native histogram"),
            (200, br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,2]}]}}"#, "expected a sample"),
            (200, br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}"#, "expected a sample"),
            (200, br#"{"status":"success","data":{"resultType":"scalar","result":[1,"abc"]}}"#, "expected a number, found other text"),
            (400, br#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\""}"#, "answered HTTP 400 (bad_data)"),
            (503, b"Service Unavailable", "answered HTTP 503"),
            (500, b"", "HTTP 500"),
            // A 4xx with a success-looking body is still an error.
            (404, br#"{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}"#, "HTTP 404"),
        ];
        for (status, body, expected) in cases {
            match parse_response(*status, body) {
                MetricValue::Error(e) => {
                    assert!(
                        e.contains(expected),
                        "{status} {:?}: {e}",
                        String::from_utf8_lossy(body)
                    );
                    for quoted in ["parse error", "proxy says", "secret-123", "abc", "Service"] {
                        assert!(!e.contains(quoted), "the server's text: {e}");
                    }
                }
                other => panic!(
                    "{status} {:?}: expected an error, got {other:?}",
                    String::from_utf8_lossy(body)
                ),
            }
        }
    }

    #[test]
    fn whitespace_is_collapsed_before_sending() {
        assert_eq!(
            collapse_whitespace("\n  sum(\n\t rate(x[1m])\n )\n"),
            "sum( rate(x[1m]) )"
        );
    }

    #[test]
    fn credentials_follow_flaggers_precedence_and_never_print() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            Auth::from_values(s("t"), s("u"), s("p")),
            Ok(Auth::Bearer("t".into()))
        );
        assert_eq!(
            Auth::from_values(None, s("u"), s("p")),
            Ok(Auth::Basic {
                username: "u".into(),
                password: "p".into()
            })
        );
        assert_eq!(Auth::from_values(None, None, None), Ok(Auth::None));
        assert!(Auth::from_values(None, s("u"), None)
            .unwrap_err()
            .contains(PASSWORD_VAR));
        assert!(Auth::from_values(None, None, s("p"))
            .unwrap_err()
            .contains(USERNAME_VAR));
        let shown = format!(
            "{:?}",
            Auth::Basic {
                username: "u".into(),
                password: "secret".into()
            }
        );
        assert!(!shown.contains("secret"), "{shown}");
        assert!(!format!("{:?}", Auth::Bearer("secret".into())).contains("secret"));
    }

    #[test]
    fn addresses_are_checked_and_shown_without_credentials() {
        let p = Prometheus::new(&PrometheusConfig::new(
            "http://user:pw@prom.example:9090/prometheus/",
        ))
        .unwrap();
        assert_eq!(
            p.url.as_str(),
            "http://user:pw@prom.example:9090/prometheus/api/v1/query"
        );
        assert_eq!(p.address(), "http://prom.example:9090/prometheus");
        let p = Prometheus::new(&PrometheusConfig::new("https://prom:9090")).unwrap();
        assert_eq!(p.url.as_str(), "https://prom:9090/api/v1/query");
        for bad in [
            "prom:9090",
            "ftp://prom",
            "http://",
            "http://p:9090/?x=1",
            "",
        ] {
            assert!(
                matches!(
                    Prometheus::new(&PrometheusConfig::new(bad)),
                    Err(PrometheusError::Address { .. })
                ),
                "{bad}"
            );
        }
        let mut c = PrometheusConfig::new("http://p:9090");
        c.headers = vec![("Bad Name".into(), "x".into())];
        assert!(matches!(
            Prometheus::new(&c),
            Err(PrometheusError::Header { .. })
        ));
    }
}
