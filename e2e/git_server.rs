//! The git servers the tests start, each on loopback and stopped on drop: a real
//! `git daemon` serving a folder of repos with pushes enabled ([`GitDaemon`]), and
//! `git http-backend` behind a minimal HTTP/1.1 server with basic auth, optionally over TLS
//! ([`HttpGit`]). Shared by the integration tests (`e2e/it`) and the benches (`e2e/bench`),
//! which include this file by path.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

// HTTP basic auth's encoding, as sluice redacts it.
use sluice::redact::base64;

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
        GitDaemon::serve_on(base, port, &[])
    }

    /// Serves `base` on a free port of loopback and of each address of `hosts` too (replicas
    /// in network namespaces reach it over their veth pair: `e2e/it/shards_run.rs`).
    #[allow(dead_code)]
    pub fn start_on(base: &Path, hosts: &[String]) -> GitDaemon {
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free loopback port")
                .port();
            if let Some(daemon) = GitDaemon::serve_on(base, port, hosts) {
                return daemon;
            }
        }
        panic!("git daemon did not start");
    }

    fn serve_on(base: &Path, port: u16, hosts: &[String]) -> Option<GitDaemon> {
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
            .args(hosts.iter().map(|h| format!("--listen={h}")))
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
        self.url_at("127.0.0.1", repo)
    }

    /// The URL of `repo` on `host`, one of the addresses [`GitDaemon::start_on`] was given.
    pub fn url_at(&self, host: &str, repo: &str) -> String {
        format!("git://{host}:{}/{repo}", self.port)
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a request's `Authorization` header (`None` without one) lets it in.
pub(crate) type Authorize = Arc<dyn Fn(Option<&str>) -> bool + Send + Sync>;

/// `git http-backend` behind a minimal HTTP/1.1 server on loopback that demands basic auth
/// `user:password` (or what an [`Authorize`] accepts), over TLS when given a server config.
/// Stopped on drop.
pub(crate) struct HttpGit {
    port: u16,
    stop: Arc<AtomicBool>,
    authorized_requests: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HttpGit {
    pub(crate) fn start(root: &Path, user: &str, password: &str) -> Self {
        Self::start_with(root, user, password, None)
    }

    /// Serves https with `tls` (the URL scheme is then `https`).
    pub(crate) fn start_tls(
        root: &Path,
        user: &str,
        password: &str,
        tls: Arc<rustls::ServerConfig>,
    ) -> Self {
        Self::start_with(root, user, password, Some(tls))
    }

    /// Serves plain http to the requests `authorize` lets in, as `user`.
    #[allow(dead_code)]
    pub(crate) fn start_authorizing(root: &Path, user: &str, authorize: Authorize) -> Self {
        Self::serve(root, user, authorize, None)
    }

    fn start_with(
        root: &Path,
        user: &str,
        password: &str,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Self {
        let expected = format!("Basic {}", base64(format!("{user}:{password}").as_bytes()));
        let authorize: Authorize =
            Arc::new(move |header: Option<&str>| header == Some(expected.as_str()));
        Self::serve(root, user, authorize, tls)
    }

    fn serve(
        root: &Path,
        user: &str,
        authorize: Authorize,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let authorized_requests = Arc::new(AtomicUsize::new(0));
        let (root, user) = (root.to_path_buf(), user.to_string());
        let (stop2, count2) = (stop.clone(), authorized_requests.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (root, user, authorize, count) = (
                    root.clone(),
                    user.clone(),
                    authorize.clone(),
                    count2.clone(),
                );
                let tls = tls.clone();
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
                    match tls {
                        None => {
                            let mut stream = stream;
                            let _ = serve_one(&mut stream, &root, &user, &*authorize, &count);
                        }
                        Some(tls) => {
                            let Ok(conn) = rustls::ServerConnection::new(tls) else {
                                return;
                            };
                            let mut stream = rustls::StreamOwned::new(conn, stream);
                            let _ = serve_one(&mut stream, &root, &user, &*authorize, &count);
                            stream.conn.send_close_notify();
                            let _ = stream.flush();
                        }
                    }
                });
            }
        });
        HttpGit {
            port,
            stop,
            authorized_requests,
            thread: Some(thread),
        }
    }

    pub(crate) fn url(&self, userinfo: &str, repo: &str) -> String {
        format!("http://{userinfo}127.0.0.1:{}/{repo}", self.port)
    }

    /// How many requests carried the right credentials so far.
    pub(crate) fn authorized_requests(&self) -> usize {
        self.authorized_requests.load(Ordering::SeqCst)
    }

    pub(crate) fn https_url(&self, userinfo: &str, repo: &str) -> String {
        format!("https://{userinfo}127.0.0.1:{}/{repo}", self.port)
    }
}

impl Drop for HttpGit {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers one request on `stream` (plain TCP or TLS) by running `git http-backend`.
fn serve_one<S: Read + Write>(
    stream: &mut S,
    root: &Path,
    user: &str,
    authorize: &(dyn Fn(Option<&str>) -> bool + Send + Sync),
    authorized: &AtomicUsize,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    if header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        reader
            .get_mut()
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size_line = String::new();
            reader.read_line(&mut size_line)?;
            let size = usize::from_str_radix(size_line.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            chunk.truncate(size);
            body.extend_from_slice(&chunk);
            if size == 0 {
                break;
            }
        }
    } else if let Some(len) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(len, 0);
        reader.read_exact(&mut body)?;
    }

    if !authorize(header("authorization").as_deref()) {
        reader.get_mut().write_all(
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\n\
              Content-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
        return Ok(());
    }
    authorized.fetch_add(1, Ordering::SeqCst);

    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut cgi = Command::new("git");
    cgi.arg("http-backend")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_USER", user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(ct) = header("content-type") {
        cgi.env("CONTENT_TYPE", ct);
    }
    if let Some(ce) = header("content-encoding") {
        cgi.env("HTTP_CONTENT_ENCODING", ce);
    }
    if let Some(proto) = header("git-protocol") {
        cgi.env("GIT_PROTOCOL", proto);
    }
    let mut child = cgi.spawn()?;
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let output = child.wait_with_output()?;
    let _ = feeder.join();
    let out = output.stdout;
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| (p, 4))
        .or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|p| (p, 2)));
    let (head, payload) = match split {
        Some((p, n)) => (
            String::from_utf8_lossy(&out[..p]).to_string(),
            &out[p + n..],
        ),
        None => (String::new(), &out[..]),
    };
    let mut status = "200 OK".to_string();
    let mut response = String::new();
    for line in head.lines() {
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("status") {
                status = v.trim().to_string();
            } else {
                response.push_str(&format!("{}: {}\r\n", k.trim(), v.trim()));
            }
        }
    }
    reader.get_mut().write_all(
        format!(
            "HTTP/1.1 {status}\r\n{response}Content-Length: {}\r\nConnection: close\r\n\r\n",
            payload.len()
        )
        .as_bytes(),
    )?;
    reader.get_mut().write_all(payload)?;
    reader.get_mut().flush()
}
