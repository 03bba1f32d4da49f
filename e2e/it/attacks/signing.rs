//! See `../attacks.rs`. A commit must not be able to change the signing policy that judges it:
//! `sluice audit` judges each commit by the policy in force at its first parent (or by one
//! given outside the repo), so turning `signing.required` off, removing `signing`, breaking
//! `.sluice/config.yaml` or adding one's own key to `allowed_signers` is itself reported. The
//! loop applies the same rule before it takes a merged approval.

use std::path::PathBuf;

use serde_json::Value as Json;

use crate::support::audit::WEB_STATUS;
use crate::support::keygen;
use crate::support::rollout::World;
use crate::support::{git, merge_approval, route_only_web, run_sluice};

const ALLOWED: &str = ".sluice/allowed_signers";
const SETTINGS: &str = ".sluice/config.yaml";
const REQUIRED: &str = "apiVersion: sluice.dev/v1alpha1\nkind: Config\nsigning: {required: true, allowedSigners: .sluice/allowed_signers}\n";

/// A repo whose history humans write, some commits signed with SSH keys.
struct History {
    tmp: tempfile::TempDir,
    dir: PathBuf,
}

/// A key pair: the private key's path and the public key's line.
struct Key {
    path: PathBuf,
    public: String,
}

impl History {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("repo");
        std::fs::create_dir(&dir).unwrap();
        git(&dir, &["init", "-q", "-b", "main"]);
        History { tmp, dir }
    }

    fn key(&self, name: &str) -> Key {
        let path = self.tmp.path().join(name);
        let public = keygen(&path, "ed25519");
        Key { path, public }
    }

    /// Writes (`Some`) or deletes (`None`) each file, commits (signed by `key` when given)
    /// and returns the commit's id.
    fn commit(&self, files: &[(&str, Option<&str>)], key: Option<&Key>, message: &str) -> String {
        for (file, text) in files {
            let path = self.dir.join(file);
            match text {
                Some(text) => {
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(&path, text).unwrap();
                    git(&self.dir, &["add", file]);
                }
                None => {
                    git(&self.dir, &["rm", "-q", file]);
                }
            }
        }
        let signing = key.map(|k| format!("user.signingkey={}", k.path.display()));
        let mut args = vec!["-c", "gpg.format=ssh"];
        if let Some(signing) = &signing {
            args.extend(["-c", signing.as_str(), "commit", "-S"]);
        } else {
            args.push("commit");
        }
        args.extend(["-q", "--allow-empty", "-m", message]);
        git(&self.dir, &args);
        git(&self.dir, &["rev-parse", "HEAD"]).trim().to_string()
    }

    /// Requires signing by `key` from the root on: the policy's commit and one more, both
    /// signed by `key`.
    fn require_signing(&self, key: &Key) {
        let allowed = format!("ann@example.com {}", key.public);
        self.commit(
            &[(SETTINGS, Some(REQUIRED)), (ALLOWED, Some(&allowed))],
            Some(key),
            "require signed commits",
        );
        self.commit(&[("README.md", Some("hello\n"))], Some(key), "readme");
    }

    /// `sluice audit --dir <repo> -o json` with `extra` flags: (exit code, report).
    fn audit(&self, extra: &[&str]) -> (i32, Json) {
        let dir = self.dir.display().to_string();
        let mut args = vec!["audit", "--dir", &dir, "-o", "json"];
        args.extend_from_slice(extra);
        let (code, out, err) = run_sluice(&args);
        let report = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
        (code, report)
    }
}

/// The commits with a `signature` finding, in history order.
fn unsigned(report: &Json) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "signature")
        .map(|f| f["commit"].as_str().unwrap().to_string())
        .collect()
}

/// The message of the signature finding at `commit`.
fn finding_at<'a>(report: &'a Json, commit: &str) -> &'a str {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "signature" && f["commit"] == commit)
        .and_then(|f| f["message"].as_str())
        .unwrap_or_else(|| panic!("no signature finding at {commit}: {report:#}"))
}

fn settings_without_signing() -> &'static str {
    "apiVersion: sluice.dev/v1alpha1\nkind: Config\n"
}

