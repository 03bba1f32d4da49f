//! Drift through the loop (`loop_support`, a real `git daemon`): a file sluice owns edited by
//! hand on main holds the canary under `drift: hold` (once, with a `Sluice-Drift` commit
//! that `sluice status` shows) and is written back under `drift: restore`; approval merges
//! (merge commit, squash, rebase) and edits outside the canary's output are not drift.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value as Json};
use sluice::core::status::Phase;

use crate::support::canary;
use crate::support::metrics::{Canned, Server};
use crate::support::rollout::{
    distinct, hand_edited, no_files, show, sluice_commits, Commit, Provider, World, CANARY_FILE,
    ROUTE_FILE, STATUS_FILE, STEPPED, STEPS,
};
use crate::support::{git, human_clone, human_commit, merge_approval, seeded_remote, str_pairs};

const SETTINGS: &str = ".sluice/config.yaml";

fn config(policy: &str) -> String {
    format!("apiVersion: sluice.dev/v1alpha1\nkind: Config\ndrift: {policy}\n")
}

fn traefik(analysis: &str) -> String {
    canary::traefik().yaml(analysis)
}

/// The TraefikService's weights.
fn route(c: &Commit) -> String {
    let services = c.docs[0]["spec"]["weighted"]["services"]
        .as_array()
        .unwrap();
    let weight = |i: usize| services.get(i).map_or(0, |s| s["weight"].as_u64().unwrap());
    format!("primary={} canary={}", weight(0), weight(1))
}

const TRAEFIK: Provider = Provider {
    canary: traefik,
    files: no_files,
    route,
};

fn world(policy: &str, canary: &str) -> World {
    World::with_files(canary, &[(SETTINGS, &config(policy))])
}

fn status(bare: &Path) -> Json {
    serde_saphyr::from_str(&show(bare, "main", STATUS_FILE)).unwrap()
}

/// Ticks until the status on main satisfies `done`.
fn tick_until(w: &mut World, done: impl Fn(&Json) -> bool) {
    for _ in 0..40 {
        w.tick();
        if done(&status(&w.bare)) {
            return;
        }
    }
    panic!("never reached; status: {}", status(&w.bare));
}

/// A Traefik canary of [`STEPS`] under drift `policy`, rolling out 6.7.1 at weight 20.
fn rolling_at_20(policy: &str) -> World {
    let mut w = world(policy, &traefik(STEPS));
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    tick_until(&mut w, |s| s["canaryWeight"] == 20);
    w
}

/// The human pulls main and appends a comment to the route file.
fn note_in_route(human: &Path) {
    git(human, &["pull", "-q", "origin", "main"]);
    let route = std::fs::read_to_string(human.join(ROUTE_FILE)).unwrap();
    human_commit(
        human,
        ROUTE_FILE,
        &format!("{route}# edited\n"),
        "route: a note",
    );
}

/// `key` trailers on main, oldest first: (sha, values joined by `,`), commits without it left
/// out.
fn trailer_commits(bare: &Path, key: &str) -> Vec<(String, String)> {
    git(
        bare,
        &[
            "log",
            "--reverse",
            &format!("--format=%H|%(trailers:key={key},valueonly,separator=%x2C)"),
            "main",
        ],
    )
    .lines()
    .filter_map(|l| {
        let (sha, values) = l.split_once('|')?;
        (!values.trim().is_empty()).then(|| (sha.to_string(), values.trim().to_string()))
    })
    .collect()
}

