//! An OpenAI chat request turned into harmony messages the way vLLM's harmony path does
//! (docs/contracts/templates.md §13.2–§13.3), before rendering.
//!
//! Every rule here is proven by a case of `testdata/vectors/templates-nonjinja/gptoss-20b-v1.json`;
//! a request shape no case covers (a message `name`, non-text content parts, assistant content
//! as a list of parts, an empty leading system message, …) is refused with
//! [`crate::Error::Unsupported`] rather than guessed.

use super::typescript;
use super::HarmonyConfig;
use crate::engine::ChatRequest;
use crate::json::{Json, JsonObject};
use crate::Error;

/// The author of a harmony message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Author {
    System,
    Developer,
    User,
    Assistant,
    /// A tool result: the author's name (`functions.<name>`).
    Tool(String),
}

/// One harmony message: header fields and content items (each encoded on its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Message {
    pub author: Author,
    pub recipient: Option<String>,
    pub channel: Option<&'static str>,
    pub content_type: Option<&'static str>,
    pub content: Vec<String>,
}

impl Message {
    fn new(author: Author, content: Vec<String>) -> Message {
        Message {
            author,
            recipient: None,
            channel: None,
            content_type: None,
            content,
        }
    }

    fn on(mut self, channel: &'static str) -> Message {
        self.channel = Some(channel);
        self
    }
}

/// The reasoning efforts harmony accepts (vLLM: `reasoning_effort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effort {
    Low,
    Medium,
    High,
}

impl Effort {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }
}

/// The conversation vLLM renders, plus what the system message needs.
#[derive(Debug)]
pub(crate) struct Conversation {
    pub effort: Effort,
    /// Instructions that go into the system message (the server's
    /// `VLLM_GPT_OSS_HARMONY_SYSTEM_INSTRUCTIONS` setting).
    pub system_instructions: Option<String>,
    /// The developer message's parts: instructions and the function tools section.
    pub developer: Option<(Option<String>, Option<String>)>,
    pub messages: Vec<Message>,
    /// Whether the tools section lists at least one function.
    pub has_function_tools: bool,
}

fn unsupported(what: impl Into<String>) -> Error {
    Error::Unsupported(format!("harmony: {}", what.into()))
}

fn vllm_validation(msg: String) -> Error {
    Error::EngineRequest(format!(
        "VLLMValidationError: {msg} (parameter=reasoning_effort)"
    ))
}

/// `reasoning_effort` as vLLM's harmony path reads it (absent or `null`: medium).
fn effort_of(req: &ChatRequest<'_>) -> Result<Effort, Error> {
    match req.body.get("reasoning_effort") {
        None | Some(Json::Null) => Ok(Effort::Medium),
        Some(Json::Str(s)) => match s.as_ref() {
            "low" => Ok(Effort::Low),
            "medium" => Ok(Effort::Medium),
            "high" => Ok(Effort::High),
            "none" => Err(vllm_validation(
                "Harmony does not support reasoning_effort='none'".to_string(),
            )),
            other => Err(vllm_validation(format!(
                "reasoning_effort='{other}' is not supported by Harmony. Supported values are: \
                 high, medium, low."
            ))),
        },
        Some(_) => Err(Error::EngineRequest(
            "reasoning_effort must be a string".to_string(),
        )),
    }
}

/// The keys a message may carry; anything else (when not `null`) is refused.
const MESSAGE_KEYS: &[&str] = &[
    "role",
    "content",
    "reasoning",
    "reasoning_content",
    "tool_calls",
    "tool_call_id",
];

/// The text of a content value joined without a separator (system, developer, tool): a string,
/// or a list of `text` parts.
fn flat_text(v: Option<&Json<'_>>, what: &str) -> Result<String, Error> {
    Ok(parts_of(v, what)?.concat())
}

/// A content value as its text parts: a string is one part, `null`/absent none.
fn parts_of(v: Option<&Json<'_>>, what: &str) -> Result<Vec<String>, Error> {
    match v {
        None | Some(Json::Null) => Ok(Vec::new()),
        Some(Json::Str(s)) => Ok(vec![s.to_string()]),
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
            .collect(),
        Some(_) => Err(unsupported(format!("{what}: content of another type"))),
    }
}

/// A non-empty string field, `reasoning` first then `reasoning_content` (Python `a or b`).
fn reasoning_of(m: &JsonObject<'_>) -> Result<Option<String>, Error> {
    for key in ["reasoning", "reasoning_content"] {
        match m.get(key) {
            None | Some(Json::Null) => {}
            Some(Json::Str(s)) if s.is_empty() => {}
            Some(Json::Str(s)) => return Ok(Some(s.to_string())),
            Some(_) => {
                return Err(unsupported(format!(
                    "assistant `{key}` that is not a string"
                )))
            }
        }
    }
    Ok(None)
}

