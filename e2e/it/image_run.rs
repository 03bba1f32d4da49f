//! The container image's runtime stage run for real, without a container engine.
//!
//! The filesystem of the Dockerfile's last stage is built from what the stage names:
//! `debootstrap --variant=minbase bookworm` (what `debian:bookworm-slim` is made from) from the
//! mirror this machine's apt uses, then each of the stage's `RUN` commands in a `chroot` of it
//! (its `apt-get install` line, the user and the cache folder). It is kept under
//! `target/tmp/image-rootfs/<hash of the stage's FROM and RUN lines>`, so only a change of the
//! stage builds it again (about a minute; the next runs reuse it).
//!
//! Each run lays the stage's `COPY` of the binary (the test harness's `sluice`: same linked
//! libraries as the release build, see e2e/it/image.rs) on an overlay of that filesystem in a
//! private mount namespace (`unshare --mount`), mounts the install's emptyDirs
//! (examples/install/deployment.yaml) writable and the Secrets read-only where the install
//! mounts them, remounts the root read-only and starts `sluice run` in a `chroot` as the
//! stage's `USER` with only the stage's `ENV` and the install's variables. Against a real
//! https git server (`git http-backend` behind TLS, the test CA mounted and named by
//! `SSL_CERT_FILE`, the token as `SLUICE_GIT_TOKEN`) and a real `sshd` (the Flux-style git
//! Secret: `identity`, `known_hosts`): the probes answer, a canary rolls to `Succeeded`, its
//! commits are signed in-process and `git verify-commit` accepts them.
//!
//! Why a missing package fails it: without `libssl3` the binary does not load; without
//! `ca-certificates` sluice cannot build its HTTP client (no system CA store), so the ssh run,
//! which is given no CA, never starts (seen both ways when the tests were written).
//!
//! Root is needed (debootstrap, mount namespaces, chroot); the test fails saying so when it is
//! not root or debootstrap is missing, unless `SLUICE_TEST_SKIP_IMAGE_RUN=1` opts out
//! (docs/operations.md).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::image::{runtime_stage, Stage};
use crate::support::canary::web_httproute;
use crate::support::git_fixture::assert_good_signature;
use crate::support::remotes::{tls_server, Sshd};
use crate::support::{
    get_status, git, human_clone, human_commit, keygen, read_repo_file, repo_yaml, seeded_remote,
    show, sluice_daemon, status_at_main, Daemon, HttpGit,
};

/// Set to `1` to skip these tests where they cannot run (not root, no debootstrap).
const SKIP_VAR: &str = "SLUICE_TEST_SKIP_IMAGE_RUN";
const CANARY_FILE: &str = "apps/web/canary.yaml";
const STATUS_FILE: &str = ".sluice/status/shop/web.yaml";
/// The PATH an image gets when its Dockerfile sets none.
const IMAGE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// Where the tests mount the Secrets in the image: as the install's `git-ssh`, `signing-key`
/// and `private-ca` components do.
const GIT_SECRET: &str = "/etc/sluice/git";
const CA_DIR: &str = "/etc/sluice/ca";
const SIGNING_DIR: &str = "/etc/sluice/signing";

/// The image's runtime stage, its filesystem and the install's writable folders.
struct Image {
    stage: Stage,
    rootfs: PathBuf,
    /// The mount paths of the install's emptyDir volumes.
    empty_dirs: Vec<String>,
    /// `uid:gid` of the stage's `USER`.
    user: String,
}

/// The image, or `None` when [`SKIP_VAR`] opts out; panics saying why it cannot run otherwise.
fn image() -> Option<Image> {
    if std::env::var(SKIP_VAR).is_ok_and(|v| v == "1") {
        eprintln!("{SKIP_VAR}=1: the image's runtime stage is not run");
        return None;
    }
    let uid = String::from_utf8(Command::new("id").arg("-u").output().ok()?.stdout).ok()?;
    assert_eq!(
        uid.trim(),
        "0",
        "running the image's filesystem needs root (debootstrap, unshare, chroot); run as root \
         as CI does, or set {SKIP_VAR}=1 to skip"
    );
    assert!(
        Path::new("/usr/sbin/debootstrap").exists(),
        "debootstrap is missing: `apt-get install debootstrap` (e2e/run installs it), or set \
         {SKIP_VAR}=1 to skip"
    );
    let stage = runtime_stage(&read_repo_file("Dockerfile")).unwrap();
    assert_eq!(
        stage.from, "debian:bookworm-slim",
        "the test builds a bookworm minbase filesystem, what debian:bookworm-slim is"
    );
    let user = stage
        .user
        .clone()
        .expect("the runtime stage names its USER");
    let rootfs = rootfs(&stage);
    Some(Image {
        stage,
        rootfs,
        empty_dirs: install_empty_dirs(),
        user,
    })
}

