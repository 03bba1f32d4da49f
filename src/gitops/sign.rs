//! Signing commits with an SSH key, as git does with `gpg.format=ssh`: an `SSH SIGNATURE` over
//! the commit in the `git` namespace, made in-process (no `ssh-keygen` on the image), that
//! `git verify-commit` checks against an allowed-signers file.
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
    /// An SSH private key file in OpenSSH format (`-----BEGIN OPENSSH PRIVATE KEY-----`, what
    /// `ssh-keygen` writes), unencrypted, of type ed25519 or ecdsa-sha2-nistp256. The key is
    /// read at each signature, so a rotated file is picked up.
    Ssh { key_path: PathBuf },
}

impl Signing {
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
    let key = parse_key(&text).map_err(fail)?;
    let signature = key
        .sign(NAMESPACE, HashAlg::Sha512, content.as_bytes())
        .map_err(|e| fail(format!("cannot sign: {e}")))?;
    signature
        .to_pem(LineEnding::LF)
        .map_err(|e| fail(format!("cannot encode the signature: {e}")))
}

/// The private key in `text`, or why sluice cannot sign with it (the caller names the file).
fn parse_key(text: &str) -> std::result::Result<PrivateKey, String> {
    let first = text.trim_start().lines().next().unwrap_or_default().trim();
    if !first.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----") {
        return Err(wrong_format(first));
    }
    let key = PrivateKey::from_openssh(text)
        .map_err(|e| format!("not a valid OpenSSH private key: {e}"))?;
    if key.is_encrypted() {
        return Err(
            "the key is encrypted with a passphrase, which sluice cannot prompt for; \
                    use an unencrypted key (`ssh-keygen -p -N '' -f KEY` removes the passphrase)"
                .to_string(),
        );
    }
    match key.algorithm() {
        Algorithm::Ed25519
        | Algorithm::Ecdsa {
            curve: EcdsaCurve::NistP256,
        } => Ok(key),
        other => Err(format!(
            "key type {other} is not supported for signing; use an ed25519 key \
             (`ssh-keygen -t ed25519`) or an ecdsa-sha2-nistp256 key"
        )),
    }
}

/// Why a file that is not an OpenSSH private key cannot be used, from its first line.
fn wrong_format(first: &str) -> String {
    let kind = if first.starts_with("-----BEGIN ") && first.contains("PRIVATE KEY") {
        // PKCS#1 (`RSA PRIVATE KEY`), SEC1 (`EC PRIVATE KEY`), PKCS#8 (`PRIVATE KEY`).
        Some(format!(
            "a PEM private key (`{first}`); rewrite it in OpenSSH format with \
             `ssh-keygen -p -f KEY`"
        ))
    } else if first.starts_with("ssh-")
        || first.starts_with("ecdsa-")
        || first.starts_with("sk-")
        || first.starts_with("-----BEGIN SSH2 PUBLIC KEY-----")
    {
        Some(
            "a public key; sluice signs in-process and needs the private key file (signing \
             through an ssh-agent is not supported)"
                .to_string(),
        )
    } else {
        None
    };
    match kind {
        Some(kind) => format!("the file holds {kind}"),
        None => {
            "expected an OpenSSH private key (`-----BEGIN OPENSSH PRIVATE KEY-----`)".to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_are_not_openssh_private_keys_say_what_they_are() {
        let err =
            parse_key("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n")
                .unwrap_err();
        assert!(
            err.contains("PEM private key") && err.contains("ssh-keygen -p"),
            "{err}"
        );
        let err = parse_key("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIESIZr sluice\n").unwrap_err();
        assert!(
            err.contains("public key") && err.contains("ssh-agent"),
            "{err}"
        );
        let err = parse_key("").unwrap_err();
        assert!(err.contains("expected an OpenSSH private key"), "{err}");
    }
}
