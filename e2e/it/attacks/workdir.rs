//! A `--workdir` that is not sluice's own: a person's checkout of the config repo, a folder
//! where someone ran `git init`, a file, `.`. sluice resets its clone to the remote, pushes the
//! commits on its branch and deletes what it did not commit, so on anything but a clone it made
//! it must refuse, touch nothing and push nothing (issue 38, "Why" 2 and the work-dir messages
//! of 6). A clone an older sluice made is still migrated, as before.

use std::path::Path;
use std::process::Command;

use crate::support::every_file_bytes;
use crate::support::git_fixture::{
    git, git_cmd, old_sluice_clone, old_sluice_commit, Fixture, ROUTE,
};

/// What every refusal tells the user to do.
const REMEDY: &str = "pass --workdir (or SLUICE_WORKDIR) an empty or missing folder, where \
                      sluice makes a clone of its own";

/// `sluice <command>` (`reconcile` or `run`, the latter on free loopback ports) of `remote`
/// with `--workdir workdir`, run in `cwd`: (exit code, stderr). Only errors are logged.
fn sluice_in(cwd: &Path, command: &str, remote: &Path, workdir: &str) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.current_dir(cwd)
        .args([command, "--repo"])
        .arg(remote)
        .args(["--workdir", workdir])
        .env("SLUICE_LOG", "error");
    if command == "run" {
        cmd.args(["--listen", "127.0.0.1:0", "--probe-listen", "127.0.0.1:0"]);
    }
    let out = cmd.output().expect("sluice runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every ref of the remote with its commit.
fn remote_refs(fx: &Fixture) -> String {
    git(
        &fx.bare(),
        &["for-each-ref", "--format=%(refname) %(objectname)"],
    )
}

/// A person's clone of the remote with every kind of work git keeps: a local commit not
/// pushed, a staged new file, a modified tracked file and an untracked key.
fn persons_checkout(fx: &Fixture) -> std::path::PathBuf {
    let person = fx.cli_clone(&fx.bare_url(), "person");
    std::fs::write(person.join("wip.yaml"), "replicas: 3\n").unwrap();
    git(&person, &["add", "wip.yaml"]);
    git(&person, &["commit", "-q", "-m", "WIP: not for main"]);
    std::fs::write(person.join("staged.yaml"), "staged: true\n").unwrap();
    git(&person, &["add", "staged.yaml"]);
    std::fs::write(person.join(ROUTE), "weight: 77\n").unwrap();
    std::fs::create_dir_all(person.join("secrets")).unwrap();
    std::fs::write(person.join("secrets/id_rsa"), "-----BEGIN KEY-----\n").unwrap();
    person
}

/// `sluice reconcile` and `sluice run` with the work dir `folder` (under `fx`) each exit
/// non-zero printing exactly `expected`, push nothing, leave every file of `folder` byte for
/// byte, and pass `after(command)`.
fn both_refuse_untouched(fx: &Fixture, folder: &Path, expected: &str, after: impl Fn(&str)) {
    let name = folder
        .file_name()
        .expect("a folder name")
        .to_str()
        .expect("utf-8");
    let files = every_file_bytes(folder);
    let refs = remote_refs(fx);
    for command in ["reconcile", "run"] {
        let (code, text) = sluice_in(fx.dir.path(), command, &fx.bare(), name);
        assert_ne!(code, 0, "{command}: {text}");
        assert_eq!(text, expected, "{command}");
        assert_eq!(remote_refs(fx), refs, "{command}: nothing pushed");
        assert!(
            every_file_bytes(folder) == files,
            "{command}: the folder changed"
        );
        after(command);
    }
}

/// `sluice reconcile` and `sluice run` on a person's checkout of the same remote exit
/// non-zero, push nothing and leave every file of the checkout, `.git` included, byte for byte.
#[test]
fn a_persons_checkout_of_the_remote_is_refused_and_left_byte_for_byte() {
    let fx = Fixture::new();
    let person = persons_checkout(&fx);
    let expected = format!(
        "error: work dir {}: holds a git checkout of {} that sluice did not make (no \
         .git/sluice/clone), with 1 commit not pushed, staged changes, modified files and \
         untracked files; sluice changes only a clone it made, so it left this folder as it \
         was: {REMEDY}\n",
        person.display(),
        fx.bare_url()
    );
    both_refuse_untouched(&fx, &person, &expected, |command| {
        assert!(
            !fx.path("person.lock").exists(),
            "{command}: no lock file left beside a folder that is not sluice's"
        );
    });
    // The person's work is all still theirs to push.
    assert_eq!(
        git(&person, &["log", "-1", "--format=%s"]),
        "WIP: not for main"
    );
    assert_eq!(
        git(&person, &["status", "--porcelain"]),
        " M apps/podinfo/route.yaml\nA  staged.yaml\n?? secrets/"
    );
}

/// A folder where someone ran `git init` (files, no commit, no remote) is refused, untouched.
#[test]
fn a_git_init_folder_with_files_is_refused_and_left_byte_for_byte() {
    let fx = Fixture::new();
    let notes = fx.path("notes");
    std::fs::create_dir_all(notes.join("drafts")).unwrap();
    std::fs::write(notes.join("todo.md"), "- ship it\n").unwrap();
    std::fs::write(notes.join("drafts/plan.yaml"), "plan: a\n").unwrap();
    git(&notes, &["init", "-q", "-b", "main"]);
    let expected = format!(
        "error: work dir {}: holds a repository made by `git init`, with no commit yet \
         and untracked files; sluice changes only a clone it made, so it left this folder \
         as it was: {REMEDY}\n",
        notes.display()
    );
    both_refuse_untouched(&fx, &notes, &expected, |_| {});
}

/// A clone an older sluice made with a work tree (before its clone was bare and marked) is
/// still sluice's: its unpushed commit is pushed, its checkout deleted, and it is marked.
#[test]
fn an_old_work_tree_clone_of_sluices_own_is_migrated_and_marked() {
    let fx = Fixture::new();
    let work = fx.path("work");
    let old = old_sluice_clone(&fx.bare_url(), &work);
    let unpushed = old_sluice_commit(&old, ROUTE, "weight: 40\n");
    drop(old);
    crate::support::reconcile(&fx.bare(), &work, &[]);
    assert_eq!(
        fx.remote_head(),
        unpushed,
        "the old clone's commit is pushed"
    );
    let names: Vec<String> = std::fs::read_dir(&work)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [".git"], "the old checkout is deleted");
    let marker = std::fs::read_to_string(work.join(".git/sluice/clone")).unwrap();
    assert!(
        marker.contains(&format!("remote: {}\n", fx.bare_url())) && !marker.contains("migrating"),
        "{marker}"
    );
    // Marked, it opens as any clone of sluice's.
    crate::support::reconcile(&fx.bare(), &work, &[]);
    fx.assert_never_rewound();
}

