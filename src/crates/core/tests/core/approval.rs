//! Approval policies: which reviews count and what the text of a missing approval says.

use std::collections::BTreeSet;

use proptest::prelude::*;
use sluice_core::approval::{
    check, memberships_needed, Approval, ApprovalPolicy, Approver, Evidence, MergeBy, Outcome,
    Review, ReviewState,
};

const HEAD: &str = "c0ffee0123456789";

fn two_of_three() -> ApprovalPolicy {
    ApprovalPolicy {
        required: 2,
        from: ["alice", "bob", "carol"]
            .iter()
            .map(|l| Approver::Login((*l).to_string()))
            .collect(),
        forbid_self_approval: true,
        merge: MergeBy::Human,
    }
}

fn review(login: &str, state: ReviewState) -> Review {
    Review {
        login: login.to_string(),
        state,
        commit: Some(HEAD.to_string()),
        stale: false,
    }
}

fn approved(login: &str) -> Review {
    review(login, ReviewState::Approved)
}

fn evidence(reviews: Vec<Review>) -> Evidence {
    Evidence {
        reviews,
        head: Some(HEAD.to_string()),
        author: Some("alice".to_string()),
        merger: None,
        members: BTreeSet::new(),
    }
}

fn logins(outcome: &Outcome) -> Vec<String> {
    match outcome {
        Outcome::Met(a) => a.iter().map(|a| a.login.clone()).collect(),
        Outcome::Missing(_) => Vec::new(),
    }
}

#[test]
fn one_approval_of_two_is_missing_and_says_who_approved() {
    let out = check(&two_of_three(), &evidence(vec![approved("bob")]));
    assert_eq!(
        out,
        Outcome::Missing("needs 2 approvals from alice, bob, carol; has 1 (bob)".into())
    );
}

#[test]
fn the_authors_approval_does_not_count_and_is_named() {
    let out = check(
        &two_of_three(),
        &evidence(vec![approved("alice"), approved("bob")]),
    );
    assert_eq!(
        out,
        Outcome::Missing(
            "needs 2 approvals from alice, bob, carol; has 1 (bob); the author alice cannot approve"
                .into()
        )
    );
}

#[test]
fn two_listed_approvals_meet_it() {
    let out = check(
        &two_of_three(),
        &evidence(vec![approved("Bob"), approved("carol")]),
    );
    assert_eq!(logins(&out), vec!["Bob", "carol"]);
}

#[test]
fn the_latest_decisive_review_per_login_counts() {
    let mut p = two_of_three();
    p.required = 1;
    let changed = vec![
        approved("bob"),
        review("bob", ReviewState::ChangesRequested),
    ];
    assert!(matches!(check(&p, &evidence(changed)), Outcome::Missing(_)));
    let dismissed = vec![approved("bob"), review("bob", ReviewState::Dismissed)];
    assert!(matches!(
        check(&p, &evidence(dismissed)),
        Outcome::Missing(_)
    ));
    // A comment after an approval leaves the approval standing (as on GitHub).
    let commented = vec![approved("bob"), review("BOB", ReviewState::Commented)];
    assert_eq!(logins(&check(&p, &evidence(commented))), vec!["bob"]);
    // Approving twice is one approver.
    let twice = vec![approved("bob"), approved("bob")];
    assert!(matches!(
        check(&two_of_three(), &evidence(twice)),
        Outcome::Missing(_)
    ));
}

#[test]
fn stale_reviews_and_reviews_of_another_commit_do_not_count() {
    let mut old = approved("carol");
    old.commit = Some("0ld0ld0ld".into());
    let mut stale = approved("bob");
    stale.stale = true;
    // A short hash of the head (Bitbucket's) is the head.
    let mut short = approved("alice");
    short.commit = Some(HEAD[..12].to_string());
    let out = check(&two_of_three(), &evidence(vec![old, stale, short]));
    assert_eq!(
        out,
        Outcome::Missing(
            "needs 2 approvals from alice, bob, carol; has 0; the author alice cannot approve"
                .into()
        )
    );
}

#[test]
fn a_team_member_counts_once_the_forge_confirmed_it() {
    let mut p = two_of_three();
    p.from.push(Approver::Team("acme/release".into()));
    let mut e = evidence(vec![approved("bob"), approved("dave")]);
    assert_eq!(
        memberships_needed(&p, &e),
        vec![("acme/release".to_string(), "dave".to_string())]
    );
    assert_eq!(
        check(&p, &e),
        Outcome::Missing(
            "needs 2 approvals from alice, bob, carol, team:acme/release; has 1 (bob); dave may not approve"
                .into()
        )
    );
    e.members.insert(("acme/release".into(), "dave".into()));
    let Outcome::Met(approvals) = check(&p, &e) else {
        panic!("a confirmed team member should count");
    };
    assert_eq!(
        approvals[1],
        Approval {
            login: "dave".into(),
            team: Some("acme/release".into())
        }
    );
}

