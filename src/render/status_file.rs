//! `.sluice/status/<namespace>/<name>.yaml`: the canary's whole state, committed with the
//! files it describes.

use crate::core::status::Status;
use crate::spec::model::CanaryId;

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
    let path = root.join(path_for(id));
    // `symlink_metadata`, not `exists`: a link (even a dangling one) is refused, not absent.
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    match crate::yaml::snapshot::read_inside(root, &path, read) {
        Ok(text) => parse(&text).map(Some),
        Err(crate::yaml::snapshot::ReadError::Io(message)) => Err(message),
        Err(e) => Err(e.to_string()),
    }
}
