//! The tick's flow against a real bare remote: a push rejected because someone else pushed is
//! decided again on the new head, and what a tick announces is what reached the remote.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use jiff::Timestamp;
use sluice::core::decide::Decision;
use sluice::gitops::{ConfigRepo, Credentials};
use sluice::observe::{External, Observer, Request};
use sluice::spec::model::Canary;
use sluice::spec::settings::Settings;
use sluice::tick::{tick, Context};
use sluice::yaml::snapshot::Snapshot;

use crate::support::{git, human_clone, human_commit, seeded_remote};

const FILE: &str = "apps/web.yaml";

fn canary(revision: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: web, namespace: shop}}\nspec:\n  routeOnly: {{services: [web-blue, web-green], revision: \"{revision}\"}}\n  service: {{port: 8080}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  analysis: {{interval: 1s, stepWeights: [50]}}\n"
    )
}

/// Pushes a human commit while the first observation of a tick runs, so sluice's push of that
/// attempt is rejected; counts the announcements the tick makes.
struct RacingHuman<'a> {
    human: &'a Path,
    observed: AtomicUsize,
    notified: Mutex<Vec<String>>,
}

impl Observer for RacingHuman<'_> {
    fn observe(
        &self,
        _: &Snapshot,
        _: &Settings,
        requests: &[Request<'_>],
        _: Timestamp,
    ) -> Vec<External> {
        if self.observed.fetch_add(1, Ordering::SeqCst) == 0 {
            human_commit(
                self.human,
                "README.md",
                "# fleet\n",
                "docs: a human pushes first",
            );
        }
        requests.iter().map(|_| External::default()).collect()
    }

    fn notify(&self, _: &Settings, canary: &Canary, decision: &Decision) {
        self.notified
            .lock()
            .unwrap()
            .push(format!("{} {}", canary.id, decision.status.phase));
    }
}

#[test]
fn a_rejected_push_announces_each_decision_once() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(tmp.path(), &[(FILE, &canary("v1"))]);
    let url = bare.display().to_string();
    let human = human_clone(&url, &tmp.path().join("human"));
    let mut repo =
        ConfigRepo::open_or_clone(&url, "main", &tmp.path().join("w"), &Credentials::none())
            .unwrap();
    let observer = RacingHuman {
        human: &human,
        observed: AtomicUsize::new(0),
        notified: Mutex::new(Vec::new()),
    };
    let ctx = Context {
        observer: &observer,
        author: None,
        push_attempts: 5,
        runtime: crate::support::runtime(),
    };
    let report = tick(&mut repo, &ctx, Timestamp::now()).unwrap();
    assert_eq!(report.push_retries, 1, "the first push was rejected");
    assert_eq!(observer.observed.load(Ordering::SeqCst), 2, "decided twice");
    assert_eq!(
        *observer.notified.lock().unwrap(),
        ["shop/web Initialized"],
        "one announcement for the one decision that reached the remote"
    );
    let log = git(&bare, &["log", "--format=%s", "main"]);
    let subjects: Vec<&str> = log.lines().collect();
    assert_eq!(subjects.len(), 3, "{subjects:?}");
    assert_eq!(subjects[1], "docs: a human pushes first", "{subjects:?}");
}
