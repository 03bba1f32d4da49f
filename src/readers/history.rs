//! The history reader `sluice history` and the dashboard share: a canary's decisions, read
//! back from the `Sluice-*` trailers of its commits. Reads commits only.

use serde::Serialize;

use crate::core::trailer::{parse_check_trailer, CheckKind};
use crate::gitops::{trailer_group, HistoryEntry};
use crate::render::message::{
    APPROVAL, APPROVED_BY, CANARY, CHECK, DECISION, OPERATOR, PHASE, REASON, REVISION, STEP, WAVE,
    WEIGHTS,
};

/// One commit of the canary's story.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The wave the commit went to (`Sluice-Wave`), in a whole release's story
    /// ([`release_entries`]); absent in one canary's or one wave's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave: Option<String>,
    pub time: String,
    /// The commit's short id (7 characters).
    pub commit: String,
    /// Its full id (not printed: the dashboard matches audit's verdicts by it, as a short id
    /// can be forged to match another commit's).
    #[serde(skip)]
    pub id: String,
    pub author: String,
    pub phase: String,
    pub step: String,
    pub weights: String,
    pub revision: String,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// Who approved (`Sluice-Approved-By`): a forge login, or the `--as` operator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// Where the approval came from (`Sluice-Approval`): a pull request URL, or `cli`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
    /// The checks the decision judged (`Sluice-Check`), in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
    /// The statistical judge's result (`Sluice-Judge`, `Sluice-Judge-Metric`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge: Option<crate::judge::trailers::JudgeEntry>,
}

/// One `Sluice-Check` trailer, structured.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    pub name: String,
    /// `metric` or `webhook`.
    pub kind: &'static str,
    /// The metric's value, when it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Instead of a value: `nodata`, `unobserved`, `error`, `NaN`, `+Inf`, `-Inf`; for a
    /// webhook `ok`, `error` or `uncalled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    pub passed: bool,
}

/// A `Sluice-Check` trailer as a [`Check`]; `None` when it does not follow the grammar.
fn check(text: &str) -> Option<Check> {
    let t = parse_check_trailer(text)?;
    let number = |v: &str| v.parse::<f64>().ok().filter(|n| n.is_finite());
    let value = match t.kind {
        CheckKind::Metric => number(&t.value),
        CheckKind::Webhook => None,
    };
    Some(Check {
        kind: match t.kind {
            CheckKind::Metric => "metric",
            CheckKind::Webhook => "webhook",
        },
        outcome: value.is_none().then(|| t.value.clone()),
        value,
        min: t.min.as_deref().and_then(number),
        max: t.max.as_deref().and_then(number),
        passed: t.passed,
        name: t.name,
    })
}

/// Every value of one key in the canary's own trailer group, in order.
fn trailers(e: &HistoryEntry, canary: &str, key: &str) -> Vec<String> {
    trailer_group(&e.trailers, CANARY, canary)
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v.clone())
        .collect()
}

/// A trailer of the canary's own group (a `commits: perTick` commit holds several canaries).
fn trailer(e: &HistoryEntry, canary: &str, key: &str) -> Option<String> {
    trailer_group(&e.trailers, CANARY, canary)
        .iter()
        .rev()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v.clone())
}

/// Who paused `canary` (`NS/NAME`, named `name` in its subjects) and why: the operator and
/// reason of the newest `sluice pause` commit in `history` (newest first).
pub fn pauser(history: &[HistoryEntry], canary: &str, name: &str) -> Option<(String, String)> {
    let subject = crate::render::message::paused_subject(name);
    history.iter().find_map(|e| {
        let said = trailer(e, canary, DECISION).unwrap_or_else(|| e.subject.clone());
        if said != subject {
            return None;
        }
        Some((trailer(e, canary, OPERATOR)?, trailer(e, canary, REASON)?))
    })
}

/// The canary's entries of `history` (newest first), oldest first.
pub fn entries(history: &[HistoryEntry], canary: &str) -> Vec<Entry> {
    let mut out: Vec<Entry> = history.iter().map(|e| entry(e, canary, None)).collect();
    out.reverse();
    out
}

/// The whole release of `canary` (`NS/NAME`, a canary with waves) in `history` (newest
/// first), oldest first: every commit of each of its waves' instances (`NS/NAME.WAVE`, whose
/// trailer group says `Sluice-Wave: WAVE`), each entry with its wave. A commit that holds
/// several waves (`commits: perTick`) gives one entry per wave.
pub fn release_entries(history: &[HistoryEntry], canary: &str) -> Vec<Entry> {
    let prefix = format!("{canary}.");
    let mut out = Vec::new();
    for e in history {
        let instances = e
            .trailers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(CANARY))
            .filter_map(|(_, v)| Some((v, v.strip_prefix(&prefix)?)));
        for (instance, wave) in instances {
            if trailer(e, instance, WAVE).as_deref() == Some(wave) {
                out.push(entry(e, instance, Some(wave.to_string())));
            }
        }
    }
    out.reverse();
    out
}

/// One commit as an entry of `canary`'s story (its own trailer group).
fn entry(e: &HistoryEntry, canary: &str, wave: Option<String>) -> Entry {
    let time = jiff::Timestamp::from_second(e.time.seconds())
        .map(|t| t.to_string())
        .unwrap_or_default();
    let trailer = |key: &str| trailer(e, canary, key);
    let subject = trailer(DECISION).unwrap_or_else(|| e.subject.clone());
    let reason = match trailer(REASON) {
        // A reason the subject already says (`aborted by hand: REASON`) is not said twice.
        Some(r) if !subject.contains(&r) => format!("{subject} ({r})"),
        Some(_) => subject,
        None => subject,
    };
    Entry {
        wave,
        time,
        commit: e.oid.to_string().chars().take(7).collect(),
        id: e.oid.to_string(),
        author: e.author.name.clone(),
        phase: trailer(PHASE).unwrap_or_default(),
        step: trailer(STEP).unwrap_or_default(),
        weights: trailer(WEIGHTS).unwrap_or_default(),
        revision: trailer(REVISION).unwrap_or_default(),
        reason,
        operator: trailer(OPERATOR),
        approved_by: trailer(APPROVED_BY),
        approval: trailer(APPROVAL),
        judge: crate::judge::trailers::entry(
            trailer(crate::judge::trailers::JUDGE),
            &trailers(e, canary, crate::judge::trailers::JUDGE_METRIC),
        ),
        checks: trailers(e, canary, CHECK)
            .iter()
            .filter_map(|t| check(t))
            .collect(),
    }
}
