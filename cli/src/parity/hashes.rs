//! Parity checker for block-hash vector files: vLLM (`vllm/block_hashes*.json`), SGLang and
//! TensorRT-LLM (`*/block_hashes.json`) and the gateway's `kv_hash_vectors.json`.
//!
//! A thin shell over [`kvhash::hash_vectors`], which recomputes every case from its inputs
//! under the rules of the release the file names (resolved through the contract catalog).
//! The gateway's fixtures name no engine version: they are plain blocks from a given parent,
//! which hash the same under every release's rules.

use super::{contract_of, CaseOutcome, Context, Report};
use kvhash::hash_vectors::{self, FileRules};
use serde_json::Value;

/// Does this document look like a block-hash vector file?
pub fn detect(doc: &Value) -> bool {
    hash_vectors::detect(doc).is_some()
}

/// Recomputes every case.
pub fn check(doc: &Value, _ctx: &Context<'_>) -> Result<Report, String> {
    let mut rules = FileRules::default();
    let mut notes = Vec::new();
    match hash_vectors::engine_version(doc) {
        Some((engine, version)) => {
            let c = contract_of(engine, version)?;
            match engine {
                "vllm" => rules.vllm = c.vllm_rules().map_err(|e| e.to_string())?,
                "sglang" => rules.sglang = c.sglang_rules().map_err(|e| e.to_string())?,
                _ => {}
            }
            notes.push(format!("rules of {} ({engine} {version})", c.release_id()));
        }
        None if hash_vectors::detect(doc) == Some(hash_vectors::VectorFormat::Gateway) => {
            notes.push(
                "gateway fixtures: plain blocks from given parents (release-independent)".into(),
            );
        }
        None => return Err("the file names no engine_version".to_string()),
    }
    let results = hash_vectors::check_document(doc, &rules)?;
    Ok(Report {
        cases: results
            .into_iter()
            .map(|r| CaseOutcome {
                name: r.name,
                failure: r.failure,
            })
            .collect(),
        notes,
    })
}
