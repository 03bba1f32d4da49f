//! The container image, checked without a container engine (none runs on the development
//! machine, so the Dockerfile is never built here). The Dockerfile's runtime stage (its last
//! `FROM`) is parsed, then checked against what the binary needs:
//!
//! - every shared library `ldd` lists for the binary belongs to a Debian package that
//!   `debian:bookworm-slim` ships or that the stage installs (`dpkg -S` on this machine, which is
//!   bookworm like the image, maps each library file to its package);
//! - every program the source starts (`Command::new("...")` anywhere under `src/`) is installed
//!   in the stage, or is named in [`NOT_IN_IMAGE`] with the reason it is not needed there;
//! - files the binary reads at run time that no library brings ([`RUNTIME_DATA`]);
//! - `EXPOSE`, the install manifests' ports and probes and the daemon's default listen address
//!   agree, and the stage's `USER` is the manifests' non-root user.
//!
//! `ldd` runs on the debug binary (`CARGO_BIN_EXE_sluice`), which the test harness builds: the
//! image ships the release build, whose link line is the same (the profiles differ in
//! optimisation and debug info, not in linked libraries). Compared by hand on 2026-11-30: the
//! build stage's command, `cargo build --release --locked --bin sluice`, run on a copy of the
//! Docker build context (`.dockerignore` applied: no e2e/, target/ or .git), built and its
//! `ldd` listed the same seven libraries as the debug binary's (libssl.so.3, libcrypto.so.3,
//! libz.so.1, libgcc_s.so.1, libm.so.6, libc.so.6, the loader). The check covers the build
//! machine's architecture; the arm64 image installs the same packages.
//!
//! Each check is a function from texts to a list of problems, so the tests at the bottom feed
//! it a Dockerfile with a package removed or the wrong port and see it fail.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;
use sluice::cli::run::{DEFAULT_LISTEN, DEFAULT_PORT};

use crate::support::dockerfile::{instructions, runtime_stage, Stage};
use crate::support::{read_repo_file as read, repo_root as root, repo_yaml as yaml};

/// The packages of `debian:bookworm-slim` before the stage installs anything.
///
/// How this list was made (2026-11-30, on this bookworm machine, `/etc/os-release`
/// `VERSION_CODENAME=bookworm`): the image is a debootstrap `minbase`, which installs the
/// packages marked `Essential: yes` or `Priority: required` and whatever they depend on. The
/// seeds are the 35 lines of
/// `dpkg-query -W -f='${Package} ${Essential} ${Priority}\n' | awk '$2=="yes" || $3=="required"'`;
/// their `Pre-Depends` and `Depends`, followed transitively through the installed packages'
/// fields (first installed alternative of `a | b`, virtual names through `Provides`), give
/// these 90. Libraries are `Priority: optional` in bookworm, which is why `libc6`, `libgcc-s1`
/// and `zlib1g` are here only as dependencies. `libssl3` and `ca-certificates` are not.
const BOOKWORM_SLIM: &[&str] = &[
    "adduser",
    "apt",
    "base-files",
    "base-passwd",
    "bash",
    "bsdutils",
    "coreutils",
    "dash",
    "debconf",
    "debian-archive-keyring",
    "debianutils",
    "diffutils",
    "dpkg",
    "e2fsprogs",
    "findutils",
    "gcc-12-base",
    "gpgv",
    "grep",
    "gzip",
    "hostname",
    "init-system-helpers",
    "libacl1",
    "libapt-pkg6.0",
    "libattr1",
    "libaudit-common",
    "libaudit1",
    "libblkid1",
    "libbz2-1.0",
    "libc-bin",
    "libc6",
    "libcap-ng0",
    "libcap2",
    "libcom-err2",
    "libcrypt1",
    "libdb5.3",
    "libdebconfclient0",
    "libext2fs2",
    "libffi8",
    "libgcc-s1",
    "libgcrypt20",
    "libgmp10",
    "libgnutls30",
    "libgpg-error0",
    "libhogweed6",
    "libidn2-0",
    "liblocale-gettext-perl",
    "liblz4-1",
    "liblzma5",
    "libmd0",
    "libmount1",
    "libnettle8",
    "libp11-kit0",
    "libpam-modules",
    "libpam-modules-bin",
    "libpam-runtime",
    "libpam0g",
    "libpcre2-8-0",
    "libseccomp2",
    "libselinux1",
    "libsemanage-common",
    "libsemanage2",
    "libsepol2",
    "libsmartcols1",
    "libss2",
    "libstdc++6",
    "libsystemd0",
    "libtasn1-6",
    "libtinfo6",
    "libudev1",
    "libunistring2",
    "libuuid1",
    "libxxhash0",
    "libzstd1",
    "login",
    "logsave",
    "mawk",
    "mount",
    "ncurses-base",
    "ncurses-bin",
    "passwd",
    "perl-base",
    "sed",
    "sensible-utils",
    "sysvinit-utils",
    "tar",
    "tzdata",
    "usr-is-merged",
    "util-linux",
    "util-linux-extra",
    "zlib1g",
];

