//! The PromQL behind Flagger's built-in metrics, per mesh or ingress.
//!
//! `request-success-rate` is the percentage (0..100) of non-5xx requests to the canary;
//! `request-duration` is the canary's 99th percentile latency in milliseconds. The query texts
//! follow Flagger's observers (`pkg/metrics/observers/*.go`, v1.44): same metric names, label
//! matchers, windows and arithmetic, reformatted. Where Flagger's observer converts units after
//! the query (the Gateway API / Kubernetes observer reads seconds and multiplies by 1000) the
//! multiplication is part of the query here, so every duration query returns milliseconds.
//! Flagger truncates durations to whole milliseconds before comparing them with the threshold;
//! [`BuiltinQuery::finish`] does the same.
//!
//! The provider is mapped to an [`Observer`] when the query is built. Unlike Flagger's factory,
//! which falls back to Istio's queries for any provider it does not know (including `smi:*`
//! unless Flagger itself runs with `-mesh-provider=linkerd`), an unknown provider is an error
//! here: querying the wrong mesh's metrics returns no data at best. This module does no IO.

use std::fmt;

use crate::core::observe::MetricValue;
use crate::metrics::query_render::{render, QueryModel, RenderError};
use crate::spec::model::BuiltinMetric;

/// Whose metrics the built-in queries read (Flagger's observer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observer {
    /// Open Service Mesh: `osm_request_total`, `osm_request_duration_ms_bucket`.
    Osm,
    /// Linkerd proxy metrics: `response_total`, `response_latency_ms_bucket`.
    Linkerd,
    /// Istio: `istio_requests_total`, `istio_request_duration_milliseconds_bucket`.
    Istio,
    /// Contour (Envoy cluster `namespace_service-canary_port`).
    Contour,
    /// Gloo Edge (Envoy cluster of the canary upstream).
    Gloo,
    /// ingress-nginx: `nginx_ingress_controller_*` for the canary ingress.
    Nginx,
    /// Kuma (Envoy cluster `target-canary_namespace_svc_port`).
    Kuma,
    /// Traefik services `namespace-target-canary-port@kubernetescrd`.
    Traefik,
    /// App Mesh (Envoy sidecar metrics by pod name).
    AppMesh,
    /// Apache APISIX routes `namespace_route-target-canary_*`.
    Apisix,
    /// Skipper routes of the canary Ingress, `kube(ew)?_<ns>__<ingress>_canary__*__<svc>_canary`.
    Skipper,
    /// Gateway API and plain Kubernetes providers: the application's own
    /// `http_request_duration_seconds` histogram, by pod name.
    Http,
    /// Knative behind Envoy (Kourier): the Envoy cluster `namespace/<canary revision>`.
    Knative,
}

/// A provider the built-in metrics cannot be computed for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("built-in metric {metric} needs spec.provider (the mesh or ingress whose metrics to query); set it, or use a MetricTemplate")]
    Missing { metric: &'static str },
    #[error("built-in metric {metric}: provider {provider:?} does not say which mesh exports the metrics (Flagger uses its own -mesh-provider, else Istio's queries); set spec.provider to linkerd or osm, or use a MetricTemplate")]
    Smi {
        metric: &'static str,
        provider: String,
    },
    #[error("built-in metric {metric}: provider {provider:?} is not supported by sluice ({why}); use a MetricTemplate")]
    Unsupported {
        metric: &'static str,
        provider: String,
        why: &'static str,
    },
    #[error("built-in metric {metric}: unknown provider {provider:?}; built-in metrics exist for {SUPPORTED}")]
    Unknown {
        metric: &'static str,
        provider: String,
    },
}

const SUPPORTED: &str = "osm, linkerd, istio, contour, gloo, nginx, skipper, kuma, traefik, appmesh, apisix, knative, kubernetes, gatewayapi:*";

/// Flagger's name of a built-in metric.
pub fn metric_name(metric: BuiltinMetric) -> &'static str {
    match metric {
        BuiltinMetric::RequestSuccessRate => "request-success-rate",
        BuiltinMetric::RequestDuration => "request-duration",
    }
}

