//! Argo Rollouts `Rollout`s through the loop, read unchanged: a Rollout routed by the Gateway
//! API plugin (an HTTPRoute, GRPCRoute, TCPRoute or TLSRoute the user owns, naming the
//! Rollout's stableService and canaryService) steps through its `setWeight`/`pause` steps and
//! promotes; `pause: {}` opens an approval pull request (a fake forge at HTTP level); `sluice
//! plan` lists Argo's steps. At every sluice commit each output document passes its strict
//! schema, the route is the user's with only the two weights changed (the status file's), the
//! Services select one workload each, and the canary runs Argo's share of the replicas;
//! `kubectl kustomize` builds the output after every phase.

use serde_json::Value as Json;
use sluice::core::status::Phase;

use crate::support::forge::{ForgeFake, Kind};
use crate::support::rollout::{
    analysis_template, checks, distinct, docs_at, grpc_route, http_route, rollout, services, show,
    sluice_commits, tcp_route, tls_route, ANALYSED, APPROVAL, CANARY_WORKLOAD, OUTPUT,
    ROLLOUT_FILE, ROUTE_FILE, SERVICES_FILE, STABLE_FILE, STATUS_FILE, TIMED, TIMED_WEIGHTS,
};
use crate::support::{run_sluice, Schemas, World};

const ROUTE_SOURCE: &str = "apps/podinfo/route.yaml";

/// One Gateway API route kind: the plugin's key for it, and the user's route.
struct Kind_ {
    key: &'static str,
    source: fn() -> String,
}

const KINDS: [Kind_; 4] = [
    Kind_ {
        key: "httpRoute",
        source: http_route,
    },
    Kind_ {
        key: "grpcRoute",
        source: grpc_route,
    },
    Kind_ {
        key: "tcpRoute",
        source: tcp_route,
    },
    Kind_ {
        key: "tlsRoute",
        source: tls_route,
    },
];

fn world(kind: &Kind_, steps: &str, extra: &[(&str, String)]) -> World {
    let mut files = vec![
        (ROLLOUT_FILE, rollout("6.7.0", kind.key, steps)),
        ("apps/podinfo/services.yaml", services()),
        (ROUTE_SOURCE, (kind.source)()),
    ];
    files.extend(extra.iter().map(|(f, t)| (*f, t.clone())));
    let pairs: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
    World::served(&pairs).building(OUTPUT)
}

/// Every sluice commit: every output document schema-valid; the route the user's but for
/// the two weights, which are the status file's; each Service selecting one role; the
/// canary's replicas Argo's share. Returns the route's weights, in order.
fn check_every_commit(w: &World, kind: &Kind_) -> Vec<String> {
    let mut schemas = Schemas::default();
    let source: Json = serde_saphyr::from_str(&(kind.source)()).unwrap();
    let mut found = Vec::new();
    for (sha, trailer) in sluice_commits(&w.bare) {
        let status: Json = serde_saphyr::from_str(&show(&w.bare, &sha, STATUS_FILE)).unwrap();
        let (stable_w, canary_w) = (
            status["primaryWeight"].as_u64().unwrap(),
            status["canaryWeight"].as_u64().unwrap(),
        );
        for file in [ROUTE_FILE, STABLE_FILE, CANARY_WORKLOAD, SERVICES_FILE] {
            for doc in docs_at(&w.bare, &sha, file) {
                schemas.assert_valid(&doc, &format!("{sha} {file}"));
            }
        }
        let route = docs_at(&w.bare, &sha, ROUTE_FILE).remove(0);
        let mut expected = source.clone();
        let rules = expected["spec"]["rules"].as_array_mut().unwrap();
        for rule in rules {
            for backend in rule["backendRefs"].as_array_mut().into_iter().flatten() {
                match backend["name"].as_str() {
                    Some("podinfo-stable") => backend["weight"] = stable_w.into(),
                    Some("podinfo-canary") => backend["weight"] = canary_w.into(),
                    _ => {}
                }
            }
        }
        assert_eq!(
            route["spec"], expected["spec"],
            "{sha}: only the weights change"
        );
        assert_eq!(route["metadata"]["labels"]["team"], "web", "{sha}");
        let services = docs_at(&w.bare, &sha, SERVICES_FILE);
        for (service, role) in services.iter().zip(["stable", "canary"]) {
            assert_eq!(
                service["spec"]["selector"],
                serde_json::json!({"app": "podinfo", "sluice.dev/rollout-role": role}),
                "{sha}"
            );
        }
        let canary = docs_at(&w.bare, &sha, CANARY_WORKLOAD).remove(0);
        assert_eq!(
            canary["spec"]["template"]["metadata"]["labels"]["sluice.dev/rollout-role"],
            "canary"
        );
        let active = ["Progressing", "WaitingApproval", "Promoting", "Finalising"]
            .contains(&status["phase"].as_str().unwrap())
            || canary_w > 0;
        let replicas = if active {
            (5 * canary_w).div_ceil(100).max(1)
        } else {
            0
        };
        assert_eq!(canary["spec"]["replicas"], replicas, "{sha}: Argo's share");
        let weights = format!("primary={stable_w} canary={canary_w}");
        assert_eq!(trailer, weights, "{sha}: trailer and status agree");
        found.push(weights);
    }
    found
}

