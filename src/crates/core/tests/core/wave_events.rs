//! The events of a wave's instance name the canary and the wave (`podinfo.prod (wave eu)`),
//! never the instance id (`podinfo.eu.prod`), which names no object in any cluster.

use sluice_core::decide::decide;
use sluice_core::model::{Name, OnFailure, WaveOf};
use sluice_core::observe::Observations;
use sluice_core::status::Phase;

use crate::builders::{canary, t, walk_until};

fn name(text: &str) -> Name {
    Name::parse(text).unwrap()
}

#[test]
fn a_wave_rollout_events_read_as_the_canary_and_its_wave() {
    let mut c = canary().build();
    c.id.name = name("podinfo.eu");
    c.wave = Some(WaveOf {
        canary: name("podinfo"),
        name: name("eu"),
        file: "apps/podinfo/canary.yaml".into(),
        line: 12,
        field: "spec.waves[1]".into(),
        index: 1,
        waves: vec![name("staging"), name("eu")],
        approval: false,
        on_failure: OnFailure::Hold,
        cluster: None,
        cluster_line: 0,
        metrics_secret: None,
    });
    let initialized = decide(&c, None, &Observations::revision("r0"), t(0));
    let mut events = initialized.events.clone();
    for d in walk_until(&c, &initialized.status, "r1", 10, Phase::Succeeded) {
        events.extend(d.events);
    }
    assert!(
        events.contains(&"New revision detected! Scaling up podinfo.prod (wave eu)".to_string()),
        "{events:#?}"
    );
    assert!(
        events.contains(
            &"Copying podinfo.prod (wave eu) template spec to podinfo-primary.prod".to_string()
        ),
        "{events:#?}"
    );
    assert!(
        events.contains(&"Promotion completed! Scaling down podinfo.prod (wave eu)".to_string()),
        "{events:#?}"
    );
    assert!(
        events.iter().all(|e| !e.contains("podinfo.eu")),
        "no event names the instance id: {events:#?}"
    );
}
