//! What `revertOnDeletion` leaves in a deleted canary's output folder: the target workload
//! at the primary's spec, and the apex Service selecting the target's pods.
//!
//! Flagger's finalizer (`pkg/controller/finalizer.go`) scales the target back up to the
//! primary's replicas and points the apex Service's selector back at the target's label
//! (`KubernetesDefaultRouter.Finalize`); the primary, the `-primary`/`-canary` Services and
//! the mesh objects it owns go with the Canary (garbage-collected through their owner
//! references). In git the output folder is all the GitOps engine applies for the canary, so
//! the same end state is: the primary file's objects renamed back to the target's names
//! (workload, its ConfigMap/Secret copies and references, its autoscaler), the apex Service
//! with the target's selector, and a kustomization listing the two. The primary's spec, not
//! the source's: when a rollout was under way or failed, the source holds a revision that was
//! never promoted, and a revert must not start it unanalysed.
//!
//! The files written start with [`RESTORED_MARK`], not sluice's generated mark: sluice no
//! longer owns them, so it never overwrites them, and a canary later given this folder is
//! refused until a human moves them. Pure: works on texts the caller read.

use std::collections::BTreeSet;

use yaml_rust2::{Yaml, YamlLoader};

use crate::workload::configs::{rename_from_primary, ConfigRef};
use crate::workload::manifests::emit_with;
use crate::workload::yaml_edit::{key, map_at, set};
use crate::workload::{WorkloadError, SELECTOR_LABELS};

/// The first line of every file a revert writes.
pub const RESTORED_MARK: &str = "# Restored by sluice";

/// The label sluice puts on the Services it generates.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// The file holding the restored workload is `<target>.yaml`; these two complete the folder.
pub const SERVICES_FILE: &str = "services.yaml";
pub const KUSTOMIZATION_FILE: &str = "kustomization.yaml";

/// A reverted output folder's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The target workload's name (the primary's, without `-primary`).
    pub target: String,
    /// The images the restored workload runs (its containers', in order).
    pub images: Vec<String>,
    /// Files to write: name inside the folder, content. Every other generated file of the
    /// folder goes.
    pub files: Vec<(String, String)>,
}

/// Restores the output folder `folder` of deleted canary `canary` from its files (name inside
/// the folder, text): the primary file and `services.yaml`.
pub fn restore(
    canary: &str,
    folder: &str,
    files: &[(String, String)],
) -> Result<Restored, WorkloadError> {
    let fail = |message: String| WorkloadError::Revert {
        folder: folder.to_string(),
        canary: canary.to_string(),
        message,
    };
    let parsed: Vec<(&str, Vec<Yaml>)> = files
        .iter()
        .filter_map(|(name, text)| {
            YamlLoader::load_from_str(text)
                .ok()
                .map(|docs| (name.as_str(), docs))
        })
        .collect();
    let Some((_, primary_docs)) = parsed
        .iter()
        .find(|(_, docs)| docs.iter().any(is_primary_workload))
    else {
        return Err(fail(
            "no primary Deployment or DaemonSet (`<target>-primary`) among its files".into(),
        ));
    };
    let Some(workload) = primary_docs.iter().find(|d| is_primary_workload(d)) else {
        return Err(fail("no primary workload".into()));
    };
    let primary_name = workload["metadata"]["name"].as_str().unwrap_or_default();
    let target = primary_name
        .strip_suffix("-primary")
        .unwrap_or(primary_name)
        .to_string();
    let Some(label) = SelectorLabel::of(workload) else {
        return Err(fail(format!(
            "{primary_name}: spec.selector.matchLabels has no app, name or app.kubernetes.io/name label ending in -primary"
        )));
    };
    let restored = restore_primary_file(primary_docs, &target, &label);
    let images = restored.first().map(images_of).unwrap_or_default();
    let Some(apex) = restore_apex(&parsed, &label) else {
        return Err(fail(format!(
            "no apex Service selecting {}: {} in {SERVICES_FILE}",
            label.key, label.primary
        )));
    };
    let header = format!(
        "{RESTORED_MARK} when canary {canary} was deleted with revertOnDeletion: the target at the primary's last spec.\n# sluice no longer writes this file: it is yours to keep, move or delete.\n"
    );
    let workload_file = format!("{target}.yaml");
    let kustomization = kustomization(&header, &workload_file);
    Ok(Restored {
        target,
        images,
        files: vec![
            (workload_file, emit_with(header.clone(), &restored)?),
            (SERVICES_FILE.to_string(), emit_with(header, &[apex])?),
            (KUSTOMIZATION_FILE.to_string(), kustomization),
        ],
    })
}

