//! Autoscalers (Flagger's `spec.autoscalerRef`): the user's HorizontalPodAutoscaler or KEDA
//! ScaledObject, found in the repo like the source Deployment, and the two copies sluice
//! writes: the primary's `<name>-primary` targeting `<target>-primary` (as Flagger's
//! `hpa_reconciler.go` and `scaled_object_reconciler.go` make it) and the canary's, targeting
//! the canary Deployment `<target>`.
//!
//! # Who owns `spec.replicas`
//!
//! Flux (server-side apply) and Argo CD re-apply every field a manifest sets. A Deployment
//! whose manifest sets `spec.replicas` while an autoscaler scales it is reset on every apply:
//! the replicas fight of Flagger issues #1121 and #1504. So the rule is: **in every commit,
//! a Deployment that an autoscaler of that commit targets has no `spec.replicas`.** Leaving the
//! field out makes server-side apply release it; the value the autoscaler set stays.
//!
//! - Primary: never sets `spec.replicas`; its autoscaler `<name>-primary` is always there.
//!   (Flagger's `Promote` likewise stops copying replicas once `autoscalerRef` is set.)
//! - Canary with a HorizontalPodAutoscaler. An HPA cannot scale up from zero (at 0 replicas
//!   Kubernetes marks it `ScalingDisabled`), which is why Flagger's `ScaleFromZero` patches the
//!   canary to `max(1, minReplicas)` before the HPA takes over, and `ScaleToZero` patches it
//!   to 0. A committed manifest cannot patch once and then let go, so sluice writes:
//!   - idle: `spec.replicas: 0` and *no* canary HPA (Flux prunes it). Nothing else owns the
//!     field, so this is not a fight, and an HPA at 0 would be disabled anyway.
//!   - analysing: no `spec.replicas` and the canary HPA. The 0 was owned by the GitOps
//!     applier alone, so removing it from the manifest removes the field and the API server
//!     defaults it to 1 (Flagger's `ScaleFromZero` floor); the HPA then scales to its
//!     `minReplicas`. Writing `minReplicas` itself would be worse: the next commit drops the
//!     field again and, when the HPA had not moved it, resets it to 1.
//! - Canary with a ScaledObject: never sets `spec.replicas`. KEDA scales from zero itself, so
//!   idle is Flagger's `autoscaling.keda.sh/paused-replicas: "0"` annotation on the canary's
//!   ScaledObject (KEDA scales the canary to 0 and stops), removed while an analysis runs.
//!
//! A Deployment that had `spec.replicas` in an earlier commit (before `autoscalerRef` was
//! added) is defaulted to 1 by the commit that drops the field, until its autoscaler scales
//! it: the price of handing a field from one owner to another through git.

use std::collections::BTreeMap;

use yaml_rust2::Yaml;

use crate::manifest::model::{AutoscalerKind, AutoscalerRef, Canary};
use crate::workload::source::{Index, Manifest};
use crate::workload::yaml_edit::{
    drop_toolkit_metadata, key, map_at, rename, set, without_toolkit_keys,
};
use crate::yaml::error::{SpecError, SpecErrors};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join};

/// KEDA's annotation that pauses a ScaledObject at a fixed replica count.
pub const PAUSED_REPLICAS: &str = "autoscaling.keda.sh/paused-replicas";

/// The user's autoscaler, as found in the repo.
#[derive(Debug, Clone)]
pub struct Autoscaler {
    pub reference: AutoscalerRef,
    pub manifest: Manifest,
}

/// The fields of a ScaledObject's `spec` that Flagger copies to the primary's ScaledObject
/// (its `keda/v1alpha1.ScaledObjectSpec`), per block. A field not listed here would be
/// dropped from the primary, so it is refused rather than silently lost.
const SO_SPEC: &[&str] = &[
    "scaleTargetRef",
    "pollingInterval",
    "cooldownPeriod",
    "idleReplicaCount",
    "minReplicaCount",
    "maxReplicaCount",
    "advanced",
    "triggers",
    "fallback",
];
const SO_TARGET: &[&str] = &["name", "apiVersion", "kind", "envSourceContainerName"];
const SO_ADVANCED: &[&str] = &[
    "horizontalPodAutoscalerConfig",
    "restoreToOriginalReplicaCount",
];
const SO_HPA_CONFIG: &[&str] = &["name", "behavior"];
const SO_TRIGGER: &[&str] = &[
    "type",
    "name",
    "metadata",
    "authenticationRef",
    "metricType",
];
const SO_AUTH_REF: &[&str] = &["name", "kind"];
const SO_FALLBACK: &[&str] = &["failureThreshold", "replicas"];

