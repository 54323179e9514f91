//! [`EncoderSpec`] (what an encoder is built from) and [`Encoder`] (one per profile × engine
//! contract): template compiled once, tokenizer loaded once, `Send + Sync`.

use crate::chat_rules::{ChatRules, EmptyTools, TemplateErrorClass};
use crate::engine::{self, ChatRequest, Engine, EngineChat};
use crate::env::{ChatTemplate, RenderFailure, DEFAULT_FUEL};
use crate::error::Error;
use crate::json::{map_value, Json};
use crate::limits::{InputLimits, LimitHit};
use crate::pystr;
use crate::refusal::RefusalSet;
use crate::render_cache::RenderPath;
use crate::template_facts::{ContentFormat, TemplateFacts};
use crate::tokenize::{Bounded, PinnedTokenizer};
use kvprofile_core::ClockPolicy;
use minijinja::value::{Value, ValueKind};

/// A special-token value handed to the template (`special_tokens_map` entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecialTokenValue {
    /// One token string (`pad_token`, `unk_token`, …).
    Text(String),
    /// A list (`additional_special_tokens`).
    List(Vec<String>),
}

/// How an encoder renders chat (docs/contracts/templates.md §13): chosen from the engine
/// release's catalog entry (`chat.renderers`) and the model's `config.json` `model_type`
/// (`kvprobe::bridge`), never from a model name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ChatRenderer {
    /// The checkpoint's Jinja chat template.
    #[default]
    Jinja,
    /// gpt-oss harmony as vLLM renders it, with the server's settings.
    Harmony(crate::harmony::HarmonyConfig),
    /// mistral_common's instruct encoding on an engine's path (a checkpoint whose tokenizer is
    /// `tekken.json` or `tokenizer.model.v7`, [`EncoderSpec::mistral_tokenizer`]).
    Mistral(crate::mistral::MistralRenderer),
    /// No vectors prove how the engine release renders this model's chat (e.g. a model type
    /// some release renders without Jinja, on a release or contract that names no proven
    /// renderer): every chat call fails with [`Error::Unsupported`] giving the reason;
    /// completions are unaffected.
    Unknown(String),
}

/// Everything an [`Encoder`] is built from. kvprofile-core's profile maps onto it field by field
/// (docs/contracts/registry.md §2); [`crate::spec_from_model_dir`] builds one from a model directory.
#[derive(Debug, Clone)]
pub struct EncoderSpec {
    /// Raw Jinja chat-template source (`None`: completions only).
    pub template_source: Option<String>,
    /// `tokenizer.json` bytes (`None`: render only, e.g. EXAONE 3.5 in the vectors).
    pub tokenizer_json: Option<Vec<u8>>,
    /// The same tokenizer already parsed (by [`crate::tokenize::parse`]); when set it is used
    /// instead of parsing `tokenizer_json` again. The caller guarantees it was parsed from
    /// exactly those bytes.
    pub parsed_tokenizer: Option<std::sync::Arc<kvtoken::FastEncoder>>,
    /// `renderPolicy.bosToken`: bound to `bos_token`; also the BOS for `completions_bos`.
    pub bos_token: Option<String>,
    /// `renderPolicy.eosToken`: bound to `eos_token`.
    pub eos_token: Option<String>,
    /// Further `special_tokens_map` entries transformers binds (`pad_token`,
    /// `additional_special_tokens`, …). Only the engine emulation passes them; the strict path
    /// binds `bos_token`/`eos_token` alone (docs/contracts/registry.md §9.2).
    pub extra_special_tokens: Vec<(String, SpecialTokenValue)>,
    /// `renderPolicy.addGenerationPrompt`.
    pub add_generation_prompt: bool,
    /// `renderPolicy.clockPolicy` (`None`: no clock, `strftime_now` is not defined and
    /// calling it fails the render).
    pub clock_policy: Option<ClockPolicy>,
    /// `templateContentFormat`.
    pub content_format: ContentFormat,
    /// The engine family of the contract.
    pub engine: Engine,
    /// `engineQuirks.<contract>.completionsBos` (SGLang only).
    pub completions_bos: bool,
    /// Execution budget per render (minijinja fuel); `None` = unlimited.
    pub fuel: Option<u64>,
    /// The engine release's chat-path rules (tool serialisation, template-error class);
    /// [`EncoderSpec::new`] sets [`ChatRules::reference`] of `engine` (`None` for an engine
    /// without a chat path, which [`Encoder::new`] refuses). Must fit `engine`
    /// ([`ChatRules::check_engine`]).
    pub chat_rules: Option<ChatRules>,
    /// The strict-rule refusal codes this encoder lifts (default: none — the strict rules of
    /// docs/contracts/registry.md §9.2 exactly). A chat request whose scan hits only lifted codes is
    /// rendered and tokenized the way the engine's own serving path does, under
    /// [`EncoderSpec::chat_rules`] (see [`Encoder::encode_chat`] for the rules of a lift).
    /// Must be a subset of [`RefusalSet::LIFTABLE`]; which codes an engine release may lift is
    /// its contract's (`kvprobe::bridge::encoder_with_lifts` checks it).
    pub lifted: RefusalSet,
    /// Bounds on each request's work ([`InputLimits::default`]: the documented defaults).
    pub limits: InputLimits,
    /// Refuse [`crate::Refusal::AmbiguousAddedToken`] texts holding an added token the
    /// engine's loader may or may not keep ([`crate::LoaderAmbiguity`]): set when the profile
    /// pins no `tokenizer_config.json` and the release's loader reads it.
    pub refuse_loader_ambiguity: bool,
    /// The model's `config.json` `model_type` (the profile's `modelType`): with the engine
    /// release, it selects [`EncoderSpec::renderer`].
    pub model_type: Option<String>,
    /// How chat is rendered ([`ChatRenderer::Jinja`] by default). Harmony needs
    /// [`EncoderSpec::tokenizer_json`] (its formatting tokens' ids and the ordinary-text
    /// encoder come from it).
    pub renderer: ChatRenderer,
    /// The Mistral tokenizer file of a checkpoint without `tokenizer.json` (the profile's
    /// `tokenizerFile` `tekken.json` / `tokenizer.model.v7`): chat and completions then take
    /// mistral_common's encodings ([`ChatRenderer::Mistral`], or refused under
    /// [`ChatRenderer::Unknown`]); the spec then has no template and no `tokenizer.json`.
    pub mistral_tokenizer: Option<crate::mistral::MistralTokenizerFile>,
}

