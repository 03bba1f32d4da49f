//! The `sluice plan` simulator: what a canary will do, computed by running [`decide`] on a simulated clock
//! with every check passing, so the plan can never disagree with the engine.

use jiff::Timestamp;
use serde::Serialize;

use crate::decide::{decide, Action, Decision};
use crate::model::{Canary, WebhookKind};
use crate::observe::{MetricObservation, MetricValue, Observations, WebhookObservation};
use crate::operate::{operate, Operation};
use crate::status::Gate;

/// The rollout of one canary, as `plan` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Simulation {
    pub name: String,
    pub namespace: String,
    pub strategy: &'static str,
    /// Canary weights committed during the analysis, in order.
    pub canary_weights: Vec<u8>,
    /// Primary weights committed during promotion, in order.
    pub promotion_primary_weights: Vec<u8>,
    /// Where the rollout waits for a human (or a confirm-* webhook).
    pub approvals: Vec<String>,
    /// Analysis iterations (blue/green, A/B).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    /// From "new revision detected" to "Promotion completed", approvals granted at once.
    pub min_duration_seconds: u64,
    /// Commit subjects-to-be, in order.
    pub events: Vec<String>,
}

const MAX_DECISIONS: usize = 10_000;

/// Every check passes; the confirm-* webhooks answer yes only when `confirmed`.
fn healthy<R>(canary: &Canary<R>, revision: &str, confirmed: bool) -> Observations {
    let metrics = canary
        .analysis
        .metrics
        .iter()
        .map(|m| MetricObservation {
            name: m.name.clone(),
            value: MetricValue::Value(m.range.min.or(m.range.max).unwrap_or(0.0)),
        })
        .chain(canary.analysis.argo.iter().map(|g| MetricObservation {
            name: g.metric.clone(),
            value: MetricValue::Value(passing(g)),
        }))
        .collect();
    let webhooks = canary
        .analysis
        .webhooks
        .iter()
        .filter(|w| w.kind != WebhookKind::Rollback)
        .filter(|w| {
            confirmed
                || !matches!(
                    w.kind,
                    WebhookKind::ConfirmRollout
                        | WebhookKind::ConfirmTrafficIncrease
                        | WebhookKind::ConfirmPromotion
                )
        })
        .map(|w| WebhookObservation {
            name: w.name.clone(),
            kind: w.kind,
            outcome: Ok(()),
        })
        .collect();
    Observations {
        revision: revision.to_string(),
        metrics,
        webhooks,
        applied: true,
        // A judged canary as healthy as its primary: the same series for both, which pass.
        judge: canary.analysis.judge.as_ref().map(|spec| {
            crate::judged::JudgeObservation::Series(
                spec.metrics
                    .iter()
                    .map(|m| crate::judged::MetricSeries {
                        name: m.name.clone(),
                        canary: vec![1.0, 2.0, 3.0],
                        baseline: vec![1.0, 2.0, 3.0],
                    })
                    .collect(),
            )
        }),
    }
}

/// A value an analysis metric's conditions judge Successful, when a few plain ones do (a plan
/// assumes each analysis passes); else 0, and the plan shows where the analysis stops it.
fn passing(gate: &crate::model::ArgoGate) -> f64 {
    const CANDIDATES: [f64; 9] = [0.0, 1.0, 0.5, 0.99, 100.0, 1000.0, -1.0, 0.01, 10.0];
    CANDIDATES
        .into_iter()
        .find(|v| {
            let answer = crate::argo_analysis::answer(gate.list, Some(&MetricValue::Value(*v)));
            crate::argo_analysis::measure(&gate.rules, &answer).phase
                == crate::argo_analysis::Phase::Successful
        })
        .unwrap_or(0.0)
}

fn describe_gate(gate: Gate, step: u32, next_weight: Option<u8>) -> String {
    match (gate, next_weight) {
        (Gate::Rollout, _) => "before rollout".to_string(),
        (Gate::Promotion, _) => "before promotion".to_string(),
        (Gate::TrafficIncrease, Some(w)) => format!("before weight {w} (step {})", step + 1),
        (Gate::TrafficIncrease, None) => format!("after step {step}"),
    }
}

/// Simulates a whole rollout of a new revision.
pub fn simulate<R>(canary: &Canary<R>) -> Simulation {
    let start = Timestamp::UNIX_EPOCH;
    let mut now = start;
    let first = decide(canary, None, &healthy(canary, "promoted", true), now);
    let mut status = first.status;
    let mut out = Simulation {
        name: canary.id.name.to_string(),
        namespace: canary.id.namespace.to_string(),
        strategy: canary.analysis.strategy.name(),
        canary_weights: Vec::new(),
        promotion_primary_weights: Vec::new(),
        approvals: Vec::new(),
        iterations: match &canary.analysis.strategy {
            crate::model::Strategy::Canary { .. } => None,
            crate::model::Strategy::BlueGreen { iterations }
            | crate::model::Strategy::AB { iterations, .. } => Some(*iterations),
        },
        min_duration_seconds: 0,
        events: Vec::new(),
    };
    let steps = crate::decide::canary_steps(canary);
    let mut started: Option<Timestamp> = None;
    for _ in 0..MAX_DECISIONS {
        // Would this tick stop at a gate without approval? Record where.
        let unapproved = decide(canary, Some(&status), &healthy(canary, "new", false), now);
        let gate = match unapproved.action {
            Action::WaitApproval(g) => Some(g),
            Action::WaitRollout => Some(Gate::Rollout),
            _ => None,
        };
        if let Some(gate) = gate {
            let next_weight = steps.get(status.step as usize).map(|s| s.weight);
            let text = describe_gate(gate, status.step, next_weight);
            if !out.approvals.contains(&text) {
                out.approvals.push(text);
            }
        }
        let mut decision = decide(canary, Some(&status), &healthy(canary, "new", true), now);
        // A native approval stays closed whatever `decide` observes: a human approves with a
        // manual operation, the one `sluice approve` and a merged approval pull request commit.
        // The plan grants it at once, replacing the wait by the approved change.
        if matches!(
            decision.action,
            Action::WaitApproval(_) | Action::WaitRollout
        ) {
            if let Ok(approved) = operate(
                canary,
                Some(&decision.status),
                Operation::Approve,
                "plan",
                now,
            ) {
                // The wait's own event ("Halt ... waiting for approval") is its last one.
                let mut events = decision.events;
                events.pop();
                events.extend(approved.events.iter().cloned());
                decision = Decision { events, ..approved };
            }
        }
        match &decision.action {
            Action::AdvanceCanary { to, .. } => out.canary_weights.push(*to),
            Action::AdvancePrimary { weight } => out.promotion_primary_weights.push(*weight),
            Action::StartRollout => started = Some(now),
            Action::Promote if started.is_none() => started = Some(now),
            _ => {}
        }
        if decision.commits() {
            out.events.extend(decision.events.iter().cloned());
        }
        let commits = decision.commits();
        status = decision.status;
        if status.phase == crate::status::Phase::Succeeded && status.promoted_revision == "new" {
            break;
        }
        match decision.wake_at {
            Some(t) if t > now => now = t,
            Some(_) => {}
            None if commits => {}
            None => break,
        }
    }
    if let Some(started) = started {
        out.min_duration_seconds = now.duration_since(started).as_secs().max(0).unsigned_abs();
    }
    out
}
