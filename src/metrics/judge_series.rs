//! The statistical judge's observation for one tick: each metric's query rendered for the
//! primary's and the canary's workload and run as a range query over the judge's window
//! ending now, on the pooled client instant queries use. A metric's query is a PromQL
//! template, a built-in metric of the canary's provider (`judge_builtin.rs`), or a
//! MetricTemplate run by its provider where that provider's API gives a series
//! ([`range_providers`]). What comes back is data for
//! the core (`sluice_core::judged`); nothing is judged here.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use std::collections::BTreeMap;

use sluice_core::judge::config::step_for;
use sluice_core::judge::{JudgeQuery, JudgeSpec};
use sluice_core::judged::{JudgeObservation, MetricSeries};

use crate::http_client::Endpoint;
use crate::metrics::judge_builtin;
use crate::metrics::metric_templates::TemplateIndex;
use crate::metrics::prometheus::{Prometheus, PrometheusAccess, PrometheusConfig};
use crate::metrics::{query_model, template_series, DEFAULT_METRIC_INTERVAL, NO_ADDRESS};
use crate::route::Canary;

/// The span the series cover: the judge's `window`, else the analysis interval.
pub fn window<R>(canary: &sluice_core::model::Canary<R>, spec: &JudgeSpec) -> Duration {
    spec.window.unwrap_or(canary.analysis.interval)
}

pub use sluice_core::judge::config::MAX_POINTS;

/// The range query's resolution: the judge's `step`, else enough values for its `minSamples`
/// (the core's [`step_for`]).
pub fn step<R>(canary: &sluice_core::model::Canary<R>, spec: &JudgeSpec) -> Duration {
    step_for(window(canary, spec), spec.step, spec.min_samples)
}

/// A query template for one workload: `{{ workload }}` and `{{ namespace }}` filled in.
pub fn render(template: &str, workload: &str, namespace: &str) -> String {
    template
        .replace("{{ workload }}", workload)
        .replace("{{workload}}", workload)
        .replace("{{ namespace }}", namespace)
        .replace("{{namespace}}", namespace)
}

/// The metric providers whose APIs answer a range query with a series, as a MetricTemplate's
/// `spec.provider.type` names them (each provider says so in its module: `SERIES`). The
/// others give one value per query: the judge refuses them (see docs/judge.md for each
/// provider's reason).
pub use crate::metrics::registry::range_providers;

/// Why a judged metric cannot use `provider`'s MetricTemplate.
pub fn refusal(provider: &str) -> String {
    format!(
        "the judge needs a series; {provider} gives one value; use {}",
        range_providers().join(", ")
    )
}

/// What every metric of one canary's judge shares when its series are fetched.
pub struct Fetch<'a> {
    pub access: &'a PrometheusAccess,
    pub templates: &'a TemplateIndex,
    /// The repo's Prometheus address.
    pub default_address: Option<&'a str>,
    pub now: Timestamp,
    pub concurrency: usize,
}

/// Every metric's pair of series for `canary` (its workload `target`, the primary
/// `<target>-primary`), or the first failure.
pub async fn observe(
    fetch: &Fetch<'_>,
    canary: &Canary,
    spec: &JudgeSpec,
    target: &str,
) -> JudgeObservation {
    match series(fetch, canary, spec, target).await {
        Ok(series) => JudgeObservation::Series(series),
        Err(e) => JudgeObservation::Error(e),
    }
}

