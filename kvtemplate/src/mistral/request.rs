//! An OpenAI chat request turned into mistral_common's instruct request the way each engine
//! path does it (docs/contracts/templates.md §13.8): the path's request fix-ups, mistral_common's
//! validation (`ValidationMode.test`, v3 validator) and normalisation (system prompts
//! aggregated, consecutive messages of one role merged, JSON content normalised).
//!
//! Every rule is proven by a case of `testdata/vectors/templates-nonjinja/mistral-tekken-v1.json`
//! or is mistral_common's own documented behaviour; a request shape where the engine's
//! answer is not known (a message `name`, non-text content parts, `tool_choice` other than
//! `auto`/`none`, …) is refused with [`Error::Unsupported`] rather than guessed.

use super::pyjson;
use super::schema;
use super::{InstructVersion, MistralPath};
use crate::engine::ChatRequest;
use crate::json::Json;
use crate::Error;

fn unsupported(what: impl Into<String>) -> Error {
    Error::Unsupported(format!("mistral: {}", what.into()))
}

/// mistral_common's refusal (a `ValueError` the engine answers with HTTP 400).
fn refused(what: impl Into<String>) -> Error {
    Error::EngineRequest(format!("ValueError: {}", what.into()))
}

/// A tool call of an assistant message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Call {
    pub id: String,
    pub name: String,
    /// The arguments JSON text as posted.
    pub arguments: String,
}

/// A message as mistral_common holds it before normalisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Msg {
    /// Text chunks (a string content is one chunk).
    System(Vec<String>),
    User(Vec<String>),
    Assistant {
        content: Option<String>,
        calls: Option<Vec<Call>>,
        prefix: bool,
    },
    Tool {
        id: String,
        content: String,
    },
}

impl Msg {
    fn role(&self) -> &'static str {
        match self {
            Msg::System(_) => "system",
            Msg::User(_) => "user",
            Msg::Assistant { .. } => "assistant",
            Msg::Tool { .. } => "tool",
        }
    }
}

/// One function tool (mistral_common `Tool`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolDef<'a> {
    pub name: String,
    pub description: String,
    pub parameters: Option<Json<'a>>,
}

/// The request mistral_common encodes.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    pub messages: Vec<Msg>,
    pub tools: Vec<ToolDef<'a>>,
    /// SGLang only: the assistant prefix it encodes after the rendered text.
    pub sglang_prefix: Option<String>,
}

