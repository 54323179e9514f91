//! Parity checker: template vector files (`testdata/vectors/templates/*.json`) and the
//! gateway's chat-template / special-token fixtures. The checking itself lives in
//! `kvtemplate::vectors`; this module only adapts it to the parity command.

use super::{CaseOutcome, Context, Report};
use serde_json::Value;

/// Does this document look like a templates vector file or a gateway template fixture?
pub fn detect(doc: &Value) -> bool {
    kvtemplate::vectors::detect(doc).is_some()
}

/// Recomputes every case. The file is read again from disk because template vectors must be
/// read with key order kept (tool schemas are re-serialised in document order).
pub fn check(_doc: &Value, ctx: &Context<'_>) -> Result<Report, String> {
    let models = ctx
        .models
        .ok_or("template vectors need --models DIR (folders of <org>__<name>/ model files)")?;
    let bytes = std::fs::read(ctx.path).map_err(|e| format!("cannot read: {e}"))?;
    let file = kvtemplate::vectors::check_file(&bytes, models)?;
    Ok(Report {
        cases: file
            .cases
            .into_iter()
            .map(|c| CaseOutcome {
                name: c.name,
                failure: c.failure,
            })
            .collect(),
        notes: file.notes,
    })
}