#[test]
fn a_hand_edit_of_route_yaml_during_a_rollout_holds_the_canary_under_drift_hold() {
    let mut w = rolling_at_20("hold");
    let route = show(&w.bare, "main", ROUTE_FILE);
    let edited = hand_edited(&route);
    w.human_writes(ROUTE_FILE, &edited, "route: half the traffic by hand");
    let edit = git(&w.bare, &["rev-parse", "main"]).trim().to_string();

    for _ in 0..10 {
        w.tick();
    }
    let held = trailer_commits(&w.bare, "Sluice-Drift");
    assert_eq!(held.len(), 1, "one hold commit, not one per tick: {held:?}");
    assert_eq!(held[0].1, ROUTE_FILE);
    let head = git(&w.bare, &["rev-parse", "main"]).trim().to_string();
    assert_eq!(head, held[0].0, "nothing committed after the hold commit");
    let changed = git(&w.bare, &["show", "--name-only", "--format=", &head]);
    assert_eq!(
        changed.trim(),
        STATUS_FILE,
        "the hold commit writes the status only"
    );
    let body = git(&w.bare, &["log", "-1", "--format=%B", &head]);
    assert!(body.contains(&edit[..7]), "names the edit {edit}: {body}");
    let s = status(&w.bare);
    assert_eq!(
        (s["phase"].as_str(), &s["canaryWeight"], &s["drift"]),
        (Some("Progressing"), &json!(20), &json!([ROUTE_FILE])),
        "held at its weight: {s}"
    );
    assert_eq!(
        show(&w.bare, "main", ROUTE_FILE),
        edited,
        "the human's route stays"
    );

    // `sluice status` says so.
    git(w.human(), &["pull", "-q", "origin", "main"]);
    let out = crate::support::run_ok(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["status", "--dir"])
            .arg(w.human()),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("prod/podinfo HELD (drift): Held: clusters/prod/podinfo/route.yaml changed outside sluice"),
        "{stdout}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["status", "-o", "json", "--dir"])
        .arg(w.human())
        .output()
        .unwrap();
    let rows: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["drift"], json!([ROUTE_FILE]), "{rows}");

    // Put back by hand: the canary resumes, once, and promotes.
    w.human_writes(ROUTE_FILE, &route, "route: back to sluice's weights");
    let report = w.tick();
    assert_eq!(
        report.outcomes[0].committed.as_deref(),
        Some("podinfo: owned files are sluice's again, resuming")
    );
    w.until(Phase::Succeeded);
    assert_eq!(trailer_commits(&w.bare, "Sluice-Drift").len(), 1);
    assert!(status(&w.bare).get("drift").is_none());
    let weights = distinct(
        sluice_commits(&w.bare)
            .into_iter()
            .map(|(_, weights)| weights)
            .collect(),
    );
    assert_eq!(weights, STEPPED, "no step skipped or repeated");
}

#[test]
fn a_hand_edit_of_route_yaml_during_a_rollout_is_reverted_under_drift_restore() {
    let mut w = rolling_at_20("restore");
    let (last, _) = sluice_commits(&w.bare).pop().unwrap();
    let route = show(&w.bare, "main", ROUTE_FILE);
    w.human_writes(
        ROUTE_FILE,
        &hand_edited(&route),
        "route: half the traffic by hand",
    );

    let report = w.tick();
    assert_eq!(
        report.outcomes[0].committed.as_deref(),
        Some("podinfo: restore clusters/prod/podinfo/route.yaml changed outside sluice")
    );
    assert_eq!(
        show(&w.bare, "main", ROUTE_FILE),
        route,
        "sluice's route is back"
    );
    let restored = trailer_commits(&w.bare, "Sluice-Restored");
    let from = trailer_commits(&w.bare, "Sluice-Restored-From");
    assert_eq!(restored.len(), 1, "{restored:?}");
    assert_eq!(restored[0].1, ROUTE_FILE);
    assert_eq!(from[0].1, last, "restored from sluice's last commit");
    assert!(trailer_commits(&w.bare, "Sluice-Drift").is_empty());

    w.until(Phase::Succeeded);
    // Every sluice commit (the restore included) routes as its status says, step by step.
    assert_eq!(
        distinct(TRAEFIK.check_every_commit(&w.bare, false)),
        STEPPED
    );
    assert_eq!(trailer_commits(&w.bare, "Sluice-Restored").len(), 1);
}

