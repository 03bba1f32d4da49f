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
//! The variable is read once at start; its only other value is `wall` (the default).

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// The environment variable that chooses the clock: `wall` (the default) or `stepped`.
pub const VAR: &str = "SLUICE_CLOCK";

/// Where a command reads the time.
#[derive(Debug)]
pub enum Clock {
    /// The system's time; sleeping waits.
    Wall,
    /// A time that moves only by what the command sleeps (tests).
    Stepped(Mutex<Timestamp>),
}

/// `SLUICE_CLOCK` holds neither `wall` nor `stepped`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{VAR}={0:?}: expected wall (the default) or stepped (tests: time moves only by what sluice sleeps)")]
pub struct UnknownClock(pub String);

impl Clock {
    /// The clock `value` (of [`VAR`]) names; none is the wall clock.
    pub fn named(value: Option<&str>) -> Result<Clock, UnknownClock> {
        match value {
            None | Some("" | "wall") => Ok(Clock::Wall),
            Some("stepped") => Ok(Clock::Stepped(Mutex::new(Timestamp::now()))),
            Some(other) => Err(UnknownClock(other.to_string())),
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

    /// Whether time moves only by sleeps (a test's clock).
    pub fn is_stepped(&self) -> bool {
        matches!(self, Clock::Stepped(_))
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
    }
}
