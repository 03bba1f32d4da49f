//! `sluice demo --judge`: the demo's Flagger canary judged by the statistical judge as well as
//! by its threshold metrics. The canary opts in with the `sluice.dev/judge` annotation, which
//! names the `Judge` object [`JUDGE`]; the embedded metrics source answers the judge's range
//! queries with series of the primary and the canary that differ a little (the canary 2 %
//! slower, which the judge's `allowedIncrease: 1.1` lets pass), or with `--fail` 30 % slower
//! while staying far under the 500 ms threshold: the threshold gates pass it, the judge fails
//! it until `threshold` rolls it back.
//!
//! As the demo goes, each judged decision is printed with its checks and the judge's table,
//! judged again from the series the commit's `Sluice-Replay` record holds (as `sluice audit`
//! does), so what is printed is what is in git. Nothing here decides anything.

use anyhow::{bail, Context as _};
use sluice_core::judge::JudgeSpec;
use sluice_core::judged::{judgement, JUDGE_CHECK};
use sluice_core::number::fmt_num;

use crate::cli::demo_prometheus::Script;
use crate::gitops::{ConfigRepo, HistoryEntry};
use crate::judge::config::read_object;
use crate::judge::report::{report, table};
use crate::readers::history::{entries, release_entries, Entry};
use crate::render::replay::{Record, REPLAY};
use crate::yaml::node::parse_documents;
use crate::yaml::reader::Reader;

/// Where the demo keeps its `Judge`.
pub const JUDGE_PATH: &str = "apps/podinfo/judge.yaml";

/// The demo's `Judge`: latency and success rate, canary against primary over the last 60 s.
pub const JUDGE: &str = r#"# The statistical judge of the podinfo canary (sluice judge, docs/judge.md): every analysis
# interval, each query runs twice over the last 60 s, {{ workload }} the canary's workload
# and the primary's, and a Mann-Whitney test compares the two series: 61 values each, past
# the 50 a series needs (minSamples) before the judge may pass it.
apiVersion: sluice.dev/v1alpha1
kind: Judge
metadata:
  name: podinfo
  namespace: demo
spec:
  thresholds: {pass: 95, marginal: 75}
  window: 60s
  step: 1s
  groups: {latency: 50, errors: 50}
  metrics:
    - name: request-duration
      query: 'histogram_quantile(0.99, sum(rate(http_request_duration_seconds_bucket{namespace="{{ namespace }}", pod=~"{{ workload }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"}[1m])) by (le)) * 1000'
      direction: increase
      group: latency
      # Up to 10 % slower than the primary is fine; a shift the test finds beyond that is High.
      effectSize: {allowedIncrease: 1.1}
    - name: request-success-rate
      query: 'sum(rate(http_requests_total{namespace="{{ namespace }}", pod=~"{{ workload }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)", status!~"5.*"}[1m])) / sum(rate(http_requests_total{namespace="{{ namespace }}", pod=~"{{ workload }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"}[1m])) * 100'
      direction: decrease
      group: errors
      # A success rate 1 % below the primary's, or more, is Low.
      effectSize: {allowedDecrease: 0.99}
"#;

/// The annotation that makes the demo's Flagger canary judged.
const ANNOTATED: &str = "  namespace: demo\n  annotations:\n    sluice.dev/judge: podinfo\n";

