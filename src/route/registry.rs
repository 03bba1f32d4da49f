//! The registry: every router, listed once in `routers!` below. From that list it builds
//! [`Route`] (a canary's validated route, one variant per router holding its config),
//! [`Provider`] (what a Flagger `provider` string selects) and the lookups that map provider
//! strings and native `spec.route` kinds to a router. An unknown string or kind is an error
//! listing what is known, never a silent fallback (Flagger's factory falls back to Istio on a
//! typo).

use crate::route::Canary;
use crate::route::{
    apisix, appmesh, contour, gateway_api, gloo, ingress, istio, knative, kubernetes, kuma, smi,
    traefik, AbInput, BuiltinMetrics, FlaggerFields, FlaggerInput, FlaggerPrefix, NativeInput,
    OwnTarget, ReadyObject, RenderInput, Revisions, RouteError, Router,
};
use crate::yaml::node::Node;
use crate::yaml::reader::{join, Reader};

/// Expands the router list into the two enums and one function per operation, so adding a
/// router is one line and every operation dispatches to it. (A macro rather than hand-written
/// `match`es: the lookups below iterate over routers, and a forgotten arm there would not
/// fail to compile.)
macro_rules! routers {
    ($( $(#[doc = $doc:literal])* $variant:ident => $router:ty, )+) => {
        /// The route a canary writes: the router chosen at load time and its validated config.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Route {
            $( $(#[doc = $doc])* $variant(<$router as Router>::Config), )+
        }

        /// What a Flagger `provider` string selects: a router and its variant.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Provider {
            $( $(#[doc = $doc])* $variant(<$router as Router>::Variant), )+
        }

        impl Provider {
            /// The `spec` references (`ingressRef`, `routeRef`, `upstreamRef`) this provider's
            /// router reads; any other one on a canary is refused.
            pub fn references(self) -> &'static [&'static str] {
                match self {
                    $( Provider::$variant(_) => <$router as Router>::REFERENCES, )+
                }
            }

            /// The router's rows of the Flagger field table.
            pub fn flagger_fields(self) -> &'static FlaggerFields {
                match self {
                    $( Provider::$variant(_) => &<$router as Router>::FLAGGER_FIELDS, )+
                }
            }

            /// The target the router rolls out itself instead of a workload, if any.
            pub fn own_target(self) -> Option<&'static OwnTarget> {
                match self {
                    $( Provider::$variant(_) => <$router as Router>::OWN_TARGET.as_ref(), )+
                }
            }

            /// Reads the route fields of a Flagger canary with this provider; `None` when
            /// any had errors (reported through `r`).
            pub fn read_flagger(self, r: &mut Reader, input: &FlaggerInput) -> Option<Route> {
                match self {
                    $( Provider::$variant(variant) => {
                        <$router as Router>::read_flagger(r, variant, input).map(Route::$variant)
                    } )+
                }
            }
        }

        impl Route {
            /// Converts and checks an A/B canary's `analysis.match` into this route.
            pub fn read_ab_matches(&mut self, r: &mut Reader, input: &AbInput) {
                match self {
                    $( Route::$variant(config) => {
                        <$router as Router>::read_ab_matches(config, r, input)
                    } )+
                }
            }

            /// Checks what the router needs of the whole validated canary.
            pub fn check_canary(&self, r: &mut Reader, canary: &Canary, spec: &Node) {
                match self {
                    $( Route::$variant(config) => {
                        <$router as Router>::check_canary(config, r, canary, spec)
                    } )+
                }
            }

            /// The `routeRef` name the canary's metric queries call `{{ route }}`, when its
            /// router reads one.
            pub fn route_ref(&self) -> Option<&str> {
                match self {
                    $( Route::$variant(config) => <$router as Router>::route_ref(config), )+
                }
            }

            /// Where the canary's two revisions run.
            pub fn revisions(&self) -> Revisions<'_> {
                match self {
                    $( Route::$variant(config) => <$router as Router>::revisions(config), )+
                }
            }

            /// The object the readiness gate reads after the workloads, if any.
            pub fn readiness<'a>(&'a self, canary: &'a Canary) -> Option<ReadyObject<'a>> {
                match self {
                    $( Route::$variant(config) => {
                        <$router as Router>::readiness(config, canary)
                    } )+
                }
            }

            /// The route object's YAML, `None` for a router that writes none;
            /// [`crate::route::render_route`] checks weights and backends first.
            pub(super) fn render(&self, input: &RenderInput) -> Result<Option<String>, RouteError> {
                match self {
                    $( Route::$variant(config) => <$router as Router>::render(config, input), )+
                }
            }
        }

        /// Every router, in the order messages list them.
        const ROUTERS: &[Entry] = &[
            $( Entry {
                object: <$router as Router>::OBJECT,
                native_kind: <$router as Router>::NATIVE_KIND,
                native_fields: <$router as Router>::NATIVE_FIELDS,
                names: |listed| {
                    let aliases: &[_] = if listed { &[] } else { <$router as Router>::ALIASES };
                    <$router as Router>::PROVIDERS
                        .iter()
                        .chain(aliases)
                        .map(|(name, _)| *name)
                        .collect()
                },
                lookup: |text| {
                    <$router as Router>::PROVIDERS
                        .iter()
                        .chain(<$router as Router>::ALIASES)
                        .find(|(name, _)| *name == text)
                        .map(|(_, variant)| Provider::$variant(*variant))
                },
                near_miss: <$router as Router>::near_miss,
                flagger_prefixes: <$router as Router>::FLAGGER_PREFIXES,
                flagger_fields: &<$router as Router>::FLAGGER_FIELDS,
                builtin_metrics: <$router as Router>::builtin_metrics,
                own_target: <$router as Router>::OWN_TARGET.as_ref(),
                read_native: |r, native| {
                    <$router as Router>::read_native(r, native).map(Route::$variant)
                },
            }, )+
        ];
    };
}

