//! Canaries whose spec left the repo while sluice still holds their record, the status file
//! `.sluice/status/<namespace>/<name>.yaml` (with its `spec:` block, see
//! [`status_file::SpecRecord`]).
//!
//! - With `revertOnDeletion: true` recorded, the next tick reverts the output ([`revert`]):
//!   the target workload at the primary's spec and the apex Service selecting it (see
//!   [`crate::workload::revert`]), the status file removed, one commit saying why.
//! - Without it, the output is left as it is, as Flagger leaves a deleted canary's objects, and
//!   [`orphans`] reports it (`sluice status`, `sluice validate`).
//!
//! A canary counts as deleted only when no `kind: Canary` document of its name is left in the
//! repo, valid or not: a spec with a typo is a spec error, never a deletion. The tick reverts
//! nothing while any spec or YAML file fails to load ([`can_tell`]). Plans only; the tick
//! commits.

use std::path::Path;

use crate::core::model::{short_revision, CanaryId, Name};
use crate::core::status::Status;
use crate::gitops::{CommitMessage, FileChange};
use crate::manifest::load::generated_for;
use crate::manifest::model::Canary;
use crate::render::message::{CANARY, PHASE, REASON, REVISION, WEIGHTS};
use crate::render::status_file::{self, SpecRecord};
use crate::render::GENERATED_MARK;
use crate::workload::revert::{restore, Restored};
use crate::workload::WorkloadError;
use crate::yaml::node::Value;
use crate::yaml::snapshot::{read_inside, Contents, Object, ReadError, Snapshot};

/// Where status files live in the repo.
pub const STATUS_DIR: &str = ".sluice/status";

/// A canary with a status file and no spec left in the repo.
#[derive(Debug, Clone)]
pub struct Deleted {
    pub id: CanaryId,
    /// Repo-relative path of its status file.
    pub status_file: String,
    /// Its last status, or why it cannot be read.
    pub status: Result<Status, String>,
    /// What the status file recorded of its spec; `None` when written before sluice kept a
    /// record (then sluice cannot know whether to revert, and does not).
    pub record: Option<SpecRecord>,
}

impl Deleted {
    /// Whether the recorded spec asked for a revert.
    pub fn reverts(&self) -> bool {
        self.record.as_ref().is_some_and(|r| r.revert_on_deletion)
    }
}

/// Whether any `kind: Canary` document named `id.name` is in the snapshot, in `id`'s namespace
/// or with none set (then it may be this canary: counted as present).
fn spec_present(snapshot: &Snapshot, id: &CanaryId) -> bool {
    // By the line-marked tree: every canary of the repo is looked up here every tick.
    let named = |name: &str| {
        snapshot
            .namespaces("Canary", name)
            .any(|ns| ns.is_none_or(|ns| ns == id.namespace.as_str()))
    };
    // A wave's instance (`<name>.<wave>`) is present while its canary is and still lists
    // the wave: a wave taken out of the list, or waves taken off the canary, leave the
    // instance's status file and folder behind as a deleted canary's.
    named(id.name.as_str())
        || crate::manifest::waves::canary_names(&id.name).any(|canary| {
            let wave = &id.name.as_str()[canary.len() + 1..];
            snapshot
                .find("Canary", canary)
                .filter(|o| o.namespace.is_none_or(|ns| ns == id.namespace.as_str()))
                .any(|o| lists_wave(snapshot, &o, id.namespace.as_str(), wave))
        })
}

