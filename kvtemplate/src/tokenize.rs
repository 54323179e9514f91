//! The pinned `tokenizer.json`, and how each engine turns text into ids
//! (docs/contracts/templates.md §7, §11; docs/contracts/vllm.md §8; docs/contracts/sglang.md §7; docs/contracts/trtllm.md §1; docs/contracts/registry.md §9.3).
//!
//! Text is encoded by [`kvtoken::FastEncoder`], which gives exactly `tokenizers`' ids (and
//! falls back to `tokenizers` itself for configurations it does not recognise). An optional
//! [`kvtoken::SegmentCache`] reuses the ids of text between added tokens across requests.

use std::sync::Arc;

use crate::engine::Engine;
use crate::error::Error;
use crate::limits::{InputLimits, Limit, LimitHit};
use kvtoken::{EncodeLimits, FastEncoder, KvTokenError, PromptCache, SegmentCache};
use tokenizers::Tokenizer;

/// A loaded tokenizer plus the BOS facts the engines' loaders derive.
pub struct PinnedTokenizer {
    /// Shared with every other encoder built from the same parsed tokenizer (read-only).
    tok: Arc<FastEncoder>,
    /// Cross-request cache of segment ids (text between added tokens), if enabled.
    segments: Option<SegmentCache>,
    /// Cross-request cache of recent prompts' ids (a conversation's next prompt takes over
    /// the previous one's up to a proven cut), if enabled.
    prompts: Option<PromptCache>,
    /// BOS id for the SGLang `completionsBos` quirk (resolved at construction).
    bos_id: Option<u32>,
    /// SGLang encodes with special tokens on by default (`BOS + text` when it restores the
    /// tokenizer's `add_bos_token`).
    sglang_bos: bool,
    /// SGLang's chat rule: encode without specials when `encode("")` is non-empty.
    sglang_chat_plain: bool,
}

impl std::fmt::Debug for PinnedTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedTokenizer")
            .field("bos_id", &self.bos_id)
            .field("sglang_bos", &self.sglang_bos)
            .field("path", self.tok.path())
            .field("segment_cache", &self.segments.is_some())
            .field("prompt_cache", &self.prompts.is_some())
            .finish_non_exhaustive()
    }
}

/// Parses `tokenizer.json` bytes into the shareable encoder [`PinnedTokenizer::from_shared`]
/// takes.
pub fn parse(tokenizer_json: &[u8]) -> Result<Arc<FastEncoder>, Error> {
    FastEncoder::from_bytes(tokenizer_json)
        .map(Arc::new)
        .map_err(|e| Error::TokenizerLoad(e.to_string()))
}

/// The id of the one special added token whose content is `token`
/// (docs/contracts/registry.md §2 `completionsBos`: exactly one such entry, else an error).
pub fn resolve_special_id(tok: &Tokenizer, token: &str) -> Result<u32, Error> {
    let hits: Vec<u32> = tok
        .get_added_tokens_decoder()
        .into_iter()
        .filter(|(_, t)| t.special && t.content == token)
        .map(|(id, _)| id)
        .collect();
    match hits.as_slice() {
        [id] => Ok(*id),
        [] => Err(Error::Spec(format!(
            "BOS token {token:?} is not a special added token of tokenizer.json"
        ))),
        _ => Err(Error::Spec(format!(
            "BOS token {token:?} matches {} added tokens",
            hits.len()
        ))),
    }
}

impl PinnedTokenizer {
    /// Wraps a loaded tokenizer. `completions_bos` is SGLang's BOS rule (the profile quirk);
    /// it needs `bos_token`.
    pub fn new(
        tok: Tokenizer,
        bos_token: Option<&str>,
        completions_bos: bool,
    ) -> Result<PinnedTokenizer, Error> {
        let fast =
            FastEncoder::from_tokenizer(tok).map_err(|e| Error::TokenizerLoad(e.to_string()))?;
        Self::from_shared(Arc::new(fast), bos_token, completions_bos)
    }

    /// Builds from the bytes of `tokenizer.json` (no re-serialisation of the config).
    pub fn from_bytes(
        tokenizer_json: &[u8],
        bos_token: Option<&str>,
        completions_bos: bool,
    ) -> Result<PinnedTokenizer, Error> {
        Self::from_shared(parse(tokenizer_json)?, bos_token, completions_bos)
    }

    /// Builds from an already parsed tokenizer, shared with other encoders (building an
    /// encoder per engine contract then costs no second parse of `tokenizer.json`).
    pub fn from_shared(
        tok: Arc<FastEncoder>,
        bos_token: Option<&str>,
        completions_bos: bool,
    ) -> Result<PinnedTokenizer, Error> {
        let bos_id = match (completions_bos, bos_token) {
            (true, Some(b)) => Some(resolve_special_id(tok.stock(), b)?),
            (true, None) => {
                return Err(Error::Spec(
                    "completionsBos needs renderPolicy.bosToken".to_string(),
                ))
            }
            (false, Some(b)) => resolve_special_id(tok.stock(), b).ok(),
            (false, None) => None,
        };
        let mut t = PinnedTokenizer {
            tok,
            segments: None,
            prompts: None,
            bos_id,
            sglang_bos: completions_bos,
            sglang_chat_plain: false,
        };
        t.sglang_chat_plain = !t.sglang_special("")?.is_empty();
        Ok(t)
    }

