//! The prefix-hit rule of an engine release, typed from the contract catalog's `prefixHit`
//! entry (`kvprofile-core/data/contracts.yaml`), and the KV-cache geometry an index runs it
//! over.
//!
//! The rules that differ between engines and releases are data: which lookup the engine runs
//! ([`Lookup`]), which group kinds the rule is known for, whether a LoRA request's blocks are
//! told apart in the published hashes, and which cache-hit replays prove the entry. Nothing
//! here reads a version number.

use crate::Error;
use kvprofile_core::deployment::KeyForm;
use kvprofile_core::{Engine, Release};

/// The engine's lookup over its cached blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lookup {
    /// vLLM's `KVCacheManager`: every KV-cache group's manager finds its longest hit (full
    /// attention: the longest chained prefix; sliding window: the rightmost run of blocks that
    /// covers the window), combined by the unitary or hybrid coordinator.
    VllmCoordinator,
    /// SGLang's `RadixCache`: the longest page-aligned prefix.
    SglangRadixPages,
    /// TensorRT-LLM's block reuse: the longest chained prefix of full blocks.
    TrtllmBlockReuse,
}

impl Lookup {
    /// The catalog name.
    pub fn as_str(self) -> &'static str {
        match self {
            Lookup::VllmCoordinator => "vllm-kv-cache-coordinator",
            Lookup::SglangRadixPages => "sglang-radix-pages",
            Lookup::TrtllmBlockReuse => "trtllm-block-reuse",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [
            Lookup::VllmCoordinator,
            Lookup::SglangRadixPages,
            Lookup::TrtllmBlockReuse,
        ]
        .into_iter()
        .find(|l| l.as_str() == s)
    }

    fn engine(self) -> Engine {
        match self {
            Lookup::VllmCoordinator => Engine::Vllm,
            Lookup::SglangRadixPages => Engine::Sglang,
            Lookup::TrtllmBlockReuse => Engine::Trtllm,
        }
    }
}

/// The kind of a KV-cache group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupKind {
    /// Full attention: a hit is a chained prefix of cached blocks.
    FullAttention,
    /// Sliding-window attention over `window` tokens: a hit needs the blocks the window
    /// covers, not the whole prefix.
    SlidingWindow {
        /// The window in tokens (vLLM `sliding_window`).
        window: u32,
    },
}

impl GroupKind {
    /// The catalog / event name (`kv_cache_spec_kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            GroupKind::FullAttention => "full_attention",
            GroupKind::SlidingWindow { .. } => "sliding_window",
        }
    }
}

/// One KV-cache group of the served model: its kind and its block size in tokens. Groups are
/// numbered by their position, as the engine numbers them (vLLM `group_idx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupSpec {
    /// Full attention or sliding window.
    pub kind: GroupKind,
    /// Tokens per block of this group.
    pub block_size: u32,
}

/// How a request that reads no prefix cache or scores its prompt bounds its hit (catalog
/// `prefixHit.promptLogprobs`); [`PromptLogprobsRule::max_cached_tokens`] turns a request's
/// parameters into [`crate::Request::max_cached_tokens`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PromptLogprobsRule {
    /// `skip` (every release but vLLM 0.34): a request whose `skip_reading_prefix_cache` is
    /// true — its default when prompt logprobs are asked — reads no cache; nothing else bounds
    /// the hit (vLLM `Request.get_skip_reading_prefix_cache`, `SamplingParams.__post_init__`).
    Skip,
    /// `cap-at-start` (vLLM 0.34, `Request.get_prefix_cache_hit_limit`): skipping gives 0;
    /// otherwise a request with prompt logprobs may read at most its `prompt_logprob_start`
    /// tokens (0 when unset).
    CapAtStart,
}

/// The request parameters vLLM bounds a prefix hit by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheReadParams {
    /// The request asks for prompt logprobs (`prompt_logprobs` or `prompt_logprob_token_ids`).
    pub prompt_logprobs: bool,
    /// `skip_reading_prefix_cache` as the request sets it (`None`: unset, defaulting to
    /// `prompt_logprobs`).
    pub skip_reading_prefix_cache: Option<bool>,
    /// `prompt_logprob_start` (vLLM 0.34; `None`: unset).
    pub prompt_logprob_start: Option<u32>,
}

