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
    let is_primary_workload = |d: &Yaml| {
        matches!(d["kind"].as_str(), Some("Deployment" | "DaemonSet"))
            && d["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-primary"))
    };
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
    let labels = &workload["spec"]["selector"]["matchLabels"];
    let Some((label_key, label_value)) = SELECTOR_LABELS.iter().find_map(|k| {
        labels[*k]
            .as_str()
            .and_then(|v| v.strip_suffix("-primary"))
            .map(|v| (k.to_string(), v.to_string()))
    }) else {
        return Err(fail(format!(
            "{primary_name}: spec.selector.matchLabels has no app, name or app.kubernetes.io/name label ending in -primary"
        )));
    };
    let copies: BTreeSet<ConfigRef> = primary_docs
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
        .collect();
    let primary_label = format!("{label_value}-primary");
    let mut restored = Vec::new();
    for doc in primary_docs {
        let mut doc = doc.clone();
        match doc["kind"].as_str() {
            Some("Deployment" | "DaemonSet") if is_primary_workload(&doc) => {
                rename_to(&mut doc, &target);
                for path in [
                    &["metadata", "labels"][..],
                    &["spec", "selector", "matchLabels"],
                    &["spec", "template", "metadata", "labels"],
                ] {
                    relabel(&mut doc, path, &label_key, &primary_label, &label_value);
                }
                rename_from_primary(&mut doc, &copies);
            }
            Some("ConfigMap" | "Secret" | "HorizontalPodAutoscaler" | "ScaledObject") => {
                if let Some(base) = doc["metadata"]["name"]
                    .as_str()
                    .and_then(|n| n.strip_suffix("-primary"))
                    .map(str::to_string)
                {
                    rename_to(&mut doc, &base);
                }
                // Only where present: `map_at` would add it to a ConfigMap.
                if !doc["spec"]["scaleTargetRef"].is_badvalue() {
                    if let Some(target_ref) = map_at(&mut doc, &["spec", "scaleTargetRef"]) {
                        set(target_ref, "name", key(&target));
                    }
                }
                strip_primary(
                    &mut doc,
                    &["spec", "advanced", "horizontalPodAutoscalerConfig"],
                );
            }
            _ => {}
        }
        restored.push(doc);
    }
    let images = restored
        .first()
        .and_then(|d| d["spec"]["template"]["spec"]["containers"].as_vec())
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c["image"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let apex = parsed.iter().flat_map(|(_, docs)| docs.iter()).find(|d| {
        d["kind"].as_str() == Some("Service")
            && d["metadata"]["name"]
                .as_str()
                .is_some_and(|n| !n.ends_with("-primary") && !n.ends_with("-canary"))
            && d["spec"]["selector"][label_key.as_str()].as_str() == Some(&primary_label)
    });
    let Some(apex) = apex else {
        return Err(fail(format!(
            "no apex Service selecting {label_key}: {primary_label} in {SERVICES_FILE}"
        )));
    };
    let mut apex = apex.clone();
    relabel(
        &mut apex,
        &["spec", "selector"],
        &label_key,
        &primary_label,
        &label_value,
    );
    let header = format!(
        "{RESTORED_MARK} when canary {canary} was deleted with revertOnDeletion: the target at the primary's last spec.\n# sluice no longer writes this file: it is yours to keep, move or delete.\n"
    );
    let workload_file = format!("{target}.yaml");
    let mut kustomization = format!(
        "{header}apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
    );
    let mut names = [workload_file.clone(), SERVICES_FILE.to_string()];
    names.sort();
    for n in &names {
        kustomization.push_str(&format!("  - {n}\n"));
    }
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
