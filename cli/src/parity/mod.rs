//! `kvexact parity FILE...`: recompute every case of vector files and compare.
//!
//! Each vector format has a checker module with `detect` (does this document look like my
//! format?) and `check` (recompute every case). This module reads the files, dispatches, prints
//! one line per failing case and the closing `N passed, M failed` line.
//!
//! Every file names its engine and engine version; the checkers apply the contract of exactly
//! that release ([`contract_of`]: `kvprobe::contract::resolve`). A file naming a version no
//! release covers is refused (`UNKNOWN_ENGINE_VERSION`), never checked under other rules.

mod events;
mod hashes;
mod templates;

use serde_json::Value;
use std::path::{Path, PathBuf};
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
    /// compare with the engine's ids or refusal (`kvtemplate::vectors::check_file_lifted`);
    /// prints the per-engine counts as notes. Other files are checked as without it.
    #[arg(long)]
    pub lifted: bool,
    /// Vector files (block hashes, KV events, templates, gateway fixtures).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

/// What a checker needs besides the document.
pub struct Context<'a> {
    /// The file being checked.
    pub path: &'a Path,
    /// `--models`, if given.
    pub models: Option<&'a Path>,
    /// `--lifted`.
    pub lifted: bool,
}

/// The result of one case.
pub struct CaseOutcome {
    /// The case's name.
    pub name: String,
    /// `None` when the case passed; otherwise what differed (first differing block,
    /// expected vs got).
    pub failure: Option<String>,
}

/// The result of one file.
#[derive(Default)]
pub struct Report {
    /// One entry per case.
    pub cases: Vec<CaseOutcome>,
    /// Lines worth telling the operator (e.g. "render-only: no tokenizer").
    pub notes: Vec<String>,
}

/// Runs the command; exit 1 when any case failed or any file could not be read.
pub fn run(args: &Args) -> ExitCode {
    let mut passed = 0usize;
    let mut failed = 0usize;
    let mut broken_files = 0usize;
    for path in &args.files {
        let ctx = Context {
            path,
            models: args.models.as_deref(),
            lifted: args.lifted,
        };
        match check_file(&ctx) {
            Ok(report) => {
                for note in &report.notes {
                    println!("{}: note: {note}", path.display());
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
    println!("{passed} passed, {failed} failed");
    if failed > 0 || broken_files > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The contract of the release a vector file names (`engine`, `engine_version`), or the
/// refusal line.
pub fn contract_of(engine: &str, version: &str) -> Result<kvprobe::contract::Contract, String> {
    let e = match engine {
        "vllm" => kvprobe::Engine::Vllm,
        "sglang" => kvprobe::Engine::Sglang,
        "trtllm" => kvprobe::Engine::Trtllm,
        other => return Err(format!("REFUSED UNKNOWN_ENGINE: {other:?}")),
    };
    kvprobe::contract::resolve(e, version).map_err(|err| format!("REFUSED {}: {err}", err.code()))
}

fn check_file(ctx: &Context<'_>) -> Result<Report, String> {
    let bytes = std::fs::read(ctx.path).map_err(|e| format!("cannot read: {e}"))?;
    let doc: Value = serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}"))?;
    if hashes::detect(&doc) {
        hashes::check(&doc, ctx)
    } else if events::detect(&doc) {
        events::check(&doc, ctx)
    } else if templates::detect(&doc) {
        templates::check(&doc, ctx)
    } else {
        Err("not a vector file of a known format".to_string())
    }
}