impl EncoderSpec {
    /// A spec with defaults: no template, no tokenizer, generation prompt on, no clock.
    pub fn new(engine: Engine) -> EncoderSpec {
        EncoderSpec {
            template_source: None,
            tokenizer_json: None,
            parsed_tokenizer: None,
            bos_token: None,
            eos_token: None,
            extra_special_tokens: Vec::new(),
            add_generation_prompt: true,
            clock_policy: None,
            content_format: ContentFormat::String,
            engine,
            completions_bos: false,
            fuel: Some(DEFAULT_FUEL),
            chat_rules: ChatRules::reference(engine),
            lifted: RefusalSet::EMPTY,
            limits: InputLimits::default(),
            refuse_loader_ambiguity: false,
            model_type: None,
            renderer: ChatRenderer::Jinja,
            mistral_tokenizer: None,
        }
    }

    /// This spec with the work bounds `limits` ([`EncoderSpec::limits`]).
    #[must_use]
    pub fn with_limits(mut self, limits: InputLimits) -> EncoderSpec {
        self.limits = limits;
        self
    }

    /// This spec lifting `lifted` ([`EncoderSpec::lifted`]).
    #[must_use]
    pub fn with_lifted(mut self, lifted: RefusalSet) -> EncoderSpec {
        self.lifted = lifted;
        self
    }

    /// This spec with the chat rules of an engine release ([`EncoderSpec::chat_rules`]).
    #[must_use]
    pub fn with_chat_rules(mut self, chat_rules: ChatRules) -> EncoderSpec {
        self.chat_rules = Some(chat_rules);
        self
    }
}

/// A rendered and tokenized chat prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The prompt text.
    pub text: String,
    /// The token ids (capped at the caller's maximum).
    pub ids: Vec<u32>,
    /// Whether ids were cut at the maximum.
    pub truncated: bool,
}

/// Per-call scratch space a caller may keep per thread to avoid re-allocating.
#[derive(Debug, Default)]
pub struct ScratchBuf {
    pub(crate) rendered: String,
    pub(crate) ids: Vec<u32>,
    pub(crate) limit: Option<LimitHit>,
}

impl ScratchBuf {
    /// An empty scratch buffer.
    pub fn new() -> ScratchBuf {
        ScratchBuf::default()
    }

    /// The text of the last render.
    pub fn rendered(&self) -> &str {
        &self.rendered
    }

    /// The ids of the last successful encode: the first ones of the full encoding, as many
    /// as the call's cap (the ids written to the caller's buffer; the hashing calls of
    /// `kvprobe::pipeline` cap at what their hash buffer covers).
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// The bound the last call crossed, when it was refused
    /// [`crate::Refusal::InputTooLarge`] (`None` after any other outcome).
    pub fn limit_hit(&self) -> Option<LimitHit> {
        self.limit
    }

    /// Runs `f` with this thread's scratch buffer, reused by every call made on the thread
    /// (only a buffer: no state survives between calls); a fresh one when the thread's is
    /// already in use (a re-entrant call). After a call that grew it past
    /// [`ScratchBuf::KEPT_TEXT_BYTES`] of text or [`ScratchBuf::KEPT_IDS`] ids, the thread
    /// keeps no more than those: one outsized request does not pin its memory in every
    /// thread that served one.
    ///
    /// ```
    /// use kvtemplate::ScratchBuf;
    /// let n = ScratchBuf::with_thread_local(|s| s.ids().len());
    /// assert_eq!(n, 0);
    /// ```
    pub fn with_thread_local<R>(f: impl FnOnce(&mut ScratchBuf) -> R) -> R {
        thread_local! {
            static SCRATCH: std::cell::RefCell<ScratchBuf> =
                std::cell::RefCell::new(ScratchBuf::new());
        }
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut s) => {
                let out = f(&mut s);
                s.trim();
                out
            }
            Err(_) => f(&mut ScratchBuf::new()),
        })
    }

    /// Text capacity a thread's scratch buffer keeps between calls (a chat of a few hundred
    /// thousand characters reuses it; a larger one allocates for itself).
    pub const KEPT_TEXT_BYTES: usize = 1 << 20;
    /// Id capacity a thread's scratch buffer keeps between calls.
    pub const KEPT_IDS: usize = 1 << 18;

    /// Gives back what a call grew past the kept capacities (the contents go: nothing
    /// survives between calls anyway).
    fn trim(&mut self) {
        if self.rendered.capacity() > Self::KEPT_TEXT_BYTES {
            self.rendered.clear();
            self.rendered.shrink_to(Self::KEPT_TEXT_BYTES);
        }
        if self.ids.capacity() > Self::KEPT_IDS {
            self.ids.clear();
            self.ids.shrink_to(Self::KEPT_IDS);
        }
    }
}

