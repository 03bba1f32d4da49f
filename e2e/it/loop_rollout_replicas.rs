//! Argo Rollouts canaries without `trafficRouting` through the loop: the pods split the
//! traffic (the user's own Service selects both workloads), so each `setWeight` is a pair of
//! replica counts, the ones Argo settles on (`replicas: 5`, `maxSurge` 25 % = 2 pods: 20 % is
//! 1 canary + 4 stable, 50 % is 3 + 3, 80 % is 4 + 1). At every sluice commit each output
//! document passes its strict schema, both workloads run the counts of the status file's
//! weight, no route file is written, and only the Service the Rollout names is copied, with
//! the canary role on its selector. An AnalysisTemplate on a real Prometheus promotes or, when
//! its query fails the condition, aborts back to stable; `pause: {}` opens an approval pull
//! request (a fake forge at HTTP level); `sluice plan` prints the replica split.

use serde_json::Value as Json;
use sluice::core::status::Phase;

use crate::support::forge::{ForgeFake, Kind};
use crate::support::rollout::{
    distinct, docs_at, replica_rollout, replica_services, show, sluice_commits, CANARY_WORKLOAD,
    OUTPUT, ROLLOUT_FILE, ROUTE_FILE, SERVICES_FILE, STABLE_FILE, STATUS_FILE,
};
use crate::support::{run_sluice, Schemas, World};

/// Timed pauses, then an analysis at 50 %, then 80 %.
const ANALYSED: &str = "        - setWeight: 20
        - pause: {duration: 30s}
        - setWeight: 50
        - analysis:
            templates:
              - templateName: podinfo-up
        - setWeight: 80
        - pause: {duration: 1m}";

/// A `pause: {}` after the first weight: wait for approval.
const APPROVAL: &str = "        - setWeight: 20
        - pause: {}
        - setWeight: 50";

