//! `sluice audit` against commits that claim to be sluice's: a human commit that changes an
//! owned file and carries only `Sluice-Canary`, no `Sluice-Replay`, a record that says
//! `"by":"other"`, a forged commit brought in by a `--no-ff` merge, an unknown canary as the
//! first trailer group. Each is reported (`unverifiable`) at the commit that brought the change
//! to main. And the commits sluice makes outside `decide` (record updates, reverts of deleted
//! canaries, drift holds, restores and resumes) are verified, not "not replayable".

use std::path::Path;

use serde_json::Value as Json;
use sluice::core::status::Phase;

use crate::support::audit::{audit, found_commits, line};
use crate::support::audit::{running, web_route};
use crate::support::canary::podinfo;
use crate::support::rollout::{World, CANARY_FILE, FAILING, ROUTE_FILE, STEPS};
use crate::support::{git, show};

/// The route at main with a hand edit (any change of an owned file will do).
fn all_to_canary(w: &World, route: &str) -> String {
    let text = show(&w.bare, "main", route);
    format!("{text}# edited by hand: more traffic to the canary\n")
}

/// The full message of the newest commit on main.
fn last_message(w: &World) -> String {
    git(&w.bare, &["log", "-1", "--format=%B", "main"])
}

/// Audits main and requires a finding of `kind` at `commit`.
fn reported(w: &World, commit: &str, kind: &str) -> Json {
    let (code, report) = audit(&w.bare);
    assert_eq!(code, 1, "{report:#}");
    assert!(
        found_commits(&report).contains(&commit.to_string()),
        "{commit} reported: {report:#}"
    );
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["commit"] == commit && f["kind"] == kind),
        "a {kind} finding at {commit}: {report:#}"
    );
    report
}

fn head(w: &World) -> String {
    line(&w.bare).pop().unwrap().0
}

/// A human commit on main that edits `shop/web`'s route with `message`: its id.
fn forged(w: &World, message: &str) -> String {
    let route = web_route(w);
    let edited = all_to_canary(w, &route);
    w.human_writes(&route, &edited, message);
    head(w)
}

#[test]
fn a_human_commit_carrying_only_a_canary_trailer_is_unverifiable() {
    let w = running();
    let commit = forged(&w, "web: more traffic\n\nSluice-Canary: shop/web\n");
    let report = reported(&w, &commit, "unverifiable");
    assert_eq!(report["notReplayable"], Json::Array(vec![]), "{report:#}");
}

#[test]
fn a_sluice_message_without_its_replay_record_is_unverifiable() {
    let w = running();
    let message: String = last_message(&w)
        .lines()
        .filter(|l| !l.starts_with("Sluice-Replay: "))
        .map(|l| format!("{l}\n"))
        .collect();
    let commit = forged(&w, &message);
    let report = reported(&w, &commit, "unverifiable");
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "unverifiable")
        .unwrap();
    assert!(
        !finding["message"].as_str().unwrap().contains("format 1"),
        "a current commit is not called format 1: {report:#}"
    );
}

#[test]
fn a_replay_record_that_says_by_other_is_unverifiable() {
    let w = running();
    let commit = forged(
        &w,
        "web: more traffic\n\nSluice-Canary: shop/web\nSluice-Replay: {\"format\":4,\"now\":\"2026-01-01T00:00:00Z\",\"by\":\"other\",\"what\":\"trust me\"}\n",
    );
    reported(&w, &commit, "unverifiable");
}

#[test]
fn a_forged_commit_merged_with_no_ff_is_reported_at_the_merge() {
    let w = running();
    let route = web_route(&w);
    let edited = all_to_canary(&w, &route);
    let human = w.human();
    git(human, &["pull", "-q", "origin", "main"]);
    git(human, &["checkout", "-q", "-b", "side"]);
    std::fs::write(human.join(&route), &edited).unwrap();
    git(human, &["add", &route]);
    git(
        human,
        &[
            "commit",
            "-q",
            "-m",
            "web: more traffic\n\nSluice-Canary: shop/web\n",
        ],
    );
    git(human, &["checkout", "-q", "main"]);
    git(
        human,
        &["merge", "-q", "--no-ff", "-m", "Merge side", "side"],
    );
    git(human, &["push", "-q", "origin", "HEAD:main"]);
    let merge = head(&w);
    assert_eq!(
        git(&w.bare, &["rev-list", "--parents", "-1", &merge])
            .split_whitespace()
            .count(),
        3,
        "a merge commit"
    );
    let report = reported(&w, &merge, "unverifiable");
    assert_eq!(
        found_commits(&report),
        vec![merge],
        "reported at the merge only: {report:#}"
    );
}

