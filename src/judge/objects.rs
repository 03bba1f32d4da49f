//! The `sluice.dev/v1alpha1` `Judge` objects of a repo, checked by `sluice validate` as
//! MetricTemplates and AlertProviders are: every problem with its file, line and field, and
//! two Judges of one name in one namespace.

use crate::judge::config::{read_object, API_VERSION, KIND};
use crate::yaml::error::SpecError;
use crate::yaml::reader::Reader;
use crate::yaml::snapshot::Snapshot;

/// Every problem of every `Judge` in the snapshot.
pub fn check_all(snapshot: &Snapshot) -> Vec<SpecError> {
    let mut errors = Vec::new();
    let mut seen: Vec<(String, String)> = Vec::new();
    for object in snapshot.objects() {
        if object.kind != KIND || object.api_version != Some(API_VERSION) {
            continue;
        }
        let mut r = Reader::new(object.file);
        read_object(&mut r, object.node);
        let id = (
            object.namespace.unwrap_or("default").to_string(),
            object.name.to_string(),
        );
        if seen.contains(&id) {
            let line = object
                .node
                .get("metadata")
                .and_then(|m| m.get("name"))
                .map_or(object.line, |n| n.line);
            r.error(
                line,
                "metadata.name",
                format!("a second Judge {}/{}", id.0, id.1),
            );
        }
        seen.push(id);
        errors.extend(r.errors);
    }
    errors
}
