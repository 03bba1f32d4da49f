//! The workloads and Services of an Argo Rollouts `Rollout`, rendered into git as Argo's
//! controller keeps them in the cluster.
//!
//! Argo runs a Rollout as two ReplicaSets (stable and canary) and, at run time, adds
//! `rollouts-pod-template-hash: <hash>` to the selectors of the Rollout's `stableService` and
//! `canaryService`, so each Service picks one ReplicaSet. In git there are no ReplicaSets and no
//! hash: sluice writes two Deployments, `<rollout>-stable` and `<rollout>-canary`, from the
//! Rollout's pod template (or the Deployment its `workloadRef` names), each with the label
//! [`ROLE_LABEL`] on its selector and pod template (`stable` or `canary`), and copies the two
//! Services the Rollout names with that label added to their selectors. Everything else in
//! the Services is the user's. With Istio subset-level routing a Rollout may name neither
//! Service: the DestinationRule's subsets select the workloads by that label
//! (`route::istio::argo`), and only the Services it names are copied.
//!
//! Replicas follow Argo's canary with traffic routing: the stable workload keeps
//! `spec.replicas`; the canary runs `ceil(replicas * weight / 100)` of them while a rollout is
//! in progress (at least one), and none otherwise. Without traffic routing the pods split the
//! traffic, so both workloads take the counts Argo settles on for the weight
//! ([`ReplicaSplit`](crate::core::argo_replicas::ReplicaSplit)), and only the Services the
//! Rollout names are copied (the user's own Service selects both workloads' pods). The stable workload takes the canary's
//! spec at promotion, as Argo makes the canary ReplicaSet the stable one.

use yaml_rust2::Yaml;

use crate::core::argo_replicas::RoutedScale;
use crate::core::decide::{Action, Decision};
use crate::core::status::Status;
use crate::manifest::model::{Canary, Strategy, Target};
use crate::workload::manifests::emit;
use crate::workload::source::{find_one as one, Manifest};
use crate::workload::yaml_edit::{key, map_at, rename, set};
use crate::workload::{source_revision, Index, Source, WorkloadError};

/// The label sluice sets on each workload's selector and pod template, and adds to the
/// selectors of the Rollout's Services, in place of Argo's `rollouts-pod-template-hash`
/// (defined with the routes, whose DestinationRule subsets select by it too).
pub use crate::route::ROLLOUT_ROLE_LABEL as ROLE_LABEL;

/// The Deployment fields a Rollout's spec shares with a Deployment (the rest are Argo's).
const DEPLOYMENT_FIELDS: [&str; 6] = [
    "replicas",
    "selector",
    "template",
    "minReadySeconds",
    "revisionHistoryLimit",
    "progressDeadlineSeconds",
];

/// The Rollout's workload as a Deployment: the one its `workloadRef` names, or one made of the
/// Rollout's own `replicas`, `selector` and `template`.
pub fn workload(canary: &Canary, index: &Index) -> Result<Manifest, WorkloadError> {
    let Target::Rollout { name, .. } = &canary.target else {
        return Err(WorkloadError::SourceMissing {
            canary: canary.id.to_string(),
            what: "an Argo Rollouts Rollout".into(),
        });
    };
    let ns = canary.id.namespace.as_str();
    let rollout = one(canary, index, "Rollout", ns, name.as_str())?;
    let spec = &rollout.doc["spec"];
    if let Some(referenced) = spec["workloadRef"]["name"].as_str() {
        let mut deployment = one(canary, index, "Deployment", ns, referenced)?;
        // Argo takes the replicas from the Rollout, whatever the Deployment says.
        if let (Some(replicas), Some(s)) = (
            spec["replicas"].as_i64(),
            map_at(&mut deployment.doc, &["spec"]),
        ) {
            set(s, "replicas", Yaml::Integer(replicas));
        }
        return Ok(deployment);
    }
    let mut deployment = yaml_rust2::yaml::Hash::new();
    deployment.insert(key("apiVersion"), key("apps/v1"));
    deployment.insert(key("kind"), key("Deployment"));
    let mut metadata = yaml_rust2::yaml::Hash::new();
    metadata.insert(key("name"), key(name.as_str()));
    metadata.insert(key("namespace"), key(ns));
    for field in ["labels", "annotations"] {
        let value = &rollout.doc["metadata"][field];
        if let Yaml::Hash(h) = value {
            if !h.is_empty() {
                metadata.insert(key(field), value.clone());
            }
        }
    }
    deployment.insert(key("metadata"), Yaml::Hash(metadata));
    let mut out_spec = yaml_rust2::yaml::Hash::new();
    if let Yaml::Hash(h) = spec {
        for (k, v) in h {
            if k.as_str().is_some_and(|k| DEPLOYMENT_FIELDS.contains(&k)) {
                out_spec.insert(k.clone(), v.clone());
            }
        }
    }
    deployment.insert(key("spec"), Yaml::Hash(out_spec));
    Ok(Manifest {
        doc: Yaml::Hash(deployment),
        kind: "Deployment".into(),
        ..rollout
    })
}

