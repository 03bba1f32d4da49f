//! The whole loop with the real binary and a Datadog MetricTemplate: the keys come from the
//! operator's mapped Secret (environment), the queries go to a local fake of Datadog's
//! `/api/v1/query`. The canary whose fake answers within the threshold is promoted; the one
//! whose fake answers above it rolls back, its value in the commit; and one whose Secret is
//! not mapped never promotes.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::providers::datadog_answer;
use super::support::{Canned, Server};
use crate::support::{git, human_clone, human_commit, seeded_remote};

fn deployment(name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: test}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      containers:\n      - {{name: app, image: '{image}'}}\n"
    )
}

/// A canary whose one metric is the Datadog template `name`.
fn canary(name: &str) -> String {
    format!(
        "apiVersion: flagger.app/v1beta1
kind: Canary
metadata: {{name: {name}, namespace: test}}
spec:
  provider: osm
  targetRef: {{apiVersion: apps/v1, kind: Deployment, name: {name}}}
  service: {{port: 9898}}
  analysis:
    interval: 2s
    threshold: 2
    stepWeight: 50
    maxWeight: 50
    metrics:
      - name: error-rate
        templateRef: {{name: {name}-errors, namespace: test}}
        thresholdRange: {{max: 1}}
        interval: 1m
"
    )
}

fn template(name: &str, address: &str, secret: &str) -> String {
    format!(
        "apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata: {{name: {name}-errors, namespace: test}}
spec:
  provider:
    type: datadog
    address: {address}
    secretRef: {{name: {secret}}}
  query: |
    100 - (sum:istio.mesh.request.count{{reporter:destination,destination_workload:{{{{ target }}}},!response_code:5*}}.as_count() / sum:istio.mesh.request.count{{reporter:destination,destination_workload:{{{{ target }}}}}}.as_count()) * 100
"
    )
}

fn reconcile(bare: &Path, workdir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "reconcile",
            "--repo",
            &bare.display().to_string(),
            "--workdir",
            &workdir.display().to_string(),
        ])
        .env("SLUICE_LOG", "error")
        .env("SLUICE_SECRET_TEST__DATADOG__DATADOG_API_KEY", "api-key")
        .env(
            "SLUICE_SECRET_TEST__DATADOG__DATADOG_APPLICATION_KEY",
            "app-key",
        )
        .env("SLUICE_SECRETS_DIR", workdir.join("no-secrets"))
        .output()
        .expect("sluice reconcile");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn phase(bare: &Path, name: &str) -> String {
    let text = git(
        bare,
        &["show", &format!("main:.sluice/status/test/{name}.yaml")],
    );
    let p = text
        .lines()
        .find_map(|l| l.strip_prefix("phase: "))
        .unwrap_or_default();
    let w = text
        .lines()
        .find_map(|l| l.strip_prefix("canaryWeight: "))
        .unwrap_or_default();
    format!("{p}:{w}")
}

fn finished(p: &str) -> bool {
    p.starts_with("Succeeded") || p.starts_with("Failed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datadog_canaries_promote_within_the_threshold_and_roll_back_above_it() {
    let healthy = Server::start(vec![Canned::json(200, &datadog_answer(0.5))]).await;
    let faulty = Server::start(vec![Canned::json(200, &datadog_answer(7.5))]).await;
    let tmp = tempfile::tempdir().unwrap();
    let apps = ["podinfo", "faulty", "unmapped"];
    let mut files: Vec<(String, String)> = Vec::new();
    for app in apps {
        let (address, secret) = match app {
            "podinfo" => (healthy.url(), "datadog"),
            "faulty" => (faulty.url(), "datadog"),
            _ => (healthy.url(), "not-mapped"),
        };
        files.push((
            format!("apps/{app}/deployment.yaml"),
            deployment(app, &format!("{app}:1")),
        ));
        files.push((format!("apps/{app}/canary.yaml"), canary(app)));
        files.push((
            format!("apps/{app}/metrics.yaml"),
            template(app, &address, secret),
        ));
    }
    let seed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let bare = seeded_remote(tmp.path(), &seed);
    let workdir = tmp.path().join("w");
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    tokio::task::block_in_place(|| {
        reconcile(&bare, &workdir);
        git(&human, &["pull", "-q", "origin", "main"]);
        for app in apps {
            human_commit(
                &human,
                &format!("apps/{app}/deployment.yaml"),
                &deployment(app, &format!("{app}:2")),
                &format!("{app} 2"),
            );
        }
        let deadline = Instant::now() + Duration::from_secs(90);
        while !apps.iter().all(|a| finished(&phase(&bare, a))) {
            assert!(
                Instant::now() < deadline,
                "timed out: {:?}",
                apps.map(|a| phase(&bare, a))
            );
            reconcile(&bare, &workdir);
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    assert_eq!(
        phase(&bare, "podinfo"),
        "Succeeded:0",
        "within the threshold: promoted"
    );
    assert_eq!(
        phase(&bare, "faulty"),
        "Failed:0",
        "above the threshold: rolled back"
    );
    assert_eq!(
        phase(&bare, "unmapped"),
        "Failed:0",
        "no credentials: never promoted"
    );
    let log = git(&bare, &["log", "--format=%s%n%b", "main"]);
    let rollback = log
        .lines()
        .find(|l| l.starts_with("faulty: roll back"))
        .expect("a rollback commit");
    assert!(rollback.contains("error-rate 7.5 > 1"), "{rollback}");
    assert!(
        log.contains("SLUICE_SECRET_TEST__NOT_MAPPED__DATADOG_API_KEY"),
        "the unmapped canary's failure says what to set:\n{log}"
    );
    // Every query the fakes received carried the mapped keys and the rendered target.
    for (server, app) in [(&healthy, "podinfo"), (&faulty, "faulty")] {
        let requests = server.requests();
        assert!(!requests.is_empty(), "{app}");
        for r in requests {
            assert_eq!(r.path(), "/api/v1/query");
            assert_eq!(r.header("DD-API-KEY"), Some("api-key"));
            assert_eq!(r.header("DD-APPLICATION-KEY"), Some("app-key"));
            let query = r.query_param("query").expect("query");
            assert!(
                query.contains(&format!("destination_workload:{app},")),
                "{query}"
            );
        }
    }
}
