//! The ssh host keys sluice trusts, handed over as Flux hands them (`SLUICE_GIT_KNOWN_HOSTS` or
//! `SLUICE_GIT_KNOWN_HOSTS_FILE`, the `known_hosts` key of the git Secret), and the check of the
//! key an ssh server presents against them.
//!
//! The format is OpenSSH's `known_hosts`: comma-separated host patterns (`*` and `?` globs, `!`
//! negations, `[host]:port` for a port other than 22) or one hashed name (`|1|salt|hash`, what
//! `ssh-keyscan -H` writes), then the key. `@revoked` lines reject their key for the hosts they
//! name. `@cert-authority` lines are kept out of the check: libgit2 hands over the server's plain
//! key, never a host certificate, so such a line can never vouch for it.
//!
//! A leaf: it knows the text of known hosts and a key blob, nothing of remotes or libgit2.

use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;
use ssh_key::known_hosts::{Entry, HostPatterns, KnownHosts as Lines, Marker};
use ssh_key::{HashAlg, PublicKey};

/// The port ssh uses when a URL names none; hosts on it are written without `[…]:port`.
pub(super) const DEFAULT_SSH_PORT: u16 = 22;

/// Parsed known hosts and where they came from (named in every error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownHosts {
    /// `SLUICE_GIT_KNOWN_HOSTS` or `SLUICE_GIT_KNOWN_HOSTS_FILE (PATH)`.
    source: String,
    /// Each entry with its 1-based line number.
    entries: Vec<(usize, Entry)>,
}

impl KnownHosts {
    /// Parses `text`; `source` names the variable (and file) in errors. A line that is not a
    /// known-hosts entry is an error naming its number; blank and `#` lines are skipped.
    pub fn parse(text: &str, source: &str) -> std::result::Result<Self, String> {
        let mut entries = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            let Some(entry) = Lines::new(line).next() else {
                continue;
            };
            let entry = entry.map_err(|e| {
                format!("line {number} is not a known_hosts entry (HOSTS KEYTYPE KEY): {e}")
            })?;
            entries.push((number, entry));
        }
        if entries.is_empty() {
            return Err("holds no known_hosts entry (`ssh-keyscan HOST` prints them)".to_string());
        }
        Ok(Self {
            source: source.to_string(),
            entries,
        })
    }

    /// Where these known hosts came from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Accepts the host key `blob` (the ssh wire encoding libgit2 hands over) that `host` on
    /// `port` presented, or says why not: host absent, key not listed for it, or revoked.
    pub(super) fn check(
        &self,
        host: &str,
        port: u16,
        blob: &[u8],
    ) -> std::result::Result<(), String> {
        let name = lookup_name(host, port);
        let presented = PublicKey::from_bytes(blob)
            .map_err(|e| format!("`{name}` presented a host key sluice cannot read: {e}"))?;
        let seen = describe(&presented);
        let mut listed = Vec::new();
        for (line, entry) in &self.entries {
            if !matches_host(entry.host_patterns(), &name) {
                continue;
            }
            let same = entry.public_key().key_data() == presented.key_data();
            match entry.marker() {
                Some(Marker::Revoked) if same => {
                    return Err(format!(
                        "the {seen} host key `{name}` presented is marked @revoked in {} line \
                         {line}",
                        self.source
                    ))
                }
                Some(_) => {}
                None if same => return Ok(()),
                None => listed.push(format!("{} (line {line})", describe(entry.public_key()))),
            }
        }
        if listed.is_empty() {
            return Err(format!(
                "host `{name}` is not in the known hosts of {}; the server presented the {seen} \
                 host key (add the line `ssh-keyscan{} {host}` prints)",
                self.source,
                if port == DEFAULT_SSH_PORT {
                    String::new()
                } else {
                    format!(" -p {port}")
                }
            ));
        }
        Err(format!(
            "the {seen} host key `{name}` presented does not match the known hosts of {}, which \
             list for it {}; the host key changed or someone is in between",
            self.source,
            listed.join(", ")
        ))
    }
}

