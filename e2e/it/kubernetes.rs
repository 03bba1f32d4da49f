//! Provider `kubernetes` (Flagger's NopRouter): blue/green with Services and workloads only.
//! Validation refuses what it cannot run, no route file is written or listed, and whole
//! rollouts (promotion, rollback, a restart in the middle) run through the loop against a real
//! `git daemon`, every commit's documents valid against the strict schemas.

use serde_json::Value as Json;
use sluice::core::status::Phase;
use sluice::manifest::load::load_text;
use sluice::manifest::settings::Settings;

use crate::support::canary::errors_in;
use crate::support::manifests::TEST_DEPLOYMENT as DEPLOYMENT;
use crate::support::output_files;
use crate::support::rollout::{bumped_world, check_every_commit, world};
use crate::support::{git, SluiceCommit};

/// The Canary of Flagger's own e2e test `test/kubernetes/test-deployment.sh` (its webhooks
/// left out: the offline observer fails every webhook, as it should).
pub const CANARY: &str = "apiVersion: flagger.app/v1beta1
kind: Canary
metadata:
  name: podinfo
  namespace: test
spec:
  provider: kubernetes
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: podinfo
  progressDeadlineSeconds: 60
  service:
    port: 80
    targetPort: 9898
    name: podinfo-svc
  analysis:
    interval: 15s
    threshold: 10
    iterations: 5
";

fn errors(text: &str) -> Vec<String> {
    errors_in("apps/podinfo/canary.yaml", text)
}

#[test]
fn kubernetes_provider_loads_blue_green() {
    let loaded = load_text("apps/podinfo/canary.yaml", CANARY, &Settings::default());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let canary = &loaded.canaries[0];
    assert_eq!(canary.provider.as_deref(), Some("kubernetes"));
    assert!(matches!(
        canary.route,
        sluice::manifest::model::Route::Kubernetes(_)
    ));
}

#[test]
fn kubernetes_provider_refuses_weights_and_matches_saying_flagger_runs_blue_green_only() {
    let weights = CANARY.replace(
        "    iterations: 5\n",
        "    stepWeight: 10\n    maxWeight: 50\n",
    );
    assert_eq!(
        errors(&weights),
        ["apps/podinfo/canary.yaml:20: spec.analysis.stepWeight: Flagger supports only blue/green with provider kubernetes (no route object shifts weights); set analysis.iterations instead of a weight schedule, or use a provider that routes (gatewayapi:v1, osm, linkerd)"]
    );
    let steps = CANARY.replace("    iterations: 5\n", "    stepWeights: [10, 50]\n");
    assert_eq!(
        errors(&steps).len(),
        1,
        "stepWeights refused too: {:?}",
        errors(&steps)
    );
    assert!(errors(&steps)[0].contains(
        ":20: spec.analysis.stepWeights: Flagger supports only blue/green with provider kubernetes"
    ));
    let ab = CANARY.replace(
        "    iterations: 5\n",
        "    iterations: 5\n    match:\n      - headers:\n          x-canary: {exact: insider}\n",
    );
    assert_eq!(
        errors(&ab),
        ["apps/podinfo/canary.yaml:21: spec.analysis.match: Flagger supports only blue/green with provider kubernetes (no route object can send matching requests to the canary); remove analysis.match, or use a provider that routes headers (gatewayapi:v1)"]
    );
}

#[test]
fn native_service_route_runs_blue_green_with_a_source_only() {
    let native = |target: &str, route: &str, analysis: &str| {
        format!(
            "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: web, namespace: shop}}\nspec:\n  {target}\n  service: {{port: 80}}\n  route: {route}\n  analysis: {analysis}\n"
        )
    };
    let source = "source: apps/web/deployment.yaml";
    assert_eq!(
        errors(&native(
            source,
            "{apiVersion: v1, kind: Service}",
            "{iterations: 3}"
        )),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&native(source, "{apiVersion: apps/v1, kind: Service}", "{iterations: 3}")),
        ["apps/podinfo/canary.yaml:7: spec.route.apiVersion: expected v1 for Service, found \"apps/v1\""]
    );
    assert_eq!(
        errors(&native(
            "routeOnly: {services: [a, b], revision: v1}",
            "{apiVersion: v1, kind: Service}",
            "{iterations: 3}"
        )),
        ["apps/podinfo/canary.yaml:5: spec.routeOnly: a Service route writes no route object, so a route-only canary would write nothing; use spec.source, or an HTTPRoute or TrafficSplit route"]
    );
    let err = errors(&native(
        source,
        "{apiVersion: v1, kind: Service}",
        "{stepWeight: 20}",
    ));
    assert_eq!(err.len(), 1, "{err:?}");
    assert!(
        err[0].contains(":8: spec.analysis.stepWeight: Flagger supports only blue/green"),
        "{err:?}"
    );
}

