//! The dashboard's layout in a real browser: at a phone's width (390 px) and a desktop's, no
//! element of the overview or the canary page reaches past the viewport (nothing clipped,
//! nothing to scroll sideways), and the decision log's key columns are on screen.
//!
//! The history is a handful of decision commits at chosen times (unevenly spaced) after
//! `test/podinfo`'s initialization, with a long approver login and a long failure reason.
//! A paused canary shows who holds it and offers only `resume`.
//! Screenshots go to `target/dashboard-screenshots/layout-*.png`, `time-axis-*.png` and
//! `paused-canary-phone.png`.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value as Json;

use super::PHONE;
use crate::support::dashboard::{
    assert_fits, assert_shows, dashboard_in_browser, initialized, screenshots, sluice_dashboard,
    Process, DESKTOP,
};
use crate::support::webdriver::Browser;
use crate::support::{http, human_commit_at, operate_as_ada};

/// The operations whose commands the canary page offers.
const OFFERED: &str =
    "return Array.from(document.querySelectorAll('ul.commands li')).map(li => li.dataset.operation);";

/// Seconds after the last decision of the seeded history each crafted decision is made at:
/// uneven, so spacing by index and spacing by time differ.
pub(super) const OFFSETS: [i64; 4] = [10, 20, 50, 170];

/// `test/podinfo` initialized, then four decisions at [`OFFSETS`] from now: steps 20 and 40
/// passing, 60 failing, then the rollback. Returns the bare remote.
pub(super) fn timed_history(dir: &std::path::Path) -> std::path::PathBuf {
    let (bare, human) = initialized(dir);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let decisions = [
        (
            "Progressing",
            "1",
            "primary=80 canary=20",
            "99.5 min=99 pass",
            "",
        ),
        (
            "Progressing",
            "2",
            "primary=60 canary=40",
            "99.7 min=99 pass",
            "Sluice-Approved-By: a-rather-long-approver-login-name@platform-team.example.com\n",
        ),
        (
            "Progressing",
            "3",
            "primary=40 canary=60",
            "98.1 min=99 fail",
            "",
        ),
        (
            "Failed",
            "0",
            "primary=100 canary=0",
            "97.2 min=99 fail",
            "",
        ),
    ];
    for (i, ((phase, step, weights, check, extra), offset)) in
        decisions.iter().zip(OFFSETS).enumerate()
    {
        let message = format!(
            "podinfo: {phase} at step {step}, request-success-rate below its minimum of 99 for the second interval in a row, rolling back to the primary revision\n\nSluice-Canary: test/podinfo\nSluice-Phase: {phase}\nSluice-Step: {step}\nSluice-Weights: {weights}\nSluice-Check: request-success-rate={check}\n{extra}"
        );
        human_commit_at(
            &human,
            "notes.txt",
            &format!("decision {i}\n"),
            &message,
            Some(now + offset),
        );
    }
    bare
}

/// The dashboard of [`timed_history`] and a browser of `size` to read it (the folder and the
/// dashboard live as long as the returned guards).
fn timed_dashboard(size: (u32, u32)) -> (tempfile::TempDir, Process, String, Browser) {
    let tmp = tempfile::tempdir().unwrap();
    let bare = timed_history(tmp.path());
    let (dashboard, addr, browser) = dashboard_in_browser(&bare, size);
    (tmp, dashboard, addr, browser)
}

/// The page offers exactly the manual operations `expected`.
fn assert_offered(browser: &Browser, expected: &[&str]) {
    let offered = browser.js(OFFERED);
    assert_eq!(offered, serde_json::json!(expected), "{}", browser.text());
}

#[test]
fn dashboard_pages_fit_a_phone_and_a_desktop_in_a_browser() {
    let (_tmp, _dashboard, addr, browser) = timed_dashboard(PHONE);
    for (size, (w, h)) in [("phone", PHONE), ("desktop", DESKTOP)] {
        browser.viewport(w, h);
        for (page, name) in [("/", "overview"), ("/canaries/test/podinfo", "canary")] {
            browser.goto(&format!("http://{addr}{page}"));
            browser.screenshot(&screenshots().join(format!("layout-{name}-{size}.png")));
            assert_fits(&browser, &format!("{page} at {w}px"));
        }
        // The log's key columns of its newest decision, on screen and readable.
        let key = browser.js(
            "const w = document.documentElement.clientWidth; \
             const row = document.querySelector('table.log tbody tr'); \
             return ['Time', 'Phase', 'Weights', 'Decision'].map(l => { \
               const td = row.querySelector(`td[data-label=\"${l}\"]`); const r = td.getBoundingClientRect(); \
               return [l, r.width > 0 && r.left >= 0 && r.right <= w, td.innerText]; });",
        );
        for cell in key.as_array().unwrap() {
            assert_eq!(cell[1], Json::Bool(true), "{size}: {key}");
        }
        assert!(
            key.to_string().contains("primary=100 canary=0"),
            "{size}: {key}"
        );
    }
    // An Initialized canary: nothing to approve, promote, abort, retry or resume.
    assert_offered(&browser, &["pause"]);
    // The image the user bumped, not only the pod-template hash.
    assert_shows(&browser, "dd.images", "primary: podinfo:1");
}