/// `content` as text chunks: a string is one chunk; a list of `text` parts its texts.
fn chunks(v: Option<&Json<'_>>, what: &str) -> Result<Option<Vec<String>>, Error> {
    match v {
        None | Some(Json::Null) => Ok(None),
        Some(Json::Str(s)) => Ok(Some(vec![s.to_string()])),
        Some(Json::Array(parts)) => parts
            .iter()
            .map(|p| {
                let o = p.as_object().ok_or_else(|| {
                    unsupported(format!("{what}: a content part that is not an object"))
                })?;
                for (k, v) in o.effective() {
                    if !matches!(k, "type" | "text") && !matches!(v, Json::Null) {
                        return Err(unsupported(format!("{what}: content part key `{k}`")));
                    }
                }
                match (o.get("type").and_then(Json::as_str), o.get("text")) {
                    (Some("text"), Some(Json::Str(t))) => Ok(t.to_string()),
                    _ => Err(unsupported(format!(
                        "{what}: a content part other than text"
                    ))),
                }
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(unsupported(format!("{what}: content of another type"))),
    }
}

const MESSAGE_KEYS: &[&str] = &[
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "reasoning",
    "reasoning_content",
];

/// vLLM's `truncate_tool_call_ids`: an id longer than 9 characters keeps its last 9.
fn truncated(id: &str) -> String {
    let n = id.chars().count();
    if n > 9 {
        id.chars().skip(n - 9).collect()
    } else {
        id.to_string()
    }
}

fn calls_of(v: &Json<'_>, path: MistralPath) -> Result<Vec<Call>, Error> {
    let list = v
        .as_array()
        .ok_or_else(|| unsupported("tool_calls that is not a list"))?;
    list.iter()
        .map(|c| {
            let c = c
                .as_object()
                .ok_or_else(|| unsupported("a tool call that is not an object"))?;
            for (k, v) in c.effective() {
                if !matches!(k, "id" | "type" | "function") && !matches!(v, Json::Null) {
                    return Err(unsupported(format!("tool call key `{k}`")));
                }
            }
            if !matches!(c.get("type"), None | Some(Json::Null))
                && c.get("type").and_then(Json::as_str) != Some("function")
            {
                return Err(unsupported("a tool call that is not a function call"));
            }
            let id = c
                .get("id")
                .and_then(Json::as_str)
                .ok_or_else(|| unsupported("a tool call without a string id"))?;
            let f = c
                .get("function")
                .and_then(Json::as_object)
                .ok_or_else(|| unsupported("a tool call without a function"))?;
            for (k, v) in f.effective() {
                if !matches!(k, "name" | "arguments") && !matches!(v, Json::Null) {
                    return Err(unsupported(format!("tool call function key `{k}`")));
                }
            }
            let name = f
                .get("name")
                .and_then(Json::as_str)
                .ok_or_else(|| unsupported("a tool call without a string name"))?;
            let arguments = match f.get("arguments") {
                Some(Json::Str(s)) => s.to_string(),
                _ => return Err(unsupported("tool call arguments that are not a string")),
            };
            Ok(Call {
                id: match path {
                    MistralPath::VllmChat => truncated(id),
                    _ => id.to_string(),
                },
                name: name.to_string(),
                arguments,
            })
        })
        .collect()
}

fn message_of(m: &Json<'_>, path: MistralPath) -> Result<Msg, Error> {
    let m = m
        .as_object()
        .ok_or_else(|| Error::EngineRequest("a message is not an object".to_string()))?;
    for (k, v) in m.effective() {
        if !MESSAGE_KEYS.contains(&k) && !matches!(v, Json::Null) {
            return Err(unsupported(format!("message key `{k}`")));
        }
    }
    let role = m
        .get("role")
        .and_then(Json::as_str)
        .ok_or_else(|| Error::EngineRequest("a message without a role".to_string()))?;
    let content = m.get("content");
    let only = |keys: &[&str]| -> Result<(), Error> {
        for (k, v) in m.effective() {
            if !keys.contains(&k) && !matches!(v, Json::Null) {
                return Err(unsupported(format!("`{k}` on a {role} message")));
            }
        }
        Ok(())
    };
    match role {
        "system" => {
            only(&["role", "content"])?;
            // mistral_common: "System prompt must have content".
            let c = chunks(content, "system")?
                .ok_or_else(|| refused("System prompt must have content"))?;
            Ok(Msg::System(c))
        }
        "user" => {
            only(&["role", "content"])?;
            let c = chunks(content, "user")?
                .ok_or_else(|| unsupported("a user message without content"))?;
            Ok(Msg::User(c))
        }
        "assistant" => {
            only(&[
                "role",
                "content",
                "tool_calls",
                "reasoning",
                "reasoning_content",
            ])?;
            for key in ["reasoning", "reasoning_content"] {
                match (m.get(key), path) {
                    (None | Some(Json::Null), _) => {}
                    // mistral_common turns it into a ThinkChunk, which v3 refuses.
                    (Some(Json::Str(_)), MistralPath::VllmChat | MistralPath::VllmTokenize) => {
                        if key == "reasoning" {
                            return Err(refused(
                                "Unexpected content chunk types in assistant message: \
                                 ['ThinkChunk']",
                            ));
                        }
                        return Err(unsupported("assistant `reasoning_content`"));
                    }
                    // SGLang's own message handling drops it before mistral_common.
                    (Some(Json::Str(_)), MistralPath::SglangText) if key == "reasoning" => {}
                    _ => return Err(unsupported(format!("assistant `{key}`"))),
                }
            }
            let content = match content {
                None | Some(Json::Null) => None,
                Some(Json::Str(s)) => Some(s.to_string()),
                Some(_) => return Err(unsupported("assistant content that is not a string")),
            };
            let calls = match m.get("tool_calls") {
                None | Some(Json::Null) => None,
                // POST /tokenize hands mistral_common a pydantic iterator (vectors:
                // tool_call_round and its kin on vllm_tokenize).
                Some(_) if path == MistralPath::VllmTokenize => {
                    return Err(refused(
                        "tool_calls must be a list, got <class \
                         'pydantic_core._pydantic_core.ValidatorIterator'>",
                    ))
                }
                Some(v) => Some(calls_of(v, path)?),
            };
            Ok(Msg::Assistant {
                content,
                calls,
                prefix: false,
            })
        }
        "tool" => {
            only(&["role", "content", "tool_call_id"])?;
            let id = m
                .get("tool_call_id")
                .and_then(Json::as_str)
                .ok_or_else(|| unsupported("a tool message without a string tool_call_id"))?;
            let content = match content {
                Some(Json::Str(s)) => s.to_string(),
                _ => return Err(unsupported("tool content that is not a string")),
            };
            Ok(Msg::Tool {
                id: match path {
                    MistralPath::VllmChat => truncated(id),
                    _ => id.to_string(),
                },
                content,
            })
        }
        other => Err(unsupported(format!("role `{other}`"))),
    }
}

fn tools_of<'a>(req: &ChatRequest<'a>, path: MistralPath) -> Result<Vec<ToolDef<'a>>, Error> {
    let tools = match req.body.get("tools") {
        None | Some(Json::Null) => return Ok(Vec::new()),
        Some(Json::Array(t)) => t,
        Some(_) => return Err(Error::EngineRequest("tools must be a list".to_string())),
    };
    if tools.is_empty() {
        return Err(unsupported("an empty tools list"));
    }
    let drop = match req.body.get("tool_choice") {
        None | Some(Json::Null) => false,
        Some(Json::Str(s)) if s == "auto" => false,
        // vLLM still renders the tools (tools_tool_choice_none); SGLang drops them.
        Some(Json::Str(s)) if s == "none" => path == MistralPath::SglangText,
        Some(_) => return Err(unsupported("tool_choice other than auto or none")),
    };
    let mut out = Vec::with_capacity(tools.len());
    for t in tools {
        let t = t
            .as_object()
            .ok_or_else(|| unsupported("a tool that is not an object"))?;
        for (k, v) in t.effective() {
            if !matches!(k, "type" | "function") && !matches!(v, Json::Null) {
                return Err(unsupported(format!("tool key `{k}`")));
            }
        }
        if t.get("type").and_then(Json::as_str) != Some("function") {
            return Err(unsupported("a tool that is not a function tool"));
        }
        let f = t
            .get("function")
            .and_then(Json::as_object)
            .ok_or_else(|| unsupported("a function tool without a function object"))?;
        for (k, v) in f.effective() {
            let ok = match k {
                "name" | "description" | "parameters" => true,
                // Excluded from the dump.
                "strict" => matches!(v, Json::Bool(_) | Json::Null),
                _ => matches!(v, Json::Null),
            };
            if !ok {
                return Err(unsupported(format!("tool function key `{k}`")));
            }
        }
        let name = f
            .get("name")
            .and_then(Json::as_str)
            .ok_or_else(|| unsupported("a tool without a string name"))?;
        if !valid_function_name(name) {
            return Err(refused(format!(
                "Function name was {name} but must be a-z, A-Z, 0-9, or contain underscores \
                 and dashes, with a maximum length of 64."
            )));
        }
        let description = match f.get("description") {
            None | Some(Json::Null) => String::new(),
            Some(Json::Str(s)) => s.to_string(),
            Some(_) => return Err(unsupported("a tool description that is not a string")),
        };
        let parameters = match f.get("parameters") {
            None | Some(Json::Null) => None,
            Some(p @ Json::Object(_)) => {
                pyjson::check_python_exact(p)?;
                schema::check(p, 0)?;
                Some(p.clone())
            }
            Some(_) => return Err(unsupported("tool parameters that are not an object")),
        };
        out.push(ToolDef {
            name: name.to_string(),
            description,
            parameters,
        });
    }
    Ok(if drop { Vec::new() } else { out })
}

