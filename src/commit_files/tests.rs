//! Tests of `commit_files`.
use super::*;

use crate::gitops::{tree_of, tree_with_modes};

/// Each file's name and whether it parsed; each object's file, line, kind and name.
type Seen = (Vec<(String, bool)>, Vec<(String, usize, String, String)>);

/// What a snapshot holds, comparable, in order.
fn seen(snapshot: &Snapshot) -> Seen {
    let files = snapshot
        .files()
        .iter()
        .map(|f| (f.name.clone(), matches!(*f.contents, Contents::Yaml { .. })))
        .collect();
    let objects = snapshot
        .objects()
        .map(|o| {
            (
                o.file.to_string(),
                o.line,
                o.kind.to_string(),
                o.name.to_string(),
            )
        })
        .collect();
    (files, objects)
}

/// Moving from tree to tree (and back, through the blob cache) gives the snapshot a
/// checkout of each tree gives, file for file and object for object.
#[test]
fn a_snapshot_moved_by_tree_diffs_is_the_snapshot_of_a_checkout() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init_bare(dir.path().join("r.git")).unwrap();
    let cm = |name: &str| format!("kind: ConfigMap\nmetadata: {{name: {name}}}\n");
    let (one, two, bad) = (cm("one"), cm("two"), "a: [1,\n".to_string());
    let trees = [
        tree_of(
            &repo,
            &[
                ("a.yaml", &one),
                ("a/z.yaml", &two),
                ("a-b/c.yaml", &one),
                (".hidden/x.yaml", &one),
                (".sluice/status/ns/n.yaml", "phase: Initialized\n"),
                ("notes.txt", &one),
                ("b.yml", &bad),
            ],
        ),
        tree_of(
            &repo,
            &[
                ("a.yaml", &two),
                ("a/y.yaml", &one),
                ("a-b/c.yaml", &one),
                ("a-b/d.yaml", &two),
                (".sluice/status/ns/n.yaml", "phase: Progressing\n"),
                ("b.yml", &one),
                ("c.yaml", &bad),
            ],
        ),
        tree_of(&repo, &[("only.yaml", &one)]),
    ];
    let mut files = CommitFiles::default();
    for tree in [trees[0], trees[1], trees[0], trees[2], trees[1]] {
        files.move_to(&repo, Some(tree)).unwrap();
        let checkout = tempfile::tempdir().unwrap();
        let t = repo.find_tree(tree).unwrap();
        crate::gitops::objects::write_tree(&repo, &t, checkout.path()).unwrap();
        let read = Snapshot::read(checkout.path());
        assert_eq!(seen(files.snapshot()), seen(&read), "tree {tree}");
        assert_eq!(
            files.snapshot().find("ConfigMap", "one").count(),
            read.find("ConfigMap", "one").count()
        );
    }
    assert_eq!(
        files.list(".sluice/status"),
        [("ns".to_string(), PathEntry::Folder)]
    );
    let at = files.at(&repo, Path::new(""));
    assert!(crate::workload::Outside::is_file(
        &at,
        ".sluice/status/ns/n.yaml"
    ));
    assert_eq!(at.read(".sluice/status"), Some(Err(ReadError::NotAFile)));
    assert_eq!(at.read("nothing.yaml"), None);
    files.move_to(&repo, None).unwrap();
    assert!(files.snapshot().files().is_empty());
}

/// After a move that changes one spec of many, loading the canaries reads that one file
/// again, and gives what `load_in` gives on the whole tree.
#[test]
fn a_load_after_a_one_spec_change_reads_that_spec_only() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init_bare(dir.path().join("r.git")).unwrap();
    let spec = |n: usize, revision: &str| {
        format!(
            "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: c{n}, namespace: ns}}\nspec:\n  routeOnly: {{services: [c{n}-a, c{n}-b], revision: \"{revision}\"}}\n  output: deploy/c{n}\n  service: {{port: 80}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  analysis: {{interval: 1m, stepWeights: [5, 25, 50]}}\n"
        )
    };
    let tree = |changed: &str| {
        let texts: Vec<(String, String)> = (0..40)
            .map(|n| {
                let revision = if n == 7 { changed } else { "r1" };
                (format!("specs/c{n}.yaml"), spec(n, revision))
            })
            .collect();
        let files: Vec<(&str, &str)> = texts
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        tree_of(&repo, &files)
    };
    let (before, after) = (tree("r1"), tree("r2"));
    let settings = Settings::default();
    let mut files = CommitFiles::default();
    files.move_to(&repo, Some(before)).unwrap();
    assert_eq!(files.load(&settings).reads(), 40);
    files.move_to(&repo, Some(after)).unwrap();
    let kept = files.load(&settings);
    assert_eq!(kept.reads(), 41, "one changed spec, one file read again");
    let whole = crate::manifest::load::load(files.snapshot(), &settings);
    let ids = |c: &crate::manifest::model::Canary| (c.id.to_string(), c.file.clone());
    let kept: Vec<_> = files.loaded().canaries().map(ids).collect();
    assert_eq!(kept, whole.canaries.iter().map(ids).collect::<Vec<_>>());
    let c7 = files.loaded().canary("ns/c7").unwrap();
    assert!(
        matches!(&c7.target, crate::core::model::Target::RouteOnly { revision, .. } if revision == "r2")
    );
}

