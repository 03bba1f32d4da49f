//! The workloads of a Rollout's `experiment` step, rendered into git while the rollout
//! stands at the step ([`running_at`]): one file per template,
//! `<rollout>-experiment-<template>.yaml`, holding a Deployment of the stable workload's pod
//! template (`specRef: stable`, the promoted spec) or the Rollout's (`specRef: canary`) with
//! the template's replicas, the template's pod metadata and the role label
//! `experiment-<template>` (so neither the stable nor the canary Service selects its pods), and
//! a Service of the same name when the template has `service` or a `weight` (its ports those
//! of the pod's containers, as Argo's Experiment makes it).
//!
//! Once the experiment no longer runs, [`files`] names every file an experiment of the
//! Rollout may have written, so the caller removes those sluice generated. Decides nothing
//! (the core's [`running_at`] does).

use yaml_rust2::Yaml;

use crate::core::argo_experiment::{running_at, ExperimentTemplate, SpecRef};
use crate::core::status::Status;
use crate::manifest::model::{Canary, Target};
use crate::route::ROLLOUT_ROLE_LABEL as ROLE_LABEL;
use crate::workload::manifests::emit;
use crate::workload::source::find_one as one;
use crate::workload::yaml_edit::{key, map_at, rename, set};
use crate::workload::{Index, WorkloadError};

/// The role label value of a template's pods.
pub fn role(template: &str) -> String {
    format!("experiment-{template}")
}

/// The file (and object name) of a template's workload of the Rollout `rollout`.
fn file_of(rollout: &str, template: &str) -> String {
    format!("{rollout}-{}.yaml", role(template))
}

/// Every file an experiment of the canary may write (those of all its templates).
pub fn files(canary: &Canary) -> Vec<String> {
    let Target::Rollout {
        name, experiments, ..
    } = &canary.target
    else {
        return Vec::new();
    };
    experiments
        .iter()
        .flat_map(|e| e.templates.iter())
        .map(|t| file_of(name.as_str(), &t.name))
        .collect()
}

/// The files of the experiment running at `status` (none when none runs): `canary_doc` is the
/// Rollout's workload (the canary's spec), `stable_text` the stable workload's file.
pub fn render(
    canary: &Canary,
    status: &Status,
    index: &Index,
    canary_doc: &Yaml,
    stable_text: &str,
) -> Result<Vec<(String, String)>, WorkloadError> {
    let Target::Rollout {
        name, experiments, ..
    } = &canary.target
    else {
        return Ok(Vec::new());
    };
    let Some(running) = running_at(experiments, status) else {
        return Ok(Vec::new());
    };
    let ns = canary.id.namespace.as_str();
    let rollout = one(canary, index, "Rollout", ns, name.as_str())?;
    // The step as written, for each template's pod `metadata`: the k-th experiment step.
    let k = experiments
        .iter()
        .position(|e| e.step == running.step)
        .unwrap_or(0);
    let written = match &rollout.doc["spec"]["strategy"]["canary"]["steps"] {
        Yaml::Array(steps) => steps
            .iter()
            .filter(|s| !s["experiment"].is_badvalue())
            .nth(k)
            .map(|s| s["experiment"].clone()),
        _ => None,
    }
    .unwrap_or(Yaml::BadValue);
    let stable_doc = yaml_rust2::YamlLoader::load_from_str(stable_text)
        .ok()
        .and_then(|docs| {
            docs.into_iter()
                .find(|d| d["kind"].as_str() == Some("Deployment"))
        })
        .unwrap_or_else(|| canary_doc.clone());
    let mut out = Vec::new();
    for t in &running.templates {
        let pod_source = match t.spec_ref {
            SpecRef::Stable => &stable_doc,
            SpecRef::Canary => canary_doc,
        };
        let metadata = match &written["templates"] {
            Yaml::Array(ts) => ts
                .iter()
                .find(|w| w["name"].as_str() == Some(t.name.as_str()))
                .map(|w| w["metadata"].clone()),
            _ => None,
        }
        .unwrap_or(Yaml::BadValue);
        let object = format!("{}-{}", name.as_str(), role(&t.name));
        let workload = workload(pod_source, t, &object, ns, &metadata);
        let mut docs = vec![workload.clone()];
        if t.service {
            docs.push(service(&workload, &object, ns));
        }
        out.push((file_of(name.as_str(), &t.name), emit(canary, &docs)?));
    }
    Ok(out)
}

/// The template's Deployment `object`: `source`'s pod template with the template's role
/// label, pod metadata and replicas.
fn workload(
    source: &Yaml,
    t: &ExperimentTemplate,
    object: &str,
    ns: &str,
    metadata: &Yaml,
) -> Yaml {
    let mut doc = source.clone();
    rename(&mut doc, object, ns);
    for field in ["labels", "annotations"] {
        if let Yaml::Hash(extra) = &metadata[field] {
            if let Some(m) = map_at(&mut doc, &["spec", "template", "metadata", field]) {
                for (k, v) in extra {
                    m.insert(k.clone(), v.clone());
                }
            }
        }
    }
    for path in [
        &["spec", "selector", "matchLabels"][..],
        &["spec", "template", "metadata", "labels"][..],
    ] {
        if let Some(labels) = map_at(&mut doc, path) {
            set(labels, ROLE_LABEL, key(&role(&t.name)));
        }
    }
    if let Some(spec) = map_at(&mut doc, &["spec"]) {
        set(spec, "replicas", Yaml::Integer(i64::from(t.replicas)));
    }
    doc
}

/// The template's Service `object`: selecting the workload's pods, a port for each port of
/// its containers.
fn service(workload: &Yaml, object: &str, ns: &str) -> Yaml {
    let mut ports = Vec::new();
    if let Yaml::Array(containers) = &workload["spec"]["template"]["spec"]["containers"] {
        for c in containers {
            let Yaml::Array(cports) = &c["ports"] else {
                continue;
            };
            for p in cports {
                let Some(number) = p["containerPort"].as_i64() else {
                    continue;
                };
                let mut port = yaml_rust2::yaml::Hash::new();
                if let Some(n) = p["name"].as_str() {
                    port.insert(key("name"), key(n));
                }
                port.insert(key("port"), Yaml::Integer(number));
                port.insert(key("targetPort"), Yaml::Integer(number));
                if let Some(proto) = p["protocol"].as_str() {
                    port.insert(key("protocol"), key(proto));
                }
                ports.push(Yaml::Hash(port));
            }
        }
    }
    let mut spec = yaml_rust2::yaml::Hash::new();
    spec.insert(
        key("selector"),
        workload["spec"]["selector"]["matchLabels"].clone(),
    );
    spec.insert(key("ports"), Yaml::Array(ports));
    let mut meta = yaml_rust2::yaml::Hash::new();
    meta.insert(key("name"), key(object));
    meta.insert(key("namespace"), key(ns));
    let mut doc = yaml_rust2::yaml::Hash::new();
    doc.insert(key("apiVersion"), key("v1"));
    doc.insert(key("kind"), key("Service"));
    doc.insert(key("metadata"), Yaml::Hash(meta));
    doc.insert(key("spec"), Yaml::Hash(spec));
    Yaml::Hash(doc)
}
