//! The fuzz campaign over the parsers that read what humans and forges send: canary specs
//! (through the tick's snapshot and `load_text`), repo settings, MetricTemplates, and the
//! webhook endpoint's request handling; over histories that edit the signing policy
//! (`signing.rs`: `sluice audit` must judge each commit by the policy at its parent); and over
//! histories that forge sluice's commits among its own (`audit.rs`: `sluice audit` must report
//! every forged change of an owned file, whatever its trailers claim, and nothing else).
//!
//! Inputs are real seeds (the Flagger corpus, `examples/`, `e2e/fuzz/seeds/`) mutated by
//! [`mutate`], generated and shrunk by proptest. Each target checks, for every input: no panic;
//! no hang and bounded memory (a watchdog aborts with the input when a case runs longer than
//! `SLUICE_FUZZ_HANG_SECONDS` or the process grows past `SLUICE_FUZZ_MAX_RSS_MB`); every
//! error names the file it came from and a line inside it; the same input gives the same
//! result twice.
//!
//! Two ways to run it:
//!
//! - `cargo test --test fuzz` (the normal suite): a smoke run of every target, fifty cases
//!   each with a fixed seed, so the harness cannot rot.
//! - `SLUICE_FUZZ_SECONDS=600 cargo test --release --test fuzz -- --ignored --nocapture
//!   fuzz_campaign`: the campaign, the time split over the targets
//!   (`SLUICE_FUZZ_TARGETS=spec,webhook` picks some). The name keeps out the other ignored
//!   tests: inputs found and kept until their fix lands.
//!   It prints every batch's seed; `SLUICE_FUZZ_SEED=<seed>` replays that batch first, and
//!   `SLUICE_FUZZ_JOURNAL=<file>` writes each input there before running it (for a crash that
//!   kills the process, such as a stack overflow).
//!
//! A failure prints the shrunk input; keep it under `e2e/fuzz/seeds/<target>/` next to the
//! parser fix and its regression test.

// Test code may unwrap: its panic is the failure it reports. The workspace lints (Cargo.toml)
// reject unwrap() and expect() only in the crates' production code.
// Long functions here are YAML fixtures and scenario tables: the one-screen limit of
// clippy.toml is for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod audit;
mod mutate;
mod signing;
#[path = "../it/support/standalone.rs"]
#[allow(dead_code)] // the fuzz targets take the canary head only
mod standalone;
mod targets;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

/// How long and how far one target runs.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Stop starting new batches after this.
    pub seconds: u64,
    /// Stop after this many cases.
    pub max_cases: u64,
    /// Cases per batch (each batch has its own printed seed).
    pub batch: u32,
    /// The first batch's seed when `SLUICE_FUZZ_SEED` is not set (`None`: from the clock).
    pub seed: Option<u64>,
}

/// What a target's run did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub cases: u64,
    pub batches: u64,
    pub elapsed: Duration,
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, found {v:?}")),
    )
}

fn seed_from_env() -> Option<u64> {
    let v = std::env::var("SLUICE_FUZZ_SEED").ok()?;
    let hex = v.trim_start_matches("0x");
    Some(u64::from_str_radix(hex, 16).unwrap_or_else(|_| {
        panic!("SLUICE_FUZZ_SEED must be a hex number as the campaign prints it, found {v:?}")
    }))
}

/// splitmix64: batch seeds from the run's seed.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn rng(seed: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&mix(seed ^ i as u64).to_le_bytes());
    }
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// Resident and peak memory of this process, in MiB (Linux `/proc/self/status`).
fn memory_mib() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb / 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Cases in a run's first batch (and the smoke run's only one).
const FIRST_BATCH: u64 = 50;

/// The case being run, for the watchdog.
struct Watch {
    target: &'static str,
    done: AtomicU64,
    stop: AtomicBool,
    input: Mutex<String>,
}

/// Aborts the process, printing the running input, when one case runs longer than `hang` or
/// the process's memory passes `max_rss_mib`. A panic cannot be raised in another thread, and
/// a hung parser never returns to be asked, so abort is the honest way out.
fn watchdog(watch: Arc<Watch>, hang: Duration, max_rss_mib: u64) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut last = (watch.done.load(Ordering::SeqCst), Instant::now());
        while !watch.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(200));
            let done = watch.done.load(Ordering::SeqCst);
            if done != last.0 {
                last = (done, Instant::now());
            }
            let rss = memory_mib().map_or(0, |(rss, _)| rss);
            let why = if last.1.elapsed() > hang {
                format!("a case ran longer than {hang:?}")
            } else if rss > max_rss_mib {
                format!("the process uses {rss} MiB, over the {max_rss_mib} MiB bound")
            } else {
                continue;
            };
            let input = watch.input.lock().map(|s| s.clone()).unwrap_or_default();
            eprintln!(
                "fuzz {}: {why}; the input:\n-----\n{input}\n-----",
                watch.target
            );
            std::process::abort();
        }
    })
}

