//! What a gateway does per request, in Rust: resolve the engine release from the version the
//! engine reports (vLLM's `GET /version`), load the trusted registry once, build the encoder
//! and the hasher of that release, then for every request compute its routing keys — the
//! token ids and their full-block hashes (what `kvexact_route_keys` returns in one C call).
//!
//!     cargo run --release -p kvexact-examples --example route [REGISTRY_DIR [MODEL [VLLM_VERSION]]]
//!
//! The release fixes the rendering, tokenization and hashing rules and the hash algorithm
//! (its default: `sha256_cbor` for vLLM unless the engine runs another
//! `--prefix-caching-hash-algo`). The block size and the NONE_HASH seed are the engine's launch
//! settings, not its release's: vLLM's `--block-size` (16 by default) and its
//! `PYTHONHASHSEED` (`"0"` here). For the default arguments it prints
//! `examples/encode_and_hash.out`, as the C and Go examples do (`examples/tests/output.rs`
//! checks it).

use std::error::Error;
use std::io::Write;

use kvprobe::{bridge, contract, Engine};
use kvprofile_core::{LoadOptions, Registry, TrustPolicy};
use kvtemplate::{KvtemplateValidator, Outcome, ScratchBuf};

/// The engine's `PYTHONHASHSEED` (a launch setting).
const NONE_HASH_SEED: &str = "0";

/// The request: an OpenAI chat body as the gateway receives it.
const BODY: &[u8] = br#"{"messages":[{"role":"system","content":"You are a terse assistant."},{"role":"user","content":"Which replica already holds the KV cache for this conversation prefix?"}]}"#;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let root = args
        .next()
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/registry").into());
    let model = args.next().unwrap_or_else(|| "Qwen/Qwen3-0.6B".into());
    let version = args.next().unwrap_or_else(|| "0.31.0".into());
    run(&root, &model, &version, &mut std::io::stdout().lock())
}

/// Routes [`BODY`] for `model` on vLLM `version`, with the registry at `root`, printing to
/// `out`.
pub fn run(
    root: &str,
    model: &str,
    version: &str,
    out: &mut dyn Write,
) -> Result<(), Box<dyn Error>> {
    // 1. The engine release: one catalog entry per version, or UNKNOWN_ENGINE_VERSION.
    let release = contract::resolve(Engine::Vllm, version)?;
    writeln!(
        out,
        "vLLM {version}: release {} (contract {})",
        release.release_id(),
        release.contract_id()
    )?;

    // 2. The registry, loaded as the gateway does: all or nothing, every template compiled
    //    and every tokenizer built before the generation is published; the model's profile.
    let registry = Registry::new();
    let opts = LoadOptions {
        policy: TrustPolicy::for_current_user(),
        ..LoadOptions::default()
    };
    let generation = registry
        .publish(root.as_ref(), &opts, &KvtemplateValidator)
        .map_err(|e| format!("REFUSED {}: {}: {}", e.code(), e.path(), e.detail()))?;
    let profile = generation
        .profile_for_model(model)
        .ok_or_else(|| format!("no profile serves {model}"))?;

    // 3. The encoder and the hasher of that release (built once, shared by every request).
    let encoder = bridge::encoder(profile, &release)?;
    //    The block size is vLLM's `--block-size` (a launch setting); a deployment that does not
    //    set it runs the release's default (catalog `hash.defaultBlockSize`: 16, 64 from 0.34).
    let block_size = release
        .default_block_size()
        .ok_or("the release has no KV plane")? as usize;
    let hasher = bridge::hasher(&release, None, block_size, Some(NONE_HASH_SEED))?;

    // 4. Per request: strict checks, render, tokenize into a reused buffer, hash the full
    //    blocks. A refusal is an ordinary outcome: route without keys.
    let now_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis()
        .try_into()?;
    let mut scratch = ScratchBuf::new();
    let mut ids = vec![0u32; 4096];
    let mut hashes = vec![0u64; 256];
    match encoder.encode_chat(BODY, now_unix_ms, &mut ids, &mut scratch)? {
        Outcome::Refused(r) => writeln!(out, "refused: {}", r.as_str())?,
        Outcome::Done(enc) => {
            let ids = &ids[..enc.written];
            let n = hasher.block_hashes_u64(ids, &mut hashes)?;
            writeln!(
                out,
                "{} ids, {n} full block(s) of {block_size} tokens",
                ids.len()
            )?;
            for (i, h) in hashes[..n].iter().enumerate() {
                writeln!(out, "block {i}: {h}")?;
            }
        }
    }
    Ok(())
}
