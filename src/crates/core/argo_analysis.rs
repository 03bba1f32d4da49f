//! Argo Rollouts' analysis rules, pure: one measurement's value judged by a metric's
//! `successCondition`/`failureCondition` ([`measure`], Argo's `EvaluateResult`), and a metric's
//! measurements so far turned into its phase ([`assess`], Argo's `assessMetricStatus` with
//! `count`, `failureLimit`, `inconclusiveLimit`, `consecutiveErrorLimit`,
//! `consecutiveSuccessLimit`), and a run's metrics into the run's phase ([`run_phase`]).
//!
//! A measurement is recorded as its value (or why there is none) and its phase, so a replay
//! judges the recorded value again with [`measure`] and must find the same phase.

use crate::argo_expr::{Condition, Value};
pub use crate::argo_metric::{step_key, ArgoGate, Measurement, MetricHistory, MetricRules, Phase};
use crate::observe::MetricValue;
use crate::status::CheckRecord;
use crate::trailer::{CheckKind, Judged};

/// Argo's default `consecutiveErrorLimit`.
pub const DEFAULT_CONSECUTIVE_ERROR_LIMIT: u32 = 4;

/// What a provider answered for one measurement.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Value(Value),
    /// The query failed; the text says why.
    Error(String),
}

/// Judges one answer by the metric's conditions (Argo's `EvaluateResult`).
pub fn measure(rules: &MetricRules, answer: &Answer) -> Measurement {
    let value = match answer {
        Answer::Value(v) => v,
        Answer::Error(e) => {
            return Measurement {
                phase: Phase::Error,
                value: String::new(),
                message: e.clone(),
            }
        }
    };
    let shown = value.to_string();
    let eval = |c: &Option<Condition>, field: &str| match c {
        None => Ok(None),
        Some(c) => c.eval(value).map(Some).map_err(|e| {
            let why = match value {
                Value::Nil => {
                    "metric result is nil or empty: no data returned from the metric provider"
                        .to_string()
                }
                Value::List(items) if items.is_empty() => {
                    "metric result is nil or empty: no data returned from the metric provider"
                        .to_string()
                }
                _ => e.0,
            };
            format!("could not evaluate {field}: {why}")
        }),
    };
    let outcome = eval(&rules.success, "successCondition")
        .and_then(|s| Ok((s, eval(&rules.failure, "failureCondition")?)));
    let phase = match outcome {
        Err(message) => {
            return Measurement {
                phase: Phase::Error,
                value: shown,
                message,
            }
        }
        Ok((None, None)) => Phase::Successful,
        Ok((Some(success), None)) => verdict(success, !success),
        Ok((None, Some(failure))) => verdict(!failure, failure),
        Ok((Some(success), Some(failure))) => verdict(success, failure),
    };
    Measurement {
        phase,
        value: shown,
        message: String::new(),
    }
}

fn verdict(success: bool, failure: bool) -> Phase {
    match (success, failure) {
        (_, true) => Phase::Failed,
        (false, false) => Phase::Inconclusive,
        (true, false) => Phase::Successful,
    }
}

/// The phase a recorded measurement gets when judged again (`sluice audit`): its recorded
/// value through [`measure`], or Error for a provider error; `None` when the record's value
/// is not one [`measure`] writes.
pub fn replay(rules: &MetricRules, recorded: &Measurement) -> Option<Phase> {
    if recorded.value.is_empty() {
        return (recorded.phase == Phase::Error).then_some(Phase::Error);
    }
    let value = Value::parse_recorded(&recorded.value)?;
    Some(measure(rules, &Answer::Value(value)).phase)
}

/// A measurement as a decision's check (its `Sluice-Check` trailer and status record):
/// `NAME=VALUE pass|fail`, where VALUE is the single number the provider answered, and a
/// measurement passes only when Successful.
pub fn judged(name: &str, m: &Measurement) -> Judged {
    let single = match Value::parse_recorded(&m.value) {
        Some(Value::Number(n)) => Some(n),
        Some(Value::List(items)) => match items.as_slice() {
            [Value::Number(n)] => Some(*n),
            _ => None,
        },
        _ => None,
    };
    let detail = match (single, m.message.is_empty()) {
        (Some(n), true) if n.is_nan() => "NaN".to_string(),
        (Some(n), true) if n.is_infinite() => (if n > 0.0 { "+Inf" } else { "-Inf" }).to_string(),
        (_, true) => format!("{:?} {}", m.phase, m.value),
        (_, false) => m.message.clone(),
    };
    Judged {
        kind: CheckKind::Metric,
        record: CheckRecord {
            name: name.to_string(),
            value: single.filter(|n| n.is_finite()),
            min: None,
            max: None,
            passed: m.phase == Phase::Successful,
            detail,
        },
    }
}

