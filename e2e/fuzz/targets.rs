//! The fuzz targets: one function per parser, each with its seeds, its input strategy and the
//! properties every input must keep.

use std::path::{Path, PathBuf};

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Request, StatusCode};
use futures::FutureExt;
use hmac::{Hmac, KeyInit, Mac};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use sha2::Sha256;
use sluice::manifest::load::{load, load_text, settings_in, Loaded};
use sluice::manifest::settings::{parse_settings, SETTINGS_PATH};
use sluice::metrics::metric_templates::{LookupError, TemplateIndex};
use sluice::server::{router, Limits, Metrics, ServerState, MAX_WEBHOOK_BODY};
use sluice::yaml::error::SpecError;
use sluice::yaml::node::parse_documents;
use sluice::yaml::snapshot::Snapshot;
use tower::ServiceExt;

use crate::mutate::{apply, mutations, Dict, Mutation};
use crate::{run, Budget, Stats};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The text of every file under `dir` (relative to the repo) whose name ends in one of `exts`
/// and contains `contains`, sorted by path; none when the folder is absent.
fn texts(dir: &str, exts: &[&str], contains: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(repo().join(dir)) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().to_string());
            name.is_some_and(|n| n.contains(contains) && exts.iter().any(|x| n.ends_with(x)))
        })
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("seed files are UTF-8"))
        .collect()
}

const YAML: &[&str] = &[".yaml", ".yml"];

/// The YAML texts of each `(folder, name filter)` of `sources` ([`texts`]), in order.
fn yaml_seeds(sources: &[(&str, &str)]) -> Vec<String> {
    sources
        .iter()
        .flat_map(|(dir, contains)| texts(dir, YAML, contains))
        .collect()
}

fn spec_seeds() -> Vec<String> {
    yaml_seeds(&[
        ("e2e/corpus/flagger", ""),
        ("examples/flagger", "canary"),
        ("examples/native", "canary"),
        ("examples/demo/apps/podinfo", "canary"),
        ("e2e/fuzz/seeds/spec", ""),
    ])
}

fn companion_seeds() -> Vec<String> {
    yaml_seeds(&[
        ("e2e/corpus/flagger/companions", ""),
        ("examples/demo/apps/podinfo", ""),
    ])
}

fn template_seeds() -> Vec<String> {
    yaml_seeds(&[
        ("e2e/corpus/flagger/companions", "metrictemplate"),
        ("e2e/fuzz/seeds/templates", ""),
    ])
}

fn settings_seeds() -> Vec<String> {
    yaml_seeds(&[
        ("examples/demo/.sluice", "config"),
        ("e2e/fuzz/seeds/settings", ""),
    ])
}

fn nonempty(what: &str, seeds: Vec<String>) -> Vec<String> {
    assert!(
        !seeds.is_empty(),
        "no {what} seeds found under {}",
        repo().display()
    );
    seeds
}

/// A seed (its index) and the mutations applied to it.
type Mutated = (usize, Vec<Mutation>);

/// A seed and the mutations applied to it.
fn mutated(seeds: usize, max: usize) -> impl Strategy<Value = Mutated> {
    (0..seeds, mutations(max))
}

fn fail(why: String) -> TestCaseError {
    TestCaseError::fail(why)
}

/// Every error names one of `files` and a line inside it (`1..=lines + 1`: a syntax error at
/// the end of a file sits on the line after its last), with a message, and prints as
/// `file:line: ...`. Found by the campaign: a lone CR is a YAML line break, so lines are not
/// only counted at LF.
fn errors_are_located<'e>(
    errors: impl IntoIterator<Item = &'e SpecError>,
    files: &[(&str, &str)],
) -> Result<(), TestCaseError> {
    for e in errors {
        let Some((_, text)) = files.iter().find(|(name, _)| *name == e.file) else {
            return Err(fail(format!(
                "error names a file that is not an input: {e}"
            )));
        };
        // YAML breaks lines at LF, CRLF and a lone CR (old Mac files): count as it does.
        let last = text.replace("\r\n", "\n").split(['\n', '\r']).count() + 1;
        if e.line == 0 || e.line > last {
            return Err(fail(format!(
                "error line {} is outside the file's 1..={last}: {e}",
                e.line
            )));
        }
        if e.message.trim().is_empty() {
            return Err(fail(format!("error without a message: {e:?}")));
        }
        let shown = e.to_string();
        if !shown.starts_with(&format!("{}:{}: ", e.file, e.line)) {
            return Err(fail(format!("error does not print as file:line: {shown}")));
        }
    }
    Ok(())
}

