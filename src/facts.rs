//! The tick's facts: everything the core needs to decide, gathered before anything is decided.
//!
//! - [`read`]: the repo settings (and whether they load), the one snapshot of the repo, the
//!   canaries it declares (a spec that does not load is refused here, with file, line and
//!   field), the metric templates;
//! - [`statuses`], per canary: its status file (parsed again only when it changed:
//!   `facts/statuses.rs`) and revision, what the release rule of waves runs on;
//! - [`gather`], per canary the release rule lets go: the [`Observer`]'s metrics,
//!   webhook answers, sync and readiness, whether its last commit is live, drift (owned files
//!   changed outside sluice, from git), and what became of its approval pull request; per
//!   wave the rule reverts, what it had before the release reached it;
//! - [`deleted`]: canaries whose spec left the repo.
//!
//! Reads only: nothing here commits, pushes or decides.

use std::path::Path;
use std::sync::Arc;

use jiff::Timestamp;
use tracing::warn;

use crate::approval;
use crate::core::live::{self, Liveness, Readiness, SyncObservation, Synced};
use crate::core::observe::{Deletion, Facts, Observations};
use crate::core::status::Status;
use crate::core::waves::Release;
use crate::deleted::{self, Deleted};
use crate::forge::Forge;
use crate::gitops::{ConfigRepo, FileChange, Identity, PathEntry};
use crate::manifest::load::Loaded;
use crate::manifest::model::{Canary, CanaryId};
use crate::manifest::settings::{Settings, SETTINGS_PATH};
use crate::metrics::metric_templates::TemplateIndex;
use crate::observer::{External, Observer, Request};
use crate::outcome::{CanaryError, CanaryOutcome};
use crate::render::{message, status_file};
use crate::runtime::Runtime;
use crate::workload;
use crate::yaml::error::SpecError;
use crate::yaml::snapshot::Snapshot;

mod statuses;

/// What a tick read of the repo at its head.
pub struct Read {
    pub settings: Settings,
    /// Why the repo settings do not load; every canary holds while there is any.
    pub settings_errors: Vec<SpecError>,
    pub author: Identity,
    pub snapshot: Arc<Snapshot>,
    /// The canaries; with settings that do not load, read with default settings only to name
    /// them.
    pub loaded: Loaded,
    pub templates: TemplateIndex,
    /// Every spec refused (settings, canaries, templates), for the report.
    pub spec_errors: Vec<SpecError>,
}

/// Reads the repo at its head once: settings, specs, templates. `author` overrides the
/// settings' author.
pub fn read(repo: &ConfigRepo, runtime: &Runtime, author: Option<Identity>) -> Read {
    // The one read of the repo this attempt makes: specs, templates and sources come from it.
    // Moved from the last tick's head by the files that differ; the first tick reads every
    // file. When the head's tree cannot be read, nothing is: no canary is decided, and no
    // status file is found to revert.
    let files = runtime.head_files(repo, true);
    let head = files.at(repo.git(), repo.root());
    let (settings, settings_errors) = settings(repo, runtime);
    let mut spec_errors = settings_errors.clone();
    let author = author.unwrap_or_else(|| Identity {
        name: settings.author_name.clone(),
        email: settings.author_email.clone(),
    });
    let snapshot = Arc::clone(files.snapshot());
    let has_status = |id: &CanaryId| head.exists(&status_file::path_for(id));
    let existing = crate::manifest::load::Existing {
        files: &snapshot,
        has_status: &has_status,
    };
    // Only the specs the commits since the last tick's head concern are read and checked.
    let mut loaded = runtime.load(repo.head(), &settings, &existing, |last| {
        repo.changed_paths(repo.head(), Some(last))
            .ok()
            .map(|paths| paths.into_iter().collect())
    });
    crate::waves::contexts::reject_unknown_contexts(
        &mut loaded,
        crate::waves::contexts::kubeconfig_contexts,
    );
    crate::waves::servers::reject_plain_http(
        &mut loaded,
        crate::waves::servers::allows_http(runtime.env(crate::waves::servers::ALLOW_HTTP_VAR)),
    );
    crate::manifest::output_folder::reject_unowned_paths(&mut loaded, &snapshot, &head);
    // A canary whose templateRef cannot be used never starts: refused here, as `validate` does.
    let (templates, template_errors) = TemplateIndex::from_snapshot(&snapshot);
    crate::manifest::template_refs::reject_unusable_templates(
        &mut loaded,
        &snapshot,
        template_errors,
        |namespace, name| templates.get(namespace, name).map(drop),
    );
    spec_errors.append(&mut loaded.errors);
    for e in &spec_errors {
        warn!(error = %e, "Invalid spec");
    }
    // Once per version of the spec's file, not every tick.
    for w in runtime.spec_warnings().fresh(&loaded.warnings, &snapshot) {
        warn!(warning = %w, "Spec warning");
    }
    Read {
        settings,
        settings_errors,
        author,
        snapshot,
        loaded,
        templates,
        spec_errors,
    }
}

