//! The dashboard against a push made to cost it: one YAML blob of just under the loader's
//! limit (4 MiB) committed under 200 names, and one just over it under a few more. The tick
//! shares parses by blob id; `sluice dashboard` must too: it reads the commit from git
//! objects (nothing written under `$TMPDIR`), parses each blob once, and lists the files over
//! the limit as refused without parsing them. And a forged trailer-only commit (someone
//! else's commit that changes no file sluice owns and carries `Sluice-*` trailers naming any
//! approver and any URL) is marked in the decision log as a decision audit cannot verify.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value as Json;

use crate::support::dashboard::{
    initialized, screenshots, sluice_dashboard_with, Process, DESKTOP,
};
use crate::support::standalone::big_config_map;
use crate::support::webdriver::Browser;
use crate::support::{git, http, human_commit};

/// The loader's limit (`yaml::snapshot::MAX_FILE_BYTES`).
const LIMIT: usize = sluice::yaml::snapshot::MAX_FILE_BYTES as usize;
/// Names the blob under the limit is committed under.
const COPIES: usize = 200;
/// Names the blob over the limit is committed under.
const OVER: usize = 3;

/// Stores `text` as one blob in `human`'s repo and commits it under each of `names` (without
/// writing the copies to the work tree): its id.
fn stage_copies(human: &Path, text: &str, names: &[String]) -> String {
    let mut hash = Command::new("git")
        .args(["hash-object", "-w", "--stdin"])
        .current_dir(human)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    hash.stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = hash.wait_with_output().unwrap();
    assert!(out.status.success());
    let blob = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let mut index = Command::new("git")
        .args(["update-index", "--index-info"])
        .current_dir(human)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let lines: String = names
        .iter()
        .map(|n| format!("100644 {blob}\t{n}\n"))
        .collect();
    index
        .stdin
        .take()
        .unwrap()
        .write_all(lines.as_bytes())
        .unwrap();
    assert!(index.wait().unwrap().success());
    blob
}

/// The 4 MiB x 200 push (and the blob over the limit under [`OVER`] names), on top of an
/// initialized canary: the remote.
fn big_push(dir: &Path) -> std::path::PathBuf {
    let (bare, human) = initialized(dir);
    let under: Vec<String> = (0..COPIES)
        .map(|i| format!("blobs/copy-{i:03}.yaml"))
        .collect();
    let over: Vec<String> = (0..OVER).map(|i| format!("blobs/over-{i}.yaml")).collect();
    stage_copies(&human, &big_config_map("test", LIMIT - 100), &under);
    stage_copies(&human, &big_config_map("test", LIMIT + 100), &over);
    git(&human, &["commit", "-q", "-m", "one blob, many names"]);
    git(&human, &["push", "-q", "origin", "HEAD:main"]);
    bare
}

/// The YAML blobs the walk reads at `main` of `bare` that the loader parses (at most the
/// limit): how many distinct ones.
fn parseable_blobs(bare: &Path) -> usize {
    let listing = git(bare, &["ls-tree", "-r", "-l", "main"]);
    let mut blobs = BTreeSet::new();
    for line in listing.lines() {
        let (meta, path) = line.split_once('\t').unwrap();
        let fields: Vec<&str> = meta.split_whitespace().collect();
        let (id, size) = (fields[2], fields[3].parse::<usize>().unwrap_or(usize::MAX));
        let mut parts: Vec<&str> = path.split('/').collect();
        let name = parts.pop().unwrap();
        let walked = (name.ends_with(".yaml") || name.ends_with(".yml"))
            && !parts.iter().any(|p| p.starts_with('.'));
        if walked && size <= LIMIT {
            blobs.insert(id.to_string());
        }
    }
    blobs.len()
}

/// `sluice dashboard --dir bare` with `$TMPDIR` at `tmpdir`, its JSON log (debug for the
/// dashboard) in `log`.
fn dashboard(bare: &Path, tmpdir: &Path, log: &Path) -> (Process, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.arg("--log-format=json")
        .env("SLUICE_LOG", "warn,sluice::dashboard=debug")
        .env("TMPDIR", tmpdir)
        .stderr(std::fs::File::create(log).unwrap());
    sluice_dashboard_with(bare, &[], cmd)
}

fn get_ok(addr: &str, path: &str) -> String {
    let (code, body) = http(addr, "GET", path, &[], b"");
    assert_eq!(code, 200, "{path}: {body}");
    body
}

