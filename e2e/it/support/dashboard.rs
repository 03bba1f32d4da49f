//! The dashboard as the browser tests (`dashboard/`, `attacks/dashboard.rs`) start it: a
//! seeded and initialized repo, `sluice dashboard` on a free port (killed on drop), and where
//! screenshots go. The browser itself is [`super::webdriver`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::metrics::{loop_canary, loop_deployment};
use super::webdriver::Browser;
use super::{free_port, human_clone, reconcile, seeded_remote};

/// The desktop window the browser tests use, in pixels.
pub(crate) const DESKTOP: (u32, u32) = (1280, 800);

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
