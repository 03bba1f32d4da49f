//! Finds the source Deployment a canary rolls out, and the ConfigMaps/Secrets it references,
//! among the objects of the tick's repo [`Snapshot`].
//!
//! Native canaries name the file (`spec.source`); Flagger canaries name the Deployment
//! (`targetRef`), found by kind/name/namespace among the repo's YAML files. sluice's output
//! folders are left out of the kind/name lookups: what sluice wrote is never a source. This
//! module reads no file; the snapshot did.

use std::path::Path;
use std::sync::OnceLock;

use yaml_rust2::Yaml;

use crate::manifest::model::{Canary, Target};
use crate::workload::WorkloadError;
use crate::yaml::snapshot::{
    check_inside, read_bounded, read_inside, Contents, Object, ReadError, Snapshot,
};

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

impl From<Object<'_>> for Manifest {
    fn from(o: Object<'_>) -> Manifest {
        Manifest {
            file: o.file.to_string(),
            line: o.line,
            kind: o.kind.to_string(),
            name: o.name.to_string(),
            namespace: o.namespace.map(str::to_string),
            doc: o.yaml.clone(),
        }
    }
}

/// Nothing read: the index of a canary that has no source (route-only).
static EMPTY: Snapshot = Snapshot::EMPTY;

/// The repo's files outside the snapshot (hidden folders, other extensions) when the repo is
/// not a folder on disk (audit reads git objects): what [`Index::text_of`] and a missing
/// source's message read instead of `root`.
pub trait Outside {
    /// Whether `file` (repo-relative) is a regular file.
    fn is_file(&self, file: &str) -> bool;
    /// The text of `file` read as [`read_bounded`] reads; `None` when absent.
    fn read(&self, file: &str) -> Option<Result<String, ReadError>>;
}

/// The snapshot's Kubernetes objects as workload lookups see them.
#[derive(Clone)]
pub struct Index<'s> {
    snapshot: &'s Snapshot,
    /// Output folders (borrowed: an index is made for every canary a drift check renders, and
    /// copying every output folder of the repo each time was most of making one).
    outputs: &'s [&'s str],
    /// The positions of `outputs` in the folders' order, made by the first lookup over many
    /// of them: a tick's index answers a lookup for every canary, and scanning every output
    /// folder for each answer grew with the square of the canaries. (Positions, not the
    /// folders: a cell holding borrowed folders would tie the index to one lifetime.)
    output_order: OnceLock<Vec<usize>>,
    /// Where files outside the snapshot are read; `None`: from `root` on disk.
    outside: Option<&'s dyn Outside>,
}

/// Up to this many output folders a lookup scans them rather than making the set.
const SCANNED_OUTPUTS: usize = 64;

impl std::fmt::Debug for Index<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("outputs", &self.outputs)
            .field("outside", &self.outside.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for Index<'_> {
    fn default() -> Self {
        Index {
            snapshot: &EMPTY,
            outputs: &[],
            output_order: OnceLock::new(),
            outside: None,
        }
    }
}

impl<'s> Index<'s> {
    /// Lookups in `snapshot`, leaving out the objects in sluice's output folders `outputs`.
    pub fn new(snapshot: &'s Snapshot, outputs: &'s [&'s str]) -> Index<'s> {
        Index {
            snapshot,
            outputs,
            output_order: OnceLock::new(),
            outside: None,
        }
    }

    /// [`Index::new`] for a repo that is not on disk: files outside the snapshot are read from
    /// `outside`, never from a folder.
    pub fn reading(
        snapshot: &'s Snapshot,
        outputs: &'s [&'s str],
        outside: &'s dyn Outside,
    ) -> Index<'s> {
        Index {
            outside: Some(outside),
            ..Index::new(snapshot, outputs)
        }
    }

    /// Whether `file`, which the snapshot did not read, is a regular file of the repo.
    fn is_file_outside(&self, root: &Path, file: &str) -> bool {
        match self.outside {
            Some(outside) => outside.is_file(file),
            None => root.join(file).is_file(),
        }
    }

