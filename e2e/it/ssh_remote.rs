//! An ssh remote behind a real `sshd` on loopback (Debian `openssh-server`), with the known
//! hosts handed over as Flux hands them: the `identity` and `known_hosts` keys of the git
//! Secret, mounted as files and named by `SLUICE_GIT_SSH_KEY_FILE` and
//! `SLUICE_GIT_KNOWN_HOSTS_FILE`.
//!
//! The test makes a throwaway host key and user key with `ssh-keygen`, runs `sshd -D -e` with a
//! config of its own on a free port as the current user, and serves a bare repo through
//! `git-upload-pack` / `git-receive-pack` over it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sluice::gitops::{
    CommitMessage, ConfigRepo, Credentials, Error, FileChange, Identity, PushOutcome,
};

use crate::support::remotes::Sshd;
use crate::support::{git, keygen, seeded_remote};

/// The mounted Flux git Secret: `identity`, `identity.pub`, `known_hosts`.
struct FluxSecret {
    dir: PathBuf,
}

impl FluxSecret {
    fn new(dir: &Path, known_hosts: &str) -> FluxSecret {
        std::fs::create_dir_all(dir).unwrap();
        keygen(&dir.join("identity"), "ed25519");
        std::fs::write(dir.join("known_hosts"), known_hosts).unwrap();
        FluxSecret {
            dir: dir.to_path_buf(),
        }
    }

    fn credentials(&self) -> Result<Credentials, Error> {
        let vars: HashMap<String, String> = [
            ("SLUICE_GIT_SSH_KEY_FILE", self.dir.join("identity")),
            ("SLUICE_GIT_KNOWN_HOSTS_FILE", self.dir.join("known_hosts")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.display().to_string()))
        .collect();
        Credentials::from_lookup(|name| vars.get(name).cloned())
    }
}

struct Setup {
    dir: tempfile::TempDir,
    sshd: Sshd,
    remote: PathBuf,
    secret: FluxSecret,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let remote = seeded_remote(dir.path(), &[("apps/podinfo/route.yaml", "weight: 0\n")]);
    // The user key first (the secret's `identity`), then sshd letting it in.
    let secret = FluxSecret::new(&dir.path().join("secret"), "");
    let sshd = Sshd::start(dir.path(), &secret.dir.join("identity.pub"));
    Setup {
        dir,
        sshd,
        remote,
        secret,
    }
}

#[test]
fn ssh_remote_clones_fetches_and_pushes_with_flux_known_hosts() {
    let s = setup();
    std::fs::write(s.secret.dir.join("known_hosts"), s.sshd.keyscan()).unwrap();
    let creds = s
        .secret
        .credentials()
        .expect("credentials from the mounted secret");
    let url = s.sshd.url(&s.remote);
    let mut repo = ConfigRepo::open_or_clone(&url, "main", &s.dir.path().join("work"), &creds)
        .unwrap_or_else(|e| panic!("clone over ssh: {e}"));
    repo.fetch()
        .unwrap_or_else(|e| panic!("fetch over ssh: {e}"));
    let commit = repo
        .commit_files(
            &[FileChange::write("apps/podinfo/route.yaml", "weight: 10\n")],
            &CommitMessage::new("Advance podinfo canary weight 10"),
            &Identity::new("sluice", "sluice@localhost"),
            None,
        )
        .unwrap()
        .expect("a commit");
    match repo.push().unwrap_or_else(|e| panic!("push over ssh: {e}")) {
        PushOutcome::Pushed(oid) => assert_eq!(oid, commit),
        PushOutcome::Rejected => panic!("push rejected"),
    }
    assert_eq!(
        git(&s.remote, &["rev-parse", "main"]).trim(),
        commit.to_string()
    );

    // The same server under a hashed name (`ssh-keygen -H`, what `HashKnownHosts yes` writes).
    let hashed = s.secret.dir.join("known_hosts");
    let status = Command::new("ssh-keygen")
        .arg("-H")
        .arg("-f")
        .arg(&hashed)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&hashed).unwrap();
    assert!(text.starts_with("|1|"), "{text}");
    let creds = s.secret.credentials().unwrap();
    let mut again = ConfigRepo::open_or_clone(&url, "main", &s.dir.path().join("work2"), &creds)
        .unwrap_or_else(|e| panic!("clone over ssh with hashed known hosts: {e}"));
    assert_eq!(again.fetch().unwrap(), commit);
}

/// The clone's error, as text, with `known_hosts` as the secret's known hosts.
fn clone_error(s: &Setup, known_hosts: &str, work: &str) -> Error {
    std::fs::write(s.secret.dir.join("known_hosts"), known_hosts).unwrap();
    let creds = s.secret.credentials().unwrap();
    match ConfigRepo::open_or_clone(
        &s.sshd.url(&s.remote),
        "main",
        &s.dir.path().join(work),
        &creds,
    ) {
        Ok(_) => panic!("cloned although the host key is not trusted ({known_hosts:?})"),
        Err(e) => e,
    }
}

#[test]
fn ssh_remote_with_a_wrong_host_key_fails_naming_the_host_and_the_key() {
    let s = setup();
    let other = s.dir.path().join("other_host_key");
    keygen(&other, "ed25519");
    let other_pub = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    let port = s.sshd.port;
    let err = clone_error(&s, &format!("[127.0.0.1]:{port} {other_pub}"), "work");
    let text = err.to_string();
    assert!(matches!(err, Error::HostKey { .. }), "{text}");
    assert!(
        text.contains(&format!("`[127.0.0.1]:{port}` presented does not match"))
            && text.contains("the ssh-ed25519 SHA256:")
            && text.contains("SLUICE_GIT_KNOWN_HOSTS_FILE")
            && text.contains("(line 1)"),
        "{text}"
    );
    assert!(!err.is_transient(), "{text}");
}

#[test]
fn ssh_remote_absent_from_known_hosts_fails_naming_the_host() {
    let s = setup();
    // The right key, but for port 22 only: the server on another port is another host.
    let scanned = s.sshd.keyscan();
    let key = scanned.split_once(' ').unwrap().1;
    let err = clone_error(&s, &format!("127.0.0.1 {key}"), "work");
    let text = err.to_string();
    assert!(matches!(err, Error::HostKey { .. }), "{text}");
    let port = s.sshd.port;
    assert!(
        text.contains(&format!(
            "host `[127.0.0.1]:{port}` is not in the known hosts"
        )) && text.contains("ssh-ed25519 SHA256:")
            && text.contains(&format!("ssh-keyscan -p {port} 127.0.0.1")),
        "{text}"
    );
}
