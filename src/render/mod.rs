//! A decision becomes the files of one commit and its message: the route (through the
//! canary's router), the managed workloads and Services, the output folder's
//! `kustomization.yaml`, and the status file.
//!
//! Pure apart from reading the output folder's current files, to refuse overwriting a file a
//! human wrote. Nothing here commits: the tick hands the result to the git adapter.

pub mod analysis_job;
pub mod kustomization;
pub mod message;
pub mod replay;
pub mod route_refresh;
pub mod status_file;

use std::path::Path;

use crate::core::decide::{Action, Decision, DriftStep};
use crate::core::status::{Phase, Status};
use crate::gitops::FileChange;
use crate::manifest::model::{Canary, Strategy, Target};
use crate::route::{render_route, Backends, Revisions, RouteState, Weights, ROUTE_FILE_NAME};
use crate::workload;

/// Marks files sluice generated; any other file in an output folder is never overwritten.
pub const GENERATED_MARK: &str = crate::manifest::load::GENERATED_MARK;

/// Why a decision's files could not be rendered; the tick skips that canary only.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Workload(#[from] workload::WorkloadError),
    #[error(transparent)]
    Route(#[from] crate::route::RouteError),
    #[error("{path}: refusing to overwrite a file sluice did not generate; choose another spec.output or remove the file")]
    Foreign { path: String },
    #[error("cannot serialize the status: {0}")]
    Serialize(String),
    #[error("canary {canary}: {message}")]
    Job { canary: String, message: String },
}

/// The route weights' backends: managed canaries route to `<svc>-primary`/`<svc>-canary`;
/// route-only canaries to the stable service and the other one; a route that runs the
/// revisions itself (a Knative Service) to the promoted revision and the one under analysis
/// (the same one when none is).
pub fn backends(canary: &Canary, status: &Status) -> (String, String) {
    if let Revisions::InRoute { .. } = canary.route.revisions() {
        let primary = status.promoted_revision.clone();
        let canary = status
            .canary_revision
            .clone()
            .unwrap_or_else(|| primary.clone());
        return (primary, canary);
    }
    match &canary.target {
        Target::RouteOnly { services, .. } => {
            let stable = status
                .stable_service
                .as_deref()
                .unwrap_or(services[0].as_str());
            let other = if stable == services[0].as_str() {
                services[1].as_str()
            } else {
                services[0].as_str()
            };
            (stable.to_string(), other.to_string())
        }
        // Argo Rollouts routes to the Services the Rollout names, which select the stable
        // and the canary workload.
        Target::Rollout {
            stable_service,
            canary_service,
            ..
        } => (stable_service.to_string(), canary_service.to_string()),
        Target::Source { .. } | Target::TargetRef { .. } => (
            format!("{}-primary", canary.service.name),
            format!("{}-canary", canary.service.name),
        ),
    }
}

/// The weights the route carries: the status weights, except during an A/B analysis, where
/// the rule that matches the A/B headers sends its traffic to the canary (Flagger's A/B).
pub fn route_weights(canary: &Canary, status: &Status) -> Weights {
    let ab_running = matches!(canary.analysis.strategy, Strategy::AB { .. })
        && matches!(status.phase, Phase::Progressing | Phase::WaitingApproval);
    if ab_running {
        Weights {
            primary: 0,
            canary: 100,
        }
    } else {
        Weights {
            primary: status.primary_weight,
            canary: status.canary_weight,
        }
    }
}

/// The route file for `status`, splitting `weights` between the `(primary, canary)` backends.
pub(crate) fn route_at(
    canary: &Canary,
    status: &Status,
    (primary, canary_backend): (&str, &str),
    weights: Weights,
) -> Result<Option<crate::route::RenderedFile>, RenderError> {
    let backends = Backends {
        primary,
        canary: canary_backend,
    };
    Ok(render_route(
        canary,
        &backends,
        weights,
        &RouteState::of(status),
    )?)
}