impl PromptLogprobsRule {
    /// The catalog name: `skip`, `cap-at-start`.
    pub fn as_str(self) -> &'static str {
        match self {
            PromptLogprobsRule::Skip => "skip",
            PromptLogprobsRule::CapAtStart => "cap-at-start",
        }
    }

    /// The most tokens the engine lets a request with these parameters read from its prefix
    /// cache (`None`: no bound but the rule's `prompt_tokens - 1`).
    pub fn max_cached_tokens(self, p: &CacheReadParams) -> Option<u32> {
        if p.skip_reading_prefix_cache.unwrap_or(p.prompt_logprobs) {
            return Some(0);
        }
        match self {
            PromptLogprobsRule::Skip => None,
            PromptLogprobsRule::CapAtStart => p
                .prompt_logprobs
                .then(|| p.prompt_logprob_start.unwrap_or(0)),
        }
    }
}

/// The typed `prefixHit` entry of one engine release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HitRule {
    /// The catalog release id (`vllm-kv-map-v3-r0.31`).
    pub release_id: String,
    /// The engine.
    pub engine: Engine,
    /// The lookup the engine runs.
    pub lookup: Lookup,
    /// Group kinds the rule is stated for.
    pub sliding_window: bool,
    /// Whether a LoRA request's blocks carry the adapter in the published hashes.
    pub lora_in_hashes: bool,
    /// The cache-hit replays that prove the entry; empty = unproven.
    pub vectors: Vec<String>,
    /// What the deployment does to the keys ([`HitRule::with_key_form`]): plain keys, vLLM
    /// look-ahead keys, SGLang bigram pages. It sets how far behind the prompt's end a hit
    /// stays ([`HitRule::max_hit_tokens`]).
    pub key_form: KeyForm,
    /// How prompt logprobs and `skip_reading_prefix_cache` bound a request's hit (stated from
    /// the engines' code: no replay sends them).
    pub prompt_logprobs: PromptLogprobsRule,
}

impl HitRule {
    /// The rule of a catalog release, or [`Error::Rule`] when it has no `prefixHit` entry or
    /// names what this crate does not know.
    pub fn from_release(r: &Release) -> Result<Self, Error> {
        let bad = |d: String| Error::Rule(format!("{}: {d}", r.id));
        let p = r
            .prefix_hit
            .as_ref()
            .ok_or_else(|| bad("the release has no prefixHit rule".into()))?;
        let lookup =
            Lookup::parse(&p.rule).ok_or_else(|| bad(format!("unknown rule {:?}", p.rule)))?;
        if lookup.engine() != r.engine {
            return Err(bad(format!("{} is not a {} rule", p.rule, r.engine)));
        }
        if p.max_hit != "prompt-minus-one" {
            return Err(bad(format!("unknown maxHit {:?}", p.max_hit)));
        }
        let mut sliding_window = false;
        let mut full = false;
        for g in &p.groups {
            match g.as_str() {
                "full_attention" => full = true,
                "sliding_window" => sliding_window = true,
                other => return Err(bad(format!("unknown group kind {other:?}"))),
            }
        }
        if !full {
            return Err(bad("groups must include full_attention".into()));
        }
        if sliding_window && lookup != Lookup::VllmCoordinator {
            return Err(bad(
                "only vLLM's coordinator has sliding-window groups".into()
            ));
        }
        let prompt_logprobs = match p.prompt_logprobs.as_deref() {
            None | Some("skip") => PromptLogprobsRule::Skip,
            Some("cap-at-start") if lookup == Lookup::VllmCoordinator => {
                PromptLogprobsRule::CapAtStart
            }
            Some(other) => return Err(bad(format!("unknown promptLogprobs {other:?}"))),
        };
        Ok(HitRule {
            prompt_logprobs,
            release_id: r.id.clone(),
            engine: r.engine,
            lookup,
            sliding_window,
            lora_in_hashes: p.lora_in_hashes,
            vectors: p.vectors.clone(),
            key_form: KeyForm::Plain,
        })
    }