/// Programs the source starts that the image does not install: (program, why not, a source
/// file and a text in it that must still be there for the reason to hold).
const NOT_IN_IMAGE: &[(&str, &str, &str, &str)] = &[
(
    "ssh-keygen",
    "an optional fallback: ed25519 and ecdsa-sha2-nistp256 signing keys are signed in-process; \
     other key types go to ssh-keygen, and when it is missing the commit is refused with an \
     error that says to install openssh-client",
    "src/gitops/sign.rs",
    "cannot run ssh-keygen (install openssh-client)",
),
(
    "git",
    "`sluice adopt --push` runs on the operator's machine, with the operator's git and \
     credentials, not in the daemon's image; without git the branch is still written and the \
     error says to install git or push it by hand",
    "src/cli/adopt.rs",
    "cannot run git push (install git)",
)];

/// Files the binary reads at run time that no linked library brings: (package, why).
const RUNTIME_DATA: &[(&str, &str)] = &[(
    "ca-certificates",
    "/etc/ssl/certs, which https remotes (OpenSSL in libgit2) and https forges, Prometheus and \
     notifications (rustls-platform-verifier in reqwest) are verified against",
)];

/// The packages the image has: the base image's and the stage's.
fn image_packages(stage: &Stage) -> BTreeSet<&str> {
    BOOKWORM_SLIM
        .iter()
        .copied()
        .chain(stage.packages.iter().map(String::as_str))
        .collect()
}

/// The shared library files `ldd` lists for `binary` (the vDSO, which has no file, left out).
fn ldd(binary: &Path) -> Vec<String> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .expect("ldd (libc-bin) must be installed");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ldd {}: {text}", binary.display());
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            assert!(!l.contains("not found"), "ldd {}: {l}", binary.display());
            let path = match l.split_once("=>") {
                Some((_, right)) => right.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| path.to_string())
        })
        .collect()
}

/// The Debian packages that own `path` by `dpkg -S`, trying the other side of the /usr merge
/// (`ldd` may say /lib/... for a file a package lists as /usr/lib/..., and the other way).
fn owners(path: &str) -> Result<Vec<String>, String> {
    let mut candidates = vec![path.to_string()];
    if let Ok(real) = std::fs::canonicalize(path) {
        candidates.push(real.to_string_lossy().into_owned());
    }
    for p in candidates.clone() {
        match p.strip_prefix("/usr") {
            Some(rest) => candidates.push(rest.to_string()),
            None => candidates.push(format!("/usr{p}")),
        }
    }
    for candidate in &candidates {
        let out = Command::new("dpkg")
            .args(["-S", candidate])
            .output()
            .expect("dpkg must be installed (the test runs on Debian bookworm)");
        if !out.status.success() {
            continue;
        }
        let text = String::from_utf8_lossy(&out.stdout);
        for line in text.lines().filter(|l| !l.starts_with("diversion ")) {
            if let Some((packages, _)) = line.split_once(": ") {
                return Ok(packages
                    .split(", ")
                    .map(|p| p.split(':').next().unwrap_or(p).trim().to_string())
                    .collect());
            }
        }
    }
    Err(format!(
        "no Debian package owns {path} (tried {candidates:?})"
    ))
}