/// Finds the canary's autoscaler in the repo and checks that sluice can copy it: the right
/// apiVersion, targeting the canary's Deployment `target`, and (ScaledObject) only fields
/// Flagger copies to the primary. `None` when the canary has no `autoscalerRef`.
pub fn resolve(
    canary: &Canary,
    target: &str,
    index: &Index<'_>,
) -> Result<Option<Autoscaler>, SpecErrors> {
    let Some(reference) = &canary.autoscaler else {
        return Ok(None);
    };
    let ns = canary.id.namespace.as_str();
    let kind = reference.kind.as_str();
    let name = reference.name.as_str();
    let found: Vec<_> = index.objects(kind, ns, name).collect();
    let object = match found.as_slice() {
        [one] => one,
        [] => {
            return Err(SpecErrors(vec![SpecError {
                file: canary.file.clone(),
                line: reference.line,
                field: "spec.autoscalerRef.name".into(),
                message: format!(
                    "{kind} {ns}/{name} not found in the repo's YAML files (sluice's output folders are not searched)"
                ),
            }]))
        }
        [a, b, ..] => {
            return Err(SpecErrors(vec![SpecError {
                file: b.file.to_string(),
                line: b.line,
                field: "metadata.name".into(),
                message: format!("{kind} {ns}/{name} is defined twice (also at {}:{})", a.file, a.line),
            }]))
        }
    };
    let mut errors = Vec::new();
    let mut error = |line: usize, field: String, message: String| {
        errors.push(SpecError {
            file: object.file.to_string(),
            line,
            field,
            message,
        })
    };
    let api_version = object.api_version.unwrap_or("");
    let allowed: &[&str] = match reference.kind {
        AutoscalerKind::HorizontalPodAutoscaler => &["autoscaling/v2", "autoscaling/v2beta2"],
        AutoscalerKind::ScaledObject => &["keda.sh/v1alpha1"],
    };
    if !allowed.contains(&api_version) {
        error(
            line_of(object.node, &["apiVersion"]).unwrap_or(object.line),
            "apiVersion".into(),
            format!(
                "expected {} (sluice writes {}), found {api_version:?}",
                allowed.join(" or "),
                reference.kind.api_version()
            ),
        );
    }
    let target_ref = get(object.node, &["spec", "scaleTargetRef"]);
    match target_ref.and_then(|t| t.get("name")) {
        Some(n) if n.as_str() == Some(target) => {}
        Some(n) => error(
            n.line,
            "spec.scaleTargetRef.name".into(),
            format!(
                "expected {target:?}, the Deployment the canary's targetRef names (sluice points the copies at {target} and {target}-primary), found {:?}",
                n.as_str().unwrap_or("")
            ),
        ),
        None => error(
            target_ref.map_or(object.line, |t| t.line),
            "spec.scaleTargetRef.name".into(),
            format!("required field is missing: expected {target:?}"),
        ),
    }
    if let Some(k) = target_ref.and_then(|t| t.get("kind")) {
        if k.as_str() != Some("Deployment") {
            error(
                k.line,
                "spec.scaleTargetRef.kind".into(),
                format!("expected Deployment, found {:?}", k.as_str().unwrap_or("")),
            );
        }
    }
    if reference.kind == AutoscalerKind::ScaledObject {
        check_scaled_object(object.node, reference, &mut error);
    }
    if errors.is_empty() {
        Ok(Some(Autoscaler {
            reference: reference.clone(),
            manifest: Manifest::from(*object),
        }))
    } else {
        Err(SpecErrors(errors))
    }
}

fn get<'n>(node: &'n Node, path: &[&str]) -> Option<&'n Node> {
    path.iter().try_fold(node, |n, k| n.get(k))
}

fn line_of(node: &Node, path: &[&str]) -> Option<usize> {
    get(node, path).map(|n| n.line)
}