#[test]
fn an_unsigned_commit_that_turns_signing_off_is_reported() {
    let h = History::new();
    let ann = h.key("ann");
    h.require_signing(&ann);
    let off = REQUIRED.replace("required: true", "required: false");
    let attack = h.commit(&[(SETTINGS, Some(&off))], None, "relax signing");
    // Once the policy is off (the change reported), an unsigned commit is fine.
    h.commit(&[("README.md", Some("after\n"))], None, "after");
    let (code, report) = h.audit(&[]);
    assert_eq!(unsigned(&report), vec![attack.clone()], "{report:#}");
    assert!(
        finding_at(&report, &attack).contains("signing policy"),
        "{report:#}"
    );
    assert_eq!(code, 1);
}

#[test]
fn an_unsigned_commit_that_removes_signing_is_reported() {
    let h = History::new();
    let ann = h.key("ann");
    h.require_signing(&ann);
    let attack = h.commit(
        &[
            (SETTINGS, Some(settings_without_signing())),
            (ALLOWED, None),
        ],
        None,
        "drop signing",
    );
    let (code, report) = h.audit(&[]);
    assert_eq!(unsigned(&report), vec![attack], "{report:#}");
    assert_eq!(code, 1);
}

#[test]
fn an_unsigned_commit_that_breaks_the_settings_is_reported_and_the_last_policy_stays() {
    let h = History::new();
    let ann = h.key("ann");
    h.require_signing(&ann);
    let attack = h.commit(
        &[(SETTINGS, Some("signing: [this is not a map\n"))],
        None,
        "break the settings",
    );
    // The settings still do not load: the last policy that loaded judges this one too.
    let next = h.commit(&[("README.md", Some("more\n"))], None, "more");
    // A commit signed by the allowed key that repairs them is fine.
    h.commit(&[(SETTINGS, Some(REQUIRED))], Some(&ann), "repair");
    let (code, report) = h.audit(&[]);
    assert_eq!(unsigned(&report), vec![attack, next], "{report:#}");
    assert_eq!(code, 1);
}

#[test]
fn a_commit_signed_by_an_unknown_key_that_adds_that_key_is_reported() {
    let h = History::new();
    let ann = h.key("ann");
    let mallory = h.key("mallory");
    h.require_signing(&ann);
    let both = format!(
        "ann@example.com {}mallory@example.com {}",
        ann.public, mallory.public
    );
    let attack = h.commit(&[(ALLOWED, Some(&both))], Some(&mallory), "add a key");
    // From here on mallory's key is in the policy (the change itself is reported).
    h.commit(&[("README.md", Some("m\n"))], Some(&mallory), "by mallory");
    let (code, report) = h.audit(&[]);
    assert_eq!(unsigned(&report), vec![attack.clone()], "{report:#}");
    assert!(
        finding_at(&report, &attack).contains("not list"),
        "{report:#}"
    );
    assert_eq!(code, 1);
}

#[test]
fn a_signed_commit_by_an_allowed_key_may_change_the_policy() {
    let h = History::new();
    let ann = h.key("ann");
    let bob = h.key("bob");
    h.require_signing(&ann);
    let bob_only = format!("bob@example.com {}", bob.public);
    h.commit(
        &[(ALLOWED, Some(&bob_only))],
        Some(&ann),
        "hand over to bob",
    );
    h.commit(&[("README.md", Some("b\n"))], Some(&bob), "by bob");
    let by_ann = h.commit(&[("README.md", Some("a\n"))], Some(&ann), "by ann");
    let (_, report) = h.audit(&[]);
    assert_eq!(unsigned(&report), vec![by_ann], "{report:#}");
}

#[test]
fn allowed_signers_and_require_signed_given_outside_the_repo_win() {
    let h = History::new();
    let ann = h.key("ann");
    let mallory = h.key("mallory");
    // The repo's own policy allows mallory and does not require signing at all.
    let mallory_only = format!("mallory@example.com {}", mallory.public);
    let off = REQUIRED.replace("required: true", "required: false");
    let root = h.commit(
        &[(SETTINGS, Some(&off)), (ALLOWED, Some(&mallory_only))],
        None,
        "policy off",
    );
    let by_mallory = h.commit(&[("a", Some("1\n"))], Some(&mallory), "by mallory");
    h.commit(&[("b", Some("2\n"))], Some(&ann), "by ann");
    let plain = h.commit(&[("c", Some("3\n"))], None, "unsigned");
    let (code, report) = h.audit(&[]);
    assert_eq!(unsigned(&report), Vec::<String>::new(), "{report:#}");
    assert_eq!(code, 0);

    let outside = h.tmp.path().join("trusted_signers");
    std::fs::write(&outside, format!("ann@example.com {}", ann.public)).unwrap();
    let file = outside.display().to_string();
    let (code, report) = h.audit(&["--allowed-signers", &file, "--require-signed"]);
    assert_eq!(
        unsigned(&report),
        vec![root, by_mallory.clone(), plain],
        "{report:#}"
    );
    assert_eq!(code, 1);

    // With the repo requiring signing by mallory, the outside keys still decide.
    h.commit(&[(SETTINGS, Some(REQUIRED))], Some(&ann), "require");
    let again = h.commit(&[("d", Some("4\n"))], Some(&mallory), "by mallory again");
    let (_, report) = h.audit(&["--allowed-signers", &file]);
    assert_eq!(unsigned(&report), vec![again], "{report:#}");
}

