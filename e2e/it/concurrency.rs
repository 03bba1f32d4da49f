//! `maxConcurrentCanaries`: canaries triggered together by one commit progress at most N at a
//! time, the others wait in order and say why; checked from the trailers of every commit on
//! the branch, through `sluice reconcile` runs on a stepped clock against a bare remote.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value as Json;

use crate::support::canary::shop_httproute;
use crate::support::trailers::{groups, sluice_commits};
use crate::support::{human_clone, run_sluice, seeded_remote, str_pairs, Stepped};

/// A route-only canary `NS/NAME` whose revision (its spec's `routeOnly.revision`, what a new
/// image is for a route-only canary) is `revision`, with a `sluice.dev/priority` when given.
fn canary(ns: &str, name: &str, revision: &str, priority: Option<i64>) -> String {
    let text = shop_httproute(
        name,
        revision,
        "",
        "interval: 1s, stepWeights: [10, 30, 60]",
    )
    .replace("namespace: shop", &format!("namespace: {ns}"))
    .replace("clusters/shop/", &format!("clusters/{ns}/"));
    match priority {
        Some(p) => text.replace(
            &format!("namespace: {ns}}}"),
            &format!("namespace: {ns}, annotations: {{sluice.dev/priority: \"{p}\"}}}}"),
        ),
        None => text,
    }
}

const SETTINGS: &str = ".sluice/config.yaml";

/// The phases a commit's trailers leave each canary in, commit after commit: for each sluice
/// commit on main, oldest first, its id and the canaries then progressing (their last
/// `Sluice-Phase` is an analysis phase).
fn progressing_at_each_commit(bare: &Path) -> Vec<(String, Vec<String>)> {
    let mut phases: BTreeMap<String, String> = BTreeMap::new();
    let mut out = Vec::new();
    for (sha, trailers) in sluice_commits(bare) {
        for (id, group) in groups(&trailers) {
            if let Some(phase) = group.get("Sluice-Phase") {
                phases.insert(id, phase.clone());
            }
        }
        let running = phases
            .iter()
            .filter(|(_, p)| {
                matches!(
                    p.as_str(),
                    "Progressing" | "WaitingApproval" | "Promoting" | "Finalising"
                )
            })
            .map(|(id, _)| id.clone())
            .collect();
        out.push((sha, running));
    }
    out
}

/// One `sluice reconcile` of `bare` at `clock`'s time, then the status rows.
fn reconcile_once(bare: &Path, work: &Path, clock: &Stepped) -> Json {
    crate::support::reconcile(bare, work, &[clock.env()]);
    let dir = bare.display().to_string();
    let (code, json, err) = run_sluice(&["status", "--dir", &dir, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&json).unwrap()
}

/// Runs [`reconcile_once`], the clock one second on each run, until every canary of `ids` is
/// Succeeded on v2 (at most `runs` runs); returns the status rows seen after each run.
fn reconcile_until_done(
    bare: &Path,
    work: &Path,
    clock: &Stepped,
    runs: usize,
    ids: &[&str],
) -> Vec<Json> {
    let mut seen = Vec::new();
    for _ in 0..runs {
        clock.jump(Duration::from_millis(1100));
        let rows = reconcile_once(bare, work, clock);
        let done = ids
            .iter()
            .all(|id| row(&rows, id)["phase"] == "Succeeded" && row(&rows, id)["revision"] == "v2");
        seen.push(rows);
        if done {
            return seen;
        }
    }
    panic!("not every canary succeeded on v2 in {runs} runs: {seen:#?}");
}

fn row<'a>(rows: &'a Json, id: &str) -> &'a Json {
    let (ns, name) = id.split_once('/').unwrap();
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["namespace"] == ns && r["name"] == name)
        .unwrap_or_else(|| panic!("no row for {id}: {rows:#}"))
}

