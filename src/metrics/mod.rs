//! Metric adapters: turn a canary's metric specs into [`MetricObservation`]s by querying
//! Prometheus or, for a MetricTemplate, the provider it names. The core judges the values
//! against the thresholds; nothing here decides.
//!
//! Each metric is one of: a built-in (`builtin.rs`, PromQL chosen by the canary's provider), a
//! Flagger MetricTemplate (`metric_templates.rs`), or inline PromQL; `query_render.rs` fills in
//! the query text. A template's [`metric_templates::MetricProvider`] picks the client, one module per
//! provider behind the [`provider::MetricBackend`] trait and one line in `registry.rs`, each
//! making the request Flagger's provider makes: `prometheus.rs`, `datadog.rs`, `newrelic.rs`,
//! `dynatrace.rs`, `influxdb.rs`, `graphite.rs`, `splunk.rs`, `cloudwatch.rs` (all but
//! Prometheus share `vendor_http.rs`). Their credentials are read, when the metric is
//! planned, from the Secret the template's `secretRef` names, in the template's namespace,
//! through [`crate::secrets::Secrets`] (never from git); CloudWatch's, as Flagger's, from the
//! AWS environment variables sluice started with ([`cloudwatch::CloudwatchEnv`]).
//!
//! The statistical judge's range queries (both workloads' series over its window) are
//! `judge_series.rs`.
//!
//! Queries run concurrently; each endpoint (Prometheus or vendor API) has one pooled client
//! and at most `concurrency` queries in flight across every canary of the process
//! (`prometheus.concurrency` in `.sluice/config.yaml`, default
//! [`crate::manifest::settings::DEFAULT_PROMETHEUS_CONCURRENCY`]), and a tick opens about that
//! many connections to it (see [`crate::http_client`]).
//! Every problem (no address, unknown provider, missing template, render error, missing
//! Secret, failed query, timeout) becomes that metric's `MetricValue::Error`, and an answer
//! without a value is `MetricValue::NoData`, so one bad metric never hides the others and
//! never passes.
//!
//! The Prometheus address is, in order: the template's `spec.provider.address`, the canary's
//! `spec.metricsServer`, the repo default (`prometheus.address` in `.sluice/config.yaml`).
//! A vendor's address is the template's, or Flagger's default for datadog and newrelic.

pub mod addresses;
pub mod analysis_run;
pub mod analysis_templates;
pub mod aws_env;
pub mod builtin;
pub mod cloudwatch;
pub mod datadog;
pub mod dynatrace;
pub mod graphite;
pub mod influxdb;
pub mod judge_builtin;
pub mod judge_series;
pub mod metric_templates;
pub mod newrelic;
pub mod prometheus;
pub mod provider;
pub mod query_render;
pub mod registry;
pub mod splunk;
pub mod vendor_http;
pub mod web;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::core::model::{MetricQuery, MetricSpec, Target};
use crate::core::observe::{MetricObservation, MetricValue};
use crate::metrics::metric_templates::{MetricProvider, MetricTemplate, TemplateIndex};
use crate::metrics::prometheus::{Prometheus, PrometheusAccess, PrometheusConfig};
use crate::metrics::provider::{Ask, ClientInput, Vendor, Window};
use crate::metrics::query_render::{render, QueryModel};
use crate::route::Canary;
use crate::secrets::Secrets;

/// Flagger's window for metrics without `interval` (`GetMetricInterval`: 1m). It is not the
/// analysis interval: a short analysis interval (10 s) would make `rate()` windows shorter
/// than two scrapes, and every query would return no data.
pub const DEFAULT_METRIC_INTERVAL: Duration = Duration::from_secs(60);

/// The error every metric gets when no address is configured anywhere.
pub const NO_ADDRESS: &str =
    "no Prometheus address: set prometheus.address in .sluice/config.yaml or spec.metricsServer";

/// A duration as a PromQL range (`1m`, `90s`, `1h`, `500ms`).
pub fn promql_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let s = ms / 1000;
    if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// The name Flagger's `{{ target }}` stands for, when the canary itself says it: the
