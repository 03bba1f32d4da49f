//! Every field of Flagger's `Canary`, `MetricTemplate` and `AlertProvider` `spec` (CRDs of
//! Flagger v1.44.0), with what sluice does with it: [`FIELDS`] is the audit, in one place.
//!
//! - A test walks the CRDs' `openAPIV3Schema` (`e2e/schemas/flagger.app_crds.v1.44.0.yaml`) and
//!   fails on a field missing here or a row not in the CRD, so a field Flagger adds cannot be
//!   silently ignored.
//! - [`markdown`] renders docs/flagger-fields.md's "Flagger field support" tables; a test fails
//!   when the page differs.
//! - [`refuse_unread`] refuses, at spec load, a route field of `spec.service` or
//!   `spec.analysis` that the canary's router neither renders nor refuses itself: Flagger's
//!   router would ignore it, and sluice says so instead of ignoring it too.
//!
//! A route field's renderers and refusers are not listed here: each router says what it does
//! with the route fields in its own rows ([`crate::route::Router::FLAGGER_FIELDS`]), and the
//! table asks the registry. Data only, plus that one check: readers stay in `manifest::canary`,
//! `manifest::analysis`, the routers and `metrics::metric_templates`.

use std::fmt::Write as _;

use crate::route::{flagger_fields, FieldUse, FlaggerFields, Provider};
use crate::yaml::node::Node;
use crate::yaml::reader::Reader;

/// The Flagger kind a field belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Canary,
    MetricTemplate,
    AlertProvider,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Canary, Kind::MetricTemplate, Kind::AlertProvider];

    /// The kind's name, as in the CRD (`spec.names.kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Canary => "Canary",
            Kind::MetricTemplate => "MetricTemplate",
            Kind::AlertProvider => "AlertProvider",
        }
    }
}

