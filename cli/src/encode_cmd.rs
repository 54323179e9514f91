//! `kvexact encode` (to be filled by the kvtemplate work).
use std::process::ExitCode;

/// Arguments of `kvexact encode`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: &Args) -> ExitCode {
    eprintln!("not implemented yet");
    ExitCode::from(2)
}