#[test]
fn a_large_push_leaves_nothing_under_tmpdir_is_parsed_once_and_refused_past_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = big_push(tmp.path());
    let tmpdir = tmp.path().join("tmpdir");
    std::fs::create_dir(&tmpdir).unwrap();
    let log = tmp.path().join("dashboard.log");
    let (_dashboard, addr) = dashboard(&bare, &tmpdir, &log);

    let page = get_ok(&addr, "/");
    assert!(page.contains("podinfo"), "{page}");
    let overview: Json = serde_json::from_str(&get_ok(&addr, "/api/v1/canaries")).unwrap();
    get_ok(&addr, "/canaries/test/podinfo");

    // Read from git objects: nothing written out.
    let written: Vec<_> = std::fs::read_dir(&tmpdir).unwrap().flatten().collect();
    assert!(
        written.is_empty(),
        "sluice dashboard wrote under $TMPDIR: {:?}",
        written.iter().map(|e| e.path()).collect::<Vec<_>>()
    );

    // Each file over the limit is shown as refused, by its size, on the page too.
    let refusals: Vec<&str> = overview["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Json::as_str)
        .collect();
    for i in 0..OVER {
        let file = format!("blobs/over-{i}.yaml:1:");
        // The page escapes `/` as HTML does not need to, but may.
        let escaped = file.replace('/', "&#x2f;");
        let refused = refusals.iter().find(|r| r.starts_with(&file));
        assert!(
            refused.is_some_and(|r| r.contains(&format!("file is {} bytes", LIMIT + 100))),
            "{file} refused by its size: {refusals:#?}"
        );
        assert!(
            page.contains(&format!("{escaped} file is")),
            "the page lists {file} as refused"
        );
    }
    assert!(
        !refusals.iter().any(|r| r.starts_with("blobs/copy-")),
        "the files under the limit load: {refusals:#?}"
    );

    // One parse per blob, not per name: the dashboard's debug line counts them.
    let text = std::fs::read_to_string(&log).unwrap();
    let read: Vec<Json> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok())
        .filter(|l| l["fields"]["message"] == "Dashboard read a commit")
        .collect();
    assert_eq!(
        read.len(),
        1,
        "one read of the commit, cached after: {text}"
    );
    let fields = &read[0]["fields"];
    assert_eq!(
        fields["parsed"].as_u64(),
        Some(parseable_blobs(&bare) as u64),
        "each blob parsed once, none over the limit: {fields}"
    );
    assert!(
        fields["files"].as_u64().unwrap() >= (COPIES + OVER) as u64,
        "{fields}"
    );
}

/// A commit by someone else that changes a file sluice does not own and carries `Sluice-*`
/// trailers: the canary, a phase, weights, any approver, any approval URL.
const FORGED: &str = "podinfo: promote\n\nSluice-Canary: test/podinfo\nSluice-Phase: Succeeded\nSluice-Weights: primary=0 canary=100\nSluice-Approved-By: mallory\nSluice-Approval: https://forge.example/pulls/1\n";

#[test]
fn a_forged_trailer_only_commit_is_marked_unverified_in_the_decision_log() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, human) = initialized(tmp.path());
    human_commit(&human, "notes.txt", "nothing sluice owns\n", FORGED);
    let forged = git(&bare, &["rev-parse", "main"]).trim().to_string();
    let tmpdir = tmp.path().join("tmpdir");
    std::fs::create_dir(&tmpdir).unwrap();
    let (_dashboard, addr) = dashboard(&bare, &tmpdir, &tmp.path().join("dashboard.log"));

    let page: Json = serde_json::from_str(&get_ok(&addr, "/api/v1/canaries/test/podinfo")).unwrap();
    let log = page["log"].as_array().unwrap();
    let entry = |commit: &str| {
        log.iter()
            .find(|e| commit.starts_with(e["commit"].as_str().unwrap()))
            .unwrap_or_else(|| panic!("{commit} in the log: {page:#}"))
    };
    let shown = entry(&forged);
    assert_eq!(shown["by"], "mallory", "the log shows what it claims");
    let why = shown["unverified"].as_str().unwrap_or_else(|| {
        panic!("the forged commit is marked unverified: {shown:#}");
    });
    assert!(why.contains("Sluice-Replay"), "says why: {why}");
    // sluice's own decisions replay, and are not marked.
    let own: Vec<&Json> = log
        .iter()
        .filter(|e| !forged.starts_with(e["commit"].as_str().unwrap()))
        .collect();
    assert!(!own.is_empty(), "{page:#}");
    for e in own {
        assert!(
            e.get("unverified").is_none(),
            "sluice's own decision: {e:#}"
        );
    }
    assert_eq!(page["audit"]["unverified"], 1, "{page:#}");

    // The mark is on the page, in the forged commit's row of the log.
    let browser = Browser::start(DESKTOP.0, DESKTOP.1);
    browser.goto(&format!("http://{addr}/canaries/test/podinfo"));
    let marked = browser.js(
        "return Array.from(document.querySelectorAll('table.log tr.unverified')).map(r => r.innerText);",
    );
    let rows = marked.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{marked}");
    let row = rows[0].as_str().unwrap();
    assert!(
        row.contains("✘ unverified") && row.contains("mallory") && row.contains(&forged[..7]),
        "{row}"
    );
    browser.js("document.querySelector('table.log').scrollIntoView();");
    browser.screenshot_viewport(&screenshots().join("decision-log-unverified.png"));
}
