//! Approval policies through the real daemon: `sluice run` on a stepped clock with the GitHub
//! fake (`support/forge.rs`), `shop/web`'s promotion waiting for approval under a policy, and
//! `sluice audit` weighing the recorded approvers against the policy in force before the merge.

use crate::support::forge::ForgeRun as Run;
use crate::support::forge::{ForgeFake, Kind, FILE, TOKEN_USER};
use crate::support::{audit, git, merge_approval, reconcile_ticks, DaemonBuilder};

/// The settings' `approval` block beside the fake's `forge` block: `waiting_on` puts its
/// `extra` inside the forge's braces, so this closes them and opens the policy's, which the
/// forge line's own `}` closes.
fn policy(fields: &str) -> String {
    format!("}}\napproval: {{{fields}")
}

fn stepped(d: DaemonBuilder) -> DaemonBuilder {
    d.stepped().env("SLUICE_FORGE_TOKEN", "fake-forge-token")
}

/// A merge by bob under `from: [alice]`, pushed together with a commit that adds bob to
/// `from`: the daemon reads the relaxed policy at the head and approves, and audit, which
/// weighs the approval by the policy at the commit before the merge, reports it.
#[test]
fn fake_forge_audit_reports_a_merge_that_did_not_meet_the_policy_in_force() {
    let fake = ForgeFake::start(Kind::GitHub);
    let run = Run::waiting_on(fake, &policy("required: 1, from: [alice]"), stepped);
    let pr = run.fake.first();
    let settings = git(&run.human, &["show", "origin/main:.sluice/config.yaml"]);
    let relaxed = settings.replace("from: [alice]", "from: [alice, bob]");
    assert_ne!(settings, relaxed, "{settings}");
    // One push: the merge, then the relaxed policy on top of it.
    git(&run.human, &["pull", "-q", "origin", "main"]);
    git(&run.human, &["fetch", "-q", "origin", &pr.head]);
    git(
        &run.human,
        &[
            "merge",
            "-q",
            "--no-ff",
            "-m",
            "Merge approval",
            "FETCH_HEAD",
        ],
    );
    std::fs::write(run.human.join(".sluice/config.yaml"), &relaxed).unwrap();
    git(&run.human, &["commit", "-q", "-am", "let bob approve"]);
    run.fake.merged_by(pr.number, "bob");
    git(&run.human, &["push", "-q", "origin", "HEAD:main"]);
    run.until("promoted", |r| r.phase() == "Succeeded");
    let (code, report) = audit::audit(&run.on.bare);
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{report:#}");
    assert_eq!(findings[0]["kind"], "approval", "{report:#}");
    let message = findings[0]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "did not meet the approval policy in force before it (1 from alice; merge: human)"
        ) && message.contains("bob may not approve"),
        "{message}"
    );
    assert_ne!(code, 0);
}

const TWO_OF_THREE: &str = "required: 2, from: [alice, bob, carol], forbidSelfApproval: true";

/// The daemon waiting under `fields`, with alice as the forge account of the v2 commit.
fn waiting_under(fields: &str) -> Run {
    let run = Run::waiting_on(ForgeFake::start(Kind::GitHub), &policy(fields), stepped);
    let revision = git(&run.human, &["log", "-1", "--format=%H", "--", FILE]);
    run.fake.set_commit_author(revision.trim(), Some("alice"));
    run
}

/// A human merges approval pull request `number` (its branch into main) as `login`.
fn merge_as(run: &Run, number: u64, login: &str) {
    let pr = run.fake.pr(number);
    run.fake.merged_by(number, login);
    merge_approval(&run.human, &pr.head, "merge");
}

/// The approval's commit on main: its trailers.
fn approval_trailers(run: &Run) -> String {
    let log = git(
        &run.on.bare,
        &["log", "--format=%s%n%(trailers)%n--", "main"],
    );
    log.split("--\n")
        .find(|c| c.starts_with("web: approval merged"))
        .unwrap_or_else(|| panic!("no approval commit:\n{log}"))
        .to_string()
}

