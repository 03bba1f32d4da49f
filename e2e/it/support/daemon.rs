//! The one guard around a `sluice run` process for every test that starts the daemon.
//!
//! [`sluice_daemon`] builds the command (`--listen 127.0.0.1:0 --probe-listen 127.0.0.1:0`
//! unless a test names its own main address), [`DaemonBuilder::start`] spawns it and returns
//! once the daemon has logged both listeners' addresses, and dropping the [`Daemon`] kills it,
//! also when an assertion fails: a daemon left running would hold the test's output open.
//! Its stderr is kept in memory (see [`Daemon::log`]); waits on it are woken by each new line,
//! never by a sleep. The file needs nothing else of `support/`, so that the bench binary can
//! share it by path.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a wait on the daemon's log may take before the test fails with the log: far above
/// what starting the daemon takes on a loaded 2-core machine.
pub const LOG_WAIT: Duration = Duration::from_secs(60);

const EXE: &str = env!("CARGO_BIN_EXE_sluice");

/// The log directive that keeps the listeners' "Serving ... address=" lines at any level a
/// test asks for: the guard reads the addresses from them.
const ADDRESSES: &str = "sluice::cli::run[{address}]=info";

/// How `sluice run` is to be started; see [`sluice_daemon`].
#[derive(Clone)]
pub struct DaemonBuilder {
    repo: OsString,
    workdir: PathBuf,
    poll: String,
    listen: String,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    env_remove: Vec<OsString>,
    log: Option<String>,
    max_open_files: Option<u32>,
    wrapper: Vec<OsString>,
}

/// `sluice run` on `repo` (a URL or path) with its clone in `workdir`, polling every 200 ms,
/// both listeners on free loopback ports it picks itself, logging at `warn`.
pub fn sluice_daemon(repo: impl Into<OsString>, workdir: &Path) -> DaemonBuilder {
    DaemonBuilder {
        repo: repo.into(),
        workdir: workdir.to_path_buf(),
        poll: "200ms".to_string(),
        listen: "127.0.0.1:0".to_string(),
        args: Vec::new(),
        env: Vec::new(),
        env_remove: Vec::new(),
        log: Some("warn".to_string()),
        max_open_files: None,
        wrapper: Vec::new(),
    }
}

impl DaemonBuilder {
    /// `--poll`.
    pub fn poll(mut self, poll: &str) -> Self {
        self.poll = poll.to_string();
        self
    }

    /// `--listen` at `addr` instead of a free port (a test of what sluice does with a named
    /// address).
    pub fn listen(mut self, addr: &str) -> Self {
        self.listen = addr.to_string();
        self
    }

    /// More arguments after the guard's own.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// One more variable in the daemon's environment.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// More variables in the daemon's environment.
    pub fn envs(mut self, vars: &[(&str, &str)]) -> Self {
        for (key, value) in vars {
            self = self.env(key, value);
        }
        self
    }

    /// One variable of the test's environment left out of the daemon's.
    pub fn env_remove(mut self, key: impl Into<OsString>) -> Self {
        self.env_remove.push(key.into());
        self
    }

    /// `SLUICE_LOG=<level>` (plus the listeners' address lines); `None` leaves the daemon's
    /// own default (`info`).
    pub fn log(mut self, level: Option<&str>) -> Self {
        self.log = level.map(str::to_string);
        self
    }

    /// The daemon on a stepped clock (`SLUICE_CLOCK=stepped`): each of its sleeps waits a few
    /// milliseconds of real time and moves its clock on by the rest. Only for tests where
    /// nothing outside the daemon reads the wall clock for it (no real Prometheus server) and no
    /// assertion races a human or a kill against the canary's pace.
    pub fn stepped(self) -> Self {
        self.env(sluice::clock::VAR, "stepped")
    }

    /// At most `count` open files (`ulimit -n`, through `sh`).
    pub fn max_open_files(mut self, count: u32) -> Self {
        self.max_open_files = Some(count);
        self
    }