/// Libraries in `libraries` that no package of the image provides.
fn library_problems(stage: &Stage, libraries: &[String]) -> Vec<String> {
    let have = image_packages(stage);
    let mut problems = Vec::new();
    for lib in libraries {
        match owners(lib) {
            Ok(packages) if packages.iter().any(|p| have.contains(p.as_str())) => {}
            Ok(packages) => problems.push(format!(
                "the binary links {lib}, from {}, which bookworm-slim lacks and the runtime \
                 stage does not install",
                packages.join(" or ")
            )),
            Err(e) => problems.push(e),
        }
    }
    problems
}

/// Packages of [`RUNTIME_DATA`] the image lacks.
fn data_problems(stage: &Stage) -> Vec<String> {
    let have = image_packages(stage);
    RUNTIME_DATA
        .iter()
        .filter(|(package, _)| !have.contains(package))
        .map(|(package, why)| {
            format!("the runtime stage does not install {package}, which brings {why}")
        })
        .collect()
}

/// Every `Command::new(...)` in `sources` (path, text): the program, or an error naming the
/// file and line when it is not a string literal.
fn started_programs(sources: &[(String, String)]) -> Vec<Result<(String, String), String>> {
    const CALL: &str = "Command::new(";
    let mut found = Vec::new();
    for (path, text) in sources {
        for (i, line) in text.lines().enumerate() {
            let mut rest = line;
            while let Some(at) = rest.find(CALL) {
                rest = &rest[at + CALL.len()..];
                let literal = rest
                    .trim_start()
                    .strip_prefix('"')
                    .and_then(|r| r.split_once('"'))
                    .map(|(program, _)| program.to_string());
                found.push(match literal {
                    Some(program) => Ok((program, format!("{path}:{}", i + 1))),
                    None => Err(format!(
                        "{path}:{}: Command::new without a string literal: the image check \
                         cannot tell which program it starts",
                        i + 1
                    )),
                });
            }
        }
    }
    found
}

/// The Debian packages that ship `program` on this machine: the first copy on `PATH` that a
/// package owns (a copy in /usr/local, such as a locally built git, is nobody's).
fn program_owners(program: &str) -> Result<Vec<String>, String> {
    let copies: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join(program))
        .filter(|p| p.is_file())
        .collect();
    copies
        .iter()
        .find_map(|path| owners(&path.to_string_lossy()).ok())
        .ok_or_else(|| {
            format!(
                "no Debian package ships {program} here ({copies:?}), so its package is unknown"
            )
        })
}

