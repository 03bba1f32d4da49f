//! Waves at the edges: what the pure release rule ([`crate::core::waves`]) needs from the
//! outside world, and how its answer is applied.
//!
//! - [`revert`]: under `onFailure: rollback`, an earlier wave of a failed release put back
//!   as it was before the release reached it: what it had then, read from git, and the
//!   files and message of the core's decision (the release rule and the revert are the
//!   core's, [`crate::core::waves`]);
//! - [`contexts`]: the kube contexts waves name, checked against the kubeconfig sluice is
//!   given;
//! - [`servers`]: the API servers waves name, checked against what the operator allows
//!   (`https://`, `http://` only when allowed);
//! - [`clusters`]: one Kubernetes client per wave cluster (its token and CA from a Secret
//!   mapped into sluice), for its sync and readiness gates;
//! - [`select`]: which wave a command (`sluice approve NS/NAME --wave W`) means.
//!
//! Decides nothing itself, and never commits.

pub mod clusters;
pub mod contexts;
pub mod revert;
pub mod select;
pub mod servers;
