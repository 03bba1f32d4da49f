//! What an operator sees, with the real binary against real bare repos: `sluice status` of
//! canaries paused, held, failed and progressing shows each as it is (paused and held with who
//! and why, the Failed reason, the images of both revisions, ages people read); and the CLI's
//! rough edges (a mistyped canary, a missing repo path, `--dir`, the BY column, wording), each
//! with its message and exit code.

use std::path::Path;

use serde_json::Value as Json;

use crate::support::canary::native_podinfo;
use crate::support::manifests::DEPLOYMENT;
use crate::support::{operate_as_ada, run_sluice, run_sluice_env, World};

/// The four canaries, one per namespace, each `NS/podinfo` with its own source.
const NAMESPACES: [&str; 4] = ["paused", "held", "failed", "moving"];

fn deployment(ns: &str, version: &str) -> String {
    DEPLOYMENT
        .replace("namespace: prod", &format!("namespace: {ns}"))
        .replace("6.7.0", version)
}

fn canary(ns: &str, extra: &str) -> String {
    native_podinfo("", "    interval: 1m\n    stepWeights: [20, 60]\n")
        .replace("namespace: prod", &format!("namespace: {ns}"))
        .replace("apps/podinfo/", &format!("apps/{ns}/"))
        .replace("  service:\n", &format!("{extra}  service:\n"))
}

fn op(bare: &Path, verb: &str, canary: &str, reason: &str) -> (i32, String, String) {
    operate_as_ada(bare, verb, canary, reason)
}

/// `sluice status` of the bare repo, three days and an hour after the test started.
fn status(bare: &Path, extra: &[&str]) -> (i32, String, String) {
    let dir = bare.display().to_string();
    let mut args = vec!["status", "--dir", &dir];
    args.extend_from_slice(extra);
    let later = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(73);
    run_sluice_env(&args, &[(sluice::clock::VAR, &format!("stepped@{later}"))])
}

/// Every canary at 6.7.0 initialized, then all at 6.7.1 rolling out; then `paused/podinfo`
/// paused and `failed/podinfo` aborted by Ada, and `held/podinfo` suspended in its spec.
fn four_canaries() -> World {
    let files: Vec<(String, String)> = NAMESPACES
        .iter()
        .flat_map(|ns| {
            [
                (
                    format!("apps/{ns}/deployment.yaml"),
                    deployment(ns, "6.7.0"),
                ),
                (format!("apps/{ns}/canary.yaml"), canary(ns, "")),
            ]
        })
        .collect();
    let mut w = World::local(&crate::support::str_pairs(&files));
    w.tick();
    for ns in NAMESPACES {
        w.human_writes(
            &format!("apps/{ns}/deployment.yaml"),
            &deployment(ns, "6.7.1"),
            "podinfo: 6.7.1",
        );
    }
    w.tick();
    let (code, out, err) = op(&w.bare, "pause", "paused/podinfo", "waiting for the DBA");
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = op(&w.bare, "abort", "failed/podinfo", "bad latency");
    assert_eq!(code, 0, "{out}{err}");
    w.human_writes(
        "apps/held/canary.yaml",
        &canary("held", "  suspend: true\n"),
        "hold podinfo in held",
    );
    w
}

fn row<'a>(rows: &'a Json, ns: &str) -> &'a Json {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["namespace"] == ns)
        .unwrap_or_else(|| panic!("no row of {ns}: {rows:#}"))
}

/// `4m10s`, `3h`, `2d`: digits and a unit, at most twice; never nanoseconds.
fn readable_age(age: &str) -> bool {
    let units = age.trim_start_matches(|c: char| c.is_ascii_digit());
    let first = units.chars().next();
    let rest = &units[first.map_or(0, char::len_utf8)..];
    matches!(first, Some('s' | 'm' | 'h' | 'd'))
        && age.chars().next().is_some_and(|c| c.is_ascii_digit())
        && (rest.is_empty()
            || (rest.trim_start_matches(|c: char| c.is_ascii_digit()).len() == 1
                && matches!(rest.chars().last(), Some('s' | 'm' | 'h'))))
}