/// The mount paths of the emptyDir volumes of the install's Deployment.
fn install_empty_dirs() -> Vec<String> {
    let deployment = repo_yaml("examples/install/deployment.yaml");
    let pod = &deployment["spec"]["template"]["spec"];
    let empty: Vec<&str> = pod["volumes"]
        .as_array()
        .expect("the Deployment has volumes")
        .iter()
        .filter(|v| v.get("emptyDir").is_some())
        .filter_map(|v| v["name"].as_str())
        .collect();
    let paths: Vec<String> = pod["containers"][0]["volumeMounts"]
        .as_array()
        .expect("the container mounts volumes")
        .iter()
        .filter(|m| empty.contains(&m["name"].as_str().unwrap_or_default()))
        .filter_map(|m| m["mountPath"].as_str().map(str::to_string))
        .collect();
    assert!(!paths.is_empty(), "the install mounts no emptyDir");
    paths
}

/// The filesystem of `stage`, built once per change of its FROM and RUN lines.
fn rootfs(stage: &Stage) -> PathBuf {
    let mut hash = Sha256::new();
    hash.update(stage.from.as_bytes());
    for run in &stage.runs {
        hash.update(b"\n");
        hash.update(run.as_bytes());
    }
    let key = hex::encode(hash.finalize());
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("image-rootfs");
    std::fs::create_dir_all(&base).unwrap();
    let done = base.join(&key[..16]);
    // One builder at a time; the others wait, then reuse its result.
    let lock = File::create(base.join("lock")).unwrap();
    lock.lock().unwrap();
    if done.exists() {
        return done;
    }
    // Filesystems of earlier stages (and an interrupted build) are not used again.
    for entry in std::fs::read_dir(&base).unwrap().flatten() {
        if entry.path().is_dir() {
            std::fs::remove_dir_all(entry.path()).unwrap();
        }
    }
    let building = base.join(format!("{}.building", &key[..16]));
    let mirror = apt_mirror();
    let log = base.join("build.log");
    let _ = std::fs::remove_file(&log);
    let started = Instant::now();
    run_logged(
        Command::new("debootstrap")
            .args(["--variant=minbase", "bookworm"])
            .arg(&building)
            .arg(&mirror),
        &log,
    );
    // The sources of the official image: bookworm, its updates and security, from the mirror
    // this machine uses.
    let security = mirror.replace("/debian", "/debian-security");
    std::fs::write(
        building.join("etc/apt/sources.list.d/debian.sources"),
        format!(
            "Types: deb\nURIs: {mirror}\nSuites: bookworm bookworm-updates\nComponents: main\n\
             Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n\
             Types: deb\nURIs: {security}\nSuites: bookworm-security\nComponents: main\n\
             Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        ),
    )
    .unwrap();
    std::fs::remove_file(building.join("etc/apt/sources.list")).unwrap();
    std::fs::copy("/etc/resolv.conf", building.join("etc/resolv.conf")).unwrap();
    for run in &stage.runs {
        run_logged(
            Command::new("chroot")
                .arg(&building)
                .args(["/bin/sh", "-c", run])
                .env_clear()
                .env("PATH", IMAGE_PATH)
                .env("DEBIAN_FRONTEND", "noninteractive"),
            &log,
        );
    }
    std::fs::write(building.join("etc/resolv.conf"), "").unwrap();
    std::fs::rename(&building, &done).unwrap();
    eprintln!(
        "built the image's filesystem in {:?} ({})",
        started.elapsed(),
        done.display()
    );
    done
}

/// Runs `cmd` with its output appended to `log`; panics with the log's end when it fails.
fn run_logged(cmd: &mut Command, log: &Path) {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let status = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .status()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    if !status.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!("{cmd:?}: {status}; {}:\n{}", log.display(), tail.join("\n"));
    }
}