routers! {
    /// SMI TrafficSplit: `osm`, `linkerd`, `smi:v1alpha1` to `smi:v1alpha4`.
    Smi => smi::Smi,
    /// Gateway API HTTPRoute: `gatewayapi:v1`, `gatewayapi:v1beta1`.
    GatewayApi => gateway_api::GatewayApi,
    /// Istio VirtualService and DestinationRules: `istio`, `istio:v1beta1`, `istio:v1`.
    Istio => istio::Istio,
    /// No route object, blue/green through the Services (Flagger's `NopRouter`): `kubernetes`.
    Kubernetes => kubernetes::Kubernetes,
    /// Kuma TrafficRoute (cluster-scoped, in the Canary's mesh): `kuma`.
    Kuma => kuma::Kuma,
    /// Gloo Edge RouteTable and the primary and canary Upstreams: `gloo`.
    Gloo => gloo::Gloo,
    /// APISIX ApisixRoute `<route>-<svc>-canary` copied from `routeRef`: `apisix`.
    Apisix => apisix::Apisix,
    /// The canary Ingress `<ingress>-canary`, a copy of `spec.ingressRef`: `nginx`, `skipper`.
    Ingress => ingress::Ingress,
    /// Contour HTTPProxy: `contour`.
    Contour => contour::Contour,
    /// Traefik TraefikService: `traefik`.
    Traefik => traefik::Traefik,
    /// The Knative Service's traffic between two revisions: `knative`.
    Knative => knative::Knative,
    /// App Mesh VirtualNodes, VirtualRouters and VirtualServices: `appmesh:v1beta2`.
    AppMesh => appmesh::AppMesh,
}

/// What Flagger uses when neither the Canary nor its own flags name a provider: Istio, as
/// `provider: istio` (VirtualService `networking.istio.io/v1beta1`, Istio's metric queries).
pub const FLAGGER_DEFAULT_PROVIDER: Provider = Provider::Istio(istio::IstioVersion::V1beta1);
/// [`FLAGGER_DEFAULT_PROVIDER`]'s `spec.provider` string.
pub const FLAGGER_DEFAULT_PROVIDER_NAME: &str = "istio";

/// One router's registry entry, built by `routers!` from its [`Router`] impl.
struct Entry {
    object: &'static str,
    native_kind: &'static str,
    native_fields: &'static [&'static str],
    /// Its provider strings: the listed ones (`true`), or all including aliases.
    names: fn(bool) -> Vec<&'static str>,
    lookup: fn(&str) -> Option<Provider>,
    near_miss: fn(&str) -> Option<String>,
    flagger_prefixes: &'static [FlaggerPrefix],
    flagger_fields: &'static FlaggerFields,
    builtin_metrics: fn(&str) -> Option<BuiltinMetrics>,
    own_target: Option<&'static OwnTarget>,
    read_native: fn(&mut Reader, &NativeInput) -> Option<Route>,
}

