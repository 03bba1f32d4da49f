//! `sluice version`: the release, the commit and the build date the binary was built from
//! (set by `build.rs`), so an operator can say exactly what runs. `--version` prints the same
//! on one line.

use clap::Parser;

/// The Cargo version of this build (the release tag without its `v`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit built, or `unknown` when built outside a checkout without `SLUICE_GIT_COMMIT`.
pub const COMMIT: &str = env!("SLUICE_GIT_COMMIT");
/// The build date (the commit's date, or `SOURCE_DATE_EPOCH`), UTC, or `unknown`.
pub const BUILD_DATE: &str = env!("SLUICE_BUILD_DATE");

/// What `sluice --version` prints after the name, on one line.
pub const LONG: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SLUICE_GIT_COMMIT"),
    ", built ",
    env!("SLUICE_BUILD_DATE"),
    ")"
);

#[derive(Debug, Parser)]
pub struct Args {}

/// The three lines of `sluice version`.
pub fn text() -> String {
    format!("sluice {VERSION}\ncommit: {COMMIT}\nbuilt: {BUILD_DATE}\n")
}

pub fn run(_args: &Args) -> anyhow::Result<i32> {
    outln!("{}", text().trim_end());
    Ok(0)
}
