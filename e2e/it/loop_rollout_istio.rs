//! Argo Rollouts `Rollout`s routed by `trafficRouting.istio` and `trafficRouting.smi`
//! through the loop: the user's VirtualService (an HTTP route named in `routes` and a TCP route
//! picked by its port; host-level, or subset-level with the DestinationRule's subsets) gets
//! only its stable and canary weights changed, the DestinationRule's two subsets the role
//! labels, and an SMI Rollout the TrafficSplit Argo's SMI router writes. Subset-level routing
//! also runs without `stableService` and `canaryService`, as Argo allows: the VirtualService
//! sends to the subsets of the user's one Service, which sluice does not copy. At every sluice
//! commit each output document passes its strict schema; `kubectl kustomize` builds the output
//! after every phase; a `pause: {}` opens an approval pull request (a fake forge at HTTP
//! level); an analysis step on a real Prometheus promotes, or with a failing query rolls back.

use serde_json::Value as Json;
use sluice::core::status::Phase;

use crate::support::forge::{ForgeFake, Kind};
use crate::support::rollout::{
    analysis_template, checks, distinct, docs_at as docs, podinfo_services, services, show,
    sluice_commits, virtual_service, ANALYSED, APPROVAL, CANARY_WORKLOAD, ISTIO_ROUTING, OUTPUT,
    ROLLOUT_FILE, ROUTE_FILE, SERVICES_FILE, SMI_ROUTING, STABLE_FILE, STATUS_FILE, TIMED,
    TIMED_WEIGHTS,
};
use crate::support::{Schemas, World};

const VS_FILE: &str = "apps/podinfo/virtualservice.yaml";
const DR_FILE: &str = "apps/podinfo/destinationrule.yaml";

/// One way of routing the Rollout: its `trafficRouting` block and the route files it names.
struct Router {
    name: &'static str,
    routing: &'static str,
    files: fn() -> Vec<(&'static str, String)>,
    /// Whether the Rollout names its `stableService` and `canaryService`; without them the
    /// repo holds the user's one Service `podinfo`, which the routes send to.
    named_services: bool,
}

fn host_level() -> Vec<(&'static str, String)> {
    vec![(
        VS_FILE,
        virtual_service("host: podinfo-stable", "host: podinfo-canary"),
    )]
}

fn subset_level() -> Vec<(&'static str, String)> {
    subsets_of("podinfo-stable")
}

/// Subset-level routing to the subsets of the user's Service `podinfo`, which the Rollout
/// does not name.
fn subsets_only() -> Vec<(&'static str, String)> {
    subsets_of("podinfo")
}

fn subsets_of(host: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            VS_FILE,
            virtual_service(
                &format!("host: {host}\n            subset: stable"),
                &format!("host: {host}\n            subset: canary"),
            ),
        ),
        (
            DR_FILE,
            format!(
                "apiVersion: networking.istio.io/v1beta1
kind: DestinationRule
metadata:
  name: podinfo-destrule
  namespace: prod
spec:
  host: {host}
  trafficPolicy:
    loadBalancer: {{simple: ROUND_ROBIN}}
  subsets:
    - name: canary
      labels: {{app: podinfo}}
    - name: stable
      labels: {{app: podinfo}}
    - name: legacy
      labels: {{app: podinfo-legacy}}
"
            ),
        ),
    ]
}

const SUBSET_ROUTING: &str = "        istio:
          virtualService:
            name: podinfo-vsvc.prod
            routes: [primary]
            tcpRoutes: [{port: 3000}]
          destinationRule:
            name: podinfo-destrule
            canarySubsetName: canary
            stableSubsetName: stable
";

const ROUTERS: [Router; 4] = [
    Router {
        name: "istio host-level",
        routing: ISTIO_ROUTING,
        files: host_level,
        named_services: true,
    },
    Router {
        name: "istio subset-level",
        routing: SUBSET_ROUTING,
        files: subset_level,
        named_services: true,
    },
    Router {
        name: "smi",
        routing: SMI_ROUTING,
        files: Vec::new,
        named_services: true,
    },
    Router {
        name: "istio subset-level without Services",
        routing: SUBSET_ROUTING,
        files: subsets_only,
        named_services: false,
    },
];

/// The Rollout's `stableService` and `canaryService` lines.
const SERVICE_LINES: &str =
    "      canaryService: podinfo-canary\n      stableService: podinfo-stable\n";

