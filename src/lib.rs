//! sluice: GitOps progressive delivery. Runs canaries by committing route weights to the
//! config repo that Flux or Argo CD applies.
//!
//! This page is the one to read first: what each module is for, and the path of one canary
//! through one tick.
//!
//! # One tick, one canary: the walk
//!
//! ```text
//! cli ─► tick ─► facts (read, observe) ─► core (verdict, decide) ─► plan (render) ─► execute (commit, push, announce) ─► outcome
//!          ▲                                                                                                    │
//!          └───────────────── a rejected push: fetch, and the same steps on the new head ◄──────────────────────┘
//! ```
//!
//! Follow a canary from its YAML file to the pushed commit in these steps, in this order. Each
//! step names every module it enters; `e2e/it/module_graph.rs` fails when a tick can reach a
//! module this walk does not name, or the walk names one a tick cannot reach.
//!
//! 1. [`tick`] (`src/tick.rs`), called by [`cli`] with what the [`runtime`] built once (the
//!    [`clock`], the [`kube`] client, pooled [`http_client`]s, [`secrets`] and the credentials
//!    [`redact`] keeps out of logs): fetches through [`gitops`] (remote URLs split by
//!    [`url_credentials`]) and reads the head commit's files ([`commit_files`]), then calls each
//!    step below in turn, for the canaries this replica holds right now ([`holding`], whose
//!    renewals end at the renew deadline of [`lease_timing`]; asked again before committing); a rejected push loops back to the fetch (never a force push).
//!    Nothing it calls calls back into it.
//! 2. [`facts`] (`src/facts.rs`): reads the repo once (the [`yaml`] snapshot, settings, the
//!    specs as validated [`manifest::model::Canary`] values through [`manifest::load`], each
//!    router's fields read by its module in [`route`], alert providers by [`alert_kinds`]; a bad
//!    spec is an error with file, line and field), then observes each canary: status file and
//!    revision ([`workload`]), metrics ([`metrics`]), webhook answers, sync and readiness
//!    ([`gates`]) through the [`observer::Observer`], deleted specs ([`deleted`]), drift
//!    ([`drift`], which asks [`remake`] what sluice would have written, reads commits through
//!    [`commit_files`] and judges their [`signatures`]), approval pull requests ([`approval`],
//!    on the [`forge`]) and what a wave had before its release ([`waves`]). Observes only.
//! 3. [`core::verdict`] (`src/crates/core/verdict.rs`) and [`core::decide`]
//!    (`src/crates/core/decide.rs`): every decision, pure, in a separate crate
//!    (`src/crates/core/`) so the compiler keeps it so: whether the last commit is live, the
//!    release rule of waves and a wave's revert, the facts (drift, approvals, deleted specs),
//!    then the rollout rules. A [`core::decide::Decision`] cannot be built anywhere else.
//! 4. [`plan`] (`src/plan.rs`): each decision becomes the files of one commit (the route from
//!    the canary's router, workloads, kustomization, status file, the judge's report from
//!    [`judge`], through [`render`]) and its message with `Sluice-*` trailers.
//! 5. [`execute`] (`src/execute.rs`): the one place that carries the plan out: commits (per
//!    canary or per tick) through [`gitops`], the fast-forward-only push, then notifications
//!    ([`notify`]) and approval branches and pull requests.
//! 6. [`outcome`] (`src/outcome.rs`): what the tick reports for each canary, and its errors.
//!
//! Beside the tick, not entered by it: [`leadership`] (the lease `sluice run` holds before it
//! ticks), [`shards`] (the shard Leases of `--shards`; the tick is given the shards held as a
//! [`holding::Holding`]), [`renewal`] (the task that renews both Leases, independent of ticks), [`server`] (probes, `/metrics`, the git webhook that wakes the loop), [`manual`]
//! (operations as one commit through the executor), and the readers of what ticks wrote:
//! [`readers`], [`dashboard`] and [`audit`].
//!
//! The folders under `src/` are modules of this crate, except `src/crates/`, which holds the
//! workspace's other crates: the pure core (`sluice-core`, `src/crates/core/`), the libgit2
//! options (the one crate allowed unsafe code) and `malloc_trim`.
//!
//! # Module map
//!
//! | module | job | must not |
//! |---|---|---|
//! | [`cli`] | one file per subcommand; builds the [`runtime::Runtime`] and calls the tick or an operation | hold logic a test cannot reach |
//! | [`tick`] | one pass of the loop, steps in order | be called by anything below it |
//! | [`facts`] | what a tick reads and gathers before deciding | decide, commit or push |
//! | [`plan`] | the core's verdicts as commits (files, messages) | read the forge, commit or push |
//! | [`execute`] | the one executor: commits, the push, notifications, approval branches and pull requests | decide |
//! | [`outcome`] | what a tick reports per canary, and its errors | decide |
//! | [`runtime`] | what is built once at start: the tokio runtime, the environment snapshot, tokens, the kube client, the settings cache, the clock | decide anything |
//! | [`clock`] | the one clock commands read and sleep on: the wall clock, or a stepped one for tests (`SLUICE_CLOCK=stepped`) | be read by the core |
//! | [`core`] | the pure crate: model, schedules, facts, `verdict` and `decide`, manual-operation rules, status, the `sluice plan` simulator | touch git, HTTP, files, YAML or the clock |
//! | [`yaml`] | the leaf every reader shares: one walk and parse of the repo per tick (the snapshot), line-marked trees, field readers, `file:line: field: message` errors | know about canaries |
//! | [`manifest`] | the snapshot's YAML to the core's model; repo settings; the rule of every field that names a path, URL, host or Secret (`manifest::named_paths`) | do IO |
//! | [`route`] | one router per provider: its `service` fields, its template, its objects | know about other providers |
//! | [`workload`] | primary/canary workloads, Services and autoscalers from the user's manifests | edit a file a human wrote |
//! | [`render`] | a decision to files and a commit message | commit |
//! | [`deleted`] | canaries whose spec left the repo: found, and `revertOnDeletion`'s revert rendered | decide, or run without a status file's record |
//! | [`observer`] | the adapters' observations for the core: metrics, webhooks, sync, readiness | decide |
//! | [`metrics`], [`gates`] | metric providers (one module and one line of `metrics::registry` each) and queries; webhooks, GitOps sync, readiness | decide |
//! | [`judge`] | the statistical judge's settings from YAML, series files, its report as a table or JSON (the judging is `core::judge`) | judge |
//! | [`approval`] | approval branches and pull requests: read before deciding, rendered and opened after the push | commit or push |
//! | [`readers`] | what sluice recorded, read back for people: status rows, a canary's decisions from trailers, a commit's YAML written out; shared by `status`, `history` and the dashboard | write to the repository |
//! | [`dashboard`] | the read-only dashboard's model (cached by head commit), charts and pages; its routes live in [`server`] | fetch, write, or show a secret |
//! | [`commit_files`] | the files of one commit after another as a checkout gives them (links refused), followed by tree diffs and parsed once per blob: the one reader of a commit's files, for the tick, drift's verifier, audit, approvals, `operate` and the dashboard | write to the disk, or follow a link |
//! | [`remake`] | the one replay of a commit: what sluice would have written for it (the core's decision made again, rendered on the commit's base), for audit, approvals and drift's verifier | read anything but the base it is given |
//! | [`audit`] | `sluice audit`: every decision of the branch made again from git (parent tree, `Sluice-Replay` record) and compared with the commit | write to the repository |
//! | [`signatures`] | commit signatures as the signing policy at the parent judges them, for audit, drift and approvals | trust a commit's own policy |
//! | [`drift`] | owned files changed outside sluice, found from git, and the files a restore writes back | decide |
//! | [`manual`] | manual operations (`sluice approve` ...) as one commit, through the executor | run inside a tick |
//! | [`adopt`] | the switch from Flagger: whether each step of its runbook is safe, over observed facts (`sluice adopt check`) | read the cluster or the repo itself |
//! | [`alert_kinds`] | Flagger's AlertProvider types (Slack, Teams, Discord, Rocket, Google Chat): one module and one registry line each, its post URL and body | send, or know a canary |
//! | [`notify`] | Slack, Teams, Discord and webhook notifications; Flagger's per-canary alerts (`analysis.alerts`) | fail a tick |
//! | [`gitops`] | the clone: fetch, commit, push, history, maintenance | know about canaries |
//! | [`forge`] | GitHub, GitLab, Gitea, Forgejo, Bitbucket, Azure DevOps pull requests: one module and one line of `forge::registry` each | know about canaries |
//! | [`server`], [`http_client`] | `/metrics`, probes, the git webhook; pooled HTTP clients and bounded reading of their answers | decide |
//! | [`leadership`] | the Kubernetes Lease `sluice run --leader-election` holds before it ticks, so one replica commits | decide a canary |
//! | [`shards`] | the shard Leases of `sluice run --shards N`: member and shard Leases, which canaries this replica ticks | decide a canary |
//! | [`holding`] | what this replica holds right now (shards, or the lead), shared between the Lease renewal task and the ticks | talk to the API |
//! | [`lease_timing`] | when Leases are renewed and until when a renewal holds (retry period, renew deadline), pure | read a clock |
//! | [`renewal`] | the task that renews the leader and shard Leases every retry period, independent of ticks | decide a canary |
//! | [`kube`] | builds the Kubernetes client | read or judge objects |
//! | [`url_credentials`] | credentials split out of git remote URLs; URL redaction for git and the forges | log a secret |
//! | [`secrets`] | `secretRef` values the operator mapped in (environment or mounted Secret volume) | read a Secret from git or the cluster |
//! | [`waves`] | waves at the edges: what a reverted wave had before the release (read from git) and its revert's files, kube contexts checked, a client per wave cluster | decide (the release rule and the revert are [`core::waves`]'s) |
//! | [`adopt`] | `sluice adopt`: a Flagger repo's canaries, what applies their files, and the one commit that moves their sources out of every applied path and adds the outputs' applier and settings; the runbook | write git (the CLI does), or decide a rollout |
//! | [`redact`] | every credential read, and its base64 forms, kept out of log lines and logged answers | put a backend's answer anywhere but a log |
//!
//! Data flows one way: `e2e/it/module_graph.rs` fails when a module uses one that uses it
//! back, and `e2e/it/core_purity.rs` when the core can reach an adapter crate.
// libgit2's socket timeouts, whose only interface is unsafe, are set in the tiny crate
// `src/crates/libgit2_opts/` so this one stays free of unsafe code.
#![forbid(unsafe_code)]
// A test may unwrap: its panic is the failure it reports. Everywhere else the workspace lints
// (Cargo.toml) reject unwrap() and expect().
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

/// The pure core (its own crate, `src/crates/core/`): model, schedules, `decide`, `plan`, operations.
pub use sluice_core as core;

pub mod adopt;
pub mod alert_kinds;
pub mod approval;
pub mod audit;
pub mod cli;
pub mod clock;
pub mod commit_files;
pub mod dashboard;
pub mod deleted;
pub mod drift;
pub mod execute;
pub mod facts;
pub mod forge;
pub mod gates;
pub mod gitops;
pub mod holding;
pub mod http_client;
pub mod judge;
pub mod kube;
pub mod leadership;
pub mod lease_timing;
pub mod manifest;
pub mod manual;
pub mod metrics;
pub mod notify;
pub mod observer;
pub mod outcome;
pub mod plan;
pub mod readers;
pub mod redact;
pub mod remake;
pub mod render;
pub mod renewal;
pub mod route;
pub mod runtime;
pub mod secrets;
pub mod server;
pub mod shards;
pub mod signatures;
pub mod tick;
pub mod url_credentials;
pub mod waves;
pub mod workload;
pub mod yaml;
