//! Pull-request events through the real daemon for the forges beside GitHub
//! (`pr_webhooks.rs`): GitLab, Gitea, Forgejo, Bitbucket Cloud and Azure DevOps, each with its
//! HTTP-level fake (`support/forge.rs`) and its documented webhook, authenticated its way
//! (`support/forge_events.rs`). One table, one loop per case:
//!
//! - merged, with the event: `sluice run` polls once an hour and the canary's next check is
//!   ten minutes away, so only the event can make it see the merge; the approved change
//!   lands and `sluice audit` is clean;
//! - merged, the event dropped: a short poll still finds the merge;
//! - closed (declined, abandoned), with the event: the canary rolls back;
//! - an event about another repository than `forge.repository`: answered 202 with the
//!   reason, logged, nothing woken.
//!
//! No wall-clock assertion: each waits for a commit, bounded by the daemon's ticks; the
//! event-to-commit time is printed for the report.

use std::time::Instant;

use crate::support::forge::{ForgeFake, ForgeRun, Kind, FILE, STATUS};
use crate::support::forge_events::{gated_canary as canary, pull_event, Delivery, Outcome};
use crate::support::{
    audit, git, http, human_commit, merge_approval, push_webhook, reconcile_ticks, status_at_main,
};

const SECRET: &str = "s3cret";

/// A log line not written within this long is not coming.
const HANG: std::time::Duration = std::time::Duration::from_secs(30);

/// The forge fakes' `forge.repository` (Azure DevOps: project `acme`, repository `fleet`).
const REPOSITORY: &str = "acme/fleet";

/// The forges without a daemon-level event test of their own.
const FORGES: [Kind; 5] = [
    Kind::GitLab,
    Kind::Gitea,
    Kind::Forgejo,
    Kind::Bitbucket,
    Kind::AzureDevOps,
];

type Run = ForgeRun;

impl ForgeRun {
    /// The daemon polling every `poll` with `kind`'s fake, v2 released by a human (a push
    /// event wakes the daemon for it), and the rollout waiting for approval with its pull
    /// request open.
    fn waiting_for_events(kind: Kind, poll: &str) -> Run {
        let run = Run::initialized(ForgeFake::start(kind), "", &canary("v1"), |d| {
            d.poll(poll)
                .log(Some("info"))
                .env("SLUICE_FORGE_TOKEN", "fake-forge-token")
                .env("SLUICE_WEBHOOK_SECRET", SECRET)
        });
        human_commit(&run.human, FILE, &canary("v2"), "web: v2");
        assert_eq!(push_webhook(run.on.main(), SECRET, "push-v2"), 202);
        run.until("the approval pull request opened", |r| {
            r.fake.count() == 1 && r.subject().contains("waits for approval")
        });
        run
    }

    /// The subject of main's last commit.
    fn subject(&self) -> String {
        git(&self.on.bare, &["log", "-1", "--format=%s", "main"])
            .trim()
            .to_string()
    }

    /// Whether sluice committed the approval the merge gave.
    fn approved(&self) -> bool {
        self.subject().contains("approval merged")
    }

    /// Posts `delivery` to the daemon: (status, answer).
    fn send(&self, delivery: &Delivery) -> (u16, String) {
        http(
            self.on.main(),
            "POST",
            &delivery.path,
            &delivery.headers(),
            delivery.body.as_bytes(),
        )
    }

    /// The forge's event about the approval pull request of `repository`.
    fn event(&self, repository: &str, outcome: Outcome) -> Delivery {
        let pr = self.fake.first();
        pull_event(self.kind, repository, pr.number, &pr.head, outcome, SECRET)
    }

    /// A human merges the approval pull request; the forge says so.
    fn merge(&self) {
        let pr = self.fake.first();
        merge_approval(&self.human, &pr.head, "merge");
        self.fake.merged_by(pr.number, "alice");
    }
}