#[test]
fn status_shows_paused_held_failed_and_progressing_canaries_as_they_are() {
    let w = four_canaries();
    let (code, out, err) = status(&w.bare, &["-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let rows: Json = serde_json::from_str(&out).unwrap();

    let paused = row(&rows, "paused");
    assert_eq!(paused["phase"], "Progressing", "{paused:#}");
    assert_eq!(paused["paused"], true);
    assert_eq!(paused["held"]["kind"], "pause");
    assert_eq!(paused["held"]["by"], "Ada Ops <ada@example.com>");
    assert_eq!(paused["held"]["why"], "waiting for the DBA");

    let held = row(&rows, "held");
    assert_eq!(held["paused"], false, "{held:#}");
    assert_eq!(held["held"]["kind"], "suspend");
    assert_eq!(held["held"]["by"], "spec.suspend");

    let failed = row(&rows, "failed");
    assert_eq!(failed["phase"], "Failed", "{failed:#}");
    assert!(
        failed["reason"]
            .as_str()
            .is_some_and(|r| r.contains("aborted by hand: bad latency")),
        "{failed:#}"
    );

    let moving = row(&rows, "moving");
    assert_eq!(moving["phase"], "Progressing", "{moving:#}");
    assert_eq!(moving["paused"], false);
    assert!(moving.get("held").is_none(), "{moving:#}");
    assert!(moving.get("reason").is_none(), "{moving:#}");
    assert_eq!(
        moving["images"],
        serde_json::json!({
            "primary": {"podinfod": "ghcr.io/stefanprodan/podinfo:6.7.0"},
            "canary": {"podinfod": "ghcr.io/stefanprodan/podinfo:6.7.1"},
        })
    );
    for r in rows.as_array().unwrap() {
        // Each changed phase minutes after the test started; status reads three days later.
        assert_eq!(r["age"], "3d", "{r:#}");
        let since = r["since"].as_str().unwrap();
        assert!(since.ends_with('Z') && !since.contains('.'), "{since}");
        assert!(r["images"]["canary"]["podinfod"].is_string(), "{r:#}");
    }
    // YAML carries the same fields.
    let (code, yaml, err) = status(&w.bare, &["-o", "yaml"]);
    assert_eq!(code, 0, "{err}");
    let from_yaml: Json = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(from_yaml, rows);

    let (code, table, err) = status(&w.bare, &[]);
    assert_eq!(code, 0, "{err}");
    let line = |ns: &str| {
        table
            .lines()
            .find(|l| l.trim_start().starts_with(ns))
            .unwrap_or_else(|| panic!("no line of {ns}: {table}"))
            .to_string()
    };
    assert!(line("paused").contains("Progressing (paused)"), "{table}");
    assert!(
        line("moving")
            .contains("ghcr.io/stefanprodan/podinfo:6.7.0 -> ghcr.io/stefanprodan/podinfo:6.7.1"),
        "{table}"
    );
    assert!(line("moving").contains(" 3d "), "{table}");
    assert!(
        table.contains("paused/podinfo PAUSED by Ada Ops <ada@example.com> with `sluice pause`: waiting for the DBA (`sluice resume paused/podinfo` continues it)"),
        "{table}"
    );
    assert!(
        table.contains("held/podinfo HELD (spec.suspend): "),
        "{table}"
    );
    assert!(
        table.contains("failed/podinfo FAILED: ") && table.contains("aborted by hand: bad latency"),
        "{table}"
    );
}

#[test]
fn ages_read_as_people_write_them() {
    use sluice::readers::status::age;
    use std::time::Duration;
    let cases = [
        (0, "0s"),
        (42, "42s"),
        (60, "1m"),
        (250, "4m10s"),
        (2100, "35m"),
        (3600, "1h"),
        (11_100, "3h5m"),
        (72_000, "20h"),
        (172_800, "2d"),
        (1_000_000, "11d"),
    ];
    for (seconds, want) in cases {
        assert_eq!(age(Duration::from_secs(seconds)), want, "{seconds}s");
        assert!(readable_age(want), "{want}");
    }
}

/// A route-only `shop/web` walking `steps`, initialized at v1, its rollout of v2 started.
fn rolling_web(steps: &str) -> World {
    use crate::support::route_only_web;
    const FILE: &str = "apps/web/canary.yaml";
    let mut w = World::local(&[(FILE, &route_only_web("v1", steps))]);
    w.tick();
    w.human_writes(FILE, &route_only_web("v2", steps), "web: v2");
    w.tick();
    w
}

/// Pause, abort, retry: the retried rollout stays paused, and both the retry and the next
/// `sluice reconcile` say so (and how to resume) instead of sitting at step 0 in silence.
#[test]
fn a_retried_paused_canary_says_it_stays_paused_and_reconcile_says_why() {
    let w = rolling_web("[{weight: 20}, {weight: 60}]");
    let (code, out, err) = op(&w.bare, "pause", "shop/web", "checking");
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("stays paused"), "{out}");
    let (code, out, err) = op(&w.bare, "abort", "shop/web", "checking");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("shop/web stays paused"), "{out}");
    let (code, out, err) = op(&w.bare, "retry", "shop/web", "try again");
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("shop/web stays paused: `sluice resume shop/web` continues it"),
        "{out}"
    );
    let out = crate::support::reconcile(&w.bare, &w.dir().join("cron"), &[]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        said.trim(),
        "shop/web: no change (Progressing, paused): web.shop is paused (`sluice resume` continues it)",
    );
    let (code, out, err) = op(&w.bare, "resume", "shop/web", "done checking");
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("stays paused"), "{out}");
}