/// Whether the canary document `canary` still has the wave `wave`: its `spec.waves`
/// (native) or its `Waves` object (a Flagger canary's `sluice.dev/waves` annotation) lists
/// it. What cannot be told (a list that is not one, a Waves object missing or named twice)
/// counts as listing it: a typo is a spec error, never a deletion.
fn lists_wave(snapshot: &Snapshot, canary: &Object<'_>, namespace: &str, wave: &str) -> bool {
    let flagger = canary
        .api_version
        .is_some_and(|v| v.starts_with("flagger.app/"));
    let list = if flagger {
        let annotation = canary
            .node
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(crate::manifest::waves::ANNOTATION));
        let Some(annotation) = annotation else {
            return false;
        };
        let Some(object) = annotation.as_str() else {
            return true;
        };
        let found: Vec<Object<'_>> = snapshot
            .find("Waves", object)
            .filter(|o| o.namespace.unwrap_or("default") == namespace)
            .collect();
        let [one] = found.as_slice() else {
            return true;
        };
        let Some(list) = one.node.get("spec").and_then(|s| s.get("waves")) else {
            return true;
        };
        list
    } else {
        match canary.node.get("spec").and_then(|s| s.get("waves")) {
            Some(list) => list,
            None => return false,
        }
    };
    let Value::Seq(items) = &list.value else {
        return true;
    };
    items.iter().any(|item| {
        item.get("name")
            .and_then(|n| n.as_str())
            .is_none_or(|n| n == wave)
    })
}

/// Whether the snapshot shows every document of the repo: `None` when every file was read
/// and parsed, else the first file that was not (a canary spec may hide in it).
pub fn can_tell(snapshot: &Snapshot) -> Option<&str> {
    snapshot
        .files()
        .iter()
        .find(|f| !matches!(*f.contents, Contents::Yaml { .. }))
        .map(|f| f.name.as_str())
}

/// Every status file whose canary has no spec in `snapshot`, by namespace and name. `read`
/// reads a file of the work tree `root` (links refused).
pub fn find(
    root: &Path,
    snapshot: &Snapshot,
    read: impl Fn(&Path) -> Result<String, ReadError>,
) -> Vec<Deleted> {
    let list = |folder: &str| -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(root.join(folder)) else {
            return Vec::new();
        };
        entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect()
    };
    find_listed(list, snapshot, |file| {
        read_inside(root, &root.join(file), &read)
    })
}

/// [`find`] in a repo whose folders `list` names the entries of (repo-relative; empty for no
/// folder) and whose status files `read_status` reads: the clone's head, read from its tree.
pub fn find_listed(
    list: impl Fn(&str) -> Vec<String>,
    snapshot: &Snapshot,
    read_status: impl Fn(&str) -> Result<String, ReadError>,
) -> Vec<Deleted> {
    let mut found = Vec::new();
    for ns in list(STATUS_DIR) {
        for file_name in list(&format!("{STATUS_DIR}/{ns}")) {
            let Some(name) = file_name.strip_suffix(".yaml") else {
                continue;
            };
            let (Ok(namespace), Ok(name)) = (Name::parse(&ns), Name::parse(name)) else {
                continue;
            };
            found.push(CanaryId { namespace, name });
        }
    }
    among(found, snapshot, read_status)
}

/// [`find`] among the canaries `found` with a status file, each read by `read_status` (given
/// its repo-relative path): for a repo read from git objects rather than a folder.
pub fn among(
    mut found: Vec<CanaryId>,
    snapshot: &Snapshot,
    read_status: impl Fn(&str) -> Result<String, ReadError>,
) -> Vec<Deleted> {
    let mut out = Vec::new();
    found.sort_by_key(ToString::to_string);
    for id in found {
        if spec_present(snapshot, &id) {
            continue;
        }
        let status_file = status_file::path_for(&id);
        let text = read_status(&status_file).map_err(|e| e.to_string());
        let (status, record) = match &text {
            Ok(text) => (
                status_file::parse(text),
                status_file::record_of(text).ok().flatten(),
            ),
            Err(e) => (Err(e.clone()), None),
        };
        out.push(Deleted {
            id,
            status_file,
            status,
            record,
        });
    }
    out
}

/// A deleted canary's output left in the repo, applied as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// `namespace/name`.
    pub canary: String,
    /// Its status file, when it has one.
    pub status_file: Option<String>,
    /// Its output folder, when known.
    pub output: Option<String>,
}