/// Programs `sources` start that the image neither installs nor names in [`NOT_IN_IMAGE`].
fn program_problems(stage: &Stage, sources: &[(String, String)]) -> Vec<String> {
    let have = image_packages(stage);
    let mut problems = Vec::new();
    for found in started_programs(sources) {
        let (program, at) = match found {
            Ok(found) => found,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        if let Some((_, _, file, text)) = NOT_IN_IMAGE.iter().find(|(p, ..)| *p == program) {
            let holds = sources
                .iter()
                .any(|(path, source)| path == file && source.contains(text));
            if !holds {
                problems.push(format!(
                    "{at}: {program} is left out of the image because {file} refuses its \
                     absence clearly, but {file} no longer says {text:?}"
                ));
            }
            continue;
        }
        match program_owners(&program) {
            Ok(packages) if packages.iter().any(|p| have.contains(p.as_str())) => {}
            Ok(packages) => problems.push(format!(
                "{at}: starts {program}, from {}, which the runtime stage does not install \
                 (install it, or name it in NOT_IN_IMAGE with the reason)",
                packages.join(" or ")
            )),
            Err(e) => problems.push(format!("{at}: {e}")),
        }
    }
    problems
}

/// The port a probe, Service or `--listen` refers to: a number, or the name of one of the
/// container's ports.
fn resolve_port(port: &Json, named: &[(String, u16)]) -> Option<u16> {
    match port {
        Json::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
        Json::String(name) => named.iter().find(|(n, _)| n == name).map(|(_, p)| *p),
        _ => None,
    }
}

/// Disagreements between the stage's `EXPOSE`, `USER`, `ENTRYPOINT`/`CMD`, the Deployment and
/// Service of `examples/install/`, and the daemon's default listen address.
fn wiring_problems(stage: &Stage, deployment: &Json, service: &Json) -> Vec<String> {
    let mut problems = Vec::new();
    let default: std::net::SocketAddr = DEFAULT_LISTEN.parse().expect("DEFAULT_LISTEN");
    if default.port() != DEFAULT_PORT {
        problems.push(format!(
            "DEFAULT_LISTEN {DEFAULT_LISTEN} is not on DEFAULT_PORT {DEFAULT_PORT}"
        ));
    }
    let exposed = |what: &str, port: Option<u16>, problems: &mut Vec<String>| {
        if port.is_none_or(|p| !stage.expose.contains(&p)) {
            problems.push(format!(
                "{what} is port {port:?}, which the Dockerfile does not EXPOSE ({:?})",
                stage.expose
            ));
        }
    };

    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let named: Vec<(String, u16)> = container["ports"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| {
            let port = u16::try_from(p["containerPort"].as_u64()?).ok()?;
            Some((p["name"].as_str().unwrap_or_default().to_string(), port))
        })
        .collect();
    if named.is_empty() {
        problems.push("deployment.yaml: the container declares no ports".to_string());
    }
    for (name, port) in &named {
        exposed(
            &format!("deployment.yaml: containerPort {name}"),
            Some(*port),
            &mut problems,
        );
    }
    let args: Vec<&str> = container["args"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(Json::as_str)
        .collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| *a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
    };
    // The image exposes the daemon's default port and the metrics and probe ports the
    // manifest binds.
    let probes = flag("--probe-listen");
    let metrics = flag("--metrics-listen");
    let want: Vec<u16> = [
        Some(DEFAULT_PORT),
        metrics.map(|a| a.port()),
        probes.map(|a| a.port()),
    ]
    .into_iter()
    .flatten()
    .collect();
    if stage.expose != want {
        problems.push(format!(
            "Dockerfile: EXPOSE {:?}, but the daemon listens on {DEFAULT_PORT} by default{}{}",
            stage.expose,
            metrics.map_or(String::new(), |a| format!(
                ", deployment.yaml's --metrics-listen on {}",
                a.port()
            )),
            probes.map_or(String::new(), |a| format!(
                " and deployment.yaml's --probe-listen on {}",
                a.port()
            ))
        ));
    }
    match probes {
        Some(addr) if addr.ip().is_unspecified() => {}
        _ => problems.push(format!(
            "deployment.yaml: args {args:?} do not --probe-listen on all addresses (the \
             default is loopback only, which kubelet probes cannot reach)"
        )),
    }
    let listen = flag("--listen");
    match listen {
        Some(addr) if addr.ip().is_unspecified() => exposed(
            "deployment.yaml: --listen",
            Some(addr.port()),
            &mut problems,
        ),
        _ => problems.push(format!(
            "deployment.yaml: args {args:?} do not --listen on all addresses (the default \
             {DEFAULT_LISTEN} is loopback only, which kubelet probes cannot reach)"
        )),
    }
    for probe in ["livenessProbe", "readinessProbe"] {
        let port = &container[probe]["httpGet"]["port"];
        exposed(
            &format!("deployment.yaml: {probe} ({port})"),
            resolve_port(port, &named),
            &mut problems,
        );
    }
    for port in service["spec"]["ports"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let target = &port["targetPort"];
        exposed(
            &format!("service.yaml: targetPort {target}"),
            resolve_port(target, &named),
            &mut problems,
        );
    }

    // The user: numeric (runAsNonRoot cannot check a name), not root, the manifest's.
    let ids: Option<Vec<u64>> = stage
        .user
        .as_deref()
        .map(|u| {
            u.split(':')
                .map(|id| id.parse().ok())
                .collect::<Option<_>>()
        })
        .unwrap_or_default();
    let security = &pod["securityContext"];
    match ids.as_deref() {
        Some([uid, gid]) if *uid != 0 => {
            if security["runAsUser"] != *uid || security["runAsGroup"] != *gid {
                problems.push(format!(
                    "Dockerfile: USER {uid}:{gid}, but deployment.yaml runs as {}:{}",
                    security["runAsUser"], security["runAsGroup"]
                ));
            }
        }
        _ => problems.push(format!(
            "Dockerfile: USER {:?} is not a numeric non-root uid:gid",
            stage.user
        )),
    }

    // The entrypoint is the binary the build stage copied in; the default command is the daemon,
    // as the Deployment's args say.
    match stage.entrypoint.as_slice() {
        [binary] if stage.copied.contains(binary) => {}
        other => problems.push(format!(
            "Dockerfile: ENTRYPOINT {other:?} is not the copied binary ({:?})",
            stage.copied
        )),
    }
    if stage.cmd != ["run"] || args.first() != Some(&"run") {
        problems.push(format!(
            "Dockerfile CMD {:?} and deployment.yaml args {args:?} do not both run the daemon",
            stage.cmd
        ));
    }
    problems
}

/// Every check on the Dockerfile `text` against the binary's `libraries` and the `sources`.
fn image_problems(text: &str, libraries: &[String], sources: &[(String, String)]) -> Vec<String> {
    let stage = match runtime_stage(text) {
        Ok(stage) => stage,
        Err(e) => return vec![e],
    };
    let mut problems = Vec::new();
    if stage.from != "debian:bookworm-slim"
        || !stage.earlier_from.iter().any(|f| f.contains("bookworm"))
    {
        problems.push(format!(
            "Dockerfile: the runtime stage is {:?} after {:?}: the check knows \
             debian:bookworm-slim built on a bookworm image (the libraries the build links are \
             the ones the runtime installs)",
            stage.from, stage.earlier_from
        ));
    }
    problems.extend(library_problems(&stage, libraries));
    problems.extend(data_problems(&stage));
    problems.extend(program_problems(&stage, sources));
    problems.extend(wiring_problems(
        &stage,
        &yaml("examples/install/deployment.yaml"),
        &yaml("examples/install/service.yaml"),
    ));
    problems
}

/// Every `.rs` file under `src/` (path relative to the repository, text).
fn sources() -> Vec<(String, String)> {
    walkdir::WalkDir::new(root().join("src"))
        .sort_by_file_name()
        .into_iter()
        .map(|e| e.expect("walk src"))
        .filter(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "rs"))
        .map(|e| {
            let rel = e.path().strip_prefix(root()).expect("under root");
            let text = std::fs::read_to_string(e.path()).expect("read source");
            (
                rel.to_string_lossy().into_owned(),
                without_test_module(&text),
            )
        })
        .collect()
}

