//! Measuring the metrics of an Argo Rollouts analysis run ([`AnalysisRun`], read by
//! `analysis_templates.rs`) through sluice's provider clients, and the arguments a Rollout
//! passes that git knows (`valueFrom.podTemplateHashValue`, `valueFrom.fieldRef`).
//!
//! [`measure`] is the IO edge: one query, its answer shaped as Argo's provider shapes it
//! (Prometheus: the list of the vector's values, so `result[0]`; Graphite: one number or
//! `nil`), then judged by the metric's conditions in the core
//! ([`sluice_core::argo_analysis::measure`]). Every failure is a measurement in phase Error
//! with the reason; nothing here panics or decides beyond one measurement: the caller keeps
//! the measurements and asks [`sluice_core::argo_analysis::assess`] for the metric's phase.

use std::collections::BTreeMap;

use sluice_core::argo_analysis::{self, Answer, Measurement};
use sluice_core::argo_expr::Value;

use crate::core::observe::MetricValue;
use crate::metrics::analysis_templates::{substitute, AnalysisMetric, AnalysisRun, MetricSource};
use crate::metrics::prometheus::{Prometheus, PrometheusAccess, PrometheusConfig};
use crate::metrics::provider::{Ask, ClientInput};
use crate::metrics::registry::MetricProvider;
use crate::metrics::DEFAULT_METRIC_INTERVAL;
use crate::yaml::node::Node;

/// What a measurement needs besides the metric.
pub struct MeasureInput<'a> {
    /// HTTP clients, the operator's Prometheus credentials and where they may go, Secrets.
    pub access: &'a PrometheusAccess,
    /// The repo's `prometheus.address`, for a prometheus metric without `address`.
    pub default_address: Option<&'a str>,
    /// The Rollout's namespace: where `valueFrom.secretKeyRef` Secrets are read.
    pub namespace: &'a str,
}

/// Takes one measurement of `metric` (one of `run.metrics`) and judges it.
pub async fn measure(
    run: &AnalysisRun,
    metric: &AnalysisMetric,
    input: &MeasureInput<'_>,
) -> Measurement {
    argo_analysis::measure(&metric.rules, &answer(run, metric, input).await)
}

/// What the provider answered for `metric`, as the observation the core judges (and the
/// replay record keeps): the core shapes it back into Argo's `result`
/// ([`argo_analysis::answer`]) and judges it with [`argo_analysis::measure`], so a loop's
/// measurement and [`measure`]'s are the same.
pub async fn observe(
    run: &AnalysisRun,
    metric: &AnalysisMetric,
    input: &MeasureInput<'_>,
) -> MetricValue {
    match answer(run, metric, input).await {
        Answer::Error(e) => MetricValue::Error(e),
        Answer::Value(Value::Number(n)) => MetricValue::Value(n),
        // Argo's web result is whatever JSON its path selects: kept as it is.
        Answer::Value(v @ (Value::Str(_) | Value::Bool(_) | Value::Map(_) | Value::List(_)))
            if matches!(metric.source, MetricSource::Web(_)) =>
        {
            MetricValue::Structured(v)
        }
        Answer::Value(Value::Nil) => MetricValue::NoData,
        Answer::Value(Value::List(items)) => match items.as_slice() {
            [] => MetricValue::NoData,
            [Value::Number(n)] => MetricValue::Value(*n),
            _ => MetricValue::Error(format!(
                "metric {}: expected one value, found {}",
                metric.name,
                Value::List(items.clone())
            )),
        },
        Answer::Value(other) => MetricValue::Error(format!(
            "metric {}: expected a number, found {other}",
            metric.name
        )),
    }
}

async fn answer(run: &AnalysisRun, metric: &AnalysisMetric, input: &MeasureInput<'_>) -> Answer {
    match secret_values(run, input) {
        Ok(secrets) => query(metric, &secrets, input).await,
        Err(e) => Answer::Error(format!(
            "metric {} ({}:{}): {e}",
            metric.name, metric.file, metric.line
        )),
    }
}

/// The values of the run's Secret-valued arguments, read through sluice's Secrets.
fn secret_values(
    run: &AnalysisRun,
    input: &MeasureInput<'_>,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (arg, name, key) in &run.secret_args {
        let value = input
            .access
            .secrets()
            .require(input.namespace, name, key)
            .map_err(|e| format!("args.{arg}: valueFrom.secretKeyRef: {e}"))?;
        out.insert(arg.clone(), value);
    }
    Ok(out)
}

