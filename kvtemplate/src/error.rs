//! The crate's error type.

use crate::refusal::ResultClass;

/// Everything that can go wrong in kvtemplate other than a strict-rule refusal.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The chat template does not compile.
    #[error("chat template does not compile: {0}")]
    TemplateCompile(String),
    /// `tokenizer.json` does not load.
    #[error("tokenizer.json does not load: {0}")]
    TokenizerLoad(String),
    /// Encoding with the tokenizer failed.
    #[error("tokenizer failed: {0}")]
    Tokenize(String),
    /// A model directory lacks a file or holds one that is malformed.
    #[error("model directory {path}: {reason}")]
    ModelDir {
        /// The offending path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The encoder spec is inconsistent (e.g. a BOS quirk without a resolvable BOS token).
    #[error("encoder spec: {0}")]
    Spec(String),
    /// The request is not valid for the engine (what the engine answers with HTTP 400).
    #[error("request refused by the engine: {0}")]
    EngineRequest(String),
    /// The template raised (`raise_exception`) or failed on these messages.
    #[error("template error: {0}")]
    TemplateRender(String),
    /// The template exhausted its execution budget (minijinja fuel).
    #[error("template exceeded its execution budget")]
    RenderBudget,
    /// The request body could not be parsed.
    #[error("request: {0}")]
    Request(String),
    /// The input is over one of the encoder's work bounds. The encode and render calls
    /// report this as [`crate::Refusal::InputTooLarge`] (the hit in
    /// [`crate::ScratchBuf::limit_hit`]); only the emulation calls
    /// ([`crate::Encoder::engine_chat`]) return it as an error.
    #[error("{0}")]
    InputTooLarge(crate::limits::LimitHit),
    /// The engine has no chat path kvexact reproduces (llama.cpp: no KV plane, its own
    /// tokenization); only vLLM, SGLang and TensorRT-LLM encoders exist.
    #[error("{0} has no chat path kvexact reproduces (vllm, sglang, trtllm)")]
    NoChatPath(kvprofile_core::Engine),
    /// A request shape kvexact cannot reproduce exactly for this renderer (no vector proves
    /// what the engine does with it): refused rather than guessed.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The caller's "now" is outside the representable date range.
    #[error("clock value out of range: {0} ms")]
    Clock(i64),
}

impl Error {
    /// The typed bridge code (docs/contracts/registry.md §9.3) this error maps to.
    pub fn class(&self) -> ResultClass {
        match self {
            Error::TemplateCompile(_) => ResultClass::Renderer,
            Error::TokenizerLoad(_) | Error::Tokenize(_) => ResultClass::Tokenizer,
            Error::ModelDir { .. } | Error::Spec(_) | Error::NoChatPath(_) => ResultClass::Profile,
            Error::EngineRequest(_) | Error::Request(_) | Error::Clock(_) => ResultClass::Request,
            Error::TemplateRender(_)
            | Error::RenderBudget
            | Error::InputTooLarge(_)
            | Error::Unsupported(_) => ResultClass::Unsupported,
        }
    }
}
