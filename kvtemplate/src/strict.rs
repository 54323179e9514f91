//! The gateway's strict path: exact-key parse, the refusal scan of docs/contracts/registry.md §9.2 (first
//! hit wins), the restricted template context, content-shape check, NUL check, tokenization
//! without special tokens, truncation at the caller's maximum — and, for the codes an encoder
//! lifts ([`crate::EncoderSpec::lifted`]), the engine's own render of the requests that hit
//! only those (see [`Encoder::encode_chat`]).

mod harmony_chat;
mod mistral_chat;

use crate::chat_rules::EmptyTools;
use crate::encoder::{Encoder, EnginePrompt, Rendered, ScratchBuf};
use crate::env::RenderFailure;
use crate::error::Error;
use crate::json::{map_value, ChatBody, Json, JsonObject, RawObject};
use crate::limits::{Limit, LimitHit};
use crate::refusal::{Outcome, Refusal, RefusalSet};
use crate::template_facts::{mentions_whole_word, ContentFormat};
use crate::tokenize::Bounded;
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

/// What [`Encoder::prepare_chat`] left in the scratch buffer and how to tokenize it.
enum Plan {
    /// The strict render (restricted context): encode without special tokens.
    Strict,
    /// The engine's own render (a lifted request): encode as the engine does.
    Engine {
        add_special: bool,
        sglang_prefix: Option<String>,
    },
}

/// One pass of the §9.2 scan: the codes it may lift, the lifted codes it hit, and (for
/// [`Encoder::refusals_hit`]) every code it hit.
pub(crate) struct Scan {
    lifted: RefusalSet,
    used: RefusalSet,
    collect: Option<RefusalSet>,
}

impl Scan {
    pub(crate) fn new(lifted: RefusalSet) -> Scan {
        Scan {
            lifted,
            used: RefusalSet::EMPTY,
            collect: None,
        }
    }

    /// A hit of `r`: whether the scan stops and refuses with it. A lifted code whose hit lies
    /// within what the lift covers (`in_scope`) is recorded and the scan goes on.
    fn stop(&mut self, r: Refusal, in_scope: impl FnOnce() -> bool) -> bool {
        if let Some(all) = &mut self.collect {
            all.insert(r);
            return false;
        }
        if self.lifted.contains(r) && in_scope() {
            // A lift that changes only the keys (`cache_salt`) leaves the strict render as
            // it is; every other lift takes the engine's own render.
            if !r.keys_only() {
                self.used.insert(r);
            }
            return false;
        }
        true
    }
}

/// Keys a lifted `chat_template_kwargs` may not set: the names the engines bind themselves or
/// take as `apply_chat_template` arguments (what a kwarg of that name does differs between
/// engines and releases, and no vector shows it).
const RESERVED_KWARGS: [&str; 14] = [
    "messages",
    "conversation",
    "tools",
    "documents",
    "add_generation_prompt",
    "continue_final_message",
    "chat_template",
    "tokenize",
    "padding",
    "truncation",
    "max_length",
    "return_tensors",
    "return_dict",
    "return_assistant_tokens_mask",
];

fn raw_json<'a>(top: &RawObject<'a>, key: &str) -> Option<Json<'a>> {
    top.get(key)
        .and_then(|raw| serde_json::from_str::<Json<'a>>(raw.get()).ok())
}

