//! Deployments: how an endpoint's engine was launched, as far as it changes the block keys
//! the engine computes or the prefix hits it reports (docs/contracts/gateway-integration.md
//! §9).
//!
//! Operators write a [`Deployment`] where they already describe the engine (the registry's
//! engine manifest, `deployment:`); gateways pass the same object through the C ABI and Go.
//! [`Deployment::resolve`] checks it against one catalog [`Release`] and gives the
//! [`Keying`] every consumer builds from (the hasher, the encoder's adapter names, the index's
//! hit rule): one value, so the three never disagree. A field the release cannot honour is
//! refused with the option named ([`crate::Error::DeploymentUnsupported`]); an unknown field
//! is a schema error ([`DocKind::Deployment`]).
//!
//! Which speculative-decoding methods change the keys, and how, is catalog data
//! (`releases[].deployment.speculative`, proven by cache-hit replays of that deployment); the
//! rules named there are implemented once, here for their numbers (look-ahead tokens, the
//! hit offset) and in `kvhash` for the hashing.

use crate::engine::{Engine, HashAlgorithm};
use crate::error::{DocKind, Error, Result};
pub use crate::release_deployment::{
    DeploymentRules, SaltCheck, SaltRules, SpeculativeRule, MAX_BLOCK_SIZE, RULE_SGLANG_BIGRAM,
    RULE_VLLM_LOOKAHEAD,
};
use crate::releases::Release;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The most LoRA adapters one deployment may declare.
pub const MAX_ADAPTERS: usize = 4096;
/// The longest adapter name or path, in bytes.
pub const MAX_ADAPTER_BYTES: usize = 4096;
/// The largest deployment document [`Deployment::parse`] reads, in bytes.
pub const MAX_DOC_BYTES: usize = 1 << 20;
/// The most speculative tokens a deployment may declare.
pub const MAX_SPECULATIVE_TOKENS: u32 = 64;

/// How an engine was launched, as far as it changes keys or hits. Every field is optional:
/// an absent field is the release's default (or, where the release has none, refused when a
/// consumer needs it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Deployment {
    /// Tokens per KV block: vLLM `--block-size`, SGLang `--page-size`, TensorRT-LLM
    /// `tokens_per_block`. Absent: the release's default (`hash.defaultBlockSize` in the
    /// catalog: vLLM 16 up to 0.33, 64 from 0.34).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u32>,
    /// vLLM `--prefix-caching-hash-algo`. Absent: the release's default algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_algorithm: Option<HashAlgorithm>,
    /// vLLM: the engine's `PYTHONHASHSEED`, byte for byte (NONE_HASH, docs/contracts/vllm.md
    /// §2). Absent: unset. Refused for other engines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_seed: Option<String>,
    /// Speculative decoding, when the engine runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<Speculative>,
    /// The LoRA adapters the engine serves (vLLM `--lora-modules name=path`, SGLang
    /// `--lora-paths name=path`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lora_adapters: Vec<LoraAdapter>,
    /// SGLang `--kv-events-config` `format` (absent: the release's default format).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_events_format: Option<String>,
}

/// Speculative decoding as the engine was launched with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Speculative {
    /// The method as the engine spells it: vLLM `speculative_config.method` (`eagle`,
    /// `eagle3`, `mtp`, …), SGLang `--speculative-algorithm` (`EAGLE`, `EAGLE3`, `NEXTN`,
    /// `FROZEN_KV_MTP`, …).
    pub method: String,
    /// vLLM `num_speculative_tokens`; SGLang `--speculative-num-draft-tokens`. At least 1.
    pub num_speculative_tokens: u32,
    /// vLLM `mtp`: the MTP modules the drafter uses (the draft model's
    /// `num_nextn_predict_layers`, `n_predict` from 0.34). Absent: 1 (single-module MTP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtp_modules: Option<u32>,
    /// vLLM `disable_eagle_block_drop`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disable_eagle_block_drop: bool,
    /// vLLM `disable_lookahead_block_hashes`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disable_lookahead_block_hashes: bool,
}

/// One LoRA adapter the engine serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LoraAdapter {
    /// The name clients send (vLLM: the request's `model`; SGLang: `model` = `base:name` or
    /// `lora_path` = `name`).
    pub name: String,
    /// The path the engine was given for it (`--lora-modules name=path`, `--lora-paths
    /// name=path`): vLLM ≥ 0.31 keys it into every block hash.
    pub path: String,
}

