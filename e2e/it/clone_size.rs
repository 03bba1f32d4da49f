//! The clone stays about the size of the remote: after many perCanary ticks, whose commits
//! rewrite the same folders over and over, the work dir's `.git` is at most twice the remote's.

use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use sluice::observer::Offline;
use sluice::tick::tick;

use crate::support::canary::shop_httproute;
use crate::support::{git, human_clone, seeded_remote, sluice_clone, str_pairs, tick_context};

/// Canaries in one namespace, the worst case: every commit rewrites the namespace's status and
/// output folders, which hold an entry per canary.
const CANARIES: usize = 100;
const TICKS: usize = 10;
/// A tick's objects grow with the square of the canaries in one namespace (each commit rewrites
/// folders of one entry per canary): 100 canaries write about 1/100 of what 1,000 do. sluice
/// keeps 8 MiB of a tick's objects in memory, which 1,000 canaries use up many times over, each
/// time storing a pack; the budget shrunk by the same 1/100 makes 100 canaries store their
/// packs at the same points of the tick, so this test takes the path a 1,000-canary tick
/// takes, in seconds.
const MEMORY_BUDGET: usize = (8 << 20) / 100;

fn canary(i: usize, revision: &str) -> String {
    shop_httproute(
        &format!("app{i}"),
        revision,
        "",
        "interval: 1s, stepWeights: [5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60]",
    )
}

/// Bytes of every file under `dir`, as `du --apparent-size --bytes` counts them.
fn bytes_under(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            bytes_under(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

/// Loose objects under `objects/`: files in its two-hex-digit folders.
fn loose_objects(git_dir: &Path) -> usize {
    std::fs::read_dir(git_dir.join("objects"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().len() == 2)
        .map(|e| std::fs::read_dir(e.path()).unwrap().count())
        .sum()
}

#[test]
fn ten_per_canary_ticks_leave_the_clone_at_most_twice_the_remote() {
    let tmp = tempfile::tempdir().unwrap();
    let settings = "apiVersion: sluice.dev/v1alpha1\nkind: Config\nsettle: 0s\n";
    let files: Vec<(String, String)> = (0..CANARIES)
        .map(|i| (format!("apps/app{i}.yaml"), canary(i, "v1")))
        .chain([(".sluice/config.yaml".to_string(), settings.to_string())])
        .collect();
    let refs = str_pairs(&files);
    let bare = seeded_remote(tmp.path(), &refs);
    let url = bare.display().to_string();
    let work = tmp.path().join("w");
    let mut repo = sluice_clone(&url, &work);
    repo.set_memory_budget(MEMORY_BUDGET);
    let ctx = tick_context(&Offline, crate::support::runtime());
    let start = Timestamp::now();
    for t in 0..TICKS {
        if t == 1 {
            // A new revision for every canary: the ticks after it step each one through its
            // rollout, one commit per canary per tick.
            let human = human_clone(&url, &tmp.path().join("human"));
            for i in 0..CANARIES {
                std::fs::write(human.join(format!("apps/app{i}.yaml")), canary(i, "v2")).unwrap();
            }
            git(&human, &["commit", "-qam", "all: v2"]);
            git(&human, &["push", "-q", "origin", "HEAD:main"]);
        }
        let now = start + Duration::from_secs(60 * t as u64);
        let report = tick(&mut repo, &ctx, now).unwrap();
        assert_eq!(report.commits, CANARIES, "tick {t}: {report:?}");
    }
    // The maintenance step runs between ticks, at the next fetch.
    repo.fetch().unwrap();
    let clone = bytes_under(&work.join(".git"));
    let remote = bytes_under(&bare);
    let loose = loose_objects(&work.join(".git"));
    println!(
        "after {TICKS} ticks of {CANARIES} canaries: clone .git {clone} bytes ({loose} loose objects), remote {remote} bytes"
    );
    assert_eq!(loose, 0, "the loose objects the ticks wrote are packed");
    assert!(
        clone <= 2 * remote,
        "the clone's .git is {clone} bytes, more than twice the remote's {remote}"
    );
}
