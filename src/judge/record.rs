//! The judge's series in a decision's replay record (`Sluice-Replay`), so `sluice audit`
//! judges them again and finds the same decision. Every value the tick fetched is kept, as
//! Rust's shortest round-trip text (`NaN` and `inf` survive JSON); the loop bounds the count
//! ([`crate::metrics::judge_series::MAX_POINTS`] per series).

use serde::{Deserialize, Serialize};
use sluice_core::judged::{JudgeObservation, MetricSeries};

/// What the tick fetched for the judge: the series, or why there are none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JudgeRecord {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<SeriesRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One metric's pair of series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SeriesRecord {
    pub name: String,
    pub canary: Vec<String>,
    pub baseline: Vec<String>,
}

impl JudgeRecord {
    /// The record of what the tick fetched.
    pub fn of(observed: &JudgeObservation) -> JudgeRecord {
        let text = |values: &[f64]| values.iter().map(f64::to_string).collect();
        match observed {
            JudgeObservation::Series(series) => JudgeRecord {
                series: series
                    .iter()
                    .map(|s| SeriesRecord {
                        name: s.name.clone(),
                        canary: text(&s.canary),
                        baseline: text(&s.baseline),
                    })
                    .collect(),
                error: None,
            },
            JudgeObservation::Error(e) => JudgeRecord {
                series: Vec::new(),
                error: Some(e.clone()),
            },
        }
    }

    /// The observation back; `Err((metric, value))` names a value that is not a number.
    pub fn observation(&self) -> Result<JudgeObservation, (String, String)> {
        if let Some(e) = &self.error {
            return Ok(JudgeObservation::Error(e.clone()));
        }
        let mut series = Vec::with_capacity(self.series.len());
        for s in &self.series {
            let numbers = |values: &[String]| {
                values
                    .iter()
                    .map(|v| v.parse::<f64>().map_err(|_| (s.name.clone(), v.clone())))
                    .collect::<Result<Vec<f64>, _>>()
            };
            series.push(MetricSeries {
                name: s.name.clone(),
                canary: numbers(&s.canary)?,
                baseline: numbers(&s.baseline)?,
            });
        }
        Ok(JudgeObservation::Series(series))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_survive_the_record_exactly() {
        let observed = JudgeObservation::Series(vec![MetricSeries {
            name: "p99".into(),
            canary: vec![0.1 + 0.2, f64::NAN, f64::INFINITY, -1e-300],
            baseline: vec![],
        }]);
        let json = serde_json::to_string(&JudgeRecord::of(&observed)).unwrap();
        let back: JudgeRecord = serde_json::from_str(&json).unwrap();
        let JudgeObservation::Series(s) = back.observation().unwrap() else {
            panic!("series")
        };
        assert_eq!(s[0].canary[0], 0.1 + 0.2);
        assert!(s[0].canary[1].is_nan());
        assert_eq!(s[0].canary[2..], [f64::INFINITY, -1e-300]);
        let failed = JudgeObservation::Error("HTTP 500".into());
        assert_eq!(JudgeRecord::of(&failed).observation().unwrap(), failed);
        let bad = JudgeRecord {
            series: vec![SeriesRecord {
                name: "p99".into(),
                canary: vec!["x".into()],
                baseline: vec![],
            }],
            error: None,
        };
        assert_eq!(bad.observation(), Err(("p99".into(), "x".into())));
    }
}
