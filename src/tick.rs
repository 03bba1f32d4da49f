//! One tick of the loop, in one direction:
//!
//! ```text
//! fetch ─► read (settings, snapshot, specs) ─► facts ─► decide (core) ─► plan ─► execute: commit ─► push ─► announce
//!   ▲                                                                                                │
//!   └──────────── the push was rejected (someone else pushed): the same steps again on the new head ◄┘
//!                 (never forcing)
//! ```
//!
//! Each step is its own module: [`crate::facts`] reads, [`crate::core::verdict`] decides,
//! [`crate::plan`] renders, [`crate::execute`] commits, pushes and announces. This one only
//! calls them in order; none of them calls back into it. A bad spec or an unreadable status
//! file is reported for that canary only; the others go on.

use jiff::Timestamp;
use tracing::{info, warn};

use crate::core::concurrency::Admission;
use crate::core::live::{Liveness, NotLive};
use crate::core::shards::Owned;
use crate::core::status::Phase;
use crate::core::verdict::{deleted, verdict};
use crate::execute::{self, Announce, Committed};
use crate::facts::{self, Read};
use crate::gitops::{ConfigRepo, Identity, PushOutcome};
use crate::holding::Holding;
use crate::observer::Observer;
use crate::plan::{self, Decided, Plan, WaveReverted};
use crate::runtime::Runtime;

pub use crate::outcome::{CanaryError, CanaryOutcome, TickError, TickReport};

/// What a tick needs besides the repo.
pub struct Context<'a> {
    pub observer: &'a dyn Observer,
    /// Overrides the repo settings' author when set.
    pub author: Option<Identity>,
    pub push_attempts: u32,
    /// What the process built once at start: tokens, the tokio runtime, the settings cache.
    pub runtime: &'a Runtime,
    /// The canaries this replica reconciles (`--shards`, `--leader-election`): all of them, or
    /// those of the shards it holds right now, as its renewal task keeps them.
    pub owned: Holding,
}

/// Runs one tick against the repo: fetch, decide every canary, commit, push; then the
/// notifications and approval steps for what reached the remote.
pub fn tick(repo: &mut ConfigRepo, ctx: &Context, now: Timestamp) -> Result<TickReport, TickError> {
    repo.fetch()?;
    tick_fetched(repo, ctx, now)
}

/// What the daemon remembers of the last tick that completed, so that a poll finding nothing
/// new does nothing beyond the fetch: no walk of the work tree, no parse, no status read.
///
/// A tick is remembered only when it leaves every canary at rest (Initialized, Succeeded or
/// Failed, no error, no spec error) and committed nothing. Only the repo can move a canary at
/// rest: a new revision, an edited spec or settings, or a manual operation (`sluice pause`,
/// `approve`, ... commit to the branch) all move the head. An active canary is never skipped:
/// it waits on things outside the repo that have no `wake_at` (the GitOps engine applying the
/// last commit, readiness, confirm and rollback webhooks, approval pull requests closed
/// unmerged), so every poll observes it, as before. The daemon [forgets](Idle::forget) the
/// last tick on anything uncertain: a webhook, a failed tick, a change of leadership.
#[derive(Debug, Default)]
pub struct Idle {
    rest: Option<Rest>,
}

#[derive(Debug)]
struct Rest {
    head: git2::Oid,
    wake_at: Option<Timestamp>,
}

impl Idle {
    /// Remembers the tick that just completed on `head` (the head it decided on), when the
    /// next polls may skip it; otherwise forgets.
    pub fn completed(&mut self, head: git2::Oid, report: &TickReport) {
        let at_rest = report.commits == 0
            && report.spec_errors.is_empty()
            && report.outcomes.iter().all(|o| {
                o.error.is_none()
                    && o.status.as_ref().is_some_and(|s| {
                        matches!(
                            s.phase,
                            Phase::Initialized | Phase::Succeeded | Phase::Failed
                        )
                    })
            });
        self.rest = at_rest.then(|| Rest {
            head,
            wake_at: report.wake_at(),
        });
    }

    /// The earliest `wake_at` of the remembered tick, to sleep until.
    pub fn wake_at(&self) -> Option<Timestamp> {
        self.rest.as_ref().and_then(|r| r.wake_at)
    }

