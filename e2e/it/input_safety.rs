//! Input from the config repo stays inside the repo and bounded, with the real binary: a
//! committed symbolic link to a token file, to a Deployment outside the repo or to `/dev/zero`
//! is refused with an error naming the file, never read.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{
    get_status, git, github_signature, human_clone, seeded_remote, sluice_daemon, Daemon,
};

const TOKEN: &str = "ghp_the-token-that-must-not-leak";
const SECRET_ENV: &str = "the-secret-env-value-that-must-not-leak";

fn route_only() -> &'static str {
    "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: web, namespace: shop}\nspec:\n  routeOnly: {services: [web-blue, web-green], revision: v1}\n  service: {port: 8080}\n  route: {apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}\n  analysis: {interval: 1s, stepWeights: [50]}\n"
}

/// Commits a symbolic link `file` -> `target` from a human clone and pushes it.
fn commit_link(clone: &Path, file: &str, target: &Path) {
    let path = clone.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, &path).unwrap();
    git(clone, &["add", file]);
    git(clone, &["commit", "-q", "-m", &format!("link {file}")]);
    git(clone, &["push", "-q", "origin", "HEAD:main"]);
}

/// Runs `sluice reconcile` once on `bare`; a read that never ends fails the test instead of
/// hanging it. Returns (exit code, stdout + stderr).
fn reconcile(bare: &Path, workdir: &Path) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["reconcile", "--repo"])
        .arg(bare)
        .arg("--workdir")
        .arg(workdir)
        .env("SLUICE_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sluice");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("reconcile did not finish: a read did not stop");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Every file content of every commit on main of `bare`.
fn everything_committed(bare: &Path) -> String {
    git(bare, &["log", "-p", "--all", "--format=%H"])
}

#[test]
fn a_settings_file_linked_to_a_token_is_refused_and_the_token_never_printed() {
    let tmp = tempfile::tempdir().unwrap();
    let token_file = tmp.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let bare = seeded_remote(tmp.path(), &[("apps/web.yaml", route_only())]);
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    commit_link(&human, ".sluice/config.yaml", &token_file);

    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("validate")
        .arg(&human)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains(TOKEN), "validate printed the token: {text}");
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains(".sluice/config.yaml") && text.contains("symbolic link"),
        "{text}"
    );

    let (_, log) = reconcile(&bare, &tmp.path().join("w"));
    assert!(!log.contains(TOKEN), "the log printed the token: {log}");
    assert!(
        log.contains(".sluice/config.yaml") && log.contains("symbolic link"),
        "{log}"
    );
}

#[test]
fn a_source_linked_out_of_the_repo_is_refused_and_nothing_of_it_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside.yaml");
    std::fs::write(
        &outside,
        format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers:\n      - name: web\n        image: web:1\n        env:\n        - {{name: API_KEY, value: {SECRET_ENV}}}\n"),
    )
    .unwrap();
    let canary = "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: web, namespace: shop}\nspec:\n  source: apps/web/deployment.yaml\n  service: {port: 8080}\n  route: {apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}\n  analysis: {interval: 1s, stepWeights: [50]}\n";
    let bare = seeded_remote(tmp.path(), &[("apps/web/canary.yaml", canary)]);
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    commit_link(&human, "apps/web/deployment.yaml", &outside);

    let (_, log) = reconcile(&bare, &tmp.path().join("w"));
    assert!(
        !everything_committed(&bare).contains(SECRET_ENV),
        "the secret was committed: {log}"
    );
    assert!(!log.contains(SECRET_ENV), "{log}");
    assert!(
        log.contains("apps/web/deployment.yaml") && log.contains("symbolic link"),
        "{log}"
    );
}

#[test]
fn a_status_file_or_route_linked_to_dev_zero_is_refused_not_read_forever() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(tmp.path(), &[("apps/web.yaml", route_only())]);
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    commit_link(
        &human,
        ".sluice/status/shop/web.yaml",
        Path::new("/dev/zero"),
    );
    commit_link(&human, "apps/web/route.yaml", Path::new("/dev/zero"));

    let (_, log) = reconcile(&bare, &tmp.path().join("w"));
    assert!(
        log.contains(".sluice/status/shop/web.yaml") && log.contains("symbolic link"),
        "{log}"
    );
    assert!(
        log.contains("apps/web/route.yaml") && log.contains("symbolic link"),
        "{log}"
    );
}

