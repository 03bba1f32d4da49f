//! Benchmark: `sluice audit` beside `git log -p` on the same repo, in the same run, so the
//! ratio holds on a loaded machine where the times do not. Reports numbers; asserts nothing
//! about time.
//!
//! | row | sluice | baseline | goal |
//! |---|---|---|---|
//! | audit | `sluice audit` of C canaries' history: every canary initialised, then every one started on a new revision (`commits: perCanary`, 2C sluice commits) | `git log -p` of the same branch | ≤ 10× |
//! | per commit | audit's wall time per commit at C canaries | the same at C/10 canaries | ≤ 1.5× |
//!
//! The repos are made by the real binary (`sluice reconcile`, twice) in a folder under
//! `CARGO_TARGET_TMPDIR`, on the file system the build is on (not a tmpfs `/tmp`). Times are
//! wall-clock medians; `/usr/bin/time` gives audit's peak RSS. The measuring is in
//! `audit_rows.rs`, which `tick.rs` includes too to print the same rows.
//!
//! Run: `cargo bench --bench audit`. Scale with `SLUICE_BENCH_CANARIES` (default 1000: 2,000
//! commits) and `SLUICE_BENCH_RUNS` (median of, default 3); `-- --quick` is 100 canaries, one
//! run (`SLUICE_BENCH_CANARIES` still scales it). A debug build (`cargo test --all-targets`
//! runs this too) does the quick case: its numbers are indicative only.

// A benchmark is test code (built without `cfg(test)`, as `harness = false`): it may unwrap.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

#[path = "audit_rows.rs"]
mod audit_rows;

fn met(ratio: f64, goal: f64) -> &'static str {
    if ratio <= goal {
        "met"
    } else {
        "not met"
    }
}

fn main() {
    let quick = cfg!(debug_assertions) || std::env::args().any(|a| a == "--quick");
    let env_or = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (canaries, runs) = if quick {
        (env_or("SLUICE_BENCH_CANARIES", 100), 1)
    } else {
        (
            env_or("SLUICE_BENCH_CANARIES", 1000),
            env_or("SLUICE_BENCH_RUNS", 3).max(1),
        )
    };
    println!("| row | sluice | baseline (same run) | ratio | goal | met | sluice peak RSS |");
    println!("|---|---:|---:|---:|---|---|---:|");
    audit_rows::rows(canaries, runs, |row| {
        println!(
            "| {} | {} | {} | {:.*}× | {} | {} |{} |",
            row.name,
            row.sluice,
            row.baseline,
            row.digits,
            row.ratio,
            row.goal,
            met(row.ratio, row.bound),
            row.rss
                .map_or(String::new(), |rss| format!(" {rss:.1} MiB"))
        );
    });
}