/// How many documents of `text` are canaries the loader must read (sluice's or Flagger's
/// `Canary`); `None` when the text is not YAML.
fn canary_documents(text: &str) -> Option<usize> {
    let docs = parse_documents(text).ok()?;
    Some(
        docs.iter()
            .filter(|d| {
                let api = d.root.get("apiVersion").and_then(|n| n.as_str());
                d.root.get("kind").and_then(|n| n.as_str()) == Some("Canary")
                    && matches!(api, Some("sluice.dev/v1alpha1" | "flagger.app/v1beta1"))
            })
            .count(),
    )
}

/// A canary file that does not load whole says why: fewer canaries than canary documents (or
/// text that is not YAML) comes with at least one error.
fn rejection_is_explained(text: &str, loaded: &Loaded) -> Result<(), TestCaseError> {
    let missing = match canary_documents(text) {
        None => true,
        Some(n) => loaded.canaries.len() < n,
    };
    if missing && loaded.errors.is_empty() {
        return Err(fail(format!(
            "{} of {:?} canary documents loaded and no error says why",
            loaded.canaries.len(),
            canary_documents(text)
        )));
    }
    Ok(())
}

fn same<T: std::fmt::Debug>(what: &str, a: &T, b: &T) -> Result<(), TestCaseError> {
    let (a, b) = (format!("{a:?}"), format!("{b:?}"));
    if a != b {
        return Err(fail(format!(
            "{what} differs between two runs on the same input:\n{a}\n---- vs ----\n{b}"
        )));
    }
    Ok(())
}

/// A work tree whose file list is fixed and whose contents the case supplies: the snapshot
/// walks the real folder, and its read function hands out the case's text.
struct Tree {
    dir: tempfile::TempDir,
}

const CANARY_FILE: &str = "apps/podinfo/canary.yaml";
const COMPANION_FILE: &str = "apps/podinfo/companion.yaml";

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().expect("temp dir");
        for file in [CANARY_FILE, COMPANION_FILE, SETTINGS_PATH] {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().expect("has a folder")).expect("mkdir");
            std::fs::write(&path, "").expect("write placeholder");
        }
        Tree { dir }
    }

    fn read(
        &self,
        files: &[(&str, &str)],
    ) -> impl Fn(&Path) -> Result<String, sluice::yaml::snapshot::ReadError> + '_ {
        let files: Vec<(String, String)> = files
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
        move |path: &Path| {
            let rel = path
                .strip_prefix(self.dir.path())
                .unwrap_or(path)
                .to_string_lossy()
                .replace('\\', "/");
            Ok(files
                .iter()
                .find(|(n, _)| *n == rel)
                .map(|(_, t)| t.clone())
                .unwrap_or_default())
        }
    }
}

