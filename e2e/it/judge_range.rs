//! The judge's range queries against a real Prometheus (`/usr/bin/prometheus`): an exporter
//! serves a latency gauge for the primary and, 30 % higher, for the canary; the same query for
//! each workload gives one series per window, and the judge finds the canary `High` and the
//! primary against itself a `Pass`. Without Prometheus installed the test fails.

use std::time::Duration;

use sluice::core::judge::{classify, Label, MetricRule};

use crate::support::prometheus::Scraped;

/// The gauge at `t` seconds: a sawtooth around 100 ms for the primary, 130 ms for the canary.
fn exposition(t: f64) -> String {
    let wobble = (t * 7.0) % 10.0 - 5.0;
    format!(
        "# TYPE latency_ms gauge\nlatency_ms{{deployment=\"podinfo-primary\"}} {}\nlatency_ms{{deployment=\"podinfo-canary\"}} {}\n",
        100.0 + wobble,
        130.0 + wobble * 1.3
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn judge_range_queries_of_real_prometheus_find_the_slower_canary() {
    let Scraped {
        exporter: _exporter,
        prom: _prom,
        client,
    } = Scraped::start(exposition).await;

    let template = "latency_ms{deployment=\"{{ workload }}\"}";
    let end = jiff::Timestamp::now();
    let start = end - jiff::SignedDuration::from_secs(10);
    let series = async |workload: &str| {
        let query = template.replace("{{ workload }}", workload);
        client
            .query_range(&query, start, end, Duration::from_secs(1))
            .await
            .expect("a series")
    };
    let primary = series("podinfo-primary").await;
    let canary = series("podinfo-canary").await;
    // 11 steps from start to end; the newest may not be scraped yet.
    assert!((10..=11).contains(&primary.len()), "{primary:?}");
    assert!((10..=11).contains(&canary.len()), "{canary:?}");
    assert!(
        primary.iter().all(|v| (95.0..=105.0).contains(v)),
        "{primary:?}"
    );

    let rule = MetricRule::default();
    let slower = classify(&canary, &primary, &rule);
    assert_eq!(slower.label, Label::High, "{slower:?}");
    assert!((slower.mean_ratio - 1.3).abs() < 0.05, "{slower:?}");
    assert_eq!(classify(&primary, &primary, &rule).label, Label::Pass);

    // A workload without samples is an empty series; two series are an error.
    assert_eq!(series("podinfo-gone").await, Vec::<f64>::new());
    let both = client
        .query_range("latency_ms", start, end, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(both.contains("2 series"), "{both}");
}
