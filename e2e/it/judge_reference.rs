//! The judge's Mann-Whitney numbers against R's `wilcox.test` (the committed fixture
//! `e2e/fixtures/judge/reference.json`, made by `reference.R` beside it), and the fixture
//! against what R prints today.

use std::path::PathBuf;
use std::process::Command;

use serde::Deserialize;
use sluice::core::judge::prepare::{handle_nans, NanStrategy};
use sluice::core::judge::{mann_whitney, TestResult};

#[derive(Deserialize)]
struct Case {
    name: String,
    canary: Vec<Option<f64>>,
    baseline: Vec<Option<f64>>,
    u: f64,
    p: f64,
    ci_low: f64,
    ci_high: f64,
    estimate: f64,
}

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("e2e/fixtures/judge")
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(fixture_dir().join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A series as the fixture holds it, null for NaN, after the default NaN strategy.
fn series(values: &[Option<f64>]) -> Vec<f64> {
    let raw: Vec<f64> = values.iter().map(|v| v.unwrap_or(f64::NAN)).collect();
    handle_nans(&raw, NanStrategy::Remove)
}

/// Equal to 1e-9 relative (absolute for a zero on R's side).
fn close(ours: f64, r: f64) -> bool {
    if r == 0.0 {
        return ours.abs() <= 1e-12;
    }
    ((ours - r) / r).abs() <= 1e-9
}

#[test]
fn judge_mann_whitney_equals_r_wilcox_test_to_1e_9() {
    let cases = cases();
    assert!(cases.len() >= 30, "the fixture holds {} cases", cases.len());
    let mut wrong = Vec::new();
    for case in &cases {
        let result = mann_whitney(&series(&case.canary), &series(&case.baseline), 0.98);
        let Ok(TestResult {
            u,
            p_value,
            ci_low,
            ci_high,
            estimate,
        }) = result
        else {
            wrong.push(format!("{}: {result:?}", case.name));
            continue;
        };
        let fields = [
            ("u", u, case.u),
            ("p", p_value, case.p),
            ("ci_low", ci_low, case.ci_low),
            ("ci_high", ci_high, case.ci_high),
            ("estimate", estimate, case.estimate),
        ];
        for (field, ours, r) in fields {
            if !close(ours, r) {
                wrong.push(format!("{}: {field}: sluice {ours:e}, R {r:e}", case.name));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "differences from R:\n{}",
        wrong.join("\n")
    );
}

/// R (Debian `r-base-core`, installed by `e2e/run`) must be there: a missing Rscript fails this.
#[test]
fn judge_reference_fixture_is_what_r_prints() {
    let dir = fixture_dir();
    let out = Command::new("Rscript")
        .arg(dir.join("reference.R"))
        .output()
        .unwrap_or_else(|e| {
            panic!("Rscript (r-base-core, installed by e2e/run) could not run: {e}")
        });
    assert!(
        out.status.success(),
        "Rscript failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let committed = std::fs::read_to_string(dir.join("reference.json")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        committed,
        "reference.json is not what reference.R prints: regenerate it (see the script's header)"
    );
}