/// A metric's counters, as Argo keeps them in its `MetricResult`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Measurements without error.
    pub count: u32,
    pub successful: u32,
    pub failed: u32,
    pub inconclusive: u32,
    pub error: u32,
    pub consecutive_error: u32,
    pub consecutive_success: u32,
}

impl Counts {
    /// The counters after `measurements`, in order.
    pub fn of(measurements: &[Measurement]) -> Counts {
        let mut c = Counts::default();
        for m in measurements {
            match m.phase {
                Phase::Successful => {
                    c.successful += 1;
                    c.count += 1;
                    c.consecutive_error = 0;
                    c.consecutive_success += 1;
                }
                Phase::Failed | Phase::Inconclusive => {
                    if m.phase == Phase::Failed {
                        c.failed += 1;
                    } else {
                        c.inconclusive += 1;
                    }
                    c.count += 1;
                    c.consecutive_error = 0;
                    c.consecutive_success = 0;
                }
                Phase::Error => {
                    c.error += 1;
                    c.consecutive_error += 1;
                    c.consecutive_success = 0;
                }
                Phase::Pending | Phase::Running => {}
            }
        }
        c
    }
}

/// A metric's phase after its measurements so far (Argo's `assessMetricStatus`); `stopping`:
/// the run was told to stop (a step ended), so an indefinite metric that has not failed is
/// Successful.
pub fn assess(rules: &MetricRules, measurements: &[Measurement], stopping: bool) -> Phase {
    if measurements.is_empty() {
        return if stopping {
            Phase::Successful
        } else {
            Phase::Pending
        };
    }
    let c = Counts::of(measurements);
    let mut phase = None;
    if rules.failure_limit >= 0 && i64::from(c.failed) > rules.failure_limit {
        phase = Some(Phase::Failed);
    }
    if c.inconclusive > rules.inconclusive_limit {
        phase = Some(Phase::Inconclusive);
    }
    if c.consecutive_error > rules.consecutive_error_limit {
        phase = Some(Phase::Error);
    }
    if let Some(p) = phase {
        return p;
    }
    let success_limit = rules.consecutive_success_limit;
    if success_limit > 0 && c.consecutive_success >= success_limit {
        return Phase::Successful;
    }
    if let Some(n) = rules.effective_count() {
        if c.count >= n {
            return match (success_limit > 0, rules.failure_limit >= 0) {
                (true, true) => Phase::Inconclusive,
                (true, false) => Phase::Failed,
                _ => Phase::Successful,
            };
        }
    }
    if stopping {
        Phase::Successful
    } else {
        Phase::Running
    }
}

/// A run's phase from its metrics' phases: the worst completed non-successful phase as soon
/// as one metric has it (the run then stops), else Running while any runs, else Successful.
pub fn run_phase(metrics: &[Phase]) -> Phase {
    let worst_done = metrics
        .iter()
        .copied()
        .filter(|p| matches!(p, Phase::Failed | Phase::Error | Phase::Inconclusive))
        .max_by_key(|p| p.rank());
    if let Some(p) = worst_done {
        return p;
    }
    if metrics.iter().any(|p| !p.completed()) {
        return Phase::Running;
    }
    Phase::Successful
}

/// What a Rollout's analysis came to at one judgement of a step ([`judge_step`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StepAnalysis {
    /// The measurements taken now, as checks (`Sluice-Check` trailers).
    pub judged: Vec<Judged>,
    /// Every running metric's measurements after this judgement: the next status's.
    pub history: Vec<MetricHistory>,
    /// The run's phase for the step: Failed or Error aborts, Inconclusive waits for a human,
    /// Running holds the step, Successful lets it end. A background metric still running
    /// does not hold the step.
    pub phase: Phase,
    /// The metrics that are not Successful or Running, with their last measurement.
    pub summary: String,
}

