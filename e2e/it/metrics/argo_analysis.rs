//! Argo Rollouts AnalysisTemplates measured against a real Prometheus (`/usr/bin/prometheus`):
//! a template read unchanged, its arguments substituted, each metric measured through
//! `sluice::metrics::analysis_run::measure` and judged by its conditions; the measurements
//! decide the metric's phase with `count` and `failureLimit` as Argo does, and each reads back
//! as a `Sluice-Check` trailer and replays to the same phase.

use std::collections::BTreeMap;

use sluice::core::argo_analysis::{assess, judged, replay, run_phase, Phase};
use sluice::core::trailer::check_trailer;
use sluice::http_client::HttpClients;
use sluice::metrics::analysis_run::{measure, MeasureInput};
use sluice::metrics::analysis_templates::{AnalysisIndex, TemplateRef};
use sluice::metrics::prometheus::{Auth, PrometheusAccess};
use sluice::secrets::{env_var, Secrets};

use crate::support::prometheus::{osm_exposition, Scraped};

const TEMPLATE: &str = "apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: canary-health
  namespace: test
spec:
  args:
  - name: job
  - name: token
    valueFrom:
      secretKeyRef: {name: prom, key: job}
  metrics:
  - name: up
    interval: 10s
    count: 2
    successCondition: len(result) > 0 && result[0] == 1
    provider:
      prometheus:
        query: up{job=\"{{args.job}}\"}
  - name: too-many-up
    failureCondition: result[0] >= 1
    provider:
      prometheus:
        query: sum(up{job=\"{{args.token}}\"})
  - name: absent
    successCondition: result[0] == 1
    provider:
      prometheus:
        query: up{job=\"no-such-job\"}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn analysis_template_passes_and_fails_on_real_prometheus() {
    let scraped = Scraped::start(osm_exposition).await;
    let mut index = AnalysisIndex::default();
    assert_eq!(index.add_text("analysis.yaml", TEMPLATE), vec![]);
    let reference = TemplateRef {
        name: "canary-health".into(),
        cluster: false,
    };
    let run = index
        .run("test", &[reference], &[("job".into(), "canary".into())])
        .expect("run");
    let access = PrometheusAccess::new(HttpClients::new().expect("clients"), Auth::None)
        .with_secrets(Secrets::from_vars(BTreeMap::from([(
            env_var("test", "prom", "job"),
            "canary".to_string(),
        )])));
    let input = MeasureInput {
        access: &access,
        default_address: Some(&scraped.prom.url),
        namespace: "test",
    };
    let [up, failing, absent] = &run.metrics[..] else {
        panic!("{:?}", run.metrics)
    };

    let first = measure(&run, up, &input).await;
    assert_eq!(first.phase, Phase::Successful, "{first:?}");
    assert_eq!(
        assess(&up.rules, std::slice::from_ref(&first), false),
        Phase::Running
    );
    let second = measure(&run, up, &input).await;
    let ups = [first, second];
    assert_eq!(assess(&up.rules, &ups, false), Phase::Successful);
    assert_eq!(check_trailer(&judged("up", &ups[1])), "up=1 pass");
    assert_eq!(replay(&up.rules, &ups[1]), Some(Phase::Successful));

    let failed = measure(&run, failing, &input).await;
    assert_eq!(failed.phase, Phase::Failed, "{failed:?}");
    assert_eq!(
        assess(&failing.rules, std::slice::from_ref(&failed), false),
        Phase::Failed
    );
    assert_eq!(
        check_trailer(&judged("too-many-up", &failed)),
        "too-many-up=1 fail"
    );
    assert_eq!(replay(&failing.rules, &failed), Some(Phase::Failed));
    assert_eq!(
        run_phase(&[Phase::Successful, Phase::Failed]),
        Phase::Failed
    );

    // No series: result[0] cannot be evaluated, an Error (as Argo says it).
    let empty = measure(&run, absent, &input).await;
    assert_eq!(empty.phase, Phase::Error, "{empty:?}");
    assert!(
        empty.message.contains("no data returned"),
        "{}",
        empty.message
    );
    assert_eq!(assess(&absent.rules, &[empty], false), Phase::Running);
}
