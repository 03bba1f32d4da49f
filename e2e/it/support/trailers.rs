//! The trailers of sluice's commits as git parses them: every commit on a branch, and each
//! canary's group within one (a `perTick` commit holds one group per canary).

use std::collections::BTreeMap;
use std::path::Path;

use super::git;

/// Sluice's commits on main, oldest first: (sha, trailers as git parses them).
pub(crate) fn sluice_commits(bare: &Path) -> Vec<(String, Vec<(String, String)>)> {
    let log = git(
        bare,
        &[
            "log",
            "--reverse",
            "--format=%H%n%(trailers:only,unfold)%x01",
            "main",
        ],
    );
    log.split('\u{1}')
        .filter_map(|chunk| {
            let mut lines = chunk.trim().lines();
            let sha = lines.next()?.to_string();
            let trailers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(": "))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            (!trailers.is_empty()).then_some((sha, trailers))
        })
        .collect()
}

/// Each canary's trailers in one commit: the group from its `Sluice-Canary` to the next.
pub(crate) fn groups(trailers: &[(String, String)]) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut current = None;
    for (k, v) in trailers {
        if k == "Sluice-Canary" {
            current = Some(v.clone());
        }
        if let Some(c) = &current {
            out.entry(c.clone())
                .or_default()
                .insert(k.clone(), v.clone());
        }
    }
    out
}
