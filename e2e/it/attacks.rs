//! The security suite of issue 25: what an attacker with push access to the config repo (or to
//! one approval branch, or with a connection to the daemon) could make sluice believe or leak.
//! Each test is one attack; it fails on code that trusts what a commit says about itself.
//!
//! One file per surface, so each can grow on its own:
//!
//! | file | the attack |
//! |---|---|
//! | `secrets.rs` | a `secretRef` that names a path out of the secrets folder |
//! | `audit.rs` | commits that claim to be sluice's through trailers, merges, unknown groups |
//! | `signing.rs` | commits that change the signing policy that judges them |
//! | `drift.rs` | hand edits that carry sluice's trailers, files added to an owned folder |
//! | `approval.rs` | a tampered approval branch, a pull request into another base |
//! | `providers.rs` | metric backends that echo credentials, a slow backend |
//! | `listener.rs` | starved probes, replayed webhook bodies |
//! | `inputs.rs` | huge commit messages, odd output folders, `.git` as a file |
//! | `judge.rs` | series the judge's test cannot compute (`Error`), one value per series |
//! | `paths.rs` | host files and plain-http servers a Waves cluster names, names of megabytes |
//! | `workdir.rs` | a work dir that is a person's checkout, a `git init` folder, a file, `.` |
//! | `dashboard.rs` | one 4 MiB blob under 200 names, a forged trailer-only commit in the decision log |

mod approval;
mod audit;
mod dashboard;
mod drift;
mod inputs;
mod judge;
mod listener;
mod paths;
mod providers;
mod secrets;
mod signing;
mod workdir;
