//! A request's keys in, the engines' cached-token counts out.

/// A request as the index sees it: its block keys (computed by `kvhash` with the request's
/// LoRA and `cache_salt`, exactly as the engine keys it) and its prompt length.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The chain hashes of the prompt's full blocks (at the index's block size), in the
    /// engine's event integer form. At least every block a hit may reach must be given
    /// (`(prompt_tokens - 1) / block_size`); more than the prompt's full blocks is refused.
    pub block_hashes: &'a [u64],
    /// Prompt tokens, at most [`MAX_PROMPT_TOKENS`]. (A LoRA adapter or `cache_salt` is in the
    /// hashes where the release's events show it; where they do not, the endpoint's
    /// predictions are `unknown` whatever the request names: see
    /// [`UnknownReason::LoraNotInEvents`].)
    pub prompt_tokens: usize,
    /// The most tokens the engine lets this request read from its prefix cache, on top of
    /// the rule's `prompt_tokens - 1`; `None`: no other bound. `Some(0)`: the request skips
    /// the cache (no hit). Derived from the request by the release's
    /// [`crate::PromptLogprobsRule`] (catalog `prefixHit.promptLogprobs`): a vLLM request with
    /// prompt logprobs skips the cache by default (`Some(0)`); with skipping turned off, 0.33
    /// reads the whole prefix (`None`) and 0.34 caps it at its `prompt_logprob_start`
    /// (`Some(start)`, 0 when unset).
    pub max_cached_tokens: Option<u32>,
}

impl Request<'_> {
    /// The most prompt tokens a hit may cover: `prompt_tokens - 1`, bounded by
    /// [`Request::max_cached_tokens`] (vLLM `Request.get_max_cache_hit_length`).
    pub fn max_hit_tokens(&self) -> usize {
        let rule = crate::lookup::max_hit_tokens(self.prompt_tokens);
        match self.max_cached_tokens {
            Some(cap) => rule.min(cap as usize),
            None => rule,
        }
    }

    /// Whether the request reads nothing from the prefix cache ([`Request::max_cached_tokens`]
    /// is `Some(0)`).
    pub fn skips_cache(&self) -> bool {
        self.max_cached_tokens == Some(0)
    }
}

/// The longest prompt a request may name: counts of tokens (the prompt's, a prediction's) are
/// 32-bit, which keeps a prediction at 24 bytes (writing the answers is about a quarter of a
/// wide index's prediction time). A longer one is refused ([`crate::Error::Request`]).
pub const MAX_PROMPT_TOKENS: usize = u32::MAX as usize;

/// Why a slot's count cannot be known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnknownReason {
    /// The stream has not shown a point where the engine's cache was known (joined midway),
    /// or the endpoint was removed while the prediction was under way (the index no longer
    /// follows its stream).
    Unsynced,
    /// Batches were lost; a replay was asked for and has not caught up yet.
    Replaying,
    /// Batches were lost and cannot be replayed (no replay buffer, or a rejected batch).
    OutOfStep,
    /// The stream stored more than the engine's pool can hold: removals were lost.
    Overflow,
    /// Adapters are loaded and the release's events do not tell adapter blocks from base
    /// blocks (`loraInHashes: false`).
    LoraNotInEvents,
    /// The caller said the stream was lost ([`crate::Index::mark_lost`]: its subscription
    /// died, its queue dropped batches): unknown until the next batch's number shows what
    /// was lost.
    StreamLost,
}

impl UnknownReason {
    /// Stable lower-case name (C ABI, JSON, Prometheus labels).
    pub fn as_str(self) -> &'static str {
        match self {
            UnknownReason::Unsynced => "unsynced",
            UnknownReason::Replaying => "replaying",
            UnknownReason::OutOfStep => "out_of_step",
            UnknownReason::Overflow => "overflow",
            UnknownReason::LoraNotInEvents => "lora_not_in_events",
            UnknownReason::StreamLost => "stream_lost",
        }
    }

    /// Whether the release's catalog entry explains the reason (it follows from what the
    /// release's events show, not from a fault of the stream).
    pub fn explained_by_catalog(self) -> bool {
        matches!(self, UnknownReason::LoraNotInEvents)
    }
}

/// A slot's prediction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The engine will report `tokens` cached tokens (its GPU prefix-cache hit).
    Cached {
        /// Cached tokens the engine reports.
        tokens: u32,
        /// Further tokens of the prompt held right after the GPU hit, the first of them in
        /// another medium (CPU offloading, HiCache, TensorRT-LLM's secondary level), which a
        /// connector may load: the chained blocks from the GPU hit on that some medium holds.
        /// Stated, not proven by a replay; `None` where the rule does not say (several
        /// KV-cache groups). Never part of `tokens`.
        other_media_tokens: Option<u32>,
        /// A cache-hit replay of the release proves the rule.
        proven: bool,
    },
    /// The index cannot know.
    Unknown(UnknownReason),
}

impl Outcome {
    /// The cached tokens when known.
    pub fn tokens(&self) -> Option<u64> {
        match self {
            Outcome::Cached { tokens, .. } => Some(u64::from(*tokens)),
            Outcome::Unknown(_) => None,
        }
    }
}

/// One slot's prediction for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prediction {
    /// The endpoint.
    pub endpoint: crate::EndpointId,
    /// The data-parallel rank.
    pub rank: u32,
    /// The count or why it is unknown.
    pub outcome: Outcome,
}
