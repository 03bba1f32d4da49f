//! All integration tests in one binary (one link, shared helpers).

mod cli;
mod route;
mod spec_validation;
mod workload;
