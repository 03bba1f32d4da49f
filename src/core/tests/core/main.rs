//! Tests of the pure core on its own, with `Canary<()>` builders and a fixed clock: regression
//! tests of manual operations and property tests of `decide` over generated canaries.

mod builders;
mod operate;
mod properties;
mod route_state;
mod verdict;
