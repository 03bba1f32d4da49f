//! A real `git daemon` serving a folder of repos on loopback, with pushes enabled; killed on
//! drop. Shared by the integration tests (`e2e/it`) and the benches (`e2e/bench`), which
//! include this file by path.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct GitDaemon {
    child: Child,
    pub port: u16,
    /// The daemon's `--verbose` log: a line per request it served (read by the tests, not the
    /// bench, which includes this file too).
    #[allow(dead_code)]
    log: tempfile::NamedTempFile,
}

impl GitDaemon {
    /// Serves `base` on a free loopback port (retrying when another process takes the port
    /// between choosing and binding it).
    pub fn start(base: &Path) -> GitDaemon {
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free loopback port")
                .port();
            if let Some(daemon) = GitDaemon::serve(base, port) {
                return daemon;
            }
        }
        panic!("git daemon did not start");
    }

    /// Serves `base` on `port`; `None` when the daemon exits or does not listen within 10 s.
    pub fn serve(base: &Path, port: u16) -> Option<GitDaemon> {
        let exec_path = Command::new("git")
            .arg("--exec-path")
            .output()
            .expect("git is installed");
        let exec_path = String::from_utf8_lossy(&exec_path.stdout)
            .trim()
            .to_string();
        let log = tempfile::NamedTempFile::new().expect("a log file for git daemon");
        let stderr = log.reopen().expect("open the git daemon log");
        // `git-daemon` itself, not `git daemon`: the `git` wrapper runs the daemon as a child,
        // so killing the wrapper would leave the daemon running.
        let child = Command::new(Path::new(&exec_path).join("git-daemon"))
            .current_dir(base)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .args([
                "--export-all",
                "--enable=receive-pack",
                "--informative-errors",
                "--reuseaddr",
                "--listen=127.0.0.1",
                "--verbose",
            ])
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg(base)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("git daemon must be installed (Debian package `git`)");
        // Guard first, so a failed wait still kills the daemon.
        let mut daemon = GitDaemon { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(daemon);
            }
            if let Ok(Some(_)) = daemon.child.try_wait() {
                return None;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        None
    }

    /// How many fetches (`upload-pack` requests) of `repo` the daemon has served so far.
    #[allow(dead_code)]
    pub fn fetches(&self, repo: &str) -> usize {
        let log = std::fs::read_to_string(self.log.path()).expect("read the git daemon log");
        let request = format!("Request upload-pack for '/{repo}'");
        log.lines().filter(|line| line.ends_with(&request)).count()
    }

    /// The URL of `repo` (a path under the served folder).
    pub fn url(&self, repo: &str) -> String {
        format!("git://127.0.0.1:{}/{repo}", self.port)
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
