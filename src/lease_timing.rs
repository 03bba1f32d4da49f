//! When a replica renews its Leases and how long what it renewed stays its own, timed as
//! client-go's leader election times it. Pure: instants are inputs; it must not read a clock
//! or talk to the API (the task in [`crate::renewal`] does).
//!
//! For a lease duration `d`:
//! - an attempt starts every retry period, `d / 5` (client-go: 2 s of 15 s), or at once after
//!   an attempt that took longer;
//! - what was taken or renewed stays this replica's for the renew deadline, `2 d / 3`
//!   (client-go: 10 s of 15 s), measured from when the attempt *started*; past it the replica
//!   stops acting for it, a third of a lease duration before another replica can take it
//!   (the others wait a whole duration after they last saw the Lease change).

use std::time::{Duration, Instant};

/// When to renew, and how long a renewal holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renewal {
    duration: Duration,
}

impl Renewal {
    pub fn new(duration: Duration) -> Renewal {
        Renewal { duration }
    }

    /// How long a Lease lives without renewal before another replica takes it.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// How often an attempt starts: a fifth of the duration, at least 100 ms.
    pub fn retry_period(&self) -> Duration {
        (self.duration / 5).max(Duration::from_millis(100))
    }

    /// How long a take or renewal holds for this replica: two thirds of the duration.
    pub fn renew_deadline(&self) -> Duration {
        self.duration * 2 / 3
    }

    /// Whether what was renewed by an attempt started at `renewed` still holds at `now`.
    pub fn holds(&self, renewed: Instant, now: Instant) -> bool {
        now.saturating_duration_since(renewed) < self.renew_deadline()
    }

    /// When the next attempt starts after one that started at `started` and ended at `ended`:
    /// a retry period after its start, or at once when it took longer.
    pub fn next_attempt(&self, started: Instant, ended: Instant) -> Instant {
        (started + self.retry_period()).max(ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn client_go_ratios_of_a_15_s_lease() {
        let r = Renewal::new(secs(15));
        assert_eq!(r.retry_period(), secs(3));
        assert_eq!(r.renew_deadline(), secs(10));
        let short = Renewal::new(Duration::from_millis(300));
        assert_eq!(short.retry_period(), Duration::from_millis(100), "floor");
        assert_eq!(
            Renewal::new(secs(2)).renew_deadline(),
            Duration::from_nanos(1_333_333_333)
        );
    }

    /// Attempts on a stepped instant: each a retry period after the last one's start, at once
    /// after a slow one; what a renewal holds ends at the renew deadline, a third of a lease
    /// before another replica may take it.
    #[test]
    fn attempts_follow_the_retry_period_and_holding_ends_at_the_renew_deadline() {
        let r = Renewal::new(secs(15));
        let t0 = Instant::now();
        let mut at = t0;
        let mut starts = Vec::new();
        // Attempts taking 1 s, then one hung for 7 s, then 1 s again.
        for took in [1, 1, 7, 1] {
            starts.push(at.duration_since(t0).as_secs());
            at = r.next_attempt(at, at + secs(took));
        }
        assert_eq!(starts, [0, 3, 6, 13]);
        assert!(r.holds(t0, t0 + secs(9)));
        assert!(!r.holds(t0, t0 + secs(10)));
        assert!(
            r.renew_deadline() + secs(5) <= r.duration(),
            "a margin before a takeover"
        );
        // A replica whose renewals keep failing from 6 s: its renewal at 3 s holds until 13 s.
        assert!(r.holds(t0 + secs(3), t0 + secs(12)));
        assert!(!r.holds(t0 + secs(3), t0 + secs(13)));
        // An instant before the renewal (a tick's snapshot taken earlier) still holds.
        assert!(r.holds(t0 + secs(3), t0));
    }
}
