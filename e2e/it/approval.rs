//! Approval by pull request against HTTP-level fakes of the GitHub, GitLab and Gitea
//! pull-request APIs (documented endpoints and payloads, state kept in memory) and a real bare
//! repo: one PR per wait, reused across restarts; merge commit, squash and cherry-pick merges
//! all approve; closing aborts. The fakes are in `support/forge.rs`.

use std::path::Path;

use jiff::Timestamp;
use serde_json::Value as Json_;

use crate::support::forge::{
    assert_waiting_again, last_commit, page_url, waiting, world_with, ForgeFake, Kind, KINDS,
    STATUS,
};
use crate::support::{git, merge_approval};

/// Each forge once, each with another merge method: the fakes answer "merged" alike whatever
/// the method, and the method is git's alone (what lands on main), so every forge and every
/// method is run without the nine-fold product of the two.
#[test]
fn forge_fakes_one_pr_per_wait_reused_across_restarts_and_every_merge_method_approves() {
    for (kind, how) in KINDS.into_iter().zip(["merge", "squash", "rebase"]) {
        let (mut w, fake) = waiting(kind, "");
        w.tick();
        w.tick();
        assert_eq!(fake.count(), 1, "exactly one PR ({kind:?} {how})");
        let pr = fake.first();
        assert!(
            pr.body
                .contains("Merging this pull request approves the step"),
            "{pr:?}"
        );
        assert!(pr.title.contains("promote revision v2"), "{pr:?}");
        assert_eq!(pr.base, "main");
        let branch = fake.first().head;
        assert!(branch.starts_with("sluice/shop/web/promotion-"), "{branch}");
        // A restart (a new clone) reuses the PR.
        w.tick_a_second_clone("w2");
        assert_eq!(
            fake.count(),
            1,
            "a restart does not open a second PR ({kind:?} {how})"
        );

        merge_approval(w.human(), &branch, how);
        fake.set(1, false, true);
        assert_eq!(
            w.yaml_at_main(STATUS)["phase"],
            "Promoting",
            "the merge put the promotion on main ({kind:?} {how})"
        );
        w.now = Timestamp::now();
        w.tick();
        let subject = git(&w.bare, &["log", "-1", "--format=%s", "main"]);
        assert_eq!(
            subject.trim(),
            "web: approval merged, step clock started",
            "{kind:?} {how}"
        );
        for _ in 0..8 {
            w.tick();
        }
        let s = w.yaml_at_main(STATUS);
        assert_eq!(
            (s["phase"].as_str(), s["stableService"].as_str()),
            (Some("Succeeded"), Some("web-green")),
            "{kind:?} {how}"
        );
    }
}

#[test]
fn forge_fakes_closing_the_pr_without_merge_rolls_back() {
    for kind in KINDS {
        let (mut w, fake) = waiting(kind, "");
        w.tick();
        assert_eq!(fake.count(), 1);
        fake.set(1, false, false);
        w.tick();
        let s = w.yaml_at_main(STATUS);
        assert_eq!(
            (s["phase"].as_str(), s["canaryWeight"].as_u64()),
            (Some("Failed"), Some(0)),
            "{kind:?}"
        );
        let log = git(&w.bare, &["log", "-1", "--format=%s", "main"]);
        assert!(
            log.contains("approval pull request #1 was closed without merging"),
            "{kind:?}: {log}"
        );
    }
}

#[test]
fn forge_fakes_a_pr_left_behind_by_a_canary_that_moved_on_is_closed_with_a_comment() {
    for kind in KINDS {
        let (mut w, fake) = waiting(kind, "");
        w.tick();
        assert!(fake.first().open);
        crate::support::run_ok(
            std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
                .args([
                    "abort",
                    "shop/web",
                    "--repo",
                    &w.bare.display().to_string(),
                    "--reason",
                    "changed our mind",
                    "--as",
                    "Ops <ops@example.com>",
                ])
                .env("SLUICE_LOG", "error"),
        );
        // The abort happened outside the loop; the next tick sees the wait is over.
        w.tick();
        let pr = fake.first();
        assert!(!pr.open, "{kind:?}: the stale PR is closed");
        assert!(
            pr.comments.iter().any(|c| c.contains("no longer applies")),
            "{kind:?}: {pr:?}"
        );
        assert_eq!(fake.count(), 1, "no new PR");
    }
}

#[test]
fn forge_fakes_on_close_hold_keeps_waiting() {
    let fake = ForgeFake::start(Kind::GitHub);
    let mut w = world_with(&fake, ", onClose: hold");
    for _ in 0..7 {
        w.tick();
    }
    assert_eq!(fake.count(), 1);
    fake.set(1, false, false);
    w.tick();
    w.tick();
    assert_eq!(
        w.yaml_at_main(STATUS)["phase"],
        "WaitingApproval",
        "onClose: hold keeps the canary waiting"
    );
}

