//! The one test world: a config repo in a bare remote (served by a real `git daemon`, or
//! reached as a local path), sluice's clone of it that ticks on a simulated clock, and a
//! human's clone that commits. Every test that runs the loop in-process builds one of these;
//! what differs between tests (the files, the transport, how strict a tick is, whether the
//! output folder must build with `kubectl kustomize`) is chosen when it is built.

use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value as Json;
use sluice::core::status::Phase;
use sluice::gitops::{ConfigRepo, Credentials};
use sluice::observer::{Observer, Offline};
use sluice::runtime::Runtime;
use sluice::tick::{tick, TickReport};

use crate::support::manifests::{CONFIGS, DEPLOYMENT};
use crate::support::rollout::{CANARY_FILE, OUTPUT};

use super::{git, human_clone, human_commit, seeded_remote, GitDaemon};

/// How the remote is reached.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Transport {
    /// A real `git daemon` on loopback (`git://`).
    Daemon,
    /// The bare repo's path.
    Local,
}

/// What [`World::tick`] asserts about each report.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Checks {
    /// Nothing: the caller reads the report.
    None,
    /// No spec errors.
    Specs,
    /// No spec errors and no canary outcome with an error.
    SpecsAndOutcomes,
}

/// A config repo, sluice's clone of it, a human's clone and the simulated clock.
pub(crate) struct World {
    tmp: tempfile::TempDir,
    /// Kept so the `git daemon`, when there is one, runs as long as the world.
    _daemon: Option<GitDaemon>,
    url: String,
    pub(crate) bare: PathBuf,
    repo: ConfigRepo,
    human: PathBuf,
    pub(crate) now: Timestamp,
    /// How many times sluice was restarted (each restart is a fresh clone).
    pub(crate) clones: usize,
    checks: Checks,
    /// An output folder that `kubectl kustomize` must build whenever [`World::until`] returns.
    built_output: Option<&'static str>,
}