    /// The next poll runs the whole tick.
    pub fn forget(&mut self) {
        self.rest = None;
    }

    /// Whether a poll that fetched `head` at `now` has anything to do.
    pub fn is_due(&self, head: git2::Oid, now: Timestamp) -> bool {
        match &self.rest {
            None => true,
            Some(rest) => rest.head != head || rest.wake_at.is_some_and(|w| w <= now),
        }
    }
}

/// What one poll did.
#[derive(Debug)]
pub enum Polled {
    /// The head and the canaries' times are as the last completed tick left them: only the
    /// fetch ran.
    Idle,
    Ticked(TickReport),
}

/// The daemon's poll: fetches, then ticks unless [`Idle`] says nothing is due. Remembers the
/// tick in `idle` when it completes; forgets on an error.
pub fn poll(
    repo: &mut ConfigRepo,
    ctx: &Context,
    now: Timestamp,
    idle: &mut Idle,
) -> Result<Polled, TickError> {
    let fetched = repo.fetch();
    let head = match fetched {
        Ok(head) => head,
        Err(e) => {
            idle.forget();
            return Err(e.into());
        }
    };
    if !idle.is_due(head, now) {
        return Ok(Polled::Idle);
    }
    match tick_fetched(repo, ctx, now) {
        Ok(report) => {
            idle.completed(repo.head(), &report);
            Ok(Polled::Ticked(report))
        }
        Err(e) => {
            idle.forget();
            Err(e)
        }
    }
}

/// [`tick`] without its first fetch, for a repo fetched just now: a one-shot `reconcile`
/// right after [`ConfigRepo::open_or_clone`], which fetches, would otherwise ask the remote
/// twice.
pub fn tick_fetched(
    repo: &mut ConfigRepo,
    ctx: &Context,
    now: Timestamp,
) -> Result<TickReport, TickError> {
    let attempts = ctx.push_attempts.max(1);
    let mut attempt = 1;
    let mut fetched = true;
    let (read, mut committed) = loop {
        if !fetched {
            repo.fetch()?;
        }
        fetched = false;
        // A tick's commits keep their objects in memory and store them as one pack (see
        // `gitops::memory`): many decisions would otherwise write thousands of loose files.
        let (read, committed) = self::attempt(repo, ctx, now)?;
        if committed.report.commits == 0 {
            break (read, committed);
        }
        match execute::push(repo, attempt, attempts)? {
            PushOutcome::Pushed(_) => break (read, committed),
            PushOutcome::Rejected => {
                warn!("Push rejected: the branch moved; deciding again on the new head");
                attempt += 1;
            }
        }
    };
    committed.report.push_retries = attempt - 1;
    committed.report.forge_repository = read.settings.forge.as_ref().map(|f| f.repository.clone());
    let with = Announce {
        observer: ctx.observer,
        runtime: ctx.runtime,
        settings: &read.settings,
        snapshot: &read.snapshot,
    };
    execute::announce(repo, &with, &committed);
    Ok(committed.report)
}

/// One attempt: read the repo, gather the facts, decide, plan, and commit on the local branch.
fn attempt(
    repo: &mut ConfigRepo,
    ctx: &Context,
    now: Timestamp,
) -> Result<(Read, Committed), TickError> {
    repo.with_memory_objects(|repo| {
        let mut read = facts::read(repo, ctx.runtime, ctx.author.clone());
        // Another replica's shards are its own to decide.
        let owned = ctx.owned.now();
        read.loaded
            .canaries
            .retain(|c| owned.owns(c.id.namespace.as_str(), c.id.name.as_str()));
        let mut plan = decide(repo, ctx, &read, &owned, now)?;
        // A shard lost while deciding (a slow metric, a renewal that failed past its
        // deadline) is no longer this replica's to commit: its new holder decides again.
        keep_held(&mut plan, &ctx.owned.now());
        let committed = execute::commit(repo, plan, ctx.runtime.drift())?;
        Ok((read, committed))
    })
}

