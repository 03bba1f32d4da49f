//! The read-only dashboard: an overview of every canary and a page per canary, and the same
//! model as JSON (`/api/v1`). Drawn from git alone: the files of the commit a ref points at
//! are read from its tree objects by the reader the tick, audit and drift's verifier use
//! ([`CommitFiles`], kept from one commit to the next, so a new head reads only the files that
//! differ), and the model is built by the readers `sluice status` and `sluice history` use;
//! the result is cached by that commit. A request never fetches: whoever owns the clone (the
//! daemon's loop, or `sluice dashboard`'s poller) moves the ref.
//!
//! What a request may cost is bounded as the tick's read is: a file over the loader's limit
//! ([`MAX_FILE_BYTES`](crate::yaml::snapshot::MAX_FILE_BYTES)) is refused by its size alone
//! (the page lists it with the refused specs), and a blob is parsed once however many names
//! it has, or not at all when someone in the process holds its parse (the daemon's tick, by
//! blob id). Nothing is written to disk.
//!
//! Nothing here writes to the repo, and nothing shows a secret: the model holds names,
//! weights, commit messages and trailers, which are in git for anyone who can read the repo.
//! The HTTP side (routes, headers, authentication) is `crate::server`'s.

pub mod auth;
pub mod chart;
pub mod detail;
pub mod judge;
pub mod links;
pub mod model;
pub mod pages;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context as _;

use crate::clock::Clock;
use crate::commit_files::CommitFiles;
use crate::manifest::settings::Settings;
use crate::readers::status::{settings_of, Repo};
use crate::render::message::CANARY;
use crate::yaml::parses::Parses;

pub use detail::Detail;
pub use model::Overview;

/// The decision commits read per canary page, unless told otherwise.
pub const DEFAULT_HISTORY: u32 = 200;

/// Where the dashboard reads: a repository and the ref whose commit it shows.
#[derive(Debug, Clone)]
pub struct Source {
    /// The repository (a clone's work tree, or a bare repository).
    pub git_dir: PathBuf,
    /// The ref to read, e.g. `refs/heads/main`.
    pub reference: String,
}

/// The commit last read, its files, and what was built from them.
struct Cached {
    head: git2::Oid,
    /// The commit's files, moved on to the next head the ref points at.
    files: CommitFiles,
    settings: Settings,
    overview: Arc<Overview>,
    details: HashMap<String, Arc<Detail>>,
}

/// The dashboard's model source, shared by the handlers.
#[derive(Clone)]
pub struct Dashboard {
    source: Source,
    history: usize,
    cache: Arc<Mutex<Option<Cached>>>,
    /// The runtime's clock: the overview's now, which places the waits (next check due).
    clock: Arc<Clock>,
    /// Where the commit's files share their parses (with the tick's, in a daemon).
    parses: Parses,
}

/// Why a page cannot be drawn.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    /// The repository or its ref is not there yet (the daemon has not cloned it).
    #[error("the config repo is not read yet: {0}")]
    NotReady(String),
    #[error(transparent)]
    Read(#[from] anyhow::Error),
}

