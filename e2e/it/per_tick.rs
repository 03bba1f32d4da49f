//! `commits: perTick`: many canaries through a real `git daemon`, each tick's decisions in one
//! commit with a trailer group per canary, read back by git and by `sluice history`.

use std::process::Command;
use std::time::Duration;

use crate::support::served_clone;
use jiff::Timestamp;
use serde_json::Value as Json;
use sluice::core::status::Phase;
use sluice::observer::Offline;
use sluice::tick::tick;

use crate::support::canary::shop_httproute;
use crate::support::rollout::ROUTE_ONLY_WEIGHTS as EXPECTED_WEIGHTS;
use crate::support::trailers::{groups, sluice_commits};
use crate::support::{git, human_clone, seeded_remote, show, str_pairs, Schemas};

/// Enough canaries that one tick's commit holds more files than the loose-object path takes.
const CANARIES: usize = 40;

fn canary(i: usize, revision: &str) -> String {
    shop_httproute(
        &format!("app{i}"),
        revision,
        "",
        "interval: 1s, stepWeights: [10, 30, 60]",
    )
}

#[test]
fn per_tick_commits_hold_every_decision_of_a_tick_with_a_trailer_group_per_canary() {
    let tmp = tempfile::tempdir().unwrap();
    let texts: Vec<(String, String)> = (0..CANARIES)
        .map(|i| (format!("apps/app{i}/canary.yaml"), canary(i, "v1")))
        .chain([
            (
                ".sluice/config.yaml".to_string(),
                "apiVersion: sluice.dev/v1alpha1\nkind: Config\ncommits: perTick\n".to_string(),
            ),
            // A canary whose output holds a file sluice did not write: it alone is refused.
            (
                "apps/odd/canary.yaml".to_string(),
                canary(999, "v1").replace("app999", "odd"),
            ),
            (
                "clusters/shop/odd/route.yaml".to_string(),
                "kind: ConfigMap # written by hand\n".to_string(),
            ),
        ])
        .collect();
    let bare = seeded_remote(tmp.path(), &str_pairs(&texts));
    let (_daemon, url, mut repo) = served_clone(tmp.path());
    let observer = Offline;
    let ctx = crate::support::rollout::loop_context(&observer);
    let t0 = Timestamp::now();
    let first = tick(&mut repo, &ctx, t0).unwrap();
    assert_eq!(first.commits, 1, "one commit for {CANARIES} canaries");
    // Refused at load: its output folder holds a file sluice did not generate.
    assert!(first.outcomes.iter().all(|o| o.id != "shop/odd"));
    assert!(
        first.spec_errors.iter().any(|e| e.to_string().contains(
            "output folder clusters/shop/odd already holds clusters/shop/odd/route.yaml"
        )),
        "{:?}",
        first.spec_errors
    );
    assert_eq!(
        first
            .outcomes
            .iter()
            .filter(|o| o.committed.is_some())
            .count(),
        CANARIES
    );

    let human = human_clone(&url, &tmp.path().join("human"));
    for i in 0..CANARIES {
        std::fs::write(
            human.join(format!("apps/app{i}/canary.yaml")),
            canary(i, "v2"),
        )
        .unwrap();
    }
    git(&human, &["commit", "-q", "-am", "roll out v2 everywhere"]);
    git(&human, &["push", "-q", "origin", "HEAD:main"]);

    let mut now = t0 + Duration::from_secs(1);
    for _ in 0..50 {
        let report = tick(&mut repo, &ctx, now).unwrap();
        assert!(report.commits <= 1, "{report:?}");
        let done = report
            .outcomes
            .iter()
            .filter(|o| o.id != "shop/odd")
            .all(|o| o.phase == Some(Phase::Succeeded));
        if done && report.commits == 1 {
            break;
        }
        now = report.wake_at().unwrap_or(now + Duration::from_secs(1));
    }

    let commits = sluice_commits(&bare);
    assert_eq!(commits.len(), EXPECTED_WEIGHTS.len(), "one commit per tick");
    let mut schemas = Schemas::default();
    for (step, (sha, trailers)) in commits.iter().enumerate() {
        let groups = groups(trailers);
        assert_eq!(groups.len(), CANARIES, "{sha}: a group per canary");
        assert!(!groups.contains_key("shop/odd"));
        // Every canary's group, status file and route agree at every commit.
        for i in (0..CANARIES).step_by(7) {
            let group = &groups[&format!("shop/app{i}")];
            assert_eq!(group["Sluice-Weights"], EXPECTED_WEIGHTS[step], "{sha}");
            assert!(
                group["Sluice-Decision"].starts_with(&format!("app{i}: ")),
                "{group:?}"
            );
            let status: Json = serde_saphyr::from_str(&show(
                &bare,
                sha,
                &format!(".sluice/status/shop/app{i}.yaml"),
            ))
            .unwrap();
            let route: Json = serde_saphyr::from_str(&show(
                &bare,
                sha,
                &format!("clusters/shop/app{i}/route.yaml"),
            ))
            .unwrap();
            assert_eq!(schemas.errors(&route), Vec::<String>::new(), "{sha}");
            let stable = status["stableService"].as_str().unwrap();
            let weight = |name: &str| {
                route["spec"]["rules"][0]["backendRefs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["name"] == name)
                    .and_then(|r| r["weight"].as_u64())
                    .unwrap()
            };
            assert_eq!(
                format!(
                    "primary={} canary={}",
                    weight(stable),
                    status["canaryWeight"]
                ),
                group["Sluice-Weights"],
                "{sha}: route, status and trailers agree"
            );
        }
    }
    assert!(
        show(&bare, "main", "clusters/shop/odd/route.yaml").contains("written by hand"),
        "the refused canary's file is untouched"
    );
    git(&bare, &["fsck", "--strict"]);

    // `sluice history` reads each canary's own story out of the shared commits.
    let out = crate::support::run_ok(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["history", "shop/app3", "--output", "json", "--dir"])
            .arg(&bare),
    );
    let history: Json = serde_json::from_slice(&out.stdout).unwrap();
    let entries = history.as_array().unwrap();
    let weights: Vec<&str> = entries
        .iter()
        .map(|e| e["weights"].as_str().unwrap())
        .collect();
    assert_eq!(weights, EXPECTED_WEIGHTS);
    assert_eq!(
        entries[3]["reason"], "app3: advance canary weight 10 -> 30 (step 2/3)",
        "{history:#}"
    );
    assert_eq!(entries[7]["phase"], "Succeeded");
}