/// `targetRef` name. For a native `source` canary it is the source Deployment's name (read by
/// the workload module); for a route-only canary, the canary-side workload's name.
pub fn target_name(canary: &Canary) -> Option<&str> {
    match &canary.target {
        Target::TargetRef { name, .. } | Target::Rollout { name, .. } => Some(name.as_str()),
        Target::Source { .. } | Target::RouteOnly { .. } => None,
    }
}

/// The values one metric's query is rendered with, as Flagger's `toMetricModel` builds them.
/// `ingress` is the Ingress `spec.ingressRef` names (for the Ingress routers), else the
/// target's name, as Flagger sets it; `route` is the `routeRef` name when the canary's router
/// reads one, else the target's name.
pub fn query_model(
    canary: &Canary,
    target: &str,
    interval: Duration,
    variables: &BTreeMap<String, String>,
) -> QueryModel {
    QueryModel {
        name: canary.base_name().to_string(),
        namespace: canary.id.namespace.to_string(),
        target: target.to_string(),
        service: canary.service.name.to_string(),
        ingress: crate::route::ingress::ingress_name(&canary.route)
            .unwrap_or(target)
            .to_string(),
        route: canary.route.route_ref().unwrap_or(target).to_string(),
        interval: promql_duration(interval),
        variables: variables.clone(),
    }
}

/// What to run for one metric, decided before any IO.
#[derive(Debug)]
enum Job {
    Query {
        config: PrometheusConfig,
        promql: String,
        builtin: Option<builtin::BuiltinQuery>,
    },
    /// A MetricTemplate of a provider other than Prometheus, credentials read.
    Vendor {
        vendor: Vendor,
        query: String,
    },
    Failed(String),
}

/// The statistical judge's series of the MetricTemplate `namespace`/`name` for one
/// `workload` (its `{{ target }}`): the template planned as a threshold metric's is (address,
/// credentials, headers), then run by its provider as a range query over `start..end`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn template_series(
    access: &PrometheusAccess,
    canary: &Canary,
    (namespace, name): (&str, &str),
    workload: &str,
    templates: &TemplateIndex,
    default_address: Option<&str>,
    concurrency: usize,
    (start, end, step): (jiff::Timestamp, jiff::Timestamp, Duration),
) -> Result<Vec<f64>, String> {
    let reference = MetricSpec {
        name: name.to_string(),
        query: MetricQuery::Template {
            name: crate::core::model::Name::parse(name)?,
            namespace: crate::core::model::Name::parse(namespace)?,
            variables: BTreeMap::new(),
        },
        interval: None,
        range: Default::default(),
    };
    let job = plan(
        canary,
        &reference,
        workload,
        templates,
        default_address,
        DEFAULT_METRIC_INTERVAL,
        access,
    );
    let unix = |t: jiff::Timestamp| u64::try_from(t.as_second()).unwrap_or(0);
    match job {
        Job::Failed(e) => Err(e),
        Job::Vendor { vendor, query } => {
            let endpoint =
                access
                    .endpoints()
                    .get(&vendor.url, vendor.insecure_skip_verify, concurrency)?;
            let _slot = endpoint.slot().await;
            let ask = Ask {
                http: endpoint.client(),
                query: &query,
            };
            let window = Window {
                span: (unix(start), unix(end)),
                step,
            };
            vendor.client.range(ask, window).await
        }
        Job::Query { config, promql, .. } => {
            let client = access.http().get(config.insecure_skip_verify).clone();
            let client = Prometheus::with_client(client, &config).map_err(|e| e.to_string())?;
            let endpoint =
                access
                    .endpoints()
                    .get(client.url(), config.insecure_skip_verify, concurrency)?;
            let client = client.on(endpoint.client().clone());
            let _slot = endpoint.slot().await;
            client.query_range(&promql, start, end, step).await
        }
    }
}

/// The client for a non-Prometheus template (its provider's [`MetricBackend::client`],
/// credentials read from the Secret its `secretRef` names, in the template's namespace, with
/// Flagger's key names). `None` for a Prometheus template.
///
/// [`MetricBackend::client`]: provider::MetricBackend::client
fn vendor(
    t: &MetricTemplate,
    interval: Duration,
    access: &PrometheusAccess,
) -> Option<Result<Vendor, String>> {
    let input = ClientInput {
        namespace: t.namespace.as_str(),
        place: format!("metric template {t} ({}:{})", t.file, t.line),
        interval,
        secrets: access.secrets(),
        aws: access.cloudwatch(),
    };
    t.provider.client(&input)
}

