//! A marginal judgement hands the step to a human: `sluice run` (the real binary) on a git
//! daemon remote, a real Prometheus scraping recorded series, and the GitHub pull-request API
//! faked at the HTTP level (`approval.rs`'s `ForgeFake`). `slow` and `doubt` are each 30 %
//! slower than their primary on latency and like it on errors: one of two metrics `High`, a
//! score of 50 between the thresholds (pass 95, marginal 40). Each gets an approval pull
//! request whose body holds the judge's table; merging `slow`'s promotes it, closing
//! `doubt`'s rolls it back. `sluice audit` then finds the history clean, and reports a
//! hand-edited `Sluice-Judge-Metric` trailer.

use std::path::Path;

use crate::support::forge::{ForgeFake, Kind, Pr};
use crate::support::judge::{
    bump_images, has_status, increase, judged_canary, loop_judge, wait_until,
};
use crate::support::metrics::{loop_apps, phase};
use crate::support::prometheus::Scraped;
use crate::support::{
    git, human_clone, merge_approval, seeded_remote, sluice_daemon, str_pairs, GitDaemon,
};

/// The gauges at `t` seconds: latency on a sawtooth around 100 ms, each canary's 30 % above
/// its primary's; errors on another sawtooth, the same for canary and primary.
fn exposition(t: f64) -> String {
    let base = 100.0 + (t * 7.0) % 10.0 - 5.0;
    let errors = 2.0 + (t * 3.0) % 4.0;
    let mut out = String::from("# TYPE latency_ms gauge\n# TYPE errors_per_s gauge\n");
    for name in ["slow", "doubt"] {
        out.push_str(&format!(
            "latency_ms{{deployment=\"{name}-primary\"}} {base}\nlatency_ms{{deployment=\"{name}\"}} {}\nerrors_per_s{{deployment=\"{name}-primary\"}} {errors}\nerrors_per_s{{deployment=\"{name}\"}} {errors}\n",
            base * 1.3
        ));
    }
    out
}

/// The Judge `latency`: neither the canary's latency nor its errors may increase.
fn judge() -> String {
    let metrics = increase("latency", "latency_ms{deployment=\"{{ workload }}\"}")
        + &increase("errors", "errors_per_s{deployment=\"{{ workload }}\"}");
    loop_judge("latency", 40, &metrics)
}

/// The loop tests' canary (interval 2 s, threshold 2, one step of 50 %) without metrics,
/// judged by the `latency` Judge.
fn canary(name: &str) -> String {
    judged_canary(name, "latency")
}

/// The approval pull request of canary `name`, once there is one.
fn pull_request(fake: &ForgeFake, name: &str) -> Option<Pr> {
    (1..=fake.count() as u64)
        .map(|n| fake.pr(n))
        .find(|pr| pr.head.starts_with(&format!("sluice/test/{name}/")))
}

/// What the body of a pull request opened by a marginal judgement holds.
fn assert_judge_table(pr: &Pr) {
    let body = &pr.body;
    for part in [
        "### The judge found the canary marginal: a human decides",
        "Summary score **50**: **marginal** (pass>=95 marginal>=40).",
        "| default | 50 | 2 |",
        "| **summary** | **50** | marginal (pass>=95 marginal>=40) |",
        "judge 50 (min 95) FAIL",
        "Merging this pull request approves the step",
    ] {
        assert!(body.contains(part), "{part:?} not in the body:\n{body}");
    }
    let row = |start: &str| body.lines().find(|l| l.starts_with(start)).is_some();
    assert!(row("| latency | High | "), "{body}");
    assert!(row("| errors | Pass | "), "{body}");
}

/// The id of the newest commit of canary `name` whose message holds `text`.
fn commit_with(bare: &Path, name: &str, text: &str) -> String {
    let id = git(
        bare,
        &[
            "log",
            "-1",
            "--format=%H",
            "--all-match",
            "--fixed-strings",
            &format!("--grep=Sluice-Canary: test/{name}"),
            &format!("--grep={text}"),
            "main",
        ],
    );
    assert!(!id.trim().is_empty(), "no commit of {name} with {text:?}");
    id.trim().to_string()
}