/// Keys of a mapping that are not in `known`, with their lines.
fn unknown<'n>(node: &'n Node, known: &[&str]) -> Vec<(&'n str, usize)> {
    match &node.value {
        Value::Map(entries) => entries
            .iter()
            .filter(|(k, _)| !known.contains(&k.text.as_str()))
            .map(|(k, _)| (k.text.as_str(), k.line))
            .collect(),
        _ => Vec::new(),
    }
}

fn check_scaled_object(
    root: &Node,
    reference: &AutoscalerRef,
    error: &mut impl FnMut(usize, String, String),
) {
    let mut refuse = |path: String, line: usize| {
        error(
            line,
            path,
            "Flagger does not copy this field to the primary's ScaledObject; sluice refuses it rather than leave it out of the primary".into(),
        )
    };
    let Some(spec) = root.get("spec") else { return };
    let blocks: [(&str, Option<&Node>, &[&str]); 5] = [
        ("spec", Some(spec), SO_SPEC),
        ("spec.scaleTargetRef", spec.get("scaleTargetRef"), SO_TARGET),
        ("spec.advanced", spec.get("advanced"), SO_ADVANCED),
        (
            "spec.advanced.horizontalPodAutoscalerConfig",
            get(spec, &["advanced", "horizontalPodAutoscalerConfig"]),
            SO_HPA_CONFIG,
        ),
        ("spec.fallback", spec.get("fallback"), SO_FALLBACK),
    ];
    for (path, node, known) in blocks {
        for (k, line) in node.map(|n| unknown(n, known)).unwrap_or_default() {
            refuse(join(path, k), line);
        }
    }
    let mut names = Vec::new();
    if let Some(Value::Seq(triggers)) = spec.get("triggers").map(|t| &t.value) {
        for (i, t) in triggers.iter().enumerate() {
            let path = index("spec.triggers", i);
            for (k, line) in unknown(t, SO_TRIGGER) {
                refuse(join(&path, k), line);
            }
            if let Some(auth) = t.get("authenticationRef") {
                for (k, line) in unknown(auth, SO_AUTH_REF) {
                    refuse(join(&join(&path, "authenticationRef"), k), line);
                }
            }
            if let Some(n) = t.get("name").and_then(Node::as_str) {
                names.push(n.to_string());
            }
        }
    }
    // Flagger matches primaryScalerQueries to triggers by name and ignores a name no trigger
    // has: that is a typo that would leave the primary scaling on the canary's query.
    for name in reference.primary_queries.iter().flat_map(BTreeMap::keys) {
        if !names.contains(name) {
            let line = line_of(spec, &["triggers"]).unwrap_or(spec.line);
            error(
                line,
                "spec.triggers".into(),
                format!(
                    "the canary's autoscalerRef.primaryScalerQueries names trigger {name:?}, which this ScaledObject does not have (triggers named: {})",
                    if names.is_empty() { "none".to_string() } else { names.join(", ") }
                ),
            );
        }
    }
}

/// A new object's head: apiVersion, kind and metadata (name, namespace, filtered labels and,
/// when `annotations`, filtered annotations).
fn head(kind: AutoscalerKind, name: &str, namespace: &str, from: &Yaml, annotations: bool) -> Yaml {
    let mut meta = yaml_rust2::yaml::Hash::new();
    meta.insert(key("name"), key(name));
    meta.insert(key("namespace"), key(namespace));
    if let Some(labels) = without_toolkit_keys(&from["metadata"]["labels"]) {
        meta.insert(key("labels"), labels);
    }
    if annotations {
        if let Some(a) = without_toolkit_keys(&from["metadata"]["annotations"]) {
            meta.insert(key("annotations"), a);
        }
    }
    let mut doc = yaml_rust2::yaml::Hash::new();
    doc.insert(key("apiVersion"), key(kind.api_version()));
    doc.insert(key("kind"), key(kind.as_str()));
    doc.insert(key("metadata"), Yaml::Hash(meta));
    Yaml::Hash(doc)
}

/// Copies `fields` of `from` (a mapping) that are present into `to`, in `fields` order.
fn copy_fields(to: &mut yaml_rust2::yaml::Hash, from: &Yaml, fields: &[&str]) {
    for f in fields {
        let v = &from[*f];
        if !v.is_badvalue() && !v.is_null() {
            to.insert(key(f), v.clone());
        }
    }
}

