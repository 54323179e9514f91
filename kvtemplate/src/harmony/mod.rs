//! gpt-oss chat as vLLM renders it: harmony, not a Jinja template
//! (docs/contracts/templates.md §13).
//!
//! vLLM (0.31.0 and 0.33.0, the releases with vectors) renders a gpt-oss chat request with
//! harmony straight to ids: a system message (model identity, knowledge cutoff, the
//! conversation date, the reasoning effort, the valid channels), a developer message with the
//! instructions of a leading system/developer message and the function tools as a TypeScript
//! namespace, the conversation on harmony's channels, and `<|start|>assistant` at the end.
//! [`HarmonyEncoder`] reproduces that from the raw OpenAI body; the date is the UTC date of the
//! request's instant (one instant per request), or the server's fixed start date
//! ([`HarmonyConfig::start_date`]). Text inside messages is encoded as ordinary text: the
//! vocabulary's special-token strings in a message are not special.
//!
//! Which engine release renders gpt-oss with harmony (vLLM) and which with the checkpoint's
//! Jinja template (SGLang 0.5.19) is catalog data (`chatRenderer` of a release in
//! `kvprofile-core/data/contracts.yaml`), never decided here.

mod render;
mod request;
mod typescript;

use crate::engine::{ChatRequest, EngineChat};
use crate::limits::{InputLimits, Limit, LimitHit};
use crate::strftime::UtcTime;
use crate::Error;
use render::{Piece, Special};

/// The server-side settings of a harmony render (docs/contracts/templates.md §13.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarmonyConfig {
    /// The first line of the system message.
    pub model_identity: String,
    /// `Knowledge cutoff: …` in the system message.
    pub knowledge_cutoff: String,
    /// The server's fixed conversation date (`VLLM_SYSTEM_START_DATE`), used as given;
    /// `None`: the UTC date of the request's instant.
    pub start_date: Option<String>,
    /// The server runs with `VLLM_GPT_OSS_HARMONY_SYSTEM_INSTRUCTIONS`: a leading
    /// system/developer message's text goes into the system message (after the identity)
    /// instead of a developer message.
    pub instructions_in_system: bool,
}

impl HarmonyConfig {
    /// vLLM's settings with no server environment (the vectors' `harmony.system_message`).
    pub fn vllm() -> HarmonyConfig {
        HarmonyConfig {
            model_identity: "You are ChatGPT, a large language model trained by OpenAI."
                .to_string(),
            knowledge_cutoff: "2024-06".to_string(),
            start_date: None,
            instructions_in_system: false,
        }
    }
}

/// The harmony renderer with the o200k encoder of a gpt-oss `tokenizer.json`; `Send + Sync`.
pub struct HarmonyEncoder {
    config: HarmonyConfig,
    /// The tokenizer without its added tokens: ordinary text only.
    ordinary: std::sync::Arc<kvtoken::FastEncoder>,
    /// Ids of [`Special::ALL`], in that order.
    specials: [u32; 5],
    limits: InputLimits,
}

impl std::fmt::Debug for HarmonyEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarmonyEncoder")
            .field("config", &self.config)
            .field("path", self.ordinary.path())
            .finish_non_exhaustive()
    }
}

impl HarmonyEncoder {
    /// Builds the encoder from a gpt-oss `tokenizer.json`: its added tokens give the ids of
    /// harmony's formatting tokens; without them, it is the ordinary-text encoder. Fails when
    /// a formatting token is missing or the tokenizer does not load.
    pub fn from_tokenizer_json(
        bytes: &[u8],
        config: HarmonyConfig,
    ) -> Result<HarmonyEncoder, Error> {
        let mut json: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| Error::TokenizerLoad(e.to_string()))?;
        let added = json
            .get("added_tokens")
            .and_then(serde_json::Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut specials = [0u32; 5];
        for (slot, s) in specials.iter_mut().zip(Special::ALL) {
            let id = added
                .iter()
                .find(|t| t.get("content").and_then(serde_json::Value::as_str) == Some(s.text()))
                .and_then(|t| t.get("id"))
                .and_then(serde_json::Value::as_u64)
                .and_then(|id| u32::try_from(id).ok())
                .ok_or_else(|| {
                    Error::TokenizerLoad(format!("no added token {} for harmony", s.text()))
                })?;
            *slot = id;
        }
        if let Some(obj) = json.as_object_mut() {
            obj.insert(
                "added_tokens".to_string(),
                serde_json::Value::Array(Vec::new()),
            );
        }
        let plain = serde_json::to_vec(&json).map_err(|e| Error::TokenizerLoad(e.to_string()))?;
        let ordinary = kvtoken::FastEncoder::from_bytes(&plain)
            .map_err(|e| Error::TokenizerLoad(e.to_string()))?;
        Ok(HarmonyEncoder {
            config,
            ordinary: std::sync::Arc::new(ordinary),
            specials,
            limits: InputLimits::default(),
        })
    }

    /// This encoder with the work bounds `limits`.
    #[must_use]
    pub fn with_limits(mut self, limits: InputLimits) -> HarmonyEncoder {
        self.limits = limits;
        self
    }

    /// The same encoder (sharing the tokenizer) rendering with the server settings `config`.
    pub fn reconfigured(&self, config: HarmonyConfig) -> HarmonyEncoder {
        HarmonyEncoder {
            config,
            ordinary: std::sync::Arc::clone(&self.ordinary),
            specials: self.specials,
            limits: self.limits,
        }
    }