/// The `tools` lift covers a non-empty `tools` list with `tool_choice` absent, null or
/// `"auto"` (what the vectors send; vLLM and SGLang default to `"auto"` when tools are given).
/// `"none"`, `"required"` or a named function still refuse: no vector shows how each engine
/// renders them (SGLang drops the tools for `"none"`, vLLM keeps them).
///
/// Where the release treats an empty list as omitted ([`EmptyTools::Omitted`], vLLM 0.34),
/// the lift also covers `"tools": []` with `tool_choice` absent, null, `"auto"`, `"required"`
/// or `"none"` (the engine renders the prompt without tools).
fn tools_in_scope(top: &RawObject<'_>, empty_tools: EmptyTools) -> bool {
    let choice = raw_json(top, "tool_choice");
    if empty_tools == EmptyTools::Omitted
        && matches!(raw_json(top, "tools"), Some(Json::Array(a)) if a.is_empty())
    {
        return match choice {
            None | Some(Json::Null) => true,
            Some(Json::Str(s)) => matches!(s.as_ref(), "auto" | "required" | "none"),
            Some(_) => false,
        };
    }
    let tools_ok = matches!(raw_json(top, "tools"), Some(Json::Array(a)) if !a.is_empty());
    let choice_ok = match choice {
        None | Some(Json::Null) => true,
        Some(Json::Str(s)) => s == "auto",
        Some(_) => false,
    };
    tools_ok && choice_ok
}

/// The `template_kwargs` lift covers an object none of whose keys is reserved.
fn kwargs_in_scope(top: &RawObject<'_>) -> bool {
    match raw_json(top, "chat_template_kwargs") {
        Some(Json::Object(o)) => o
            .effective()
            .iter()
            .all(|(k, _)| !RESERVED_KWARGS.contains(k)),
        _ => false,
    }
}

fn is_bool(top: &RawObject<'_>, key: &str) -> bool {
    matches!(top.get(key).map(|r| r.get()), Some("true" | "false"))
}

/// The message fields (besides `role` and `content`) whose engine handling the template
/// vectors prove, with the value shapes they prove: an assistant message's non-empty
/// `tool_calls` list (each call an object whose `function` has a string `name` and
/// `arguments` given as a JSON object or as a string holding one — the engines parse that
/// string) and a tool message's string `tool_call_id`. The `message_field` lift covers these
/// and nothing else, and the lifted render hands the template these and nothing else (the
/// engines drop unknown and null keys).
pub fn proven_message_field(role: &str, key: &str, value: &Json<'_>) -> bool {
    match (role, key, value) {
        ("assistant", "tool_calls", Json::Array(calls)) => {
            !calls.is_empty() && calls.iter().all(proven_tool_call)
        }
        ("tool", "tool_call_id", Json::Str(_)) => true,
        _ => false,
    }
}

fn proven_tool_call(call: &Json<'_>) -> bool {
    let Some(f) = call
        .as_object()
        .and_then(|c| c.get("function"))
        .and_then(Json::as_object)
    else {
        return false;
    };
    let args_ok = match f.get("arguments") {
        Some(Json::Object(_)) => true,
        Some(Json::Str(s)) => matches!(crate::json::parse(s.as_bytes()), Ok(Json::Object(_))),
        _ => false,
    };
    f.get("name").and_then(Json::as_str).is_some() && args_ok
}