/// A bare clone made by sluice before the marker existed (today's layout without
/// `.git/sluice/clone`) is taken as sluice's and marked.
#[test]
fn an_old_bare_clone_of_sluices_own_is_kept_and_marked() {
    let fx = Fixture::new();
    let work = fx.path("work");
    drop(crate::support::sluice_clone(&fx.bare_url(), &work));
    std::fs::remove_file(work.join(".git/sluice/clone")).unwrap();
    let head = git(&work, &["rev-parse", "refs/heads/main"]);
    crate::support::reconcile(&fx.bare(), &work, &[]);
    assert!(work.join(".git/sluice/clone").is_file(), "marked");
    assert_eq!(git(&work, &["rev-parse", "refs/heads/main"]), head);
}

/// A work dir that is a file is answered with one sentence, once, and nothing is created
/// beside it.
#[test]
fn a_work_dir_that_is_a_file_is_refused_in_one_sentence() {
    let fx = Fixture::new();
    std::fs::write(fx.path("afile"), "mine\n").unwrap();
    for command in ["reconcile", "run"] {
        let (code, text) = sluice_in(fx.dir.path(), command, &fx.bare(), "afile");
        assert_ne!(code, 0, "{command}: {text}");
        assert_eq!(
            text,
            format!(
                "error: work dir {}: is a file, not a folder; {REMEDY}\n",
                fx.path("afile").display()
            ),
            "{command}"
        );
        assert_eq!(std::fs::read(fx.path("afile")).unwrap(), b"mine\n");
        assert!(!fx.path("afile.lock").exists(), "{command}");
    }
}

/// `--workdir .` is the folder sluice runs in: a folder that is not empty and not a clone is
/// refused in one sentence naming it; an empty one becomes sluice's clone, its lock beside it.
#[test]
fn workdir_dot_is_the_current_folder() {
    let fx = Fixture::new();
    let here = fx.path("here");
    std::fs::create_dir_all(&here).unwrap();
    std::fs::write(here.join("notes.txt"), "mine\n").unwrap();
    for command in ["reconcile", "run"] {
        let (code, text) = sluice_in(&here, command, &fx.bare(), ".");
        assert_ne!(code, 0, "{command}: {text}");
        assert_eq!(
            text,
            format!(
                "error: work dir {}: is not empty and is not a git repository (it holds \
                 `notes.txt`); sluice changes only a clone it made, so it left this folder as \
                 it was: {REMEDY}\n",
                here.display()
            ),
            "{command}"
        );
        assert_eq!(std::fs::read(here.join("notes.txt")).unwrap(), b"mine\n");
    }
    std::fs::remove_file(here.join("notes.txt")).unwrap();
    let (code, text) = sluice_in(&here, "reconcile", &fx.bare(), ".");
    assert_eq!(code, 0, "{text}");
    assert!(here.join(".git/sluice/clone").is_file(), "cloned into it");
    assert!(fx.path("here.lock").is_file(), "the lock beside it");
    assert!(git_cmd(&here)
        .args(["rev-parse", "--verify", "-q", "refs/heads/main"])
        .status()
        .unwrap()
        .success());
}
