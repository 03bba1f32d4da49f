//! The runtime context: what the process reads from its environment and builds once at start,
//! then lends to every tick.
//!
//! - One tokio runtime for all async adapters (metric queries, webhooks, forge calls, the kube
//!   client, the HTTP server, the lease).
//! - A snapshot of the environment taken at start: tokens, Prometheus auth, the notification
//!   URLs that repo settings name by variable and mapped Secrets ([`crate::secrets`]) are looked
//!   up here, never in `std::env` per tick.
//! - Pooled HTTP clients: one set for webhooks, notifications and Prometheus (with its
//!   credentials), one for the forge (with its token), each read and checked once.
//! - One lazily built kube client, shared by sync, readiness and the lease.
//! - The repo settings, re-parsed only when `.sluice/config.yaml` changed.
//! - The one function every repo file a tick reads goes through (tests count reads with it);
//!   the bytes come from the head's tree objects (the clone has no work tree).
//! - The files of the last tick's head ([`CommitFiles`], moved to the next head by the tree
//!   diff) and the status files it parsed, by blob id, so that a tick parses only what changed;
//!   and the canaries it loaded, so that a tick reads and checks again only the specs a change
//!   concerns.
//!
//! It holds no per-canary state and makes no decision.

use crate::clock::Clock;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use tracing::warn;

use crate::commit_files::{read_text, CommitFiles};
use crate::core::status::Status;
use crate::forge::github_app::AppTokens;
use crate::forge::{ForgeClient, ForgeSettings, ForgeToken};
use crate::gitops::ConfigRepo;
use crate::http_client::HttpClients;
use crate::manifest::load::{Existing, Loaded};
use crate::manifest::load_incremental::KeptLoad;
use crate::manifest::settings::Settings;
use crate::metrics::prometheus::{Auth, PrometheusAccess, PASSWORD_VAR, TOKEN_VAR, USERNAME_VAR};
use crate::render::status_file::SpecRecord;
use crate::secrets::Secrets;
use crate::yaml::error::SpecError;
use crate::yaml::parses::Parses;
use crate::yaml::snapshot::{Contents, ReadError};

/// Worker threads of the shared tokio runtime: observation fans out on them while the tick's
/// thread blocks, and the HTTP server keeps answering meanwhile.
const WORKER_THREADS: usize = 2;

/// The process-wide context built once at start.
pub struct Runtime {
    tokio: tokio::runtime::Runtime,
    env: BTreeMap<String, String>,
    http: HttpClients,
    prometheus: PrometheusAccess,
    /// The forge client, or why the token settings cannot be used.
    forge: Result<ForgeClient, String>,
    /// The GitHub App's installation tokens (`forge.githubApp`), kept across ticks while the
    /// `forge` settings that made them stay the same.
    github_app: Mutex<Option<(ForgeSettings, Arc<AppTokens>)>>,
    secrets: Secrets,
    kube: tokio::sync::OnceCell<Option<kube::Client>>,
    /// The clients of wave clusters (`cluster:` of a wave), built on first use.
    clusters: crate::waves::clusters::Clusters,
    settings: Mutex<Option<CachedSettings>>,
    reader: Box<FileReader>,
    /// Spec warnings already logged, so each is logged once per version of its file.
    warnings: crate::manifest::warning_log::WarningLog,
    /// The files of the head the last tick read (a reader of an older head holds its own).
    files: Mutex<Arc<CommitFiles>>,
    statuses: Mutex<ParsedStatuses>,
    /// The canaries as the last tick loaded them, and the head it loaded them at.
    loads: Mutex<Option<(git2::Oid, KeptLoad)>>,
    /// What drift's check keeps between ticks (its walk, verdicts and verifier's base).
    drift: Arc<crate::drift::Memory>,
    /// File parses by blob id, shared by the snapshot, drift's verifier and the dashboard.
    parses: Parses,
    /// Where commands read the time and sleep ([`crate::clock`]); shared with the servers and
    /// the metric queries.
    clock: Arc<Clock>,
}

