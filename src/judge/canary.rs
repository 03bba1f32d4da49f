//! The judge a canary runs under: a native canary's `analysis.judge`, or the `Judge` object a
//! Flagger canary's `sluice.dev/judge: <name>` annotation names (in the canary's namespace), so
//! a Flagger spec opts in without a field Flagger would refuse. Both read with
//! [`crate::judge::config`]; what the loop needs beyond `sluice judge` (a query per metric) is
//! checked here. Every problem is an error at its file, line and field.

use sluice_core::judge::JudgeSpec;

use crate::judge::config::{read_object, read_spec, API_VERSION, KIND};
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
            if matches!(item.value, Value::Map(_)) && item.get("query").is_none() {
                let at = join(&index(&join(&path, "metrics"), i), "query");
                r.error(item.line, &at, NO_QUERY);
            }
        }
    }
    let spec = spec?;
    (r.errors.len() == before).then_some(Some(spec))
}

const NO_QUERY: &str =
    "expected a query template: the loop runs it for the canary and the primary (built-in judge metrics are not supported yet)";

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
