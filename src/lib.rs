//! sluice: GitOps progressive delivery. Runs canaries by committing route weights to the
//! config repo that Flux or Argo CD applies.
#![forbid(unsafe_code)]

/// The pure core (its own crate, `src/core/`): model, schedules, `decide`, `plan`, operations.
pub use sluice_core as core;

pub mod approval;
pub mod cli;
pub mod forge;
pub mod gates;
pub mod gitops;
pub mod http;
pub mod kube;
pub mod metrics;
pub mod notify;
pub mod observe;
pub mod output;
pub mod reconcile;
pub mod remote_url;
pub mod route;
pub mod server;
pub mod spec;
pub mod workload;
