//! The validated Gateway API route: typed values only, filled in by this router's readers
//! (`flagger.rs` for Flagger's `service` fields, `mod.rs` for a native `spec.route`) and
//! rendered by `render.rs`.

use std::time::Duration;

use serde::{Serialize, Serializer};

/// A validated HTTPRoute.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub version: GatewayVersion,
    /// The Gateways the route attaches to (checked against the CRD when rendering).
    pub parent_refs: Vec<ParentRef>,
    pub hostnames: Vec<String>,
    /// Matches, filters and timeouts every rule carries (boxed: it is large and most
    /// routes leave it empty).
    pub rules: Box<RuleSpec>,
    /// Flagger's `analysis.sessionAffinity`: the attributes of the cookie a rollout sets.
    pub session_affinity: Option<CookieAttributes>,
    /// Flagger's `analysis.mirror` (blue/green only): mirror requests to the canary while the
    /// rollout's state says so.
    pub analysis_mirror: Option<AnalysisMirror>,
    /// `spec.routeSource`: the user's own HTTPRoute, copied with only the apex Service's
    /// backends split (boxed: most canaries have none). When set, it is the whole route and
    /// the fields above are empty.
    pub source: Option<Box<super::source::RouteSource>>,
}

/// The attributes of the session-affinity cookie's `Set-Cookie` header, from
/// `analysis.sessionAffinity` (its `cookieName` is in the core's model and the cookie itself in
/// the status).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CookieAttributes {
    /// Seconds (Flagger's default, 86400, when `maxAge` is missing or 0).
    pub max_age: u32,
    pub domain: Option<String>,
    pub http_only: bool,
    pub partitioned: bool,
    pub path: Option<String>,
    /// `Strict`, `Lax` or `None`.
    pub same_site: Option<String>,
    pub secure: bool,
}

impl CookieAttributes {
    /// Flagger's default cookie lifetime: a day.
    pub const DEFAULT_MAX_AGE: u32 = 86_400;

    /// The `Set-Cookie` value for `cookie` (`name=value`), attributes in Flagger's order.
    pub fn set_cookie(&self, cookie: &str) -> String {
        self.set_cookie_for(cookie, u64::from(self.max_age))
    }

    /// The `Set-Cookie` value of the primary's cookie (`primaryCookieName`): it lives one
    /// analysis interval (`interval`, whole seconds), as Flagger's `BuildCookie(...,
    /// interval.Seconds())` writes it, with the same other attributes. The interval is the one
    /// the analysis runs at (at least 10 s); Flagger parses the spec's text again, so it writes
    /// `Max-Age=1` for `interval: 1s` (and fails with no interval), while running every 10 s.
    pub fn set_primary_cookie(&self, cookie: &str, interval: Duration) -> String {
        self.set_cookie_for(cookie, interval.as_secs())
    }

    fn set_cookie_for(&self, cookie: &str, max_age: u64) -> String {
        let mut out = format!("{cookie}; Max-Age={max_age}");
        if let Some(domain) = &self.domain {
            out.push_str(&format!("; Domain={domain}"));
        }
        if self.http_only {
            out.push_str("; HttpOnly");
        }
        if self.partitioned {
            out.push_str("; Partitioned");
        }
        if let Some(path) = &self.path {
            out.push_str(&format!("; Path={path}"));
        }
        if let Some(same_site) = &self.same_site {
            out.push_str(&format!("; SameSite={same_site}"));
        }
        if self.secure {
            out.push_str("; Secure");
        }
        out
    }
}

/// `analysis.mirror: true` on a blue/green canary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnalysisMirror {
    /// `analysis.mirrorWeight`: the percentage of requests mirrored (`None`: all of them).
    pub percent: Option<u8>,
}

/// The HTTPRoute API version (both have the same schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatewayVersion {
    V1,
    V1beta1,
}

impl GatewayVersion {
    pub fn api_version(self) -> &'static str {
        match self {
            GatewayVersion::V1 => "gateway.networking.k8s.io/v1",
            GatewayVersion::V1beta1 => "gateway.networking.k8s.io/v1beta1",
        }
    }
}

/// A Gateway API parentRef (usually a Gateway).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentRef {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

/// What every rule of a sluice HTTPRoute carries besides its backends: Flagger's
/// `service.match`, `headers`, `rewrite`, `corsPolicy`, `timeout` and `backendTimeout`, checked
/// against the HTTPRoute CRD by `flagger.rs`. The default (native canaries, and Flagger
/// canaries without these fields) matches every request, with no filters and no timeouts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleSpec {
    /// Empty: every request (`PathPrefix /`).
    pub matches: Vec<HttpMatch>,
    pub request_headers: Option<HeaderModifier>,
    pub response_headers: Option<HeaderModifier>,
    pub rewrite: Option<UrlRewrite>,
    /// `RequestMirror` filters, in the order given.
    pub mirrors: Vec<RequestMirror>,
    pub cors: Option<Cors>,
    pub timeouts: Timeouts,
    /// An A/B canary's `analysis.match`, converted at load time; empty for other strategies.
    pub ab_matches: Vec<HttpMatch>,
}

