//! Real git servers' parts that several tests share: a real `sshd` on loopback (Debian
//! `openssh-server`) serving the test's repos over ssh (e2e/it/ssh_remote.rs, e2e/it/image_run.rs)
//! and a self-signed certificate for an https `git http-backend` ([`crate::support::HttpGit`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::{free_port, keygen};

const SSHD: &str = "/usr/sbin/sshd";

/// A real sshd on 127.0.0.1 that lets the test's user key in; killed on drop.
pub(crate) struct Sshd {
    child: Child,
    pub(crate) port: u16,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sshd {
    /// Starts sshd with host key `dir/host_key`, letting in `authorized` (a public key file).
    pub(crate) fn start(dir: &Path, authorized: &Path) -> Sshd {
        assert!(
            Path::new(SSHD).exists(),
            "{SSHD} is missing: install openssh-server (e2e/run does)"
        );
        // sshd started as root insists on its privilege separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        keygen(&dir.join("host_key"), "ed25519");
        let port = free_port();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nPidFile none\n\
                 AuthorizedKeysFile {authorized}\nStrictModes no\nUsePAM no\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nLogLevel ERROR\n",
                host_key = dir.join("host_key").display(),
                authorized = authorized.display(),
            ),
        )
        .unwrap();
        let child = Command::new(SSHD)
            .arg("-f")
            .arg(&config)
            .args(["-D", "-e"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sshd starts");
        let mut sshd = Sshd { child, port };
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = sshd.child.try_wait() {
                panic!(
                    "sshd exited with {status}; run `{SSHD} -f {} -D -e` to see why",
                    config.display()
                );
            }
            assert!(Instant::now() < deadline, "sshd did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        sshd
    }

    pub(crate) fn url(&self, repo: &Path) -> String {
        format!("ssh://{}@127.0.0.1:{}{}", user(), self.port, repo.display())
    }

    /// What `ssh-keyscan` prints for this server: the lines `flux create secret git` puts
    /// under `known_hosts`.
    pub(crate) fn keyscan(&self) -> String {
        let out = Command::new("ssh-keyscan")
            .args(["-t", "ed25519", "-p", &self.port.to_string(), "127.0.0.1"])
            .stderr(Stdio::null())
            .output()
            .expect("ssh-keyscan runs");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("ssh-ed25519"), "ssh-keyscan printed {text:?}");
        text
    }
}

fn user() -> String {
    let out = Command::new("id").arg("-un").output().expect("id -un");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A self-signed certificate for 127.0.0.1 made by `openssl`, as a rustls server config; the
/// certificate file is returned so libgit2 can be told to trust it.
pub(crate) fn tls_server(dir: &Path) -> (Arc<rustls::ServerConfig>, PathBuf) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=sluice test server",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl must be installed");
    assert!(status.success());
    let certs = CertificateDer::pem_file_iter(&cert)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key_der = PrivateKeyDer::from_pem_file(&key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .unwrap();
    (Arc::new(config), cert)
}
