//! `maxConcurrentCanaries`: how many canaries may progress at once, and which of those that
//! want to start a new revision may start this tick ([`admit`]).
//!
//! A canary *progresses* while its analysis runs ([`Phase::is_active`]). A canary *wants to
//! start* when it is at rest (Initialized, Succeeded), Failed, or waiting for
//! confirm-rollout, and the source holds a revision it has neither promoted nor failed on:
//! deciding it would start a rollout. The limit never stops a rollout that runs, and never
//! holds a canary that has nothing to start.
//!
//! Those that want to start are taken in order: higher priority first (the
//! `sluice.dev/priority` annotation, default 0), then first seen (the time of the tick whose
//! commit first recorded the wait, the status file's `waitingSince`; one not waiting yet is
//! seen now), then namespace/name. Each goes while its repo's and its namespace's limits have
//! room; one that does not waits, with why. Everything the order reads is in git (specs and
//! status files), so `sluice audit` replays it.
//!
//! Pure: no IO, no clock. The tick reads the statuses and passes `now`.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::status::{Phase, Status};
use crate::waves::{Item, Release};

/// The limits of the repo settings: the repo's, and each namespace's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    /// `maxConcurrentCanaries`: across the repo; `None`: no limit.
    pub repo: Option<u32>,
    /// `namespaces.<ns>.maxConcurrentCanaries`: within one namespace.
    pub namespaces: BTreeMap<String, u32>,
}

impl Limits {
    /// True when no limit is set: every canary goes.
    pub fn is_empty(&self) -> bool {
        self.repo.is_none() && self.namespaces.is_empty()
    }
}

/// Where a canary stands, as the limit sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Its analysis runs: it counts against the limits.
    Progressing,
    /// Deciding it would start a rollout of a new revision.
    WantsToStart,
    /// Anything else: neither counts nor waits.
    Other,
}

/// Where a canary with `status` stands when the source holds `revision`.
pub fn standing(status: Option<&Status>, revision: &str) -> Standing {
    let Some(s) = status else {
        // Not initialized yet: initializing starts no rollout.
        return Standing::Other;
    };
    if s.paused {
        return Standing::Other;
    }
    let new = s.promoted_revision != revision;
    match s.phase {
        // The phases of `progresses`.
        Phase::Progressing | Phase::WaitingApproval | Phase::Promoting | Phase::Finalising => {
            Standing::Progressing
        }
        Phase::Initialized | Phase::Succeeded | Phase::Waiting if new => Standing::WantsToStart,
        // A canary failed on `revision` stays failed until a newer one comes.
        Phase::Failed if new && s.canary_revision.as_deref() != Some(revision) => {
            Standing::WantsToStart
        }
        Phase::Initializing
        | Phase::Initialized
        | Phase::Succeeded
        | Phase::Waiting
        | Phase::Failed => Standing::Other,
    }
}

/// One canary of the tick as [`admit`] sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `namespace/name`.
    pub id: String,
    pub namespace: String,
    pub standing: Standing,
    /// The `sluice.dev/priority` annotation: higher starts first.
    pub priority: i64,
    /// When it was first seen wanting to start: its status's `waitingSince`, or now.
    pub first_seen: Timestamp,
}

/// What [`admit`] says of one canary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Decided as usual.
    Go,
    /// Wants to start, but a limit is full: why (`waiting: 2 of 2 progressing: ns/a, ns/b`).
    Wait { reason: String },
}