fn route_only_at(name: &str, revision: &str, output: Option<&str>) -> String {
    let output = output.map_or(String::new(), |o| format!("  output: {o}\n"));
    format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n{output}  routeOnly: {{services: [web-blue, web-green], revision: \"{revision}\"}}\n  service: {{port: 8080}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  analysis: {{interval: 1s, stepWeights: [50]}}\n"
    )
}

/// `sluice validate apps` run in the work tree `dir`, so files are named repo-relative.
fn validate(dir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["validate", "apps"])
        .current_dir(dir)
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A running canary keeps its name and its output folder: a file added later that sorts first
/// and claims either is the one refused (at load and by `validate`), and the owner goes on.
#[test]
fn a_newcomer_sorting_first_cannot_take_a_running_canarys_name_or_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(
        tmp.path(),
        &[("apps/web.yaml", &route_only_at("web", "v1", None))],
    );
    let work = tmp.path().join("w");
    let (code, log) = reconcile(&bare, &work);
    assert_eq!(code, 0, "{log}");
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    assert!(human.join(".sluice/status/shop/web.yaml").is_file());
    // The owner changes revision (so it has something to do); two newcomers sort before it.
    std::fs::write(
        human.join("apps/web.yaml"),
        route_only_at("web", "v2", None),
    )
    .unwrap();
    std::fs::write(
        human.join("apps/a-same-name.yaml"),
        route_only_at("web", "v9", Some("clusters/other")),
    )
    .unwrap();
    std::fs::write(
        human.join("apps/a-same-folder.yaml"),
        route_only_at("intruder", "v9", Some("clusters/shop/web")),
    )
    .unwrap();
    git(&human, &["add", "."]);
    git(&human, &["commit", "-q", "-m", "newcomers"]);
    git(&human, &["push", "-q", "origin", "HEAD:main"]);

    let checked = validate(&human);
    let (code, log) = reconcile(&bare, &work);
    for text in [&checked, &log] {
        assert!(
            text.contains("apps/a-same-name.yaml:1: metadata.name: duplicate canary shop/web: already defined at apps/web.yaml:1"),
            "{text}"
        );
        assert!(
            text.contains("apps/a-same-folder.yaml:1: spec.output: output folder clusters/shop/web is already written by canary shop/web (apps/web.yaml:1)"),
            "{text}"
        );
        assert!(
            !text.contains("apps/web.yaml:1: "),
            "the owner is blamed: {text}"
        );
    }
    assert_eq!(code, 0, "{log}");
    // The owner went on with its new revision.
    let status = git(&bare, &["show", "main:.sluice/status/shop/web.yaml"]);
    assert!(status.contains("canaryRevision: v2"), "{status}\n{log}");
}

/// Output folders sluice may not write: git's and sluice's own folders, a folder inside or
/// around another canary's, and a folder that already holds a human's manifests (the
/// kustomization sluice writes there would drop them from the cluster).
#[test]
fn output_folders_that_are_not_sluices_to_write_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let deployment =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: shop}\nspec: {}\n";
    let files = [
        ("apps/a.yaml", route_only_at("a", "v1", Some(".sluice/out"))),
        (
            "apps/b.yaml",
            route_only_at("b", "v1", Some(".github/workflows")),
        ),
        (
            "apps/c.yaml",
            route_only_at("c", "v1", Some("deploy/.git/hooks")),
        ),
        (
            "apps/d.yaml",
            route_only_at("d", "v1", Some("clusters/shop")),
        ),
        (
            "apps/e.yaml",
            route_only_at("e", "v1", Some("clusters/shop/e")),
        ),
        (
            "apps/f.yaml",
            route_only_at("f", "v1", Some("manifests/api")),
        ),
        ("manifests/api/deployment.yaml", deployment.to_string()),
        ("apps/g.yaml", route_only_at("g", "v1", Some("clusters/g"))),
    ];
    let files: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
    let bare = seeded_remote(tmp.path(), &files);
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    let checked = validate(&human);
    let (_, log) = reconcile(&bare, &tmp.path().join("w"));
    for text in [&checked, &log] {
        for expected in [
            "apps/a.yaml:1: spec.output: output folder .sluice/out is inside .sluice/",
            "apps/b.yaml:1: spec.output: output folder .github/workflows is inside .github/",
            // A `.git` component is refused already where the path is read, on its own line.
            "apps/c.yaml:5: spec.output: expected a path git can track, found \"deploy/.git/hooks\" (inside .git)",
            "apps/e.yaml:1: spec.output: output folder clusters/shop/e is inside the output folder clusters/shop of canary shop/d (apps/d.yaml:1)",
            "apps/f.yaml:1: spec.output: output folder manifests/api already holds manifests/api/deployment.yaml, which sluice did not generate",
        ] {
            assert!(text.contains(expected), "{expected}\nin\n{text}");
        }
    }
    // Only the canaries with a folder of their own ran.
    let tree = git(&bare, &["ls-tree", "-r", "--name-only", "main"]);
    let written: Vec<&str> = tree
        .lines()
        .filter(|f| f.starts_with(".sluice/status/"))
        .collect();
    assert_eq!(
        written,
        [".sluice/status/shop/d.yaml", ".sluice/status/shop/g.yaml"],
        "{log}"
    );
    assert!(!tree.contains(".github/") && !tree.contains("manifests/api/kustomization.yaml"));
}