/// The text before a file's `#[cfg(test)] mod ...`: unit tests are not in the binary, so the
/// programs they start (openssl making a throwaway key) need not be in the image.
fn without_test_module(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "))
        .unwrap_or(lines.len());
    lines[..end].join("\n")
}

/// The bookworm this check's package names and `dpkg -S` answers are valid for.
fn assert_on_bookworm() {
    let release = std::fs::read_to_string("/etc/os-release").expect("/etc/os-release");
    assert!(
        release.lines().any(|l| l == "VERSION_CODENAME=bookworm"),
        "the image check maps libraries to bookworm packages and needs a bookworm machine:\n\
         {release}"
    );
}

fn binary_libraries() -> Vec<String> {
    assert_on_bookworm();
    let libraries = ldd(Path::new(env!("CARGO_BIN_EXE_sluice")));
    assert!(
        libraries.iter().any(|l| l.contains("libc.so")),
        "ldd found no libc: {libraries:?}"
    );
    libraries
}

/// `text` with `word` taken out of every line it is a whole word of (there must be one).
fn without(text: &str, word: &str) -> String {
    let mut removed = false;
    let out: Vec<String> = text
        .lines()
        .map(|l| {
            let words: Vec<&str> = l.split(' ').collect();
            if words.contains(&word) {
                removed = true;
                words
                    .into_iter()
                    .filter(|w| *w != word)
                    .collect::<Vec<_>>()
                    .join(" ")
            } else {
                l.to_string()
            }
        })
        .collect();
    assert!(removed, "the Dockerfile does not name {word}");
    out.join("\n")
}