fn valid_function_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn valid_call_id(id: &str) -> bool {
    id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// The request-level fields each path reads (vLLM's `validate_request_params`, SGLang's
/// request handling).
fn check_fields(req: &ChatRequest<'_>, path: MistralPath) -> Result<(), Error> {
    let chat_template_refusal = || {
        Error::EngineRequest(
            "VLLMValidationError: chat_template is not supported for Mistral tokenizers. \
             (parameter=chat_template)"
                .to_string(),
        )
    };
    if !matches!(req.body.get("chat_template"), None | Some(Json::Null)) {
        return Err(match path {
            MistralPath::VllmChat => chat_template_refusal(),
            _ => unsupported("chat_template"),
        });
    }
    match req.body.get("chat_template_kwargs") {
        None | Some(Json::Null) => {}
        Some(_) if path == MistralPath::VllmChat => return Err(chat_template_refusal()),
        // /tokenize and SGLang ignore it (vector chat_template_kwargs); only keys the
        // vectors show are accepted.
        Some(Json::Object(o)) => {
            for (k, _) in o.effective() {
                if k != "enable_thinking" {
                    return Err(unsupported(format!("chat_template_kwargs key `{k}`")));
                }
            }
        }
        Some(_) => return Err(unsupported("chat_template_kwargs that is not an object")),
    }
    match (req.body.get("reasoning_effort"), path) {
        (None | Some(Json::Null), _) => {}
        // Not a TokenizeChatRequest field.
        (Some(_), MistralPath::VllmTokenize) => {}
        // vLLM accepts these without changing the ids (reasoning_effort_high / _max).
        (Some(Json::Str(s)), MistralPath::VllmChat) if s == "high" || s == "max" => {}
        (Some(Json::Str(s)), MistralPath::SglangText) => {
            return Err(refused(format!(
                "reasoning_effort='{s}' is not supported for this model"
            )))
        }
        (Some(_), _) => return Err(unsupported("this reasoning_effort value")),
    }
    Ok(())
}

/// The request as the engine path hands it to mistral_common, validated.
pub(crate) fn request<'a>(
    req: &ChatRequest<'a>,
    path: MistralPath,
    version: InstructVersion,
) -> Result<Request<'a>, Error> {
    check_fields(req, path)?;
    let add_generation_prompt = req
        .flag("add_generation_prompt", true)
        .map_err(Error::Request)?;
    let continue_final = req
        .flag("continue_final_message", false)
        .map_err(Error::Request)?;
    if add_generation_prompt && continue_final {
        return Err(Error::EngineRequest(
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
                .to_string(),
        ));
    }
    let raw = req.messages().map_err(Error::EngineRequest)?;
    let mut messages = raw
        .iter()
        .map(|m| message_of(m, path))
        .collect::<Result<Vec<_>, _>>()?;
    let tools = tools_of(req, path)?;
    let mut sglang_prefix = None;
    let last_is_plain_assistant = matches!(
        messages.last(),
        Some(Msg::Assistant {
            content: Some(_),
            calls: None,
            ..
        })
    );
    match path {
        MistralPath::VllmChat | MistralPath::VllmTokenize => {
            let last_assistant = matches!(messages.last(), Some(Msg::Assistant { .. }));
            if add_generation_prompt && last_assistant {
                return Err(refused(
                    "Cannot set `add_generation_prompt` to True when the last message is from \
                     the assistant. Consider using `continue_final_message` instead.",
                ));
            }
            if !add_generation_prompt && !last_assistant {
                return Err(unsupported(
                    "add_generation_prompt false without a final assistant message",
                ));
            }
            if continue_final {
                match messages.last_mut() {
                    Some(Msg::Assistant { prefix, .. }) => *prefix = true,
                    _ => {
                        return Err(unsupported(
                            "continue_final_message without a final assistant message",
                        ))
                    }
                }
            }
        }
        MistralPath::SglangText => {
            if continue_final {
                // SGLang encodes the prefill itself after the rendered text
                // (continue_final_message on sglang).
                match messages.pop() {
                    Some(Msg::Assistant {
                        content: Some(c),
                        calls: None,
                        ..
                    }) => sglang_prefix = Some(c),
                    _ => {
                        return Err(unsupported(
                            "continue_final_message without a final text assistant message",
                        ))
                    }
                }
            } else if last_is_plain_assistant {
                // A final assistant message without continue_final_message reaches
                // mistral_common as a user turn (final_assistant_generation_prompt,
                // final_assistant_no_generation_prompt on sglang).
                if let Some(Msg::Assistant {
                    content: Some(c), ..
                }) = messages.pop()
                {
                    messages.push(Msg::User(vec![c]));
                }
            } else if matches!(messages.last(), Some(Msg::Assistant { .. })) {
                return Err(unsupported("a final assistant message with tool calls"));
            } else if !add_generation_prompt {
                return Err(unsupported(
                    "add_generation_prompt false without a final assistant message",
                ));
            }
        }
    }
    validate(&messages, version)?;
    Ok(Request {
        messages,
        tools,
        sglang_prefix,
    })
}

