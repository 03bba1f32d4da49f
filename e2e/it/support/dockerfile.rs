//! The Dockerfile as the image tests read it: the runtime stage (the last `FROM`) with its
//! packages, `RUN` lines, `ENV`, user, entrypoint and copies. `image.rs` checks the stage
//! against the binary; `image_run.rs` builds and runs its filesystem.

/// What the runtime stage of a Dockerfile says.
#[derive(Debug, Default)]
pub(crate) struct Stage {
    pub(crate) from: String,
    /// Every `FROM` before this one.
    pub(crate) earlier_from: Vec<String>,
    /// Packages named after `apt-get install`, options left out.
    pub(crate) packages: Vec<String>,
    /// Each `RUN`'s shell command, continuation lines joined.
    pub(crate) runs: Vec<String>,
    /// `ENV` pairs (the `KEY=value ...` form).
    pub(crate) env: Vec<(String, String)>,
    pub(crate) expose: Vec<u16>,
    pub(crate) user: Option<String>,
    pub(crate) entrypoint: Vec<String>,
    pub(crate) cmd: Vec<String>,
    /// `COPY --from=...` destinations.
    pub(crate) copied: Vec<String>,
}

/// The Dockerfile's instructions: continuation lines joined, comments and blank lines dropped,
/// each with the line it starts on.
pub(crate) fn instructions(text: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (body, continues) = match line.strip_suffix('\\') {
            Some(body) => (body.trim_end(), true),
            None => (line, false),
        };
        let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        if !joined.is_empty() {
            joined.push(' ');
        }
        joined.push_str(body);
        if continues {
            pending = Some((start, joined));
        } else {
            let (word, rest) = joined
                .split_once(char::is_whitespace)
                .unwrap_or((&joined, ""));
            out.push((start, word.to_ascii_uppercase(), rest.trim().to_string()));
        }
    }
    out
}

/// The last stage of `text` (the image that ships), or why it cannot be read.
pub(crate) fn runtime_stage(text: &str) -> Result<Stage, String> {
    let mut stage: Option<Stage> = None;
    let mut froms = Vec::new();
    for (line, word, rest) in instructions(text) {
        let at = |what: &str| format!("Dockerfile:{line}: {word}: {what}");
        if word == "FROM" {
            stage = Some(Stage {
                from: rest.clone(),
                earlier_from: froms.clone(),
                ..Stage::default()
            });
            froms.push(rest);
            continue;
        }
        let Some(s) = stage.as_mut() else {
            return Err(at("before the first FROM"));
        };
        match word.as_str() {
            "RUN" => {
                s.runs.push(rest.clone());
                for command in rest.split(['&', ';', '|']) {
                    let words: Vec<&str> = command.split_whitespace().collect();
                    let Some(install) = words.iter().position(|w| *w == "install") else {
                        continue;
                    };
                    if !words[..install]
                        .iter()
                        .any(|w| *w == "apt-get" || *w == "apt")
                    {
                        continue;
                    }
                    s.packages.extend(
                        words[install + 1..]
                            .iter()
                            .filter(|w| !w.starts_with('-'))
                            // `pkg=version` pins a version of pkg.
                            .map(|w| w.split('=').next().unwrap_or(w).to_string()),
                    );
                }
            }
            "EXPOSE" => {
                for port in rest.split_whitespace() {
                    let number = port.strip_suffix("/tcp").unwrap_or(port);
                    s.expose.push(
                        number
                            .parse()
                            .map_err(|_| at(&format!("{port} is not a TCP port")))?,
                    );
                }
            }
            "USER" => s.user = Some(rest),
            "ENV" => {
                for pair in rest.split_whitespace() {
                    let (key, value) = pair
                        .split_once('=')
                        .ok_or_else(|| at(&format!("{pair}: expected KEY=value")))?;
                    s.env.push((key.to_string(), value.to_string()));
                }
            }
            "ENTRYPOINT" | "CMD" => {
                let argv: Vec<String> =
                    serde_json::from_str(&rest).map_err(|_| {
                        at("not the exec form [\"...\"]: the shell form runs sluice under /bin/sh, \
                        which does not pass SIGTERM on")
                    })?;
                if word == "CMD" {
                    s.cmd = argv;
                } else {
                    s.entrypoint = argv;
                }
            }
            "COPY" if rest.starts_with("--from=") => {
                if let Some(dest) = rest.split_whitespace().last() {
                    s.copied.push(dest.to_string());
                }
            }
            _ => {}
        }
    }
    stage.ok_or_else(|| "Dockerfile: no FROM".to_string())
}
