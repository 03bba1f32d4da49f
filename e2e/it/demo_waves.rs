//! `sluice demo --waves` through the real binary: one release through three cluster folders
//! (staging, prod-eu, prod-us), all in one command. It ends with the three clusters on the new
//! image, its printed `git log` shows the waves one after the other, and the whole-release
//! views (`sluice history` without `--wave`, `sluice status`) read the demo's repo back.
//!
//! prod-eu waits for an approval, which the demo gives from the CLI; with `--fail` the release
//! stops at staging and the later waves never take the failed revision.
//!
//! The demo's canary is a Flagger one: Flagger raises any analysis interval under 10 s to
//! 10 s, so each commit of the release waits 11 s (10 s and the cluster's 1 s settle) on the
//! stepped clock the tests give the demo.

use std::path::Path;

use serde_json::Value as Json;

use crate::support::{run_ok, run_sluice, show};

const WAVES: [&str; 3] = ["staging", "prod-eu", "prod-us"];

/// The printed `git log` (oldest first) as (author, wave, phase) of each line after the
/// human's image bump.
fn printed_log_after_bump(stdout: &str) -> Vec<(String, String, String)> {
    let log = stdout
        .split_once("(oldest first):\n")
        .unwrap_or_else(|| panic!("no git log printed: {stdout}"))
        .1;
    log.lines()
        .skip_while(|l| !l.contains("bump image to 6.7.1"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            let field = |i: usize| fields.get(i).copied().unwrap_or_default().to_string();
            (field(1), field(2), field(3))
        })
        .collect()
}

fn demo_bare(keep: &Path) -> std::path::PathBuf {
    keep.join("config-repo.git")
}

#[test]
fn demo_waves_rolls_one_release_through_three_clusters_in_wave_order() {
    let tmp = tempfile::tempdir().unwrap();
    let keep = tmp.path().join("demo");
    let out = run_ok(crate::support::sluice_demo(&["--waves", "--keep"]).arg(&keep));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.contains("canary demo/podinfo ended Succeeded"),
        "{stdout}"
    );

    // The header says the steps it runs, the approval, and the spacing, which the steps keep.
    for line in [
        "in each wave the canary takes one step of 50 %, then the primary takes over",
        "steps are 11 s apart: 10 s, plus the 1 s each cluster takes to apply a commit",
        "prod-eu waits for a person's approval before the release enters it",
    ] {
        assert!(stdout.contains(line), "{line:?} in {stdout}");
    }
    for wave in WAVES {
        let at = crate::support::printed_seconds(&stdout, &format!("] podinfo.{wave}: "));
        let steps = &at[at.len() - 4..];
        assert!(
            steps.windows(2).all(|w| w[1] - w[0] == 11.0),
            "{wave}: {at:?} in {stdout}"
        );
        assert_eq!(
            crate::support::line_after(&stdout, &format!("] podinfo.{wave}: promote revision")),
            ["          checks: request-success-rate 99.93 (min 99) pass, request-duration 212 (max 500) pass"],
            "{stdout}"
        );
    }
    // The approval between the waves: prod-eu waits once staging succeeded, alice approves
    // it from the CLI, and her commit starts the wave.
    assert!(
        stdout.contains("demo/podinfo.prod-eu waits for approval; alice: sluice approve demo/podinfo --wave prod-eu --reason"),
        "{stdout}"
    );

    // The printed log: every commit after the bump is sluice's but alice's approval, the
    // waves one after the other, each ending Succeeded before the next one starts.
    let log = printed_log_after_bump(&stdout);
    let by_alice: Vec<_> = log.iter().filter(|(a, _, _)| a != "sluice").collect();
    assert_eq!(
        by_alice,
        [&(
            "alice".to_string(),
            "prod-eu".to_string(),
            "Progressing".to_string()
        )],
        "{log:#?}"
    );
    let approval = log.iter().position(|(a, _, _)| a == "alice").unwrap();
    let staging_done = log
        .iter()
        .position(|(_, w, p)| w == "staging" && p == "Succeeded")
        .unwrap();
    assert_eq!(
        log[staging_done + 1],
        (
            "sluice".to_string(),
            "prod-eu".to_string(),
            "Waiting".to_string()
        ),
        "prod-eu waits for the approval once staging succeeded: {log:#?}"
    );
    assert_eq!(approval, staging_done + 2, "{log:#?}");
    let mut order: Vec<&str> = log.iter().map(|(_, wave, _)| wave.as_str()).collect();
    order.dedup();
    assert_eq!(order, WAVES, "the waves in order, none twice: {log:#?}");
    for wave in WAVES {
        let last = log.iter().rfind(|(_, w, _)| w == wave).unwrap();
        assert_eq!(last.2, "Succeeded", "{wave} ends Succeeded: {log:#?}");
    }

    // The three clusters run the new image at main, each wave's status says so.
    let bare = demo_bare(&keep);
    for wave in WAVES {
        let primary = show(
            &bare,
            "main",
            &format!("deploy/{wave}/podinfo/podinfo-primary.yaml"),
        );
        assert!(
            primary.contains("podinfo:6.7.1"),
            "{wave}'s primary runs the new image: {primary}"
        );
        let status = show(
            &bare,
            "main",
            &format!(".sluice/status/demo/podinfo.{wave}.yaml"),
        );
        assert!(status.contains("phase: Succeeded"), "{wave}: {status}");
    }

    // The commit bodies name the canary and its wave, never the instance id.
    let bodies = crate::support::git(&bare, &["log", "--format=%b", "main"]);
    assert!(
        bodies.contains("Promotion completed! Scaling down podinfo.demo (wave prod-us)"),
        "{bodies}"
    );
    assert!(!bodies.contains("podinfo.prod-us.demo"), "{bodies}");

    release_views_read_the_demo_back(&bare);
}

