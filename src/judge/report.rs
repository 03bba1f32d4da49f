//! A judgement as people and programs read it: the JSON shape (`sluice judge -o json`) and the
//! table (`-o table`, and the approval pull request's body), per metric its classification,
//! U, p-value, confidence interval, estimate and effect size, then the group and summary scores.

use serde::Serialize;
use sluice_core::judge::{EffectMeasure, Judgement};
use sluice_core::number::fmt_num;

/// A judgement in the JSON shape (`NaN` becomes `null`).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub outcome: String,
    pub score: f64,
    pub pass: f64,
    pub marginal: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub groups: Vec<GroupRow>,
    pub metrics: Vec<MetricRow>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GroupRow {
    pub name: String,
    pub score: f64,
    pub metrics: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MetricRow {
    pub name: String,
    pub group: String,
    pub classification: String,
    pub critical: bool,
    pub muted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub u: Option<f64>,
    pub p_value: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub estimate: Option<f64>,
    pub effect_measure: String,
    pub effect_size: Option<f64>,
    /// What the interval had to clear for `High` (`ciLow > bound`) or `Low`
    /// (`ciHigh < -bound`); absent where the test did not run.
    pub bound: Option<f64>,
    /// The effect sizes a `Low` (at most) and a `High` (at least) had to reach.
    pub allowed_decrease: f64,
    pub allowed_increase: f64,
    pub mean_ratio: Option<f64>,
    pub canary_count: usize,
    pub baseline_count: usize,
}

/// The report of `judgement`; `measures` gives each metric's effect size measure, in order.
pub fn report(judgement: &Judgement, measures: &[EffectMeasure]) -> Report {
    let finite = |v: f64| v.is_finite().then_some(v);
    let metrics = judgement
        .metrics
        .iter()
        .zip(measures)
        .map(|(m, measure)| {
            let c = &m.classification;
            MetricRow {
                name: m.name.clone(),
                group: m.group.clone(),
                classification: c.label.as_str().to_string(),
                critical: c.critical,
                muted: m.muted,
                reason: c.reason.clone(),
                u: c.test.map(|t| t.u),
                p_value: c.test.map(|t| t.p_value),
                ci_low: c.test.map(|t| t.ci_low),
                ci_high: c.test.map(|t| t.ci_high),
                estimate: c.test.map(|t| t.estimate),
                effect_measure: measure_name(*measure).to_string(),
                effect_size: finite(c.effect_size),
                bound: c.test.and_then(|_| finite(c.bound)),
                allowed_decrease: c.allowed_decrease,
                allowed_increase: c.allowed_increase,
                mean_ratio: finite(c.mean_ratio),
                canary_count: c.canary_count,
                baseline_count: c.baseline_count,
            }
        })
        .collect();
    let score = &judgement.score;
    Report {
        outcome: score.outcome.as_str().to_string(),
        score: score.summary,
        pass: judgement.thresholds.pass,
        marginal: judgement.thresholds.marginal,
        reason: score.reason.clone(),
        groups: score
            .groups
            .iter()
            .map(|g| GroupRow {
                name: g.name.clone(),
                score: g.score,
                metrics: g.metrics,
            })
            .collect(),
        metrics,
    }
}

pub fn measure_name(measure: EffectMeasure) -> &'static str {
    match measure {
        EffectMeasure::MeanRatio => "meanRatio",
        EffectMeasure::Cles => "cles",
    }
}

/// Four significant digits, `-` for a value there is none of.
pub fn num(v: Option<f64>) -> String {
    match v {
        None => "-".to_string(),
        Some(0.0) => "0".to_string(),
        Some(v) if (1e-3..1e6).contains(&v.abs()) => {
            let decimals = (3 - v.abs().log10().floor() as i32).max(0) as usize;
            format!("{v:.decimals$}")
        }
        Some(v) => format!("{v:.3e}"),
    }
}

/// The table: one row per metric, then one line per group and the summary.
pub fn table(report: &Report) -> String {
    let mut table = comfy_table::Table::new();
    table.load_style(comfy_table::presets::NOTHING);
    table.set_header([
        "METRIC", "GROUP", "CLASS", "U", "P", "CI LOW", "CI HIGH", "ESTIMATE", "EFFECT", "BOUNDS",
    ]);
    for m in &report.metrics {
        let class = match (m.critical, m.muted) {
            (true, _) => format!("{} (critical)", m.classification),
            (false, true) => format!("{} (muted)", m.classification),
            (false, false) => m.classification.clone(),
        };
        table.add_row([
            m.name.clone(),
            m.group.clone(),
            class,
            num(m.u),
            num(m.p_value),
            num(m.ci_low),
            num(m.ci_high),
            num(m.estimate),
            format!("{} {}", m.effect_measure, num(m.effect_size)),
            bounds(m),
        ]);
    }
    let mut out = format!("{table}\n\n");
    // Why a metric was not tested: the row's numbers cannot say it.
    for m in report.metrics.iter().filter(|m| m.u.is_none()) {
        if let (Some(reason), false) = (&m.reason, m.classification == "Pass") {
            out.push_str(&format!("{} {}: {reason}\n", m.name, m.classification));
        }
    }
    for g in &report.groups {
        out.push_str(&format!(
            "group {}: {} ({} metrics)\n",
            g.name,
            fmt_num(g.score),
            g.metrics
        ));
    }
    out.push_str(&format!(
        "score {}: {} (pass>={} marginal>={})\n",
        fmt_num(report.score),
        report.outcome,
        fmt_num(report.pass),
        fmt_num(report.marginal)
    ));
    if let Some(reason) = &report.reason {
        out.push_str(&format!("{reason}\n"));
    }
    out
}

