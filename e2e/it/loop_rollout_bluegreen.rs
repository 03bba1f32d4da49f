//! Argo Rollouts `strategy.blueGreen` through the loop, read unchanged: the new template runs
//! as the preview (the canary workload, `previewReplicaCount` pods) behind the
//! `previewService`; `prePromotionAnalysis` on a real Prometheus gates the switch of the
//! `activeService`, `postPromotionAnalysis` runs after it; a failing query aborts with the
//! `activeService` still on the old pods; `autoPromotionEnabled: false` opens an approval pull
//! request (a fake forge at HTTP level); `sluice plan` lists the blue/green steps. At every
//! sluice commit each output document passes its strict schema, the Services select the
//! workloads Argo's would, and `kubectl kustomize` builds the output after every phase.

use serde_json::Value as Json;
use sluice::core::status::Phase;

use crate::support::forge::{ForgeFake, Kind};
use crate::support::rollout::{
    analysis_template, blue_green_rollout, distinct, indented, rollout_services, show,
    sluice_commits, BLUE_GREEN_ANALYSES, OUTPUT, STATUS_FILE, SWITCHED,
};
use crate::support::{run_sluice, Schemas, World};

const ROLLOUT_FILE: &str = "apps/podinfo/rollout.yaml";
const STABLE_FILE: &str = "clusters/prod/podinfo/podinfo-stable.yaml";
const CANARY_WORKLOAD: &str = "clusters/prod/podinfo/podinfo-canary.yaml";
const SERVICES_FILE: &str = "clusters/prod/podinfo/services.yaml";

fn world(extra: &str, files: &[(&str, String)]) -> World {
    let mut all = vec![
        (ROLLOUT_FILE, blue_green_rollout("6.7.0", extra)),
        (
            "apps/podinfo/services.yaml",
            rollout_services(["podinfo-active", "podinfo-preview"]),
        ),
    ];
    all.extend(files.iter().map(|(f, t)| (*f, t.clone())));
    let pairs: Vec<(&str, &str)> = all.iter().map(|(f, t)| (*f, t.as_str())).collect();
    World::served(&pairs).building(OUTPUT)
}

fn docs(bare: &std::path::Path, sha: &str, file: &str) -> Vec<Json> {
    serde_saphyr::from_multiple(&show(bare, sha, file)).unwrap()
}

/// The role label each Service selects, by Service name, at `at` (a commit or branch).
fn selected(bare: &std::path::Path, at: &str) -> Vec<(String, String)> {
    docs(bare, at, SERVICES_FILE)
        .iter()
        .map(|s| {
            assert_eq!(s["spec"]["selector"]["app"], "podinfo", "{at}: {s}");
            (
                s["metadata"]["name"].as_str().unwrap().to_string(),
                s["spec"]["selector"]["sluice.dev/rollout-role"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
}

/// Every sluice commit: every output document schema-valid; the activeService on the stable
/// workload until the switch (all weight to the canary) and on the canary after it; the
/// previewService on the canary while a rollout runs; the preview with 2 pods before the
/// switch and 5 after. Returns the weights, in order.
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
            for doc in docs(&w.bare, &sha, file) {
                schemas.assert_valid(&doc, &format!("{sha} {file}"));
            }
        }
        let running = ["Progressing", "WaitingApproval", "Promoting", "Finalising"]
            .contains(&status["phase"].as_str().unwrap())
            || canary_w > 0;
        let role = |canary: bool| if canary { "canary" } else { "stable" }.to_string();
        assert_eq!(
            selected(&w.bare, &sha),
            [
                ("podinfo-active".to_string(), role(canary_w == 100)),
                ("podinfo-preview".to_string(), role(running)),
            ],
            "{sha}: {status}"
        );
        let canary = docs(&w.bare, &sha, CANARY_WORKLOAD).remove(0);
        let replicas = match (running, canary_w) {
            (false, _) => 0,
            (true, 100) => 5,
            (true, _) => 2,
        };
        assert_eq!(canary["spec"]["replicas"], replicas, "{sha}: {status}");
        let weights = format!("primary={stable_w} canary={canary_w}");
        assert_eq!(trailer, weights, "{sha}: trailer and status agree");
        found.push(weights);
    }
    found
}

/// A blue/green Rollout with both analyses on a real Prometheus (`condition` judging `up`,
/// which is 1) through the live observer, from 6.7.0 to 6.7.1 until it reaches `phase`.
fn analysed(condition: &str, phase: Phase, check: impl FnOnce(&World)) {
    analysed_with(condition, condition, phase, check);
}

/// [`analysed`] with the postPromotionAnalysis on its own template `post-up`, judged by
/// `post`.
fn analysed_with(condition: &str, post: &str, phase: Phase, check: impl FnOnce(&World)) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scraped = rt.block_on(crate::support::prometheus::Scraped::start_instant(
        crate::support::prometheus::osm_exposition,
    ));
    let (pre, post_analysis) = BLUE_GREEN_ANALYSES
        .split_once("    postPromotionAnalysis:")
        .unwrap();
    let extra = indented(&format!(
        "{pre}    postPromotionAnalysis:{}",
        post_analysis.replace("canary-up", "post-up")
    ));
    let post_template = analysis_template(post).replace("canary-up", "post-up");
    let mut w = world(
        &extra,
        &[
            (".sluice/config.yaml", scraped.prom.repo_config()),
            ("apps/podinfo/analysis.yaml", analysis_template(condition)),
            ("apps/podinfo/post-analysis.yaml", post_template),
        ],
    );
    let runtime = crate::support::runtime();
    let live = sluice::observer::Live::new(runtime);
    w.until_with(&live, runtime, Phase::Initialized);
    w.human_writes(
        ROLLOUT_FILE,
        &blue_green_rollout("6.7.1", &extra),
        "podinfo: 6.7.1",
    );
    w.until_with(&live, runtime, phase);
    crate::support::rollout::kustomize_builds(&w.bare, OUTPUT);
    check(&w);
    drop(scraped);
}