#[test]
fn the_runtime_stage_carries_every_library_program_and_port_the_binary_needs() {
    let text = read("Dockerfile");
    let stage = runtime_stage(&text).expect("the Dockerfile parses");
    assert_eq!(stage.from, "debian:bookworm-slim");
    assert!(!stage.packages.is_empty(), "{stage:?}");
    let problems = image_problems(&text, &binary_libraries(), &sources());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_image_check_reports_a_library_package_the_stage_no_longer_installs() {
    let libraries = binary_libraries();
    let owners: Vec<Vec<String>> = libraries.iter().map(|l| owners(l).unwrap()).collect();
    assert!(
        owners.iter().any(|o| o.iter().any(|p| p == "libssl3")),
        "ldd no longer needs libssl3 ({libraries:?}): drop it from the Dockerfile and remove \
         another needed package here"
    );
    let text = without(&read("Dockerfile"), "libssl3");
    let problems = image_problems(&text, &libraries, &sources());
    assert!(
        problems
            .iter()
            .any(|p| p.contains("libssl.so.3") && p.contains("from libssl3")),
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("libcrypto.so.3") && p.contains("from libssl3")),
        "{problems:#?}"
    );
    assert_eq!(problems.len(), 2, "{problems:#?}");
}

#[test]
fn the_image_check_reports_missing_ca_certificates() {
    let text = without(&read("Dockerfile"), "ca-certificates");
    let problems = image_problems(&text, &binary_libraries(), &sources());
    assert_eq!(
        problems,
        [
            "the runtime stage does not install ca-certificates, which brings /etc/ssl/certs, \
             which https remotes (OpenSSL in libgit2) and https forges, Prometheus and \
             notifications (rustls-platform-verifier in reqwest) are verified against"
        ]
    );
}

#[test]
fn the_image_check_reports_a_started_program_the_stage_lacks() {
    let mut sources = sources();
    sources.push((
        "src/extra.rs".to_string(),
        "fn f() { let _ = std::process::Command::new(\"openssl\").arg(\"version\"); }\n\
         fn g(p: &str) { let _ = tokio::process::Command::new(p); }\n"
            .to_string(),
    ));
    let problems = image_problems(&read("Dockerfile"), &binary_libraries(), &sources);
    assert_eq!(
        problems,
        [
            "src/extra.rs:1: starts openssl, from openssl, which the runtime stage does not install \
             (install it, or name it in NOT_IN_IMAGE with the reason)",
            "src/extra.rs:2: Command::new without a string literal: the image check cannot tell \
             which program it starts",
        ]
    );
}

#[test]
fn ssh_keygen_stays_out_of_the_image_only_while_its_absence_is_refused_clearly() {
    let sources = sources();
    let programs: Vec<String> = started_programs(&sources)
        .into_iter()
        .map(|found| found.expect("a literal program").0)
        .collect();
    assert!(programs.contains(&"ssh-keygen".to_string()), "{programs:?}");
    let stage = runtime_stage(&read("Dockerfile")).unwrap();
    assert_eq!(program_problems(&stage, &sources), Vec::<String>::new());
    // sign.rs without its refusal: the reason no longer holds and the check says so.
    let (_, _, file, refusal) = NOT_IN_IMAGE[0];
    let changed: Vec<(String, String)> = sources
        .into_iter()
        .map(|(path, text)| {
            let text = if path == file {
                assert!(text.contains(refusal), "{file}");
                text.replace(refusal, "cannot run ssh-keygen")
            } else {
                text
            };
            (path, text)
        })
        .collect();
    let problems = program_problems(&stage, &changed);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].starts_with("src/gitops/sign.rs:")
            && problems[0].contains("ssh-keygen is left out of the image")
            && problems[0].contains("no longer says"),
        "{problems:#?}"
    );
}

#[test]
fn the_image_check_reports_an_expose_the_daemon_does_not_listen_on() {
    let text =
        read("Dockerfile").replace(&format!("EXPOSE {DEFAULT_PORT} 8725 8081"), "EXPOSE 9090");
    let problems = image_problems(&text, &binary_libraries(), &sources());
    assert!(
        problems
            .iter()
            .any(|p| p.contains("EXPOSE [9090], but the daemon listens on 8723")),
        "{problems:#?}"
    );
    for what in [
        "containerPort http",
        "--listen",
        "livenessProbe",
        "readinessProbe",
        "targetPort",
    ] {
        assert!(
            problems
                .iter()
                .any(|p| p.contains(what) && p.contains("does not EXPOSE ([9090])")),
            "{what}: {problems:#?}"
        );
    }
}

