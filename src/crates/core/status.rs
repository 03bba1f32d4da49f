//! The canary's whole state: what `.sluice/status/<namespace>/<name>.yaml` holds.
//!
//! Committed together with the files it describes, so any commit of the config repo says
//! exactly where each canary stood. Times are absolute, so a restart resumes a pause exactly.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// Flagger's canary phases, made explicit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    Initializing,
    Initialized,
    /// A new revision waits for approval to start (confirm-rollout).
    Waiting,
    Progressing,
    /// Holding at a step until the next change is approved.
    WaitingApproval,
    Promoting,
    Finalising,
    Succeeded,
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Initializing => "Initializing",
            Phase::Initialized => "Initialized",
            Phase::Waiting => "Waiting",
            Phase::Progressing => "Progressing",
            Phase::WaitingApproval => "WaitingApproval",
            Phase::Promoting => "Promoting",
            Phase::Finalising => "Finalising",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }

    /// True while an analysis runs (the canary workload is scaled up).
    pub fn is_active(self) -> bool {
        match self {
            Phase::Progressing | Phase::WaitingApproval | Phase::Promoting | Phase::Finalising => {
                true
            }
            Phase::Initializing
            | Phase::Initialized
            | Phase::Waiting
            | Phase::Succeeded
            | Phase::Failed => false,
        }
    }

    /// True while steps are judged: progressing, or holding at a step for approval (the
    /// phases in which a blue/green analysis mirrors traffic).
    pub fn is_analysing(self) -> bool {
        match self {
            Phase::Progressing | Phase::WaitingApproval => true,
            Phase::Initializing
            | Phase::Initialized
            | Phase::Waiting
            | Phase::Promoting
            | Phase::Finalising
            | Phase::Succeeded
            | Phase::Failed => false,
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The change a canary is held before, until approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Gate {
    /// Starting the rollout of a new revision.
    Rollout,
    /// The next traffic increase.
    TrafficIncrease,
    /// The promotion after the last step.
    Promotion,
}

/// One judged check (a metric or a webhook) as recorded in the status and commit body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckRecord {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    pub passed: bool,
    /// Why it failed, or the bound it met: "87.31 < 99", "no data", "HTTP 500".
    pub detail: String,
}

/// The state of one canary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub phase: Phase,
    /// Steps taken in this analysis (1-based index of the current step; 0 before the first).
    pub step: u32,
    pub canary_weight: u8,
    pub primary_weight: u8,
    /// Failed checks in the current analysis.
    pub failed_checks: u32,
    /// Analysis iterations done (blue/green and A/B).
    #[serde(default)]
    pub iterations: u32,
    /// Revision the primary runs.
    pub promoted_revision: String,
    /// Revision under analysis (or last analysed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary_revision: Option<String>,
    /// Route-only mode: the service that currently takes the stable traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_service: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<Gate>,
    /// When the phase last changed.
    pub phase_since: Timestamp,
    /// When the current step (or promotion stage) started; pauses count from here.
    pub step_started: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_check: Option<Timestamp>,
    /// The checks judged at the last decision that judged any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckRecord>,
    /// The last event, as a human reads it.
    pub message: String,
    /// Held by `sluice pause` until `sluice resume`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Set on a change proposed in an approval pull request: when it reaches the branch (the
    /// PR merged), the step's clock restarts at that moment, not when the PR was opened.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clock_from_merge: bool,
    /// Session affinity: the cookie (`name=value`) this rollout sets on responses from the
    /// canary, so those users stay on it. Set while the canary takes traffic (Flagger's
    /// `status.sessionAffinityCookie`); any router reads it through the route state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_cookie: Option<String>,
    /// The cookie of the last rollout once its canary takes no more traffic: the route
    /// expires it (Flagger's `status.previousSessionAffinityCookie`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_session_cookie: Option<String>,
    /// Session affinity with `primaryCookieName`: the cookie (`name=value`) responses from the
    /// primary set while the canary takes traffic, so those users stay on the primary. Made
    /// once and kept for later rollouts, as Flagger keeps its
    /// `status.primarySessionAffinityCookie`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_session_cookie: Option<String>,
    /// Blue/green with `analysis.mirror`: requests are mirrored to the canary (Flagger's
    /// mirror phase, which it reads back from the route).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mirroring: bool,
    /// Files sluice owns that were changed outside sluice and hold the canary (`drift: hold`
    /// in the repo settings); empty when none. Cleared by the commit that resumes it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<String>,
    /// Under `maxConcurrentCanaries`: when the canary was first seen waiting for a free slot
    /// to start its new revision (the tick that first committed the wait). Orders the queue;
    /// cleared once it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<Timestamp>,
    /// A Rollout's analysis: each running metric's measurements so far (Argo's
    /// `MetricResult`), which its phase is assessed from. An inline step's are cleared when
    /// the step ends, all of them when an analysis starts again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub analysis: Vec<crate::argo_metric::MetricHistory>,
    /// A Rollout with `rollbackWindow`: the revisions rolled out, oldest first, each once
    /// ([`crate::rollback_window`]); empty for other canaries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rolled_out: Vec<String>,
}

impl Status {
    /// True while the canary holds for a human (or a confirm-* webhook).
    pub fn is_waiting(&self) -> bool {
        matches!(self.phase, Phase::Waiting | Phase::WaitingApproval) && !self.paused
    }
}