async fn query(
    metric: &AnalysisMetric,
    secrets: &BTreeMap<String, String>,
    input: &MeasureInput<'_>,
) -> Answer {
    let at = |e: String| {
        Answer::Error(format!(
            "metric {} ({}:{}): {e}",
            metric.name, metric.file, metric.line
        ))
    };
    let fill = |text: &str| substitute(text, secrets, &[]);
    match &metric.source {
        MetricSource::Prometheus {
            address,
            query,
            timeout,
            insecure,
            headers,
        } => {
            let Some(address) = address.as_deref().or(input.default_address) else {
                return at(crate::metrics::NO_ADDRESS.to_string());
            };
            let promql = match fill(query) {
                Ok(q) => q,
                Err(e) => return at(e),
            };
            let mut config = PrometheusConfig::new(address);
            if let Some(t) = timeout {
                config.timeout = *t;
            }
            config.insecure_skip_verify = *insecure;
            config.headers = headers.clone();
            config.auth = match input.access.auth_for(address) {
                Ok(a) => a,
                Err(e) => return at(format!("Prometheus credentials: {e}")),
            };
            let client = input.access.http().get(*insecure).clone();
            let client = match Prometheus::with_client(client, &config) {
                Ok(c) => c,
                Err(e) => return at(e.to_string()),
            };
            match client.query(&promql).await {
                MetricValue::Value(v) => Answer::Value(Value::List(vec![Value::Number(v)])),
                MetricValue::NoData => Answer::Value(Value::List(Vec::new())),
                MetricValue::Error(e) => at(e),
                MetricValue::Structured(v) => Answer::Value(v),
            }
        }
        MetricSource::Graphite { address, query } => {
            let text = match fill(query) {
                Ok(q) => q,
                Err(e) => return at(e),
            };
            let provider = MetricProvider::Graphite(crate::metrics::graphite::Config {
                address: address.clone(),
                secret_ref: None,
                insecure_skip_verify: false,
            });
            let client_input = ClientInput {
                namespace: input.namespace,
                place: format!("metric {} ({}:{})", metric.name, metric.file, metric.line),
                interval: metric.interval.unwrap_or(DEFAULT_METRIC_INTERVAL),
                secrets: input.access.secrets(),
                aws: input.access.cloudwatch(),
            };
            let vendor = match provider.client(&client_input) {
                Some(Ok(v)) => v,
                Some(Err(e)) => return Answer::Error(e),
                None => return at("graphite has no client".into()),
            };
            let ask = Ask {
                http: input.access.http().get(vendor.insecure_skip_verify),
                query: &text,
            };
            match vendor.client.instant(ask, input.access.unix_now()).await {
                MetricValue::Value(v) => Answer::Value(Value::Number(v)),
                MetricValue::NoData => Answer::Value(Value::Nil),
                MetricValue::Error(e) => at(e),
                MetricValue::Structured(v) => Answer::Value(v),
            }
        }
        MetricSource::Job { .. } => at(
            "a job metric is measured by the Job sluice commits, read back from the cluster".into(),
        ),
        MetricSource::Datadog {
            query,
            interval,
            secret,
            timeout,
        } => match datadog(query, *interval, secret, *timeout, &fill, input).await {
            Ok(answer) => answer,
            Err(e) => at(e),
        },
        MetricSource::Web(request) => {
            let client = input.access.http().get(request.insecure);
            match crate::metrics::web::fetch(client, request, &fill).await {
                Ok(v) => Answer::Value(v),
                Err(e) => at(e),
            }
        }
    }
}

/// A Datadog v1 measurement as Argo's datadog provider takes it: `query` from `interval` ago
/// to now, the result the last point of the first series (`nil` with no series or points),
/// with the address and keys of the Secret `secret` (`address`, `api-key`, `app-key`).
async fn datadog(
    query: &str,
    interval: std::time::Duration,
    secret: &str,
    timeout: std::time::Duration,
    fill: &dyn Fn(&str) -> Result<String, String>,
    input: &MeasureInput<'_>,
) -> Result<Answer, String> {
    use crate::metrics::datadog::{Datadog, DEFAULT_ADDRESS};
    let secrets = input.access.secrets();
    let key = |key: &str| {
        secrets
            .get(input.namespace, secret, key)
            .map_err(|e| format!("Datadog credentials: {e}"))
    };
    let address = key("address")?.unwrap_or_else(|| DEFAULT_ADDRESS.to_string());
    let (Some(api_key), Some(app_key)) = (key("api-key")?, key("app-key")?) else {
        return Err(format!("Datadog credentials: map the keys api-key and app-key of the Secret {}/{secret} into sluice (as Argo reads them)", input.namespace));
    };
    let mut client = Datadog::new(&address, api_key, app_key, interval)?;
    client.timeout = timeout;
    let query = fill(query)?;
    let now = input.access.unix_now().as_secs();
    let window = (now.saturating_sub(interval.as_secs()), now);
    let points = client
        .series(input.access.http().get(false), &query, window)
        .await?;
    Ok(points.last().map_or(Answer::Value(Value::Nil), |v| {
        Answer::Value(Value::Number(*v))
    }))
}