/// Canary specs through the tick's path: settings, the snapshot of a work tree holding a
/// mutated canary and a mutated companion (Deployment, HPA, MetricTemplate ...), `load`, the
/// MetricTemplate index of the same snapshot, and `load_text` on the canary alone.
pub fn spec(budget: Budget) -> Stats {
    let specs = nonempty("canary", spec_seeds());
    let companions = nonempty("companion", companion_seeds());
    let settings = nonempty("settings", settings_seeds());
    let mut all = specs.clone();
    all.extend(companions.iter().cloned());
    let dict = Dict::new(all);
    let tree = Tree::new();
    let texts_of = |case: &(Mutated, Mutated, Option<usize>)| {
        let ((s, sm), (c, cm), conf) = case;
        (
            apply(&specs[*s], sm, &dict),
            apply(&companions[*c], cm, &dict),
            conf.map_or(String::new(), |i| settings[i].clone()),
        )
    };
    let strategy = (
        mutated(specs.len(), 6),
        mutated(companions.len(), 3),
        prop::option::of(0..settings.len()),
    );
    run(
        "spec",
        budget,
        strategy,
        |case| {
            let (canary, companion, conf) = texts_of(case);
            format!("# {CANARY_FILE}\n{canary}\n# {COMPANION_FILE}\n{companion}\n# {SETTINGS_PATH}\n{conf}")
        },
        |case| {
            let (canary, companion, conf) = texts_of(case);
            let files = [
                (CANARY_FILE, canary.as_str()),
                (COMPANION_FILE, companion.as_str()),
                (SETTINGS_PATH, conf.as_str()),
            ];
            let pass = || {
                let (settings, settings_errors) = settings_in(tree.dir.path(), tree.read(&files));
                let snapshot = Snapshot::read_with(tree.dir.path(), tree.read(&files));
                let loaded = load(&snapshot, &settings);
                let (index, template_errors) = TemplateIndex::from_snapshot(&snapshot);
                let alone = load_text(CANARY_FILE, &canary, &settings);
                (settings_errors, loaded, index, template_errors, alone)
            };
            let first = pass();
            let (settings_errors, loaded, _, template_errors, alone) = &first;
            errors_are_located(settings_errors, &files)?;
            errors_are_located(&loaded.errors, &files)?;
            errors_are_located(template_errors, &files)?;
            errors_are_located(&alone.errors, &files)?;
            rejection_is_explained(&canary, alone)?;
            same("loading", &first, &pass())
        },
    )
}

/// Repo settings (`.sluice/config.yaml`); settings that parse are then used to read a canary.
pub fn settings(budget: Budget) -> Stats {
    let seeds = nonempty("settings", settings_seeds());
    let canaries = nonempty("canary", spec_seeds());
    let dict = Dict::new(seeds.clone());
    let strategy = (mutated(seeds.len(), 6), 0..canaries.len());
    run(
        "settings",
        budget,
        strategy,
        |((s, m), _)| apply(&seeds[*s], m, &dict),
        |((s, m), c)| {
            let text = apply(&seeds[*s], m, &dict);
            let files = [
                (SETTINGS_PATH, text.as_str()),
                (CANARY_FILE, canaries[*c].as_str()),
            ];
            let parsed = parse_settings(SETTINGS_PATH, &text);
            same(
                "parse_settings",
                &parsed,
                &parse_settings(SETTINGS_PATH, &text),
            )?;
            match &parsed {
                Err(errors) => {
                    if errors.is_empty() {
                        return Err(fail("settings rejected without an error".into()));
                    }
                    errors_are_located(errors, &files)
                }
                Ok(settings) => {
                    let _ = settings.output_for("prod", "podinfo");
                    let loaded = load_text(CANARY_FILE, &canaries[*c], settings);
                    errors_are_located(&loaded.errors, &files)?;
                    same(
                        "load_text with these settings",
                        &loaded,
                        &load_text(CANARY_FILE, &canaries[*c], settings),
                    )
                }
            }
        },
    )
}

