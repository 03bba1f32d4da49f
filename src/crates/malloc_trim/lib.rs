//! Gives the memory the C allocator holds free back to the system.
//!
//! A daemon's tick at 1,000 canaries allocates tens of MiB (parses, renders, a pack) and frees
//! them when it ends. glibc's allocator keeps most of what was freed mapped, in the main heap
//! and in the arenas of the threads that freed it, so the idle daemon's resident set stayed at
//! its busiest tick's (12 of 70 MiB at rest were free memory glibc kept). `malloc_trim(0)`
//! returns every free page of every arena (glibc 2.8 and later also free pages inside the
//! heap, with `madvise`). It costs about a millisecond; the daemon calls it after a tick.
//!
//! On other C libraries it does nothing.

// A test may unwrap: its panic is the failure it reports.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

/// Returns the allocator's free memory to the system; whether any was returned (always
/// `false` where the C library has no `malloc_trim`).
pub fn release_free_memory() -> bool {
    trim()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() -> bool {
    // SAFETY: malloc_trim takes the allocator's own locks, reads and changes only the
    // allocator's state, and is safe to call from any thread at any time (glibc documents it
    // MT-Safe); it frees nothing that is in use.
    unsafe { libc::malloc_trim(0) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory allocated and freed is handed back: the resident set after a trim is below what
    /// it was with the freed memory still held.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn freed_memory_leaves_the_resident_set() {
        fn rss_kib() -> u64 {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap()
        }
        // Many small blocks (below the mmap threshold, so they live in the heap), touched,
        // then freed except the last, which keeps the heap's top from shrinking by itself.
        let mut blocks: Vec<Vec<u8>> = (0..20_000).map(|i| vec![i as u8; 4000]).collect();
        let keep = blocks.pop();
        drop(blocks);
        let held = rss_kib();
        assert!(release_free_memory(), "glibc returned memory");
        let after = rss_kib();
        assert!(
            after + 40_000 < held,
            "about 80 MB freed, resident set {held} KiB before the trim, {after} KiB after"
        );
        drop(keep);
    }
}
