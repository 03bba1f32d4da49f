//! The judge a canary runs under: a native canary's `analysis.judge`, or the `Judge` object a
//! Flagger canary's `sluice.dev/judge: <name>` annotation names (in the canary's namespace), so
//! a Flagger spec opts in without a field Flagger would refuse. Both read with
//! [`crate::judge::config`]; what the loop needs beyond `sluice judge` (a query per metric, a
//! provider with built-in judge metrics for a `builtin`, a MetricTemplate whose provider
//! answers with a series for a `templateRef`) is checked here. Every problem is an error at
//! its file, line and field.

use sluice_core::judge::JudgeSpec;

use crate::judge::config::{read_object, read_spec, API_VERSION, BUILTINS, KIND};
use crate::metrics::judge_builtin::judge_queries;
use crate::metrics::judge_series::{range_providers, refusal};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, Reader};
use crate::yaml::snapshot::Snapshot;

/// The annotation a Flagger canary names its `Judge` with.
pub const ANNOTATION: &str = "sluice.dev/judge";

/// A native canary's `analysis.judge` (`path` is the analysis block's): `Some(None)` without
/// one, `None` when it has errors (reported).
pub fn read_native(r: &mut Reader, analysis: &Node, path: &str) -> Option<Option<JudgeSpec>> {
    let Some(node) = analysis.get("judge") else {
        return Some(None);
    };
    let path = join(path, "judge");
    let before = r.errors.len();
    let spec = read_spec(r, node, &path);
    // Checked on the YAML, so a query is asked for even when other fields have errors.
    if let Some(Value::Seq(items)) = node.get("metrics").map(|m| &m.value) {
        for (i, item) in items.iter().enumerate() {
            let has_source = ["query", "builtin", "templateRef"]
                .iter()
                .any(|k| item.get(k).is_some());
            if matches!(item.value, Value::Map(_)) && !has_source {
                let at = join(&index(&join(&path, "metrics"), i), "query");
                r.error(item.line, &at, NO_QUERY);
            }
        }
    }
    let spec = spec?;
    (r.errors.len() == before).then_some(Some(spec))
}

const NO_QUERY: &str =
    "expected a query template, a builtin or a templateRef: the loop runs it for the canary and the primary";

/// A Flagger canary's `sluice.dev/judge` annotation, resolved to the `Judge` of that name in
/// `namespace`: `Some(None)` without the annotation, `None` when it names no loadable Judge
/// (reported at the annotation; the Judge's own errors are `sluice validate`'s, by its file).
pub fn read_annotation(
    r: &mut Reader,
    root: &Node,
    namespace: &str,
    snapshot: &Snapshot,
) -> Option<Option<JudgeSpec>> {
    let Some(annotations) = root.get("metadata").and_then(|m| m.get("annotations")) else {
        return Some(None);
    };
    let Some(value) = annotations.get(ANNOTATION) else {
        return Some(None);
    };
    let field = format!("metadata.annotations.{ANNOTATION}");
    let name = r.string(value, &field)?;
    let found = snapshot.find(KIND, &name).find(|o| {
        o.api_version == Some(API_VERSION) && o.namespace.unwrap_or("default") == namespace
    });
    let Some(object) = found else {
        r.error(
            value.line,
            &field,
            format!("no {API_VERSION} Judge {name:?} in namespace {namespace:?} in the repo"),
        );
        return None;
    };
    let mut judge_reader = Reader::new(object.file);
    let spec = read_object(&mut judge_reader, object.node).map(|(_, spec)| spec);
    let at = format!("Judge {namespace}/{name} ({}:{})", object.file, object.line);
    let Some(spec) = spec else {
        r.error(
            value.line,
            &field,
            format!("{at} does not load (see its errors)"),
        );
        return None;
    };
    let missing: Vec<&str> = spec
        .metrics
        .iter()
        .filter(|m| m.query.is_none())
        .map(|m| m.name.as_str())
        .collect();
    if !missing.is_empty() {
        r.error(
            value.line,
            &field,
            format!("{at}: metrics {}: {NO_QUERY}", missing.join(", ")),
        );
        return None;
    }
    Some(Some(spec))
}