/// A Prometheus template's provider fields: its query goes to Prometheus with the canary's
/// others. `None` for another provider's template.
fn prometheus_template(t: &MetricTemplate) -> Option<&prometheus::Config> {
    match &t.provider {
        MetricProvider::Prometheus(config) => Some(config),
        _ => None,
    }
}

/// Queries every metric of `canary` through `access` (pooled clients and credentials, built
/// once). `target` is the Deployment Flagger's queries call
/// `{{ target }}` (see [`target_name`]); `default_address` is the repo's Prometheus;
/// `default_interval` is the window of metrics without `interval` (pass
/// [`DEFAULT_METRIC_INTERVAL`] for Flagger's behaviour); `concurrency` bounds the queries in
/// flight to each Prometheus endpoint, across every caller sharing `access`. Returns one
/// observation per metric, in the canary's order.
pub async fn observe_metrics(
    access: &PrometheusAccess,
    canary: &Canary,
    target: &str,
    templates: &TemplateIndex,
    default_address: Option<&str>,
    default_interval: Duration,
    concurrency: usize,
) -> Vec<MetricObservation> {
    let queries = start_metrics(
        access,
        canary,
        target,
        templates,
        default_address,
        default_interval,
        concurrency,
    );
    finished(queries.await, metric_names(canary))
}

/// A canary's metric queries under way ([`start_metrics`]); awaiting it gives the observations
/// in the canary's order.
pub type InFlight = tokio::task::JoinHandle<Vec<MetricObservation>>;

/// Starts every metric query of `canary` (as [`observe_metrics`]) on the current tokio runtime
/// and returns at once: the caller may await the answers, or keep them for later while each
/// query runs to its own provider's timeout. Must be called within a tokio runtime.
#[tracing::instrument(skip_all, fields(canary = %canary.id))]
pub fn start_metrics(
    access: &PrometheusAccess,
    canary: &Canary,
    target: &str,
    templates: &TemplateIndex,
    default_address: Option<&str>,
    default_interval: Duration,
    concurrency: usize,
) -> InFlight {
    let jobs: Vec<(String, Job)> = canary
        .analysis
        .metrics
        .iter()
        .map(|m| {
            let job = plan(
                canary,
                m,
                target,
                templates,
                default_address,
                default_interval,
                access,
            );
            (m.name.clone(), job)
        })
        .collect();
    let queries = spawn(access, jobs, concurrency);
    tokio::spawn(collect(queries))
}

/// The names of `canary`'s metrics, in its order.
pub fn metric_names(canary: &Canary) -> Vec<String> {
    canary
        .analysis
        .metrics
        .iter()
        .map(|m| m.name.clone())
        .collect()
}

/// The observations of a finished [`InFlight`], or, when its task failed, that failure for
/// each metric of `names`.
pub fn finished(
    joined: Result<Vec<MetricObservation>, tokio::task::JoinError>,
    names: Vec<String>,
) -> Vec<MetricObservation> {
    joined.unwrap_or_else(|e| {
        names
            .into_iter()
            .map(|name| MetricObservation {
                name,
                value: MetricValue::Error(format!("query task failed: {e}")),
            })
            .collect()
    })
}