/// What sluice does with one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Implemented as Flagger does it: how, in one line.
    Implemented(&'static str),
    /// Refused by `sluice validate` and the loop, with a message naming the field: what sluice
    /// does differently.
    Refused(&'static str),
    /// A route field: rendered by the routers whose rows
    /// ([`Router::FLAGGER_FIELDS`](crate::route::Router::FLAGGER_FIELDS)) say so (`how`),
    /// refused with every other provider: by the routers whose rows say so with their own
    /// message, and by [`refuse_unread`] for the rest.
    Routed { how: &'static str },
    /// Read with the nearest row above it (its parent object or list): whoever reads the
    /// parent renders it or refuses it by name.
    WithParent,
}

/// One field path of a kind's `spec` (`[]` for a list's items).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub kind: Kind,
    pub path: &'static str,
    pub support: Support,
}

const fn field(kind: Kind, path: &'static str, support: Support) -> Field {
    Field {
        kind,
        path,
        support,
    }
}

use Support::{Implemented, Refused, Routed, WithParent};

/// Every field of the three kinds' `spec`, in the CRD's order.
pub const FIELDS: &[Field] = &[
    field(Kind::Canary, "spec.provider", Implemented("selects the router that writes the route object; unset: the settings' provider, else istio as in Flagger; `gatewayapi:v1beta1…`, other `gatewayapi:v1…` (`gatewayapi:v1alpha2`) and `appmesh:v1beta2…` select a router by prefix as Flagger's factory does, with a warning naming the API written")),
    field(Kind::Canary, "spec.metricsServer", Implemented("the Prometheus address this canary's metrics query (http:// or https://)")),
    field(Kind::Canary, "spec.progressDeadlineSeconds", Implemented("a rollout with no progress for this long is rolled back (default 600, GetProgressDeadlineSeconds); a promotion whose primary is not ready by then fails with all traffic on the canary, which keeps running (Flagger 1.44, #1931)")),
    field(Kind::Canary, "spec.targetRef", Implemented("the Deployment, DaemonSet or Knative Service in the repo whose primary and canary sluice writes")),
    field(Kind::Canary, "spec.targetRef.apiVersion", Implemented("serving.knative.dev/v1 selects a Knative Service; for a workload the kind decides, as in Flagger")),
    field(Kind::Canary, "spec.targetRef.kind", Implemented("Deployment, DaemonSet or (provider knative) Service; other kinds refused")),
    field(Kind::Canary, "spec.targetRef.name", Implemented("the workload's name in the repo; the apex Service's name unless service.name is set")),
    field(Kind::Canary, "spec.autoscalerRef", Implemented("the HorizontalPodAutoscaler or ScaledObject in the repo, copied for the primary as Flagger does")),
    field(Kind::Canary, "spec.autoscalerRef.apiVersion", Implemented("not read, as in Flagger: the autoscaler found by kind and name decides (an autoscaling/v2 or v2beta2 HPA, a keda.sh/v1alpha1 ScaledObject; another API is an error at the object's line); a value that differs from the object's is a warning")),
    field(Kind::Canary, "spec.autoscalerRef.kind", Implemented("HorizontalPodAutoscaler or ScaledObject")),
    field(Kind::Canary, "spec.autoscalerRef.name", Implemented("the autoscaler's name in the repo; a missing one is an error")),
    field(Kind::Canary, "spec.autoscalerRef.primaryScalerQueries", Implemented("a ScaledObject's trigger queries for the primary; refused for an HPA, which Flagger ignores it for")),
    field(Kind::Canary, "spec.autoscalerRef.primaryScalerReplicas", Implemented("the primary autoscaler's replica bounds")),
    field(Kind::Canary, "spec.autoscalerRef.primaryScalerReplicas.minReplicas", Implemented("the primary autoscaler's minReplicas")),
    field(Kind::Canary, "spec.autoscalerRef.primaryScalerReplicas.maxReplicas", Implemented("the primary autoscaler's maxReplicas")),
    field(Kind::Canary, "spec.ingressRef", Routed { how: "the Ingress in the repo that nginx and skipper canaries copy, found by name as a networking.k8s.io/v1 Ingress as Flagger reads it (an apiVersion that differs from the Ingress' is a warning); other providers refuse it" }),
    field(Kind::Canary, "spec.ingressRef.apiVersion", WithParent),
    field(Kind::Canary, "spec.ingressRef.kind", WithParent),
    field(Kind::Canary, "spec.ingressRef.name", WithParent),
    field(Kind::Canary, "spec.routeRef", Routed { how: "the ApisixRoute in the repo whose weights sluice sets; other providers refuse it" }),
    field(Kind::Canary, "spec.routeRef.apiVersion", WithParent),
    field(Kind::Canary, "spec.routeRef.kind", WithParent),
    field(Kind::Canary, "spec.routeRef.name", WithParent),
    field(Kind::Canary, "spec.upstreamRef", Routed { how: "the Gloo Upstream the RouteTable's destinations copy; other providers refuse it" }),
    field(Kind::Canary, "spec.upstreamRef.apiVersion", WithParent),
    field(Kind::Canary, "spec.upstreamRef.kind", WithParent),
    field(Kind::Canary, "spec.upstreamRef.name", WithParent),
    field(Kind::Canary, "spec.upstreamRef.namespace", WithParent),
    field(Kind::Canary, "spec.service", Implemented("the apex, primary and canary Services sluice writes, as Flagger creates them")),
    field(Kind::Canary, "spec.service.name", Implemented("the apex Service's name (default targetRef.name, GetServiceNames)")),
    field(Kind::Canary, "spec.service.port", Implemented("the Services' port")),
    field(Kind::Canary, "spec.service.portName", Implemented("the Services' port name (default http)")),
    field(Kind::Canary, "spec.service.appProtocol", Implemented("the Services' port appProtocol; tcp refused by the HTTP-only routers")),
    field(Kind::Canary, "spec.service.trafficDistribution", Implemented("the apex, primary and canary Services' trafficDistribution, as Flagger writes it (PreferClose, PreferSameZone, PreferSameNode)")),
    field(Kind::Canary, "spec.service.targetPort", Implemented("the Services' targetPort (default: port)")),
    field(Kind::Canary, "spec.service.portDiscovery", Implemented("the workload's other container ports become Service ports, as Flagger discovers them")),
    field(Kind::Canary, "spec.service.headless", Implemented("the primary and canary Services are headless")),
    field(Kind::Canary, "spec.service.timeout", Routed { how: "the route's request timeout" }),
    field(Kind::Canary, "spec.service.backendTimeout", Routed { how: "the HTTPRoute rule's backendRequest timeout (gatewayapi:v1)" }),
    field(Kind::Canary, "spec.service.meshName", Routed { how: "no router renders it (Flagger's App Mesh v1beta2 router ignores it too)" }),
    field(Kind::Canary, "spec.service.backends", Routed { how: "the App Mesh VirtualNode's backends" }),
    field(Kind::Canary, "spec.service.hosts", Routed { how: "the VirtualService hosts, HTTPRoute hostnames, App Mesh gateway hosts" }),
    field(Kind::Canary, "spec.service.delegation", Routed { how: "a delegate VirtualService (no hosts or gateways)" }),
    field(Kind::Canary, "spec.service.match", Routed { how: "the route's request matches (Contour and App Mesh: the first uri.prefix only; other conditions refused)" }),
    field(Kind::Canary, "spec.service.match[].authority", WithParent),
    field(Kind::Canary, "spec.service.match[].authority.exact", WithParent),
    field(Kind::Canary, "spec.service.match[].authority.prefix", WithParent),
    field(Kind::Canary, "spec.service.match[].authority.regex", WithParent),
    field(Kind::Canary, "spec.service.match[].gateways", WithParent),
    field(Kind::Canary, "spec.service.match[].headers", WithParent),
    field(Kind::Canary, "spec.service.match[].ignoreUriCase", WithParent),
    field(Kind::Canary, "spec.service.match[].method", WithParent),
    field(Kind::Canary, "spec.service.match[].method.exact", WithParent),
    field(Kind::Canary, "spec.service.match[].method.prefix", WithParent),
    field(Kind::Canary, "spec.service.match[].method.regex", WithParent),
    field(Kind::Canary, "spec.service.match[].name", WithParent),
    field(Kind::Canary, "spec.service.match[].port", WithParent),
    field(Kind::Canary, "spec.service.match[].queryParams", WithParent),
    field(Kind::Canary, "spec.service.match[].scheme", WithParent),
    field(Kind::Canary, "spec.service.match[].scheme.exact", WithParent),
    field(Kind::Canary, "spec.service.match[].scheme.prefix", WithParent),
    field(Kind::Canary, "spec.service.match[].scheme.regex", WithParent),
    field(Kind::Canary, "spec.service.match[].sourceLabels", WithParent),
    field(Kind::Canary, "spec.service.match[].sourceNamespace", WithParent),
    field(Kind::Canary, "spec.service.match[].uri", WithParent),
    field(Kind::Canary, "spec.service.match[].uri.exact", WithParent),
    field(Kind::Canary, "spec.service.match[].uri.prefix", WithParent),
    field(Kind::Canary, "spec.service.match[].uri.regex", WithParent),
    field(Kind::Canary, "spec.service.match[].withoutHeaders", WithParent),
    field(Kind::Canary, "spec.service.retries", Routed { how: "the route's retry policy" }),
    field(Kind::Canary, "spec.service.retries.attempts", WithParent),
    field(Kind::Canary, "spec.service.retries.perTryTimeout", WithParent),
    field(Kind::Canary, "spec.service.retries.retryOn", WithParent),
    field(Kind::Canary, "spec.service.rewrite", Routed { how: "the route's URI and authority rewrite" }),
    field(Kind::Canary, "spec.service.rewrite.uri", WithParent),
    field(Kind::Canary, "spec.service.rewrite.authority", WithParent),
    field(Kind::Canary, "spec.service.rewrite.type", WithParent),
    field(Kind::Canary, "spec.service.mirror", Routed { how: "Gateway API mirror filters (Istio: mirrors, beyond Flagger)" }),
    field(Kind::Canary, "spec.service.mirror[].backendRef", WithParent),
    field(Kind::Canary, "spec.service.mirror[].backendRef.group", WithParent),
    field(Kind::Canary, "spec.service.mirror[].backendRef.kind", WithParent),
    field(Kind::Canary, "spec.service.mirror[].backendRef.name", WithParent),
    field(Kind::Canary, "spec.service.mirror[].backendRef.namespace", WithParent),
    field(Kind::Canary, "spec.service.mirror[].backendRef.port", WithParent),
    field(Kind::Canary, "spec.service.headers", Routed { how: "request and response header operations on the route" }),
    field(Kind::Canary, "spec.service.headers.request", WithParent),
    field(Kind::Canary, "spec.service.headers.request.add", WithParent),
    field(Kind::Canary, "spec.service.headers.request.remove", WithParent),
    field(Kind::Canary, "spec.service.headers.request.set", WithParent),
    field(Kind::Canary, "spec.service.headers.response", WithParent),
    field(Kind::Canary, "spec.service.headers.response.add", WithParent),
    field(Kind::Canary, "spec.service.headers.response.remove", WithParent),
    field(Kind::Canary, "spec.service.headers.response.set", WithParent),
    field(Kind::Canary, "spec.service.gateways", Routed { how: "the VirtualService's gateways" }),
    field(Kind::Canary, "spec.service.gatewayRefs", Routed { how: "the HTTPRoute's parentRefs" }),
    field(Kind::Canary, "spec.service.gatewayRefs[].group", WithParent),
    field(Kind::Canary, "spec.service.gatewayRefs[].kind", WithParent),
    field(Kind::Canary, "spec.service.gatewayRefs[].name", WithParent),
    field(Kind::Canary, "spec.service.gatewayRefs[].namespace", WithParent),
    field(Kind::Canary, "spec.service.gatewayRefs[].sectionName", WithParent),
    field(Kind::Canary, "spec.service.gatewayRefs[].port", WithParent),
    field(Kind::Canary, "spec.service.corsPolicy", Routed { how: "the route's CORS policy (gatewayapi:v1: a CORS filter)" }),
    field(Kind::Canary, "spec.service.corsPolicy.allowCredentials", WithParent),
    field(Kind::Canary, "spec.service.corsPolicy.allowHeaders", WithParent),
    field(Kind::Canary, "spec.service.corsPolicy.allowMethods", WithParent),
    field(Kind::Canary, "spec.service.corsPolicy.allowOrigin", WithParent),
    field(Kind::Canary, "spec.service.corsPolicy.allowOrigins", WithParent),
    field(Kind::Canary, "spec.service.corsPolicy.allowOrigins[].exact", WithParent),
    field(Kind::Canary, "spec.service.corsPolicy.allowOrigins[].prefix", WithParent),
    field(Kind::Canary, "spec.service.corsPolicy.allowOrigins[].regex", WithParent),
    field(Kind::Canary, "spec.service.corsPolicy.exposeHeaders", WithParent),
    field(Kind::Canary, "spec.service.corsPolicy.maxAge", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy", Routed { how: "the primary and canary DestinationRules' trafficPolicy" }),
    field(Kind::Canary, "spec.service.trafficPolicy.connectionPool", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.connectionPool.http", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.connectionPool.http.h2UpgradePolicy", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.connectionPool.http.http1MaxPendingRequests", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.connectionPool.http.http2MaxRequests", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.connectionPool.http.idleTimeout", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.connectionPool.http.maxRequestsPerConnection", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.connectionPool.http.maxRetries", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.consistentHash", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.consistentHash.httpCookie", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.consistentHash.httpCookie.name", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.consistentHash.httpCookie.path", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.consistentHash.httpCookie.ttl", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.consistentHash.httpHeaderName", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.consistentHash.httpQueryParameterName", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.consistentHash.minimumRingSize", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.consistentHash.useSourceIp", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.localityLbSetting", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.localityLbSetting.distribute", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.localityLbSetting.distribute[].from", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.localityLbSetting.distribute[].to", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.localityLbSetting.enabled", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.localityLbSetting.failover", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.localityLbSetting.failover[].from", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.localityLbSetting.failover[].to", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.simple", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.loadBalancer.warmupDurationSecs", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.outlierDetection", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.outlierDetection.baseEjectionTime", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.outlierDetection.consecutive5xxErrors", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.outlierDetection.consecutiveErrors", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.outlierDetection.consecutiveGatewayErrors", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.outlierDetection.consecutiveLocalOriginFailures", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.outlierDetection.interval", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.outlierDetection.maxEjectionPercent", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.outlierDetection.minHealthPercent", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.outlierDetection.splitExternalLocalOriginErrors", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.tls", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.tls.caCertificates", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.tls.clientCertificate", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.tls.mode", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.tls.privateKey", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.tls.sni", WithParent),
    field(Kind::Canary, "spec.service.trafficPolicy.tls.subjectAltNames", WithParent),
    field(Kind::Canary, "spec.service.apex", Implemented("labels and annotations on the apex Service (and the route objects Flagger labels)")),
    field(Kind::Canary, "spec.service.apex.labels", Implemented("labels on the apex Service")),
    field(Kind::Canary, "spec.service.apex.annotations", Implemented("annotations on the apex Service")),
    field(Kind::Canary, "spec.service.primary", Implemented("labels and annotations on the primary Service")),
    field(Kind::Canary, "spec.service.primary.labels", Implemented("labels on the primary Service")),
    field(Kind::Canary, "spec.service.primary.annotations", Implemented("annotations on the primary Service")),
    field(Kind::Canary, "spec.service.canary", Implemented("labels and annotations on the canary Service")),
    field(Kind::Canary, "spec.service.canary.labels", Implemented("labels on the canary Service")),
    field(Kind::Canary, "spec.service.canary.annotations", Implemented("annotations on the canary Service")),
    field(Kind::Canary, "spec.service.unmanagedMetadata", Refused("sluice keeps no live metadata: every label and annotation is in git; remove it")),
    field(Kind::Canary, "spec.service.unmanagedMetadata.annotations", WithParent),
    field(Kind::Canary, "spec.service.unmanagedMetadata.labels", WithParent),
    field(Kind::Canary, "spec.skipAnalysis", Implemented("promotes without analysis, as Flagger does, and runs the post-rollout webhooks (Flagger 1.44, #1918)")),
    field(Kind::Canary, "spec.revertOnDeletion", Implemented("a deleted canary's output is reverted to the target workload")),
    field(Kind::Canary, "spec.suspend", Implemented("no tick acts on the canary")),
    field(Kind::Canary, "spec.analysis", Implemented("required: sluice refuses a canary without analysis (Flagger would promote it without any check)")),
    field(Kind::Canary, "spec.analysis.interval", Implemented("time between checks and steps (default 60s; under 10s raised to 10s, GetAnalysisInterval)")),
    field(Kind::Canary, "spec.analysis.iterations", Implemented("blue/green, or A/B with match: this many checks at full canary traffic")),
    field(Kind::Canary, "spec.analysis.threshold", Implemented("failed checks before rollback (default and 0: 1, GetAnalysisThreshold)")),
    field(Kind::Canary, "spec.analysis.maxWeight", Implemented("the last canary weight of a stepWeight schedule (default 100)")),
    field(Kind::Canary, "spec.analysis.stepWeight", Implemented("Flagger's weight walk up to maxWeight")),
    field(Kind::Canary, "spec.analysis.stepWeights", Implemented("Flagger's explicit weights (entries over 100 capped as Flagger does)")),
    field(Kind::Canary, "spec.analysis.stepWeightPromotion", Implemented("promotion shifts traffic to the primary in these steps")),
    field(Kind::Canary, "spec.analysis.mirror", Routed { how: "traffic mirroring to the canary (blue/green on Istio)" }),
    field(Kind::Canary, "spec.analysis.mirrorWeight", Routed { how: "the mirrored share of requests" }),
    field(Kind::Canary, "spec.analysis.primaryReadyThreshold", Implemented("percent of ready primary pods the readiness gate needs (default 100)")),
    field(Kind::Canary, "spec.analysis.canaryReadyThreshold", Implemented("percent of ready canary pods the readiness gate needs (default 100)")),
    field(Kind::Canary, "spec.analysis.match", Routed { how: "A/B testing: the requests routed to the canary" }),
    field(Kind::Canary, "spec.analysis.match[].headers", WithParent),
    field(Kind::Canary, "spec.analysis.match[].queryParams", WithParent),
    field(Kind::Canary, "spec.analysis.match[].sourceLabels", WithParent),
    field(Kind::Canary, "spec.analysis.metrics", Implemented("checks run every interval")),
    field(Kind::Canary, "spec.analysis.metrics[].name", Implemented("the metric's name; request-success-rate and request-duration are built in")),
    field(Kind::Canary, "spec.analysis.metrics[].interval", Implemented("the query's range (default 1m, GetMetricInterval)")),
    field(Kind::Canary, "spec.analysis.metrics[].threshold", Implemented("deprecated bound: min for request-success-rate, max otherwise")),
    field(Kind::Canary, "spec.analysis.metrics[].thresholdRange", Implemented("the bounds a value must lie in")),
    field(Kind::Canary, "spec.analysis.metrics[].thresholdRange.min", Implemented("the lowest passing value")),
    field(Kind::Canary, "spec.analysis.metrics[].thresholdRange.max", Implemented("the highest passing value")),
    field(Kind::Canary, "spec.analysis.metrics[].query", Implemented("an inline Prometheus query")),
    field(Kind::Canary, "spec.analysis.metrics[].templateRef", Implemented("a MetricTemplate in the repo")),
    field(Kind::Canary, "spec.analysis.metrics[].templateRef.name", Implemented("the MetricTemplate's name")),
    field(Kind::Canary, "spec.analysis.metrics[].templateRef.namespace", Implemented("the MetricTemplate's namespace (default: the canary's)")),
    field(Kind::Canary, "spec.analysis.metrics[].templateVariables", Implemented("the template's {{ variables }}")),
    field(Kind::Canary, "spec.analysis.alerts", Implemented("alerts sent through AlertProviders in the repo")),
    field(Kind::Canary, "spec.analysis.alerts[].name", Implemented("the alert's name")),
    field(Kind::Canary, "spec.analysis.alerts[].severity", Implemented("which events the alert receives")),
    field(Kind::Canary, "spec.analysis.alerts[].providerRef", Implemented("the AlertProvider in the repo")),
    field(Kind::Canary, "spec.analysis.alerts[].providerRef.name", Implemented("the AlertProvider's name")),
    field(Kind::Canary, "spec.analysis.alerts[].providerRef.namespace", Implemented("the AlertProvider's namespace (default: the canary's)")),
    field(Kind::Canary, "spec.analysis.webhooks", Implemented("hooks called at Flagger's phases")),
    field(Kind::Canary, "spec.analysis.webhooks[].name", Implemented("the hook's name")),
    field(Kind::Canary, "spec.analysis.webhooks[].type", Implemented("the phase (default rollout); confirm-* with url sluice:approval become git approvals; post-rollout runs once per rollout: promotion completed, rollback, failed promotion, skipped analysis (#1918)")),
    field(Kind::Canary, "spec.analysis.webhooks[].muteAlert", Implemented("a failing confirm hook sends no alert")),
    field(Kind::Canary, "spec.analysis.webhooks[].url", Implemented("the http(s) URL posted to")),
    field(Kind::Canary, "spec.analysis.webhooks[].timeout", Implemented("the call's timeout (default 10s)")),
    field(Kind::Canary, "spec.analysis.webhooks[].retries", Implemented("retries of a failed call (default 0)")),
    field(Kind::Canary, "spec.analysis.webhooks[].disableTLS", Implemented("skip TLS verification for this hook")),
    field(Kind::Canary, "spec.analysis.webhooks[].metadata", Implemented("passed in the hook's payload")),
    field(Kind::Canary, "spec.analysis.sessionAffinity", Routed { how: "cookie-based sticky sessions to the canary" }),
    field(Kind::Canary, "spec.analysis.sessionAffinity.cookieName", Implemented("the canary's cookie name")),
    field(Kind::Canary, "spec.analysis.sessionAffinity.primaryCookieName", WithParent),
    field(Kind::Canary, "spec.analysis.sessionAffinity.domain", WithParent),
    field(Kind::Canary, "spec.analysis.sessionAffinity.httpOnly", WithParent),
    field(Kind::Canary, "spec.analysis.sessionAffinity.maxAge", WithParent),
    field(Kind::Canary, "spec.analysis.sessionAffinity.partitioned", WithParent),
    field(Kind::Canary, "spec.analysis.sessionAffinity.path", WithParent),
    field(Kind::Canary, "spec.analysis.sessionAffinity.sameSite", WithParent),
    field(Kind::Canary, "spec.analysis.sessionAffinity.secure", WithParent),
    field(Kind::MetricTemplate, "spec.provider", Implemented("where the query runs")),
    field(Kind::MetricTemplate, "spec.provider.type", Implemented("prometheus, datadog, newrelic, graphite, influxdb, dynatrace, splunk (SignalFlow over HTTP), cloudwatch (SigV4-signed GetMetricData); stackdriver, keptn and externalmetrics refused by name")),
    field(Kind::MetricTemplate, "spec.provider.address", Implemented("the provider's URL; refused for cloudwatch, whose address Flagger ignores (sluice: `SLUICE_CLOUDWATCH_ENDPOINT`)")),
    field(Kind::MetricTemplate, "spec.provider.headers", Implemented("extra HTTP headers on each query")),
    field(Kind::MetricTemplate, "spec.provider.secretRef", Implemented("credentials the operator maps in, never read from git; refused for cloudwatch, which Flagger and sluice sign with the AWS credentials of their environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`)")),
    field(Kind::MetricTemplate, "spec.provider.secretRef.name", Implemented("the Secret's name")),
    field(Kind::MetricTemplate, "spec.provider.region", Implemented("cloudwatch's AWS region (required for it; refused for the other vendor providers)")),
    field(Kind::MetricTemplate, "spec.provider.insecureSkipVerify", Implemented("skip TLS verification for the provider")),
    field(Kind::MetricTemplate, "spec.query", Implemented("the query template, rendered with Flagger's variables")),
    field(Kind::AlertProvider, "spec.type", Implemented("slack, msteams, discord, rocket, gchat or generic; others refused")),
    field(Kind::AlertProvider, "spec.channel", Implemented("the channel the message names")),
    field(Kind::AlertProvider, "spec.username", Implemented("the sender's name")),
    field(Kind::AlertProvider, "spec.address", Implemented("the webhook URL")),
    field(Kind::AlertProvider, "spec.proxy", Implemented("the HTTP proxy alerts go through")),
    field(Kind::AlertProvider, "spec.secretRef", Implemented("the address from a secret the operator maps in")),
    field(Kind::AlertProvider, "spec.secretRef.name", Implemented("the Secret's name")),
];

/// The row `path` of `kind` inherits from: its nearest listed ancestor.
pub fn parent(kind: Kind, path: &str) -> Option<&'static Field> {
    let mut at = path;
    loop {
        let cut = at.rfind(['.', '['])?;
        at = &at[..cut];
        if let Some(f) = FIELDS.iter().find(|f| f.kind == kind && f.path == at) {
            return Some(f);
        }
    }
}

/// The status of `field` as docs/flagger-fields.md shows it: "Implemented", "Refused" or, for a route
/// field, the routers that render it.
fn status(field: &Field) -> (String, String) {
    match field.support {
        Implemented(how) => ("Implemented".into(), how.into()),
        Refused(why) => ("Refused".into(), why.into()),
        Routed { how } => {
            let names = renderers(field.path);
            if names.is_empty() {
                (
                    "Refused".into(),
                    format!("{how}; refused with every provider"),
                )
            } else {
                (
                    format!("Implemented ({})", names.join(", ")),
                    format!("{how}; refused with other providers"),
                )
            }
        }
        WithParent => match parent(field.kind, field.path) {
            Some(p) => {
                let (status, _) = status(p);
                (status, format!("with `{}`", p.path))
            }
            None => ("Refused".into(), "no parent row".into()),
        },
    }
}

/// docs/flagger-fields.md's generated body: one table per kind.
pub fn markdown() -> String {
    let mut out = String::from(
        "Generated from `src/manifest/flagger_fields.rs` (a test keeps the two equal). Every field of \
         Flagger v1.44.0's CRDs is implemented as Flagger does it or refused by `sluice validate` \
         with a message naming it; a route field works with the providers listed and is refused \
         with the others. A key \
         the CRDs do not declare is pruned from a Canary, as the API server prunes it: a \
         warning, not an error (`sluice validate --strict` refuses it).\n",
    );
    for kind in Kind::ALL {
        let _ = write!(
            out,
            "\n**{}**\n\n| Field | Status | How / why |\n|---|---|---|\n",
            kind.as_str()
        );
        for f in FIELDS.iter().filter(|f| f.kind == kind) {
            let (status, how) = status(f);
            let _ = writeln!(
                out,
                "| `{}` | {} | {} |",
                f.path,
                status,
                how.replace('|', "\\|")
            );
        }
    }
    out
}

/// What `provider`'s router does with the route field at `path`: `None` when its rows do not
/// name it (so [`refuse_unread`] refuses it).
pub fn use_of(provider: Provider, path: &str) -> Option<FieldUse> {
    use_in(provider.flagger_fields(), path)
}

fn use_in(router: &FlaggerFields, path: &str) -> Option<FieldUse> {
    router
        .rows()
        .find(|(row, _)| *row == path)
        .map(|(_, how)| *how)
}

/// The names of the routers that render the route field at `path`, in the table's order.
pub fn renderers(path: &str) -> Vec<&'static str> {
    let mut routers: Vec<&FlaggerFields> = flagger_fields()
        .filter(|r| use_in(r, path) == Some(FieldUse::Renders))
        .collect();
    routers.sort_by_key(|r| r.table_order);
    routers.iter().map(|r| r.name).collect()
}