/// The primary's autoscaler `<name>-primary`, targeting `<target>-primary`.
pub fn primary(canary: &Canary, scaler: &Autoscaler, target: &str) -> Yaml {
    let ns = canary.id.namespace.as_str();
    let reference = &scaler.reference;
    let user = &scaler.manifest.doc;
    let name = format!("{}-primary", reference.name);
    let primary_target = format!("{target}-primary");
    match reference.kind {
        AutoscalerKind::HorizontalPodAutoscaler => {
            // Flagger's HorizontalPodAutoscalerSpec: scaleTargetRef (kind and apiVersion
            // kept), minReplicas, maxReplicas, metrics, behavior.
            let mut doc = head(reference.kind, &name, ns, user, false);
            let mut spec = yaml_rust2::yaml::Hash::new();
            let mut target_ref = yaml_rust2::yaml::Hash::new();
            copy_fields(
                &mut target_ref,
                &user["spec"]["scaleTargetRef"],
                &["apiVersion", "kind"],
            );
            target_ref.insert(key("name"), key(&primary_target));
            spec.insert(key("scaleTargetRef"), Yaml::Hash(target_ref));
            copy_fields(
                &mut spec,
                &user["spec"],
                &["minReplicas", "maxReplicas", "metrics", "behavior"],
            );
            if let Some(min) = reference.primary_min_replicas {
                set(&mut spec, "minReplicas", Yaml::Integer(i64::from(min)));
            }
            if let Some(max) = reference.primary_max_replicas {
                set(&mut spec, "maxReplicas", Yaml::Integer(i64::from(max)));
            }
            if let Yaml::Hash(h) = &mut doc {
                h.insert(key("spec"), Yaml::Hash(spec));
            }
            doc
        }
        AutoscalerKind::ScaledObject => {
            let mut doc = head(reference.kind, &name, ns, user, true);
            let from = &user["spec"];
            let mut spec = yaml_rust2::yaml::Hash::new();
            let mut target_ref = yaml_rust2::yaml::Hash::new();
            target_ref.insert(key("name"), key(&primary_target));
            copy_fields(
                &mut target_ref,
                &from["scaleTargetRef"],
                &["apiVersion", "kind", "envSourceContainerName"],
            );
            spec.insert(key("scaleTargetRef"), Yaml::Hash(target_ref));
            copy_fields(
                &mut spec,
                from,
                &[
                    "pollingInterval",
                    "cooldownPeriod",
                    "idleReplicaCount",
                    "minReplicaCount",
                    "maxReplicaCount",
                ],
            );
            if let Some(min) = reference.primary_min_replicas {
                set(&mut spec, "minReplicaCount", Yaml::Integer(i64::from(min)));
            }
            if let Some(max) = reference.primary_max_replicas {
                set(&mut spec, "maxReplicaCount", Yaml::Integer(i64::from(max)));
            }
            spec.insert(key("advanced"), primary_advanced(&from["advanced"]));
            let triggers = match &from["triggers"] {
                Yaml::Array(ts) => ts
                    .iter()
                    .map(|t| primary_trigger(t, reference, target))
                    .collect(),
                _ => Vec::new(),
            };
            spec.insert(key("triggers"), Yaml::Array(triggers));
            copy_fields(&mut spec, from, &["fallback"]);
            if let Yaml::Hash(h) = &mut doc {
                h.insert(key("spec"), Yaml::Hash(spec));
            }
            doc
        }
    }
}

/// Flagger's `setPrimaryScaledObjectHPA`: `advanced.horizontalPodAutoscalerConfig` always
/// present (empty when the user set none), its `name` given `-primary` when set.
fn primary_advanced(advanced: &Yaml) -> Yaml {
    let mut out = match advanced {
        Yaml::Hash(h) => h.clone(),
        _ => yaml_rust2::yaml::Hash::new(),
    };
    let mut config = match out.get(&key("horizontalPodAutoscalerConfig")) {
        Some(Yaml::Hash(h)) => h.clone(),
        _ => yaml_rust2::yaml::Hash::new(),
    };
    if let Some(Yaml::String(name)) = config.get(&key("name")) {
        if !name.is_empty() {
            let renamed = format!("{name}-primary");
            set(&mut config, "name", key(&renamed));
        }
    }
    set(
        &mut out,
        "horizontalPodAutoscalerConfig",
        Yaml::Hash(config),
    );
    Yaml::Hash(out)
}

