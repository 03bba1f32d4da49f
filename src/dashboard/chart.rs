//! The geometry of the canary page's inline SVG charts, computed here so the templates only
//! place numbers: weight over time (both shares, one point per decision commit) and each
//! metric's values with its threshold lines. Only numbers this module formats reach an SVG
//! attribute; every label goes through the template's HTML escaping.

use serde::Serialize;

use super::detail::{MetricPoint, MetricSeries, WeightPoint};

/// The drawing area of every chart, in SVG user units.
pub const WIDTH: f64 = 640.0;
pub const HEIGHT: f64 = 220.0;
const LEFT: f64 = 44.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 28.0;

/// One marker of a chart.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Dot {
    pub x: String,
    pub y: String,
    /// What the marker's tooltip and the table beside the chart say.
    pub label: String,
    pub failed: bool,
}

/// A horizontal line with its label (a threshold, a grid line).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Rule {
    pub y: String,
    pub label: String,
}

/// The weight chart.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WeightChart {
    pub canary_line: String,
    pub primary_line: String,
    pub canary: Vec<Dot>,
    pub primary: Vec<Dot>,
    /// x of each rollout's first point after the first.
    pub rollouts: Vec<String>,
    pub grid: Vec<Rule>,
}

/// One metric's chart.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MetricChart {
    pub name: String,
    /// The values, for the table beside the chart.
    pub points: Vec<MetricPoint>,
    pub line: String,
    pub dots: Vec<Dot>,
    pub min: Option<Rule>,
    pub max: Option<Rule>,
    pub grid: Vec<Rule>,
}

fn num(v: f64) -> String {
    format!("{v:.1}")
}

/// x of point `i` of `n`, spread over the plot's width.
fn x(i: usize, n: usize) -> f64 {
    let width = WIDTH - LEFT - RIGHT;
    if n <= 1 {
        return LEFT + width / 2.0;
    }
    LEFT + width * i as f64 / (n - 1) as f64
}

/// y of `v` on a scale from `low` (bottom) to `high` (top).
fn y(v: f64, low: f64, high: f64) -> f64 {
    let height = HEIGHT - TOP - BOTTOM;
    let span = if high > low { high - low } else { 1.0 };
    TOP + height * (1.0 - (v - low) / span)
}

fn polyline(points: &[(f64, f64)]) -> String {
    points
        .iter()
        .map(|(x, y)| format!("{},{}", num(*x), num(*y)))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn weights(points: &[WeightPoint]) -> WeightChart {
    let n = points.len();
    let place = |share: fn(&WeightPoint) -> u8, who: &str| -> (Vec<(f64, f64)>, Vec<Dot>) {
        let coords: Vec<(f64, f64)> = points
            .iter()
            .enumerate()
            .map(|(i, p)| (x(i, n), y(f64::from(share(p)), 0.0, 100.0)))
            .collect();
        let dots = coords
            .iter()
            .zip(points)
            .map(|((cx, cy), p)| Dot {
                x: num(*cx),
                y: num(*cy),
                label: format!("{} {who} {}% ({} {})", p.commit, share(p), p.phase, p.time),
                failed: p.phase == "Failed",
            })
            .collect();
        (coords, dots)
    };
    let (canary_coords, canary) = place(|p| p.canary, "canary");
    let (primary_coords, primary) = place(|p| p.primary, "primary");
    WeightChart {
        canary_line: polyline(&canary_coords),
        primary_line: polyline(&primary_coords),
        canary,
        primary,
        rollouts: points
            .iter()
            .enumerate()
            .filter(|(_, p)| p.new_rollout)
            .map(|(i, _)| num(x(i, n)))
            .collect(),
        grid: [0.0, 50.0, 100.0]
            .iter()
            .map(|v| Rule {
                y: num(y(*v, 0.0, 100.0)),
                label: format!("{v}%"),
            })
            .collect(),
    }
}

pub fn metric(series: &MetricSeries) -> MetricChart {
    let values: Vec<f64> = series.points.iter().filter_map(|p| p.value).collect();
    let mut low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let mut high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    for bound in [series.min, series.max].into_iter().flatten() {
        low = low.min(bound);
        high = high.max(bound);
    }
    if !low.is_finite() || !high.is_finite() {
        (low, high) = (0.0, 1.0);
    }
    // A tenth of the span above and below; a flat series gets a band around its value.
    let pad = if high > low {
        (high - low) * 0.15
    } else {
        (high.abs() * 0.01).max(1e-9)
    };
    let (low, high) = (low - pad, high + pad);
    let n = series.points.len();
    // A point without a value (no data, an error) sits on the bottom line, marked failed.
    let dots: Vec<Dot> = series
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let shown = p
                .value
                .map(|v| format!("{v}"))
                .or_else(|| p.outcome.clone())
                .unwrap_or_default();
            Dot {
                x: num(x(i, n)),
                y: num(y(p.value.unwrap_or(low), low, high)),
                label: format!(
                    "{} step {}: {shown} {}",
                    p.commit,
                    p.step,
                    if p.passed { "passed" } else { "FAILED" }
                ),
                failed: !p.passed,
            }
        })
        .collect();
    let line = polyline(
        &series
            .points
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.value.map(|v| (x(i, n), y(v, low, high))))
            .collect::<Vec<_>>(),
    );
    let rule = |v: f64, what: &str| Rule {
        y: num(y(v, low, high)),
        label: format!("{what} {v}"),
    };
    MetricChart {
        name: series.name.clone(),
        points: series.points.clone(),
        line,
        dots,
        min: series.min.map(|v| rule(v, "min")),
        max: series.max.map(|v| rule(v, "max")),
        grid: [low + pad, high - pad]
            .iter()
            .map(|v| Rule {
                y: num(y(*v, low, high)),
                label: format!("{:.4}", v)
                    .trim_end_matches('0')
                    .trim_end_matches('.')
                    .to_string(),
            })
            .collect(),
    }
}
