//! The statistical judge's observation for one tick: each metric's query template rendered for the
//! primary's and the canary's workload and run as a Prometheus range query over the judge's
//! window ending now, on the pooled client instant queries use. What comes back is data for
//! the core (`sluice_core::judged`); nothing is judged here.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use sluice_core::judge::JudgeSpec;
use sluice_core::judged::{JudgeObservation, MetricSeries};

use crate::metrics::prometheus::{Prometheus, PrometheusAccess, PrometheusConfig};
use crate::metrics::NO_ADDRESS;
use sluice_core::model::Canary;

/// Values per window when the judge sets no `step`: enough for the test, few enough to keep.
const DEFAULT_POINTS: u32 = 30;

/// The span the series cover: the judge's `window`, else the analysis interval.
pub fn window<R>(canary: &Canary<R>, spec: &JudgeSpec) -> Duration {
    spec.window.unwrap_or(canary.analysis.interval)
}

/// The most values a series holds: the replay record keeps them all.
pub const MAX_POINTS: u32 = 1000;

/// The range query's resolution: the judge's `step`, else the window over 30 (at least 1 s);
/// never finer than the window over [`MAX_POINTS`].
pub fn step<R>(canary: &Canary<R>, spec: &JudgeSpec) -> Duration {
    let window = window(canary, spec);
    spec.step
        .unwrap_or_else(|| (window / DEFAULT_POINTS).max(Duration::from_secs(1)))
        .max(window / MAX_POINTS)
}

/// A query template for one workload: `{{ workload }}` and `{{ namespace }}` filled in.
pub fn render(template: &str, workload: &str, namespace: &str) -> String {
    template
        .replace("{{ workload }}", workload)
        .replace("{{workload}}", workload)
        .replace("{{ namespace }}", namespace)
        .replace("{{namespace}}", namespace)
}

/// Every metric's pair of series for `canary` (its workload `target`, the primary
/// `<target>-primary`), or the first failure.
pub async fn observe<R: Sync>(
    access: &PrometheusAccess,
    canary: &Canary<R>,
    spec: &JudgeSpec,
    target: &str,
    default_address: Option<&str>,
    (now, concurrency): (Timestamp, usize),
) -> JudgeObservation {
    match series(
        access,
        canary,
        spec,
        target,
        default_address,
        now,
        concurrency,
    )
    .await
    {
        Ok(series) => JudgeObservation::Series(series),
        Err(e) => JudgeObservation::Error(e),
    }
}

async fn series<R: Sync>(
    access: &PrometheusAccess,
    canary: &Canary<R>,
    spec: &JudgeSpec,
    target: &str,
    default_address: Option<&str>,
    now: Timestamp,
    concurrency: usize,
) -> Result<Vec<MetricSeries>, String> {
    let address = canary
        .metrics_server
        .as_deref()
        .or(default_address)
        .ok_or(NO_ADDRESS)?;
    let mut config = PrometheusConfig::new(address);
    config.auth = access
        .auth()
        .map_err(|e| format!("Prometheus credentials: {e}"))?
        .clone();
    // A wave's own Prometheus takes the credentials of its `metricsSecretRef`.
    if canary.metrics_server.is_some() {
        if let Some(auth) = crate::metrics::wave_auth(canary, access.secrets()) {
            config.auth = auth?;
        }
    }
    let client = Prometheus::with_client(access.http().get(false).clone(), &config)
        .map_err(|e| e.to_string())?;
    let endpoint = access.endpoints().get(client.url(), false, concurrency)?;
    let client = client.on(endpoint.client().clone());
    let window = SignedDuration::try_from(window(canary, spec)).unwrap_or(SignedDuration::MAX);
    let start = now.checked_sub(window).unwrap_or(Timestamp::MIN);
    let step = step(canary, spec);
    let primary = format!("{target}-primary");
    let namespace = canary.id.namespace.as_str();
    let mut out = Vec::with_capacity(spec.metrics.len());
    for metric in &spec.metrics {
        // The canary loader asks every metric of a canary's judge for a query.
        let Some(template) = &metric.query else {
            return Err(format!("{}: no query", metric.name));
        };
        let run = |workload: &str| {
            let query = render(template, workload, namespace);
            let (client, endpoint) = (&client, &endpoint);
            async move {
                let _slot = endpoint.slot().await;
                client.query_range(&query, start, now, step).await
            }
        };
        let (canary_series, baseline) = tokio::join!(run(target), run(&primary));
        let failed = |who: &str, e: String| format!("{} ({who}): {e}", metric.name);
        out.push(MetricSeries {
            name: metric.name.clone(),
            canary: canary_series.map_err(|e| failed(target, e))?,
            baseline: baseline.map_err(|e| failed(&primary, e))?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_is_rendered_for_each_workload() {
        let t = "latency_ms{deployment=\"{{ workload }}\",namespace=\"{{namespace}}\"}";
        assert_eq!(
            render(t, "podinfo-primary", "prod"),
            "latency_ms{deployment=\"podinfo-primary\",namespace=\"prod\"}"
        );
    }
}
