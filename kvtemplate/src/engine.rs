//! Engine contracts and how each engine turns an OpenAI chat request into a template context
//! (docs/contracts/templates.md §4 and §11). This is the full, non-strict behaviour the parity vectors
//! record (`engine_token_ids`); the gateway's strict path (`strict`) refuses everything here
//! that is not plain chat.

use crate::chat_rules::ToolSerialization;
use crate::json::{map_value, Json, JsonObject};
use crate::Error;
use minijinja::Value;

/// The refusal of a request holding an integer literal beyond `i128` in `what`.
fn beyond_128_bits(what: &str) -> Error {
    Error::Unsupported(format!(
        "{what} holds an integer beyond 128 bits (Python reads it exactly; kvexact does not \
         render it)"
    ))
}

pub use kvprofile_core::Engine;

/// How `engine` joins several text parts of one message (SGLang: a space; vLLM and
/// TensorRT-LLM: a newline). llama.cpp has no chat path here: encoders refuse it at
/// construction ([`crate::Error::NoChatPath`]).
pub fn text_part_separator(engine: Engine) -> &'static str {
    match engine {
        Engine::Sglang => " ",
        Engine::Vllm | Engine::Trtllm | Engine::Llamacpp => "\n",
    }
}

/// An OpenAI chat request as the engine emulation reads it (borrowed from the body).
#[derive(Debug, Clone)]
pub struct ChatRequest<'a> {
    /// The whole body (exact keys, last duplicate wins).
    pub body: JsonObject<'a>,
}

/// What an engine renders and tokenizes for a chat request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineChat {
    /// The prompt text the engine renders (for SGLang's `continue_final_message`, the text
    /// before the assistant prefix ids are appended).
    pub rendered: String,
    /// The prompt ids (`None` for a render-only encoder without tokenizer).
    pub ids: Option<Vec<u32>>,
}