    /// Starts `argv` with the daemon's arguments appended instead of the test's binary: `argv`
    /// ends with the sluice program it runs (e2e/it/image_run.rs starts the image's copy in the
    /// image's filesystem). The daemon's environment is then only what the builder sets.
    pub fn wrapped<I, S>(mut self, argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.wrapper = argv.into_iter().map(Into::into).collect();
        self
    }

    fn command(&self) -> Command {
        let mut cmd = match self.max_open_files {
            _ if !self.wrapper.is_empty() => {
                let mut wrapper = Command::new(&self.wrapper[0]);
                wrapper.args(&self.wrapper[1..]).env_clear();
                wrapper
            }
            Some(count) => {
                let mut sh = Command::new("sh");
                sh.arg("-c")
                    .arg(format!("ulimit -n {count} && exec \"$0\" \"$@\""))
                    .arg(EXE);
                sh
            }
            None => Command::new(EXE),
        };
        cmd.arg("run")
            .arg("--repo")
            .arg(&self.repo)
            .args(["--poll", &self.poll, "--listen", &self.listen])
            .args(["--probe-listen", "127.0.0.1:0", "--workdir"])
            .arg(&self.workdir)
            .args(&self.args)
            .env_remove("SLUICE_LOG")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for key in &self.env_remove {
            cmd.env_remove(key);
        }
        if let Some(level) = &self.log {
            cmd.env("SLUICE_LOG", format!("{level},{ADDRESSES}"));
        }
        cmd
    }

    /// Spawns the daemon and returns once it logged the addresses of its main and probe
    /// listeners.
    pub fn start(self) -> Daemon {
        let log = Log::default();
        let child = spawn(&self, &log);
        let mut daemon = Daemon {
            child: Some(child),
            builder: self,
            log,
            main: String::new(),
            probes: String::new(),
        };
        daemon.read_addresses();
        daemon
    }
}

fn spawn(builder: &DaemonBuilder, log: &Log) -> Child {
    let mut cmd = builder.command();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let stderr = child.stderr.take().expect("stderr is piped");
    log.follow(stderr);
    child
}

/// A running `sluice run`; killed when dropped.
pub struct Daemon {
    child: Option<Child>,
    builder: DaemonBuilder,
    log: Log,
    main: String,
    probes: String,
}

impl Daemon {
    /// The main listener (`/hooks/git`, `/metrics`), `host:port`.
    pub fn main(&self) -> &str {
        &self.main
    }

    /// The process id of the running daemon (of its wrapper, which execs it).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The probe listener (`/healthz`, `/readyz`), `host:port`.
    pub fn probes(&self) -> &str {
        &self.probes
    }

    /// Everything the daemon logged so far, over all its starts.
    pub fn log(&self) -> String {
        self.log.text()
    }

    /// The address on the first logged line holding `what`, waiting for that line; panics
    /// with the log when the daemon exits or [`LOG_WAIT`] passes first.
    pub fn address(&self, what: &str) -> String {
        self.log
            .wait_for(|text| logged_address(text, what))
            .unwrap_or_else(|log| panic!("no address logged on a line with {what:?}:\n{log}"))
    }