    /// The rule under a deployment's key form
    /// (`kvprofile_core::deployment::Keying::key_form`), proven by `vectors` (the replays of
    /// that deployment, `Keying::key_form_vectors`). Look-ahead keys exist only under vLLM's
    /// coordinator over one full-attention group, bigram pages only under SGLang's radix
    /// lookup; anything else is [`Error::Rule`].
    pub fn with_key_form(mut self, form: KeyForm, vectors: &[String]) -> Result<Self, Error> {
        let ok = match form {
            KeyForm::Plain => true,
            KeyForm::Lookahead(_) => self.lookup == Lookup::VllmCoordinator,
            KeyForm::Bigram => self.lookup == Lookup::SglangRadixPages,
        };
        if !ok {
            return Err(Error::Rule(format!(
                "{}: {} keys are not {}'s",
                self.release_id,
                form.name(),
                self.lookup.as_str()
            )));
        }
        if form != KeyForm::Plain {
            self.vectors = vectors.to_vec();
        }
        self.key_form = form;
        Ok(self)
    }

    /// Tokens a hit may cover at most for a prompt of `prompt_tokens` tokens: every token
    /// but the last, and under look-ahead keys every token but the last `L`, under bigram
    /// pages every token but the last two ([`KeyForm::hit_offset`]).
    pub fn max_hit_tokens(&self, prompt_tokens: usize) -> usize {
        prompt_tokens.saturating_sub(self.key_form.hit_offset())
    }

    /// The rule of a release id of the built-in catalog.
    pub fn for_release_id(id: &str) -> Result<Self, Error> {
        let cat =
            kvprofile_core::contracts::builtin().map_err(|e| Error::Catalog(e.to_string()))?;
        let r = cat
            .release(id)
            .ok_or_else(|| Error::Rule(format!("{id:?} is not a release of the catalog")))?;
        Self::from_release(r)
    }

    /// The rule of an engine version of the built-in catalog (`UNKNOWN_ENGINE_VERSION` for a
    /// version no release lists, as everywhere in kvexact).
    pub fn for_version(engine: Engine, version: &str) -> Result<Self, Error> {
        let cat =
            kvprofile_core::contracts::builtin().map_err(|e| Error::Catalog(e.to_string()))?;
        let r = cat
            .resolve_release(engine, version)
            .map_err(|e| Error::Rule(e.to_string()))?;
        Self::from_release(r)
    }

    /// The rule of a deployment resolved against a release of the built-in catalog
    /// (`kvprofile_core::deployment::Deployment::resolve`): the release's rule under the
    /// deployment's key form.
    pub fn for_keying(k: &kvprofile_core::deployment::Keying) -> Result<Self, Error> {
        let mut r =
            Self::for_release_id(&k.release_id)?.with_key_form(k.key_form, &k.key_form_vectors)?;
        // An SGLang event namespace keeps each adapter's pages apart in the events.
        r.lora_in_hashes |= k.adapters_in_keys;
        Ok(r)
    }

    /// Whether a cache-hit replay of this release proves the rule.
    pub fn proven(&self) -> bool {
        !self.vectors.is_empty()
    }

    /// Checks the served model's KV-cache groups against the rule: at least one group, the
    /// first full attention, sliding-window groups only where the rule states them, and one
    /// block size for every group (the replays prove no other geometry).
    pub fn check_groups(&self, hash_block_size: u32, groups: &[GroupSpec]) -> Result<(), Error> {
        let bad = |d: &str| Err(Error::Rule(format!("{}: {d}", self.release_id)));
        if groups.is_empty() {
            return bad("at least one KV-cache group is needed");
        }
        if groups.len() > MAX_GROUPS {
            return bad("more KV-cache groups than the index holds (8)");
        }
        if !groups.iter().any(|g| g.kind == GroupKind::FullAttention) {
            return bad("a model without a full-attention group is not covered");
        }
        for g in groups {
            if g.block_size != hash_block_size {
                return bad(
                    "groups with a block size other than the hash block size are not proven",
                );
            }
            if let GroupKind::SlidingWindow { window } = g.kind {
                if !self.sliding_window {
                    return bad("sliding-window groups are not stated for this release");
                }
                if window == 0 {
                    return bad("a sliding window of 0 tokens");
                }
            }
        }
        if groups.len() > 1 && self.lookup != Lookup::VllmCoordinator {
            return bad("several KV-cache groups exist only under vLLM's coordinator");
        }
        if groups.len() > 1 && self.key_form != KeyForm::Plain {
            return bad("look-ahead keys over several KV-cache groups are not proven");
        }
        Ok(())
    }
}

/// The most KV-cache groups an index holds.
pub const MAX_GROUPS: usize = 8;
