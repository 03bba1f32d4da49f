//! Approval policies through the real daemon: `sluice run` on a stepped clock with the GitHub
//! fake (`support/forge.rs`), `shop/web`'s promotion waiting for approval under a policy, and
//! `sluice audit` weighing the recorded approvers against the policy in force before the merge.

use crate::approval_run::Run;
use crate::support::forge::{ForgeFake, Kind};
use crate::support::{audit, git, DaemonBuilder};

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
