//! `kvexact models …`: the supported-models catalog for operators (docs/contracts/registry.md §10–11).
//!
//! Argument handling and printing only: the catalog drift, page render, install and weights
//! verification logic is `kvmodels`; the hub's HTTP client ([`hub::UreqFetch`])
//! is the one piece of I/O the library leaves to its caller.
//!
//! One binary replaces `modelctl.py`, `install-models.sh` and hand-run `sha256sum` checks. Every
//! subcommand reads the catalog `scripts/models/validated-models.yaml` (`--catalog FILE`); the
//! repository tree around it is found from the catalog's place (`<root>/scripts/models/`):
//! weights indexes in `<root>/scripts/models/weights/<profileId>.index`, committed profiles,
//! engine manifests, probe fixtures and banked templates under
//! `<root>/cicd/common/kv_hash/fixtures/`, the page `<root>/docs/SUPPORTED-MODELS.md` and the
//! support catalog `<root>/engine-contracts/support-catalog.yaml`.
//!
//! # Exit status
//!
//! `0` ok · `1` a check found a problem (`check` drift, `verify-weights` bad files) · `2` refused.
//! Every refusal is one line on stderr, `REFUSED <CODE>: <detail>`, with the codes of §11
//! (`MANIFEST_SCHEMA`, `MANIFEST_INVALID`, `INDEX_INVALID`, `INDEX_UNSAFE_PATH`,
//! `TOKEN_FILE_MODE`, `TOKEN_FILE_EMPTY`, `DOWNLOAD_DENIED`, `DOWNLOAD_FAILED`, `UNSAFE_PATH`,
//! `COMMITTED_FILE`, `UNKNOWN_MODEL`, `UNKNOWN_ENGINE`, `NO_ENGINE_MANIFEST`,
//! `TEMPLATE_SHA_MISMATCH`, `PROFILE_DRIFT`, `INDEX_SHA_MISMATCH`, `TOKENIZER_SHA_MISMATCH`,
//! `DISK_SPACE`, `WEIGHT_SHA_MISMATCH`) plus `WRITE_FAILED` (a local write failed: disk,
//! permissions), `SNAPSHOT_MISSING` (`--from-snapshot` lacks a file) and
//! `TOKENIZER_CONFIG_SHA_MISMATCH` (the upstream `tokenizer_config.json` is not the one the
//! weights index and the catalog's `tokenizerConfigSha256` pin, or those two disagree). With
//! `--json` the refusal is also printed on stdout as
//! `{"ok":false,"refused":{"code":…,"detail":…}}`.
//!
//! # Output formats (human; `--json` prints one JSON document on stdout instead)
//!
//! - `list`: one line per model, exactly `install-models.sh --list`:
//!   `format!("{:<28} {repo}@{rev[..12]}  gated=yes|no  vllm=<state>, sglang=<state>, …")`.
//!   JSON: `[{"profileId","repo","revision","gated","tuples":[{"engine","engineVersion","state"}]}]`.
//! - `check`: `DRIFT: <what>` per disagreement, then `supported-models: N disagreement(s)` or
//!   `supported-models: manifest, page, profiles, engine manifests, template provenance, weights
//!   indexes and support catalog agree`. JSON: `{"ok":bool,"drift":[…]}`.
//! - `render`: writes the page (atomically) and prints `wrote <path>`; `--stdout` prints the page.
//!   JSON: `{"ok":true,"path":…,"sha256":…}`.
//! - `verify-weights`: `MISSING  <file>` / `MISMATCH <file>` lines in index order, then
//!   `<profileId>: k/n files match <index>`; a progress bar on stderr only when stderr is a TTY.
//!   JSON: `{"ok","profileId","index","files","matched","missing":[…],"mismatch":[…]}`.
//! - `install`: per model `<id>: SKIP_<WHY> …` or `<id>: <repo>@<rev12> for <engine> (<state>)`
//!   followed by indented progress lines, then `installed N model(s), skipped M.` (`would
//!   install` with `--dry-run`) and, when something was installed, the restart reminder.
//!   A model whose repository has a `tokenizer_config.json` gets it staged beside
//!   `tokenizer.json` and pinned in its profile (`tokenizerConfigArtifact`); one without says
//!   so (`tokenizer_config.json: none upstream …`).
//!   JSON: `{"ok":true,"engine","dryRun","installed","skipped","models":[{"profileId","action",
//!   "detail","staged":[…],"tokenizerConfigSha256":…|null,"weights":{…}}]}`.

mod check;
mod hub;
mod install;
mod list;
mod render;
mod verify_weights;

use std::path::PathBuf;
use std::process::ExitCode;

/// The catalog path the scripts use, relative to the repository root.
pub const DEFAULT_CATALOG: &str = "scripts/models/validated-models.yaml";

/// `kvexact models` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// One line per model: profile id, repo@revision, gated, state per engine.
    List(list::Args),
    /// Drift gate: catalog, page, profiles, manifests, templates, weights indexes, support catalog.
    Check(check::Args),
    /// Write docs/SUPPORTED-MODELS.md from the catalog.
    Render(render::Args),
    /// Stage the profile registry (and optionally the pinned weights) for one engine.
    Install(install::Args),
    /// Check a snapshot directory against a model's weights index (read-only).
    VerifyWeights(verify_weights::Args),
}

/// Options every subcommand takes.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// The supported-models catalog; the repository tree is found around it.
    #[arg(long, value_name = "FILE", default_value = DEFAULT_CATALOG)]
    pub catalog: PathBuf,
    /// Print one JSON document on stdout instead of human-readable lines.
    #[arg(long)]
    pub json: bool,
}

/// What a subcommand that did not refuse found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Everything agreed / was done.
    Ok,
    /// A check found problems (exit 1).
    Failed,
}

/// Runs a `kvexact models` subcommand.
pub fn run(cmd: &Command) -> ExitCode {
    let (json, result) = match cmd {
        Command::List(a) => (a.common.json, list::run(a)),
        Command::Check(a) => (a.common.json, check::run(a)),
        Command::Render(a) => (a.common.json, render::run(a)),
        Command::Install(a) => (a.common.json, install::run(a)),
        Command::VerifyWeights(a) => (a.common.json, verify_weights::run(a)),
    };
    match result {
        Ok(Status::Ok) => ExitCode::SUCCESS,
        Ok(Status::Failed) => ExitCode::from(1),
        Err(r) => {
            let (code, detail) = (r.code(), r.to_string());
            eprintln!("REFUSED {code}: {detail}");
            if json {
                let v =
                    serde_json::json!({"ok": false, "refused": {"code": code, "detail": detail}});
                println!("{v}");
            }
            ExitCode::from(2)
        }
    }
}

/// Prints a JSON value on stdout (pretty, one document).
fn print_json(v: &serde_json::Value) {
    match serde_json::to_string_pretty(v) {
        Ok(s) => println!("{s}"),
        Err(e) => eprintln!("json output failed: {e}"),
    }
}
