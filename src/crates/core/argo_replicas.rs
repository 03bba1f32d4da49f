//! The replica counts of an Argo Rollouts canary without `trafficRouting`: Argo splits the
//! traffic by running canary and stable pods behind one Service, so a `setWeight` is a pair
//! of replica counts. Argo settles on the pair whose canary share of the pods is nearest the
//! weight, allowing one pod over `spec.replicas` when `maxSurge` is above zero
//! (`approximateWeightedCanaryStableReplicaCounts` in Argo's `utils/replicaset/canary.go`).
//!
//! Pure arithmetic: no IO; the reader resolves `maxSurge` and the renderer writes the counts.

/// How a replica-based canary splits its pods: `spec.replicas` and `maxSurge` resolved
/// against it (a percentage rounds up, as Argo resolves it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaSplit {
    pub replicas: u32,
    pub max_surge: u32,
}

impl ReplicaSplit {
    /// The `(canary, stable)` pod counts Argo settles on at `weight` percent.
    ///
    /// Candidates are the weighted count rounded up and down, over `replicas` pods and (with
    /// surge allowed) over one more; the first nearest to the weight wins. A weight from 1 to
    /// 99 never rounds the canary down to zero pods, unless a single replica cannot surge.
    pub fn at(self, weight: u8) -> (u32, u32) {
        let (replicas, weight) = (self.replicas, u32::from(weight.min(100)));
        if replicas == 0 {
            return (0, 0);
        }
        let ceil = (replicas * weight).div_ceil(100);
        let floor = replicas * weight / 100;
        let zero_allowed = weight == 100 || weight == 0 || (replicas == 1 && self.max_surge == 0);
        let mut options: Vec<(u32, u32)> = Vec::new();
        if ceil < replicas || zero_allowed {
            options.push((ceil, replicas));
        }
        if !tied(weight, replicas) && (floor != 0 || zero_allowed) {
            options.push((floor, replicas));
        }
        if self.max_surge > 0 {
            options.push((ceil, replicas + 1));
            if !tied(weight, replicas + 1) && (floor != 0 || zero_allowed) {
                options.push((floor, replicas + 1));
            }
        }
        let Some(mut best) = options.first().copied() else {
            return (0, replicas);
        };
        for option in options.into_iter().skip(1) {
            if delta(weight, option) < delta(weight, best) {
                best = option;
            }
        }
        (best.0, best.1 - best.0)
    }
}

/// Whether `total x weight / 100` lies exactly halfway between two pod counts.
fn tied(weight: u32, total: u32) -> bool {
    (total * weight) % 100 == 50
}

/// How far `canary` pods of `total` are from `weight` percent, in percentage points.
fn delta(weight: u32, (canary, total): (u32, u32)) -> f64 {
    (f64::from(canary * 100) / f64::from(total) - f64::from(weight)).abs()
}

/// `maxSurge` or `maxUnavailable` as Argo resolves it against `replicas`: a count as it is,
/// a percentage rounded up (surge) or down (unavailable).
pub fn resolve(value: &IntOrPercent, replicas: u32, round_up: bool) -> u32 {
    match *value {
        IntOrPercent::Int(n) => n,
        IntOrPercent::Percent(p) => {
            let scaled = u64::from(replicas) * u64::from(p);
            let n = if round_up {
                scaled.div_ceil(100)
            } else {
                scaled / 100
            };
            u32::try_from(n).unwrap_or(u32::MAX)
        }
    }
}

/// A `setCanaryScale` step: how many pods the canary runs, whatever its traffic weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CanaryScale {
    /// `weight: N`: N percent of `spec.replicas`, rounded up.
    Weight(u8),
    /// `replicas: N`: N pods.
    Replicas(u32),
    /// `matchTrafficWeight: true`: back to the traffic weight's share.
    MatchTrafficWeight,
}

/// A `setCanaryScale` step at its place among sluice's steps: in force from sluice step
/// `step` (0: before the first `setWeight`), standing before or after that step's
/// `setWeight` in Argo's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleStep {
    pub step: u32,
    pub after_weight: bool,
    pub scale: CanaryScale,
}

