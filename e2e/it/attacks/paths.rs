//! See `../attacks.rs`. Paths, addresses and names the repo sets that would reach past the
//! repo: a Waves cluster's token and CA named as host files (the pod's service-account token
//! sent as a bearer token to a server the repo names, `/dev/zero` read until the pod is
//! killed), an API server over plain `http://`, and a name of megabytes that becomes a
//! commit of megabytes. Every field of this kind and its rule is listed in
//! `sluice::manifest::named_paths` (and checked there against the readers).

use std::time::{Duration, Instant};

use crate::support::canary::route_only_smi;
use crate::support::metrics::{Canned, Server};
use crate::support::repo;
use crate::support::{
    daemon_on_remote, git, human_clone, human_commit, reconcile_ticks, run_sluice, run_sluice_env,
    seeded_remote, Daemon, DaemonOnRemote,
};

const FILE: &str = "apps/web.yaml";

/// A canary `shop/<name>` in one wave, whose `cluster:` block (line 15) holds `cluster`: one
/// `key: value` per line, the first on line 16.
fn waves_canary(name: &str, cluster: &[&str]) -> String {
    let mut text = route_only_smi(
        "shop",
        name,
        "v1",
        "    interval: 1s\n    stepWeights: [50]",
    );
    text.push_str(&format!(
        "  waves:\n    - name: staging\n      output: clusters/staging/{name}\n      sync: {{flux: {{kustomization: apps}}}}\n      cluster:\n"
    ));
    for line in cluster {
        text.push_str(&format!("        {line}\n"));
    }
    text
}

/// `sluice validate` on a repo holding `text` as [`FILE`], with `env`: (exit code, output).
fn validate(text: &str, env: &[(&str, &str)]) -> (i32, String) {
    let dir = repo(&[(FILE, text)]);
    let (code, out, err) = run_sluice_env(&["validate", &dir.path().display().to_string()], env);
    (code, format!("{out}{err}"))
}

#[test]
fn a_waves_cluster_naming_a_host_file_is_refused_at_its_line() {
    let server = "server: https://staging.example:6443";
    let token = "/var/run/secrets/kubernetes.io/serviceaccount/token";
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![format!("tokenFile: {token}")],
            "17: spec.waves[0].cluster.tokenFile",
        ),
        (
            vec!["tokenFile: token".into()],
            "17: spec.waves[0].cluster.tokenFile",
        ),
        (
            vec!["tokenFile: ../../etc/passwd".into()],
            "17: spec.waves[0].cluster.tokenFile",
        ),
        (
            vec!["tokenFile: /dev/zero".into()],
            "17: spec.waves[0].cluster.tokenFile",
        ),
        (
            vec![
                "secretRef: {name: staging}".into(),
                "caFile: /etc/shadow".into(),
            ],
            "18: spec.waves[0].cluster.caFile",
        ),
        (
            vec!["secretRef: {name: ../../etc}".into()],
            "17: spec.waves[0].cluster.secretRef.name",
        ),
        (
            vec!["secretRef: {name: /etc/shadow}".into()],
            "17: spec.waves[0].cluster.secretRef.name",
        ),
        (
            vec!["secretRef: {name: staging, key: /dev/zero}".into()],
            "17: spec.waves[0].cluster.secretRef.key",
        ),
    ];
    for (lines, at) in cases {
        let mut cluster = vec![server];
        cluster.extend(lines.iter().map(String::as_str));
        let (code, out) = validate(&waves_canary("web", &cluster), &[]);
        assert_eq!(code, 1, "{lines:?} is refused: {out}");
        assert!(
            out.contains(&format!("{FILE}:{at}")),
            "{lines:?}: expected {FILE}:{at} in: {out}"
        );
    }
    // What the repo may name instead: a Secret mapped into sluice, as every secretRef.
    let (code, out) = validate(
        &waves_canary("web", &[server, "secretRef: {name: staging-cluster}"]),
        &[],
    );
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_waves_api_server_over_http_is_refused_unless_the_operator_allows_it() {
    let secret = "secretRef: {name: staging-cluster}";
    let http = waves_canary("web", &["server: http://10.0.0.1:6443", secret]);
    let (code, out) = validate(&http, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("{FILE}:16: spec.waves[0].cluster.server")),
        "{out}"
    );
    assert!(
        out.contains("SLUICE_ALLOW_HTTP_CLUSTERS"),
        "the refusal names the operator's setting: {out}"
    );
    let (code, out) = validate(&http, &[("SLUICE_ALLOW_HTTP_CLUSTERS", "true")]);
    assert_eq!(code, 0, "the operator allows http: {out}");
    // Neither credentials in the address nor another scheme, whatever the operator allows.
    for server in [
        "https://admin:pw@10.0.0.1:6443",
        "file:///etc/shadow",
        "10.0.0.1:6443",
    ] {
        let text = waves_canary("web", &[&format!("server: {server:?}"), secret]);
        let (code, out) = validate(&text, &[("SLUICE_ALLOW_HTTP_CLUSTERS", "true")]);
        assert_eq!(code, 1, "{server}: {out}");
        assert!(
            out.contains(&format!("{FILE}:16: spec.waves[0].cluster.server")),
            "{server}: {out}"
        );
    }
}