async fn series(
    fetch: &Fetch<'_>,
    canary: &Canary,
    spec: &JudgeSpec,
    target: &str,
) -> Result<Vec<MetricSeries>, String> {
    let window = SignedDuration::try_from(window(canary, spec)).unwrap_or(SignedDuration::MAX);
    let start = fetch.now.checked_sub(window).unwrap_or(Timestamp::MIN);
    let span = (start, fetch.now, step(canary, spec));
    let primary = format!("{target}-primary");
    let mut out = Vec::with_capacity(spec.metrics.len());
    for metric in &spec.metrics {
        // The canary loader asks every metric of a canary's judge for a query.
        let Some(query) = &metric.query else {
            return Err(format!("{}: no query", metric.name));
        };
        let (canary_series, baseline) = match query {
            JudgeQuery::Promql(template) => {
                let namespace = canary.id.namespace.as_str();
                let prometheus = prometheus(fetch, canary)?;
                let (c, p) = (
                    render(template, target, namespace),
                    render(template, &primary, namespace),
                );
                tokio::join!(prometheus.run(&c, span), prometheus.run(&p, span))
            }
            JudgeQuery::Builtin(b) => {
                let queries = judge_builtin::judge_queries(canary.provider.as_deref(), *b)
                    .map_err(|e| e.to_string())?;
                let model = query_model(canary, target, DEFAULT_METRIC_INTERVAL, &BTreeMap::new());
                let (c, p) = judge_builtin::render_pair(&queries, *b, &model)?;
                let prometheus = prometheus(fetch, canary)?;
                tokio::join!(
                    prometheus.run(&c.promql, span),
                    prometheus.run(&p.promql, span)
                )
            }
            JudgeQuery::Template { name, namespace } => {
                let ns = namespace.as_deref().unwrap_or(canary.id.namespace.as_str());
                let run = |workload: String| async move {
                    template_series(
                        fetch.access,
                        canary,
                        (ns, name),
                        &workload,
                        fetch.templates,
                        fetch.default_address,
                        fetch.concurrency,
                        span,
                    )
                    .await
                };
                tokio::join!(run(target.to_string()), run(primary.clone()))
            }
        };
        let failed = |who: &str, e: String| format!("{} ({who}): {e}", metric.name);
        out.push(MetricSeries {
            name: metric.name.clone(),
            canary: canary_series.map_err(|e| failed(target, e))?,
            baseline: baseline.map_err(|e| failed(&primary, e))?,
        });
    }
    Ok(out)
}

/// The canary's Prometheus (`spec.metricsServer`, else the repo's) on its pooled client.
struct Pooled {
    client: Prometheus,
    endpoint: Endpoint,
}

impl Pooled {
    async fn run(
        &self,
        promql: &str,
        (start, end, step): (Timestamp, Timestamp, Duration),
    ) -> Result<Vec<f64>, String> {
        let _slot = self.endpoint.slot().await;
        self.client.query_range(promql, start, end, step).await
    }
}

fn prometheus(fetch: &Fetch<'_>, canary: &Canary) -> Result<Pooled, String> {
    let address = canary
        .metrics_server
        .as_deref()
        .or(fetch.default_address)
        .ok_or(NO_ADDRESS)?;
    let mut config = PrometheusConfig::new(address);
    // A wave's own Prometheus takes the credentials of its `metricsSecretRef`; else the
    // operator's, only where the operator allows them to go.
    let wave = canary
        .metrics_server
        .as_ref()
        .and_then(|_| crate::metrics::wave_auth(canary, fetch.access.secrets()));
    config.auth = match wave {
        Some(auth) => auth?,
        None => fetch
            .access
            .auth_for(address)
            .map_err(|e| format!("Prometheus credentials: {e}"))?,
    };
    let client = Prometheus::with_client(fetch.access.http().get(false).clone(), &config)
        .map_err(|e| e.to_string())?;
    let endpoint = fetch
        .access
        .endpoints()
        .get(client.url(), false, fetch.concurrency)?;
    let client = client.on(endpoint.client().clone());
    Ok(Pooled { client, endpoint })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloudwatch_asks_for_as_many_points_as_a_series_keeps() {
        assert_eq!(crate::metrics::cloudwatch::RANGE_MAX_DATAPOINTS, MAX_POINTS);
    }

    #[test]
    fn a_template_is_rendered_for_each_workload() {
        let t = "latency_ms{deployment=\"{{ workload }}\",namespace=\"{{namespace}}\"}";
        assert_eq!(
            render(t, "podinfo-primary", "prod"),
            "latency_ms{deployment=\"podinfo-primary\",namespace=\"prod\"}"
        );
    }
}