/// A `RequestMirror` filter's `backendRef`. `group` and `kind` hold the CRD defaults (`""`,
/// `Service`) when not given, as the API server stores them on Flagger's Canary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestMirror {
    pub group: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
    /// Required for a core Service (a CEL rule of the CRD).
    pub port: Option<u16>,
}

/// A `RequestHeaderModifier` / `ResponseHeaderModifier` filter; never all empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HeaderModifier {
    /// Sorted by name, as Flagger sorts them.
    pub set: Vec<HttpHeader>,
    /// Sorted by name, as Flagger sorts them.
    pub add: Vec<HttpHeader>,
    /// In the order given.
    pub remove: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpHeader {
    pub name: String,
    pub value: String,
}

/// A `URLRewrite` filter; at least one of the two is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlRewrite {
    pub hostname: Option<String>,
    pub path: Option<PathRewrite>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathRewrite {
    ReplaceFullPath(String),
    /// Valid only in rules with exactly one `PathPrefix` match (checked by `flagger.rs`).
    ReplacePrefixMatch(String),
}

/// A `CORS` filter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Cors {
    pub allow_origins: Vec<String>,
    pub allow_methods: Vec<String>,
    pub allow_headers: Vec<String>,
    pub expose_headers: Vec<String>,
    /// Written only when true, as Flagger does.
    pub allow_credentials: bool,
    /// Seconds, at least 1.
    pub max_age: Option<u32>,
}

/// A rule's `timeouts`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Timeouts {
    pub request: Option<GatewayDuration>,
    pub backend_request: Option<GatewayDuration>,
}

/// A Gateway API Duration (`^([0-9]{1,5}(h|m|s|ms)){1,4}$`): its length, and the text as
/// written (`1m30s`), which is what the route carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayDuration {
    text: String,
    duration: Duration,
}

impl GatewayDuration {
    /// `None` when `text` does not match the CRD's pattern.
    pub fn parse(text: &str) -> Option<GatewayDuration> {
        gateway_duration_ms(text).map(|ms| GatewayDuration {
            text: text.to_string(),
            duration: Duration::from_millis(ms),
        })
    }

    /// As written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn duration(&self) -> Duration {
        self.duration
    }
}

/// Written as given, so the route says what the canary said.
impl Serialize for GatewayDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

/// A Gateway API Duration in milliseconds; `None` when `text` is not one. Hand-written: the
/// pattern is the CRD's own, stricter than any duration crate's syntax.
fn gateway_duration_ms(text: &str) -> Option<u64> {
    let mut rest = text.as_bytes();
    let mut groups = 0;
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || digits > 5 {
            return None;
        }
        let number = rest[..digits]
            .iter()
            .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        rest = &rest[digits..];
        let (unit_ms, unit_len) = match rest {
            [b'm', b's', ..] => (1, 2),
            [b'h', ..] => (3_600_000, 1),
            [b'm', ..] => (60_000, 1),
            [b's', ..] => (1_000, 1),
            _ => return None,
        };
        rest = &rest[unit_len..];
        // At most 4 groups of 99999h: far below u64::MAX.
        total += number * unit_ms;
        groups += 1;
        if groups > 4 {
            return None;
        }
    }
    (groups > 0).then_some(total)
}

/// One HTTPRoute match (converted from an Istio `HTTPMatchRequest` by `flagger.rs`).
/// `kind`s are the HTTPRoute's type names (`Exact`, `PathPrefix`, `RegularExpression`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpMatch {
    pub path: PathMatch,
    pub method: Option<String>,
    pub headers: Vec<ValueMatch>,
    pub query_params: Vec<ValueMatch>,
}

impl HttpMatch {
    /// `PathPrefix /`: what a rule matches when nothing narrower is asked for.
    pub fn all_requests() -> HttpMatch {
        HttpMatch {
            path: PathMatch {
                kind: "PathPrefix",
                value: "/".into(),
            },
            method: None,
            headers: Vec::new(),
            query_params: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathMatch {
    pub kind: &'static str,
    pub value: String,
}

/// A header or query parameter match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValueMatch {
    pub name: String,
    pub kind: &'static str,
    pub value: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateway_durations_follow_the_crd_pattern() {
        for (ok, ms) in [
            ("30s", 30_000),
            ("0s", 0),
            ("1m30s", 90_000),
            ("500ms", 500),
            ("1h30m15s100ms", 5_415_100),
            ("99999h", 359_996_400_000),
            ("1ms1s", 1_001),
        ] {
            assert_eq!(gateway_duration_ms(ok), Some(ms), "{ok}");
        }
        for bad in [
            "",
            "30",
            "1.5s",
            "1d",
            "123456s",
            "1h1m1s1ms1s",
            "-1s",
            "1 s",
            "s",
            "1us",
            "30S",
        ] {
            assert_eq!(gateway_duration_ms(bad), None, "{bad}");
        }
    }
}
