//! Signing commits with an SSH key, as git does with `gpg.format=ssh`: an `SSH SIGNATURE` over
//! the commit in the `git` namespace that `git verify-commit` checks against an allowed-signers
//! file.
//!
//! ed25519 and ecdsa-sha2-nistp256 keys in OpenSSH format are signed in-process, so the
//! container image needs no `ssh-keygen`. Other keys (RSA, P-384/P-521, PEM files, a public key
//! whose private half is in an ssh-agent) are handed to `ssh-keygen -Y sign` when it is
//! installed, as sluice always did: the `ssh-key` crate's RSA support carries an unfixed
//! timing advisory (RUSTSEC-2023-0071), and agents speak a protocol of their own.
//!
//! A leaf next to `error.rs`: it turns the bytes of a commit into a signature and knows nothing
//! of repositories.

use std::path::{Path, PathBuf};

use ssh_key::{Algorithm, EcdsaCurve, HashAlg, LineEnding, PrivateKey};

use super::error::{Error, Result};

/// The namespace git signs commits in (`ssh-keygen -Y sign -n git`).
const NAMESPACE: &str = "git";

/// How to sign commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signing {
    /// An SSH key file. Unencrypted ed25519 or ecdsa-sha2-nistp256 private keys in OpenSSH
    /// format (what `ssh-keygen` writes) are signed in-process; any other key file goes to
    /// `ssh-keygen -Y sign`. The key is read at each signature, so a rotated file is picked up.
    Ssh { key_path: PathBuf },
}

impl Signing {
    /// Checks at start that commits can be signed at all: the key file is readable and is
    /// either signed in-process or handed to an `ssh-keygen` found on `PATH`. The container
    /// image carries no `ssh-keygen`, so an RSA key there is refused here, not at the first
    /// commit a canary makes.
    pub fn check_usable(&self) -> Result<()> {
        match self {
            Signing::Ssh { key_path } => {
                let fail = |reason: String| Error::Signing {
                    key_path: key_path.to_path_buf(),
                    reason,
                };
                let text = std::fs::read_to_string(key_path)
                    .map_err(|e| fail(format!("cannot read the key file: {e}")))?;
                match parse_key(&text) {
                    Ok(_) => Ok(()),
                    Err(Unsupported::Never(reason)) => Err(fail(reason)),
                    Err(Unsupported::InProcess(reason)) => match find_on_path("ssh-keygen") {
                        Some(_) => Ok(()),
                        None => Err(fail(format!(
                            "{reason}, and ssh-keygen, which signs other keys, is not on PATH                              (the sluice image has none): sign with an ed25519 key                              (`ssh-keygen -t ed25519 -N '' -f KEY`) or install openssh-client"
                        ))),
                    },
                }
            }
        }
    }

    /// The armored signature of `content` (a commit buffer).
    pub(super) fn sign(&self, content: &str) -> Result<String> {
        match self {
            Signing::Ssh { key_path } => sign_ssh(key_path, content),
        }
    }
}