    /// A file's text as the snapshot read it, output folders included; `None` when the walk did
    /// not read it (absent, or in a hidden folder): then `root` is read directly.
    pub fn text_of(&self, root: &std::path::Path, file: &str) -> Option<String> {
        match self.snapshot.file(file) {
            Some(f) => f.text().map(str::to_string),
            None => match self.outside {
                Some(outside) => outside.read(file).and_then(Result::ok),
                // Never through a link: a linked primary is treated as missing.
                None => read_inside(root, &root.join(file), read_bounded).ok(),
            },
        }
    }

    /// Whether `file` is below none of the output folders (an output folder `o` holds `file`
    /// when `file` is `o`, a `/` and more).
    fn outside_outputs(&self, file: &str) -> bool {
        if self.outputs.len() <= SCANNED_OUTPUTS {
            return !self.outputs.iter().any(|o| {
                file.strip_prefix(o)
                    .is_some_and(|below| below.starts_with('/'))
            });
        }
        let order = self.output_order.get_or_init(|| {
            let mut order: Vec<usize> = (0..self.outputs.len()).collect();
            order.sort_by_key(|&i| self.outputs[i]);
            order
        });
        let is_output = |folder: &str| {
            order
                .binary_search_by(|&i| self.outputs[i].cmp(folder))
                .is_ok()
        };
        // The folders `file` is below are its prefixes that end where a `/` follows.
        !file.match_indices('/').any(|(i, _)| is_output(&file[..i]))
    }

    /// Every object of this kind and name in `namespace` (objects without one are in every
    /// namespace's default, `namespace` itself), outside the output folders, in file order.
    pub fn find<'a>(
        &'a self,
        kind: &'a str,
        namespace: &'a str,
        name: &'a str,
    ) -> impl Iterator<Item = Manifest> + 'a {
        self.objects(kind, namespace, name).map(Manifest::from)
    }

    /// Like [`Index::find`], with each object's line-marked tree (for errors naming a line
    /// inside the object).
    pub fn objects<'a>(
        &'a self,
        kind: &'a str,
        namespace: &'a str,
        name: &'a str,
    ) -> impl Iterator<Item = Object<'s>> + 'a {
        self.snapshot
            .find(kind, name)
            .filter(move |o| o.namespace.unwrap_or(namespace) == namespace)
            .filter(|o| self.outside_outputs(o.file))
    }

    /// Every Kubernetes object of one file, in document order (the file may be in an output
    /// folder); `None` when the snapshot did not read the file.
    fn manifests_in(&self, file: &str) -> Option<Result<Vec<Manifest>, WorkloadError>> {
        let found = self.snapshot.file(file)?;
        Some(match &*found.contents {
            Contents::Unreadable(e) => Err(WorkloadError::Read {
                file: file.to_string(),
                message: match e {
                    ReadError::Io(message) => message.clone(),
                    other => other.to_string(),
                },
            }),
            Contents::Invalid { error, .. } => Err(WorkloadError::Invalid {
                file: file.to_string(),
                line: error.line,
                field: String::new(),
                message: format!("YAML syntax error: {}", error.message),
            }),
            Contents::Yaml { .. } => match found.yaml() {
                Some(Err(e)) => Err(WorkloadError::Invalid {
                    file: file.to_string(),
                    line: e.line,
                    field: String::new(),
                    message: e.message.clone(),
                }),
                Some(Ok(_)) | None => Ok(self
                    .snapshot
                    .objects_in(found)
                    .map(Manifest::from)
                    .collect()),
            },
        })
    }
}