/// `sluice demo --waves --fail`: staging fails and rolls back, the demo says what happens to
/// the later waves, and neither takes the failed revision: no commit of theirs after the
/// image bump, nothing of 6.7.1 ever in their folders.
#[test]
fn demo_waves_fail_stops_the_release_at_the_failed_wave() {
    let tmp = tempfile::tempdir().unwrap();
    let keep = tmp.path().join("demo");
    let out = run_ok(crate::support::sluice_demo(&["--waves", "--fail", "--keep"]).arg(&keep));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    for line in [
        "canary demo/podinfo ended Failed",
        "          checks: request-success-rate 87.31 (min 99) FAIL, request-duration 212 (max 500) pass",
        "  wave prod-eu held: waiting for wave staging to succeed on revision 9e46dc7 (it is Failed on 9e46dc7)",
        "  wave prod-us held: waiting for wave prod-eu to succeed on revision 9e46dc7",
        "onFailure: hold: wave staging rolled back in its own folder; prod-eu and prod-us never take the failed revision and keep running podinfo:6.7.0",
    ] {
        assert!(stdout.contains(line), "{line:?} in {stdout}");
    }
    assert!(!stdout.contains("waits for approval"), "{stdout}");
    let log = printed_log_after_bump(&stdout);
    assert!(!log.is_empty(), "{stdout}");
    assert!(log.iter().all(|(_, wave, _)| wave == "staging"), "{log:#?}");
    assert_eq!(log.last().unwrap().2, "Failed", "{log:#?}");

    let bare = demo_bare(&keep);
    let later = ["deploy/prod-eu", "deploy/prod-us"];
    let mut args = vec!["log", "-p", "--format=", "main", "--"];
    args.extend(later);
    let written = crate::support::git(&bare, &args);
    assert!(written.contains("podinfo:6.7.0"), "{written}");
    assert!(!written.contains("6.7.1"), "{written}");
    for wave in ["prod-eu", "prod-us"] {
        let status = show(
            &bare,
            "main",
            &format!(".sluice/status/demo/podinfo.{wave}.yaml"),
        );
        assert!(status.contains("phase: Initialized"), "{wave}: {status}");
        assert!(!status.contains("9e46dc7"), "{wave}: {status}");
    }
}

