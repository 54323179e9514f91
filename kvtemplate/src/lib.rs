//! # kvtemplate — strict requests, HF-exact chat rendering, engine-exact tokenization
//!
//! The hot path of the kvexact gateway: a raw OpenAI request body goes in, the prompt token ids
//! the engine will cache come out — or a typed refusal when a strict rule cannot guarantee that
//! (docs/contracts/registry.md §9).
//!
//! * [`json`]: exact-key, last-duplicate-wins JSON borrowed from the caller's bytes.
//! * Refusals: the §9.2 feature codes ([`Refusal`]), result classes ([`ResultClass`]),
//!   [`Outcome`], and [`RefusalSet`] — the codes an encoder lifts ([`EncoderSpec::lifted`]:
//!   requests hitting only those are encoded exactly as the engine's serving path does).
//! * [`ChatTemplate`]: a chat template compiled into a minijinja environment that behaves like
//!   transformers' Jinja environment (docs/contracts/templates.md §2, §5).
//! * [`Encoder`]: one per (profile, engine contract); `Send + Sync`, share it with `Arc`. Built
//!   from an [`EncoderSpec`]: [`spec_from_model_dir`] (a Hugging Face model directory),
//!   [`spec_from_profile`] / [`spec_from_loaded`] (a published registry profile).
//! * [`InputLimits`]: the bounds on one request's work (documented defaults,
//!   [`DEFAULT_MAX_BODY_BYTES`] …); over one, a request is refused `input_too_large` before
//!   the work is done.
//! * [`ChatRules`]: what differs between releases of one engine's chat path (carried by
//!   [`EncoderSpec::chat_rules`]).
//! * [`AddedTokensRule`]: which added tokens the engine release's tokenizer loader keeps
//!   (`tokenizer.json`'s or `tokenizer_config.json`'s).
//! * [`Engine`] is kvprofile-core's one engine enum, re-exported.
//! * [`renderer_hint`]: what a checkpoint's files say about the engine's renderer when no
//!   `modelType` names it (chat refused on gpt-oss's harmony files, a Mistral file named).
//!
//! Everything else is private: the crate's surface is what this page lists.
//!
//! ```
//! use kvtemplate::{Encoder, EncoderSpec, Engine, Outcome, ScratchBuf};
//! // A template-only encoder (no tokenizer): render a chat request as vLLM would.
//! let mut spec = EncoderSpec::new(Engine::Vllm);
//! spec.template_source = Some(
//!     "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}<|assistant|>".into(),
//! );
//! let enc = Encoder::new(spec).unwrap();
//! let mut scratch = ScratchBuf::default();
//! let body = br#"{"messages":[{"role":"user","content":"hi"}]}"#;
//! match enc.render_chat(body, 0, &mut scratch).unwrap() {
//!     Outcome::Done(()) => assert_eq!(scratch.rendered(), "<|user|>hi\n<|assistant|>"),
//!     Outcome::Refused(r) => panic!("refused: {r}"),
//! }
//! // A strict rule refuses what it cannot guarantee, with a typed code.
//! let tools = br#"{"messages":[{"role":"user","content":"hi"}],"tools":[]}"#;
//! assert!(matches!(enc.render_chat(tools, 0, &mut scratch), Ok(Outcome::Refused(_))));
//! ```
#![warn(missing_docs)]

mod chat_rules;
mod encoder;
mod engine;
mod env;
mod error;
pub mod harmony;
pub mod json;
mod limits;
mod loader;
mod loader_ambiguity;
pub mod mistral;
mod model_dir;
mod profile;
mod pyfilters;
mod pyformat;
mod pyjson;
mod pyrepr;
mod pyrepr_table;
mod pystr;
mod pyvalue;
mod refusal;
mod render_cache;
mod render_split;
pub mod renderer_hint;
mod strftime;
mod strict;
mod template_concat;
mod template_facts;
mod template_literals;
mod template_source;
mod tokenize;

pub use chat_rules::{ChatRules, EmptyTools, TemplateErrorClass, ToolSerialization, UnknownRule};
pub use encoder::{ChatRenderer, Encoder, EncoderSpec, Rendered, ScratchBuf, SpecialTokenValue};
pub use engine::{text_part_separator, ChatRequest, Engine, EngineChat};
pub use env::{ChatTemplate, RenderFailure, DEFAULT_FUEL};
pub use error::Error;
/// How `strftime_now` renders (the profile's `renderPolicy.clockPolicy`; the registry's type).
pub use kvprofile_core::ClockPolicy;
pub use limits::{
    InputLimits, Limit, LimitHit, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_FALLBACK_BYTES,
    DEFAULT_MAX_MESSAGES, DEFAULT_MAX_RENDERED_BYTES, DEFAULT_MAX_WORD_BYTES,
};
pub use loader::{effective_tokenizer_json, AddedTokensRule};
pub use loader_ambiguity::LoaderAmbiguity;
pub use model_dir::{
    model_type_of_dir, spec_from_model_dir, spec_from_model_dir_for, validate_artifacts,
};
pub use profile::{
    added_tokens_rule_of, encoder_from_loaded, encoder_from_profile, spec_from_loaded,
    spec_from_profile, KvtemplateValidator, ParsedTokenizer,
};
pub use refusal::{Outcome, Refusal, RefusalSet, ResultClass, UnknownRefusal};
pub use render_cache::RenderCacheStats;
pub use strftime::parse_rfc3339;
pub use strict::Encoded;
pub use template_facts::ContentFormat;
pub use tokenize::{parse as parse_tokenizer, Bounded, PinnedTokenizer};
