//! Parity checker: KV-event vector files (`testdata/vectors/*/kv_events.json`).
//!
//! A thin shell over [`kvhash::events::vectors`]: each case's bytes (ZMQ frames, payload,
//! replay exchange or HTTP body) are decoded with the event schema of the release the file
//! names (resolved through the contract catalog) and compared field by field with the case's
//! `decoded` form; a failure names the first differing field path, expected vs got.

use super::{contract_of, CaseOutcome, Context, Report};
use kvhash::events::vectors;
use serde_json::Value;

/// Does this document look like a KV-event vector file? (Top-level `engine` and cases carrying
/// wire bytes; block-hash files, whose cases hold `inputs`/`expected` pages, are not claimed.)
pub fn detect(doc: &Value) -> bool {
    vectors::is_kv_events_file(doc)
}

/// Decodes every case and compares it with its `decoded` form.
pub fn check(doc: &Value, _ctx: &Context<'_>) -> Result<Report, String> {
    let (engine, version) = vectors::engine_version(doc)?;
    let contract = contract_of(engine, version)?;
    let schema = contract
        .events()
        .ok_or_else(|| format!("{} has no KV events", contract.release_id()))?;
    let results = vectors::check_file(doc, schema)?;
    Ok(Report {
        cases: results
            .into_iter()
            .map(|r| CaseOutcome {
                name: r.name,
                failure: r.failure,
            })
            .collect(),
        notes: vec![format!(
            "decoded with {} ({}, {engine} {version})",
            contract.release_id(),
            schema.format()
        )],
    })
}