fn history_json(bare: &Path) -> Vec<Json_> {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args([
        "history",
        "shop/web",
        "--dir",
        &bare.display().to_string(),
        "-o",
        "json",
    ])
    .env("SLUICE_LOG", "error");
    let out = crate::support::run_ok(&mut cmd);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `sluice audit --dir BARE -o json`: its exit code and report.
fn audit_json(bare: &Path) -> (Option<i32>, Json_) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["audit", "--dir", &bare.display().to_string(), "-o", "json"])
        .env("SLUICE_LOG", "error")
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "audit printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), report)
}

#[test]
fn forge_fakes_an_approval_by_pull_request_records_the_merger_and_its_url() {
    for kind in KINDS {
        let (mut w, fake) = waiting(kind, "");
        w.tick();
        let branch = fake.first().head;
        merge_approval(w.human(), &branch, "squash");
        fake.merged_by(1, "carol");
        w.now = Timestamp::now();
        w.tick();
        let url = page_url(kind, &fake.pr(1));
        let (subject, trailers) = last_commit(&w.bare);
        assert_eq!(
            subject, "web: approval merged, step clock started",
            "{kind:?}"
        );
        assert!(
            trailers.contains("Sluice-Approved-By: carol\n")
                && trailers.contains(&format!("Sluice-Approval: {url}\n")),
            "{kind:?}: {trailers}"
        );
        let history = history_json(&w.bare);
        let approved = history
            .iter()
            .find(|e| e["reason"] == "web: approval merged, step clock started")
            .expect("the approval's entry");
        assert_eq!(
            (
                approved["approvedBy"].as_str(),
                approved["approval"].as_str()
            ),
            (Some("carol"), Some(url.as_str())),
            "{kind:?}"
        );
        // The history a forge approval leaves replays clean: the squash merge is the approval
        // branch's change, and the approval names its approver.
        let (code, report) = audit_json(&w.bare);
        assert_eq!(
            (code, report["findings"].as_array().map(Vec::len)),
            (Some(0), Some(0)),
            "{kind:?}: {report:#}"
        );
    }
}

#[test]
fn forge_fakes_a_merge_by_a_login_not_in_forge_approvers_does_not_approve() {
    for kind in KINDS {
        let (mut w, fake) = waiting(kind, ", approvers: [Alice]");
        w.tick();
        let branch = fake.first().head;
        merge_approval(w.human(), &branch, "squash");
        fake.merged_by(1, "mallory");
        assert_eq!(
            w.yaml_at_main(STATUS)["phase"],
            "Promoting",
            "the merge put the promotion on main"
        );
        w.now = Timestamp::now();
        w.tick();
        assert_waiting_again(&w, kind, "mallory may not approve");
        for _ in 0..3 {
            w.tick();
        }
        let refused = fake.pr(1);
        assert_eq!(
            refused.comments.len(),
            1,
            "{kind:?}: one comment, not one a tick: {refused:?}"
        );
        assert!(
            refused.comments[0].contains("This merge did not approve")
                && refused.comments[0].contains("mallory"),
            "{kind:?}: {refused:?}"
        );
        assert_eq!(
            w.yaml_at_main(STATUS)["phase"],
            "WaitingApproval",
            "{kind:?}"
        );
        // A fresh pull request asks again; a listed login (any case) merging it approves.
        assert_eq!(fake.count(), 2, "{kind:?}");
        let again = fake.pr(2);
        assert!(again.open && again.head == branch, "{kind:?}: {again:?}");
        // The forge says the fresh pull request is merged before the merge is on the branch
        // the tick fetched: the refusal on main is of pull request 1, so this one is waited
        // for, not refused as merged without its pull request, and no third one opens.
        fake.merged_by(2, "alice");
        w.now = Timestamp::now();
        w.tick();
        assert_eq!(
            fake.count(),
            2,
            "{kind:?}: no pull request after the refused one"
        );
        assert_eq!(
            w.yaml_at_main(STATUS)["phase"],
            "WaitingApproval",
            "{kind:?}"
        );
        merge_approval(w.human(), &branch, "merge");
        w.now = Timestamp::now();
        w.tick();
        let (subject, trailers) = last_commit(&w.bare);
        assert_eq!(
            subject, "web: approval merged, step clock started",
            "{kind:?}"
        );
        assert!(
            trailers.contains("Sluice-Approved-By: alice\n"),
            "{kind:?}: {trailers}"
        );
        // The refused approval's commit is replayed by audit like any other.
        crate::support::audit::clean(&w.bare);
    }
}
