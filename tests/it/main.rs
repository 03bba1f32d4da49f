//! All integration tests in one binary (one link, shared helpers).

mod cli;
mod support;
mod route;
mod spec_validation;
mod workload;
