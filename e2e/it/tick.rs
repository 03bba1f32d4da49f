//! The tick's flow against a real bare remote: a push rejected because someone else pushed is
//! decided again on the new head, and what a tick announces is what reached the remote.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use jiff::Timestamp;
use sluice::core::decide::Decision;
use sluice::gitops::ConfigRepo;
use sluice::manifest::model::Canary;
use sluice::manifest::settings::Settings;
use sluice::metrics::metric_templates::TemplateIndex;
use sluice::observer::{External, Observer, Request};
use sluice::tick::tick;

use crate::support::{
    git, human_clone, human_commit, route_only_web, seeded_remote, sluice_clone, str_pairs,
    tick_context,
};

const FILE: &str = "apps/web.yaml";

fn canary(revision: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: web, namespace: shop}}\nspec:\n  routeOnly: {{services: [web-blue, web-green], revision: \"{revision}\"}}\n  service: {{port: 8080}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  analysis: {{interval: 1s, stepWeights: [50]}}\n"
    )
}

/// `n` route-only canaries `shop/web0`.. at v1, one file each (`apps/web<i>.yaml`).
fn webs(n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            (
                format!("apps/web{i}.yaml"),
                canary("v1").replace("name: web,", &format!("name: web{i},")),
            )
        })
        .collect()
}

