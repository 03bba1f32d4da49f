//! Argo Rollouts through the real binary: one `sluice run` (`--listen 127.0.0.1:0
//! --probe-listen 127.0.0.1:0`, the stepped clock) on a real git remote holding one Rollout
//! per namespace, each `apps/<namespace>/` a trafficRouting kind (Istio, NGINX, SMI, Traefik,
//! APISIX, the Gateway API plugin's HTTPRoute, GRPCRoute, TCPRoute and TLSRoute), a
//! replica-based canary or a blue/green Rollout, each analysed by an AnalysisTemplate on a real
//! Prometheus. A human releases 6.7.1 of every one: each promotes to Succeeded; two whose query
//! fails roll back to stable; two whose `pause: {}` waits open an approval pull request on a
//! fake forge (at HTTP level) and promote once a human merges it. Then for every Rollout:
//! every output document at every sluice commit passes its strict schema, `kubectl kustomize`
//! builds the output, the `Sluice-Weights` trailers go through the steps in order and the
//! `Sluice-Step` trailers name each step once; `sluice audit` replays the whole history.

use std::path::Path;

use serde_json::Value as Json;

use crate::support::forge::{ForgeFake, Kind};
use crate::support::prometheus::{osm_exposition, Scraped};
use crate::support::rollout::{
    analysis_template, blue_green_rollout, distinct, every_commit_drawn_by_sluice, grpc_route,
    http_route, indented, kustomize_builds, replica_rollout, replica_services, rollout,
    rollout_services, routed, services, tcp_route, tls_route, virtual_service, ANALYSED,
    APISIX_ROUTE, APISIX_ROUTING, BLUE_GREEN_ANALYSES, INGRESS, ISTIO_ROUTING, NGINX_ROUTING,
    SMI_ROUTING, SWITCHED, TRAEFIK_ROUTING, TRAEFIK_SERVICE,
};
use crate::support::{
    daemon_on_remote, git, human_clone, human_commit, merge_approval, show, topo_commits_of,
    until_ticks, Schemas,
};

/// How a case's rollout of 6.7.1 ends.
#[derive(Clone, Copy, Debug, PartialEq)]
enum End {
    /// Its analysis passes: Succeeded, 6.7.1 stable.
    Promoted,
    /// Its query fails the condition: Failed, all traffic back on 6.7.0.
    RolledBack,
    /// `pause: {}` opens an approval pull request; merged, it promotes.
    Approved,
}

/// One Rollout of the repo, in namespace (and folder `apps/<ns>/`) `ns`. Its texts are
/// written for `prod` and moved to `ns` by [`in_namespace`].
struct Case {
    ns: &'static str,
    /// The Rollout at a version.
    rollout: fn(&str) -> String,
    /// The other files of `apps/<ns>/` (Services, the user's route object).
    sources: fn() -> Vec<(&'static str, String)>,
    end: End,
    /// The distinct `Sluice-Weights` of its commits, in order.
    weights: &'static [&'static str],
}

/// The weights of [`canary_steps`]: 20 through the pause and the analysis, 60, promoted.
const STEPPED: [&str; 4] = [
    "primary=100 canary=0",
    "primary=80 canary=20",
    "primary=40 canary=60",
    "primary=100 canary=0",
];

/// The weights of a rollback after the first weight.
const ROLLED_BACK: [&str; 3] = [
    "primary=100 canary=0",
    "primary=80 canary=20",
    "primary=100 canary=0",
];

/// `setWeight: 20`, `pause: <pause>`, the `canary-up` analysis, `setWeight: 60`.
fn canary_steps(pause: &str) -> String {
    let first = "        - setWeight: 20\n";
    assert!(ANALYSED.starts_with(first));
    ANALYSED.replacen(first, &format!("{first}        - pause: {pause}\n"), 1)
}

fn timed() -> String {
    canary_steps("{duration: 30s}")
}

fn approval() -> String {
    canary_steps("{}")
}

/// The Services the Gateway API, Istio, SMI, Traefik and APISIX Rollouts name, with `route`
/// (the user's route object) beside them.
fn with_route(route: String) -> Vec<(&'static str, String)> {
    vec![("services.yaml", services()), ("route.yaml", route)]
}