#[test]
fn rollout_through_each_gateway_api_route_kind_steps_and_promotes() {
    for kind in &KINDS {
        let mut w = world(kind, TIMED, &[]);
        w.until(Phase::Initialized);
        let stable = show(&w.bare, "main", STABLE_FILE);
        assert!(stable.contains("podinfo:6.7.0"), "{stable}");
        w.human_writes(
            ROLLOUT_FILE,
            &rollout("6.7.1", kind.key, TIMED),
            "podinfo: 6.7.1",
        );
        w.until(Phase::Succeeded);
        assert_eq!(
            distinct(check_every_commit(&w, kind)),
            TIMED_WEIGHTS,
            "{}",
            kind.key
        );
        let stable = show(&w.bare, "main", STABLE_FILE);
        assert!(stable.contains("podinfo:6.7.1"), "promoted: {stable}");
        crate::support::rollout::every_commit_drawn_by_sluice(
            &w.bare,
            &sluice_commits(&w.bare)
                .into_iter()
                .map(|(s, _)| s)
                .collect::<Vec<_>>(),
        );
    }
}

#[test]
fn rollout_pause_without_duration_opens_an_approval_pull_request_fake_forge() {
    let fake = ForgeFake::start(Kind::GitHub);
    let config = format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\n{}",
        fake.settings()
    );
    let mut w = world(
        &KINDS[0],
        APPROVAL,
        &[(".sluice/config.yaml", config.clone())],
    );
    w.until(Phase::Initialized);
    w.human_writes(
        ROLLOUT_FILE,
        &rollout("6.7.1", "httpRoute", APPROVAL),
        "podinfo: 6.7.1",
    );
    w.until(Phase::WaitingApproval);
    w.ticks(2);
    assert_eq!(fake.count(), 1, "one pull request");
    let pr = fake.first();
    assert!(pr.head.starts_with("sluice/prod/podinfo/"), "{pr:?}");
    let status = w.yaml_at_main(STATUS_FILE);
    assert_eq!(
        (status["phase"].as_str(), status["canaryWeight"].as_u64()),
        (Some("WaitingApproval"), Some(20)),
        "held at the pause's weight"
    );
    // The branch carries the next step's weights on the user's route.
    let route: Json = serde_saphyr::from_str(&show(&w.bare, &pr.head, ROUTE_FILE)).unwrap();
    let backends = &route["spec"]["rules"][1]["backendRefs"];
    assert_eq!(
        (
            backends[0]["weight"].as_u64(),
            backends[1]["weight"].as_u64()
        ),
        (Some(40), Some(60))
    );
    crate::support::merge_approval(w.human(), &pr.head, "merge");
    fake.set(1, false, true);
    w.until(Phase::Succeeded);
    assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
}