/// A route-only `shop/web` rolled out from v1 to v2 and promoted to the end.
fn promoted_web() -> World {
    let mut w = rolling_web("[{weight: 50}]");
    w.until(sluice::core::status::Phase::Succeeded);
    w
}

#[test]
fn a_mistyped_canary_is_refused_with_the_closest_name_by_every_command() {
    let w = promoted_web();
    let bare = w.bare.display().to_string();
    let said = "no canary shop/wbe (did you mean shop/web?)";
    for verb in ["approve", "promote", "abort", "retry", "pause", "resume"] {
        let (code, out, err) = op(&w.bare, verb, "shop/wbe", "typo");
        assert_eq!((code, err.trim()), (1, said), "{verb}: {out}{err}");
    }
    for args in [
        vec!["history", "shop/wbe", "--dir", &bare],
        vec!["status", "shop/wbe", "--dir", &bare],
        vec!["audit", "shop/wbe", "--dir", &bare],
    ] {
        let (code, out, err) = run_sluice(&args);
        assert_eq!((code, err.trim(), out.as_str()), (1, said, ""), "{args:?}");
    }
    let (code, _, err) = run_sluice(&["history", "prod/zzz", "--dir", &bare]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err.trim(),
        "no canary prod/zzz (the repo has shop/web; `sluice status` lists them)"
    );
    // The right name still works.
    let (code, out, err) = run_sluice(&["status", "shop/web", "--dir", &bare]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Succeeded"), "{out}");
    let (code, out, err) = run_sluice(&["audit", "shop/web", "--dir", &bare]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("0 findings"), "{out}");
}

#[test]
fn a_missing_local_repo_path_is_named_as_such() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-repo");
    let workdir = tmp.path().join("w");
    let missing = missing.display().to_string();
    let (code, _, err) = run_sluice(&[
        "reconcile",
        "--repo",
        &missing,
        "--workdir",
        &workdir.display().to_string(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("no such repository path {missing}")),
        "{err}"
    );
    assert!(!err.contains("unsupported URL protocol"), "{err}");
    assert!(!workdir.exists(), "a work dir made for nothing");
    let (code, _, err) = op(Path::new(&missing), "pause", "shop/web", "x");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no such repository path"), "{err}");
}

/// `--dir` reads a repository in place (status, history, audit, dashboard); a manual
/// operation takes its repository as `--repo PATH`, and its old `--dir` still works with a
/// warning.
#[test]
fn dir_of_a_manual_operation_still_works_and_says_it_is_deprecated() {
    let w = promoted_web();
    let bare = w.bare.display().to_string();
    let ada = "Ada Ops <ada@example.com>";
    let old_spelling = [
        "pause", "shop/web", "--dir", &bare, "--reason", "freeze", "--as", ada,
    ];
    let (code, out, err) = run_sluice(&old_spelling);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(err.trim(), sluice::cli::manual::DIR_DEPRECATED);
    assert!(out.contains("web: paused"), "{out}");
    let (_, help, _) = run_sluice(&["pause", "--help"]);
    assert!(!help.contains("--dir"), "{help}");
}

/// The table's BY column names people by name, the JSON keeps the whole identity; a reason
/// the subject already says is said once; a route-only canary's end says where the traffic is.
#[test]
fn history_is_short_where_it_can_be_and_says_each_thing_once() {
    let w = rolling_web("[{weight: 20}, {weight: 60}]");
    let (code, out, err) = op(&w.bare, "abort", "shop/web", "giving up");
    assert_eq!(code, 0, "{out}{err}");
    let bare = w.bare.display().to_string();
    let (code, table, err) = run_sluice(&["history", "shop/web", "--dir", &bare]);
    assert_eq!(code, 0, "{err}");
    let abort = table.lines().last().unwrap();
    assert!(abort.contains(" Ada Ops "), "{table}");
    assert!(!abort.contains("ada@example.com"), "{table}");
    assert!(abort.contains("aborted by hand: giving up"), "{table}");
    assert!(!abort.contains("(giving up)"), "{table}");
    let (code, json, err) = run_sluice(&["history", "shop/web", "--dir", &bare, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let entries: Json = serde_json::from_str(&json).unwrap();
    let last = entries.as_array().unwrap().last().unwrap();
    assert_eq!(last["operator"], "Ada Ops <ada@example.com>", "{last:#}");

    let w = promoted_web();
    let subjects = crate::support::git(&w.bare, &["log", "--format=%s", "main"]);
    let end = subjects.lines().next().unwrap();
    assert_eq!(end, "web: promotion completed, web-green takes all traffic");
    assert!(!subjects.contains("canary scaled down"), "{subjects}");
    // Its audit finds the rules' wording.
    crate::support::audit::clean(&w.bare);
}
