//! What a [`super::Verifier`] is built with: the verdict policy and the configuration (map
//! capacity, engine release, hashing parameters, predictions).

use super::map;
use super::PredictionConfig;
use kvprofile_core::HashAlgorithm;
use std::collections::BTreeMap;

/// Bytes the map of a verifier with `capacity` entries takes.
pub fn map_bytes(capacity: usize) -> usize {
    map::bytes_for(capacity)
}

/// When mismatches make a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriftPolicy {
    /// Mismatched blocks that make the verdict `drift` (at least 1).
    pub mismatches: u32,
    /// … when they fall within this many consecutive stored blocks.
    pub window_blocks: u64,
}

impl Default for DriftPolicy {
    /// 3 mismatches within 4096 stored blocks.
    fn default() -> Self {
        DriftPolicy {
            mismatches: 3,
            window_blocks: 4096,
        }
    }
}

/// How one endpoint's stream is verified: the rule's hashing settings and the verifier's
/// bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftConfig {
    /// The rule's hash algorithm (`None`: the contract's default; vLLM only).
    pub algo: Option<HashAlgorithm>,
    /// The rule's `kvBlockSize`.
    pub block_size: usize,
    /// vLLM: the engine's `PYTHONHASHSEED` (the none-hash seed pair), `None` when unset.
    pub hash_seed: Option<String>,
    /// vLLM: the LoRA adapters the rule declares, name → the path the server registered
    /// (`/v1/models` `root`; K3 releases hash it in every LoRA block's key). Blocks keyed
    /// with an adapter not listed here are [`MismatchKind::Keys`](super::MismatchKind::Keys) evidence under every
    /// release.
    pub lora_paths: BTreeMap<String, String>,
    /// SGLang: the deployment keys bigram pages (EAGLE speculative decoding,
    /// `KeyForm::Bigram`): events carry token pairs, re-derived page by page. Off: such
    /// events are unverifiable (`eagle_bigrams`).
    pub bigram_pages: bool,
    /// SGLang: the KV-event namespace of the deployment's event format: pages of a declared
    /// adapter (`lora_name`, its path in [`DriftConfig::lora_paths`]) and, where the format
    /// takes it, of a salt are re-derived under the namespace seed. `None`: such pages are
    /// re-derived as page hashes (adapter pages unverifiable).
    pub event_namespace: Option<kvprofile_core::deployment::EventNamespace>,
    /// Entries of the hash → digest map (at least 1).
    pub map_capacity: usize,
    /// When mismatches make a verdict.
    pub policy: DriftPolicy,
    /// Track predicted hashes ([`Verifier::predict`](super::Verifier::predict)).
    pub predictions: Option<PredictionConfig>,
}

impl DriftConfig {
    /// The configuration of a deployment's endpoint: its block size, algorithm, seed, the
    /// adapters it serves (name → path) and whether it keys bigram pages; the other fields
    /// as [`DriftConfig::new`]. vLLM look-ahead blocks are re-derived from the
    /// `lookahead_token_ids` each event carries, whatever the deployment says.
    pub fn for_keying(k: &kvprofile_core::deployment::Keying) -> DriftConfig {
        let mut c = DriftConfig::new(k.block_size as usize);
        c.algo = Some(k.hash_algorithm);
        c.hash_seed = k.hash_seed.clone();
        c.lora_paths = k
            .adapters
            .iter()
            .map(|a| (a.name.clone(), a.path.clone()))
            .collect();
        c.bigram_pages = k.key_form == kvprofile_core::deployment::KeyForm::Bigram;
        c.event_namespace = k.event_namespace;
        c
    }

    /// Block size `block_size`, seed `"0"`, the contract's default algorithm, no LoRA paths,
    /// 65 536 map entries, the default policy, no prediction tracking.
    pub fn new(block_size: usize) -> DriftConfig {
        DriftConfig {
            algo: None,
            block_size,
            hash_seed: Some("0".into()),
            lora_paths: BTreeMap::new(),
            bigram_pages: false,
            event_namespace: None,
            map_capacity: 1 << 16,
            policy: DriftPolicy::default(),
            predictions: None,
        }
    }
}
