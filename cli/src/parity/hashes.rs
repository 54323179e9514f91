//! Parity checker for block-hash vector files: vLLM (`vllm/block_hashes*.json`), SGLang and
//! TensorRT-LLM (`*/block_hashes.json`) and the gateway's `kv_hash_vectors.json`.
//!
//! A thin shell over [`kvhash::hash_vectors`], which recomputes every case from its inputs.

use super::{CaseOutcome, Context, Report};
use serde_json::Value;

/// Does this document look like a block-hash vector file?
pub fn detect(doc: &Value) -> bool {
    kvhash::hash_vectors::detect(doc).is_some()
}

/// Recomputes every case.
pub fn check(doc: &Value, _ctx: &Context<'_>) -> Result<Report, String> {
    let results = kvhash::hash_vectors::check_document(doc)?;
    Ok(Report {
        cases: results
            .into_iter()
            .map(|r| CaseOutcome {
                name: r.name,
                failure: r.failure,
            })
            .collect(),
        notes: Vec::new(),
    })
}