impl Observer {
    /// Maps Flagger's provider string as Flagger's observer factory does, minus its fallback.
    pub fn for_provider(
        provider: Option<&str>,
        metric: BuiltinMetric,
    ) -> Result<Observer, ProviderError> {
        let metric = metric_name(metric);
        let Some(provider) = provider else {
            return Err(ProviderError::Missing { metric });
        };
        let observer = match provider {
            "osm" => Observer::Osm,
            "linkerd" => Observer::Linkerd,
            "istio" | "istio:v1beta1" | "istio:v1" => Observer::Istio,
            "contour" => Observer::Contour,
            "nginx" => Observer::Nginx,
            "kuma" => Observer::Kuma,
            "traefik" => Observer::Traefik,
            "apisix" => Observer::Apisix,
            "kubernetes" => Observer::Http,
            p if p.starts_with("gatewayapi") => Observer::Http,
            p if p.starts_with("gloo") => Observer::Gloo,
            p if p.starts_with("appmesh") => Observer::AppMesh,
            p if p == "smi" || p.starts_with("smi:") => {
                return Err(ProviderError::Smi {
                    metric,
                    provider: p.to_string(),
                })
            }
            "skipper" => Observer::Skipper,
            // `{{ route }}` is the canary revision the Knative router names (Flagger reads
            // the Service's `latestCreatedRevisionName` from the cluster).
            "knative" => Observer::Knative,
            other => {
                return Err(ProviderError::Unknown {
                    metric,
                    provider: other.to_string(),
                })
            }
        };
        Ok(observer)
    }

    pub fn name(self) -> &'static str {
        match self {
            Observer::Osm => "osm",
            Observer::Linkerd => "linkerd",
            Observer::Istio => "istio",
            Observer::Contour => "contour",
            Observer::Gloo => "gloo",
            Observer::Nginx => "nginx",
            Observer::Kuma => "kuma",
            Observer::Traefik => "traefik",
            Observer::AppMesh => "appmesh",
            Observer::Apisix => "apisix",
            Observer::Skipper => "skipper",
            Observer::Http => "http",
            Observer::Knative => "knative",
        }
    }

    /// The query template for one metric (rendered with [`render`]).
    pub fn template(self, metric: BuiltinMetric) -> &'static str {
        use BuiltinMetric::{RequestDuration as Duration, RequestSuccessRate as Success};
        match (self, metric) {
            (Observer::Osm, Success) => OSM_SUCCESS,
            (Observer::Osm, Duration) => OSM_DURATION,
            (Observer::Linkerd, Success) => LINKERD_SUCCESS,
            (Observer::Linkerd, Duration) => LINKERD_DURATION,
            (Observer::Istio, Success) => ISTIO_SUCCESS,
            (Observer::Istio, Duration) => ISTIO_DURATION,
            (Observer::Contour, Success) => CONTOUR_SUCCESS,
            (Observer::Contour, Duration) => CONTOUR_DURATION,
            (Observer::Gloo, Success) => GLOO_SUCCESS,
            (Observer::Gloo, Duration) => GLOO_DURATION,
            (Observer::Nginx, Success) => NGINX_SUCCESS,
            (Observer::Nginx, Duration) => NGINX_DURATION,
            (Observer::Kuma, Success) => KUMA_SUCCESS,
            (Observer::Kuma, Duration) => KUMA_DURATION,
            (Observer::Traefik, Success) => TRAEFIK_SUCCESS,
            (Observer::Traefik, Duration) => TRAEFIK_DURATION,
            (Observer::AppMesh, Success) => APPMESH_SUCCESS,
            (Observer::AppMesh, Duration) => APPMESH_DURATION,
            (Observer::Apisix, Success) => APISIX_SUCCESS,
            (Observer::Apisix, Duration) => APISIX_DURATION,
            (Observer::Skipper, Success) => SKIPPER_SUCCESS,
            (Observer::Skipper, Duration) => SKIPPER_DURATION,
            (Observer::Http, Success) => HTTP_SUCCESS,
            (Observer::Http, Duration) => HTTP_DURATION,
            (Observer::Knative, Success) => KNATIVE_SUCCESS,
            (Observer::Knative, Duration) => KNATIVE_DURATION,
        }
    }

    /// Renders the query for one metric.
    pub fn query(
        self,
        metric: BuiltinMetric,
        model: &QueryModel,
    ) -> Result<BuiltinQuery, RenderError> {
        let promql = match self {
            Observer::Skipper => render(self.template(metric), &skipper_model(model))?,
            _ => render(self.template(metric), model)?,
        };
        Ok(BuiltinQuery { metric, promql })
    }
}