impl std::fmt::Display for Orphan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = self
            .output
            .as_deref()
            .or(self.status_file.as_deref())
            .unwrap_or(STATUS_DIR);
        let output = self.output.as_deref().unwrap_or("(output folder unknown)");
        let cleanup = match &self.status_file {
            Some(status) => format!("delete {output} and {status}"),
            None => format!("delete {output}"),
        };
        write!(
            f,
            "{at}: canary {} is orphaned: its spec was deleted without revertOnDeletion, so its output {output} is left as it is (as Flagger leaves it) and the GitOps engine keeps applying it; restore the spec, or {cleanup}",
            self.canary
        )
    }
}

/// Orphaned output: deleted canaries whose record does not ask for a revert, and output
/// folders whose generated `kustomization.yaml` names a canary with neither spec nor status
/// file. A deletion with `revertOnDeletion` is not orphaned: the next tick reverts it.
pub fn orphans(
    root: &Path,
    snapshot: &Snapshot,
    read: impl Fn(&Path) -> Result<String, ReadError>,
) -> Vec<Orphan> {
    let deleted = find(root, snapshot, read);
    let mut out: Vec<Orphan> = deleted
        .iter()
        .filter(|d| !d.reverts())
        .map(|d| Orphan {
            canary: d.id.to_string(),
            status_file: Some(d.status_file.clone()),
            output: d
                .record
                .as_ref()
                .map(|r| r.output.clone())
                .or_else(|| generated_folder(snapshot, &d.id.to_string())),
        })
        .collect();
    for file in snapshot.files() {
        let Some(folder) = file.name.strip_suffix("/kustomization.yaml") else {
            continue;
        };
        let Some(canary) = file.text().and_then(generated_for) else {
            continue;
        };
        let Some((ns, name)) = canary.split_once('/') else {
            continue;
        };
        let (Ok(namespace), Ok(name)) = (Name::parse(ns), Name::parse(name)) else {
            continue;
        };
        let id = CanaryId { namespace, name };
        let has_status = std::fs::symlink_metadata(root.join(status_file::path_for(&id))).is_ok();
        if !has_status && !spec_present(snapshot, &id) {
            out.push(Orphan {
                canary: id.to_string(),
                status_file: None,
                output: Some(folder.to_string()),
            });
        }
    }
    out
}

/// The folder of the generated `kustomization.yaml` that names `canary`.
fn generated_folder(snapshot: &Snapshot, canary: &str) -> Option<String> {
    snapshot.files().iter().find_map(|f| {
        let folder = f.name.strip_suffix("/kustomization.yaml")?;
        (f.text().and_then(generated_for) == Some(canary)).then(|| folder.to_string())
    })
}

/// The orphans of the repo holding `path` (the nearest folder with `.git` or `.sluice`);
/// none outside a repo. For `sluice validate`.
pub fn orphans_in_repo_of(path: &Path) -> Vec<Orphan> {
    let Ok(start) = std::path::absolute(path) else {
        return Vec::new();
    };
    let Some(root) = start.ancestors().find(|dir| {
        std::fs::symlink_metadata(dir.join(".git")).is_ok()
            || std::fs::symlink_metadata(dir.join(".sluice")).is_ok()
    }) else {
        return Vec::new();
    };
    let snapshot = Snapshot::read(root);
    orphans(root, &snapshot, crate::yaml::snapshot::read_bounded)
}