/// mistral_common's validator in test mode: v3's, and for v7 v5's (an assistant message may
/// carry both content and tool calls).
fn validate(messages: &[Msg], version: InstructVersion) -> Result<(), Error> {
    let structure = |m: &str| refused(m.to_string());
    match messages {
        [] => return Err(structure("Conversation must have at least one message")),
        [only] if !matches!(only, Msg::User(_) | Msg::System(_)) => {
            return Err(structure(
                "Conversation must start with a user message or system message",
            ))
        }
        [_] => {}
        [.., last] => {
            if let Msg::Assistant { prefix: false, .. } = last {
                return Err(structure(
                    "Expected last role User or Tool (or Assistant with prefix) for serving \
                     but got assistant",
                ));
            }
        }
    }
    for w in messages.windows(2) {
        let (prev, cur) = (w[0].role(), w[1].role());
        let ok = match prev {
            "system" => matches!(cur, "user" | "assistant" | "system"),
            "user" => matches!(cur, "assistant" | "system" | "user"),
            "assistant" => matches!(cur, "assistant" | "user" | "tool"),
            _ => matches!(cur, "assistant" | "tool"),
        };
        if prev == "tool" && cur == "user" {
            // Allowed by some mistral_common releases, refused by others: no vector says.
            return Err(unsupported("a user message right after a tool result"));
        }
        if !ok {
            return Err(structure(&format!(
                "Unexpected role '{cur}' after role '{prev}'"
            )));
        }
    }
    // Tool calls followed by as many results before the next assistant message.
    let mut expected: i64 = 0;
    for m in messages.iter().skip(1) {
        match m {
            Msg::Tool { .. } => expected -= 1,
            Msg::Assistant { calls, .. } => {
                if expected != 0 {
                    return Err(structure(
                        "Not the same number of function calls and responses",
                    ));
                }
                expected = calls.as_ref().map_or(0, |c| c.len() as i64);
            }
            _ => {}
        }
    }
    for m in messages {
        match m {
            Msg::Assistant { content, calls, .. } => {
                let has_content = content.as_ref().is_some_and(|c| !c.is_empty());
                let has_calls = calls.as_ref().is_some_and(|c| !c.is_empty());
                if version == InstructVersion::V3 && has_content == has_calls {
                    return Err(structure(
                        "Assistant message must have either content or tool_calls, but not \
                         both.",
                    ));
                }
                for c in calls.iter().flatten() {
                    if c.id == "null" {
                        return Err(unsupported("a tool call id \"null\""));
                    }
                    if !valid_call_id(&c.id) {
                        return Err(structure(&format!(
                            "Tool call id was {} but must be a-z, A-Z, 0-9, with a length of 9.",
                            c.id
                        )));
                    }
                    if !valid_function_name(&c.name) {
                        return Err(structure(&format!(
                            "Function name was {} but must be a-z, A-Z, 0-9, or contain \
                             underscores and dashes, with a maximum length of 64.",
                            c.name
                        )));
                    }
                }
            }
            Msg::Tool { id, .. } => {
                if !valid_call_id(id) {
                    return Err(structure(&format!(
                        "Tool call id was {id} but must be a-z, A-Z, 0-9, with a length of 9."
                    )));
                }
            }
            Msg::System(_) | Msg::User(_) => {}
        }
    }
    Ok(())
}

