//! The whole loop with a real Prometheus and the real binary: a healthy OSM canary is promoted,
//! one with 20 % 5xx rolls back with its success rate in the commit, and stopping Prometheus
//! mid-analysis fails the checks and rolls back (never promotes).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::judge::bump_images;
use crate::support::metrics::{loop_apps, loop_canary, loop_deployment as deployment, phase};
use crate::support::prometheus::{osm_exposition, Scraped};
use crate::support::rollout::kustomize_builds;
use crate::support::{
    git, human_clone, human_commit, reconcile, rollback_entry, seeded_remote, str_pairs,
};

/// A canary judged by the built-in success rate and duration.
fn canary(name: &str) -> String {
    loop_canary(
        name,
        "      - name: request-success-rate
        thresholdRange: {min: 99}
        interval: 10s
      - name: request-duration
        thresholdRange: {max: 500}
        interval: 10s
",
    )
}

/// Runs `sluice reconcile` every 300 ms until `done`, bounded.
fn run_until(bare: &Path, workdir: &Path, what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        reconcile(bare, workdir, &[]);
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn osm_canaries_promote_or_roll_back_on_a_real_prometheus() {
    let mut scraped = Scraped::start(osm_exposition).await;

    let tmp = tempfile::tempdir().unwrap();
    let config = scraped.prom.repo_config();
    let mut files = vec![(".sluice/config.yaml".to_string(), config)];
    files.extend(loop_apps(&["podinfo", "faulty"], canary));
    let bare = seeded_remote(tmp.path(), &str_pairs(&files));
    let workdir = tmp.path().join("w");
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    tokio::task::block_in_place(|| {
        reconcile(&bare, &workdir, &[]);
        bump_images(&human, &["podinfo", "faulty"]);
        run_until(&bare, &workdir, "both canaries to finish", || {
            let (a, b) = (phase(&bare, "podinfo"), phase(&bare, "faulty"));
            (a.starts_with("Succeeded") || a.starts_with("Failed"))
                && (b.starts_with("Succeeded") || b.starts_with("Failed"))
        });
        assert_eq!(
            [phase(&bare, "podinfo"), phase(&bare, "faulty")],
            ["Succeeded:0", "Failed:0"],
            "the healthy canary is promoted, the faulty one rolls back"
        );
        // The SMI TrafficSplit's output folders build, promoted and rolled back.
        kustomize_builds(&bare, "clusters/test/podinfo");
        kustomize_builds(&bare, "clusters/test/faulty");
        let log = git(&bare, &["log", "--format=%s", "main"]);
        let rollback = log
            .lines()
            .find(|l| l.starts_with("faulty: roll back"))
            .expect("a rollback commit");
        assert!(
            rollback.contains("request-success-rate 80 < 99"),
            "{rollback}"
        );
        let promoted = git(
            &bare,
            &["log", "--format=%b", "--grep=podinfo: promote", "main"],
        );
        assert!(
            promoted.contains("request-success-rate 100 (min 99) pass"),
            "{promoted}"
        );
        // The same checks, machine-readable: one Sluice-Check trailer each.
        let trailers = |grep: &str| {
            git(
                &bare,
                &[
                    "log",
                    "-1",
                    "--format=%(trailers:key=Sluice-Check,valueonly)",
                    &format!("--grep={grep}"),
                    "main",
                ],
            )
        };
        let checks = trailers("podinfo: promote");
        let lines: Vec<&str> = checks.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 2, "{checks}");
        assert_eq!(lines[0], "request-success-rate=100 min=99 pass");
        assert!(
            lines[1].starts_with("request-duration=") && lines[1].ends_with(" max=500 pass"),
            "{checks}"
        );
        assert!(
            trailers("faulty: roll back").starts_with("request-success-rate=80 min=99 fail\n"),
            "{}",
            trailers("faulty: roll back")
        );
        let rollback_entry = rollback_entry(&bare, "test/faulty");
        assert_eq!(
            rollback_entry["checks"][0],
            serde_json::json!({"name": "request-success-rate", "kind": "metric", "value": 80.0, "min": 99.0, "passed": false}),
            "{rollback_entry}"
        );

        // A new podinfo revision; Prometheus stops mid-analysis: failed checks, then rollback.
        human_commit(
            &human,
            "apps/podinfo/deployment.yaml",
            &deployment("podinfo", "podinfo:3"),
            "podinfo 3",
        );
        run_until(&bare, &workdir, "podinfo at weight 50", || {
            phase(&bare, "podinfo") == "Progressing:50"
        });
        scraped.prom.stop();
        run_until(&bare, &workdir, "podinfo to end", || {
            let p = phase(&bare, "podinfo");
            p.starts_with("Failed") || p.starts_with("Succeeded") || p.starts_with("Promoting")
        });
        assert_eq!(
            phase(&bare, "podinfo"),
            "Failed:0",
            "never promoted without metrics"
        );
        let last = git(
            &bare,
            &[
                "log",
                "-1",
                "--format=%s",
                "main",
                "--",
                ".sluice/status/test/podinfo.yaml",
            ],
        );
        assert!(last.contains("request-success-rate query failed"), "{last}");
        let last_checks = git(
            &bare,
            &[
                "log",
                "-1",
                "--format=%(trailers:key=Sluice-Check,valueonly)",
                "main",
                "--",
                ".sluice/status/test/podinfo.yaml",
            ],
        );
        assert!(
            last_checks.starts_with("request-success-rate=error min=99 fail\n"),
            "{last_checks}"
        );
    });
}