#[test]
fn plan_lists_argo_steps_with_weights_and_pauses() {
    let dir = crate::support::repo(&[
        (ROLLOUT_FILE, &rollout("6.7.0", "httpRoute", TIMED)),
        ("apps/podinfo/services.yaml", &services()),
        (ROUTE_SOURCE, &http_route()),
    ]);
    let path = dir.path().display().to_string();
    let (code, out, err) = run_sluice(&["plan", &path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "rollout steps:      setWeight 20, pause 30s, setWeight 50, pause 60s, setWeight 80"
        ),
        "{out}"
    );
    assert!(out.contains("canary weights:     20 -> 50 -> 80"), "{out}");
    let (code, out, _) = run_sluice(&["plan", "-o", "json", &path]);
    assert_eq!(code, 0);
    let plan: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(
        plan[0]["rolloutSteps"],
        serde_json::json!([
            "setWeight 20",
            "pause 30s",
            "setWeight 50",
            "pause 60s",
            "setWeight 80"
        ])
    );
    let approval = crate::support::repo(&[
        (ROLLOUT_FILE, &rollout("6.7.0", "httpRoute", APPROVAL)),
        ("apps/podinfo/services.yaml", &services()),
        (ROUTE_SOURCE, &http_route()),
    ]);
    let (_, out, _) = run_sluice(&["plan", &approval.path().display().to_string()]);
    assert!(
        out.contains("rollout steps:      setWeight 20, pause until approved, setWeight 60"),
        "{out}"
    );
    assert!(
        out.contains("approvals:          before weight 60 (step 2)"),
        "{out}"
    );
}

/// A Rollout with what Argo acts on but sluice cannot do in git, and what the API server
/// prunes: each refused at its line with the reason, each pruned field a warning.
#[test]
fn validate_refuses_what_git_cannot_do_at_its_line_and_warns_for_pruned_fields() {
    let steps = "        - setWeight: 20
        - plugin:
            name: argoproj-labs/step-exec
        - analysis:
            templates: [{templateName: success-rate}]
        - setWeight: 40";
    let text = rollout("6.7.0", "httpRoute", steps)
        .replace(
            "  revisionHistoryLimit: 2\n",
            "  revisionHistoryLimit: 2\n  replicaz: 3\n",
        )
        .replace(
            "      trafficRouting:\n",
            "      trafficRouting:\n        alb: {ingress: podinfo, servicePort: 80}\n",
        );
    let dir = crate::support::repo(&[
        (ROLLOUT_FILE, &text),
        ("apps/podinfo/services.yaml", &services()),
        (ROUTE_SOURCE, &http_route()),
    ]);
    let (code, _, err) = crate::support::validate(dir.path(), &["."]);
    assert_eq!(code, 1, "{err}");
    let line = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    for expected in [
        format!(
            "{ROLLOUT_FILE}:{}: spec.strategy.canary.steps[1].plugin: a plugin step runs the plugin's code in the cluster",
            line("- plugin:")
        ),
        format!(
            "{ROLLOUT_FILE}:{}: spec.strategy.canary.steps[2].analysis.templates: AnalysisTemplate prod/success-rate not found",
            line("templates: [{templateName: success-rate}]")
        ),
        format!(
            "{ROLLOUT_FILE}:{}: spec.strategy.canary.trafficRouting.alb: the AWS Load Balancer Controller's weights",
            line("alb:")
        ),
        format!(
            "{ROLLOUT_FILE}:{}: spec.replicaz: unknown field (did you mean \"replicas\"?)",
            line("replicaz")
        ),
        format!(
            "{ROLLOUT_FILE}:{}: spec.revisionHistoryLimit: ignored",
            line("revisionHistoryLimit")
        ),
    ] {
        assert!(err.contains(&expected), "{expected}\nin:\n{err}");
    }
    assert!(
        err.contains("prunes fields the Argo Rollouts CRD does not declare"),
        "{err}"
    );
}

/// A Rollout analysed on a real Prometheus (`condition` judging `up`, which is 1) through
/// the live observer, from 6.7.0 to 6.7.1 until the canary reaches `phase`.
fn analysed_rollout(condition: &str, phase: Phase, check: impl FnOnce(&World)) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scraped = rt.block_on(crate::support::prometheus::Scraped::start_instant(
        crate::support::prometheus::osm_exposition,
    ));
    let w = analysed_through(&KINDS[0], &scraped, condition, phase);
    check(&w);
    drop(scraped);
}