/// `files` seeded on a bare remote in `tmp`, a human's clone of it and sluice's:
/// (bare remote, human clone, sluice's clone).
fn seeded(tmp: &Path, files: &[(&str, &str)]) -> (PathBuf, PathBuf, ConfigRepo) {
    let bare = seeded_remote(tmp, files);
    let url = bare.display().to_string();
    let human = human_clone(&url, &tmp.join("human"));
    let repo = sluice_clone(&url, &tmp.join("w"));
    (bare, human, repo)
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
        _: &TemplateIndex,
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
    let (bare, human, mut repo) = seeded(tmp.path(), &[(FILE, &canary("v1"))]);
    let observer = RacingHuman {
        human: &human,
        observed: AtomicUsize::new(0),
        notified: Mutex::new(Vec::new()),
    };
    let ctx = tick_context(&observer, crate::support::runtime());
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

/// Counts the reads of each work-tree file through the runtime context's reader.
fn counting_runtime() -> (
    sluice::runtime::Runtime,
    std::sync::Arc<Mutex<std::collections::BTreeMap<std::path::PathBuf, usize>>>,
) {
    let reads = std::sync::Arc::new(Mutex::new(std::collections::BTreeMap::new()));
    let counted = std::sync::Arc::clone(&reads);
    let runtime =
        sluice::runtime::Runtime::from_env()
            .unwrap()
            .with_reader(move |path: &Path, read| {
                *counted
                    .lock()
                    .unwrap()
                    .entry(path.to_path_buf())
                    .or_insert(0) += 1;
                read(path)
            });
    (runtime, reads)
}

/// A tick reads each repo file at most once, and a file whose content the last tick parsed
/// (the same blob) not at all: after the first tick only what it wrote (the output folder and
/// the status file) is read, never the unchanged specs, sources, templates or settings.
#[test]
fn a_tick_reads_each_repo_file_once_and_unchanged_files_not_at_all() {
    use crate::support::manifests::{CONFIGS, DEPLOYMENT, FLAGGER_CANARY};
    let tmp = tempfile::tempdir().unwrap();
    let settings = "apiVersion: sluice.dev/v1alpha1\nkind: Config\nsettle: 0s\n";
    let template = "apiVersion: flagger.app/v1beta1\nkind: MetricTemplate\nmetadata: {name: latency, namespace: prod}\nspec:\n  provider: {type: prometheus, address: 'http://127.0.0.1:9'}\n  query: histogram_quantile(0.99, rate(x[1m]))\n";
    let specs = [
        ("apps/podinfo/deployment.yaml", DEPLOYMENT),
        ("apps/podinfo/configs.yaml", CONFIGS),
        ("apps/podinfo/canary.yaml", FLAGGER_CANARY),
        ("apps/templates.yaml", template),
    ];
    let mut files = specs.to_vec();
    files.push((".sluice/config.yaml", settings));
    let bare = seeded_remote(tmp.path(), &files);
    let url = bare.display().to_string();
    let work = tmp.path().join("w");
    let mut repo = sluice_clone(&url, &work);
    let (runtime, reads) = counting_runtime();
    let observer = sluice::observer::Offline;
    let ctx = tick_context(&observer, &runtime);
    let now = Timestamp::now();
    // The first tick reads every file once and writes the output folder and the status file.
    let first = tick(&mut repo, &ctx, now).unwrap();
    assert_eq!(first.commits, 1, "{first:?}");
    let read_first = read_names(&reads, &work);
    for (spec, _) in &specs {
        assert!(
            read_first.iter().any(|r| r == spec),
            "{spec}: {read_first:?}"
        );
    }
    reads.lock().unwrap().clear();

    let second = tick(&mut repo, &ctx, now + std::time::Duration::from_secs(1)).unwrap();
    assert!(second.spec_errors.is_empty(), "{:?}", second.spec_errors);
    let read_once = read_names(&reads, &work);
    let unread: Vec<&str> = [
        "clusters/prod/podinfo/podinfo-primary.yaml",
        ".sluice/status/prod/podinfo.yaml",
    ]
    .into_iter()
    .filter(|expected| !read_once.iter().any(|r| r == expected))
    .collect();
    assert_eq!(
        unread,
        Vec::<&str>::new(),
        "what the first tick wrote is read through the runtime's reader (read: {read_once:?})"
    );
    let again: Vec<&String> = read_once
        .iter()
        .filter(|r| specs.iter().any(|(s, _)| s == r) || *r == ".sluice/config.yaml")
        .collect();
    assert!(
        again.is_empty(),
        "unchanged files are not read again: {again:?}"
    );
}

/// The names of the files read, each read at most once.
fn read_names(
    reads: &Mutex<std::collections::BTreeMap<std::path::PathBuf, usize>>,
    work: &Path,
) -> Vec<String> {
    reads
        .lock()
        .unwrap()
        .iter()
        .map(|(path, n)| {
            let name = path.strip_prefix(work).unwrap().display().to_string();
            assert_eq!(*n, 1, "{name} was read {n} times in one tick");
            name
        })
        .collect()
}

/// After a human changes one spec of many, the next tick reads and parses that one file of
/// the repo: the other specs, the outputs and the unchanged status files come from what the
/// ticks before it parsed, by blob id.
#[test]
fn a_tick_after_a_one_file_change_parses_that_file_only() {
    let tmp = tempfile::tempdir().unwrap();
    let specs = webs(5);
    let (_bare, human, mut repo) = seeded(tmp.path(), &str_pairs(&specs));
    let work = repo.root().to_path_buf();
    let (runtime, reads) = counting_runtime();
    let observer = sluice::observer::Offline;
    let ctx = tick_context(&observer, &runtime);
    let t0 = Timestamp::now();
    assert_eq!(tick(&mut repo, &ctx, t0).unwrap().commits, 5, "initialized");
    tick(&mut repo, &ctx, t0 + std::time::Duration::from_secs(1)).unwrap();
    let changed = &specs[3];
    human_commit(
        &human,
        &changed.0,
        &changed.1.replace("\"v1\"", "\"v2\""),
        "web3: roll out v2",
    );
    reads.lock().unwrap().clear();
    let loaded_before = runtime.spec_reads();
    let report = tick(&mut repo, &ctx, t0 + std::time::Duration::from_secs(2)).unwrap();
    assert_eq!(report.commits, 1, "web3 starts its rollout: {report:?}");
    let read = read_names(&reads, &work);
    assert_eq!(read, std::slice::from_ref(&changed.0));
    assert_eq!(
        runtime.spec_reads() - loaded_before,
        1,
        "the tick's load reads and checks the changed spec only, not every spec again"
    );
}

/// Repo settings that do not load stop every canary: defaults would drop their gates (here
/// `sync:`, which makes each step wait for Flux), so nothing is committed, and each canary's
/// outcome says why.
#[test]
fn settings_that_do_not_load_hold_every_canary_instead_of_using_defaults() {
    const SETTINGS: &str = ".sluice/config.yaml";
    let good =
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\nsync:\n  flux:\n    kustomization: apps\n";
    let tmp = tempfile::tempdir().unwrap();
    let (bare, human, mut repo) = seeded(tmp.path(), &[(FILE, &canary("v1")), (SETTINGS, good)]);
    let observer = sluice::observer::Offline;
    let ctx = tick_context(&observer, crate::support::runtime());
    let t0 = Timestamp::now();
    assert_eq!(tick(&mut repo, &ctx, t0).unwrap().commits, 1, "initialized");
    // One typo in the settings, and a new revision to roll out.
    human_commit(
        &human,
        SETTINGS,
        &format!("{good}commitz: perTick\n"),
        "settings: typo",
    );
    human_commit(&human, FILE, &canary("v2"), "web: roll out v2");
    let head = git(&bare, &["rev-parse", "main"]);
    for i in 1..=5 {
        let report = tick(&mut repo, &ctx, t0 + std::time::Duration::from_secs(60 * i)).unwrap();
        assert_eq!(report.commits, 0, "{report:?}");
        assert!(
            report
                .spec_errors
                .iter()
                .any(|e| e.to_string().starts_with(".sluice/config.yaml:6: commitz")),
            "{:?}",
            report.spec_errors
        );
        let error = report.outcomes[0].error.as_deref().unwrap_or_default();
        assert!(
            error.starts_with("held: .sluice/config.yaml:6: commitz")
                && error.contains("never falls back to default settings"),
            "{error}"
        );
    }
    assert_eq!(git(&bare, &["rev-parse", "main"]), head, "nothing pushed");
    let status = git(&bare, &["show", "main:.sluice/status/shop/web.yaml"]);
    assert!(status.contains("phase: Initialized"), "{status}");
}

/// The daemon's polls (`tick::poll`, what `sluice run` calls each time it wakes): once every
/// canary is at rest, a poll that fetches the same head reads no repo file at all; a new commit,
/// a due `wake_at` or a webhook (the loop forgets the last tick) make it tick in full again, and
/// an active canary is observed on every poll.
#[test]
fn an_idle_poll_with_an_unchanged_head_reads_no_repo_file() {
    use sluice::tick::{poll, Idle, Polled};
    let tmp = tempfile::tempdir().unwrap();
    let (_bare, human, mut repo) = seeded(tmp.path(), &[(FILE, &canary("v1"))]);
    let (runtime, reads) = counting_runtime();
    let observer = sluice::observer::Offline;
    let ctx = tick_context(&observer, &runtime);
    let start = Timestamp::now();
    let at = |s: u64| start + std::time::Duration::from_secs(s);
    let mut idle = Idle::default();
    let ticked = |repo: &mut ConfigRepo, now: Timestamp, idle: &mut Idle| {
        reads.lock().unwrap().clear();
        let polled = poll(repo, &ctx, now, idle).unwrap();
        let read = reads.lock().unwrap().len();
        match polled {
            // A tick reads only the files whose content the last tick did not parse: after a
            // commit that changed no YAML file, none (`a_tick_after_a_one_file_change...`).
            Polled::Ticked(report) => Some(report),
            Polled::Idle => {
                assert_eq!(read, 0, "an idle poll read {read} repo files");
                None
            }
        }
    };

    // Whether the poll at second `s` ticks (else it is idle), asserted as `why`.
    let polls = |repo: &mut ConfigRepo, idle: &mut Idle, s: u64, ticks: bool, why: &str| {
        assert_eq!(ticked(repo, at(s), idle).is_some(), ticks, "{why}");
    };

    // First sight commits the initialization; the poll after it finds the canary at rest.
    let first = ticked(&mut repo, at(0), &mut idle).expect("the first poll ticks");
    assert_eq!(first.commits, 1, "{first:?}");
    let settled = ticked(&mut repo, at(1), &mut idle).expect("the poll after a commit ticks");
    assert_eq!(settled.commits, 0, "{settled:?}");
    polls(&mut repo, &mut idle, 2, false, "nothing new: idle");
    polls(&mut repo, &mut idle, 3, false, "still idle");

    // A new commit, even one no canary reads, makes the next poll tick.
    human_commit(&human, "README.md", "# fleet\n", "docs: readme");
    polls(&mut repo, &mut idle, 4, true, "a new head ticks");
    polls(&mut repo, &mut idle, 5, false, "then idle again");

    // A webhook: the loop forgets the last tick, so the next poll ticks in full.
    idle.forget();
    polls(&mut repo, &mut idle, 6, true, "a webhook ticks");
    let at_rest = ticked(&mut repo, at(7), &mut idle);
    assert!(at_rest.is_none(), "idle after the webhook's tick");

    // A remembered `wake_at` that passes makes the next poll tick.
    let mut due = settled.clone();
    due.outcomes[0].wake_at = Some(at(60));
    idle.completed(repo.head(), &due);
    polls(&mut repo, &mut idle, 59, false, "wake_at not reached: idle");
    polls(&mut repo, &mut idle, 60, true, "wake_at reached: a tick");

    // A new revision starts a rollout; an active canary waits on things outside the repo
    // (the GitOps engine, readiness, webhooks), so every poll observes it.
    human_commit(&human, FILE, &canary("v2"), "web: v2");
    let started = ticked(&mut repo, at(61), &mut idle).expect("a new revision ticks");
    assert_eq!(started.commits, 1, "{started:?}");
    // Polls at the same instant: no `wake_at` has passed, yet each one observes the canary.
    for _ in 0..3 {
        let report = ticked(&mut repo, at(61), &mut idle)
            .expect("an active canary is observed on every poll");
        assert!(report.outcomes[0].phase.unwrap().is_active(), "{report:?}");
    }
}

/// The tick read the repo's MetricTemplates and reported a broken one as a spec error; the
/// live observer then read them all again and logged the same error a second time.
#[test]
fn a_broken_metric_template_is_logged_once_per_tick() {
    let tmp = tempfile::tempdir().unwrap();
    let template = "apiVersion: flagger.app/v1beta1\nkind: MetricTemplate\nmetadata: {name: latency, namespace: shop}\nspec:\n  provider: {type: prometheus, address: 'http://127.0.0.1:9'}\n  query: histogram_quantile(0.99, rate(x[1m]))\n";
    let broken = "apiVersion: flagger.app/v1beta1\nkind: MetricTemplate\nmetadata: {name: broken, namespace: shop}\nspec:\n  provider: {type: prometheus, address: 'http://127.0.0.1:9'}\n";
    // The support canary (threshold 2), with a metric read through a template.
    let canary = |revision: &str| {
        format!(
            "{}    metrics:\n    - name: latency\n      templateRef: {{name: latency}}\n      thresholdRange: {{max: 500}}\n",
            route_only_web(revision, "[{weight: 10}, {weight: 50}]")
        )
    };
    let bare = seeded_remote(
        tmp.path(),
        &[
            ("apps/web/canary.yaml", &canary("v1")),
            ("apps/templates.yaml", template),
            ("apps/broken-template.yaml", broken),
        ],
    );
    let work = tmp.path().join("w");
    // Each reconcile runs at this clock's time, jumped past the canary's 1 s interval between.
    let clock = crate::support::Stepped::default();
    let reconcile = || clock.reconcile(&bare, &work);
    reconcile();
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    human_commit(&human, "apps/web/canary.yaml", &canary("v2"), "web: v2");
    // Scaling up, the first step, then the first metric check (the query fails: nothing
    // listens on port 9).
    let checked = (0..6)
        .map(|_| {
            clock.jump(std::time::Duration::from_millis(1100));
            reconcile()
        })
        .find(|out| out.contains("failed check"))
        .expect("a tick checked the canary's metric");
    let logged: Vec<&str> = checked
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("broken-template.yaml"))
        .collect();
    assert_eq!(logged.len(), 1, "{checked}");
}