#[test]
fn the_merger_approves_by_merging_unless_sluice_merges() {
    let mut e = evidence(vec![approved("bob")]);
    e.merger = Some("carol".into());
    assert_eq!(logins(&check(&two_of_three(), &e)), vec!["bob", "carol"]);
    let mut p = two_of_three();
    p.merge = MergeBy::Sluice;
    assert!(matches!(check(&p, &e), Outcome::Missing(_)));
}

#[test]
fn forge_approvers_is_one_merger_of_the_list() {
    let p = ApprovalPolicy::merged_by_one_of(&["alice".to_string()]);
    let mut e = evidence(Vec::new());
    e.merger = Some("ALICE".into());
    assert_eq!(logins(&check(&p, &e)), vec!["ALICE"]);
    e.merger = Some("mallory".into());
    assert_eq!(
        check(&p, &e),
        Outcome::Missing("needs 1 approval from alice; has 0; mallory may not approve".into())
    );
    // An empty list: anyone who merges.
    let anyone = ApprovalPolicy::merged_by_one_of(&[]);
    assert_eq!(logins(&check(&anyone, &e)), vec!["mallory"]);
}

#[test]
fn an_unknown_author_cannot_be_ruled_out_under_forbid_self_approval() {
    let mut e = evidence(vec![approved("bob"), approved("carol")]);
    e.author = None;
    let Outcome::Missing(text) = check(&two_of_three(), &e) else {
        panic!("an unknown author must not pass forbidSelfApproval");
    };
    assert!(text.contains("self-approval cannot be ruled out"), "{text}");
    let mut p = two_of_three();
    p.forbid_self_approval = false;
    assert!(matches!(check(&p, &e), Outcome::Met(_)));
}

#[test]
fn entries_parse_as_logins_or_teams() {
    assert_eq!(Approver::parse("bob"), Ok(Approver::Login("bob".into())));
    assert_eq!(
        Approver::parse("team:acme/release"),
        Ok(Approver::Team("acme/release".into()))
    );
    for bad in ["", "team:", "acme/release", "a b", "group:x"] {
        assert!(Approver::parse(bad).is_err(), "{bad:?}");
    }
    assert_eq!(
        two_of_three().to_string(),
        "2 from alice, bob, carol; self-approval forbidden; merge: human"
    );
}

fn arb_review() -> impl Strategy<Value = Review> {
    let states = prop_oneof![
        Just(ReviewState::Approved),
        Just(ReviewState::ChangesRequested),
        Just(ReviewState::Commented),
        Just(ReviewState::Dismissed),
        Just(ReviewState::Pending),
    ];
    let logins = prop::sample::select(vec!["alice", "bob", "carol", "dave", "Bob"]);
    let commits = prop::option::of(prop::sample::select(vec![HEAD, "0ld0ld0ld"]));
    (logins, states, commits, any::<bool>()).prop_map(|(login, state, commit, stale)| Review {
        login: login.to_string(),
        state,
        commit: commit.map(str::to_string),
        stale,
    })
}

proptest! {
    /// Whatever the reviews: a met policy counts `required` distinct listed approvers, none
    /// the author, each with an approval as the latest decisive review on the head.
    #[test]
    fn met_means_enough_distinct_allowed_approvals(
        reviews in prop::collection::vec(arb_review(), 0..12),
        merger in prop::option::of(prop::sample::select(vec!["alice", "bob", "dave"])),
    ) {
        let policy = two_of_three();
        let mut e = evidence(reviews.clone());
        e.merger = merger.map(str::to_string);
        match check(&policy, &e) {
            Outcome::Met(approvals) => {
                prop_assert!(approvals.len() >= 2);
                let mut seen = BTreeSet::new();
                for a in &approvals {
                    let key = a.login.to_ascii_lowercase();
                    prop_assert!(seen.insert(key.clone()), "{} counted twice", a.login);
                    prop_assert!(key != "alice");
                    prop_assert!(["bob", "carol"].contains(&key.as_str()));
                    let merged = e.merger.as_deref().is_some_and(|m| m.eq_ignore_ascii_case(&key));
                    let last = reviews.iter().rev().find(|r| {
                        r.login.eq_ignore_ascii_case(&key)
                            && !matches!(r.state, ReviewState::Commented | ReviewState::Pending)
                    });
                    let approves = last.is_some_and(|r| {
                        r.state == ReviewState::Approved && !r.stale && r.commit.as_deref() != Some("0ld0ld0ld")
                    });
                    prop_assert!(merged || approves, "{} counted without a standing approval", a.login);
                }
            }
            Outcome::Missing(text) => prop_assert!(text.starts_with("needs 2 approvals")),
        }
    }

    /// A comment or a pending review, whoever gives it, never changes the outcome.
    #[test]
    fn comments_change_nothing(
        reviews in prop::collection::vec(arb_review(), 0..10),
        login in prop::sample::select(vec!["alice", "bob", "carol", "dave"]),
    ) {
        let policy = two_of_three();
        let before = check(&policy, &evidence(reviews.clone()));
        let mut more = reviews;
        for state in [ReviewState::Commented, ReviewState::Pending] {
            more.push(Review { login: login.to_string(), state, commit: None, stale: false });
        }
        prop_assert_eq!(check(&policy, &evidence(more)), before);
    }
}