impl fmt::Display for Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A rendered built-in query.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltinQuery {
    pub metric: BuiltinMetric,
    pub promql: String,
}

impl BuiltinQuery {
    /// Applies Flagger's post-processing to the query's answer: durations are truncated to
    /// whole milliseconds (Flagger converts them to a `time.Duration` of `int64(value)` ms).
    pub fn finish(&self, value: MetricValue) -> MetricValue {
        match (self.metric, value) {
            (BuiltinMetric::RequestDuration, MetricValue::Value(v)) => {
                MetricValue::Value(v.trunc())
            }
            (_, other) => other,
        }
    }
}

// Success rate: the non-5xx share of the canary's requests, in percent. Duration: p99 in ms.

// Knative (`pkg/metrics/observers/knative.go`): Envoy's cluster for the revision `{{ route }}`.
const KNATIVE_SUCCESS: &str = r#"
sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"{{ namespace }}/{{ route }}", envoy_response_code!~"5.*"}[{{ interval }}]))
/
sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"{{ namespace }}/{{ route }}"}[{{ interval }}]))
* 100"#;
const KNATIVE_DURATION: &str = r#"
histogram_quantile(0.99, sum(rate(envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=~"{{ namespace }}/{{ route }}"}[{{ interval }}])) by (le))"#;

const OSM_SUCCESS: &str = r#"
sum(rate(osm_request_total{destination_namespace="{{ namespace }}", destination_kind="Deployment", destination_name="{{ target }}", response_code!~"5.*"}[{{ interval }}]))
/
sum(rate(osm_request_total{destination_namespace="{{ namespace }}", destination_kind="Deployment", destination_name="{{ target }}"}[{{ interval }}]))
* 100"#;
const OSM_DURATION: &str = r#"
histogram_quantile(0.99, sum(rate(osm_request_duration_ms_bucket{destination_namespace="{{ namespace }}", destination_kind="Deployment", destination_name="{{ target }}"}[{{ interval }}])) by (le))"#;

const LINKERD_SUCCESS: &str = r#"
sum(rate(response_total{namespace="{{ namespace }}", deployment=~"{{ target }}", classification!="failure", direction="inbound"}[{{ interval }}]))
/
sum(rate(response_total{namespace="{{ namespace }}", deployment=~"{{ target }}", direction="inbound"}[{{ interval }}]))
* 100"#;
const LINKERD_DURATION: &str = r#"
histogram_quantile(0.99, sum(rate(response_latency_ms_bucket{namespace="{{ namespace }}", deployment=~"{{ target }}", direction="inbound"}[{{ interval }}])) by (le))"#;

const ISTIO_SUCCESS: &str = r#"
sum(rate(istio_requests_total{reporter="destination", destination_workload_namespace="{{ namespace }}", destination_workload=~"{{ target }}", response_code!~"5.*"}[{{ interval }}]))
/
sum(rate(istio_requests_total{reporter="destination", destination_workload_namespace="{{ namespace }}", destination_workload=~"{{ target }}"}[{{ interval }}]))
* 100"#;
const ISTIO_DURATION: &str = r#"
histogram_quantile(0.99, sum(rate(istio_request_duration_milliseconds_bucket{reporter="destination", destination_workload_namespace="{{ namespace }}", destination_workload=~"{{ target }}"}[{{ interval }}])) by (le))"#;

