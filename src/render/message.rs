//! Commit messages: a subject that says what happened, a body with the reasons (Flagger-style
//! events and the checks table), and trailers machines read back (`sluice history`).

use crate::core::decide::{Action, Decision, DriftStep};
use crate::core::number::fmt_num;
use crate::core::status::{Gate, Status};
use crate::core::trailer::check_trailer;
use crate::gitops::CommitMessage;
use crate::manifest::model::{Canary, Strategy, Target};

/// Trailer keys, in the order they are written.
pub const CANARY: &str = "Sluice-Canary";
pub const PHASE: &str = "Sluice-Phase";
pub const STEP: &str = "Sluice-Step";
pub const WEIGHTS: &str = "Sluice-Weights";
pub const REVISION: &str = "Sluice-Revision";
/// On a wave instance's commits: the wave's name (see [`crate::core::waves`]).
pub const WAVE: &str = "Sluice-Wave";
/// One per check the decision judged; the value is [`crate::core::trailer::check_trailer`]'s.
pub const CHECK: &str = "Sluice-Check";
/// On the commit that records an approval: the forge login of who merged the approval pull
/// request, or the operator (`--as`) of `sluice approve`.
pub const APPROVED_BY: &str = "Sluice-Approved-By";
/// Where the approval came from: the pull request's URL, or `cli`.
pub const APPROVAL: &str = "Sluice-Approval";
/// The approval policy a merged approval met, in one line (`2 from alice, bob; merge: human`).
pub const APPROVAL_POLICY: &str = "Sluice-Approval-Policy";
pub const OPERATOR: &str = "Sluice-Operator";
pub const REASON: &str = "Sluice-Reason";
/// In a commit holding several canaries' decisions (`commits: perTick`): the canary's own
/// subject line.
pub const DECISION: &str = "Sluice-Decision";
/// One per file sluice owns that someone else changed and that holds the canary
/// (`drift: hold`).
pub const DRIFT: &str = "Sluice-Drift";
/// One per file a `drift: restore` commit wrote back.
pub const RESTORED: &str = "Sluice-Restored";
/// The commit whose version of the files a `drift: restore` commit wrote back.
pub const RESTORED_FROM: &str = "Sluice-Restored-From";

fn step_count(canary: &Canary) -> usize {
    match &canary.analysis.strategy {
        Strategy::Canary { steps } => steps.len(),
        Strategy::BlueGreen { iterations } | Strategy::AB { iterations, .. } => {
            *iterations as usize
        }
    }
}

fn step_text(canary: &Canary, status: &Status) -> String {
    match &canary.analysis.strategy {
        Strategy::Canary { steps } => format!("{}/{}", status.step, steps.len()),
        Strategy::BlueGreen { iterations } | Strategy::AB { iterations, .. } => {
            format!("{}/{}", status.iterations, iterations)
        }
    }
}

/// The subject line for a decision.
pub fn subject(canary: &Canary, decision: &Decision) -> String {
    let n = &canary.id.name;
    let s = &decision.status;
    let rev = s
        .canary_revision
        .as_deref()
        .map(crate::core::model::short_revision)
        .unwrap_or_default();
    match &decision.action {
        Action::Hold => format!("{n}: no change"),
        Action::Initialize => format!("{n}: initialization done, all traffic on the primary"),
        Action::WaitRollout => format!("{n}: new revision {rev} waits for approval to start"),
        Action::StartRollout => format!("{n}: new revision {rev} detected, scaling up the canary"),
        Action::Restart => format!("{n}: new revision {rev} detected, restarting the analysis"),
        Action::Cancel => format!("{n}: back at the promoted revision, analysis cancelled"),
        Action::AdvanceCanary { from, to } => format!(
            "{n}: advance canary weight {from} -> {to} (step {}/{})",
            s.step.max(1),
            step_count(canary).max(1)
        ),
        Action::AdvanceIteration { done, of } => {
            format!("{n}: analysis iteration {done}/{of} passed")
        }
        Action::FailedCheck => format!(
            "{n}: failed check {}/{} at canary weight {}",
            s.failed_checks, canary.analysis.threshold, s.canary_weight
        ),
        Action::Measured => format!(
            "{n}: analysis running at canary weight {} (step {})",
            s.canary_weight,
            step_text(canary, s)
        ),
        Action::WaitApproval(gate) => format!(
            "{n}: waiting for approval of the {} (step {})",
            match gate {
                Gate::Rollout => "rollout",
                Gate::TrafficIncrease => "next traffic increase",
                Gate::Promotion => "promotion",
            },
            step_text(canary, s)
        ),
        Action::Promote => format!("{n}: promote revision {rev} to the primary"),
        Action::AdvancePrimary { weight } => match &canary.target {
            // The promoted revision runs on the canary service until the promotion finalises.
            Target::RouteOnly { .. } => format!(
                "{n}: route {weight}% to {} (promotion)",
                super::backends(canary, s).1
            ),
            Target::Source { .. } | Target::TargetRef { .. } => {
                format!("{n}: advance primary weight {weight} (promotion)")
            }
            Target::Rollout { .. } => {
                format!("{n}: advance stable weight {weight} (promotion)")
            }
        },
        Action::Finalise => match &canary.target {
            // The user owns both workloads: sluice scales nothing, it moved the traffic.
            Target::RouteOnly { .. } => format!(
                "{n}: promotion completed, {} takes all traffic",
                super::backends(canary, s).0
            ),
            Target::Source { .. } | Target::TargetRef { .. } | Target::Rollout { .. } => {
                format!("{n}: promotion completed, {FINALISED_SCALED_DOWN}")
            }
        },
        Action::Rollback { reason, .. } => format!("{n}: roll back: {reason}"),
        Action::PromotionFailed { reason } => {
            format!("{n}: promotion failed, all traffic to the canary: {reason}")
        }
        Action::ApprovalMerged => format!("{n}: approval merged, step clock started"),
        Action::Pause => paused_subject(n.as_str()),
        Action::Resume => format!("{n}: resumed"),
        Action::Drift(DriftStep::Hold { files }) => {
            format!("{n}: held, {} changed outside sluice", files.join(", "))
        }
        Action::Drift(DriftStep::Restore { files, .. }) => {
            format!("{n}: restore {} changed outside sluice", files.join(", "))
        }
        Action::Drift(DriftStep::Resolved) => {
            format!("{n}: owned files are sluice's again, resuming")
        }
        Action::Unreachable => format!("{n}: held, its cluster does not answer"),
        Action::Queued => format!("{n}: waiting to start, maxConcurrentCanaries reached"),
    }
}

