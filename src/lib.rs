//! sluice: GitOps progressive delivery. Runs canaries by committing route weights to the
//! config repo that Flux or Argo CD applies.
//!
//! This page is the one to read first: what each module is for, and the path of one canary
//! through one tick.
//!
//! # One tick, one canary, six files
//!
//! ```text
//! cli ─► tick ─► spec (load) ─► observe ─► core::decide ─► render (+ the canary's router) ─► gitops (commit, push)
//!          └─ then, for what reached the remote: notifications, approval branches and pull requests
//! ```
//!
//! Follow a canary from its YAML file to the pushed commit in these files, in this order:
//!
//! 1. [`tick`] (`src/tick.rs`): fetches, then calls each step below in turn; a rejected
//!    push loops back to the fetch (never a force push). Nothing it calls calls back into it.
//! 2. [`spec::load`] (`src/spec/load.rs`): the tick's one snapshot of the repo's YAML becomes
//!    validated [`spec::model::Canary`] values; a bad spec is an error with file, line and
//!    field.
//! 3. [`observe`] (`src/observe.rs`): metric queries, webhook answers and GitOps sync state,
//!    only what [`core::decide::wants`] asks for, gathered concurrently into plain data.
//! 4. [`core::decide`] (`src/core/decide.rs`): the pure decision. No IO, no clock; a
//!    separate crate (`src/core/`) so the compiler keeps it that way.
//! 5. [`render`] (`src/render/mod.rs`): the decision becomes the files of one commit (the
//!    route from the canary's router in [`route`], workloads, kustomization, status file)
//!    and its message with `Sluice-*` trailers.
//! 6. [`gitops`] (`src/gitops/repo.rs`): the one path that writes commits (main and approval
//!    branches, signing) and the fast-forward-only push.
//!
//! # Module map
//!
//! | module | job | must not |
//! |---|---|---|
//! | [`cli`] | one file per subcommand; builds the [`runtime::Runtime`] and calls the tick or an operation | hold logic a test cannot reach |
//! | [`tick`] | one pass of the loop, steps in order | be called by anything below it |
//! | [`runtime`] | what is built once at start: the tokio runtime, the environment snapshot, tokens, the kube client, the settings cache | decide anything |
//! | [`core`] | the pure crate: model, schedules, `decide`, `plan`, manual-operation rules, status | touch git, HTTP, files, YAML or the clock |
//! | [`yaml`] | the leaf every reader shares: one walk and parse of the repo per tick (the snapshot), line-marked trees, field readers, `file:line: field: message` errors | know about canaries |
//! | [`spec`] | the snapshot's YAML to the core's model; repo settings | do IO |
//! | [`route`] | one router per provider: its `service` fields, its template, its objects | know about other providers |
//! | [`workload`] | primary/canary workloads, Services and autoscalers from the user's manifests | edit a file a human wrote |
//! | [`render`] | a decision to files and a commit message | commit |
//! | [`deleted`] | canaries whose spec left the repo: `revertOnDeletion`'s revert, orphaned output | run without a status file's record |
//! | [`observe`] | the adapters' observations for the core | decide |
//! | [`metrics`], [`gates`] | metric providers and queries; webhooks, GitOps sync, readiness, lease | decide |
//! | [`approval`] | approval branches and pull requests: read before deciding, kept in line after the push | commit or push the main branch |
//! | [`audit`] | `sluice audit`: every decision of the branch made again from git (parent tree, `Sluice-Replay` record) and compared with the commit | write to the repository |
//! | [`drift`] | owned files changed outside sluice, found from git: hold or restore | decide a step |
//! | [`operate`] | manual operations (`sluice approve` ...) as one commit | run inside a tick |
//! | [`notify`] | Slack, Teams, Discord and webhook notifications; Flagger's per-canary alerts (`analysis.alerts`) | fail a tick |
//! | [`gitops`] | the clone: fetch, commit, push, history, maintenance | know about canaries |
//! | [`forge`] | GitHub, GitLab, Gitea pull requests | know about canaries |
//! | [`server`], [`http_client`] | `/metrics`, probes, the git webhook; pooled HTTP clients and bounded reading of their answers | decide |
//! | [`kube`] | builds the Kubernetes client | read or judge objects |
//! | [`url_credentials`] | credentials split out of git remote URLs; URL redaction for git and the forges | log a secret |
//! | [`secrets`] | `secretRef` values the operator mapped in (environment or mounted Secret volume) | read a Secret from git or the cluster |
//!
//! Data flows one way: `e2e/it/module_graph.rs` fails when a module uses one that uses it
//! back, and `e2e/it/core_purity.rs` when the core can reach an adapter crate.
// libgit2's socket timeouts, whose only interface is unsafe, are set in the tiny crate
// `src/libgit2_opts/` so this one stays free of unsafe code.
#![forbid(unsafe_code)]

/// The pure core (its own crate, `src/core/`): model, schedules, `decide`, `plan`, operations.
pub use sluice_core as core;

pub mod approval;
pub mod audit;
pub mod cli;
pub mod deleted;
pub mod drift;
pub mod forge;
pub mod gates;
pub mod gitops;
pub mod http_client;
pub mod kube;
pub mod metrics;
pub mod notify;
pub mod observe;
pub mod operate;
pub mod render;
pub mod route;
pub mod runtime;
pub mod secrets;
pub mod server;
pub mod spec;
pub mod tick;
pub mod url_credentials;
pub mod workload;
pub mod yaml;
