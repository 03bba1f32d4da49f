//! Finds the source Deployment a canary rolls out, and the ConfigMaps/Secrets in the repo.
//!
//! Native canaries name the file (`spec.source`); Flagger canaries name the Deployment
//! (`targetRef`), found by kind/name/namespace among the repo's YAML files.

use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

use crate::spec::load::yaml_files;
use crate::spec::model::{Canary, Target};
use crate::spec::node::parse_documents;
use crate::workload::WorkloadError;

/// One Kubernetes document found in the repo.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Repo-relative file.
    pub file: String,
    pub line: usize,
    pub kind: String,
    pub name: String,
    /// `None` when the manifest does not set one.
    pub namespace: Option<String>,
    /// The document, order preserved, for copying.
    pub doc: Yaml,
}

/// Reads every Kubernetes document of one file (documents without kind/name are skipped).
pub fn manifests_in(root: &Path, file: &str) -> Result<Vec<Manifest>, WorkloadError> {
    let text = std::fs::read_to_string(root.join(file)).map_err(|e| WorkloadError::Read {
        file: file.to_string(),
        message: e.to_string(),
    })?;
    let nodes = parse_documents(&text).map_err(|e| WorkloadError::Invalid {
        file: file.to_string(),
        line: e.line,
        field: String::new(),
        message: format!("YAML syntax error: {}", e.message),
    })?;
    let docs = YamlLoader::load_from_str(&text).map_err(|e| WorkloadError::Invalid {
        file: file.to_string(),
        line: e.marker().line(),
        field: String::new(),
        message: e.to_string(),
    })?;
    let mut out = Vec::new();
    for (node, doc) in nodes.iter().zip(docs) {
        let kind = doc["kind"].as_str().map(str::to_string);
        let name = doc["metadata"]["name"].as_str().map(str::to_string);
        if let (Some(kind), Some(name)) = (kind, name) {
            let namespace = doc["metadata"]["namespace"].as_str().map(str::to_string);
            out.push(Manifest {
                file: file.to_string(),
                line: node.root.line,
                kind,
                name,
                namespace,
                doc,
            });
        }
    }
    Ok(out)
}

/// Every Kubernetes document in the repo outside hidden folders and the given output folders.
pub fn repo_manifests(root: &Path, skip: &[&str]) -> Result<Vec<Manifest>, WorkloadError> {
    let files = yaml_files(root).map_err(|e| WorkloadError::Read {
        file: ".".into(),
        message: e.to_string(),
    })?;
    let mut out = Vec::new();
    for path in files {
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('\\', "/");
        if skip.iter().any(|s| rel.starts_with(&format!("{s}/"))) {
            continue;
        }
        // A file that is not valid YAML is the spec loader's business; skip it here.
        if let Ok(found) = manifests_in(root, &rel) {
            out.extend(found);
        }
    }
    Ok(out)
}

/// The source Deployment of a managed canary.
pub fn find_source(
    root: &Path,
    canary: &Canary,
    all: &[Manifest],
) -> Result<Manifest, WorkloadError> {
    let ns = canary.id.namespace.as_str();
    let in_ns = |m: &Manifest| m.namespace.as_deref().unwrap_or(ns) == ns;
    match &canary.target {
        Target::Source { path } => {
            if !root.join(path.as_str()).is_file() {
                return Err(WorkloadError::SourceMissing {
                    canary: canary.id.to_string(),
                    what: format!("file {path}"),
                });
            }
            let found = manifests_in(root, path.as_str())?;
            let deployments: Vec<Manifest> = found
                .iter()
                .filter(|m| m.kind == "Deployment")
                .cloned()
                .collect();
            match deployments.len() {
                1 => Ok(deployments.into_iter().next().ok_or_else(|| {
                    WorkloadError::SourceMissing {
                        canary: canary.id.to_string(),
                        what: path.to_string(),
                    }
                })?),
                0 => Err(WorkloadError::NotDeployment {
                    file: path.to_string(),
                    found: found.first().map_or("no Kubernetes object".into(), |m| {
                        format!("kind {}", m.kind)
                    }),
                }),
                n => Err(WorkloadError::Invalid {
                    file: path.to_string(),
                    line: deployments[1].line,
                    field: "kind".into(),
                    message: format!("expected one Deployment in spec.source, found {n}"),
                }),
            }
        }
        Target::TargetRef { kind, name } => {
            let matches: Vec<&Manifest> = all
                .iter()
                .filter(|m| m.kind == *kind && m.name == name.as_str() && in_ns(m))
                .collect();
            match matches.as_slice() {
                [one] => Ok((*one).clone()),
                [] => Err(WorkloadError::SourceMissing {
                    canary: canary.id.to_string(),
                    what: format!("{kind} {ns}/{name} in the repo's YAML files"),
                }),
                [a, b, ..] => Err(WorkloadError::Invalid {
                    file: b.file.clone(),
                    line: b.line,
                    field: "metadata.name".into(),
                    message: format!(
                        "{kind} {ns}/{name} is defined twice (also at {}:{})",
                        a.file, a.line
                    ),
                }),
            }
        }
        Target::RouteOnly { .. } => Err(WorkloadError::SourceMissing {
            canary: canary.id.to_string(),
            what: "a source (route-only canaries have none)".into(),
        }),
    }
}