/// `sluice run` on `bare` polling every `poll` (with a one-minute poll only webhooks wake it
/// early), the webhook secret `secret`, at most `max_fds` open files, once ready; returns it
/// and the address of its main listener.
fn daemon(bare: &Path, workdir: &Path, poll: &str, secret: &str, max_fds: u32) -> (Daemon, String) {
    let daemon = sluice_daemon(bare, workdir)
        .poll(poll)
        .env("SLUICE_WEBHOOK_SECRET", secret)
        .log(Some("error"))
        .max_open_files(max_fds)
        .start();
    daemon.wait_ready();
    let addr = daemon.main().to_string();
    (daemon, addr)
}

/// One HTTP request; `None` when the connection fails or closes without an answer.
fn request(addr: &str, head: &str, body: &[u8]) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(body).ok()?;
    let mut out = Vec::new();
    stream.read_to_end(&mut out).ok()?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, text.split_once("\r\n\r\n")?.1.to_string()))
}

fn ticks(addr: &str) -> u64 {
    let (_, metrics) = request(
        addr,
        &format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
        b"",
    )
    .expect("metrics answer");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("sluice_reconcile_ticks_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no tick counter in {metrics}"))
}

/// A flood of connections that never send a request cannot take the daemon's file
/// descriptors: the probes answer again once the server drops the idle ones, and the loop
/// goes on reconciling meanwhile (it must never depend on the server).
#[test]
fn idle_connections_cannot_starve_the_probes_or_the_loop() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(
        tmp.path(),
        &[("apps/web.yaml", &route_only_at("web", "v1", None))],
    );
    // 256 files: a flood of 400 connections would use them all without a connection limit.
    let (_daemon, addr) = daemon(&bare, &tmp.path().join("d"), "1s", "s3cret", 256);
    let idle: Vec<std::net::TcpStream> = (0..400)
        .map(|_| std::net::TcpStream::connect(&addr).expect("the kernel accepts the connect"))
        .collect();
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    crate::support::human_commit(
        &human,
        "apps/web.yaml",
        &route_only_at("web", "v2", None),
        "web: v2",
    );

    let deadline = Instant::now() + Duration::from_secs(90);
    while get_status(&addr, "/healthz") != Some(200) {
        assert!(Instant::now() < deadline, "/healthz never answered");
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = || git(&bare, &["show", "main:.sluice/status/shop/web.yaml"]);
    while !status().contains("canaryRevision: v2") {
        assert!(
            Instant::now() < deadline,
            "the loop did not reconcile during the flood:\n{}",
            status()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(idle);
}

/// One signed delivery replayed many times wakes the loop once; many distinct deliveries sent
/// while a wake-up is pending coalesce into it. Distinct deliveries are distinct bodies (each
/// names its commit): the same signed body is a replay whatever its delivery id says.
#[test]
fn a_replayed_delivery_wakes_the_loop_once_and_bursts_coalesce() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(
        tmp.path(),
        &[("apps/web.yaml", &route_only_at("web", "v1", None))],
    );
    let (_daemon, addr) = daemon(&bare, &tmp.path().join("d"), "60s", "s3cret", 1024);
    let hook = |delivery: &str, after: usize| {
        let body = format!(r#"{{"ref":"refs/heads/main","after":"{after:040x}"}}"#);
        let head = format!(
            "POST /hooks/git HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\nX-GitHub-Event: push\r\nX-GitHub-Delivery: {delivery}\r\nX-Hub-Signature-256: {}\r\n\r\n",
            body.len(),
            github_signature("s3cret", body.as_bytes())
        );
        request(&addr, &head, body.as_bytes())
            .expect("the hook answers")
            .0
    };
    // Settled after the first tick: with a one-minute poll, only webhooks tick now.
    let settled = |from: u64| {
        let mut last = from;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            std::thread::sleep(Duration::from_secs(2));
            let now = ticks(&addr);
            if now == last && now > from {
                return now;
            }
            assert!(Instant::now() < deadline, "the ticks never settled");
            last = now;
        }
    };
    let start = ticks(&addr);

    let answers: Vec<u16> = (0..30)
        .map(|_| hook("72d3162e-cc78-11e3-81ab-4c9367dc0958", 0))
        .collect();
    assert_eq!(answers[0], 202);
    assert!(answers[1..].iter().all(|&a| a == 200), "{answers:?}");
    let after_replays = settled(start);
    assert_eq!(
        after_replays,
        start + 1,
        "30 copies of one delivery: one tick"
    );

    for i in 0..30 {
        assert_eq!(hook(&format!("burst-{i}"), i + 1), 202);
    }
    let after_burst = settled(after_replays);
    // Without coalescing each delivery queues a tick of its own (30); with it, deliveries
    // that arrive while a wake-up is pending add none (how many ticks run during the burst
    // depends on how fast ticks are, so only "fewer than one each" is asserted).
    assert!(
        after_burst < after_replays + 30,
        "30 deliveries in a burst gave {} ticks: one each, none coalesced",
        after_burst - after_replays
    );
}
