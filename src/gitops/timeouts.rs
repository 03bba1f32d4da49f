//! How long a git network operation may wait on the server.
//!
//! libgit2 waits forever by default: a remote that accepts the connection and never answers
//! blocks a fetch, and with it the daemon's tick and its shutdown. Its process-wide socket
//! options bound the connect and every read and write (git://, http(s) and ssh alike); a stall
//! then fails as a transient [`Error::Network`](super::Error::Network) "timed out" and the next
//! tick tries again.
//!
//! The options are global C state, so they are set exactly once per process (in the crate
//! `src/crates/libgit2_opts/`, which holds the unsafe call), before the first git operation: [`set_network_timeout`] from the command line, or the default on the first
//! [`ConfigRepo::open_or_clone`](super::ConfigRepo::open_or_clone).

use std::time::Duration;

/// The default bound on connecting and on each read or write: long enough for a slow server
/// under load, short enough that a stalled one costs a tick, not the daemon.
pub const DEFAULT_NETWORK_TIMEOUT: Duration = Duration::from_secs(30);

/// Bounds every later git connect, read and write by `timeout` (at least 1 ms, at most about
/// 24 days), for the whole process. Only the first call (or the first clone or fetch, which
/// applies [`DEFAULT_NETWORK_TIMEOUT`]) takes effect; returns the timeout in effect.
pub fn set_network_timeout(timeout: Duration) -> Duration {
    sluice_libgit2_opts::set_socket_timeouts_once(timeout)
}

/// Applies the default timeout unless one is set already.
pub(super) fn ensure() {
    set_network_timeout(DEFAULT_NETWORK_TIMEOUT);
}
