//! Argo Rollouts' fast rollback (`spec.rollbackWindow.revisions`): a new revision rolled out
//! before the stable one, with fewer than `revisions` others rolled out between the two, is
//! promoted at once, skipping the steps and their analysis (Argo's `isRollbackWithinWindow`,
//! which orders the ReplicaSets by creation time; a ReplicaSet rolled out again keeps its
//! creation time, so a revision keeps its first place here).
//!
//! Pure: the revisions rolled out come from the canary's status, which [`remember`] keeps.

/// How many revisions a status remembers: Argo keeps `revisionHistoryLimit` (default 10)
/// old ReplicaSets beside the new and the stable one; an older one is gone, and rolling back
/// to it creates a new ReplicaSet, which no window covers.
pub const REMEMBERED: usize = 12;

/// Whether rolling out `new` over `stable` is a rollback within a window of `revisions`:
/// `rolled_out` holds the revisions rolled out, oldest first, each once.
pub fn within(revisions: u32, rolled_out: &[String], stable: &str, new: &str) -> bool {
    if revisions == 0 {
        return false;
    }
    let place = |r: &str| rolled_out.iter().position(|x| x == r);
    let (Some(new_at), Some(stable_at)) = (place(new), place(stable)) else {
        return false;
    };
    // A revision rolled out before the stable one is a rollback; the ones between count.
    new_at < stable_at && stable_at - new_at - 1 < revisions as usize
}

/// Records that `revision` is rolled out (at its first rollout; a later one keeps its place),
/// forgetting the oldest beyond [`REMEMBERED`].
pub fn remember(rolled_out: &mut Vec<String>, revision: &str) {
    if rolled_out.iter().any(|r| r == revision) {
        return;
    }
    rolled_out.push(revision.to_string());
    let extra = rolled_out.len().saturating_sub(REMEMBERED);
    rolled_out.drain(..extra);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revs(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_rollback_within_the_window_is_promoted_at_once() {
        let rolled = revs(&["a", "b", "c", "d"]);
        // Stable d: back to c has none between, to b one, to a two.
        let table = [
            (1, "c", true),
            (1, "b", false),
            (2, "b", true),
            (2, "a", false),
            (3, "a", true),
            (0, "c", false),
        ];
        for (window, new, want) in table {
            assert_eq!(
                within(window, &rolled, "d", new),
                want,
                "revisions {window}, back to {new}"
            );
        }
    }

    #[test]
    fn only_a_rollback_is_fast() {
        let rolled = revs(&["a", "b", "c"]);
        // A revision rolled out after the stable one (an aborted canary), the stable one
        // itself, and one never rolled out are rolled out with their steps.
        assert!(!within(5, &rolled, "b", "c"));
        assert!(!within(5, &rolled, "b", "b"));
        assert!(!within(5, &rolled, "b", "z"));
        // Without the stable revision on record nothing is known to be older.
        assert!(!within(5, &rolled, "y", "a"));
    }

    #[test]
    fn a_revision_rolled_out_again_keeps_its_first_place() {
        let mut rolled = Vec::new();
        for r in ["a", "b", "a", "c"] {
            remember(&mut rolled, r);
        }
        assert_eq!(rolled, revs(&["a", "b", "c"]));
        // Stable c: a is two back, as Argo's reused ReplicaSet keeps its creation time.
        assert!(!within(1, &rolled, "c", "a"));
        assert!(within(2, &rolled, "c", "a"));
    }

    #[test]
    fn the_oldest_revisions_are_forgotten() {
        let mut rolled = Vec::new();
        for i in 0..REMEMBERED + 3 {
            remember(&mut rolled, &format!("r{i}"));
        }
        assert_eq!(rolled.len(), REMEMBERED);
        assert_eq!(rolled[0], "r3");
        let last = format!("r{}", REMEMBERED + 2);
        assert!(!within(100, &rolled, &last, "r0"));
        assert!(within(100, &rolled, &last, "r3"));
    }
}