fn sign_ssh(key_path: &Path, content: &str) -> Result<String> {
    let fail = |reason: String| Error::Signing {
        key_path: key_path.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(key_path)
        .map_err(|e| fail(format!("cannot read the key file: {e}")))?;
    let key = match parse_key(&text) {
        Ok(key) => key,
        Err(Unsupported::Never(reason)) => return Err(fail(reason)),
        Err(Unsupported::InProcess(reason)) => {
            return sign_with_ssh_keygen(key_path, content).map_err(|e| {
                fail(format!(
                    "{reason}; ssh-keygen, which signs such keys, failed too: {e}"
                ))
            })
        }
    };
    let signature = key
        .sign(NAMESPACE, HashAlg::Sha512, content.as_bytes())
        .map_err(|e| fail(format!("cannot sign: {e}")))?;
    signature
        .to_pem(LineEnding::LF)
        .map_err(|e| fail(format!("cannot encode the signature: {e}")))
}

/// Why a key file cannot be signed with in-process.
#[derive(Debug)]
enum Unsupported {
    /// Not in-process, but `ssh-keygen` may: the reason says why not here.
    InProcess(String),
    /// By no one without a person at hand (a passphrase to type) or at all.
    Never(String),
}

/// The private key in `text`, or why sluice cannot sign with it in-process (the caller names
/// the file).
fn parse_key(text: &str) -> std::result::Result<PrivateKey, Unsupported> {
    let first = text.trim_start().lines().next().unwrap_or_default().trim();
    if !first.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----") {
        return Err(wrong_format(first));
    }
    let key = PrivateKey::from_openssh(text)
        .map_err(|e| Unsupported::Never(format!("not a valid OpenSSH private key: {e}")))?;
    if key.is_encrypted() {
        return Err(Unsupported::Never(
            "the key is encrypted with a passphrase, which sluice cannot prompt for; \
                    use an unencrypted key (`ssh-keygen -p -N '' -f KEY` removes the passphrase)"
                .to_string(),
        ));
    }
    match key.algorithm() {
        Algorithm::Ed25519
        | Algorithm::Ecdsa {
            curve: EcdsaCurve::NistP256,
        } => Ok(key),
        other => Err(Unsupported::InProcess(format!(
            "key type {other} is signed in-process only as ed25519 (`ssh-keygen -t ed25519`) \
             or ecdsa-sha2-nistp256"
        ))),
    }
}

/// The first executable file called `program` in the folders of `PATH`.
fn find_on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| {
            std::fs::metadata(path)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// `ssh-keygen -Y sign -n git -f KEY` over `content` (git's own way with `gpg.format=ssh`).
/// stdin carries the content, so ssh-keygen never waits on a terminal.
fn sign_with_ssh_keygen(key_path: &Path, content: &str) -> std::result::Result<String, String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-n", NAMESPACE, "-f"])
        .arg(key_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run ssh-keygen (install openssh-client): {e}"))?;
    // ssh-keygen reads all of stdin before it writes, so writing first cannot deadlock.
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(content.as_bytes())
            .map_err(|e| format!("cannot write to ssh-keygen: {e}"))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| format!("ssh-keygen did not finish: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{} ({})",
            String::from_utf8_lossy(&output.stderr).trim(),
            output.status
        ));
    }
    String::from_utf8(output.stdout).map_err(|_| "ssh-keygen printed non-UTF-8".to_string())
}

/// Why a file that is not an OpenSSH private key cannot be used in-process, from its first line.
fn wrong_format(first: &str) -> Unsupported {
    let kind = if first.starts_with("-----BEGIN ") && first.contains("PRIVATE KEY") {
        // PKCS#1 (`RSA PRIVATE KEY`), SEC1 (`EC PRIVATE KEY`), PKCS#8 (`PRIVATE KEY`).
        Some(format!(
            "a PEM private key (`{first}`), signed in-process only in OpenSSH format \
             (`ssh-keygen -p -f KEY` rewrites it)"
        ))
    } else if first.starts_with("ssh-")
        || first.starts_with("ecdsa-")
        || first.starts_with("sk-")
        || first.starts_with("-----BEGIN SSH2 PUBLIC KEY-----")
    {
        Some(
            "a public key, whose private half only an ssh-agent can use (sluice signs \
             in-process with a private key file)"
                .to_string(),
        )
    } else {
        None
    };
    match kind {
        Some(kind) => Unsupported::InProcess(format!("the file holds {kind}")),
        None => Unsupported::Never(
            "expected an OpenSSH private key (`-----BEGIN OPENSSH PRIVATE KEY-----`)".to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_are_not_openssh_private_keys_say_what_they_are() {
        let pem =
            parse_key("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n");
        assert!(
            matches!(&pem, Err(Unsupported::InProcess(e)) if e.contains("PEM private key") && e.contains("ssh-keygen -p")),
            "{pem:?}"
        );
        let public = parse_key("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIESIZr sluice\n");
        assert!(
            matches!(&public, Err(Unsupported::InProcess(e)) if e.contains("public key") && e.contains("ssh-agent")),
            "{public:?}"
        );
        let empty = parse_key("");
        assert!(
            matches!(&empty, Err(Unsupported::Never(e)) if e.contains("expected an OpenSSH private key")),
            "{empty:?}"
        );
    }
}