/// Each file's name and what became of its read; each object's file, line, kind and name.
type Seen = (Vec<(String, String)>, Vec<(String, usize, String, String)>);

fn seen(snapshot: &sluice::yaml::snapshot::Snapshot) -> Seen {
    use sluice::yaml::snapshot::Contents;
    let files = snapshot
        .files()
        .iter()
        .map(|f| {
            let what = match &*f.contents {
                Contents::Unreadable(e) => format!("unreadable: {e}"),
                Contents::Invalid { .. } => "invalid".to_string(),
                Contents::Yaml { .. } => "yaml".to_string(),
            };
            (f.name.clone(), what)
        })
        .collect();
    let objects = snapshot
        .objects()
        .map(|o| {
            (
                o.file.to_string(),
                o.line,
                o.kind.to_string(),
                o.name.to_string(),
            )
        })
        .collect();
    (files, objects)
}

/// The snapshot a tick keeps and moves by the files that differ since the last tick's head
/// is, after every kind of change, what a whole read of the head gives: files added, changed,
/// deleted; a file become a folder and back; a link; files in hidden folders and files that
/// are not YAML; broken YAML; a whole folder renamed; and a file whose read failed, read again
/// by the next tick although git did not change it.
#[test]
fn the_kept_snapshot_is_a_whole_read_of_the_head_after_every_change() {
    use sluice::yaml::snapshot::ReadError;
    use std::sync::atomic::AtomicBool;
    let tmp = tempfile::tempdir().unwrap();
    let cm = |n: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {n}}}\n");
    let (a, b, flaky) = (cm("a"), cm("b"), cm("flaky"));
    let (bare, human, mut repo) = seeded(
        tmp.path(),
        &[
            ("apps/a.yaml", &a),
            ("apps/b.yml", &b),
            ("apps/flaky.yaml", &flaky),
        ],
    );
    drop(bare);
    let failed_once = std::sync::Arc::new(AtomicBool::new(false));
    let failing = std::sync::Arc::clone(&failed_once);
    let runtime =
        sluice::runtime::Runtime::from_env()
            .unwrap()
            .with_reader(move |path: &Path, read| {
                if path.ends_with("apps/flaky.yaml") && !failing.swap(true, Ordering::SeqCst) {
                    return Err(ReadError::Io("busy".to_string()));
                }
                read(path)
            });
    let kept = |repo: &ConfigRepo| sluice::facts::read(repo, &runtime, None).snapshot;
    // A whole read: the head checked out by git into a fresh folder, walked.
    let whole = |repo: &ConfigRepo| {
        let out = tempfile::tempdir().unwrap();
        crate::support::run_ok(
            std::process::Command::new("sh")
                .args([
                    "-ec",
                    r#"git --git-dir "$1" archive "$2" | tar -x -C "$3""#,
                    "sh",
                ])
                .arg(repo.git_dir())
                .arg(repo.head().to_string())
                .arg(out.path()),
        );
        sluice::yaml::snapshot::Snapshot::read(out.path())
    };

    let first = kept(&repo);
    assert!(failed_once.load(Ordering::SeqCst));
    assert!(
        matches!(
            *first.file("apps/flaky.yaml").unwrap().contents,
            sluice::yaml::snapshot::Contents::Unreadable(ReadError::Io(_))
        ),
        "the first read failed"
    );
    assert_eq!(
        seen(&kept(&repo)),
        seen(&whole(&repo)),
        "the failed read is made again on the same head"
    );

    let shell = |script: &str| {
        crate::support::run_ok(
            std::process::Command::new("sh")
                .args(["-ec", script])
                .current_dir(&human),
        );
    };
    let steps: [(&str, String); 7] = [
        (
            "a file changed, one added in a new folder",
            format!("printf '{}' > apps/a.yaml && mkdir -p apps/c && printf '{}' > apps/c/d.yaml", cm("a2"), cm("d")),
        ),
        (
            "a file deleted; files in a hidden folder and not YAML added",
            format!("git rm -q apps/b.yml && mkdir -p apps/.cache && printf '{}' > apps/.cache/x.yaml && echo notes > apps/notes.txt", cm("x")),
        ),
        (
            "a file become a folder",
            format!("git rm -q apps/a.yaml && mkdir apps/a.yaml && printf '{}' > apps/a.yaml/inner.yaml", cm("inner")),
        ),
        ("a link", "ln -s c/d.yaml apps/link.yaml".to_string()),
        ("broken YAML", "printf 'a: [1,\\n' > apps/c/d.yaml".to_string()),
        (
            "a folder become a file again",
            format!("git rm -rq apps/a.yaml && printf '{}' > apps/a.yaml", cm("back")),
        ),
        ("a folder renamed", "git mv apps fleet".to_string()),
    ];
    for (step, script) in steps {
        shell(&script);
        git(&human, &["add", "-A"]);
        git(&human, &["commit", "-q", "-m", step]);
        git(&human, &["push", "-q", "origin", "HEAD:main"]);
        repo.fetch().unwrap();
        assert_eq!(seen(&kept(&repo)), seen(&whole(&repo)), "{step}");
    }
    assert!(
        whole(&repo).file("fleet/link.yaml").is_some(),
        "the steps reached the end"
    );
}