const CONTOUR_SUCCESS: &str = r#"
sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"{{ namespace }}_{{ service }}-canary_[0-9a-zA-Z-]+", envoy_response_code!~"5.*"}[{{ interval }}]))
/
sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"{{ namespace }}_{{ service }}-canary_[0-9a-zA-Z-]+"}[{{ interval }}]))
* 100"#;
const CONTOUR_DURATION: &str = r#"
histogram_quantile(0.99, sum(rate(envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=~"{{ namespace }}_{{ service }}-canary_[0-9a-zA-Z-]+"}[{{ interval }}])) by (le))"#;

const GLOO_SUCCESS: &str = r#"
sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"{{ namespace }}-{{ target }}-canaryupstream-[0-9a-zA-Z-]+_[0-9a-zA-Z-]+", envoy_response_code!~"5.*"}[{{ interval }}]))
/
sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"{{ namespace }}-{{ target }}-canaryupstream-[0-9a-zA-Z-]+_[0-9a-zA-Z-]+"}[{{ interval }}]))
* 100"#;
const GLOO_DURATION: &str = r#"
histogram_quantile(0.99, sum(rate(envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=~"{{ namespace }}-{{ target }}-canaryupstream-[0-9a-zA-Z-]+_[0-9a-zA-Z-]+"}[{{ interval }}])) by (le))"#;

// ingress-nginx has no latency histogram per canary in Flagger's query: it uses the mean
// (sum / count) in seconds, times 1000.
const NGINX_SUCCESS: &str = r#"
sum(rate(nginx_ingress_controller_requests{namespace="{{ namespace }}", ingress="{{ ingress }}", canary!="", status!~"5.*"}[{{ interval }}]))
/
sum(rate(nginx_ingress_controller_requests{namespace="{{ namespace }}", ingress="{{ ingress }}", canary!=""}[{{ interval }}]))
* 100"#;
const NGINX_DURATION: &str = r#"
sum(rate(nginx_ingress_controller_response_duration_seconds_sum{namespace="{{ namespace }}", ingress="{{ ingress }}", canary!=""}[{{ interval }}]))
/
sum(rate(nginx_ingress_controller_response_duration_seconds_count{namespace="{{ namespace }}", ingress="{{ ingress }}", canary!=""}[{{ interval }}]))
* 1000"#;

const KUMA_SUCCESS: &str = r#"
sum(rate(envoy_cluster_upstream_rq{service=~"{{ target }}-canary_{{ namespace }}_svc_[0-9a-zA-Z-]+", envoy_response_code!~"5.*"}[{{ interval }}]))
/
sum(rate(envoy_cluster_upstream_rq{service=~"{{ target }}-canary_{{ namespace }}_svc_[0-9a-zA-Z-]+"}[{{ interval }}]))
* 100"#;
const KUMA_DURATION: &str = r#"
histogram_quantile(0.99, sum(rate(envoy_cluster_upstream_rq_time_bucket{service=~"{{ target }}-canary_{{ namespace }}_svc_[0-9a-zA-Z-]+"}[{{ interval }}])) by (le))"#;

const TRAEFIK_SUCCESS: &str = r#"
sum(rate(traefik_service_request_duration_seconds_bucket{service=~"{{ namespace }}-{{ target }}-canary-[0-9a-zA-Z-]+@kubernetescrd", code!~"5..", le="+Inf"}[{{ interval }}]))
/
sum(rate(traefik_service_request_duration_seconds_bucket{service=~"{{ namespace }}-{{ target }}-canary-[0-9a-zA-Z-]+@kubernetescrd", le="+Inf"}[{{ interval }}]))
* 100"#;
const TRAEFIK_DURATION: &str = r#"
histogram_quantile(0.99, sum(rate(traefik_service_request_duration_seconds_bucket{service=~"{{ namespace }}-{{ target }}-canary-[0-9a-zA-Z-]+@kubernetescrd"}[{{ interval }}])) by (le))
* 1000"#;

