//! `.sluice/status/<namespace>/<name>.yaml`: the canary's whole state, committed with the
//! files it describes.

use serde::{Deserialize, Serialize};

use crate::core::status::Status;
use crate::manifest::model::{Canary, CanaryId};

/// What sluice must still know of a canary once its spec is deleted: where its spec and output
/// were, and whether to revert the output (Flagger's `revertOnDeletion`). Kept in the status
/// file's `spec:` block, written with every decision, so a deletion is judged on the spec as
/// sluice last acted on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecRecord {
    /// The canary spec's file.
    pub file: String,
    /// The canary's output folder.
    pub output: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub revert_on_deletion: bool,
}

impl SpecRecord {
    pub fn of(canary: &Canary) -> SpecRecord {
        SpecRecord {
            file: canary.file.clone(),
            output: canary.output.as_str().to_string(),
            revert_on_deletion: canary.revert_on_deletion,
        }
    }
}

/// The status file's `spec:` block, written after the status.
#[derive(Serialize)]
struct Recording<'a> {
    spec: &'a SpecRecord,
}

/// The `spec:` block read on its own (the status ignores it).
#[derive(Deserialize)]
struct Recorded {
    #[serde(default)]
    spec: Option<SpecRecord>,
}

/// The repo-relative path of a canary's status file.
pub fn path_for(id: &CanaryId) -> String {
    format!(".sluice/status/{}/{}.yaml", id.namespace, id.name)
}

/// The status file's text, with a header saying sluice owns it.
pub fn render(id: &CanaryId, status: &Status) -> Result<String, serde_saphyr::SerializeError> {
    Ok(format!(
        "# Status of canary {id}, written by sluice with every decision. Do not edit: use\n# `sluice approve|promote|abort|retry {id}` or change the canary spec instead.\n{}",
        to_yaml(status)?
    ))
}

/// [`render`] with the canary's [`SpecRecord`] after the status.
pub fn render_recorded(
    id: &CanaryId,
    status: &Status,
    record: &SpecRecord,
) -> Result<String, serde_saphyr::SerializeError> {
    let mut text = render(id, status)?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&serde_saphyr::to_string(&Recording { spec: record })?);
    Ok(text)
}

/// The [`SpecRecord`] of a status file's text; `None` when it has none (written before sluice
/// kept one).
pub fn record_of(text: &str) -> Result<Option<SpecRecord>, String> {
    serde_saphyr::from_str::<Recorded>(text)
        .map(|r| r.spec)
        .map_err(|e| e.to_string())
}

/// The status as YAML (the core defines it; YAML is an adapter's business).
pub fn to_yaml(status: &Status) -> Result<String, serde_saphyr::SerializeError> {
    serde_saphyr::to_string(status)
}

/// Reads a status back from [`to_yaml`]'s text.
pub fn from_yaml(text: &str) -> Result<Status, serde_saphyr::Error> {
    serde_saphyr::from_str(text)
}

/// Parses a status file; the error names the field that was wrong.
pub fn parse(text: &str) -> Result<Status, String> {
    from_yaml(text).map_err(|e| e.to_string())
}

/// Reads a canary's status file from the work tree with `read`; `None` when the canary has
/// none yet.
pub fn read(
    root: &std::path::Path,
    id: &CanaryId,
    read: impl FnOnce(&std::path::Path) -> Result<String, crate::yaml::snapshot::ReadError>,
) -> Result<Option<Status>, String> {
    read_recorded(root, id, read).map(|found| found.map(|(status, _)| status))
}

/// [`read`], with the status file's [`SpecRecord`] (`None` in a file written before sluice
/// kept one).
pub fn read_recorded(
    root: &std::path::Path,
    id: &CanaryId,
    read: impl FnOnce(&std::path::Path) -> Result<String, crate::yaml::snapshot::ReadError>,
) -> Result<Option<(Status, Option<SpecRecord>)>, String> {
    let path = root.join(path_for(id));
    // `symlink_metadata`, not `exists`: a link (even a dangling one) is refused, not absent.
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    from_read(crate::yaml::snapshot::read_inside(root, &path, read)).map(Some)
}

/// The status and [`SpecRecord`] of a status file that is there, from what reading it gave
/// (read from a folder, or from git objects).
pub fn from_read(
    read: Result<String, crate::yaml::snapshot::ReadError>,
) -> Result<(Status, Option<SpecRecord>), String> {
    match read {
        Ok(text) => {
            let status = parse(&text)?;
            Ok((status, record_of(&text)?))
        }
        Err(crate::yaml::snapshot::ReadError::Io(message)) => Err(message),
        Err(e) => Err(e.to_string()),
    }
}
