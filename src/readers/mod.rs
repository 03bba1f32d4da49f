//! What sluice recorded in a config repo, read back for people: status rows from the status
//! files, a canary's decisions from its commits' trailers, and a commit's YAML files written
//! out for those readers. `sluice status`, `sluice history` and the dashboard read through
//! here, so the pages and the CLI show one model. Reads only; never fetches or writes the repo.

pub mod history;
pub mod status;
pub mod tree;
