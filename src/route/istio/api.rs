//! Istio-shaped types: the `networking.istio.io` structures Flagger's Canary carries in
//! `spec.service` (`match`, `headers`, `retries`, `corsPolicy`, `trafficPolicy`) and in
//! `analysis.match`, with the field set of Flagger's Go types (`pkg/apis/istio`), so a Canary
//! Flagger reads is read the same way here.
//!
//! The types are both the validated input and the output: serde reads them from a YAML node
//! (unknown fields are errors, naming the field and its line) and writes them into Istio
//! objects unchanged. Values the Istio CRDs would refuse (durations below 1ms, a `StringMatch`
//! with two kinds, a port name in a DestinationRule) are refused when read.
//!
//! A leaf: it knows no router, so any router that reads Istio-style fields can use it.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{join, Reader};

/// Reads `node` as `T`, reporting the first problem with the line of the field it is in and
/// its dotted path under `path`. `None` when it had errors.
///
/// Inside [`Reader::pruning`] (a Flagger Canary) an unknown key is a warning instead: it is
/// dropped and the rest read again, as the API server prunes it before Flagger reads it.
pub fn read<T: DeserializeOwned>(r: &mut Reader, node: &Node, path: &str) -> Option<T> {
    let mut json = node.to_json();
    loop {
        let e = match serde_path_to_error::deserialize::<_, T>(&json) {
            Ok(value) => return Some(value),
            Err(e) => e,
        };
        let inner = e.path().to_string();
        let message = e.into_inner().to_string();
        let (line, field) = locate(node, path, &inner);
        // Each pass removes one key, so this ends.
        if r.prunes_unknown() && message.starts_with("unknown field `") && prune(&mut json, &inner)
        {
            r.unknown_key(line, &field, &unknown_detail(&message));
            continue;
        }
        r.error(line, &field, message);
        return None;
    }
}

/// serde's `unknown field `x`, expected `a` or `b`` as the reader's hint and list:
/// ` (did you mean "a"?); expected a or b`.
fn unknown_detail(message: &str) -> String {
    let parts: Vec<&str> = message.split('`').collect();
    let key = parts.get(1).copied().unwrap_or_default();
    let known: Vec<&str> = parts.iter().skip(3).step_by(2).copied().collect();
    let hint = crate::yaml::reader::did_you_mean(key, &known)
        .map(|k| format!(" (did you mean {k:?}?)"))
        .unwrap_or_default();
    let expected = message
        .split_once(", ")
        .map(|(_, rest)| format!("; {}", rest.replace('`', "")))
        .unwrap_or_default();
    format!("{hint}{expected}")
}

/// Removes the key at `inner` (serde_path_to_error's `a.b[0].c`) from `json`; whether it
/// was there.
fn prune(json: &mut serde_json::Value, inner: &str) -> bool {
    let mut steps: Vec<Result<&str, usize>> = Vec::new();
    for part in inner.split('.') {
        let (key, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            steps.push(Ok(key));
        }
        steps.extend(
            indexes
                .split(['[', ']'])
                .filter_map(|s| s.parse::<usize>().ok())
                .map(Err),
        );
    }
    let Some((Ok(last), parents)) = steps.split_last() else {
        return false;
    };
    let mut current = Some(json);
    for step in parents {
        current = match step {
            Ok(key) => current.and_then(|v| v.get_mut(*key)),
            Err(i) => current.and_then(|v| v.get_mut(*i)),
        };
    }
    current
        .and_then(serde_json::Value::as_object_mut)
        .is_some_and(|map| map.remove(*last).is_some())
}

