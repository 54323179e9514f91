//! `kvexact parity FILE...`: recompute every case of vector files and compare.
//!
//! The checking is `kvexact_conformance::parity` (the file's format detected, every case
//! recomputed under the contract of the release the file names); this module reads the
//! arguments, prints one line per failing case and the closing `N passed, M failed` line.

use kvexact_conformance::parity::{check_path, Options};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `kvexact parity`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Folder of `<org>__<name>/` model directories (tokenizer.json, chat template), needed
    /// for template vectors.
    #[arg(long)]
    pub models: Option<PathBuf>,
    /// Template vectors: send each chat case through the gateway's strict encoder with the
    /// refusal codes it hits lifted (as far as the file's release lists them as liftable) and
    /// compare with the engine's ids or refusal (`kvexact_conformance::templates::check_file_lifted`);
    /// prints the per-engine counts as notes. Other files are checked as without it.
    #[arg(long)]
    pub lifted: bool,
    /// Vector files (block hashes, KV events, templates, gateway fixtures).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

/// Runs the command; exit 1 when any case failed or any file could not be read.
pub fn run(args: &Args) -> ExitCode {
    let mut passed = 0usize;
    let mut failed = 0usize;
    let mut unknown = 0usize;
    let mut broken_files = 0usize;
    for path in &args.files {
        let opts = Options {
            models: args.models.as_deref(),
            lifted: args.lifted,
        };
        match check_path(path, opts) {
            Ok(report) => {
                for note in &report.notes {
                    println!("{}: note: {note}", path.display());
                }
                for case in &report.unknown {
                    unknown += 1;
                    if let Some(why) = &case.failure {
                        println!("UNKNOWN {}: {}: {why}", path.display(), case.name);
                    }
                }
                for case in report.cases {
                    match case.failure {
                        None => passed += 1,
                        Some(why) => {
                            failed += 1;
                            println!("FAIL {}: {}: {why}", path.display(), case.name);
                        }
                    }
                }
            }
            Err(why) => {
                broken_files += 1;
                println!("ERROR {}: {why}", path.display());
            }
        }
    }
    if unknown > 0 {
        println!(
            "{unknown} unknown: answered `unknown` for a reason the release's catalog entry explains (neither passed nor failed)"
        );
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 || broken_files > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