/// An encoder for one (profile, engine contract). Build once, share via `Arc`.
#[derive(Debug)]
pub struct Encoder {
    pub(crate) engine: Engine,
    pub(crate) chat_rules: ChatRules,
    pub(crate) lifted: RefusalSet,
    pub(crate) limits: InputLimits,
    pub(crate) template: Option<ChatTemplate>,
    pub(crate) facts: Option<TemplateFacts>,
    pub(crate) content_format: ContentFormat,
    pub(crate) tokenizer: Option<PinnedTokenizer>,
    pub(crate) add_generation_prompt: bool,
    /// `bos_token`/`eos_token` as template values (strict context).
    pub(crate) strict_specials: Vec<(Value, Value)>,
    /// Every special-token binding (engine emulation context).
    pub(crate) all_specials: Vec<(Value, Value)>,
    /// The added tokens in doubt, when [`EncoderSpec::refuse_loader_ambiguity`].
    pub(crate) loader_ambiguity: Option<crate::LoaderAmbiguity>,
    /// The harmony renderer, when [`EncoderSpec::renderer`] is [`ChatRenderer::Harmony`]:
    /// chat requests take it instead of the template.
    pub(crate) harmony: Option<crate::harmony::HarmonyEncoder>,
    /// Why chat cannot be rendered ([`ChatRenderer::Unknown`]).
    pub(crate) chat_unknown: Option<String>,
    /// A Mistral checkpoint's encoder ([`EncoderSpec::mistral_tokenizer`]): chat and
    /// completions take it.
    pub(crate) mistral: Option<crate::mistral::MistralRoute>,
    /// The template's split twin and render cache (`render_cache.rs`), or why the template
    /// is always rendered whole.
    pub(crate) render_reuse: Result<crate::render_cache::RenderReuse, String>,
}

const CONTINUE_TAG: &str = "CONTINUE_FINAL_MESSAGE_TAG ";