fn routed(router: &Router, version: &str, steps: &str) -> String {
    let text = crate::support::rollout::routed(router.routing, version, steps);
    if router.named_services {
        return text;
    }
    assert!(text.contains(SERVICE_LINES), "the Service lines to remove");
    text.replace(SERVICE_LINES, "")
}

fn world(router: &Router, steps: &str, extra: &[(&str, String)]) -> World {
    let services = if router.named_services {
        services()
    } else {
        podinfo_services(&["podinfo"])
    };
    let mut files = vec![
        (ROLLOUT_FILE, routed(router, "6.7.0", steps)),
        ("apps/podinfo/services.yaml", services),
    ];
    files.extend((router.files)());
    files.extend(extra.iter().map(|(f, t)| (*f, t.clone())));
    let pairs: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
    World::served(&pairs).building(OUTPUT)
}

/// The world with the Rollout initialized at 6.7.0, then bumped to 6.7.1 by a human.
fn bumped(router: &Router, steps: &str, extra: &[(&str, String)]) -> World {
    let mut w = world(router, steps, extra);
    w.until(Phase::Initialized);
    w.human_writes(
        ROLLOUT_FILE,
        &routed(router, "6.7.1", steps),
        "podinfo: 6.7.1",
    );
    w
}

/// The weights of an SMI v1alpha1 backend (`"200m"` is 20 %).
fn split_weight(value: &Json) -> u64 {
    value
        .as_str()
        .unwrap()
        .strip_suffix('m')
        .unwrap()
        .parse::<u64>()
        .unwrap()
        / 10
}

/// Every sluice commit: every route document schema-valid and the user's but for the
/// weights (the status file's) and the subsets' role labels. Returns the weights, in order.
fn check_every_commit(w: &World, router: &Router) -> Vec<String> {
    let mut schemas = Schemas::default();
    let sources: Vec<Json> = (router.files)()
        .iter()
        .map(|(_, text)| serde_saphyr::from_str(text).unwrap())
        .collect();
    let mut found = Vec::new();
    for (sha, trailer) in sluice_commits(&w.bare) {
        let status: Json = serde_saphyr::from_str(&show(&w.bare, &sha, STATUS_FILE)).unwrap();
        let (stable_w, canary_w) = (
            status["primaryWeight"].as_u64().unwrap(),
            status["canaryWeight"].as_u64().unwrap(),
        );
        let route = docs(&w.bare, &sha, ROUTE_FILE);
        for doc in &route {
            schemas.assert_valid(doc, &format!("{sha} {ROUTE_FILE}"));
        }
        if sources.is_empty() {
            let [split] = route.as_slice() else {
                panic!("{sha}: one TrafficSplit: {route:?}")
            };
            assert_eq!(split["apiVersion"], "split.smi-spec.io/v1alpha1", "{sha}");
            assert_eq!(split["metadata"]["name"], "podinfo-split", "{sha}");
            assert_eq!(split["spec"]["service"], "podinfo-stable", "{sha}");
            let backends = &split["spec"]["backends"];
            assert_eq!(
                (
                    backends[0]["service"].as_str(),
                    split_weight(&backends[0]["weight"]),
                    backends[1]["service"].as_str(),
                    split_weight(&backends[1]["weight"])
                ),
                (
                    Some("podinfo-canary"),
                    canary_w,
                    Some("podinfo-stable"),
                    stable_w
                ),
                "{sha}"
            );
        } else {
            assert_eq!(route.len(), sources.len(), "{sha}");
            for (copy, source) in route.iter().zip(&sources) {
                let mut expected = source.clone();
                for section in ["http", "tcp"] {
                    let routes = expected.pointer_mut(&format!("/spec/{section}"));
                    for r in routes.and_then(Json::as_array_mut).into_iter().flatten() {
                        for d in r["route"].as_array_mut().unwrap() {
                            let subset = d["destination"]["subset"].as_str();
                            let host = d["destination"]["host"].as_str();
                            match (host, subset) {
                                (_, Some("canary")) | (Some("podinfo-canary"), None) => {
                                    d["weight"] = canary_w.into()
                                }
                                (_, Some("stable")) | (Some("podinfo-stable"), None) => {
                                    d["weight"] = stable_w.into()
                                }
                                _ => {}
                            }
                        }
                    }
                }
                let subsets = expected.pointer_mut("/spec/subsets");
                for s in subsets.and_then(Json::as_array_mut).into_iter().flatten() {
                    if let Some(role @ ("stable" | "canary")) = s["name"].as_str() {
                        s["labels"]["sluice.dev/rollout-role"] = role.into();
                    }
                }
                assert_eq!(
                    copy["spec"], expected["spec"],
                    "{sha}: only the weights change"
                );
                assert_eq!(
                    copy["metadata"]["name"], source["metadata"]["name"],
                    "{sha}"
                );
                assert_eq!(copy["metadata"]["namespace"], "prod", "{sha}");
            }
        }
        let weights = format!("primary={stable_w} canary={canary_w}");
        assert_eq!(trailer, weights, "{sha}: trailer and status agree");
        found.push(weights);
    }
    found
}