/// What a deployment changes in the keys, resolved against one release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyForm {
    /// The release's plain block keys.
    Plain,
    /// vLLM look-ahead hashing: each block hash also covers the next `L` tokens
    /// (`num_hash_lookahead_tokens`).
    Lookahead(u32),
    /// SGLang EAGLE: pages of token bigrams `(t_j, t_j+1)`.
    Bigram,
}

impl KeyForm {
    /// How many tokens a prefix hit stays behind the prompt's end at least: 1 (the last
    /// prompt token is always computed), `L` for look-ahead keys (a block is keyed only
    /// once its next `L` tokens exist), 2 for bigram pages (`n` tokens make `n − 1`
    /// bigrams, of which the last is always computed).
    pub fn hit_offset(self) -> usize {
        match self {
            KeyForm::Plain => 1,
            KeyForm::Lookahead(l) => (l as usize).max(1),
            KeyForm::Bigram => 2,
        }
    }

    /// A short name (`plain`, `lookahead-3`, `bigram`).
    pub fn name(self) -> String {
        match self {
            KeyForm::Plain => "plain".into(),
            KeyForm::Lookahead(l) => format!("lookahead-{l}"),
            KeyForm::Bigram => "bigram".into(),
        }
    }
}

/// A deployment resolved against one release: everything the hasher, the encoder and the
/// index build from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keying {
    /// The catalog release id.
    pub release_id: String,
    /// The engine.
    pub engine: Engine,
    /// Tokens per block (page).
    pub block_size: u32,
    /// The block-hash algorithm.
    pub hash_algorithm: HashAlgorithm,
    /// vLLM `PYTHONHASHSEED` (`None` = unset).
    pub hash_seed: Option<String>,
    /// What speculative decoding does to the keys.
    pub key_form: KeyForm,
    /// The cache-hit replays that prove `key_form` for the release (empty for plain keys,
    /// which the release's own replays prove).
    pub key_form_vectors: Vec<String>,
    /// The adapters served, in the order declared.
    pub adapters: Vec<LoraAdapter>,
    /// Whether the release's events show an adapter's blocks apart from the base model's
    /// (catalog `prefixHit.loraInHashes`); where not, an endpoint serving adapters is
    /// predicted `unknown`.
    pub adapters_in_keys: bool,
    /// The `cache_salt` values the release keys (`None`: salted requests are refused).
    pub cache_salt: Option<SaltRules>,
    /// SGLang: the KV-event namespace of the deployment's event format (`None`: published
    /// hashes are page hashes).
    pub event_namespace: Option<EventNamespace>,
}

/// Which requests an SGLang event format publishes under a namespace seed
/// (`kvhash::sglang_namespace`; catalog `eventNamespaces`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventNamespace {
    /// A request on a registered adapter, seeded by its radix extra key (the adapter's id)
    /// alone (SGLang 0.5.23's default format).
    RegisteredLora,
    /// Any request with an adapter or a salt, seeded by both (the `dynamo` format).
    ExtraKeyAndSalt,
}

impl EventNamespace {
    /// The catalog's name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventNamespace::RegisteredLora => crate::release_deployment::NAMESPACE_REGISTERED_LORA,
            EventNamespace::ExtraKeyAndSalt => {
                crate::release_deployment::NAMESPACE_EXTRA_KEY_AND_SALT
            }
        }
    }
}

impl Keying {
    /// The adapter a client names, if the deployment serves it.
    pub fn adapter(&self, name: &str) -> Option<&LoraAdapter> {
        self.adapters.iter().find(|a| a.name == name)
    }
}

impl Deployment {
    /// Strict parse of a deployment document (YAML or JSON), as the C ABI and the CLI take
    /// it; `path` names it in errors.
    pub fn parse(bytes: &[u8], path: &str) -> Result<Self> {
        if bytes.len() > MAX_DOC_BYTES {
            return Err(Error::TooLarge {
                path: path.to_string(),
                size: bytes.len() as u64,
                cap: MAX_DOC_BYTES as u64,
            });
        }
        let d: Deployment = serde_yaml::from_slice(bytes)
            .map_err(|e| Error::schema(DocKind::Deployment, path, e))?;
        d.check_shape(path)?;
        Ok(d)
    }