#[test]
fn require_signed_needs_an_allowed_signers_file_that_holds_keys() {
    let h = History::new();
    h.commit(&[("a", Some("1\n"))], None, "one");
    let (code, _, err) = run_sluice(&[
        "audit",
        "--dir",
        &h.dir.display().to_string(),
        "--require-signed",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--allowed-signers"), "{err}");
    let empty = h.tmp.path().join("empty_signers");
    std::fs::write(&empty, "# nobody\nann@example.com not-a-key\n").unwrap();
    let (code, _, err) = run_sluice(&[
        "audit",
        "--dir",
        &h.dir.display().to_string(),
        "--allowed-signers",
        &empty.display().to_string(),
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains(&format!("{}:2:", empty.display())),
        "names the file and line: {err}"
    );
}

/// The loop: a route-only canary that waits for approval after its first step, in a repo that
/// requires commits signed by `key`; returns the world waiting, and its approval branch.
fn waiting_for_approval(key: &Key) -> (World, String) {
    let steps = "[{weight: 20, pause: {}}, {weight: 60}]";
    let allowed = format!("ann@example.com {}", key.public);
    let mut w = World::local(&[
        (SETTINGS, REQUIRED),
        (ALLOWED, &allowed),
        (WEB, &route_only_web("v1", steps)),
    ]);
    // Under the policy sluice must sign its own commits: with a key it lists.
    w.sign_with(&key.path);
    w.ticks(1);
    w.human_writes(WEB, &route_only_web("v2", steps), "web: v2");
    w.ticks(4);
    assert_eq!(w.yaml_at_main(WEB_STATUS)["phase"], "WaitingApproval");
    let branch = w.approval_branch();
    (w, branch)
}

const WEB: &str = "apps/web.yaml";

#[test]
fn the_loop_holds_an_approval_merged_by_a_commit_the_signing_policy_does_not_allow() {
    let keys = History::new();
    let ann = keys.key("ann");
    let (mut w, branch) = waiting_for_approval(&ann);
    merge_approval(w.human(), &branch, "merge");
    let merged = git(&w.bare, &["rev-parse", "main"]);
    let report = w.tick();
    let events: Vec<&String> = report.outcomes.iter().flat_map(|o| &o.events).collect();
    assert!(
        events.iter().any(|e| e.contains(&format!(
            "the approval merged in {} is not signed as the signing policy requires: unsigned",
            &merged[..7]
        ))),
        "{events:?}"
    );
    w.ticks(4);
    assert_eq!(
        git(&w.bare, &["rev-parse", "main"]),
        merged,
        "sluice acts on nothing the unsigned merge brought"
    );
}

#[test]
fn the_loop_takes_an_approval_merged_by_a_commit_signed_by_an_allowed_key() {
    let keys = History::new();
    let ann = keys.key("ann");
    let (mut w, branch) = waiting_for_approval(&ann);
    let human = w.human().to_path_buf();
    git(&human, &["pull", "-q", "origin", "main"]);
    git(&human, &["fetch", "-q", "origin", &branch]);
    let signing = format!("user.signingkey={}", ann.path.display());
    git(
        &human,
        &[
            "-c",
            "gpg.format=ssh",
            "-c",
            &signing,
            "merge",
            "-q",
            "--no-ff",
            "-S",
            "-m",
            "Merge approval",
            "FETCH_HEAD",
        ],
    );
    git(&human, &["push", "-q", "origin", "HEAD:main"]);
    w.ticks(8);
    assert_eq!(w.yaml_at_main(WEB_STATUS)["phase"], "Succeeded");
}
