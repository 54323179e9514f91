//! `kvexact demo`: the embedded default. Loads the sample registry compiled into the binary
//! (`testdata/registry`, Qwen3-0.6B; see [`crate::sample_registry`]) exactly as the gateway would, takes a built-in chat
//! request (or one given as a file), and prints the rendered prompt, the token ids and the
//! block hashes for vLLM, SGLang and TensorRT-LLM with their settings, plus how long each
//! stage took. Each engine is a named release (default: the reference releases vLLM 0.31.0,
//! SGLang 0.5.19, TensorRT-LLM 1.3.0rc29), resolved through the contract catalog; an
//! unknown version is refused.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use kvhash::BlockHasher;
use kvprobe::contract::{self, Contract};
use kvprobe::{bridge, Engine};
use kvprofile_core::{AttestationCheck, Generation, LoadOptions, TrustPolicy};
use kvtemplate::{Outcome, ScratchBuf};
use serde_json::json;

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
    /// Registry root (default: the sample registry compiled into the binary).
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
    /// The vLLM release to emulate (default: the reference release 0.31.0).
    #[arg(long, value_name = "VERSION")]
    pub vllm_version: Option<String>,
    /// The SGLang release (default: 0.5.19).
    #[arg(long, value_name = "VERSION")]
    pub sglang_version: Option<String>,
    /// The TensorRT-LLM release (default: 1.3.0rc29).
    #[arg(long, value_name = "VERSION")]
    pub trtllm_version: Option<String>,
    /// A chat request body (OpenAI `/v1/chat/completions` JSON); default: a built-in one.
    pub request: Option<PathBuf>,
}

/// One engine's settings: the release and the hasher its contract uses.
struct EngineSetup {
    name: &'static str,
    version: String,
    contract: Contract,
    settings: String,
    hasher: BlockHasher,
}

fn engines(args: &Args) -> Result<Vec<EngineSetup>, String> {
    let pick = |engine: Engine, given: &Option<String>| -> Result<(String, Contract), String> {
        let v = given
            .clone()
            .or_else(|| bridge::reference_version(engine).map(str::to_string))
            .unwrap_or_default();
        let c = contract::resolve(engine, &v).map_err(|e| format!("REFUSED {}: {e}", e.code()))?;
        Ok((v, c))
    };
    let mut out = Vec::new();
    for (engine, given, settings, seed) in [
        (
            Engine::Vllm,
            &args.vllm_version,
            "sha256_cbor, block size {bs}, PYTHONHASHSEED=0",
            Some("0"),
        ),
        (
            Engine::Sglang,
            &args.sglang_version,
            "sha256 page chain, page size {bs}, no salt",
            None,
        ),
        (
            Engine::Trtllm,
            &args.trtllm_version,
            "V1 block key, tokens per block {bs}",
            None,
        ),
    ] {
        let (version, contract) = pick(engine, given)?;
        // The release's default block size (catalog `hash.defaultBlockSize`: vLLM 16, 64 from
        // 0.34; SGLang 16; TensorRT-LLM 32).
        let bs = contract
            .default_block_size()
            .ok_or_else(|| format!("{engine} {version}: no KV plane"))? as usize;
        let settings = settings.replace("{bs}", &bs.to_string());
        let hasher = bridge::hasher(&contract, None, bs, seed)
            .map_err(|e| format!("{engine} {version}: hasher: {e}"))?;
        out.push(EngineSetup {
            name: engine.as_str(),
            version,
            contract,
            settings,
            hasher,
        });
    }
    Ok(out)
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
    // Without --registry: the embedded sample, written to a private directory for the load.
    let sample = match &args.registry {
        Some(_) => None,
        None => match crate::sample_registry::SampleRoot::materialize() {
            Ok(s) => Some(s),
            Err(e) => {
                return fail(format!(
                    "cannot write out the embedded sample registry: {e}"
                ))
            }
        },
    };
    let root = match (&args.registry, &sample) {
        (Some(r), _) => r.clone(),
        (None, Some(s)) => s.path().to_path_buf(),
        (None, None) => return fail("no registry"),
    };
    let shown = match &args.registry {
        Some(r) => r.display().to_string(),
        None => "(embedded sample registry)".to_owned(),
    };
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
        return fail(format!("no profile {:?} in {}", args.profile, shown));
    };
    let setups = match engines(args) {
        Ok(s) => s,
        Err(e) if e.starts_with("REFUSED") => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
        Err(e) => return fail(e),
    };

    let mut results = Vec::new();
    for setup in &setups {
        let t = Instant::now();
        let encoder = match bridge::encoder(profile, &setup.contract) {
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

        let mut hashes = vec![0u64; setup.hasher.block_count(ids.len())];
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
                    "engine_version": s.version,
                    "release": s.contract.release_id(),
                    "contract": s.contract.contract_id(),
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
            "registry": shown,
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

    println!("registry   {shown}");
    println!("setDigest  {}", generation.set_digest());
    println!(
        "profile    {}  (loaded and verified in {:.1} ms)",
        args.profile,
        load_time.as_secs_f64() * 1e3
    );
    for (s, rendered, ids, hashes, times) in &results {
        println!();
        println!(
            "== {} {} ({}, contract {}; {})",
            s.name,
            s.version,
            s.contract.release_id(),
            s.contract.contract_id(),
            s.settings
        );
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
