//! # kvtemplate — strict requests, HF-exact chat rendering, engine-exact tokenization
//!
//! The hot path of the kvexact gateway: a raw OpenAI request body goes in, the prompt token ids
//! the engine will cache come out — or a typed refusal when a strict rule cannot guarantee that
//! (docs/contracts/registry.md §9).
//!
//! * [`json`]: exact-key, last-duplicate-wins JSON borrowed from the caller's bytes.
//! * [`refusal`]: the §9.2 feature codes ([`Refusal`]), result classes ([`ResultClass`]),
//!   [`Outcome`], and [`RefusalSet`] — the codes an encoder lifts ([`EncoderSpec::lifted`]:
//!   requests hitting only those are encoded exactly as the engine's serving path does).
//! * [`env`](mod@env): chat templates compiled into a minijinja environment that behaves like
//!   transformers' Jinja environment (docs/contracts/templates.md §2, §5).
//! * [`Encoder`]: one per (profile, engine contract); `Send + Sync`, share it with `Arc`.
//! * [`limits`]: the bounds on one request's work ([`InputLimits`], documented defaults);
//!   over one, a request is refused `input_too_large` before the work is done.
//! * [`chat_rules`]: what differs between releases of one engine's chat path
//!   ([`ChatRules`], carried by [`EncoderSpec::chat_rules`]).
//! * [`loader`]: which added tokens the engine release's tokenizer loader keeps
//!   (`tokenizer.json`'s or `tokenizer_config.json`'s, [`AddedTokensRule`]).
#![warn(missing_docs)]

pub mod chat_rules;
pub mod encoder;
pub mod engine;
pub mod env;
pub mod error;
pub mod json;
pub mod limits;
pub mod loader;
pub mod model_dir;
pub mod profile;
pub mod pyjson;
pub mod pystr;
pub mod refusal;
pub mod strftime;
pub mod strict;
pub mod template_facts;
pub mod tokenize;

pub use chat_rules::{ChatRules, TemplateErrorClass, ToolSerialization};
pub use encoder::{Encoder, EncoderSpec, Rendered, ScratchBuf, SpecialTokenValue};
pub use engine::{ChatRequest, Engine, EngineChat};
pub use env::{ChatTemplate, RenderFailure};
pub use error::Error;
/// How `strftime_now` renders (the profile's `renderPolicy.clockPolicy`; the registry's type).
pub use kvprofile_core::ClockPolicy;
pub use limits::{InputLimits, Limit, LimitHit};
pub use loader::AddedTokensRule;
pub use model_dir::{spec_from_model_dir, spec_from_model_dir_for, validate_artifacts};
pub use profile::{
    added_tokens_rule_of, encoder_from_loaded, encoder_from_profile, spec_from_loaded,
    spec_from_profile, KvtemplateValidator, ParsedTokenizer,
};
pub use refusal::{Outcome, Refusal, RefusalSet, ResultClass, UnknownRefusal};
pub use strict::Encoded;