/// `sluice history demo/podinfo` (no `--wave`) is the whole release, wave by wave, and
/// `sluice status` says where the release stands.
fn release_views_read_the_demo_back(bare: &Path) {
    let dir = bare.display().to_string();
    let (code, out, err) = run_sluice(&["history", "demo/podinfo", "--dir", &dir, "-o", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let entries: Vec<Json> = serde_json::from_str(&out).unwrap();
    // Three initializations, then five commits per wave, and prod-eu's wait for approval.
    assert_eq!(entries.len(), 3 + 3 * 5 + 1, "{out}");
    let waves: Vec<&str> = entries[3..]
        .iter()
        .map(|e| e["wave"].as_str().expect("every entry has its wave"))
        .collect();
    let mut order = waves.clone();
    order.dedup();
    assert_eq!(order, WAVES, "{waves:?}");
    let (code, table, err) = run_sluice(&["history", "demo/podinfo", "--dir", &dir]);
    assert_eq!(code, 0, "{table}{err}");
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["TIME", "COMMIT", "WAVE", "BY", "PHASE", "STEP", "WEIGHTS", "REASON"]
    );

    let (code, status, err) = run_sluice(&["status", "--dir", &dir]);
    assert_eq!(code, 0, "{status}{err}");
    for wave in WAVES {
        assert!(status.contains(&format!("podinfo.{wave}")), "{status}");
    }
    assert!(
        status.contains("RELEASE demo/podinfo: release of ")
            && status.contains(" done: all 3 waves run it"),
        "{status}"
    );
}

/// `sluice plan -o json` on the demo's fleet: each wave's plan carries its wave and the
/// release (waves in order, each's schedule, the release's minimum duration), with the numbers
/// the table's release section prints.
#[test]
fn plan_json_of_the_demo_fleet_has_the_release_the_table_prints() {
    let dir = tempfile::tempdir().unwrap();
    for (file, text) in sluice::cli::demo::fleet_files() {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let apps = dir.path().join("apps").display().to_string();
    let (code, out, err) = run_sluice(&["plan", &apps, "-o", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let plans: Vec<Json> = serde_json::from_str(&out).unwrap();
    let waves: Vec<&str> = plans.iter().map(|p| p["wave"].as_str().unwrap()).collect();
    assert_eq!(waves, WAVES);
    let release = &plans[0]["release"];
    assert!(plans.iter().all(|p| &p["release"] == release), "{out}");
    assert_eq!(release["namespace"], "demo");
    assert_eq!(release["name"], "podinfo");
    let names: Vec<&str> = release["waves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["wave"].as_str().unwrap())
        .collect();
    assert_eq!(names, WAVES);
    let each: Vec<u64> = release["waves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["minDurationSeconds"].as_u64().unwrap())
        .collect();
    // Each wave's schedule in the release is its own plan's.
    for (plan, wave) in plans.iter().zip(release["waves"].as_array().unwrap()) {
        assert_eq!(plan["canaryWeights"], wave["canaryWeights"]);
        assert_eq!(plan["minDurationSeconds"], wave["minDurationSeconds"]);
    }
    let total: u64 = each.iter().sum();
    assert!(total > 0);
    assert_eq!(release["minDurationSeconds"], total);

    let (code, table, err) = run_sluice(&["plan", &apps]);
    assert_eq!(code, 0, "{table}{err}");
    assert!(
        table.contains("demo/podinfo (release in 3 waves)"),
        "{table}"
    );
    assert!(
        table.contains(&format!("  minimum duration:   {total}s\n")),
        "{table}"
    );
    for (i, (wave, seconds)) in WAVES.iter().zip(&each).enumerate() {
        let line = format!("  wave {}: {wave:<12} {seconds}s, canary weights 50", i + 1);
        assert!(table.contains(&line), "{line:?} in {table}");
    }
}
