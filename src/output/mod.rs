//! What sluice writes into the config repo for one decision: the status file, the output
//! folder (route, kustomization) and the commit message. Pure rendering; the reconcile loop
//! hands the result to the git adapter.

pub mod kustomization;
pub mod message;
pub mod status_file;
