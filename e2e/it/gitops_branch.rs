//! Approval branches (`sluice/<ns>/<name>/<step>`) are written like the main branch: signed with
//! the same key and pushed through the same proxy. Real parts only: a bare remote, the git CLI
//! (and its `ssh-keygen`) as the witness of signatures, `git http-backend` over TLS behind a
//! CONNECT proxy written here.
//!
//! Needs `git`, `ssh-keygen` (`openssh-client`, for git's own signature check) and `openssl`
//! (to make the test server's certificate).

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use sluice::gitops::{ConfigRepo, Credentials, Identity, Signing};

use crate::support::git_fixture::{
    assert_good_signature, commit_step, git, route_change, step_message, time, Fixture,
};
use crate::support::remotes::tls_server;
use crate::support::HttpGit;

const BRANCH: &str = "sluice/prod/podinfo/2";

#[test]
fn approval_branch_commits_are_signed_like_main() {
    let fx = Fixture::new();
    let (key, allowed) = fx.signing_key();
    let mut repo = fx.open(&fx.bare_url(), "work");
    repo.set_signing(Some(Signing::Ssh { key_path: key }));

    let head = repo.head();
    let commit = repo
        .commit_on(
            head,
            &route_change(30),
            &step_message(30),
            &Identity::default(),
            time(30),
        )
        .unwrap();
    repo.push_approval_branch(BRANCH, commit).unwrap();

    let witness = fx.cli_clone(&fx.bare_url(), "witness");
    git(&witness, &["fetch", "-q", "origin", BRANCH]);
    assert_good_signature(
        &witness,
        &allowed,
        &commit.to_string(),
        "the approval commit",
    );
    // The trailers are there on the branch commit too.
    assert_eq!(
        git(
            &witness,
            &[
                "log",
                "-1",
                "--format=%(trailers:key=Sluice-Weight,valueonly)",
                &commit.to_string()
            ]
        ),
        "30"
    );
    // The main branch did not move.
    assert_eq!(
        git(&fx.bare(), &["rev-parse", "refs/heads/main"]),
        head.to_string()
    );
}

// ---------------------------------------------------------------------------------------------
// proxy