    /// Enables a cross-request segment cache holding about `capacity_bytes` of segment text
    /// (ids are identical with or without it; it is bypassed on the fallback path).
    pub fn set_segment_cache(&mut self, capacity_bytes: usize) {
        self.segments = (capacity_bytes > 0).then(|| SegmentCache::new(capacity_bytes));
    }

    /// The segment cache, if enabled.
    pub fn segment_cache(&self) -> Option<&SegmentCache> {
        self.segments.as_ref()
    }

    /// Enables a cross-request prompt cache of about `capacity_bytes` ([`kvtoken::PromptCache`]:
    /// the bounded encodes without special tokens take over a recent prompt's ids up to a cut
    /// proven safe; ids are identical with or without it; `0` disables it).
    pub fn set_prompt_cache(&mut self, capacity_bytes: usize) {
        self.prompts = (capacity_bytes > 0).then(|| PromptCache::new(capacity_bytes));
    }

    /// The prompt cache, if enabled.
    pub fn prompt_cache(&self) -> Option<&PromptCache> {
        self.prompts.as_ref()
    }

    /// The encoder (fast path, or `tokenizers` on fallback).
    pub fn inner(&self) -> &FastEncoder {
        &self.tok
    }

    /// The resolved BOS id, if the BOS token is a special added token.
    pub fn bos_id(&self) -> Option<u32> {
        self.bos_id
    }