/// For each entry, in order: whether it may be decided this tick. Entries that do not want to
/// start always go; those that do go in order (priority, first seen, id) while the repo's and
/// their namespace's limits have room, and each one that goes counts from then on.
pub fn admit(limits: &Limits, entries: &[Entry]) -> Vec<Admission> {
    let mut out = vec![Admission::Go; entries.len()];
    if limits.is_empty() {
        return out;
    }
    let mut running: Vec<&str> = Vec::new();
    let mut by_namespace: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for e in entries
        .iter()
        .filter(|e| e.standing == Standing::Progressing)
    {
        running.push(&e.id);
        by_namespace.entry(&e.namespace).or_default().push(&e.id);
    }
    let mut queue: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i].standing == Standing::WantsToStart)
        .collect();
    queue.sort_by(|&a, &b| {
        let (a, b) = (&entries[a], &entries[b]);
        b.priority
            .cmp(&a.priority)
            .then(a.first_seen.cmp(&b.first_seen))
            .then(a.id.cmp(&b.id))
    });
    for i in queue {
        let e = &entries[i];
        let in_namespace = by_namespace.entry(&e.namespace).or_default();
        let full = match (limits.repo, limits.namespaces.get(&e.namespace)) {
            (Some(max), _) if count(&running) >= max => Some((max, &running, "")),
            (_, Some(&max)) if count(in_namespace) >= max => {
                Some((max, &*in_namespace, " in namespace "))
            }
            _ => None,
        };
        match full {
            Some((max, who, scope)) => {
                let scope = if scope.is_empty() {
                    String::new()
                } else {
                    format!("{scope}{}", e.namespace)
                };
                out[i] = Admission::Wait {
                    reason: format!(
                        "waiting: {} of {max} progressing{scope}: {}",
                        who.len(),
                        sorted(who)
                    ),
                };
            }
            None => {
                in_namespace.push(&e.id);
                running.push(&e.id);
            }
        }
    }
    out
}

/// [`admit`] over a tick's canaries (`items`, as the release rule takes them, with what it
/// said of each): a wave the release holds or reverts is not decided, so it does not wait here
/// (it still counts while it progresses). One not waiting yet is first seen `now`.
pub fn admit_tick<R>(
    limits: &Limits,
    items: &[Item<'_, R>],
    releases: &[Release],
    now: Timestamp,
) -> Vec<Admission> {
    if limits.is_empty() {
        return vec![Admission::Go; items.len()];
    }
    let entries: Vec<Entry> = items
        .iter()
        .enumerate()
        .map(|(i, (canary, status, revision))| {
            let released = matches!(releases.get(i), Some(Release::Go) | None);
            let standing = match standing(*status, revision) {
                Standing::WantsToStart if !released => Standing::Other,
                s => s,
            };
            Entry {
                id: canary.id.to_string(),
                namespace: canary.id.namespace.to_string(),
                standing,
                priority: canary.priority,
                first_seen: status.and_then(|s| s.waiting_since).unwrap_or(now),
            }
        })
        .collect();
    admit(limits, &entries)
}

fn count(ids: &[&str]) -> u32 {
    u32::try_from(ids.len()).unwrap_or(u32::MAX)
}

fn sorted(ids: &[&str]) -> String {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.join(", ")
}

/// A limit more canaries progress under than it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Over {
    /// The namespace whose limit it is; `None`: the repo's.
    pub namespace: Option<String>,
    pub max: u32,
    /// The canaries progressing under it, sorted.
    pub ids: Vec<String>,
}

impl std::fmt::Display for Over {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scope = match &self.namespace {
            Some(ns) => format!("namespaces.{ns}.maxConcurrentCanaries"),
            None => "maxConcurrentCanaries".to_string(),
        };
        write!(
            f,
            "{} canaries progress at once, {scope} is {}: {}",
            self.ids.len(),
            self.max,
            self.ids.join(", ")
        )
    }
}

/// The limits that `progressing` (namespace, `namespace/name` of each canary progressing at
/// once) goes over: what `sluice audit` checks after each commit.
pub fn over(limits: &Limits, progressing: &[(&str, &str)]) -> Vec<Over> {
    let mut out = Vec::new();
    let within = |ns: Option<&str>| -> Vec<String> {
        let mut ids: Vec<String> = progressing
            .iter()
            .filter(|(n, _)| ns.is_none_or(|ns| ns == *n))
            .map(|(_, id)| id.to_string())
            .collect();
        ids.sort_unstable();
        ids
    };
    if let Some(max) = limits.repo {
        let ids = within(None);
        if ids.len() > max as usize {
            out.push(Over {
                namespace: None,
                max,
                ids,
            });
        }
    }
    for (ns, &max) in &limits.namespaces {
        let ids = within(Some(ns));
        if ids.len() > max as usize {
            out.push(Over {
                namespace: Some(ns.clone()),
                max,
                ids,
            });
        }
    }
    out
}

/// Whether a canary in `phase` progresses (counts against the limits).
pub fn progresses(phase: Phase) -> bool {
    phase.is_active()
}
