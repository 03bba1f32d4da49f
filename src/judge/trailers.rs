//! The judge's trailers on a judged decision, written by the planner and read back by
//! `sluice history -o json`:
//!
//! ```text
//! Sluice-Judge: score=50 marginal (pass>=95 marginal>=40)
//! Sluice-Judge-Metric: p99 High group=latency estimate=100 ci=98.5..101.5 effect=1.77 bound=25 allowed=1..1
//! ```
//!
//! One `Sluice-Judge-Metric` per metric (a muted one says `muted`); numbers with at most two
//! decimals, `-` where the test did not run or the effect size cannot be computed. Where the
//! test ran, the bounds that explain the class follow: `High` needs the interval's low end
//! above `bound` and the effect size at least `allowed`'s upper value, `Low` the interval's
//! high end below `-bound` and the effect size at most its lower value. Lines written before
//! the bounds were recorded have none ([`without_bounds`]).

use serde::Serialize;
use sluice_core::decide::Decision;
use sluice_core::judge::Judgement;
use sluice_core::judged::{judgement, score_line, JUDGE_CHECK};
use sluice_core::model::Canary;
use sluice_core::number::fmt_num;
use sluice_core::observe::Observations;

pub const JUDGE: &str = "Sluice-Judge";
pub const JUDGE_METRIC: &str = "Sluice-Judge-Metric";

/// The judge's trailers for `decision`: none unless it judged the canary's series.
pub fn of<R>(canary: &Canary<R>, decision: &Decision, obs: &Observations) -> Vec<(String, String)> {
    let judged = decision.checks.iter().any(|c| c.record.name == JUDGE_CHECK);
    let Some(spec) = canary.analysis.judge.as_ref().filter(|_| judged) else {
        return Vec::new();
    };
    let Some(j) = judgement(spec, obs.judge.as_ref()) else {
        return Vec::new();
    };
    let mut out = vec![(JUDGE.to_string(), score_line(&j))];
    out.extend(
        metric_lines(&j)
            .into_iter()
            .map(|l| (JUDGE_METRIC.to_string(), l)),
    );
    out
}

fn metric_lines(j: &Judgement) -> Vec<String> {
    let num = |v: f64| {
        if v.is_finite() {
            fmt_num(v)
        } else {
            "-".to_string()
        }
    };
    j.metrics
        .iter()
        .map(|m| {
            let c = &m.classification;
            let (estimate, ci) = match &c.test {
                Some(t) => (
                    num(t.estimate),
                    format!("{}..{}", num(t.ci_low), num(t.ci_high)),
                ),
                None => ("-".to_string(), "-".to_string()),
            };
            let muted = if m.muted { " muted" } else { "" };
            let bounds = match c.test {
                Some(_) => format!(
                    " bound={} allowed={}..{}",
                    num(c.bound),
                    num(c.allowed_decrease),
                    num(c.allowed_increase)
                ),
                None => String::new(),
            };
            format!(
                "{} {}{muted} group={} estimate={estimate} ci={ci} effect={}{bounds}",
                m.name,
                c.label.as_str(),
                m.group,
                num(c.effect_size)
            )
        })
        .collect()
}

/// A `Sluice-Judge-Metric` value without its bounds: as sluice wrote it before it recorded
/// them (what `sluice audit` compares such a line with).
pub fn without_bounds(line: &str) -> String {
    line.split(' ')
        .filter(|w| !w.starts_with("bound=") && !w.starts_with("allowed="))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether a `Sluice-Judge-Metric` value records its bounds.
pub fn has_bounds(line: &str) -> bool {
    line.split(' ').any(|w| w.starts_with("bound="))
}

/// A judged decision's trailers, structured for `sluice history -o json`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JudgeEntry {
    /// `Sluice-Judge` as written: `score=… pass|marginal|fail (pass>=… marginal>=…)`.
    pub summary: String,
    pub score: Option<f64>,
    /// `pass`, `marginal` or `fail`.
    pub outcome: Option<String>,
    pub metrics: Vec<JudgeMetricEntry>,
}

/// One `Sluice-Judge-Metric` trailer.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JudgeMetricEntry {
    pub name: String,
    pub classification: String,
    pub muted: bool,
    pub group: Option<String>,
    pub estimate: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub effect_size: Option<f64>,
    /// The bounds that explain a `High` or `Low`; absent where the test did not run or the
    /// line was written before bounds were recorded.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub bounds: Option<Bounds>,
}

/// The bounds that explain a `High` or a `Low`, as a `Sluice-Judge-Metric` line records them.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Bounds {
    /// What the interval had to clear: `High` needs its low end above it, `Low` its high end
    /// below minus it.
    pub bound: f64,
    /// The effect sizes a `Low` (at most) and a `High` (at least) had to reach.
    pub allowed_decrease: f64,
    pub allowed_increase: f64,
}

/// The `Sluice-Judge` value and the `Sluice-Judge-Metric` values, read back; `None` without
/// a `Sluice-Judge`.
pub fn entry(summary: Option<String>, metrics: &[String]) -> Option<JudgeEntry> {
    let summary = summary?;
    let mut words = summary.split(' ');
    let score = words
        .next()
        .and_then(|w| w.strip_prefix("score="))
        .and_then(|v| v.parse().ok());
    let outcome = words.next().map(str::to_string);
    Some(JudgeEntry {
        score,
        outcome,
        metrics: metrics.iter().map(|m| metric_entry(m)).collect(),
        summary,
    })
}

