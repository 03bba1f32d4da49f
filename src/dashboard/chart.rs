//! The geometry of the canary page's inline SVG charts, computed here so the templates only
//! place numbers: weight over time (both shares, one point per decision commit) and each
//! metric's values with its threshold lines. Every chart of a page shares one time axis
//! ([`TimeAxis`]): a decision's point sits at its commit's time, so a long wait between two
//! decisions is a long gap, and the charts line up one above the other. Only numbers this module formats reach an SVG
//! attribute; every label goes through the template's HTML escaping.

use jiff::Timestamp;
use serde::Serialize;

use super::detail::{MetricPoint, MetricSeries, WeightPoint};

/// The drawing area of every chart, in SVG user units.
pub const WIDTH: f64 = 640.0;
pub const HEIGHT: f64 = 220.0;
const LEFT: f64 = 44.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 52.0;
/// Time ticks under the plot.
const TICKS: u32 = 4;

/// One marker of a chart.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Dot {
    pub x: String,
    pub y: String,
    /// The decision's time (RFC 3339), as the history has it.
    pub time: String,
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
    pub ticks: Vec<Tick>,
}

/// A time label under a chart.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Tick {
    pub x: String,
    pub label: String,
}

/// The time span every chart of a page draws: from the earliest decision to the latest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeAxis {
    start: Timestamp,
    end: Timestamp,
}

impl TimeAxis {
    /// The span of `times` (RFC 3339); empty (every point in the middle) when none reads.
    pub fn of<'a>(times: impl IntoIterator<Item = &'a str>) -> TimeAxis {
        let times: Vec<Timestamp> = times.into_iter().filter_map(|t| t.parse().ok()).collect();
        let start = times.iter().min().copied().unwrap_or(Timestamp::UNIX_EPOCH);
        TimeAxis {
            start,
            end: times.iter().max().copied().unwrap_or(start),
        }
    }

    fn seconds(&self) -> f64 {
        self.end.duration_since(self.start).as_secs_f64()
    }

    /// x of `time`: proportional to its distance from the start; the middle when every
    /// decision has the same time. A time that does not read is put at the start.
    fn x(&self, time: &str) -> f64 {
        let width = WIDTH - LEFT - RIGHT;
        let span = self.seconds();
        if span <= 0.0 {
            return LEFT + width / 2.0;
        }
        let at = time
            .parse::<Timestamp>()
            .map_or(0.0, |t| t.duration_since(self.start).as_secs_f64());
        LEFT + width * (at / span).clamp(0.0, 1.0)
    }

    /// Labels at the start, the end and evenly between (one when the span is empty): the time
    /// of day, with the date when the span is over a day.
    pub fn ticks(&self) -> Vec<Tick> {
        let span = self.seconds();
        let format = if span > 86_400.0 {
            "%m-%d %H:%M"
        } else if span >= 600.0 {
            "%H:%M"
        } else {
            "%H:%M:%S"
        };
        let count = if span > 0.0 { TICKS } else { 1 };
        (0..count)
            .map(|i| {
                let part = if count > 1 {
                    f64::from(i) / f64::from(count - 1)
                } else {
                    0.0
                };
                let t = jiff::SignedDuration::try_from_secs_f64(span * part)
                    .ok()
                    .and_then(|d| self.start.checked_add(d).ok())
                    .unwrap_or(self.start);
                Tick {
                    x: num(self.x(&t.to_string())),
                    label: t.strftime(format).to_string(),
                }
            })
            .collect()
    }
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
    pub ticks: Vec<Tick>,
}

