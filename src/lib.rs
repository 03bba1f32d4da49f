//! sluice: GitOps progressive delivery. Runs canaries by committing route weights to the
//! config repo that Flux or Argo CD applies.
#![forbid(unsafe_code)]

pub mod cli;
pub mod core;
pub mod gates;
pub mod http;
pub mod metrics;
pub mod output;
pub mod spec;
pub mod workload;
