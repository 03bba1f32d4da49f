//! The audit target: random histories of a canary that sluice's own ticks roll, among the
//! commits an attacker with push access to the config repo makes:
//!
//! - a hand edit of a file sluice owns (the route or the status file) carrying random trailer
//!   groups: `Sluice-Canary` alone, a real sluice commit's group copied whole with its
//!   `Sluice-Replay` (and the real commit's subject and body), the same without its record or
//!   with its lines reversed, a record that says `"by":"other"`, an unknown canary's group;
//!   in any order, so an unknown canary is often the first group;
//! - the same edit on a side branch, brought to main by a `--no-ff` merge;
//! - harmless human commits outside the owned folders: a note, a new revision of the canary.
//!
//! The property: `sluice::audit::audit` reports every forged commit (a merged one at its
//! merge) and none of sluice's commits, the harmless ones or the seed, and lists nothing as
//! "not replayable" (every commit here is written after replay records existed). The model
//! is only what the test knows: which commits it forged.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use git2::{Oid, Repository, Signature};
use jiff::Timestamp;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use sluice::audit::audit;
use sluice::audit::policy::Outside;
use sluice::gitops::{ConfigRepo, Credentials, Identity};
use sluice::observer::Offline;
use sluice::render::replay::{FORMAT, REPLAY};
use sluice::runtime::Runtime;
use sluice::tick::{tick, Context};

use crate::signing::file_entry;
use crate::standalone::web_head;
use crate::{run, Budget, Stats};

/// The canary spec: a human's file.
const SPEC: &str = "apps/web/canary.yaml";
/// The canary's status file: sluice's.
const STATUS: &str = ".sluice/status/shop/web.yaml";
/// A file no canary owns.
const NOTES: &str = "docs/notes.md";
const CANARY: &str = "Sluice-Canary";

/// A route-only canary `shop/web` at `revision`: an SMI TrafficSplit over blue and green
/// Services, four steps, no metrics (so the offline observer lets it advance).
fn spec(revision: &str) -> String {
    format!(
        "{}  analysis:
    interval: 1s
    threshold: 2
    steps: [{{weight: 20}}, {{weight: 40}}, {{weight: 60}}, {{weight: 80}}]
",
        web_head(revision)
    )
}

/// One trailer group of a forged commit's message.
#[derive(Debug, Clone, Copy)]
enum Group {
    /// `Sluice-Canary: shop/web` alone.
    CanaryOnly,
    /// `Sluice-Canary` of a canary that does not exist, alone.
    Ghost,
    /// The newest sluice commit's trailers, whole (its `Sluice-Replay` included).
    Copied,
    /// The same without the `Sluice-Replay` line.
    NoReplay,
    /// The same, lines reversed (the record before the canary line).
    Reversed,
    /// `Sluice-Canary: shop/web` and a current-format record that says `"by":"other"`.
    ByOther,
}

/// The owned file a forged commit edits.
#[derive(Debug, Clone, Copy)]
enum Owned {
    Route,
    Status,
}

/// One step of a history.
#[derive(Debug, Clone)]
enum Op {
    /// sluice ticks this many times.
    Tick(u8),
    /// A hand edit of an owned file, committed on main with these trailer groups.
    Forge(Owned, Vec<Group>),
    /// The same edit on a side branch, merged into main with `--no-ff`.
    Merge(Owned, Vec<Group>),
    /// A human edits a note outside every owned folder.
    Note,
    /// A human gives the canary a new revision in its spec.
    Revision,
}

fn group() -> impl Strategy<Value = Group> {
    prop_oneof![
        Just(Group::CanaryOnly),
        Just(Group::Ghost),
        Just(Group::Copied),
        Just(Group::NoReplay),
        Just(Group::Reversed),
        Just(Group::ByOther),
    ]
}