#[test]
fn a_marginal_judgement_opens_a_pr_with_the_judge_table_merge_promotes_close_rolls_back_forge_fake()
{
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let scraped = runtime.block_on(Scraped::start(exposition));
    let fake = ForgeFake::start(Kind::GitHub);

    let tmp = tempfile::tempdir().unwrap();
    let config = format!("{}{}", scraped.prom.repo_config(), fake.settings());
    let mut files = vec![
        (".sluice/config.yaml".to_string(), config),
        ("apps/judge.yaml".to_string(), judge()),
    ];
    files.extend(loop_apps(&["slow", "doubt"], canary));
    let bare = seeded_remote(tmp.path(), &str_pairs(&files));
    let server = GitDaemon::start(tmp.path());
    let url = server.url("config.git");
    let daemon = sluice_daemon(&url, &tmp.path().join("w")).start();
    wait_until("both canaries initialized", || {
        has_status(&bare, "slow")
            && has_status(&bare, "doubt")
            && phase(&bare, "slow").starts_with("Initialized")
            && phase(&bare, "doubt").starts_with("Initialized")
    });
    let human = human_clone(&url, &tmp.path().join("human"));
    bump_images(&human, &["slow", "doubt"]);
    wait_until("both approval pull requests", || {
        pull_request(&fake, "slow").is_some() && pull_request(&fake, "doubt").is_some()
    });
    for name in ["slow", "doubt"] {
        assert_eq!(phase(&bare, name), "WaitingApproval:50", "{name}");
    }
    let slow = pull_request(&fake, "slow").unwrap();
    let doubt = pull_request(&fake, "doubt").unwrap();
    assert_judge_table(&slow);
    assert_judge_table(&doubt);
    let waited = git(
        &bare,
        &[
            "show",
            "-s",
            "--format=%(trailers:key=Sluice-Judge,valueonly)",
            &commit_with(&bare, "slow", "Sluice-Judge: score=50 marginal"),
        ],
    );
    assert_eq!(waited.trim(), "score=50 marginal (pass>=95 marginal>=40)");

    // Merging approves: the rollout goes on to promotion. Closing rolls back.
    merge_approval(&human, &slow.head, "merge");
    fake.set(slow.number, false, true);
    fake.set(doubt.number, false, false);
    let ended = |name: &str| {
        let p = phase(&bare, name);
        p.starts_with("Succeeded") || p.starts_with("Failed")
    };
    wait_until("both canaries to finish", || {
        ended("slow") && ended("doubt")
    });
    drop(daemon);
    assert_eq!(phase(&bare, "slow"), "Succeeded:0", "merged: promoted");
    assert_eq!(phase(&bare, "doubt"), "Failed:0", "closed: rolled back");
    commit_with(
        &bare,
        "doubt",
        &format!(
            "approval pull request #{} was closed without merging",
            doubt.number
        ),
    );
    let prs: Vec<Pr> = (1..=fake.count() as u64).map(|n| fake.pr(n)).collect();
    assert_eq!(prs.len(), 2, "one pull request per wait: {prs:#?}");

    // Every judged decision replays from its record, the approval and the rollback too.
    crate::support::audit::clean(&bare);

    // A hand-edited metric line is not what the recorded series give.
    let marginal = commit_with(&bare, "slow", "Sluice-Judge: score=50 marginal");
    crate::support::audit::rewrite_message(
        &human,
        &bare,
        &marginal,
        "s/^Sluice-Judge-Metric: latency High /Sluice-Judge-Metric: latency Pass /",
    );
    let (code, report) = crate::support::audit::audit(&bare);
    assert_eq!(code, 1, "{report:#}");
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{report:#}");
    assert_eq!(findings[0]["file"], "Sluice-Judge-Metric", "{report:#}");
    assert!(
        findings[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("latency Pass") && m.contains("latency High")),
        "{report:#}"
    );
}