/// Which workload `valueFrom.podTemplateHashValue` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodTemplateHash {
    Stable,
    Latest,
}

impl PodTemplateHash {
    /// `Stable` or `Latest`, as Argo spells them.
    pub fn parse(text: &str) -> Result<PodTemplateHash, String> {
        match text {
            "Stable" => Ok(PodTemplateHash::Stable),
            "Latest" => Ok(PodTemplateHash::Latest),
            other => Err(format!("expected Stable or Latest, found {other:?}")),
        }
    }
}

/// The value of `valueFrom.podTemplateHashValue`: the label value sluice gives the stable
/// workload, or the canary's (`Latest`), which the caller (the Rollout's renderer) knows.
pub fn pod_template_hash_arg<'a>(
    which: PodTemplateHash,
    stable: &'a str,
    latest: &'a str,
) -> &'a str {
    match which {
        PodTemplateHash::Stable => stable,
        PodTemplateHash::Latest => latest,
    }
}

/// The value of `valueFrom.fieldRef.fieldPath` read from the Rollout document `rollout`, for
/// the fields git holds: `metadata.name`, `metadata.namespace`, `metadata.labels['k']`,
/// `metadata.annotations['k']`, and any scalar under `spec` (`spec.replicas`). A `status`
/// field, which only the cluster knows, is refused.
pub fn field_ref_arg(rollout: &Node, field_path: &str) -> Result<String, String> {
    if field_path.starts_with("status") {
        return Err(format!(
            "fieldRef {field_path:?}: status fields are set by the cluster, and sluice reads only git"
        ));
    }
    let mut node = rollout;
    let mut rest = field_path;
    while !rest.is_empty() {
        let (key, after) = match rest.find(['.', '[']) {
            Some(0) if rest.starts_with('[') => {
                let close = rest
                    .find(']')
                    .ok_or_else(|| format!("fieldRef {field_path:?}: unclosed ["))?;
                let key = rest[1..close].trim_matches(|c| c == '\'' || c == '"');
                (key, &rest[close + 1..])
            }
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let key = key.trim_start_matches('.');
        if !key.is_empty() {
            node = node.get(key).ok_or_else(|| {
                format!("fieldRef {field_path:?}: the Rollout has no {key:?} there")
            })?;
        }
        rest = after.strip_prefix('.').unwrap_or(after);
    }
    node.as_str().map(str::to_string).ok_or_else(|| {
        format!(
            "fieldRef {field_path:?}: expected a scalar, found {}",
            node.kind()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rollout() -> Node {
        let text = "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata:\n  name: api\n  namespace: prod\n  labels:\n    app.kubernetes.io/name: api\nspec:\n  replicas: 3\n";
        crate::yaml::node::parse_documents(text)
            .unwrap()
            .remove(0)
            .root
    }

    #[test]
    fn field_refs_git_holds_resolve_and_status_is_refused() {
        let r = rollout();
        assert_eq!(field_ref_arg(&r, "metadata.name").unwrap(), "api");
        assert_eq!(field_ref_arg(&r, "metadata.namespace").unwrap(), "prod");
        assert_eq!(
            field_ref_arg(&r, "metadata.labels['app.kubernetes.io/name']").unwrap(),
            "api"
        );
        assert_eq!(field_ref_arg(&r, "spec.replicas").unwrap(), "3");
        assert!(field_ref_arg(&r, "status.stableRS")
            .unwrap_err()
            .contains("set by the cluster"));
        assert!(field_ref_arg(&r, "metadata.labels['missing']").is_err());
        assert!(field_ref_arg(&r, "metadata")
            .unwrap_err()
            .contains("expected a scalar"));
    }

    #[test]
    fn pod_template_hash_picks_the_workload() {
        assert_eq!(
            pod_template_hash_arg(PodTemplateHash::parse("Stable").unwrap(), "s", "l"),
            "s"
        );
        assert_eq!(
            pod_template_hash_arg(PodTemplateHash::parse("Latest").unwrap(), "s", "l"),
            "l"
        );
        assert!(PodTemplateHash::parse("Canary").is_err());
    }
}