#[test]
fn rollout_through_istio_and_smi_steps_and_promotes() {
    for router in &ROUTERS {
        let mut w = bumped(router, TIMED, &[]);
        w.until(Phase::Succeeded);
        assert_eq!(
            distinct(check_every_commit(&w, router)),
            TIMED_WEIGHTS,
            "{}",
            router.name
        );
        let stable = show(&w.bare, "main", STABLE_FILE);
        assert!(
            stable.contains("podinfo:6.7.1"),
            "{}: {stable}",
            router.name
        );
    }
}

#[test]
fn rollout_istio_and_smi_pause_without_duration_open_an_approval_pull_request_fake_forge() {
    for router in [&ROUTERS[0], &ROUTERS[2]] {
        let fake = ForgeFake::start(Kind::GitHub);
        let config = format!(
            "apiVersion: sluice.dev/v1alpha1\nkind: Config\n{}",
            fake.settings()
        );
        let mut w = bumped(router, APPROVAL, &[(".sluice/config.yaml", config)]);
        w.until(Phase::WaitingApproval);
        w.ticks(2);
        assert_eq!(fake.count(), 1, "{}: one pull request", router.name);
        let pr = fake.first();
        let status = w.yaml_at_main(STATUS_FILE);
        assert_eq!(
            (status["phase"].as_str(), status["canaryWeight"].as_u64()),
            (Some("WaitingApproval"), Some(20)),
            "{}: held at the pause's weight",
            router.name
        );
        // The branch carries the next step's weights.
        let route: Json = serde_saphyr::from_str(&show(&w.bare, &pr.head, ROUTE_FILE)).unwrap();
        let next = if router.name == "smi" {
            (
                split_weight(&route["spec"]["backends"][1]["weight"]),
                split_weight(&route["spec"]["backends"][0]["weight"]),
            )
        } else {
            let primary = &route["spec"]["http"][1]["route"];
            (
                primary[0]["weight"].as_u64().unwrap(),
                primary[1]["weight"].as_u64().unwrap(),
            )
        };
        assert_eq!(next, (40, 60), "{}", router.name);
        crate::support::merge_approval(w.human(), &pr.head, "merge");
        fake.set(1, false, true);
        w.until(Phase::Succeeded);
        assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
    }
}

/// A Rollout routed by `router`, analysed on a real Prometheus (`condition` judging `up`,
/// which is 1) through the live observer, from 6.7.0 to 6.7.1 until `phase`.
fn analysed(router: &Router, condition: &str, phase: Phase, check: impl FnOnce(&World)) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scraped = rt.block_on(crate::support::prometheus::Scraped::start_instant(
        crate::support::prometheus::osm_exposition,
    ));
    let mut w = world(
        router,
        ANALYSED,
        &[
            (".sluice/config.yaml", scraped.prom.repo_config()),
            ("apps/podinfo/analysis.yaml", analysis_template(condition)),
        ],
    );
    let runtime = crate::support::runtime();
    let live = sluice::observer::Live::new(runtime);
    w.until_with(&live, runtime, Phase::Initialized);
    w.human_writes(
        ROLLOUT_FILE,
        &routed(router, "6.7.1", ANALYSED),
        "podinfo: 6.7.1",
    );
    w.until_with(&live, runtime, phase);
    crate::support::rollout::kustomize_builds(&w.bare, OUTPUT);
    check(&w);
    drop(scraped);
}

