//! mistral_common checks every tool's `parameters` against the JSON Schema draft-7
//! meta-schema (`Draft7Validator.check_schema`) and refuses the request when it fails
//! (docs/contracts/templates.md §13.8). kvexact accepts a schema only when it can see that
//! it is valid: every draft-7 keyword with a constraint is checked; keywords whose check
//! needs a format (regular expressions, URIs: `pattern`, `patternProperties`, `$ref`, `$id`,
//! `$schema`, `propertyNames`) are refused as unsupported, as is nesting deeper than
//! [`MAX_DEPTH`]. Other keywords are unconstrained in the meta-schema and pass.

use crate::json::Json;
use crate::Error;

/// The deepest schema nesting accepted.
const MAX_DEPTH: usize = 64;

const SIMPLE_TYPES: [&str; 7] = [
    "array", "boolean", "integer", "null", "number", "object", "string",
];

fn unsupported(what: String) -> Error {
    Error::Unsupported(format!("mistral: tool parameters: {what}"))
}

fn is_number(v: &Json<'_>) -> bool {
    matches!(v, Json::I64(_) | Json::U64(_) | Json::F64(_))
}

fn is_non_negative_int(v: &Json<'_>) -> bool {
    // jsonschema counts 1.0 as an integer.
    match v {
        Json::U64(_) => true,
        Json::F64(f) => f.fract() == 0.0 && *f >= 0.0,
        _ => false,
    }
}

fn unique(items: &[Json<'_>]) -> bool {
    items
        .iter()
        .enumerate()
        .all(|(i, a)| items[..i].iter().all(|b| a.to_serde() != b.to_serde()))
}

fn string_array(v: &Json<'_>) -> bool {
    matches!(v, Json::Array(a) if a.iter().all(|x| matches!(x, Json::Str(_))) && unique(a))
}

/// Checks one (sub)schema.
pub(crate) fn check(schema: &Json<'_>, depth: usize) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(unsupported("nested too deep".into()));
    }
    let obj = match schema {
        Json::Bool(_) => return Ok(()),
        Json::Object(o) => o,
        _ => return Err(unsupported("a schema that is not an object".into())),
    };
    let sub = |v: &Json<'_>| check(v, depth + 1);
    let sub_array = |v: &Json<'_>| match v {
        Json::Array(a) if !a.is_empty() => a.iter().try_for_each(|s| check(s, depth + 1)),
        _ => Err(unsupported(
            "a schema array that is not a non-empty list".into(),
        )),
    };
    let sub_map = |v: &Json<'_>| match v {
        Json::Object(o) => o.0.iter().try_for_each(|(_, s)| check(s, depth + 1)),
        _ => Err(unsupported("a schema map that is not an object".into())),
    };
    for (k, v) in &obj.0 {
        let k: &str = k;
        let valid = match k {
            "$ref" | "$id" | "$schema" | "pattern" | "patternProperties" | "propertyNames" => {
                return Err(unsupported(format!(
                    "`{k}` (kvexact does not check its format)"
                )))
            }
            "title" | "description" | "$comment" | "contentMediaType" | "contentEncoding"
            | "format" => matches!(v, Json::Str(_)),
            "examples" | "enum" => matches!(v, Json::Array(_)),
            "readOnly" | "uniqueItems" => matches!(v, Json::Bool(_)),
            "multipleOf" => match v {
                Json::U64(n) => *n > 0,
                Json::F64(f) => *f > 0.0,
                _ => false,
            },
            "maximum" | "exclusiveMaximum" | "minimum" | "exclusiveMinimum" => is_number(v),
            "maxLength" | "minLength" | "maxItems" | "minItems" | "maxProperties"
            | "minProperties" => is_non_negative_int(v),
            "additionalItems"
            | "contains"
            | "additionalProperties"
            | "if"
            | "then"
            | "else"
            | "not" => sub(v).map(|()| true)?,
            "items" => match v {
                Json::Array(a) => a.iter().try_for_each(sub).map(|()| true)?,
                other => sub(other).map(|()| true)?,
            },
            "required" => string_array(v),
            "definitions" | "properties" => sub_map(v).map(|()| true)?,
            "dependencies" => match v {
                Json::Object(o) => {
                    for (_, d) in &o.0 {
                        if !string_array(d) {
                            sub(d)?;
                        }
                    }
                    true
                }
                _ => false,
            },
            "type" => {
                let ok =
                    |t: &Json<'_>| matches!(t, Json::Str(s) if SIMPLE_TYPES.contains(&s.as_ref()));
                match v {
                    Json::Array(a) => !a.is_empty() && a.iter().all(ok) && unique(a),
                    other => ok(other),
                }
            }
            "allOf" | "anyOf" | "oneOf" => sub_array(v).map(|()| true)?,
            // "default", "const" and keywords outside draft-7: unconstrained.
            _ => true,
        };
        if !valid {
            return Err(unsupported(format!("`{k}` is not valid draft-7")));
        }
    }
    Ok(())
}
