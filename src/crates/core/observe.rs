//! Observations: plain data the adapters gather before each decision. [`Observations`] are what
//! the rollout rules judge (source revision, metric values, webhook answers, sync state) and
//! what `sluice audit` replays; [`Facts`] are what the tick learned from git and the forge
//! about the canary's files and approvals (drift, approval pull requests closed or merged),
//! which [`crate::verdict`] weighs before the rules. The core never fetches any of it.
//!
//! Approving is not an observation: an approval is a manual operation (`operate::Approve`)
//! that moves the status past its gate, committed directly or carried by the approval pull
//! request. What the tick observes is what became of that pull request.

use crate::model::WebhookKind;
use crate::status::Status;

/// What a metric query returned.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricValue {
    Value(f64),
    /// The query returned no series.
    NoData,
    /// The query failed (HTTP error, timeout, bad response); the text says why.
    Error(String),
    /// A result that is not one number: what Argo's web provider's `jsonPath` selects (an
    /// object, array, string or bool), judged by an AnalysisTemplate's conditions.
    Structured(crate::argo_expr::Value),
}

#[derive(Debug, Clone, PartialEq)]
pub struct MetricObservation {
    pub name: String,
    pub value: MetricValue,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WebhookObservation {
    pub name: String,
    pub kind: WebhookKind,
    /// `Ok` when the hook answered with a success status; `Err` says what happened.
    pub outcome: Result<(), String>,
}

/// Everything the core may look at for one canary at one tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Observations {
    /// Revision hash of the source (or the route-only `revision` string).
    pub revision: String,
    pub metrics: Vec<MetricObservation>,
    pub webhooks: Vec<WebhookObservation>,
    /// The last commit is applied by the GitOps engine and the canary is ready. Adapters that
    /// cannot tell report `true` after a settle delay.
    pub applied: bool,
    /// The statistical judge's series for a judged canary, when this tick fetched them.
    pub judge: Option<crate::judged::JudgeObservation>,
}

impl Observations {
    /// Observations of a healthy world: the given revision, applied, nothing else.
    pub fn revision(revision: impl Into<String>) -> Observations {
        Observations {
            revision: revision.into(),
            metrics: Vec::new(),
            webhooks: Vec::new(),
            applied: true,
            judge: None,
        }
    }

    /// The answers of webhooks of one kind.
    pub fn hooks(&self, kind: WebhookKind) -> impl Iterator<Item = &WebhookObservation> {
        self.webhooks.iter().filter(move |w| w.kind == kind)
    }
}

/// What the tick learned about a canary besides its [`Observations`]: the facts the core weighs
/// before the rollout rules (see [`crate::verdict::verdict`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// Files sluice owns for the canary changed outside sluice since its last commit for it.
    pub drift: Option<DriftFact>,
    /// The canary's approval pull request was closed without merging under
    /// `forge.onClose: rollback`: the reason to roll back.
    pub rejected: Option<String>,
    /// The canary's status came from a merged approval (`clockFromMerge`): whether the merge
    /// holds what sluice pushed, into the reconciled branch, and who merged it.
    pub merged: Option<MergedApproval>,
    /// The commit that brought the canary's status (a merged approval) is not signed as the
    /// signing policy in force at its parent requires (`signing.required`): why. A commit
    /// never changes the policy that judges it.
    pub unsigned: Option<String>,
    /// A wave's cluster (`cluster:` of the wave) did not answer when the wave was about to
    /// act. The wave holds: nothing is decided for it, so nothing reaches its folder and it
    /// is never promoted on what cannot be seen.
    pub unreachable: Option<Unreachable>,
    /// The repo settings hold every canary for an adoption (`adoption.hold`): a canary
    /// without a status gets its first render, at rest; none starts a rollout.
    pub adoption_hold: bool,
    /// `maxConcurrentCanaries`: the canary wants to start a new revision but the limit is
    /// full ([`crate::concurrency::admit`]): why it waits.
    pub queued: Option<String>,
}

/// A wave's cluster that did not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreachable {
    /// The cluster as people name it: `API server <address>` or `kube context <name>`.
    pub cluster: String,
    /// What asking it gave (a refused connection, a timeout, an error status).
    pub error: String,
}

/// Owned files that differ from sluice's last commit of them.
#[derive(Debug, Clone, PartialEq)]
pub struct DriftFact {
    /// The changed files, sorted (output files, then the status file).
    pub files: Vec<String>,
    /// The newest commit that changed them, as `<short id> by <author>: <subject>`; empty
    /// when unknown.
    pub by: String,
    /// The commit holding sluice's version of the output folder (full hex id).
    pub output_from: String,
    /// The status sluice last committed (or the head's, when sluice's cannot be found).
    pub sluice_status: Status,
    /// What the repo settings (`drift:`) say to do.
    pub policy: DriftPolicy,
    /// `Some(n)`: no commit of sluice's for the files is within the last `n` commits (the
    /// look-back), and they are not what sluice renders for the head's status. sluice's
    /// version cannot be read back, so the canary holds whatever the policy says.
    pub beyond: Option<usize>,
}

/// What a tick does with a canary whose output files or status file changed outside sluice
/// since its last commit for the canary (`drift:` in the repo settings).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DriftPolicy {
    /// `hold` (the default): the canary does not move until the files are sluice's again.
    #[default]
    Hold,
    /// `restore`: the next commit writes back what sluice last committed, then it goes on.
    Restore,
}

/// What an approval merged into the main branch amounts to.
#[derive(Debug, Clone, PartialEq)]
pub enum MergedApproval {
    /// It approves: `by` merged it (a forge login, or git's committer `Name <email>` without a
    /// forge), `source` is the pull request's URL (or the approval branch's name).
    Approved {
        by: Option<String>,
        source: String,
        /// The approval policy that held, when the canary has one.
        policy: Option<crate::approval::Met>,
    },
    /// The merge does not approve: it does not hold what sluice pushed on the approval
    /// branch, its pull request targets another branch than the one sluice reconciles, or
    /// `forge.approvers` does not let the merger approve. `waiting`, the status before the
    /// merge, goes back on the main branch (with every owned file rendered from it).
    Refused {
        waiting: Box<Status>,
        reason: String,
        /// The pull request whose merge was refused, when there was one.
        pr: Option<u64>,
    },
    /// The merge cannot be checked yet (the forge could not say who merged it, or sluice's
    /// change cannot be rendered to compare): nothing is decided for the canary in this tick.
    MergerUnknown(String),
}

/// What the tick knows about a canary whose spec left the repo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletion {
    /// The status file recorded `revertOnDeletion: true`.
    pub reverts: bool,
    /// A YAML file of the repo that does not load (a spec may hide in it), if any.
    pub unloadable: Option<String>,
    /// Some canary spec of the repo does not load.
    pub spec_errors: bool,
}
