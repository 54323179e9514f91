//! `kvexact demo`: the embedded default. Loads the sample registry shipped in the repository
//! (`testdata/registry`, Qwen3-0.6B) exactly as the gateway would, takes a built-in chat
//! request (or one given as a file), and prints the rendered prompt, the token ids and the
//! block hashes for vLLM, SGLang and TensorRT-LLM with their settings, plus how long each
//! stage took.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use kvhash::sglang::SglangHasher;
use kvhash::trtllm::TrtllmHasher;
use kvhash::vllm::{HashAlgo, VllmHasher};
use kvhash::BlockHasher;
use kvprofile_core::{AttestationCheck, Generation, LoadOptions, TrustPolicy};
use kvtemplate::{encoder_from_loaded, Outcome, ScratchBuf};
use serde_json::json;

/// The sample registry compiled in as the default.
const SAMPLE_REGISTRY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/registry");

/// The profile used when none is named.
const DEFAULT_PROFILE: &str = "qwen3-06b-default-v1";

/// The built-in chat request.
const BUILTIN_REQUEST: &str = r#"{
  "model": "Qwen/Qwen3-0.6B",
  "messages": [
    {"role": "system", "content": "You are a concise assistant for network operators."},
    {"role": "user", "content": "Explain in two sentences why a KV-cache-aware router must compute the exact token ids the engine computes."}
  ],
  "max_tokens": 64
}"#;

/// Arguments of `kvexact demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Registry root (default: the sample registry shipped in the repository).
    #[arg(long)]
    pub registry: Option<PathBuf>,
    /// Profile id (default: qwen3-06b-default-v1).
    #[arg(long, default_value = DEFAULT_PROFILE)]
    pub profile: String,
    /// "Now" for templates with a clock, as Unix milliseconds (default: the current time).
    #[arg(long)]
    pub now_ms: Option<i64>,
    /// Owner uid trusted besides root (default: the current effective uid).
    #[arg(long, value_name = "UID")]
    pub trusted_uid: Option<u32>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// A chat request body (OpenAI `/v1/chat/completions` JSON); default: a built-in one.
    pub request: Option<PathBuf>,
}

/// One engine's settings: contract id and the hasher the contract uses.
struct EngineSetup {
    name: &'static str,
    contract: &'static str,
    settings: &'static str,
    hasher: BlockHasher,
}