/// `a`, `a or b`, `a, b or c`.
fn or_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [only] => (*only).to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// The objects sluice can write, for messages: `SMI TrafficSplit, Gateway API HTTPRoute or ...`.
pub fn route_objects() -> String {
    let objects: Vec<&str> = ROUTERS.iter().map(|e| e.object).collect();
    or_list(&objects)
}

/// Every Flagger `provider` string sluice routes, router by router as messages list them
/// (aliases left out). Tests walk it so a router added to `routers!` is covered unasked.
pub fn provider_names() -> Vec<&'static str> {
    ROUTERS.iter().flat_map(|e| (e.names)(true)).collect()
}

/// Every router's rows of the Flagger field table, in registry order.
pub fn flagger_fields() -> impl Iterator<Item = &'static FlaggerFields> {
    ROUTERS.iter().map(|e| e.flagger_fields)
}

/// The targets routers roll out themselves instead of a workload (a Knative Service).
pub fn own_targets() -> impl Iterator<Item = &'static OwnTarget> {
    ROUTERS.iter().filter_map(|e| e.own_target)
}

/// The built-in metrics for a canary's `spec.provider` string (a native canary's is not
/// checked against the registry, and Flagger's observer factory matches some by prefix):
/// `None` when no router claims it.
pub fn builtin_metrics(provider: &str) -> Option<BuiltinMetrics> {
    ROUTERS.iter().find_map(|e| (e.builtin_metrics)(provider))
}

/// Every router's [`Router::FLAGGER_PREFIXES`], in registry order: Flagger's factory tries
/// them in this order, first match wins.
fn flagger_prefixes() -> impl Iterator<Item = &'static FlaggerPrefix> {
    ROUTERS.iter().flat_map(|e| e.flagger_prefixes)
}

/// The provider string a Flagger `provider` runs as by Flagger's prefix rule, and what
/// sluice writes for it; `None` when `text` is a provider's own name or matches no prefix.
fn by_prefix(text: &str) -> Option<(&'static str, &'static str)> {
    if ROUTERS.iter().any(|e| (e.lookup)(text).is_some()) {
        return None;
    }
    flagger_prefixes()
        .find(|p| text.starts_with(p.prefix))
        .map(|p| (p.runs_as, p.writes))
}

/// What to tell the user when `text` selects its router by Flagger's prefix rule only
/// (`gatewayapi:v1alpha2`): the provider it runs as and the API sluice writes. `None` for a
/// provider's own name.
pub fn provider_by_prefix(text: &str) -> Option<String> {
    by_prefix(text).map(|(name, writes)| {
        format!("{text:?} runs as provider {name:?}, as Flagger's router factory matches it by prefix; sluice writes {writes}")
    })
}

/// Maps a Flagger `provider` string to its router, by name or by Flagger's prefix rule
/// ([`provider_by_prefix`]); the error says what is supported.
pub fn parse_provider(text: &str) -> Result<Provider, String> {
    let name = by_prefix(text).map_or(text, |(name, _)| name);
    if let Some(provider) = ROUTERS.iter().find_map(|e| (e.lookup)(name)) {
        return Ok(provider);
    }
    let names: Vec<&str> = ROUTERS.iter().flat_map(|e| (e.names)(true)).collect();
    let supported = format!("supported: {}", names.join(", "));
    match ROUTERS.iter().find_map(|e| (e.near_miss)(text)) {
        Some(message) => Err(format!("{message}; {supported}")),
        None => Err(format!(
            "sluice does not route provider {text:?} (it writes {}); {supported}",
            route_objects()
        )),
    }
}