/// How a managed canary's finalisation subject ends; a route-only canary's said it too
/// before it said which service takes all traffic ([`earlier_wording`]).
const FINALISED_SCALED_DOWN: &str = "canary scaled down";

/// `text` (a commit message the rules write) as sluice wrote it before the subject of a
/// route-only canary's finalisation said which service takes all traffic; `None` when that
/// subject is not its first line. `sluice audit` accepts either wording.
pub fn earlier_wording(text: &str) -> Option<String> {
    let (subject, rest) = text.split_once('\n').unwrap_or((text, ""));
    let (head, tail) = subject.split_once(": promotion completed, ")?;
    if !tail.ends_with(" takes all traffic") {
        return None;
    }
    let newline = if text.contains('\n') { "\n" } else { "" };
    Some(format!(
        "{head}: promotion completed, {FINALISED_SCALED_DOWN}{newline}{rest}"
    ))
}

/// The subject of the commit `sluice pause` makes on canary `name` (the status reader finds
/// who paused it by this subject).
pub fn paused_subject(name: &str) -> String {
    format!("{name}: paused")
}

/// The checks table of a status, one line per check.
pub fn checks_table(status: &Status) -> String {
    let mut out = String::new();
    for c in &status.checks {
        let bound = match (c.min, c.max) {
            (Some(lo), Some(hi)) => format!(" (min {} max {})", fmt_num(lo), fmt_num(hi)),
            (Some(lo), None) => format!(" (min {})", fmt_num(lo)),
            (None, Some(hi)) => format!(" (max {})", fmt_num(hi)),
            (None, None) => String::new(),
        };
        let value = c.value.map(fmt_num).unwrap_or_else(|| c.detail.clone());
        let verdict = if c.passed { "pass" } else { "FAIL" };
        out.push_str(&format!("{} {value}{bound} {verdict}\n", c.name));
    }
    out
}

/// The whole message for a decision; `operator`/`reason` come from manual operations.
pub fn render(
    canary: &Canary,
    decision: &Decision,
    operator: Option<(&str, &str)>,
) -> CommitMessage {
    let s = &decision.status;
    let mut body = String::new();
    for e in &decision.events {
        body.push_str(e);
        body.push('\n');
    }
    let table = checks_table(s);
    if !table.is_empty() && decision.action != Action::Initialize {
        body.push('\n');
        body.push_str(&table);
    }
    let revision = s
        .canary_revision
        .clone()
        .unwrap_or_else(|| s.promoted_revision.clone());
    let mut trailers = vec![
        (CANARY.to_string(), canary.id.to_string()),
        (PHASE.to_string(), s.phase.to_string()),
        (STEP.to_string(), step_text(canary, s)),
        (
            WEIGHTS.to_string(),
            format!("primary={} canary={}", s.primary_weight, s.canary_weight),
        ),
        (
            REVISION.to_string(),
            crate::core::model::short_revision(&revision).to_string(),
        ),
    ];
    if let Some(wave) = &canary.wave {
        trailers.insert(1, (WAVE.to_string(), wave.name.to_string()));
    }
    for check in &decision.checks {
        trailers.push((CHECK.to_string(), check_trailer(check)));
    }
    match &decision.action {
        Action::Drift(DriftStep::Hold { files }) => {
            trailers.extend(files.iter().map(|f| (DRIFT.to_string(), f.clone())));
        }
        Action::Drift(DriftStep::Restore { files, from }) => {
            trailers.extend(files.iter().map(|f| (RESTORED.to_string(), f.clone())));
            trailers.push((RESTORED_FROM.to_string(), from.clone()));
        }
        _ => {}
    }
    if let Some((who, why)) = operator {
        trailers.push((OPERATOR.to_string(), who.to_string()));
        trailers.push((REASON.to_string(), why.replace('\n', " ")));
    }
    CommitMessage {
        subject: subject(canary, decision),
        body,
        trailers,
    }
}