/// Seeds a remote with `canaries` (namespace, name, priority) at v1 and `settings`,
/// initializes them, then bumps all of them to v2 in one human commit.
fn triggered_together(
    tmp: &Path,
    settings: &str,
    canaries: &[(&str, &str, Option<i64>)],
) -> (std::path::PathBuf, Stepped) {
    let mut files: Vec<(String, String)> = canaries
        .iter()
        .map(|(ns, name, p)| {
            (
                format!("apps/{ns}/{name}/canary.yaml"),
                canary(ns, name, "v1", *p),
            )
        })
        .collect();
    files.push((SETTINGS.to_string(), settings.to_string()));
    let bare = seeded_remote(tmp, &str_pairs(&files));
    let clock = Stepped::default();
    let ids: Vec<String> = canaries
        .iter()
        .map(|(ns, n, _)| format!("{ns}/{n}"))
        .collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let work = tmp.join("w");
    // Initialized on v1 (the first run), nothing to start yet.
    let rows = reconcile_once(&bare, &work, &clock);
    for id in &ids {
        assert_eq!(row(&rows, id)["revision"], "v1", "{rows:#}");
    }
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .all(|r| r.get("held").is_none()),
        "{rows:#}"
    );
    let human = human_clone(&bare.display().to_string(), &tmp.join("human"));
    for (ns, name, p) in canaries {
        std::fs::write(
            human.join(format!("apps/{ns}/{name}/canary.yaml")),
            canary(ns, name, "v2", *p),
        )
        .unwrap();
    }
    crate::support::git(&human, &["commit", "-q", "-am", "every canary to v2"]);
    crate::support::git(&human, &["push", "-q", "origin", "HEAD:main"]);
    (bare, clock)
}

#[test]
fn five_canaries_triggered_at_once_progress_two_at_a_time_in_priority_order() {
    let tmp = tempfile::tempdir().unwrap();
    let canaries = [
        ("shop", "app0", None),
        ("shop", "app1", None),
        ("shop", "app2", None),
        ("shop", "app3", None),
        // Named last, first by priority.
        ("shop", "app4", Some(10)),
    ];
    let settings = "apiVersion: sluice.dev/v1alpha1\nkind: Config\nmaxConcurrentCanaries: 2\n";
    let (bare, clock) = triggered_together(tmp.path(), settings, &canaries);
    let ids = [
        "shop/app0",
        "shop/app1",
        "shop/app2",
        "shop/app3",
        "shop/app4",
    ];
    let seen = reconcile_until_done(&bare, &tmp.path().join("w"), &clock, 200, &ids);

    // The first run after the bump: app4 (priority) and app0 (first by name) start, the
    // others wait and say why.
    let first = &seen[0];
    for id in ["shop/app4", "shop/app0"] {
        assert_eq!(row(first, id)["phase"], "Progressing", "{first:#}");
        assert!(row(first, id).get("held").is_none(), "{first:#}");
    }
    for id in ["shop/app1", "shop/app2", "shop/app3"] {
        let r = row(first, id);
        assert_eq!(r["phase"], "Initialized", "{r:#}");
        assert_eq!(r["held"]["kind"], "queue", "{r:#}");
        assert_eq!(r["held"]["by"], "maxConcurrentCanaries", "{r:#}");
        assert_eq!(
            r["held"]["why"], "waiting: 2 of 2 progressing: shop/app0, shop/app4",
            "{r:#}"
        );
    }

    // From the trailers of every commit: never more than two progressing, and two at once
    // at some commit (the limit is used, not just kept).
    let history = progressing_at_each_commit(&bare);
    let most = history.iter().map(|(_, r)| r.len()).max().unwrap();
    for (sha, running) in &history {
        assert!(running.len() <= 2, "{sha}: {running:?} progress at once");
    }
    assert_eq!(most, 2, "{history:?}");
    // app1 waited its turn: it started only after one of the first two finished.
    let started = |id: &str| {
        history
            .iter()
            .position(|(_, r)| r.iter().any(|x| x == id))
            .unwrap()
    };
    assert!(started("shop/app1") > started("shop/app0"));
    // Every wait is a commit audit replays; the history audits clean.
    crate::support::audit::clean(&bare);
}