fn native(revision: &str) -> String {
    crate::support::canary::route_only_smi(
        "prod",
        "podinfo",
        revision,
        "    interval: 1s\n    stepWeights: [20, 60]\n    approvals: {beforePromotion: true}",
    )
}

#[test]
fn approval_merges_and_edits_outside_the_output_are_not_drift() {
    for how in ["merge", "squash", "rebase"] {
        let mut w = world("hold", &native("v1"));
        w.until(Phase::Initialized);
        // Beside the output folder, not in it.
        w.human_writes(
            "clusters/prod/podinfo-notes/README.md",
            "notes\n",
            "notes beside the canary's output",
        );
        w.human_writes(CANARY_FILE, &native("v2"), "podinfo: v2");
        tick_until(&mut w, |s| s["phase"] == "WaitingApproval");
        let branch = w.approval_branch();
        merge_approval(w.human(), &branch, how);
        w.tick();
        let subject = git(&w.bare, &["log", "-1", "--format=%s", "main"]);
        assert_eq!(
            subject.trim(),
            "podinfo: approval merged, step clock started",
            "{how}"
        );
        w.until(Phase::Succeeded);
        assert!(
            trailer_commits(&w.bare, "Sluice-Drift").is_empty(),
            "{how}: not drift"
        );

        // A hand edit of the route after all that is.
        let route = show(&w.bare, "main", ROUTE_FILE);
        w.human_writes(ROUTE_FILE, &format!("{route}# edited\n"), "route: a note");
        w.tick();
        let held = trailer_commits(&w.bare, "Sluice-Drift");
        assert_eq!(held.len(), 1, "{how}: {held:?}");
    }
}

#[test]
fn a_hold_for_drift_is_notified_once_by_the_real_binary() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(Server::start(vec![Canned::json(200, "{}")]));
    let tmp = tempfile::tempdir().unwrap();
    let settings = format!(
        "{}notifications:\n  - {{kind: webhook, urlEnv: SLUICE_TEST_WEBHOOK}}\n",
        config("hold")
    );
    let bare = seeded_remote(
        tmp.path(),
        &[(CANARY_FILE, &native("v1")), (SETTINGS, &settings)],
    );
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    let workdir = tmp.path().join("w");
    let webhook = [(
        "SLUICE_TEST_WEBHOOK".to_string(),
        format!("{}/webhook", server.url()),
    )];
    let reconcile = || crate::support::reconcile(&bare, &workdir, &webhook);
    reconcile();
    note_in_route(&human);
    reconcile();
    reconcile();
    let hooks: Vec<Json> = server
        .requests()
        .iter()
        .filter(|r| r.target == "/webhook")
        .map(|r| r.json())
        .collect();
    assert_eq!(
        hooks.len(),
        1,
        "one notification, not one per tick: {hooks:?}"
    );
    assert_eq!(hooks[0]["event"], "drift");
    assert!(
        hooks[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("Held: clusters/prod/podinfo/route.yaml changed outside sluice by "),
        "{}",
        hooks[0]
    );
}

#[test]
fn a_hand_edit_of_the_status_file_is_named_and_undone_under_drift_hold() {
    let mut w = rolling_at_20("hold");
    let text = show(&w.bare, "main", STATUS_FILE);
    let edited = text.replace("canaryWeight: 20", "canaryWeight: 60");
    assert_ne!(edited, text);
    w.human_writes(STATUS_FILE, &edited, "status: skip ahead by hand");

    let report = w.tick();
    assert_eq!(
        report.outcomes[0].committed.as_deref(),
        Some("podinfo: held, .sluice/status/prod/podinfo.yaml changed outside sluice")
    );
    let s = status(&w.bare);
    assert_eq!(
        (&s["canaryWeight"], &s["drift"]),
        (&json!(20), &json!([STATUS_FILE])),
        "sluice never builds on a status it did not write: {s}"
    );
    // Its own status is back: the canary resumes and goes on from 20.
    let report = w.tick();
    assert_eq!(
        report.outcomes[0].committed.as_deref(),
        Some("podinfo: owned files are sluice's again, resuming")
    );
    w.until(Phase::Succeeded);
    assert_eq!(
        distinct(TRAEFIK.check_every_commit(&w.bare, false)),
        STEPPED
    );
    assert_eq!(trailer_commits(&w.bare, "Sluice-Drift").len(), 1);
}

