//! What sluice would have written for a commit: the decision made again by the core, then
//! rendered again on the commit's base (the commit it was made on) into the files and the
//! message sluice writes for it. The one replay of a commit; its callers compare what it
//! gives with what is in git:
//!
//! - `sluice audit` ([`crate::audit`]) with every decision its replay record describes;
//! - the approval check ([`crate::approval`]) with the approval an approval branch carries,
//!   before pushing the branch and when its merge comes back;
//! - drift's verifier ([`crate::drift`]) with the decision a committed status is the outcome
//!   of, to tell sluice's commit from one that only says so.
//!
//! What the decision rests on (a replay record's observations and operation, the facts the
//! caller checked against the history, a status) is given; the base's files come through
//! its [`Base::index`]. Reads nothing else, and writes nothing.

use std::path::Path;

use crate::core::decide::{decide, Decision};
use crate::core::observe::{Facts, Observations, Unreachable};
use crate::core::operate::{operate, NotApplicable};
use crate::core::status::Status;
use crate::core::verdict::{redrawn, verdict};
use crate::gitops::{CommitMessage, FileChange};
use crate::manifest::model::Canary;
use crate::render::replay::{self, By, Record, RecordError};
use crate::render::{self, message, RenderError};
use crate::workload;

/// The commit's base, as sluice reads it.
pub struct Base<'a> {
    /// The work dir the renderers name (and read the repo's files through `index` from).
    pub root: &'a Path,
    /// The base's files: the sources and the output folders kept out of source lookups.
    pub index: &'a workload::Index<'a>,
}

/// What the commit was made from.
pub enum Made<'a> {
    /// The decision a replay record (`Sluice-Replay`) describes, on `status`, the canary's
    /// status at the base: `core::decide` on the observations it recorded, `core::operate`
    /// as it was run (an approval's merge among them), or the verdict on the facts it names.
    /// `facts` are those the caller checked against the history (a drift, a refused
    /// approval's waiting status), `restore` the files a drift restore writes back.
    Recorded {
        status: Option<&'a Status>,
        record: &'a Record,
        facts: &'a Facts,
        restore: &'a [FileChange],
    },
    /// The decision whose outcome is `status` (the core's [`redrawn`]): one that draws the
    /// primary from the source (initialization, promotion: `promoted`), or one that keeps the
    /// primary already in the output folder (every other step).
    Redrawn { status: &'a Status, promoted: bool },
}

/// What sluice would have written.
pub struct Remade {
    pub decision: Decision,
    pub changes: Vec<FileChange>,
    pub message: CommitMessage,
}

#[derive(Debug, thiserror::Error)]
pub enum RemakeError {
    /// The record does not describe a decision the core makes again, or does not read.
    #[error("{0}")]
    Record(String),
    /// The recorded operation does not apply to the status at the base.
    #[error(transparent)]
    NotApplicable(#[from] NotApplicable),
    /// The record describes a change, but the core makes none on the status at the base.
    #[error("the rules make no change here, yet the commit records a decision")]
    NoChange,
    #[error(transparent)]
    Render(#[from] RenderError),
}

impl From<RecordError> for RemakeError {
    fn from(e: RecordError) -> RemakeError {
        RemakeError::Record(e.to_string())
    }
}

/// What sluice would have written for `canary` on `base`, for the decision `made`.
pub fn remake(base: &Base<'_>, canary: &Canary, made: Made<'_>) -> Result<Remade, RemakeError> {
    let (status, record, facts, restore) = match made {
        Made::Redrawn { status, promoted } => {
            let decision = redrawn(status, promoted);
            let changes = render::changes(base.root, canary, &decision, base.index)?;
            let message = message::render(canary, &decision, None);
            return Ok(Remade {
                decision,
                changes,
                message,
            });
        }
        Made::Recorded {
            status,
            record,
            facts,
            restore,
        } => (status, record, facts, restore),
    };
    let now = record.now;
    let on_facts = |facts: &Facts| verdict(canary, status, &none(), facts, now).decision;
    let (decision, operator) = match &record.by {
        By::Decide { .. } => {
            let obs = record.by.observations()?.unwrap_or_else(none);
            (decide(canary, status, &obs, now), None)
        }
        By::Operate {
            op,
            reason,
            operator,
            says,
            clock_from_merge,
        } => {
            let op = replay::operation(op)?;
            let mut decision = operate(canary, status, op, reason, now)?;
            if *clock_from_merge {
                decision.status.clock_from_merge = decision.status.phase.is_active();
            }
            (decision, Some((operator.as_str(), says.as_str())))
        }
        By::Drift { .. } | By::Resume {} => (on_facts(facts), None),
        By::Refused {
            reason, operator, ..
        } => (on_facts(facts), Some((operator.as_str(), reason.as_str()))),
        By::Unreachable { cluster, error } => {
            let facts = Facts {
                unreachable: Some(Unreachable {
                    cluster: cluster.clone(),
                    error: error.clone(),
                }),
                ..Facts::default()
            };
            (on_facts(&facts), None)
        }
        By::Queued { reason } => {
            let facts = Facts {
                queued: Some(reason.clone()),
                ..Facts::default()
            };
            (on_facts(&facts), None)
        }
        By::Record {}
        | By::Revert {}
        | By::WaveRevert { .. }
        | By::RouteSource {}
        | By::Other { .. } => {
            return Err(RemakeError::Record(
                "not a decision a replay rebuilds".to_string(),
            ))
        }
    };
    if !decision.commits() {
        return Err(RemakeError::NoChange);
    }
    let changes = match &record.by {
        // A drift hold or restore, or a cluster outage, is said by the status file (and the
        // files a restore writes back), as the tick writes them.
        By::Drift { .. } | By::Resume {} | By::Unreachable { .. } | By::Queued { .. } => {
            render::drift_changes(canary, &decision, restore)?
        }
        _ => render::changes(base.root, canary, &decision, base.index)?,
    };
    let mut message = message::render(canary, &decision, operator);
    // The judge's trailers, from the recorded series judged again (as the planner adds them).
    if let Ok(Some(obs)) = record.by.observations() {
        let judge = crate::judge::trailers::of(canary, &decision, &obs);
        message.trailers.extend(judge);
    }
    message.trailers.push(record.trailer());
    Ok(Remade {
        decision,
        changes,
        message,
    })
}

/// No observations: a verdict on facts alone (drift, a refused approval) reads none.
fn none() -> Observations {
    Observations::revision("")
}