    /// Checks what does not depend on the release: bounds, unique adapter names.
    pub fn check_shape(&self, path: &str) -> Result<()> {
        let bad = |f: &str, d: String| Err(Error::invalid(DocKind::Deployment, path, f, d));
        if let Some(b) = self.block_size {
            if b == 0 || b > MAX_BLOCK_SIZE {
                return bad("blockSize", format!("{b}: must be 1 to {MAX_BLOCK_SIZE}"));
            }
        }
        if let Some(s) = &self.speculative {
            if s.method.is_empty() || s.method.len() > 64 {
                return bad("speculative.method", "must be 1 to 64 bytes".into());
            }
            if s.num_speculative_tokens == 0 || s.num_speculative_tokens > MAX_SPECULATIVE_TOKENS {
                return bad(
                    "speculative.numSpeculativeTokens",
                    format!("must be 1 to {MAX_SPECULATIVE_TOKENS}"),
                );
            }
            if s.mtp_modules == Some(0) || s.mtp_modules.is_some_and(|m| m > 64) {
                return bad("speculative.mtpModules", "must be 1 to 64".into());
            }
        }
        if self.lora_adapters.len() > MAX_ADAPTERS {
            return bad("loraAdapters", format!("more than {MAX_ADAPTERS} adapters"));
        }
        let mut names = BTreeSet::new();
        for (i, a) in self.lora_adapters.iter().enumerate() {
            let f = format!("loraAdapters[{i}]");
            if a.name.is_empty() || a.name.len() > MAX_ADAPTER_BYTES || a.name.contains('\0') {
                return bad(&f, "name must be 1 to 4096 bytes without NUL".into());
            }
            if a.path.len() > MAX_ADAPTER_BYTES || a.path.contains('\0') {
                return bad(&f, "path must be at most 4096 bytes without NUL".into());
            }
            if !names.insert(a.name.as_str()) {
                return bad(&f, format!("adapter {:?} declared twice", a.name));
            }
        }
        Ok(())
    }

