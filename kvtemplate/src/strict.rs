//! The gateway's strict path: exact-key parse, the refusal scan of spec/registry.md §9.2 (first
//! hit wins), the restricted template context, content-shape check, NUL check, tokenization
//! without special tokens, truncation at the caller's maximum.

use crate::encoder::{Encoder, Rendered, ScratchBuf};
use crate::env::RenderFailure;
use crate::error::Error;
use crate::json::{map_value, Json, JsonObject, RawObject};
use crate::refusal::{Outcome, Refusal};
use crate::template_facts::{mentions_whole_word, ContentFormat};
use minijinja::Value;
use std::borrow::Cow;

/// How many ids were written and whether more existed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoded {
    /// Ids written to the caller's buffer.
    pub written: usize,
    /// The prompt had more ids than the buffer holds (the rest were cut).
    pub truncated: bool,
}

/// Top-level keys refused when present (or differing), in scan order after `tools`.
const PRESENT_REFUSALS: [(&str, Refusal); 3] = [
    ("cache_salt", Refusal::CacheSalt),
    ("prompt_embeds", Refusal::PromptEmbeds),
    ("chat_template_kwargs", Refusal::TemplateKwargs),
];

const LATE_PRESENT_REFUSALS: [(&str, Refusal); 6] = [
    ("documents", Refusal::Documents),
    ("reasoning_effort", Refusal::ReasoningEffort),
    ("chat_template", Refusal::ChatTemplate),
    ("truncate_prompt_tokens", Refusal::TruncatePromptTokens),
    ("prompt_token_ids", Refusal::PromptTokenIds),
    ("prompt_token_ids_b64", Refusal::PromptTokenIds),
];

/// A message's content as the client sent it.
#[derive(Debug)]
pub enum StrictContent<'a, 'j> {
    /// A string.
    Text(&'j Cow<'a, str>),
    /// `null` or absent.
    Null,
    /// An array of parts (each an object with a string `type`; text parts carry a string `text`).
    Parts(&'j [Json<'a>]),
}

/// One parsed message.
#[derive(Debug)]
pub struct StrictMessage<'a, 'j> {
    /// `role`.
    pub role: &'j str,
    /// `content`.
    pub content: StrictContent<'a, 'j>,
    /// The whole message object (exact keys).
    pub object: &'j JsonObject<'a>,
}

impl StrictContent<'_, '_> {
    /// The text engines hand the template: the string, `""` for null, text parts joined "\n".
    fn joined(&self) -> Cow<'_, str> {
        match self {
            StrictContent::Text(s) => Cow::Borrowed(s.as_ref()),
            StrictContent::Null => Cow::Borrowed(""),
            StrictContent::Parts(parts) => {
                let texts: Vec<&str> = text_parts(parts).collect();
                match texts.as_slice() {
                    [one] => Cow::Borrowed(one),
                    many => Cow::Owned(many.join("\n")),
                }
            }
        }
    }
}

fn part_type<'j>(p: &'j Json<'_>) -> &'j str {
    p.as_object()
        .and_then(|o| o.get("type"))
        .and_then(Json::as_str)
        .unwrap_or("")
}