impl Route {
    /// Reads a native canary's `spec.route`: `apiVersion` and `kind` pick the router, which
    /// reads the rest; another router's fields are errors. `None` when anything had errors
    /// (reported through `r`).
    pub fn read_native(r: &mut Reader, node: &Node) -> Option<Route> {
        let p = "spec.route";
        let mut keys = vec!["apiVersion", "kind"];
        for field in ROUTERS.iter().flat_map(|e| e.native_fields) {
            if !keys.contains(field) {
                keys.push(field);
            }
        }
        r.map(node, p, &keys)?;
        let api = r
            .required(node, p, "apiVersion")
            .and_then(|n| r.string(n, "spec.route.apiVersion").map(|s| (n.line, s)));
        let kind = r
            .required(node, p, "kind")
            .and_then(|n| r.string(n, "spec.route.kind").map(|s| (n.line, s)));
        let ((api_line, api), (kind_line, kind)) = (api?, kind?);
        // An empty kind: a router with no native route (`knative`).
        let native = || ROUTERS.iter().filter(|e| !e.native_kind.is_empty());
        let Some(entry) = native().find(|e| e.native_kind == kind) else {
            let mut kinds: Vec<&str> = native().map(|e| e.native_kind).collect();
            kinds.sort_unstable();
            r.error(
                kind_line,
                "spec.route.kind",
                format!("expected {}, found {kind:?}", or_list(&kinds)),
            );
            return None;
        };
        let foreign: Vec<&str> = keys[2..]
            .iter()
            .copied()
            .filter(|k| !entry.native_fields.contains(k))
            .collect();
        for key in &foreign {
            if let Some(n) = node.get(key) {
                r.error(
                    n.line,
                    &join(p, key),
                    format!("{kind} has no {}; remove this field", or_list(&foreign)),
                );
            }
        }
        let native = NativeInput {
            route: node,
            api_version: &api,
            api_line,
        };
        (entry.read_native)(r, &native)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::gateway_api::GatewayVersion;
    use crate::route::istio::IstioVersion;
    use crate::route::smi::SmiVersion;
    use crate::route::JudgePrimary;

    #[test]
    fn providers_map_like_flagger() {
        assert_eq!(
            parse_provider("osm"),
            Ok(Provider::Smi(SmiVersion::V1alpha2))
        );
        assert_eq!(
            parse_provider("linkerd"),
            Ok(Provider::Smi(SmiVersion::V1alpha1))
        );
        assert_eq!(
            parse_provider("smi:v1alpha3"),
            Ok(Provider::Smi(SmiVersion::V1alpha3))
        );
        assert_eq!(
            parse_provider("gatewayapi:v1beta1"),
            Ok(Provider::GatewayApi(GatewayVersion::V1beta1))
        );
        assert!(parse_provider("gatewayapi").unwrap_err().contains("bare"));
        assert_eq!(
            parse_provider("istio"),
            Ok(Provider::Istio(IstioVersion::V1beta1))
        );
        assert_eq!(
            parse_provider("istio:v1"),
            Ok(Provider::Istio(IstioVersion::V1))
        );
        assert_eq!(
            parse_provider("nginx"),
            Ok(Provider::Ingress(crate::route::ingress::Controller::Nginx))
        );
        assert_eq!(parse_provider("contour"), Ok(Provider::Contour(())));
        assert_eq!(parse_provider("traefik"), Ok(Provider::Traefik(())));
        assert!(parse_provider("cilium")
            .unwrap_err()
            .contains("does not route"));
        assert_eq!(parse_provider("appmesh:v1beta2"), Ok(Provider::AppMesh(())));
        assert_eq!(
            parse_provider("appmesh:v1beta2x"),
            Ok(Provider::AppMesh(()))
        );
        // Flagger's prefix rules (pkg/router/factory.go): v1beta1 first, then any v1….
        assert_eq!(
            parse_provider("gatewayapi:v1alpha2"),
            Ok(Provider::GatewayApi(GatewayVersion::V1))
        );
        assert_eq!(
            parse_provider("gatewayapi:v1beta1.5"),
            Ok(Provider::GatewayApi(GatewayVersion::V1beta1))
        );
        assert_eq!(provider_by_prefix("gatewayapi:v1"), None);
        assert_eq!(
            provider_by_prefix("gatewayapi:v1alpha2").as_deref(),
            Some("\"gatewayapi:v1alpha2\" runs as provider \"gatewayapi:v1\", as Flagger's router factory matches it by prefix; sluice writes gateway.networking.k8s.io/v1 HTTPRoutes")
        );
        assert!(parse_provider("gatewayapi:v2").is_err());
        // Flagger's plain `appmesh` is its v1beta1 router: refused, pointing at v1beta2.
        assert!(parse_provider("appmesh")
            .unwrap_err()
            .contains("use provider \"appmesh:v1beta2\""));
    }

    #[test]
    fn unknown_providers_list_every_supported_one() {
        let supported = "supported: osm, linkerd, smi:v1alpha1, smi:v1alpha2, smi:v1alpha3, smi:v1alpha4, gatewayapi:v1, gatewayapi:v1beta1, istio, istio:v1beta1, istio:v1, kubernetes, kuma, gloo, apisix, nginx, skipper, contour, traefik, knative, appmesh:v1beta2";
        assert_eq!(
            parse_provider("cilium"),
            Err(format!("sluice does not route provider \"cilium\" (it writes SMI TrafficSplit, Gateway API HTTPRoute, Istio VirtualService, Kubernetes Services for blue/green, Kuma TrafficRoute, Gloo RouteTable and Upstreams, APISIX ApisixRoute, canary Ingress (nginx, skipper), Contour HTTPProxy, Traefik TraefikService, Knative Service traffic or App Mesh VirtualNodes, VirtualRouters and VirtualServices); {supported}"))
        );
        assert_eq!(
            parse_provider("gatewayapi"),
            Err(format!("expected a Gateway API version (gatewayapi:v1 or gatewayapi:v1beta1), found a bare \"gatewayapi\"; {supported}"))
        );
        assert_eq!(
            parse_provider("Istio"),
            Err(format!(
                "provider names are lowercase: expected \"istio\", found \"Istio\"; {supported}"
            ))
        );
        assert_eq!(
            route_objects(),
            "SMI TrafficSplit, Gateway API HTTPRoute, Istio VirtualService, Kubernetes Services for blue/green, Kuma TrafficRoute, Gloo RouteTable and Upstreams, APISIX ApisixRoute, canary Ingress (nginx, skipper), Contour HTTPProxy, Traefik TraefikService, Knative Service traffic or App Mesh VirtualNodes, VirtualRouters and VirtualServices"
        );
        // An alias works but is not advertised.
        assert_eq!(
            parse_provider("smi"),
            Ok(Provider::Smi(SmiVersion::V1alpha1))
        );
    }

    /// The prefix table names what each router writes, in the router's own words.
    #[test]
    fn prefix_rules_name_the_api_their_router_writes() {
        for p in flagger_prefixes() {
            let (prefix, name, writes) = (p.prefix, p.runs_as, p.writes);
            assert!(name.starts_with(prefix), "{prefix}");
            let api = match parse_provider(name) {
                Ok(Provider::GatewayApi(v)) => v.api_version(),
                Ok(Provider::AppMesh(())) => crate::route::appmesh::API_VERSION,
                other => panic!("{name}: {other:?}"),
            };
            assert!(writes.starts_with(&format!("{api} ")), "{writes}");
        }
    }

    /// A provider string or native kind served by two routers would silently go to the first.
    #[test]
    fn provider_names_and_native_kinds_name_one_router_each() {
        let mut names: Vec<&str> = ROUTERS.iter().flat_map(|e| (e.names)(false)).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "a provider string is listed twice");
        let mut kinds: Vec<&str> = ROUTERS.iter().map(|e| e.native_kind).collect();
        kinds.sort_unstable();
        kinds.dedup();
        assert_eq!(kinds.len(), ROUTERS.len(), "a native kind is listed twice");
        for e in ROUTERS {
            assert!(
                e.native_fields
                    .iter()
                    .all(|f| !["apiVersion", "kind"].contains(f)),
                "{} claims apiVersion or kind",
                e.native_kind
            );
            for name in (e.names)(false) {
                assert!((e.lookup)(name).is_some(), "{name}");
            }
        }
    }

