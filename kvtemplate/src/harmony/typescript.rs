//! Function-tool parameter schemas as the TypeScript-style declarations harmony puts in the
//! developer message (docs/contracts/templates.md §13.4).
//!
//! Written from the vectors (`testdata/vectors/templates-nonjinja/gptoss-20b-v1.json`, the
//! `tools_*` cases): object properties in document order, `?` on a property the schema does
//! not require, descriptions as `// ` comments above the property, defaults as a trailing
//! `// default: …`, `integer` as `number`, string enums as a union of quoted literals, arrays
//! as `T[]`, type lists as a union, `oneOf` as one ` | ` line per variant, nested objects
//! indented by four spaces. A schema kvexact cannot render exactly (an object or array as a
//! `default`, a non-object where a schema is expected) is refused.

use crate::json::{Json, JsonObject};

/// A schema value that the renderer does not reproduce.
pub(crate) type Unsupported = String;

fn get<'j, 'a>(o: &'j JsonObject<'a>, key: &str) -> Option<&'j Json<'a>> {
    o.get(key)
}

fn str_of<'j>(o: &'j JsonObject<'_>, key: &str) -> Option<&'j str> {
    get(o, key).and_then(Json::as_str)
}

fn is_enum(o: &JsonObject<'_>) -> bool {
    get(o, "enum")
        .and_then(Json::as_array)
        .is_some_and(|a| !a.is_empty())
}

fn nullable(o: &JsonObject<'_>) -> bool {
    matches!(get(o, "nullable"), Some(Json::Bool(true)))
}

/// The compact JSON text of a scalar default (serde_json's `Display`).
fn scalar_text(v: &Json<'_>) -> Result<String, Unsupported> {
    match v {
        Json::Null => Ok("null".into()),
        Json::Bool(b) => Ok(b.to_string()),
        Json::I64(n) => Ok(n.to_string()),
        Json::U64(n) => Ok(n.to_string()),
        // How the engine's harmony reader holds such an integer is not proven by a vector.
        Json::I128(_) => Err("a tool parameter default that is an integer beyond 64 bits".into()),
        Json::F64(_) | Json::Str(_) => Ok(v.to_serde().to_string()),
        Json::Array(_) | Json::Object(_) => {
            Err("a tool parameter default that is an array or object".to_string())
        }
    }
}

/// The text after `default: ` for a default value of schema `o`.
fn default_text(o: &JsonObject<'_>, v: &Json<'_>) -> Result<String, Unsupported> {
    match v {
        Json::Str(s) if !is_enum(o) => Ok(format!("\"{s}\"")),
        Json::Str(s) => Ok(s.to_string()),
        other => scalar_text(other),
    }
}

fn as_schema<'j, 'a>(v: &'j Json<'a>) -> Result<&'j JsonObject<'a>, Unsupported> {
    v.as_object()
        .ok_or_else(|| "a tool parameter schema that is not an object".to_string())
}

/// The TypeScript form of schema `schema` at indentation `indent`.
pub(crate) fn to_typescript(schema: &JsonObject<'_>, indent: &str) -> Result<String, Unsupported> {
    if let Some(one_of) = get(schema, "oneOf") {
        let variants = one_of
            .as_array()
            .ok_or_else(|| "oneOf that is not a list".to_string())?;
        let mut out = String::new();
        for v in variants {
            let v = as_schema(v)?;
            out.push('\n');
            out.push_str(indent);
            out.push_str(" | ");
            out.push_str(&variant_type(v, &format!("{indent}   "))?);
            let mut comments = Vec::new();
            if let Some(d) = str_of(v, "description") {
                comments.push(d.to_string());
            }
            if let Some(d) = get(v, "default") {
                comments.push(format!("default: {}", default_text(v, d)?));
            }
            if !comments.is_empty() {
                out.push_str(" // ");
                out.push_str(&comments.join(" "));
            }
        }
        return Ok(out);
    }
    match get(schema, "type") {
        Some(Json::Array(types)) => {
            let names: Vec<&str> = types
                .iter()
                .filter_map(Json::as_str)
                .map(|t| if t == "integer" { "number" } else { t })
                .collect();
            if names.is_empty() {
                Ok("any".to_string())
            } else {
                Ok(names.join(" | "))
            }
        }
        Some(Json::Str(t)) => match t.as_ref() {
            "object" => object_type(schema, indent),
            "string" => {
                let quoted: Vec<String> = get(schema, "enum")
                    .and_then(Json::as_array)
                    .unwrap_or(&[])
                    .iter()
                    .filter_map(Json::as_str)
                    .map(|s| format!("\"{s}\""))
                    .collect();
                if quoted.is_empty() {
                    Ok("string".to_string())
                } else {
                    Ok(quoted.join(" | "))
                }
            }
            "number" | "integer" => Ok("number".to_string()),
            "boolean" => Ok("boolean".to_string()),
            "array" => match get(schema, "items") {
                Some(items) => Ok(format!("{}[]", to_typescript(as_schema(items)?, indent)?)),
                None => Ok("Array<any>".to_string()),
            },
            _ => Ok("any".to_string()),
        },
        Some(_) => Err("a schema `type` that is neither a string nor a list".to_string()),
        None => Ok("any".to_string()),
    }
}

/// A variant's type with ` | null` added when it is `nullable` and says no `null` yet.
fn variant_type(v: &JsonObject<'_>, indent: &str) -> Result<String, Unsupported> {
    let mut t = to_typescript(v, indent)?;
    if nullable(v) && !t.contains("null") {
        t.push_str(" | null");
    }
    Ok(t)
}

