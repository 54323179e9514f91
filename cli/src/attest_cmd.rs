//! `kvexact attest`: run the readiness ladder against a live engine, as the gateway would.

use kvprobe::attest::{attest, AttestConfig, AttestReport};
use kvprobe::{Engine, State};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `kvexact attest`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Registry root (profiles, manifests/, probefixtures/, artifacts/).
    #[arg(long)]
    registry: PathBuf,
    /// Profile id to attest.
    #[arg(long)]
    profile: String,
    /// Engine family.
    #[arg(long, value_parser = ["vllm", "sglang", "trtllm"])]
    engine: String,
    /// The engine's HTTP endpoint, HOST:PORT.
    #[arg(long)]
    endpoint: String,
    /// The engine's ZMQ KV-event endpoint, HOST:PORT (vLLM, SGLang; default: endpoint host, port 5557).
    #[arg(long)]
    events: Option<String>,
    /// The rule's kvBlockSize (default: the release's catalog `hash.defaultBlockSize`: vLLM 16, 64 from 0.34; TensorRT-LLM 32).
    #[arg(long)]
    block_size: Option<u32>,
    /// vLLM none-hash seed: the engine's PYTHONHASHSEED (default "0").
    #[arg(long)]
    hash_seed: Option<String>,
    /// Declared SGLang DP ranks (ports base..base+n-1).
    #[arg(long, default_value_t = 1)]
    dp_ranks: u16,
    /// Challenge timeout in seconds (HTTP probes use at most 5 s).
    #[arg(long, default_value_t = 15)]
    timeout_s: u64,
    /// Print the state, reason codes and receipts as JSON.
    #[arg(long)]
    json: bool,
    /// Opt in to READY_FUNCTIONAL_ONLY when there is no manifest (and exit 0 for it).
    #[arg(long)]
    allow_functional_only: bool,
    /// vLLM: run the hash challenge on this LoRA adapter (as served in /v1/models), proving the
    /// release's LoRA block key too.
    #[arg(long)]
    lora: Option<String>,
}

/// Runs the ladder; exit 0 for READY (or READY_FUNCTIONAL_ONLY when allowed), 1 for any other
/// state, 2 when the registry or arguments are unusable.
pub fn run(args: &Args) -> ExitCode {
    let engine = match args.engine.as_str() {
        "vllm" => Engine::Vllm,
        "sglang" => Engine::Sglang,
        _ => Engine::Trtllm,
    };
    let mut cfg = AttestConfig::new(args.registry.clone(), &args.profile, engine, &args.endpoint);
    cfg.events = args.events.clone();
    cfg.block_size = args.block_size;
    cfg.hash_seed = args.hash_seed.clone();
    cfg.dp_ranks = args.dp_ranks.max(1);
    cfg.challenge_timeout = Duration::from_secs(args.timeout_s.max(1));
    cfg.probe_timeout = Duration::from_secs(args.timeout_s.clamp(1, 5));
    cfg.functional_only = args.allow_functional_only;
    cfg.lora = args.lora.clone();
    let report = match attest(&cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kvexact attest: {e}");
            return ExitCode::from(2);
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("kvexact attest: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        print_text(&report);
    }
    let state = report.verdict.enforced_state;
    if state == State::Ready || (state == State::ReadyFunctionalOnly && args.allow_functional_only)
    {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn print_text(r: &AttestReport) {
    let v = &r.verdict;
    println!("state: {}", v.enforced_state);
    let reasons: Vec<&str> = v.reason_codes.iter().map(|x| x.as_str()).collect();
    println!(
        "reasons: {}",
        if reasons.is_empty() {
            "-".to_string()
        } else {
            reasons.join(", ")
        }
    );
    if !v.detail.is_empty() {
        println!("detail: {}", v.detail);
    }
    println!(
        "profile: {}  engine: {} {}  endpoint: {}  contract: {} ({})  manifest: {}",
        r.profile_id,
        r.engine,
        r.engine_version.as_deref().unwrap_or("?"),
        r.endpoint,
        r.release_id.as_deref().unwrap_or("-"),
        r.contract_id.as_deref().unwrap_or("-"),
        r.manifest_digest.as_deref().unwrap_or("-")
    );
    println!("receipts:");
    for x in &v.receipts {
        let kind = match x.kind {
            kvprobe::ladder::ReceiptKind::Identity => "identity",
            kvprobe::ladder::ReceiptKind::TokenParity => "token_parity",
            kvprobe::ladder::ReceiptKind::HashEcho => "hash_echo",
            kvprobe::ladder::ReceiptKind::HashDrift => "hash_drift",
        };
        let status = if x.ok {
            "ok".to_string()
        } else {
            x.reason.map_or("failed", |r| r.as_str()).to_string()
        };
        println!("  {kind:<12} {:<21} {status:<22} {}", x.endpoint, x.detail);
    }
}