#[test]
fn fake_forge_two_of_three_one_approval_holds_and_the_author_does_not_count() {
    let run = waiting_under(TWO_OF_THREE);
    let head = run.fake.first().head_sha;
    run.fake.review(1, "bob", "APPROVED", &head);
    run.fake.review(1, "alice", "APPROVED", &head);
    // alice, the revision's author, merges: neither her review nor her merge counts.
    merge_as(&run, 1, "alice");
    run.until("a fresh pull request", |r| {
        r.fake.count() == 2 && r.phase() == "WaitingApproval"
    });
    let refused = run.fake.pr(1);
    assert_eq!(refused.comments.len(), 1, "{refused:?}");
    assert!(
        refused.comments[0].contains(
            "needs 2 approvals from alice, bob, carol; has 1 (bob); the author alice cannot approve"
        ),
        "{refused:?}"
    );
}

#[test]
fn fake_forge_two_of_three_two_approvals_promote_and_are_recorded() {
    // A fresh run: a second merge after a refusal races the daemon (see the report).
    let run = waiting_under(TWO_OF_THREE);
    let head = run.fake.first().head_sha;
    run.fake.review(1, "bob", "APPROVED", &head);
    run.fake.review(1, "carol", "APPROVED", &head);
    merge_as(&run, 1, "alice");
    run.until("promoted", |r| r.phase() == "Succeeded");
    let trailers = approval_trailers(&run);
    assert!(
        trailers.contains("Sluice-Approved-By: bob\nSluice-Approved-By: carol\n")
            && trailers.contains(
                "Sluice-Approval-Policy: 2 from alice, bob, carol; self-approval forbidden; merge: human"
            ),
        "{trailers}"
    );
    audit::clean(&run.on.bare);
}

#[test]
fn fake_forge_a_review_before_a_new_push_does_not_count() {
    let run = waiting_under(TWO_OF_THREE);
    let head = run.fake.first().head_sha;
    run.fake.review(1, "bob", "APPROVED", &head);
    let pushed = format!("{:f>40}", "");
    run.fake.set_head(1, &pushed);
    run.fake.review(1, "carol", "APPROVED", &pushed);
    merge_as(&run, 1, "alice");
    run.until("a fresh pull request", |r| {
        r.fake.count() == 2 && r.phase() == "WaitingApproval"
    });
    let refused = run.fake.pr(1);
    assert!(
        refused.comments[0].contains("has 1 (carol)"),
        "bob's approval was of the old head: {refused:?}"
    );
}

#[test]
fn fake_forge_a_team_member_counts() {
    let run = waiting_under(
        "required: 2, from: [alice, bob, team:acme/release], forbidSelfApproval: true",
    );
    run.fake.add_member("acme/release", "dave");
    let head = run.fake.first().head_sha;
    run.fake.review(1, "bob", "APPROVED", &head);
    run.fake.review(1, "dave", "APPROVED", &head);
    merge_as(&run, 1, "alice");
    run.until("promoted", |r| r.phase() == "Succeeded");
    let trailers = approval_trailers(&run);
    assert!(
        trailers.contains("Sluice-Approved-By: dave (team:acme/release)\n"),
        "{trailers}"
    );
    audit::clean(&run.on.bare);
}

#[test]
fn fake_forge_with_merge_sluice_sluice_merges_once_the_policy_holds() {
    let run = waiting_under(&format!("{TWO_OF_THREE}, merge: sluice"));
    let head = run.fake.first().head_sha;
    run.fake.review(1, "bob", "APPROVED", &head);
    let ticks = reconcile_ticks(run.on.main());
    run.until("ticked five times", |r| {
        reconcile_ticks(r.on.main()) >= ticks + 5
    });
    assert!(run.fake.pr(1).open, "one approval: not merged");
    run.fake.review(1, "carol", "APPROVED", &head);
    run.until("merged by sluice", |r| r.fake.pr(1).merged);
    assert_eq!(run.fake.pr(1).merged_by.as_deref(), Some(TOKEN_USER));
    // The forge's merge reaches the branch (the fake keeps no git repository).
    merge_approval(&run.human, &run.fake.pr(1).head, "merge");
    run.until("promoted", |r| r.phase() == "Succeeded");
    let trailers = approval_trailers(&run);
    assert!(
        trailers.contains("Sluice-Approved-By: bob\nSluice-Approved-By: carol\n"),
        "{trailers}"
    );
    audit::clean(&run.on.bare);
}
