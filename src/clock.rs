//! The one clock a command reads time from and sleeps on, held by the [`crate::runtime::Runtime`].
//!
//! In every normal run it is the wall clock: `now` is the system time and `sleep` waits. Tests
//! may ask for a stepped clock with [`VAR`]`=stepped`: it starts at the wall clock's time and
//! moves only when the command sleeps, by exactly the time it would have slept, so a demo whose
//! canary pauses 10 s between steps (Flagger's floor) runs through in the time its ticks take.
//! `sluice demo` sleeps on it (its own temporary repo and embedded metrics source; nothing
//! else sees its timestamps), and so does `sluice run`, which still waits a few milliseconds of
//! real time per sleep so that pushes and webhooks can arrive (see [`crate::cli::run`]); a
//! stepped daemon is for tests whose outside parts do not read the wall clock. Decisions,
//! status files and `Sluice-Replay` records carry the stepped time, so `sluice audit` replays
//! them; git's commit dates stay the wall clock's.
//!
//! `stepped@<RFC 3339 time>` starts the stepped clock at that time instead: a one-shot command
//! such as `sluice reconcile` never sleeps, so a test steps its clock by starting each run at
//! the next due time (`support::Stepped`), where it would otherwise sleep until then.
//! The variable is read once at start; its only other value is `wall` (the default).
//!
//! Every read of the time and every wait in sluice that decides when something happens goes
//! through here; what still reads the system's clock directly is listed with its reason in
//! `e2e/it/clock_reads.rs`, which fails on any other.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};

/// The environment variable that chooses the clock: `wall` (the default) or `stepped`.
pub const VAR: &str = "SLUICE_CLOCK";

/// The real time a sleep on a stepped clock waits before the clock moves on by the whole
/// sleep: long enough for a test's push or webhook to land between polls and for the loop not
/// to spin, short enough that a minute of canary time passes in well under a second.
pub const STEPPED_PAUSE: Duration = Duration::from_millis(20);

/// Where a command reads the time.
#[derive(Debug)]
pub enum Clock {
    /// The system's time; sleeping waits.
    Wall,
    /// A time that moves only by what the command sleeps (tests).
    Stepped(Mutex<Timestamp>),
}

/// `SLUICE_CLOCK` holds neither `wall`, `stepped` nor `stepped@<time>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{VAR}={0:?}: expected wall (the default), stepped or stepped@<RFC 3339 time> (tests: time moves only by what sluice sleeps)")]
pub struct UnknownClock(pub String);

impl Clock {
    /// The clock `value` (of [`VAR`]) names; none is the wall clock.
    pub fn named(value: Option<&str>) -> Result<Clock, UnknownClock> {
        match value {
            None | Some("" | "wall") => Ok(Clock::Wall),
            Some("stepped") => Ok(Clock::Stepped(Mutex::new(Timestamp::now()))),
            Some(other) => match other.strip_prefix("stepped@").map(str::parse::<Timestamp>) {
                Some(Ok(start)) => Ok(Clock::Stepped(Mutex::new(start))),
                Some(Err(_)) | None => Err(UnknownClock(other.to_string())),
            },
        }
    }