/// The Debian mirror this machine's apt fetches bookworm from.
fn apt_mirror() -> String {
    let mut texts = vec![std::fs::read_to_string("/etc/apt/sources.list").unwrap_or_default()];
    if let Ok(dir) = std::fs::read_dir("/etc/apt/sources.list.d") {
        for entry in dir.flatten() {
            let path = entry.path();
            if path
                .extension()
                .is_some_and(|e| e == "sources" || e == "list")
            {
                texts.push(std::fs::read_to_string(path).unwrap_or_default());
            }
        }
    }
    for text in texts {
        // One-line form: `deb [options] URI bookworm main`.
        for line in text.lines() {
            let words: Vec<&str> = line
                .split_whitespace()
                .filter(|w| !w.starts_with('['))
                .collect();
            if let ["deb", uri, "bookworm", ..] = words.as_slice() {
                return uri.trim_end_matches('/').to_string();
            }
        }
        // deb822 form: a stanza whose Suites holds bookworm.
        for stanza in text.split("\n\n") {
            let field = |name: &str| {
                stanza
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(str::trim)
            };
            let suites = field("Suites:").unwrap_or_default();
            if suites.split_whitespace().any(|s| s == "bookworm") {
                if let Some(uri) = field("URIs:").and_then(|u| u.split_whitespace().next()) {
                    return uri.trim_end_matches('/').to_string();
                }
            }
        }
    }
    panic!("no Debian bookworm source in /etc/apt/sources.list(.d): debootstrap needs a mirror")
}

/// A file or folder of the test mounted read-only at a path in the image.
struct Mount {
    from: PathBuf,
    to: &'static str,
}

/// `'text'` for sh.
fn quoted(path: &Path) -> String {
    let text = path.display().to_string();
    assert!(!text.contains('\''), "{text}");
    format!("'{text}'")
}

impl Image {
    /// The argv that starts the image's `sluice` in its filesystem, `mounts` read-only, the
    /// install's emptyDirs writable and empty, the root read-only, as the stage's user; the
    /// script is written to `dir`, which also holds the mount points of the private namespace.
    fn wrapper(&self, dir: &Path, mounts: &[Mount]) -> Vec<String> {
        let exe = self
            .stage
            .copied
            .iter()
            .find(|c| c.ends_with("/sluice"))
            .expect("the stage copies the sluice binary");
        let mut script = format!(
            "set -eu\ns={scratch}\nmount -t tmpfs -o mode=0755 tmpfs \"$s\"\n\
             mkdir \"$s/upper\" \"$s/work\" \"$s/root\"\n\
             mount -t overlay overlay -o \"lowerdir={lower},upperdir=$s/upper,workdir=$s/work\" \
             \"$s/root\"\nr=\"$s/root\"\ncp {bin} \"$r{exe}\"\n",
            scratch = quoted(&dir.join("ns")),
            lower = self.rootfs.display(),
            bin = quoted(Path::new(env!("CARGO_BIN_EXE_sluice"))),
        );
        for (i, path) in self.empty_dirs.iter().enumerate() {
            // An emptyDir: empty, writable by the pod's user and group (fsGroup).
            script.push_str(&format!(
                "mkdir \"$s/empty{i}\"\nchown {user} \"$s/empty{i}\"\nchmod 0770 \"$s/empty{i}\"\n\
                 mkdir -p \"$r{path}\"\nmount --bind \"$s/empty{i}\" \"$r{path}\"\n",
                user = self.user,
            ));
        }
        for m in mounts {
            let make = if m.from.is_dir() { "mkdir -p" } else { "touch" };
            script.push_str(&format!(
                "mkdir -p \"$(dirname \"$r{to}\")\"\n{make} \"$r{to}\"\n\
                 mount --bind {from} \"$r{to}\"\nmount -o remount,bind,ro \"$r{to}\"\n",
                to = m.to,
                from = quoted(&m.from),
            ));
        }
        script.push_str(&format!(
            "mount -t proc proc \"$r/proc\"\nmount -o remount,bind,ro \"$r\"\n\
             exec chroot --userspec={user} \"$r\" \"$@\"\n",
            user = self.user,
        ));
        let path = dir.join("start-in-image.sh");
        std::fs::create_dir_all(dir.join("ns")).unwrap();
        std::fs::write(&path, script).unwrap();
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            &path.display().to_string(),
            exe,
        ]
        .map(str::to_string)
        .to_vec()
    }

    /// `sluice run` in the image on `url` with the stage's and the install's environment plus
    /// `env`, signing with the key mounted at [`SIGNING_DIR`].
    fn daemon(&self, dir: &Path, url: &str, mounts: &[Mount], env: &[(&str, &str)]) -> Daemon {
        let workdir = self
            .stage
            .env
            .iter()
            .find(|(k, _)| k == "SLUICE_WORKDIR")
            .map(|(_, v)| v.clone())
            .expect("the stage sets SLUICE_WORKDIR");
        let mut builder = sluice_daemon(url, Path::new(&workdir))
            .wrapped(self.wrapper(dir, mounts))
            .stepped()
            .env("PATH", IMAGE_PATH)
            .env("SLUICE_SIGNING_SSH_KEY", format!("{SIGNING_DIR}/identity"))
            .envs(env);
        for (key, value) in &self.stage.env {
            builder = builder.env(key, value);
        }
        let daemon = builder.start();
        daemon.wait_ready();
        daemon
    }
}