#[test]
fn a_namespace_limit_holds_its_namespace_while_others_progress() {
    let tmp = tempfile::tempdir().unwrap();
    let canaries = [
        ("shop", "a", None),
        ("shop", "b", None),
        ("dev", "c", None),
        ("dev", "d", None),
    ];
    let settings = "apiVersion: sluice.dev/v1alpha1\nkind: Config\nnamespaces:\n  shop:\n    maxConcurrentCanaries: 1\n";
    let (bare, clock) = triggered_together(tmp.path(), settings, &canaries);
    let ids = ["shop/a", "shop/b", "dev/c", "dev/d"];
    let seen = reconcile_until_done(&bare, &tmp.path().join("w"), &clock, 200, &ids);
    let first = &seen[0];
    assert_eq!(
        row(first, "shop/b")["held"]["why"],
        "waiting: 1 of 1 progressing in namespace shop: shop/a",
        "{first:#}"
    );
    for id in ["dev/c", "dev/d"] {
        assert!(row(first, id).get("held").is_none(), "{first:#}");
    }
    let history = progressing_at_each_commit(&bare);
    let in_shop = |r: &Vec<String>| r.iter().filter(|id| id.starts_with("shop/")).count();
    for (sha, running) in &history {
        assert!(in_shop(running) <= 1, "{sha}: {running:?}");
    }
    // The other namespace is not limited: both its canaries progressed together.
    assert!(
        history
            .iter()
            .any(|(_, r)| r.iter().filter(|id| id.starts_with("dev/")).count() == 2),
        "{history:?}"
    );
    crate::support::audit::clean(&bare);
}

#[test]
fn audit_finds_a_history_where_more_canaries_progressed_than_the_limit_allows() {
    let tmp = tempfile::tempdir().unwrap();
    let canaries = [
        ("shop", "app0", None),
        ("shop", "app1", None),
        ("shop", "app2", None),
    ];
    // Rolled out without a limit: all three progress at once.
    let (bare, clock) = triggered_together(
        tmp.path(),
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\n",
        &canaries,
    );
    let ids = ["shop/app0", "shop/app1", "shop/app2"];
    reconcile_until_done(&bare, &tmp.path().join("w"), &clock, 200, &ids);
    crate::support::audit::clean(&bare);
    // The same history, with `maxConcurrentCanaries: 2` in the settings of every commit:
    // what a sluice that ignored the limit would have written.
    let forged = tmp.path().join("forged.git");
    crate::support::git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "--bare",
            &bare.display().to_string(),
            forged.to_str().unwrap(),
        ],
    );
    let limited = "apiVersion: sluice.dev/v1alpha1\nkind: Config\nmaxConcurrentCanaries: 2\n";
    let blob_file = tmp.path().join("limited.yaml");
    std::fs::write(&blob_file, limited).unwrap();
    let blob = crate::support::git(&forged, &["hash-object", "-w", blob_file.to_str().unwrap()]);
    let filter = format!(
        "git update-index --add --cacheinfo 100644,{},{SETTINGS}",
        blob.trim()
    );
    crate::support::run_ok(
        std::process::Command::new("git")
            .current_dir(&forged)
            .env("FILTER_BRANCH_SQUELCH_WARNING", "1")
            .args([
                "filter-branch",
                "-f",
                "--index-filter",
                &filter,
                "--",
                "main",
            ]),
    );
    let (code, report) = crate::support::audit::audit(&forged);
    assert_eq!(code, 1, "{report:#}");
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{report:#}");
    let f = &findings[0];
    assert_eq!(f["kind"], "concurrency", "{f:#}");
    assert_eq!(f["file"], SETTINGS, "{f:#}");
    assert_eq!(
        f["message"],
        format!(
            "{} starts while 3 canaries progress at once, maxConcurrentCanaries is 2: shop/app0, shop/app1, shop/app2",
            f["canary"].as_str().unwrap()
        ),
        "{f:#}"
    );
}