/// The commit that brings a status file's record in line with the spec, when they differ on
/// `revertOnDeletion` (the flag was set or cleared while the canary was at rest, or the file
/// predates the record): the same status, the spec's record. A deletion is then judged on the
/// spec as it last was, as Flagger adds or removes its finalizer on the update that changes
/// the flag. `None` when the record already agrees.
pub fn record_update(
    canary: &Canary,
    status: &Status,
    recorded: Option<&SpecRecord>,
) -> Option<(FileChange, CommitMessage)> {
    let was = recorded.is_some_and(|r| r.revert_on_deletion);
    if was == canary.revert_on_deletion {
        return None;
    }
    let record = SpecRecord::of(canary);
    let content = status_file::render_recorded(&canary.id, status, &record).ok()?;
    let change = FileChange {
        path: status_file::path_for(&canary.id),
        content: Some(content),
    };
    let (subject, reason) = if canary.revert_on_deletion {
        (
            format!("{}: revertOnDeletion recorded", canary.id.name),
            "spec sets revertOnDeletion: true: deleting it will revert the output",
        )
    } else {
        (
            format!("{}: revertOnDeletion cleared", canary.id.name),
            "spec no longer sets revertOnDeletion: deleting it will leave the output as it is",
        )
    };
    let message = CommitMessage {
        subject,
        body: format!("{reason}.\n"),
        trailers: vec![
            (CANARY.to_string(), canary.id.to_string()),
            (PHASE.to_string(), status.phase.to_string()),
            (
                WEIGHTS.to_string(),
                format!(
                    "primary={} canary={}",
                    status.primary_weight, status.canary_weight
                ),
            ),
            (REASON.to_string(), reason.to_string()),
        ],
    };
    Some((change, message))
}

/// A revert: its files, its message, and what it restored.
#[derive(Debug, Clone)]
pub struct Revert {
    pub changes: Vec<FileChange>,
    pub message: CommitMessage,
    pub restored: Restored,
}

/// The commit that reverts a deleted canary's output (`revertOnDeletion`), from the files of
/// its recorded output folder in `snapshot`: the restored files written, every other file
/// sluice generated there deleted, the status file removed.
pub fn revert(snapshot: &Snapshot, deleted: &Deleted) -> Result<Revert, WorkloadError> {
    let canary = deleted.id.to_string();
    let Some(record) = &deleted.record else {
        return Err(WorkloadError::Revert {
            folder: deleted.status_file.clone(),
            canary,
            message: "the status file records no output folder".into(),
        });
    };
    let folder = record.output.as_str();
    let prefix = format!("{folder}/");
    let files: Vec<(String, String)> = snapshot
        .files()
        .iter()
        .filter_map(|f| {
            let name = f.name.strip_prefix(&prefix)?;
            Some((name.to_string(), f.text()?.to_string()))
        })
        .collect();
    let restored = restore(&canary, folder, &files)?;
    let mut changes = Vec::new();
    for (name, content) in &restored.files {
        let existing = files.iter().find(|(n, _)| n == name);
        if existing.is_some_and(|(_, text)| !text.starts_with(GENERATED_MARK)) {
            return Err(WorkloadError::Revert {
                folder: folder.to_string(),
                canary,
                message: format!("{prefix}{name} is not a file sluice generated; it is left alone and nothing is reverted"),
            });
        }
        changes.push(FileChange {
            path: format!("{prefix}{name}"),
            content: Some(content.clone()),
        });
    }
    for (name, text) in &files {
        let rewritten = restored.files.iter().any(|(n, _)| n == name);
        if !rewritten && text.starts_with(GENERATED_MARK) {
            changes.push(FileChange {
                path: format!("{prefix}{name}"),
                content: None,
            });
        }
    }
    changes.push(FileChange {
        path: deleted.status_file.clone(),
        content: None,
    });
    let message = message(deleted, record, &restored);
    Ok(Revert {
        changes,
        message,
        restored,
    })
}

