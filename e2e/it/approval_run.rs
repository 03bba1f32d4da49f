//! Approval by pull request through the real daemon, once per forge: `sluice run` on a stepped
//! clock, with the forge's HTTP-level fake (`support/forge.rs`: GitHub, GitLab, Gitea,
//! Forgejo, Bitbucket Cloud, Azure DevOps), opens the approval pull request for `shop/web`'s
//! promotion, finds the merge at a poll and promotes, and `sluice audit` finds the history
//! clean; a pull request closed without merging rolls the canary back.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::forge::{canary, ForgeFake, Kind, ALL, FILE, STATUS};
use crate::support::{
    audit, daemon_on_remote, human_clone, human_commit, merge_approval, reconcile_ticks,
    status_at_main, DaemonOnRemote,
};

/// Ticks a wait may take: far more than any step here needs (a handful each).
const MAX_TICKS: u64 = 300;

/// `sluice run` on `shop/web` with the fake of one forge, and a human's clone.
struct Run {
    kind: Kind,
    fake: ForgeFake,
    on: DaemonOnRemote,
    human: PathBuf,
}

impl Run {
    /// The daemon started on v1 with `kind`'s fake as its forge, v2 released by a human, and
    /// the promotion waiting for approval with its pull request open.
    fn waiting(kind: Kind) -> Run {
        let fake = ForgeFake::start(kind);
        let config = format!(
            "apiVersion: sluice.dev/v1alpha1\nkind: Config\n{}",
            fake.settings()
        );
        let files = [(FILE, canary("v1")), (".sluice/config.yaml", config)];
        let files: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
        let on = daemon_on_remote(&files, |d| {
            d.stepped().env("SLUICE_FORGE_TOKEN", "fake-forge-token")
        });
        let human = human_clone(&on.bare.display().to_string(), &on.tmp.path().join("human"));
        let run = Run {
            kind,
            fake,
            on,
            human,
        };
        run.until("initialized", |run| run.phase() == "Initialized");
        human_commit(&run.human, FILE, &canary("v2"), "web: v2");
        run.until("the approval pull request opened", |run| {
            run.phase() == "WaitingApproval" && run.fake.count() == 1
        });
        run
    }

    fn phase(&self) -> String {
        status_at_main(&self.on.bare, STATUS)
            .and_then(|s| s["phase"].as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// Waits until `done` holds, for at most [`MAX_TICKS`] of the daemon's ticks.
    fn until(&self, what: &str, done: impl Fn(&Run) -> bool) {
        let start = reconcile_ticks(self.on.main());
        while !done(self) {
            let ticks = reconcile_ticks(self.on.main()) - start;
            assert!(
                ticks < MAX_TICKS,
                "{:?}: not {what} after {ticks} ticks (phase {}):\n{}",
                self.kind,
                self.phase(),
                self.on.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn forge_fakes_sluice_run_opens_the_approval_and_promotes_once_merged_on_every_forge() {
    for kind in ALL {
        let run = Run::waiting(kind);
        let pr = run.fake.first();
        assert!(pr.open && !pr.merged, "{kind:?}: {pr:?}");
        assert_eq!(pr.base, "main", "{kind:?}");
        assert!(
            pr.head.starts_with("sluice/shop/web/promotion-"),
            "{kind:?}: {}",
            pr.head
        );
        assert!(
            pr.body
                .contains("Merging this pull request approves the step"),
            "{kind:?}: {pr:?}"
        );
        // Polls while it is open neither promote nor open another.
        let ticks = reconcile_ticks(run.on.main());
        run.until("ticked five times", |r| {
            reconcile_ticks(r.on.main()) >= ticks + 5
        });
        assert_eq!(
            (run.phase().as_str(), run.fake.count()),
            ("WaitingApproval", 1),
            "{kind:?}"
        );

        // A human merges it on the forge: the change lands on main, the forge says merged.
        merge_approval(&run.human, &pr.head, "merge");
        run.fake.set(pr.number, false, true);
        run.until("promoted", |r| r.phase() == "Succeeded");
        let status = status_at_main(&run.on.bare, STATUS).unwrap();
        assert_eq!(status["stableService"], "web-green", "{kind:?}");
        assert_eq!(run.fake.count(), 1, "{kind:?}: one pull request in all");
        audit::clean(&run.on.bare);
    }
}

#[test]
fn forge_fakes_sluice_run_rolls_back_when_the_approval_is_closed_on_every_forge() {
    for kind in ALL {
        let run = Run::waiting(kind);
        let pr = run.fake.first();
        // Declined (Bitbucket), abandoned (Azure DevOps), closed (the others).
        run.fake.set(pr.number, false, false);
        run.until("rolled back", |r| r.phase() == "Failed");
        let status = status_at_main(&run.on.bare, STATUS).unwrap();
        assert_eq!(status["canaryWeight"], 0, "{kind:?}");
        assert_eq!(run.fake.count(), 1, "{kind:?}: no new pull request");
        audit::clean(&run.on.bare);
    }
}