    /// What every router must say besides its route: its Flagger field rows (a required const,
    /// checked against the table in `manifest::flagger_fields`), its readiness and revisions rules
    /// (required methods), and built-in metric queries or an explicit none for every provider
    /// string it serves, claimed by no other router.
    #[test]
    fn every_router_says_its_builtin_metrics_for_each_of_its_providers() {
        for e in ROUTERS {
            assert!(
                !e.flagger_fields.name.is_empty(),
                "{}: no table name",
                e.object
            );
            for name in (e.names)(false) {
                assert!(
                    (e.builtin_metrics)(name).is_some(),
                    "{}: provider {name} has no built-in metrics and no explicit none",
                    e.object
                );
                let claimed = ROUTERS
                    .iter()
                    .filter(|other| (other.builtin_metrics)(name).is_some())
                    .count();
                assert_eq!(
                    claimed, 1,
                    "provider {name}: built-in metrics of {claimed} routers"
                );
            }
        }
    }

    /// Every built-in query set says how the judge selects the primary, and the rule
    /// holds for its queries: `{{ target }}` to rename, or each replaced text in both.
    #[test]
    fn every_routers_judge_primary_rule_fits_its_queries() {
        for e in ROUTERS {
            for name in (e.names)(false) {
                let Some(BuiltinMetrics::Queries(q)) = (e.builtin_metrics)(name) else {
                    continue;
                };
                let both = [q.success_rate, q.duration];
                match q.judge_primary {
                    JudgePrimary::Workload => {
                        for t in both {
                            assert!(t.contains("{{ target }}"), "{name}: {t}");
                        }
                    }
                    JudgePrimary::Replace(pairs) => {
                        assert!(q.encode_names.is_none(), "{name}: encoded names");
                        assert!(!pairs.is_empty(), "{name}: nothing to replace");
                        for (from, to) in pairs {
                            assert_ne!(from, to, "{name}");
                            for t in both {
                                assert!(t.contains(from), "{name}: {from:?} not in {t}");
                            }
                        }
                    }
                    JudgePrimary::Unselectable => {}
                }
            }
        }
    }

