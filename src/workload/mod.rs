//! Workloads: the revision of what a canary rolls out, and the primary/canary Deployments,
//! Services and config copies sluice writes for managed (non route-only) canaries.
//!
//! Manifests are copied with yaml-rust2's order-preserving model so a diff between two steps
//! shows only what changed. sluice never edits the source file a human writes.

pub mod applied_twice;
pub mod autoscaler;
pub mod configs;
pub mod manifests;
pub mod revert;
pub mod rollout;
pub mod rollout_experiment;
pub mod source;
pub mod yaml_edit;

use std::collections::BTreeSet;
use std::path::Path;

use yaml_rust2::Yaml;

use crate::core::decide::{Action, Decision};
use crate::manifest::model::{Canary, Target};
use crate::route::Revisions;
use crate::workload::autoscaler::Autoscaler;
use crate::workload::configs::{references, ConfigRef};
use crate::workload::source::{find_source, Manifest};
pub use crate::workload::source::{Index, Outside};

#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("{file}: cannot read: {message}")]
    Read { file: String, message: String },
    #[error("{file}:{line}: {field}{}{message}", if field.is_empty() { "" } else { ": " })]
    Invalid {
        file: String,
        line: usize,
        field: String,
        message: String,
    },
    #[error("{canary}: source not found: expected {what}")]
    SourceMissing { canary: String, what: String },
    #[error("{file}: spec.source must name a Deployment manifest, found {found}")]
    NotDeployment { file: String, found: String },
    #[error("{file}:{line}: spec.selector.matchLabels: expected one of the labels app, name or app.kubernetes.io/name (sluice renames it for the primary), found {found}")]
    NoSelector {
        file: String,
        line: usize,
        found: String,
    },
    #[error("{path}: the primary manifest is missing and the source is not at the promoted revision; restore the file from git history")]
    PrimaryMissing { path: String },
    #[error("cannot write YAML: {0}")]
    Emit(String),
    /// A deleted canary's output cannot be reverted (`revertOnDeletion`).
    #[error("{folder}: cannot revert the output of deleted canary {canary}: {message}")]
    Revert {
        folder: String,
        canary: String,
        message: String,
    },
    /// The canary's autoscaler is missing or cannot be copied (each problem with its line).
    #[error(transparent)]
    Autoscaler(#[from] crate::yaml::error::SpecErrors),
}

/// A managed canary's source workload and the configs it references.
#[derive(Debug, Clone)]
pub struct Source {
    /// The Deployment or DaemonSet (`targetRef.kind`; `spec.source` names a Deployment).
    pub deployment: Manifest,
    /// The selector label sluice renames for the primary (`app`, `name`, ...).
    pub label_key: String,
    pub label_value: String,
    /// Referenced ConfigMaps/Secrets present in the repo.
    pub configs: Vec<Manifest>,
    pub tracked: BTreeSet<ConfigRef>,
    /// Referenced ConfigMaps/Secrets the repo does not hold (made in the cluster, by a
    /// SealedSecret or an ExternalSecret, or by hand).
    pub untracked: BTreeSet<ConfigRef>,
    /// The autoscaler `spec.autoscalerRef` names, found in the repo.
    pub autoscaler: Option<Autoscaler>,
}

pub(crate) const SELECTOR_LABELS: [&str; 3] = ["app", "name", "app.kubernetes.io/name"];

/// The node selector that keeps an idle canary DaemonSet off every node: Flagger's
/// `flagger.app/scale-to-zero: "true"` (`daemonset_controller.go`), which no node carries.
pub const DAEMONSET_SCALE_TO_ZERO: (&str, &str) = ("flagger.app/scale-to-zero", "true");

/// Finds a managed canary's source and its configs.
pub fn load_source(root: &Path, canary: &Canary, index: &Index) -> Result<Source, WorkloadError> {
    let deployment = find_source(root, canary, index)?;
    let labels = &deployment.doc["spec"]["selector"]["matchLabels"];
    let found = SELECTOR_LABELS
        .iter()
        .find_map(|k| labels[*k].as_str().map(|v| (k.to_string(), v.to_string())));
    let Some((label_key, label_value)) = found else {
        let present = match labels {
            Yaml::Hash(h) => h
                .keys()
                .filter_map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            _ => String::new(),
        };
        return Err(WorkloadError::NoSelector {
            file: deployment.file.clone(),
            line: deployment.line,
            found: if present.is_empty() {
                "no matchLabels".into()
            } else {
                present
            },
        });
    };
    check_update_strategy(&deployment)?;
    let refs = references(&deployment.doc);
    let ns = canary.id.namespace.as_str();
    let mut configs = Vec::new();
    let mut tracked = BTreeSet::new();
    let mut untracked = BTreeSet::new();
    for r in &refs {
        if let Some(m) = index.find(r.kind, ns, &r.name).next() {
            configs.push(m);
            tracked.insert(r.clone());
        } else {
            untracked.insert(r.clone());
        }
    }
    let autoscaler = autoscaler::resolve(canary, &deployment.name, index)?;
    Ok(Source {
        deployment,
        label_key,
        label_value,
        configs,
        tracked,
        untracked,
        autoscaler,
    })
}