/// MetricTemplates: two mutated files into one index (duplicates across files included), then
/// every lookup a canary could make.
pub fn metric_templates(budget: Budget) -> Stats {
    let seeds = nonempty("MetricTemplate", template_seeds());
    let dict = Dict::new(seeds.clone());
    let strategy = (mutated(seeds.len(), 6), mutated(seeds.len(), 2));
    const A: &str = "metrics/a.yaml";
    const B: &str = "metrics/b.yaml";
    let texts_of = |((a, am), (b, bm)): &(Mutated, Mutated)| {
        (apply(&seeds[*a], am, &dict), apply(&seeds[*b], bm, &dict))
    };
    run(
        "templates",
        budget,
        strategy,
        |case| {
            let (a, b) = texts_of(case);
            format!("# {A}\n{a}\n# {B}\n{b}")
        },
        |case| {
            let (a, b) = texts_of(case);
            let files = [(A, a.as_str()), (B, b.as_str())];
            let build = || {
                let mut index = TemplateIndex::new();
                let mut errors = index.add_text(A, &a);
                errors.extend(index.add_text(B, &b));
                (index, errors)
            };
            let (index, errors) = build();
            errors_are_located(&errors, &files)?;
            let (again, errors_again) = build();
            if index != again || errors != errors_again {
                return Err(fail(
                    "the index differs between two reads of the same files".into(),
                ));
            }
            // Every name the files mention, looked up in every namespace they mention.
            let words: Vec<&str> = a
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
                .chain(b.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.')))
                .filter(|w| !w.is_empty())
                .collect();
            let namespaces = ["default", "istio-system", "test", "flagger-system"];
            for ns in namespaces
                .iter()
                .copied()
                .chain(words.iter().copied().take(20))
            {
                for name in words.iter().take(60) {
                    match index.get(ns, name) {
                        Err(LookupError::Invalid { errors, .. }) if errors.is_empty() => {
                            return Err(fail(format!(
                                "template {ns}/{name} is invalid without an error saying why"
                            )));
                        }
                        Err(e) if e.to_string().is_empty() => {
                            return Err(fail("a lookup error with no message".into()));
                        }
                        _ => {}
                    }
                }
            }
            Ok(())
        },
    )
}

/// How a case signs (or fails to sign) its request in one header.
#[derive(Debug, Clone)]
enum Sig {
    Correct,
    /// The right tag, upper-case hex.
    Upper,
    /// The right tag with spaces around it.
    Spaced,
    /// The right tag with one hex digit changed.
    Flipped(usize),
    /// The right tag cut short.
    Cut(usize),
    /// Any bytes at all (header values may hold any byte but CR, LF and NUL).
    Raw(Vec<u8>),
}

#[derive(Debug, Clone)]
enum BodyChoice {
    Seed(usize, Vec<Mutation>),
    Bytes(Vec<u8>),
    /// `MAX_WEBHOOK_BODY` plus this many bytes (negative: just under the limit).
    Sized(i16),
}

#[derive(Debug, Clone)]
struct Hook {
    secret: String,
    body: BodyChoice,
    hub: Option<Sig>,
    gitea: Option<Sig>,
    gitlab: Option<Sig>,
    /// Event headers (`X-GitHub-Event` ...) and delivery IDs, any value.
    extra: Vec<(usize, Vec<u8>)>,
    method_post: bool,
}

const EXTRA_HEADERS: &[&str] = &[
    "x-github-event",
    "x-gitea-event",
    "x-gitlab-event",
    "x-github-delivery",
    "x-gitea-delivery",
    "x-gitlab-event-uuid",
    "content-type",
    "x-hub-signature",
];

const EVENTS: &[&str] = &["push", "ping", "Push Hook", "pull_request", "", "PING"];

fn header_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::sample::select(EVENTS).prop_map(|e| e.as_bytes().to_vec()),
        2 => prop::collection::vec(any::<u8>(), 0..40),
        1 => "[ -~]{0,80}".prop_map(String::into_bytes),
    ]
}

fn sig() -> impl Strategy<Value = Sig> {
    prop_oneof![
        4 => Just(Sig::Correct),
        1 => Just(Sig::Upper),
        1 => Just(Sig::Spaced),
        2 => any::<usize>().prop_map(Sig::Flipped),
        1 => any::<usize>().prop_map(Sig::Cut),
        2 => header_bytes().prop_map(Sig::Raw),
    ]
}

fn hook_seeds() -> Vec<String> {
    texts("e2e/fuzz/seeds/webhook", &[".json"], "")
}

