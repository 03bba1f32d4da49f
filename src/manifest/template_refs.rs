//! A metric's `templateRef` must name a MetricTemplate of the repo that sluice can query.
//!
//! Checked when specs load, by the tick and by `sluice validate` alike, so a canary whose
//! reference dangles, or names a broken template or one of a provider sluice cannot query, is
//! an error at the reference's line and never starts a rollout (Flagger would find out in the
//! middle of one). The templates themselves are read by `crate::metrics`, which uses this
//! module, so the caller reads them and passes the lookup in. This module does no IO.

use std::fmt::Display;

use crate::manifest::load::Loaded;
use crate::manifest::model::{Canary, MetricQuery};
use crate::yaml::error::SpecError;
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join};
use crate::yaml::snapshot::Snapshot;

/// Drops every canary of `loaded` with a `templateRef` that `template(namespace, name)`
/// refuses, with one error per such reference (`spec.analysis.metrics[i].templateRef`, at the
/// key's line). The namespace is already defaulted as Flagger does (the canary's, when the
/// reference names none). `snapshot` is the one the canaries were loaded from.
///
/// `template_errors` are the templates' own problems (file:line:field), reported with the
/// canaries' except those already there: both readers report a file that cannot be read or
/// parsed.
pub fn reject_unusable_templates<E: Display>(
    loaded: &mut Loaded,
    snapshot: &Snapshot,
    template_errors: Vec<SpecError>,
    template: impl Fn(&str, &str) -> Result<(), E>,
) {
    for e in template_errors {
        if !loaded.errors.contains(&e) {
            loaded.errors.push(e);
        }
    }
    let errors = &mut loaded.errors;
    loaded.canaries.retain(|canary| {
        let before = errors.len();
        for (i, metric) in canary.analysis.metrics.iter().enumerate() {
            let MetricQuery::Template {
                name, namespace, ..
            } = &metric.query
            else {
                continue;
            };
            if let Err(why) = template(namespace.as_str(), name.as_str()) {
                let (i, line) =
                    reference_at(snapshot, canary, &metric.name).unwrap_or((i, canary.line));
                errors.push(SpecError {
                    file: canary.file.clone(),
                    line,
                    field: join(&index("spec.analysis.metrics", i), "templateRef"),
                    message: why.to_string(),
                });
            }
        }
        errors.len() == before
    });
}

/// The position of metric `metric` in the canary's `spec.analysis.metrics` and the line of its
/// `templateRef` key.
fn reference_at(snapshot: &Snapshot, canary: &Canary, metric: &str) -> Option<(usize, usize)> {
    let root: &Node = snapshot
        .file(&canary.file)?
        .documents()
        .iter()
        .find(|d| d.line == canary.line)?;
    let metrics = root.get("spec")?.get("analysis")?.get("metrics")?;
    let Value::Seq(items) = &metrics.value else {
        return None;
    };
    items.iter().enumerate().find_map(|(i, item)| {
        if item.get("name")?.as_str()? != metric {
            return None;
        }
        Some((i, item.key_line("templateRef")?))
    })
}