/// The line and dotted path of `inner` (serde_path_to_error's `a.b[0].c`) inside `node`. The
/// deepest node that exists gives the line; an unknown field is reported at its key.
fn locate(node: &Node, path: &str, inner: &str) -> (usize, String) {
    let mut line = node.line;
    let mut current = Some(node);
    if inner.is_empty() || inner == "." {
        return (line, path.to_string());
    }
    for part in inner.split('.') {
        let (key, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            current = current.and_then(|n| match &n.value {
                Value::Map(entries) => entries.iter().find(|(k, _)| k.text == key).map(|(k, v)| {
                    line = k.line;
                    v
                }),
                _ => None,
            });
        }
        for index in indexes
            .split(['[', ']'])
            .filter(|s| !s.is_empty())
            .filter_map(|s| s.parse::<usize>().ok())
        {
            current = current.and_then(|n| match &n.value {
                Value::Seq(items) => items.get(index).inspect(|v| line = v.line),
                _ => None,
            });
        }
        if let Some(n) = current {
            line = n.line;
        }
    }
    let field = if path.is_empty() {
        inner.to_string()
    } else if inner.starts_with('[') {
        format!("{path}{inner}")
    } else {
        join(path, inner)
    };
    (line, field)
}

/// An Istio duration (`1s`, `1.5s`, `100ms`, `1h30m`), as the CRDs' CEL `duration()` reads it,
/// of at least 1ms (the CRDs' rule on every duration sluice writes). Written as given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct IstioDuration(String);

impl IstioDuration {
    pub fn parse(text: &str) -> Result<IstioDuration, String> {
        match duration_nanos(text) {
            Some(ns) if ns >= 1_000_000 => Ok(IstioDuration(text.to_string())),
            Some(_) => Err(format!("expected a duration of at least 1ms, found {text:?}")),
            None => Err(format!(
                "expected a duration such as 500ms, 1s, 1.5s or 1h30m (units h, m, s, ms, us, ns), found {text:?}"
            )),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for IstioDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        IstioDuration::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Nanoseconds of a Go-style duration (what CEL's `duration()` accepts): one or more groups
/// of a decimal number and a unit. `None` when it is not one.
fn duration_nanos(text: &str) -> Option<u128> {
    let mut rest = text;
    let mut total: f64 = 0.0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        rest = &rest[number_len..];
        let (unit, len) = [
            ("ns", 1.0),
            ("us", 1e3),
            ("µs", 1e3),
            ("ms", 1e6),
            ("h", 3.6e12),
            ("m", 6e10),
            ("s", 1e9),
        ]
        .iter()
        .find(|(u, _)| rest.starts_with(u))
        .map(|(u, scale)| (*scale, u.len()))?;
        rest = &rest[len..];
        total += value * unit;
    }
    (total.is_finite() && total < 3.2e20).then_some(total as u128)
}

/// An Istio `StringMatch`: exactly one of `exact`, `prefix`, `regex`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum StringMatch {
    Exact(String),
    Prefix(String),
    Regex(String),
}

/// An Istio `HTTPMatchRequest` (Flagger's field set).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpMatchRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<StringMatch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<StringMatch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<StringMatch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<StringMatch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, StringMatch>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateways: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_params: Option<BTreeMap<String, StringMatch>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_uri_case: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_headers: Option<BTreeMap<String, StringMatch>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_namespace: Option<String>,
}

impl HttpMatchRequest {
    /// The fields set, by their YAML names, in declaration order.
    pub fn fields(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let checks: [(&str, bool); 13] = [
            ("name", self.name.is_some()),
            ("uri", self.uri.is_some()),
            ("scheme", self.scheme.is_some()),
            ("method", self.method.is_some()),
            ("authority", self.authority.is_some()),
            ("headers", self.headers.is_some()),
            ("port", self.port.is_some()),
            ("sourceLabels", self.source_labels.is_some()),
            ("gateways", self.gateways.is_some()),
            ("queryParams", self.query_params.is_some()),
            ("ignoreUriCase", self.ignore_uri_case),
            ("withoutHeaders", self.without_headers.is_some()),
            ("sourceNamespace", self.source_namespace.is_some()),
        ];
        for (name, set) in checks {
            if set {
                out.push(name);
            }
        }
        out
    }
}

/// Istio `Headers`: changes to request and response headers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Headers {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<HeaderOperations>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<HeaderOperations>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderOperations {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub add: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

/// Istio `HTTPRetry`. `attempts` is always written, as Flagger writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRetry {
    /// Istio's int32, never negative.
    #[serde(default, deserialize_with = "non_negative_i32")]
    pub attempts: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<IstioDuration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_on: Option<String>,
}