/// The file a forged commit edits and its trailer groups.
fn forgery() -> impl Strategy<Value = (Owned, Vec<Group>)> {
    let groups = || proptest::collection::vec(group(), 0..4);
    prop_oneof![
        groups().prop_map(|g| (Owned::Route, g)),
        groups().prop_map(|g| (Owned::Status, g)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u8..4).prop_map(Op::Tick),
        3 => forgery().prop_map(|(file, groups)| Op::Forge(file, groups)),
        1 => forgery().prop_map(|(file, groups)| Op::Merge(file, groups)),
        1 => Just(Op::Note),
        1 => Just(Op::Revision),
    ]
}

/// What a commit on main is, as the test that made it knows.
#[derive(Debug, Clone, PartialEq)]
enum Made {
    Seed,
    Sluice,
    Harmless,
    /// Changes an owned file: audit must report it.
    Forged(String),
}

/// The config repo (a bare remote), sluice's clone of it, the simulated clock, and every
/// commit on main with what it is.
struct History {
    _tmp: tempfile::TempDir,
    bare: Repository,
    sluice: ConfigRepo,
    now: Timestamp,
    made: BTreeMap<Oid, Made>,
    /// The newest commit sluice made, whose trailers a forger copies.
    last_sluice: Option<Oid>,
    /// Human commits so far (each edit's text is new).
    n: usize,
}

fn runtime() -> &'static Runtime {
    static RUNTIME: std::sync::OnceLock<Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| Runtime::with_env(BTreeMap::new()).unwrap())
}

impl History {
    /// A remote holding the canary at revision `v1` and a note; sluice's clone of it.
    fn new() -> History {
        let tmp = tempfile::tempdir().unwrap();
        let remote = tmp.path().join("config.git");
        sluice::cli::demo::seed_bare_repo(
            tmp.path(),
            &remote,
            &[(SPEC, &spec("v1")), (NOTES, "notes\n")],
            &Identity::new("human", "human@example.com"),
        )
        .unwrap();
        let sluice = ConfigRepo::open_or_clone(
            &remote.display().to_string(),
            "main",
            &tmp.path().join("work"),
            &Credentials::none(),
        )
        .unwrap();
        let bare = Repository::open_bare(&remote).unwrap();
        let seed = bare.refname_to_id("refs/heads/main").unwrap();
        History {
            _tmp: tmp,
            bare,
            sluice,
            now: Timestamp::from_second(1_767_225_600).unwrap(),
            made: BTreeMap::from([(seed, Made::Seed)]),
            last_sluice: None,
            n: 0,
        }
    }

    fn head(&self) -> Oid {
        self.bare.refname_to_id("refs/heads/main").unwrap()
    }

    /// One tick of sluice at the simulated time; the clock then moves to when it asked to be
    /// woken. The commits it adds to main are sluice's.
    fn tick(&mut self) -> Result<(), TestCaseError> {
        let before = self.head();
        let ctx = Context {
            observer: &Offline,
            author: None,
            push_attempts: 5,
            runtime: runtime(),
            owned: sluice::holding::Holding::all(),
        };
        let report = tick(&mut self.sluice, &ctx, self.now)
            .map_err(|e| TestCaseError::fail(format!("the tick failed: {e}")))?;
        if !report.spec_errors.is_empty() {
            return Err(TestCaseError::fail(format!(
                "spec errors: {:?}",
                report.spec_errors
            )));
        }
        self.now = report
            .wake_at()
            .filter(|at| *at > self.now)
            .unwrap_or(self.now + Duration::from_secs(1));
        let mut walk = self.bare.revwalk().unwrap();
        walk.push(self.head()).unwrap();
        walk.hide(before).unwrap();
        for oid in walk {
            let oid = oid.unwrap();
            self.made.insert(oid, Made::Sluice);
        }
        if self.head() != before {
            self.last_sluice = Some(self.head());
        }
        Ok(())
    }

