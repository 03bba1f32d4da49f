//! Tests of the pure core on its own, with `Canary<()>` builders and a fixed clock: regression
//! tests of manual operations and property tests of `decide` over generated canaries.

// Test code may unwrap: its panic is the failure it reports. The workspace lints (Cargo.toml)
// reject unwrap() and expect() only in the crates' production code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approval;
mod argo_gates;
mod builders;
mod concurrency;
mod judge_kayenta;
mod judge_properties;
mod judge_scores;
mod judged;
mod live;
mod operate;
mod promotion;
mod properties;
mod route_state;
mod verdict;
mod wave_events;
mod waves;