/// Who approved and where: the `Sluice-Approved-By` and `Sluice-Approval` trailers, put
/// before `Sluice-Operator` (so they stay in the canary's trailer group). `by` is `None`
/// only when the approval's merger cannot be known (no forge configured).
pub fn with_approval(message: CommitMessage, by: Option<&str>, source: &str) -> CommitMessage {
    with_approvers(message, by.into_iter(), source, None)
}

/// [`with_approval`] for an approval policy that held: one `Sluice-Approved-By` per approver
/// it counted (the team that let them approve in parentheses), and `Sluice-Approval-Policy`.
pub fn with_policy(
    message: CommitMessage,
    met: &crate::core::approval::Met,
    source: &str,
) -> CommitMessage {
    let approvers: Vec<String> = met
        .approvals
        .iter()
        .map(|a| match &a.team {
            Some(team) => format!("{} ({}{team})", a.login, crate::core::approval::TEAM_PREFIX),
            None => a.login.clone(),
        })
        .collect();
    let policy = met.policy.to_string();
    with_approvers(
        message,
        approvers.iter().map(String::as_str),
        source,
        Some(&policy),
    )
}

fn with_approvers<'a>(
    mut message: CommitMessage,
    approvers: impl Iterator<Item = &'a str>,
    source: &str,
    policy: Option<&str>,
) -> CommitMessage {
    let at = message
        .trailers
        .iter()
        .position(|(k, _)| k == OPERATOR)
        .unwrap_or(message.trailers.len());
    let mut add = Vec::new();
    for by in approvers {
        add.push((APPROVED_BY.to_string(), by.replace('\n', " ")));
    }
    add.push((APPROVAL.to_string(), source.replace('\n', " ")));
    if let Some(policy) = policy {
        add.push((APPROVAL_POLICY.to_string(), policy.replace('\n', " ")));
    }
    message.trailers.splice(at..at, add);
    message
}

/// One commit message for several canaries' decisions (`commits: perTick`). The body has a
/// paragraph per canary (its subject, then its events indented); the trailers are each
/// message's trailers in turn, each group starting at `Sluice-Canary` and ending with
/// `Sluice-Decision`, the canary's own subject. A single message is returned unchanged.
pub fn fold(messages: &[CommitMessage]) -> Option<CommitMessage> {
    let (first, rest) = messages.split_first()?;
    if rest.is_empty() {
        return Some(first.clone());
    }
    let mut body = String::new();
    let mut trailers = Vec::new();
    for m in messages {
        body.push_str(&m.subject);
        body.push('\n');
        for line in m.body.lines().filter(|l| !l.trim().is_empty()) {
            body.push_str("  ");
            body.push_str(line);
            body.push('\n');
        }
        body.push('\n');
        trailers.extend(m.trailers.iter().cloned());
        trailers.push((DECISION.to_string(), m.subject.clone()));
    }
    Some(CommitMessage {
        subject: format!(
            "{} canary decisions: {} (and {} more)",
            messages.len(),
            first.subject,
            rest.len()
        ),
        body,
        trailers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gitops::{parse_trailers, trailer_group};

    fn message(name: &str, step: &str) -> CommitMessage {
        CommitMessage::new(format!(
            "{name}: advance canary weight 0 -> 10 (step {step})"
        ))
        .body(format!("Advance {name}.shop canary weight 10\n"))
        .trailer(CANARY, format!("shop/{name}"))
        .trailer(STEP, step)
    }

    #[test]
    fn folding_keeps_each_canary_s_trailers_as_its_own_group() {
        assert_eq!(fold(&[]), None);
        assert_eq!(fold(&[message("a", "1/2")]), Some(message("a", "1/2")));
        let folded = fold(&[message("a", "1/2"), message("b", "2/3")]).unwrap();
        assert_eq!(
            folded.subject,
            "2 canary decisions: a: advance canary weight 0 -> 10 (step 1/2) (and 1 more)"
        );
        let text = folded.render().unwrap();
        assert!(
            text.contains("b: advance canary weight 0 -> 10 (step 2/3)\n  Advance b.shop"),
            "{text}"
        );
        let trailers = parse_trailers(&text);
        let group =
            |id: &str| -> Vec<(String, String)> { trailer_group(&trailers, CANARY, id).to_vec() };
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(
            group("shop/b"),
            vec![
                pair(CANARY, "shop/b"),
                pair(STEP, "2/3"),
                pair(DECISION, "b: advance canary weight 0 -> 10 (step 2/3)"),
            ]
        );
        assert_eq!(group("shop/a")[1], pair(STEP, "1/2"));
    }
}
