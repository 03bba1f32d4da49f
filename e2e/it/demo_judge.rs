//! `sluice demo --judge` through the real binary: the demo's canary judged by the statistical
//! judge against its primary as well as by its threshold gates. A canary 2 % slower than its
//! primary is promoted; with `--fail`, one 30 % slower (276 ms, far under the 500 ms gate)
//! passes every threshold gate and is rolled back by the judge. Both demos print the judge's
//! table as they go, keep their repo (`--keep`) with the judge's trailers in its git log, and
//! `sluice audit` judges the recorded series again and finds the history clean.

use std::path::Path;

use crate::support::judge::all_trailers;

/// `sluice demo --judge ARGS --keep DIR`: its exit code, stdout and the kept remote.
fn demo(dir: &Path, args: &[&str]) -> (i32, String, std::path::PathBuf) {
    let out = crate::support::sluice_demo(&["--judge"])
        .args(args)
        .arg("--keep")
        .arg(dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.code().is_some(),
        "killed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code().unwrap_or(-1),
        format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)),
        dir.join("config-repo.git"),
    )
}

/// The values of trailer `key` on the newest commit whose subject matches `grep`.
fn trailers(bare: &Path, key: &str, grep: &str) -> Vec<String> {
    crate::support::judge::trailers(bare, key, grep)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

fn assert_prints(out: &str, expected: &[&str]) {
    for line in expected {
        assert!(out.contains(line), "{line:?} not in:\n{out}");
    }
}

#[test]
fn demo_judge_promotes_a_canary_a_little_slower_than_its_primary() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, out, bare) = demo(&tmp.path().join("demo"), &[]);
    assert_eq!(code, 0, "{out}");
    assert_prints(
        &out,
        &[
            "apps/podinfo/judge.yaml",
            "canary demo/podinfo ended Succeeded",
            // The judge's table, as the demo goes.
            "METRIC",
            "request-duration",
            "group latency: 100 (1 metrics)",
            "score 100: pass (pass>=95 marginal>=75)",
            "the judge: score=100 pass (pass>=95 marginal>=75)",
            "[judge score=100 pass (pass>=95 marginal>=75)]",
        ],
    );
    let scores = all_trailers(&bare, "Sluice-Judge");
    assert!(scores.len() >= 3, "a judgement per step: {scores:?}");
    assert!(
        scores
            .iter()
            .all(|s| s == "score=100 pass (pass>=95 marginal>=75)"),
        "{scores:?}"
    );
    let metrics = all_trailers(&bare, "Sluice-Judge-Metric");
    assert_eq!(metrics.len(), 2 * scores.len(), "{metrics:?}");
    assert!(
        metrics.iter().all(
            |m| m.starts_with("request-duration Pass group=latency estimate=")
                || m.starts_with("request-success-rate Pass group=errors estimate=")
        ),
        "{metrics:?}"
    );
    crate::support::audit::clean(&bare);
}

#[test]
fn demo_judge_fail_is_rolled_back_by_the_judge_while_every_threshold_gate_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, out, bare) = demo(&tmp.path().join("demo"), &["--fail"]);
    // As `sluice demo --fail`: the demo ran, whatever the canary's fate.
    assert_eq!(code, 0, "{out}");
    assert_prints(
        &out,
        &[
            "canary demo/podinfo ended Failed",
            "judge 50 (min 95) FAIL",
            "the judge: score=50 fail (pass>=95 marginal>=75)",
            "group latency: 0 (1 metrics)",
            "group errors: 100 (1 metrics)",
        ],
    );
    // The verdict names the threshold gate that passed the canary at its latency, 30 % above
    // the primary's 212 ms.
    let verdict = out
        .lines()
        .find(|l| l.starts_with("every threshold gate passed"))
        .unwrap_or_else(|| panic!("no verdict in:\n{out}"));
    assert!(
        verdict.contains("request-duration 27") && verdict.contains("(max 500) pass"),
        "{verdict}"
    );
    let rollback = "podinfo: roll back";
    assert_eq!(
        trailers(&bare, "Sluice-Judge", rollback),
        ["score=50 fail (pass>=95 marginal>=75)"]
    );
    let metrics = trailers(&bare, "Sluice-Judge-Metric", rollback);
    assert!(
        metrics[0].starts_with("request-duration High group=latency estimate="),
        "{metrics:?}"
    );
    assert!(
        metrics[1].starts_with("request-success-rate Pass group=errors"),
        "{metrics:?}"
    );
    let checks = trailers(&bare, "Sluice-Check", rollback);
    assert!(
        checks
            .iter()
            .any(|c| c.starts_with("request-duration=27") && c.ends_with(" max=500 pass")),
        "the threshold gate passed the canary: {checks:?}"
    );
    assert!(
        checks.contains(&"judge=50 min=95 fail".to_string()),
        "{checks:?}"
    );
    crate::support::audit::clean(&bare);
}

/// The judge's bounds in `Sluice-Judge-Metric` are audited as the rest of the line: a history
/// written before sluice recorded them (the same lines without `bound=` and `allowed=`) is
/// still clean, and a bound edited by hand is found.
#[test]
fn judge_lines_without_bounds_audit_clean_and_an_edited_bound_is_found() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, out, bare) = demo(&tmp.path().join("demo"), &["--fail"]);
    assert_eq!(code, 0, "{out}");
    let metrics = all_trailers(&bare, "Sluice-Judge-Metric");
    assert!(
        metrics.iter().any(|m| m.contains(" bound=")),
        "bounds recorded: {metrics:?}"
    );
    let human = crate::support::human_clone(&bare.display().to_string(), &tmp.path().join("h"));
    let rewrite = |sed: &str| {
        let edited = std::process::Command::new("git")
            .args([
                "filter-branch",
                "-f",
                "--msg-filter",
                &format!("sed -E '{sed}'"),
            ])
            .arg("main")
            .env("FILTER_BRANCH_SQUELCH_WARNING", "1")
            .current_dir(&human)
            .output()
            .unwrap();
        assert!(edited.status.success(), "{edited:?}");
        crate::support::git(
            &human,
            &["push", "-q", "-f", &bare.display().to_string(), "HEAD:main"],
        );
    };
    // One bound edited: found, on that line.
    rewrite("s/^(Sluice-Judge-Metric: request-duration High .* bound=)[0-9.]+/\\199/");
    let (code, report) = crate::support::audit::audit(&bare);
    assert_eq!(code, 1, "{report:#}");
    let findings = report["findings"].as_array().unwrap();
    assert!(!findings.is_empty(), "{report:#}");
    assert!(
        findings.iter().all(|f| f["file"] == "Sluice-Judge-Metric"
            && f["message"]
                .as_str()
                .is_some_and(|m| m.contains("bound=99"))),
        "{report:#}"
    );
    // Every line as written before the bounds were recorded: clean.
    rewrite("s/ bound=[^ ]* allowed=[^ ]*$//");
    let metrics = all_trailers(&bare, "Sluice-Judge-Metric");
    assert!(metrics.iter().all(|m| !m.contains("bound=")), "{metrics:?}");
    crate::support::audit::clean(&bare);
}
