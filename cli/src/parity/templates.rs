//! Parity checker: template vector files (`testdata/vectors/templates/*.json`) and the
//! gateway's chat-template / special-token fixtures. The checking itself lives in
//! `kvtemplate::vectors`; this module only adapts it to the parity command, resolving each
//! engine version a file names to its release's chat rules (a release without chat rules
//! proven by vectors fails the file, as an unknown version does). With `--lifted`, template
//! vector files are checked through the strict encoder with the codes each case hits lifted
//! (`kvtemplate::vectors::check_file_lifted`, under the release's `chat.liftable`).

use super::{CaseOutcome, Context, Report};
use serde_json::Value;

/// Does this document look like a templates vector file or a gateway template fixture?
pub fn detect(doc: &Value) -> bool {
    kvtemplate::vectors::detect(doc).is_some()
}

/// Recomputes every case. The file is read again from disk because template vectors must be
/// read with key order kept (tool schemas are re-serialised in document order).
pub fn check(doc: &Value, ctx: &Context<'_>) -> Result<Report, String> {
    let models = ctx
        .models
        .ok_or("template vectors need --models DIR (folders of <org>__<name>/ model files)")?;
    let bytes = std::fs::read(ctx.path).map_err(|e| format!("cannot read: {e}"))?;
    let resolve = |engine: kvtemplate::Engine, version: &str| {
        let c = super::contract_of(engine.as_str(), version)?;
        c.chat().copied().ok_or_else(|| {
            format!(
                "{} ({} {version}) has no chat-path rules proven by vectors",
                c.release_id(),
                engine.as_str()
            )
        })
    };
    let is_template_file = matches!(
        kvtemplate::vectors::detect(doc),
        Some(
            kvtemplate::vectors::VectorKind::Templates
                | kvtemplate::vectors::VectorKind::ReleaseTemplates
        )
    );
    if ctx.lifted && is_template_file {
        let resolve_lifts = |engine: kvtemplate::Engine, version: &str| {
            let c = super::contract_of(engine.as_str(), version)?;
            let rules = resolve(engine, version)?;
            Ok((rules, c.liftable()))
        };
        let lifted = kvtemplate::vectors::check_file_lifted(&bytes, models, &resolve_lifts)?;
        let mut notes = lifted.report.notes;
        for (e, version, tally) in &lifted.engines {
            if tally.cases > 0 {
                notes.push(format!("lifted {} {version}: {tally}", e.as_str()));
            }
        }
        return Ok(Report {
            cases: lifted
                .report
                .cases
                .into_iter()
                .map(|c| CaseOutcome {
                    name: c.name,
                    failure: c.failure,
                })
                .collect(),
            notes,
        });
    }
    let file = kvtemplate::vectors::check_file_with(&bytes, models, &resolve)?;
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