/// One trigger of the primary's ScaledObject: its query from `primaryScalerQueries` (by
/// trigger name) when the canary sets them, else rewritten from `<target>` (and
/// `<target>-canary`) to `<target>-primary` (Flagger's `setPrimaryScaledObjectQueries`).
fn primary_trigger(trigger: &Yaml, reference: &AutoscalerRef, target: &str) -> Yaml {
    let mut t = trigger.clone();
    let trigger_name = trigger["name"].as_str().unwrap_or("");
    let query = match &reference.primary_queries {
        Some(queries) => queries.get(trigger_name).cloned(),
        None => trigger["metadata"]["query"]
            .as_str()
            .map(|q| rewrite_query(q, target)),
    };
    if let Some(query) = query {
        if let Some(meta) = map_at(&mut t, &["metadata"]) {
            set(meta, "query", key(&query));
        }
    }
    t
}

/// `<target>-canary` and `<target>` both become `<target>-primary`, without producing
/// `<target>-primary-canary` or `<target>-primary-primary` (Flagger's placeholder trick).
pub fn rewrite_query(query: &str, target: &str) -> String {
    // NUL cannot occur in a YAML string a human wrote, so it is a safe placeholder.
    const PLACEHOLDER: &str = "\u{0}";
    let primary = format!("{target}-primary");
    query
        .replace(&format!("{target}-canary"), PLACEHOLDER)
        .replace(target, &primary)
        .replace(PLACEHOLDER, &primary)
}

/// The canary's autoscaler, targeting the canary Deployment: the user's object with its
/// namespace pinned (and an HPA written as `autoscaling/v2`). A HorizontalPodAutoscaler only
/// while an analysis runs; a ScaledObject always, paused at 0 replicas while idle.
pub fn canary(canary: &Canary, scaler: &Autoscaler, active: bool) -> Option<Yaml> {
    let mut doc = scaler.manifest.doc.clone();
    rename(
        &mut doc,
        scaler.reference.name.as_str(),
        canary.id.namespace.as_str(),
    );
    // No Flux instruction from the source's autoscaler on sluice's copy (as on the primary's).
    drop_toolkit_metadata(&mut doc);
    match scaler.reference.kind {
        AutoscalerKind::HorizontalPodAutoscaler => {
            if !active {
                return None;
            }
            if let Yaml::Hash(h) = &mut doc {
                set(
                    h,
                    "apiVersion",
                    key(AutoscalerKind::HorizontalPodAutoscaler.api_version()),
                );
            }
        }
        AutoscalerKind::ScaledObject => {
            if active {
                if let Some(Yaml::Hash(a)) =
                    map_at(&mut doc, &["metadata"]).and_then(|m| m.get_mut(&key("annotations")))
                {
                    a.remove(&key(PAUSED_REPLICAS));
                }
            } else if let Some(a) = map_at(&mut doc, &["metadata", "annotations"]) {
                set(a, PAUSED_REPLICAS, key("0"));
            }
        }
    }
    Some(doc)
}

/// What the canary Deployment's `spec.replicas` must be in a commit (see the module docs):
/// `Some(0)` for an idle canary without a ScaledObject, `None` (leave the field out) when an
/// autoscaler of this commit owns it, and the source's own value otherwise.
pub fn canary_replicas(scaler: Option<&Autoscaler>, active: bool) -> Replicas {
    match (scaler.map(|s| s.reference.kind), active) {
        (None, true) => Replicas::AsSource,
        (None | Some(AutoscalerKind::HorizontalPodAutoscaler), false) => Replicas::Zero,
        (Some(AutoscalerKind::HorizontalPodAutoscaler), true)
        | (Some(AutoscalerKind::ScaledObject), _) => Replicas::LeftOut,
    }
}

/// What a rendered Deployment says about `spec.replicas`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replicas {
    /// The source's field, as the human wrote it (no autoscaler).
    AsSource,
    /// `spec.replicas: 0`.
    Zero,
    /// No `spec.replicas`: an autoscaler owns it.
    LeftOut,
}