    /// Resolves the deployment against `release`: the keys and hit rule it implies, or
    /// [`Error::DeploymentUnsupported`] naming the first option the release cannot honour.
    pub fn resolve(&self, release: &Release, path: &str) -> Result<Keying> {
        self.check_shape(path)?;
        let refuse = |option: &str, detail: String| {
            Err(Error::DeploymentUnsupported {
                path: path.to_string(),
                release: release.id.clone(),
                option: option.to_string(),
                detail,
            })
        };
        let Some(hash) = &release.hash else {
            return refuse(
                "engineVersion",
                format!("{} has no KV plane to key", release.id),
            );
        };
        let rules = release.deployment.clone().unwrap_or_default();
        // Absent: the release's default (catalog `hash.defaultBlockSize`: vLLM's
        // CacheConfig default, 64 from 0.34).
        let block_size = self.block_size.unwrap_or(hash.default_block_size);
        if block_size == 0 || block_size > MAX_BLOCK_SIZE {
            return refuse("blockSize", format!("{block_size} out of range"));
        }
        let hash_algorithm = self.hash_algorithm.unwrap_or(hash.default_algorithm);
        if !hash.algorithms.contains(&hash_algorithm) {
            return refuse(
                "hashAlgorithm",
                format!(
                    "{} is not an algorithm of {}",
                    hash_algorithm.as_str(),
                    release.id
                ),
            );
        }
        if self.hash_seed.is_some() && release.engine != Engine::Vllm {
            return refuse("hashSeed", format!("{} keys no hash seed", release.engine));
        }
        if let Some(f) = &self.kv_events_format {
            let known = f == "default" || rules.kv_events_formats.iter().any(|k| k == f);
            if release.engine != Engine::Sglang {
                return refuse(
                    "kvEventsFormat",
                    format!("{} has no event formats to choose", release.engine),
                );
            }
            if !known {
                return refuse(
                    "kvEventsFormat",
                    format!(
                        "format {f:?}: no vectors prove its events for {}",
                        release.id
                    ),
                );
            }
        }
        let (key_form, key_form_vectors) = match &self.speculative {
            None => (KeyForm::Plain, Vec::new()),
            Some(s) => {
                let Some(rule) = rules
                    .speculative
                    .iter()
                    .find(|r| r.methods.contains(&s.method))
                else {
                    return refuse(
                        "speculative.method",
                        format!(
                            "{:?}: no vectors prove the keys and hits of {} under it{}",
                            s.method,
                            release.id,
                            if rules.speculative.is_empty() {
                                String::new()
                            } else {
                                format!(
                                    " (proven: {})",
                                    rules
                                        .speculative
                                        .iter()
                                        .flat_map(|r| r.methods.iter().map(String::as_str))
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                )
                            }
                        ),
                    );
                };
                let form = match rule.keys.as_str() {
                    RULE_VLLM_LOOKAHEAD => {
                        if s.disable_eagle_block_drop {
                            return refuse(
                                "speculative.disableEagleBlockDrop",
                                "no vectors prove keys or hits with the block drop disabled".into(),
                            );
                        }
                        if s.disable_lookahead_block_hashes {
                            return refuse(
                                "speculative.disableLookaheadBlockHashes",
                                "the EAGLE last-block drop without look-ahead hashes is not \
                                 proven by any vector"
                                    .into(),
                            );
                        }
                        let modules = s.mtp_modules.unwrap_or(1);
                        let multi = s.method == "mtp" && modules.min(s.num_speculative_tokens) > 1;
                        KeyForm::Lookahead(if multi { s.num_speculative_tokens } else { 1 })
                    }
                    RULE_SGLANG_BIGRAM => {
                        if s.mtp_modules.is_some()
                            || s.disable_eagle_block_drop
                            || s.disable_lookahead_block_hashes
                        {
                            return refuse(
                                "speculative",
                                "mtpModules and the block-drop options are vLLM's".into(),
                            );
                        }
                        KeyForm::Bigram
                    }
                    other => return refuse("speculative", format!("unknown key rule {other:?}")),
                };
                (form, rule.vectors.clone())
            }
        };
        if let KeyForm::Lookahead(l) = key_form {
            if l as u64 > u64::from(block_size) {
                return refuse(
                    "speculative.numSpeculativeTokens",
                    format!(
                        "multi-module MTP with prefix caching needs blockSize ({block_size}) \
                         >= the look-ahead ({l}); the engine refuses to start"
                    ),
                );
            }
        }
        if release.engine == Engine::Vllm
            && !self.lora_adapters.is_empty()
            && hash.extra_keys.as_deref() == Some("K3")
        {
            if let Some(a) = self.lora_adapters.iter().find(|a| a.path.is_empty()) {
                return refuse(
                    "loraAdapters",
                    format!(
                        "adapter {:?} has no path: {} keys the adapter's path into every \
                         block hash",
                        a.name, release.id
                    ),
                );
            }
        }
        let format = self.kv_events_format.as_deref().unwrap_or("default");
        let event_namespace = rules
            .event_namespaces
            .iter()
            .find(|r| r.format == format)
            .map(|r| match r.seed.as_str() {
                crate::release_deployment::NAMESPACE_REGISTERED_LORA => {
                    EventNamespace::RegisteredLora
                }
                _ => EventNamespace::ExtraKeyAndSalt,
            });
        if event_namespace.is_some() {
            if let Some(a) = self.lora_adapters.iter().find(|a| a.path.is_empty()) {
                return refuse(
                    "loraAdapters",
                    format!(
                        "adapter {:?} has no path: {} namespaces an adapter's events by the id \
                         it derives from its name and path (--lora-paths name=path)",
                        a.name, release.id
                    ),
                );
            }
        }
        // A namespace keeps each adapter's pages apart in the events.
        let adapters_in_keys = event_namespace.is_some()
            || release
                .prefix_hit
                .as_ref()
                .is_some_and(|p| p.lora_in_hashes);
        Ok(Keying {
            release_id: release.id.clone(),
            engine: release.engine,
            block_size,
            hash_algorithm,
            hash_seed: self.hash_seed.clone(),
            key_form,
            key_form_vectors,
            adapters: self.lora_adapters.clone(),
            adapters_in_keys,
            cache_salt: rules.cache_salt.clone(),
            event_namespace,
        })
    }
}
