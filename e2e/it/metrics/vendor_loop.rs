//! The whole loop with the real binary and each vendor metric provider (datadog, newrelic,
//! graphite, influxdb, dynatrace, splunk, cloudwatch): a table of [`Vendor`]s, one shared
//! harness ([`run_loop`]). For each vendor the canaries share one repo: one whose local fake of
//! the vendor's API answers within the threshold is promoted; one whose fake answers above it
//! rolls back, its value in the commit; and, for vendors that read a Secret, one whose Secret
//! is not mapped never promotes and sends nothing. The credentials come from the operator's
//! mapped Secrets (environment variables for some vendors, files under `SLUICE_SECRETS_DIR` for
//! others) or, for CloudWatch, from the AWS variables of sluice's own environment; every
//! request each fake received carries them (CloudWatch's a SigV4 signature the test
//! recomputes) and the query rendered for that canary, as the vendor documents it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::metrics::{
    loop_deployment as deployment, phase, Canned, Recorded, Server, LOOP_INTERVAL,
};
use crate::support::vendors::{canary, env_var, render, template, Mapped, Vendor};
use crate::support::vendors::{
    CLOUDWATCH, DATADOG, DYNATRACE, GRAPHITE, INFLUXDB, NEWRELIC, SPLUNK,
};
use crate::support::{git, human_clone, human_commit, reconcile, seeded_remote, str_pairs};

/// A value each healthy fake answers: within `thresholdRange: {max: 1}`.
const WITHIN: f64 = 0.5;
/// A value each faulty fake answers: above the threshold.
const ABOVE: f64 = 7.5;

fn finished(p: &str) -> bool {
    p.starts_with("Succeeded") || p.starts_with("Failed")
}

/// One canary of a vendor: its name, the fake its template reaches and the Secret it names.
struct Case {
    app: String,
    fake: Arc<Server>,
    secret: &'static str,
}

/// One vendor's canaries and their fakes.
struct Cases<'v> {
    vendor: &'v Vendor,
    within: Case,
    above: Case,
    /// None for [`Mapped::Environment`], which reads no Secret.
    unmapped: Option<Case>,
}

impl Cases<'_> {
    fn all(&self) -> impl Iterator<Item = &Case> {
        [&self.within, &self.above]
            .into_iter()
            .chain(&self.unmapped)
    }
}