/// The template the analysis step names: the Prometheus scrape target's `up` (1), judged
/// by `condition`, twice.
fn template(condition: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: podinfo-up
  namespace: prod
spec:
  metrics:
    - name: podinfo-up
      interval: 10s
      count: 2
      successCondition: {condition}
      provider:
        prometheus:
          query: sum(up{{job=\"canary\"}})
"
    )
}

fn world(steps: &str, extra: &[(&str, String)]) -> World {
    let mut files = vec![
        (ROLLOUT_FILE, replica_rollout("6.7.0", steps)),
        ("apps/podinfo/services.yaml", replica_services()),
    ];
    files.extend(extra.iter().map(|(f, t)| (*f, t.clone())));
    let pairs: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
    World::served(&pairs).building(OUTPUT)
}

/// The `(canary, stable)` pods Argo runs for 5 replicas at a weight of the tests' steps
/// (EXPECTED's `replicaSplit(replicas=5,maxSurge=2)` rows of the corpus).
fn argo_pods(weight: u64) -> (u64, u64) {
    match weight {
        0 => (0, 5),
        20 => (1, 4),
        50 => (3, 3),
        80 => (4, 1),
        100 => (5, 0),
        other => panic!("no Argo split written down for weight {other}"),
    }
}

/// Every sluice commit: every output document schema-valid, no route file, the canary
/// Service alone copied (selecting the canary pods), both workloads at Argo's counts for
/// the status file's weight (all pods stable when idle). Returns the weights, in order.
fn check_every_commit(w: &World) -> Vec<String> {
    let mut schemas = Schemas::default();
    let mut found = Vec::new();
    for (sha, trailer) in sluice_commits(&w.bare) {
        let status: Json = serde_saphyr::from_str(&show(&w.bare, &sha, STATUS_FILE)).unwrap();
        let (stable_w, canary_w) = (
            status["primaryWeight"].as_u64().unwrap(),
            status["canaryWeight"].as_u64().unwrap(),
        );
        for file in [STABLE_FILE, CANARY_WORKLOAD, SERVICES_FILE] {
            for doc in docs_at(&w.bare, &sha, file) {
                schemas.assert_valid(&doc, &format!("{sha} {file}"));
            }
        }
        let listed = crate::support::git(
            &w.bare,
            &["ls-tree", "-r", "--name-only", &sha, "--", OUTPUT],
        );
        assert!(listed.contains(CANARY_WORKLOAD), "{sha}: {listed}");
        assert!(
            !listed.lines().any(|f| f == ROUTE_FILE),
            "{sha}: no route: {listed}"
        );
        let services = docs_at(&w.bare, &sha, SERVICES_FILE);
        assert_eq!(
            services.len(),
            1,
            "{sha}: only the Service the Rollout names"
        );
        assert_eq!(services[0]["metadata"]["name"], "podinfo-canary");
        assert_eq!(
            services[0]["spec"]["selector"],
            serde_json::json!({"app": "podinfo", "sluice.dev/rollout-role": "canary"}),
            "{sha}"
        );
        let active = ["Progressing", "WaitingApproval", "Promoting", "Finalising"]
            .contains(&status["phase"].as_str().unwrap())
            || canary_w > 0;
        let want = if active { argo_pods(canary_w) } else { (0, 5) };
        let canary = docs_at(&w.bare, &sha, CANARY_WORKLOAD).remove(0);
        let stable = docs_at(&w.bare, &sha, STABLE_FILE).remove(0);
        assert_eq!(
            (
                canary["spec"]["replicas"].as_u64(),
                stable["spec"]["replicas"].as_u64()
            ),
            (Some(want.0), Some(want.1)),
            "{sha}: Argo's pods at {status:?}"
        );
        // The user's Service picks both workloads' pods.
        for doc in [&canary, &stable] {
            assert_eq!(
                doc["spec"]["template"]["metadata"]["labels"]["app"],
                "podinfo"
            );
        }
        let weights = format!("primary={stable_w} canary={canary_w}");
        assert_eq!(trailer, weights, "{sha}: trailer and status agree");
        found.push(weights);
    }
    found
}

/// The replica-based Rollout analysed on a real Prometheus (`condition` judging `up`, which
/// is 1), from 6.7.0 to 6.7.1 until the canary reaches `phase`.
fn analysed(condition: &str, phase: Phase, check: impl FnOnce(&World)) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scraped = rt.block_on(crate::support::prometheus::Scraped::start_instant(
        crate::support::prometheus::osm_exposition,
    ));
    let mut w = world(
        ANALYSED,
        &[
            (".sluice/config.yaml", scraped.prom.repo_config()),
            ("apps/podinfo/analysis.yaml", template(condition)),
        ],
    );
    let runtime = crate::support::runtime();
    let live = sluice::observer::Live::new(runtime);
    w.until_with(&live, runtime, Phase::Initialized);
    w.human_writes(
        ROLLOUT_FILE,
        &replica_rollout("6.7.1", ANALYSED),
        "podinfo: 6.7.1",
    );
    w.until_with(&live, runtime, phase);
    crate::support::rollout::kustomize_builds(&w.bare, OUTPUT);
    check(&w);
    drop(scraped);
}

#[test]
fn replica_rollout_scales_both_workloads_per_step_and_promotes_on_its_analysis() {
    analysed("result[0] >= 1", Phase::Succeeded, |w| {
        assert_eq!(
            distinct(check_every_commit(w)),
            [
                "primary=100 canary=0",
                "primary=80 canary=20",
                "primary=50 canary=50",
                "primary=20 canary=80",
                "primary=100 canary=0",
            ]
        );
        let stable = show(&w.bare, "main", STABLE_FILE);
        assert!(stable.contains("podinfo:6.7.1"), "promoted: {stable}");
        crate::support::audit::clean(&w.bare);
    });
}

#[test]
fn replica_rollout_with_a_failing_analysis_aborts_back_to_all_stable_pods() {
    analysed("result[0] >= 2", Phase::Failed, |w| {
        let weights = check_every_commit(w);
        assert!(
            weights.contains(&"primary=50 canary=50".to_string()),
            "{weights:?}"
        );
        assert_eq!(
            weights.last().map(String::as_str),
            Some("primary=100 canary=0")
        );
        let stable: Json = serde_saphyr::from_str(&show(&w.bare, "main", STABLE_FILE)).unwrap();
        let canary: Json = serde_saphyr::from_str(&show(&w.bare, "main", CANARY_WORKLOAD)).unwrap();
        assert_eq!(stable["spec"]["replicas"], 5, "all pods stable again");
        assert_eq!(canary["spec"]["replicas"], 0);
        assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.0"));
        let subject = crate::support::git(&w.bare, &["log", "-1", "--format=%s", "main"]);
        assert!(subject.contains("roll back"), "{subject}");
    });
}

#[test]
fn replica_rollout_pause_without_duration_opens_an_approval_pull_request_fake_forge() {
    let fake = ForgeFake::start(Kind::GitHub);
    let config = format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\n{}",
        fake.settings()
    );
    let mut w = world(APPROVAL, &[(".sluice/config.yaml", config)]);
    w.until(Phase::Initialized);
    w.human_writes(
        ROLLOUT_FILE,
        &replica_rollout("6.7.1", APPROVAL),
        "podinfo: 6.7.1",
    );
    w.until(Phase::WaitingApproval);
    w.ticks(2);
    assert_eq!(fake.count(), 1, "one pull request");
    let pr = fake.first();
    // The branch carries the next step's pods: 3 canary, 3 stable.
    let canary: Json = serde_saphyr::from_str(&show(&w.bare, &pr.head, CANARY_WORKLOAD)).unwrap();
    let stable: Json = serde_saphyr::from_str(&show(&w.bare, &pr.head, STABLE_FILE)).unwrap();
    assert_eq!(
        (
            canary["spec"]["replicas"].as_u64(),
            stable["spec"]["replicas"].as_u64()
        ),
        (Some(3), Some(3))
    );
    crate::support::merge_approval(w.human(), &pr.head, "merge");
    fake.set(1, false, true);
    w.until(Phase::Succeeded);
    check_every_commit(&w);
    assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
}

#[test]
fn plan_prints_the_replica_split_of_each_step() {
    let dir = crate::support::repo(&[
        (ROLLOUT_FILE, &replica_rollout("6.7.0", APPROVAL)),
        ("apps/podinfo/services.yaml", &replica_services()),
    ]);
    let path = dir.path().display().to_string();
    let (code, out, err) = run_sluice(&["plan", &path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("rollout steps:      setWeight 20, pause until approved, setWeight 50"),
        "{out}"
    );
    assert!(
        out.contains("replica split:      20%: 1 canary + 4 stable, 50%: 3 canary + 3 stable"),
        "{out}"
    );
    let (code, out, _) = run_sluice(&["plan", "-o", "json", &path]);
    assert_eq!(code, 0);
    let plan: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(
        plan[0]["replicaSplit"],
        serde_json::json!([
            {"weight": 20, "canary": 1, "stable": 4},
            {"weight": 50, "canary": 3, "stable": 3}
        ])
    );
}