/// Every canary's facts, the core's verdict on each, and the plan that carries them out.
fn decide(
    repo: &ConfigRepo,
    ctx: &Context,
    read: &Read,
    owned: &Owned,
    now: Timestamp,
) -> Result<Plan, TickError> {
    if !read.settings_errors.is_empty() {
        return Ok(plan::held_for_settings(read));
    }
    let statuses = facts::statuses(repo, ctx.runtime, read);
    let items = statuses.items();
    let releases = crate::core::waves::releases(&items);
    let limits = &read.settings.concurrency;
    let admissions = crate::core::concurrency::admit_tick(limits, &items, &releases, now);
    let waits: std::collections::BTreeMap<String, String> = items
        .iter()
        .zip(admissions)
        .filter_map(|((canary, _, _), a)| match a {
            Admission::Go => None,
            Admission::Wait { reason } => Some((canary.id.to_string(), reason)),
        })
        .collect();
    drop(items);
    let gathering = facts::gather(
        repo,
        ctx.observer,
        ctx.runtime,
        read,
        (statuses, releases),
        now,
    )?;
    let reverts = gathering
        .reverts
        .into_iter()
        .map(|r| WaveReverted {
            canary: r.canary,
            status: r.status,
            revert: crate::core::waves::revert(r.observed.before, &r.revision, &r.reason, now),
            folder: r.observed.folder,
        })
        .collect();
    let decided = gathering
        .canaries
        .into_iter()
        .map(|g| Decided {
            canary: g.canary,
            known: g.known.map(|mut known| {
                known.observations.applied = live(g.canary, &known.liveness);
                known.facts.queued = waits.get(&g.canary.id.to_string()).cloned();
                let status = known.status.as_ref();
                let verdict = verdict(g.canary, status, &known.observations, &known.facts, now);
                (known, verdict)
            }),
        })
        .collect();
    let spec_errors = !read.spec_errors.is_empty();
    let deletions = facts::deleted(repo, ctx.runtime, &read.snapshot, spec_errors)
        .into_iter()
        .filter(|(d, _)| owned.owns(d.id.namespace.as_str(), d.id.name.as_str()))
        .map(|(d, fact)| (d, deleted(&fact)))
        .collect();
    let files = ctx.runtime.head_files(repo, false);
    let head = files.at(repo.git(), repo.root());
    Ok(plan::build(
        (repo.root(), &head),
        read,
        (gathering.undecided, reverts),
        decided,
        deletions,
        now,
    ))
}

/// Drops from `plan` the commits and approval checks of the canaries not in `owned` (held when
/// the tick started, lost since); their outcomes say so and carry no status, so that the
/// daemon's next poll ticks in full.
fn keep_held(plan: &mut Plan, owned: &Owned) {
    let lost: Vec<bool> = plan
        .report
        .outcomes
        .iter()
        .map(|o| {
            let (ns, name) = o.id.split_once('/').unwrap_or(("", o.id.as_str()));
            !owned.owns(ns, name)
        })
        .collect();
    if !lost.contains(&true) {
        return;
    }
    let is_lost = |i: usize| lost.get(i).copied().unwrap_or(false);
    plan.commits.retain(|c| !is_lost(c.outcome));
    plan.approvals.retain(|a| !is_lost(a.outcome));
    for (o, _) in plan
        .report
        .outcomes
        .iter_mut()
        .zip(&lost)
        .filter(|(_, l)| **l)
    {
        warn!(canary = %o.id, "Shard lost during the tick: not committing its decision");
        o.events
            .push("Held: this replica lost the canary's shard during the tick".into());
        o.status = None;
        o.wake_at = None;
    }
}

/// The core's verdict on whether `canary`'s last commit is live, each reason it is not
/// logged.
fn live(canary: &crate::manifest::model::Canary, liveness: &Liveness) -> bool {
    let not = crate::core::live::live(liveness);
    for why in &not {
        match why {
            NotLive::SyncUnknown(e) => {
                warn!(canary = %canary.id, error = %e, "Cannot tell whether the last commit is applied");
            }
            NotLive::NotApplied(reason) => {
                info!(canary = %canary.id, reason = %reason, "Waiting for the GitOps engine");
            }
            NotLive::NotReady(why) => {
                info!(canary = %canary.id, reason = %why, "Waiting for the canary to be ready");
            }
            NotLive::ReadyUnknown(e) => {
                warn!(canary = %canary.id, error = %e, "Cannot tell whether the canary is ready");
            }
        }
    }
    not.is_empty()
}