/// Flagger refuses a DaemonSet whose update strategy is not RollingUpdate: with `OnDelete`
/// a promotion would change the primary's spec without replacing a single pod.
fn check_update_strategy(source: &Manifest) -> Result<(), WorkloadError> {
    let strategy = &source.doc["spec"]["updateStrategy"]["type"];
    match strategy.as_str() {
        Some(found) if source.kind == "DaemonSet" && found != "RollingUpdate" => {
            Err(WorkloadError::Invalid {
                file: source.file.clone(),
                line: source.line,
                field: "spec.updateStrategy.type".into(),
                message: format!("expected RollingUpdate (a DaemonSet canary is promoted by a rolling update, as in Flagger), found {found:?}"),
            })
        }
        _ => Ok(()),
    }
}

/// Converts YAML to JSON for hashing (maps sorted by key, so the hash ignores key order).
pub fn to_json(y: &Yaml) -> serde_json::Value {
    match y {
        Yaml::Real(s) => s
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(
                || serde_json::Value::String(s.clone()),
                serde_json::Value::Number,
            ),
        Yaml::Integer(i) => serde_json::Value::from(*i),
        Yaml::String(s) => serde_json::Value::String(s.clone()),
        Yaml::Boolean(b) => serde_json::Value::Bool(*b),
        Yaml::Array(a) => serde_json::Value::Array(a.iter().map(to_json).collect()),
        Yaml::Hash(h) => serde_json::Value::Object(
            h.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Yaml::String(s) | Yaml::Real(s) => s.clone(),
                        Yaml::Integer(i) => i.to_string(),
                        Yaml::Boolean(b) => b.to_string(),
                        _ => String::new(),
                    };
                    (key, to_json(v))
                })
                .collect(),
        ),
        Yaml::Alias(_) | Yaml::Null | Yaml::BadValue => serde_json::Value::Null,
    }
}

/// The revision of a source: a hash of the pod template and every referenced config's data.
pub fn source_revision(source: &Source) -> String {
    let mut parts =
        vec![serde_json::json!({"template": to_json(&source.deployment.doc["spec"]["template"])})];
    for c in &source.configs {
        parts.push(serde_json::json!({
            "kind": c.kind,
            "name": c.name,
            "data": to_json(&c.doc["data"]),
            "binaryData": to_json(&c.doc["binaryData"]),
            "stringData": to_json(&c.doc["stringData"]),
        }));
    }
    let text = serde_json::Value::Array(parts).to_string();
    match git2::Oid::hash_object(git2::ObjectType::Blob, text.as_bytes()) {
        Ok(oid) => oid.to_string(),
        // hashing a buffer cannot fail in practice; fall back to the length-tagged text size
        Err(_) => format!("len{}", text.len()),
    }
}

/// The revision the canary's source is at now.
pub fn revision(root: &Path, canary: &Canary, index: &Index) -> Result<String, WorkloadError> {
    // Revisions that run in the route object: the router names the source's.
    if let Revisions::InRoute { revision } = canary.route.revisions() {
        return Ok(revision.to_string());
    }
    match &canary.target {
        Target::RouteOnly { revision, .. } => Ok(revision.clone()),
        Target::Rollout { .. } => rollout::revision(canary, index),
        Target::Source { .. } | Target::TargetRef { .. } => {
            Ok(source_revision(&load_source(root, canary, index)?))
        }
    }
}

/// Workload files (name inside the output folder, content) for a decision.
pub fn render(
    root: &Path,
    canary: &Canary,
    decision: &Decision,
    index: &Index,
) -> Result<Vec<(String, String)>, WorkloadError> {
    // Route-only: the user owns the workloads. Revisions in the route (a Knative Service):
    // the object the router writes runs both, with no primary/canary workload or Service (as
    // Flagger).
    if matches!(canary.target, Target::RouteOnly { .. })
        || matches!(canary.route.revisions(), Revisions::InRoute { .. })
    {
        return Ok(Vec::new());
    }
    if let Target::Rollout { .. } = canary.target {
        return rollout::render(canary, decision, index, |file| {
            index.text_of(root, &canary.output.join(file))
        });
    }
    let source = load_source(root, canary, index)?;
    let status = &decision.status;
    let name = &source.deployment.name;
    let primary_file = format!("{name}-primary.yaml");
    let primary_path = canary.output.join(&primary_file);
    let rewrite_primary = matches!(decision.action, Action::Initialize | Action::Promote);
    let primary = if rewrite_primary {
        manifests::primary(canary, &source)?
    } else {
        match index.text_of(root, &primary_path) {
            Some(existing) => manifests::keep_primary(canary, &source, existing)?,
            None if source_revision(&source) == status.promoted_revision => {
                manifests::primary(canary, &source)?
            }
            None => return Err(WorkloadError::PrimaryMissing { path: primary_path }),
        }
    };
    // A failed promotion leaves the traffic on the canary, which keeps running.
    let active = status.phase.is_active() || status.canary_weight > 0;
    Ok(vec![
        (primary_file, primary),
        (
            format!("{name}-canary.yaml"),
            manifests::canary(canary, &source, active)?,
        ),
        (
            "services.yaml".to_string(),
            manifests::services(canary, &source)?,
        ),
    ])
}
