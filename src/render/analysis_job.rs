//! The Job of an Argo Rollouts job metric (`provider.job`), as sluice commits it: while a job
//! metric measures, the canary's output folder holds one file per metric, `job-<metric>.yaml`,
//! a `batch/v1` Job named after the Rollout, the canary revision, the metric and the
//! measurement's index, which Flux or Argo CD apply; `gates/analysis_job.rs` reads its end back.
//! The commit after the measurement (the next measurement's, the step's end, a promotion or a
//! rollback) removes the file, only when sluice wrote it.
//!
//! Pure: names, labels and text from the canary and its status.

use sluice_core::argo_analysis::{assess, ArgoGate};

use crate::core::status::Status;
use crate::manifest::model::Canary;

/// Kubernetes' limit on a name that is also a label value (a Job's name labels its pods).
const NAME_LIMIT: usize = 63;

/// The measurement a job metric's Job is committed for at `status`: the index of the next
/// measurement, while the canary is at a step the metric measures and the metric has not
/// completed; `None` otherwise (and for a metric that is not a job metric).
pub fn measuring(gate: &ArgoGate, status: &Status) -> Option<usize> {
    gate.job.as_ref()?;
    if !status.phase.is_active() || !gate.measures_at(status.step) {
        return None;
    }
    let taken = status
        .analysis
        .iter()
        .find(|h| h.metric == gate.metric)
        .map_or(&[][..], |h| h.measurements.as_slice());
    if assess(&gate.rules, taken, false).completed() {
        return None;
    }
    Some(taken.len())
}

/// The file a job metric's Job is written to in the output folder.
pub fn file_name(metric: &str) -> String {
    format!("job-{}.yaml", dns_label(metric, NAME_LIMIT - "job-".len()))
}

/// The Job's name: `<rollout>-<revision>-<metric>-<index>` as a DNS label of at most 63
/// characters; a longer one is cut and ends in a hash of the whole, so two measurements never
/// share a name.
pub fn job_name(rollout: &str, revision: &str, metric: &str, index: usize) -> String {
    let revision: String = revision
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect::<String>()
        .to_ascii_lowercase();
    let full = format!("{rollout}-{revision}-{metric}-{index}");
    let name = dns_label(&full, usize::MAX);
    if name.len() <= NAME_LIMIT {
        return name;
    }
    use sha2::Digest;
    let hash = hex::encode(sha2::Sha256::digest(full.as_bytes()));
    let head = dns_label(&name[..NAME_LIMIT - 9], NAME_LIMIT - 9);
    format!("{head}-{}", &hash[..8])
}

/// `text` lowercased, every character outside `[a-z0-9-]` a `-`, at most `limit` long, without
/// a leading or trailing `-` (`x` when nothing is left).
fn dns_label(text: &str, limit: usize) -> String {
    let mapped: String = text
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .take(limit)
        .collect();
    let trimmed = mapped.trim_matches('-');
    if trimmed.is_empty() {
        "x".to_string()
    } else {
        trimmed.to_string()
    }
}

/// The Job of `gate`'s measurement `index` for `canary` at `revision`: the template's labels
/// and annotations, sluice's labels (who wrote it, for which canary and metric), the template's
/// spec as written. Errors name the metric when the template is not the JSON sluice stored.
pub fn manifest(
    canary: &Canary,
    gate: &ArgoGate,
    revision: &str,
    index: usize,
) -> Result<serde_json::Value, String> {
    use serde_json::{json, Map, Value};
    let template: Value = serde_json::from_str(gate.job.as_deref().unwrap_or("{}"))
        .map_err(|e| format!("metric {}: the Job template: {e}", gate.metric))?;
    let rollout = canary.id.name.as_str();
    let mut labels = match &template["metadata"]["labels"] {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    labels.insert("app.kubernetes.io/managed-by".into(), json!("sluice"));
    labels.insert(
        "sluice.dev/canary".into(),
        json!(dns_label(rollout, NAME_LIMIT)),
    );
    labels.insert(
        "sluice.dev/metric".into(),
        json!(dns_label(&gate.metric, NAME_LIMIT)),
    );
    let mut metadata = Map::new();
    metadata.insert(
        "name".into(),
        json!(job_name(rollout, revision, &gate.metric, index)),
    );
    metadata.insert("namespace".into(), json!(canary.id.namespace.as_str()));
    metadata.insert("labels".into(), Value::Object(labels));
    if let Value::Object(a) = &template["metadata"]["annotations"] {
        metadata.insert("annotations".into(), Value::Object(a.clone()));
    }
    Ok(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": template["spec"].clone(),
    }))
}

/// The Job files of `canary` at `status` (file name, text), one per job metric measuring.
pub fn files(canary: &Canary, status: &Status) -> Result<Vec<(String, String)>, String> {
    let revision = status.canary_revision.as_deref().unwrap_or_default();
    let mut out = Vec::new();
    for gate in &canary.analysis.argo {
        let Some(index) = measuring(gate, status) else {
            continue;
        };
        let job = manifest(canary, gate, revision, index)?;
        let text = serde_saphyr::to_string(&job)
            .map_err(|e| format!("metric {}: the Job: {e}", gate.metric))?;
        out.push((
            file_name(&gate.metric),
            format!(
                "# Generated by sluice for canary {}. Do not edit: sluice removes this file once its measurement is taken.\n{text}",
                canary.id
            ),
        ));
    }
    Ok(out)
}

/// Every file name a job metric of `canary` may have been written to, measuring or not: the
/// renderer removes those it does not write now, when sluice wrote them.
pub fn all_file_names(canary: &Canary) -> Vec<String> {
    canary
        .analysis
        .argo
        .iter()
        .filter(|g| g.job.is_some())
        .map(|g| file_name(&g.metric))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_are_dns_labels_of_at_most_63_and_distinct() {
        assert_eq!(
            job_name("api", "5d8f7c9b6a", "smoke", 0),
            "api-5d8f7c9b-smoke-0"
        );
        let long = "a-very-long-rollout-name-that-goes-on-and-on-for-a-while";
        let a = job_name(long, "abc", "integration_tests", 1);
        let b = job_name(long, "abc", "integration_tests", 2);
        assert!(a.len() <= 63 && b.len() <= 63, "{a} {b}");
        assert_ne!(a, b);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
        assert!(!a.starts_with('-') && !a.ends_with('-'));
        assert_eq!(file_name("Smoke Test"), "job-smoke-test.yaml");
    }
}
