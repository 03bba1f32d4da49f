//! The dashboard's judge view in a real browser (headless Chromium): `sluice demo --judge
//! --fail` rolls back a canary 30 % slower than its primary, and `sluice dashboard` on the
//! kept repo shows each judged decision's metrics, the primary beside the canary, with the
//! classification, the interval, the bounds that explain the class, the group scores and the summary the commit's trailers hold.
//! A screenshot goes to `target/dashboard-screenshots/judge-canary.png`.

use serde_json::Value as Json;

use crate::support::dashboard::{screenshots, sluice_dashboard, DESKTOP};
use crate::support::webdriver::Browser;
use crate::support::{http, run_ok};

#[test]
fn dashboard_shows_the_judges_tables_of_a_judged_canary_in_a_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let kept = tmp.path().join("demo");
    run_ok(crate::support::sluice_demo(&["--judge", "--fail", "--keep"]).arg(&kept));
    let bare = kept.join("config-repo.git");
    let (_dashboard, addr) = sluice_dashboard(&bare, &[]);

    let (status, body) = http(&addr, "GET", "/api/v1/canaries/demo/podinfo", &[], b"");
    assert_eq!(status, 200, "{body}");
    let detail: Json = serde_json::from_str(&body).unwrap();
    let judgements = detail["judgements"].as_array().unwrap();
    assert!(judgements.len() >= 2, "two failed judgements: {detail:#}");
    let newest = &judgements[0];
    assert_eq!(newest["outcome"], "fail", "{newest:#}");
    assert_eq!(newest["score"], 50.0, "{newest:#}");
    let latency = &newest["metrics"][0];
    assert_eq!(latency["name"], "request-duration");
    assert_eq!(latency["classification"], "High");
    // The series' means the replay record gives: 212 ms and 30 % more, within the noise.
    let primary = latency["primaryMean"].as_f64().unwrap();
    let canary = latency["canaryMean"].as_f64().unwrap();
    assert!((208.0..216.0).contains(&primary), "{latency:#}");
    assert!((270.0..281.0).contains(&canary), "{latency:#}");
    // The demo's window of 60 s at 1 s.
    assert_eq!(latency["primaryValues"], 61, "{latency:#}");
    // The bounds that explain the High: the interval clears a quarter of the estimate, the
    // effect size reaches the allowed increase (`sluice audit` on this repo, in `demo_judge`,
    // judges the recorded series again and finds these very trailers).
    let number = |key: &str| {
        latency[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key}: {latency:#}"))
    };
    let bound = number("bound");
    assert!(
        (bound - 0.25 * number("estimate").abs()).abs() <= 0.01,
        "{latency:#}"
    );
    assert!(number("ciLow") > bound, "{latency:#}");
    assert!(
        number("effectSize") >= number("allowedIncrease"),
        "{latency:#}"
    );

    let browser = Browser::start(DESKTOP.0, DESKTOP.1);
    browser.goto(&format!("http://{addr}/canaries/demo/podinfo"));
    let shown = browser.js(
        "const j = document.querySelector('#judge details.judgement[open]'); \
         if (!j) return null; \
         const row = j.querySelector('table.judge tr[data-metric=\"request-duration\"]'); \
         return [document.querySelectorAll('#judge details.judgement').length, \
                 j.dataset.outcome, \
                 row.dataset.classification, \
                 row.querySelector('td.primary').textContent, \
                 row.querySelector('td.canary').textContent, \
                 j.querySelector('.group[data-group=\"latency\"] strong').textContent, \
                 j.querySelector('.group[data-group=\"errors\"] strong').textContent, \
                 j.querySelector('.summary-score').textContent, \
                 j.querySelector('summary').textContent, \
                 row.querySelector('td.bounds').textContent];",
    );
    assert!(
        shown[0].as_u64().unwrap() >= 2,
        "a table per judged decision: {shown}"
    );
    assert_eq!(shown[1], "fail", "{shown}");
    assert_eq!(shown[2], "High", "{shown}");
    assert!(shown[3].as_str().unwrap().starts_with("21"), "{shown}");
    assert!(shown[4].as_str().unwrap().starts_with("27"), "{shown}");
    assert_eq!(shown[5], "0", "{shown}");
    assert_eq!(shown[6], "100.0", "{shown}");
    assert_eq!(shown[7], "50.00", "{shown}");
    assert!(
        shown[8]
            .as_str()
            .unwrap()
            .contains("score=50 fail (pass>=95 marginal>=75)"),
        "{shown}"
    );
    let num = |v: f64| sluice::judge::report::num(Some(v));
    assert_eq!(
        shown[9],
        format!(
            "CI vs ±{} · effect ≤{} / ≥{}",
            num(bound),
            num(number("allowedDecrease")),
            num(number("allowedIncrease"))
        ),
        "{shown}"
    );
    browser.goto(&format!("http://{addr}/canaries/demo/podinfo#judge"));
    browser.screenshot(&screenshots().join("judge-canary.png"));
}