const CASES: [Case; 15] = [
    Case {
        ns: "istio",
        rollout: |v| routed(ISTIO_ROUTING, v, &timed()),
        sources: || {
            with_route(virtual_service(
                "host: podinfo-stable",
                "host: podinfo-canary",
            ))
        },
        end: End::Promoted,
        weights: &STEPPED,
    },
    Case {
        ns: "nginx",
        rollout: |v| routed(NGINX_ROUTING, v, &timed()),
        sources: || with_route(INGRESS.to_string()),
        end: End::Promoted,
        weights: &STEPPED,
    },
    Case {
        ns: "smi",
        rollout: |v| routed(SMI_ROUTING, v, &timed()),
        sources: || vec![("services.yaml", services())],
        end: End::Promoted,
        weights: &STEPPED,
    },
    Case {
        ns: "traefik",
        rollout: |v| routed(TRAEFIK_ROUTING, v, &timed()),
        sources: || with_route(TRAEFIK_SERVICE.to_string()),
        end: End::Promoted,
        weights: &STEPPED,
    },
    Case {
        ns: "apisix",
        rollout: |v| routed(APISIX_ROUTING, v, &timed()),
        sources: || with_route(APISIX_ROUTE.to_string()),
        end: End::Promoted,
        weights: &STEPPED,
    },
    Case {
        ns: "httproute",
        rollout: |v| rollout(v, "httpRoute", &timed()),
        sources: || with_route(http_route()),
        end: End::Promoted,
        weights: &STEPPED,
    },
    Case {
        ns: "grpcroute",
        rollout: |v| rollout(v, "grpcRoute", &timed()),
        sources: || with_route(grpc_route()),
        end: End::Promoted,
        weights: &STEPPED,
    },
    Case {
        ns: "tcproute",
        rollout: |v| rollout(v, "tcpRoute", &timed()),
        sources: || with_route(tcp_route()),
        end: End::Promoted,
        weights: &STEPPED,
    },
    Case {
        ns: "tlsroute",
        rollout: |v| rollout(v, "tlsRoute", &timed()),
        sources: || with_route(tls_route()),
        end: End::Promoted,
        weights: &STEPPED,
    },
    Case {
        ns: "replicas",
        rollout: |v| replica_rollout(v, &timed()),
        sources: || vec![("services.yaml", replica_services())],
        end: End::Promoted,
        weights: &STEPPED,
    },
    Case {
        ns: "istio-fails",
        rollout: |v| routed(ISTIO_ROUTING, v, &timed()),
        sources: || {
            with_route(virtual_service(
                "host: podinfo-stable",
                "host: podinfo-canary",
            ))
        },
        end: End::RolledBack,
        weights: &ROLLED_BACK,
    },
    Case {
        ns: "httproute-fails",
        rollout: |v| rollout(v, "httpRoute", &timed()),
        sources: || with_route(http_route()),
        end: End::RolledBack,
        weights: &ROLLED_BACK,
    },
    Case {
        ns: "httproute-approval",
        rollout: |v| rollout(v, "httpRoute", &approval()),
        sources: || with_route(http_route()),
        end: End::Approved,
        weights: &STEPPED,
    },
    Case {
        ns: "nginx-approval",
        rollout: |v| routed(NGINX_ROUTING, v, &approval()),
        sources: || with_route(INGRESS.to_string()),
        end: End::Approved,
        weights: &STEPPED,
    },
    // A blue/green Rollout, both promotion analyses passing.
    Case {
        ns: "bluegreen",
        rollout: |v| blue_green_rollout(v, &indented(BLUE_GREEN_ANALYSES)),
        sources: || {
            vec![(
                "services.yaml",
                rollout_services(["podinfo-active", "podinfo-preview"]),
            )]
        },
        end: End::Promoted,
        weights: &SWITCHED,
    },
];

/// `text` (written for namespace `prod`) in namespace `ns`.
fn in_namespace(text: &str, ns: &str) -> String {
    assert!(text.contains("namespace: prod"), "{text}");
    text.replace("namespace: prod", &format!("namespace: {ns}"))
}

impl Case {
    fn rollout_file(&self) -> String {
        format!("apps/{}/rollout.yaml", self.ns)
    }

    fn rollout_at(&self, version: &str) -> String {
        in_namespace(&(self.rollout)(version), self.ns)
    }

    /// The Rollout at 6.7.0, its sources and its AnalysisTemplate (which `up`, 1, fails when
    /// the case rolls back).
    fn files(&self) -> Vec<(String, String)> {
        let condition = match self.end {
            End::RolledBack => "result[0] >= 2",
            End::Promoted | End::Approved => "result[0] >= 1",
        };
        let mut files = vec![
            (self.rollout_file(), self.rollout_at("6.7.0")),
            (
                format!("apps/{}/analysis.yaml", self.ns),
                in_namespace(&analysis_template(condition), self.ns),
            ),
        ];
        for (name, text) in (self.sources)() {
            files.push((
                format!("apps/{}/{name}", self.ns),
                in_namespace(&text, self.ns),
            ));
        }
        files
    }