const APPMESH_SUCCESS: &str = r#"
sum(rate(envoy_cluster_upstream_rq{kubernetes_namespace="{{ namespace }}", kubernetes_pod_name=~"{{ target }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)", envoy_response_code!~"5.*"}[{{ interval }}]))
/
sum(rate(envoy_cluster_upstream_rq{kubernetes_namespace="{{ namespace }}", kubernetes_pod_name=~"{{ target }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"}[{{ interval }}]))
* 100"#;
const APPMESH_DURATION: &str = r#"
histogram_quantile(0.99, sum(rate(envoy_cluster_upstream_rq_time_bucket{kubernetes_namespace="{{ namespace }}", kubernetes_pod_name=~"{{ target }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"}[{{ interval }}])) by (le))"#;

const APISIX_SUCCESS: &str = r#"
sum(rate(apisix_http_status{route=~"{{ namespace }}_{{ route }}-{{ target }}-canary_.+", code!~"5.."}[{{ interval }}]))
/
sum(rate(apisix_http_status{route=~"{{ namespace }}_{{ route }}-{{ target }}-canary_.+"}[{{ interval }}]))
* 100"#;
const APISIX_DURATION: &str = r#"
histogram_quantile(0.99, sum(rate(apisix_http_latency_bucket{type=~"request", route=~"{{ namespace }}_{{ route }}-{{ target }}-canary_.+"}[{{ interval }}])) by (le))"#;

// Skipper names a route of an Ingress `kube_<namespace>__<ingress>__<host>__<path>__<service>`
// (`kubeew_` for east-west), every non-word character of the names turned into `_`
// (`skipper_model`); Flagger's observer matches the canary Ingress' routes to the canary
// Service. Duration is the mean, as for nginx.
const SKIPPER_SUCCESS: &str = r#"
sum(rate(skipper_response_duration_seconds_bucket{route=~"kube(ew)?_{{ namespace }}__{{ ingress }}_canary__.*__{{ service }}_canary(_[0-9]+)?", code!~"5..", le="+Inf"}[{{ interval }}]))
/
sum(rate(skipper_response_duration_seconds_bucket{route=~"kube(ew)?_{{ namespace }}__{{ ingress }}_canary__.*__{{ service }}_canary(_[0-9]+)?", le="+Inf"}[{{ interval }}]))
* 100"#;
const SKIPPER_DURATION: &str = r#"
sum(rate(skipper_serve_route_duration_seconds_sum{route=~"kube(ew)?_{{ namespace }}__{{ ingress }}_canary__.*__{{ service }}_canary(_[0-9]+)?"}[{{ interval }}]))
/
sum(rate(skipper_serve_route_duration_seconds_count{route=~"kube(ew)?_{{ namespace }}__{{ ingress }}_canary__.*__{{ service }}_canary(_[0-9]+)?"}[{{ interval }}]))
* 1000"#;

/// Flagger's `encodeModelForSkipper`: the names as Skipper writes them into route ids, every
/// character other than a letter, digit or `_` replaced by `_`.
fn skipper_model(model: &QueryModel) -> QueryModel {
    let encode = |s: &str| {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>()
    };
    QueryModel {
        name: encode(&model.name),
        namespace: encode(&model.namespace),
        target: encode(&model.target),
        service: encode(&model.service),
        ingress: encode(&model.ingress),
        ..model.clone()
    }
}