#[test]
fn the_image_check_reads_users_entrypoints_and_continuations() {
    let text = "FROM rust:1-bookworm AS build\nRUN cargo build\n\
                FROM debian:bookworm-slim\n\
                # a comment\n\
                RUN apt-get update && apt-get install -y \\\n  \
                # inside the continuation\n  \
                ca-certificates=2023 libssl3 ; echo done\n\
                COPY --from=build /src/sluice /usr/local/bin/sluice\n\
                USER 0:0\nEXPOSE 8723/tcp 8725 8081\n\
                ENTRYPOINT /usr/local/bin/sluice run\n";
    assert_eq!(
        runtime_stage(text).unwrap_err(),
        "Dockerfile:11: ENTRYPOINT: not the exec form [\"...\"]: the shell form runs sluice \
         under /bin/sh, which does not pass SIGTERM on"
    );
    let text = text.replace(
        "ENTRYPOINT /usr/local/bin/sluice run",
        "ENTRYPOINT [\"/usr/local/bin/sluice\"]\nCMD [\"run\"]",
    );
    let stage = runtime_stage(&text).unwrap();
    assert_eq!(stage.packages, ["ca-certificates", "libssl3"]);
    assert_eq!(stage.expose, [8723, 8725, 8081]);
    assert_eq!(stage.earlier_from, ["rust:1-bookworm AS build"]);
    let problems = wiring_problems(
        &stage,
        &yaml("examples/install/deployment.yaml"),
        &yaml("examples/install/service.yaml"),
    );
    assert_eq!(
        problems,
        ["Dockerfile: USER Some(\"0:0\") is not a numeric non-root uid:gid"]
    );
}