/// The answer a metric observation is, shaped as Argo's provider shapes `result`: `list`
/// for Prometheus (the vector's values; no series is `[]`), one value (or `nil`) otherwise.
pub fn answer(list: bool, observed: Option<&MetricValue>) -> Answer {
    match (observed, list) {
        (None, _) => Answer::Error("not observed".into()),
        (Some(MetricValue::Error(e)), _) => Answer::Error(e.clone()),
        (Some(MetricValue::Value(v)), true) => Answer::Value(Value::List(vec![Value::Number(*v)])),
        (Some(MetricValue::Value(v)), false) => Answer::Value(Value::Number(*v)),
        (Some(MetricValue::NoData), true) => Answer::Value(Value::List(Vec::new())),
        (Some(MetricValue::NoData), false) => Answer::Value(Value::Nil),
        (Some(MetricValue::Structured(v)), _) => Answer::Value(v.clone()),
    }
}

/// Judges the analysis metrics that measure at `step`: each one not completed yet takes one
/// measurement of what was observed for it (`observed` by metric name) and is assessed over
/// its measurements so far (Argo's `assessMetricStatus`); `None` when no metric measures at
/// this step.
pub fn judge_step<'a>(
    gates: &[ArgoGate],
    step: u32,
    history: &[MetricHistory],
    observed: impl Fn(&str) -> Option<&'a MetricValue>,
) -> Option<StepAnalysis> {
    judge_step_at(gates, step, history, observed, None)
}

/// When a judgement happens: `now`, and when the step it is at started. A metric is measured
/// only once due: `initialDelay` after its run started, then every `interval` after its last
/// measurement, as Argo schedules measurements (a judgement between two due times takes
/// none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JudgedAt {
    pub now: jiff::Timestamp,
    pub step_started: jiff::Timestamp,
}

/// [`judge_step`] at a time: each metric measures only when due ([`JudgedAt`]); `None` for
/// `at` measures every metric that has not completed.
pub fn judge_step_at<'a>(
    gates: &[ArgoGate],
    step: u32,
    history: &[MetricHistory],
    observed: impl Fn(&str) -> Option<&'a MetricValue>,
    at: Option<JudgedAt>,
) -> Option<StepAnalysis> {
    let active: Vec<&ArgoGate> = gates.iter().filter(|g| g.measures_at(step)).collect();
    if active.is_empty() {
        return None;
    }
    let mut checks = Vec::new();
    let mut next_history = Vec::new();
    let mut phases = Vec::new();
    let mut summary = Vec::new();
    for gate in active {
        let mut kept = history
            .iter()
            .find(|h| h.metric == gate.metric)
            .cloned()
            .unwrap_or_else(|| MetricHistory {
                metric: gate.metric.clone(),
                measurements: Vec::new(),
                started: at.map(|a| a.step_started),
                last: None,
            });
        let mut phase = assess(&gate.rules, &kept.measurements, false);
        let due = match (at, kept.due(&gate.rules)) {
            (Some(a), Some(due)) => a.now >= due,
            _ => true,
        };
        // A job metric's Job that has not finished yet is no measurement: the step waits.
        let job_running =
            gate.job.is_some() && matches!(observed(&gate.metric), Some(MetricValue::NoData));
        if !phase.completed() && due && !job_running {
            let m = measure(&gate.rules, &answer(gate.list, observed(&gate.metric)));
            checks.push(judged(&gate.metric, &m));
            kept.measurements.push(m);
            kept.last = at.map(|a| a.now);
            phase = assess(&gate.rules, &kept.measurements, false);
        }
        let measurements = &kept.measurements;
        if matches!(phase, Phase::Failed | Phase::Error | Phase::Inconclusive) {
            let last = measurements.last().map_or(String::new(), |m| {
                if m.message.is_empty() {
                    m.value.clone()
                } else {
                    m.message.clone()
                }
            });
            summary.push(format!("metric {} {phase:?} ({last})", gate.metric));
        }
        // A background metric that has not finished does not hold the step.
        let holds = gate.inline || phase.completed();
        phases.push(if holds { phase } else { Phase::Successful });
        next_history.push(kept);
    }
    // Background metrics not measured at this step keep their history.
    for h in history {
        if !next_history.iter().any(|n| n.metric == h.metric)
            && gates.iter().any(|g| g.metric == h.metric && !g.inline)
        {
            next_history.push(h.clone());
        }
    }
    Some(StepAnalysis {
        judged: checks,
        history: next_history,
        phase: run_phase(&phases),
        summary: summary.join(", "),
    })
}

