//! How long a git network operation may wait on the server.
//!
//! libgit2 waits forever by default: a remote that accepts the connection and never answers
//! blocks a fetch, and with it the daemon's tick and its shutdown. Its process-wide socket
//! options bound the connect and every read and write (git://, http(s) and ssh alike); a stall
//! then fails as a transient [`Error::Network`](super::Error::Network) "timed out" and the next
//! tick tries again.
//!
//! The options are global C state, so they are set exactly once per process, before the first
//! git operation: [`set_network_timeout`] from the command line, or the default on the first
//! [`ConfigRepo::open_or_clone`](super::ConfigRepo::open_or_clone).

use std::sync::OnceLock;
use std::time::Duration;

/// The default bound on connecting and on each read or write: long enough for a slow server
/// under load, short enough that a stalled one costs a tick, not the daemon.
pub const DEFAULT_NETWORK_TIMEOUT: Duration = Duration::from_secs(30);

static APPLIED: OnceLock<Duration> = OnceLock::new();

/// Bounds every later git connect, read and write by `timeout` (at least 1 ms, at most about
/// 24 days), for the whole process. Only the first call (or the first clone or fetch, which
/// applies [`DEFAULT_NETWORK_TIMEOUT`]) takes effect; returns the timeout in effect.
pub fn set_network_timeout(timeout: Duration) -> Duration {
    *APPLIED.get_or_init(|| apply(timeout))
}

/// Applies the default timeout unless one is set already.
pub(super) fn ensure() {
    set_network_timeout(DEFAULT_NETWORK_TIMEOUT);
}

#[allow(unsafe_code)]
fn apply(timeout: Duration) -> Duration {
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: libgit2's option setters write a global int that its sockets read. They are
    // unsafe because that write is not synchronised with readers; it runs once, inside
    // `OnceLock::get_or_init`, which every path to a git network operation passes first
    // (`open_or_clone` calls `ensure`), so no socket of this process reads it concurrently.
    // Neither call can fail for these options.
    unsafe {
        let _ = git2::opts::set_server_connect_timeout_in_milliseconds(ms);
        let _ = git2::opts::set_server_timeout_in_milliseconds(ms);
    }
    Duration::from_millis(ms as u64)
}
