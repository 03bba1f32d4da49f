//! `sluice run`: the daemon. Ticks, then sleeps until the earliest due time of any canary or
//! the next poll; SIGTERM/SIGINT end it between ticks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{error, info};

use crate::cli::repo::RepoArgs;
use crate::observe::Live;
use crate::reconcile::{tick, Context};
use crate::spec::reader::parse_duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub repo: RepoArgs,
    /// Longest sleep between ticks (new commits are seen at the latest after this).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub poll: Duration,
    #[arg(long, default_value_t = 8)]
    pub push_attempts: u32,
}

/// How long to sleep: until the earliest wake time, bounded by the poll interval.
pub fn sleep_for(
    wake_at: Option<jiff::Timestamp>,
    now: jiff::Timestamp,
    poll: Duration,
) -> Duration {
    let until_wake = wake_at
        .map(|w| {
            let d = w.duration_since(now);
            Duration::try_from(d).unwrap_or(Duration::ZERO)
        })
        .unwrap_or(poll);
    until_wake.min(poll).max(Duration::from_millis(50))
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;
    let mut locked = args.repo.open()?;
    let observer = Live::new()?;
    let ctx = Context {
        observer: &observer,
        author: None,
        push_attempts: args.push_attempts,
    };
    info!(msg = "sluice started", branch = %args.repo.branch);
    while !stop.load(Ordering::SeqCst) {
        let wait = match tick(&mut locked.repo, &ctx, jiff::Timestamp::now()) {
            Ok(report) => {
                crate::cli::reconcile::print_report(&report);
                sleep_for(report.wake_at(), jiff::Timestamp::now(), args.poll)
            }
            Err(e) => {
                error!(msg = "Tick failed", error = %e);
                args.poll
            }
        };
        let until = Instant::now() + wait;
        while Instant::now() < until && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
        }
    }
    info!(msg = "sluice stopped");
    Ok(0)
}