    fn id(&self) -> String {
        format!("{}/podinfo", self.ns)
    }

    fn output(&self) -> String {
        format!("clusters/{}/podinfo", self.ns)
    }

    fn status_file(&self) -> String {
        format!(".sluice/status/{}/podinfo.yaml", self.ns)
    }
}

/// The statuses of every case at main, read in-process (the waits ask every 20 ms).
fn statuses(bare: &Path, cases: &[Case]) -> Vec<Json> {
    let repo = git2::Repository::open_bare(bare).unwrap();
    cases
        .iter()
        .map(|case| {
            repo.revparse_single(&format!("main:{}", case.status_file()))
                .ok()
                .and_then(|o| o.peel_to_blob().ok())
                .and_then(|b| serde_saphyr::from_str(&String::from_utf8_lossy(b.content())).ok())
                .unwrap_or(Json::Null)
        })
        .collect()
}

fn phases(bare: &Path, cases: &[Case]) -> Vec<String> {
    statuses(bare, cases)
        .iter()
        .map(|s| s["phase"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Whether every case's phase is `want(case)`.
fn all_in(bare: &Path, cases: &[Case], want: impl Fn(&Case) -> &'static str) -> bool {
    phases(bare, cases)
        .iter()
        .zip(cases)
        .all(|(phase, case)| phase == want(case))
}

/// Every case's phase, and main's last commits (what a failed wait prints).
fn phase_list(bare: &Path, cases: &[Case]) -> String {
    let list: Vec<String> = phases(bare, cases)
        .iter()
        .zip(cases)
        .map(|(phase, case)| format!("{}={phase}", case.ns))
        .collect();
    let last = git(bare, &["log", "-20", "--format=%s", "main"]);
    format!("{}\nlast commits:\n{last}", list.join(" "))
}

/// At every sluice commit of `case`: every document of its output folder passes its strict
/// schema. Returns the commits' `Sluice-Weights`, in order.
fn check_every_commit(bare: &Path, case: &Case, schemas: &mut Schemas) -> Vec<String> {
    let commits = topo_commits_of(bare, &case.id());
    assert!(!commits.is_empty(), "{}: no sluice commit", case.ns);
    let mut weights = Vec::new();
    for (sha, trailer) in commits {
        let files = git(
            bare,
            &[
                "ls-tree",
                "-r",
                "--name-only",
                &sha,
                &format!("{}/", case.output()),
            ],
        );
        for file in files.lines().filter(|f| f.ends_with(".yaml")) {
            let docs: Vec<Json> = serde_saphyr::from_multiple(&show(bare, &sha, file)).unwrap();
            for doc in docs.iter().filter(|d| d["kind"] != "Kustomization") {
                schemas.assert_valid(doc, &format!("{} {sha} {file}", case.ns));
            }
        }
        weights.push(trailer);
    }
    weights
}

/// `case`'s commits on main, oldest first: subject, phase, step and weights.
fn history(bare: &Path, case: &Case) -> String {
    let format = "--format=%s | %(trailers:key=Sluice-Phase,valueonly,separator=) | %(trailers:key=Sluice-Step,valueonly,separator=) | %(trailers:key=Sluice-Weights,valueonly,separator=)";
    let grep = format!("--grep=Sluice-Canary: {}$", case.id());
    git(
        bare,
        &["log", "--reverse", "--topo-order", &grep, format, "main"],
    )
}

/// The `Sluice-Step` trailers of `case`'s commits that advance it, oldest first.
fn advance_steps(bare: &Path, case: &Case) -> Vec<String> {
    let format = "--format=%(trailers:key=Sluice-Canary,valueonly,separator=)|%(trailers:key=Sluice-Step,valueonly,separator=)|%s";
    git(bare, &["log", "--reverse", "--topo-order", format, "main"])
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, '|');
            let (id, step, subject) = (parts.next()?, parts.next()?, parts.next()?);
            (id.trim() == case.id() && subject.contains("advance canary weight"))
                .then(|| step.trim().to_string())
        })
        .collect()
}

/// The blue/green Rollout among them once switched back to the old pods for one commit during
/// its postPromotionAnalysis ("analysis running at canary weight 0"), seen three runs of three
/// at 01ecd3f, never since (three runs of three at 21a57ff): its distinct weights must be
/// exactly [`SWITCHED`], so a switch-back fails here.
#[test]
fn sluice_run_rolls_out_a_rollout_of_each_traffic_routing_kind_fake_forge() {
    run_all(&CASES);
}