impl<'a> ChatRequest<'a> {
    /// Parses a request body: [`Error::Request`] when it is not a JSON object,
    /// [`Error::Unsupported`] when it holds an integer beyond 128 bits (Python reads it
    /// exactly; kvexact would not, see [`crate::json::parse`]).
    pub fn parse(body: &'a [u8]) -> Result<ChatRequest<'a>, Error> {
        match crate::json::parse(body) {
            Ok(Json::Object(o)) => Ok(ChatRequest { body: o }),
            Ok(_) => Err(Error::Request(
                "request body is not a JSON object".to_string(),
            )),
            Err(e) if crate::json::integer_too_large(&e) => Err(beyond_128_bits("request body")),
            Err(e) => Err(Error::Request(format!("request body is not JSON: {e}"))),
        }
    }

    /// A boolean field with its default (`null` counts as absent).
    pub fn flag(&self, key: &str, default: bool) -> Result<bool, String> {
        match self.body.get(key) {
            None | Some(Json::Null) => Ok(default),
            Some(Json::Bool(b)) => Ok(*b),
            Some(_) => Err(format!("{key} must be a boolean")),
        }
    }

    /// The `messages` array.
    pub fn messages(&self) -> Result<&[Json<'a>], String> {
        self.body
            .get("messages")
            .and_then(Json::as_array)
            .ok_or_else(|| "messages must be an array".to_string())
    }
}

/// Joins the text parts of an OpenAI content array; `None` if a part is malformed.
pub fn join_text_parts(parts: &[Json<'_>], sep: &str) -> Option<String> {
    let mut out = String::new();
    let mut first = true;
    for p in parts {
        let o = p.as_object()?;
        let ty = o.get("type").and_then(Json::as_str)?;
        if ty == "text" {
            let t = o.get("text").and_then(Json::as_str)?;
            if !first {
                out.push_str(sep);
            }
            out.push_str(t);
            first = false;
        }
    }
    Some(out)
}

/// One message normalised the way `engine` hands it to the template: text parts joined,
/// `null` content as `""`, tool-call `arguments` JSON strings parsed to objects, TRT-LLM's
/// `media: []` — keeping, besides `role` and `content`, only the keys for which
/// `keep(role, key, value)` is true (the emulation keeps every key; the strict encoder's lifted
/// path hands the template only the message fields whose engine handling is proven; see
/// [`crate::Encoder::encode_chat`]).
pub fn normalise_message_with(
    engine: Engine,
    msg: &Json<'_>,
    keep: &dyn Fn(&str, &str, &Json<'_>) -> bool,
) -> Result<Value, Error> {
    let bad = |m: &str| Error::EngineRequest(m.to_string());
    let o = msg
        .as_object()
        .ok_or_else(|| bad("each message must be an object"))?;
    let mut out: Vec<(Value, Value)> = Vec::with_capacity(o.0.len() + 2);
    let role = o
        .get("role")
        .and_then(Json::as_str)
        .ok_or_else(|| bad("message role must be a string"))?;
    out.push((Value::from("role"), Value::from(role)));
    let content = match o.get("content") {
        None | Some(Json::Null) => String::new(),
        Some(Json::Str(s)) => s.to_string(),
        Some(Json::Array(parts)) => join_text_parts(parts, text_part_separator(engine))
            .ok_or_else(|| bad("malformed content part"))?,
        Some(_) => return Err(bad("message content must be a string, null or a list")),
    };
    out.push((Value::from("content"), Value::from(content)));
    for (k, v) in o.effective() {
        match k {
            "role" | "content" => {}
            _ if !keep(role, k, v) => {}
            "tool_calls" => out.push((Value::from(k), normalise_tool_calls(v)?)),
            _ => out.push((Value::from(k), v.to_value())),
        }
    }
    if engine == Engine::Trtllm {
        out.push((Value::from("media"), Value::from(Vec::<Value>::new())));
    }
    Ok(map_value(out))
}

fn normalise_tool_calls(v: &Json<'_>) -> Result<Value, Error> {
    let Some(calls) = v.as_array() else {
        return Ok(v.to_value());
    };
    let function = |fo: &JsonObject<'_>| -> Result<Value, Error> {
        let mut pairs = Vec::new();
        for (fk, fv) in fo.effective() {
            let fval = match (fk, fv) {
                ("arguments", Json::Str(s)) => match crate::json::parse(s.as_bytes()) {
                    Ok(parsed) => parsed.to_value(),
                    Err(e) if crate::json::integer_too_large(&e) => {
                        return Err(beyond_128_bits("tool-call arguments"))
                    }
                    Err(_) => fv.to_value(),
                },
                _ => fv.to_value(),
            };
            pairs.push((Value::from(fk), fval));
        }
        Ok(map_value(pairs))
    };
    let mut out = Vec::with_capacity(calls.len());
    for call in calls {
        let Some(co) = call.as_object() else {
            out.push(call.to_value());
            continue;
        };
        let mut pairs = Vec::new();
        for (k, cv) in co.effective() {
            let val = match (k, cv.as_object()) {
                ("function", Some(fo)) => function(fo)?,
                _ => cv.to_value(),
            };
            pairs.push((Value::from(k), val));
        }
        out.push(map_value(pairs));
    }
    Ok(out.into())
}

/// The `tools` list as an engine release hands it to the template (`model_dump()` of its
/// pydantic models; see [`ToolSerialization`] for each release's shape).
pub fn normalise_tools(
    serialization: ToolSerialization,
    tools: &[Json<'_>],
) -> Result<Value, String> {
    let mut out = Vec::with_capacity(tools.len());
    for t in tools {
        let o = t
            .as_object()
            .ok_or_else(|| "each tool must be an object".to_string())?;
        let ty = o.get("type").and_then(Json::as_str).unwrap_or("function");
        let f = o
            .get("function")
            .and_then(Json::as_object)
            .ok_or_else(|| "tool.function must be an object".to_string())?;
        let name = f
            .get("name")
            .and_then(Json::as_str)
            .ok_or_else(|| "tool.function.name must be a string".to_string())?;
        let field = |k: &str| f.get(k).map(Json::to_value);
        let none = || Value::from(());
        let func: Vec<(&str, Value)> = match serialization {
            ToolSerialization::VllmSetFields => {
                let mut v = vec![("name", Value::from(name))];
                for k in ["description", "parameters", "strict"] {
                    if let Some(val) = field(k) {
                        v.push((k, val));
                    }
                }
                v
            }
            ToolSerialization::SglangPydanticDump => vec![
                ("description", field("description").unwrap_or_else(none)),
                ("name", Value::from(name)),
                ("parameters", field("parameters").unwrap_or_else(none)),
                ("strict", field("strict").unwrap_or(Value::from(false))),
            ],
            ToolSerialization::SglangRequestKeys => f
                .effective()
                .into_iter()
                .filter(|(k, _)| FUNCTION_FIELDS.contains(k))
                .map(|(k, v)| (k, v.to_value()))
                .collect(),
            ToolSerialization::TrtllmStrictNull => vec![
                ("name", Value::from(name)),
                ("description", field("description").unwrap_or_else(none)),
                ("parameters", field("parameters").unwrap_or_else(none)),
                ("strict", field("strict").unwrap_or_else(none)),
            ],
        };
        let func: Value = map_value(func);
        let mut tool = vec![("type", Value::from(ty)), ("function", func)];
        if serialization.adds_defer_loading() {
            tool.push((
                "defer_loading",
                o.get("defer_loading").map_or_else(none, Json::to_value),
            ));
        }
        out.push(map_value(tool));
    }
    Ok(Value::from(out))
}

/// The fields of the engines' `Function` model; anything else a client sends in
/// `tool.function` is dropped (pydantic ignores extra fields).
const FUNCTION_FIELDS: [&str; 4] = ["name", "description", "parameters", "strict"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::{dumps, DumpOptions};

    /// One tool as a client may send it: `description` before `name`, `strict` set, an
    /// unknown key, and a second tool with only a name.
    const TOOLS: &str = r#"[
        {"type": "function", "function": {"description": "d", "name": "f", "strict": true,
                                          "x_extra": 1, "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "g"}}
    ]"#;

    fn dump(serialization: ToolSerialization) -> String {
        let doc = crate::json::parse(TOOLS.as_bytes()).unwrap_or(Json::Null);
        let tools = doc.as_array().unwrap_or(&[]);
        let v = normalise_tools(serialization, tools).unwrap_or_default();
        dumps(&v, &DumpOptions::default()).unwrap_or_default()
    }

    #[test]
    fn vllm_set_fields() {
        assert_eq!(
            dump(ToolSerialization::VllmSetFields),
            r#"[{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}, "strict": true}}, {"type": "function", "function": {"name": "g"}}]"#
        );
    }

    #[test]
    fn sglang_pydantic_dump() {
        assert_eq!(
            dump(ToolSerialization::SglangPydanticDump),
            r#"[{"type": "function", "function": {"description": "d", "name": "f", "parameters": {"type": "object"}, "strict": true}, "defer_loading": null}, {"type": "function", "function": {"description": null, "name": "g", "parameters": null, "strict": false}, "defer_loading": null}]"#
        );
    }

    #[test]
    fn sglang_request_keys() {
        assert_eq!(
            dump(ToolSerialization::SglangRequestKeys),
            r#"[{"type": "function", "function": {"description": "d", "name": "f", "strict": true, "parameters": {"type": "object"}}, "defer_loading": null}, {"type": "function", "function": {"name": "g"}, "defer_loading": null}]"#
        );
    }

    #[test]
    fn trtllm_strict_null() {
        assert_eq!(
            dump(ToolSerialization::TrtllmStrictNull),
            r#"[{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}, "strict": true}}, {"type": "function", "function": {"name": "g", "description": null, "parameters": null, "strict": null}}]"#
        );
    }

    #[test]
    fn a_tool_without_a_name_is_refused_by_every_variant() {
        let doc =
            crate::json::parse(br#"[{"type": "function", "function": {}}]"#).unwrap_or(Json::Null);
        for s in ToolSerialization::ALL {
            assert!(
                normalise_tools(s, doc.as_array().unwrap_or(&[])).is_err(),
                "{s}"
            );
        }
    }
}