/// The bounds a `High` or `Low` had to pass: `±bound effect<=D|>=I`, `-` where the test did
/// not run.
fn bounds(m: &MetricRow) -> String {
    match m.bound {
        Some(b) => format!(
            "±{} effect<={}|>={}",
            num(Some(b)),
            num(Some(m.allowed_decrease)),
            num(Some(m.allowed_increase))
        ),
        None => "-".to_string(),
    }
}

/// A Markdown table cell: `|` escaped, line breaks as spaces.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\r', '\n'], " ")
}

/// The judgement in Markdown, for the approval pull request's body: the summary score with
/// the thresholds, the group scores, then one row per metric (classification, estimate,
/// interval, effect size, group). The metric rows come last, so a body cut to a forge's size
/// limit loses metric rows before it loses the scores.
pub fn markdown(report: &Report) -> String {
    let mut out = format!(
        "Summary score **{}**: **{}** (pass>={} marginal>={}).\n",
        fmt_num(report.score),
        report.outcome,
        fmt_num(report.pass),
        fmt_num(report.marginal)
    );
    if let Some(reason) = &report.reason {
        out.push_str(&format!("\n{}\n", cell(reason)));
    }
    out.push_str("\n| group | score | metrics |\n|---|---:|---:|\n");
    for g in &report.groups {
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            cell(&g.name),
            fmt_num(g.score),
            g.metrics
        ));
    }
    out.push_str(&format!(
        "| **summary** | **{}** | {} (pass>={} marginal>={}) |\n",
        fmt_num(report.score),
        report.outcome,
        fmt_num(report.pass),
        fmt_num(report.marginal)
    ));
    out.push_str(
        "\n| metric | classification | estimate | CI low | CI high | effect size | group |\n\
         |---|---|---:|---:|---:|---|---|\n",
    );
    for m in &report.metrics {
        let class = match (m.critical, m.muted) {
            (true, _) => format!("{} (critical)", m.classification),
            (false, true) => format!("{} (muted)", m.classification),
            (false, false) => m.classification.clone(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} {} | {} |\n",
            cell(&m.name),
            class,
            num(m.estimate),
            num(m.ci_low),
            num(m.ci_high),
            m.effect_measure,
            num(m.effect_size),
            cell(&m.group)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::judge::{judge, MetricInput, MetricRule, Thresholds};

    /// Two metrics in one group, the canary 30 % slower on one: a score of 50, marginal
    /// between 95 and 40.
    fn marginal() -> Report {
        let base: Vec<f64> = (0..30).map(|i| 100.0 + f64::from(i % 10)).collect();
        let slow: Vec<f64> = base.iter().map(|v| v * 1.3).collect();
        let input = |name, canary| MetricInput {
            name,
            group: "latency",
            muted: false,
            rule: MetricRule::default(),
            canary,
            baseline: &base,
        };
        let thresholds = Thresholds {
            pass: 95.0,
            marginal: 40.0,
        };
        let j = judge(
            &[input("p99 | ms", &slow), input("errors", &base)],
            &[],
            thresholds,
            30,
        );
        report(&j, &[EffectMeasure::MeanRatio, EffectMeasure::Cles])
    }

    #[test]
    fn the_markdown_table_has_every_metric_and_the_scores() {
        let md = markdown(&marginal());
        assert!(
            md.starts_with("Summary score **50**: **marginal** (pass>=95 marginal>=40).\n"),
            "{md}"
        );
        assert!(md.contains("| latency | 50 | 2 |\n"), "{md}");
        assert!(
            md.contains("| **summary** | **50** | marginal (pass>=95 marginal>=40) |\n"),
            "{md}"
        );
        // The name's `|` cannot break the row; the interval and effect size are the test's.
        let p99 = md
            .lines()
            .find(|l| l.starts_with("| p99 \\| ms | High | "))
            .unwrap_or_else(|| panic!("no p99 row: {md}"));
        assert!(p99.ends_with(" | meanRatio 1.300 | latency |"), "{p99}");
        assert_eq!(p99.matches(" | ").count(), 6, "seven cells: {p99}");
        // Identical series pass without a test: nothing to show but the class.
        assert!(
            md.contains("\n| errors | Pass | - | - | - | cles - | latency |\n"),
            "{md}"
        );
        // The metric rows come after the scores, so cutting the body drops them first.
        assert!(md.find("**summary**") < md.find("| errors |"), "{md}");
    }

    #[test]
    fn numbers_keep_four_significant_digits() {
        assert_eq!(num(Some(12.3456)), "12.35");
        assert_eq!(num(Some(0.012_345)), "0.01235");
        assert_eq!(num(Some(100.0)), "100.0");
        assert_eq!(num(Some(3.4e-6)), "3.400e-6");
        assert_eq!(num(None), "-");
    }
}