fn message(deleted: &Deleted, record: &SpecRecord, restored: &Restored) -> CommitMessage {
    let id = &deleted.id;
    let folder = &record.output;
    let target = &restored.target;
    let images = if restored.images.is_empty() {
        String::new()
    } else {
        format!(" (image {})", restored.images.join(", "))
    };
    let mut body = format!(
        "Terminated canary {}.{}: its spec {} was deleted, and it set revertOnDeletion: true.\n\n{folder}/{target}.yaml: the target {target} at the primary's last spec{images}, with its replicas.\n{folder}/services.yaml: the apex Service, selecting {target}'s pods.\nThe primary and canary workloads, their Services and the route leave the output; {} is removed.\n",
        id.name, id.namespace, record.file, deleted.status_file
    );
    let mut trailers = vec![
        (CANARY.to_string(), id.to_string()),
        (PHASE.to_string(), "Terminated".to_string()),
    ];
    if let Ok(status) = &deleted.status {
        trailers.push((
            REVISION.to_string(),
            short_revision(&status.promoted_revision).to_string(),
        ));
        if let Some(unpromoted) = status
            .canary_revision
            .as_deref()
            .filter(|r| *r != status.promoted_revision)
        {
            body.push_str(&format!(
                "Revision {} was {} and never promoted: the restored workload keeps the primary's revision {}.\n",
                short_revision(unpromoted),
                if status.phase == crate::core::status::Phase::Failed {
                    "rolled back"
                } else {
                    "under analysis"
                },
                short_revision(&status.promoted_revision)
            ));
        }
    }
    trailers.push((
        REASON.to_string(),
        "spec deleted with revertOnDeletion: true".to_string(),
    ));
    CommitMessage {
        subject: format!(
            "{}: spec deleted, output reverted to the primary's spec (revertOnDeletion)",
            id.name
        ),
        body,
        trailers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (file, text) in files {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    const STATUS: (&str, &str) = (".sluice/status/prod/podinfo.yaml", "phase: Initialized\n");

    #[test]
    fn a_spec_that_no_longer_loads_is_not_a_deleted_one() {
        // A typo (stepWeight out of range, unknown field) leaves the document a Canary.
        let broken = "apiVersion: flagger.app/v1beta1\nkind: Canary\nmetadata: {name: podinfo, namespace: prod}\nspec: {analysis: {stepWeight: 500}, typo: 1}\n";
        let dir = repo(&[STATUS, ("apps/podinfo/canary.yaml", broken)]);
        let snapshot = Snapshot::read(dir.path());
        assert!(find(dir.path(), &snapshot, crate::yaml::snapshot::read_bounded).is_empty());
        // Without a namespace it may be this canary too.
        let unnamespaced = "kind: Canary\nmetadata: {name: podinfo}\n";
        let dir = repo(&[STATUS, ("apps/podinfo/canary.yaml", unnamespaced)]);
        let snapshot = Snapshot::read(dir.path());
        assert!(find(dir.path(), &snapshot, crate::yaml::snapshot::read_bounded).is_empty());
    }

    #[test]
    fn a_status_file_without_its_canary_is_deleted_and_reverts_only_when_recorded() {
        let other = "kind: Canary\nmetadata: {name: podinfo, namespace: staging}\n";
        let dir = repo(&[STATUS, ("apps/canary.yaml", other)]);
        let snapshot = Snapshot::read(dir.path());
        let found = find(dir.path(), &snapshot, crate::yaml::snapshot::read_bounded);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id.to_string(), "prod/podinfo");
        assert!(
            !found[0].reverts(),
            "no record: sluice cannot know, and leaves the output"
        );
        let orphans = orphans(dir.path(), &snapshot, crate::yaml::snapshot::read_bounded);
        assert_eq!(orphans.len(), 1);
        assert_eq!(orphans[0].status_file.as_deref(), Some(STATUS.0));
    }

    fn deleted_ids(files: &[(&str, &str)]) -> Vec<String> {
        let dir = repo(files);
        let snapshot = Snapshot::read(dir.path());
        let found = find(dir.path(), &snapshot, crate::yaml::snapshot::read_bounded);
        let orphaned: Vec<String> =
            orphans(dir.path(), &snapshot, crate::yaml::snapshot::read_bounded)
                .into_iter()
                .map(|o| o.canary)
                .collect();
        let ids: Vec<String> = found.iter().map(|d| d.id.to_string()).collect();
        assert_eq!(ids, orphaned, "every deleted instance is reported orphaned");
        ids
    }

    const WAVE_STATUS: [(&str, &str); 3] = [
        (
            ".sluice/status/prod/podinfo.staging.yaml",
            "phase: Succeeded\n",
        ),
        (".sluice/status/prod/podinfo.eu.yaml", "phase: Succeeded\n"),
        (".sluice/status/prod/podinfo.us.yaml", "phase: Succeeded\n"),
    ];

    #[test]
    fn a_wave_taken_out_of_a_native_canary_leaves_an_orphaned_instance() {
        let two_waves = "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: podinfo, namespace: prod}\nspec:\n  waves:\n    - {name: staging, output: clusters/staging/podinfo, settle: 1s}\n    - {name: eu, output: clusters/eu/podinfo, settle: 1s}\n";
        let mut files = WAVE_STATUS.to_vec();
        files.push(("apps/podinfo/canary.yaml", two_waves));
        assert_eq!(deleted_ids(&files), ["prod/podinfo.us"]);
        // Waves taken off the canary: every instance is left behind.
        let no_waves = "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: podinfo, namespace: prod}\nspec: {}\n";
        let mut files = WAVE_STATUS.to_vec();
        files.push(("apps/podinfo/canary.yaml", no_waves));
        assert_eq!(
            deleted_ids(&files),
            ["prod/podinfo.eu", "prod/podinfo.staging", "prod/podinfo.us"]
        );
        // A list that cannot be read is a spec error, not a deletion.
        let broken = "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: podinfo, namespace: prod}\nspec: {waves: oops}\n";
        let mut files = WAVE_STATUS.to_vec();
        files.push(("apps/podinfo/canary.yaml", broken));
        assert!(deleted_ids(&files).is_empty());
    }

    #[test]
    fn a_wave_taken_out_of_a_flagger_canary_waves_object_leaves_an_orphaned_instance() {
        let flagger = "apiVersion: flagger.app/v1beta1\nkind: Canary\nmetadata:\n  name: podinfo\n  namespace: prod\n  annotations: {sluice.dev/waves: fleet}\nspec: {}\n";
        let waves = "apiVersion: sluice.dev/v1alpha1\nkind: Waves\nmetadata: {name: fleet, namespace: prod}\nspec:\n  waves:\n    - {name: staging, output: clusters/staging/podinfo, settle: 1s}\n    - {name: us, output: clusters/us/podinfo, settle: 1s}\n";
        let mut files = WAVE_STATUS.to_vec();
        files.extend([
            ("apps/podinfo/canary.yaml", flagger),
            ("apps/podinfo/waves.yaml", waves),
        ]);
        assert_eq!(deleted_ids(&files), ["prod/podinfo.eu"]);
        // The Waves object gone too: a spec error (the annotation names nothing), not a
        // deletion.
        let mut files = WAVE_STATUS.to_vec();
        files.push(("apps/podinfo/canary.yaml", flagger));
        assert!(deleted_ids(&files).is_empty());
        // The annotation removed: the canary has no waves, every instance is left behind.
        let plain = "apiVersion: flagger.app/v1beta1\nkind: Canary\nmetadata: {name: podinfo, namespace: prod}\nspec: {}\n";
        let mut files = WAVE_STATUS.to_vec();
        files.extend([
            ("apps/podinfo/canary.yaml", plain),
            ("apps/podinfo/waves.yaml", waves),
        ]);
        assert_eq!(deleted_ids(&files).len(), 3);
        // The whole canary deleted: every instance is reported.
        let mut files = WAVE_STATUS.to_vec();
        files.push(("apps/podinfo/waves.yaml", waves));
        assert_eq!(deleted_ids(&files).len(), 3);
    }

    #[test]
    fn generated_output_with_neither_spec_nor_status_is_orphaned() {
        let kustomization = "# Generated by sluice for canary prod/podinfo. Do not edit: sluice overwrites this file.\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n";
        let dir = repo(&[("clusters/prod/podinfo/kustomization.yaml", kustomization)]);
        let snapshot = Snapshot::read(dir.path());
        let found = orphans(dir.path(), &snapshot, crate::yaml::snapshot::read_bounded);
        assert_eq!(
            found,
            [Orphan {
                canary: "prod/podinfo".into(),
                status_file: None,
                output: Some("clusters/prod/podinfo".into()),
            }]
        );
        assert!(found[0]
            .to_string()
            .starts_with("clusters/prod/podinfo: canary prod/podinfo is orphaned"));
    }
}
