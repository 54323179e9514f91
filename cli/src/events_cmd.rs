//! `kvexact events …` (to be filled by the events work).
use std::process::ExitCode;

/// `kvexact events` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Decode wire bytes of one engine's KV-event format and print the batch as JSON.
    Decode,
}

/// Runs the subcommand.
pub fn run(_cmd: &Command) -> ExitCode {
    eprintln!("not implemented yet");
    ExitCode::from(2)
}
