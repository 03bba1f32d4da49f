//! Manual operations with the real binary against a real bare repo: each is a commit with the
//! operator in its trailers, refused when it does not fit the phase, and safe against a
//! running `sluice run`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value as Json;

use crate::support::{
    git, git_ok, human_clone, human_commit, operate_as_ada, route_only_web, run_sluice,
    seeded_remote, World,
};

const FILE: &str = "apps/web/canary.yaml";
const STATUS: &str = ".sluice/status/shop/web.yaml";

fn op(bare: &Path, verb: &str, reason: &str) -> (i32, String, String) {
    operate_as_ada(bare, verb, "shop/web", reason)
}

fn status(bare: &Path) -> Json {
    serde_saphyr::from_str(&git(bare, &["show", &format!("main:{STATUS}")])).unwrap()
}

/// `shop/web` (route-only, walking `steps`) initialized at v1, then v2 committed by a human.
fn world(steps: &str) -> World {
    let mut w = World::local(&[(FILE, &route_only_web("v1", steps))]);
    w.tick();
    w.human_writes(FILE, &route_only_web("v2", steps), "web: v2");
    w
}

#[test]
fn approve_continues_a_step_waiting_for_approval_and_records_the_operator() {
    let mut w = world("[{weight: 20, pause: {}}, {weight: 60}]");
    w.ticks(4);
    assert_eq!(status(&w.bare)["phase"], "WaitingApproval");
    let (code, out, err) = op(&w.bare, "approve", "dashboards look fine");
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("web: advance canary weight 20 -> 60 (step 2/2)"),
        "{out}"
    );
    let s = status(&w.bare);
    assert_eq!(
        (s["phase"].as_str(), s["canaryWeight"].as_u64()),
        (Some("Progressing"), Some(60))
    );
    let trailers = git(&w.bare, &["log", "-1", "--format=%an|%(trailers:key=Sluice-Operator,valueonly,separator=)|%(trailers:key=Sluice-Reason,valueonly,separator=)", "main"]);
    assert_eq!(
        trailers.trim(),
        "Ada Ops|Ada Ops <ada@example.com>|dashboards look fine"
    );
    // A command-line approval names its approver (the --as identity) and says `cli`.
    let approval = git(&w.bare, &["log", "-1", "--format=%(trailers:key=Sluice-Approved-By,valueonly,separator=)|%(trailers:key=Sluice-Approval,valueonly,separator=)", "main"]);
    assert_eq!(approval.trim(), "Ada Ops <ada@example.com>|cli");
    w.now = Timestamp::now();
    w.ticks(6);
    assert_eq!(status(&w.bare)["phase"], "Succeeded");
    let (code, out, _) = run_sluice(&[
        "history",
        "shop/web",
        "--dir",
        &w.bare.display().to_string(),
        "-o",
        "json",
    ]);
    assert_eq!(code, 0);
    let h: Json = serde_json::from_str(&out).unwrap();
    assert!(
        h.as_array()
            .unwrap()
            .iter()
            .any(|e| e["operator"] == "Ada Ops <ada@example.com>"
                && e["approvedBy"] == "Ada Ops <ada@example.com>"
                && e["approval"] == "cli"
                && e["reason"]
                    .as_str()
                    .unwrap()
                    .contains("dashboards look fine")),
        "{out}"
    );
}

#[test]
fn operations_that_do_not_fit_the_phase_are_refused_with_a_reason() {
    let mut w = world("[{weight: 50}]");
    let (code, _, err) = op(&w.bare, "approve", "x");
    assert_eq!(code, 1);
    assert_eq!(err.trim(), "web is Initialized; nothing to approve");
    w.ticks(10);
    assert_eq!(status(&w.bare)["phase"], "Succeeded");
    let head = git(&w.bare, &["rev-parse", "main"]);
    let (code, _, err) = op(&w.bare, "abort", "x");
    assert_eq!(
        (code, err.trim()),
        (1, "web is Succeeded; nothing to abort")
    );
    let (code, _, err) = op(&w.bare, "retry", "x");
    assert_eq!(
        (code, err.trim()),
        (1, "web is Succeeded; nothing to retry")
    );
    assert_eq!(
        git(&w.bare, &["rev-parse", "main"]),
        head,
        "a refused operation commits nothing"
    );
}