/// The value a case puts in an authentication header (`correct` is the right tag or token).
fn sign(sig: &Sig, correct: &str, prefix: &str) -> Vec<u8> {
    let value = |tag: &str| format!("{prefix}{tag}").into_bytes();
    match sig {
        Sig::Correct => value(correct),
        Sig::Upper => value(&correct.to_uppercase()),
        Sig::Spaced => value(&format!(" {correct} ")),
        Sig::Flipped(i) => {
            let mut tag: Vec<char> = correct.chars().collect();
            if tag.is_empty() {
                tag.push('x');
            }
            let at = i % tag.len();
            tag[at] = if tag[at] == '0' { '1' } else { '0' };
            value(&tag.into_iter().collect::<String>())
        }
        Sig::Cut(i) => value(
            &correct
                .chars()
                .take(i % correct.len().max(1))
                .collect::<String>(),
        ),
        Sig::Raw(bytes) => bytes.clone(),
    }
}

/// Whether a header value authenticates the body, as the forges define it: GitHub and Gitea
/// send the hex HMAC-SHA256 of the body (GitHub after `sha256=`; hex digits in either case,
/// surrounding blanks ignored), GitLab sends the secret itself.
fn authentic(header: &str, value: &[u8], tag: &str, secret: &str) -> bool {
    if header == "x-gitlab-token" {
        return value == secret.as_bytes();
    }
    let Ok(text) = std::str::from_utf8(value) else {
        return false;
    };
    let text = if header == "x-hub-signature-256" {
        match text.strip_prefix("sha256=") {
            Some(t) => t,
            None => return false,
        }
    } else {
        text
    };
    text.trim().to_ascii_lowercase() == tag
}

