//! The marginal judgement a waiting canary's approval pull request shows: the judge's series
//! of the decision that sent the canary to `WaitingApproval`, read back from that commit's
//! replay record (`Sluice-Replay`) and judged again, exactly as `sluice audit` judges them. So
//! the table is the same whichever tick opens the pull request (the one that decided, or a
//! later one after the forge was down), and it is what git holds.
//!
//! Reads git; decides nothing. A history it cannot read gives no table, never an error: the
//! pull request is still opened, with the judge's check in its check list.

use sluice_core::judge::Outcome;
use sluice_core::judged::{judgement, waits_on_judge};

use crate::core::status::Status;
use crate::gitops::{trailer_group, ConfigRepo};
use crate::judge::report::{report, Report};
use crate::manifest::model::Canary;
use crate::render::message::CANARY;
use crate::render::replay::{Record, REPLAY};

/// How many first-parent commits [`waited_on`] reads back for the judged decision.
const LOOKBACK: usize = 500;

/// The report of the marginal judgement `status` waits on: `None` unless the canary waits for
/// approval because of a marginal judgement, and the newest judged decision of the canary in
/// the last [`LOOKBACK`] first-parent commits recorded series that the canary's judge finds
/// marginal.
pub fn waited_on(repo: &ConfigRepo, canary: &Canary, status: &Status) -> Option<Report> {
    let spec = canary.analysis.judge.as_ref()?;
    if !waits_on_judge(status) {
        return None;
    }
    let id = canary.id.to_string();
    let mut at = Some(repo.head());
    for _ in 0..LOOKBACK {
        let oid = at?;
        let facts = repo.commit_facts(oid).ok()?;
        let group = trailer_group(&facts.trailers, CANARY, &id);
        let ours = group
            .first()
            .is_some_and(|(k, v)| k.eq_ignore_ascii_case(CANARY) && *v == id);
        let record = group
            .iter()
            .filter(|_| ours)
            .find(|(k, _)| k.eq_ignore_ascii_case(REPLAY))
            .and_then(|(_, v)| Record::parse(v).ok());
        let observed = record.and_then(|r| r.by.observations().ok().flatten());
        if let Some(judge) = observed.and_then(|o| o.judge) {
            let j = judgement(spec, Some(&judge))?;
            let measures: Vec<_> = spec
                .metrics
                .iter()
                .map(|m| m.rule.effect_size.measure)
                .collect();
            return (j.score.outcome == Outcome::Marginal).then(|| report(&j, &measures));
        }
        at = facts.parents.first().copied();
    }
    None
}