fn num(v: f64) -> String {
    format!("{v:.1}")
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

/// The weight chart of `points`, on `axis`.
pub fn weights(points: &[WeightPoint], axis: &TimeAxis) -> WeightChart {
    let place = |share: fn(&WeightPoint) -> u8, who: &str| -> (Vec<(f64, f64)>, Vec<Dot>) {
        let coords: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (axis.x(&p.time), y(f64::from(share(p)), 0.0, 100.0)))
            .collect();
        let dots = coords
            .iter()
            .zip(points)
            .map(|((cx, cy), p)| Dot {
                x: num(*cx),
                y: num(*cy),
                time: p.time.clone(),
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
            .filter(|p| p.new_rollout)
            .map(|p| num(axis.x(&p.time)))
            .collect(),
        grid: [0.0, 50.0, 100.0]
            .iter()
            .map(|v| Rule {
                y: num(y(*v, 0.0, 100.0)),
                label: format!("{v}%"),
            })
            .collect(),
        ticks: axis.ticks(),
    }
}

/// One metric's chart, on `axis`.
pub fn metric(series: &MetricSeries, axis: &TimeAxis) -> MetricChart {
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
    // A point without a value (no data, an error) sits on the bottom line, marked failed.
    let dots: Vec<Dot> = series
        .points
        .iter()
        .map(|p| {
            let shown = p
                .value
                .map(|v| format!("{v}"))
                .or_else(|| p.outcome.clone())
                .unwrap_or_default();
            Dot {
                x: num(axis.x(&p.time)),
                y: num(y(p.value.unwrap_or(low), low, high)),
                time: p.time.clone(),
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
            .filter_map(|p| p.value.map(|v| (axis.x(&p.time), y(v, low, high))))
            .collect::<Vec<_>>(),
    );
    let rule = |v: f64, what: &str| Rule {
        y: num(y(v, low, high)),
        label: format!("{what} {v}"),
    };
    MetricChart {
        ticks: axis.ticks(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn point(time: &str, canary: u8) -> WeightPoint {
        WeightPoint {
            time: time.into(),
            commit: "abc1234".into(),
            phase: "Progressing".into(),
            step: "1".into(),
            primary: 100 - canary,
            canary,
            revision: "r1".into(),
            new_rollout: false,
        }
    }

    fn xs(dots: &[Dot]) -> Vec<f64> {
        dots.iter().map(|d| d.x.parse().unwrap()).collect()
    }

    #[test]
    fn a_decision_sits_at_its_time_not_at_its_index() {
        // 10 s, 10 s, then 120 s between decisions.
        let points = [
            point("2026-12-01T10:00:00Z", 0),
            point("2026-12-01T10:00:10Z", 20),
            point("2026-12-01T10:00:20Z", 40),
            point("2026-12-01T10:02:20Z", 0),
        ];
        let axis = TimeAxis::of(points.iter().map(|p| p.time.as_str()));
        let chart = weights(&points, &axis);
        let x = xs(&chart.canary);
        assert_eq!(x, xs(&chart.primary));
        assert!(x.windows(2).all(|w| w[0] < w[1]), "ordered by time: {x:?}");
        assert_eq!(x[0], LEFT);
        assert_eq!(x[3], WIDTH - RIGHT);
        let span = x[3] - x[0];
        for (xi, seconds) in x.iter().zip([0.0, 10.0, 20.0, 140.0]) {
            let expected = x[0] + span * seconds / 140.0;
            assert!((xi - expected).abs() <= 0.1, "{xi} != {expected}: {x:?}");
        }
        assert_eq!(chart.canary[2].time, "2026-12-01T10:00:20Z");
        let labels: Vec<&str> = chart.ticks.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(labels.first(), Some(&"10:00:00"));
        assert_eq!(labels.last(), Some(&"10:02:20"));
    }

    #[test]
    fn a_metric_shares_the_weight_charts_axis() {
        let series = MetricSeries {
            name: "request-success-rate".into(),
            min: Some(99.0),
            max: None,
            points: ["2026-12-01T10:00:10Z", "2026-12-01T10:02:20Z"]
                .iter()
                .map(|t| MetricPoint {
                    time: (*t).into(),
                    commit: "abc1234".into(),
                    step: "1".into(),
                    value: Some(99.5),
                    outcome: None,
                    passed: true,
                })
                .collect(),
        };
        let axis = TimeAxis::of(["2026-12-01T10:00:00Z", "2026-12-01T10:02:20Z"]);
        let m = metric(&series, &axis);
        let x = xs(&m.dots);
        let width = WIDTH - LEFT - RIGHT;
        assert!((x[0] - (LEFT + width * 10.0 / 140.0)).abs() <= 0.1, "{x:?}");
        assert_eq!(x[1], WIDTH - RIGHT);
        assert_eq!(m.ticks, axis.ticks());
    }

    #[test]
    fn one_moment_is_drawn_in_the_middle_and_an_unreadable_time_at_the_start() {
        let same = [point("2026-12-01T10:00:00Z", 0)];
        let axis = TimeAxis::of(same.iter().map(|p| p.time.as_str()));
        assert_eq!(
            xs(&weights(&same, &axis).canary),
            vec![LEFT + (WIDTH - LEFT - RIGHT) / 2.0]
        );
        assert_eq!(axis.ticks().len(), 1);
        let axis = TimeAxis::of(["2026-12-01T10:00:00Z", "2026-12-01T10:01:00Z"]);
        assert_eq!(axis.x("not a time"), LEFT);
    }
}