/// `host`, or `[host]:port` off port 22, as OpenSSH writes and looks names up.
fn lookup_name(host: &str, port: u16) -> String {
    if port == DEFAULT_SSH_PORT {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

/// `ssh-ed25519 SHA256:…`, as `ssh-keygen -lf` names a key.
fn describe(key: &PublicKey) -> String {
    format!(
        "{} {}",
        key.algorithm().as_str(),
        key.fingerprint(HashAlg::Sha256)
    )
}

/// OpenSSH's rule: the name matches some pattern and no negated one.
fn matches_host(patterns: &HostPatterns, name: &str) -> bool {
    match patterns {
        HostPatterns::HashedName { salt, hash } => {
            let Ok(mut mac) = Hmac::<Sha1>::new_from_slice(salt) else {
                return false;
            };
            mac.update(name.as_bytes());
            mac.verify_slice(hash).is_ok()
        }
        HostPatterns::Patterns(patterns) => {
            let name = name.to_ascii_lowercase();
            let mut matched = false;
            for pattern in patterns {
                let (negated, pattern) = match pattern.strip_prefix('!') {
                    Some(rest) => (true, rest),
                    None => (false, pattern.as_str()),
                };
                if glob(&pattern.to_ascii_lowercase(), &name) {
                    if negated {
                        return false;
                    }
                    matched = true;
                }
            }
            matched
        }
    }
}

/// `*` (any run) and `?` (one character) globbing over the whole of `text`.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two throwaway ed25519 public keys.
    const KEY_A: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINIgQVRQsd/mjsMJFfGmORRNVGXvN6+xzWD7Tw7mhsr2";
    const KEY_B: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEE4WGEdVFyxlqmOPdRAlEvt4Zs3zcC0vRSxjyzW348e";

    fn blob(key: &str) -> Vec<u8> {
        PublicKey::from_openssh(key).unwrap().to_bytes().unwrap()
    }

    #[test]
    fn names_patterns_and_ports_match_as_openssh_matches_them() {
        let hosts = KnownHosts::parse(
            &format!(
                "# comment\n\ngit.example.com,10.0.0.1 {KEY_A}\n[gitea.local]:2222 {KEY_A}\n\
                 *.corp,!bad.corp {KEY_B}\n"
            ),
            "SLUICE_GIT_KNOWN_HOSTS",
        )
        .unwrap();
        assert_eq!(hosts.check("git.example.com", 22, &blob(KEY_A)), Ok(()));
        assert_eq!(hosts.check("GIT.example.com", 22, &blob(KEY_A)), Ok(()));
        assert_eq!(hosts.check("gitea.local", 2222, &blob(KEY_A)), Ok(()));
        assert_eq!(hosts.check("x.corp", 22, &blob(KEY_B)), Ok(()));

        let absent = hosts.check("gitea.local", 22, &blob(KEY_A)).unwrap_err();
        assert!(
            absent
                .contains("host `gitea.local` is not in the known hosts of SLUICE_GIT_KNOWN_HOSTS"),
            "{absent}"
        );
        assert!(absent.contains("ssh-ed25519 SHA256:"), "{absent}");
        let negated = hosts.check("bad.corp", 22, &blob(KEY_B)).unwrap_err();
        assert!(negated.contains("not in the known hosts"), "{negated}");
        let port = hosts
            .check("git.example.com", 2200, &blob(KEY_A))
            .unwrap_err();
        assert!(
            port.contains("`[git.example.com]:2200` is not")
                && port.contains("ssh-keyscan -p 2200 git.example.com"),
            "{port}"
        );

        let wrong = hosts
            .check("git.example.com", 22, &blob(KEY_B))
            .unwrap_err();
        assert!(
            wrong.contains("does not match the known hosts") && wrong.contains("(line 3)"),
            "{wrong}"
        );
    }

    #[test]
    fn hashed_names_and_revoked_keys() {
        // `ssh-keygen -H` form of `[127.0.0.1]:2222`, salt of 20 zero bytes.
        let mut mac = Hmac::<Sha1>::new_from_slice(&[0; 20]).unwrap();
        mac.update(b"[127.0.0.1]:2222");
        let hash = mac.finalize().into_bytes();
        let hashed = HostPatterns::HashedName {
            salt: vec![0; 20],
            hash: hash.into(),
        };
        let line = format!("{} {KEY_A}", hashed.to_string());
        assert!(line.starts_with("|1|"), "{line}");
        let hosts =
            KnownHosts::parse(&format!("{line}\n@revoked * {KEY_B}\n* {KEY_B}\n"), "S").unwrap();
        assert_eq!(hosts.check("127.0.0.1", 2222, &blob(KEY_A)), Ok(()));
        assert!(hosts.check("127.0.0.2", 2222, &blob(KEY_A)).is_err());
        let revoked = hosts.check("any", 22, &blob(KEY_B)).unwrap_err();
        assert!(revoked.contains("@revoked in S line 2"), "{revoked}");
    }

    #[test]
    fn bad_known_hosts_name_the_line() {
        let err =
            KnownHosts::parse(&format!("host {KEY_A}\nhost ssh-ed25519 !!!\n"), "S").unwrap_err();
        assert!(
            err.starts_with("line 2 is not a known_hosts entry"),
            "{err}"
        );
        let err = KnownHosts::parse("# nothing\n", "S").unwrap_err();
        assert!(err.contains("no known_hosts entry"), "{err}");
    }

    #[test]
    fn globs() {
        assert!(glob("*.example.com", "a.b.example.com"));
        assert!(glob("10.0.0.?", "10.0.0.7"));
        assert!(!glob("10.0.0.?", "10.0.0.17"));
        assert!(glob("*", ""));
        assert!(!glob("a*b", "ac"));
    }
}
