//! Engine releases: the finest entries of the contract catalog.
//!
//! The gateway's contract profiles ([`crate::contracts::ContractProfile`]) name a decoder
//! family and a version range (`vllm-kv-array-v1`: vLLM 0.17–0.23). Inside such a range the
//! engines changed their hashing and event bytes more than once, so kvexact's catalog
//! refines every contract into [`Release`] entries: a list of the exact engine versions
//! that share every rule that varies (NONE_HASH rule, extra-key form, look-ahead hashing,
//! SGLang wide pages, TensorRT-LLM salt variant, event fields, replay framing, chat-path
//! rules), the contract it refines, and the evidence (the vector sets under
//! `testdata/vectors/` that prove it, and how the other versions of the list were checked).
//!
//! [`crate::contracts::ContractCatalog::resolve_release`] maps an engine version to exactly one release, or
//! refuses with [`crate::Error::UnknownEngineVersion`] naming the nearest known releases.
//! There is no family default for a version that was given.
//!
//! Rule values are kept as the stable names their implementing crates define (`kvhash`'s
//! `NoneHashRule` / `ExtraKeyForm` / `Field`, `kvtemplate`'s `ToolSerialization` /
//! `TemplateErrorClass`); `kvprobe::contract` turns a release into those typed rules and
//! checks that every release of the built-in catalog does.

use crate::engine::{Engine, HashAlgorithm};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// One range of engine releases that share every rule kvexact reproduces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Release {
    /// Release id, in the contract id style: `<contract>-r<first version>`.
    pub id: String,
    /// The contract profile (gateway id) this release refines.
    pub contract: String,
    /// The engine.
    pub engine: Engine,
    /// Every engine version (as the engine reports it, without `v`) the entry covers.
    pub versions: Vec<String>,
    /// What proves the rules.
    pub evidence: ReleaseEvidence,
    /// Block-hash rules; absent for an engine without a KV plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<HashRules>,
    /// KV-event rules; absent for an engine without a KV plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<EventRules>,
    /// Chat-path rules, where vectors of the engine's own serving code prove them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<ReleaseChatRules>,
    /// How the release's tokenizer stack loads a model's tokenizer; absent for an engine
    /// without a chat or completions path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<TokenizerRules>,
    /// How the release's prefix cache decides a request's cached tokens (read by `kvindex`);
    /// absent for an engine without a KV plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_hit: Option<PrefixHitRules>,
    /// Deployment options whose keys and hits are known for the release (default block size,
    /// speculative-decoding methods, event formats), read by
    /// `deployment::Deployment::resolve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<crate::release_deployment::DeploymentRules>,
}

/// The prefix-cache hit rule of a release: which lookup the engine runs over its cached
/// blocks to count a request's cached tokens, and what its KV events show of the keys.
///
/// `kvindex` turns the names into its typed rule and refuses a name it does not know. A
/// release whose `vectors` list is empty has its rule stated but not proven by a cache-hit
/// replay of that release: predictions under it are marked unproven.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrefixHitRules {
    /// The lookup: `vllm-kv-cache-coordinator` (vLLM's `KVCacheManager` over its
    /// coordinators), `sglang-radix-pages` (SGLang's `RadixCache` with page alignment),
    /// `trtllm-block-reuse` (TensorRT-LLM's block reuse).
    pub rule: String,
    /// The most prompt tokens a hit may cover: `prompt-minus-one` (the last prompt token is
    /// always computed).
    pub max_hit: String,
    /// KV-cache group kinds the rule is known for (`full_attention`, `sliding_window`).
    pub groups: Vec<String>,
    /// Whether a LoRA request's blocks carry the adapter in the published hashes (vLLM's extra
    /// keys): `false` when the events show base and adapter blocks with the same hashes, so an
    /// endpoint with adapters loaded cannot be predicted from its events.
    pub lora_in_hashes: bool,
    /// Cache-hit replays (`cachehit/*.json` under `testdata/vectors/`) that prove the rule for
    /// this release; empty = stated, unproven.
    #[serde(default)]
    pub vectors: Vec<String>,
    /// vLLM: how a request that reads no prefix cache, or scores its prompt (prompt logprobs),
    /// bounds its hit: `skip` (absent: the request's `skip_reading_prefix_cache`, which
    /// defaults to true when prompt logprobs are asked, skips the cache; nothing else bounds
    /// the hit) or `cap-at-start` (vLLM 0.34 `Request.get_prefix_cache_hit_limit`: skipping
    /// gives 0; otherwise a request with prompt logprobs is capped at its
    /// `prompt_logprob_start`, 0 when unset). `kvindex::PromptLogprobsRule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_logprobs: Option<String>,
}

