//! The signing-policy target: random histories of policy edits (turn `signing.required` on or
//! off, remove it, delete or break the settings, rewrite or delete the allowed-signers file)
//! among plain commits, each unsigned or signed by one of three keys. The property: `sluice
//! audit` reports exactly the commits the policy in force at their parent does not allow, as
//! a model of that rule (written from the documentation, not from the code) says.

use std::collections::BTreeMap;
use std::path::Path;

use git2::{Oid, Repository, Signature};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use sluice::audit::policy::Outside;
use sluice::audit::{audit, Kind};
use ssh_key::private::Ed25519Keypair;
use ssh_key::{HashAlg, LineEnding, PrivateKey};

use crate::{run, Budget, Stats};

const SETTINGS: &str = ".sluice/config.yaml";
const ALLOWED: &str = ".sluice/allowed_signers";
const KEYS: usize = 3;

/// One commit's change.
#[derive(Debug, Clone, Copy)]
enum Op {
    Edit,
    Required(bool),
    RemoveSigning,
    RemoveSettings,
    BreakSettings,
    /// The allowed-signers file lists the keys whose bits are set.
    Keys(u8),
    DeleteKeys,
}

/// The settings file as the history leaves it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Settings {
    Absent,
    NoSigning,
    Signing { required: bool },
    Broken,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Edit),
        3 => any::<bool>().prop_map(Op::Required),
        1 => Just(Op::RemoveSigning),
        1 => Just(Op::RemoveSettings),
        1 => Just(Op::BreakSettings),
        3 => (0u8..8).prop_map(Op::Keys),
        1 => Just(Op::DeleteKeys),
    ]
}

/// A commit: its change and who signs it (`None`: unsigned).
fn step() -> impl Strategy<Value = (Op, Option<usize>)> {
    (op(), proptest::option::of(0..KEYS))
}

fn keys() -> Vec<PrivateKey> {
    (0..KEYS)
        .map(|i| PrivateKey::from(Ed25519Keypair::from_seed(&[i as u8 + 1; 32])))
        .collect()
}

fn settings_text(s: Settings) -> Option<&'static str> {
    match s {
        Settings::Absent => None,
        Settings::NoSigning => Some("apiVersion: sluice.dev/v1alpha1\nkind: Config\n"),
        Settings::Signing { required: true } => Some("apiVersion: sluice.dev/v1alpha1\nkind: Config\nsigning: {required: true, allowedSigners: .sluice/allowed_signers}\n"),
        Settings::Signing { required: false } => Some("apiVersion: sluice.dev/v1alpha1\nkind: Config\nsigning: {required: false, allowedSigners: .sluice/allowed_signers}\n"),
        Settings::Broken => Some("signing: [not a map\n"),
    }
}

fn keys_text(keys: &[PrivateKey], mask: u8) -> String {
    let mut text = String::from("# who may sign\n");
    for (i, key) in keys.iter().enumerate() {
        if mask & (1 << i) != 0 {
            let public = key.public_key().to_openssh().unwrap();
            text.push_str(&format!("k{i}@example.com {public}\n"));
        }
    }
    text
}

/// The model: the keys a commit must be signed with after this tree (`None`: not required),
/// or `None` when the policy does not load (the one before stays).
fn loads(settings: Settings, keys_file: Option<u8>) -> Option<Option<u8>> {
    match settings {
        Settings::Absent | Settings::NoSigning | Settings::Signing { required: false } => {
            Some(None)
        }
        Settings::Signing { required: true } => keys_file.map(Some),
        Settings::Broken => None,
    }
}

/// An index entry for a regular file at `path` holding `text` (its blob written to `repo`),
/// for building trees in memory without a work tree.
pub(crate) fn file_entry(repo: &Repository, path: &str, text: &str) -> git2::IndexEntry {
    let blob = repo.blob(text.as_bytes()).unwrap();
    git2::IndexEntry {
        ctime: git2::IndexTime::new(0, 0),
        mtime: git2::IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode: 0o100644,
        uid: 0,
        gid: 0,
        file_size: text.len() as u32,
        id: blob,
        flags: (path.len() as u16) & 0xfff,
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }
}