/// The function tools section of the developer message (`# Tools …`), or `None` when the
/// request lists no tools. `tool_choice` does not change it.
fn tools_section(req: &ChatRequest<'_>) -> Result<Option<(String, bool)>, Error> {
    let tools = match req.body.get("tools") {
        None | Some(Json::Null) => return Ok(None),
        Some(Json::Array(t)) => t,
        Some(_) => return Err(Error::EngineRequest("tools must be a list".to_string())),
    };
    if tools.is_empty() {
        return Err(unsupported("an empty tools list"));
    }
    let mut lines: Vec<String> = vec![
        "## functions\n".to_string(),
        "namespace functions {\n".to_string(),
    ];
    for t in tools {
        let t = t
            .as_object()
            .ok_or_else(|| unsupported("a tool that is not an object"))?;
        if t.get("type").and_then(Json::as_str) != Some("function") {
            return Err(unsupported("a tool that is not a function tool"));
        }
        let f = t
            .get("function")
            .and_then(Json::as_object)
            .ok_or_else(|| unsupported("a function tool without `function`"))?;
        let name = f
            .get("name")
            .and_then(Json::as_str)
            .ok_or_else(|| unsupported("a function tool without a name"))?;
        let desc = match f.get("description") {
            None | Some(Json::Null) => "",
            Some(Json::Str(d)) => d.as_ref(),
            Some(_) => return Err(unsupported("a tool description that is not a string")),
        };
        for line in desc.lines() {
            lines.push(format!("// {line}"));
        }
        match f.get("parameters") {
            None | Some(Json::Null) => lines.push(format!("type {name} = () => any;\n")),
            Some(Json::Object(p)) => {
                let ts = typescript::to_typescript(p, "").map_err(unsupported)?;
                lines.push(format!("type {name} = (_: {ts}) => any;\n"));
            }
            Some(_) => return Err(unsupported("tool parameters that are not an object")),
        }
    }
    lines.push("} // namespace functions".to_string());
    Ok(Some((format!("# Tools\n\n{}", lines.join("\n")), true)))
}