/// The webhook endpoint, in process (`router` served by tower, no socket): authentication by
/// `X-Hub-Signature-256`, `X-Gitea-Signature` or `X-Gitlab-Token`, the body limit, the event
/// headers. A correctly signed request is accepted and wakes the loop; one without a correct
/// signature is refused with 401 and wakes nothing; none gets a 5xx but the documented 503 of
/// a daemon without a secret.
pub fn webhook(budget: Budget) -> Stats {
    let seeds = nonempty("webhook", hook_seeds());
    let dict = Dict::new(seeds.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let body_of = |b: &BodyChoice| -> Vec<u8> {
        match b {
            BodyChoice::Seed(s, m) => apply(&seeds[*s], m, &dict).into_bytes(),
            BodyChoice::Bytes(bytes) => bytes.clone(),
            BodyChoice::Sized(d) => {
                vec![b'x'; (MAX_WEBHOOK_BODY as i64 + i64::from(*d)).max(0) as usize]
            }
        }
    };
    let body = prop_oneof![
        30 => mutated(seeds.len(), 4).prop_map(|(s, m)| BodyChoice::Seed(s, m)),
        10 => prop::collection::vec(any::<u8>(), 0..256).prop_map(BodyChoice::Bytes),
        1 => prop_oneof![Just(-1i16), Just(0), Just(1), Just(4096)].prop_map(BodyChoice::Sized),
    ];
    let strategy = (
        prop_oneof![4 => Just("It's a Secret to Everybody".to_string()), 1 => "[ -~]{0,24}", 1 => "\\PC{1,8}"],
        body,
        prop::option::of(sig()),
        prop::option::of(sig()),
        prop::option::of(sig()),
        prop::collection::vec((0..EXTRA_HEADERS.len(), header_bytes()), 0..4),
        prop::bool::weighted(0.95),
    )
        .prop_map(|(secret, body, hub, gitea, gitlab, extra, method_post)| Hook {
            secret,
            body,
            hub,
            gitea,
            gitlab,
            extra,
            method_post,
        });
    let request = |hook: &Hook| -> (Request<Body>, Vec<u8>, Option<bool>) {
        let body = body_of(&hook.body);
        let mut mac = Hmac::<Sha256>::new_from_slice(hook.secret.as_bytes()).expect("any key");
        mac.update(&body);
        let tag = hex::encode(mac.finalize().into_bytes());
        let mut builder = Request::builder()
            .method(if hook.method_post { "POST" } else { "GET" })
            .uri("/hooks/git");
        // The first authentication header present decides: Hub, then Gitea, then GitLab.
        let mut decided: Option<bool> = None;
        let header = |builder: axum::http::request::Builder, name: &str, value: &[u8]| {
            match HeaderValue::from_bytes(value) {
                Ok(v) => {
                    let name = HeaderName::from_bytes(name.as_bytes()).expect("a header name");
                    (builder.header(name, v), true)
                }
                Err(_) => (builder, false),
            }
        };
        for (name, sig, correct, prefix) in [
            ("x-hub-signature-256", &hook.hub, tag.as_str(), "sha256="),
            ("x-gitea-signature", &hook.gitea, tag.as_str(), ""),
            ("x-gitlab-token", &hook.gitlab, hook.secret.as_str(), ""),
        ] {
            let Some(sig) = sig else { continue };
            let value = sign(sig, correct, prefix);
            let ok = authentic(name, &value, &tag, &hook.secret);
            let visible = value
                .iter()
                .all(|b| (0x20..0x7f).contains(b) || *b == b'\t');
            let (b, sent) = header(builder, name, &value);
            builder = b;
            // A Hub or Gitea value that is not visible ASCII is read as absent; any GitLab
            // token counts.
            if sent && decided.is_none() && (visible || name == "x-gitlab-token") {
                decided = Some(ok);
            }
        }
        for (i, value) in &hook.extra {
            let (b, _) = header(builder, EXTRA_HEADERS[*i], value);
            builder = b;
        }
        let request = builder
            .body(Body::from(body.clone()))
            .expect("a valid request");
        (request, body, decided)
    };
    run(
        "webhook",
        budget,
        strategy,
        |hook| {
            let (request, body, _) = request(hook);
            let shown = String::from_utf8_lossy(&body[..body.len().min(2000)]).to_string();
            format!(
                "secret {:?}\n{} {} {:#?}\n{shown}",
                hook.secret,
                request.method(),
                request.uri(),
                request.headers()
            )
        },
        |hook| {
            let send = || {
                let (request, body, decided) = request(hook);
                let state = ServerState::new(
                    Metrics::new(),
                    Some(hook.secret.clone()),
                    std::sync::Arc::new(sluice::clock::Clock::Wall),
                );
                let wake = state.wake_handle();
                let response = runtime
                    .block_on(router(state, Limits::default().request_timeout).oneshot(request))
                    .expect("infallible");
                let status = response.status();
                let text = runtime
                    .block_on(axum::body::to_bytes(response.into_body(), usize::MAX))
                    .expect("a body");
                let woken = wake.notified().now_or_never().is_some();
                (status, text, woken, body.len(), decided)
            };
            let (status, text, woken, len, decided) = send();
            let again = send();
            if (status, &text, woken) != (again.0, &again.1, again.2) {
                return Err(fail(format!(
                    "two identical requests got {status} {text:?} and {} {:?}",
                    again.0, again.1
                )));
            }
            let expected: &[StatusCode] = if !hook.method_post {
                &[StatusCode::METHOD_NOT_ALLOWED]
            } else if len > MAX_WEBHOOK_BODY {
                &[StatusCode::PAYLOAD_TOO_LARGE]
            } else if hook.secret.is_empty() {
                &[StatusCode::SERVICE_UNAVAILABLE]
            } else {
                match decided {
                    Some(true) => &[StatusCode::OK, StatusCode::ACCEPTED],
                    Some(false) | None => &[StatusCode::UNAUTHORIZED],
                }
            };
            if !expected.contains(&status) {
                return Err(fail(format!(
                    "expected {expected:?}, got {status} {:?}",
                    String::from_utf8_lossy(&text)
                )));
            }
            if woken != (status == StatusCode::ACCEPTED) {
                return Err(fail(format!(
                    "{status} but the loop was {}woken",
                    if woken { "" } else { "not " }
                )));
            }
            Ok(())
        },
    )
}