/// How a canary with `trafficRouting` scales its workloads beyond Argo's default (the canary
/// at its traffic weight's share, the stable at `spec.replicas`): `setCanaryScale` steps and
/// `dynamicStableScale` (`CalculateReplicaCountsForTrafficRoutedCanary` in Argo's
/// `utils/replicaset/canary.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutedScale {
    /// `spec.replicas` (Argo's default 1).
    pub replicas: u32,
    /// The `setCanaryScale` steps, in Argo's order.
    pub set: Vec<ScaleStep>,
    /// `dynamicStableScale`: the stable runs its traffic share of the pods.
    pub dynamic_stable: bool,
}

impl RoutedScale {
    /// The `setCanaryScale` in force at sluice step `step`: the last one up to it, `None`
    /// once a `matchTrafficWeight` undoes it (Argo's `UseSetCanaryScale`).
    fn in_force(&self, step: u32) -> Option<CanaryScale> {
        match self.set.iter().rev().find(|s| s.step <= step)?.scale {
            CanaryScale::MatchTrafficWeight => None,
            scale => Some(scale),
        }
    }

    /// The canary's pods at `step` when a `setCanaryScale` sets them; `None` when they follow
    /// the traffic weight. `replicas` takes precedence over `weight`, as Argo reads them.
    pub fn canary(&self, step: u32) -> Option<u32> {
        match self.in_force(step)? {
            CanaryScale::Replicas(n) => Some(n),
            CanaryScale::Weight(w) => Some(weight_to_replicas(self.replicas, w)),
            CanaryScale::MatchTrafficWeight => None,
        }
    }

    /// The stable's pods at `step` with the canary at `weight` percent of the traffic:
    /// `spec.replicas`, or with `dynamicStableScale` the larger of the shares the desired
    /// canary weight (0 under `setCanaryScale replicas`) and the traffic leave the stable,
    /// as Argo settles once the route carries the weight.
    pub fn stable(&self, step: u32, weight: u8) -> u32 {
        if !self.dynamic_stable {
            return self.replicas;
        }
        let desired = match self.in_force(step) {
            Some(CanaryScale::Replicas(_)) => 0,
            Some(CanaryScale::Weight(w)) => w,
            Some(CanaryScale::MatchTrafficWeight) | None => weight,
        };
        let share = |w: u8| weight_to_replicas(self.replicas, 100 - w.min(100));
        share(desired).max(share(weight))
    }
}

/// `weight` percent of `replicas` pods, rounded up (Argo's `trafficWeightToReplicas`).
fn weight_to_replicas(replicas: u32, weight: u8) -> u32 {
    (u64::from(replicas) * u64::from(weight.min(100)))
        .div_ceil(100)
        .try_into()
        .unwrap_or(u32::MAX)
}

/// A Kubernetes int-or-string that is a count or a percentage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(u32),
    Percent(u32),
}

#[cfg(test)]
mod tests {
    use super::{resolve, CanaryScale, IntOrPercent, ReplicaSplit, RoutedScale, ScaleStep};

    fn at(replicas: u32, max_surge: u32, weight: u8) -> (u32, u32) {
        ReplicaSplit {
            replicas,
            max_surge,
        }
        .at(weight)
    }