/// The request's messages as vLLM's harmony path builds them (docs/contracts/templates.md §13.3).
pub(crate) fn conversation(
    req: &ChatRequest<'_>,
    config: &HarmonyConfig,
) -> Result<Conversation, Error> {
    let effort = effort_of(req)?;
    let cfm = req
        .flag("continue_final_message", false)
        .map_err(Error::EngineRequest)?;
    let agp = req
        .flag("add_generation_prompt", true)
        .map_err(Error::EngineRequest)?;
    if cfm && agp {
        return Err(Error::EngineRequest(
            "continue_final_message and add_generation_prompt cannot both be true".into(),
        ));
    }
    let raw = req.messages().map_err(Error::EngineRequest)?;
    let mut objs = Vec::with_capacity(raw.len());
    for m in raw {
        let o = m
            .as_object()
            .ok_or_else(|| Error::EngineRequest("a message is not an object".to_string()))?;
        for (k, v) in o.effective() {
            if !MESSAGE_KEYS.contains(&k) && !matches!(v, Json::Null) {
                return Err(unsupported(format!("message key `{k}`")));
            }
        }
        objs.push(o);
    }
    // A leading system or developer message holds the instructions.
    let mut instructions = None;
    let mut rest: &[&JsonObject<'_>] = &objs;
    if let Some((first, tail)) = objs.split_first() {
        if matches!(
            first.get("role").and_then(Json::as_str),
            Some("system" | "developer")
        ) {
            let text = flat_text(first.get("content"), "system message")?;
            if text.is_empty() {
                return Err(unsupported("an empty leading system message"));
            }
            instructions = Some(text);
            rest = tail;
        }
    }
    let tools = tools_section(req)?;
    let has_function_tools = tools.as_ref().is_some_and(|(_, f)| *f);
    let tools_text = tools.map(|(t, _)| t);
    let (system_instructions, developer) = if config.instructions_in_system {
        (instructions, tools_text.map(|t| (None, Some(t))))
    } else if instructions.is_some() || tools_text.is_some() {
        (None, Some((instructions, tools_text)))
    } else {
        (None, None)
    };
    let mut messages = Vec::new();
    let mut call_names: Vec<(String, String)> = Vec::new();
    for m in rest {
        let role = m
            .get("role")
            .and_then(Json::as_str)
            .ok_or_else(|| Error::EngineRequest("a message without a role".to_string()))?;
        match role {
            "user" => {
                let parts = parts_of(m.get("content"), "user message")?;
                if parts.is_empty() {
                    return Err(unsupported("a user message without content"));
                }
                messages.push(Message::new(Author::User, parts));
            }
            "system" | "developer" => {
                let text = flat_text(m.get("content"), "system message")?;
                if text.is_empty() {
                    return Err(unsupported("an empty system message"));
                }
                messages.push(Message::new(
                    Author::Developer,
                    vec![format!("# Instructions\n\n{text}")],
                ));
            }
            "assistant" => assistant(m, &mut messages, &mut call_names)?,
            "tool" => {
                let id = match m.get("tool_call_id") {
                    Some(Json::Str(s)) => s.as_ref(),
                    _ => return Err(unsupported("a tool message without a string tool_call_id")),
                };
                let name = call_names
                    .iter()
                    .rev()
                    .find(|(i, _)| i == id)
                    .map(|(_, n)| n.as_str())
                    .unwrap_or("");
                let text = flat_text(m.get("content"), "tool message")?;
                let mut msg = Message::new(Author::Tool(format!("functions.{name}")), vec![text])
                    .on("commentary");
                msg.recipient = Some("assistant".to_string());
                messages.push(msg);
            }
            other => return Err(Error::EngineRequest(format!("unknown role `{other}`"))),
        }
    }
    drop_analysis(&mut messages);
    Ok(Conversation {
        effort,
        system_instructions,
        developer,
        messages,
        has_function_tools,
    })
}

/// An assistant message: with tool calls, its content as a commentary preamble, its
/// reasoning on the analysis channel, then one message per call; without, its reasoning on
/// the analysis channel, then its content on the final channel (an empty content adds no
/// message).
fn assistant(
    m: &JsonObject<'_>,
    out: &mut Vec<Message>,
    call_names: &mut Vec<(String, String)>,
) -> Result<(), Error> {
    let reasoning = reasoning_of(m)?;
    let content = match m.get("content") {
        None | Some(Json::Null) => None,
        Some(Json::Str(s)) => Some(s.to_string()),
        Some(_) => return Err(unsupported("assistant content that is not a string")),
    };
    let calls = match m.get("tool_calls") {
        None | Some(Json::Null) => &[][..],
        Some(Json::Array(c)) => c.as_slice(),
        Some(_) => {
            return Err(Error::EngineRequest(
                "tool_calls must be a list".to_string(),
            ))
        }
    };
    if calls.is_empty() {
        if let Some(r) = reasoning {
            out.push(Message::new(Author::Assistant, vec![r]).on("analysis"));
        }
        if let Some(c) = content.filter(|c| !c.is_empty()) {
            out.push(Message::new(Author::Assistant, vec![c]).on("final"));
        }
        return Ok(());
    }
    if let Some(c) = content.filter(|c| !c.is_empty()) {
        out.push(Message::new(Author::Assistant, vec![c]).on("commentary"));
    }
    if let Some(r) = reasoning {
        out.push(Message::new(Author::Assistant, vec![r]).on("analysis"));
    }
    for call in calls {
        let c = call
            .as_object()
            .ok_or_else(|| unsupported("a tool call that is not an object"))?;
        if c.get("type").and_then(Json::as_str) != Some("function") {
            return Err(unsupported("a tool call that is not a function call"));
        }
        let id = match c.get("id") {
            Some(Json::Str(s)) => s.to_string(),
            _ => return Err(unsupported("a tool call without a string id")),
        };
        let f = c
            .get("function")
            .and_then(Json::as_object)
            .ok_or_else(|| unsupported("a tool call without `function`"))?;
        let name = f
            .get("name")
            .and_then(Json::as_str)
            .ok_or_else(|| unsupported("a tool call without a name"))?;
        let args = match f.get("arguments") {
            Some(Json::Str(a)) => a.to_string(),
            _ => {
                return Err(unsupported(
                    "tool call arguments that are not a JSON string",
                ))
            }
        };
        let mut msg = Message::new(Author::Assistant, vec![args]).on("commentary");
        msg.recipient = Some(format!("functions.{name}"));
        msg.content_type = Some("json");
        out.push(msg);
        call_names.push((id, name.to_string()));
    }
    Ok(())
}

/// vLLM's `auto_drop_analysis_messages`: analysis messages before the last assistant message
/// on the final channel are dropped.
fn drop_analysis(messages: &mut Vec<Message>) {
    let Some(last_final) = messages
        .iter()
        .rposition(|m| m.author == Author::Assistant && m.channel == Some("final"))
    else {
        return;
    };
    let mut i = 0;
    messages.retain(|m| {
        let keep = !(i < last_final && m.channel == Some("analysis"));
        i += 1;
        keep
    });
}
