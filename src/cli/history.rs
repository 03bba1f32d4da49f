//! `sluice history NS/NAME`: the canary's timeline, read back from commit trailers.

use serde::Serialize;

use crate::cli::repo::{open, SourceArgs};
use crate::cli::Output;
use crate::core::trailer::{parse_check_trailer, CheckKind};
use crate::gitops::{local_history, trailer_group, HistoryEntry};
use crate::render::message::{
    APPROVAL, APPROVED_BY, CANARY, CHECK, DECISION, OPERATOR, PHASE, REASON, REVISION, STEP,
    WEIGHTS,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The canary, as NAMESPACE/NAME.
    pub canary: String,
    #[command(flatten)]
    pub source: SourceArgs,
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Most recent entries to show.
    #[arg(long, default_value_t = 500)]
    pub limit: usize,
}

/// One commit of the canary's story.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub time: String,
    pub commit: String,
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

/// The canary's entries of `history` (newest first), oldest first.
pub fn entries(history: &[HistoryEntry], canary: &str) -> Vec<Entry> {
    let mut out: Vec<Entry> = history
        .iter()
        .map(|e| {
            let time = jiff::Timestamp::from_second(e.time.seconds())
                .map(|t| t.to_string())
                .unwrap_or_default();
            let trailer = |key: &str| trailer(e, canary, key);
            let subject = trailer(DECISION).unwrap_or_else(|| e.subject.clone());
            let reason = match trailer(REASON) {
                Some(r) => format!("{subject} ({r})"),
                None => subject,
            };
            Entry {
                time,
                commit: e.oid.to_string().chars().take(7).collect(),
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
        })
        .collect();
    out.reverse();
    out
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    if !args.canary.contains('/') {
        anyhow::bail!("expected NAMESPACE/NAME, found {:?}", args.canary);
    }
    let filter = Some((CANARY, args.canary.as_str()));
    let history = match (&args.source.dir, &args.source.repo) {
        (Some(dir), _) => local_history(dir, &args.source.branch, filter, args.limit)?,
        (None, Some(url)) => {
            // `open` fetches the branch.
            let locked = open(url, &args.source.branch, args.source.workdir.as_deref())?;
            locked.repo.history(filter, args.limit)?
        }
        (None, None) => anyhow::bail!("give --repo URL or --dir PATH"),
    };
    let list = entries(&history, &args.canary);
    match args.output {
        Output::Json => outln!("{}", serde_json::to_string_pretty(&list)?),
        Output::Yaml => out!("{}", serde_saphyr::to_string(&list)?),
        Output::Table => {
            let mut table = comfy_table::Table::new();
            table.load_style(comfy_table::presets::NOTHING);
            table.set_header(["TIME", "COMMIT", "BY", "PHASE", "STEP", "WEIGHTS", "REASON"]);
            for e in &list {
                table.add_row([
                    e.time.clone(),
                    e.commit.clone(),
                    // The approver of an approval, else who operated, else the commit's author.
                    e.approved_by
                        .clone()
                        .or_else(|| e.operator.clone())
                        .unwrap_or_else(|| e.author.clone()),
                    e.phase.clone(),
                    e.step.clone(),
                    e.weights.clone(),
                    e.reason.clone(),
                ]);
            }
            outln!("{table}");
        }
    }
    Ok(0)
}
