//! JSON the way mistral_common round-trips it: Python `json.loads` then
//! `json.dumps(..., ensure_ascii=False)` (docs/contracts/templates.md §13.8).
//!
//! kvexact's JSON reader keeps duplicate keys and reads numbers as `serde_json` does; where
//! that could differ from Python (duplicate keys, integers beyond 64 bits, `-0.0`, `NaN`,
//! `Infinity`, lone surrogates) the value is refused as unsupported rather than guessed.

use crate::json::Json;
use crate::Error;

fn unsupported(what: &str) -> Error {
    Error::Unsupported(format!("mistral: {what}"))
}

/// Checks that Python would read `v` to the same value kvexact holds.
pub(crate) fn check_python_exact(v: &Json<'_>) -> Result<(), Error> {
    match v {
        Json::I128(_) => Err(unsupported("a JSON integer beyond 64 bits")),
        Json::F64(f) => {
            if (f.fract() == 0.0 && f.abs() >= 9.2e18) || (*f == 0.0 && f.is_sign_negative()) {
                return Err(unsupported(
                    "a JSON number Python would read differently (big integer or -0.0)",
                ));
            }
            Ok(())
        }
        Json::Array(a) => a.iter().try_for_each(check_python_exact),
        Json::Object(o) => {
            for (i, (k, v)) in o.0.iter().enumerate() {
                if o.0[..i].iter().any(|(k2, _)| k2 == k) {
                    return Err(unsupported("a JSON object with a duplicate key"));
                }
                check_python_exact(v)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Text Python's `json.loads` might accept where `serde_json` does not.
fn python_only_json(text: &str) -> bool {
    text.contains("NaN")
        || text.contains("Infinity")
        || text.contains("\\ud")
        || text.contains("\\uD")
}

/// `json.loads(text)` when it parses, else `None` (the text stays a string). Refused where
/// Python's reading is not known to agree.
pub(crate) fn loads(text: &str) -> Result<Option<Json<'_>>, Error> {
    match crate::json::parse(text.as_bytes()) {
        Ok(v) => {
            check_python_exact(&v)?;
            Ok(Some(v))
        }
        Err(e) if crate::json::integer_too_large(&e) => {
            Err(unsupported("a JSON integer beyond 128 bits"))
        }
        Err(_) if python_only_json(text) => Err(unsupported(
            "JSON text Python may read differently (NaN, Infinity, surrogate escapes)",
        )),
        Err(_) => Ok(None),
    }
}

/// `json.dumps(v, ensure_ascii=False)`.
pub(crate) fn dumps(v: &Json<'_>) -> String {
    v.to_json_string()
}

/// `json.dumps(s, ensure_ascii=False)` of a string.
pub(crate) fn dumps_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    crate::pyjson::write_str(&mut out, s, false);
    out
}