/// Waits (at most 60 s) until the daemon has finished `count` ticks.
fn wait_for_ticks(daemon: &Daemon, count: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while reconcile_ticks(daemon.main()) < count {
        let log = daemon.log();
        assert!(
            Instant::now() < deadline,
            "fewer than {count} ticks:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `files` (path, text at v1) under a daemon with `env`, once a push of v2 of each has had
/// `ticks` ticks to act on (the waves' gates ask their clusters while a canary progresses).
fn progressing(files: &[(&str, String)], env: &[(&str, &str)], ticks: u64) -> DaemonOnRemote {
    let seeded: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let daemon = daemon_on_remote(&seeded, |d| {
        d.poll("100ms")
            .env("SLUICE_WEBHOOK_SECRET", "s3cret")
            .log(Some("info"))
            .envs(env)
    });
    wait_for_ticks(&daemon, 2);
    let human = human_clone(
        &daemon.bare.display().to_string(),
        &daemon.bare.with_file_name("human"),
    );
    for (path, text) in files {
        human_commit(&human, path, &text.replace("\"v1\"", "\"v2\""), "v2");
    }
    let after = reconcile_ticks(daemon.main());
    wait_for_ticks(&daemon, after + ticks);
    daemon
}

#[test]
fn a_daemon_sends_no_host_token_to_a_waves_server_the_repo_names() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // The server an attacker names; it records whatever reaches it.
    let listener = rt.block_on(Server::start_with(|_| {
        Canned::json(200, r#"{"major":"1","minor":"33"}"#)
    }));
    let host = tempfile::tempdir().unwrap();
    let host_token = host.path().join("token");
    std::fs::write(&host_token, "host-service-account-token").unwrap();
    let url = listener.url();
    let web = waves_canary(
        "web",
        &[
            &format!("server: {url}"),
            &format!("tokenFile: {}", host_token.display()),
        ],
    );
    let api = waves_canary(
        "api",
        &[&format!("server: {url}"), "secretRef: {name: api-cluster}"],
    );
    let files = [(FILE, web), ("apps/api.yaml", api)];
    let mapped = ("SLUICE_SECRET_SHOP__API_CLUSTER__TOKEN", "mapped-token");
    {
        let daemon = progressing(&files, &[mapped], 5);
        let log = daemon.log();
        assert!(
            listener.requests().is_empty(),
            "nothing reaches a server the repo names: {:?}\n{log}",
            listener.requests()
        );
        assert!(log.contains("spec.waves[0].cluster.tokenFile"), "{log}");
        assert!(log.contains("spec.waves[0].cluster.server"), "{log}");
    }
    // The control: the operator allows http, and the mapped Secret's token (only) goes out.
    let daemon = progressing(&files, &[mapped, ("SLUICE_ALLOW_HTTP_CLUSTERS", "true")], 5);
    let log = daemon.log();
    let requests = listener.requests();
    assert!(!requests.is_empty(), "the allowed server was asked:\n{log}");
    for r in &requests {
        assert_eq!(
            r.header("authorization"),
            Some("Bearer mapped-token"),
            "{r:?}"
        );
    }
}

#[test]
fn a_megabyte_name_is_refused_by_validate_and_never_committed() {
    let name = "m".repeat(3 << 20);
    let analysis = format!(
        "    interval: 1s\n    stepWeights: [50]\n    metrics:\n      - name: {name}\n        query: up\n        thresholdRange: {{max: 1}}"
    );
    let text = route_only_smi("shop", "web", "v1", &analysis);
    let (code, out) = validate(&text, &[]);
    assert_eq!(code, 1, "{}", &out[..out.len().min(2000)]);
    assert!(
        out.contains(&format!("{FILE}:12: spec.analysis.metrics[0].name")),
        "{}",
        &out[..out.len().min(2000)]
    );
    assert!(
        out.len() < 64 << 10,
        "the refusal does not echo the name: {} bytes",
        out.len()
    );
    // The loop refuses the canary too: it makes no commit of it.
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(tmp.path(), &[(FILE, &text)]);
    let (_, out, err) = run_sluice(&[
        "reconcile",
        "--repo",
        &bare.display().to_string(),
        "--workdir",
        &tmp.path().join("w").display().to_string(),
    ]);
    let log = format!("{out}{err}");
    assert_eq!(
        git(&bare, &["rev-list", "--count", "main"]).trim(),
        "1",
        "only the seed: {}",
        &log[..log.len().min(2000)]
    );
    // Namespaces are Kubernetes labels: 63 characters at most.
    let long_namespace = "n".repeat(64);
    let text = route_only_smi(
        &long_namespace,
        "web",
        "v1",
        "    interval: 1s\n    stepWeights: [50]",
    );
    let (code, out) = validate(&text, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("{FILE}:3: metadata.namespace")),
        "{out}"
    );
}

/// The operator's Prometheus token goes only to the origins the operator lists: a canary whose
/// metric's template names a server of the attacker's gets no credentials sent there (its
/// check fails, naming `SLUICE_PROMETHEUS_ORIGINS`), and sluice does not start with the token
/// and no list.
#[test]
fn a_daemon_sends_the_operators_prometheus_token_only_to_listed_origins() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt.block_on(Server::start_with(|_| {
        Canned::json(
            200,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"0.5"]}]}}"#,
        )
    }));
    let template = format!(
        "apiVersion: flagger.app/v1beta1\nkind: MetricTemplate\nmetadata: {{name: errors, namespace: shop}}\nspec:\n  provider: {{type: prometheus, address: {}}}\n  query: up\n",
        listener.url()
    );
    let canary = route_only_smi(
        "shop",
        "web",
        "v1",
        "    interval: 1s\n    stepWeights: [50]\n    metrics:\n      - name: errors\n        templateRef: {name: errors}\n        thresholdRange: {max: 1}",
    );
    // One file, so that the push of v2 changes it.
    let files = [(FILE, format!("{canary}---\n{template}"))];
    let token = ("SLUICE_PROMETHEUS_TOKEN", "operator-prometheus-token");

    // Without the list of origins, no command that queries starts.
    let (code, _, err) = run_sluice_env(&["reconcile", "--repo", "/nonexistent"], &[token]);
    assert_ne!(code, 0);
    assert!(err.contains("SLUICE_PROMETHEUS_ORIGINS"), "{err}");

    // Listed elsewhere: the repo's server is never sent the token.
    {
        let daemon = progressing(
            &files,
            &[
                token,
                (
                    "SLUICE_PROMETHEUS_ORIGINS",
                    "http://prometheus.monitoring:9090",
                ),
            ],
            1,
        );
        // The metric's check fails, saying why (in the daemon's log or the committed
        // status): waited for by count of ticks, at most 200.
        let start = reconcile_ticks(daemon.main());
        let said = loop {
            let log = daemon.log();
            let history = git(&daemon.bare, &["log", "-p", "main"]);
            if log.contains("SLUICE_PROMETHEUS_ORIGINS")
                || history.contains("SLUICE_PROMETHEUS_ORIGINS")
            {
                break log;
            }
            assert!(
                reconcile_ticks(daemon.main()) < start + 200,
                "no check said why:\n{log}\n{history}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        for r in listener.requests() {
            assert_eq!(r.header("authorization"), None, "{r:?}\n{said}");
        }
    }
    // The control: the server's origin listed, the token goes there (waited for by count of
    // ticks, at most 200).
    let daemon = progressing(
        &files,
        &[token, ("SLUICE_PROMETHEUS_ORIGINS", &listener.url())],
        1,
    );
    let start = reconcile_ticks(daemon.main());
    while !listener
        .requests()
        .iter()
        .any(|r| r.header("authorization") == Some("Bearer operator-prometheus-token"))
    {
        let log = daemon.log();
        assert!(
            reconcile_ticks(daemon.main()) < start + 200,
            "the listed origin was never sent the token: {:?}\n{log}",
            listener.requests()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
