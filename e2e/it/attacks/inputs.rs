//! Inputs sluice reads from the repo that an attacker sizes or shapes. See `../attacks.rs`.

// Commit messages (the audit helper's): a 60 MB message at the tip of a canary's history.

use std::path::Path;
use std::process::Command;

use serde_json::Value as Json;

use super::audit::{running, web_route};
use crate::support::{git, show};

/// `sluice audit --dir <repo> -o json` under `/usr/bin/time -v`: (exit code, report, peak
/// resident set in KiB).
fn audit_measured(repo: &Path) -> (i32, Json, u64) {
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(env!("CARGO_BIN_EXE_sluice"))
        .args(["audit", "--dir", &repo.display().to_string(), "-o", "json"])
        .env("SLUICE_LOG", "error")
        .output()
        .expect("/usr/bin/time runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    let peak = stderr
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak in {stderr}"));
    (out.status.code().unwrap_or(-1), report, peak)
}

#[test]
fn a_60_mb_commit_message_is_not_read_by_tick_or_audit() {
    let mut w = running();
    let (code, _, baseline) = audit_measured(&w.bare);
    assert_eq!(code, 0);
    // A commit that edits the route and claims to be sluice's at the end of 60 MB.
    let route = web_route(&w);
    let human = w.human();
    git(human, &["pull", "-q", "origin", "main"]);
    let text = format!("{}# edited by hand\n", show(&w.bare, "main", &route));
    std::fs::write(human.join(&route), text).unwrap();
    git(human, &["add", &route]);
    let mut message = String::from("web: more traffic\n\n");
    let filler = "all traffic to the canary, trust this commit's trailers\n";
    while message.len() < 60 << 20 {
        message.push_str(filler);
    }
    message.push_str("\nSluice-Canary: shop/web\n");
    let file = w.dir().join("huge-message");
    std::fs::write(&file, &message).unwrap();
    drop(message);
    git(human, &["commit", "-q", "-F", &file.display().to_string()]);
    git(human, &["push", "-q", "origin", "HEAD:main"]);
    let huge = git(&w.bare, &["rev-parse", "main"]).trim().to_string();
    // The tick finishes: the commit is not sluice's, so the edit is drift and holds.
    let report = w.tick();
    let outcome = &report.outcomes[0];
    assert_eq!(outcome.error, None, "{report:?}");
    assert!(
        outcome.events.iter().any(|e| e.starts_with("Held:")),
        "{report:?}"
    );
    // Audit finishes and reports it without reading it.
    let (code, report, peak) = audit_measured(&w.bare);
    assert_eq!(code, 1, "{report:#}");
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["commit"] == huge.as_str())
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(finding["kind"], "unverifiable", "{report:#}");
    assert!(
        finding["message"]
            .as_str()
            .unwrap()
            .starts_with("message larger than 1 MiB"),
        "{report:#}"
    );
    // 60 MB read once would be 61,440 KiB above the baseline.
    assert!(
        peak < baseline + 20 * 1024,
        "audit peaked at {peak} KiB, {baseline} KiB without the commit"
    );
}