/// Drift's check reads the commits it verifies from git objects: a hand edit of the route,
/// found and held by the real binary, creates nothing under `TMPDIR` (the verifier used to
/// write each commit it rendered again to a temporary folder).
#[test]
fn a_drift_check_by_the_real_binary_writes_nothing_under_tmpdir() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(
        tmp.path(),
        &[(CANARY_FILE, &native("v1")), (SETTINGS, &config("hold"))],
    );
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    let workdir = tmp.path().join("w");
    crate::support::reconcile(&bare, &workdir, &[]);
    note_in_route(&human);
    let watched = tmp.path().join("tmpdir");
    std::fs::create_dir(&watched).unwrap();
    let before = std::fs::metadata(&watched).unwrap().modified().unwrap();
    let env = [("TMPDIR".to_string(), watched.display().to_string())];
    crate::support::reconcile(&bare, &workdir, &env);
    let held = trailer_commits(&bare, "Sluice-Drift");
    assert!(!held.is_empty(), "the hand edit is held as drift");
    assert_eq!(std::fs::read_dir(&watched).unwrap().count(), 0);
    assert_eq!(
        std::fs::metadata(&watched).unwrap().modified().unwrap(),
        before,
        "the drift check made something under TMPDIR"
    );
}

/// A bare remote in `dir` with `n` route-only canaries `ns/app<i>` (output `clusters/app<i>`)
/// under `commits: perCanary`.
fn per_canary_remote(dir: &Path, n: usize) -> PathBuf {
    let specs: Vec<(String, String)> = (0..n)
        .map(|i| {
            let text = format!(
                "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: app{i}, namespace: ns}}\nspec:\n  routeOnly: {{services: [app{i}-blue, app{i}-green], revision: \"v1\"}}\n  output: clusters/app{i}\n  service: {{port: 8080}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  analysis: {{interval: 1m, stepWeights: [10, 50]}}\n"
            );
            (format!("apps/app{i}.yaml"), text)
        })
        .chain([(
            SETTINGS.to_string(),
            "apiVersion: sluice.dev/v1alpha1\nkind: Config\ncommits: perCanary\n".to_string(),
        )])
        .collect();
    let files = str_pairs(&specs);
    seeded_remote(dir, &files)
}

/// A remote of `n` canaries (`commits: perCanary`) after one reconcile, a human's clone of it
/// at `dir/head`, and the canaries as that clone's files load.
fn reconciled_per_canary(
    dir: &Path,
    n: usize,
) -> (PathBuf, PathBuf, sluice::manifest::load::Loaded) {
    let bare = per_canary_remote(dir, n);
    crate::support::reconcile(&bare, &dir.join("w"), &[]);
    let head = dir.join("head");
    git(dir, &["clone", "-q", &bare.display().to_string(), "head"]);
    let snapshot = sluice::yaml::snapshot::Snapshot::read(&head);
    let loaded =
        sluice::manifest::load::load(&snapshot, &sluice::manifest::settings::Settings::default());
    (bare, head, loaded)
}

