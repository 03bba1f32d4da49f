//! Reading an object a Flagger canary references from the repo snapshot (the ApisixRoute of
//! `routeRef`, the Knative Service of `targetRef`): its errors are reported at the object's
//! own file and line, not the canary's.

use crate::yaml::error::SpecError;
use crate::yaml::node::{Key, Node, Value};
use crate::yaml::reader::Reader;
use crate::yaml::snapshot::Object;

/// An error inside a referenced object (another file than the canary's).
pub(crate) fn error_in(
    r: &mut Reader,
    file: &str,
    line: usize,
    field: &str,
    message: impl Into<String>,
) {
    r.errors.push(SpecError {
        file: file.to_string(),
        line,
        field: field.to_string(),
        message: message.into(),
    });
}

/// The error for a reference that two objects answer, `first` and `second`: at the second's
/// `metadata.name`, naming `what` (`Knative Service`) and the reference's `namespace/name`.
pub(crate) fn defined_twice(r: &mut Reader, what: &str, id: &str, first: &Object, second: &Object) {
    error_in(
        r,
        second.file,
        second.line,
        "metadata.name",
        format!(
            "{what} {id} is defined twice (also at {}:{})",
            first.file, first.line
        ),
    );
}

/// Entries of a mapping node, or none.
pub(crate) fn entries(node: &Node) -> &[(Key, Node)] {
    match &node.value {
        Value::Map(entries) => entries,
        _ => &[],
    }
}
