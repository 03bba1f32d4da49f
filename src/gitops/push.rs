//! Pushing the local branch to the remote, never by force.
//!
//! The refspec has no `+`, so the remote only accepts a fast-forward: a commit someone else
//! pushed meanwhile can never be overwritten. When that happens the push is
//! [`PushOutcome::Rejected`] and [`ConfigRepo::push_with_retry`] rebuilds our change on top of the
//! new remote head (fetch, let the caller redo its edit, push again) with jittered backoff.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use git2::Oid;

use super::credentials::redact_url;
use super::error::{Error, Result};
use super::remote::Pushed;
use super::repo::ConfigRepo;

/// The first retry waits about this long...
const BACKOFF_MIN: Duration = Duration::from_millis(50);
/// ...doubling up to this.
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// What happened to a push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushOutcome {
    /// The remote branch now points at this commit.
    Pushed(Oid),
    /// The remote branch moved since our last fetch (someone else pushed): fetch, redo, retry.
    Rejected,
}

impl ConfigRepo {
    /// Pushes the local branch to the same branch on the remote, fast-forward only.
    ///
    /// Returns [`PushOutcome::Rejected`] when the remote has commits we do not (detected locally
    /// by libgit2, or reported by the server for a race between its advertisement and our
    /// update). Other server rejections (protected branch, hook) are [`Error::PushRefused`].
    #[tracing::instrument(skip_all, fields(remote = %redact_url(&self.remote_url), branch = %self.branch, head = %self.head))]
    pub fn push(&mut self) -> Result<PushOutcome> {
        self.sync_branch()?;
        let refname = self.local_ref();
        // No leading `+`: the remote must fast-forward. sluice never force-pushes.
        let refspec = format!("{refname}:{refname}");
        let statuses = match self.remote().push(&[&refspec])? {
            Pushed::NotFastForward(reason) => {
                tracing::info!(%reason, "push rejected: the remote branch moved");
                return Ok(PushOutcome::Rejected);
            }
            Pushed::Answered(statuses) => statuses,
        };
        for (name, status) in statuses {
            if name != refname {
                continue;
            }
            if let Some(reason) = status {
                if is_stale_rejection(&reason) {
                    tracing::info!(%reason, "push rejected by the server: the remote branch moved");
                    return Ok(PushOutcome::Rejected);
                }
                return Err(Error::PushRefused {
                    remote: redact_url(&self.remote_url),
                    refname,
                    reason,
                });
            }
        }
        tracing::info!("pushed");
        Ok(PushOutcome::Pushed(self.head))
    }

    /// Pushes, and on each rejection fetches (dropping our unpushed commits; commits others
    /// pushed are kept, they are on the remote), calls `redo` so the caller re-reads the work
    /// tree and re-commits on the new head, and tries again after a jittered exponential backoff
    /// (about 50 ms doubling to 2 s). At most `attempts` pushes (at least one).
    ///
    /// `redo` may commit nothing (the change is already on the remote); the push is then a
    /// no-op and succeeds. Network and other errors are returned at once, unretried: a caller's
    /// reconcile loop decides on those with [`Error::is_transient`].
    pub fn push_with_retry<F, E>(&mut self, attempts: u32, mut redo: F) -> Result<Oid, E>
    where
        F: FnMut(&mut ConfigRepo) -> Result<(), E>,
        E: From<Error>,
    {
        let attempts = attempts.max(1);
        for attempt in 1..=attempts {
            match self.push()? {
                PushOutcome::Pushed(oid) => return Ok(oid),
                PushOutcome::Rejected if attempt < attempts => {
                    let delay = backoff_delay(attempt, random_u64(attempt));
                    tracing::info!(
                        attempt,
                        delay_ms = delay.as_millis() as u64,
                        "push rejected; rebuilding on the new remote head"
                    );
                    std::thread::sleep(delay);
                    self.fetch()?;
                    redo(self)?;
                }
                PushOutcome::Rejected => {}
            }
        }
        Err(Error::PushRetriesExhausted {
            remote: redact_url(&self.remote_url),
            branch: self.branch.clone(),
            attempts,
        }
        .into())
    }
}

/// Server-side rejections that mean "someone else updated the branch first".
fn is_stale_rejection(reason: &str) -> bool {
    let reason = reason.to_ascii_lowercase();
    [
        "non-fast-forward",
        "fetch first",
        "stale",
        "cannot lock ref",
        "failed to lock",
        "failed to update ref",
        "incorrect old value",
    ]
    .iter()
    .any(|m| reason.contains(m))
}

/// The wait before retry `attempt` (1-based): `BACKOFF_MIN * 2^(attempt-1)` capped at
/// `BACKOFF_MAX`, then scaled into `[half, full]` by `random`, so concurrent writers spread out.
fn backoff_delay(attempt: u32, random: u64) -> Duration {
    let exp = attempt.saturating_sub(1).min(16);
    let full = BACKOFF_MIN.saturating_mul(1u32 << exp).min(BACKOFF_MAX);
    let half = full / 2;
    let span = (full - half).as_micros() as u64;
    let jitter = if span == 0 { 0 } else { random % (span + 1) };
    half + Duration::from_micros(jitter)
}

/// A random number from std's randomly keyed hasher: enough for jitter, no extra crate.
fn random_u64(salt: u32) -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(salt);
    hasher.write_u32(std::process::id());
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_bounded_and_jittered() {
        for attempt in 1..=40 {
            for random in [0, 1, 12_345, u64::MAX / 3, u64::MAX] {
                let d = backoff_delay(attempt, random);
                assert!(d >= BACKOFF_MIN / 2, "{attempt}: {d:?}");
                assert!(d <= BACKOFF_MAX, "{attempt}: {d:?}");
            }
        }
        assert_eq!(backoff_delay(1, 0), Duration::from_millis(25));
        assert_eq!(backoff_delay(1, 25_000), Duration::from_millis(50));
        assert_eq!(backoff_delay(2, 0), Duration::from_millis(50));
        assert_eq!(backoff_delay(30, 0), Duration::from_secs(1));
        assert_eq!(backoff_delay(0, 0), Duration::from_millis(25));
    }

    #[test]
    fn stale_rejections_are_told_apart_from_refusals() {
        assert!(is_stale_rejection("non-fast-forward"));
        assert!(is_stale_rejection("failed to update ref"));
        assert!(is_stale_rejection(
            "cannot lock ref 'refs/heads/main': is at 1 but expected 2"
        ));
        assert!(!is_stale_rejection("pre-receive hook declined"));
        assert!(!is_stale_rejection("protected branch hook declined"));
    }
}
