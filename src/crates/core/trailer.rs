//! The `Sluice-Check` trailer: one line per check a decision judged, written by the commit
//! renderer and read back by `sluice history -o json` (and by anything that re-derives a
//! commit's trailers from its recorded inputs). Formatting lives here, in one pure function,
//! so every writer and reader agrees on it.
//!
//! Grammar (tokens separated by one space):
//!
//! ```text
//! metric:   NAME=VALUE [min=NUM] [max=NUM] pass|fail
//! webhook:  webhook:NAME=ok|error|uncalled pass|fail
//! VALUE:    NUM | nodata | unobserved | error | NaN | +Inf | -Inf
//! NUM:      at most two decimals, no trailing zeros (`99`, `99.93`, `-0.5`)
//! ```
//!
//! `nodata`: the query returned no series; `unobserved`: the query was not run this tick;
//! `error`: the query failed (the reason is in the commit body, not the trailer).

use crate::number::fmt_num;
use crate::status::CheckRecord;

/// What a check judged: a metric against its range, or a webhook's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckKind {
    Metric,
    Webhook,
}

/// One check a decision judged, with its kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub kind: CheckKind,
    pub record: CheckRecord,
}

/// The value of a `Sluice-Check` trailer for one judged check.
pub fn check_trailer(check: &Judged) -> String {
    let r = &check.record;
    let verdict = if r.passed { "pass" } else { "fail" };
    match check.kind {
        CheckKind::Webhook => {
            let result = match (r.passed, r.detail.as_str()) {
                (true, _) => "ok",
                (false, "not called") => "uncalled",
                (false, _) => "error",
            };
            format!("webhook:{}={result} {verdict}", r.name)
        }
        CheckKind::Metric => {
            let value = match r.value {
                Some(v) => fmt_num(v),
                None => match r.detail.as_str() {
                    "no data" => "nodata".to_string(),
                    "not observed" => "unobserved".to_string(),
                    d @ ("NaN" | "+Inf" | "-Inf") => d.to_string(),
                    _ => "error".to_string(),
                },
            };
            let mut out = format!("{}={value}", r.name);
            if let Some(min) = r.min {
                out.push_str(&format!(" min={}", fmt_num(min)));
            }
            if let Some(max) = r.max {
                out.push_str(&format!(" max={}", fmt_num(max)));
            }
            out.push(' ');
            out.push_str(verdict);
            out
        }
    }
}

/// A `Sluice-Check` trailer read back. `value` is the text after `=` (a number or one of the
/// words of the grammar); `min`/`max` as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckTrailer {
    pub kind: CheckKind,
    pub name: String,
    pub value: String,
    pub min: Option<String>,
    pub max: Option<String>,
    pub passed: bool,
}

/// Parses a `Sluice-Check` trailer's value; `None` when it does not follow the grammar.
pub fn parse_check_trailer(text: &str) -> Option<CheckTrailer> {
    let mut tokens: Vec<&str> = text.split(' ').collect();
    let passed = match tokens.pop()? {
        "pass" => true,
        "fail" => false,
        _ => return None,
    };
    let (first, rest) = tokens.split_first()?;
    let (name, value) = first.split_once('=')?;
    let (kind, name) = match name.strip_prefix("webhook:") {
        Some(n) => (CheckKind::Webhook, n),
        None => (CheckKind::Metric, name),
    };
    if name.is_empty() || value.is_empty() {
        return None;
    }
    let (mut min, mut max) = (None, None);
    for t in rest {
        match t.split_once('=')? {
            ("min", v) if min.is_none() && max.is_none() && kind == CheckKind::Metric => {
                min = Some(v.to_string())
            }
            ("max", v) if max.is_none() && kind == CheckKind::Metric => max = Some(v.to_string()),
            _ => return None,
        }
    }
    Some(CheckTrailer {
        kind,
        name: name.to_string(),
        value: value.to_string(),
        min,
        max,
        passed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metric(value: Option<f64>, min: Option<f64>, max: Option<f64>, detail: &str) -> Judged {
        Judged {
            kind: CheckKind::Metric,
            record: CheckRecord {
                name: "request-success-rate".into(),
                value,
                min,
                max,
                passed: value.is_some(),
                detail: detail.into(),
            },
        }
    }

    #[test]
    fn every_form_of_the_check_trailer_round_trips() {
        let hook = |passed: bool, detail: &str| Judged {
            kind: CheckKind::Webhook,
            record: CheckRecord {
                name: "load-test".into(),
                value: None,
                min: None,
                max: None,
                passed,
                detail: detail.into(),
            },
        };
        let cases = [
            (
                metric(Some(99.93), Some(99.0), None, ""),
                "request-success-rate=99.93 min=99 pass",
            ),
            (
                metric(Some(412.456), None, Some(500.0), ""),
                "request-success-rate=412.46 max=500 pass",
            ),
            (
                metric(Some(5.0), Some(1.0), Some(10.5), ""),
                "request-success-rate=5 min=1 max=10.5 pass",
            ),
            (
                metric(None, Some(99.0), None, "no data"),
                "request-success-rate=nodata min=99 fail",
            ),
            (
                metric(None, Some(99.0), None, "not observed"),
                "request-success-rate=unobserved min=99 fail",
            ),
            (
                metric(None, Some(99.0), None, "query failed: HTTP 500"),
                "request-success-rate=error min=99 fail",
            ),
            (
                metric(None, None, Some(1.0), "+Inf"),
                "request-success-rate=+Inf max=1 fail",
            ),
            (hook(true, "ok"), "webhook:load-test=ok pass"),
            (hook(false, "HTTP 500"), "webhook:load-test=error fail"),
            (hook(false, "not called"), "webhook:load-test=uncalled fail"),
        ];
        for (check, want) in cases {
            let text = check_trailer(&check);
            assert_eq!(text, want);
            let back = parse_check_trailer(&text).expect(want);
            assert_eq!(
                (back.kind, back.name.as_str(), back.passed),
                (check.kind, check.record.name.as_str(), check.record.passed),
                "{want}"
            );
        }
        let back = parse_check_trailer("request-success-rate=5 min=1 max=10.5 pass").unwrap();
        assert_eq!(
            (
                back.value.as_str(),
                back.min.as_deref(),
                back.max.as_deref()
            ),
            ("5", Some("1"), Some("10.5"))
        );
    }

    #[test]
    fn malformed_check_trailers_are_not_read() {
        for bad in [
            "",
            "pass",
            "rate=1 maybe",
            "rate pass",
            "=1 pass",
            "rate=1 max=2 min=1 pass",
            "rate=1 foo=2 pass",
            "webhook:hook=ok min=1 pass",
        ] {
            assert_eq!(parse_check_trailer(bad), None, "{bad:?}");
        }
    }
}