/// The drift check of a tick after a perCanary tick verifies one commit per canary, each drawn
/// from a different base (the commit before it). Every base used to be read and loaded in
/// full and held until the tick ended: N bases of N specs each, which took a 1,000-canary
/// daemon past 7 GiB on its first tick. The verifier moves one base by tree diffs: the specs
/// it loads are the first base's specs and then only the files each commit changed (its
/// output folder's YAML), not one per canary per base (900 here).
#[test]
fn verifying_one_commit_per_canary_does_not_load_every_base_in_full() {
    const N: usize = 30;
    let tmp = tempfile::tempdir().unwrap();
    let (bare, head, loaded) = reconciled_per_canary(tmp.path(), N);
    let shas = trailer_commits(&bare, "Sluice-Canary");
    assert_eq!(shas.len(), N, "one initialization commit per canary");
    let mut verifier = sluice::drift::Verifier::new(&head, &Default::default());
    for (sha, id) in &shas {
        let canary = loaded
            .canaries
            .iter()
            .find(|c| &c.id.to_string() == id)
            .unwrap();
        let status = show(
            &head,
            sha,
            &sluice::render::status_file::path_for(&canary.id),
        );
        let parent = git(&head, &["rev-parse", &format!("{sha}^")]);
        let differ = verifier
            .differing(
                canary,
                &status,
                git2::Oid::from_str(sha).unwrap(),
                git2::Oid::from_str(parent.trim()).unwrap(),
            )
            .unwrap();
        assert!(differ.is_empty(), "{sha} ({id}) is sluice's: {differ:?}");
    }
    assert!(
        verifier.spec_reads() <= 4 * N,
        "{} spec reads for {N} bases of {N} canaries",
        verifier.spec_reads()
    );
}

/// Two runtimes in one process share no drift state: a commit one runtime noted as sluice's
/// own (a verdict kept by commit ids) does not answer for the other, which renders the commit
/// and finds the hand edit in it. Drift's memory was a set of process-wide statics, through
/// which every repo of the process took every other's verdicts.
#[test]
fn a_runtimes_drift_verdicts_do_not_answer_for_another_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, head, loaded) = reconciled_per_canary(tmp.path(), 1);
    let canary = &loaded.canaries[0];
    let status_path = sluice::render::status_file::path_for(&canary.id);
    let status = std::fs::read_to_string(head.join(&status_path)).unwrap();
    let listed = git(&head, &["ls-files", canary.output.as_str()]);
    let edited = listed.lines().next().unwrap().to_string();
    let text = std::fs::read_to_string(head.join(&edited)).unwrap();
    std::fs::write(head.join(&edited), format!("{text}# a human's edit\n")).unwrap();
    git(&head, &["commit", "-q", "-am", "a hand edit"]);
    let oid = |rev: &str| git2::Oid::from_str(git(&head, &["rev-parse", rev]).trim()).unwrap();
    let (files, base) = (oid("HEAD"), oid("HEAD^"));

    let runtime = || sluice::runtime::Runtime::with_env(Default::default()).unwrap();
    let (a, b) = (runtime(), runtime());
    // Runtime a notes the commit as one it made (in a clone of its own elsewhere).
    let elsewhere = tmp.path().join("elsewhere.git");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let made = sluice::drift::Made {
        canary: canary.id.to_string(),
        commit: files,
        parent: base,
        status: git2::Oid::hash_object(git2::ObjectType::Blob, status.as_bytes()).unwrap(),
    };
    sluice::drift::made(a.drift(), &elsewhere, &[made]);
    let differing = |runtime: &sluice::runtime::Runtime| {
        sluice::drift::Verifier::new(&head, runtime.drift())
            .differing(canary, &status, files, base)
            .unwrap()
    };
    assert_eq!(differing(&a), Vec::<String>::new(), "a takes its own note");
    assert_eq!(differing(&b), [edited], "b renders the commit");
}

