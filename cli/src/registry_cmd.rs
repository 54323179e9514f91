//! `kvexact registry …` (to be filled by the registry work).
use std::process::ExitCode;

/// `kvexact registry` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Load a registry directory as the gateway would.
    Verify,
}

/// Runs the subcommand.
pub fn run(_cmd: &Command) -> ExitCode {
    eprintln!("not implemented yet");
    ExitCode::from(2)
}