/// [`analysed_rollout`] through the route of `kind`, on the Prometheus `scraped` serves.
fn analysed_through(
    kind: &Kind_,
    scraped: &crate::support::prometheus::Scraped,
    condition: &str,
    phase: Phase,
) -> World {
    let mut w = world(
        kind,
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
        &rollout("6.7.1", kind.key, ANALYSED),
        "podinfo: 6.7.1",
    );
    w.until_with(&live, runtime, phase);
    crate::support::rollout::kustomize_builds(&w.bare, OUTPUT);
    w
}

/// The plugin's GRPCRoute, TCPRoute and TLSRoute carry the weights as its HTTPRoute does: a
/// failing analysis puts all traffic back on the stable Service in each, at every commit a
/// schema-valid route (one Prometheus for the three).
#[test]
fn rollout_through_grpc_tcp_and_tls_routes_aborts_to_stable_on_a_failing_analysis() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scraped = rt.block_on(crate::support::prometheus::Scraped::start_instant(
        crate::support::prometheus::osm_exposition,
    ));
    for kind in &KINDS[1..] {
        let w = analysed_through(kind, &scraped, "result[0] >= 2", Phase::Failed);
        let weights = check_every_commit(&w, kind);
        assert_eq!(
            weights.last().map(String::as_str),
            Some("primary=100 canary=0"),
            "{}: back to stable",
            kind.key
        );
        assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.0"));
        assert_eq!(
            checks(&w.bare, "roll back"),
            ["canary-up=1 fail"],
            "{}",
            kind.key
        );
    }
    drop(scraped);
}

#[test]
fn rollout_with_a_passing_analysis_step_promotes_after_its_count() {
    analysed_rollout("result[0] >= 1", Phase::Succeeded, |w| {
        assert_eq!(
            distinct(check_every_commit(w, &KINDS[0])),
            [
                "primary=100 canary=0",
                "primary=80 canary=20",
                "primary=40 canary=60",
                "primary=100 canary=0",
            ]
        );
        // count 2: the first measurement holds the step (recorded), the second ends it.
        assert_eq!(checks(&w.bare, "analysis running"), ["canary-up=1 pass"]);
        assert_eq!(
            checks(&w.bare, "advance canary weight 20 -> 60"),
            ["canary-up=1 pass"]
        );
        assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
        crate::support::audit::clean(&w.bare);
    });
}

/// `sluice plan`'s output for the Rollout `text` with its Services, route and the
/// `canary-up` AnalysisTemplate.
fn plan_with_analysis(text: &str) -> String {
    let template = analysis_template("result[0] >= 1");
    let dir = crate::support::repo(&[
        (ROLLOUT_FILE, text),
        ("apps/podinfo/services.yaml", &services()),
        (ROUTE_SOURCE, &http_route()),
        ("apps/podinfo/analysis.yaml", &template),
    ]);
    let (code, out, err) = run_sluice(&["plan", &dir.path().display().to_string()]);
    assert_eq!(code, 0, "{err}");
    out
}

#[test]
fn plan_lists_analysis_steps_and_background_analysis() {
    let background = "      analysis:
        templates: [{templateName: canary-up}]
        args: [{name: role, value: stable}, {name: namespace, value: prod}]
        startingStep: 2
";
    let text = rollout("6.7.0", "httpRoute", ANALYSED)
        .replace("      steps:\n", &format!("{background}      steps:\n"));
    let out = plan_with_analysis(&text);
    assert!(
        out.contains("rollout steps:      setWeight 20, analysis canary-up, setWeight 60, background analysis canary-up"),
        "{out}"
    );
}