impl World {
    /// A remote whose main holds `files`, reached through `transport`; ticks check `checks`.
    pub(crate) fn new(files: &[(&str, &str)], transport: Transport, checks: Checks) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let bare = seeded_remote(tmp.path(), files);
        let (daemon, url) = match transport {
            Transport::Daemon => {
                let daemon = GitDaemon::start(tmp.path());
                let url = daemon.url("config.git");
                (Some(daemon), url)
            }
            Transport::Local => (None, bare.display().to_string()),
        };
        let repo = clone(&url, &tmp.path().join("work0"));
        let human = human_clone(&url, &tmp.path().join("human"));
        World {
            tmp,
            _daemon: daemon,
            url,
            bare,
            repo,
            human,
            now: Timestamp::now(),
            clones: 0,
            checks,
            built_output: None,
        }
    }

    /// A `git daemon` remote holding `files`; a tick asserts there are no spec errors.
    pub(crate) fn served(files: &[(&str, &str)]) -> World {
        World::new(files, Transport::Daemon, Checks::Specs)
    }

    /// A local-path remote holding `files`; a tick asserts nothing.
    pub(crate) fn local(files: &[(&str, &str)]) -> World {
        World::new(files, Transport::Local, Checks::None)
    }

    /// The podinfo world of the loop tests: the source Deployment and its configs, `canary`
    /// at [`CANARY_FILE`] and `files` (objects the canary references), served by a
    /// `git daemon`; the output folder builds after every [`World::until`].
    pub(crate) fn with_files(canary: &str, files: &[(&str, &str)]) -> World {
        let mut seed = vec![
            ("apps/podinfo/deployment.yaml", DEPLOYMENT),
            ("apps/podinfo/configs.yaml", CONFIGS),
            (CANARY_FILE, canary),
        ];
        seed.extend_from_slice(files);
        World::served(&seed).building(OUTPUT)
    }

    /// After every [`World::until`], `kubectl kustomize` builds `folder` at main.
    pub(crate) fn building(mut self, folder: &'static str) -> World {
        self.built_output = Some(folder);
        self
    }

    /// sluice signs its commits with the SSH key at `key` from now on.
    pub(crate) fn sign_with(&mut self, key: &Path) {
        self.repo.set_signing(Some(sluice::gitops::Signing::Ssh {
            key_path: key.to_path_buf(),
        }));
    }

    /// The temporary folder everything lives in.
    pub(crate) fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// One tick at the simulated time, which then moves to when the tick asked to be woken;
    /// asserts what the world's [`Checks`] say.
    pub(crate) fn tick(&mut self) -> TickReport {
        let report = self.tick_with(&Offline, super::runtime());
        if self.checks != Checks::None {
            assert!(report.spec_errors.is_empty(), "{:?}", report.spec_errors);
        }
        if self.checks == Checks::SpecsAndOutcomes {
            for o in &report.outcomes {
                assert_eq!(o.error, None, "{}", o.id);
            }
        }
        report
    }

    /// [`World::tick`] with another observer (the live adapters) and runtime (its environment),
    /// nothing asserted.
    pub(crate) fn tick_with(&mut self, observer: &dyn Observer, runtime: &Runtime) -> TickReport {
        let report = tick_once(&mut self.repo, observer, runtime, self.now);
        self.now = report
            .wake_at()
            .unwrap_or(self.now + Duration::from_secs(1));
        report
    }

    /// Another process with a fresh clone in `dir` (under [`World::dir`]) ticks once at the
    /// simulated time; this world's own clone is left as it was.
    pub(crate) fn tick_a_second_clone(&self, dir: &str) -> TickReport {
        let mut again = clone(&self.url, &self.tmp.path().join(dir));
        tick_once(&mut again, &Offline, super::runtime(), self.now)
    }

    /// `n` ticks.
    pub(crate) fn ticks(&mut self, n: usize) {
        for _ in 0..n {
            self.tick();
        }
    }

    /// Ticks until a commit leaves the canary in `phase`.
    pub(crate) fn until(&mut self, phase: Phase) {
        self.until_restarting(phase, |_, _| false);
    }

    /// [`World::until`], restarting sluice once, before the first tick `i` for which
    /// `restart(world, i)` holds.
    pub(crate) fn until_restarting(
        &mut self,
        phase: Phase,
        mut restart: impl FnMut(&World, usize) -> bool,
    ) {
        let mut restarted = false;
        for i in 0..100 {
            if !restarted && restart(self, i) {
                self.restart();
                restarted = true;
            }
            let r = self.tick();
            if r.outcomes
                .iter()
                .any(|o| o.phase == Some(phase) && o.committed.is_some())
            {
                if let Some(folder) = self.built_output {
                    crate::support::rollout::kustomize_builds(&self.bare, folder);
                }
                return;
            }
        }
        panic!("never reached {phase:?}");
    }

    /// Ticks with `observer` (the live adapters) and `runtime` until a commit leaves the
    /// canary in `phase`; no tick may report a spec error.
    pub(crate) fn until_with(&mut self, observer: &dyn Observer, runtime: &Runtime, phase: Phase) {
        for _ in 0..100 {
            let r = self.tick_with(observer, runtime);
            assert!(r.spec_errors.is_empty(), "{:?}", r.spec_errors);
            if r.outcomes
                .iter()
                .any(|o| o.phase == Some(phase) && o.committed.is_some())
            {
                return;
            }
        }
        panic!("never reached {phase:?}");
    }

    /// A restart: a new process clones afresh and knows only what the remote holds.
    pub(crate) fn restart(&mut self) {
        self.clones += 1;
        let dir = self.tmp.path().join(format!("work{}", self.clones));
        self.repo = clone(&self.url, &dir);
    }

    /// The first `sluice/...` approval branch on the remote.
    pub(crate) fn approval_branch(&self) -> String {
        let branches = git(
            &self.bare,
            &[
                "for-each-ref",
                "--format=%(refname:short)",
                "refs/heads/sluice/",
            ],
        );
        branches
            .lines()
            .next()
            .unwrap_or_else(|| panic!("no approval branch: {branches}"))
            .to_string()
    }

    /// A human bumps the podinfo source's image from 6.7.0 to 6.7.1: a new revision.
    pub(crate) fn human_bumps_podinfo(&self) {
        self.human_writes(
            "apps/podinfo/deployment.yaml",
            &DEPLOYMENT.replace("6.7.0", "6.7.1"),
            "podinfo: 6.7.1",
        );
    }

    /// The human's clone (pull before use).
    pub(crate) fn human(&self) -> &Path {
        &self.human
    }

    /// A human pulls, writes `file` and pushes.
    pub(crate) fn human_writes(&self, file: &str, text: &str, message: &str) {
        git(&self.human, &["pull", "-q", "origin", "main"]);
        human_commit(&self.human, file, text, message);
    }

    /// A human commits a new podinfo version to the source Deployment.
    pub(crate) fn new_revision(&self, version: &str) {
        self.human_writes(
            "apps/podinfo/deployment.yaml",
            &DEPLOYMENT.replace("6.7.0", version),
            &format!("podinfo: {version}"),
        );
    }

    /// A human pulls, deletes `file` and pushes.
    pub(crate) fn human_removes(&self, file: &str, message: &str) {
        git(&self.human, &["pull", "-q", "origin", "main"]);
        git(&self.human, &["rm", "-q", file]);
        git(&self.human, &["commit", "-q", "-m", message]);
        git(&self.human, &["push", "-q", "origin", "HEAD:main"]);
    }

    /// `file` at `rev` of the remote.
    pub(crate) fn show(&self, rev: &str, file: &str) -> String {
        git(&self.bare, &["show", &format!("{rev}:{file}")])
    }

    /// A YAML file at main of the remote, as JSON (a status file, say).
    pub(crate) fn yaml_at_main(&self, file: &str) -> Json {
        serde_saphyr::from_str(&self.show("main", file)).unwrap()
    }

    /// sluice's commits on main, oldest first.
    pub(crate) fn commits(&self) -> Vec<SluiceCommit> {
        let shas = git(
            &self.bare,
            &["log", "--reverse", "--format=%H", "--author=sluice", "main"],
        );
        shas.lines()
            .map(|sha| {
                let body = git(&self.bare, &["log", "-1", "--format=%b", sha]);
                let events = body
                    .lines()
                    .take_while(|l| !l.trim().is_empty())
                    .map(str::to_string)
                    .collect();
                let subject = git(&self.bare, &["log", "-1", "--format=%s", sha])
                    .trim()
                    .to_string();
                let mut files: Vec<String> =
                    git(&self.bare, &["show", "--name-only", "--format=", sha])
                        .lines()
                        .filter(|l| !l.is_empty())
                        .map(str::to_string)
                        .collect();
                files.sort();
                SluiceCommit {
                    sha: sha.to_string(),
                    subject,
                    events,
                    files,
                }
            })
            .collect()
    }
}

/// One sluice commit on main.
#[derive(Debug)]
pub(crate) struct SluiceCommit {
    pub(crate) sha: String,
    pub(crate) subject: String,
    /// The body's first paragraph: the Flagger events, one a line.
    pub(crate) events: Vec<String>,
    /// The files it changed, sorted.
    pub(crate) files: Vec<String>,
}

/// One tick of `repo` at `now`, as the daemon runs it.
fn tick_once(
    repo: &mut ConfigRepo,
    observer: &dyn Observer,
    runtime: &Runtime,
    now: Timestamp,
) -> TickReport {
    tick(repo, &super::tick_context(observer, runtime), now).unwrap()
}

fn clone(url: &str, dir: &Path) -> ConfigRepo {
    ConfigRepo::open_or_clone(url, "main", dir, &Credentials::none()).unwrap()
}
