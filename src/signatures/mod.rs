//! Commit signatures as the repo's signing policy judges them: `signed` checks one commit's SSH
//! signature against an allowed-signers list, `policy` finds the policy in force at a commit's
//! parent (or one given outside the repo). Used by `sluice audit` and by the loop (drift and
//! approvals), so both judge a commit the same way. Reads objects only.

pub mod policy;
pub mod signed;