/// Checks each judged metric's source of a native canary's `spec.analysis.judge` against
/// what the canary can run: a `builtin` needs a provider with built-in judge metrics, a
/// `templateRef` a MetricTemplate in the repo whose provider answers with a series. Problems
/// are reported at the metric's field.
pub fn check_native_sources(
    r: &mut Reader,
    root: &Node,
    provider: Option<&str>,
    namespace: Option<&str>,
    snapshot: &Snapshot,
) {
    // Without an id the canary has errors already; its namespace is unknown.
    let Some(namespace) = namespace else {
        return;
    };
    let metrics = root
        .get("spec")
        .and_then(|s| s.get("analysis"))
        .and_then(|a| a.get("judge"))
        .and_then(|j| j.get("metrics"));
    if let Some(metrics) = metrics {
        let at = "spec.analysis.judge.metrics";
        check_metrics(r, metrics, at, (provider, namespace), snapshot, "");
    }
}

/// As [`check_native_sources`], for the `Judge` a Flagger canary's annotation names: its
/// problems are reported at the Judge's fields, in its file, naming the canary.
pub fn check_annotation_sources(
    r: &mut Reader,
    root: &Node,
    provider: Option<&str>,
    namespace: Option<&str>,
    snapshot: &Snapshot,
) {
    let Some(namespace) = namespace else {
        return;
    };
    let Some(name) = root
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(ANNOTATION))
        .and_then(|n| n.as_str())
    else {
        return;
    };
    let found = snapshot.find(KIND, name).find(|o| {
        o.api_version == Some(API_VERSION) && o.namespace.unwrap_or("default") == namespace
    });
    let Some(object) = found else {
        return;
    };
    let Some(metrics) = object.node.get("spec").and_then(|s| s.get("metrics")) else {
        return;
    };
    let canary_name = root
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(|n| n.as_str())
        .unwrap_or_default();
    let mut judge = Reader::new(object.file);
    let whose = format!(
        " (judging canary {namespace}/{canary_name}, {}:{})",
        r.file, root.line
    );
    let at = "spec.metrics";
    check_metrics(
        &mut judge,
        metrics,
        at,
        (provider, namespace),
        snapshot,
        &whose,
    );
    r.errors.extend(judge.errors);
}

fn check_metrics(
    r: &mut Reader,
    metrics: &Node,
    path: &str,
    (provider, namespace): (Option<&str>, &str),
    snapshot: &Snapshot,
    whose: &str,
) {
    let Value::Seq(items) = &metrics.value else {
        return;
    };
    for (i, item) in items.iter().enumerate() {
        let at = index(path, i);
        if let Some(node) = item.get("builtin") {
            let metric = node
                .as_str()
                .and_then(|text| BUILTINS.iter().find(|(name, _)| *name == text));
            if let Some((_, metric)) = metric {
                if let Err(e) = judge_queries(provider, *metric) {
                    r.error(node.line, &join(&at, "builtin"), format!("{e}{whose}"));
                }
            }
        }
        if let Some(node) = item.get("templateRef") {
            if let Some(name) = node.get("name").and_then(|n| n.as_str()) {
                let ns = node
                    .get("namespace")
                    .and_then(|n| n.as_str())
                    .unwrap_or(namespace);
                if let Err(e) = template_provider(snapshot, ns, name) {
                    r.error(node.line, &join(&at, "templateRef"), format!("{e}{whose}"));
                }
            }
        }
    }
}

/// The provider of the MetricTemplate `namespace`/`name` when the judge can query it for a
/// series; otherwise why not.
fn template_provider(snapshot: &Snapshot, namespace: &str, name: &str) -> Result<String, String> {
    let template = snapshot.find("MetricTemplate", name).find(|o| {
        o.api_version.is_some_and(|v| v.starts_with("flagger.app/"))
            && o.namespace.unwrap_or("default") == namespace
    });
    let Some(template) = template else {
        return Err(format!("no MetricTemplate {namespace}/{name} in the repo"));
    };
    let kind = template
        .node
        .get("spec")
        .and_then(|s| s.get("provider"))
        .and_then(|p| p.get("type"))
        .and_then(|t| t.as_str())
        .unwrap_or("prometheus");
    if range_providers().contains(&kind) {
        Ok(kind.to_string())
    } else {
        Err(format!(
            "MetricTemplate {namespace}/{name} ({}:{}): {}",
            template.file,
            template.line,
            refusal(kind)
        ))
    }
}