/// A normalised message (mistral_common `InstructRequest`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Norm {
    /// v7 only: a system message in place.
    System(String),
    User(String),
    Assistant {
        content: String,
        calls: Vec<Call>,
        prefix: bool,
    },
    Tool {
        id: String,
        /// Normalised JSON content (`json.dumps(json.loads(c))`, or `c` itself).
        content: String,
    },
}

/// Joins text chunks of consecutive messages: empty texts skipped, `\n\n` between the rest.
fn join_texts<'s>(texts: impl IntoIterator<Item = &'s str>) -> String {
    let mut out = String::new();
    for t in texts {
        if t.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(t);
    }
    out
}

/// `_normalize_json_content`: empty → `{}`; JSON → its Python dump; other text as is.
pub(crate) fn normalise_json(text: &str) -> Result<String, Error> {
    if text.is_empty() {
        return Ok("{}".to_string());
    }
    Ok(match pyjson::loads(text)? {
        Some(v) => pyjson::dumps(&v),
        None => text.to_string(),
    })
}

/// The system prompt and the normalised messages.
pub(crate) fn normalise(
    messages: &[Msg],
    version: InstructVersion,
) -> Result<(Option<String>, Vec<Norm>), Error> {
    let system: Vec<String> = messages
        .iter()
        .filter_map(|m| match m {
            Msg::System(c) => Some(join_texts(c.iter().map(String::as_str))),
            _ => None,
        })
        .filter(|s| !s.is_empty())
        .collect();
    // An empty system content is skipped by mistral_common (`if message.content`), a list
    // of empty parts is kept as an empty prompt: no vector covers either.
    if messages
        .iter()
        .any(|m| matches!(m, Msg::System(c) if join_texts(c.iter().map(String::as_str)).is_empty()))
    {
        return Err(unsupported("an empty system message"));
    }
    // v3 folds the system messages into one prompt; v7 keeps each in place.
    let system_prompt =
        (version == InstructVersion::V3 && !system.is_empty()).then(|| system.join("\n\n"));
    let mut out: Vec<Norm> = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let role = messages[i].role();
        let mut j = i;
        while j < messages.len() && messages[j].role() == role {
            j += 1;
        }
        let group = &messages[i..j];
        match role {
            "user" => {
                let texts = group.iter().flat_map(|m| match m {
                    Msg::User(c) => c.iter().map(String::as_str).collect::<Vec<_>>(),
                    _ => Vec::new(),
                });
                out.push(Norm::User(join_texts(texts)));
            }
            "assistant" => {
                let mut calls = Vec::new();
                let mut prefix = false;
                let mut texts = Vec::new();
                for m in group {
                    if let Msg::Assistant {
                        content,
                        calls: c,
                        prefix: p,
                    } = m
                    {
                        if let Some(t) = content {
                            texts.push(t.as_str());
                        }
                        for call in c.iter().flatten() {
                            calls.push(Call {
                                arguments: normalise_json(&call.arguments)?,
                                ..call.clone()
                            });
                        }
                        prefix |= *p;
                    }
                }
                out.push(Norm::Assistant {
                    content: join_texts(texts),
                    calls,
                    prefix,
                });
            }
            "tool" => {
                for m in group {
                    if let Msg::Tool { id, content } = m {
                        out.push(Norm::Tool {
                            id: id.clone(),
                            // v7 keeps the tool content as posted.
                            content: match version {
                                InstructVersion::V3 => normalise_json(content)?,
                                InstructVersion::V7 => content.clone(),
                            },
                        });
                    }
                }
            }
            _ => {
                if version == InstructVersion::V7 {
                    for m in group {
                        if let Msg::System(c) = m {
                            out.push(Norm::System(join_texts(c.iter().map(String::as_str))));
                        }
                    }
                }
            }
        }
        i = j;
    }
    // v3: an empty user message first when the first message is not a user message; v7
    // only when there is no message at all.
    let insert = match version {
        InstructVersion::V3 => !matches!(out.first(), Some(Norm::User(_))),
        InstructVersion::V7 => out.is_empty(),
    };
    if insert {
        out.insert(0, Norm::User(String::new()));
    }
    Ok((system_prompt, out))
}

