//! `sluice validate`'s layout rules, over what [`crate::manifest::applied_by`] finds: a
//! canary's sources (the canary, its target workload, its autoscaler: what sluice reads and
//! copies) are applied by no Flux Kustomization or Argo CD Application, and each output folder
//! by exactly one. Otherwise the engine and sluice own the same objects (the source Deployment
//! fights sluice's canary Deployment of the same name), or sluice's commits never reach the
//! cluster. Checked only when the repo has at least one Kustomization or Application. Pure.

use std::collections::BTreeSet;

use crate::manifest::applied_by::Applier;
use crate::manifest::model::{Canary, SyncTarget, Target};
use crate::yaml::error::SpecError;
use crate::yaml::snapshot::Snapshot;

/// The layout errors of `canaries` (files named repo-relative, as in `repo`) against
/// `appliers`; none when the repo has no applier.
pub fn check(canaries: &[Canary], repo: &Snapshot, appliers: &[Applier]) -> Vec<SpecError> {
    let mut errors: Vec<SpecError> = Vec::new();
    if appliers.is_empty() {
        return errors;
    }
    let outputs: Vec<&str> = canaries.iter().map(|c| c.output.as_str()).collect();
    let mut push = |e: SpecError| {
        if !errors.contains(&e) {
            errors.push(e);
        }
    };
    for canary in canaries {
        for source in sources(canary, repo, &outputs) {
            for a in appliers.iter().filter(|a| a.applies_file(&source)) {
                let sync = match &canary.sync {
                    Some(SyncTarget::Flux {
                        kustomization,
                        namespace,
                    }) if a.kind == "Kustomization"
                        && kustomization.as_str() == a.name
                        && namespace.as_str() == a.namespace =>
                    {
                        " It is also the Kustomization sync.flux.kustomization names: name one that applies only outputs."
                    }
                    _ => "",
                };
                push(SpecError {
                    file: a.file.clone(),
                    line: a.line,
                    field: a.field.clone(),
                    message: format!(
                        "{} applies {source}, a source of canary {} that sluice reads and copies into {}: both would own its objects. Move the sources out of this path or exclude them (.sourceignore or the GitRepository's spec.ignore for Flux, directory.exclude for Argo CD).{sync}",
                        a.title(),
                        canary.id,
                        canary.output.as_str()
                    ),
                });
            }
        }
        let output = canary.output.as_str();
        let by: Vec<&Applier> = appliers
            .iter()
            .filter(|a| a.applies_folder(output))
            .collect();
        match by.as_slice() {
            [_] => {}
            [] => push(SpecError {
                file: canary.file.clone(),
                line: canary.line,
                field: "spec.output".into(),
                message: format!(
                    "output folder {output} is applied by no Flux Kustomization or Argo CD Application in the repo: sluice's commits would never reach the cluster; point exactly one at it"
                ),
            }),
            many => push(SpecError {
                file: canary.file.clone(),
                line: canary.line,
                field: "spec.output".into(),
                message: format!(
                    "output folder {output} is applied by {}: {}; exactly one must apply it",
                    many.len(),
                    many.iter()
                        .map(|a| format!("{} ({}:{})", a.title(), a.file, a.line))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }
    errors
}

/// The repo files sluice reads as `canary`'s sources: its own file, its target workload and
/// its autoscaler, wherever they are outside sluice's output folders.
fn sources(canary: &Canary, repo: &Snapshot, outputs: &[&str]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    out.insert(canary.file.clone());
    if let Target::Source { path } = &canary.target {
        out.insert(path.as_str().to_string());
    }
    let namespace = canary.id.namespace.as_str();
    let mut named = |kind: &str, name: &str| {
        for o in repo.find(kind, name) {
            let in_output = outputs
                .iter()
                .any(|f| crate::manifest::applied_by::under(o.file, f));
            if !in_output && o.namespace.is_none_or(|ns| ns == namespace) {
                out.insert(o.file.to_string());
            }
        }
    };
    match &canary.target {
        Target::TargetRef { kind, name } => named(kind, name.as_str()),
        // The Rollout is the canary's own file; the Services it names are copied to the
        // output with the selectors sluice adds.
        Target::Rollout {
            stable_service,
            canary_service,
            services_named,
            ..
        } => {
            for (service, is_named) in [stable_service, canary_service]
                .into_iter()
                .zip(services_named)
            {
                if *is_named {
                    named("Service", service.as_str());
                }
            }
        }
        Target::Source { .. } | Target::RouteOnly { .. } => {}
    }
    if let Some(a) = &canary.autoscaler {
        for kind in ["HorizontalPodAutoscaler", "ScaledObject"] {
            named(kind, a.name.as_str());
        }
    }
    out
}