#[test]
fn rollout_istio_and_smi_with_a_passing_analysis_promote() {
    for router in [&ROUTERS[1], &ROUTERS[2]] {
        analysed(router, "result[0] >= 1", Phase::Succeeded, |w| {
            assert_eq!(
                distinct(check_every_commit(w, router)),
                [
                    "primary=100 canary=0",
                    "primary=80 canary=20",
                    "primary=40 canary=60",
                    "primary=100 canary=0",
                ],
                "{}",
                router.name
            );
            assert_eq!(checks(&w.bare, "analysis running"), ["canary-up=1 pass"]);
            assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
        });
    }
}

#[test]
fn rollout_istio_and_smi_with_a_failing_analysis_abort_to_stable() {
    for router in [&ROUTERS[0], &ROUTERS[2], &ROUTERS[3]] {
        analysed(router, "result[0] >= 2", Phase::Failed, |w| {
            let status = w.yaml_at_main(STATUS_FILE);
            assert_eq!(
                (
                    status["primaryWeight"].as_u64(),
                    status["canaryWeight"].as_u64()
                ),
                (Some(100), Some(0)),
                "{}: back to stable",
                router.name
            );
            let weights = check_every_commit(w, router);
            assert!(weights.contains(&"primary=80 canary=20".to_string()));
            assert_eq!(
                weights.last().map(String::as_str),
                Some("primary=100 canary=0")
            );
            assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.0"));
            assert_eq!(checks(&w.bare, "roll back"), ["canary-up=1 fail"]);
        });
    }
}

/// What Argo's Istio router refuses, sluice refuses at the line, in the VirtualService.
#[test]
fn validate_refuses_a_virtual_service_route_without_the_canary_destination() {
    let vs = virtual_service("host: podinfo-stable", "host: podinfo-other");
    let dir = crate::support::repo(&[
        (ROLLOUT_FILE, &routed(&ROUTERS[0], "6.7.0", TIMED)),
        ("apps/podinfo/services.yaml", &services()),
        (VS_FILE, &vs),
    ]);
    let (code, _, err) = crate::support::validate(dir.path(), &["."]);
    assert_eq!(code, 1, "{err}");
    let line = vs
        .lines()
        .position(|l| l.contains("podinfo-other"))
        .unwrap();
    assert!(
        err.contains(&format!(
            "{VS_FILE}:{line}: spec.http[1].route[1].destination: a destination that is neither"
        )),
        "{err}"
    );
}

/// Subset-level routing without `stableService` and `canaryService` (Argo's
/// `requireCanaryStableServices` is false with a `destinationRule`): the DestinationRule's
/// subsets select the two workloads by their role label, and no Service is copied, as the
/// Rollout names none; the output builds with `kubectl kustomize`.
#[test]
fn rollout_istio_subsets_without_services_copy_no_service_and_promote() {
    let router = &ROUTERS[3];
    let mut w = bumped(router, TIMED, &[]);
    w.until(Phase::Succeeded);
    assert_eq!(distinct(check_every_commit(&w, router)), TIMED_WEIGHTS);
    let files = crate::support::git(&w.bare, &["ls-tree", "-r", "--name-only", "main", OUTPUT]);
    assert!(
        files.contains(ROUTE_FILE) && !files.contains(SERVICES_FILE),
        "no Service is named, none copied: {files}"
    );
    let route = docs(&w.bare, "main", ROUTE_FILE);
    let rule = route
        .iter()
        .find(|d| d["kind"] == "DestinationRule")
        .expect("the DestinationRule copied");
    let roles: Vec<(&str, &str)> = rule["spec"]["subsets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| {
            Some((
                s["name"].as_str()?,
                s["labels"]["sluice.dev/rollout-role"].as_str()?,
            ))
        })
        .collect();
    assert_eq!(roles, [("canary", "canary"), ("stable", "stable")]);
    for (file, role) in [(STABLE_FILE, "stable"), (CANARY_WORKLOAD, "canary")] {
        let workload: Json = serde_saphyr::from_str(&show(&w.bare, "main", file)).unwrap();
        assert_eq!(
            workload["spec"]["template"]["metadata"]["labels"]["sluice.dev/rollout-role"], role,
            "{file}: the label its subset selects"
        );
    }
    crate::support::rollout::kustomize_builds(&w.bare, OUTPUT);
}