/// An HTTP proxy on loopback that opens `CONNECT` tunnels (how git and libgit2 reach an https
/// remote through a proxy) and counts them. Refuses anything else. Stopped on drop.
struct ConnectProxy {
    port: u16,
    tunnels: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ConnectProxy {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let tunnels = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (tunnels2, stop2) = (tunnels.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let tunnels = tunnels2.clone();
                std::thread::spawn(move || {
                    let _ = tunnel(stream, &tunnels);
                });
            }
        });
        ConnectProxy {
            port,
            tunnels,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn tunnels(&self) -> usize {
        self.tunnels.load(Ordering::SeqCst)
    }
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves one proxy connection: `CONNECT host:port`, then bytes both ways until either side
/// closes.
fn tunnel(client: TcpStream, tunnels: &AtomicUsize) -> std::io::Result<()> {
    client.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    let mut reader = BufReader::new(client.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
            break;
        }
    }
    let mut parts = request_line.split_whitespace();
    let (Some("CONNECT"), Some(target)) = (parts.next(), parts.next()) else {
        (&client).write_all(
            b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
        return Ok(());
    };
    let upstream = TcpStream::connect(target)?;
    tunnels.fetch_add(1, Ordering::SeqCst);
    (&client).write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
    // Bytes the client sent after its request head are already in the reader's buffer.
    (&upstream).write_all(reader.buffer())?;
    let (up_read, up_write) = (upstream.try_clone()?, upstream);
    let client_write = client.try_clone()?;
    let down = std::thread::spawn(move || {
        let _ = std::io::copy(&mut (&up_read), &mut (&client_write));
        let _ = client_write.shutdown(Shutdown::Write);
    });
    let mut client_read = reader.into_inner();
    let _ = std::io::copy(&mut client_read, &mut (&up_write));
    let _ = up_write.shutdown(Shutdown::Write);
    let _ = down.join();
    Ok(())
}

#[test]
fn approval_branch_fetch_and_push_go_through_the_configured_proxy() {
    let fx = Fixture::new();
    let (tls, cert) = tls_server(fx.dir.path());
    // SAFETY (of the call, not memory): libgit2 adds the file to its one TLS trust store. It is
    // additive, and no other test in this binary speaks TLS through libgit2, so setting it while
    // other tests run changes nothing for them.
    #[allow(unsafe_code)]
    unsafe { git2::opts::set_ssl_cert_file(&cert) }.unwrap();
    let server = HttpGit::start_tls(fx.dir.path(), "user", "pw", tls);
    let proxy = ConnectProxy::start();

    // The clone's git config carries `http.proxy`, as an operator sets it; sluice adopts it.
    let work = fx.path("work");
    let url = server.https_url("user:pw@", "remote.git");
    drop(
        ConfigRepo::open_or_clone(&url, "main", &work, &Credentials::none())
            .unwrap_or_else(|e| panic!("open_or_clone {url}: {e}")),
    );
    git(&work, &["config", "http.proxy", &proxy.url()]);
    let mut repo = ConfigRepo::open_or_clone(&url, "main", &work, &Credentials::none())
        .unwrap_or_else(|e| panic!("open_or_clone {url}: {e}"));
    assert!(
        proxy.tunnels() > 0,
        "the fetch at open goes through the proxy"
    );

    let before = proxy.tunnels();
    assert_eq!(repo.fetch_branch(BRANCH).unwrap(), None);
    assert!(
        proxy.tunnels() > before,
        "listing the approval branch goes through the proxy"
    );

    let commit = repo
        .commit_on(
            repo.head(),
            &route_change(30),
            &step_message(30),
            &Identity::default(),
            time(30),
        )
        .unwrap();
    let before = proxy.tunnels();
    repo.push_approval_branch(BRANCH, commit).unwrap();
    assert!(
        proxy.tunnels() > before,
        "the approval push goes through the proxy"
    );
    assert_eq!(
        git(&fx.bare(), &["rev-parse", &format!("refs/heads/{BRANCH}")]),
        commit.to_string()
    );

    // Without the proxy setting the same push connects directly: the count proves the path.
    git(&work, &["config", "--unset", "http.proxy"]);
    let before = proxy.tunnels();
    repo.push_approval_branch(BRANCH, commit).unwrap();
    assert_eq!(proxy.tunnels(), before);
}

// ---------------------------------------------------------------------------------------------
// signing key files

#[test]
fn keys_not_signed_in_process_are_signed_by_ssh_keygen_as_before() {
    // RSA, P-384 and PEM-format keys: ssh-keygen signs them, and git accepts the signature.
    let fx = Fixture::new();
    let cases = [
        fx.keygen("rsa", &["-t", "rsa", "-b", "2048", "-N", ""]),
        fx.keygen("p384", &["-t", "ecdsa", "-b", "384", "-N", ""]),
        fx.keygen("pem", &["-t", "ecdsa", "-b", "256", "-N", "", "-m", "PEM"]),
    ];
    let mut repo = fx.open(&fx.bare_url(), "work");
    for (i, key) in cases.into_iter().enumerate() {
        let allowed = fx.allowed_signers(&key, &format!("allowed_signers_{i}"));
        repo.set_signing(Some(Signing::Ssh {
            key_path: key.clone(),
        }));
        let weight = 10 + i as u32;
        let commit = commit_step(&mut repo, weight, time(i64::from(weight)))
            .unwrap()
            .unwrap();
        repo.push().unwrap();
        let witness = fx.cli_clone(&fx.bare_url(), &format!("witness{i}"));
        let what = key.display().to_string();
        assert_good_signature(&witness, &allowed, &commit.to_string(), &what);
    }
}

#[test]
fn signing_key_files_sluice_cannot_use_are_named_with_the_reason() {
    let fx = Fixture::new();
    let mut repo = fx.open(&fx.bare_url(), "work");
    let head = repo.head();
    let rsa = fx.keygen("rsa", &["-t", "rsa", "-b", "2048", "-N", ""]);
    // A public key alone: ssh-keygen would use the private key beside it, so copy it away.
    let lonely = fx.path("lonely.pub");
    std::fs::copy(rsa.with_extension("pub"), &lonely).unwrap();
    let cases = [
        (
            fx.keygen("encrypted", &["-t", "ed25519", "-N", "a passphrase"]),
            "encrypted",
        ),
        // A public key needs its private half in an ssh-agent; the test runs without one.
        (lonely, "ssh-keygen, which signs such keys, failed too"),
        (fx.path("no-such-key"), "cannot read"),
    ];
    for (key, reason) in cases {
        repo.set_signing(Some(Signing::Ssh {
            key_path: key.clone(),
        }));
        let err = commit_step(&mut repo, 5, None).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, sluice::gitops::Error::Signing { .. }),
            "{text}"
        );
        assert!(
            text.contains(key.to_str().unwrap()),
            "names the file: {text}"
        );
        assert!(text.contains(reason), "{reason}: {text}");
        assert!(!err.is_transient());
        assert_eq!(
            repo.head(),
            head,
            "nothing committed with {}",
            key.display()
        );
    }
}

#[test]
fn ecdsa_p256_signatures_verify_with_git() {
    let fx = Fixture::new();
    let key = fx.keygen("p256", &["-t", "ecdsa", "-b", "256", "-N", ""]);
    let allowed = fx.allowed_signers(&key, "allowed_signers");
    let mut repo = fx.open(&fx.bare_url(), "work");
    repo.set_signing(Some(Signing::Ssh { key_path: key }));
    let commit = commit_step(&mut repo, 10, time(10)).unwrap().unwrap();
    repo.push().unwrap();
    let witness = fx.cli_clone(&fx.bare_url(), "witness");
    assert_good_signature(&witness, &allowed, &commit.to_string(), "a P-256 key");
}