/// A Deployment or DaemonSet named `<target>-primary`.
fn is_primary_workload(d: &Yaml) -> bool {
    matches!(d["kind"].as_str(), Some("Deployment" | "DaemonSet"))
        && d["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.ends_with("-primary"))
}

/// The selector label the primary's pods carry: `key: <value>-primary` on the primary,
/// `key: <value>` on the target.
struct SelectorLabel {
    key: String,
    /// The target's value.
    value: String,
    /// The primary's value, `<value>-primary`.
    primary: String,
}

impl SelectorLabel {
    /// The first of [`SELECTOR_LABELS`] in the primary workload's `spec.selector.matchLabels`
    /// whose value ends in `-primary`.
    fn of(workload: &Yaml) -> Option<SelectorLabel> {
        let labels = &workload["spec"]["selector"]["matchLabels"];
        SELECTOR_LABELS.iter().find_map(|k| {
            let value = labels[*k].as_str()?.strip_suffix("-primary")?;
            Some(SelectorLabel {
                key: k.to_string(),
                value: value.to_string(),
                primary: format!("{value}-primary"),
            })
        })
    }
}

/// The objects of the primary file, renamed back to the target's names: the workload, its
/// ConfigMap/Secret copies and its autoscaler.
fn restore_primary_file(primary_docs: &[Yaml], target: &str, label: &SelectorLabel) -> Vec<Yaml> {
    let copies = config_copies(primary_docs);
    let mut restored = Vec::new();
    for doc in primary_docs {
        let mut doc = doc.clone();
        match doc["kind"].as_str() {
            Some("Deployment" | "DaemonSet") if is_primary_workload(&doc) => {
                restore_workload(&mut doc, target, label, &copies);
            }
            Some("ConfigMap" | "Secret" | "HorizontalPodAutoscaler" | "ScaledObject") => {
                restore_companion(&mut doc, target);
            }
            _ => {}
        }
        restored.push(doc);
    }
    restored
}

/// The ConfigMaps and Secrets the primary file holds as `<name>-primary` copies, by their
/// target names.
fn config_copies(primary_docs: &[Yaml]) -> BTreeSet<ConfigRef> {
    primary_docs
        .iter()
        .filter_map(|d| {
            let kind = match d["kind"].as_str()? {
                "ConfigMap" => "ConfigMap",
                "Secret" => "Secret",
                _ => return None,
            };
            let base = d["metadata"]["name"].as_str()?.strip_suffix("-primary")?;
            Some(ConfigRef {
                kind,
                name: base.to_string(),
            })
        })
        .collect()
}

/// The primary workload becomes the target: its name, its selector labels, and its
/// references to the config copies.
fn restore_workload(
    doc: &mut Yaml,
    target: &str,
    label: &SelectorLabel,
    copies: &BTreeSet<ConfigRef>,
) {
    rename_to(doc, target);
    for path in [
        &["metadata", "labels"][..],
        &["spec", "selector", "matchLabels"],
        &["spec", "template", "metadata", "labels"],
    ] {
        relabel(doc, path, &label.key, &label.primary, &label.value);
    }
    rename_from_primary(doc, copies);
}

/// A ConfigMap/Secret copy or an autoscaler of the primary becomes the target's.
fn restore_companion(doc: &mut Yaml, target: &str) {
    if let Some(base) = doc["metadata"]["name"]
        .as_str()
        .and_then(|n| n.strip_suffix("-primary"))
        .map(str::to_string)
    {
        rename_to(doc, &base);
    }
    // Only where present: `map_at` would add it to a ConfigMap.
    if !doc["spec"]["scaleTargetRef"].is_badvalue() {
        if let Some(target_ref) = map_at(doc, &["spec", "scaleTargetRef"]) {
            set(target_ref, "name", key(target));
        }
    }
    strip_primary(doc, &["spec", "advanced", "horizontalPodAutoscalerConfig"]);
}

/// The images a workload's containers run, in order.
fn images_of(workload: &Yaml) -> Vec<String> {
    workload["spec"]["template"]["spec"]["containers"]
        .as_vec()
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c["image"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The apex Service (not `-primary`, not `-canary`, selecting the primary's pods), selecting
/// the target's pods again and no longer labelled as sluice's.
fn restore_apex(parsed: &[(&str, Vec<Yaml>)], label: &SelectorLabel) -> Option<Yaml> {
    let apex = parsed.iter().flat_map(|(_, docs)| docs.iter()).find(|d| {
        d["kind"].as_str() == Some("Service")
            && d["metadata"]["name"]
                .as_str()
                .is_some_and(|n| !n.ends_with("-primary") && !n.ends_with("-canary"))
            && d["spec"]["selector"][label.key.as_str()].as_str() == Some(&label.primary)
    })?;
    let mut apex = apex.clone();
    // sluice no longer manages it.
    if let Some(Yaml::Hash(labels)) =
        map_at(&mut apex, &["metadata"]).and_then(|m| m.get_mut(&key("labels")))
    {
        if labels.get(&key(MANAGED_BY)).and_then(Yaml::as_str) == Some("sluice") {
            labels.remove(&key(MANAGED_BY));
        }
        if labels.is_empty() {
            if let Some(meta) = map_at(&mut apex, &["metadata"]) {
                meta.remove(&key("labels"));
            }
        }
    }
    relabel(
        &mut apex,
        &["spec", "selector"],
        &label.key,
        &label.primary,
        &label.value,
    );
    Some(apex)
}

/// The folder's kustomization: the restored workload file and the Services file.
fn kustomization(header: &str, workload_file: &str) -> String {
    let mut kustomization = format!(
        "{header}apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
    );
    let mut names = [workload_file.to_string(), SERVICES_FILE.to_string()];
    names.sort();
    for n in &names {
        kustomization.push_str(&format!("  - {n}\n"));
    }
    kustomization
}

/// Sets `metadata.name`, keeping the namespace.
fn rename_to(doc: &mut Yaml, name: &str) {
    if let Some(meta) = map_at(doc, &["metadata"]) {
        set(meta, "name", key(name));
    }
}

/// At the mapping `path` (when present), `label: from` becomes `label: to`.
fn relabel(doc: &mut Yaml, path: &[&str], label: &str, from: &str, to: &str) {
    let mut cur = &mut *doc;
    for p in path {
        match cur {
            Yaml::Hash(h) => match h.get_mut(&key(p)) {
                Some(next) => cur = next,
                None => return,
            },
            _ => return,
        }
    }
    if let Yaml::Hash(map) = cur {
        if map.get(&key(label)).and_then(Yaml::as_str) == Some(from) {
            set(map, label, key(to));
        }
    }
}

/// The `name` at `path` (when present) loses its `-primary` suffix.
fn strip_primary(doc: &mut Yaml, path: &[&str]) {
    let mut cur = &mut *doc;
    for p in path {
        match cur {
            Yaml::Hash(h) => match h.get_mut(&key(p)) {
                Some(next) => cur = next,
                None => return,
            },
            _ => return,
        }
    }
    if let Yaml::Hash(map) = cur {
        if let Some(base) = map
            .get(&key("name"))
            .and_then(Yaml::as_str)
            .and_then(|n| n.strip_suffix("-primary"))
            .map(str::to_string)
        {
            set(map, "name", key(&base));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRIMARY: &str = "# Generated by sluice for canary prod/web.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-primary
  namespace: prod
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: web-primary
  template:
    metadata:
      labels:
        app.kubernetes.io/name: web-primary
    spec:
      containers:
        - name: app
          image: web:1
          envFrom:
            - secretRef:
                name: web-keys-primary
---
apiVersion: v1
kind: Secret
metadata:
  name: web-keys-primary
  namespace: prod
stringData:
  k: v
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web-hpa-primary
  namespace: prod
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: web-primary
  minReplicas: 4
  maxReplicas: 8
";

    const SERVICES: &str = "# Generated by sluice for canary prod/web.
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: prod
  labels:
    app.kubernetes.io/managed-by: sluice
spec:
  selector:
    app.kubernetes.io/name: web-primary
---
apiVersion: v1
kind: Service
metadata:
  name: web-primary
  namespace: prod
spec:
  selector:
    app.kubernetes.io/name: web-primary
";

    #[test]
    fn the_primary_file_goes_back_to_the_targets_names_with_its_autoscaler() {
        let files = vec![
            ("web-primary.yaml".to_string(), PRIMARY.to_string()),
            ("services.yaml".to_string(), SERVICES.to_string()),
        ];
        let restored = restore("prod/web", "out/web", &files).unwrap();
        assert_eq!(restored.target, "web");
        assert_eq!(restored.images, ["web:1"]);
        let names: Vec<&str> = restored.files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["web.yaml", "services.yaml", "kustomization.yaml"]);
        let docs = YamlLoader::load_from_str(&restored.files[0].1).unwrap();
        let d = &docs[0];
        assert_eq!(d["metadata"]["name"].as_str(), Some("web"));
        assert_eq!(
            d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"].as_str(),
            Some("web")
        );
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]["secretRef"]["name"]
                .as_str(),
            Some("web-keys")
        );
        assert_eq!(docs[1]["metadata"]["name"].as_str(), Some("web-keys"));
        assert!(docs[1]["spec"].is_badvalue(), "a Secret gains no spec");
        let hpa = &docs[2];
        assert_eq!(hpa["metadata"]["name"].as_str(), Some("web-hpa"));
        assert_eq!(hpa["spec"]["scaleTargetRef"]["name"].as_str(), Some("web"));
        assert_eq!(
            hpa["spec"]["minReplicas"].as_i64(),
            Some(4),
            "the primary's bounds"
        );
        let services = YamlLoader::load_from_str(&restored.files[1].1).unwrap();
        assert_eq!(services.len(), 1, "the apex only");
        assert_eq!(
            services[0]["spec"]["selector"]["app.kubernetes.io/name"].as_str(),
            Some("web")
        );
        assert!(
            services[0]["metadata"]["labels"].is_badvalue(),
            "no managed-by sluice"
        );
    }

    #[test]
    fn an_output_without_a_primary_cannot_be_reverted() {
        let files = vec![("services.yaml".to_string(), SERVICES.to_string())];
        let e = restore("prod/web", "out/web", &files)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "out/web: cannot revert the output of deleted canary prod/web: no primary Deployment or DaemonSet (`<target>-primary`) among its files");
    }
}
