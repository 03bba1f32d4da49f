//! See `../attacks.rs`. Approvals: someone who can push to an approval branch, or open and
//! edit pull requests, must not get a change approved that sluice did not push, nor approve
//! through a pull request into another branch than the one sluice reconciles.
//!
//! Each attack runs on the HTTP-level fakes of the GitHub, GitLab and Gitea pull-request APIs
//! (`crate::approval::ForgeFake`) and ends the same way: the canary holds at its gate, the
//! merged pull request gets one comment saying why, a fresh pull request asks again, and
//! sluice's next commit puts the owned files back as they were before the merge.

use jiff::Timestamp;

use crate::support::forge::{assert_waiting_again, waiting, ForgeFake, KINDS, STATUS};
use crate::support::{git, merge_approval, World};

const ROUTE: &str = "clusters/shop/web/route.yaml";

/// `route.yaml` with every backend's weight set: 100 for `web-green`, 0 for the others.
fn all_to_green(route: &str) -> String {
    let mut out = String::new();
    let mut green = false;
    for line in route.lines() {
        if line.trim_start().starts_with("- service:") {
            green = line.contains("web-green");
        }
        if line.trim_start().starts_with("weight:") {
            let indent = &line[..line.len() - line.trim_start().len()];
            out.push_str(&format!(
                "{indent}weight: {}\n",
                if green { 100 } else { 0 }
            ));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// A human force-pushes `branch`: sluice's commit amended (message and trailers kept) with the
/// route sending all traffic to `web-green` and junk in the status file.
fn force_push_tampered(human: &std::path::Path, branch: &str) -> String {
    git(human, &["fetch", "-q", "origin", branch]);
    git(human, &["checkout", "-q", "-B", "tamper", "FETCH_HEAD"]);
    let route = all_to_green(&std::fs::read_to_string(human.join(ROUTE)).unwrap());
    std::fs::write(human.join(ROUTE), &route).unwrap();
    let status = std::fs::read_to_string(human.join(STATUS)).unwrap();
    let status: String = status
        .lines()
        .map(|l| match l.split_once(':') {
            Some(("canaryWeight", _)) => "canaryWeight: 100\n".to_string(),
            Some(("primaryWeight", _)) => "primaryWeight: 0\n".to_string(),
            _ => format!("{l}\n"),
        })
        .collect();
    std::fs::write(human.join(STATUS), format!("{status}junk: pwned\n")).unwrap();
    git(human, &["commit", "-q", "-a", "--amend", "--no-edit"]);
    git(
        human,
        &[
            "push",
            "-q",
            "-f",
            "origin",
            &format!("HEAD:refs/heads/{branch}"),
        ],
    );
    git(human, &["checkout", "-q", "main"]);
    route
}

/// After the attack's merge and one tick: the canary waits at its gate again, its route and
/// status on main are what they were before the merge, the last commit says why, pull
/// request #`merged` gets exactly one comment, and a fresh one into main asks again on a
/// branch that holds sluice's change, not the attacker's.
fn assert_refused(w: &mut World, fake: &ForgeFake, before: &Before, merged: u64, why: &str) {
    let kind = fake.kind();
    assert_waiting_again(w, kind, why);
    assert_eq!(
        w.show("main", ROUTE),
        before.route,
        "{kind:?}: sluice put the route back"
    );
    assert_eq!(
        without_message(&w.show("main", STATUS)),
        without_message(&before.status),
        "{kind:?}: sluice put its status back (its message says why), no junk"
    );
    for _ in 0..3 {
        w.tick();
    }
    let pr = fake.pr(merged);
    assert_eq!(pr.comments.len(), 1, "{kind:?}: one comment: {pr:?}");
    assert!(
        pr.comments[0].contains("This merge did not approve") && pr.comments[0].contains(why),
        "{kind:?}: {pr:?}"
    );
    assert_eq!(
        w.yaml_at_main(STATUS)["phase"],
        "WaitingApproval",
        "{kind:?}"
    );
    assert_eq!(fake.count(), merged as usize + 1, "{kind:?}: one fresh PR");
    let fresh = fake.pr(merged + 1);
    assert!(
        fresh.open && fresh.head == before.branch && fresh.base == "main",
        "{kind:?}: {fresh:?}"
    );
    let route = w.show(&before.branch, ROUTE);
    assert_ne!(
        route, before.tampered,
        "{kind:?}: the branch is sluice's again"
    );
    assert!(
        !w.show(&before.branch, STATUS).contains("junk"),
        "{kind:?}: the branch is sluice's again"
    );
}

/// A status file's lines but its `message`.
fn without_message(status: &str) -> Vec<&str> {
    status
        .lines()
        .filter(|l| !l.starts_with("message:"))
        .collect()
}

/// What main and the approval branch held before the attack.
struct Before {
    branch: String,
    route: String,
    status: String,
    /// The attacker's route (empty when the attack leaves the branch alone).
    tampered: String,
}

fn before(w: &World, fake: &ForgeFake) -> Before {
    Before {
        branch: fake.pr(1).head,
        route: w.show("main", ROUTE),
        status: w.show("main", STATUS),
        tampered: String::new(),
    }
}

#[test]
fn forge_fakes_a_force_pushed_approval_branch_merged_does_not_approve() {
    for (kind, how) in KINDS.into_iter().zip(["merge", "squash", "rebase"]) {
        let (mut w, fake) = waiting(kind, "");
        w.tick();
        let mut was = before(&w, &fake);
        was.tampered = force_push_tampered(w.human(), &was.branch);
        merge_approval(w.human(), &was.branch, how);
        fake.merged_by(1, "octocat");
        assert_eq!(
            w.yaml_at_main(STATUS)["canaryWeight"],
            100,
            "{kind:?}: the tampered status is on main"
        );
        w.now = Timestamp::now();
        w.tick();
        assert_refused(&mut w, &fake, &was, 1, "does not hold what sluice pushed");
    }
}

#[test]
fn forge_fakes_an_approval_pull_request_merged_into_another_base_does_not_approve() {
    for kind in KINDS {
        let (mut w, fake) = waiting(kind, ", approvers: [alice]");
        w.tick();
        let was = before(&w, &fake);
        // Alice, a listed approver, merges the pull request once someone pointed it at
        // `staging`; the change reaches main by a merge no approver made.
        fake.retarget(1, "staging");
        fake.merged_by(1, "alice");
        merge_approval(w.human(), &was.branch, "merge");
        w.now = Timestamp::now();
        w.tick();
        assert_refused(&mut w, &fake, &was, 1, "into staging, not main");
    }
}

#[test]
fn forge_fakes_a_force_pushed_approval_branch_is_written_again_while_its_pr_is_open() {
    for kind in KINDS {
        let (mut w, fake) = waiting(kind, "");
        w.tick();
        let branch = fake.pr(1).head;
        let sluice_route = w.show(&branch, ROUTE);
        let tampered = force_push_tampered(w.human(), &branch);
        assert_eq!(
            w.show(&branch, ROUTE),
            tampered,
            "{kind:?}: the push landed"
        );
        w.tick();
        assert_eq!(
            w.show(&branch, ROUTE),
            sluice_route,
            "{kind:?}: a reviewer merging now merges sluice's change"
        );
        assert!(!w.show(&branch, STATUS).contains("junk"), "{kind:?}");
        assert_eq!(fake.count(), 1, "{kind:?}: the open pull request is kept");
        assert!(fake.pr(1).open, "{kind:?}");
    }
}
