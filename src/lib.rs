//! sluice: GitOps progressive delivery. Runs canaries by committing route weights to the
//! config repo that Flux or Argo CD applies.
#![forbid(unsafe_code)]

pub mod approval;
pub mod cli;
pub mod core;
pub mod forge;
pub mod gates;
pub mod gitops;
pub mod http;
pub mod metrics;
pub mod notify;
pub mod observe;
pub mod output;
pub mod reconcile;
pub mod route;
pub mod server;
pub mod spec;
pub mod workload;