/// The revision of the Rollout's pod template: the hash sluice's other sources use, of the
/// template alone (Argo's pods do not restart when a ConfigMap changes).
pub fn revision(canary: &Canary, index: &Index) -> Result<String, WorkloadError> {
    let deployment = workload(canary, index)?;
    Ok(source_revision(&Source {
        deployment,
        label_key: ROLE_LABEL.into(),
        label_value: String::new(),
        configs: Vec::new(),
        tracked: Default::default(),
        untracked: Default::default(),
        autoscaler: None,
    }))
}

/// `doc` as the workload of `role` (`stable` or `canary`): renamed `<rollout>-<role>`, the
/// role label on its selector and pod template, `replicas` replicas.
fn as_role(
    canary: &Canary,
    doc: &Yaml,
    name: &str,
    role: &str,
    replicas: Option<i64>,
    pod_metadata: &Yaml,
) -> Yaml {
    let mut doc = doc.clone();
    // A blue/green's activeMetadata or previewMetadata: Argo sets them on the pods.
    for field in ["labels", "annotations"] {
        if let Yaml::Hash(extra) = &pod_metadata[field] {
            if let Some(m) = map_at(&mut doc, &["spec", "template", "metadata", field]) {
                for (k, v) in extra {
                    m.insert(k.clone(), v.clone());
                }
            }
        }
    }
    rename(
        &mut doc,
        &format!("{name}-{role}"),
        canary.id.namespace.as_str(),
    );
    for path in [
        &["spec", "selector", "matchLabels"][..],
        &["spec", "template", "metadata", "labels"][..],
    ] {
        if let Some(labels) = map_at(&mut doc, path) {
            set(labels, ROLE_LABEL, key(role));
        }
    }
    if let (Some(n), Some(spec)) = (replicas, map_at(&mut doc, &["spec"])) {
        set(spec, "replicas", Yaml::Integer(n));
    }
    doc
}

/// The canary's replicas for `weight` percent of `replicas`, as Argo scales a canary with
/// traffic routing: rounded up, at least one while a rollout is in progress.
pub fn canary_replicas(replicas: i64, weight: u8, active: bool) -> i64 {
    if !active || replicas <= 0 {
        return 0;
    }
    let scaled = (replicas * i64::from(weight) + 99) / 100;
    scaled.max(1)
}

/// The `(canary, stable)` replicas of a routed canary with `setCanaryScale` steps or
/// `dynamicStableScale`, of the Rollout's `spec.replicas`: at a step, what the step's scale
/// and the traffic weight make them; otherwise the canary at its traffic share and the
/// stable (with `dynamicStableScale`; else kept) at `spec.replicas`, as Argo runs them once
/// the rollout is promoted or aborted.
fn scaled(scale: &RoutedScale, status: &Status, active: bool) -> (i64, Option<i64>) {
    use crate::core::status::Phase;
    let replicas = i64::from(scale.replicas);
    let (step, weight) = (status.step, status.canary_weight);
    let at_weight = canary_replicas(replicas, weight, active);
    let stable = |n: u32| scale.dynamic_stable.then_some(i64::from(n));
    match status.phase {
        Phase::Progressing | Phase::WaitingApproval => (
            scale.canary(step).map_or(at_weight, i64::from),
            stable(scale.stable(step, weight)),
        ),
        _ => (at_weight, stable(scale.replicas)),
    }
}

