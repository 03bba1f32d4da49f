//! libgit2's socket timeouts, set once per process.
//!
//! libgit2 waits forever by default on a server that accepts a connection and never answers.
//! Its process-wide options bound the connect and every read and write (git://, http(s) and
//! ssh alike). git2 exposes them as `unsafe fn` because they write global C state that sockets
//! read unsynchronised; this crate sets them exactly once, behind a `OnceLock`, so the caller
//! only has to make the first call before its first git network operation.

use std::sync::OnceLock;
use std::time::Duration;

static APPLIED: OnceLock<Duration> = OnceLock::new();

/// Bounds every later git connect, read and write by `timeout` (clamped to 1 ms ..= about 24
/// days). Only the first call takes effect; every call returns the timeout in effect.
pub fn set_socket_timeouts_once(timeout: Duration) -> Duration {
    *APPLIED.get_or_init(|| apply(timeout))
}

fn apply(timeout: Duration) -> Duration {
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: the setters write a global int that libgit2's sockets read. This runs once,
    // inside `OnceLock::get_or_init`, and the caller makes that first call before any git
    // network operation of the process (sluice: `gitops::timeouts::ensure` in
    // `ConfigRepo::open_or_clone`), so no socket reads it concurrently. Neither call can fail
    // for these options.
    unsafe {
        let _ = git2::opts::set_server_connect_timeout_in_milliseconds(ms);
        let _ = git2::opts::set_server_timeout_in_milliseconds(ms);
    }
    Duration::from_millis(ms as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_timeout_set_stays_in_effect() {
        let first = set_socket_timeouts_once(Duration::from_secs(7));
        assert_eq!(first, Duration::from_secs(7));
        assert_eq!(set_socket_timeouts_once(Duration::from_secs(1)), first);
    }
}
