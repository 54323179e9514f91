//! Parity checker: events vector files (to be filled).

use super::{Context, Report};
use serde_json::Value;

/// Does this document look like a events vector file?
pub fn detect(_doc: &Value) -> bool {
    false
}

/// Recomputes every case.
pub fn check(_doc: &Value, _ctx: &Context<'_>) -> Result<Report, String> {
    Err("not implemented yet".to_string())
}
