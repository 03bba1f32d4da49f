//! Manual operations agree with what `decide` does once a gate is open.

use sluice_core::decide::{decide, Action};
use sluice_core::model::Approvals;
use sluice_core::observe::Observations;
use sluice_core::operate::{operate, Operation};
use sluice_core::simulate::simulate;
use sluice_core::status::Phase;

use crate::builders::{canary, t, waiting_for_rollout};

#[test]
fn approving_the_rollout_of_a_canary_that_skips_analysis_promotes_it() {
    let c = canary()
        .skip_analysis(true)
        .approvals(Approvals {
            before_rollout: true,
            ..Approvals::default()
        })
        .build();
    let initialized = decide(&c, None, &Observations::revision("r0"), t(0)).status;
    let waiting = decide(&c, Some(&initialized), &Observations::revision("r1"), t(10));
    assert_eq!(waiting.action, Action::WaitRollout);
    // `sluice approve`, or the change an approval pull request carries.
    let approved = operate(&c, Some(&waiting.status), Operation::Approve, "ok", t(20)).unwrap();
    assert_eq!(approved.action, Action::Promote);
    assert_eq!(approved.status.phase, Phase::Succeeded);
    assert_eq!(approved.status.promoted_revision, "r1");
    assert_eq!(
        (
            approved.status.primary_weight,
            approved.status.canary_weight
        ),
        (100, 0)
    );
    // The plan grants approvals through the same operation and says the same.
    let planned = simulate(&c);
    assert_eq!(planned.approvals, vec!["before rollout"]);
    assert!(planned.canary_weights.is_empty(), "{planned:?}");
    assert_eq!(
        planned.events.last().map(String::as_str),
        Some("Promotion completed! Canary analysis was skipped for podinfo.prod")
    );
}

#[test]
fn approving_a_rollout_starts_its_analysis_at_weight_zero() {
    let (c, waiting) = waiting_for_rollout();
    let approved = operate(&c, Some(&waiting), Operation::Approve, "ok", t(20)).unwrap();
    assert_eq!(approved.action, Action::StartRollout);
    assert_eq!(approved.status.phase, Phase::Progressing);
    assert_eq!(approved.status.canary_revision.as_deref(), Some("r1"));
    assert_eq!(
        approved.events,
        vec!["New revision detected! Scaling up podinfo.prod"]
    );
}
