//! A Rollout whose analysis step measures Argo's `web` metric through the loop: the live
//! observer asks a real local HTTP server (what the provider talks to in production) and the
//! template's conditions judge the JSON object its `jsonPath` selects. A healthy answer
//! promotes the Rollout; an unhealthy one rolls it back to stable; `sluice audit` replays
//! every decision from the recorded results.

use sluice::core::status::Phase;

use crate::support::metrics::{Canned, Server};
use crate::support::rollout::{
    checks, http_route, rollout, services, show, ANALYSED, OUTPUT, ROLLOUT_FILE, STABLE_FILE,
    STATUS_FILE,
};
use crate::support::World;

/// The `canary-up` AnalysisTemplate [`ANALYSED`] names, as a web metric on `url`.
fn web_template(url: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: canary-up
  namespace: prod
spec:
  args:
    - name: role
    - name: namespace
  metrics:
    - name: canary-up
      interval: 10s
      count: 2
      successCondition: result.status == 'healthy' && result.version.major == '1'
      failureCondition: result.status == 'degraded'
      provider:
        web:
          url: {url}/health?role={{{{args.role}}}}&ns={{{{args.namespace}}}}
          jsonPath: \"{{$.data}}\"
"
    )
}

/// The Rollout from 6.7.0 to 6.7.1 through [`ANALYSED`], the server answering `body` to
/// every measurement, until the canary reaches `phase`.
fn web_analysed_rollout(body: &'static str, phase: Phase, check: impl FnOnce(&World, &Server)) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(Server::start_with(move |_| Canned::json(200, body)));
    let url = format!("http://{}", server.addr);
    let files = [
        (ROLLOUT_FILE, rollout("6.7.0", "httpRoute", ANALYSED)),
        ("apps/podinfo/services.yaml", services()),
        ("apps/podinfo/route.yaml", http_route()),
        ("apps/podinfo/analysis.yaml", web_template(&url)),
    ];
    let pairs: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
    let mut w = World::served(&pairs).building(OUTPUT);
    let runtime = crate::support::runtime();
    let live = sluice::observer::Live::new(runtime);
    w.until_with(&live, runtime, Phase::Initialized);
    w.human_writes(
        ROLLOUT_FILE,
        &rollout("6.7.1", "httpRoute", ANALYSED),
        "podinfo: 6.7.1",
    );
    w.until_with(&live, runtime, phase);
    check(&w, &server);
    crate::support::audit::clean(&w.bare);
    drop(server);
}

#[test]
fn rollout_with_a_healthy_web_metric_promotes() {
    web_analysed_rollout(
        r#"{"data":{"status":"healthy","version":{"major":"1","minor":"31"}}}"#,
        Phase::Succeeded,
        |w, server| {
            assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
            let requests = server.requests();
            assert_eq!(requests.len(), 2, "count 2: {requests:?}");
            assert_eq!(requests[0].query_param("ns").as_deref(), Some("prod"));
            assert!(
                requests[0]
                    .query_param("role")
                    .is_some_and(|r| !r.is_empty()),
                "{requests:?}"
            );
            let status = w.yaml_at_main(STATUS_FILE);
            assert_eq!(status["canaryWeight"].as_u64(), Some(0));
        },
    );
}

#[test]
fn rollout_with_a_degraded_web_metric_rolls_back_to_stable() {
    web_analysed_rollout(
        r#"{"data":{"status":"degraded","version":{"major":"1"}}}"#,
        Phase::Failed,
        |w, _| {
            let status = w.yaml_at_main(STATUS_FILE);
            assert_eq!(
                (
                    status["primaryWeight"].as_u64(),
                    status["canaryWeight"].as_u64()
                ),
                (Some(100), Some(0)),
                "back to stable"
            );
            assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.0"));
            let subject = crate::support::git(&w.bare, &["log", "-1", "--format=%s", "main"]);
            assert!(
                subject.contains("roll back: analysis run Failed: metric canary-up Failed"),
                "{subject}"
            );
            assert_eq!(checks(&w.bare, "roll back"), ["canary-up=error fail"]);
        },
    );
}