/// The demo's files (`demo_files`, the demo's own) with the judge: the canary annotated, the
/// `Judge` added.
pub fn files(demo_files: &[(&'static str, &'static str)]) -> Vec<(&'static str, String)> {
    let mut files: Vec<(&'static str, String)> = demo_files
        .iter()
        .map(|(path, text)| {
            let text = if *path == "apps/podinfo/canary.yaml" {
                text.replacen("  namespace: demo\n", ANNOTATED, 1)
            } else {
                text.to_string()
            };
            (*path, text)
        })
        .collect();
    files.push((JUDGE_PATH, JUDGE.to_string()));
    files
}

/// The primary's p99 latency the demo serves, in milliseconds.
const LATENCY_MS: f64 = 212.0;

/// The metrics: a healthy success rate; the canary 2 % slower than the primary, or with
/// `fail` 30 % slower (276 ms: under any fixed threshold in sight).
pub fn script(fail: bool) -> Script {
    Script {
        canary_latency_factor: if fail { 1.3 } else { 1.02 },
        ..Script::new(99.93, LATENCY_MS)
    }
}

/// Prints what the judged demo runs: its Judge and the metrics the endpoint at `address` serves.
pub fn describe(address: &str, script: Script, fail: bool) {
    outln!("  {JUDGE_PATH}: the canary's sluice.dev/judge annotation names this Judge: p99 latency and success rate, canary against primary over the last 60 s (Mann-Whitney, as Kayenta judges)");
    outln!(
        "  metrics: an embedded Prometheus query endpoint at {address} answers success rate {}% and p99 latency {} ms for the primary, {} ms for the canary{} (range queries: the same with a little noise)\n",
        script.success_rate,
        script.latency_ms,
        fmt_num(script.canary_latency_ms()),
        if fail {
            " (--fail: 30 % slower, under the 500 ms threshold)"
        } else {
            " (2 % slower)"
        }
    );
}

/// [`JUDGE`]'s settings, read as the loop reads them.
pub fn spec() -> anyhow::Result<JudgeSpec> {
    let docs = parse_documents(JUDGE).map_err(|e| anyhow::anyhow!("{JUDGE_PATH}:{e:?}"))?;
    let [doc] = docs.as_slice() else {
        bail!("{JUDGE_PATH}: expected one document");
    };
    let mut r = Reader::new(JUDGE_PATH);
    match read_object(&mut r, &doc.root) {
        Some((_, spec)) if r.errors.is_empty() => Ok(spec),
        _ => bail!(
            "{JUDGE_PATH}: {}",
            r.errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        ),
    }
}

/// Prints the `count` newest commits of `sluice` (oldest first) that judged `canary` (with
/// `waves`, any of its waves): their checks, each with its value, its bound and its result;
/// with a judge `spec`, the judge's table too.
pub fn show(
    sluice: &ConfigRepo,
    count: usize,
    (canary, waves): (&str, bool),
    spec: Option<&JudgeSpec>,
) -> anyhow::Result<()> {
    let history = sluice.history(None, count)?;
    if waves {
        for entry in release_entries(&history, canary) {
            if !entry.checks.is_empty() {
                outln!("          checks: {}", checks(&entry));
            }
        }
        return Ok(());
    }
    let read = entries(&history, canary);
    // `entries` gives oldest first; the history is newest first.
    for (entry, commit) in read.iter().zip(history.iter().rev()) {
        if entry.checks.is_empty() {
            continue;
        }
        outln!("          checks: {}", checks(entry));
        let Some(spec) = spec.filter(|_| entry.judge.is_some()) else {
            continue;
        };
        let text = judged_table(commit, spec)?;
        for line in text.lines() {
            outln!("            {line}");
        }
    }
    Ok(())
}

/// `request-duration 275.6 (max 500) pass, judge 50 (min 95) fail`.
fn checks(entry: &Entry) -> String {
    entry
        .checks
        .iter()
        .map(|c| {
            let value = c
                .value
                .map_or_else(|| c.outcome.clone().unwrap_or_default(), fmt_num);
            let bound = match (c.min, c.max) {
                (Some(min), _) => format!(" (min {})", fmt_num(min)),
                (None, Some(max)) => format!(" (max {})", fmt_num(max)),
                (None, None) => String::new(),
            };
            let result = if c.passed { "pass" } else { "FAIL" };
            format!("{} {value}{bound} {result}", c.name)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The judge's table of `commit`, judged again from its replay record's series.
fn judged_table(commit: &HistoryEntry, spec: &JudgeSpec) -> anyhow::Result<String> {
    let short = &commit.oid.to_string()[..7];
    let record = commit
        .trailers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(REPLAY))
        .map(|(_, v)| Record::parse(v))
        .transpose()
        .with_context(|| format!("commit {short}: {REPLAY}"))?;
    let observations = match record {
        Some(r) => {
            r.by.observations()
                .with_context(|| format!("commit {short}: {REPLAY}"))?
        }
        None => None,
    };
    let Some(j) = judgement(spec, observations.and_then(|o| o.judge).as_ref()) else {
        return Ok("the judge's range queries failed: see the commit's judge check".into());
    };
    let measures: Vec<_> = spec
        .metrics
        .iter()
        .map(|m| m.rule.effect_size.measure)
        .collect();
    Ok(table(&report(&j, &measures)))
}

/// What the rollout's last judged decision says, for the demo's last lines: whether every
/// threshold gate passed and what the judge made of the canary.
pub fn verdict(sluice: &ConfigRepo, canary: &str) -> anyhow::Result<Vec<String>> {
    let history = sluice.history(None, 200)?;
    let read = entries(&history, canary);
    let Some(last) = read.iter().rev().find(|e| e.judge.is_some()) else {
        return Ok(vec!["no decision was judged".into()]);
    };
    let gates: Vec<_> = last
        .checks
        .iter()
        .filter(|c| c.kind == "metric" && c.name != JUDGE_CHECK)
        .collect();
    let gates_line = if gates.iter().all(|c| c.passed) {
        "every threshold gate passed"
    } else {
        "a threshold gate failed"
    };
    let judge = last.judge.as_ref().map_or("", |j| j.summary.as_str());
    Ok(vec![
        format!(
            "{gates_line} at the last judged decision ({}): {}",
            last.commit,
            checks(&Entry {
                checks: gates.into_iter().cloned().collect(),
                ..last.clone()
            })
        ),
        format!("the judge: {judge}"),
    ])
}