// Flagger's generic observer reads the application's seconds histogram and multiplies the
// answer by 1000 in Go; here the query does it.
const HTTP_SUCCESS: &str = r#"
sum(rate(http_request_duration_seconds_count{kubernetes_namespace="{{ namespace }}", kubernetes_pod_name=~"{{ target }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)", status!~"5.*"}[{{ interval }}]))
/
sum(rate(http_request_duration_seconds_count{kubernetes_namespace="{{ namespace }}", kubernetes_pod_name=~"{{ target }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"}[{{ interval }}]))
* 100"#;
const HTTP_DURATION: &str = r#"
histogram_quantile(0.99, sum(rate(http_request_duration_seconds_bucket{kubernetes_namespace="{{ namespace }}", kubernetes_pod_name=~"{{ target }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"}[{{ interval }}])) by (le))
* 1000"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::prometheus::collapse_whitespace;

    const ALL: [Observer; 13] = [
        Observer::Osm,
        Observer::Linkerd,
        Observer::Istio,
        Observer::Contour,
        Observer::Gloo,
        Observer::Nginx,
        Observer::Kuma,
        Observer::Traefik,
        Observer::AppMesh,
        Observer::Apisix,
        Observer::Skipper,
        Observer::Http,
        Observer::Knative,
    ];

    fn model() -> QueryModel {
        QueryModel {
            name: "podinfo".into(),
            namespace: "test".into(),
            target: "podinfo".into(),
            service: "podinfo".into(),
            ingress: "podinfo".into(),
            route: "podinfo".into(),
            interval: "1m".into(),
            variables: Default::default(),
        }
    }

    fn query(observer: Observer, metric: BuiltinMetric) -> String {
        collapse_whitespace(&observer.query(metric, &model()).unwrap().promql)
    }

    #[test]
    fn providers_map_like_flaggers_factory_without_its_istio_fallback() {
        let m = BuiltinMetric::RequestSuccessRate;
        let cases = [
            ("osm", Observer::Osm),
            ("linkerd", Observer::Linkerd),
            ("istio", Observer::Istio),
            ("contour", Observer::Contour),
            ("nginx", Observer::Nginx),
            ("gloo", Observer::Gloo),
            ("gloo:v1", Observer::Gloo),
            ("kuma", Observer::Kuma),
            ("traefik", Observer::Traefik),
            ("appmesh", Observer::AppMesh),
            ("appmesh:v1beta2", Observer::AppMesh),
            ("apisix", Observer::Apisix),
            ("kubernetes", Observer::Http),
            ("gatewayapi", Observer::Http),
            ("gatewayapi:v1", Observer::Http),
            ("gatewayapi:v1beta1", Observer::Http),
        ];
        for (provider, expected) in cases {
            assert_eq!(
                Observer::for_provider(Some(provider), m),
                Ok(expected),
                "{provider}"
            );
        }
        for smi in ["smi", "smi:v1alpha1", "smi:v1alpha2", "smi:v1alpha4"] {
            let err = Observer::for_provider(Some(smi), m).unwrap_err();
            assert!(matches!(err, ProviderError::Smi { .. }), "{smi}");
            assert!(err
                .to_string()
                .contains("set spec.provider to linkerd or osm"));
        }
        let err = Observer::for_provider(Some("istoi"), m).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("built-in metric request-success-rate: unknown provider \"istoi\"; built-in metrics exist for {SUPPORTED}")
        );
        assert_eq!(
            Observer::for_provider(Some("skipper"), m),
            Ok(Observer::Skipper)
        );
        assert_eq!(
            Observer::for_provider(Some("knative"), m),
            Ok(Observer::Knative)
        );
        assert_eq!(
            Observer::for_provider(None, BuiltinMetric::RequestDuration)
                .unwrap_err()
                .to_string(),
            "built-in metric request-duration needs spec.provider (the mesh or ingress whose metrics to query); set it, or use a MetricTemplate"
        );
    }

    #[test]
    fn every_query_renders_with_no_placeholder_left() {
        for o in ALL {
            for m in [
                BuiltinMetric::RequestSuccessRate,
                BuiltinMetric::RequestDuration,
            ] {
                let q = query(o, m);
                assert!(!q.contains("{{") && !q.contains("}}"), "{o} {m:?}: {q}");
                assert!(q.contains("[1m]"), "{o} {m:?}: {q}");
                assert!(
                    q.contains("test"),
                    "{o} {m:?} does not select the namespace: {q}"
                );
                if m == BuiltinMetric::RequestSuccessRate {
                    assert!(q.ends_with("* 100"), "{o}: {q}");
                }
            }
        }
    }

    #[test]
    fn osm_queries() {
        assert_eq!(
            query(Observer::Osm, BuiltinMetric::RequestSuccessRate),
            r#"sum(rate(osm_request_total{destination_namespace="test", destination_kind="Deployment", destination_name="podinfo", response_code!~"5.*"}[1m])) / sum(rate(osm_request_total{destination_namespace="test", destination_kind="Deployment", destination_name="podinfo"}[1m])) * 100"#
        );
        assert_eq!(
            query(Observer::Osm, BuiltinMetric::RequestDuration),
            r#"histogram_quantile(0.99, sum(rate(osm_request_duration_ms_bucket{destination_namespace="test", destination_kind="Deployment", destination_name="podinfo"}[1m])) by (le))"#
        );
    }

    #[test]
    fn linkerd_queries() {
        assert_eq!(
            query(Observer::Linkerd, BuiltinMetric::RequestSuccessRate),
            r#"sum(rate(response_total{namespace="test", deployment=~"podinfo", classification!="failure", direction="inbound"}[1m])) / sum(rate(response_total{namespace="test", deployment=~"podinfo", direction="inbound"}[1m])) * 100"#
        );
        assert_eq!(
            query(Observer::Linkerd, BuiltinMetric::RequestDuration),
            r#"histogram_quantile(0.99, sum(rate(response_latency_ms_bucket{namespace="test", deployment=~"podinfo", direction="inbound"}[1m])) by (le))"#
        );
    }

    #[test]
    fn istio_queries() {
        assert_eq!(
            query(Observer::Istio, BuiltinMetric::RequestSuccessRate),
            r#"sum(rate(istio_requests_total{reporter="destination", destination_workload_namespace="test", destination_workload=~"podinfo", response_code!~"5.*"}[1m])) / sum(rate(istio_requests_total{reporter="destination", destination_workload_namespace="test", destination_workload=~"podinfo"}[1m])) * 100"#
        );
        assert_eq!(
            query(Observer::Istio, BuiltinMetric::RequestDuration),
            r#"histogram_quantile(0.99, sum(rate(istio_request_duration_milliseconds_bucket{reporter="destination", destination_workload_namespace="test", destination_workload=~"podinfo"}[1m])) by (le))"#
        );
    }

    /// Flagger's `{{ route }}` for Knative is the canary revision (`latestCreatedRevisionName`).
    #[test]
    fn knative_queries_select_the_canary_revision_cluster() {
        let mut m = model();
        m.route = "podinfo-00002".into();
        let render =
            |metric| collapse_whitespace(&Observer::Knative.query(metric, &m).unwrap().promql);
        assert_eq!(
            render(BuiltinMetric::RequestSuccessRate),
            r#"sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"test/podinfo-00002", envoy_response_code!~"5.*"}[1m])) / sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"test/podinfo-00002"}[1m])) * 100"#
        );
        assert_eq!(
            render(BuiltinMetric::RequestDuration),
            r#"histogram_quantile(0.99, sum(rate(envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=~"test/podinfo-00002"}[1m])) by (le))"#
        );
    }

    #[test]
    fn contour_queries_select_the_canary_service_cluster() {
        let mut m = model();
        m.service = "frontend".into();
        let q = collapse_whitespace(
            &Observer::Contour
                .query(BuiltinMetric::RequestSuccessRate, &m)
                .unwrap()
                .promql,
        );
        assert_eq!(
            q,
            r#"sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"test_frontend-canary_[0-9a-zA-Z-]+", envoy_response_code!~"5.*"}[1m])) / sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"test_frontend-canary_[0-9a-zA-Z-]+"}[1m])) * 100"#
        );
        assert_eq!(
            query(Observer::Contour, BuiltinMetric::RequestDuration),
            r#"histogram_quantile(0.99, sum(rate(envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=~"test_podinfo-canary_[0-9a-zA-Z-]+"}[1m])) by (le))"#
        );
    }

    #[test]
    fn nginx_queries_use_the_ingress_and_the_mean_latency() {
        let mut m = model();
        m.ingress = "podinfo-ingress".into();
        let q = collapse_whitespace(
            &Observer::Nginx
                .query(BuiltinMetric::RequestDuration, &m)
                .unwrap()
                .promql,
        );
        assert_eq!(
            q,
            r#"sum(rate(nginx_ingress_controller_response_duration_seconds_sum{namespace="test", ingress="podinfo-ingress", canary!=""}[1m])) / sum(rate(nginx_ingress_controller_response_duration_seconds_count{namespace="test", ingress="podinfo-ingress", canary!=""}[1m])) * 1000"#
        );
        assert_eq!(
            query(Observer::Nginx, BuiltinMetric::RequestSuccessRate),
            r#"sum(rate(nginx_ingress_controller_requests{namespace="test", ingress="podinfo", canary!="", status!~"5.*"}[1m])) / sum(rate(nginx_ingress_controller_requests{namespace="test", ingress="podinfo", canary!=""}[1m])) * 100"#
        );
    }

    /// Flagger's `encodeModelForSkipper` turns `-` into `_`, so the route id regex matches
    /// Skipper's ids for the canary Ingress `podinfo-ingress-canary`.
    #[test]
    fn skipper_queries_match_the_canary_ingress_route_ids() {
        let mut m = model();
        m.ingress = "podinfo-ingress".into();
        m.namespace = "test-ns".into();
        let q = |metric| collapse_whitespace(&Observer::Skipper.query(metric, &m).unwrap().promql);
        assert_eq!(
            q(BuiltinMetric::RequestSuccessRate),
            r#"sum(rate(skipper_response_duration_seconds_bucket{route=~"kube(ew)?_test_ns__podinfo_ingress_canary__.*__podinfo_canary(_[0-9]+)?", code!~"5..", le="+Inf"}[1m])) / sum(rate(skipper_response_duration_seconds_bucket{route=~"kube(ew)?_test_ns__podinfo_ingress_canary__.*__podinfo_canary(_[0-9]+)?", le="+Inf"}[1m])) * 100"#
        );
        assert_eq!(
            q(BuiltinMetric::RequestDuration),
            r#"sum(rate(skipper_serve_route_duration_seconds_sum{route=~"kube(ew)?_test_ns__podinfo_ingress_canary__.*__podinfo_canary(_[0-9]+)?"}[1m])) / sum(rate(skipper_serve_route_duration_seconds_count{route=~"kube(ew)?_test_ns__podinfo_ingress_canary__.*__podinfo_canary(_[0-9]+)?"}[1m])) * 1000"#
        );
    }

    #[test]
    fn gateway_api_uses_the_application_histogram_in_milliseconds() {
        assert_eq!(
            query(Observer::Http, BuiltinMetric::RequestSuccessRate),
            r#"sum(rate(http_request_duration_seconds_count{kubernetes_namespace="test", kubernetes_pod_name=~"podinfo-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)", status!~"5.*"}[1m])) / sum(rate(http_request_duration_seconds_count{kubernetes_namespace="test", kubernetes_pod_name=~"podinfo-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"}[1m])) * 100"#
        );
        assert_eq!(
            query(Observer::Http, BuiltinMetric::RequestDuration),
            r#"histogram_quantile(0.99, sum(rate(http_request_duration_seconds_bucket{kubernetes_namespace="test", kubernetes_pod_name=~"podinfo-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"}[1m])) by (le)) * 1000"#
        );
    }

    #[test]
    fn the_interval_and_target_come_from_the_model() {
        let mut m = model();
        m.interval = "30s".into();
        m.target = "backend".into();
        m.namespace = "prod".into();
        let q = Observer::Osm
            .query(BuiltinMetric::RequestSuccessRate, &m)
            .unwrap()
            .promql;
        assert!(q.contains("destination_name=\"backend\""), "{q}");
        assert!(q.contains("destination_namespace=\"prod\""), "{q}");
        assert_eq!(q.matches("[30s]").count(), 2, "{q}");
    }

    #[test]
    fn durations_are_truncated_to_whole_milliseconds_like_flagger() {
        let q = Observer::Osm
            .query(BuiltinMetric::RequestDuration, &model())
            .unwrap();
        assert_eq!(
            q.finish(MetricValue::Value(499.9)),
            MetricValue::Value(499.0)
        );
        assert!(
            matches!(q.finish(MetricValue::Value(f64::NAN)), MetricValue::Value(v) if v.is_nan())
        );
        assert_eq!(q.finish(MetricValue::NoData), MetricValue::NoData);
        let s = Observer::Osm
            .query(BuiltinMetric::RequestSuccessRate, &model())
            .unwrap();
        assert_eq!(s.finish(MetricValue::Value(99.5)), MetricValue::Value(99.5));
    }
}