fn metric_entry(line: &str) -> JudgeMetricEntry {
    let mut words = line.split(' ');
    let name = words.next().unwrap_or_default().to_string();
    let classification = words.next().unwrap_or_default().to_string();
    let mut entry = JudgeMetricEntry {
        name,
        classification,
        muted: false,
        group: None,
        estimate: None,
        ci_low: None,
        ci_high: None,
        effect_size: None,
        bounds: None,
    };
    let number = |v: &str| v.parse::<f64>().ok();
    let (mut bound, mut allowed) = (None, None);
    for word in words {
        match word.split_once('=') {
            None if word == "muted" => entry.muted = true,
            Some(("group", g)) => entry.group = Some(g.to_string()),
            Some(("estimate", v)) => entry.estimate = number(v),
            Some(("effect", v)) => entry.effect_size = number(v),
            Some(("bound", v)) => bound = number(v),
            Some(("allowed", v)) => {
                allowed = v
                    .split_once("..")
                    .and_then(|(lo, hi)| Some((number(lo)?, number(hi)?)));
            }
            Some(("ci", v)) => {
                if let Some((lo, hi)) = v.split_once("..") {
                    (entry.ci_low, entry.ci_high) = (number(lo), number(hi));
                }
            }
            _ => {}
        }
    }
    if let (Some(bound), Some((allowed_decrease, allowed_increase))) = (bound, allowed) {
        entry.bounds = Some(Bounds {
            bound,
            allowed_decrease,
            allowed_increase,
        });
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trailers_read_back_into_their_numbers() {
        let e = entry(
            Some("score=50 marginal (pass>=95 marginal>=40)".into()),
            &[
                "p99 High group=latency estimate=100 ci=98.5..101.5 effect=1.77".into(),
                "p50 Nodata muted group=default estimate=- ci=- effect=-".into(),
            ],
        )
        .unwrap();
        assert_eq!(e.score, Some(50.0));
        assert_eq!(e.outcome.as_deref(), Some("marginal"));
        let p99 = &e.metrics[0];
        assert_eq!(
            (
                p99.classification.as_str(),
                p99.ci_low,
                p99.ci_high,
                p99.effect_size
            ),
            ("High", Some(98.5), Some(101.5), Some(1.77))
        );
        assert_eq!(p99.group.as_deref(), Some("latency"));
        let p50 = &e.metrics[1];
        assert!(p50.muted);
        assert_eq!((p50.estimate, p50.ci_low), (None, None));
        assert_eq!(entry(None, &[]), None);
        assert_eq!(p99.bounds, None, "written before bounds");
    }

    /// The bounds a line records, read back, are the judge's: the class's explanation.
    #[test]
    fn the_recorded_bounds_are_the_ones_the_judge_computed() {
        use sluice_core::judge::{judge, EffectMeasure, EffectSize, MetricInput, MetricRule};
        let primary: Vec<f64> = (0..40).map(|i| 200.0 + f64::from(i % 7)).collect();
        let slow: Vec<f64> = primary.iter().map(|v| v * 1.3).collect();
        let fast: Vec<f64> = primary.iter().map(|v| v * 0.6).collect();
        let rule = MetricRule {
            effect_size: EffectSize {
                allowed_increase: 1.1,
                allowed_decrease: 0.9,
                ..EffectSize::neutral(EffectMeasure::MeanRatio)
            },
            ..MetricRule::default()
        };
        let input = |name, canary| MetricInput {
            name,
            group: "latency",
            muted: false,
            rule,
            canary,
            baseline: &primary,
        };
        let j = judge(
            &[
                input("slow", &slow),
                input("fast", &fast),
                input("same", &primary),
            ],
            &[],
            sluice_core::judge::Thresholds {
                pass: 95.0,
                marginal: 75.0,
            },
            1,
        );
        let lines = metric_lines(&j);
        let read = entry(Some(score_line(&j)), &lines).unwrap();
        let labels: Vec<&str> = read
            .metrics
            .iter()
            .map(|m| m.classification.as_str())
            .collect();
        assert_eq!(labels, ["High", "Low", "Pass"], "{lines:?}");
        for (m, judged) in read.metrics.iter().zip(&j.metrics).take(2) {
            let c = &judged.classification;
            let two_decimals = |v: f64| fmt_num(v).parse::<f64>().ok();
            let estimate = c.test.unwrap().estimate;
            let bounds = m.bounds.unwrap();
            assert_eq!(Some(bounds.bound), two_decimals(c.bound), "{lines:?}");
            assert_eq!(c.bound, 0.25 * estimate.abs(), "Kayenta's bound");
            assert_eq!(
                (bounds.allowed_decrease, bounds.allowed_increase),
                (0.9, 1.1),
                "{lines:?}"
            );
            // Each bound explains its class: the interval clears it, the effect size passes.
            let (lo, hi, effect) = (
                c.test.unwrap().ci_low,
                c.test.unwrap().ci_high,
                c.effect_size,
            );
            match m.classification.as_str() {
                "High" => assert!(lo > c.bound && effect >= 1.1, "{lines:?}"),
                _ => assert!(hi < -c.bound && effect <= 0.9, "{lines:?}"),
            }
        }
        // Identical series: no test, no bounds.
        assert_eq!(read.metrics[2].bounds, None, "{lines:?}");
        assert!(!has_bounds(&lines[2]) && has_bounds(&lines[0]));
        // A line without its bounds is the line sluice wrote before recording them.
        let earlier = without_bounds(&lines[0]);
        assert!(
            earlier.ends_with(&format!(
                "effect={}",
                fmt_num(j.metrics[0].classification.effect_size)
            )),
            "{earlier}"
        );
    }
}