/// One `sluice run` over `cases`, each released at 6.7.1, to its end; then the checks of
/// every case's commits.
fn run_all(cases: &[Case]) {
    let started = std::time::Instant::now();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scraped = rt.block_on(Scraped::start_instant(osm_exposition));
    let fake = ForgeFake::start(Kind::GitHub);
    let config = scraped.prom.repo_config() + &fake.settings();
    let mut files = vec![(".sluice/config.yaml".to_string(), config)];
    for case in cases {
        files.extend(case.files());
    }
    let pairs: Vec<(&str, &str)> = files
        .iter()
        .map(|(f, t)| (f.as_str(), t.as_str()))
        .collect();
    let on = daemon_on_remote(&pairs, |d| {
        d.stepped()
            .poll("1m")
            .env("SLUICE_FORGE_TOKEN", "fake-forge-token")
    });
    until_ticks(
        &on,
        "initialized",
        || all_in(&on.bare, cases, |_| "Initialized"),
        || phase_list(&on.bare, cases),
    );
    let human = human_clone(&on.bare.display().to_string(), &on.tmp.path().join("human"));
    for case in cases {
        human_commit(
            &human,
            &case.rollout_file(),
            &case.rollout_at("6.7.1"),
            &format!("{}: 6.7.1", case.ns),
        );
    }
    let approvals: Vec<&Case> = cases.iter().filter(|c| c.end == End::Approved).collect();
    until_ticks(
        &on,
        "waiting for approvals",
        || {
            fake.count() == approvals.len()
                && statuses(&on.bare, cases).iter().zip(cases).all(|(s, c)| {
                    c.end != End::Approved
                        || (s["phase"] == "WaitingApproval" && s["canaryWeight"] == 20)
                })
        },
        || {
            format!(
                "{} pull requests, {}",
                fake.count(),
                phase_list(&on.bare, cases)
            )
        },
    );
    for number in 1..=fake.count() as u64 {
        let pr = fake.pr(number);
        assert!(
            approvals
                .iter()
                .any(|c| pr.head.starts_with(&format!("sluice/{}/", c.id()))),
            "{pr:?}"
        );
        merge_approval(&human, &pr.head, "merge");
        fake.set(number, false, true);
    }
    until_ticks(
        &on,
        "every rollout done",
        || {
            all_in(&on.bare, cases, |c| match c.end {
                End::Promoted | End::Approved => "Succeeded",
                End::RolledBack => "Failed",
            })
        },
        || phase_list(&on.bare, cases),
    );
    let ran = started.elapsed();

    let mut schemas = Schemas::default();
    for case in cases {
        let weights = check_every_commit(&on.bare, case, &mut schemas);
        assert_eq!(
            distinct(weights),
            case.weights,
            "{}:\n{}\nmain:\n{}",
            case.ns,
            history(&on.bare, case),
            git(
                &on.bare,
                &[
                    "log",
                    "--reverse",
                    "--format=%h %s %(trailers:key=Sluice-Canary,valueonly,separator=)",
                    "main"
                ]
            )
        );
        let stable = show(
            &on.bare,
            "main",
            &format!("{}/podinfo-stable.yaml", case.output()),
        );
        let version = match case.end {
            End::RolledBack => "podinfo:6.7.0",
            End::Promoted | End::Approved => "podinfo:6.7.1",
        };
        assert!(stable.contains(version), "{}: {stable}", case.ns);
        let steps = advance_steps(&on.bare, case);
        let mut once = steps.clone();
        once.dedup();
        assert_eq!(steps, once, "{}: each step advanced once", case.ns);
        kustomize_builds(&on.bare, &case.output());
        let checks = crate::support::judge::trailers_of_commits(
            &on.bare,
            "Sluice-Check",
            Some(&format!("Sluice-Canary: {}$", case.id())),
        );
        let verdict = match case.end {
            End::RolledBack => "canary-up=1 fail",
            End::Promoted | End::Approved => "canary-up=1 pass",
        };
        assert!(
            checks.iter().any(|c| c == verdict),
            "{}: {checks:?}",
            case.ns
        );
        println!("{}: steps {steps:?}", case.ns);
    }
    let shas: Vec<String> = git(&on.bare, &["log", "--format=%H", "main"])
        .lines()
        .map(str::to_string)
        .collect();
    let sluice_shas: Vec<String> = cases
        .iter()
        .flat_map(|c| topo_commits_of(&on.bare, &c.id()))
        .map(|(sha, _)| sha)
        .filter(|sha| shas.contains(sha))
        .collect();
    every_commit_drawn_by_sluice(&on.bare, &sluice_shas);
    crate::support::audit::clean(&on.bare);
    println!(
        "{} Rollouts through sluice run: {:?} to the last phase, {:?} with the checks",
        cases.len(),
        ran,
        started.elapsed()
    );
    drop(on);
    drop(scraped);
}
