//! Whether a commit is signed by a key of an allowed-signers file, as `git verify-commit` with
//! `gpg.format=ssh` checks it: an `SSH SIGNATURE` in the `git` namespace over the commit
//! without its signature header, by a key the file lists. Checked in-process (ed25519 and
//! ecdsa-sha2-nistp256, the keys sluice signs with itself), so auditing needs no `ssh-keygen`.

use git2::{Oid, Repository};
use ssh_key::{PublicKey, SshSig};

/// The namespace git signs commits in.
const NAMESPACE: &str = "git";

/// The keys of an allowed-signers file (`principals [options] keytype base64 [comment]`).
/// Principals and options are not checked: any listed key is allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedSigners {
    keys: Vec<PublicKey>,
}

impl AllowedSigners {
    /// The keys of a file in the repo: lines that hold no key sluice can read are left out
    /// (the policy is what the keys it can read allow).
    pub fn lenient(text: &str) -> AllowedSigners {
        AllowedSigners {
            keys: lines(text).filter_map(|(_, line)| key_of(line)).collect(),
        }
    }

    /// The keys of a file given outside the repo: every line must hold a key sluice can read,
    /// and there must be one. `file` names it in the error (`file:line: ...`).
    pub fn strict(file: &str, text: &str) -> Result<AllowedSigners, String> {
        let mut keys = Vec::new();
        for (n, line) in lines(text) {
            match key_of(line) {
                Some(key) => keys.push(key),
                None => {
                    return Err(format!(
                        "{file}:{n}: expected `principals [options] keytype base64-key [comment]` holding an SSH public key, found {line:?}"
                    ))
                }
            }
        }
        if keys.is_empty() {
            return Err(format!(
                "{file}: lists no key, so no commit could be allowed"
            ));
        }
        Ok(AllowedSigners { keys })
    }

    fn allows(&self, key: &ssh_key::public::KeyData) -> bool {
        self.keys.iter().any(|k| k.key_data() == key)
    }
}

/// `Ok` when `oid` carries a valid SSH signature by a key of `allowed`; otherwise why not.
pub fn verify(repo: &Repository, oid: Oid, allowed: &AllowedSigners) -> Result<(), String> {
    let (signature, signed) = match repo.extract_signature(&oid, None) {
        Ok(s) => s,
        Err(e) if e.code() == git2::ErrorCode::NotFound => return Err("unsigned".to_string()),
        Err(e) => return Err(format!("cannot read the signature: {}", e.message())),
    };
    let sig = SshSig::from_pem(&*signature)
        .map_err(|e| format!("the signature is not an SSH signature sluice can check ({e})"))?;
    if !allowed.allows(sig.public_key()) {
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

/// The lines of an allowed-signers file that are not blank or comments, numbered from 1.
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
}

/// The key of one line: the first `keytype base64` pair sluice can read.
fn key_of(line: &str) -> Option<PublicKey> {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.iter().enumerate().find_map(|(i, w)| {
        let is_type = w.starts_with("ssh-") || w.starts_with("ecdsa-") || w.starts_with("sk-");
        let data = words.get(i + 1)?;
        is_type
            .then(|| PublicKey::from_openssh(&format!("{w} {data}")).ok())
            .flatten()
    })
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
        assert_eq!(AllowedSigners::lenient(&text).keys.len(), 2);
    }

    #[test]
    fn an_allowed_signers_file_given_outside_the_repo_must_be_all_keys() {
        let key =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPs74QkbpJ+FThqkXDw2uPLv2Jx4xbXIUEBYcD0QX3kf";
        let good = format!("# team\nann@example.com {key}\n");
        assert_eq!(
            AllowedSigners::strict("f", &good).map(|a| a.keys.len()),
            Ok(1)
        );
        let bad = format!("{good}bob@example.com ssh-ed25519 AAAA\n");
        let err = AllowedSigners::strict("trusted", &bad).unwrap_err();
        assert!(err.starts_with("trusted:3: expected"), "{err}");
        assert_eq!(
            AllowedSigners::strict("trusted", "# nobody\n"),
            Err("trusted: lists no key, so no commit could be allowed".to_string())
        );
    }
}
