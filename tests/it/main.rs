//! All integration tests in one binary (one link, shared helpers).

mod cli;
mod spec_validation;
mod workload;