#[test]
fn an_unknown_canary_as_the_first_trailer_group_does_not_hide_the_next() {
    let w = running();
    let message = last_message(&w).replacen(
        "Sluice-Canary: shop/web",
        "Sluice-Canary: shop/ghost\nSluice-Canary: shop/web",
        1,
    );
    assert!(message.contains("shop/ghost"), "{message}");
    let commit = forged(&w, &message);
    reported(&w, &commit, "unverifiable");
}

/// An SMI (osm) Flagger canary of `prod/podinfo`, with `extra` under `spec:`.
fn osm(extra: &str, analysis: &str) -> String {
    podinfo().provider("osm").spec(extra).yaml(analysis)
}

/// The audit of a history with nothing to report, at least `replayed` decisions replayed.
fn verified(bare: &Path, replayed: u64) {
    let (code, report) = audit(bare);
    assert_eq!(report["findings"], Json::Array(vec![]), "{report:#}");
    assert_eq!(report["notReplayable"], Json::Array(vec![]), "{report:#}");
    assert!(
        report["replayed"].as_u64().unwrap() >= replayed,
        "{report:#}"
    );
    assert_eq!(code, 0);
}

#[test]
fn record_updates_and_reverts_are_verified_by_audit() {
    let mut w = World::with_files(&osm("", FAILING), &[]);
    w.until(Phase::Initialized);
    w.human_writes(
        CANARY_FILE,
        &osm("  revertOnDeletion: true\n", FAILING),
        "podinfo: revert on deletion",
    );
    let report = w.tick();
    assert_eq!(report.commits, 1, "a record update: {report:?}");
    assert!(last_message(&w).contains("revertOnDeletion recorded"));
    verified(&w.bare, 2);
    w.human_removes(CANARY_FILE, "podinfo: no more canary");
    let report = w.tick();
    assert_eq!(report.commits, 1, "a revert: {report:?}");
    assert!(last_message(&w).contains("output reverted"));
    verified(&w.bare, 3);
}

/// The audit of a history whose only findings are the human edits `edits`: every sluice
/// commit verified, none "not replayable".
fn only_edits_reported(bare: &Path, edits: &[String]) {
    let (code, report) = audit(bare);
    assert_eq!(found_commits(&report), edits, "{report:#}");
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["kind"] == "foreign"),
        "{report:#}"
    );
    assert_eq!(report["notReplayable"], Json::Array(vec![]), "{report:#}");
    assert_eq!(code, 1);
}

#[test]
fn drift_holds_and_resumes_are_verified_by_audit() {
    let mut w = World::with_files(&osm("", STEPS), &[]);
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::Progressing);
    let route = show(&w.bare, "main", ROUTE_FILE);
    let edited = all_to_canary(&w, ROUTE_FILE);
    w.human_writes(ROUTE_FILE, &edited, "podinfo: all traffic to the canary");
    let edit = head(&w);
    w.ticks(1);
    assert!(last_message(&w).contains("Sluice-Drift: "), "a hold");
    only_edits_reported(&w.bare, std::slice::from_ref(&edit));
    w.human_writes(ROUTE_FILE, &route, "podinfo: put the route back");
    let back = head(&w);
    w.ticks(1);
    assert!(last_message(&w).contains("Resumed"), "{}", last_message(&w));
    only_edits_reported(&w.bare, &[edit, back]);
}

#[test]
fn drift_restores_are_verified_by_audit() {
    let config = "apiVersion: sluice.dev/v1alpha1\nkind: Config\ndrift: restore\n";
    let mut w = World::with_files(&osm("", STEPS), &[(".sluice/config.yaml", config)]);
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::Progressing);
    let edited = all_to_canary(&w, ROUTE_FILE);
    w.human_writes(ROUTE_FILE, &edited, "podinfo: all traffic to the canary");
    let edit = head(&w);
    w.ticks(1);
    assert!(last_message(&w).contains("Sluice-Restored: "), "a restore");
    only_edits_reported(&w.bare, &[edit]);
}