    /// The time now.
    pub fn now(&self) -> Timestamp {
        match self {
            Clock::Wall => Timestamp::now(),
            Clock::Stepped(at) => *at.lock().unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// Waits `wait` on the wall clock; moves a stepped clock forward by `wait` at once.
    pub fn sleep(&self, wait: Duration) {
        match self {
            Clock::Wall => std::thread::sleep(wait),
            Clock::Stepped(at) => {
                let mut at = at.lock().unwrap_or_else(PoisonError::into_inner);
                let step = SignedDuration::try_from(wait).unwrap_or(SignedDuration::MAX);
                *at = at.saturating_add(step).unwrap_or(*at);
            }
        }
    }

    /// Waits `wait` on the wall clock without blocking a tokio worker; moves a stepped clock
    /// forward by `wait` at once (concurrent waits on a stepped clock add up).
    pub async fn pause(&self, wait: Duration) {
        match self {
            Clock::Wall => tokio::time::sleep(wait).await,
            Clock::Stepped(_) => {
                self.sleep(wait);
                tokio::task::yield_now().await;
            }
        }
    }

    /// Whether time moves only by sleeps (a test's clock).
    pub fn is_stepped(&self) -> bool {
        matches!(self, Clock::Stepped(_))
    }

    /// The real time a sleep of `wait` waits: all of it on the wall clock, at most
    /// [`STEPPED_PAUSE`] on a stepped one.
    pub fn real_wait(&self, wait: Duration) -> Duration {
        if self.is_stepped() {
            wait.min(STEPPED_PAUSE)
        } else {
            wait
        }
    }

    /// Moves a stepped clock on by `wait` once its real pause is over (the wall clock moved by
    /// itself), unless a stop was requested meanwhile.
    pub fn step_unless_stopped(&self, stop: &AtomicBool, wait: Duration) {
        if self.is_stepped() && !stop.load(Ordering::SeqCst) {
            self.sleep(wait);
        }
    }

    /// Sleeps `wait`, or less when a stop is requested: the wall clock waits it out, a stepped
    /// one waits [`STEPPED_PAUSE`] of real time and jumps the rest.
    pub fn sleep_unless_stopped(&self, stop: &AtomicBool, wait: Duration) {
        wait_unless_stopped(stop, self.real_wait(wait));
        self.step_unless_stopped(stop, wait);
    }
}

/// Waits `wait` of real time, or less when a stop is requested.
fn wait_unless_stopped(stop: &AtomicBool, wait: Duration) {
    let until = Instant::now() + wait;
    while !stop.load(Ordering::SeqCst) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stepped_clock_moves_only_by_its_sleeps() {
        let clock = Clock::named(Some("stepped")).unwrap();
        let start = clock.now();
        assert_eq!(clock.now(), start);
        clock.sleep(Duration::from_secs(10));
        clock.sleep(Duration::from_millis(500));
        assert_eq!(
            clock.now().duration_since(start),
            SignedDuration::from_millis(10_500)
        );
    }

    #[test]
    fn the_wall_clock_is_the_default_and_other_names_are_refused() {
        assert!(!Clock::named(None).unwrap().is_stepped());
        assert!(!Clock::named(Some("wall")).unwrap().is_stepped());
        let err = Clock::named(Some("fast")).unwrap_err();
        assert!(err.to_string().contains("expected wall"), "{err}");
        let err = Clock::named(Some("stepped@yesterday")).unwrap_err();
        assert!(err.to_string().contains("stepped@<RFC 3339 time>"), "{err}");
    }

    #[test]
    fn a_stepped_clock_may_start_at_a_given_time() {
        let clock = Clock::named(Some("stepped@2026-01-01T00:00:10Z")).unwrap();
        assert!(clock.is_stepped());
        assert_eq!(clock.now().to_string(), "2026-01-01T00:00:10Z");
        clock.sleep(Duration::from_secs(5));
        assert_eq!(clock.now().to_string(), "2026-01-01T00:00:15Z");
    }

    #[test]
    fn a_pause_on_a_stepped_clock_jumps_and_on_the_wall_clock_waits() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let clock = Clock::named(Some("stepped@2026-01-01T00:00:00Z")).unwrap();
        let real = std::time::Instant::now();
        rt.block_on(clock.pause(Duration::from_secs(30)));
        assert!(
            real.elapsed() < Duration::from_secs(5),
            "{:?}",
            real.elapsed()
        );
        assert_eq!(clock.now().to_string(), "2026-01-01T00:00:30Z");
        let real = std::time::Instant::now();
        rt.block_on(Clock::Wall.pause(Duration::from_millis(50)));
        assert!(real.elapsed() >= Duration::from_millis(50));
    }
}