/// The tokenizer loader of a release (its transformers major version, from the release's
/// own requirements).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TokenizerRules {
    /// The transformers versions the release allows (from its requirements), e.g. `>=5.10.4`.
    pub transformers: String,
    /// Where the added tokens come from (kvtemplate `AddedTokensRule`): `tokenizer-json`
    /// (transformers 4), `tokenizer-config` (transformers 5: `tokenizer_config.json`'s
    /// `added_tokens_decoder` when it has one), or `either` (the release allows both; a
    /// profile whose two files disagree is refused).
    pub added_tokens: String,
}

/// Where a release's rules come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReleaseEvidence {
    /// Vector sets (folders under `testdata/vectors/`) produced by running one of the
    /// listed versions' own code; empty when none exists.
    #[serde(default)]
    pub vectors: Vec<String>,
    /// How the other listed versions were established (code compared release by release),
    /// or what is missing.
    pub note: String,
}

/// Block-hash rules of a release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HashRules {
    /// Algorithms the engine can be configured with.
    pub algorithms: Vec<HashAlgorithm>,
    /// The engine's default (`--prefix-caching-hash-algo` for vLLM).
    pub default_algorithm: HashAlgorithm,
    /// vLLM: NONE_HASH rule (`A`, `B`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub none_hash: Option<String>,
    /// vLLM: extra-key form (`K1`, `K2`, `K3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_keys: Option<String>,
    /// vLLM: look-ahead hashing (`num_hash_lookahead_tokens`) exists.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lookahead: bool,
    /// SGLang: ids ≥ 2^32 hashed as wide pages.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wide_pages: bool,
    /// TensorRT-LLM: the cache-salt value variant (`std_hash_string`, `blake3_salt_id`) or
    /// `unknown` (salted hashes refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_salt: Option<String>,
    /// The block size (tokens per block) kvexact assumes when none is given: the engine's
    /// default where it has one (vLLM `CacheConfig.DEFAULT_BLOCK_SIZE`: 16 up to 0.33, 64
    /// from 0.34; TensorRT-LLM `tokens_per_block` 32), the gateway's `kvBlockSize` default
    /// 16 for SGLang (whose page size is resolved per attention backend and checked against
    /// `/get_server_info` at attest).
    pub default_block_size: u32,
}

/// KV-event rules of a release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EventRules {
    /// Wire family (kvhash `EventFormat` id), e.g. `vllm-kv-map-v2`.
    pub format: String,
    /// msgpack families: `BlockStored` fields in wire order (`name?` = may be absent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_stored: Vec<String>,
    /// msgpack families: `BlockRemoved` fields in wire order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_removed: Vec<String>,
    /// msgpack families: replay-reply framing (`plain`, `topic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<String>,
}

/// Chat-path rules of a release, for the versions whose serving code produced vectors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReleaseChatRules {
    /// The versions of the release these rules are proven for (a subset of its versions).
    pub versions: Vec<String>,
    /// kvtemplate `ToolSerialization` name.
    pub tool_serialization: String,
    /// kvtemplate `TemplateErrorClass` name.
    pub template_error_class: String,
    /// kvtemplate `EmptyTools` name: what an empty `tools` list does (absent: `refused`;
    /// `omitted`: vLLM 0.34 treats it as no tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_tools: Option<String>,
    /// The template vector sets that prove them.
    pub vectors: Vec<String>,
    /// The strict-rule refusal codes (kvtemplate `Refusal` names, docs/contracts/registry.md §9.2) an
    /// encoder for these versions may lift: requests hitting them are then encoded as the
    /// engine's serving path does. Listed only where the vectors above exercise the code and
    /// prove the engine's behaviour; empty (the default) = nothing liftable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub liftable: Vec<String>,
    /// Chat renderers other than the checkpoint's Jinja template, by the model's
    /// `config.json` `model_type` (`gpt_oss: harmony`, docs/contracts/templates.md §13); a
    /// model type not listed renders with its Jinja template. Proven by the
    /// `templates-nonjinja` vectors of these versions.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub renderers: std::collections::BTreeMap<String, String>,
    /// The token-probe route that takes each renderer of [`ReleaseChatRules::renderers`]' path
    /// (`chat-completions`: the chat route with `return_token_ids`; `tokenize`: the tokenize
    /// route), by renderer (docs/contracts/templates.md §13.12). A renderer listed there
    /// must have one: a probe of another path proves nothing. The Jinja template's route is
    /// always the tokenize route.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub probe_routes: std::collections::BTreeMap<String, String>,
}