#[test]
fn abort_rolls_back_and_retry_reruns_the_failed_revision() {
    let mut w = world("[{weight: 20}, {weight: 60}]");
    w.ticks(2);
    assert_eq!(status(&w.bare)["canaryWeight"], 20);
    let (code, out, err) = op(&w.bare, "abort", "error budget burning");
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("roll back: aborted by hand: error budget burning"),
        "{out}"
    );
    let s = status(&w.bare);
    assert_eq!(
        (s["phase"].as_str(), s["canaryWeight"].as_u64()),
        (Some("Failed"), Some(0))
    );
    w.ticks(3);
    assert_eq!(
        status(&w.bare)["phase"],
        "Failed",
        "a failed revision is not retried by itself"
    );
    let (code, _, err) = op(&w.bare, "retry", "fixed the database");
    assert_eq!(code, 0, "{err}");
    assert_eq!(status(&w.bare)["phase"], "Progressing");
    w.now = Timestamp::now();
    w.ticks(8);
    assert_eq!(status(&w.bare)["phase"], "Succeeded");
}

#[test]
fn pause_holds_and_resume_continues() {
    let mut w = world("[{weight: 20}, {weight: 60}]");
    w.ticks(2);
    let (code, _, err) = op(&w.bare, "pause", "investigating");
    assert_eq!(code, 0, "{err}");
    let head = git(&w.bare, &["rev-parse", "main"]);
    w.ticks(5);
    assert_eq!(
        git(&w.bare, &["rev-parse", "main"]),
        head,
        "a paused canary does not move"
    );
    let (code, _, err) = op(&w.bare, "pause", "again");
    assert_eq!((code, err.trim()), (1, "web is already paused"));
    let (code, _, err) = op(&w.bare, "resume", "all clear");
    assert_eq!(code, 0, "{err}");
    w.now = Timestamp::now();
    w.ticks(8);
    assert_eq!(status(&w.bare)["phase"], "Succeeded");
}

#[test]
fn promote_skips_the_remaining_steps() {
    let mut w = world("[{weight: 10}, {weight: 20}, {weight: 30}]");
    w.ticks(2);
    let (code, out, err) = op(&w.bare, "promote", "confident");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("promote revision v2 to the primary"), "{out}");
    w.now = Timestamp::now();
    w.ticks(4);
    let s = status(&w.bare);
    assert_eq!(
        (s["phase"].as_str(), s["stableService"].as_str()),
        (Some("Succeeded"), Some("web-green"))
    );
}

#[test]
fn an_operation_racing_a_running_daemon_loses_nothing_and_never_forces() {
    let tmp = tempfile::tempdir().unwrap();
    let steps = "[{weight: 10}, {weight: 20}, {weight: 30}, {weight: 40}, {weight: 50}]";
    let bare = seeded_remote(tmp.path(), &[(FILE, &route_only_web("v1", steps))]);
    let url = bare.display().to_string();
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "run",
            "--repo",
            &url,
            "--poll",
            "100ms",
            "--listen",
            "127.0.0.1:0",
            "--probe-listen",
            "127.0.0.1:0",
            "--workdir",
            &tmp.path().join("d").display().to_string(),
        ])
        .env("SLUICE_LOG", "error")
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !git_ok(&bare, &["show", &format!("main:{STATUS}")]) {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(100));
    }
    let human = human_clone(&url, &tmp.path().join("human"));
    human_commit(&human, FILE, &route_only_web("v2", steps), "web: v2");
    while status(&bare)["canaryWeight"].as_u64() < Some(20) {
        assert!(std::time::Instant::now() < deadline, "no progress");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut heads = vec![git(&bare, &["rev-parse", "main"]).trim().to_string()];
    let (code, _, err) = op(&bare, "pause", "racing the daemon");
    assert_eq!(code, 0, "{err}");
    heads.push(git(&bare, &["rev-parse", "main"]).trim().to_string());
    let paused_weight = status(&bare)["canaryWeight"].as_u64();
    std::thread::sleep(Duration::from_secs(3));
    heads.push(git(&bare, &["rev-parse", "main"]).trim().to_string());
    let _ = daemon.kill();
    let _ = daemon.wait();
    let s = status(&bare);
    assert_eq!(s["paused"], true, "the pause survived the race");
    assert_eq!(
        s["canaryWeight"].as_u64(),
        paused_weight,
        "no step after the pause"
    );
    for pair in heads.windows(2) {
        assert!(
            git_ok(&bare, &["merge-base", "--is-ancestor", &pair[0], &pair[1]]),
            "history rewritten"
        );
    }
    let log = git(&bare, &["log", "--format=%s", "main"]);
    assert!(log.contains("web: paused"), "{log}");
}