    /// The server settings this encoder renders with.
    pub fn config(&self) -> &HarmonyConfig {
        &self.config
    }

    /// The ordinary-text encoder (o200k without added tokens).
    pub fn ordinary(&self) -> &kvtoken::FastEncoder {
        &self.ordinary
    }

    /// What vLLM renders and tokenizes for a raw OpenAI chat body at the instant
    /// `now_unix_ms`: `rendered` is the text form of the ids (harmony's `decode_utf8`). A
    /// request vLLM refuses fails with [`Error::EngineRequest`] (vLLM's text); a request shape
    /// the vectors do not cover with [`Error::Unsupported`]; a body over a bound with
    /// [`Error::InputTooLarge`] (the body, the messages and the rendered prompt, checked
    /// before encoding; each pre-token against [`InputLimits::max_word_bytes`] before it is
    /// encoded, as kvtoken's fast path for o200k sees pre-tokens; and, should the o200k
    /// encoder be on kvtoken's fallback path, each text piece against
    /// [`InputLimits::max_fallback_bytes`] before encoding); no instant and no fixed start
    /// date with [`Error::Clock`].
    pub fn engine_chat(&self, body: &[u8], now_unix_ms: Option<i64>) -> Result<EngineChat, Error> {
        self.engine_chat_capped(body, now_unix_ms, usize::MAX)
            .map(|(chat, _)| chat)
    }

    /// [`HarmonyEncoder::engine_chat`] stopping once the first `cap` ids are known (exactly
    /// the first ids of the full encoding: each piece encodes on its own); the flag says
    /// whether the prompt has more. The pieces after the cut are not encoded.
    pub(crate) fn engine_chat_capped(
        &self,
        body: &[u8],
        now_unix_ms: Option<i64>,
        cap: usize,
    ) -> Result<(EngineChat, bool), Error> {
        if let Some(hit) = LimitHit::check(Limit::BodyBytes, &self.limits, body.len()) {
            return Err(Error::InputTooLarge(hit));
        }
        let req = ChatRequest::parse(body)?;
        let n = req.messages().map_err(Error::EngineRequest)?.len();
        if let Some(hit) = LimitHit::check(Limit::Messages, &self.limits, n) {
            return Err(Error::InputTooLarge(hit));
        }
        let conv = request::conversation(&req, &self.config)?;
        let date = match (&self.config.start_date, now_unix_ms) {
            (Some(d), _) => d.clone(),
            (None, Some(ms)) => {
                let t = UtcTime::from_unix_ms(ms);
                if !(1..=9999).contains(&t.year) {
                    return Err(Error::Clock(ms));
                }
                format!("{:04}-{:02}-{:02}", t.year, t.month, t.day)
            }
            (None, None) => {
                return Err(Error::Unsupported(
                    "harmony: the conversation date needs the request's instant".to_string(),
                ))
            }
        };
        let pieces = render::pieces(&conv, &self.config, &date);
        let rendered = render::text_of(&pieces);
        if let Some(hit) = LimitHit::check(Limit::RenderedBytes, &self.limits, rendered.len()) {
            return Err(Error::InputTooLarge(hit));
        }
        // On kvtoken's fallback path the stock tokenizer sees each piece whole: bound it.
        if !self.ordinary.is_fast() {
            let longest = pieces
                .iter()
                .map(|p| match p {
                    Piece::Text(t) => t.len(),
                    Piece::Special(_) => 0,
                })
                .max()
                .unwrap_or(0);
            if let Some(hit) = LimitHit::check(Limit::FallbackBytes, &self.limits, longest) {
                return Err(Error::InputTooLarge(hit));
            }
        }
        let mut ids = Vec::with_capacity((rendered.len() / 3).min(cap));
        let mut more = false;
        for p in &pieces {
            // Every piece left gives at least one id (an empty text gives none).
            if ids.len() >= cap && !matches!(p, Piece::Text(t) if t.is_empty()) {
                more = true;
                break;
            }
            match p {
                Piece::Special(s) => ids.push(self.special_id(*s)),
                Piece::Text(t) if t.is_empty() => {}
                Piece::Text(t) => {
                    let limits = kvtoken::EncodeLimits {
                        max_ids: cap - ids.len(),
                        max_word_bytes: self.limits.max_word_bytes,
                        max_fallback_bytes: self.limits.max_fallback_bytes,
                    };
                    let mut part = Vec::new();
                    match self.ordinary.encode_limited(t, false, &limits, &mut part) {
                        Ok(cut) => {
                            ids.extend(part);
                            if cut {
                                more = true;
                                break;
                            }
                        }
                        Err(kvtoken::KvTokenError::WordTooLong { bytes, max }) => {
                            return Err(Error::InputTooLarge(LimitHit {
                                limit: Limit::WordBytes,
                                max,
                                actual: bytes,
                            }))
                        }
                        Err(kvtoken::KvTokenError::FallbackTooLong { bytes, max }) => {
                            return Err(Error::InputTooLarge(LimitHit {
                                limit: Limit::FallbackBytes,
                                max,
                                actual: bytes,
                            }))
                        }
                        Err(e) => return Err(Error::Tokenize(e.to_string())),
                    }
                }
            }
        }
        Ok((
            EngineChat {
                rendered,
                ids: Some(ids),
            },
            more,
        ))
    }

    fn special_id(&self, s: Special) -> u32 {
        let i = Special::ALL.iter().position(|a| *a == s).unwrap_or(0);
        self.specials.get(i).copied().unwrap_or(0)
    }
}