    /// `tokenizer(text, add_special_tokens=…)` with special-token text recognised.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, Error> {
        let mut out = Vec::new();
        self.encode_into(text, add_special_tokens, &mut out)?;
        Ok(out)
    }

    /// [`encode`](Self::encode) into `out` (cleared first).
    pub fn encode_into(
        &self,
        text: &str,
        add_special_tokens: bool,
        out: &mut Vec<u32>,
    ) -> Result<(), Error> {
        let r = match &self.segments {
            Some(cache) => self
                .tok
                .encode_into_cached(text, add_special_tokens, cache, out),
            None => self.tok.encode_into(text, add_special_tokens, out),
        };
        r.map_err(|e| Error::Tokenize(e.to_string()))
    }

    /// SGLang's "special tokens on": `BOS + encode(text, no specials)` when it restores the
    /// BOS flag, else the tokenizer's own post-processor.
    pub fn sglang_special(&self, text: &str) -> Result<Vec<u32>, Error> {
        let mut out = Vec::new();
        self.sglang_special_into(text, &mut out)?;
        Ok(out)
    }

    /// [`sglang_special`](Self::sglang_special) into `out` (cleared first).
    pub fn sglang_special_into(&self, text: &str, out: &mut Vec<u32>) -> Result<(), Error> {
        match (self.sglang_bos, self.bos_id) {
            (true, Some(bos)) => {
                self.encode_into(text, false, out)?;
                out.insert(0, bos);
                Ok(())
            }
            _ => self.encode_into(text, true, out),
        }
    }

    /// The ids `engine` caches for a text completions prompt (the prompt is assumed non-empty;
    /// the caller decides what an empty prompt means).
    pub fn completions(&self, engine: Engine, text: &str) -> Result<Vec<u32>, Error> {
        let mut out = Vec::new();
        self.completions_into(engine, text, &mut out)?;
        Ok(out)
    }

    /// [`completions`](Self::completions) into `out` (cleared first).
    pub fn completions_into(
        &self,
        engine: Engine,
        text: &str,
        out: &mut Vec<u32>,
    ) -> Result<(), Error> {
        match engine {
            Engine::Vllm | Engine::Trtllm => self.encode_into(text, true, out),
            Engine::Sglang => self.sglang_special_into(text, out),
            Engine::Llamacpp => Err(Error::NoChatPath(engine)),
        }
    }

    /// The ids `engine` produces for a rendered chat prompt with the request's
    /// `add_special_tokens` (vLLM/TRT-LLM honour it, default false; SGLang ignores it).
    pub fn chat(
        &self,
        engine: Engine,
        rendered: &str,
        add_special_tokens: bool,
    ) -> Result<Vec<u32>, Error> {
        let mut out = Vec::new();
        self.chat_into(engine, rendered, add_special_tokens, &mut out)?;
        Ok(out)
    }

    /// [`chat`](Self::chat) into `out` (cleared first).
    pub fn chat_into(
        &self,
        engine: Engine,
        rendered: &str,
        add_special_tokens: bool,
        out: &mut Vec<u32>,
    ) -> Result<(), Error> {
        match engine {
            Engine::Vllm | Engine::Trtllm => self.encode_into(rendered, add_special_tokens, out),
            Engine::Sglang if self.sglang_chat_plain => self.encode_into(rendered, false, out),
            Engine::Sglang => self.sglang_special_into(rendered, out),
            Engine::Llamacpp => Err(Error::NoChatPath(engine)),
        }
    }

    /// [`encode_into`](Self::encode_into) doing only the work the first `cap` ids need:
    /// `out` gets the first `min(cap, full)` ids of the full encoding exactly, and the answer
    /// says whether the full encoding has more ([`Bounded::Ids`]), or which bound of
    /// `limits` the text crossed ([`Bounded::Over`]: a pre-token over `max_word_bytes`, or a
    /// fallback text over `max_fallback_bytes`; `out` is then unspecified).
    pub fn encode_bounded(
        &self,
        text: &str,
        add_special_tokens: bool,
        cap: usize,
        limits: &InputLimits,
        out: &mut Vec<u32>,
    ) -> Result<Bounded, Error> {
        let kl = EncodeLimits {
            max_ids: cap,
            max_word_bytes: limits.max_word_bytes,
            max_fallback_bytes: limits.max_fallback_bytes,
        };
        let r = match &self.prompts {
            Some(prompts) if !add_special_tokens => {
                self.tok
                    .encode_limited_reusing(text, &kl, self.segments.as_ref(), prompts, out)
            }
            _ => self.tok.encode_limited_cached(
                text,
                add_special_tokens,
                &kl,
                self.segments.as_ref(),
                out,
            ),
        };
        match r {
            Ok(more) => Ok(Bounded::Ids { more }),
            Err(KvTokenError::WordTooLong { bytes, max }) => Ok(Bounded::Over(LimitHit {
                limit: Limit::WordBytes,
                max,
                actual: bytes,
            })),
            Err(KvTokenError::FallbackTooLong { bytes, max }) => Ok(Bounded::Over(LimitHit {
                limit: Limit::FallbackBytes,
                max,
                actual: bytes,
            })),
            Err(e) => Err(Error::Tokenize(e.to_string())),
        }
    }

    /// [`sglang_special_into`](Self::sglang_special_into), bounded as
    /// [`encode_bounded`](Self::encode_bounded) (a prepended BOS counts against `cap`).
    pub fn sglang_special_bounded(
        &self,
        text: &str,
        cap: usize,
        limits: &InputLimits,
        out: &mut Vec<u32>,
    ) -> Result<Bounded, Error> {
        match (self.sglang_bos, self.bos_id) {
            (true, Some(bos)) => {
                let r = self.encode_bounded(text, false, cap.saturating_sub(1), limits, out)?;
                out.insert(0, bos);
                Ok(match r {
                    Bounded::Ids { more } => {
                        let more = more || out.len() > cap;
                        out.truncate(cap);
                        Bounded::Ids { more }
                    }
                    over => over,
                })
            }
            _ => self.encode_bounded(text, true, cap, limits, out),
        }
    }

    /// [`completions_into`](Self::completions_into), bounded as
    /// [`encode_bounded`](Self::encode_bounded).
    pub fn completions_bounded(
        &self,
        engine: Engine,
        text: &str,
        cap: usize,
        limits: &InputLimits,
        out: &mut Vec<u32>,
    ) -> Result<Bounded, Error> {
        match engine {
            Engine::Vllm | Engine::Trtllm => self.encode_bounded(text, true, cap, limits, out),
            Engine::Sglang => self.sglang_special_bounded(text, cap, limits, out),
            Engine::Llamacpp => Err(Error::NoChatPath(engine)),
        }
    }

    /// [`chat_into`](Self::chat_into), bounded as [`encode_bounded`](Self::encode_bounded).
    pub fn chat_bounded(
        &self,
        engine: Engine,
        rendered: &str,
        add_special_tokens: bool,
        cap: usize,
        limits: &InputLimits,
        out: &mut Vec<u32>,
    ) -> Result<Bounded, Error> {
        match engine {
            Engine::Vllm | Engine::Trtllm => {
                self.encode_bounded(rendered, add_special_tokens, cap, limits, out)
            }
            Engine::Sglang if self.sglang_chat_plain => {
                self.encode_bounded(rendered, false, cap, limits, out)
            }
            Engine::Sglang => self.sglang_special_bounded(rendered, cap, limits, out),
            Engine::Llamacpp => Err(Error::NoChatPath(engine)),
        }
    }
}

/// What a bounded encode ([`PinnedTokenizer::encode_bounded`]) came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bounded {
    /// The ids asked for are in the output; `more`: the full encoding goes on past them.
    Ids {
        /// Whether the full encoding has more ids than the cap.
        more: bool,
    },
    /// The text crossed a bound; nothing was encoded past it.
    Over(LimitHit),
}