/// Status files parsed by the last tick, by blob id: each one's status and spec record.
pub type ParsedStatuses = HashMap<git2::Oid, (Status, Option<SpecRecord>)>;

/// Where a repo file's text comes from: the head's tree, given the file's path below the work
/// dir.
pub type Source<'a> = &'a dyn Fn(&Path) -> Result<String, ReadError>;

/// Reads a repo file as text (bounded, UTF-8) from its [`Source`]; tests wrap it to count.
pub type FileReader = dyn Fn(&Path, Source<'_>) -> Result<String, ReadError> + Send + Sync;

/// Settings parsed from one version of `.sluice/config.yaml`.
#[derive(Clone)]
struct CachedSettings {
    /// The git blob id of the file they were read from (`None`: no file).
    source: Option<String>,
    settings: Settings,
    errors: Vec<SpecError>,
}

impl Runtime {
    /// Reads the environment once, starts the tokio runtime and builds the pooled clients.
    pub fn from_env() -> std::io::Result<Runtime> {
        Runtime::with_env(std::env::vars().collect())
    }

    /// A runtime context over `env` instead of the process environment (tests).
    pub fn with_env(env: BTreeMap<String, String>) -> std::io::Result<Runtime> {
        Runtime::build(env, None)
    }

    /// The runtime of one config repo of several (`sluice run --repos`): its own environment
    /// (its credentials, see [`crate::cli::repos`]), caches and clients, on this runtime's
    /// clock.
    pub fn for_repo(&self, env: BTreeMap<String, String>) -> std::io::Result<Runtime> {
        Runtime::build(env, Some(Arc::clone(&self.clock)))
    }

    fn build(env: BTreeMap<String, String>, clock: Option<Arc<Clock>>) -> std::io::Result<Runtime> {
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKER_THREADS)
            .thread_name("sluice-io")
            .enable_all()
            .build()?;
        let var = |name: &str| env.get(name).filter(|v| !v.is_empty()).cloned();
        let http = HttpClients::new().map_err(std::io::Error::other)?;
        let secrets = Secrets::from_vars(env.clone());
        let clusters = crate::waves::clusters::Clusters::new(
            secrets.clone(),
            crate::waves::servers::allows_http(
                env.get(crate::waves::servers::ALLOW_HTTP_VAR)
                    .map(String::as_str),
            ),
        );
        let origins = crate::metrics::prometheus::origins(
            &var(crate::metrics::prometheus::ORIGINS_VAR).unwrap_or_default(),
        )
        .map_err(std::io::Error::other)?;
        let prometheus =
            match Auth::from_values(var(TOKEN_VAR), var(USERNAME_VAR), var(PASSWORD_VAR)) {
                Ok(auth) if auth != Auth::None && origins.is_empty() => {
                    return Err(std::io::Error::other(format!(
                        "{TOKEN_VAR} or {USERNAME_VAR} is set, but {} is not: list the \
                         Prometheus origins (scheme://host[:port], comma-separated) these \
                         credentials may be sent to; the repo names the addresses queried, so \
                         without the list anyone who can push could have them sent elsewhere",
                        crate::metrics::prometheus::ORIGINS_VAR
                    )))
                }
                Ok(auth) => PrometheusAccess::new(http.clone(), auth),
                Err(e) => PrometheusAccess::unusable(http.clone(), e),
            }
            .with_origins(origins)
            .with_secrets(secrets.clone())
            .with_cloudwatch(crate::metrics::cloudwatch::CloudwatchEnv::from_lookup(var));
        let forge = ForgeToken::from_lookup(|name| env.get(name).cloned())
            .and_then(ForgeClient::new)
            .map_err(|e| e.to_string());
        let clock = match clock {
            Some(clock) => clock,
            None => Arc::new(
                Clock::named(env.get(crate::clock::VAR).map(String::as_str))
                    .map_err(std::io::Error::other)?,
            ),
        };
        let prometheus = prometheus.with_clock(Arc::clone(&clock));
        // The tick's files and drift's verifier hold mostly the same blobs: one parse each.
        let parses = Parses::default();
        Ok(Runtime {
            tokio,
            env,
            secrets,
            http,
            prometheus,
            forge,
            github_app: Mutex::new(None),
            kube: tokio::sync::OnceCell::new(),
            clusters,
            settings: Mutex::new(None),
            reader: Box::new(|path, source| source(path)),
            warnings: Default::default(),
            files: Mutex::new(Arc::new(CommitFiles::new(
                parses.clone(),
                Default::default(),
            ))),
            statuses: Mutex::new(HashMap::new()),
            loads: Mutex::new(None),
            drift: Arc::new(crate::drift::Memory::new(parses.clone())),
            parses,
            clock,
        })
    }

    /// File parses by blob id, shared by every holder of a commit's files in this runtime.
    pub fn parses(&self) -> &Parses {
        &self.parses
    }

    /// What drift's check keeps from one tick to the next ([`crate::drift::Memory`]).
    pub fn drift(&self) -> &Arc<crate::drift::Memory> {
        &self.drift
    }

    /// The clock commands read the time from and sleep on.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The same clock, for what outlives a borrow of the runtime (servers, spawned tasks).
    pub fn shared_clock(&self) -> Arc<Clock> {
        Arc::clone(&self.clock)
    }

    /// This context with every repo file a tick reads going through `reader`, which is given
    /// the file's path below the work dir and where its text comes from (tests count reads
    /// with it).
    pub fn with_reader(
        mut self,
        reader: impl Fn(&Path, Source<'_>) -> Result<String, ReadError> + Send + Sync + 'static,
    ) -> Runtime {
        self.reader = Box::new(reader);
        self
    }

    /// Reads a repo file (`path` below the work dir) from `source`: the tick's only way to
    /// read the repo's files.
    pub fn read_file(&self, path: &Path, source: Source<'_>) -> Result<String, ReadError> {
        (self.reader)(path, source)
    }

    /// The files of the clone's head: the last ones read, moved to the head by the tree diff
    /// when it moved; files are read through [`Runtime::read_file`] unless someone in this
    /// runtime holds their parse. The tick reads them once at its start with `again` (files
    /// whose read failed are read again: the reason may have passed); every later reader of
    /// the same head takes them as they are. When the head's tree cannot be read, the files
    /// are none (the clone has no work tree to fall back on).
    pub fn head_files(&self, repo: &ConfigRepo, again: bool) -> Arc<CommitFiles> {
        let mut kept = match self.files.lock() {
            Ok(guard) => guard,
            // A panic elsewhere while holding the lock: start again from nothing.
            Err(poisoned) => {
                let mut guard = poisoned.into_inner();
                *guard = Arc::new(guard.emptied());
                guard
            }
        };
        let tree = match repo.tree_at(repo.head()) {
            Ok(tree) => tree,
            Err(e) => {
                warn!(error = %e, "Cannot read the head's tree; reading no file");
                *kept = Arc::new(kept.emptied());
                return Arc::clone(&kept);
            }
        };
        if kept.tree() == Some(tree) && !(again && kept.has_unreadable()) {
            return Arc::clone(&kept);
        }
        if kept.tree().is_none() {
            // The first read: through the folders the clone keeps.
            *kept = Arc::new(CommitFiles::new(
                self.parses.clone(),
                repo.folders().clone(),
            ));
        }
        if Arc::get_mut(&mut kept).is_none() {
            // A reader still holds the files of an earlier head: these start from none (what
            // the holder keeps is taken by blob id, not read again).
            *kept = Arc::new(kept.emptied());
        }
        if let Some(files) = Arc::get_mut(&mut kept) {
            let (git, root) = (repo.git(), repo.root());
            let mut read = |name: &str, id: git2::Oid| {
                self.read_file(&root.join(name), &|_| read_text(git, id))
            };
            if let Err(e) = files.move_reading(git, Some(tree), &mut read) {
                warn!(error = %e, "Cannot compare the head with the last tick's; reading every file");
                *files = files.emptied();
                if let Err(e) = files.move_reading(git, Some(tree), &mut read) {
                    warn!(error = %e, "Cannot list the head's files; reading none");
                    *files = files.emptied();
                }
            }
        }
        Arc::clone(&kept)
    }

    /// The canaries of `existing.files` (the snapshot of `head`) as
    /// [`load_in`](crate::manifest::load::load_in) loads them, reading and checking again only
    /// what changed since the head of the last load: `changed_since(last)` gives the paths
    /// that differ between that head and `head` (`None`: unknown, and every file is read).
    pub fn load(
        &self,
        head: git2::Oid,
        settings: &Settings,
        existing: &Existing,
        changed_since: impl FnOnce(git2::Oid) -> Option<BTreeSet<String>>,
    ) -> Loaded {
        let mut last = match self.loads.lock() {
            Ok(guard) => guard,
            // A panic elsewhere while holding the lock: start again from nothing.
            Err(poisoned) => {
                let mut guard = poisoned.into_inner();
                *guard = None;
                guard
            }
        };
        let (mut kept, changed) = match last.take() {
            Some((at, kept)) if at == head => (kept, BTreeSet::new()),
            Some((at, kept)) => match changed_since(at) {
                Some(changed) => (kept, changed),
                None => (KeptLoad::default(), BTreeSet::new()),
            },
            None => (KeptLoad::default(), BTreeSet::new()),
        };
        let mut changed = changed;
        // A file that could not be read is read again, as the snapshot reads it again: the
        // reason may have passed without a change in git.
        changed.extend(
            existing
                .files
                .files()
                .iter()
                .filter(|f| matches!(*f.contents, Contents::Unreadable(_)))
                .map(|f| f.name.clone()),
        );
        kept.refresh(settings, existing, &changed);
        let loaded = kept.to_loaded();
        *last = Some((head, kept));
        loaded
    }

    /// How many spec files the kept load has read (what a test counts).
    pub fn spec_reads(&self) -> usize {
        self.loads
            .lock()
            .ok()
            .and_then(|l| l.as_ref().map(|(_, kept)| kept.reads()))
            .unwrap_or(0)
    }

    /// The status files the last tick parsed (`facts/statuses.rs` keeps them).
    pub fn parsed_statuses(&self) -> MutexGuard<'_, ParsedStatuses> {
        match self.statuses.lock() {
            Ok(guard) => guard,
            // A panic elsewhere while holding the lock left a map that is still whole.
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Runs a future to completion on the shared runtime (from a thread that is not one of its
    /// workers: the tick's thread or a CLI command's).
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.tokio.block_on(future)
    }

    /// The shared tokio runtime, to spawn long-running tasks (the HTTP server).
    pub fn tokio(&self) -> &tokio::runtime::Runtime {
        &self.tokio
    }

    /// An environment variable as it was at start; empty values count as unset.
    pub fn env(&self, name: &str) -> Option<&str> {
        self.env
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// Pooled clients for webhooks and notifications.
    pub fn http(&self) -> &HttpClients {
        &self.http
    }

    /// Pooled clients and credentials (`SLUICE_PROMETHEUS_*`) for metric queries.
    pub fn prometheus(&self) -> &PrometheusAccess {
        &self.prometheus
    }

    /// The forge client with the token (`SLUICE_FORGE_TOKEN` or `SLUICE_FORGE_TOKEN_FILE`)
    /// read at start, or why that token cannot be used.
    pub fn forge_client(&self) -> Result<&ForgeClient, &str> {
        self.forge.as_ref().map_err(String::as_str)
    }

    /// The forge client for `settings`: with `forge.githubApp`, one that authenticates as the
    /// App (its installation tokens kept across ticks while the settings stay the same, the key
    /// read from its Secret when they change); otherwise [`Runtime::forge_client`].
    pub fn forge_client_for(&self, settings: &ForgeSettings) -> Result<ForgeClient, String> {
        let client = self.forge_client()?;
        let Some(app) = &settings.github_app else {
            return Ok(client.clone());
        };
        let mut kept = self.github_app.lock().unwrap_or_else(|e| e.into_inner());
        let tokens = match kept.as_ref().filter(|(s, _)| s == settings) {
            Some((_, tokens)) => Arc::clone(tokens),
            None => {
                let tokens =
                    AppTokens::for_settings(client.http().clone(), settings, app, &self.secrets)
                        .map_err(|e| e.to_string())?;
                let tokens = Arc::new(tokens);
                *kept = Some((settings.clone(), Arc::clone(&tokens)));
                tokens
            }
        };
        Ok(client.with_app(tokens, Arc::clone(&self.clock)))
    }

    /// The Kubernetes Secrets the operator mapped into the process (`secretRef` values of
    /// MetricTemplates and AlertProviders).
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// This runtime with `client` as its Kubernetes access (`None`: none), instead of the one
    /// the environment gives: tests pointing sluice at a fake API server.
    pub fn with_kube(mut self, client: Option<kube::Client>) -> Runtime {
        self.kube = tokio::sync::OnceCell::new_with(Some(client));
        self
    }

    /// The kube client, built on first use from the in-cluster config or `KUBECONFIG`;
    /// `None` (logged once) when there is no Kubernetes access.
    pub async fn kube_client(&self) -> Option<kube::Client> {
        self.kube
            .get_or_init(|| async {
                match crate::kube::infer_client().await {
                    Ok(c) => Some(c),
                    Err(e) => {
                        warn!(error = %e, "No Kubernetes access: sync targets cannot be read");
                        None
                    }
                }
            })
            .await
            .clone()
    }

    /// The spec warnings this process has logged (see [`crate::manifest::warning_log`]).
    pub fn spec_warnings(&self) -> &crate::manifest::warning_log::WarningLog {
        &self.warnings
    }

    /// The client of a wave's cluster (`cluster:`), or sluice's own without one.
    pub async fn cluster_client(
        &self,
        cluster: Option<&crate::core::waves::Cluster>,
    ) -> Result<kube::Client, String> {
        match cluster {
            Some(cluster) => self.clusters.client(cluster).await,
            None => self.kube_client().await.ok_or_else(|| {
                "no Kubernetes access (in-cluster config or KUBECONFIG)".to_string()
            }),
        }
    }

    /// Whether a wave's cluster answers (see [`crate::waves::clusters::Clusters::reach`]).
    pub async fn cluster_reach(
        &self,
        cluster: &crate::core::waves::Cluster,
    ) -> Result<(), crate::core::observe::Unreachable> {
        self.clusters.reach(cluster).await
    }

    /// The repo settings of the `.sluice/config.yaml` whose git blob id is `source` (`None`:
    /// no such file); `read` reads and parses the file, and runs only when `source` differs
    /// from the last call's.
    pub fn settings(
        &self,
        source: Option<String>,
        read: impl FnOnce() -> (Settings, Vec<SpecError>),
    ) -> (Settings, Vec<SpecError>) {
        let mut cache = match self.settings.lock() {
            Ok(guard) => guard,
            // A panic elsewhere while holding the lock left a value that is still whole.
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(cached) = cache.as_ref().filter(|c| c.source == source) {
            return (cached.settings.clone(), cached.errors.clone());
        }
        let (settings, errors) = read();
        *cache = Some(CachedSettings {
            source,
            settings: settings.clone(),
            errors: errors.clone(),
        });
        (settings, errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn runtime(vars: &[(&str, &str)]) -> Runtime {
        Runtime::with_env(
            vars.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn environment_is_read_once_and_empty_values_are_unset() {
        let rt = runtime(&[("HOOK_URL", "http://x"), ("EMPTY", "")]);
        assert_eq!(rt.env("HOOK_URL"), Some("http://x"));
        assert_eq!(rt.env("EMPTY"), None);
        assert_eq!(rt.env("MISSING"), None);
    }

    #[test]
    fn token_problems_surface_from_the_start_snapshot() {
        let rt = runtime(&[
            ("SLUICE_FORGE_TOKEN", "t0k"),
            ("SLUICE_FORGE_TOKEN_FILE", "/x"),
        ]);
        assert!(rt.forge_client().unwrap_err().contains("set only one"));
        let rt = runtime(&[("SLUICE_FORGE_TOKEN", "t0k\n")]);
        assert!(rt.forge_client().is_ok());
        let rt = runtime(&[("SLUICE_PROMETHEUS_USERNAME", "u")]);
        assert!(rt
            .prometheus()
            .auth()
            .unwrap_err()
            .contains("SLUICE_PROMETHEUS_PASSWORD"));
        let rt = runtime(&[
            ("SLUICE_PROMETHEUS_TOKEN", "p"),
            ("SLUICE_PROMETHEUS_ORIGINS", "http://prom.monitoring:9090"),
        ]);
        assert!(matches!(rt.prometheus().auth(), Ok(Auth::Bearer(t)) if t == "p"));
    }

    /// The operator's Prometheus credentials go only to the origins the operator lists: the
    /// repo names the addresses queried (`metricsServer`, `prometheus.address`, a template's
    /// `address`), and anyone who can push could name a server of theirs.
    #[test]
    fn operator_prometheus_credentials_go_only_to_the_listed_origins() {
        let env = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let err = Runtime::with_env(env(&[("SLUICE_PROMETHEUS_TOKEN", "operator-tok")]))
            .err()
            .expect("credentials without origins do not start");
        assert!(
            err.to_string().contains("SLUICE_PROMETHEUS_ORIGINS"),
            "{err}"
        );
        let err = Runtime::with_env(env(&[("SLUICE_PROMETHEUS_ORIGINS", "prom:9090")]))
            .err()
            .expect("an origin that is no URL");
        assert!(err.to_string().contains("not an http(s) address"), "{err}");

        let rt = runtime(&[
            ("SLUICE_PROMETHEUS_TOKEN", "operator-tok"),
            (
                "SLUICE_PROMETHEUS_ORIGINS",
                "http://prom.monitoring:9090, https://thanos.example",
            ),
        ]);
        let access = rt.prometheus();
        for allowed in [
            "http://prom.monitoring:9090",
            "http://prom.monitoring:9090/prometheus",
            "https://thanos.example:443/api",
        ] {
            assert!(
                matches!(access.auth_for(allowed), Ok(Auth::Bearer(t)) if t == "operator-tok"),
                "{allowed}"
            );
        }
        for refused in [
            "http://attacker:9090",
            "http://prom.monitoring:9091",
            "https://prom.monitoring:9090",
            "http://thanos.example",
            "not a url",
        ] {
            let err = access.auth_for(refused).unwrap_err();
            assert!(
                err.contains("SLUICE_PROMETHEUS_ORIGINS"),
                "{refused}: {err}"
            );
        }
        // Without operator credentials nothing is sent, wherever the repo points.
        let rt = runtime(&[]);
        assert!(matches!(
            rt.prometheus().auth_for("http://attacker:9090"),
            Ok(Auth::None)
        ));
    }

    #[test]
    fn settings_are_parsed_again_only_when_the_file_changed() {
        let rt = runtime(&[]);
        let parses = Cell::new(0);
        let parse = || {
            parses.set(parses.get() + 1);
            (Settings::default(), Vec::new())
        };
        rt.settings(Some("a1".into()), parse);
        rt.settings(Some("a1".into()), parse);
        assert_eq!(parses.get(), 1, "same blob: not read again");
        rt.settings(Some("b2".into()), parse);
        assert_eq!(parses.get(), 2, "changed blob: read again");
        rt.settings(None, parse);
        rt.settings(None, parse);
        assert_eq!(parses.get(), 3, "the file removed: parsed once more");
    }
}