const OUT: &str = "clusters/test/podinfo";
const STATUS: &str = ".sluice/status/test/podinfo.yaml";

fn out(names: &[&str]) -> Vec<String> {
    output_files(OUT, names)
}

const OUTPUT_FILES: [&str; 4] = [
    "kustomization.yaml",
    "podinfo-canary.yaml",
    "podinfo-primary.yaml",
    "services.yaml",
];

#[test]
fn kubernetes_blue_green_promotes_through_git_daemon_across_a_restart() {
    let mut w = bumped_world(
        "apps/podinfo",
        "deployment.yaml",
        DEPLOYMENT,
        CANARY,
        "podinfo",
    );
    // Restart after the third iteration's tick: the rollout resumes from the status file.
    w.until_restarting(Phase::Succeeded, |_, i| i == 4);

    let commits = w.commits();
    let events: Vec<String> = commits.iter().flat_map(|c| c.events.clone()).collect();
    let mut expected = vec![
        "Initialization done! podinfo.test".to_string(),
        "New revision detected! Scaling up podinfo.test".to_string(),
        "Starting canary analysis for podinfo.test".to_string(),
    ];
    for i in 1..=5 {
        expected.push(format!("Advance podinfo.test canary iteration {i}/5"));
    }
    // Flagger's scheduler says it routes even with its NopRouter; here nothing routes, and
    // those commits change the status only.
    expected.push("Routing all traffic to canary podinfo.test".into());
    expected.push("Copying podinfo.test template spec to podinfo-primary.test".into());
    expected.push("Routing all traffic to primary podinfo.test".into());
    expected.push("Promotion completed! Scaling down podinfo.test".into());
    assert_eq!(events, expected, "each iteration once, across the restart");

    assert_eq!(
        commits[0].files,
        out(&[
            "kustomization.yaml",
            "podinfo-canary.yaml",
            "podinfo-primary.yaml",
            "services.yaml",
            STATUS
        ]),
        "initialization writes the workloads and Services, no route"
    );
    assert_eq!(commits[1].files, out(&["podinfo-canary.yaml", STATUS]));
    for SluiceCommit { events, files, .. } in &commits[2..] {
        let expected = match events[0].as_str() {
            e if e.starts_with("Copying") => out(&["podinfo-primary.yaml", STATUS]),
            e if e.starts_with("Promotion completed") => out(&["podinfo-canary.yaml", STATUS]),
            _ => out(&[STATUS]),
        };
        assert_eq!(files, &expected, "{events:?}: no route file to change");
    }

    let kinds = check_every_commit(&w, OUT, &OUTPUT_FILES);
    assert_eq!(kinds, ["Deployment", "Service"]);
    // The apex Service selects the primary pods at every commit: promotion is the primary's
    // rolling update, never a selector switch.
    for SluiceCommit { sha, .. } in &commits {
        let services: Vec<Json> =
            serde_saphyr::from_multiple(&w.show(sha, &format!("{OUT}/services.yaml"))).unwrap();
        assert_eq!(services[0]["metadata"]["name"], "podinfo-svc");
        assert_eq!(services[0]["spec"]["selector"]["app"], "podinfo-primary");
        assert_eq!(services[2]["metadata"]["name"], "podinfo-svc-canary");
        assert_eq!(services[2]["spec"]["selector"]["app"], "podinfo");
    }
    assert!(w
        .show("main", &format!("{OUT}/podinfo-primary.yaml"))
        .contains("podinfo:6.0.1"));
    assert!(w
        .show("main", &format!("{OUT}/podinfo-canary.yaml"))
        .contains("replicas: 0"));
}

