//! Series the statistical judge cannot test must not pass it. Two shapes (issue 38): 29 canary
//! values at 3x the primary's plus one of 1e308, on which the test's search for the interval
//! does not converge (`Error`), and one value per series (a canary with little traffic), on
//! which no interval exists. Each scored 100 and passed: `sluice judge` exited 0 and the loop
//! promoted the canary. Here `sluice judge` (the real binary) exits 1 on both, and `sluice run`
//! with a real Prometheus serving such series rolls both canaries back, a history that
//! `sluice audit` replays clean.

use std::path::Path;

use crate::support::judge::{increase, judged_canary, loop_judge, rolled_out, trailers};
use crate::support::metrics::{loop_apps, phase};
use crate::support::prometheus::Scraped;
use crate::support::{git, run_sluice, seeded_remote, str_pairs};

fn write_series(path: &Path, values: &[f64]) {
    let text: String = values.iter().map(|v| format!("{v:e}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// `sluice judge --baseline … --canary … [more]`: (exit code, stdout and stderr).
fn judge_files(dir: &Path, baseline: &[f64], canary: &[f64], more: &[&str]) -> (i32, String) {
    let (b, c) = (dir.join("latency.baseline"), dir.join("latency.canary"));
    write_series(&b, baseline);
    write_series(&c, canary);
    let (b, c) = (b.display().to_string(), c.display().to_string());
    let mut args = vec!["judge", "--baseline", &b, "--canary", &c];
    args.extend_from_slice(more);
    let (code, stdout, stderr) = run_sluice(&args);
    (code, format!("{stdout}{stderr}"))
}

/// A `Judge` file for `sluice judge --config` with one metric, `latency`, and `minSamples`.
fn judge_config(dir: &Path, min_samples: usize) -> String {
    let path = dir.join("judge.yaml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: sluice.dev/v1alpha1\nkind: Judge\nmetadata: {{name: latency}}\nspec:\n  thresholds: {{pass: 95, marginal: 75}}\n  minSamples: {min_samples}\n  metrics:\n    - name: latency\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// The first pair: the primary's 30 values, the canary's 29 at three times those
/// and one of 1e308.
fn spiked() -> (Vec<f64>, Vec<f64>) {
    let baseline: Vec<f64> = (0..30).map(|i| 100.0 + f64::from(i)).collect();
    let mut canary: Vec<f64> = baseline.iter().map(|v| v * 3.0).collect();
    canary[29] = 1e308;
    (baseline, canary)
}

#[test]
fn sluice_judge_fails_a_canary_whose_test_does_not_converge() {
    let tmp = tempfile::tempdir().unwrap();
    let (baseline, canary) = spiked();
    // The defaults: 30 values are under the 50 a series needs, so the metric cannot pass.
    let (code, out) = judge_files(tmp.path(), &baseline, &canary, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("score 0: fail"), "{out}");
    assert!(out.contains("NodataFailMetric"), "{out}");
    // With the minimum at 30 the test runs and cannot converge: an Error, which fails.
    let config = judge_config(tmp.path(), 30);
    let (code, out) = judge_files(tmp.path(), &baseline, &canary, &["--config", &config]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(" Error "), "{out}");
    assert!(out.contains("did not converge"), "{out}");
    assert!(out.contains("score 0: fail"), "{out}");
}

#[test]
fn sluice_judge_fails_one_value_per_series() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, out) = judge_files(tmp.path(), &[100.0], &[900.0], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("too few values"), "{out}");
    assert!(out.contains("score 0: fail"), "{out}");
    // Even a minimum of 1 does not make it pass: the test cannot compute an interval.
    let config = judge_config(tmp.path(), 1);
    let (code, out) = judge_files(tmp.path(), &[100.0], &[900.0], &["--config", &config]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("all observations are tied"), "{out}");
}

/// Latency gauges at `t` seconds: each primary on a sawtooth around 100 ms, each canary at
/// three times it. `spike_ms` is what the `spiky` judge's query adds to a value now and then:
/// 1e308 for the canary, 0 for its primary.
fn exposition(t: f64) -> String {
    let base = 100.0 + (t * 7.0) % 10.0 - 5.0;
    let mut out = String::from("# TYPE latency_ms gauge\n# TYPE spike_ms gauge\n");
    for name in ["spiky", "sparse"] {
        out.push_str(&format!(
            "latency_ms{{deployment=\"{name}-primary\"}} {base}\nlatency_ms{{deployment=\"{name}\"}} {}\n",
            base * 3.0
        ));
    }
    out.push_str(
        "spike_ms{deployment=\"spiky-primary\"} 0\nspike_ms{deployment=\"spiky\"} 1e308\n",
    );
    out
}

/// Two judges over 10 s at 1 s (10 or 11 values per series), each needing 10. `spiky`'s query
/// adds `spike_ms` at every evaluation whose time is a multiple of 5 s (plus under 1 s): two
/// values of the canary's window are 1e308, the rest three times the primary's, and the test
/// cannot converge on them. `sparse`'s keeps only the evaluations whose time modulo 11 s is
/// under 1 s: one value per series per window, as a canary with little traffic gives.
fn judges() -> String {
    loop_judge(
        "spiky",
        75,
        &increase(
            "latency",
            "latency_ms{deployment=\"{{ workload }}\"} + on() ((vector(time()) % 5 < bool 1) * on() spike_ms{deployment=\"{{ workload }}\"})",
        ),
    ) + "---\n"
        + &loop_judge(
            "sparse",
            75,
            &increase(
                "latency",
                "latency_ms{deployment=\"{{ workload }}\"} and on() (vector(time()) % 11 < 1)",
            ),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_the_judge_cannot_test_is_rolled_back_not_promoted() {
    let scraped = Scraped::start(exposition).await;

    let tmp = tempfile::tempdir().unwrap();
    let config = scraped.prom.repo_config();
    let names = ["spiky", "sparse"];
    let mut files = vec![
        (".sluice/config.yaml".to_string(), config),
        ("apps/judges.yaml".to_string(), judges()),
    ];
    files.extend(loop_apps(&names, |name| judged_canary(name, name)));
    let bare = seeded_remote(tmp.path(), &str_pairs(&files));
    tokio::task::block_in_place(|| rolled_out(&bare, tmp.path(), &names));
    for name in names {
        assert_eq!(phase(&bare, name), "Failed:0", "{name}: rolled back");
        let judged = trailers(&bare, "Sluice-Judge", &format!("{name}: roll back"));
        assert_eq!(
            judged.trim(),
            "score=0 fail (pass>=95 marginal>=75)",
            "{name}"
        );
    }
    let metric = trailers(&bare, "Sluice-Judge-Metric", "spiky: roll back");
    assert!(
        metric.starts_with("latency Error group=default"),
        "{metric}"
    );
    let metric = trailers(&bare, "Sluice-Judge-Metric", "sparse: roll back");
    assert!(
        metric.starts_with("latency NodataFailMetric group=default"),
        "{metric}"
    );
    // No judgement of either passed.
    let all = git(
        &bare,
        &[
            "log",
            "--format=%(trailers:key=Sluice-Judge,valueonly)",
            "main",
        ],
    );
    assert!(!all.contains(" pass ("), "{all}");
    // The replay records hold the series: audit judges them again and finds what was decided.
    crate::support::audit::clean(&bare);
}
