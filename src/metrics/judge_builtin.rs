//! The statistical judge's built-in metrics: Flagger's request success rate and duration
//! queries ([`super::builtin`]) rendered twice, once selecting the canary and once the
//! primary, so the judge compares the two series. Durations are milliseconds, as every
//! built-in duration query returns them.
//!
//! How a provider's query selects one workload decides whether the judge can use it; each
//! router says it in its queries ([`QuerySet::judge_primary`]):
//! - by the workload's name (`{{ target }}`: istio, linkerd, osm, appmesh, and the
//!   application histogram of kubernetes / gatewayapi): the primary's query names
//!   `<target>-primary`;
//! - by the canary's own proxy name, spelled with `-canary` (contour, gloo, kuma, traefik) or
//!   a `canary` label (nginx): the primary's query spells the primary's name there instead;
//! - not at all (apisix, skipper: one route carries both backends; knative: the primary is a
//!   revision the query model does not name): refused, as are providers with no built-ins.
//!
//! Pure: no IO.

use crate::core::model::BuiltinMetric;
use crate::metrics::builtin::{metric_name, query, query_set, BuiltinQuery};
use crate::metrics::query_render::{render, QueryModel};
use crate::route::{JudgePrimary, QuerySet};

/// A provider the judge's built-in metrics cannot be queried for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("built-in judge metric {metric}: {why}; built-in judge metrics exist for providers {}", supported().join(", "))]
pub struct Unsupported {
    pub metric: &'static str,
    pub why: String,
}

/// The provider strings whose built-in metrics the judge can run for both workloads.
pub fn supported() -> Vec<&'static str> {
    crate::route::provider_names()
        .into_iter()
        .filter(|p| {
            query_set(Some(p), BuiltinMetric::RequestSuccessRate)
                .is_ok_and(|q| primary_rule(&q).is_some())
        })
        .collect()
}

/// How `queries` select the primary, when they can ([`QuerySet::judge_primary`], said by
/// the router that owns them).
fn primary_rule(queries: &QuerySet) -> Option<JudgePrimary> {
    match queries.judge_primary {
        JudgePrimary::Unselectable => None,
        rule @ (JudgePrimary::Workload | JudgePrimary::Replace(_)) => Some(rule),
    }
}

/// The router queries of `provider` for the judge, or why there are none.
pub fn judge_queries(
    provider: Option<&str>,
    metric: BuiltinMetric,
) -> Result<QuerySet, Unsupported> {
    let name = metric_name(metric);
    let queries = query_set(provider, metric).map_err(|e| Unsupported {
        metric: name,
        why: match provider {
            None => "needs spec.provider (the mesh or ingress whose metrics to query)".into(),
            Some(_) => e.to_string(),
        },
    })?;
    match primary_rule(&queries) {
        Some(_) => Ok(queries),
        None => Err(Unsupported {
            metric: name,
            why: format!(
                "provider {:?}'s query cannot select the primary apart from the canary",
                provider.unwrap_or_default()
            ),
        }),
    }
}