/// The non-null keys of `m` other than `role`/`content` that the template mentions.
fn mentioned_fields<'m, 'a>(
    m: &'m StrictMessage<'a, '_>,
    source: &'m str,
) -> impl Iterator<Item = (&'m str, &'m Json<'a>)> + 'm {
    m.object.effective().into_iter().filter(move |(k, v)| {
        !matches!(*k, "role" | "content")
            && !matches!(v, Json::Null)
            && mentions_whole_word(source, k)
    })
}

impl Encoder {
    /// Refusal scan, render at `now_unix_ms` (UTC), leaving the prompt in `scratch`. With
    /// lifted codes ([`crate::EncoderSpec::lifted`]) a request that hits only lifted codes is
    /// rendered as the engine renders it (see [`Encoder::encode_chat`]); the text left in
    /// `scratch` is then the engine's prompt (for SGLang's `continue_final_message`, the text
    /// before the final assistant content, which is appended as ids). A harmony or Mistral
    /// encoder leaves its renderer's text (harmony's prompt, mistral_common's text form): the
    /// request is encoded whole to get it.
    pub fn render_chat(
        &self,
        body: &[u8],
        now_unix_ms: i64,
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<()>, Error> {
        if self.harmony.is_some() || self.mistral.is_some() {
            let done = self.encode_chat_capped(body, now_unix_ms, usize::MAX, scratch)?;
            return Ok(done.map(|_| ()));
        }
        self.check_chat_known()?;
        Ok(self.prepare_chat(body, now_unix_ms, scratch)?.map(|_| ()))
    }

    /// Every §9.2 scan code (orders 0–19, not the render-time ones) that `body` hits, in scan
    /// order — what lifting would have to cover for this request. A body that does not parse
    /// hits [`Refusal::Unparseable`] alone. Independent of the codes this encoder lifts.
    pub fn refusals_hit(&self, body: &[u8]) -> Result<RefusalSet, Error> {
        // A Mistral encoder has no template: the top-level scan alone (its request walker
        // refuses the message shapes no vector proves).
        let template = match &self.mistral {
            Some(_) => None,
            None => Some(self.template()?),
        };
        let too_large = RefusalSet::EMPTY.with(Refusal::InputTooLarge);
        if LimitHit::check(Limit::BodyBytes, &self.limits, body.len()).is_some() {
            return Ok(too_large);
        }
        let unparseable = RefusalSet::EMPTY.with(Refusal::Unparseable);
        let Ok(ChatBody {
            top,
            messages: Some(msgs_json),
        }) = ChatBody::parse(body)
        else {
            return Ok(unparseable);
        };
        let Some(messages) = parse_messages(&msgs_json) else {
            return Ok(unparseable);
        };
        if LimitHit::check(Limit::Messages, &self.limits, messages.len()).is_some() {
            return Ok(too_large);
        }
        let mut scan = Scan::new(RefusalSet::EMPTY);
        scan.collect = Some(RefusalSet::EMPTY);
        self.scan_top_level(&top, &messages, &mut scan, self.harmony.is_some());
        if let Some(template) = template {
            self.scan_messages(&messages, template.source(), self.facts.as_ref(), &mut scan);
        }
        Ok(scan.collect.unwrap_or_default())
    }

    /// The chat front of a renderer that is not the Jinja template (harmony, Mistral): the
    /// scratch cleared, then the body's bounds and the §9.2 scan of its top-level keys alone
    /// (`renders_effort`: the renderer takes `reasoning_effort` itself); the message-level
    /// checks are the renderer's own.
    pub(crate) fn scan_top_only(
        &self,
        body: &[u8],
        scratch: &mut ScratchBuf,
        renders_effort: bool,
    ) -> Result<Outcome<()>, Error> {
        scratch.limit = None;
        scratch.ids.clear();
        scratch.rendered.clear();
        self.with_chat_body(body, scratch, |top, messages, _| {
            let mut scan = Scan::new(self.lifted);
            Ok(
                match self.scan_top_level(top, messages, &mut scan, renders_effort) {
                    Some(r) => Outcome::Refused(r),
                    None => Outcome::Done(()),
                },
            )
        })
    }

    /// The front of every chat call: the body's bound, its top-level object and messages
    /// (`unparseable` otherwise) and the messages' bound; then `f` with them.
    pub(crate) fn with_chat_body<T>(
        &self,
        body: &[u8],
        scratch: &mut ScratchBuf,
        f: impl FnOnce(
            &RawObject<'_>,
            &[StrictMessage<'_, '_>],
            &mut ScratchBuf,
        ) -> Result<Outcome<T>, Error>,
    ) -> Result<Outcome<T>, Error> {
        if let Some(hit) = LimitHit::check(Limit::BodyBytes, &self.limits, body.len()) {
            return Ok(too_large(scratch, hit));
        }
        // One pass over the body: the top level raw, `messages` read (the refusal scan and
        // the render share it).
        let Ok(ChatBody {
            top,
            messages: Some(msgs_json),
        }) = ChatBody::parse(body)
        else {
            return Ok(Outcome::Refused(Refusal::Unparseable));
        };
        let Some(messages) = parse_messages(&msgs_json) else {
            return Ok(Outcome::Refused(Refusal::Unparseable));
        };
        if let Some(hit) = LimitHit::check(Limit::Messages, &self.limits, messages.len()) {
            return Ok(too_large(scratch, hit));
        }
        f(&top, &messages, scratch)
    }

    fn prepare_chat(
        &self,
        body: &[u8],
        now_unix_ms: i64,
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<Plan>, Error> {
        scratch.limit = None;
        let template = self.template()?;
        self.with_chat_body(body, scratch, |top, messages, scratch| {
            self.prepare_parsed(template, body, now_unix_ms, top, messages, scratch)
        })
    }

    /// [`Encoder::prepare_chat`] on the parsed body: the §9.2 scans, then the strict render
    /// (or the lifted one).
    fn prepare_parsed(
        &self,
        template: &crate::ChatTemplate,
        body: &[u8],
        now_unix_ms: i64,
        top: &RawObject<'_>,
        messages: &[StrictMessage<'_, '_>],
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<Plan>, Error> {
        let facts = self.facts.as_ref();
        let mut scan = Scan::new(self.lifted);
        if let Some(r) = self.scan_top_level(top, messages, &mut scan, false) {
            return Ok(Outcome::Refused(r));
        }
        if let Some(r) = self.scan_messages(messages, template.source(), facts, &mut scan) {
            return Ok(Outcome::Refused(r));
        }
        if !scan.used.is_empty() {
            return self.prepare_lifted(body, now_unix_ms, scratch);
        }
        match crate::render_cache::render_messages(
            template,
            self.render_reuse.as_ref().ok(),
            crate::render_cache::RenderPath::Strict,
            &StrictValues(messages),
            &self.strict_rest(),
            Some(now_unix_ms),
            &mut scratch.rendered,
        ) {
            Ok(()) => {}
            Err(RenderFailure::Budget) => return Err(Error::RenderBudget),
            Err(RenderFailure::TooLarge { max, at_least }) => {
                return Ok(too_large(scratch, rendered_hit(max, at_least)))
            }
            Err(_) => return Ok(Outcome::Refused(Refusal::TemplateRaised)),
        }
        if scratch.rendered.is_empty() {
            return Ok(Outcome::Refused(Refusal::TemplateRaised));
        }
        if self.shape_sensitive() {
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
                            crate::json::list_value(p.iter().map(Json::to_value).collect())
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
                            crate::json::list_value(p.iter().map(Json::to_value).collect())
                        }
                    };
                    message_value(m.role, c)
                })
                .collect();
            for variant in [vllm, sglang] {
                match template.render(&self.strict_context(variant), Some(now_unix_ms)) {
                    Ok(s) if s == scratch.rendered => {}
                    Err(RenderFailure::Budget) => return Err(Error::RenderBudget),
                    Err(RenderFailure::TooLarge { max, at_least }) => {
                        return Ok(too_large(scratch, rendered_hit(max, at_least)))
                    }
                    _ => return Ok(Outcome::Refused(Refusal::ContentShape)),
                }
            }
        }
        if scratch.rendered.contains('\0') {
            return Ok(Outcome::Refused(Refusal::NulByte));
        }
        Ok(Outcome::Done(Plan::Strict))
    }

    /// Templates whose render may depend on the content shape the engine picks (§9.2 "content
    /// shape dependence").
    fn shape_sensitive(&self) -> bool {
        self.content_format == ContentFormat::OpenAi
            || self
                .facts
                .as_ref()
                .is_some_and(|f| f.loops_over_content || f.mentions_media)
    }

    /// The lifted path: the engine's own render under this encoder's chat rules, handing the
    /// template only the message fields whose engine handling is proven
    /// ([`proven_message_field`]). The engine rejecting the request (its template raised, or
    /// its request validation failed: HTTP 400) is [`Refusal::TemplateRaised`].
    fn prepare_lifted(
        &self,
        body: &[u8],
        now_unix_ms: i64,
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<Plan>, Error> {
        // The emulation hands the template string content (the engines' "string" content
        // format, which every template the vectors hold uses); a template whose render may
        // depend on the shape is not proven on this path.
        if self.shape_sensitive() {
            return Ok(Outcome::Refused(Refusal::ContentShape));
        }
        let keep = |role: &str, key: &str, v: &Json<'_>| proven_message_field(role, key, v);
        let prompt = match self.engine_prompt(body, Some(now_unix_ms), Some(&keep)) {
            Ok(p) => p,
            Err(Error::TemplateRender(_) | Error::EngineRequest(_) | Error::Request(_)) => {
                return Ok(Outcome::Refused(Refusal::TemplateRaised))
            }
            Err(Error::InputTooLarge(hit)) => return Ok(too_large(scratch, hit)),
            Err(e) => return Err(e),
        };
        let EnginePrompt {
            rendered,
            add_special,
            sglang_prefix,
        } = prompt;
        scratch.rendered = rendered;
        if scratch.rendered.is_empty() {
            return Ok(Outcome::Refused(Refusal::TemplateRaised));
        }
        if scratch.rendered.contains('\0')
            || sglang_prefix.as_deref().is_some_and(|p| p.contains('\0'))
        {
            return Ok(Outcome::Refused(Refusal::NulByte));
        }
        Ok(Outcome::Done(Plan::Engine {
            add_special,
            sglang_prefix,
        }))
    }

    /// The gateway's chat call: refusal scan → render at `now_unix_ms` (UTC) → encode without
    /// special tokens → ids written to `out` (cut at `out.len()`).
    ///
    /// # Lifted codes
    ///
    /// With [`crate::EncoderSpec::lifted`] empty (the default) this is the strict path of
    /// docs/contracts/registry.md §9.2 exactly: same scan order, same codes. With codes lifted, the scan
    /// runs in the same order; a hit of a lifted code that lies within what its lift covers is
    /// noted and the scan goes on, any other hit refuses with its own code. If every hit was a
    /// lifted one, the request is rendered and tokenized as the engine's own serving path does
    /// ([`Encoder::engine_chat`] under this encoder's [`crate::ChatRules`]), and the ids go out
    /// here exactly like strict ones (same buffer, same truncation). What each lift covers:
    ///
    /// * `tools`: a non-empty `tools` list, `tool_choice` absent, null or `"auto"`;
    /// * `template_kwargs`: an object, none of whose keys is an engine-bound name (`messages`,
    ///   `tools`, `add_generation_prompt`, …);
    /// * `add_generation_prompt`: a JSON boolean; `continue_final_message`: `true` on a
    ///   conversation that ends with an assistant message (what the vectors send);
    /// * `message_field`: only the fields whose engine handling the vectors prove (`strict::proven_message_field`);
    /// * `multi_text_part`, `trailing_assistant`, `null_content`: every hit.
    ///
    /// On the lifted path: a template that may depend on the content shape refuses
    /// [`Refusal::ContentShape`]; the engine rejecting the request (its template raises, or
    /// its request validation fails with HTTP 400, e.g. vLLM's `continue_final_message` with
    /// `add_generation_prompt`, TensorRT-LLM's unknown `continue_final_message` field, a
    /// malformed tool) refuses [`Refusal::TemplateRaised`] — never ids; an empty render
    /// refuses [`Refusal::TemplateRaised`] and a NUL byte [`Refusal::NulByte`], as on the
    /// strict path. A request that hits no code takes the strict path whatever is lifted.
    pub fn encode_chat(
        &self,
        body: &[u8],
        now_unix_ms: i64,
        out: &mut [u32],
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<Encoded>, Error> {
        let done = self.encode_chat_capped(body, now_unix_ms, out.len(), scratch)?;
        if let Outcome::Done(e) = done {
            copy_ids(&scratch.ids, out);
            return Ok(Outcome::Done(e));
        }
        Ok(done)
    }

    /// [`Encoder::encode_chat`] leaving the ids in `scratch` ([`ScratchBuf::ids`]): the first
    /// `cap` ids of the prompt, tokenization stopping once they are known (exactly the first
    /// ids of the full encoding; `truncated` says whether the prompt has more). Over one of
    /// the encoder's bounds ([`crate::InputLimits`]) the answer is
    /// [`Refusal::InputTooLarge`], the bound named in [`ScratchBuf::limit_hit`].
    pub fn encode_chat_capped(
        &self,
        body: &[u8],
        now_unix_ms: i64,
        cap: usize,
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<Encoded>, Error> {
        self.check_chat_known()?;
        if let Some(h) = &self.harmony {
            return self.harmony_chat(h, body, now_unix_ms, cap, scratch);
        }
        if let Some(m) = &self.mistral {
            return self.mistral_chat(m, body, cap, scratch);
        }
        let tok = self.tokenizer()?;
        let plan = match self.prepare_chat(body, now_unix_ms, scratch)? {
            Outcome::Done(p) => p,
            Outcome::Refused(r) => return Ok(Outcome::Refused(r)),
        };
        let prefix = match &plan {
            Plan::Engine { sglang_prefix, .. } => sglang_prefix.as_deref(),
            Plan::Strict => None,
        };
        if self.ambiguous_added_token(&scratch.rendered).is_some()
            || prefix.is_some_and(|p| self.ambiguous_added_token(p).is_some())
        {
            return Ok(Outcome::Refused(Refusal::AmbiguousAddedToken));
        }
        let ScratchBuf {
            rendered,
            ids,
            limit,
        } = scratch;
        let bounded = match plan {
            Plan::Strict => {
                tok.chat_bounded(self.engine, rendered, false, cap, &self.limits, ids)?
            }
            Plan::Engine {
                add_special,
                sglang_prefix,
            } => self.engine_tokens_bounded(
                rendered,
                add_special,
                sglang_prefix.as_deref(),
                cap,
                ids,
            )?,
        };
        finish_ids(bounded, ids, limit)
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
        Ok(self
            .encode_chat_capped(body, now_unix_ms, max_ids, &mut scratch)?
            .map(|e| Rendered {
                text: std::mem::take(&mut scratch.rendered),
                ids: std::mem::take(&mut scratch.ids),
                truncated: e.truncated,
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
        ScratchBuf::with_thread_local(|scratch| self.encode_completions_with(text, out, scratch))
    }

    /// [`Encoder::encode_completions`] with a caller-held scratch (the ids written are left
    /// in [`ScratchBuf::ids`]).
    pub fn encode_completions_with(
        &self,
        text: &str,
        out: &mut [u32],
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<Encoded>, Error> {
        let done = self.encode_completions_capped(text, out.len(), scratch)?;
        if let Outcome::Done(e) = done {
            copy_ids(&scratch.ids, out);
            return Ok(Outcome::Done(e));
        }
        Ok(done)
    }

    /// [`Encoder::encode_completions`] leaving the first `cap` ids in `scratch` (bounded as
    /// [`Encoder::encode_chat_capped`]; the prompt text counts against
    /// [`crate::InputLimits::max_rendered_bytes`]).
    pub fn encode_completions_capped(
        &self,
        text: &str,
        cap: usize,
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<Encoded>, Error> {
        if let Some(m) = &self.mistral {
            return self.mistral_completions(m, text, cap, scratch);
        }
        scratch.limit = None;
        let tok = self.tokenizer()?;
        if text.is_empty() {
            return Err(Error::Request("empty prompt".to_string()));
        }
        if let Some(hit) = LimitHit::check(Limit::RenderedBytes, &self.limits, text.len()) {
            scratch.ids.clear();
            scratch.limit = Some(hit);
            return Ok(Outcome::Refused(Refusal::InputTooLarge));
        }
        if text.contains('\0') {
            return Ok(Outcome::Refused(Refusal::NulByte));
        }
        if self.ambiguous_added_token(text).is_some() {
            return Ok(Outcome::Refused(Refusal::AmbiguousAddedToken));
        }
        let ScratchBuf { ids, limit, .. } = scratch;
        let bounded = tok.completions_bounded(self.engine, text, cap, &self.limits, ids)?;
        finish_ids(bounded, ids, limit)
    }

    /// The first added token in `text` the engine's loader may or may not keep (when the
    /// profile pins no tokenizer config: [`Refusal::AmbiguousAddedToken`]): its id and
    /// content. `None` when the text holds none, or the encoder has no such doubt.
    pub fn ambiguous_added_token<'s>(&'s self, text: &str) -> Option<(u32, &'s str)> {
        self.loader_ambiguity.as_ref()?.first_in(text)
    }

    fn strict_context(&self, messages: Vec<Value>) -> Value {
        crate::render_cache::context(&messages, &self.strict_rest())
    }

    /// The strict context but `messages`.
    fn strict_rest(&self) -> Vec<(Value, Value)> {
        let mut ctx: Vec<(Value, Value)> = Vec::with_capacity(3 + self.strict_specials.len());
        ctx.push((Value::from("tools"), Value::from(())));
        ctx.push((Value::from("documents"), Value::from(())));
        ctx.push((
            Value::from("add_generation_prompt"),
            Value::from(self.add_generation_prompt),
        ));
        ctx.extend(self.strict_specials.iter().cloned());
        ctx
    }

    /// The §9.2 scan of the top-level keys. `renders_effort`: the renderer takes
    /// `reasoning_effort` itself (harmony), so it is no refusal.
    pub(crate) fn scan_top_level(
        &self,
        top: &RawObject<'_>,
        messages: &[StrictMessage<'_, '_>],
        scan: &mut Scan,
        renders_effort: bool,
    ) -> Option<Refusal> {
        if (top.present("tools") || top.present("tool_choice"))
            && scan.stop(Refusal::Tools, || {
                tools_in_scope(top, self.chat_rules.empty_tools)
            })
        {
            return Some(Refusal::Tools);
        }
        for (k, r) in PRESENT_REFUSALS {
            if top.present(k)
                && scan.stop(r, || {
                    r == Refusal::CacheSalt || r == Refusal::TemplateKwargs && kwargs_in_scope(top)
                })
            {
                return Some(r);
            }
        }
        if top.differs("add_generation_prompt", self.add_generation_prompt)
            && scan.stop(Refusal::AddGenerationPrompt, || {
                is_bool(top, "add_generation_prompt")
            })
        {
            return Some(Refusal::AddGenerationPrompt);
        }
        if top.differs("continue_final_message", false)
            && scan.stop(Refusal::ContinueFinalMessage, || {
                is_bool(top, "continue_final_message")
                    && messages.last().is_some_and(|m| m.role == "assistant")
            })
        {
            return Some(Refusal::ContinueFinalMessage);
        }
        if top.differs("add_special_tokens", false)
            && scan.stop(Refusal::AddSpecialTokens, || false)
        {
            return Some(Refusal::AddSpecialTokens);
        }
        for (k, r) in LATE_PRESENT_REFUSALS {
            if renders_effort && r == Refusal::ReasoningEffort {
                continue;
            }
            if top.present(k) && scan.stop(r, || false) {
                return Some(r);
            }
        }
        None
    }

    fn scan_messages(
        &self,
        messages: &[StrictMessage<'_, '_>],
        source: &str,
        facts: Option<&crate::template_facts::TemplateFacts>,
        scan: &mut Scan,
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
        }) && scan.stop(Refusal::Multimodal, || false)
        {
            return Some(Refusal::Multimodal);
        }
        if messages.iter().any(|m| text_parts(parts_of(m)).count() > 1)
            && scan.stop(Refusal::MultiTextPart, || true)
        {
            return Some(Refusal::MultiTextPart);
        }
        if messages.last().is_some_and(|m| m.role == "assistant")
            && scan.stop(Refusal::TrailingAssistant, || true)
        {
            return Some(Refusal::TrailingAssistant);
        }
        if messages.iter().any(|m| m.role == "developer")
            && scan.stop(Refusal::DeveloperRole, || false)
        {
            return Some(Refusal::DeveloperRole);
        }
        if messages.iter().any(|m| m.object.present("tools"))
            && scan.stop(Refusal::MessageTools, || false)
        {
            return Some(Refusal::MessageTools);
        }
        if messages
            .iter()
            .any(|m| mentioned_fields(m, source).next().is_some())
            && scan.stop(Refusal::MessageField, || {
                messages.iter().all(|m| {
                    mentioned_fields(m, source).all(|(k, v)| proven_message_field(m.role, k, v))
                })
            })
        {
            return Some(Refusal::MessageField);
        }
        if facts.is_some_and(|f| f.tests_content_none)
            && messages
                .iter()
                .any(|m| matches!(m.content, StrictContent::Null))
            && scan.stop(Refusal::NullContent, || true)
        {
            return Some(Refusal::NullContent);
        }
        None
    }
}

fn message_value(role: &str, content: Value) -> Value {
    map_value([("role", Value::from(role)), ("content", content)])
}

/// The strict render's messages (`role` and the joined `content`), built only where the render
/// cache needs them.
struct StrictValues<'m, 'a, 'j>(&'m [StrictMessage<'a, 'j>]);

impl crate::render_cache::MessageSource for StrictValues<'_, '_, '_> {
    fn count(&self) -> usize {
        self.0.len()
    }

    fn build(&self, i: usize) -> Value {
        self.0.get(i).map_or_else(Value::default, |m| {
            message_value(m.role, Value::from(m.content.joined().as_ref()))
        })
    }

    fn matches(&self, i: usize, cached: &Value) -> bool {
        self.0.get(i).is_some_and(|m| {
            crate::render_cache::same_role_content(cached, m.role, &m.content.joined())
        })
    }
}

/// Copies the capped ids into the caller's buffer (`ids` holds at most `out.len()`).
pub(crate) fn copy_ids(ids: &[u32], out: &mut [u32]) {
    let n = ids.len().min(out.len());
    if let (Some(dst), Some(src)) = (out.get_mut(..n), ids.get(..n)) {
        dst.copy_from_slice(src);
    }
}

/// A bounded encode's result as the call's outcome: the ids kept, or the bound crossed.
fn finish_ids(
    bounded: Bounded,
    ids: &mut Vec<u32>,
    limit: &mut Option<LimitHit>,
) -> Result<Outcome<Encoded>, Error> {
    match bounded {
        Bounded::Over(hit) => {
            ids.clear();
            *limit = Some(hit);
            Ok(Outcome::Refused(Refusal::InputTooLarge))
        }
        Bounded::Ids { more } => {
            if ids.is_empty() && !more {
                return Err(Error::Tokenize("the tokenizer produced no ids".to_string()));
            }
            Ok(Outcome::Done(Encoded {
                written: ids.len(),
                truncated: more,
            }))
        }
    }
}

/// Records `hit` in `scratch` and refuses [`Refusal::InputTooLarge`].
pub(crate) fn too_large<T>(scratch: &mut ScratchBuf, hit: LimitHit) -> Outcome<T> {
    scratch.ids.clear();
    scratch.limit = Some(hit);
    Outcome::Refused(Refusal::InputTooLarge)
}

fn rendered_hit(max: usize, at_least: usize) -> LimitHit {
    LimitHit {
        limit: Limit::RenderedBytes,
        max,
        actual: at_least,
    }
}
