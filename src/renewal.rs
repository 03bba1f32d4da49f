//! Renews this replica's Leases on a task of its own, as client-go's leader election does on
//! its goroutine: every retry period, whatever the ticks are doing, so that a tick longer than
//! the lease duration does not lose a live replica its shards. What each renewal finds goes
//! into the shared [`Holding`] that ticks read.
//!
//! The timing is [`Renewal`]'s ([`crate::lease_timing`]): an attempt every retry period, what
//! it renewed held until the renew deadline; one attempt may not run past the renew deadline:
//! a hung API connection ends as a failed attempt and the next one starts.
//!
//! Expiry is measured on this replica's monotonic clock (`Instant`), and the task waits in real
//! time, as the Leases live in real time: the runtime's clock (stepped in tests) only gives the
//! `renewTime` written, and a background task must not move a stepped clock.

use std::sync::Arc;
use std::time::Instant;

use crate::clock::Clock;
use crate::holding::Holding;
use crate::leadership::{acquire_or_renew, Leadership, LeaseConfig};
use crate::lease_timing::Renewal;
use crate::shards::{Holders, Shards};

/// Why an attempt that did not answer in time failed.
fn no_answer(renewal: &Renewal) -> String {
    format!(
        "the Kubernetes API did not answer within the renew deadline ({:?})",
        renewal.renew_deadline()
    )
}

/// Renews the member and shard Leases of `shards` every retry period on `tokio`, recording
/// what it holds in `holding`; `report` hears each attempt (for `/readyz` and the metrics).
pub fn spawn_shards(
    tokio: &tokio::runtime::Runtime,
    mut shards: Shards,
    clock: Arc<Clock>,
    holding: Holding,
    mut report: impl FnMut(Result<Holders, String>) + Send + 'static,
) {
    let renewal = Renewal::new(shards.config().duration);
    tokio.spawn(async move {
        loop {
            let started = Instant::now();
            let attempt = shards.sync(clock.now(), started);
            let synced = tokio::time::timeout(renewal.renew_deadline(), attempt)
                .await
                .unwrap_or_else(|_| Err(no_answer(&renewal)));
            holding.set_shards(shards.held());
            report(synced);
            let next = renewal.next_attempt(started, Instant::now());
            tokio::time::sleep_until(next.into()).await;
        }
    });
}

/// Takes or renews the `--leader-election` Lease every retry period on `tokio`, recording in
/// `holding` whether this replica leads; `report` hears each attempt.
pub fn spawn_leader(
    tokio: &tokio::runtime::Runtime,
    client: ::kube::Client,
    config: LeaseConfig,
    clock: Arc<Clock>,
    holding: Holding,
    mut report: impl FnMut(Result<Leadership, String>) + Send + 'static,
) {
    let renewal = Renewal::new(config.duration);
    tokio.spawn(async move {
        loop {
            let started = Instant::now();
            let attempt = acquire_or_renew(&client, &config, clock.now());
            let led = tokio::time::timeout(renewal.renew_deadline(), attempt)
                .await
                .unwrap_or_else(|_| Err(no_answer(&renewal)));
            match &led {
                Ok(Leadership::Leader) => holding.set_leader(Some(started)),
                Ok(Leadership::Follower { .. }) => holding.set_leader(None),
                // Kept as it was: it ages out at the renew deadline.
                Err(_) => {}
            }
            report(led);
            let next = renewal.next_attempt(started, Instant::now());
            tokio::time::sleep_until(next.into()).await;
        }
    });
}
