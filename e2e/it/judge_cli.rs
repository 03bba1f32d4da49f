//! `sluice judge` through the real binary: series files and folders, `--config` with a `Judge`
//! object, the exit codes (0 pass, 1 fail, 3 marginal, 2 bad input), the JSON against R's
//! numbers, and bad input named by file and line.

use std::path::Path;

use serde_json::Value as Json;

use crate::support::judge::judge_object;
use crate::support::run_sluice;

/// A spread of 60 values around `centre` (deterministic, with some ties).
fn spread(centre: f64, seed: u64) -> Vec<f64> {
    (0..60u64)
        .map(|i| centre * (1.0 + (((i * 37 + seed * 11) % 23) as f64 - 11.0) / 100.0))
        .collect()
}

fn write(dir: &Path, name: &str, values: &[f64]) {
    let text: String = values.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(dir.join(name), text).unwrap();
}

/// Four metrics: `latency` 30 % slower on the canary, the rest alike.
fn folder(dir: &Path) {
    write(dir, "latency.baseline", &spread(100.0, 1));
    write(dir, "latency.canary", &spread(130.0, 2));
    for (i, name) in ["errors", "cpu", "success"].iter().enumerate() {
        let i = i as u64;
        write(dir, &format!("{name}.baseline"), &spread(50.0, 3 + i));
        write(dir, &format!("{name}.canary"), &spread(50.0, 4 + i));
    }
}

/// The Judge `podinfo` the folder's series are scored by.
fn judge_config() -> String {
    judge_object(
        "  name: podinfo\n",
        "{pass: 95, marginal: 80}",
        "  groups: {latency: 40}
  metrics:
    - name: latency
      direction: increase
      group: latency
    - name: errors
      direction: increase
    - name: cpu
    - name: success
      direction: decrease
",
    )
}

fn judge(args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["judge"];
    all.extend_from_slice(args);
    run_sluice(&all)
}

#[test]
fn judge_folder_scores_each_metric_and_exits_by_outcome() {
    let tmp = tempfile::tempdir().unwrap();
    folder(tmp.path());
    let dir = tmp.path().display().to_string();
    // Kayenta's defaults: one group, 3 of 4 pass = 75, marginal at pass 95 / marginal 75.
    let (code, stdout, stderr) = judge(&[&dir]);
    assert_eq!(code, 3, "{stdout}{stderr}");
    assert!(
        stdout.contains("score 75: marginal (pass>=95 marginal>=75)"),
        "{stdout}"
    );
    let latency = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("latency"))
        .unwrap();
    assert!(latency.contains("High"), "{stdout}");
    for alike in ["errors", "cpu", "success"] {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(alike))
            .unwrap();
        assert!(line.contains("Pass"), "{stdout}");
    }
    // The latency group weighs 40 and scores 0; the default group 60 at 100: 60, a fail.
    let config = tmp.path().join("judge.yaml");
    std::fs::write(&config, judge_config()).unwrap();
    let (code, stdout, _) = judge(&[&dir, "--config", &config.display().to_string()]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("group latency: 0 (1 metrics)"), "{stdout}");
    assert!(
        stdout.contains("score 60: fail (pass>=95 marginal>=80)"),
        "{stdout}"
    );
    // Only the alike metrics: a pass.
    std::fs::remove_file(tmp.path().join("latency.canary")).unwrap();
    std::fs::remove_file(tmp.path().join("latency.baseline")).unwrap();
    let (code, stdout, _) = judge(&[&dir]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("score 100: pass"), "{stdout}");
}

/// The JSON of one pair from R's reference fixture carries R's U, p, interval and estimate.
#[test]
fn judge_json_of_a_pair_carries_r_numbers() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/fixtures/judge/reference.json");
    let cases: Vec<Json> =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let case = cases
        .iter()
        .find(|c| c["name"] == "kayenta high metric")
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (canary, baseline) = (tmp.path().join("c.json"), tmp.path().join("b.json"));
    std::fs::write(&canary, case["canary"].to_string()).unwrap();
    std::fs::write(&baseline, case["baseline"].to_string()).unwrap();
    // Kayenta's series hold 30 values each: the judge's minimum (50 by default) set to 30.
    let config = tmp.path().join("judge.yaml");
    std::fs::write(
        &config,
        "apiVersion: sluice.dev/v1alpha1\nkind: Judge\nmetadata: {name: c}\nspec:\n  thresholds: {pass: 95, marginal: 75}\n  minSamples: 30\n  metrics:\n    - name: c\n",
    )
    .unwrap();
    let (code, stdout, stderr) = judge(&[
        "--baseline",
        &baseline.display().to_string(),
        "--canary",
        &canary.display().to_string(),
        "--config",
        &config.display().to_string(),
        "-o",
        "json",
    ]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    let report: Json = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["outcome"], "fail");
    let metric = &report["metrics"][0];
    assert_eq!(metric["name"], "c");
    assert_eq!(metric["classification"], "High");
    for (ours, r) in [
        ("u", "u"),
        ("pValue", "p"),
        ("ciLow", "ci_low"),
        ("ciHigh", "ci_high"),
        ("estimate", "estimate"),
    ] {
        let (ours, r) = (metric[ours].as_f64().unwrap(), case[r].as_f64().unwrap());
        assert!(((ours - r) / r).abs() <= 1e-9, "{ours} vs R {r}");
    }
}

#[test]
fn judge_bad_input_names_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("m.baseline");
    let bad = tmp.path().join("m.canary");
    std::fs::write(&good, "1\n2\n3\n").unwrap();
    std::fs::write(&bad, "1\n# fine\n2\nslow\n").unwrap();
    let (code, _, stderr) = judge(&[
        "--baseline",
        &good.display().to_string(),
        "--canary",
        &bad.display().to_string(),
    ]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains(&format!(
            "{}:4: expected a number (or NaN), found \"slow\"",
            bad.display()
        )),
        "{stderr}"
    );

    let config = tmp.path().join("judge.yaml");
    let text = judge_config()
        .replace("marginal: 80", "marginal: 99")
        .replace("direction: decrease", "direction: down");
    std::fs::write(&config, text).unwrap();
    let (code, _, stderr) = judge(&[
        tmp.path().to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    let file = config.display().to_string();
    assert!(
        stderr.contains(&format!(
            "{file}:6: spec.thresholds.marginal: expected at most pass (95), found 99"
        )),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("{file}:16: spec.metrics[3].direction: expected increase, decrease or either, found \"down\"")), "{stderr}");

    // A folder whose metric lacks its baseline.
    std::fs::remove_file(&good).unwrap();
    std::fs::write(&bad, "1\n").unwrap();
    let (code, _, stderr) = judge(&[tmp.path().to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("m.baseline: missing"), "{stderr}");
}