/// `json.dumps` of the tools list as mistral_common's v3 user message carries it.
pub(crate) fn tools_json(tools: &[ToolDef<'_>]) -> String {
    let mut s = String::from("[");
    for (i, t) in tools.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str("{\"type\": \"function\", \"function\": {\"name\": ");
        s.push_str(&pyjson::dumps_str(&t.name));
        s.push_str(", \"description\": ");
        s.push_str(&pyjson::dumps_str(&t.description));
        s.push_str(", \"parameters\": ");
        match &t.parameters {
            Some(p) => s.push_str(&pyjson::dumps(p)),
            None => s.push_str("{}"),
        }
        s.push_str("}}");
    }
    s.push(']');
    s
}

/// `json.loads` of normalised content, dumped again (a string when it is not JSON).
fn reparsed(normalised: &str) -> Result<String, Error> {
    Ok(match pyjson::loads(normalised)? {
        Some(v) => pyjson::dumps(&v),
        None => pyjson::dumps_str(normalised),
    })
}

/// `json.dumps` of an assistant message's tool calls (v3 `_prepare_function_call`).
pub(crate) fn calls_json(calls: &[Call]) -> Result<String, Error> {
    let mut s = String::from("[");
    for (i, c) in calls.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str("{\"name\": ");
        s.push_str(&pyjson::dumps_str(&c.name));
        s.push_str(", \"arguments\": ");
        s.push_str(&reparsed(&c.arguments)?);
        s.push_str(", \"id\": ");
        s.push_str(&pyjson::dumps_str(&c.id));
        s.push('}');
    }
    s.push(']');
    Ok(s)
}

/// `json.dumps` of a tool result (v3 `_prepare_tool_result`).
pub(crate) fn result_json(id: &str, content: &str) -> Result<String, Error> {
    Ok(format!(
        "{{\"content\": {}, \"call_id\": {}}}",
        reparsed(content)?,
        pyjson::dumps_str(id)
    ))
}