/// Which message keys (besides `role` and `content`) the engine emulation hands the template:
/// `(role, key, value)` → keep.
pub(crate) type KeepKey<'f> = &'f dyn Fn(&str, &str, &Json<'_>) -> bool;

/// An engine's render of a chat request, before tokenization.
#[derive(Debug)]
pub(crate) struct EnginePrompt {
    /// The rendered text (SGLang `continue_final_message`: the text before the prefix).
    pub(crate) rendered: String,
    /// The request's `add_special_tokens` (vLLM/TRT-LLM; SGLang ignores it).
    pub(crate) add_special: bool,
    /// SGLang `continue_final_message`: the final assistant content, appended as ids.
    pub(crate) sglang_prefix: Option<String>,
}

impl Encoder {
    /// Compiles the template and loads the tokenizer. Fails on a template that does not
    /// compile, a tokenizer that does not load, a `completionsBos` quirk on a non-SGLang
    /// contract or without a resolvable BOS, or a clock policy that disagrees with the
    /// template (docs/contracts/registry.md §2 publish checks), chat rules of another engine family, or
    /// a lifted code kvtemplate cannot lift ([`crate::Refusal::can_lift`]).
    pub fn new(spec: EncoderSpec) -> Result<Encoder, Error> {
        if !spec.engine.has_kv_plane() {
            return Err(Error::NoChatPath(spec.engine));
        }
        let chat_rules = spec.chat_rules.ok_or(Error::NoChatPath(spec.engine))?;
        chat_rules.check_engine(spec.engine).map_err(Error::Spec)?;
        if let Some(r) = spec.lifted.difference(RefusalSet::LIFTABLE).first() {
            return Err(Error::Spec(format!(
                "refusal code {r} cannot be lifted (liftable: {})",
                RefusalSet::LIFTABLE
            )));
        }
        if spec.completions_bos && spec.engine != Engine::Sglang {
            return Err(Error::Spec(format!(
                "completionsBos is an SGLang quirk; contract engine is {}",
                spec.engine.as_str()
            )));
        }
        let (template, facts) = match &spec.template_source {
            Some(src) => {
                let facts = TemplateFacts::scan(src);
                let declared = spec.clock_policy == Some(ClockPolicy::UtcDate);
                if facts.uses_strftime_now != declared {
                    return Err(Error::Spec(if declared {
                        "clockPolicy utc-date declared but the template never calls strftime_now"
                            .to_string()
                    } else {
                        "template calls strftime_now but no clockPolicy is declared".to_string()
                    }));
                }
                let t = ChatTemplate::compile(src, spec.clock_policy, spec.fuel)
                    .map_err(Error::TemplateCompile)?
                    .with_max_output(spec.limits.max_rendered_bytes);
                (Some(t), Some(facts))
            }
            None if spec.clock_policy == Some(ClockPolicy::UtcDate) => {
                return Err(Error::Spec("clockPolicy requires a template".to_string()))
            }
            None => (None, None),
        };
        let tokenizer = match (&spec.parsed_tokenizer, &spec.tokenizer_json) {
            (Some(parsed), _) => Some(PinnedTokenizer::from_shared(
                std::sync::Arc::clone(parsed),
                spec.bos_token.as_deref(),
                spec.completions_bos,
            )?),
            (None, Some(bytes)) => Some(
                PinnedTokenizer::from_bytes(bytes, spec.bos_token.as_deref(), spec.completions_bos)
                    .map_err(
                        |e| match (&e, crate::renderer_hint::mistral_file_remedy(bytes)) {
                            (Error::TokenizerLoad(_), Some(remedy)) => Error::Spec(remedy),
                            _ => e,
                        },
                    )?,
            ),
            (None, None) if spec.completions_bos => {
                return Err(Error::Spec("completionsBos needs a tokenizer".to_string()))
            }
            (None, None) => None,
        };
        let mut strict_specials = Vec::new();
        if let Some(b) = &spec.bos_token {
            strict_specials.push((Value::from("bos_token"), Value::from(b.as_str())));
        }
        if let Some(e) = &spec.eos_token {
            strict_specials.push((Value::from("eos_token"), Value::from(e.as_str())));
        }
        let mut all_specials = strict_specials.clone();
        for (k, v) in &spec.extra_special_tokens {
            let v = match v {
                SpecialTokenValue::Text(s) => Value::from(s.as_str()),
                SpecialTokenValue::List(l) => Value::from(
                    l.iter()
                        .map(|s| Value::from(s.as_str()))
                        .collect::<Vec<_>>(),
                ),
            };
            all_specials.push((Value::from(k.as_str()), v));
        }
        let loader_ambiguity = tokenizer
            .as_ref()
            .filter(|_| spec.refuse_loader_ambiguity)
            .and_then(|t| crate::LoaderAmbiguity::of(t.inner()));
        let mistral = match (&spec.mistral_tokenizer, &spec.renderer) {
            (Some(file), renderer) => {
                if spec.template_source.is_some()
                    || spec.tokenizer_json.is_some()
                    || spec.parsed_tokenizer.is_some()
                {
                    return Err(Error::Spec(
                        "a Mistral tokenizer file comes without a template or tokenizer.json \
                         (mistral_common renders it)"
                            .to_string(),
                    ));
                }
                let proven = match renderer {
                    ChatRenderer::Mistral(r) => Some(*r),
                    ChatRenderer::Unknown(_) => None,
                    ChatRenderer::Jinja | ChatRenderer::Harmony(_) => {
                        return Err(Error::Spec(
                            "a Mistral tokenizer file is rendered by mistral_common, not a \
                             template"
                                .to_string(),
                        ))
                    }
                };
                Some(crate::mistral::MistralRoute::new(
                    file,
                    proven,
                    spec.engine,
                    spec.limits,
                )?)
            }
            (None, ChatRenderer::Mistral(r)) => {
                return Err(Error::Spec(format!(
                    "renderer {} needs tekken.json or tokenizer.model.v7",
                    r.catalog_name()
                )))
            }
            (None, _) => None,
        };
        let harmony = match &spec.renderer {
            ChatRenderer::Jinja | ChatRenderer::Unknown(_) | ChatRenderer::Mistral(_) => None,
            ChatRenderer::Harmony(config) => {
                if spec.engine != Engine::Vllm {
                    return Err(Error::Spec(format!(
                        "harmony is vLLM's renderer, not {}'s",
                        spec.engine.as_str()
                    )));
                }
                let bytes = spec.tokenizer_json.as_deref().ok_or_else(|| {
                    Error::Spec("harmony needs the tokenizer.json bytes".to_string())
                })?;
                Some(
                    crate::harmony::HarmonyEncoder::from_tokenizer_json(bytes, config.clone())?
                        .with_limits(spec.limits),
                )
            }
        };
        let chat_unknown = match &spec.renderer {
            ChatRenderer::Unknown(why) => Some(why.clone()),
            // No model type to choose the engine's renderer by: refuse chat where the files
            // say the engine does not render the Jinja template (docs/contracts/templates.md §13).
            ChatRenderer::Jinja if spec.model_type.is_none() => {
                crate::renderer_hint::unnamed_model_type(
                    spec.engine,
                    tokenizer.as_ref().map(|t| t.inner().stock()),
                    spec.template_source.as_deref(),
                )
            }
            ChatRenderer::Jinja | ChatRenderer::Harmony(_) | ChatRenderer::Mistral(_) => None,
        };
        let render_reuse = match &template {
            Some(t) => crate::render_cache::RenderReuse::new(t),
            None => Err("no chat template".to_string()),
        };
        Ok(Encoder {
            render_reuse,
            mistral,
            harmony,
            chat_unknown,
            loader_ambiguity,
            engine: spec.engine,
            chat_rules,
            lifted: spec.lifted,
            limits: spec.limits,
            template,
            facts,
            content_format: spec.content_format,
            tokenizer,
            add_generation_prompt: spec.add_generation_prompt,
            strict_specials,
            all_specials,
        })
    }

    /// How this encoder renders chat.
    pub fn renderer(&self) -> ChatRenderer {
        match (&self.harmony, &self.chat_unknown, &self.mistral) {
            (Some(h), _, _) => ChatRenderer::Harmony(h.config().clone()),
            (None, Some(why), _) => ChatRenderer::Unknown(why.clone()),
            (None, None, Some(m)) => match m.renderer {
                Some(r) => ChatRenderer::Mistral(r),
                None => ChatRenderer::Unknown("Mistral renderer not proven".to_string()),
            },
            (None, None, None) => ChatRenderer::Jinja,
        }
    }

    /// [`Error::Unsupported`] when this encoder's chat renderer is unknown.
    pub(crate) fn check_chat_known(&self) -> Result<(), Error> {
        match &self.chat_unknown {
            Some(why) => Err(Error::Unsupported(why.clone())),
            None => Ok(()),
        }
    }

    /// The engine family this encoder emulates.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The chat-path rules of the engine release this encoder emulates.
    pub fn chat_rules(&self) -> ChatRules {
        self.chat_rules
    }

    /// The strict-rule refusal codes this encoder lifts ([`EncoderSpec::lifted`]).
    pub fn lifted(&self) -> RefusalSet {
        self.lifted
    }

    /// The bounds on each request's work ([`EncoderSpec::limits`]).
    pub fn limits(&self) -> InputLimits {
        self.limits
    }

    /// Enables cross-request caches holding about `capacity_bytes` in all for this encoder
    /// (call before sharing the encoder): a quarter for the render cache when the template is
    /// proven to allow it ([`Encoder::render_reuse`]: a conversation's next turn renders only
    /// its new messages), then of the rest half for a [`kvtoken::PromptCache`] (a chat prompt
    /// that extends a recent one — the same conversation's next turn — takes over its ids up
    /// to a cut proven safe and only the rest is encoded) and half for a
    /// [`kvtoken::SegmentCache`]. Text and ids are identical with or without them; `0`
    /// disables all three.
    pub fn enable_segment_cache(&mut self, capacity_bytes: usize) {
        let render = match &self.render_reuse {
            Ok(_) => capacity_bytes / 4,
            Err(_) => 0,
        };
        if let Ok(r) = &mut self.render_reuse {
            r.set_capacity(render);
        }
        let rest = capacity_bytes - render;
        if let Some(t) = &mut self.tokenizer {
            let prompts = rest / 2 / kvtoken::prompt_cache::SETS * kvtoken::prompt_cache::SETS;
            t.set_prompt_cache(prompts);
            t.set_segment_cache(rest - prompts);
        }
    }

    /// Whether this encoder's template renders a conversation's earlier messages once
    /// (`Ok((lookbehind, lookahead))`: the messages around its own each message's output may
    /// read) or always renders the whole conversation (`Err`: why; see
    /// docs/architecture.md, "Render reuse").
    pub fn render_reuse(&self) -> Result<(usize, usize), &str> {
        match &self.render_reuse {
            Ok(r) => Ok(r.window()),
            Err(why) => Err(why),
        }
    }

    /// The render cache's counters (`None`: the template is always rendered whole).
    pub fn render_cache_stats(&self) -> Option<crate::RenderCacheStats> {
        self.render_reuse.as_ref().ok().map(|r| r.stats())
    }

    /// Empties the render cache (its counters are kept).
    pub fn clear_render_cache(&self) {
        if let Ok(r) = &self.render_reuse {
            r.clear();
        }
    }

    /// Replaces this encoder's bounds on each request's work (what
    /// [`EncoderSpec::with_limits`] sets at construction), the render bound included.
    pub fn set_limits(&mut self, limits: InputLimits) {
        self.limits = limits;
        // Prompt-cache entries carry the word bound they were encoded under; emptying it
        // keeps what it holds simple to reason about.
        if let Some(p) = self
            .tokenizer
            .as_ref()
            .and_then(PinnedTokenizer::prompt_cache)
        {
            p.clear();
        }
        if let Some(t) = self.template.take() {
            self.template = Some(t.with_max_output(limits.max_rendered_bytes));
        }
    }

    /// Whether a tokenizer is loaded (render-only encoders have none; a Mistral encoder's is
    /// mistral_common's).
    pub fn has_tokenizer(&self) -> bool {
        self.tokenizer.is_some() || self.mistral.is_some()
    }

    /// Whether a chat template is loaded.
    pub fn has_template(&self) -> bool {
        self.template.is_some()
    }

    /// The tokenizer, or the runtime error the gateway reports when it is missing (-5).
    pub fn tokenizer(&self) -> Result<&PinnedTokenizer, Error> {
        self.tokenizer
            .as_ref()
            .ok_or_else(|| Error::TokenizerLoad("this encoder has no tokenizer".to_string()))
    }

    pub(crate) fn template(&self) -> Result<&ChatTemplate, Error> {
        self.template
            .as_ref()
            .ok_or_else(|| Error::TemplateCompile("this encoder has no chat template".to_string()))
    }

    /// Renders like transformers' `apply_chat_template(messages, tools=…, add_generation_prompt=…,
    /// continue_final_message=…, **template_kwargs)` on template-level data (no engine
    /// normalisation). `messages` and `tools` are template values (see [`Json::to_value`]).
    pub fn render_hf(
        &self,
        messages: Vec<Value>,
        tools: Option<Value>,
        add_generation_prompt: bool,
        continue_final_message: bool,
        template_kwargs: Option<Value>,
        now_unix_ms: Option<i64>,
    ) -> Result<String, Error> {
        // transformers lets Jinja's TemplateError through unwrapped.
        self.render_as(
            messages,
            tools,
            add_generation_prompt,
            continue_final_message,
            template_kwargs,
            now_unix_ms,
            TemplateErrorClass::TemplateError,
        )
    }

    /// [`Encoder::render_hf`], reporting a template's `raise_exception` as `raised` names it.
    #[allow(clippy::too_many_arguments)]
    fn render_as(
        &self,
        messages: Vec<Value>,
        tools: Option<Value>,
        add_generation_prompt: bool,
        continue_final_message: bool,
        template_kwargs: Option<Value>,
        now_unix_ms: Option<i64>,
        raised: TemplateErrorClass,
    ) -> Result<String, Error> {
        let template = self.template()?;
        // The context but `messages`, in the order the template has always been handed it.
        let rest = || -> Vec<(Value, Value)> {
            let mut ctx: Vec<(Value, Value)> = vec![
                (
                    Value::from("tools"),
                    tools.clone().unwrap_or(Value::from(())),
                ),
                (Value::from("documents"), Value::from(())),
                (
                    Value::from("add_generation_prompt"),
                    Value::from(add_generation_prompt),
                ),
            ];
            ctx.extend(self.all_specials.iter().cloned());
            if let Some(kw) = &template_kwargs {
                if let Ok(keys) = kw.try_iter() {
                    for k in keys {
                        let v = kw.get_item(&k).unwrap_or_default();
                        ctx.push((k, v));
                    }
                }
            }
            ctx
        };
        let render = |msgs: &[Value]| {
            let mut out = String::new();
            crate::render_cache::render_messages(
                template,
                self.render_reuse.as_ref().ok(),
                RenderPath::Engine,
                msgs,
                &rest(),
                now_unix_ms,
                &mut out,
            )
            .map(|()| out)
            .map_err(|f| match f {
                RenderFailure::Budget => Error::RenderBudget,
                RenderFailure::TooLarge { max, at_least } => Error::InputTooLarge(LimitHit {
                    limit: crate::limits::Limit::RenderedBytes,
                    max,
                    actual: at_least,
                }),
                RenderFailure::Raised(m) => Error::TemplateRender(raised.format(&m)),
                other => Error::TemplateRender(other.message()),
            })
        };
        if !continue_final_message {
            return render(&messages);
        }
        // transformers: append a marker to the final message, render, cut at the marker.
        let (final_text, marked) = mark_final_message(&messages)?;
        let mut msgs = messages;
        if let Some(last) = msgs.last_mut() {
            *last = marked;
        }
        let out = render(&msgs)?;
        let tag = CONTINUE_TAG.trim_end();
        if !out.contains(pystr::strip(&final_text)) || !out.contains(tag) {
            return Err(Error::TemplateRender(
                "ValueError: continue_final_message is set but the final message does not appear in the chat after applying the chat template!".to_string(),
            ));
        }
        let cut = out.rfind(tag).unwrap_or(out.len());
        let head = out.get(..cut).unwrap_or("");
        if out.get(cut..).is_some_and(|t| t.starts_with(CONTINUE_TAG)) {
            Ok(head.to_string())
        } else {
            Ok(pystr::rstrip(head).to_string())
        }
    }

    /// What the engine renders and tokenizes for a raw OpenAI chat body (full engine
    /// behaviour: tools, `chat_template_kwargs`, `continue_final_message`, …; no strict rules),
    /// under this encoder's [`ChatRules`] (a harmony encoder: vLLM's harmony render,
    /// [`crate::harmony::HarmonyEncoder::engine_chat`]). A template that raises fails with
    /// [`Error::TemplateRender`] holding the engine's text, `"<class>: <message>"`.
    pub fn engine_chat(&self, body: &[u8], now_unix_ms: Option<i64>) -> Result<EngineChat, Error> {
        self.check_chat_known()?;
        if let Some(h) = &self.harmony {
            return h.engine_chat(body, now_unix_ms);
        }
        if let Some(m) = &self.mistral {
            return m.engine_chat(self.chat_unknown.as_deref(), body);
        }
        let prompt = self.engine_prompt(body, now_unix_ms, None)?;
        let ids = match &self.tokenizer {
            Some(_) => {
                let mut ids = Vec::new();
                self.engine_tokens(
                    &prompt.rendered,
                    prompt.add_special,
                    prompt.sglang_prefix.as_deref(),
                    &mut ids,
                )?;
                Some(ids)
            }
            None => None,
        };
        Ok(EngineChat {
            rendered: prompt.rendered,
            ids,
        })
    }

    /// The engine's render of a chat body (before tokenization); `keep` filters the message
    /// keys handed to the template ([`engine::normalise_message_with`]; `None`: all).
    pub(crate) fn engine_prompt(
        &self,
        body: &[u8],
        now_unix_ms: Option<i64>,
        keep: Option<KeepKey<'_>>,
    ) -> Result<EnginePrompt, Error> {
        let req = ChatRequest::parse(body)?;
        let e = self.engine;
        let bad = Error::EngineRequest;
        if e == Engine::Trtllm && req.body.get("continue_final_message").is_some() {
            return Err(bad(
                "request validation: extra fields not permitted: ['continue_final_message']".into(),
            ));
        }
        let cfm = req.flag("continue_final_message", false).map_err(bad)?;
        let agp = req.flag("add_generation_prompt", true).map_err(bad)?;
        let add_special = req.flag("add_special_tokens", false).map_err(bad)?;
        if e == Engine::Vllm && cfm && agp {
            return Err(bad(
                "continue_final_message and add_generation_prompt cannot both be true".into(),
            ));
        }
        let raw_msgs = req.messages().map_err(bad)?;
        let keep_all = |_: &str, _: &str, _: &Json<'_>| true;
        let keep = keep.unwrap_or(&keep_all);
        let mut messages = raw_msgs
            .iter()
            .map(|m| engine::normalise_message_with(e, m, keep))
            .collect::<Result<Vec<Value>, Error>>()?;
        let tool_choice_none = req.body.get("tool_choice").and_then(Json::as_str) == Some("none");
        let tool_choice_named = matches!(req.body.get("tool_choice"), Some(Json::Object(_)));
        let tools = match req.body.get("tools") {
            None | Some(Json::Null) => None,
            Some(_) if e == Engine::Sglang && tool_choice_none => None,
            // vLLM 0.34 (`EmptyTools::Omitted`): an empty list is no tools.
            Some(Json::Array(t))
                if t.is_empty()
                    && self.chat_rules.empty_tools == EmptyTools::Omitted
                    && !tool_choice_named =>
            {
                None
            }
            Some(Json::Array(t)) => {
                Some(engine::normalise_tools(self.chat_rules.tool_serialization, t).map_err(bad)?)
            }
            Some(_) => return Err(bad("tools must be a list".into())),
        };
        let mut kwargs = match req.body.get("chat_template_kwargs") {
            None | Some(Json::Null) => None,
            Some(v @ Json::Object(_)) => Some(v.to_value()),
            Some(_) => return Err(bad("chat_template_kwargs must be an object".into())),
        };
        // SGLang hands the request's `reasoning_effort` to the template as a variable
        // (docs/contracts/templates.md §13.5; gpt-oss's template reads it).
        if e == Engine::Sglang {
            if let Some(Json::Str(effort)) = req.body.get("reasoning_effort") {
                let has = kwargs.as_ref().is_some_and(|k| {
                    k.get_attr("reasoning_effort")
                        .is_ok_and(|v| !v.is_undefined())
                });
                if !has {
                    let mut pairs: Vec<(Value, Value)> = Vec::new();
                    if let Some(k) = &kwargs {
                        if let Ok(keys) = k.try_iter() {
                            for key in keys {
                                let v = k.get_item(&key).unwrap_or_default();
                                pairs.push((key, v));
                            }
                        }
                    }
                    pairs.push((
                        Value::from("reasoning_effort"),
                        Value::from(effort.as_ref()),
                    ));
                    kwargs = Some(map_value(pairs));
                }
            }
        }
        let last_is_assistant = messages.last().is_some_and(|m| role_is(m, "assistant"));
        let raised = self.chat_rules.template_error_class;
        if e != Engine::Sglang {
            let rendered =
                self.render_as(messages, tools, agp, cfm, kwargs, now_unix_ms, raised)?;
            return Ok(EnginePrompt {
                rendered,
                add_special,
                sglang_prefix: None,
            });
        }
        // SGLang: generation prompt always on; a final assistant message becomes a user turn,
        // or with continue_final_message is removed and appended as ids after the render.
        let mut sglang_prefix: Option<String> = None;
        if last_is_assistant {
            if cfm {
                sglang_prefix = messages.pop().and_then(|m| content_of(&m));
            } else if let Some(last) = messages.last_mut() {
                *last = with_role(last, "user");
            }
        }
        let rendered = self.render_as(messages, tools, true, false, kwargs, now_unix_ms, raised)?;
        Ok(EnginePrompt {
            rendered,
            add_special: false,
            sglang_prefix,
        })
    }

    /// The ids the engine sends for a rendered prompt (into `out`, cleared first): the chat
    /// encoding with the request's `add_special_tokens`, then SGLang's continue-final-message
    /// `prefix` encoded with special tokens minus a leading BOS.
    pub(crate) fn engine_tokens(
        &self,
        rendered: &str,
        add_special: bool,
        prefix: Option<&str>,
        out: &mut Vec<u32>,
    ) -> Result<(), Error> {
        let t = self.tokenizer()?;
        t.chat_into(self.engine, rendered, add_special, out)?;
        if let Some(p) = prefix {
            let mut extra = t.sglang_special(p)?;
            if t.bos_id().is_some() && extra.first() == t.bos_id().as_ref() {
                extra.remove(0);
            }
            out.extend(extra);
        }
        Ok(())
    }

    /// [`engine_tokens`](Self::engine_tokens) bounded as
    /// [`PinnedTokenizer::encode_bounded`]: the first `cap` ids, exactly.
    pub(crate) fn engine_tokens_bounded(
        &self,
        rendered: &str,
        add_special: bool,
        prefix: Option<&str>,
        cap: usize,
        out: &mut Vec<u32>,
    ) -> Result<Bounded, Error> {
        let t = self.tokenizer()?;
        let head = t.chat_bounded(self.engine, rendered, add_special, cap, &self.limits, out)?;
        let (Some(p), Bounded::Ids { more: false }) = (prefix, head) else {
            return Ok(head);
        };
        // The prefix's ids minus a leading BOS: ask for one more in case it starts with one.
        let room = cap.saturating_sub(out.len());
        let mut extra = Vec::new();
        let tail = t.sglang_special_bounded(p, room.saturating_add(1), &self.limits, &mut extra)?;
        let Bounded::Ids { more } = tail else {
            return Ok(tail);
        };
        if t.bos_id().is_some() && extra.first() == t.bos_id().as_ref() {
            extra.remove(0);
        }
        let more = more || extra.len() > room;
        extra.truncate(room);
        out.extend(extra);
        Ok(Bounded::Ids { more })
    }

    /// What the engine caches for a text `/v1/completions` prompt (full engine behaviour:
    /// vLLM and SGLang refuse an empty prompt; TRT-LLM encodes it to `[]`).
    pub fn engine_completions(&self, prompt: &str) -> Result<Vec<u32>, Error> {
        if let Some(m) = &self.mistral {
            return m.engine_completions(self.chat_unknown.as_deref(), prompt);
        }
        let t = self.tokenizer()?;
        if prompt.is_empty() {
            return match self.engine {
                Engine::Vllm | Engine::Sglang => {
                    Err(Error::EngineRequest("prompt cannot be empty".to_string()))
                }
                Engine::Trtllm => t.completions(self.engine, prompt),
                Engine::Llamacpp => Err(Error::NoChatPath(self.engine)),
            };
        }
        t.completions(self.engine, prompt)
    }
}

fn role_is(m: &Value, role: &str) -> bool {
    m.get_attr("role").is_ok_and(|v| v.as_str() == Some(role))
}

fn content_of(m: &Value) -> Option<String> {
    m.get_attr("content")
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
}

fn with_role(m: &Value, role: &str) -> Value {
    rebuild(m, |k, v| if k == "role" { Value::from(role) } else { v })
}

fn rebuild(m: &Value, mut f: impl FnMut(&str, Value) -> Value) -> Value {
    let Ok(keys) = m.try_iter() else {
        return m.clone();
    };
    map_value(keys.map(|k| {
        let v = m.get_item(&k).unwrap_or_default();
        let nv = f(k.as_str().unwrap_or(""), v);
        (k, nv)
    }))
}

/// Appends transformers' marker to the final message's content (for a list: its last text
/// part); returns the original final text and the marked message.
fn mark_final_message(messages: &[Value]) -> Result<(String, Value), Error> {
    let last = messages.last().ok_or_else(|| {
        Error::EngineRequest("continue_final_message needs at least one message".to_string())
    })?;
    let content = last.get_attr("content").unwrap_or_default();
    match content.kind() {
        ValueKind::String => {
            let text = content.as_str().unwrap_or("").to_string();
            let marked = format!("{text}{CONTINUE_TAG}");
            Ok((
                text,
                rebuild(last, |k, v| {
                    if k == "content" {
                        Value::from(marked.as_str())
                    } else {
                        v
                    }
                }),
            ))
        }
        ValueKind::Seq => {
            let parts: Vec<Value> = content.try_iter().map(|i| i.collect()).unwrap_or_default();
            let idx = parts
                .iter()
                .rposition(|p| p.get_attr("text").is_ok_and(|t| t.as_str().is_some()))
                .ok_or_else(|| {
                    Error::EngineRequest(
                        "continue_final_message: the final message has no text part".to_string(),
                    )
                })?;
            let text = parts
                .get(idx)
                .and_then(|p| p.get_attr("text").ok())
                .and_then(|t| t.as_str().map(str::to_string))
                .unwrap_or_default();
            let marked = format!("{text}{CONTINUE_TAG}");
            let new_parts: Vec<Value> = parts
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    if i == idx {
                        rebuild(p, |k, v| {
                            if k == "text" {
                                Value::from(marked.as_str())
                            } else {
                                v
                            }
                        })
                    } else {
                        p.clone()
                    }
                })
                .collect();
            let new_parts = Value::from(new_parts);
            Ok((
                text,
                rebuild(
                    last,
                    |k, v| if k == "content" { new_parts.clone() } else { v },
                ),
            ))
        }
        _ => Err(Error::EngineRequest(
            "continue_final_message: the final message has no text content".to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::ScratchBuf;

    /// A call that grew the thread's buffer past the kept capacities leaves no more than those
    /// behind; an ordinary one keeps its capacity for the next call.
    #[test]
    fn a_thread_keeps_no_more_scratch_than_the_kept_capacities() {
        std::thread::spawn(|| {
            let caps =
                || ScratchBuf::with_thread_local(|s| (s.rendered.capacity(), s.ids.capacity()));
            ScratchBuf::with_thread_local(|s| {
                s.rendered.push_str(&"x".repeat(4096));
                s.ids.extend(0..1024);
            });
            let small = caps();
            assert!(small.0 >= 4096 && small.1 >= 1024, "{small:?}");
            ScratchBuf::with_thread_local(|s| {
                s.rendered
                    .push_str(&"y".repeat(3 * ScratchBuf::KEPT_TEXT_BYTES));
                s.ids.extend(0..3 * ScratchBuf::KEPT_IDS as u32);
            });
            let (text, ids) = caps();
            assert!(text <= ScratchBuf::KEPT_TEXT_BYTES, "{text}");
            assert!(ids <= ScratchBuf::KEPT_IDS, "{ids}");
        })
        .join()
        .unwrap();
    }
}