    /// The text of `path` at main, if it is there.
    fn file(&self, path: &str) -> Option<String> {
        let tree = self.bare.find_commit(self.head()).unwrap().tree().unwrap();
        let entry = tree.get_path(std::path::Path::new(path)).ok()?;
        let blob = self.bare.find_blob(entry.id()).unwrap();
        Some(String::from_utf8(blob.content().to_vec()).unwrap())
    }

    /// The route file sluice writes for the canary.
    fn route(&self) -> String {
        let tree = self.bare.find_commit(self.head()).unwrap().tree().unwrap();
        let mut found = None;
        tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            if entry.name().ok() == Some("route.yaml") {
                found = Some(format!("{dir}route.yaml"));
            }
            git2::TreeWalkResult::Ok
        })
        .unwrap();
        found.expect("sluice wrote a route file by its first tick")
    }

    /// A commit on `parents` whose tree is main's with `path` set to `text` (main stays).
    fn commit(&mut self, path: &str, text: &str, message: &str, parents: &[Oid]) -> Oid {
        let head = self.bare.find_commit(self.head()).unwrap();
        let mut index = git2::Index::new().unwrap();
        index.read_tree(&head.tree().unwrap()).unwrap();
        index.add(&file_entry(&self.bare, path, text)).unwrap();
        let tree = self
            .bare
            .find_tree(index.write_tree_to(&self.bare).unwrap())
            .unwrap();
        self.n += 1;
        let when = git2::Time::new(self.now.as_second(), 0);
        let who = Signature::new("human", "human@example.com", &when).unwrap();
        let parents: Vec<git2::Commit<'_>> = parents
            .iter()
            .map(|p| self.bare.find_commit(*p).unwrap())
            .collect();
        let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
        self.bare
            .commit(None, &who, &who, message, &tree, &parents)
            .unwrap()
    }

    /// Moves main to `oid`, a child of main.
    fn advance(&self, oid: Oid) {
        self.bare
            .reference("refs/heads/main", oid, true, "a human pushes")
            .unwrap();
    }

    /// A human commit on main writing `path`.
    fn human(&mut self, path: &str, text: &str, message: &str, made: Made) {
        let oid = self.commit(path, text, message, &[self.head()]);
        self.advance(oid);
        self.made.insert(oid, made);
    }

    /// The forged edit of `file`: its path and its text at main with one more line.
    fn edited(&self, file: Owned) -> (String, String) {
        let path = match file {
            Owned::Route => self.route(),
            Owned::Status => STATUS.to_string(),
        };
        let text = self.file(&path).unwrap_or_else(|| panic!("{path} at main"));
        let text = format!("{text}# edited by hand ({})\n", self.n);
        (path, text)
    }

    /// A forged commit's message: the newest sluice commit's subject and body when a group
    /// copies it (a hand-written subject otherwise), then `groups` as its trailers.
    fn message(&self, groups: &[Group]) -> String {
        let real = self.last_sluice.map(|oid| {
            let commit = self.bare.find_commit(oid).unwrap();
            commit.message().unwrap().trim_end().to_string()
        });
        let real = real.expect("sluice committed by its first tick");
        let (text, trailers) = real.rsplit_once("\n\n").unwrap();
        let copies = groups
            .iter()
            .any(|g| matches!(g, Group::Copied | Group::NoReplay | Group::Reversed));
        let mut message = if copies {
            text.to_string()
        } else {
            format!("web: hand edit {}", self.n)
        };
        message.push_str("\n\n");
        for g in groups {
            let lines: Vec<String> = match g {
                Group::CanaryOnly => vec![format!("{CANARY}: shop/web")],
                Group::Ghost => vec![format!("{CANARY}: shop/ghost")],
                Group::Copied => trailers.lines().map(str::to_string).collect(),
                Group::NoReplay => trailers
                    .lines()
                    .filter(|l| !l.starts_with(REPLAY))
                    .map(str::to_string)
                    .collect(),
                Group::Reversed => trailers.lines().rev().map(str::to_string).collect(),
                Group::ByOther => vec![
                    format!("{CANARY}: shop/web"),
                    format!("{REPLAY}: {{\"format\":{FORMAT},\"now\":\"2026-01-01T00:00:00Z\",\"by\":\"other\",\"what\":\"trust me\"}}"),
                ],
            };
            for line in lines {
                message.push_str(&line);
                message.push('\n');
            }
        }
        message
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Tick(n) => {
                for _ in 0..*n {
                    self.tick()?;
                }
            }
            Op::Forge(file, groups) => {
                let (path, text) = self.edited(*file);
                let message = self.message(groups);
                let what = format!("a hand edit of {path}: {groups:?}");
                self.human(&path, &text, &message, Made::Forged(what));
            }
            Op::Merge(file, groups) => {
                let (path, text) = self.edited(*file);
                let message = self.message(groups);
                let head = self.head();
                let side = self.commit(&path, &text, &message, &[head]);
                let merge = self.commit(&path, &text, "Merge branch 'side'", &[head, side]);
                self.advance(merge);
                let what = format!("a --no-ff merge of a hand edit of {path}: {groups:?}");
                self.made.insert(merge, Made::Forged(what));
            }
            Op::Note => {
                let text = format!("notes, edit {}\n", self.n);
                self.human(NOTES, &text, "docs: notes", Made::Harmless);
            }
            Op::Revision => {
                let revision = format!("v{}", self.n + 2);
                let message = format!("web: {revision}");
                self.human(SPEC, &spec(&revision), &message, Made::Harmless);
            }
        }
        Ok(())
    }
}