fn plan(
    canary: &Canary,
    metric: &MetricSpec,
    target: &str,
    templates: &TemplateIndex,
    default_address: Option<&str>,
    default_interval: Duration,
    access: &PrometheusAccess,
) -> Job {
    let interval = metric.interval.unwrap_or(default_interval);
    let no_variables = BTreeMap::new();
    let canary_address = canary.metrics_server.as_deref().or(default_address);
    // The last item: whether the query goes to the canary's (or its wave's) own address.
    let (text, address, template, builtin, to_canary) = match &metric.query {
        MetricQuery::Builtin(b) => {
            let queries = match builtin::query_set(canary.provider.as_deref(), *b) {
                Ok(q) => q,
                Err(e) => return Job::Failed(e.to_string()),
            };
            let model = query_model(canary, target, interval, &no_variables);
            match builtin::query(&queries, *b, &model) {
                Ok(q) => (q.promql.clone(), canary_address, None, Some(q), true),
                Err(e) => return Job::Failed(format!("rendering the {queries} query failed: {e}")),
            }
        }
        MetricQuery::Template {
            name,
            namespace,
            variables,
        } => {
            let t = match templates.get(namespace.as_str(), name.as_str()) {
                Ok(t) => t,
                Err(e) => return Job::Failed(e.to_string()),
            };
            let model = query_model(canary, target, interval, variables);
            let text = match render(&t.query, &model) {
                Ok(q) => q,
                Err(e) => {
                    return Job::Failed(format!(
                        "metric template {t} ({}:{}): spec.query: {e}",
                        t.file, t.line
                    ))
                }
            };
            match vendor(t, interval, access) {
                Some(Ok(vendor)) => {
                    return Job::Vendor {
                        vendor,
                        query: text,
                    }
                }
                Some(Err(e)) => return Job::Failed(e),
                None => {}
            }
            let address = prometheus_template(t).and_then(|p| p.address.as_deref());
            let own = address.is_some();
            (text, address.or(canary_address), Some(t), None, !own)
        }
        MetricQuery::Query(q) => {
            let model = query_model(canary, target, interval, &no_variables);
            match render(q, &model) {
                Ok(q) => (q, canary_address, None, None, true),
                Err(e) => return Job::Failed(format!("query: {e}")),
            }
        }
    };
    let Some(address) = address else {
        return Job::Failed(NO_ADDRESS.into());
    };
    // The template's `secretRef`, else the wave's `metricsSecretRef`, else the operator's
    // credentials (only where the operator allows them to go).
    let mut auth = None;
    if to_canary && canary.metrics_server.is_some() {
        match wave_auth(canary, access.secrets()) {
            Some(Ok(a)) => auth = Some(a),
            Some(Err(e)) => return Job::Failed(e),
            None => {}
        }
    }
    let mut config = PrometheusConfig::new(address);
    if let Some((t, p)) = template.and_then(|t| Some((t, prometheus_template(t)?))) {
        if let Some(secret) = &p.secret_ref {
            match prometheus_secret(t, secret, access.secrets()) {
                Ok(a) => auth = Some(a),
                Err(e) => return Job::Failed(e),
            }
        }
        config.headers = p.headers.clone();
        config.insecure_skip_verify = p.insecure_skip_verify;
    }
    config.auth = match auth {
        Some(a) => a,
        None => match access.auth_for(address) {
            Ok(a) => a,
            Err(e) => return Job::Failed(format!("Prometheus credentials: {e}")),
        },
    };
    Job::Query {
        config,
        promql: text,
        builtin,
    }
}

/// The credentials of a Prometheus template's `secretRef`, as Flagger reads them: key `token`
/// (a bearer token) if the Secret has it, else keys `username` and `password` (basic auth).
fn prometheus_secret(
    t: &MetricTemplate,
    secret: &str,
    secrets: &Secrets,
) -> Result<prometheus::Auth, String> {
    let at = format!(
        "metric template {t} ({}:{}): spec.provider.secretRef",
        t.file, t.line
    );
    secret_auth(&at, t.namespace.as_str(), secret, secrets)
}

/// The credentials of a wave's `metricsServer`, from its `metricsSecretRef` (in the canary's
/// namespace, the keys a Prometheus template's Secret has); `None` without one.
pub(crate) fn wave_auth<R>(
    canary: &crate::core::model::Canary<R>,
    secrets: &Secrets,
) -> Option<Result<prometheus::Auth, String>> {
    let wave = canary.wave.as_ref()?;
    let secret = wave.metrics_secret.as_ref()?;
    let at = format!(
        "wave {} of {} ({}:{}): {}.metricsSecretRef",
        wave.name, canary.id, wave.file, wave.line, wave.field
    );
    Some(secret_auth(
        &at,
        canary.id.namespace.as_str(),
        secret.as_str(),
        secrets,
    ))
}