#[test]
fn kubernetes_blue_green_rolls_back_leaving_the_primary_untouched() {
    // Offline observer: a declared metric is never observed, so every check fails.
    let canary = CANARY.replace(
        "    threshold: 10\n",
        "    threshold: 2\n    metrics:\n      - name: request-success-rate\n        thresholdRange: {min: 99}\n",
    );
    let mut w = world(&[
        ("apps/podinfo/deployment.yaml", DEPLOYMENT),
        ("apps/podinfo/canary.yaml", &canary),
    ]);
    w.until(Phase::Initialized);
    let primary_before = w.show("main", &format!("{OUT}/podinfo-primary.yaml"));
    w.human_writes(
        "apps/podinfo/deployment.yaml",
        &DEPLOYMENT.replace("6.0.0", "6.0.1"),
        "podinfo: 6.0.1",
    );
    w.until_restarting(Phase::Failed, |_, i| i == 2);
    let SluiceCommit { events, files, .. } = w.commits().pop().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.contains("Rolling back podinfo.test")),
        "{events:?}"
    );
    assert_eq!(files, out(&["podinfo-canary.yaml", STATUS]));
    assert_eq!(
        w.show("main", &format!("{OUT}/podinfo-primary.yaml")),
        primary_before
    );
    assert!(w
        .show("main", &format!("{OUT}/podinfo-canary.yaml"))
        .contains("replicas: 0"));
    check_every_commit(&w, OUT, &OUTPUT_FILES);
}

#[test]
fn switching_to_kubernetes_deletes_the_route_file_sluice_wrote() {
    let osm = CANARY
        .replace("provider: kubernetes", "provider: osm")
        .replace("    iterations: 5\n", "    stepWeight: 50\n");
    let mut w = world(&[
        ("apps/podinfo/deployment.yaml", DEPLOYMENT),
        ("apps/podinfo/canary.yaml", &osm),
    ]);
    w.until(Phase::Initialized);
    assert!(w
        .show("main", &format!("{OUT}/kustomization.yaml"))
        .contains("route.yaml"));
    // The next commit (here: the new revision's) leaves the old route out.
    w.human_writes("apps/podinfo/canary.yaml", CANARY, "podinfo: blue/green");
    w.human_writes(
        "apps/podinfo/deployment.yaml",
        &DEPLOYMENT.replace("6.0.0", "6.0.1"),
        "podinfo: 6.0.1",
    );
    let r = w.tick();
    assert_eq!(r.commits, 1, "{r:?}");
    let SluiceCommit { files, .. } = w.commits().pop().unwrap();
    assert!(files.contains(&format!("{OUT}/route.yaml")), "{files:?}");
    let tree = git(&w.bare, &["ls-tree", "--name-only", &format!("main:{OUT}")]);
    assert_eq!(tree.lines().collect::<Vec<_>>(), OUTPUT_FILES, "{r:?}");
    assert!(!w
        .show("main", &format!("{OUT}/kustomization.yaml"))
        .contains("route.yaml"));
}

/// Flagger `service` fields sluice does not write are refused, never dropped:
/// `unmanagedMetadata` (live metadata a GitOps apply would fight over), and a port name or a
/// `trafficDistribution` Kubernetes would reject. The fields sluice writes load.
#[test]
fn service_fields_sluice_does_not_write_are_refused_not_dropped() {
    let with = |extra: &str| {
        CANARY.replace(
            "    name: podinfo-svc\n",
            &format!("    name: podinfo-svc\n{extra}"),
        )
    };
    let cases = [
        ("    trafficDistribution: preferClose\n", ":17: spec.service.trafficDistribution: expected PreferClose, PreferSameZone, PreferSameNode (the values Kubernetes accepts), found \"preferClose\""),
        ("    unmanagedMetadata: {labels: [a]}\n", ":17: spec.service.unmanagedMetadata: not supported"),
        ("    portName: Not_A_Port\n", ":17: spec.service.portName: expected a port name"),
        ("    apex:\n      labels: [a]\n", ":18: spec.service.apex.labels: expected a mapping of names to strings"),
    ];
    for (extra, expected) in cases {
        let errs = errors(&with(extra));
        assert_eq!(errs.len(), 1, "{extra}: {errs:?}");
        assert!(errs[0].contains(expected), "{extra}: {errs:?}");
    }
    // A key Flagger's CRD does not declare is pruned by the API server: a warning.
    let pruned = load_text(
        "c.yaml",
        &with("    apex:\n      owner: a\n"),
        &Settings::default(),
    );
    assert!(pruned.errors.is_empty(), "{:?}", pruned.errors);
    assert!(
        pruned.warnings[0]
            .to_string()
            .contains(":18: spec.service.apex.owner: unknown field"),
        "{:?}",
        pruned.warnings
    );
    for extra in [
        "    portDiscovery: true\n",
        "    headless: true\n",
        "    portName: grpc\n",
        "    appProtocol: http\n",
        "    trafficDistribution: PreferClose\n",
        "    apex:\n      labels: {team: a}\n",
        "    primary:\n      annotations: {a: b}\n",
        "    canary:\n      labels: {team: a}\n",
    ] {
        assert_eq!(errors(&with(extra)), Vec::<String>::new(), "{extra}");
    }
}