/// The drift check proves a canary's last commit is sluice's by rendering it again. The commits
/// a sluice process made itself are sluice's by construction: it keeps a record of them in the
/// clone (`.git/sluice/made`), so the next process (a one-shot `reconcile`, a restarted daemon)
/// renders none of them: it rendered every canary's last commit again (a second at 1,000
/// canaries). A commit pushed by anyone else, whatever trailer it copies, is not in the record
/// and is still rendered and held as drift.
#[test]
fn the_next_process_takes_sluices_own_commits_from_the_clones_record_without_rendering() {
    const N: usize = 4;
    let tmp = tempfile::tempdir().unwrap();
    let bare = per_canary_remote(tmp.path(), N);
    let work = tmp.path().join("w");
    let rendered = |work: &Path| -> Vec<usize> {
        let env = [
            ("SLUICE_LOG", "error,sluice::drift=debug"),
            ("NO_COLOR", "1"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let out = crate::support::reconcile(&bare, work, &env);
        let log = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        log.lines()
            .filter(|l| l.contains("commits rendered to verify them"))
            .filter_map(|l| {
                let at = l.find("rendered=")? + "rendered=".len();
                l[at..]
                    .split(|c: char| !c.is_ascii_digit())
                    .next()?
                    .parse()
                    .ok()
            })
            .collect()
    };
    rendered(&work);
    assert_eq!(trailer_commits(&bare, "Sluice-Canary").len(), N);
    let record = std::fs::read_to_string(work.join(".git/sluice/made")).unwrap();
    assert_eq!(record.lines().count(), N, "{record}");
    assert_eq!(
        rendered(&work),
        [0],
        "the next process renders none of them"
    );

    // Another clone of the same remote has no record: it renders each canary's last commit.
    assert_eq!(rendered(&tmp.path().join("w2")).iter().sum::<usize>(), N);

    // Buried under more commits than the look-back: still the files of sluice's newest commit
    // of each canary, byte for byte, so nothing is rendered either.
    let human = tmp.path().join("human");
    git(
        tmp.path(),
        &["clone", "-q", &bare.display().to_string(), "human"],
    );
    let mut stream = String::new();
    for i in 0..=sluice::drift::LOOKBACK {
        let (note, message) = (format!("note {i}\n"), format!("notes {i}\n"));
        stream.push_str(&format!(
            "commit refs/heads/main\ncommitter human <human@example.com> {} +0000\ndata {}\n{message}{}M 100644 inline NOTES.md\ndata {}\n{note}\n",
            1_800_000_000 + i,
            message.len(),
            if i == 0 { "from refs/heads/main^0\n" } else { "" },
            note.len()
        ));
    }
    let mut import = std::process::Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(&human)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut import.stdin.take().unwrap(), stream.as_bytes()).unwrap();
    assert!(import.wait().unwrap().success());
    git(&human, &["reset", "-q", "--hard", "main"]);
    git(&human, &["push", "-q", "origin", "HEAD:main"]);
    assert_eq!(rendered(&work), [0], "past the look-back, nothing rendered");
    assert!(
        trailer_commits(&bare, "Sluice-Drift").is_empty(),
        "and no drift"
    );

    // A human edits an output file under a copied `Sluice-Canary` trailer: rendered, foreign.
    let route = "clusters/app0/app0-trafficsplit.yaml";
    let found = std::fs::read_to_string(human.join(route));
    let route = if found.is_ok() {
        route.to_string()
    } else {
        let listed = git(&human, &["ls-files", "clusters/app0"]);
        listed.lines().next().unwrap().to_string()
    };
    let text = std::fs::read_to_string(human.join(&route)).unwrap();
    std::fs::write(human.join(&route), format!("{text}# a human's edit\n")).unwrap();
    git(&human, &["add", "-A"]);
    git(
        &human,
        &[
            "commit",
            "-q",
            "-m",
            "app0: advance\n\nSluice-Canary: ns/app0",
        ],
    );
    git(&human, &["push", "-q", "origin", "HEAD:main"]);
    // Rendered twice: the commit with the copied trailer (not sluice's), then the head against
    // the commit past the look-back (it no longer holds the files of sluice's newest commit).
    assert_eq!(rendered(&work), [2], "the copied trailer is rendered");
    assert!(
        !trailer_commits(&bare, "Sluice-Drift").is_empty(),
        "and held as drift"
    );
}