#[test]
fn forge_fakes_sluice_run_acts_on_the_merge_event_before_its_hourly_poll() {
    let mut report = Vec::new();
    for kind in FORGES {
        let run = Run::waiting_for_events(kind, "1h");
        run.merge();
        let ticks = reconcile_ticks(run.on.main());
        let sent = Instant::now();
        let (status, text) = run.send(&run.event(REPOSITORY, Outcome::Merged));
        assert_eq!(status, 202, "{kind:?}: {text}");
        run.until("the approval committed on the merge event", Run::approved);
        report.push(format!(
            "{kind:?}: merge event to commit {} ms, {} tick(s)",
            sent.elapsed().as_millis(),
            reconcile_ticks(run.on.main()) - ticks
        ));
        let log = run.on.log();
        assert!(
            log.contains("Pull-request webhook received") && log.contains("Woken by a git webhook"),
            "{kind:?}: {log}"
        );
        let status = status_at_main(&run.on.bare, STATUS).unwrap();
        assert_eq!(status["phase"], "Progressing", "{kind:?}: {status:#}");
        assert_eq!(run.fake.count(), 1, "{kind:?}: one pull request in all");
        audit::clean(&run.on.bare);
    }
    println!("{}", report.join("\n"));
}

#[test]
fn forge_fakes_sluice_run_still_finds_the_merge_at_a_poll_when_the_event_is_dropped() {
    for kind in FORGES {
        let run = Run::waiting_for_events(kind, "1s");
        run.merge();
        run.until("the approval committed at a poll", Run::approved);
        assert!(
            !run.on.log().contains("Pull-request webhook received"),
            "{kind:?}: no event was sent"
        );
        let status = status_at_main(&run.on.bare, STATUS).unwrap();
        assert_eq!(status["phase"], "Progressing", "{kind:?}: {status:#}");
        assert_eq!(run.fake.count(), 1, "{kind:?}");
        audit::clean(&run.on.bare);
    }
}

#[test]
fn forge_fakes_sluice_run_rolls_back_on_the_close_event_before_its_hourly_poll() {
    for kind in FORGES {
        let run = Run::waiting_for_events(kind, "1h");
        let pr = run.fake.first();
        // Declined (Bitbucket), abandoned (Azure DevOps), closed (the others).
        run.fake.set(pr.number, false, false);
        let (status, text) = run.send(&run.event(REPOSITORY, Outcome::Closed));
        assert_eq!(status, 202, "{kind:?}: {text}");
        run.until("rolled back on the close event", |r| r.phase() == "Failed");
        let status = status_at_main(&run.on.bare, STATUS).unwrap();
        assert_eq!(status["canaryWeight"], 0, "{kind:?}");
        assert_eq!(run.fake.count(), 1, "{kind:?}: no new pull request");
        audit::clean(&run.on.bare);
    }
}

#[test]
fn forge_fakes_an_event_about_another_repository_wakes_nothing() {
    for kind in FORGES {
        let run = Run::waiting_for_events(kind, "1h");
        run.merge();
        let other = run.event("evil/fleet", Outcome::Merged);
        let (status, text) = run.send(&other);
        assert_eq!(status, 202, "{kind:?}: {text}");
        assert!(
            text.contains("ignored") && text.contains("evil/fleet") && text.contains(REPOSITORY),
            "{kind:?}: {text}"
        );
        // The daemon writes its log line as it answers: wait for it (a hang guard bounds it).
        let logged = Instant::now();
        while !run
            .on
            .log()
            .contains("Pull-request webhook about another repository, ignored")
        {
            assert!(logged.elapsed() < HANG, "{kind:?}: {}", run.on.log());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let log = run.on.log();
        assert!(
            !log.contains("Pull-request webhook received"),
            "{kind:?}: {log}"
        );
        assert!(!run.approved(), "{kind:?}: {}", run.subject());
        // The same merge reported for the configured repository is acted on.
        let (status, text) = run.send(&run.event(REPOSITORY, Outcome::Merged));
        assert_eq!(status, 202, "{kind:?}: {text}");
        run.until("the approval committed on the merge event", Run::approved);
    }
}