impl Release {
    /// The versions as a range for display: `0.17.0–0.18.1` (or the one version).
    pub fn range(&self) -> String {
        let mut v: Vec<&String> = self.versions.iter().collect();
        v.sort_by(|a, b| compare_versions(a, b));
        match (v.first(), v.last()) {
            (Some(a), Some(b)) if a != b => format!("{a}–{b}"),
            (Some(a), _) => a.to_string(),
            _ => String::new(),
        }
    }

    /// Whether `version` (leading `v` and a `+local` build label ignored) is one of the
    /// release's versions.
    pub fn covers(&self, version: &str) -> bool {
        let v = normalise(version);
        self.versions.iter().any(|x| normalise(x) == v)
    }

    /// The chat rules, when they are proven for `version`.
    pub fn chat_for(&self, version: &str) -> Option<&ReleaseChatRules> {
        let v = normalise(version);
        self.chat
            .as_ref()
            .filter(|c| c.versions.iter().any(|x| normalise(x) == v))
    }
}

/// `v0.31.0` → `0.31.0`; `0.31.0+cu126` → `0.31.0` (a local build label names a build of the
/// same public release, PEP 440).
pub fn normalise(version: &str) -> &str {
    let v = version.trim();
    let v = v.strip_prefix('v').unwrap_or(v);
    v.split('+').next().unwrap_or(v)
}

/// A sortable form of a version: numeric release segments, then a pre-release rank
/// (`rcN` / `aN` / `bN` sort before the release, `.postN` / `.devN` as written).
fn key(version: &str) -> (Vec<u64>, (u8, u64)) {
    let v = normalise(version);
    let mut nums = Vec::new();
    let mut i = 0;
    loop {
        let tail = v.get(i..).unwrap_or("");
        let digits = tail.len() - tail.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            break;
        }
        nums.push(tail[..digits].parse().unwrap_or(u64::MAX));
        i += digits;
        let after = v.get(i..).unwrap_or("");
        if after.starts_with('.') && after[1..].starts_with(|c: char| c.is_ascii_digit()) {
            i += 1;
        } else {
            break;
        }
    }
    let rest = v.get(i..).unwrap_or("").trim_start_matches('.');
    let num = |s: &str| {
        s.trim_start_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .unwrap_or(0)
    };
    let pre = if rest.is_empty() {
        (3, 0)
    } else if rest.starts_with("dev") {
        (0, num(rest))
    } else if rest.starts_with('a') {
        (1, num(rest))
    } else if rest.starts_with('b') || rest.starts_with("rc") {
        (2, num(rest))
    } else {
        (4, num(rest))
    };
    (nums, pre)
}

/// Orders two version strings (see `key`).
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    key(a).cmp(&key(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_and_normalise() {
        assert_eq!(normalise("v0.31.0+cu126"), "0.31.0");
        assert_eq!(compare_versions("0.9.0", "0.17.0"), Ordering::Less);
        assert_eq!(compare_versions("1.3.0rc24", "1.3.0rc29"), Ordering::Less);
        assert_eq!(compare_versions("1.3.0rc29", "1.3.0"), Ordering::Less);
        assert_eq!(compare_versions("1.2.1", "1.3.0rc24"), Ordering::Less);
        assert_eq!(compare_versions("0.5.23", "0.5.3"), Ordering::Greater);
        assert_eq!(compare_versions("0.31.0", "v0.31.0"), Ordering::Equal);
    }
}