/// A background analysis without `templates` (here the pre-1.0 `templateName`, which the
/// API server drops) is none: Argo's `reconcileBackgroundAnalysisRun` starts no run, and
/// `sluice plan` lists no background analysis, warning at the field.
#[test]
fn plan_runs_no_background_analysis_that_lists_no_templates() {
    let background = "      analysis:
        templateName: canary-up
";
    let text = rollout("6.7.0", "httpRoute", ANALYSED)
        .replace("      steps:\n", &format!("{background}      steps:\n"));
    let out = plan_with_analysis(&text);
    assert!(
        out.contains("rollout steps:      setWeight 20, analysis canary-up, setWeight 60"),
        "{out}"
    );
    assert!(!out.contains("background analysis canary-up"), "{out}");
}

/// Argo runs its steps one after another: a pause before an analysis ends before the
/// analysis starts, and an analysis before a pause ends before the pause starts; `sluice plan`
/// lists them in that order (a step of its own at the same weight).
#[test]
fn plan_keeps_argo_step_order_of_pauses_and_analyses() {
    let analysis = "        - analysis:
            templates:
              - templateName: canary-up
            args:
              - {name: role, value: canary}
              - {name: namespace, value: prod}
";
    let steps = format!(
        "        - setWeight: 20
        - pause: {{duration: 30s}}
{analysis}        - setWeight: 60
{analysis}        - pause: {{}}
        - setWeight: 80"
    );
    let text = rollout("6.7.0", "httpRoute", &steps);
    let out = plan_with_analysis(&text);
    assert!(
        out.contains("rollout steps:      setWeight 20, pause 30s, analysis canary-up, setWeight 60, analysis canary-up, pause until approved, setWeight 80"),
        "{out}"
    );
}

#[test]
fn rollout_with_a_failing_analysis_step_aborts_to_stable_and_audit_finds_an_edited_check() {
    analysed_rollout("result[0] >= 2", Phase::Failed, |w| {
        let status = w.yaml_at_main(STATUS_FILE);
        assert_eq!(
            (
                status["primaryWeight"].as_u64(),
                status["canaryWeight"].as_u64()
            ),
            (Some(100), Some(0)),
            "back to stable"
        );
        let weights = check_every_commit(w, &KINDS[0]);
        assert_eq!(
            weights.last().map(String::as_str),
            Some("primary=100 canary=0")
        );
        assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.0"));
        let subject = crate::support::git(&w.bare, &["log", "-1", "--format=%s", "main"]);
        assert!(
            subject.contains("roll back: analysis run Failed: metric canary-up Failed"),
            "{subject}"
        );
        assert_eq!(checks(&w.bare, "roll back"), ["canary-up=1 fail"]);
        crate::support::audit::clean(&w.bare);

        // A hand-edited measurement is not what the recorded value gives.
        let rollback = crate::support::git(&w.bare, &["log", "-1", "--format=%H", "main"]);
        crate::support::audit::rewrite_message(
            w.human(),
            &w.bare,
            rollback.trim(),
            "s/^Sluice-Check: canary-up=1 fail/Sluice-Check: canary-up=1 pass/",
        );
        let (code, report) = crate::support::audit::audit(&w.bare);
        assert_eq!(code, 1, "{report:#}");
        let findings = report["findings"].as_array().unwrap();
        assert_eq!(findings.len(), 1, "{report:#}");
    });
}

/// Argo refuses an analysis step whose metric never ends (an interval without a count), and
/// so does sluice, at the step's templates.
#[test]
fn validate_refuses_an_analysis_step_metric_without_a_count() {
    let text = rollout("6.7.0", "httpRoute", ANALYSED);
    let template = analysis_template("result[0] >= 1").replace("      count: 2\n", "");
    let dir = crate::support::repo(&[
        (ROLLOUT_FILE, &text),
        ("apps/podinfo/services.yaml", &services()),
        (ROUTE_SOURCE, &http_route()),
        ("apps/podinfo/analysis.yaml", &template),
    ]);
    let (code, _, err) = crate::support::validate(dir.path(), &["."]);
    assert_eq!(code, 1, "{err}");
    let line = text.lines().position(|l| l.contains("templates:")).unwrap() + 1;
    assert!(
        err.contains(&format!("{ROLLOUT_FILE}:{line}: spec.strategy.canary.steps[1].analysis.templates: metric \"canary-up\"")),
        "{err}"
    );
    assert!(err.contains("runs indefinitely"), "{err}");
}
