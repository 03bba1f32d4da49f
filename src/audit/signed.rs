//! Whether a commit is signed by a key of an allowed-signers file, as `git verify-commit` with
//! `gpg.format=ssh` checks it: an `SSH SIGNATURE` in the `git` namespace over the commit
//! without its signature header, by a key the file lists. Checked in-process (ed25519 and
//! ecdsa-sha2-nistp256, the keys sluice signs with itself), so auditing needs no `ssh-keygen`.

use git2::{Oid, Repository};
use ssh_key::{PublicKey, SshSig};

/// The namespace git signs commits in.
const NAMESPACE: &str = "git";

/// `Ok` when `oid` carries a valid SSH signature by a key of `allowed_signers` (the file's
/// text); otherwise why not.
pub fn verify(repo: &Repository, oid: Oid, allowed_signers: &str) -> Result<(), String> {
    let (signature, signed) = match repo.extract_signature(&oid, None) {
        Ok(s) => s,
        Err(e) if e.code() == git2::ErrorCode::NotFound => {
            return Err("unsigned, but the settings require signed commits".to_string())
        }
        Err(e) => return Err(format!("cannot read the signature: {}", e.message())),
    };
    let sig = SshSig::from_pem(&*signature).map_err(|e| {
        format!("the signature is not an SSH signature sluice can check ({e}); the settings require signed commits")
    })?;
    let allowed = allowed_keys(allowed_signers);
    if !allowed.iter().any(|k| k.key_data() == sig.public_key()) {
        return Err("signed by a key the allowed-signers file does not list".to_string());
    }
    if sig.namespace() != NAMESPACE {
        return Err(format!(
            "signed in namespace {:?}, not {NAMESPACE:?}",
            sig.namespace()
        ));
    }
    let key = PublicKey::from(sig.public_key().clone());
    key.verify(NAMESPACE, &signed, &sig)
        .map_err(|e| format!("bad signature: {e}"))
}

/// The keys of an allowed-signers file (`principals [options] keytype base64 [comment]`);
/// lines that hold no key sluice can read are left out.
fn allowed_keys(text: &str) -> Vec<PublicKey> {
    let mut keys = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        for (i, w) in words.iter().enumerate() {
            let is_type = w.starts_with("ssh-") || w.starts_with("ecdsa-") || w.starts_with("sk-");
            if let (true, Some(data)) = (is_type, words.get(i + 1)) {
                if let Ok(key) = PublicKey::from_openssh(&format!("{w} {data}")) {
                    keys.push(key);
                    break;
                }
            }
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_signers_lines_with_options_and_comments_are_read() {
        let key =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPs74QkbpJ+FThqkXDw2uPLv2Jx4xbXIUEBYcD0QX3kf";
        let text = format!(
            "# team\nann@example.com {key} ann\nbob@example.com namespaces=\"git\" {key}\nbroken line\n"
        );
        assert_eq!(allowed_keys(&text).len(), 2);
    }
}
