//! Time is an input: every read of the time and every wait in `src/` that decides when
//! something happens goes through the runtime's one clock (`src/clock.rs`), so that tests can
//! step it. This test fails on any direct read of the system's clock outside `clock.rs` and
//! the reads listed below, each with why it stays on the wall clock. Test code (items under
//! `#[cfg(test)]`, `tests/` folders) and comments are not looked at.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::repo_root;

/// What reads the system's clock, or waits on it, directly.
const READS: &[&str] = &[
    "Timestamp::now(",
    "SystemTime::now(",
    "Instant::now(",
    "Zoned::now(",
    "Signature::now(",
    "thread::sleep(",
    "time::sleep(",
    ".elapsed(",
];

/// The direct reads that stay: (file, pattern, how many, why).
const ALLOWED: &[(&str, &str, usize, &str)] = &[
    // sluice run's sleeps: how long is the clock's (`real_wait`, then `step`); these only wait
    // that real time out in slices, watching for a stop or a webhook, and bound the exit.
    ("src/cli/run.rs", "Instant::now(", 4, "a sleep's real part, watching for a stop or a webhook; the stop grace bounds the exit in real time"),
    ("src/holding.rs", "Instant::now(", 1, "what a renewal holds ends at its renew deadline in this replica's monotonic time (as client-go measures it), so that skewed or stepped clocks cannot expire a live replica"),
    ("src/renewal.rs", "Instant::now(", 4, "the Lease renewal task's attempts start every retry period of real time, as the Leases live in real time; a background task must not move a stepped clock"),
    ("src/cli/run.rs", "thread::sleep(", 3, "a sleep's real part, watching for a stop or a webhook; the stop grace bounds the exit in real time"),
    ("src/cli/demo.rs", "Instant::now(", 2, "the demo's bound in real time, so that a stuck demo ends whatever its clock says"),
    ("src/cli/demo.rs", "Signature::now(", 1, "git's commit dates are the wall clock's"),
    ("src/gitops/change.rs", "Signature::now(", 1, "git's commit dates are the wall clock's"),
    ("src/cli/adopt.rs", "Signature::now(", 1, "git's commit dates are the wall clock's (the user's own signature when git has one)"),
    ("src/cli/dashboard.rs", "time::sleep(", 1, "how often the server task looks for a stop request; not a schedule"),
    ("src/server/listener.rs", "time::sleep(", 1, "a pause after a failed accept (no file descriptor left): network IO"),
    ("src/gitops/push.rs", "thread::sleep(", 2, "backoff after a rejected push: the other writer races on the wall clock"),
    ("src/gitops/remote.rs", ".elapsed(", 1, "the age of a ref lock file: its mtime is the file system's wall clock"),
    ("src/metrics/cloudwatch.rs", "SystemTime::now(", 1, "a SigV4 signature's date: AWS refuses a request signed minutes off its own clock"),
];

/// The file's code lines: comments left out, and each item under `#[cfg(test)]` (up to its
/// `;` or its closing brace).
fn code_outside_tests(text: &str) -> Vec<&str> {
    let mut code = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" {
            let (mut depth, mut opened) = (0i64, false);
            for item in lines.by_ref() {
                depth += item.matches('{').count() as i64 - item.matches('}').count() as i64;
                opened |= item.contains('{');
                if (opened && depth <= 0) || (!opened && item.trim_end().ends_with(';')) {
                    break;
                }
            }
        } else if !line.trim_start().starts_with("//") {
            code.push(line);
        }
    }
    code
}

/// Every direct clock read in the `.rs` files under `dir`: (file relative to the repo, pattern)
/// -> count.
fn direct_reads(root: &Path, dir: &Path, found: &mut BTreeMap<(String, String), usize>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if path.is_dir() {
            if path
                .file_name()
                .is_some_and(|n| n == "tests" || n == "target")
            {
                continue;
            }
            direct_reads(root, &path, found);
        } else if rel.ends_with(".rs") && rel != "src/clock.rs" {
            let text = std::fs::read_to_string(&path).unwrap();
            for line in code_outside_tests(&text) {
                for pattern in READS {
                    let n = line.matches(pattern).count();
                    if n > 0 {
                        *found
                            .entry((rel.clone(), (*pattern).to_string()))
                            .or_default() += n;
                    }
                }
            }
        }
    }
}

#[test]
fn time_is_read_only_through_the_runtime_clock() {
    let root = repo_root();
    let mut found = BTreeMap::new();
    direct_reads(&root, &root.join("src"), &mut found);
    let allowed: BTreeMap<(String, String), usize> = ALLOWED
        .iter()
        .map(|(file, pattern, n, _)| ((file.to_string(), pattern.to_string()), *n))
        .collect();
    let mut wrong = Vec::new();
    for (at, n) in &found {
        let allowed_n = allowed.get(at).copied().unwrap_or(0);
        if *n > allowed_n {
            wrong.push(format!(
                "{}: {} read {n} times, {allowed_n} allowed: read the runtime's clock \
                 (runtime.clock(), crate::clock), or list it here with why it must stay \
                 on the wall clock",
                at.0, at.1
            ));
        }
    }
    for (at, n) in &allowed {
        if found.get(at).copied().unwrap_or(0) < *n {
            wrong.push(format!(
                "{}: {} is allowed {n} times but read fewer: lower the count",
                at.0, at.1
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The `phaseSince` a first `sluice reconcile` of a new canary writes, with `clock` as
/// `SLUICE_CLOCK` (`None`: the variable unset, as in every real run).
fn first_phase_since(clock: Option<&str>) -> jiff::Timestamp {
    let tmp = tempfile::tempdir().unwrap();
    let bare = crate::support::seeded_remote(
        tmp.path(),
        &[(
            "apps/web/canary.yaml",
            &crate::support::route_only_web("v1", "[{weight: 50}]"),
        )],
    );
    let mut reconcile = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
    reconcile
        .args(["reconcile", "--repo"])
        .arg(&bare)
        .arg("--workdir")
        .arg(tmp.path().join("w"))
        .env("SLUICE_LOG", "error")
        .env_remove(sluice::clock::VAR);
    if let Some(clock) = clock {
        reconcile.env(sluice::clock::VAR, clock);
    }
    crate::support::run_ok(&mut reconcile);
    let status = crate::support::show(&bare, "main", ".sluice/status/shop/web.yaml");
    let since = status
        .lines()
        .find_map(|l| l.strip_prefix("phaseSince: "))
        .unwrap_or_else(|| panic!("no phaseSince in {status}"));
    since.trim().trim_matches(['\'', '"']).parse().unwrap()
}

#[test]
fn without_the_test_hook_sluice_reads_the_wall_clock() {
    let before = jiff::Timestamp::now();
    let since = first_phase_since(None);
    let after = jiff::Timestamp::now();
    assert!(
        before <= since && since <= after,
        "{before} <= {since} <= {after}"
    );
    let stepped = first_phase_since(Some("stepped@2020-01-01T00:00:00Z"));
    assert_eq!(stepped.to_string(), "2020-01-01T00:00:00Z");
}