/// A Secret's files as the kubelet mounts them: owned by root, group `gid` (the pod's
/// fsGroup), mode 0440.
fn secret(dir: &Path, gid: u32, files: &[(&str, &[u8])]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    for (name, bytes) in files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        std::os::unix::fs::chown(&path, Some(0), Some(gid)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o440)).unwrap();
    }
    dir.to_path_buf()
}

/// The signing key's Secret in `tmp` and the public key's line.
fn signing_secret(tmp: &Path, gid: u32) -> (Mount, String) {
    let key = tmp.join("signing_key");
    let public = keygen(&key, "ed25519");
    let bytes = std::fs::read(&key).unwrap();
    let dir = secret(&tmp.join("signing"), gid, &[("identity", &bytes)]);
    (
        Mount {
            from: dir,
            to: SIGNING_DIR,
        },
        public,
    )
}

fn gid(user: &str) -> u32 {
    user.split(':')
        .nth(1)
        .and_then(|g| g.parse().ok())
        .expect("USER uid:gid")
}

/// `<phase>` of the web canary at the remote's main, if it has a status yet.
fn phase(bare: &Path) -> Option<String> {
    status_at_main(bare, STATUS_FILE)?["phase"]
        .as_str()
        .map(str::to_string)
}

/// Waits (checking every 100 ms, at most 900 times) until the canary's phase is `want`.
fn wait_phase(daemon: &Daemon, bare: &Path, want: &str) {
    for _ in 0..900 {
        if phase(bare).as_deref() == Some(want) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!(
        "the canary never reached {want} (at {:?}); the daemon's log:\n{}",
        phase(bare),
        daemon.log()
    );
}

/// What every run in the image shows: the daemon runs as the stage's user on a read-only root
/// with the emptyDirs writable, its probes answer, the web canary rolls from v1 to v2 to
/// Succeeded, and `git verify-commit` accepts sluice's signed commits.
fn rolls_out(image: &Image, daemon: &Daemon, bare: &Path, public: &str, tmp: &Path) {
    let pid = daemon.pid();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid = image.user.split(':').next().unwrap_or_default();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().skip(1).all(|u| u == uid)),
        "sluice runs as uid {uid}: {status}"
    );
    // The daemon's mounts, as it sees them from its root: `/` read-only, each emptyDir not.
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mounts")).unwrap();
    let access = |target: &str| {
        mounts
            .lines()
            .rev()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|f| f.get(1) == Some(&target))
            .and_then(|f| f.get(3)?.split(',').next().map(str::to_string))
    };
    assert_eq!(access("/").as_deref(), Some("ro"), "the root: {mounts}");
    for path in &image.empty_dirs {
        assert_eq!(access(path).as_deref(), Some("rw"), "{path}: {mounts}");
    }

    assert_eq!(get_status(daemon.probes(), "/healthz"), Some(200));
    assert_eq!(get_status(daemon.probes(), "/readyz"), Some(200));
    wait_phase(daemon, bare, "Initialized");
    let human = human_clone(&bare.display().to_string(), &tmp.join("human"));
    human_commit(
        &human,
        CANARY_FILE,
        &web_httproute("v2"),
        "web: roll out v2",
    );
    wait_phase(daemon, bare, "Succeeded");
    assert!(
        show(bare, "main", "clusters/shop/web/route.yaml").contains("web-green"),
        "the promotion routes to the new revision's service"
    );
    let allowed = tmp.join("allowed_signers");
    std::fs::write(&allowed, format!("sluice@localhost {public}")).unwrap();
    let head = git(bare, &["rev-parse", "main"]);
    assert_good_signature(bare, &allowed, head.trim(), "sluice's promotion commit");
}

