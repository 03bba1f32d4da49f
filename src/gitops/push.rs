//! Pushing the local branch to the remote, never by force.
//!
//! The refspec has no `+`, so the remote only accepts a fast-forward: a commit someone else
//! pushed meanwhile can never be overwritten. The server's receive-pack compares and swaps the
//! ref; for a local-path or `file://` remote, which has no server, `remote.rs` does the same
//! (objects first, then the ref against the value it read). When that happens the push is
//! [`PushOutcome::Rejected`]: the caller fetches, redoes its change on the new head and pushes
//! again after a jittered backoff, in its own loop ([`ConfigRepo::push_attempt`], as the tick
//! does) or through [`ConfigRepo::push_with_retry`].

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
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
        let pushed = self.push_branch();
        if let Err(e) = &pushed {
            if e.is_local_damage() {
                // The objects or refs to push cannot be read: the next fetch clones afresh.
                self.damaged = Some(Error::Damaged {
                    path: self.root.clone(),
                    detail: e.to_string(),
                });
            }
        }
        pushed
    }

    fn push_branch(&mut self) -> Result<PushOutcome> {
        self.sync_branch()?;
        let refname = self.local_ref();
        // Fast-forward only, compared and swapped on the remote: sluice never force-pushes.
        let statuses = match self.remote().push_fast_forward(&refname, self.head)? {
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

    /// One push of a caller's retry loop: pushes, and on a rejection waits the jittered backoff
    /// of `attempt` (1-based) and returns [`PushOutcome::Rejected`] so the caller fetches, redoes
    /// its change and calls again with `attempt + 1`. The rejection of attempt `attempts` is
    /// [`Error::PushRetriesExhausted`]. Nothing is called back: the caller owns the loop.
    pub fn push_attempt(&mut self, attempt: u32, attempts: u32) -> Result<PushOutcome> {
        match self.push()? {
            PushOutcome::Pushed(oid) => Ok(PushOutcome::Pushed(oid)),
            PushOutcome::Rejected if attempt < attempts.max(1) => {
                let delay = backoff()
                    .nth(attempt.saturating_sub(1) as usize)
                    .unwrap_or(BACKOFF_MAX);
                tracing::info!(
                    attempt,
                    delay_ms = delay.as_millis() as u64,
                    "push rejected; rebuilding on the new remote head"
                );
                std::thread::sleep(delay);
                Ok(PushOutcome::Rejected)
            }
            PushOutcome::Rejected => Err(Error::PushRetriesExhausted {
                remote: redact_url(&self.remote_url),
                branch: self.branch.clone(),
                attempts: attempts.max(1),
            }),
        }
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
        let mut delays = backoff();
        for attempt in 1..=attempts {
            match self.push()? {
                PushOutcome::Pushed(oid) => return Ok(oid),
                PushOutcome::Rejected if attempt < attempts => {
                    let delay = delays.next().unwrap_or(BACKOFF_MAX);
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

/// The waits between push attempts: about [`BACKOFF_MIN`] doubling up to [`BACKOFF_MAX`], each
/// drawn from `[half, full]` so concurrent writers spread out. backon's jitter adds up to one
/// more base delay, so the base runs from half the first wait to half the cap. Never ends.
fn backoff() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default()
        .with_min_delay(BACKOFF_MIN / 2)
        .with_max_delay(BACKOFF_MAX / 2)
        .with_jitter()
        .without_max_times()
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_bounded_and_jittered() {
        for _ in 0..20 {
            let delays: Vec<Duration> = backoff().take(40).collect();
            assert_eq!(delays.len(), 40, "the backoff never runs out");
            for (i, d) in delays.iter().enumerate() {
                assert!(*d >= BACKOFF_MIN / 2, "{i}: {d:?}");
                assert!(*d <= BACKOFF_MAX, "{i}: {d:?}");
            }
            assert!(delays[0] <= BACKOFF_MIN, "{:?}", delays[0]);
            assert!(delays[1] >= BACKOFF_MIN, "{:?}", delays[1]);
            assert!(delays[30] >= BACKOFF_MAX / 2, "{:?}", delays[30]);
        }
        let first: Vec<Duration> = (0..20).map(|_| backoff().next().unwrap()).collect();
        assert!(first.iter().any(|d| *d != first[0]), "jittered: {first:?}");
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