/// The repo settings at the head, parsed again only when `.sluice/config.yaml` changed.
fn settings(repo: &ConfigRepo, runtime: &Runtime) -> (Settings, Vec<SpecError>) {
    let files = runtime.head_files(repo, false);
    let source = match files.entry(SETTINGS_PATH) {
        PathEntry::Missing => None,
        PathEntry::File(id) => Some(id.to_string()),
        // Read and refused; what it is names the version.
        other => Some(format!("{other:?}")),
    };
    let head = files.at(repo.git(), repo.root());
    runtime.settings(source, || {
        // Absent means defaults; anything there (a link, a folder) is read and refused.
        if !head.exists(SETTINGS_PATH) {
            return (Settings::default(), Vec::new());
        }
        let path = repo.root().join(SETTINGS_PATH);
        crate::manifest::load::settings_from(runtime.read_file(&path, &|p| head.read_path(p)))
    })
}

/// One canary's facts, or why they could not be read.
pub struct Gathered<'a> {
    pub canary: &'a Canary,
    pub known: Result<Known, CanaryError>,
}

/// Everything known about one canary before deciding.
pub struct Known {
    pub status: Option<Status>,
    /// What is known of whether the canary's last commit is live; the tick sets
    /// `observations.applied` from the core's verdict on it ([`crate::core::live::live`]).
    pub liveness: Liveness,
    /// What the status file recorded of the spec (`revertOnDeletion`, output).
    pub record: Option<status_file::SpecRecord>,
    pub observations: Observations,
    pub facts: Facts,
    /// Under `drift: restore`, sluice's version of the drifted output files.
    pub restore: Vec<FileChange>,
    /// A comment for the canary's approval pull request, left once the tick's commits are
    /// pushed (why its merge did not approve).
    pub comment: Option<(u64, String)>,
}

/// Every canary's status file and source revision, read first: what the release rule of
/// waves ([`crate::core::waves::releases`]) runs on before anything else is observed.
pub struct Statuses<'a> {
    /// Canaries whose status file or revision cannot be read (with the error).
    unreadable: Vec<CanaryOutcome>,
    prepared: Vec<Prepared<'a>>,
}

impl Statuses<'_> {
    /// Each canary read, in order, as the release rule takes it.
    pub fn items(&self) -> Vec<crate::core::waves::Item<'_, crate::manifest::model::Route>> {
        self.prepared
            .iter()
            .map(|p| (p.canary, p.status.as_ref(), p.revision.as_str()))
            .collect()
    }
}

/// Reads every canary's status file and source revision.
pub fn statuses<'a>(repo: &ConfigRepo, runtime: &Runtime, read: &'a Read) -> Statuses<'a> {
    let root = repo.root();
    let canaries = &read.loaded.canaries;
    let outputs: Vec<&str> = canaries.iter().map(|c| c.output.as_str()).collect();
    let files = runtime.head_files(repo, false);
    let head = files.at(repo.git(), root);
    let index = workload::Index::reading(&read.snapshot, &outputs, &head);
    let mut unreadable = Vec::new();
    let mut prepared = Vec::new();
    let statuses = statuses::read_all(repo, runtime, canaries);
    for (canary, found) in canaries.iter().zip(statuses) {
        match prepare(root, canary, &index, found) {
            Ok(p) => prepared.push(p),
            Err(e) => unreadable.push(CanaryOutcome::failed(canary, &e)),
        }
    }
    Statuses {
        unreadable,
        prepared,
    }
}

