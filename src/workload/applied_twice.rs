//! One applier per object: what a managed canary's output folder writes besides the canary
//! workload (itself a source), and the copies of those objects that a Flux Kustomization or an
//! Argo CD Application of the repo also applies from another file. Two appliers of one object
//! fight: each apply undoes the other's, and for the apex Service whenever the other copy wins
//! its selector (the source's, `app: <name>`) sends the traffic to the canary pods, which are
//! none at rest: an outage. `sluice validate` reports each copy at its line; `sluice adopt`
//! moves each out of the applied paths with the sources. Pure: a function of the repo's
//! snapshot and the appliers [`crate::manifest::applied_by`] found.

use std::collections::BTreeSet;

use crate::manifest::applied_by::{under, Applier};
use crate::manifest::model::{Canary, Target};
use crate::route::Revisions;
use crate::workload::configs::references;
use crate::yaml::error::SpecError;
use crate::yaml::snapshot::{Object, Snapshot};

/// An object sluice writes into a canary's output folder, as an applier names it (in the
/// canary's namespace).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Written {
    /// The API group: `""` for the core group, `apps`, `autoscaling`, `keda.sh`.
    pub group: String,
    pub kind: String,
    pub name: String,
}

impl Written {
    fn new(group: &str, kind: &str, name: String) -> Written {
        Written {
            group: group.to_string(),
            kind: kind.to_string(),
            name,
        }
    }

    /// Whether `o` is this object (its namespace aside).
    fn is(&self, o: &Object<'_>) -> bool {
        o.kind == self.kind && o.name == self.name && group(o.api_version) == self.group
    }
}

/// The API group of an `apiVersion` (`apps/v1` -> `apps`, `v1` -> `""`).
fn group(api_version: Option<&str>) -> &str {
    api_version
        .and_then(|a| a.rsplit_once('/'))
        .map_or("", |(g, _)| g)
}

/// The group of an autoscaler kind.
fn autoscaler_group(kind: &str) -> &'static str {
    if kind == "ScaledObject" {
        "keda.sh"
    } else {
        "autoscaling"
    }
}

/// What the output of a canary whose target is the workload `workload` (`kind`, name, its
/// parsed document) writes, besides that workload: `<workload>-primary`, the Services
/// `<service>`, `<service>-primary` and `<service>-canary`, each ConfigMap and Secret the pod
/// template references that `in_repo` says the repo holds (sluice copies it under its own
/// name for the canary and as `<name>-primary`), and the primary's autoscaler
/// `<autoscaler>-primary` (`kind`, name). The canary's autoscaler keeps the source's name:
/// it is a source.
pub fn written(
    workload: (&str, &str, &yaml_rust2::Yaml),
    service: &str,
    autoscaler: Option<(&str, &str)>,
    in_repo: &dyn Fn(&str, &str) -> bool,
) -> Vec<Written> {
    let (kind, name, doc) = workload;
    let mut out = vec![Written::new("apps", kind, format!("{name}-primary"))];
    for suffix in ["", "-primary", "-canary"] {
        out.push(Written::new("", "Service", format!("{service}{suffix}")));
    }
    for r in references(doc) {
        if in_repo(r.kind, &r.name) {
            out.push(Written::new("", r.kind, format!("{}-primary", r.name)));
            out.push(Written::new("", r.kind, r.name));
        }
    }
    if let Some((kind, name)) = autoscaler {
        out.push(Written::new(
            autoscaler_group(kind),
            kind,
            format!("{name}-primary"),
        ));
    }
    out.sort();
    out.dedup();
    out
}

/// Every object of `repo` that is one of `written` in `namespace` (by `namespace_of`, `None`
/// when the repo does not say, which matches), outside the output folders `outputs`, in a file
/// an applier applies: each with those appliers.
pub fn applied_copies<'s, 'a>(
    repo: &'s Snapshot,
    appliers: &'a [Applier],
    namespace: &str,
    written: &[Written],
    outputs: &[&str],
    namespace_of: &dyn Fn(&Object<'_>) -> Option<String>,
) -> Vec<(Object<'s>, Vec<&'a Applier>)> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for w in written {
        for o in repo.find(&w.kind, &w.name) {
            if !w.is(&o) || outputs.iter().any(|f| under(o.file, f)) {
                continue;
            }
            if namespace_of(&o).is_some_and(|ns| ns != namespace) {
                continue;
            }
            let by: Vec<&Applier> = appliers.iter().filter(|a| a.applies_file(o.file)).collect();
            if !by.is_empty() && seen.insert((o.file.to_string(), o.line)) {
                out.push((o, by));
            }
        }
    }
    out
}

/// What `canary`'s output writes, when sluice writes its workloads (not route-only, nor a
/// router that runs both revisions in its route object) and its target is a Flagger
/// `targetRef` or a native `spec.source` in `repo`.
pub fn written_by(canary: &Canary, repo: &Snapshot) -> Vec<Written> {
    if matches!(canary.route.revisions(), Revisions::InRoute { .. }) {
        return Vec::new();
    }
    let namespace = canary.id.namespace.as_str();
    let in_namespace = |o: &Object<'_>| o.namespace.is_none_or(|ns| ns == namespace);
    let target = match &canary.target {
        Target::TargetRef { kind, name } => repo.find(kind, name.as_str()).find(in_namespace),
        Target::Source { path } => repo
            .objects()
            .find(|o| o.file == path.as_str() && o.kind == "Deployment"),
        // An Argo Rollouts target renders other objects (`workload::rollout`): not checked
        // here yet.
        Target::RouteOnly { .. } | Target::Rollout { .. } => None,
    };
    let Some(target) = target else {
        return Vec::new();
    };
    let autoscaler = canary
        .autoscaler
        .as_ref()
        .map(|a| (a.kind.as_str(), a.name.as_str()));
    let in_repo = |kind: &str, name: &str| repo.find(kind, name).any(|o| in_namespace(&o));
    written(
        (target.kind, target.name, target.yaml),
        canary.service.name.as_str(),
        autoscaler,
        &in_repo,
    )
}

/// `validate`'s rule: an error at each copy, in a file an applier applies, of an object a
/// canary's output writes (`canaries` and their files named repo-relative, as in `repo`).
pub fn check(canaries: &[Canary], repo: &Snapshot, appliers: &[Applier]) -> Vec<SpecError> {
    let outputs: Vec<&str> = canaries.iter().map(|c| c.output.as_str()).collect();
    let mut errors = Vec::new();
    for canary in canaries {
        let namespace = canary.id.namespace.as_str();
        let written = written_by(canary, repo);
        let as_written = |o: &Object<'_>| o.namespace.map(str::to_string);
        for (o, by) in applied_copies(repo, appliers, namespace, &written, &outputs, &as_written) {
            let names: Vec<String> = by
                .iter()
                .map(|a| format!("{} ({}:{})", a.title(), a.file, a.line))
                .collect();
            errors.push(SpecError {
                file: o.file.to_string(),
                line: o.line,
                field: String::new(),
                message: format!(
                    "{} {namespace}/{} is applied from this file by {}, and the output of canary {} ({}) writes it too: two appliers of one object undo each other's applies (a Service's selector among them: the apex Service would select the canary pods, none at rest). Move this file out of the applied path with the canary's sources (`sluice adopt` does), or delete this copy: sluice writes the object",
                    o.kind,
                    o.name,
                    names.join(", "),
                    canary.id,
                    canary.output.as_str()
                ),
            });
        }
    }
    errors
}
