//! Which canaries' metrics have no Prometheus to ask: `sluice validate`'s check of what the
//! loop will need at the first analysis, so a canary that can only roll back ("no Prometheus
//! address") is refused before it is committed.
//!
//! A metric asks Prometheus when it is a built-in metric (`request-success-rate`,
//! `request-duration`), an inline query (native) or a MetricTemplate of type `prometheus`. Its
//! address is, as [`crate::metrics`] resolves it at query time: the template's
//! `spec.provider.address`, else the canary's `spec.metricsServer` (or its wave's), else the
//! repo's `prometheus.address`. Templates of other providers carry their own address and are
//! checked where they are read. Pure: reads the snapshot and the index it is given.

use crate::core::model::{Canary, MetricQuery, MetricSpec};
use crate::metrics::metric_templates::{MetricProvider, TemplateIndex};
use crate::yaml::error::SpecError;
use crate::yaml::snapshot::Snapshot;

/// One error per metric that would ask Prometheus with no address set anywhere, at the
/// metric's line (the canary's when the metric is not in the canary's document, e.g. a
/// wave's). `default_address` is the repo's `prometheus.address`.
pub fn unaddressed<R>(
    canaries: &[Canary<R>],
    default_address: Option<&str>,
    templates: &TemplateIndex,
    snapshot: &Snapshot,
) -> Vec<SpecError> {
    let mut errors: Vec<SpecError> = Vec::new();
    if default_address.is_some() {
        return errors;
    }
    for canary in canaries {
        if canary.metrics_server.is_some() {
            continue;
        }
        for (i, metric) in canary.analysis.metrics.iter().enumerate() {
            let Some(what) = asks_prometheus(metric, templates) else {
                continue;
            };
            let (line, field) = metric_line(canary, i, metric, snapshot);
            let e = SpecError {
                file: canary.file.clone(),
                line,
                field,
                message: format!(
                    "{what} asks Prometheus, and no address is set: add `prometheus: {{address: http://...}}` to .sluice/config.yaml (or spec.metricsServer on this canary{}); validate --offline skips this check",
                    if matches!(metric.query, MetricQuery::Template { .. }) {
                        ", or spec.provider.address on the template"
                    } else {
                        ""
                    }
                ),
            };
            // A canary with waves is one instance per wave, read from one document.
            if !errors.contains(&e) {
                errors.push(e);
            }
        }
    }
    errors
}

/// What asks Prometheus with no address of its own, for the message; `None` when the metric
/// does not ask Prometheus or names its own address.
fn asks_prometheus(metric: &MetricSpec, templates: &TemplateIndex) -> Option<String> {
    match &metric.query {
        MetricQuery::Builtin(_) => Some(format!("built-in metric {}", metric.name)),
        MetricQuery::Query(_) => Some(format!("metric {} (an inline PromQL query)", metric.name)),
        MetricQuery::Template {
            name, namespace, ..
        } => match templates.get(namespace.as_str(), name.as_str()) {
            Ok(t) => match &t.provider {
                MetricProvider::Prometheus(config) if config.address.is_none() => Some(format!(
                    "metric {} (MetricTemplate {namespace}/{name}, {}:{}, type prometheus with no spec.provider.address)",
                    metric.name, t.file, t.line
                )),
                _ => None,
            },
            // An unusable reference is reported where references are resolved.
            Err(_) => None,
        },
    }
}

/// The line and field of metric `i` in the canary's own document: `spec.analysis.metrics[i]`
/// when it is there, else the canary's first line.
fn metric_line<R>(
    canary: &Canary<R>,
    i: usize,
    metric: &MetricSpec,
    snapshot: &Snapshot,
) -> (usize, String) {
    let field = format!("spec.analysis.metrics[{i}]");
    let item = snapshot.file(&canary.file).and_then(|file| {
        snapshot
            .objects_in(file)
            .find(|o| o.line == canary.line)
            .and_then(|o| o.node.get("spec")?.get("analysis")?.get("metrics"))
            .and_then(|metrics| match &metrics.value {
                crate::yaml::node::Value::Seq(items) => items.get(i),
                _ => None,
            })
            .filter(|item| item.get("name").and_then(|n| n.as_str()) == Some(&metric.name))
    });
    match item {
        Some(item) => (item.line, field),
        None => (canary.line, "spec.analysis.metrics".into()),
    }
}
