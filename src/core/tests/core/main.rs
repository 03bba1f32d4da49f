//! Tests of the pure core on its own, with `Canary<()>` builders and a fixed clock.

mod builders;
mod operate;