fn non_negative_i32<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    let value = i64::deserialize(d)?;
    i32::try_from(value)
        .ok()
        .filter(|v| *v >= 0)
        .ok_or_else(|| {
            serde::de::Error::custom(format!("expected 0..={}, found {value}", i32::MAX))
        })
}

/// Istio `CorsPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CorsPolicy {
    /// Deprecated in Istio but still served; Flagger's examples use it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_origin: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_origins: Vec<StringMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_methods: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_headers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<IstioDuration>,
    /// Written only when true, as Flagger does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_credentials: bool,
}

/// Istio `TrafficPolicy` (Flagger's field set), written into both DestinationRules.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrafficPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_pool: Option<ConnectionPool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outlier_detection: Option<OutlierDetection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Tls>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub port_level_settings: Vec<PortTrafficPolicy>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PortTrafficPolicy {
    pub port: PortNumber,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_pool: Option<ConnectionPool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outlier_detection: Option<OutlierDetection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Tls>,
}

/// A DestinationRule's port selector: Istio's CRD has only `number` there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortNumber {
    pub number: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SimpleLb {
    Unspecified,
    LeastConn,
    Random,
    Passthrough,
    RoundRobin,
    LeastRequest,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simple: Option<SimpleLb>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consistent_hash: Option<ConsistentHash>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locality_lb_setting: Option<LocalityLbSetting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_duration_secs: Option<IstioDuration>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConsistentHash {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_header_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_cookie: Option<HttpCookie>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub use_source_ip: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_ring_size: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpCookie {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub ttl: CookieTtl,
}

/// A cookie's `ttl`: any duration, 0s included (a session cookie).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct CookieTtl(String);

impl<'de> Deserialize<'de> for CookieTtl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        match duration_nanos(&text) {
            Some(_) => Ok(CookieTtl(text)),
            None => Err(serde::de::Error::custom(format!(
                "expected a duration such as 0s, 60s or 1h, found {text:?}"
            ))),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalityLbSetting {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distribute: Vec<Distribute>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failover: Vec<Failover>,
    /// Flagger's Go type spells it `failover_priority`; Istio's CRD `failoverPriority`, which
    /// is what sluice writes.
    #[serde(
        default,
        alias = "failover_priority",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub failover_priority: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Distribute {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub to: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failover {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionPool {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpSettings>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_timeout: Option<IstioDuration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum H2UpgradePolicy {
    Default,
    DoNotUpgrade,
    Upgrade,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2_upgrade_policy: Option<H2UpgradePolicy>,
    #[serde(
        default,
        rename = "http1MaxPendingRequests",
        skip_serializing_if = "Option::is_none"
    )]
    pub http1_max_pending_requests: Option<i32>,
    #[serde(
        default,
        rename = "http2MaxRequests",
        skip_serializing_if = "Option::is_none"
    )]
    pub http2_max_requests: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests_per_connection: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<IstioDuration>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutlierDetection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_errors: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_gateway_errors: Option<u32>,
    #[serde(
        default,
        rename = "consecutive5xxErrors",
        skip_serializing_if = "Option::is_none"
    )]
    pub consecutive_5xx_errors: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub split_external_local_origin_errors: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_local_origin_failures: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<IstioDuration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_ejection_time: Option<IstioDuration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ejection_percent: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_health_percent: Option<i32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TlsMode {
    Disable,
    Simple,
    Mutual,
    IstioMutual,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tls {
    pub mode: TlsMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_certificates: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sni: Option<String>,
}

impl fmt::Display for StringMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StringMatch::Exact(t) => write!(f, "exact {t:?}"),
            StringMatch::Prefix(t) => write!(f, "prefix {t:?}"),
            StringMatch::Regex(t) => write!(f, "regex {t:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_yaml<T: DeserializeOwned>(yaml: &str) -> (Option<T>, Vec<String>) {
        let docs = crate::yaml::node::parse_documents(yaml).expect("test YAML parses");
        let mut r = Reader::new("c.yaml");
        let value = read::<T>(&mut r, &docs[0].root, "spec.service.trafficPolicy");
        (value, r.errors.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn durations_follow_cel_and_the_1ms_floor() {
        for ok in ["1ms", "1s", "1.5s", "0.5s", "1h30m", "100us1ms", "2m"] {
            assert!(IstioDuration::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "1", "s", "1d", "1 s", "-1s", "1..5s", "500us", "0s", "1S",
        ] {
            assert!(IstioDuration::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_misspelt_traffic_policy_field_is_reported_at_its_line() {
        let (value, errors) =
            read_yaml::<TrafficPolicy>("connectionPool:\n  tcp:\n    maxConection: 10\n");
        assert_eq!(value, None);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("c.yaml:3: spec.service.trafficPolicy.connectionPool.tcp.maxConection: unknown field `maxConection`, expected"),
            "{errors:?}"
        );
    }

    /// In a Flagger Canary the API server prunes it: a warning, and the rest is read.
    #[test]
    fn a_misspelt_field_of_a_flagger_canary_is_pruned_with_a_warning() {
        let yaml = "connectionPool:\n  tcp:\n    maxConection: 10\n    connectTimeout: 1s\nloadBalancer: {simple: ROUND_ROBIN, x: 1}\n";
        let docs = crate::yaml::node::parse_documents(yaml).expect("test YAML parses");
        let mut r = Reader::new("c.yaml");
        let value =
            r.pruning(|r| read::<TrafficPolicy>(r, &docs[0].root, "spec.service.trafficPolicy"));
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        let value = serde_json::to_value(value.expect("read")).unwrap();
        assert_eq!(value["connectionPool"]["tcp"]["connectTimeout"], "1s");
        assert_eq!(value["connectionPool"]["tcp"].get("maxConection"), None);
        let warnings: Vec<String> = r.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].starts_with("c.yaml:3: spec.service.trafficPolicy.connectionPool.tcp.maxConection: unknown field (did you mean \"maxConnections\"?); expected maxConnections or connectTimeout"),
            "{warnings:?}"
        );
        assert!(
            warnings[1]
                .starts_with("c.yaml:5: spec.service.trafficPolicy.loadBalancer.x: unknown field"),
            "{warnings:?}"
        );
    }

    #[test]
    fn a_short_duration_is_reported_at_its_line() {
        let (value, errors) = read_yaml::<TrafficPolicy>(
            "outlierDetection:\n  consecutive5xxErrors: 5\n  interval: 0s\n",
        );
        assert_eq!(value, None);
        assert_eq!(
            errors,
            ["c.yaml:3: spec.service.trafficPolicy.outlierDetection.interval: expected a duration of at least 1ms, found \"0s\""]
        );
    }

    #[test]
    fn a_string_match_takes_one_kind() {
        let (value, errors) =
            read_yaml::<BTreeMap<String, StringMatch>>("x-canary:\n  exact: a\n  prefix: b\n");
        assert_eq!(value, None);
        assert_eq!(errors.len(), 1, "{errors:?}");
        let (value, errors) =
            read_yaml::<BTreeMap<String, StringMatch>>("x-canary:\n  suffix: b\n");
        assert_eq!(value, None);
        assert!(errors[0].contains("unknown variant `suffix`"), "{errors:?}");
    }

    #[test]
    fn traffic_policies_round_trip_in_flagger_order() {
        let (value, errors) = read_yaml::<TrafficPolicy>(
            "tls:\n  mode: ISTIO_MUTUAL\nloadBalancer:\n  consistentHash:\n    httpCookie: {name: user, ttl: 0s}\n",
        );
        assert_eq!(errors, Vec::<String>::new());
        let json = serde_json::to_value(value.expect("valid")).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!({"loadBalancer": {"consistentHash": {"httpCookie": {"name": "user", "ttl": "0s"}}}, "tls": {"mode": "ISTIO_MUTUAL"}})
        );
    }
}
