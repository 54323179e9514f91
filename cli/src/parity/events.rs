//! Parity checker: KV-event vector files (`testdata/vectors/*/kv_events.json`).
//!
//! A thin shell over [`kvhash::events::vectors`]: each case's bytes (ZMQ frames, payload,
//! replay exchange or HTTP body) are decoded with the format of the file's engine version and
//! compared field by field with the case's `decoded` form; a failure names the first differing
//! field path, expected vs got.

use super::{CaseOutcome, Context, Report};
use kvhash::events::vectors;
use serde_json::Value;

/// Does this document look like a KV-event vector file? (Top-level `engine` and cases carrying
/// wire bytes; block-hash files, whose cases hold `inputs`/`expected` pages, are not claimed.)
pub fn detect(doc: &Value) -> bool {
    vectors::is_kv_events_file(doc)
}

/// Decodes every case and compares it with its `decoded` form.
pub fn check(doc: &Value, _ctx: &Context<'_>) -> Result<Report, String> {
    let results = vectors::check_file(doc)?;
    let mut report = Report::default();
    if let (Some(e), Some(v)) = (
        doc.get("engine").and_then(Value::as_str),
        doc.get("engine_version").and_then(Value::as_str),
    ) {
        if let Some(f) = kvhash::events::EventFormat::from_engine_version(e, v) {
            report.notes.push(format!("decoded as {f} ({e} {v})"));
        }
    }
    report.cases = results
        .into_iter()
        .map(|r| CaseOutcome {
            name: r.name,
            failure: r.failure,
        })
        .collect();
    Ok(report)
}
