//! All integration tests in one binary (one link, shared helpers).

mod approval;
mod autoscaler;
mod cli;
mod core_purity;
mod daemon;
mod decide;
mod gitops;
mod gitops_branch;
mod gitops_layers;
mod install;
mod lease;
mod loop_git;
mod managed;
mod metrics;
mod module_graph;
mod notify;
mod operate;
mod per_tick;
mod route;
mod server;
mod snapshot;
mod spec_validation;
mod support;
mod sync;
mod tick;
mod workload;