/// Refuses every route field of `spec.service` and `spec.analysis` present in a Flagger
/// canary's `spec` that `provider`'s router neither renders nor refuses itself (Flagger's router
/// would ignore it), unless an error since `before` already names it.
pub fn refuse_unread(r: &mut Reader, provider: Provider, spec: &Node, before: usize) {
    let router = provider.flagger_fields();
    for f in FIELDS.iter().filter(|f| f.kind == Kind::Canary) {
        let Routed { how } = f.support else {
            continue;
        };
        if use_in(router, f.path).is_some() {
            continue;
        }
        let Some((parent, key)) = f.path.rsplit_once('.') else {
            continue;
        };
        let node = match parent {
            "spec.service" => spec.get("service"),
            "spec.analysis" => spec.get("analysis"),
            // The references (`ingressRef` ...) are refused where they are read.
            _ => continue,
        };
        let Some(line) = node.and_then(|n| n.key_line(key)) else {
            continue;
        };
        let names_it = |field: &str| {
            field.strip_prefix(f.path).is_some_and(|rest| {
                rest.is_empty() || rest.starts_with('.') || rest.starts_with('[')
            })
        };
        if r.errors[before.min(r.errors.len())..]
            .iter()
            .any(|e| names_it(&e.field))
        {
            continue;
        }
        let names = renderers(f.path);
        let instead = if names.is_empty() {
            "no sluice router renders it".to_string()
        } else {
            format!("use a provider that renders it ({})", names.join(", "))
        };
        let named = spec
            .get("provider")
            .and_then(Node::as_str)
            .unwrap_or(router.name);
        r.error(
            line,
            f.path,
            format!(
                "not supported with provider {named}: Flagger's router ignores this field ({how}) and sluice refuses it rather than ignore it too; remove it, or {instead}"
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A router's row names a route field of the table: a typo or a renamed field would
    /// silently drop the row, so the field would be refused (or rendered) by mistake.
    #[test]
    fn every_router_row_is_a_route_field_of_the_table() {
        for router in flagger_fields() {
            for (path, _) in router.rows() {
                let row = FIELDS
                    .iter()
                    .find(|f| f.kind == Kind::Canary && f.path == *path);
                assert!(
                    matches!(
                        row,
                        Some(Field {
                            support: Routed { .. },
                            ..
                        })
                    ),
                    "{}: {path} is not a route field of FIELDS",
                    router.name
                );
            }
            let mut paths: Vec<&str> = router.rows().map(|(p, _)| *p).collect();
            paths.sort_unstable();
            paths.dedup();
            assert_eq!(
                paths.len(),
                router.rows().count(),
                "{}: a row twice",
                router.name
            );
        }
        let mut orders: Vec<u8> = flagger_fields().map(|r| r.table_order).collect();
        orders.sort_unstable();
        orders.dedup();
        assert_eq!(
            orders.len(),
            flagger_fields().count(),
            "two routers share a table_order"
        );
    }
}