/// The canary's and the primary's queries of `metric`: `model` is the one the threshold
/// metric renders with (its `target` the canary's workload).
pub fn render_pair(
    queries: &QuerySet,
    metric: BuiltinMetric,
    model: &QueryModel,
) -> Result<(BuiltinQuery, BuiltinQuery), String> {
    let failed = |e: crate::metrics::query_render::RenderError| {
        format!("rendering the {queries} query failed: {e}")
    };
    let canary = query(queries, metric, model).map_err(failed)?;
    let primary = match primary_rule(queries) {
        Some(JudgePrimary::Workload) => {
            let model = QueryModel {
                target: format!("{}-primary", model.target),
                ..model.clone()
            };
            query(queries, metric, &model).map_err(failed)?
        }
        // The routers with a `Replace` rule spell names as they are (no `encode_names`).
        Some(JudgePrimary::Replace(pairs)) if queries.encode_names.is_none() => {
            let mut template = match metric {
                BuiltinMetric::RequestSuccessRate => queries.success_rate,
                BuiltinMetric::RequestDuration => queries.duration,
            }
            .to_string();
            for (from, to) in pairs.iter() {
                template = template.replace(from, to);
            }
            BuiltinQuery {
                metric,
                promql: render(&template, model).map_err(failed)?,
            }
        }
        _ => return Err(format!("{queries}: no primary query")),
    };
    Ok((canary, primary))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::prometheus::collapse_whitespace;

    fn model() -> QueryModel {
        crate::metrics::query_render::podinfo_model()
    }

    fn pair(provider: &str, metric: BuiltinMetric) -> (String, String) {
        let queries = judge_queries(Some(provider), metric).unwrap();
        let (c, p) = render_pair(&queries, metric, &model()).unwrap();
        (
            collapse_whitespace(&c.promql),
            collapse_whitespace(&p.promql),
        )
    }

    #[test]
    fn every_supported_provider_renders_a_distinct_primary_query() {
        let supported = supported();
        for p in [
            "istio",
            "linkerd",
            "osm",
            "appmesh:v1beta2",
            "kubernetes",
            "gatewayapi:v1",
            "contour",
            "gloo",
            "kuma",
            "traefik",
            "nginx",
        ] {
            assert!(supported.contains(&p), "{p} in {supported:?}");
        }
        for provider in supported {
            for metric in [
                BuiltinMetric::RequestSuccessRate,
                BuiltinMetric::RequestDuration,
            ] {
                let (canary, primary) = pair(provider, metric);
                assert_ne!(canary, primary, "{provider} {metric:?}");
                assert!(!primary.contains("{{"), "{provider}: {primary}");
                assert!(!primary.contains("-canary"), "{provider}: {primary}");
                assert_eq!(
                    canary.matches("test").count(),
                    primary.matches("test").count(),
                    "{provider}: only the workload differs"
                );
            }
        }
    }

    #[test]
    fn the_primary_is_selected_by_its_workload_or_proxy_name() {
        let (c, p) = pair("istio", BuiltinMetric::RequestDuration);
        assert!(c.contains(r#"destination_workload=~"podinfo""#), "{c}");
        assert_eq!(
            p,
            r#"histogram_quantile(0.99, sum(rate(istio_request_duration_milliseconds_bucket{reporter="destination", destination_workload_namespace="test", destination_workload=~"podinfo-primary"}[1m])) by (le))"#
        );
        let (_, p) = pair("contour", BuiltinMetric::RequestSuccessRate);
        assert_eq!(
            p,
            r#"sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"test_podinfo-primary_[0-9a-zA-Z-]+", envoy_response_code!~"5.*"}[1m])) / sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"test_podinfo-primary_[0-9a-zA-Z-]+"}[1m])) * 100"#
        );
        let (_, p) = pair("gloo", BuiltinMetric::RequestDuration);
        assert!(p.contains("test-podinfo-primaryupstream-"), "{p}");
        let (_, p) = pair("kuma", BuiltinMetric::RequestDuration);
        assert!(p.contains(r#"service=~"podinfo-primary_test_svc_"#), "{p}");
        let (_, p) = pair("traefik", BuiltinMetric::RequestDuration);
        assert!(
            p.contains("test-podinfo-primary-[0-9a-zA-Z-]+@kubernetescrd"),
            "{p}"
        );
        let (c, p) = pair("nginx", BuiltinMetric::RequestDuration);
        assert_eq!(c.matches(r#"canary!="""#).count(), 2, "{c}");
        assert_eq!(p.matches(r#"canary="""#).count(), 2, "{p}");
        let (_, p) = pair("kubernetes", BuiltinMetric::RequestSuccessRate);
        assert!(
            p.contains(r#"kubernetes_pod_name=~"podinfo-primary-[0-9a-zA-Z]+"#),
            "{p}"
        );
    }

    #[test]
    fn providers_without_a_primary_query_are_refused_with_the_list() {
        let list = supported().join(", ");
        for provider in ["apisix", "skipper", "knative", "smi", "istoi"] {
            let e = judge_queries(Some(provider), BuiltinMetric::RequestDuration).unwrap_err();
            let text = e.to_string();
            assert!(
                text.starts_with("built-in judge metric request-duration: "),
                "{text}"
            );
            assert!(
                text.ends_with(&format!(
                    "built-in judge metrics exist for providers {list}"
                )),
                "{text}"
            );
        }
        let e = judge_queries(None, BuiltinMetric::RequestSuccessRate).unwrap_err();
        assert!(e.to_string().contains("needs spec.provider"), "{e}");
    }
}