fn text_parts<'j>(parts: &'j [Json<'_>]) -> impl Iterator<Item = &'j str> {
    parts
        .iter()
        .filter(|p| part_type(p) == "text")
        .filter_map(|p| {
            p.as_object()
                .and_then(|o| o.get("text"))
                .and_then(Json::as_str)
        })
}

/// Validates message shapes (§9.2 "Message parsing"); `None` = unparseable.
pub fn parse_messages<'a, 'j>(msgs: &'j Json<'a>) -> Option<Vec<StrictMessage<'a, 'j>>> {
    let arr = msgs.as_array()?;
    if arr.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(arr.len());
    for m in arr {
        let object = m.as_object()?;
        let role = object.get("role").and_then(Json::as_str)?;
        let content = match object.get("content") {
            None | Some(Json::Null) => StrictContent::Null,
            Some(Json::Str(s)) => StrictContent::Text(s),
            Some(Json::Array(parts)) => {
                for p in parts {
                    let po = p.as_object()?;
                    let ty = po.get("type").and_then(Json::as_str)?;
                    if ty == "text" {
                        po.get("text").and_then(Json::as_str)?;
                    }
                }
                StrictContent::Parts(parts)
            }
            Some(_) => return None,
        };
        out.push(StrictMessage {
            role,
            content,
            object,
        });
    }
    Some(out)
}

impl Encoder {
    /// Refusal scan, render at `now_unix_ms` (UTC), leaving the prompt in `scratch`.
    pub fn render_chat(
        &self,
        body: &[u8],
        now_unix_ms: i64,
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<()>, Error> {
        let template = self.template()?;
        let facts = self.facts.as_ref();
        let Ok(Some(top)) = RawObject::parse(body) else {
            return Ok(Outcome::Refused(Refusal::Unparseable));
        };
        let Some(raw_msgs) = top.get("messages") else {
            return Ok(Outcome::Refused(Refusal::Unparseable));
        };
        let Ok(msgs_json) = serde_json::from_str::<Json<'_>>(raw_msgs.get()) else {
            return Ok(Outcome::Refused(Refusal::Unparseable));
        };
        let Some(messages) = parse_messages(&msgs_json) else {
            return Ok(Outcome::Refused(Refusal::Unparseable));
        };
        if let Some(r) = self.scan_top_level(&top) {
            return Ok(Outcome::Refused(r));
        }
        if let Some(r) = self.scan_messages(&messages, template.source(), facts) {
            return Ok(Outcome::Refused(r));
        }
        let base: Vec<Value> = messages
            .iter()
            .map(|m| message_value(m.role, Value::from(m.content.joined().as_ref())))
            .collect();
        match template.render_into(
            &self.strict_context(base),
            Some(now_unix_ms),
            &mut scratch.rendered,
        ) {
            Ok(()) => {}
            Err(RenderFailure::Budget) => return Err(Error::RenderBudget),
            Err(_) => return Ok(Outcome::Refused(Refusal::TemplateRaised)),
        }
        if scratch.rendered.is_empty() {
            return Ok(Outcome::Refused(Refusal::TemplateRaised));
        }
        let shape_sensitive = self.content_format == ContentFormat::OpenAi
            || facts.is_some_and(|f| f.loops_over_content || f.mentions_media);
        if shape_sensitive {
            let vllm: Vec<Value> = messages
                .iter()
                .map(|m| {
                    let c = match &m.content {
                        StrictContent::Text(s) => Value::from(vec![map_value([
                            ("type", Value::from("text")),
                            ("text", Value::from(s.as_ref())),
                        ])]),
                        StrictContent::Null => Value::from(Vec::<Value>::new()),
                        StrictContent::Parts(p) => {
                            Value::from(p.iter().map(Json::to_value).collect::<Vec<_>>())
                        }
                    };
                    message_value(m.role, c)
                })
                .collect();
            let sglang: Vec<Value> = messages
                .iter()
                .map(|m| {
                    let c = match &m.content {
                        StrictContent::Text(s) => Value::from(s.as_ref()),
                        StrictContent::Null => Value::from(""),
                        StrictContent::Parts(p) => {
                            Value::from(p.iter().map(Json::to_value).collect::<Vec<_>>())
                        }
                    };
                    message_value(m.role, c)
                })
                .collect();
            for variant in [vllm, sglang] {
                match template.render(&self.strict_context(variant), Some(now_unix_ms)) {
                    Ok(s) if s == scratch.rendered => {}
                    Err(RenderFailure::Budget) => return Err(Error::RenderBudget),
                    _ => return Ok(Outcome::Refused(Refusal::ContentShape)),
                }
            }
        }
        if scratch.rendered.contains('\0') {
            return Ok(Outcome::Refused(Refusal::NulByte));
        }
        Ok(Outcome::Done(()))
    }

    /// The gateway's chat call: refusal scan → render at `now_unix_ms` (UTC) → encode without
    /// special tokens → ids written to `out` (cut at `out.len()`).
    pub fn encode_chat(
        &self,
        body: &[u8],
        now_unix_ms: i64,
        out: &mut [u32],
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<Encoded>, Error> {
        let tok = self.tokenizer()?;
        if let Outcome::Refused(r) = self.render_chat(body, now_unix_ms, scratch)? {
            return Ok(Outcome::Refused(r));
        }
        let ScratchBuf { rendered, ids } = scratch;
        tok.chat_into(self.engine, rendered, false, ids)?;
        if ids.is_empty() {
            return Err(Error::Tokenize("the tokenizer produced no ids".to_string()));
        }
        Ok(Outcome::Done(copy_capped(ids, out)))
    }

    /// Convenience form of [`Encoder::encode_chat`] returning the text and ids (at most
    /// `max_ids`).
    pub fn encode_chat_to_vec(
        &self,
        body: &[u8],
        now_unix_ms: i64,
        max_ids: usize,
    ) -> Result<Outcome<Rendered>, Error> {
        let mut scratch = ScratchBuf::new();
        if let Outcome::Refused(r) = self.render_chat(body, now_unix_ms, &mut scratch)? {
            return Ok(Outcome::Refused(r));
        }
        let mut ids = self
            .tokenizer()?
            .chat(self.engine, &scratch.rendered, false)?;
        if ids.is_empty() {
            return Err(Error::Tokenize("the tokenizer produced no ids".to_string()));
        }
        let truncated = ids.len() > max_ids;
        ids.truncate(max_ids);
        Ok(Outcome::Done(Rendered {
            text: std::mem::take(&mut scratch.rendered),
            ids,
            truncated,
        }))
    }

    /// The gateway's completions call for the extracted prompt text: empty → request error
    /// (-1); NUL → refusal; otherwise the engine's completions encoding (SGLang's BOS quirk
    /// included; the BOS counts against `out.len()`).
    pub fn encode_completions(
        &self,
        text: &str,
        out: &mut [u32],
    ) -> Result<Outcome<Encoded>, Error> {
        thread_local! {
            static IDS: std::cell::RefCell<ScratchBuf> = std::cell::RefCell::new(ScratchBuf::new());
        }
        IDS.with(|cell| match cell.try_borrow_mut() {
            Ok(mut scratch) => self.encode_completions_with(text, out, &mut scratch),
            Err(_) => self.encode_completions_with(text, out, &mut ScratchBuf::new()),
        })
    }

    /// [`Encoder::encode_completions`] with a caller-held scratch (the full ids are left in
    /// [`ScratchBuf::ids`]).
    pub fn encode_completions_with(
        &self,
        text: &str,
        out: &mut [u32],
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<Encoded>, Error> {
        let tok = self.tokenizer()?;
        if text.is_empty() {
            return Err(Error::Request("empty prompt".to_string()));
        }
        if text.contains('\0') {
            return Ok(Outcome::Refused(Refusal::NulByte));
        }
        tok.completions_into(self.engine, text, &mut scratch.ids)?;
        if scratch.ids.is_empty() {
            return Err(Error::Tokenize("the tokenizer produced no ids".to_string()));
        }
        Ok(Outcome::Done(copy_capped(&scratch.ids, out)))
    }

    fn strict_context(&self, messages: Vec<Value>) -> Value {
        let mut ctx: Vec<(Value, Value)> = Vec::with_capacity(4 + self.strict_specials.len());
        ctx.push((Value::from("messages"), Value::from(messages)));
        ctx.push((Value::from("tools"), Value::from(())));
        ctx.push((Value::from("documents"), Value::from(())));
        ctx.push((
            Value::from("add_generation_prompt"),
            Value::from(self.add_generation_prompt),
        ));
        ctx.extend(self.strict_specials.iter().cloned());
        map_value(ctx)
    }

    fn scan_top_level(&self, top: &RawObject<'_>) -> Option<Refusal> {
        if top.present("tools") || top.present("tool_choice") {
            return Some(Refusal::Tools);
        }
        for (k, r) in PRESENT_REFUSALS {
            if top.present(k) {
                return Some(r);
            }
        }
        if top.differs("add_generation_prompt", self.add_generation_prompt) {
            return Some(Refusal::AddGenerationPrompt);
        }
        if top.differs("continue_final_message", false) {
            return Some(Refusal::ContinueFinalMessage);
        }
        if top.differs("add_special_tokens", false) {
            return Some(Refusal::AddSpecialTokens);
        }
        LATE_PRESENT_REFUSALS
            .iter()
            .find(|(k, _)| top.present(k))
            .map(|(_, r)| *r)
    }

    fn scan_messages(
        &self,
        messages: &[StrictMessage<'_, '_>],
        source: &str,
        facts: Option<&crate::template_facts::TemplateFacts>,
    ) -> Option<Refusal> {
        fn parts_of<'a, 'j>(m: &StrictMessage<'a, 'j>) -> &'j [Json<'a>] {
            match m.content {
                StrictContent::Parts(p) => p,
                _ => &[],
            }
        }
        if messages.iter().any(|m| {
            parts_of(m)
                .iter()
                .any(|p| !matches!(part_type(p), "" | "text"))
        }) {
            return Some(Refusal::Multimodal);
        }
        if messages.iter().any(|m| text_parts(parts_of(m)).count() > 1) {
            return Some(Refusal::MultiTextPart);
        }
        if messages.last().is_some_and(|m| m.role == "assistant") {
            return Some(Refusal::TrailingAssistant);
        }
        if messages.iter().any(|m| m.role == "developer") {
            return Some(Refusal::DeveloperRole);
        }
        if messages.iter().any(|m| m.object.present("tools")) {
            return Some(Refusal::MessageTools);
        }
        if messages.iter().any(|m| {
            m.object.effective().iter().any(|(k, v)| {
                !matches!(*k, "role" | "content")
                    && !matches!(v, Json::Null)
                    && mentions_whole_word(source, k)
            })
        }) {
            return Some(Refusal::MessageField);
        }
        if facts.is_some_and(|f| f.tests_content_none)
            && messages
                .iter()
                .any(|m| matches!(m.content, StrictContent::Null))
        {
            return Some(Refusal::NullContent);
        }
        None
    }
}

fn message_value(role: &str, content: Value) -> Value {
    map_value([("role", Value::from(role)), ("content", content)])
}

fn copy_capped(ids: &[u32], out: &mut [u32]) -> Encoded {
    let n = ids.len().min(out.len());
    if let (Some(dst), Some(src)) = (out.get_mut(..n), ids.get(..n)) {
        dst.copy_from_slice(src);
    }
    Encoded {
        written: n,
        truncated: ids.len() > n,
    }
}
