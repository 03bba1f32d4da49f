//! The validated route a canary writes: which kind, which API version, and the fields of
//! Flagger's `service` block that the route carries. Filled in by `spec`, rendered by the
//! routers of this module; the core carries it as an opaque `Canary<Route>` parameter.

use serde::Serialize;

/// The route sluice writes; one renderer per variant.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    HttpRoute {
        version: GatewayVersion,
        parent_refs: Vec<ParentRef>,
        hostnames: Vec<String>,
        /// Matches, filters and timeouts every rule carries (boxed: it is large and most
        /// routes leave it empty).
        rules: Box<RuleSpec>,
    },
    TrafficSplit {
        version: SmiVersion,
    },
}

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmiVersion {
    V1alpha1,
    V1alpha2,
    V1alpha3,
    V1alpha4,
}

impl SmiVersion {
    pub fn api_version(self) -> &'static str {
        match self {
            SmiVersion::V1alpha1 => "split.smi-spec.io/v1alpha1",
            SmiVersion::V1alpha2 => "split.smi-spec.io/v1alpha2",
            SmiVersion::V1alpha3 => "split.smi-spec.io/v1alpha3",
            SmiVersion::V1alpha4 => "split.smi-spec.io/v1alpha4",
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
/// against the HTTPRoute CRD by `spec::gateway`. The default (native canaries, and Flagger
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
    /// Valid only in rules with exactly one `PathPrefix` match (checked by `spec::gateway`).
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

/// A rule's `timeouts`, each a Gateway API Duration string as written (e.g. `30s`, `1m30s`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Timeouts {
    pub request: Option<String>,
    pub backend_request: Option<String>,
}

/// One HTTPRoute match (converted from an Istio `HTTPMatchRequest` by `spec::gateway`).
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