/// Writes `files` as a commit on `parent`, signed by `key` when given.
fn commit(
    repo: &Repository,
    files: &BTreeMap<&str, String>,
    parent: Option<Oid>,
    key: Option<&PrivateKey>,
    n: usize,
) -> Oid {
    let mut index = git2::Index::new().unwrap();
    for (path, text) in files {
        index.add(&file_entry(repo, path, text)).unwrap();
    }
    let tree = repo.find_tree(index.write_tree_to(repo).unwrap()).unwrap();
    let who = Signature::new(
        "human",
        "human@example.com",
        &git2::Time::new(1_700_000_000 + n as i64, 0),
    )
    .unwrap();
    let parents: Vec<git2::Commit<'_>> = parent
        .map(|p| repo.find_commit(p).unwrap())
        .into_iter()
        .collect();
    let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
    let message = format!("commit {n}");
    match key {
        None => repo
            .commit(None, &who, &who, &message, &tree, &parents)
            .unwrap(),
        Some(key) => {
            let buffer = repo
                .commit_create_buffer(&who, &who, &message, &tree, &parents)
                .unwrap();
            let content = std::str::from_utf8(&buffer).unwrap();
            let pem = key
                .sign("git", HashAlg::Sha512, content.as_bytes())
                .unwrap()
                .to_pem(LineEnding::LF)
                .unwrap();
            repo.commit_signed(content, &pem, None).unwrap()
        }
    }
}

/// Builds the history in `dir`; returns its head and the commits the model says audit
/// reports.
fn history(dir: &Path, steps: &[(Op, Option<usize>)]) -> (Repository, Oid, Vec<String>) {
    let repo = Repository::init_bare(dir).unwrap();
    let keys = keys();
    let mut files: BTreeMap<&str, String> = BTreeMap::new();
    let (mut settings, mut keys_file) = (Settings::Absent, None::<u8>);
    let mut in_force: Option<u8> = None;
    let mut head = None;
    let mut expected = Vec::new();
    for (n, (op, signer)) in steps.iter().enumerate() {
        match *op {
            Op::Edit => {
                files.insert("README.md", format!("edit {n}\n"));
            }
            Op::Required(required) => settings = Settings::Signing { required },
            Op::RemoveSigning => settings = Settings::NoSigning,
            Op::RemoveSettings => settings = Settings::Absent,
            Op::BreakSettings => settings = Settings::Broken,
            Op::Keys(mask) => keys_file = Some(mask),
            Op::DeleteKeys => keys_file = None,
        }
        match settings_text(settings) {
            Some(text) => files.insert(SETTINGS, text.to_string()),
            None => files.remove(SETTINGS),
        };
        match keys_file {
            Some(mask) => files.insert(ALLOWED, keys_text(&keys, mask)),
            None => files.remove(ALLOWED),
        };
        let oid = commit(&repo, &files, head, signer.map(|k| &keys[k]), n);
        let allowed = |mask: u8| signer.is_some_and(|k| mask & (1 << k) != 0);
        if head.is_some() && in_force.is_some_and(|mask| !allowed(mask)) {
            expected.push(oid.to_string());
        }
        if let Some(policy) = loads(settings, keys_file) {
            in_force = policy;
        }
        head = Some(oid);
    }
    (repo, head.unwrap(), expected)
}

/// Random signing-policy histories against the model.
pub fn signing(budget: Budget) -> Stats {
    let strategy = proptest::collection::vec(step(), 1..10);
    run(
        "signing",
        budget,
        strategy,
        |steps| format!("{steps:?}"),
        |steps| {
            let tmp = tempfile::tempdir().unwrap();
            let (repo, head, expected) = history(tmp.path(), steps);
            let report = audit(&repo, head, None, &Outside::default())
                .map_err(|e| TestCaseError::fail(format!("audit failed: {e}")))?;
            let found: Vec<String> = report
                .findings
                .iter()
                .filter(|f| f.kind == Kind::Signature)
                .map(|f| f.commit.clone())
                .collect();
            if found != expected {
                return Err(TestCaseError::fail(format!(
                    "audit reports {found:?}, the parent-policy rule gives {expected:?}: {:#?}",
                    report.findings
                )));
            }
            Ok(())
        },
    )
}