#[test]
fn the_walk_order_is_folder_by_folder() {
    let mut names = vec!["b.yml", "a.yaml", "a-b/c.yaml", "a/z.yaml", ".hidden.yaml"];
    names.sort_by(|a, b| {
        if walks_before(a, b) {
            std::cmp::Ordering::Less
        } else if walks_before(b, a) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    });
    assert_eq!(
        names,
        [".hidden.yaml", "a/z.yaml", "a-b/c.yaml", "a.yaml", "b.yml"]
    );
    assert!(walked(".hidden.yaml") && walked("apps/a.yml"));
    assert!(!walked(".sluice/status/a/b.yaml") && !walked("apps/.cache/x.yaml"));
    assert!(!walked("notes.txt"));
}

/// A tree's parse of `text` under `name`: what the byte budget is measured in.
fn blob_text(n: usize, bytes: usize) -> String {
    let head = format!("kind: ConfigMap\nmetadata: {{name: c{n}}}\ndata: {{x: \"");
    let pad = "y".repeat(bytes.saturating_sub(head.len() + 3));
    format!("{head}{pad}\"}}\n")
}

/// The parses of files that left the tree are kept by their text's bytes: past
/// [`KEPT_PARSE_BYTES`] the oldest are dropped (and read again when their blobs come back),
/// while a blob that comes back within the budget is not read again.
#[test]
fn kept_parses_are_bounded_by_bytes_not_files() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init_bare(dir.path().join("r.git")).unwrap();
    // Five files of a quarter of the budget each: more bytes than the budget, far fewer
    // files than a count of files would ever drop.
    let quarter = KEPT_PARSE_BYTES / 4;
    let texts: Vec<String> = (0..5).map(|n| blob_text(n, quarter)).collect();
    let trees: Vec<Oid> = texts
        .iter()
        .map(|t| tree_of(&repo, &[("big.yaml", t)]))
        .collect();
    let reads = std::cell::Cell::new(0);
    let mut files = CommitFiles::default();
    let mut read = |_: &str, id: Oid| {
        reads.set(reads.get() + 1);
        read_text(&repo, id)
    };
    for tree in &trees {
        files.move_reading(&repo, Some(*tree), &mut read).unwrap();
    }
    files.move_reading(&repo, None, &mut read).unwrap();
    assert!(files.kept.bytes <= KEPT_PARSE_BYTES, "{}", files.kept.bytes);
    assert_eq!(files.kept.parsed.len(), 4, "the oldest of five is dropped");
    let before = reads.get();
    // The newest blob is kept: no read. The oldest was dropped: read again.
    files
        .move_reading(&repo, Some(trees[4]), &mut read)
        .unwrap();
    assert_eq!(reads.get(), before, "kept within the budget");
    files
        .move_reading(&repo, Some(trees[0]), &mut read)
        .unwrap();
    assert_eq!(
        reads.get(),
        before + 1,
        "dropped past the budget, read again"
    );
    assert_eq!(files.snapshot().find("ConfigMap", "c0").count(), 1);
}

/// A symbolic link among the walk's files is listed, refused as a link, and its target
/// never read; single reads refuse it and paths through a linked folder.
#[test]
fn a_link_is_listed_as_refused_and_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init_bare(dir.path().join("r.git")).unwrap();
    let cm = "kind: ConfigMap\nmetadata: {name: a}\n";
    let tree = tree_with_modes(
        &repo,
        &[
            ("apps/a.yaml", cm, 0o100644),
            ("apps/link.yaml", "/etc/passwd", 0o120000),
            ("linked", "apps", 0o120000),
        ],
    );
    let mut names = Vec::new();
    let mut files = CommitFiles::default();
    files
        .move_reading(&repo, Some(tree), &mut |name, id| {
            names.push(name.to_string());
            read_text(&repo, id)
        })
        .unwrap();
    assert_eq!(names, ["apps/a.yaml"], "the link is never read");
    let link = files.snapshot().file("apps/link.yaml").unwrap();
    assert!(matches!(
        *link.contents,
        Contents::Unreadable(ReadError::Symlink)
    ));
    assert!(
        !files.has_unreadable(),
        "a link is refused for good, not read again"
    );
    let at = files.at(&repo, Path::new(""));
    assert_eq!(at.read("apps/link.yaml"), Some(Err(ReadError::Symlink)));
    assert_eq!(
        at.read("linked/a.yaml"),
        Some(Err(ReadError::SymlinkFolder {
            link: "linked".to_string()
        }))
    );
    assert!(
        at.exists("linked/a.yaml") && !crate::workload::Outside::is_file(&at, "apps/link.yaml")
    );
    assert_eq!(
        files.list("apps"),
        [
            ("a.yaml".to_string(), files.entry("apps/a.yaml")),
            ("link.yaml".to_string(), PathEntry::Link)
        ]
    );
}

/// A read that failed is read again at the next move, even to the same tree.
#[test]
fn a_failed_read_is_read_again_at_the_next_move() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init_bare(dir.path().join("r.git")).unwrap();
    let tree = tree_of(
        &repo,
        &[("a.yaml", "kind: ConfigMap\nmetadata: {name: a}\n")],
    );
    let mut files = CommitFiles::default();
    let mut fail = true;
    let mut read = |_: &str, id: Oid| {
        if std::mem::take(&mut fail) {
            return Err(ReadError::Io("busy".into()));
        }
        read_text(&repo, id)
    };
    files.move_reading(&repo, Some(tree), &mut read).unwrap();
    assert!(files.has_unreadable());
    files.move_reading(&repo, Some(tree), &mut read).unwrap();
    assert!(!files.has_unreadable());
    assert_eq!(files.snapshot().find("ConfigMap", "a").count(), 1);
}