/// Runs `vendors` through the loop in one repo (see the module docs) until every canary has
/// finished, then checks phases, commits and every request each fake received.
async fn run_loop(vendors: &[&Vendor]) {
    let mut cases = Vec::new();
    for &vendor in vendors {
        let k = vendor.kind;
        let answer = vendor.answer;
        let (within, above) = (k.to_string(), format!("{k}-faulty"));
        let (within_fake, above_fake, unmapped) = match vendor.mapped {
            Mapped::Environment { carries, .. } => {
                let (ok, bad) = (render(vendor.query, &within), render(vendor.query, &above));
                let fake = Arc::new(
                    Server::start_routed(move |r| {
                        if carries(r, &ok) {
                            answer(WITHIN)
                        } else if carries(r, &bad) {
                            answer(ABOVE)
                        } else {
                            Canned::new(400, "no canary sends this query")
                        }
                    })
                    .await,
                );
                (Arc::clone(&fake), fake, None)
            }
            Mapped::Env | Mapped::Files => (
                Arc::new(Server::start(vec![answer(WITHIN)]).await),
                Arc::new(Server::start(vec![answer(ABOVE)]).await),
                Some(Case {
                    app: format!("{k}-unmapped"),
                    fake: Arc::new(Server::start(vec![answer(WITHIN)]).await),
                    secret: "not-mapped",
                }),
            ),
        };
        cases.push(Cases {
            vendor,
            within: Case {
                app: within,
                fake: within_fake,
                secret: k,
            },
            above: Case {
                app: above,
                fake: above_fake,
                secret: k,
            },
            unmapped,
        });
    }
    let tmp = tempfile::tempdir().unwrap();
    let secrets_dir = tmp.path().join("secrets");
    let mut env = vec![(
        "SLUICE_SECRETS_DIR".to_string(),
        secrets_dir.display().to_string(),
    )];
    for case in &cases {
        let vendor = case.vendor;
        for (key, value) in vendor.keys {
            match vendor.mapped {
                Mapped::Env => env.push((env_var(vendor.kind, key), value.to_string())),
                Mapped::Files => {
                    let dir = secrets_dir.join("test").join(vendor.kind);
                    std::fs::create_dir_all(&dir).unwrap();
                    // As `kubectl create secret` from a file written with `echo`.
                    std::fs::write(dir.join(key), format!("{value}\n")).unwrap();
                }
                Mapped::Environment { .. } => env.push((key.to_string(), value.to_string())),
            }
        }
        if let Mapped::Environment { endpoint_var, .. } = vendor.mapped {
            env.push((endpoint_var.to_string(), case.within.fake.url()));
        }
    }
    let mut files: Vec<(String, String)> = Vec::new();
    for case in &cases {
        for Case { app, fake, secret } in case.all() {
            files.push((
                format!("apps/{app}/deployment.yaml"),
                deployment(app, &format!("{app}:1")),
            ));
            files.push((format!("apps/{app}/canary.yaml"), canary(app)));
            files.push((
                format!("apps/{app}/metrics.yaml"),
                template(app, case.vendor, &fake.url(), secret),
            ));
        }
    }
    let apps: Vec<&str> = cases
        .iter()
        .flat_map(|c| c.all().map(|c| c.app.as_str()))
        .collect();
    let seed = str_pairs(&files);
    let bare = seeded_remote(tmp.path(), &seed);
    let workdir = tmp.path().join("w");
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    tokio::task::block_in_place(|| {
        reconcile(&bare, &workdir, &env);
        git(&human, &["pull", "-q", "origin", "main"]);
        for app in &apps {
            human_commit(
                &human,
                &format!("apps/{app}/deployment.yaml"),
                &deployment(app, &format!("{app}:2")),
                &format!("{app} 2"),
            );
        }
        // Each reconcile at the next check's time (the canaries' interval), without waiting.
        let clock = crate::support::Stepped::default();
        let deadline = Instant::now() + Duration::from_secs(120);
        while !apps.iter().all(|a| finished(&phase(&bare, a))) {
            let phases: Vec<String> = apps.iter().map(|a| phase(&bare, a)).collect();
            assert!(Instant::now() < deadline, "timed out: {apps:?} {phases:?}");
            clock.jump(LOOP_INTERVAL);
            let mut at = env.clone();
            at.push(clock.env());
            reconcile(&bare, &workdir, &at);
        }
    });
    let log = git(&bare, &["log", "--format=%s%n%b", "main"]);
    for case in &cases {
        let (ok, bad) = (&case.within.app, &case.above.app);
        let vendor = case.vendor;
        let k = vendor.kind;
        assert_eq!(
            phase(&bare, ok),
            "Succeeded:0",
            "{k}: within the threshold: promoted"
        );
        assert_eq!(
            phase(&bare, bad),
            "Failed:0",
            "{k}: above the threshold: rolled back"
        );
        let rollback = log
            .lines()
            .find(|l| l.starts_with(&format!("{bad}: roll back")))
            .unwrap_or_else(|| panic!("{k}: a rollback commit:\n{log}"));
        assert!(rollback.contains("error-rate 7.5 > 1"), "{k}: {rollback}");
        for (_, value) in vendor.keys {
            assert!(!log.contains(value), "{k}: a Secret value in git:\n{log}");
        }
        if let Some(unmapped) = &case.unmapped {
            assert_eq!(
                phase(&bare, &unmapped.app),
                "Failed:0",
                "{k}: no credentials: never promoted"
            );
            let first_key = env_var(unmapped.secret, vendor.keys[0].0);
            assert!(
                log.contains(&first_key),
                "{k}: the unmapped canary's failure says what to set ({first_key}):\n{log}"
            );
            assert!(
                unmapped.fake.requests().is_empty(),
                "{k}: nothing is sent without credentials"
            );
        }
        // Every query the fakes received carried the credentials and that canary's query. A
        // fake the canaries share is asked only their queries.
        let mut carried = 0;
        for Case { app, fake, .. } in [&case.within, &case.above] {
            let rendered = render(vendor.query, app);
            let requests: Vec<Recorded> = match vendor.mapped {
                Mapped::Environment { carries, .. } => fake
                    .requests()
                    .into_iter()
                    .filter(|r| carries(r, &rendered))
                    .collect(),
                Mapped::Env | Mapped::Files => fake.requests(),
            };
            assert!(!requests.is_empty(), "{app}");
            carried += requests.len();
            for r in &requests {
                (vendor.check)(r, &rendered);
            }
        }
        if let Mapped::Environment { .. } = vendor.mapped {
            let all = case.within.fake.requests();
            assert_eq!(carried, all.len(), "{k}: a query no canary sends: {all:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datadog_canaries_promote_within_the_threshold_and_roll_back_above_it() {
    run_loop(&[&DATADOG]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newrelic_graphite_influxdb_and_dynatrace_canaries_promote_within_the_threshold_and_roll_back_above_it(
) {
    run_loop(&[&NEWRELIC, &GRAPHITE, &INFLUXDB, &DYNATRACE]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn splunk_and_cloudwatch_canaries_promote_within_the_threshold_and_roll_back_above_it() {
    run_loop(&[&SPLUNK, &CLOUDWATCH]).await;
}