    /// The 57 rows of Argo's own `TestApproximateWeightedNewStableReplicaCounts` table.
    #[test]
    fn counts_are_the_ones_argo_settles_on() {
        let table: &[(u32, u8, u32, (u32, u32))] = &[
            // replicas, weight, maxSurge, (canary, stable)
            (0, 0, 0, (0, 0)),
            (0, 50, 0, (0, 0)),
            (0, 100, 0, (0, 0)),
            (0, 0, 1, (0, 0)),
            (0, 50, 1, (0, 0)),
            (0, 100, 1, (0, 0)),
            (1, 0, 0, (0, 1)),
            (1, 1, 0, (0, 1)),
            (1, 49, 0, (0, 1)),
            (1, 50, 0, (1, 0)),
            (1, 99, 0, (1, 0)),
            (1, 100, 0, (1, 0)),
            (1, 0, 1, (0, 1)),
            (1, 1, 1, (1, 1)),
            (1, 49, 1, (1, 1)),
            (1, 50, 1, (1, 1)),
            (1, 99, 1, (1, 1)),
            (1, 100, 1, (1, 0)),
            (2, 0, 0, (0, 2)),
            (2, 1, 0, (1, 1)),
            (2, 50, 0, (1, 1)),
            (2, 99, 0, (1, 1)),
            (2, 100, 0, (2, 0)),
            (2, 0, 1, (0, 2)),
            (2, 1, 1, (1, 2)),
            (2, 50, 1, (1, 1)),
            (2, 99, 1, (2, 1)),
            (2, 100, 1, (2, 0)),
            (3, 10, 0, (1, 2)),
            (3, 25, 0, (1, 2)),
            (3, 33, 0, (1, 2)),
            (3, 34, 0, (1, 2)),
            (3, 49, 0, (1, 2)),
            (3, 50, 0, (2, 1)),
            (3, 10, 1, (1, 3)),
            (3, 25, 1, (1, 3)),
            (3, 33, 1, (1, 2)),
            (3, 34, 1, (1, 2)),
            (3, 49, 1, (2, 2)),
            (3, 50, 1, (2, 2)),
            (10, 0, 1, (0, 10)),
            (10, 1, 0, (1, 9)),
            (10, 14, 0, (1, 9)),
            (10, 15, 0, (2, 8)),
            (10, 16, 0, (2, 8)),
            (10, 99, 0, (9, 1)),
            (10, 100, 1, (10, 0)),
            (10, 0, 1, (0, 10)),
            (10, 1, 1, (1, 10)),
            (10, 18, 1, (2, 9)),
            (10, 19, 1, (2, 9)),
            (10, 20, 1, (2, 8)),
            (10, 23, 1, (2, 8)),
            (10, 24, 1, (3, 8)),
            (10, 25, 1, (3, 8)),
            (10, 99, 1, (10, 1)),
            (10, 100, 1, (10, 0)),
        ];
        for &(replicas, weight, surge, want) in table {
            assert_eq!(
                at(replicas, surge, weight),
                want,
                "replicas {replicas}, weight {weight}, maxSurge {surge}"
            );
        }
    }

    #[test]
    fn surge_percentages_round_up_and_unavailable_ones_down() {
        assert_eq!(resolve(&IntOrPercent::Percent(25), 5, true), 2);
        assert_eq!(resolve(&IntOrPercent::Percent(25), 5, false), 1);
        assert_eq!(resolve(&IntOrPercent::Percent(25), 4, true), 1);
        assert_eq!(resolve(&IntOrPercent::Int(3), 4, true), 3);
        assert_eq!(resolve(&IntOrPercent::Percent(0), 9, true), 0);
    }

    fn scaled(set: &[(u32, CanaryScale)], dynamic_stable: bool) -> RoutedScale {
        RoutedScale {
            replicas: 5,
            set: set
                .iter()
                .map(|&(step, scale)| ScaleStep {
                    step,
                    after_weight: false,
                    scale,
                })
                .collect(),
            dynamic_stable,
        }
    }

    #[test]
    fn a_set_canary_scale_holds_until_the_next_one_or_match_traffic_weight() {
        let s = scaled(
            &[
                (1, CanaryScale::Replicas(2)),
                (3, CanaryScale::Weight(50)),
                (4, CanaryScale::MatchTrafficWeight),
            ],
            false,
        );
        let canary: Vec<Option<u32>> = (0..=5).map(|step| s.canary(step)).collect();
        assert_eq!(canary, [None, Some(2), Some(2), Some(3), None, None]);
        // Without dynamicStableScale the stable keeps spec.replicas.
        assert_eq!(s.stable(2, 40), 5);
    }

    #[test]
    fn a_dynamic_stable_runs_the_larger_of_its_desired_and_its_traffic_share() {
        let plain = scaled(&[], true);
        assert_eq!(plain.stable(1, 20), 4);
        assert_eq!(plain.stable(1, 25), 4);
        assert_eq!(plain.stable(1, 100), 0);
        // setCanaryScale replicas: Argo's desired weight is 0, so the stable stays full.
        let by_count = scaled(&[(1, CanaryScale::Replicas(1))], true);
        assert_eq!(by_count.stable(1, 60), 5);
        // setCanaryScale weight 20 at 60 % traffic: the stable keeps its desired 80 %.
        let by_weight = scaled(&[(1, CanaryScale::Weight(20))], true);
        assert_eq!(by_weight.stable(1, 60), 4);
        assert_eq!(by_weight.canary(1), Some(1));
    }
}