/// Starts `sluice run` in the image on `url` (whose bare repo is `bare`) with `mount` and the
/// signing key's Secret mounted and `env` set, and checks [`rolls_out`].
fn run_in_image(
    image: &Image,
    tmp: &Path,
    (url, bare): (&str, &Path),
    mount: Mount,
    env: &[(&str, &str)],
) {
    let (signing, public) = signing_secret(tmp, gid(&image.user));
    let daemon = image.daemon(&tmp.join("run"), url, &[mount, signing], env);
    rolls_out(image, &daemon, bare, &public, tmp);
}

#[test]
fn image_runs_a_canary_over_https_with_a_mounted_ca_as_its_user_on_a_read_only_root() {
    let Some(image) = image() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(tmp.path(), &[(CANARY_FILE, &web_httproute("v1"))]);
    let (tls, cert) = tls_server(tmp.path());
    let token = "s3cr3t-token";
    let server = HttpGit::start_tls(tmp.path(), "x-access-token", token, tls);
    let ca = secret(
        &tmp.path().join("ca"),
        gid(&image.user),
        &[("ca.crt", &std::fs::read(&cert).unwrap())],
    );
    run_in_image(
        &image,
        tmp.path(),
        (&server.https_url("", "config.git"), &bare),
        Mount {
            from: ca,
            to: CA_DIR,
        },
        &[
            ("SSL_CERT_FILE", &format!("{CA_DIR}/ca.crt")),
            ("SLUICE_GIT_TOKEN", token),
        ],
    );
    assert!(server.authorized_requests() > 0, "sluice used the token");
}

#[test]
fn image_runs_a_canary_over_ssh_with_mounted_known_hosts_as_its_user_on_a_read_only_root() {
    let Some(image) = image() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(tmp.path(), &[(CANARY_FILE, &web_httproute("v1"))]);
    let identity = tmp.path().join("identity");
    keygen(&identity, "ed25519");
    let sshd = Sshd::start(tmp.path(), &identity.with_extension("pub"));
    let git_secret = secret(
        &tmp.path().join("git-ssh"),
        gid(&image.user),
        &[
            ("identity", &std::fs::read(&identity).unwrap()),
            (
                "identity.pub",
                &std::fs::read(identity.with_extension("pub")).unwrap(),
            ),
            ("known_hosts", sshd.keyscan().as_bytes()),
        ],
    );
    run_in_image(
        &image,
        tmp.path(),
        (&sshd.url(&bare), &bare),
        Mount {
            from: git_secret,
            to: GIT_SECRET,
        },
        &[
            ("SLUICE_GIT_SSH_KEY_FILE", &format!("{GIT_SECRET}/identity")),
            (
                "SLUICE_GIT_KNOWN_HOSTS_FILE",
                &format!("{GIT_SECRET}/known_hosts"),
            ),
        ],
    );
}

/// The CA the https test mounts is where the install's `private-ca` component mounts it, and
/// `SSL_CERT_FILE` names the same file (no root needed: this reads the component only).
#[test]
fn image_run_mounts_the_ca_where_the_private_ca_component_does() {
    let patch = repo_yaml("examples/install/components/private-ca/deployment-patch.yaml");
    let container = &patch["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["volumeMounts"][0]["mountPath"], CA_DIR);
    assert_eq!(container["env"][0]["name"], "SSL_CERT_FILE");
    assert_eq!(container["env"][0]["value"], format!("{CA_DIR}/ca.crt"));
}