/// Builds the history of `ops` after sluice's first tick, audits main, and compares the
/// findings with what the test forged.
fn check(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut history = History::new();
    history.tick()?;
    for op in ops {
        history.apply(op)?;
    }
    let report = audit(&history.bare, history.head(), None, &Outside::default())
        .map_err(|e| TestCaseError::fail(format!("audit failed: {e}")))?;
    let found: BTreeSet<Oid> = report
        .findings
        .iter()
        .map(|f| Oid::from_str(&f.commit).unwrap())
        .collect();
    for (oid, made) in &history.made {
        let reported = found.contains(oid);
        match made {
            Made::Forged(what) if !reported => {
                return Err(TestCaseError::fail(format!(
                    "{oid}, {what}, is not reported: {:#?}",
                    report.findings
                )));
            }
            Made::Seed | Made::Sluice | Made::Harmless if reported => {
                return Err(TestCaseError::fail(format!(
                    "{oid} ({made:?}) is reported: {:#?}",
                    report.findings
                )));
            }
            _ => {}
        }
    }
    if let Some(stranger) = found.iter().find(|oid| !history.made.contains_key(oid)) {
        return Err(TestCaseError::fail(format!(
            "{stranger}, a commit the test did not make, is reported: {:#?}",
            report.findings
        )));
    }
    if !report.not_replayable.is_empty() {
        return Err(TestCaseError::fail(format!(
            "commits written with replay records are listed as not replayable: {:#?}",
            report.not_replayable
        )));
    }
    Ok(())
}

/// Random histories of sluice's commits, forged commits and harmless ones, against what the
/// test forged.
pub fn audit_history(budget: Budget) -> Stats {
    let strategy = proptest::collection::vec(op(), 1..10);
    run(
        "audit",
        budget,
        strategy,
        |ops| format!("{ops:?}"),
        |ops| check(ops),
    )
}

/// The shrunk input the target found: a hand edit of the status file carrying a real sluice
/// commit's trailers, then a hand edit of the route. The drift check took the first for
/// sluice's (its output folder is what sluice renders for its status), so the next tick's
/// commit cited it; audit did not, and reported sluice's commit. Drift now checks the status
/// text too.
#[test]
fn a_status_edit_under_sluices_trailers_is_not_sluices() {
    let ops = [
        Op::Forge(Owned::Status, vec![Group::Copied]),
        Op::Forge(Owned::Route, vec![]),
        Op::Tick(1),
    ];
    check(&ops).unwrap();
}