    /// Reads `yaml` as the `spec.route` mapping of `c.yaml`.
    fn native(yaml: &str) -> (Option<Route>, Vec<String>) {
        let docs = crate::yaml::node::parse_documents(yaml).expect("test YAML parses");
        let mut r = Reader::new("c.yaml");
        let route = Route::read_native(&mut r, &docs[0].root);
        (route, r.errors.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn native_routes_pick_their_router_by_kind() {
        assert_eq!(
            native("apiVersion: split.smi-spec.io/v1alpha4\nkind: TrafficSplit\n"),
            (
                Some(Route::Smi(crate::route::smi::Config {
                    version: SmiVersion::V1alpha4,
                    argo: None,
                })),
                Vec::new()
            )
        );
        let (route, errors) = native(
            "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: HTTPRoute\nparentRefs: [{name: gw}]\nhostnames: [a.example]\n",
        );
        assert_eq!(errors, Vec::<String>::new());
        let Some(Route::GatewayApi(config)) = route else {
            panic!("expected an HTTPRoute, found {route:?}");
        };
        assert_eq!(config.version, GatewayVersion::V1beta1);
        assert_eq!(config.parent_refs[0].name, "gw");
        assert_eq!(config.hostnames, ["a.example"]);
    }

    #[test]
    fn bad_native_routes_are_reported_with_line_and_field() {
        let cases: [(&str, &[&str]); 5] = [
            (
                "apiVersion: split.smi-spec.io/v1alpha2\nkind: ServiceEntry\n",
                &["c.yaml:2: spec.route.kind: expected ApisixRoute, HTTPProxy, HTTPRoute, Ingress, RouteTable, Service, TraefikService, TrafficRoute, TrafficSplit, VirtualRouter or VirtualService, found \"ServiceEntry\""],
            ),
            (
                "apiVersion: split.smi-spec.io/v1\nkind: TrafficSplit\nparentRefs: [{name: gw}]\nhostnames: [a.example]\n",
                &[
                    "c.yaml:3: spec.route.parentRefs: TrafficSplit has no parentRefs, hostnames, hosts, gateways or mesh; remove this field",
                    "c.yaml:4: spec.route.hostnames: TrafficSplit has no parentRefs, hostnames, hosts, gateways or mesh; remove this field",
                    "c.yaml:1: spec.route.apiVersion: expected split.smi-spec.io/v1alpha1..v1alpha4 for TrafficSplit, found \"split.smi-spec.io/v1\"",
                ],
            ),
            (
                "apiVersion: gateway.networking.k8s.io/v1alpha2\nkind: HTTPRoute\nparentRefs: [{name: gw}]\n",
                &["c.yaml:1: spec.route.apiVersion: expected gateway.networking.k8s.io/v1 or gateway.networking.k8s.io/v1beta1 for HTTPRoute, found \"gateway.networking.k8s.io/v1alpha2\""],
            ),
            (
                "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nparentRefs: []\n",
                &["c.yaml:1: spec.route.parentRefs: expected at least one parentRef (the Gateway), found none"],
            ),
            (
                "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nparentRef: [{name: gw}]\n",
                &[
                    "c.yaml:3: spec.route.parentRef: unknown field (did you mean \"parentRefs\"?); expected one of: apiVersion, kind, parentRefs, hostnames, hosts, gateways, mesh",
                    "c.yaml:1: spec.route.parentRefs: required field is missing",
                ],
            ),
        ];
        for (yaml, expected) in cases {
            let (route, errors) = native(yaml);
            assert_eq!(errors, expected, "{yaml}");
            assert_eq!(route, None, "{yaml}");
        }
    }

    #[test]
    fn lists_read_as_prose() {
        assert_eq!(or_list(&["a"]), "a");
        assert_eq!(or_list(&["a", "b"]), "a or b");
        assert_eq!(or_list(&["a", "b", "c"]), "a, b or c");
    }
}
