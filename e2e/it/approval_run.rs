//! Approval by pull request through the real daemon, once per forge: `sluice run` on a stepped
//! clock, with the forge's HTTP-level fake (`support/forge.rs`: GitHub, GitLab, Gitea,
//! Forgejo, Bitbucket Cloud, Azure DevOps), opens the approval pull request for `shop/web`'s
//! promotion, finds the merge at a poll and promotes, and `sluice audit` finds the history
//! clean; a pull request closed without merging rolls the canary back.

use crate::support::forge::{canary, ForgeFake, ForgeRun, Kind, ALL, FILE, STATUS, TOKEN_USER};
use crate::support::github_app::{generated_key, APP_ID};
use crate::support::{
    audit, get_status, git, http, human_commit, merge_approval, reconcile_ticks, status_at_main,
    DaemonBuilder,
};

/// `sluice run` on `shop/web` with the fake of one forge, and a human's clone.
type Run = ForgeRun;

impl ForgeRun {
    /// The daemon started on v1 with `kind`'s fake as its forge, v2 released by a human, and
    /// the promotion waiting for approval with its pull request open.
    fn waiting(kind: Kind) -> Run {
        Run::waiting_on(ForgeFake::start(kind), "", |d| {
            d.stepped().env("SLUICE_FORGE_TOKEN", "fake-forge-token")
        })
    }

