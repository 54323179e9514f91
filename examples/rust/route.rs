//! What a gateway does per request, in Rust: load the trusted registry once, build one encoder
//! per (profile, engine contract), then for every request render + tokenize + hash.
//!
//!     cargo run --release -p kvexact-examples --example route [REGISTRY_DIR]

use kvhash::vllm::{HashAlgo, VllmHasher};
use kvhash::BlockHasher;
use kvprofile_core::{LoadOptions, Registry, TrustPolicy};
use kvtemplate::{encoder_from_loaded, KvtemplateValidator, Outcome, ScratchBuf};
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/registry").into());

    // 1. Load the registry as the gateway does: all or nothing, every template compiled and
    //    every tokenizer built before the generation is published.
    let registry = Registry::new();
    let opts = LoadOptions {
        policy: TrustPolicy::for_current_user(),
        ..LoadOptions::default()
    };
    let generation = registry
        .publish(root.as_ref(), &opts, &KvtemplateValidator)
        .map_err(|e| format!("REFUSED {}: {}: {}", e.code(), e.path(), e.detail()))?;
    println!(
        "generation {} setDigest {}",
        generation.number(),
        generation.set_digest()
    );

    // 2. Resolve the request's model name to a profile and build the vLLM encoder + hasher.
    let profile = generation
        .profile_for_model("Qwen/Qwen3-0.6B")
        .ok_or("no profile serves Qwen/Qwen3-0.6B")?;
    let encoder = Arc::new(encoder_from_loaded(profile, "vllm-kv-map-v2")?);
    let hasher: BlockHasher = VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0"))?.into();

    // 3. Per request: strict checks, render, tokenize into a reused buffer, hash.
    let body = br#"{"model":"Qwen/Qwen3-0.6B","messages":[{"role":"user","content":"Which replica holds my prefix? Answer in one paragraph, and mention block hashes."}]}"#;
    let mut scratch = ScratchBuf::new();
    let mut ids = vec![0u32; 8192];
    let mut hashes = vec![0u64; 8192 / 16];
    match encoder.encode_chat(body, 0, &mut ids, &mut scratch)? {
        Outcome::Refused(r) => return Err(format!("refused: {}", r.as_str()).into()),
        Outcome::Done(enc) => {
            let ids = &ids[..enc.written];
            let n = hasher.block_hashes_u64(ids, &mut hashes)?;
            println!("{} token ids, {} full blocks", ids.len(), n);
            for (i, h) in hashes[..n].iter().enumerate() {
                println!("block {i}: {h:#018x}");
            }
        }
    }
    // A refused request is an ordinary result, not an error:
    let salted = br#"{"messages":[{"role":"user","content":"hi"}],"cache_salt":"tenant-7"}"#;
    if let Outcome::Refused(r) = encoder.encode_chat(salted, 0, &mut ids, &mut scratch)? {
        println!(
            "cache_salt request refused with code {:?} ({})",
            r.as_str(),
            r as i32
        );
    }
    Ok(())
}
