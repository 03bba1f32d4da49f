//! Flagger's built-in metrics: which router's queries a canary's provider selects, and
//! rendering them.
//!
//! `request-success-rate` is the percentage (0..100) of non-5xx requests to the canary;
//! `request-duration` is the canary's 99th percentile latency in milliseconds. The query texts
//! live with their routers ([`Router::builtin_metrics`](crate::route::Router::builtin_metrics))
//! and follow Flagger's observers (`pkg/metrics/observers/*.go`, v1.44): same metric names,
//! label matchers, windows and arithmetic, reformatted. Where Flagger's observer converts units
//! after the query (the Gateway API / Kubernetes observer reads seconds and multiplies by 1000)
//! the multiplication is part of the query, so every duration query returns milliseconds.
//! Flagger truncates durations to whole milliseconds before comparing them with the threshold;
//! [`BuiltinQuery::finish`] does the same.
//!
//! The provider string is mapped to a [`QuerySet`] when the query is built. Unlike Flagger's
//! factory, which falls back to Istio's queries for any provider it does not know (including
//! `smi:*` unless Flagger itself runs with `-mesh-provider=linkerd`), an unknown provider is an
//! error here: querying the wrong mesh's metrics returns no data at best. This module does no
//! IO.

use crate::core::model::BuiltinMetric;
use crate::core::observe::MetricValue;
use crate::metrics::query_render::{render, QueryModel, RenderError};
use crate::route::{BuiltinMetrics, QuerySet};

/// A provider the built-in metrics cannot be computed for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("built-in metric {metric} needs spec.provider (the mesh or ingress whose metrics to query); set it, or use a MetricTemplate")]
    Missing { metric: &'static str },
    /// The provider's router has no built-in queries for it (`smi:*`: which mesh?).
    #[error("built-in metric {metric}: provider {provider:?} {why}")]
    NoQueries {
        metric: &'static str,
        provider: String,
        why: &'static str,
    },
    #[error("built-in metric {metric}: unknown provider {provider:?}; built-in metrics exist for {}", supported().join(", "))]
    Unknown {
        metric: &'static str,
        provider: String,
    },
}

/// The provider strings with built-in queries, router by router.
fn supported() -> Vec<&'static str> {
    crate::route::provider_names()
        .into_iter()
        .filter(|name| {
            matches!(
                crate::route::builtin_metrics(name),
                Some(BuiltinMetrics::Queries(_))
            )
        })
        .collect()
}

/// Flagger's name of a built-in metric.
pub fn metric_name(metric: BuiltinMetric) -> &'static str {
    match metric {
        BuiltinMetric::RequestSuccessRate => "request-success-rate",
        BuiltinMetric::RequestDuration => "request-duration",
    }
}

/// The queries for a canary's `spec.provider`, as Flagger's observer factory maps it, minus
/// its fallback.
pub fn query_set(provider: Option<&str>, metric: BuiltinMetric) -> Result<QuerySet, ProviderError> {
    let metric = metric_name(metric);
    let Some(provider) = provider else {
        return Err(ProviderError::Missing { metric });
    };
    match crate::route::builtin_metrics(provider) {
        Some(BuiltinMetrics::Queries(queries)) => Ok(queries),
        Some(BuiltinMetrics::None(why)) => Err(ProviderError::NoQueries {
            metric,
            provider: provider.to_string(),
            why,
        }),
        None => Err(ProviderError::Unknown {
            metric,
            provider: provider.to_string(),
        }),
    }
}

/// Renders the query of `queries` for one metric.
pub fn query(
    queries: &QuerySet,
    metric: BuiltinMetric,
    model: &QueryModel,
) -> Result<BuiltinQuery, RenderError> {
    let template = match metric {
        BuiltinMetric::RequestSuccessRate => queries.success_rate,
        BuiltinMetric::RequestDuration => queries.duration,
    };
    let promql = match queries.encode_names {
        Some(encode) => render(template, &encoded(model, encode))?,
        None => render(template, model)?,
    };
    Ok(BuiltinQuery { metric, promql })
}