/// Every file a decision writes: the output folder (route, workloads, kustomization) and the
/// status file. Output files already there come from the tick's snapshot (`index`), so a file
/// sluice did not generate is never overwritten.
pub fn changes(
    root: &Path,
    canary: &Canary,
    decision: &Decision,
    index: &workload::Index,
) -> Result<Vec<FileChange>, RenderError> {
    let status = &decision.status;
    let (primary, canary_backend) = backends(canary, status);
    let mut weights = route_weights(canary, status);
    // Revisions in the route (Knative) from promotion on: the primary revision is the canary
    // revision, which takes all traffic (Flagger's primary and canary run the same spec then
    // too).
    let in_route = matches!(canary.route.revisions(), Revisions::InRoute { .. });
    if in_route && primary == canary_backend {
        weights = Weights {
            primary: 100,
            canary: 0,
        };
    }
    let route = route_at(canary, status, (&primary, &canary_backend), weights)?;
    let mut changes = Vec::new();
    let mut files = Vec::new();
    match route {
        Some(route) => files.push((route.file_name, route.content)),
        // A router with no route object (`kubernetes`): a route file sluice wrote for an
        // earlier provider goes, so the folder holds only what the kustomization lists.
        None => {
            let path = canary.output.join(ROUTE_FILE_NAME);
            if index
                .text_of(root, &path)
                .is_some_and(|text| text.starts_with(GENERATED_MARK))
            {
                changes.push(FileChange {
                    path,
                    content: None,
                });
            }
        }
    }
    files.extend(workload::render(root, canary, decision, index)?);
    // A job metric's Job while it measures; the Job file of a measurement taken goes, when
    // sluice wrote it.
    let jobs = analysis_job::files(canary, status).map_err(|message| RenderError::Job {
        canary: canary.id.to_string(),
        message,
    })?;
    for name in analysis_job::all_file_names(canary) {
        let path = canary.output.join(&name);
        if !jobs.iter().any(|(n, _)| *n == name)
            && index
                .text_of(root, &path)
                .is_some_and(|text| text.starts_with(GENERATED_MARK))
        {
            changes.push(FileChange {
                path,
                content: None,
            });
        }
    }
    files.extend(jobs);
    let names: Vec<String> = files.iter().map(|(n, _)| n.clone()).collect();
    // An experiment's workloads go once it no longer runs (only files sluice generated).
    for file in workload::rollout_experiment::files(canary) {
        let path = canary.output.join(&file);
        if !names.contains(&file)
            && index
                .text_of(root, &path)
                .is_some_and(|text| text.starts_with(GENERATED_MARK))
        {
            changes.push(FileChange {
                path,
                content: None,
            });
        }
    }
    files.push((
        "kustomization.yaml".to_string(),
        kustomization::render(&canary.id.to_string(), &names),
    ));
    for (name, content) in files {
        let path = canary.output.join(&name);
        if let Some(existing) = index.text_of(root, &path) {
            if !existing.starts_with(GENERATED_MARK) {
                return Err(RenderError::Foreign { path });
            }
        }
        changes.push(FileChange {
            path,
            content: Some(content),
        });
    }
    let status_text =
        status_file::render_recorded(&canary.id, status, &status_file::SpecRecord::of(canary))
            .map_err(|e| RenderError::Serialize(e.to_string()))?;
    changes.push(FileChange {
        path: status_file::path_for(&canary.id),
        content: Some(status_text),
    });
    Ok(changes)
}

/// The files of a drift decision's commit (a hold, a restore, a resume; a wave's cluster
/// outage too): the restored files, then the status file with the decision's status.
pub fn drift_changes(
    canary: &Canary,
    decision: &Decision,
    restore: &[FileChange],
) -> Result<Vec<FileChange>, RenderError> {
    let mut changes = match &decision.action {
        Action::Drift(DriftStep::Restore { .. }) => restore.to_vec(),
        _ => Vec::new(),
    };
    changes.push(status_change(canary, &decision.status)?);
    Ok(changes)
}

fn status_change(canary: &Canary, status: &Status) -> Result<FileChange, RenderError> {
    let text = status_file::render(&canary.id, status)
        .map_err(|e| RenderError::Serialize(e.to_string()))?;
    Ok(FileChange::write(status_file::path_for(&canary.id), text))
}