    /// [`Run::waiting`] with `fake`, more `forge` keys (`extra`, such as `, approvers: [a]`; the
    /// approval policy tests, `approval_policy_run`, use it too),
    /// and the daemon as `configure` sets it up.
    pub(crate) fn waiting_on(
        fake: ForgeFake,
        extra: &str,
        configure: impl FnOnce(DaemonBuilder) -> DaemonBuilder,
    ) -> Run {
        let run = Run::initialized(fake, extra, &canary("v1"), configure);
        human_commit(&run.human, FILE, &canary("v2"), "web: v2");
        run.until("the approval pull request opened", |run| {
            run.phase() == "WaitingApproval" && run.fake.count() == 1
        });
        run
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

/// GitHub App authentication through the real daemon: the App's key (made now by openssl)
/// mounted as a Secret, no `SLUICE_FORGE_TOKEN`. The approval pull request is opened with an
/// installation token; over minutes of the daemon's stepped clock (the fake's tokens live 5½
/// minutes) each call carries the newest token, each token is replaced before it expires, and
/// the key shows nowhere: not in the daemon's log, the config repo's history or the dashboard.
#[test]
fn fake_github_app_sluice_run_opens_the_approval_with_fresh_installation_tokens() {
    let secrets = tempfile::tempdir().unwrap();
    let (pem, public_der) = generated_key(secrets.path());
    let mount = secrets.path().join("sluice-system/github-app");
    std::fs::create_dir_all(&mount).unwrap();
    std::fs::write(mount.join("private-key.pem"), &pem).unwrap();
    let extra = format!(
        ", githubApp: {{appId: {APP_ID}, privateKeySecretRef: {{namespace: sluice-system, name: github-app}}}}"
    );
    let run = Run::waiting_on(ForgeFake::github_app(public_der), &extra, |d| {
        d.stepped()
            .env(sluice::secrets::DIR_VAR, secrets.path())
            .env_remove("SLUICE_FORGE_TOKEN")
            .args(["--dashboard-listen", "127.0.0.1:0"])
    });
    {
        let app = run.fake.app();
        let (_, token) = app
            .calls
            .iter()
            .find(|(call, _)| call == "POST /repos/acme/fleet/pulls")
            .expect("the pull request was created");
        assert!(
            app.issued.iter().any(|(t, _)| t == token),
            "opened with {token:?}, issued {:?}",
            app.issued
        );
    }
    // Polls while it waits (a second of its clock apart), until a third token was issued.
    run.until("two refreshes", |r| r.fake.app().issued.len() >= 3);
    merge_approval(&run.human, &run.fake.first().head, "merge");
    run.fake.set(1, false, true);
    run.until("promoted", |r| r.phase() == "Succeeded");
    audit::clean(&run.on.bare);
    let app = run.fake.app();
    assert_eq!(app.problems, Vec::<String>::new());
    let used: std::collections::BTreeSet<&str> =
        app.calls.iter().map(|(_, t)| t.as_str()).collect();
    assert!(used.len() >= 3, "calls with every token issued: {used:?}");

    let dashboard = run.on.address("Serving the dashboard at /");
    assert_eq!(get_status(&dashboard, "/"), Some(200));
    let pages: Vec<String> = ["/", "/canaries/shop/web", "/api/v1/canaries/shop/web"]
        .iter()
        .map(|path| http(&dashboard, "GET", path, &[], b"").1)
        .collect();
    let history = git(&run.on.bare, &["log", "-p", "--all"]);
    let log = run.on.log();
    let key_lines: Vec<&str> = pem
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() > 16)
        .collect();
    assert!(key_lines.len() > 10, "{pem}");
    for (what, text) in [("log", &log), ("git log -p", &history)]
        .into_iter()
        .chain(pages.iter().map(|p| ("dashboard", p)))
    {
        for line in &key_lines {
            assert!(!text.contains(line), "the key shows in the {what}");
        }
        for (token, _) in &app.issued {
            assert!(
                !text.contains(token.as_str()),
                "{token} shows in the {what}"
            );
        }
    }
}

/// The forge fakes answer what approval policies read, as each forge does, and sluice's forge
/// client reads it: reviews (a stale one marked or dropped as the forge does), team membership
/// (Bitbucket Cloud has none), commit authors, and a merge that refuses a moved head and is
/// made by the token's user.
#[test]
fn every_forge_fake_serves_reviews_membership_authors_and_merge_fake() {
    use sluice::forge::{Forge, ForgeClient, ForgeKind, ForgeSettings, ForgeToken, ReviewState};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for kind in ALL {
        let fake = ForgeFake::start(kind);
        let key = fake.settings();
        let key = key
            .split("kind: ")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap();
        let settings = ForgeSettings {
            kind: ForgeKind::parse(key).unwrap(),
            api_url: fake.api_url(),
            repository: "acme/fleet".into(),
            github_app: None,
        };
        let client = ForgeClient::new(Some(ForgeToken::new("fake-forge-token"))).unwrap();
        let forge = Forge::from_settings(&settings, &client).unwrap();
        let team = if kind == Kind::AzureDevOps {
            "acme/Release"
        } else {
            "acme/release"
        };
        fake.add_member(team, "bob");
        fake.set_commit_author("c0ffee", Some("carol"));
        fake.set_commit_author("decaf0", None);
        runtime.block_on(async {
            let pr = forge
                .ensure_open("sluice/shop/web/1", "main", "t", "b")
                .await
                .unwrap();
            let old = fake.pr(pr.number).head_sha;
            fake.review(pr.number, "alice", "APPROVED", &old);
            fake.set_head(pr.number, &"e".repeat(40));
            fake.review(pr.number, "bob", "APPROVED", &"e".repeat(40));
            let reviews = forge.reviews(pr.number).await.unwrap();
            let approved: Vec<(&str, bool)> = reviews
                .iter()
                .filter(|r| r.state == ReviewState::Approved)
                .map(|r| {
                    (
                        r.login.as_str(),
                        r.stale || r.commit.as_deref() == Some(old.as_str()),
                    )
                })
                .collect();
            match kind {
                // The forge keeps alice's approval on the old head, and says on which.
                Kind::GitHub | Kind::Gitea | Kind::Forgejo => {
                    assert_eq!(approved, [("alice", true), ("bob", false)], "{kind:?}")
                }
                // The push reset alice's approval.
                _ => assert_eq!(approved, [("bob", false)], "{kind:?}"),
            }
            if kind == Kind::Bitbucket {
                assert!(forge.is_member(team, "bob").await.is_err());
            } else {
                assert!(forge.is_member(team, "bob").await.unwrap(), "{kind:?}");
                assert!(!forge.is_member(team, "alice").await.unwrap(), "{kind:?}");
                // A team that does not exist is an error on every forge, not "no member".
                let unknown = forge.is_member("acme/nobody", "bob").await;
                assert!(unknown.is_err_and(|e| !e.is_transient()), "{kind:?}");
            }
            assert_eq!(
                forge.commit_author("c0ffee").await.unwrap().as_deref(),
                Some("carol")
            );
            assert_eq!(
                forge.commit_author("decaf0").await.unwrap(),
                None,
                "{kind:?}"
            );
            let moved = forge.merge(pr.number, &old).await.unwrap_err();
            assert!(!moved.is_transient(), "{kind:?}: {moved}");
            assert!(fake.pr(pr.number).open, "{kind:?}");
            forge.merge(pr.number, &"e".repeat(40)).await.unwrap();
            let merged = fake.pr(pr.number);
            assert_eq!(
                (merged.merged, merged.merged_by.as_deref()),
                (true, Some(TOKEN_USER))
            );
        });
    }
}