/// Key `token` (bearer) of Secret `ns/secret`, else keys `username` and `password` (basic);
/// errors start with `at`, the field that names the Secret.
fn secret_auth(
    at: &str,
    ns: &str,
    secret: &str,
    secrets: &Secrets,
) -> Result<prometheus::Auth, String> {
    let failed = |e: crate::secrets::SecretError| format!("{at}: {e}");
    if let Some(token) = secrets.get(ns, secret, "token").map_err(failed)? {
        return Ok(prometheus::Auth::Bearer(token));
    }
    let username = secrets
        .require(ns, secret, "username")
        .map_err(|e| format!("{} (or map key \"token\" for a bearer token)", failed(e)))?;
    let password = secrets.require(ns, secret, "password").map_err(failed)?;
    crate::redact::remember_basic(&username, &password);
    Ok(prometheus::Auth::Basic { username, password })
}

/// One metric's query: its task, or the value it failed with before any IO.
type Query = (
    String,
    Result<tokio::task::JoinHandle<MetricValue>, MetricValue>,
);

/// Spawns one task per job on the current runtime.
fn spawn(access: &PrometheusAccess, jobs: Vec<(String, Job)>, concurrency: usize) -> Vec<Query> {
    let mut handles = Vec::with_capacity(jobs.len());
    for (name, job) in jobs {
        let (config, promql, builtin) = match job {
            Job::Failed(e) => {
                handles.push((name, Err(MetricValue::Error(e))));
                continue;
            }
            Job::Vendor { vendor, query } => {
                let endpoint = match access.endpoints().get(
                    &vendor.url,
                    vendor.insecure_skip_verify,
                    concurrency,
                ) {
                    Ok(e) => e,
                    Err(e) => {
                        handles.push((name, Err(MetricValue::Error(e))));
                        continue;
                    }
                };
                let now = access.unix_now();
                let handle = tokio::spawn(async move {
                    // Held until the body is read: the connection is back in the pool by then.
                    let _slot = endpoint.slot().await;
                    let ask = Ask {
                        http: endpoint.client(),
                        query: &query,
                    };
                    vendor.client.instant(ask, now).await
                });
                handles.push((name, Ok(handle)));
                continue;
            }
            Job::Query {
                config,
                promql,
                builtin,
            } => (config, promql, builtin),
        };
        let client = access.http().get(config.insecure_skip_verify).clone();
        let pooled = Prometheus::with_client(client, &config)
            .map_err(|e| e.to_string())
            .and_then(|c| {
                let endpoint =
                    access
                        .endpoints()
                        .get(c.url(), config.insecure_skip_verify, concurrency)?;
                Ok((c.on(endpoint.client().clone()), endpoint))
            });
        let (client, endpoint) = match pooled {
            Ok(c) => c,
            Err(e) => {
                handles.push((name, Err(MetricValue::Error(e))));
                continue;
            }
        };
        let handle = tokio::spawn(async move {
            // Held until the body is read: the connection is back in the pool by then.
            let _slot = endpoint.slot().await;
            let value = client.query(&promql).await;
            match builtin {
                Some(b) => b.finish(value),
                None => value,
            }
        });
        handles.push((name, Ok(handle)));
    }
    handles
}

/// Waits for every query, in order.
async fn collect(handles: Vec<Query>) -> Vec<MetricObservation> {
    let mut out = Vec::with_capacity(handles.len());
    for (name, handle) in handles {
        let value = match handle {
            Err(value) => value,
            Ok(h) => h
                .await
                .unwrap_or_else(|e| MetricValue::Error(format!("query task failed: {e}"))),
        };
        out.push(MetricObservation { name, value });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promql_durations_use_the_largest_whole_unit() {
        let cases = [
            (Duration::from_secs(60), "1m"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(30), "30s"),
            (Duration::from_secs(7200), "2h"),
            (Duration::from_secs(120), "2m"),
            (Duration::from_millis(1500), "1500ms"),
            (Duration::ZERO, "0s"),
        ];
        for (d, text) in cases {
            assert_eq!(promql_duration(d), text, "{d:?}");
        }
    }
}
