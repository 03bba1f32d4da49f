//! libgit2's process-wide options sluice sets: the socket timeouts and the object cache's
//! size, each set once per process.
//!
//! libgit2 waits forever by default on a server that accepts a connection and never answers.
//! Its process-wide options bound the connect and every read and write (git://, http(s) and
//! ssh alike). git2 exposes them as `unsafe fn` because they write global C state that sockets
//! read unsynchronised; this crate sets them exactly once, behind a `OnceLock`, so the caller
//! only has to make the first call before its first git network operation.

// A test may unwrap: its panic is the failure it reports. Everywhere else the workspace lints
// (Cargo.toml) reject unwrap() and expect().
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

use std::sync::OnceLock;
use std::time::Duration;

static APPLIED: OnceLock<Duration> = OnceLock::new();
static CACHE_LIMIT: OnceLock<usize> = OnceLock::new();

/// Bounds libgit2's cache of parsed objects, shared by every repository of the process, to
/// about `bytes` (libgit2 counts objects' raw sizes; its default is 256 MiB). Only the first
/// call takes effect; every call returns the limit in effect.
pub fn limit_object_cache_once(bytes: usize) -> usize {
    *CACHE_LIMIT.get_or_init(|| {
        let bytes = bytes.min(isize::MAX as usize);
        // SAFETY: the setter writes a global that libgit2 reads when it stores an object in a
        // cache. This runs once, inside `OnceLock::get_or_init`, and the caller makes that
        // first call before it opens any repository (sluice: at the start of every command,
        // and in `ConfigRepo::open_or_clone` for library callers), so no cache reads it
        // concurrently. The call cannot fail for this option.
        unsafe {
            let _ = git2::opts::set_cache_max_size(bytes as isize);
        }
        bytes
    })
}

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
    fn the_first_cache_limit_set_stays_in_effect() {
        assert_eq!(limit_object_cache_once(1 << 20), 1 << 20);
        assert_eq!(limit_object_cache_once(8 << 20), 1 << 20);
        // SAFETY: reads the global the calls above wrote; no other test of this crate opens a
        // repository or sets the option.
        let (_, allowed) = unsafe { git2::opts::get_cached_memory() }.unwrap();
        assert_eq!(allowed, 1 << 20, "libgit2 applies the limit");
    }

    #[test]
    fn the_first_timeout_set_stays_in_effect() {
        let first = set_socket_timeouts_once(Duration::from_secs(7));
        assert_eq!(first, Duration::from_secs(7));
        assert_eq!(set_socket_timeouts_once(Duration::from_secs(1)), first);
    }
}