fn object_type(schema: &JsonObject<'_>, indent: &str) -> Result<String, Unsupported> {
    let mut out = String::new();
    if let Some(d) = str_of(schema, "description") {
        out.push_str(&format!("{indent}// {d}\n"));
    }
    out.push_str("{\n");
    let required: Vec<&str> = get(schema, "required")
        .and_then(Json::as_array)
        .unwrap_or(&[])
        .iter()
        .filter_map(Json::as_str)
        .collect();
    if let Some(props) = get(schema, "properties") {
        let props = props
            .as_object()
            .ok_or_else(|| "`properties` that is not an object".to_string())?;
        for (key, val) in props.effective() {
            let val = as_schema(val)?;
            let mark = if required.contains(&key) { "" } else { "?" };
            if let Some(t) = str_of(val, "title") {
                out.push_str(&format!("{indent}// {t}\n{indent}//\n"));
            }
            let one_of = get(val, "oneOf");
            if one_of.is_none() {
                if let Some(d) = str_of(val, "description") {
                    out.push_str(&format!("{indent}// {d}\n"));
                }
            }
            if let Some(Json::Array(ex)) = get(val, "examples") {
                if !ex.is_empty() {
                    out.push_str(&format!("{indent}// Examples:\n"));
                    for e in ex.iter().filter_map(Json::as_str) {
                        out.push_str(&format!("{indent}// - \"{e}\"\n"));
                    }
                }
            }
            if let Some(one_of) = one_of {
                property_one_of(&mut out, key, mark, val, one_of, indent)?;
                continue;
            }
            out.push_str(&format!("{indent}{key}{mark}: "));
            out.push_str(&variant_type(val, &format!("{indent}    "))?);
            out.push(',');
            if let Some(d) = get(val, "default") {
                out.push_str(&format!(" // default: {}", default_text(val, d)?));
            }
            out.push('\n');
        }
    }
    out.push_str(indent);
    out.push('}');
    Ok(out)
}

/// A property whose schema is a `oneOf`: the property's comments above it, then one line per
/// variant with its own comments, then a lone `,`.
fn property_one_of(
    out: &mut String,
    key: &str,
    mark: &str,
    val: &JsonObject<'_>,
    one_of: &Json<'_>,
    indent: &str,
) -> Result<(), Unsupported> {
    let variants = one_of
        .as_array()
        .ok_or_else(|| "oneOf that is not a list".to_string())?;
    let prop_desc = str_of(val, "description");
    let first_desc = variants
        .first()
        .and_then(Json::as_object)
        .and_then(|v| str_of(v, "description"));
    let desc_above = match prop_desc {
        Some(d) if first_desc != Some(d) => {
            out.push_str(&format!("{indent}// {d}\n"));
            true
        }
        _ => false,
    };
    if let Some(d) = get(val, "default") {
        out.push_str(&format!("{indent}// default: {}\n", default_text(val, d)?));
    }
    out.push_str(&format!("{indent}{key}{mark}:\n"));
    for (i, v) in variants.iter().enumerate() {
        let v = as_schema(v)?;
        out.push_str(&format!("{indent} | "));
        out.push_str(&variant_type(v, &format!("{indent}   "))?);
        let mut comments = Vec::new();
        if !(i == 0 && desc_above) {
            if let Some(d) = str_of(v, "description") {
                if Some(d) != prop_desc {
                    comments.push(d.to_string());
                }
            }
        }
        if let Some(d) = get(v, "default") {
            comments.push(format!("default: {}", default_text(v, d)?));
        }
        if !comments.is_empty() {
            out.push_str(" // ");
            out.push_str(&comments.join(" "));
        }
        out.push('\n');
    }
    out.push_str(&format!("{indent},\n"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(src: &str) -> String {
        let v = crate::json::parse(src.as_bytes()).unwrap();
        to_typescript(v.as_object().unwrap(), "").unwrap()
    }

    #[test]
    fn scalars_arrays_and_unions() {
        assert_eq!(ts(r#"{"type":"integer"}"#), "number");
        assert_eq!(
            ts(r#"{"type":"array","items":{"type":"string"}}"#),
            "string[]"
        );
        assert_eq!(ts(r#"{"type":"array"}"#), "Array<any>");
        assert_eq!(ts(r#"{"type":["string","null"]}"#), "string | null");
        assert_eq!(ts(r#"{"type":"string","enum":["a","b"]}"#), "\"a\" | \"b\"");
        assert_eq!(ts(r#"{}"#), "any");
    }

    #[test]
    fn object_with_defaults_and_nesting() {
        let got = ts(
            r#"{"type":"object","properties":{"b":{"type":"string","description":"B"},
            "a":{"type":"number","default":5},"o":{"type":"object","properties":
            {"x":{"type":"boolean"}},"required":["x"]}},"required":["b"]}"#,
        );
        assert_eq!(
            got,
            "{\n// B\nb: string,\na?: number, // default: 5\no?: {\n    x: boolean,\n    },\n}"
        );
    }

    #[test]
    fn object_defaults_are_refused() {
        let v =
            crate::json::parse(br#"{"type":"object","properties":{"a":{"default":{}}}}"#).unwrap();
        assert!(to_typescript(v.as_object().unwrap(), "").is_err());
    }
}