/// The `Sluice-Check` trailers of every commit on main whose message has `grep`, newest first.
fn checks(bare: &std::path::Path, grep: &str) -> Vec<String> {
    crate::support::judge::trailers_of_commits(bare, "Sluice-Check", Some(grep))
}

/// The stable workload still runs 6.7.0, the last commit rolled back for `metric`, and audit
/// finds every recorded check what its value gives.
fn aborted_on_the_old_pods(w: &World, metric: &str) {
    assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.0"));
    let subject = crate::support::git(&w.bare, &["log", "-1", "--format=%s", "main"]);
    let rollback = format!("roll back: analysis run Failed: metric {metric} Failed");
    assert!(subject.contains(&rollback), "{subject}");
    crate::support::audit::clean(&w.bare);
}

#[test]
fn blue_green_rollout_previews_passes_both_analyses_switches_and_promotes() {
    analysed("result[0] >= 1", Phase::Succeeded, |w| {
        assert_eq!(distinct(check_every_commit(w)), SWITCHED);
        // count 2 each: the first measurement holds (recorded), the second ends the gate.
        for metric in ["canary-up", "post-up"] {
            let all = checks(&w.bare, metric);
            assert!(all.len() >= 2, "{metric} measured twice: {all:?}");
            let pass = format!("{metric}=1 pass");
            assert!(all.iter().all(|c| *c == pass), "{all:?}");
        }
        assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
        crate::support::audit::clean(&w.bare);
    });
}

#[test]
fn blue_green_rollout_with_a_failing_pre_promotion_analysis_aborts_on_the_old_pods() {
    analysed("result[0] >= 2", Phase::Failed, |w| {
        let weights = check_every_commit(w);
        assert!(
            !weights.iter().any(|w| w.ends_with("canary=100")),
            "the activeService never switched: {weights:?}"
        );
        assert_eq!(
            selected(&w.bare, "main"),
            [
                ("podinfo-active".to_string(), "stable".to_string()),
                ("podinfo-preview".to_string(), "stable".to_string()),
            ]
        );
        aborted_on_the_old_pods(w, "canary-up");
    });
}

#[test]
fn blue_green_rollout_with_a_failing_post_promotion_analysis_switches_back_to_the_old_pods() {
    analysed_with("result[0] >= 1", "result[0] >= 2", Phase::Failed, |w| {
        let weights = check_every_commit(w);
        assert!(
            weights.iter().any(|w| w == "primary=0 canary=100"),
            "the activeService switched before the analysis: {weights:?}"
        );
        assert_eq!(
            weights.last().map(String::as_str),
            Some("primary=100 canary=0")
        );
        assert_eq!(
            selected(&w.bare, "main")[0],
            ("podinfo-active".to_string(), "stable".to_string())
        );
        // The old pods still run on the stable workload: the promotion never started.
        aborted_on_the_old_pods(w, "post-up");
    });
}

#[test]
fn blue_green_rollout_without_auto_promotion_opens_an_approval_pull_request_fake_forge() {
    let fake = ForgeFake::start(Kind::GitHub);
    let config = format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\n{}",
        fake.settings()
    );
    let extra = "      autoPromotionEnabled: false\n";
    let mut w = world(extra, &[(".sluice/config.yaml", config)]);
    w.until(Phase::Initialized);
    w.human_writes(
        ROLLOUT_FILE,
        &blue_green_rollout("6.7.1", extra),
        "podinfo: 6.7.1",
    );
    w.until(Phase::WaitingApproval);
    w.ticks(2);
    assert_eq!(fake.count(), 1, "one pull request");
    let pr = fake.first();
    assert!(pr.head.starts_with("sluice/prod/podinfo/"), "{pr:?}");
    // Main previews; the branch switches the activeService to the new pods.
    assert_eq!(
        selected(&w.bare, "main"),
        [
            ("podinfo-active".to_string(), "stable".to_string()),
            ("podinfo-preview".to_string(), "canary".to_string()),
        ]
    );
    assert_eq!(
        selected(&w.bare, &pr.head)[0],
        ("podinfo-active".to_string(), "canary".to_string())
    );
    crate::support::merge_approval(w.human(), &pr.head, "merge");
    fake.set(1, false, true);
    w.until(Phase::Succeeded);
    assert_eq!(distinct(check_every_commit(&w)), SWITCHED);
    assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
    assert_eq!(fake.count(), 1, "one approval for the one promotion");
}

#[test]
fn plan_lists_blue_green_steps() {
    let dir = crate::support::repo(&[
        (
            ROLLOUT_FILE,
            &blue_green_rollout("6.7.0", &indented(BLUE_GREEN_ANALYSES)),
        ),
        (
            "apps/podinfo/services.yaml",
            &rollout_services(["podinfo-active", "podinfo-preview"]),
        ),
        (
            "apps/podinfo/analysis.yaml",
            &analysis_template("result[0] >= 1"),
        ),
    ]);
    let (code, out, err) = run_sluice(&["plan", &dir.path().display().to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("rollout steps:      preview podinfo-preview, prePromotionAnalysis canary-up, pause 60s, switch podinfo-active, postPromotionAnalysis canary-up"),
        "{out}"
    );
}