/// The history kept when the canary leaves a step: the background metrics' only.
pub fn after_step(gates: &[ArgoGate], history: &[MetricHistory]) -> Vec<MetricHistory> {
    history
        .iter()
        .filter(|h| gates.iter().any(|g| g.metric == h.metric && !g.inline))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argo_expr::parse;
    use proptest::prelude::*;

    fn rules() -> MetricRules {
        MetricRules {
            success: Some(parse("result[0] >= 0.95").unwrap()),
            failure: None,
            count: None,
            has_interval: false,
            failure_limit: 0,
            inconclusive_limit: 0,
            consecutive_error_limit: DEFAULT_CONSECUTIVE_ERROR_LIMIT,
            consecutive_success_limit: 0,
            interval: None,
            initial_delay: None,
        }
    }

    fn at(phase: Phase) -> Measurement {
        Measurement {
            phase,
            value: String::new(),
            message: String::new(),
        }
    }

    fn num(v: f64) -> Answer {
        Answer::Value(Value::List(vec![Value::Number(v)]))
    }

    #[test]
    fn conditions_make_the_measurement_phase_as_argo_does() {
        let r = rules();
        assert_eq!(measure(&r, &num(0.99)).phase, Phase::Successful);
        assert_eq!(measure(&r, &num(0.5)).phase, Phase::Failed);
        let empty = measure(&r, &Answer::Value(Value::List(vec![])));
        assert_eq!(empty.phase, Phase::Error);
        assert!(empty.message.contains("no data"), "{}", empty.message);
        assert_eq!(
            measure(&r, &Answer::Error("HTTP 500".into())).phase,
            Phase::Error
        );
        let both = MetricRules {
            failure: Some(parse("result[0] < 0.5").unwrap()),
            ..rules()
        };
        assert_eq!(measure(&both, &num(0.7)).phase, Phase::Inconclusive);
        assert_eq!(measure(&both, &num(0.4)).phase, Phase::Failed);
        let failure_only = MetricRules {
            success: None,
            failure: Some(parse("result[0] < 0.5").unwrap()),
            ..rules()
        };
        assert_eq!(measure(&failure_only, &num(0.7)).phase, Phase::Successful);
        let neither = MetricRules {
            success: None,
            ..rules()
        };
        assert_eq!(measure(&neither, &num(0.0)).phase, Phase::Successful);
    }

    #[test]
    fn limits_and_count_decide_the_metric_as_argo_does() {
        use Phase::*;
        let r = MetricRules {
            count: Some(3),
            has_interval: true,
            failure_limit: 1,
            ..rules()
        };
        assert_eq!(assess(&r, &[], false), Pending);
        assert_eq!(assess(&r, &[], true), Successful);
        assert_eq!(assess(&r, &[at(Successful), at(Failed)], false), Running);
        assert_eq!(assess(&r, &[at(Failed), at(Failed)], false), Failed);
        assert_eq!(
            assess(&r, &[at(Successful), at(Failed), at(Successful)], false),
            Successful
        );
        // Errors do not count toward `count`; more than 4 in a row is Error.
        let errors = vec![at(Error); 4];
        assert_eq!(assess(&r, &errors, false), Running);
        let errors = vec![at(Error); 5];
        assert_eq!(assess(&r, &errors, false), Error);
        // A measurement in between resets the streak.
        let mut mixed = vec![at(Error); 4];
        mixed.push(at(Successful));
        mixed.extend(vec![at(Error); 4]);
        assert_eq!(assess(&r, &mixed, false), Running);
        // inconclusiveLimit 0: one inconclusive ends it.
        assert_eq!(assess(&r, &[at(Inconclusive)], false), Inconclusive);
        // No interval and no count: one measurement.
        assert_eq!(assess(&rules(), &[at(Successful)], false), Successful);
        assert_eq!(assess(&rules(), &[at(Failed)], false), Failed);
        // An interval without count runs until stopped.
        let endless = MetricRules {
            has_interval: true,
            ..rules()
        };
        assert_eq!(assess(&endless, &vec![at(Successful); 9], false), Running);
        assert_eq!(assess(&endless, &vec![at(Successful); 9], true), Successful);
        // failureLimit -1: failures never end it.
        let unlimited = MetricRules {
            failure_limit: -1,
            count: Some(2),
            ..rules()
        };
        assert_eq!(
            assess(&unlimited, &[at(Failed), at(Failed)], false),
            Successful
        );
    }

    #[test]
    fn consecutive_success_limit_ends_early_or_fails_at_count() {
        use Phase::*;
        let r = MetricRules {
            count: Some(3),
            consecutive_success_limit: 2,
            failure_limit: 2,
            ..rules()
        };
        assert_eq!(
            assess(&r, &[at(Failed), at(Successful), at(Successful)], false),
            Successful
        );
        assert_eq!(
            assess(&r, &[at(Successful), at(Failed), at(Successful)], false),
            Inconclusive
        );
        let no_failure_limit = MetricRules {
            failure_limit: -1,
            ..r
        };
        assert_eq!(
            assess(
                &no_failure_limit,
                &[at(Successful), at(Failed), at(Successful)],
                false
            ),
            Failed
        );
    }

    #[test]
    fn a_recorded_measurement_replays_to_its_phase_and_reads_as_a_check() {
        let r = rules();
        for answer in [
            num(0.99),
            num(0.2),
            Answer::Value(Value::List(vec![])),
            Answer::Error("HTTP 500".into()),
        ] {
            let m = measure(&r, &answer);
            assert_eq!(replay(&r, &m), Some(m.phase), "{m:?}");
        }
        let failed = measure(&r, &num(0.2));
        assert_eq!(
            crate::trailer::check_trailer(&judged("success-rate", &failed)),
            "success-rate=0.2 fail"
        );
        let ok = measure(&r, &num(0.99));
        assert_eq!(
            crate::trailer::check_trailer(&judged("success-rate", &ok)),
            "success-rate=0.99 pass"
        );
        let error = measure(&r, &Answer::Error("HTTP 500".into()));
        assert_eq!(
            crate::trailer::check_trailer(&judged("success-rate", &error)),
            "success-rate=error fail"
        );
        let nan = measure(&r, &num(f64::NAN));
        assert_eq!(
            crate::trailer::check_trailer(&judged("success-rate", &nan)),
            "success-rate=NaN fail"
        );
        // A record whose value was changed replays to another phase: audit sees it.
        let forged = Measurement {
            value: "[0.2]".into(),
            ..ok
        };
        assert_eq!(replay(&r, &forged), Some(Phase::Failed));
    }

    #[test]
    fn the_run_takes_its_worst_metric() {
        use Phase::*;
        assert_eq!(run_phase(&[Successful, Successful]), Successful);
        assert_eq!(run_phase(&[Successful, Running]), Running);
        assert_eq!(run_phase(&[Running, Failed]), Failed);
        assert_eq!(run_phase(&[Inconclusive, Error]), Error);
        assert_eq!(run_phase(&[Error, Failed, Inconclusive]), Failed);
        assert_eq!(run_phase(&[]), Successful);
    }

    fn phase() -> impl Strategy<Value = Phase> {
        prop_oneof![
            Just(Phase::Successful),
            Just(Phase::Failed),
            Just(Phase::Inconclusive),
            Just(Phase::Error)
        ]
    }

    proptest! {
        #[test]
        fn failures_beyond_the_limit_always_fail(
            ms in proptest::collection::vec(phase(), 0..30),
            limit in 0i64..5,
        ) {
            let r = MetricRules { failure_limit: limit, inconclusive_limit: 100, consecutive_error_limit: 100, ..rules() };
            let measured: Vec<Measurement> = ms.iter().copied().map(at).collect();
            let failed = ms.iter().filter(|p| **p == Phase::Failed).count() as i64;
            let got = assess(&r, &measured, false);
            prop_assert_eq!(failed > limit, got == Phase::Failed);
        }
    }
}