/// What the release workflow `wf` (release.yml, parsed) lacks to push a signed multi-arch image
/// with an SBOM and provenance.
/// `owner/name@<40 hex digits>`: an action pinned to one commit.
fn is_pinned_to_a_commit(action: &str) -> bool {
    action.split_once('@').is_some_and(|(_, v)| {
        v.len() == 40
            && v.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[test]
fn every_action_of_every_workflow_is_pinned_to_a_commit() {
    for file in ["ci.yml", "release.yml"] {
        let wf = yaml(&format!(".github/workflows/{file}"));
        let jobs = wf["jobs"].as_object().expect("jobs");
        let mut seen = 0;
        for (job, body) in jobs {
            for step in body["steps"].as_array().into_iter().flatten() {
                if let Some(action) = step["uses"].as_str() {
                    seen += 1;
                    assert!(
                        is_pinned_to_a_commit(action),
                        "{file}: job {job}: {action} is not pinned to a commit SHA"
                    );
                }
            }
        }
        assert!(seen > 0, "{file}: no action read");
    }
    assert!(!is_pinned_to_a_commit("actions/checkout@v4"));
    assert!(!is_pinned_to_a_commit("actions/checkout@main"));
}

fn release_problems(wf: &Json) -> Vec<String> {
    let mut problems = Vec::new();
    let mut want = |ok: bool, what: &str| {
        if !ok {
            problems.push(format!("release.yml: {what}"));
        }
    };
    want(
        wf["on"]["push"]["tags"] == serde_json::json!(["v*"]),
        "runs on version tags (on.push.tags [\"v*\"])",
    );
    for (permission, level) in [
        ("contents", "read"),
        ("packages", "write"),
        ("id-token", "write"),
        ("attestations", "write"),
    ] {
        want(
            wf["permissions"][permission] == level,
            &format!("permissions.{permission}: {level}"),
        );
    }
    let no_steps = Vec::new();
    let steps = wf["jobs"]["image"]["steps"].as_array().unwrap_or(&no_steps);
    let uses = |s: &Json, action: &str| {
        s["uses"]
            .as_str()
            .is_some_and(|u| u.split('@').next() == Some(action))
    };
    let position = |action: &str| steps.iter().position(|s| uses(s, action));
    let qemu = position("docker/setup-qemu-action");
    let buildx = position("docker/setup-buildx-action");
    let build = position("docker/build-push-action");
    let installer = position("sigstore/cosign-installer");
    want(
        qemu.is_some() && qemu < buildx && buildx < build,
        "sets up QEMU, then buildx, then builds (the arm64 half runs under QEMU)",
    );
    let build = build.map(|i| &steps[i]).unwrap_or(&Json::Null);
    let platforms: BTreeSet<&str> = build["with"]["platforms"]
        .as_str()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .collect();
    want(
        platforms == BTreeSet::from(["linux/amd64", "linux/arm64"]),
        "builds platforms linux/amd64,linux/arm64",
    );
    want(build["with"]["push"] == true, "pushes the image");
    want(
        build["with"]["sbom"] == true,
        "attaches an SBOM (sbom: true)",
    );
    want(
        build["with"]["provenance"] == "mode=max",
        "attaches provenance (provenance: mode=max)",
    );
    let digest = format!(
        "${{{{ steps.{}.outputs.digest }}}}",
        build["id"].as_str().unwrap_or("<no id>")
    );
    let sign = steps.iter().position(|s| {
        s["run"]
            .as_str()
            .is_some_and(|r| r.contains("cosign sign") && r.contains("--yes"))
    });
    want(
        installer.is_some() && installer < sign,
        "installs cosign, then runs `cosign sign --yes`",
    );
    match sign.map(|i| &steps[i]) {
        Some(step) => {
            let run = step["run"].as_str().unwrap_or_default();
            let env = &step["env"];
            let by_digest =
                env.as_object().into_iter().flatten().any(|(name, value)| {
                    value == &digest && run.contains(&format!("@${{{name}}}"))
                });
            want(
                by_digest,
                &format!("signs IMAGE@DIGEST with the digest {digest} the build pushed"),
            );
            want(
                !run.contains("--key"),
                "signs keyless (no --key: the certificate comes from the workflow's OIDC token)",
            );
        }
        None => want(false, "signs the image (`cosign sign --yes`)"),
    }
    // Every action is pinned to a commit, as ci.yml pins them: a tag can be moved to other code.
    for step in steps {
        if let Some(action) = step["uses"].as_str() {
            want(
                is_pinned_to_a_commit(action),
                &format!("{action} is pinned to a commit SHA (@<40 hex digits>)"),
            );
        }
    }
    problems
}

#[test]
fn release_workflow_signs_a_multi_arch_image_with_sbom_and_provenance() {
    let wf = yaml(".github/workflows/release.yml");
    assert_eq!(release_problems(&wf), Vec::<String>::new());
    // QEMU builds arm64 natively from the same Dockerfile; a build stage pinned to the build
    // machine (`FROM --platform=$BUILDPLATFORM`) would copy an amd64 binary into the arm64
    // image unless the Dockerfile also cross-compiled.
    let text = read("Dockerfile");
    for (line, word, rest) in instructions(&text) {
        assert!(
            !(word == "FROM" && rest.contains("--platform")),
            "Dockerfile:{line}: FROM {rest}: the arm64 image is built under QEMU, not cross-compiled"
        );
    }
}

#[test]
fn the_release_check_reports_a_single_arch_unsigned_image() {
    let mut wf = yaml(".github/workflows/release.yml");
    let steps = wf["jobs"]["image"]["steps"].as_array_mut().expect("steps");
    steps.retain(|s| !s["run"].as_str().is_some_and(|r| r.contains("cosign sign")));
    for step in steps.iter_mut() {
        if step["uses"]
            .as_str()
            .is_some_and(|u| u.starts_with("docker/build-push-action@"))
        {
            step["with"]["platforms"] = "linux/amd64".into();
            step["with"]["sbom"] = false.into();
            step["with"]["provenance"] = "mode=min".into();
        }
        if step["uses"]
            .as_str()
            .is_some_and(|u| u.starts_with("actions/checkout@"))
        {
            step["uses"] = "actions/checkout@main".into();
        }
    }
    wf["permissions"]
        .as_object_mut()
        .expect("permissions")
        .remove("id-token");
    assert_eq!(
        release_problems(&wf),
        [
            "release.yml: permissions.id-token: write",
            "release.yml: builds platforms linux/amd64,linux/arm64",
            "release.yml: attaches an SBOM (sbom: true)",
            "release.yml: attaches provenance (provenance: mode=max)",
            "release.yml: installs cosign, then runs `cosign sign --yes`",
            "release.yml: signs the image (`cosign sign --yes`)",
            "release.yml: actions/checkout@main is pinned to a commit SHA (@<40 hex digits>)",
        ]
    );
}