fn engines() -> Result<Vec<EngineSetup>, kvhash::Error> {
    Ok(vec![
        EngineSetup {
            name: "vllm",
            contract: "vllm-kv-map-v2",
            settings: "sha256_cbor, block size 16, PYTHONHASHSEED=0",
            hasher: VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0"))?.into(),
        },
        EngineSetup {
            name: "sglang",
            contract: "sglang-kv-rank-v1",
            settings: "sha256 page chain, page size 16, no salt",
            hasher: SglangHasher::new(16)?.into(),
        },
        EngineSetup {
            name: "trtllm",
            contract: "trtllm-kv-http-v1",
            settings: "V1 block key, tokens per block 32",
            hasher: TrtllmHasher::new(32)?.into(),
        },
    ])
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("kvexact demo: {msg}");
    ExitCode::from(2)
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Runs the demo.
pub fn run(args: &Args) -> ExitCode {
    let root = args
        .registry
        .clone()
        .unwrap_or_else(|| PathBuf::from(SAMPLE_REGISTRY));
    let body = match &args.request {
        Some(p) => match std::fs::read(p) {
            Ok(b) => b,
            Err(e) => return fail(format!("cannot read {}: {e}", p.display())),
        },
        None => BUILTIN_REQUEST.as_bytes().to_vec(),
    };
    let now_ms = args.now_ms.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    });

    let t = Instant::now();
    let policy = match args.trusted_uid {
        Some(uid) => TrustPolicy::with_trusted_uid(uid),
        None => TrustPolicy::for_current_user(),
    };
    let opts = LoadOptions {
        policy,
        attestation: AttestationCheck::Deferred,
    };
    let generation = match Generation::load(&root, 1, &opts, &kvtemplate::KvtemplateValidator) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("REFUSED {}: {}: {}", e.code(), e.path(), e.detail());
            return ExitCode::from(2);
        }
    };
    let load_time = t.elapsed();
    let Some(profile) = generation.profile(&args.profile) else {
        return fail(format!(
            "no profile {:?} in {}",
            args.profile,
            root.display()
        ));
    };
    let setups = match engines() {
        Ok(s) => s,
        Err(e) => return fail(e),
    };

    let mut results = Vec::new();
    for setup in &setups {
        let t = Instant::now();
        let encoder = match encoder_from_loaded(profile, setup.contract) {
            Ok(e) => e,
            Err(e) => return fail(format!("{}: encoder: {e}", setup.name)),
        };
        let build_time = t.elapsed();

        let mut scratch = ScratchBuf::new();
        let t = Instant::now();
        match encoder.render_chat(&body, now_ms, &mut scratch) {
            Ok(Outcome::Done(())) => {}
            Ok(Outcome::Refused(r)) => {
                return fail(format!("{}: request refused: {}", setup.name, r.as_str()))
            }
            Err(e) => return fail(format!("{}: render: {e}", setup.name)),
        }
        let render_time = t.elapsed();
        let rendered = scratch.rendered().to_string();

        let mut ids = vec![0u32; 1 << 17];
        let t = Instant::now();
        let encoded = match encoder.encode_chat(&body, now_ms, &mut ids, &mut scratch) {
            Ok(Outcome::Done(e)) => e,
            Ok(Outcome::Refused(r)) => {
                return fail(format!("{}: request refused: {}", setup.name, r.as_str()))
            }
            Err(e) => return fail(format!("{}: encode: {e}", setup.name)),
        };
        let encode_time = t.elapsed();
        ids.truncate(encoded.written);

        let mut hashes = vec![0u64; ids.len() / setup.hasher.block_size().max(1) + 1];
        let t = Instant::now();
        let n = match setup.hasher.block_hashes_u64(&ids, &mut hashes) {
            Ok(n) => n,
            Err(e) => return fail(format!("{}: hash: {e}", setup.name)),
        };
        let hash_time = t.elapsed();
        hashes.truncate(n);
        results.push((
            setup,
            rendered,
            ids,
            hashes,
            [build_time, render_time, encode_time, hash_time],
        ));
    }

    if args.json {
        let engines: Vec<_> = results
            .iter()
            .map(|(s, rendered, ids, hashes, times)| {
                json!({
                    "engine": s.name,
                    "contract": s.contract,
                    "settings": s.settings,
                    "block_size": s.hasher.block_size(),
                    "rendered": rendered,
                    "token_ids": ids,
                    "block_hashes_u64": hashes,
                    "timings_us": {
                        "encoder_build": micros(times[0]),
                        "render": micros(times[1]),
                        "render_and_tokenize": micros(times[2]),
                        "hash": micros(times[3]),
                    },
                })
            })
            .collect();
        let doc = json!({
            "registry": root.display().to_string(),
            "set_digest": generation.set_digest(),
            "profile": args.profile,
            "registry_load_us": micros(load_time),
            "engines": engines,
        });
        return match serde_json::to_string_pretty(&doc) {
            Ok(s) => {
                println!("{s}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        };
    }

    println!("registry   {}", root.display());
    println!("setDigest  {}", generation.set_digest());
    println!(
        "profile    {}  (loaded and verified in {:.1} ms)",
        args.profile,
        load_time.as_secs_f64() * 1e3
    );
    for (s, rendered, ids, hashes, times) in &results {
        println!();
        println!("== {} ({}; {})", s.name, s.contract, s.settings);
        println!("rendered prompt ({} bytes):", rendered.len());
        for line in rendered.lines() {
            println!("  | {line}");
        }
        println!("token ids ({}):", ids.len());
        println!("  {ids:?}");
        println!(
            "block hashes ({} full blocks of {} tokens; u64 as published in KV events):",
            hashes.len(),
            s.hasher.block_size()
        );
        for (i, h) in hashes.iter().enumerate() {
            match s.name {
                "sglang" => println!("  [{i}] {h:#018x}  (int64 {})", *h as i64),
                _ => println!("  [{i}] {h:#018x}  ({h})"),
            }
        }
        println!(
            "timings: encoder build {:.1} ms, render {:.1} µs, render+tokenize {:.1} µs, hash {:.1} µs",
            times[0].as_secs_f64() * 1e3,
            micros(times[1]),
            micros(times[2]),
            micros(times[3])
        );
    }
    ExitCode::SUCCESS
}