/// A daemon keeps the parse of every file across ticks; a spec's order-preserving tree
/// (yaml-rust2's, built on first use for copying) is needed only for what is copied, so ticks
/// over canaries at rest leave it unbuilt. The check for deleted canaries looked every canary
/// up with `Snapshot::find`, which built it for every spec: a 1,000-canary daemon held 3 MiB
/// of trees no one used.
#[test]
fn ticks_over_canaries_at_rest_do_not_build_the_specs_order_preserving_trees() {
    use sluice::yaml::snapshot::Contents;
    let tmp = tempfile::tempdir().unwrap();
    let specs = webs(3);
    let (_bare, _human, mut repo) = seeded(tmp.path(), &str_pairs(&specs));
    let runtime = sluice::runtime::Runtime::from_env().unwrap();
    let observer = sluice::observer::Offline;
    let ctx = tick_context(&observer, &runtime);
    let now = Timestamp::now();
    let first = tick(&mut repo, &ctx, now).unwrap();
    assert_eq!(first.outcomes.len(), 3, "{first:?}");
    tick(&mut repo, &ctx, now + std::time::Duration::from_secs(1)).unwrap();
    let snapshot = sluice::facts::read(&repo, &runtime, None).snapshot;
    for (path, _) in &specs {
        let file = snapshot.file(path).unwrap();
        let Contents::Yaml { yaml, .. } = &*file.contents else {
            panic!("{path} parsed");
        };
        assert!(
            yaml.get().is_none(),
            "{path}: its yaml-rust2 tree was built"
        );
    }
}
