//! The dashboard as the browser tests (`dashboard/`, `attacks/dashboard.rs`) start it: a
//! seeded and initialized repo, `sluice dashboard` on a free port (killed on drop), and where
//! screenshots go. The browser itself is [`super::webdriver`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::metrics::{loop_canary, loop_deployment};
use serde_json::Value as Json;

use super::webdriver::Browser;
use super::{free_port, human_clone, reconcile, seeded_remote};

/// The desktop window the browser tests use, in pixels.
pub(crate) const DESKTOP: (u32, u32) = (1280, 800);

/// The phone window the browser tests use, in pixels.
pub(crate) const PHONE: (u32, u32) = (390, 844);

/// Where the browser tests put their screenshots.
pub(crate) fn screenshots() -> PathBuf {
    crate::support::repo_root().join("target/dashboard-screenshots")
}

/// A process killed when dropped.
pub(crate) struct Process(pub(crate) Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `test/podinfo`, initialized by one reconcile, and a human clone of its remote.
pub(crate) fn initialized(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let bare = seeded_remote(
        dir,
        &[
            (
                "apps/podinfo/deployment.yaml",
                &loop_deployment("podinfo", "podinfo:1"),
            ),
            (
                "apps/podinfo/canary.yaml",
                &loop_canary(
                    "podinfo",
                    "      - name: request-success-rate\n        thresholdRange: {min: 99}\n",
                ),
            ),
        ],
    );
    reconcile(&bare, &dir.join("work"), &[]);
    let human = human_clone(&bare.display().to_string(), &dir.join("human"));
    (bare, human)
}

/// `sluice dashboard` over `bare` with `extra` arguments, logging errors only, once it listens.
pub(crate) fn sluice_dashboard(bare: &Path, extra: &[&str]) -> (Process, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.env("SLUICE_LOG", "error");
    sluice_dashboard_with(bare, extra, cmd)
}

/// `sluice dashboard` over `bare`, and a headless browser of `size` (width, height) to read it.
pub(crate) fn dashboard_in_browser(bare: &Path, size: (u32, u32)) -> (Process, String, Browser) {
    let (dashboard, addr) = sluice_dashboard(bare, &[]);
    (dashboard, addr, Browser::start(size.0, size.1))
}

/// `sluice dashboard --dir bare --listen <free port>` run by `cmd` (the binary, with the
/// environment and stderr the caller chose), once it listens: the process and the address.
pub(crate) fn sluice_dashboard_with(
    bare: &Path,
    extra: &[&str],
    mut cmd: Command,
) -> (Process, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let child = cmd
        .args([
            "dashboard",
            "--dir",
            &bare.display().to_string(),
            "--listen",
            &addr,
        ])
        .args(extra)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let process = Process(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(Instant::now() < deadline, "sluice dashboard never listened");
        std::thread::sleep(Duration::from_millis(100));
    }
    (process, addr)
}

/// Every visible element whose box reaches outside `[0, viewport width]`, described.
const OUTSIDE: &str = "const w = document.documentElement.clientWidth; const out = []; \
    for (const el of document.querySelectorAll('body *')) { \
      const r = el.getBoundingClientRect(); \
      if (r.width === 0 && r.height === 0) continue; \
      if (r.left < -0.5 || r.right > w + 0.5) { \
        const cls = typeof el.className === 'string' && el.className ? '.' + el.className.trim().split(/\\s+/).join('.') : ''; \
        out.push(`${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''}${cls} ${Math.round(r.left)}..${Math.round(r.right)}`); \
      } \
    } \
    return {width: w, scrollWidth: document.documentElement.scrollWidth, outside: out.slice(0, 20)};";

/// The text of the page's first `selector` holds `needle`.
pub(crate) fn assert_shows(browser: &Browser, selector: &str, needle: &str) {
    let script = format!("return document.querySelector({selector:?}).innerText;");
    let text = browser.js(&script);
    assert!(
        text.as_str().is_some_and(|t| t.contains(needle)),
        "{selector}: {text}"
    );
}

/// No element of the browser's page lies outside the viewport, and the page does not scroll
/// sideways.
pub(crate) fn assert_fits(browser: &Browser, what: &str) {
    let found = browser.js(OUTSIDE);
    assert_eq!(
        found["outside"],
        Json::Array(vec![]),
        "{what}: elements outside the viewport: {found}"
    );
    assert_eq!(
        found["scrollWidth"], found["width"],
        "{what} scrolls sideways: {found}"
    );
}