/// The source Deployment of a managed canary.
pub fn find_source(
    root: &Path,
    canary: &Canary,
    index: &Index<'_>,
) -> Result<Manifest, WorkloadError> {
    let ns = canary.id.namespace.as_str();
    match &canary.target {
        Target::Source { path } => {
            let found = match index.manifests_in(path.as_str()) {
                Some(found) => found?,
                // A file the walk leaves out (hidden folder, another extension, a linked
                // folder) exists but was not read: say so rather than "not found".
                None => {
                    let full = root.join(path.as_str());
                    let inside = match index.outside {
                        // Read from git objects: no link is ever there to go through.
                        Some(_) => Ok(()),
                        None => check_inside(root, &full),
                    };
                    let message = match inside {
                        Err(e) => e.to_string(),
                        Ok(()) if index.is_file_outside(root, path.as_str()) => {
                            "sluice reads only regular .yaml and .yml files outside hidden folders"
                                .into()
                        }
                        Ok(()) => {
                            return Err(WorkloadError::SourceMissing {
                                canary: canary.id.to_string(),
                                what: format!("file {path}"),
                            })
                        }
                    };
                    return Err(WorkloadError::Read {
                        file: path.to_string(),
                        message,
                    });
                }
            };
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
        Target::TargetRef { kind, name } => find_one(canary, index, kind, ns, name.as_str()),
        // A Rollout's workload is `workload::rollout`'s to find (its template or workloadRef).
        Target::Rollout { .. } => Err(WorkloadError::SourceMissing {
            canary: canary.id.to_string(),
            what: "a Deployment source (a Rollout's workloads are made from its pod template)"
                .into(),
        }),
        Target::RouteOnly { .. } => Err(WorkloadError::SourceMissing {
            canary: canary.id.to_string(),
            what: "a source (route-only canaries have none)".into(),
        }),
    }
}

/// The one object of `kind` named `name` in `ns`, outside the output folders; none, or two,
/// are errors naming the canary, or the second one's file and line.
pub fn find_one(
    canary: &Canary,
    index: &Index<'_>,
    kind: &str,
    ns: &str,
    name: &str,
) -> Result<Manifest, WorkloadError> {
    let matches: Vec<Manifest> = index.find(kind, ns, name).collect();
    match matches.as_slice() {
        [one] => Ok(one.clone()),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The scan's answer, as every index gave it before the set.
    fn scanned(outputs: &[&str], file: &str) -> bool {
        !outputs.iter().any(|o| {
            file.strip_prefix(o)
                .is_some_and(|below| below.starts_with('/'))
        })
    }

    #[test]
    fn many_output_folders_answer_as_the_scan() {
        let mut names: Vec<String> = (0..200)
            .map(|i| format!("clusters/ns{}/app{i}", i % 7))
            .collect();
        names.extend([
            "odd/".to_string(),
            "deep/a/b/c".to_string(),
            "top".to_string(),
        ]);
        let outputs: Vec<&str> = names.iter().map(String::as_str).collect();
        assert!(outputs.len() > SCANNED_OUTPUTS);
        let index = Index::new(&EMPTY, &outputs);
        let files = [
            "clusters/ns3/app3/deployment.yaml",
            "clusters/ns3/app3",
            "clusters/ns3/app31/deployment.yaml",
            "clusters/ns3/app3x/deployment.yaml",
            "clusters/ns3/deployment.yaml",
            "clusters/ns0/app0/a/b/c.yaml",
            "odd//x.yaml",
            "odd/x.yaml",
            "deep/a/b/c/d.yaml",
            "deep/a/b/cd.yaml",
            "deep/a/b.yaml",
            "top/x.yaml",
            "top.yaml",
            "topx/x.yaml",
            "/top/x.yaml",
            "apps/podinfo/deployment.yaml",
            "",
        ];
        for file in files {
            assert_eq!(
                index.outside_outputs(file),
                scanned(&outputs, file),
                "{file}"
            );
        }
        // A few folders are scanned, and answer the same.
        let few = &outputs[..3];
        let small = Index::new(&EMPTY, few);
        for file in files {
            assert_eq!(small.outside_outputs(file), scanned(few, file), "{file}");
        }
    }
}