/// A canary the tick does not decide, in the order the report lists them.
pub enum Undecided<'a> {
    /// Its status file or revision cannot be read (with the error), its metric answers are
    /// not in yet (no error), or what it had before a release cannot be read (with the
    /// error).
    Outcome(CanaryOutcome),
    /// A wave the release has not reached ([`Release::Hold`]): why.
    Held {
        canary: &'a Canary,
        status: Option<Status>,
        reason: String,
    },
}

/// A wave the release rule reverts ([`Release::Revert`]), with what it had before the
/// release reached it.
pub struct Reverting<'a> {
    pub canary: &'a Canary,
    /// Its status at the head.
    pub status: Option<Status>,
    pub revision: String,
    pub reason: String,
    pub observed: crate::waves::revert::Observed,
}

/// The canaries of a tick, each with its facts.
pub struct Gathering<'a> {
    /// Canaries not decided this tick, reported.
    pub undecided: Vec<Undecided<'a>>,
    /// Waves reverted under `onFailure: rollback` (not decided by the rules this tick).
    pub reverts: Vec<Reverting<'a>>,
    pub canaries: Vec<Gathered<'a>>,
}

/// Gathers the facts of every canary the release rule lets go (`releases`, one per canary of
/// `statuses`, in order): every canary's external observations together, then git's and the
/// forge's facts one canary at a time; and, for each wave it reverts, what the wave had
/// before the release reached it. A git error that retrying may fix stops the tick.
pub fn gather<'a>(
    repo: &ConfigRepo,
    observer: &dyn Observer,
    runtime: &Runtime,
    read: &'a Read,
    (statuses, releases): (Statuses<'a>, Vec<Release>),
    now: Timestamp,
) -> Result<Gathering<'a>, crate::gitops::Error> {
    let root = repo.root();
    let mut undecided: Vec<Undecided<'a>> = statuses
        .unreadable
        .into_iter()
        .map(Undecided::Outcome)
        .collect();
    let mut reverts = Vec::new();
    let mut prepared = Vec::new();
    for (p, release) in statuses.prepared.into_iter().zip(releases) {
        match release {
            Release::Go => prepared.push(p),
            Release::Hold { reason } => undecided.push(Undecided::Held {
                canary: p.canary,
                status: p.status,
                reason,
            }),
            Release::Revert { revision, reason } => match before_release(repo, p.canary, &revision)
            {
                Ok(observed) => reverts.push(Reverting {
                    canary: p.canary,
                    status: p.status,
                    revision,
                    reason,
                    observed,
                }),
                Err(e) => {
                    warn!(canary = %p.canary.id, error = %e, "Wave not reverted");
                    let id = p.canary.id.to_string();
                    let outcome = CanaryOutcome::of(id, p.status, Some(e));
                    undecided.push(Undecided::Outcome(outcome));
                }
            },
        }
    }
    let requests: Vec<Request<'_>> = prepared
        .iter()
        .map(|p| Request {
            canary: p.canary,
            status: p.status.as_ref(),
            revision: &p.revision,
        })
        .collect();
    let externals = observer.observe(&read.templates, &read.settings, &requests, now);
    drop(requests);
    let forge = waiting_forge(&prepared, &read.settings, runtime);
    let mut history = crate::drift::History::new(repo.head(), runtime.drift());
    let mut verifier = crate::drift::Verifier::new(root, runtime.drift());
    let mut gathered = Vec::new();
    for (p, external) in prepared.into_iter().zip(externals) {
        let canary = p.canary;
        if let Some(reason) = external.held {
            let error = CanaryError::Held(reason);
            let outcome =
                CanaryOutcome::of(canary.id.to_string(), p.status, Some(error.to_string()));
            undecided.push(Undecided::Outcome(outcome));
            continue;
        }
        if external.metrics_pending {
            let outcome = CanaryOutcome::of(canary.id.to_string(), p.status, None);
            undecided.push(Undecided::Outcome(outcome));
            continue;
        }
        let known = match know(
            repo,
            runtime,
            read,
            forge.as_ref(),
            (&mut history, &mut verifier),
            p,
            external,
        ) {
            Ok(known) => Ok(known),
            Err(e) => Err(e.unless_transient()?),
        };
        gathered.push(Gathered { canary, known });
    }
    history.remember();
    Ok(Gathering {
        undecided,
        reverts,
        canaries: gathered,
    })
}