/// Runs `property` on inputs from `strategy` until the budget is spent; panics with the shrunk
/// input on the first failure. `show` turns an input into the text a human reads (and the
/// watchdog prints).
pub fn run<S>(
    target: &'static str,
    budget: Budget,
    strategy: S,
    show: impl Fn(&S::Value) -> String,
    property: impl Fn(&S::Value) -> Result<(), TestCaseError>,
) -> Stats
where
    S: Strategy,
{
    let start = Instant::now();
    let hang = Duration::from_secs(env_u64("SLUICE_FUZZ_HANG_SECONDS").unwrap_or(30));
    let max_rss = env_u64("SLUICE_FUZZ_MAX_RSS_MB").unwrap_or(2048);
    let journal = std::env::var_os("SLUICE_FUZZ_JOURNAL");
    let watch = Arc::new(Watch {
        target,
        done: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        input: Mutex::new(String::new()),
    });
    let dog = watchdog(Arc::clone(&watch), hang, max_rss);
    let base = seed_from_env().or(budget.seed).unwrap_or_else(|| {
        mix(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64))
    });
    let mut stats = Stats::default();
    while stats.cases < budget.max_cases && start.elapsed().as_secs() < budget.seconds {
        // Batch 0 runs the given seed itself, so a printed seed replays its batch.
        let seed = if stats.batches == 0 {
            base
        } else {
            mix(base ^ stats.batches)
        };
        // Batches of about five seconds, so the time budget holds on a slow or busy machine;
        // the first is small and measures the rate.
        let elapsed = start.elapsed().as_secs_f64();
        let cases = if stats.cases == 0 {
            FIRST_BATCH
        } else {
            let rate = stats.cases as f64 / elapsed.max(0.001);
            let left = (budget.seconds as f64 - elapsed).max(0.0);
            (rate * left.min(5.0)) as u64
        };
        let cases = cases
            .clamp(1, u64::from(budget.batch))
            .min(budget.max_cases - stats.cases);
        eprintln!(
            "fuzz {target}: batch {} seed {seed:016x} ({} cases so far, {:.0?})",
            stats.batches,
            stats.cases,
            start.elapsed()
        );
        let config = Config {
            cases: cases as u32,
            failure_persistence: None,
            max_shrink_iters: 4096,
            max_shrink_time: 120_000,
            ..Config::default()
        };
        let mut runner = TestRunner::new_with_rng(config, rng(seed));
        let result = runner.run(&strategy, |value| {
            let text = show(&value);
            if let Some(path) = &journal {
                std::fs::write(path, &text).expect("SLUICE_FUZZ_JOURNAL is writable");
            }
            if let Ok(mut slot) = watch.input.lock() {
                *slot = text;
            }
            let outcome = property(&value);
            watch.done.fetch_add(1, Ordering::SeqCst);
            outcome
        });
        stats.cases += cases;
        stats.batches += 1;
        if let Err(e) = result {
            watch.stop.store(true, Ordering::SeqCst);
            let _ = dog.join();
            match e {
                TestError::Fail(why, value) => panic!(
                    "fuzz {target}: batch seed {seed:016x}: {why}\nthe shrunk input:\n-----\n{}\n-----\n{value:#?}",
                    show(&value)
                ),
                TestError::Abort(why) => panic!("fuzz {target}: batch seed {seed:016x}: {why}"),
            }
        }
    }
    watch.stop.store(true, Ordering::SeqCst);
    let _ = dog.join();
    stats.elapsed = start.elapsed();
    stats
}

/// The smoke run of the normal suite: small, fixed seeds, so it cannot rot and stays quick.
fn smoke() -> Budget {
    Budget {
        seconds: 60,
        max_cases: FIRST_BATCH,
        batch: FIRST_BATCH as u32,
        seed: Some(0x5eed),
    }
}

/// One `#[test]` per target, named after it, running its smoke budget.
macro_rules! smoke_tests {
    ($($name:ident: $target:path,)*) => {$(
        #[test]
        fn $name() {
            $target(smoke());
        }
    )*};
}

smoke_tests! {
    fuzz_smoke_spec: targets::spec,
    fuzz_smoke_settings: targets::settings,
    fuzz_smoke_metric_templates: targets::metric_templates,
    fuzz_smoke_webhook: targets::webhook,
    fuzz_smoke_signing: signing::signing,
    fuzz_smoke_audit: audit::audit_history,
}

/// The long campaign: `SLUICE_FUZZ_SECONDS` (default 600) split over the targets.
#[test]
#[ignore = "long-running fuzz campaign; see the module docs"]
fn fuzz_campaign() {
    type Target = fn(Budget) -> Stats;
    let all: [(&str, Target); 6] = [
        ("spec", targets::spec),
        ("settings", targets::settings),
        ("templates", targets::metric_templates),
        ("webhook", targets::webhook),
        ("signing", signing::signing),
        ("audit", audit::audit_history),
    ];
    let chosen: Vec<(&str, Target)> = match std::env::var("SLUICE_FUZZ_TARGETS") {
        Ok(list) => list
            .split(',')
            .map(|name| {
                *all.iter().find(|(n, _)| *n == name.trim()).unwrap_or_else(|| {
                    panic!("SLUICE_FUZZ_TARGETS: unknown target {name:?}; known: spec, settings, templates, webhook, signing, audit")
                })
            })
            .collect(),
        Err(_) => all.to_vec(),
    };
    let total = env_u64("SLUICE_FUZZ_SECONDS").unwrap_or(600);
    let max_cases = env_u64("SLUICE_FUZZ_CASES").unwrap_or(u64::MAX);
    let per = (total / chosen.len() as u64).max(1);
    let mut report = Vec::new();
    for (name, target) in chosen {
        let stats = target(Budget {
            seconds: per,
            max_cases,
            batch: 5_000,
            seed: None,
        });
        eprintln!(
            "fuzz {name}: {} cases in {} batches, {:.1?}",
            stats.cases, stats.batches, stats.elapsed
        );
        report.push((name, stats));
    }
    eprintln!("fuzz campaign: clean");
    for (name, s) in &report {
        eprintln!(
            "  {name:10} {:>9} cases {:>7.1?} ({:.0} cases/s)",
            s.cases,
            s.elapsed,
            s.cases as f64 / s.elapsed.as_secs_f64().max(0.001)
        );
    }
    if let Some((rss, peak)) = memory_mib() {
        eprintln!("  memory: {rss} MiB resident, {peak} MiB peak");
    }
}