/// The files of a decision: `<rollout>-stable.yaml`, `<rollout>-canary.yaml` and
/// `services.yaml`. The stable file changes only at initialization and promotion; otherwise
/// the one in the output (`existing`) is kept.
pub fn render(
    canary: &Canary,
    decision: &Decision,
    index: &Index,
    existing: impl Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, WorkloadError> {
    let Target::Rollout {
        name,
        stable_service,
        canary_service,
        services_named,
        ..
    } = &canary.target
    else {
        return Ok(Vec::new());
    };
    let source = workload(canary, index)?;
    let status = &decision.status;
    let replicas = source.doc["spec"]["replicas"].as_i64().unwrap_or(1);
    let ns = canary.id.namespace.as_str();
    let blue_green = match canary.analysis.strategy {
        Strategy::BlueGreen { .. } => {
            let rollout = one(canary, index, "Rollout", ns, name.as_str())?;
            Some(rollout.doc["spec"]["strategy"]["blueGreen"].clone())
        }
        Strategy::Canary { .. } | Strategy::AB { .. } => None,
    };
    let none = Yaml::BadValue;
    let metadata = |key: &str| blue_green.as_ref().map_or(&none, |bg| &bg[key]).clone();
    let stable_file = format!("{name}-stable.yaml");
    let rewrite = matches!(decision.action, Action::Initialize | Action::Promote);
    let active = status.phase.is_active() || status.canary_weight > 0;
    let switched = status.canary_weight >= 100;
    let (canary_count, stable_count) =
        replica_counts(blue_green.as_ref(), &canary.target, replicas, status);
    let stable = match existing(&stable_file) {
        Some(text) if !rewrite => match stable_count {
            Some(count) => scale(canary, text, count)?,
            None => text,
        },
        _ if rewrite || revision(canary, index)? == status.promoted_revision => emit(
            canary,
            &[as_role(
                canary,
                &source.doc,
                name.as_str(),
                "stable",
                stable_count,
                &metadata("activeMetadata"),
            )],
        )?,
        _ => {
            return Err(WorkloadError::PrimaryMissing {
                path: canary.output.join(&stable_file),
            })
        }
    };
    let canary_doc = as_role(
        canary,
        &source.doc,
        name.as_str(),
        "canary",
        Some(canary_count),
        &metadata("previewMetadata"),
    );
    let roles = match &blue_green {
        // activeService: the stable workload until the switch; previewService: the canary
        // workload while a rollout runs, the active one otherwise (Argo's rollout/service.go).
        Some(_) => [
            (stable_service, if switched { "canary" } else { "stable" }),
            (canary_service, if active { "canary" } else { "stable" }),
        ],
        None => [(stable_service, "stable"), (canary_service, "canary")],
    };
    let mut services = Vec::new();
    for (i, (service, role)) in roles.into_iter().enumerate() {
        // A blue/green without previewService names its activeService twice; a replica-based
        // canary or subset-level routing copies only the Services the Rollout names.
        if (i == 1 && blue_green.is_some() && service == stable_service) || !services_named[i] {
            continue;
        }
        let mut doc = one(canary, index, "Service", ns, service.as_str())?.doc;
        rename(&mut doc, service.as_str(), ns);
        if let Some(selector) = map_at(&mut doc, &["spec", "selector"]) {
            set(selector, ROLE_LABEL, key(role));
        }
        if let Yaml::Hash(h) = &mut doc {
            h.remove(&key("status"));
        }
        services.push(doc);
    }
    let experiment =
        crate::workload::rollout_experiment::render(canary, status, index, &source.doc, &stable)?;
    let mut files = vec![
        (stable_file, stable),
        (format!("{name}-canary.yaml"), emit(canary, &[canary_doc])?),
    ];
    files.extend(experiment);
    if !services.is_empty() {
        files.push(("services.yaml".to_string(), emit(canary, &services)?));
    }
    Ok(files)
}

/// The canary's and (when it moves) the stable workload's replicas at `status`: a blue/green
/// preview's count, a replica-based canary's split, or the canary's share beside a router
/// (or the scale of its `setCanaryScale` steps and `dynamicStableScale`).
fn replica_counts(
    blue_green: Option<&Yaml>,
    target: &Target,
    replicas: i64,
    status: &Status,
) -> (i64, Option<i64>) {
    let (replica_canary, routed_scale) = match target {
        Target::Rollout {
            replica_canary,
            scale,
            ..
        } => (replica_canary.as_ref(), scale.as_ref()),
        Target::Source { .. } | Target::TargetRef { .. } | Target::RouteOnly { .. } => (None, None),
    };
    let active = status.phase.is_active() || status.canary_weight > 0;
    let switched = status.canary_weight >= 100;
    match (blue_green, replica_canary) {
        // Argo's preview ReplicaSet: previewReplicaCount pods until the switch, all after it.
        (Some(bg), _) if active && !switched => {
            (bg["previewReplicaCount"].as_i64().unwrap_or(replicas), None)
        }
        (Some(_), _) if active => (replicas, None),
        (Some(_), _) => (0, None),
        // Without a router the pods split the traffic: both workloads scale with the weight.
        (None, Some(replica)) if active => {
            let (c, s) = replica.split.at(status.canary_weight);
            (i64::from(c), Some(i64::from(s)))
        }
        (None, Some(replica)) => (0, Some(i64::from(replica.split.replicas))),
        (None, None) => match routed_scale {
            Some(scale) => scaled(scale, status, active),
            None => (
                canary_replicas(replicas, status.canary_weight, active),
                None,
            ),
        },
    }
}

/// The kept stable workload `text` at `count` replicas (unchanged when it already is).
fn scale(canary: &Canary, text: String, count: i64) -> Result<String, WorkloadError> {
    let Ok(mut docs) = yaml_rust2::YamlLoader::load_from_str(&text) else {
        // Not YAML any more: leave it to the apply to report, as for any kept primary.
        return Ok(text);
    };
    let mut changed = false;
    for doc in &mut docs {
        if doc["kind"].as_str() != Some("Deployment")
            || doc["spec"]["replicas"].as_i64() == Some(count)
        {
            continue;
        }
        if let Some(spec) = map_at(doc, &["spec"]) {
            set(spec, "replicas", Yaml::Integer(count));
            changed = true;
        }
    }
    if changed {
        emit(canary, &docs)
    } else {
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::canary_replicas;

    #[test]
    fn canary_replicas_round_up_as_argo_scales_them() {
        assert_eq!(canary_replicas(5, 20, true), 1);
        assert_eq!(canary_replicas(5, 30, true), 2);
        assert_eq!(canary_replicas(10, 50, true), 5);
        assert_eq!(canary_replicas(4, 0, true), 1);
        assert_eq!(canary_replicas(4, 100, true), 4);
        assert_eq!(canary_replicas(4, 60, false), 0);
        assert_eq!(canary_replicas(0, 60, true), 0);
    }
}
