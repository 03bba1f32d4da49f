#![forbid(unsafe_code)]

use std::io::IsTerminal;

use clap::Parser;

fn main() {
    let cli = sluice::cli::Cli::parse();
    // The loop commands log what they do; the others print their own answers.
    let default_level = match cli.command {
        sluice::cli::Command::Run(_) | sluice::cli::Command::Reconcile(_) => "info",
        _ => "warn",
    };
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        // Every line is redacted: no credential sluice read reaches the log.
        .with_writer(sluice::redact::LogWriter)
        // Colour only for a person at a terminal: a log file or a collector gets plain text.
        .with_ansi(std::io::stderr().is_terminal());
    match cli.log_format {
        sluice::cli::LogFormat::Json => subscriber.json().init(),
        sluice::cli::LogFormat::Text => subscriber.init(),
    }
    match sluice::cli::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {}", sluice::cli::error_text(&e));
            std::process::exit(2);
        }
    }
}
