//! `sluice adopt`: moves a config repo that runs Flagger under Flux or Argo CD to sluice's
//! layout, as one change: [`discover`] finds the canaries and what applies their files,
//! [`change`] computes the files (sources out of every applied path, one applier of the
//! outputs, `.sluice/config.yaml` with the adoption hold), the new tree is checked with the
//! same layout rules as `sluice validate`, and [`runbook`] says what to run, in order, to
//! switch without moving traffic. Pure: the CLI (`crate::cli::adopt`) reads the commit and
//! writes the branch. It never decides anything about a rollout. [`check`]: whether each step
//! of the switch is safe to take, decided over facts the CLI observed (`sluice adopt check`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::manifest::applied_by::{self, Applier};
use crate::workload::applied_twice;
use crate::yaml::snapshot::{walks_before, File, Snapshot};

pub mod change;
pub mod check;
pub mod discover;
pub mod runbook;
pub mod text;

use change::Change;
use discover::{Discovery, Engine, Repo};

/// What adopt will not do, where, and what to do by hand instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub file: String,
    /// 1-based; 0 for the repo as a whole.
    pub line: usize,
    pub message: String,
}

impl Refusal {
    pub fn new(file: &str, line: usize, message: String) -> Refusal {
        Refusal {
            file: file.to_string(),
            line,
            message,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

/// The adoption: the files to commit and the runbook to print.
#[derive(Debug, Clone)]
pub struct Adoption {
    pub change: Change,
    pub found: Discovery,
    pub runbook: String,
}

/// Whether adopt reads `name` as YAML.
fn is_yaml(name: &str) -> bool {
    name.ends_with(".yaml")
        || name.ends_with(".yml")
        || name == "Kustomization"
        || name.ends_with("/Kustomization")
}

/// The snapshot and the appliers of a repo's text files.
fn read(files: &BTreeMap<String, String>) -> (Snapshot, Vec<Applier>) {
    let mut snapshot = Snapshot::default();
    for (name, text) in files.iter().filter(|(n, _)| is_yaml(n)) {
        snapshot.put(
            File::from_read(name.clone(), Ok(text.clone())),
            walks_before,
        );
    }
    let sourceignore: BTreeMap<String, String> = files
        .iter()
        .filter(|(n, _)| *n == ".sourceignore" || n.ends_with("/.sourceignore"))
        .map(|(n, t)| (discover::parent(n).to_string(), t.clone()))
        .collect();
    let appliers = applied_by::appliers(&snapshot, &sourceignore);
    (snapshot, appliers)
}

/// The adoption of the repo whose text files (repo-relative path to text) are `files`, for
/// the branch `branch` of the repo sluice reaches at `repo_url`; or every reason it cannot be
/// made.
pub fn adopt(
    files: &BTreeMap<String, String>,
    branch: &str,
    repo_url: &str,
    gave: &runbook::Given,
) -> Result<Adoption, Vec<Refusal>> {
    let (snapshot, appliers) = read(files);
    let repo = Repo {
        snapshot: &snapshot,
        appliers: &appliers,
        names: files,
    };
    let found = discover::discover(&repo)?;
    let (settings, mut notes) = runbook::settings(&found, gave);
    let mut change = change::change(&repo, &found, &settings)?;
    change.notes.append(&mut notes);
    change
        .notes
        .extend(configs_not_in_the_repo(files, &snapshot, &found));
    verify(files, &found, &mut change)?;
    let runbook = runbook::runbook(&found, &change, branch, repo_url);
    Ok(Adoption {
        change,
        found,
        runbook,
    })
}

/// A note per ConfigMap or Secret a canary's target references that the repo does not hold:
/// Flagger's primary uses its `-primary` copy (its config tracker copies each one it finds in
/// the cluster). Under the adoption hold sluice's first render points the primary at that
/// copy too, so the pod template stays Flagger's; the copy must stay in the cluster until the
/// first promotion after the release switches the primary to the original name.
fn configs_not_in_the_repo(
    files: &BTreeMap<String, String>,
    snapshot: &Snapshot,
    found: &Discovery,
) -> Vec<String> {
    let mut notes = Vec::new();
    for canary in &found.canaries {
        let Some(target) = canary.sources.get(1) else {
            continue;
        };
        let Some(text) = files.get(&target.file) else {
            continue;
        };
        let docs = yaml_rust2::YamlLoader::load_from_str(text).unwrap_or_default();
        let Some(doc) = docs.iter().find(|d| {
            d["kind"].as_str() == Some(target.kind.as_str())
                && d["metadata"]["name"].as_str() == Some(target.name.as_str())
        }) else {
            continue;
        };
        for config in crate::workload::configs::references(doc) {
            if snapshot.find(config.kind, &config.name).next().is_none() {
                notes.push(format!(
                    "{}:{}: {} {} is referenced by {} {}'s pod template but is not in the repo: Flagger's primary uses its copy {}-primary, and so does sluice's first render under the adoption hold: nothing restarts. Keep {}-primary in the cluster until the first promotion after `sluice adopt release`, which points {}-primary at {} (its pods restart then, as at any release); delete the copy after that. If the cluster holds no {}-primary (Flagger copies only Opaque, basic-auth, ssh-auth and tls Secrets, and nothing annotated flagger.app/config-tracking: disabled), put the {} in the repo before merging",
                    target.file, target.line, config.kind, config.name, target.kind, target.name,
                    config.name, config.name, target.name, config.name, config.name, config.kind
                ));
            }
        }
    }
    notes
}

/// The files after `change`.
pub fn after(files: &BTreeMap<String, String>, change: &Change) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = files
        .iter()
        .filter(|(n, _)| !change.remove.contains(*n))
        .map(|(n, t)| (n.clone(), t.clone()))
        .collect();
    out.extend(change.write.clone());
    out
}

/// Checks the repo after `change` with `validate`'s layout rules; for Flux, a root
/// `.sourceignore` rule drops the sources when an applier of the whole repo still applies them.
fn verify(
    files: &BTreeMap<String, String>,
    found: &Discovery,
    change: &mut Change,
) -> Result<(), Vec<Refusal>> {
    let moved: BTreeSet<String> = change.moves.iter().map(|(_, to)| to.clone()).collect();
    let (_, appliers) = read(&after(files, change));
    let still = |appliers: &[Applier]| -> Vec<Refusal> {
        moved
            .iter()
            .flat_map(|m| {
                appliers.iter().filter(|a| a.applies_file(m)).map(move |a| {
                    Refusal::new(&a.file, a.line, format!("{} would still apply {m} after the move: exclude {}/ from it by hand (.sourceignore, spec.ignore or directory.exclude), then run adopt again", a.title(), change::SOURCES))
                })
            })
            .collect()
    };
    let mut problems = still(&appliers);
    if !problems.is_empty() && found.engine == Engine::Flux {
        let ignore = files.get(".sourceignore").cloned().unwrap_or_default();
        let sep = if ignore.is_empty() || ignore.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        change.write.insert(
            ".sourceignore".into(),
            format!("{ignore}{sep}# sluice reads these sources; no Kustomization may apply them (sluice adopt)\n/{}/\n", change::SOURCES),
        );
        change.notes.push(format!(
            ".sourceignore: /{}/ added: a Kustomization applies the repo's root",
            change::SOURCES
        ));
        let (_, appliers) = read(&after(files, change));
        problems = still(&appliers);
    }
    let (snapshot, appliers) = read(&after(files, change));
    // One applier per object: nothing the outputs write is still applied from another file.
    let outputs: Vec<&str> = change.outputs.values().map(String::as_str).collect();
    let as_written = |o: &crate::yaml::snapshot::Object<'_>| o.namespace.map(str::to_string);
    for c in &found.canaries {
        let copies = applied_twice::applied_copies(
            &snapshot,
            &appliers,
            &c.namespace,
            &c.written,
            &outputs,
            &as_written,
        );
        for (o, by) in copies {
            let names: Vec<String> = by.iter().map(|a| a.title()).collect();
            problems.push(Refusal::new(o.file, o.line, format!("{} {}/{} would still be applied from this file by {} after the move, and the output of canary {}/{} writes it too: two appliers of one object. Move it out of the applied paths by hand (or delete it: sluice writes it), then run adopt again", o.kind, c.namespace, o.name, names.join(", "), c.namespace, c.name)));
        }
    }
    for (id, folder) in &change.outputs {
        let by: Vec<&Applier> = appliers
            .iter()
            .filter(|a| a.applies_folder(folder))
            .collect();
        if by.len() != 1 {
            let names: Vec<String> = by
                .iter()
                .map(|a| format!("{} ({}:{})", a.title(), a.file, a.line))
                .collect();
            problems.push(Refusal::new(&change.outputs_file, 1, format!("canary {id}'s output folder {folder} would be applied by {} appliers ({}), not exactly one: make {} the only one by hand", by.len(), names.join(", "), change::OUTPUTS_APPLIER)));
        }
    }
    let first_file = found
        .canaries
        .first()
        .map(|c| c.applier.file.clone())
        .unwrap_or_default();
    let parent_applied = appliers.iter().any(|a| a.applies_file(&first_file));
    let outputs_applied = appliers
        .iter()
        .filter(|a| a.applies_file(&change.outputs_file))
        .count();
    if parent_applied && outputs_applied != 1 {
        problems.push(Refusal::new(&change.outputs_file, 1, format!("the new {} would be applied by {outputs_applied} appliers, where {first_file} is applied by one: place it by hand where exactly one applies it", change::OUTPUTS_APPLIER)));
    } else if !parent_applied {
        change.notes.push(format!("{}: nothing in the repo applies {first_file} (flux bootstrap or argocd app create did, outside git); {} beside it is applied the same way", change.outputs_file, change.outputs_file));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}
