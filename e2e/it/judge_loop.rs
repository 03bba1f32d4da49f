//! The judge in the loop: `sluice run` (the real binary) with a real Prometheus scraping
//! recorded latency series. `podinfo` is as fast as its primary and is promoted; `faulty` is
//! 30 % slower than its primary, which no fixed threshold in sight would catch, and the judge
//! fails it until `threshold` rolls it back. Both judged decisions carry `Sluice-Judge`
//! trailers that `sluice history -o json` reads back, and `sluice audit` judges the recorded
//! series again and finds the history clean.

use std::process::Command;

use crate::support::judge::{increase, judged_canary, loop_judge, rolled_out, trailers};
use crate::support::metrics::{loop_apps, phase};
use crate::support::prometheus::Scraped;
use crate::support::{git, rollback_entry, seeded_remote, str_pairs};

/// Latency gauges at `t` seconds: each primary and `podinfo` on one sawtooth around 100 ms,
/// `faulty` 30 % above it.
fn exposition(t: f64) -> String {
    let base = 100.0 + (t * 7.0) % 10.0 - 5.0;
    format!(
        "# TYPE latency_ms gauge\nlatency_ms{{deployment=\"podinfo-primary\"}} {base}\nlatency_ms{{deployment=\"podinfo\"}} {base}\nlatency_ms{{deployment=\"faulty-primary\"}} {base}\nlatency_ms{{deployment=\"faulty\"}} {}\n",
        base * 1.3
    )
}

/// The Judge `latency`: the canary's latency must not increase.
fn judge() -> String {
    loop_judge(
        "latency",
        75,
        &increase("latency", "latency_ms{deployment=\"{{ workload }}\"}"),
    )
}

/// The loop tests' canary (interval 2 s, threshold 2, one step of 50 %) without metrics,
/// judged by the `latency` Judge.
fn canary(name: &str) -> String {
    judged_canary(name, "latency")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_judge_promotes_a_canary_like_its_primary_and_rolls_back_a_slower_one() {
    let scraped = Scraped::start(exposition).await;

    let tmp = tempfile::tempdir().unwrap();
    let config = scraped.prom.repo_config();
    let mut files = vec![
        (".sluice/config.yaml".to_string(), config),
        ("apps/judge.yaml".to_string(), judge()),
    ];
    files.extend(loop_apps(&["podinfo", "faulty"], canary));
    let bare = seeded_remote(tmp.path(), &str_pairs(&files));
    tokio::task::block_in_place(|| rolled_out(&bare, tmp.path(), &["podinfo", "faulty"]));
    assert_eq!(
        [phase(&bare, "podinfo"), phase(&bare, "faulty")],
        ["Succeeded:0", "Failed:0"],
        "podinfo, like its primary: promoted; faulty, 30 % slower: rolled back"
    );

    let judged = trailers(&bare, "Sluice-Judge", "faulty: roll back");
    assert_eq!(judged.trim(), "score=0 fail (pass>=95 marginal>=75)");
    let metric = trailers(&bare, "Sluice-Judge-Metric", "faulty: roll back");
    assert!(
        metric.starts_with("latency High group=default estimate="),
        "{metric}"
    );
    let check = trailers(&bare, "Sluice-Check", "faulty: roll back");
    assert_eq!(check.trim(), "judge=0 min=95 fail");
    let passed = git(
        &bare,
        &[
            "log",
            "--format=%(trailers:key=Sluice-Judge,valueonly)",
            "main",
        ],
    );
    assert!(
        passed.contains("score=100 pass (pass>=95 marginal>=75)"),
        "podinfo's judgement passed: {passed}"
    );

    let rollback = rollback_entry(&bare, "test/faulty");
    assert_eq!(rollback["judge"]["score"], 0.0, "{rollback}");
    assert_eq!(rollback["judge"]["outcome"], "fail", "{rollback}");
    assert_eq!(
        rollback["judge"]["metrics"][0]["classification"], "High",
        "{rollback}"
    );
    // The replay records hold the series: audit judges them again and finds what was decided.
    crate::support::audit::clean(&bare);

    // A hand-edited Sluice-Judge trailer is not what the recorded series give.
    let human = tmp.path().join("human");
    git(&human, &["pull", "-q", "--rebase", "origin", "main"]);
    let rollback = git(
        &human,
        &[
            "log",
            "-1",
            "--format=%H",
            "--grep=faulty: roll back",
            "main",
        ],
    );
    let edited = Command::new("git")
        .args(["filter-branch", "-f", "--msg-filter"])
        .arg("sed 's/^Sluice-Judge: score=0 fail/Sluice-Judge: score=100 pass/'")
        .arg(format!("{}^..main", rollback.trim()))
        .env("FILTER_BRANCH_SQUELCH_WARNING", "1")
        .current_dir(&human)
        .output()
        .unwrap();
    assert!(edited.status.success(), "{edited:?}");
    git(&human, &["push", "-q", "-f", "origin", "main"]);
    let (code, report) = crate::support::audit::audit(&bare);
    assert_eq!(code, 1, "{report:#}");
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{report:#}");
    assert_eq!(findings[0]["file"], "Sluice-Judge", "{report:#}");
}