/// `model` with its names spelled as the metric labels spell them.
fn encoded(model: &QueryModel, encode: fn(&str) -> String) -> QueryModel {
    QueryModel {
        name: encode(&model.name),
        namespace: encode(&model.namespace),
        target: encode(&model.target),
        service: encode(&model.service),
        ingress: encode(&model.ingress),
        ..model.clone()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::prometheus::collapse_whitespace;

    const ALL: [&str; 13] = [
        "osm",
        "linkerd",
        "istio",
        "contour",
        "gloo",
        "nginx",
        "kuma",
        "traefik",
        "appmesh:v1beta2",
        "apisix",
        "skipper",
        "kubernetes",
        "knative",
    ];

    fn model() -> QueryModel {
        crate::metrics::query_render::podinfo_model()
    }

    /// The queries of `provider`'s router.
    fn set(provider: &str) -> QuerySet {
        query_set(Some(provider), BuiltinMetric::RequestSuccessRate).unwrap()
    }

    fn rendered(provider: &str, metric: BuiltinMetric) -> String {
        collapse_whitespace(&query(&set(provider), metric, &model()).unwrap().promql)
    }

    #[test]
    fn providers_map_like_flaggers_factory_without_its_istio_fallback() {
        let m = BuiltinMetric::RequestSuccessRate;
        let cases = [
            ("osm", "osm"),
            ("linkerd", "linkerd"),
            ("istio", "istio"),
            ("contour", "contour"),
            ("nginx", "nginx"),
            ("gloo", "gloo"),
            ("gloo:v1", "gloo"),
            ("kuma", "kuma"),
            ("traefik", "traefik"),
            ("appmesh", "appmesh"),
            ("appmesh:v1beta2", "appmesh"),
            ("apisix", "apisix"),
            ("kubernetes", "http"),
            ("gatewayapi", "http"),
            ("gatewayapi:v1", "http"),
            ("gatewayapi:v1beta1", "http"),
        ];
        for (provider, expected) in cases {
            assert_eq!(
                query_set(Some(provider), m).map(|q| q.name),
                Ok(expected),
                "{provider}"
            );
        }
        for smi in ["smi", "smi:v1alpha1", "smi:v1alpha2", "smi:v1alpha4"] {
            let err = query_set(Some(smi), m).unwrap_err();
            assert!(matches!(err, ProviderError::NoQueries { .. }), "{smi}");
            assert!(err
                .to_string()
                .contains("set spec.provider to linkerd or osm"));
        }
        let err = query_set(Some("istoi"), m).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("built-in metric request-success-rate: unknown provider \"istoi\"; built-in metrics exist for {}", supported().join(", "))
        );
        assert_eq!(query_set(Some("skipper"), m).map(|q| q.name), Ok("skipper"));
        assert_eq!(query_set(Some("knative"), m).map(|q| q.name), Ok("knative"));
        assert_eq!(
            query_set(None, BuiltinMetric::RequestDuration)
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
                let q = rendered(o, m);
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
            rendered("osm", BuiltinMetric::RequestSuccessRate),
            r#"sum(rate(osm_request_total{destination_namespace="test", destination_kind="Deployment", destination_name="podinfo", response_code!~"5.*"}[1m])) / sum(rate(osm_request_total{destination_namespace="test", destination_kind="Deployment", destination_name="podinfo"}[1m])) * 100"#
        );
        assert_eq!(
            rendered("osm", BuiltinMetric::RequestDuration),
            r#"histogram_quantile(0.99, sum(rate(osm_request_duration_ms_bucket{destination_namespace="test", destination_kind="Deployment", destination_name="podinfo"}[1m])) by (le))"#
        );
    }

    #[test]
    fn linkerd_queries() {
        assert_eq!(
            rendered("linkerd", BuiltinMetric::RequestSuccessRate),
            r#"sum(rate(response_total{namespace="test", deployment=~"podinfo", classification!="failure", direction="inbound"}[1m])) / sum(rate(response_total{namespace="test", deployment=~"podinfo", direction="inbound"}[1m])) * 100"#
        );
        assert_eq!(
            rendered("linkerd", BuiltinMetric::RequestDuration),
            r#"histogram_quantile(0.99, sum(rate(response_latency_ms_bucket{namespace="test", deployment=~"podinfo", direction="inbound"}[1m])) by (le))"#
        );
    }

    #[test]
    fn istio_queries() {
        assert_eq!(
            rendered("istio", BuiltinMetric::RequestSuccessRate),
            r#"sum(rate(istio_requests_total{reporter="destination", destination_workload_namespace="test", destination_workload=~"podinfo", response_code!~"5.*"}[1m])) / sum(rate(istio_requests_total{reporter="destination", destination_workload_namespace="test", destination_workload=~"podinfo"}[1m])) * 100"#
        );
        assert_eq!(
            rendered("istio", BuiltinMetric::RequestDuration),
            r#"histogram_quantile(0.99, sum(rate(istio_request_duration_milliseconds_bucket{reporter="destination", destination_workload_namespace="test", destination_workload=~"podinfo"}[1m])) by (le))"#
        );
    }

    /// Flagger's `{{ route }}` for Knative is the canary revision (`latestCreatedRevisionName`).
    #[test]
    fn knative_queries_select_the_canary_revision_cluster() {
        let mut m = model();
        m.route = "podinfo-00002".into();
        let render =
            |metric| collapse_whitespace(&query(&set("knative"), metric, &m).unwrap().promql);
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
            &query(&set("contour"), BuiltinMetric::RequestSuccessRate, &m)
                .unwrap()
                .promql,
        );
        assert_eq!(
            q,
            r#"sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"test_frontend-canary_[0-9a-zA-Z-]+", envoy_response_code!~"5.*"}[1m])) / sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"test_frontend-canary_[0-9a-zA-Z-]+"}[1m])) * 100"#
        );
        assert_eq!(
            rendered("contour", BuiltinMetric::RequestDuration),
            r#"histogram_quantile(0.99, sum(rate(envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=~"test_podinfo-canary_[0-9a-zA-Z-]+"}[1m])) by (le))"#
        );
    }

    #[test]
    fn nginx_queries_use_the_ingress_and_the_mean_latency() {
        let mut m = model();
        m.ingress = "podinfo-ingress".into();
        let q = collapse_whitespace(
            &query(&set("nginx"), BuiltinMetric::RequestDuration, &m)
                .unwrap()
                .promql,
        );
        assert_eq!(
            q,
            r#"sum(rate(nginx_ingress_controller_response_duration_seconds_sum{namespace="test", ingress="podinfo-ingress", canary!=""}[1m])) / sum(rate(nginx_ingress_controller_response_duration_seconds_count{namespace="test", ingress="podinfo-ingress", canary!=""}[1m])) * 1000"#
        );
        assert_eq!(
            rendered("nginx", BuiltinMetric::RequestSuccessRate),
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
        let q = |metric| collapse_whitespace(&query(&set("skipper"), metric, &m).unwrap().promql);
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
            rendered("kubernetes", BuiltinMetric::RequestSuccessRate),
            r#"sum(rate(http_request_duration_seconds_count{kubernetes_namespace="test", kubernetes_pod_name=~"podinfo-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)", status!~"5.*"}[1m])) / sum(rate(http_request_duration_seconds_count{kubernetes_namespace="test", kubernetes_pod_name=~"podinfo-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"}[1m])) * 100"#
        );
        assert_eq!(
            rendered("kubernetes", BuiltinMetric::RequestDuration),
            r#"histogram_quantile(0.99, sum(rate(http_request_duration_seconds_bucket{kubernetes_namespace="test", kubernetes_pod_name=~"podinfo-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"}[1m])) by (le)) * 1000"#
        );
    }

    #[test]
    fn the_interval_and_target_come_from_the_model() {
        let mut m = model();
        m.interval = "30s".into();
        m.target = "backend".into();
        m.namespace = "prod".into();
        let q = query(&set("osm"), BuiltinMetric::RequestSuccessRate, &m)
            .unwrap()
            .promql;
        assert!(q.contains("destination_name=\"backend\""), "{q}");
        assert!(q.contains("destination_namespace=\"prod\""), "{q}");
        assert_eq!(q.matches("[30s]").count(), 2, "{q}");
    }

    #[test]
    fn durations_are_truncated_to_whole_milliseconds_like_flagger() {
        let q = query(&set("osm"), BuiltinMetric::RequestDuration, &model()).unwrap();
        assert_eq!(
            q.finish(MetricValue::Value(499.9)),
            MetricValue::Value(499.0)
        );
        assert!(
            matches!(q.finish(MetricValue::Value(f64::NAN)), MetricValue::Value(v) if v.is_nan())
        );
        assert_eq!(q.finish(MetricValue::NoData), MetricValue::NoData);
        let s = query(&set("osm"), BuiltinMetric::RequestSuccessRate, &model()).unwrap();
        assert_eq!(s.finish(MetricValue::Value(99.5)), MetricValue::Value(99.5));
    }
}
