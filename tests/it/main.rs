//! All integration tests in one binary (one link, shared helpers).

mod cli;
mod gitops;
mod loop_git;
mod managed;
mod metrics;
mod route;
mod spec_validation;
mod support;
mod workload;