#[test]
fn charts_place_each_decision_at_its_time_in_a_browser() {
    let (_tmp, _dashboard, addr, browser) = timed_dashboard(DESKTOP);
    browser.goto(&format!("http://{addr}/canaries/test/podinfo"));
    // (x, time in seconds) of every drawn point: the weight chart's, then the metric's.
    let drawn = browser.js(
        "const at = el => [Number(el.getAttribute('cx') ?? el.dataset.x), Date.parse(el.dataset.time) / 1000]; \
         return [Array.from(document.querySelectorAll('#weight-chart circle.pt.canary')).map(at), \
                 Array.from(document.querySelectorAll('figure.metric .pt')).map(at)];",
    );
    let drawn: Vec<Vec<(f64, f64)>> = serde_json::from_value(drawn).unwrap();
    let (weights, metric) = (&drawn[0], &drawn[1]);
    // The initialization, then the four decisions.
    assert_eq!(weights.len(), 1 + OFFSETS.len(), "{drawn:?}");
    assert_eq!(metric.len(), OFFSETS.len(), "{drawn:?}");
    assert!(
        weights
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1),
        "points ordered by time: {weights:?}"
    );
    // Spacing proportional to time, on one axis shared by every chart.
    let (x0, t0) = weights[0];
    let (xn, tn) = weights[weights.len() - 1];
    let per_second = (xn - x0) / (tn - t0);
    for (x, t) in weights.iter().chain(metric) {
        let expected = x0 + (t - t0) * per_second;
        assert!(
            (x - expected).abs() <= 0.5,
            "x {x} for t {t}, expected {expected}: {drawn:?}"
        );
    }
    // The axis says when: the first and last decision's time of day.
    let ticks = browser.js(
        "return Array.from(document.querySelectorAll('#weight-chart text.tick')).map(t => t.textContent);",
    );
    let ticks: Vec<String> = serde_json::from_value(ticks).unwrap();
    let clock = |t: f64| {
        jiff::Timestamp::from_second(t as i64)
            .unwrap()
            .strftime("%H:%M:%S")
            .to_string()
    };
    assert_eq!(ticks.first(), Some(&clock(t0)), "{ticks:?}");
    assert_eq!(ticks.last(), Some(&clock(tn)), "{ticks:?}");
    browser.screenshot(&screenshots().join("time-axis-canary-desktop.png"));
}

#[test]
fn a_paused_canary_shows_who_holds_it_and_offers_only_resume_in_a_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, _human) = initialized(tmp.path());
    let (code, _, err) = operate_as_ada(&bare, "pause", "test/podinfo", "waiting for the DBA");
    assert_eq!(code, 0, "{err}");
    let (_dashboard, addr) = sluice_dashboard(&bare, &[]);
    let (status, body) = http(&addr, "GET", "/api/v1/canaries/test/podinfo", &[], b"");
    assert_eq!(status, 200, "{body}");
    let page: Json = serde_json::from_str(&body).unwrap();
    assert_eq!(page["paused"], true, "{page:#}");
    assert_eq!(page["held"]["kind"], "pause", "{page:#}");
    assert!(
        page["held"]["why"]
            .as_str()
            .unwrap()
            .contains("waiting for the DBA"),
        "{page:#}"
    );
    assert_eq!(
        page["operations"],
        serde_json::json!(["resume"]),
        "{page:#}"
    );
    assert_eq!(page["images"]["primary"]["app"], "podinfo:1", "{page:#}");

    let browser = Browser::start(PHONE.0, PHONE.1);
    browser.goto(&format!("http://{addr}/canaries/test/podinfo"));
    assert_offered(&browser, &["resume"]);
    assert_shows(
        &browser,
        ".hold[data-kind=\"pause\"]",
        "waiting for the DBA",
    );
    browser.screenshot(&screenshots().join("paused-canary-phone.png"));
    assert_fits(&browser, "the paused canary's page");
}
