//! A human edit of a canary's route source (`spec.routeSource`) while the canary holds: the
//! copy in the output follows at the next tick, in a commit of its own that changes only
//! `route.yaml`, rendered at the status's weights and route state (the status file is not
//! touched, so the rollout does not move). Without it an edit would wait for the canary's next
//! decision, which for an idle canary is the next rollout.
//!
//! Pure but for reading the route file already committed (through the tick's index). The loop
//! (`plan`) and `sluice audit` (which makes the commit again on its parent) both call it.

use std::path::Path;

use crate::core::status::Status;
use crate::gitops::{CommitMessage, FileChange};
use crate::manifest::model::Canary;
use crate::render::message::{CANARY, PHASE, REASON, WEIGHTS};
use crate::render::{backends, route_at, route_weights, RenderError, GENERATED_MARK};
use crate::route::route_source::source_file;
use crate::route::ROUTE_FILE_NAME;
use crate::workload;

/// The route file rendered again from the canary's route source at `status`, with its commit
/// message, when it differs from the one committed; `None` when the canary has no route
/// source, nothing was rendered yet (the next decision writes it) or the copy is current.
pub fn route_refresh(
    root: &Path,
    canary: &Canary,
    status: &Status,
    index: &workload::Index,
) -> Result<Option<(FileChange, CommitMessage)>, RenderError> {
    let Some(source) = source_file(&canary.route) else {
        return Ok(None);
    };
    let path = canary.output.join(ROUTE_FILE_NAME);
    let committed = match index.text_of(root, &path) {
        // A file sluice did not generate is the decision's to refuse, not this commit's.
        Some(text) if text.starts_with(GENERATED_MARK) => text,
        _ => return Ok(None),
    };
    let (primary, canary_backend) = backends(canary, status);
    let weights = route_weights(canary, status);
    let route = route_at(canary, status, (&primary, &canary_backend), weights)?;
    let Some(route) = route.filter(|r| r.content != committed) else {
        return Ok(None);
    };
    let weights = format!(
        "primary={} canary={}",
        status.primary_weight, status.canary_weight
    );
    let reason = format!("{source} changed: {path} follows it at the current weights");
    let message = CommitMessage {
        subject: format!("{}: route source {source} changed", canary.id.name),
        body: format!("{reason} ({weights}); the rollout does not move.\n"),
        trailers: vec![
            (CANARY.to_string(), canary.id.to_string()),
            (PHASE.to_string(), status.phase.to_string()),
            (WEIGHTS.to_string(), weights),
            (REASON.to_string(), reason),
        ],
    };
    Ok(Some((FileChange::write(path, route.content), message)))
}