impl Dashboard {
    /// Reads `source`, at most `history` decision commits per canary page, the time from
    /// `clock` (the runtime's), sharing file parses through `parses` (the runtime's: in a
    /// daemon the tick holds mostly the same blobs).
    pub fn new(source: Source, history: usize, clock: Arc<Clock>, parses: Parses) -> Dashboard {
        Dashboard {
            source,
            history,
            cache: Arc::new(Mutex::new(None)),
            clock,
            parses,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Cached>> {
        match self.cache.lock() {
            Ok(g) => g,
            // The cache is replaced whole; a panic mid-build leaves the old value.
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The commit the ref points at now.
    fn head(&self) -> Result<git2::Oid, DashboardError> {
        let repo = git2::Repository::open(&self.source.git_dir)
            .map_err(|e| DashboardError::NotReady(e.message().to_string()))?;
        repo.refname_to_id(&self.source.reference).map_err(|e| {
            DashboardError::NotReady(format!("{}: {}", self.source.reference, e.message()))
        })
    }

    /// Runs `f` on the cache filled for the current head (read again only when it moved).
    fn with_cache<T>(
        &self,
        f: impl FnOnce(&mut Cached, &Path) -> Result<T, DashboardError>,
    ) -> Result<T, DashboardError> {
        let head = self.head()?;
        let mut guard = self.lock();
        if guard.as_ref().is_none_or(|c| c.head != head) {
            // The last commit's files, moved to this one by the tree diff.
            let files = guard.take().map_or_else(
                || CommitFiles::new(self.parses.clone(), Default::default()),
                |c| c.files,
            );
            *guard = Some(self.read(head, files)?);
        }
        match guard.as_mut() {
            Some(cached) => f(cached, &self.source.git_dir),
            None => Err(DashboardError::NotReady("nothing read".into())),
        }
    }

    fn read(&self, head: git2::Oid, mut files: CommitFiles) -> Result<Cached, DashboardError> {
        let dir = &self.source.git_dir;
        let repo = git2::Repository::open(dir).context("open the repository")?;
        let tree = repo
            .find_commit(head)
            .map(|c| c.tree_id())
            .with_context(|| format!("{}: cannot read commit {head}", dir.display()))?;
        files
            .move_to(&repo, Some(tree))
            .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
        files.forget_removed();
        let (settings, held) = settings_of(&files.at(&repo, Path::new("")));
        files.load(&settings);
        let loaded = files.loaded().to_loaded();
        let outside = files.at(&repo, Path::new(""));
        let links = links::Links::new(settings.forge.as_ref());
        let overview = model::overview(
            &Repo {
                files: &outside,
                snapshot: files.snapshot(),
                held: held.as_deref(),
                settings: &settings,
                loaded: &loaded,
            },
            &head.to_string(),
            &links,
            self.clock.now(),
        );
        // What a test reads to count parses (one per blob, none for a blob the tick holds).
        tracing::debug!(
            commit = %head,
            files = files.snapshot().files().len(),
            parsed = files.parsed(),
            refused = overview.refusals.len(),
            "Dashboard read a commit"
        );
        Ok(Cached {
            head,
            files,
            settings,
            overview: Arc::new(overview),
            details: HashMap::new(),
        })
    }

    /// Every canary at the ref's commit.
    pub fn overview(&self) -> Result<Arc<Overview>, DashboardError> {
        self.with_cache(|c, _| Ok(Arc::clone(&c.overview)))
    }

    /// One release's page model (a canary with waves); `None` when the repo has no such
    /// canary with waves.
    pub fn release(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<model::ReleaseView>, DashboardError> {
        let overview = self.overview()?;
        Ok(overview
            .releases
            .iter()
            .find(|r| r.namespace == namespace && r.name == name)
            .cloned())
    }

    /// One canary's page model; `None` when the repo has no such canary.
    pub fn canary(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<Detail>>, DashboardError> {
        let history = self.history;
        self.with_cache(|c, git_dir| {
            let id = format!("{namespace}/{name}");
            if let Some(d) = c.details.get(&id) {
                return Ok(Some(Arc::clone(d)));
            }
            let Some(summary) = c
                .overview
                .canaries
                .iter()
                .find(|s| s.namespace == namespace && s.name == name)
                .cloned()
            else {
                return Ok(None);
            };
            let links = links::Links::new(c.settings.forge.as_ref());
            let spec = c.files.loaded().canary(&id);
            let commits = crate::gitops::history_at(git_dir, c.head, Some((CANARY, &id)), history)
                .context("read the canary's history")?;
            let entries = crate::readers::history::entries(&commits, &id);
            let (mut audit, verdicts) = detail::audit(git_dir, c.head, &id);
            let log = detail::log(&entries, &links, &verdicts);
            audit.unverified = log.iter().filter(|e| e.unverified.is_some()).count();
            let detail = Detail {
                schedule: spec.map_or_else(Vec::new, |s| {
                    let active = matches!(summary.tone, "active" | "waiting");
                    detail::steps(s, summary.step, active)
                }),
                weights: detail::weight_points(&entries),
                metrics: detail::metric_series(&entries),
                judgements: judge::judgements(&entries, &commits),
                log,
                audit,
                commands: detail::commands(&id, &summary.operations),
                history_limit: history,
                summary,
            };
            let detail = Arc::new(detail);
            c.details.insert(id, Arc::clone(&detail));
            Ok(Some(detail))
        })
    }
}