    /// Waits until `/readyz` on the probe listener answers 200 (the first tick is done),
    /// asking again after each 100 ms for at most [`LOG_WAIT`].
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + LOG_WAIT;
        while get_status(&self.probes, "/readyz") != Some(200) {
            assert!(
                Instant::now() < deadline,
                "the daemon never became ready; its log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM, and its exit status once it stopped.
    pub fn sigterm(mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        child.wait().expect("wait for sluice run")
    }

    /// SIGKILL, as a node's crash would stop it; returns once it is gone.
    pub fn sigkill(self) {
        drop(self);
    }

    /// SIGKILL, then start again on the same workdir, as a crashed pod is restarted; panics
    /// with the log when the daemon had exited on its own.
    pub fn kill_and_restart(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "the daemon exited on its own ({status}); its log:\n{}",
                    self.log()
                );
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        self.child = Some(spawn(&self.builder, &self.log));
        self.read_addresses();
    }

    fn read_addresses(&mut self) {
        let started = self.log.starts();
        let nth = |what: &'static str| {
            move |text: &str| {
                let start = text.match_indices(START).nth(started - 1)?.0;
                logged_address(&text[start..], what)
            }
        };
        let (main, probes) = (nth("Serving /hooks/git"), nth("Serving probes"));
        let both = self
            .log
            .wait_for(|text| Some((main(text)?, probes(text)?)))
            .unwrap_or_else(|log| panic!("sluice run logged no listener:\n{log}"));
        (self.main, self.probes) = both;
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Marks where each start of the daemon begins in its log.
const START: &str = "--- sluice run starts ---\n";

/// What the daemon wrote to stderr, shared with the threads that read it.
#[derive(Clone, Default)]
struct Log(Arc<(Mutex<LogState>, Condvar)>);

#[derive(Default)]
struct LogState {
    text: String,
    /// How many starts the log holds, and how many of their stderr streams are still open.
    starts: usize,
    open: usize,
}

impl Log {
    fn text(&self) -> String {
        self.0 .0.lock().unwrap().text.clone()
    }

    fn starts(&self) -> usize {
        self.0 .0.lock().unwrap().starts
    }

    /// Appends `stderr`'s lines to the log from a thread of its own, waking every waiter at
    /// each line and when the stream closes.
    fn follow(&self, stderr: std::process::ChildStderr) {
        {
            let mut state = self.0 .0.lock().unwrap();
            state.text.push_str(START);
            state.starts += 1;
            state.open += 1;
        }
        let log = self.clone();
        std::thread::spawn(move || {
            let (lock, changed) = &*log.0;
            // Bytes, not `lines()`: a line that is not UTF-8 must not stop the reading (the
            // daemon would block on a full pipe).
            let mut stderr = BufReader::new(stderr);
            let mut line = Vec::new();
            while stderr.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                let mut state = lock.lock().unwrap();
                state.text.push_str(&String::from_utf8_lossy(&line));
                if !line.ends_with(b"\n") {
                    state.text.push('\n');
                }
                line.clear();
                changed.notify_all();
            }
            lock.lock().unwrap().open -= 1;
            changed.notify_all();
        });
    }

    /// Waits until `found` finds something in the log; `Err(log)` when the daemon's stderr
    /// closed (it exited) or [`LOG_WAIT`] passed first.
    fn wait_for<T>(&self, found: impl Fn(&str) -> Option<T>) -> Result<T, String> {
        let deadline = Instant::now() + LOG_WAIT;
        let (lock, changed) = &*self.0;
        let mut state = lock.lock().unwrap();
        loop {
            if let Some(value) = found(&state.text) {
                return Ok(value);
            }
            let now = Instant::now();
            if state.open == 0 || now >= deadline {
                return Err(state.text.clone());
            }
            state = changed.wait_timeout(state, deadline - now).unwrap().0;
        }
    }
}

/// The status of `GET path` on `addr` over a fresh connection, as a kubelet's probe asks;
/// `None` when the connection fails or closes without an answer.
pub fn get_status(addr: &str, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).ok()?;
    let mut out = Vec::new();
    stream.read_to_end(&mut out).ok()?;
    String::from_utf8_lossy(&out)
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The address a daemon logged on its first line holding `what`
/// (`... what ... address=127.0.0.1:4242 other=field`).
pub fn logged_address(log: &str, what: &str) -> Option<String> {
    log.lines().filter(|l| l.contains(what)).find_map(|l| {
        l.split_whitespace()
            .find_map(|w| w.strip_prefix("address="))
            .map(str::to_string)
    })
}
