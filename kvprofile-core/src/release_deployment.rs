//! The deployment rules of a catalog release (`releases[].deployment` in
//! `data/contracts.yaml`): which launch options the release's keys and hits are known for —
//! the speculative-decoding methods and the key rule each implies
//! (with the replays that prove it), the `cache_salt` values its request path accepts, the
//! SGLang event formats. Read by [`crate::deployment::Deployment::resolve`].

use crate::engine::Engine;
use crate::error::{DocKind, Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The largest block (page) size a deployment may declare.
pub const MAX_BLOCK_SIZE: u32 = 1 << 16;

/// The per-release deployment rules of the catalog (`releases[].deployment`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeploymentRules {
    /// Speculative-decoding methods whose keys and hits are known for the release.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub speculative: Vec<SpeculativeRule>,
    /// SGLang KV-event formats (`--kv-events-config` `format`) whose events the release's
    /// schema decodes; absent: only the default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kv_events_formats: Vec<String>,
    /// SGLang KV-event namespaces per event format: which requests' published hashes are
    /// re-hashed under a seed, and from what (`kvhash::sglang_namespace`); a format not
    /// listed publishes page hashes as computed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event_namespaces: Vec<EventNamespaceRule>,
    /// Which `cache_salt` values the release's serving path accepts and keys; absent: the
    /// release's salt handling on the request path is not known, and salted requests stay
    /// refused on the gateway's path (`cache_salt`, strict rule 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_salt: Option<SaltRules>,
}

/// The `cache_salt` values an engine release accepts on its request path
/// (`releases[].deployment.cacheSalt`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SaltRules {
    /// What the empty string does: `rejected` (the engine answers 400), `absent` (the
    /// request is unsalted) or `unknown` (no vector shows it: kvexact refuses to key it).
    pub empty: String,
    /// The longest salt accepted, in characters (Unicode scalar values); absent: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_chars: Option<u32>,
    /// Characters the engine rejects in a salt.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub forbidden: String,
    /// Vectors (files under `testdata/vectors/`) whose salted cases prove the salt's keys
    /// for the release.
    pub vectors: Vec<String>,
}

/// Why a request's `cache_salt` cannot be keyed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaltCheck {
    /// The salt is keyed as given.
    Salted,
    /// The engine treats the request as unsalted (SGLang's empty salt).
    Unsalted,
    /// The engine rejects the request (HTTP 400), with the reason it gives.
    Rejected(String),
    /// What the engine does with this salt is not known: kvexact refuses to key it.
    Unknown(String),
}

impl SaltRules {
    /// What the release does with `salt`.
    pub fn check(&self, salt: &str) -> SaltCheck {
        if salt.is_empty() {
            return match self.empty.as_str() {
                "absent" => SaltCheck::Unsalted,
                "rejected" => {
                    SaltCheck::Rejected("cache_salt must be a non-empty string if provided".into())
                }
                _ => SaltCheck::Unknown("no vector shows how the engine keys an empty salt".into()),
            };
        }
        if let Some(max) = self.max_chars {
            if salt.chars().count() > max as usize {
                return SaltCheck::Rejected(format!("cache_salt must be at most {max} characters"));
            }
        }
        if let Some(c) = salt.chars().find(|c| self.forbidden.contains(*c)) {
            return SaltCheck::Rejected(format!("cache_salt must not contain {c:?}"));
        }
        SaltCheck::Salted
    }
}

/// Speculative-decoding methods that key blocks by one rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SpeculativeRule {
    /// The rule: `vllm-lookahead` (each block hash also covers the next L tokens, L = 1, or
    /// the number of speculative tokens for multi-module MTP; no hit past ⌊(n − L)/B⌋
    /// blocks) or `sglang-bigram` (the radix tree keys token bigrams; no hit past
    /// ⌊(n − 2)/P⌋ pages).
    pub keys: String,
    /// The methods, spelled as the engine spells them.
    pub methods: Vec<String>,
    /// Cache-hit replays of such a deployment that prove the rule for this release.
    pub vectors: Vec<String>,
}

/// One SGLang event format's namespace rule (`releases[].deployment.eventNamespaces[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EventNamespaceRule {
    /// The `--kv-events-config` format (`default`, or one of `kvEventsFormats`).
    pub format: String,
    /// What the seed is made of: `registered-lora` (a request on a registered adapter: its
    /// radix extra key alone; other requests are not namespaced) or `extra-key-and-salt`
    /// (any request with an extra key or a salt: both).
    pub seed: String,
    /// Vectors from the release's own code that prove the rule.
    pub vectors: Vec<String>,
}

/// The seed rule of a namespace that takes a registered adapter's extra key alone.
pub const NAMESPACE_REGISTERED_LORA: &str = "registered-lora";
/// The seed rule of a namespace that takes the extra key and the salt.
pub const NAMESPACE_EXTRA_KEY_AND_SALT: &str = "extra-key-and-salt";

/// The rule name of vLLM look-ahead hashing.
pub const RULE_VLLM_LOOKAHEAD: &str = "vllm-lookahead";
/// The rule name of SGLang's bigram radix keys.
pub const RULE_SGLANG_BIGRAM: &str = "sglang-bigram";

impl DeploymentRules {
    /// Structural checks of a catalog entry (`field` is the entry's path for errors).
    pub(crate) fn validate(
        &self,
        engine: Engine,
        lookahead: bool,
        path: &str,
        field: &str,
    ) -> Result<()> {
        let bad = |f: String, d: String| Err(Error::invalid(DocKind::ContractCatalog, path, f, d));
        let mut methods = BTreeSet::new();
        for (i, r) in self.speculative.iter().enumerate() {
            let f = format!("{field}.speculative[{i}]");
            let ok = match r.keys.as_str() {
                RULE_VLLM_LOOKAHEAD => engine == Engine::Vllm && lookahead,
                RULE_SGLANG_BIGRAM => engine == Engine::Sglang,
                _ => false,
            };
            if !ok {
                return bad(
                    format!("{f}.keys"),
                    format!("{:?} is not a rule {engine} has here", r.keys),
                );
            }
            if r.methods.is_empty() || r.vectors.is_empty() {
                return bad(f, "methods and vectors must be non-empty".into());
            }
            for m in &r.methods {
                if !methods.insert(m.as_str()) {
                    return bad(format!("{f}.methods"), format!("{m:?} listed twice"));
                }
            }
        }
        if let Some(c) = &self.cache_salt {
            if !matches!(c.empty.as_str(), "rejected" | "absent" | "unknown")
                || c.vectors.is_empty()
            {
                return bad(
                    format!("{field}.cacheSalt"),
                    "empty must be rejected, absent or unknown, and vectors non-empty".into(),
                );
            }
        }
        for (i, r) in self.event_namespaces.iter().enumerate() {
            let f = format!("{field}.eventNamespaces[{i}]");
            let known = r.format == "default" || self.kv_events_formats.contains(&r.format);
            if engine != Engine::Sglang
                || !known
                || !matches!(
                    r.seed.as_str(),
                    NAMESPACE_REGISTERED_LORA | NAMESPACE_EXTRA_KEY_AND_SALT
                )
                || r.vectors.is_empty()
            {
                return bad(
                    f,
                    "an SGLang event format of the release, a seed rule of registered-lora or \
                     extra-key-and-salt, and vectors"
                        .into(),
                );
            }
        }
        if !self.kv_events_formats.is_empty() && engine != Engine::Sglang {
            return bad(
                format!("{field}.kvEventsFormats"),
                "only SGLang has event formats to choose".into(),
            );
        }
        Ok(())
    }
}