/// What the wave `canary` had before the release of `revision` reached it, read from git
/// (see [`crate::waves::revert`]).
fn before_release(
    repo: &ConfigRepo,
    canary: &Canary,
    revision: &str,
) -> Result<crate::waves::revert::Observed, String> {
    let git = git2::Repository::open(repo.root()).map_err(|e| e.message().to_string())?;
    crate::waves::revert::observe(&git, repo.head(), canary, revision).map_err(|e| e.to_string())
}

/// A canary's status and current revision, read before observing.
struct Prepared<'a> {
    canary: &'a Canary,
    status: Option<Status>,
    record: Option<status_file::SpecRecord>,
    revision: String,
}

fn prepare<'a>(
    root: &Path,
    canary: &'a Canary,
    index: &workload::Index,
    found: Result<Option<statuses::Recorded>, CanaryError>,
) -> Result<Prepared<'a>, CanaryError> {
    let (status, record) = match found? {
        Some((status, record)) => (Some(status), record),
        None => (None, None),
    };
    let revision = workload::revision(root, canary, index)?;
    Ok(Prepared {
        canary,
        status,
        record,
        revision,
    })
}

/// The forge, when the repo has one and some canary waits for an approval this tick may find
/// rejected, or has one merged whose merger must be read; `None` keeps idle ticks free of
/// forge calls.
fn waiting_forge(
    prepared: &[Prepared<'_>],
    settings: &Settings,
    runtime: &Runtime,
) -> Option<Forge> {
    let waiting = prepared.iter().any(|p| {
        p.status
            .as_ref()
            .is_some_and(|s| approval::is_waiting(s) || s.clock_from_merge)
    });
    if waiting {
        approval::connect(settings.forge.as_ref(), runtime)
    } else {
        None
    }
}

/// One canary's facts from git and the forge. While its owned files drift (or a drift hold
/// is in place) nothing else matters: the forge is not asked and liveness is not read.
fn know(
    repo: &ConfigRepo,
    runtime: &Runtime,
    read: &Read,
    forge: Option<&Forge>,
    (history, verifier): (&mut crate::drift::History, &mut crate::drift::Verifier),
    p: Prepared<'_>,
    external: External,
) -> Result<Known, CanaryError> {
    let canary = p.canary;
    let status = p.status.as_ref();
    let mut facts = Facts {
        adoption_hold: read.settings.adoption_hold,
        ..Facts::default()
    };
    let mut restore = Vec::new();
    if let Some(drift) = crate::drift::check(repo, history, verifier, canary)? {
        let observed = crate::drift::observe(repo, canary, status, &drift, read.settings.drift)?;
        facts.drift = Some(observed.fact);
        restore = observed.restore;
    }
    let drifting = facts.drift.is_some() || status.is_some_and(|s| !s.drift.is_empty());
    let mut comment = None;
    // Not asked (drifting, or the cluster did not answer): nothing says it is not live.
    let mut liveness = Liveness::default();
    facts.unreachable = external.cluster.clone().and_then(Result::err);
    if !drifting && facts.unreachable.is_none() {
        if let (Some(forge), Some(status)) = (forge, status) {
            let close = (read.settings.on_close, repo.branch());
            facts.rejected = approval::rejection(forge, runtime, close, canary, status);
        }
        if status.is_some_and(|s| s.clock_from_merge) {
            let merged = approval::merged(repo, forge, runtime, &read.snapshot, canary);
            let (fact, note) = merged.into_fact();
            facts.merged = Some(fact);
            facts.unsigned = unsigned(repo, canary);
            comment = note;
        }
        liveness = self::liveness(repo, canary, external.sync, external.ready)?;
    }
    Ok(Known {
        observations: Observations {
            revision: p.revision,
            metrics: external.metrics,
            webhooks: external.webhooks,
            // The core's verdict on `liveness`, which the tick asks for before deciding.
            applied: false,
            judge: external.judge,
        },
        liveness,
        status: p.status,
        record: p.record,
        facts,
        restore,
        comment,
    })
}

/// Under `signing.required`: why the commit that brought the canary's status file (a merged
/// approval) is not signed as the policy at its parent requires. What cannot be checked is
/// not allowed either.
fn unsigned(repo: &ConfigRepo, canary: &Canary) -> Option<String> {
    let path = status_file::path_for(&canary.id);
    let checked = crate::signatures::policy::last_change_unsigned(
        repo.root(),
        repo.head(),
        &path,
        crate::drift::LOOKBACK,
    );
    match checked {
        Ok(None) => None,
        Ok(Some((commit, v))) => Some(format!(
            "the approval merged in {} is not signed as the signing policy requires: {}",
            commit.to_string().get(..7).unwrap_or_default(),
            v.message
        )),
        Err(e) => Some(format!(
            "cannot tell whether the commit that brought {path} is signed as the signing policy requires: {e}"
        )),
    }
}

/// What is known of whether the canary's last pushed commit is live: the GitOps engine's
/// view (when the canary has a sync target) with the commit sluice pushed and git's word on
/// which of the revisions it names descend from it, and whether its workload and route are
/// ready. The core judges it ([`crate::core::live::live`]).
fn liveness(
    repo: &ConfigRepo,
    canary: &Canary,
    sync: Option<Result<SyncObservation, String>>,
    ready: Option<Result<Readiness, String>>,
) -> Result<Liveness, CanaryError> {
    let sync = match sync {
        None => None,
        Some(Err(e)) => Some(Err(e)),
        Some(Ok(observation)) => {
            let pushed = repo
                .history(Some((message::CANARY, &canary.id.to_string())), 1)?
                .first()
                .map(|e| e.oid.to_string());
            let descendants = match &pushed {
                None => Vec::new(),
                Some(pushed) => live::revisions(&observation)
                    .into_iter()
                    .map(|r| r.trim().to_ascii_lowercase())
                    .filter(|r| live::is_full_sha(r) && repo.is_descendant_or_self(r, pushed))
                    .collect(),
            };
            Some(Ok(Synced {
                observation,
                pushed,
                descendants,
            }))
        }
    };
    Ok(Liveness { sync, ready })
}

/// Canaries whose spec was deleted, each with what the core needs to decide its revert. A
/// broken spec is not a deleted one: `spec_errors` says whether any spec failed to load.
pub fn deleted(
    repo: &ConfigRepo,
    runtime: &Runtime,
    snapshot: &Snapshot,
    spec_errors: bool,
) -> Vec<(Deleted, Deletion)> {
    let files = runtime.head_files(repo, false);
    let head = files.at(repo.git(), repo.root());
    let list = |folder: &str| {
        files
            .list(folder)
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    };
    let found = deleted::find_listed(list, snapshot, |file| {
        let path = repo.root().join(file);
        runtime.read_file(&path, &|p| head.read_path(p))
    });
    if found.is_empty() {
        return Vec::new();
    }
    let unloadable = deleted::can_tell(snapshot).map(str::to_string);
    found
        .into_iter()
        .map(|d| {
            let fact = Deletion {
                reverts: d.reverts(),
                unloadable: unloadable.clone(),
                spec_errors,
            };
            (d, fact)
        })
        .collect()
}
