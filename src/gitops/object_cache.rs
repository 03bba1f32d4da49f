//! How much of libgit2's object cache a process may fill.
//!
//! libgit2 keeps every commit and tree it parses (up to 4 KiB each) in a cache shared by the
//! process's repositories, up to 256 MiB by default. A tick's own code keeps the folders it
//! writes parsed (`trees.rs`), so what libgit2 caches is mostly read once: the folders a
//! checkout compares, the history the drift check walks. At 1,000 canaries over 50
//! namespaces the cache held about 8 MiB at a tick's peak. Bounded to 1 MiB (raw bytes, as
//! libgit2 counts them), that tick peaks at about 58 MiB instead of 66 MiB. The price: a
//! push's pack builder looks up every folder of every new commit, and a bound under about
//! 8 MiB makes it read some again from the packs (perf: lookups 4 % → 10 % of the tick,
//! within the run-to-run noise of the tick's time in alternating runs). 1,000 canaries in one
//! namespace: no change in time or memory.
//!
//! The option is global C state, so it is set once per process (in the crate
//! `src/crates/libgit2_opts/`), before the first repository is opened: at the start of every command
//! ([`limit_object_cache`]) and on the first [`ConfigRepo::open_or_clone`](super::ConfigRepo::open_or_clone).

/// The bound on libgit2's object cache, in raw object bytes.
pub const OBJECT_CACHE_BYTES: usize = 1 << 20;

/// Applies [`OBJECT_CACHE_BYTES`] unless a limit is set already; call before opening any
/// repository. Returns the limit in effect.
pub fn limit_object_cache() -> usize {
    sluice_libgit2_opts::limit_object_cache_once(OBJECT_CACHE_BYTES)
}
