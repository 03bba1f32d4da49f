//! A small W3C WebDriver client for the dashboard's browser tests: Debian's `chromedriver`,
//! started by the test on a free port, driving `/usr/bin/chromium` headless with an empty
//! profile. The protocol is plain HTTP and JSON, spoken here over a TCP connection per call
//! (no client crate needed). A missing browser or driver fails the test: nothing is skipped.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// One HTTP/1.1 call with a JSON body; returns (status, JSON answer).
fn call(addr: &str, method: &str, path: &str, body: Option<&Json>) -> (u16, Json) {
    let body = body.map(Json::to_string).unwrap_or_default();
    let mut stream =
        TcpStream::connect(addr).unwrap_or_else(|e| panic!("chromedriver at {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    // chromedriver keeps the connection open: read the head, then the body it announces.
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    let head_end = loop {
        if let Some(i) = out.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = read_some(&mut stream, &mut buf);
        assert!(n > 0, "chromedriver closed the connection mid-answer");
        out.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&out[..head_end]).to_ascii_lowercase();
    let status = super::status_code(&head);
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let chunked = head.contains("transfer-encoding: chunked");
    loop {
        let body = &out[head_end..];
        let done = match length {
            Some(n) => body.len() >= n,
            None if chunked => body.windows(5).any(|w| w == b"0\r\n\r\n"),
            None => false,
        };
        if done {
            break;
        }
        let n = read_some(&mut stream, &mut buf);
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    let rest = String::from_utf8_lossy(&out[head_end..]).into_owned();
    let rest = if chunked { dechunk(&rest) } else { rest };
    (status, serde_json::from_str(&rest).unwrap_or(Json::Null))
}

fn dechunk(mut text: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = text.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        text = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A running chromedriver and one headless Chromium session; both end when dropped.
pub struct Browser {
    driver: Child,
    addr: String,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a Chromium session of `width` x `height`.
    pub fn start(width: u32, height: u32) -> Browser {
        for tool in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                Path::new(tool).exists(),
                "{tool} is missing: the dashboard's browser tests need Debian's chromium and chromium-driver (e2e/run installs them)"
            );
        }
        let port = crate::support::free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let addr = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(&addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen on {addr}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--hide-scrollbars".into(),
            format!("--user-data-dir={}", profile.path().display()),
            format!("--window-size={width},{height}"),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args}
        }}});
        let mut browser = Browser {
            driver,
            addr,
            session: String::new(),
            _profile: profile,
        };
        let (status, answer) = call(&browser.addr, "POST", "/session", Some(&caps));
        assert_eq!(status, 200, "new session: {answer}");
        browser.session = answer["value"]["sessionId"].as_str().unwrap().to_string();
        browser.viewport(width, height);
        browser
    }

    fn command(&self, method: &str, path: &str, body: Option<&Json>) -> Json {
        let (status, answer) = call(
            &self.addr,
            method,
            &format!("/session/{}{path}", self.session),
            body,
        );
        assert_eq!(status, 200, "{method} {path}: {answer}");
        answer["value"].clone()
    }

    /// Sets the page's viewport (CSS pixels), as a device of that size would have it.
    pub fn viewport(&self, width: u32, height: u32) {
        self.cdp(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600}),
        );
    }

    fn cdp(&self, cmd: &str, params: Json) -> Json {
        self.command(
            "POST",
            "/goog/cdp/execute",
            Some(&json!({"cmd": cmd, "params": params})),
        )
    }

    pub fn goto(&self, url: &str) {
        self.command("POST", "/url", Some(&json!({ "url": url })));
    }

    /// Runs `script` (a function body; `return` gives the value) in the page.
    pub fn js(&self, script: &str) -> Json {
        self.command(
            "POST",
            "/execute/sync",
            Some(&json!({"script": script, "args": []})),
        )
    }

    /// The page's visible text.
    pub fn text(&self) -> String {
        self.js("return document.body ? document.body.innerText : '';")
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Waits (bounded) until `script` returns true.
    pub fn wait_for(&self, what: &str, timeout: Duration, script: &str) {
        let deadline = Instant::now() + timeout;
        while self.js(script) != Json::Bool(true) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Saves a PNG of what the viewport shows to `path`.
    pub fn screenshot_viewport(&self, path: &Path) {
        let shot = self.command("GET", "/screenshot", None);
        let png = decode_base64(shot.as_str().expect("screenshot data"));
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }

    /// Saves a PNG of the page's top `height` CSS pixels, scaled by `scale`, to `path`.
    pub fn screenshot_top(&self, path: &Path, width: u32, height: u32, scale: f64) {
        let clip = json!({"x": 0, "y": 0, "width": width, "height": height, "scale": scale});
        let shot = self.cdp(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true, "clip": clip}),
        );
        let png = decode_base64(shot["data"].as_str().expect("screenshot data"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }

    /// Saves a PNG of the whole page (not only the viewport) to `path`.
    pub fn screenshot(&self, path: &Path) {
        let shot = self.cdp(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        );
        let png = decode_base64(shot["data"].as_str().expect("screenshot data"));
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = call(
                &self.addr,
                "DELETE",
                &format!("/session/{}", self.session),
                None,
            );
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64, as WebDriver returns screenshots.
fn decode_base64(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for c in text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
    {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        };
        buffer = (buffer << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
        }
    }
    out
}

/// One `read`, retried when a signal interrupts it (EINTR: other tests in this process start and
/// stop children, and a handler installed without SA_RESTART interrupts blocking reads).
fn read_some(stream: &mut TcpStream, buf: &mut [u8]) -> usize {
    loop {
        match stream.read(buf) {
            Ok(n) => return n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("reading chromedriver's answer: {e}"),
        }
    }
}
