//! `kvexact models install`: stage the profile registry for one engine (and optionally the
//! pinned weights) through `kvmodels::install` (docs/contracts/registry.md §1,
//! §11). Here: the arguments, the hub endpoint and token file from the environment, the
//! `docker pull` of `--pull-image`, and the printing (human lines or one JSON document).

use std::path::PathBuf;

use kvmodels::install::{
    image_plan, install, ImagePlan, InstallEvent, InstallOptions, InstallReport, ModelRecord,
    RecordAction,
};
use kvmodels::source_tree::SourceTree;

use super::hub::UreqFetch;
use super::list;
use super::{print_json, Common, Status};

/// Arguments of `kvexact models install`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub common: Common,
    /// Print the catalog's models (as `kvexact models list`) and stop.
    #[arg(long)]
    pub list: bool,
    /// Check and print what would be staged; write nothing, download nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Engine the registry is staged for (selects its engine-manifest set).
    #[arg(long, default_value = "vllm")]
    pub engine: String,
    /// Comma-separated profile ids (default: every model with a row for the engine).
    #[arg(long, value_delimiter = ',')]
    pub models: Vec<String>,
    /// Also install `candidate` rows (not supported; explicit opt-in).
    #[arg(long)]
    pub include_candidates: bool,
    /// Registry root (absolute).
    #[arg(long, default_value = "/etc/loxilb/kvprofiles")]
    pub registry_dir: PathBuf,
    /// Tokenizer directory (absolute).
    #[arg(long, default_value = "/etc/loxilb/tokenizers")]
    pub tokenizer_dir: PathBuf,
    /// Also download and verify the pinned weights snapshot under this directory (absolute).
    #[arg(long)]
    pub weights_dir: Option<PathBuf>,
    /// Hub access token file, mode 0600 or stricter (default: env HF_TOKEN_FILE). Hub URL: env
    /// HF_ENDPOINT (default https://huggingface.co).
    #[arg(long)]
    pub hf_token_file: Option<PathBuf>,
    /// Take tokenizer and weights from DIR/<org>__<name>/<rev>/ instead of the hub.
    #[arg(long, value_name = "DIR")]
    pub from_snapshot: Option<PathBuf>,
    /// Also `docker pull <image>@<digest>` of the engine (none for an engine without a registry
    /// image: `SKIP_NO_PULLABLE_IMAGE`).
    #[arg(long)]
    pub pull_image: bool,
}

/// The JSON form of one model's record.
fn record_json(r: &ModelRecord) -> serde_json::Value {
    if r.action == RecordAction::Skip {
        return serde_json::json!({"profileId": r.profile_id, "action": "skip", "detail": r.detail});
    }
    let weights = match &r.weights {
        Some(w) => serde_json::json!({
            "dir": w.dir,
            "files": w.files,
            "alreadyVerified": w.already_verified,
            "bytesToFetch": w.bytes_to_fetch,
            "fetched": w.fetched,
        }),
        None => serde_json::Value::Null,
    };
    serde_json::json!({
        "profileId": r.profile_id,
        "action": r.action.as_str(),
        "detail": r.detail,
        "staged": r.staged,
        "tokenizerConfigSha256": r.tokenizer_config_sha256,
        "weights": weights,
    })
}

/// `--pull-image`: the digest-pinned image of the engine's (last) release.
fn pull_image(tree: &SourceTree, a: &Args) -> Result<serde_json::Value, kvmodels::Error> {
    let say = |s: &str| {
        if !a.common.json {
            println!("{s}");
        }
    };
    let reference = match image_plan(&tree.catalog, &a.engine)? {
        ImagePlan::NoPullableImage { note } => {
            say(&format!(
                "image: SKIP_NO_PULLABLE_IMAGE {}: {note}",
                a.engine
            ));
            return Ok(serde_json::json!({"action": "skip", "detail": note}));
        }
        ImagePlan::Pull { reference } => reference,
    };
    if a.dry_run {
        say(&format!("image: would pull {reference}"));
        return Ok(serde_json::json!({"action": "would-pull", "reference": reference}));
    }
    let failed = |why: String| kvmodels::Error::Refusal {
        code: kvmodels::RefusalCode::DownloadFailed,
        detail: format!("docker pull {reference}: {why}"),
    };
    let status = std::process::Command::new("docker")
        .args(["pull", &reference])
        .status()
        .map_err(|e| failed(e.to_string()))?;
    if !status.success() {
        return Err(failed(status.to_string()));
    }
    say(&format!("image: pulled {reference}"));
    Ok(serde_json::json!({"action": "pulled", "reference": reference}))
}

/// Runs `kvexact models install`.
pub fn run(a: &Args) -> Result<Status, kvmodels::Error> {
    let tree = SourceTree::load(&a.common.catalog)?;
    if a.list {
        list::print(&tree.catalog, a.common.json);
        return Ok(Status::Ok);
    }
    let mut opts = InstallOptions::new(&a.engine, &a.registry_dir, &a.tokenizer_dir);
    opts.models.clone_from(&a.models);
    opts.include_candidates = a.include_candidates;
    opts.dry_run = a.dry_run;
    opts.weights_dir.clone_from(&a.weights_dir);
    opts.from_snapshot.clone_from(&a.from_snapshot);
    opts.token_file = a.hf_token_file.clone().or_else(|| {
        std::env::var_os("HF_TOKEN_FILE")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    opts.endpoint = std::env::var("HF_ENDPOINT").ok();
    let json = a.common.json;
    let report: InstallReport =
        install(&tree, &opts, &UreqFetch::new(), &mut |ev: &InstallEvent| {
            if ev.is_download_note() {
                eprintln!("{ev}");
            } else if !json {
                println!("{ev}");
            }
        })?;
    let image = if a.pull_image {
        pull_image(&tree, a)?
    } else {
        serde_json::Value::Null
    };
    let (done, skipped) = (report.installed, report.skipped);
    if json {
        let records: Vec<serde_json::Value> = report.models.iter().map(record_json).collect();
        print_json(&serde_json::json!({
            "ok": true,
            "engine": a.engine,
            "dryRun": a.dry_run,
            "installed": done,
            "skipped": skipped,
            "models": records,
            "image": image,
        }));
    } else {
        let verb = if a.dry_run {
            "would install"
        } else {
            "installed"
        };
        println!("{verb} {done} model(s), skipped {skipped}.");
        if done > 0 && !a.dry_run {
            println!("The gateway reads the registry when it starts: restart it to load the staged profiles.");
        }
        if done == 0 && !a.dry_run && !a.pull_image {
            println!("Nothing was installed.");
        }
    }
    Ok(Status::Ok)
}
