//! Drift caught in production: every block hash an engine publishes, re-derived from the event
//! stream itself, continuously.
//!
//! The hash challenge (§8.5) proves agreement once, before READY. Afterwards an engine may be
//! upgraded, restarted with another seed or block size, or given a LoRA, while the rule stays
//! bound. Every `BlockStored` event carries its blocks' token ids (and, for vLLM, their
//! untagged extra keys), and every chain is anchored at the root (vLLM's NONE_HASH, SGLang's
//! empty or salt-seeded parent, TensorRT-LLM's 0), so each published hash can be re-derived
//! exactly: a root block from the seed, its tokens and keys; a later block from a parent
//! already re-derived — its 64-bit published form mapped to the full digest the chain goes on
//! with ([`Verifier`] keeps them in a bounded map). A mismatch is direct evidence that the
//! engine no longer computes what its release's contract says.
//!
//! ```
//! use kvprobe::drift::{DriftConfig, Verifier};
//! use kvprobe::{contract, Engine};
//! use kvhash::events::{decode_payload_schema, Limits};
//! let c = contract::resolve(Engine::Vllm, "0.31.0").unwrap();
//! let mut v = Verifier::new(&c, DriftConfig::new(16)).unwrap();
//! // Case `int_stored_prefill_no_parent` of vLLM 0.31's vectors: two plain blocks.
//! # let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
//! #     concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/vectors/vllm/kv_events.json")).unwrap()).unwrap();
//! # let case = doc["cases"].as_array().unwrap().iter().find(|c| c["name"] == "int_stored_prefill_no_parent").unwrap();
//! # let payload = hex::decode(case["payload_hex"].as_str().unwrap()).unwrap();
//! let batch = decode_payload_schema(c.events().unwrap(), &payload, &Limits::default()).unwrap();
//! v.feed_payload(&batch, &payload);
//! assert_eq!((v.counters().blocks_seen, v.counters().matched), (2, 2));
//! assert!(v.verdict().is_none());
//! ```
//!
//! ## What is re-derived, and what is not
//!
//! Never a guess: a block is *re-derived* (and then *matched* or *mismatched*) only when the
//! contract fixes every input of its hash; otherwise it is *unverifiable* with a reason
//! ([`Unverifiable`]). Per engine:
//!
//! * vLLM ([`kvhash::vllm::BlockRehasher`]): the release's algorithm, NONE_HASH rule and
//!   extra-key form. Untagged releases (K1, K2) hash exactly the keys the event publishes; a
//!   tagged release (K3, vLLM ≥ 0.31) hashes `("lora", name, path)` — the path comes from
//!   [`DriftConfig::lora_paths`] (the server's `/v1/models` `root`), the event does not carry
//!   it; an adapter [`DriftConfig::lora_paths`] does not declare is [`MismatchKind::Keys`]
//!   evidence under every release) — and the other keys tagged in vLLM's fixed order (LoRA, multimodal, salt on block 0,
//!   embeddings). A key layout the release cannot produce is evidence
//!   ([`MismatchKind::Keys`]). Look-ahead blocks (0.33) are re-derived from
//!   `lookahead_token_ids` when they carry no other key. An event whose `block_size` is `k` ×
//!   the rule's block size is a hybrid model's group block, identified by its last sub-block's
//!   hash (≥ 0.24; up to 0.23 by the concatenation of its `k` sub-hashes, whose 64-bit form is
//!   the same): its `k` sub-blocks are re-derived in turn (plain blocks only). A block size
//!   that is no multiple is evidence ([`MismatchKind::BlockSize`]).
//! * SGLang ([`kvhash::sglang::SglangChain`]): the page chain, seeded by the event's
//!   `cache_salt` at the root; a page size other than the rule's is evidence. EAGLE bigram
//!   events and events naming a LoRA (0.5.22's `dynamo` format and 0.5.23 namespace their
//!   hashes with a seed the event does not carry) are unverifiable.
//! * TensorRT-LLM ([`kvhash::trtllm::TrtllmHasher`]): chained on the published 64-bit parent,
//!   so no map is needed; salt (release's variant), extra ids and hex multimodal keys are
//!   mixed as the event lists them. A UUID multimodal key, a LoRA id (V1 JSON never carries the
//!   task id) and a salt under a release whose salt variant is unknown are unverifiable. A
//!   block longer than the rule's, or a short (partial) block that is not the last of its
//!   event, is evidence. A LoRA request is invisible in V1 JSON: its blocks mismatch, which is
//!   what they are to a gateway that routes without the adapter's task id.
//!
//! ## The verdict
//!
//! Three values ([`Verdict`], docs/contracts/drift.md §2), [`Verifier::state`]:
//!
//! * `drift`, sticky until [`Verifier::reset_verdict`], with the first offending block as
//!   [`DriftEvidence`] (batch sequence number and index, event index, block index, byte offset
//!   of the event's token ids in the payload for msgpack formats fed with
//!   [`Verifier::feed_payload`], the block's tokens and published extra keys, expected and
//!   published hash, the release used). One mismatched *root* block is enough (nothing but a
//!   different seed, algorithm, extra key or tokenizer makes block 0 differ), and so is one
//!   block of a block size the rule does not allow ([`MismatchKind::BlockSize`], on the
//!   first event) or with extra keys the rule does not declare ([`MismatchKind::Keys`]: an
//!   unknown LoRA adapter among them). Chained mismatches make it after
//!   [`DriftPolicy::mismatches`] of them within the last [`DriftPolicy::window_blocks`]
//!   stored blocks.
//! * `unverifiable` when no stored block was seen, or fewer than half of them were
//!   re-derived: the reasons are counted ([`Counters::unverifiable_by_reason`]). Never
//!   `clean` for a stream the verifier cannot judge.
//! * `clean` otherwise.
//!
//! Blocks chained on a mismatched block are re-derived against the engine's published parent
//! where the wire gives its full digest (vLLM's bytes mode); otherwise they are counted as
//! [`Counters::consequences`] of the mismatch the evidence names, not as unverifiable.
//! [`Verifier::finding`] is the ladder's `hash_drift` observation
//! ([`crate::ladder::EndpointEvidence::drift`]), which demotes a READY rule.
//!
//! ## Memory and allocation
//!
//! Bounded, and fixed at construction: the map holds at most [`DriftConfig::map_capacity`]
//! entries ([`map_bytes`] bytes: 88 per entry on 64-bit targets, about 5.5 MiB for the
//! default 65 536), evicting with CLOCK; a ghost table of the same size remembers recently
//! evicted keys (so a child of an evicted parent reads `parent_evicted`, approximately); the
//! window keeps at most `mismatches` pieces of evidence; the prediction tracker (optional) its
//! fixed capacity. Token and look-ahead buffers grow to the largest event seen and are reused:
//! verifying a correct engine's stream allocates nothing per block (a counting-allocator test
//! checks it). Evidence is built only for mismatches, and no longer once the verdict is
//! `drift`.
//!
//! `BlockRemoved`, `AllBlocksCleared` and TensorRT-LLM's `created` leave the map alone: it is a
//! memo of derivations (published hash → digest), which stay true after the engine evicts a
//! block, and a block stored again later (vLLM re-announces prefix hits in report mode
//! "full", every engine re-stores an evicted prefix) then still has its parent.

mod map;
pub mod metrics;
mod predict;
mod sglang;
mod trtllm;
mod vllm;

#[cfg(feature = "live")]
pub mod watch;

pub use map::SLOT_BYTES;
pub use predict::{PredictionConfig, PredictionCounters};

use crate::contract::{Contract, HashContract};
use crate::{Engine, Error, Finding, Reason};
use kvhash::events::{BlockHash, EventBatch, EventKind};
use kvhash::Digest;
use kvprofile_core::HashAlgorithm;
use map::{ClockMap, Lookup, Value};
use predict::Predictions;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

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
    /// with an adapter not listed here are [`MismatchKind::Keys`] evidence under every
    /// release.
    pub lora_paths: BTreeMap<String, String>,
    /// Entries of the hash → digest map (at least 1).
    pub map_capacity: usize,
    /// When mismatches make a verdict.
    pub policy: DriftPolicy,
    /// Track predicted hashes ([`Verifier::predict`]).
    pub predictions: Option<PredictionConfig>,
}

impl DriftConfig {
    /// Block size `block_size`, seed `"0"`, the contract's default algorithm, no LoRA paths,
    /// 65 536 map entries, the default policy, no prediction tracking.
    pub fn new(block_size: usize) -> DriftConfig {
        DriftConfig {
            algo: None,
            block_size,
            hash_seed: Some("0".into()),
            lora_paths: BTreeMap::new(),
            map_capacity: 1 << 16,
            policy: DriftPolicy::default(),
            predictions: None,
        }
    }
}

macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident { $( $(#[$d:meta])* $v:ident => $s:literal, )* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $( $(#[$d])* $v, )* }
        impl $name {
            /// Every value, in a fixed order.
            pub const ALL: &'static [$name] = &[$($name::$v,)*];
            /// The stable name.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$v => $s,)* }
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}

named_enum! {
    /// Why a stored block could not be re-derived (never a guess).
    Unverifiable {
        /// Its parent hash was never published on this stream (the stream was joined late).
        ParentNeverSeen => "parent_never_seen",
        /// Its parent was evicted from the bounded map.
        ParentEvicted => "parent_evicted",
        /// Its parent's hash did not re-derive (the mismatch is counted there).
        ParentMismatched => "parent_mismatched",
        /// Its parent was itself unverifiable.
        ParentUnverifiable => "parent_unverifiable",
        /// vLLM K3: a LoRA block whose adapter path is not known. No longer produced: an
        /// adapter the rule does not declare ([`DriftConfig::lora_paths`]) is
        /// [`MismatchKind::Keys`] evidence; the code stays for the C ABI's slots.
        LoraPathUnknown => "lora_path_unknown",
        /// A LoRA whose hash input the event does not carry (SGLang ≥ 0.5.22 namespaces, a
        /// TensorRT-LLM LoRA id without the task id).
        LoraNotRederivable => "lora_not_rederivable",
        /// vLLM K3: untagged keys that read more than one way (a LoRA named by id only).
        AmbiguousKeys => "ambiguous_keys",
        /// SGLang EAGLE bigram events.
        EagleBigrams => "eagle_bigrams",
        /// TensorRT-LLM: a multimodal key given as a UUID instead of its digest.
        MmUuid => "mm_uuid",
        /// TensorRT-LLM: a salted root block under a release whose salt variant is unknown.
        SaltVariantUnknown => "salt_variant_unknown",
        /// vLLM ≥ 0.33: a look-ahead block with other keys (their window is not published).
        LookaheadKeys => "lookahead_keys",
        /// vLLM: a group block (`k` × the block size) with extra keys or look-ahead tokens
        /// (which sub-block they belong to is not published).
        GroupBlockKeys => "group_block_keys",
        /// vLLM: a root block under an unset seed that is random per engine process.
        NoneHashUnknown => "none_hash_unknown",
        /// A token id the release cannot hash.
        TokenOutOfRange => "token_out_of_range",
        /// The event carries no token ids.
        NoTokenIds => "no_token_ids",
        /// vLLM: the event carries no `extra_keys`.
        ExtraKeysAbsent => "extra_keys_absent",
        /// The event's arrays disagree (token count ≠ blocks × block size, `extra_keys` or
        /// `lookahead_token_ids` entries ≠ blocks).
        Malformed => "malformed",
        /// A published hash of a form the release does not write (e.g. digest bytes of an
        /// unexpected length).
        HashForm => "hash_form",
        /// The re-hash itself failed (e.g. a pickle body over one frame).
        HashError => "hash_error",
    }
}

named_enum! {
    /// What kind of evidence a mismatched block is.
    MismatchKind {
        /// A root block (no parent) re-derived to another hash.
        Root => "root",
        /// A chained block re-derived (from its parent's digest) to another hash.
        Chained => "chained",
        /// The event's block size is not what the rule's block size allows.
        BlockSize => "block_size",
        /// Published extra keys the release cannot produce.
        Keys => "keys",
    }
}

named_enum! {
    /// The verdict on an endpoint's stream (docs/contracts/drift.md §2). Every value but
    /// `clean` makes `kvexact watch` exit non-zero.
    Verdict {
        /// Most stored blocks were re-derived, and every one matched (or too few mismatched
        /// chained blocks to meet the policy).
        Clean => "clean",
        /// Evidence that the engine no longer computes what its release's contract says: a
        /// root block, a block size or extra keys at once, chained blocks by the policy.
        Drift => "drift",
        /// Nothing was verified, or most stored blocks could not be re-derived (the reasons
        /// are in [`Counters::unverifiable_by_reason`]): neither `clean` nor `drift` can be
        /// said.
        Unverifiable => "unverifiable",
    }
}

impl MismatchKind {
    /// Whether one block of this kind is a verdict on its own. A root block depends on
    /// nothing but the seed, the algorithm, the extra keys and the tokens (nothing but a
    /// different seed, algorithm, extra key or tokenizer makes it differ); a block size or
    /// extra keys the rule does not allow are the engine's own word. Chained mismatches wait
    /// for [`DriftPolicy`].
    pub const fn is_decisive(self) -> bool {
        !matches!(self, MismatchKind::Chained)
    }
}

impl Unverifiable {
    /// The reason a child of a block unverifiable for `self` is unverifiable: the parent
    /// reasons pass down the chain unchanged (a whole chain under a mismatched or never-seen
    /// block says so), every other becomes [`Unverifiable::ParentUnverifiable`].
    pub fn inherited(self) -> Unverifiable {
        match self {
            Unverifiable::ParentNeverSeen
            | Unverifiable::ParentEvicted
            | Unverifiable::ParentMismatched
            | Unverifiable::ParentUnverifiable => self,
            _ => Unverifiable::ParentUnverifiable,
        }
    }
}

/// Counts per [`Unverifiable`] reason (serialized as a map of the non-zero ones).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct ReasonCounts([u64; Unverifiable::ALL.len()]);

impl std::fmt::Debug for ReasonCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.nonzero().map(|(r, n)| (r.as_str(), n)))
            .finish()
    }
}

impl ReasonCounts {
    /// The count of one reason.
    pub fn get(&self, r: Unverifiable) -> u64 {
        self.0.get(r as usize).copied().unwrap_or(0)
    }

    /// Non-zero counts.
    pub fn nonzero(&self) -> impl Iterator<Item = (Unverifiable, u64)> + '_ {
        Unverifiable::ALL
            .iter()
            .map(|r| (*r, self.get(*r)))
            .filter(|(_, n)| *n > 0)
    }

    fn add(&mut self, r: Unverifiable) {
        if let Some(c) = self.0.get_mut(r as usize) {
            *c += 1;
        }
    }
}

impl Serialize for ReasonCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (r, n) in self.nonzero() {
            m.serialize_entry(r.as_str(), &n)?;
        }
        m.end()
    }
}

/// What the verifier has seen. Per stored block exactly one of `matched`, `mismatched`,
/// `consequences` and `unverifiable` grows; `rederived` = `matched` + the root and chained
/// mismatches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Batches fed.
    pub batches: u64,
    /// Events fed (every kind).
    pub events: u64,
    /// `BlockStored` / `stored` events.
    pub stored_events: u64,
    /// `BlockRemoved` / `removed` events.
    pub removed_events: u64,
    /// `AllBlocksCleared` events.
    pub cleared_events: u64,
    /// TensorRT-LLM `created` / `updated` events.
    pub other_events: u64,
    /// Stored blocks (one per published hash).
    pub blocks_seen: u64,
    /// Blocks whose hash was re-derived and compared.
    pub rederived: u64,
    /// Re-derived and equal to the published hash.
    pub matched: u64,
    /// Evidence of drift, all kinds.
    pub mismatched: u64,
    /// Root blocks re-derived to another hash.
    pub mismatched_root: u64,
    /// Chained blocks re-derived to another hash.
    pub mismatched_chained: u64,
    /// Blocks of an event whose block size the rule does not allow.
    pub mismatched_block_size: u64,
    /// Blocks with published keys the release cannot produce.
    pub mismatched_keys: u64,
    /// Blocks chained (directly or through others) on a mismatched block whose full digest
    /// the wire does not give: not re-derivable, and a consequence of that mismatch (the
    /// evidence names it) rather than an unknown. Not counted in `unverifiable`.
    pub consequences: u64,
    /// Blocks that could not be re-derived (consequences of a mismatch apart).
    pub unverifiable: u64,
    /// … by reason.
    pub unverifiable_by_reason: ReasonCounts,
}

impl Counters {
    /// `rederived / blocks_seen` (1 when nothing was seen).
    pub fn rederived_fraction(&self) -> f64 {
        if self.blocks_seen == 0 {
            1.0
        } else {
            self.rederived as f64 / self.blocks_seen as f64
        }
    }
}

/// The first offending block of a `drift` verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DriftEvidence {
    /// The engine release whose contract was used (`vllm-kv-map-v3-r0.31`).
    pub release_id: String,
    /// The contract (gateway) id it refines.
    pub contract_id: String,
    /// The engine version the contract was resolved from, when known.
    pub engine_version: Option<String>,
    /// What kind of evidence.
    pub kind: MismatchKind,
    /// Why, in words.
    pub detail: String,
    /// Index of the batch among those fed (0-based).
    pub batch_index: u64,
    /// The batch's ZMQ sequence number (msgpack formats decoded from frames).
    pub batch_seq: Option<u64>,
    /// TensorRT-LLM `event_id`.
    pub event_id: Option<u64>,
    /// Index of the event in its batch.
    pub event_index: usize,
    /// Index of the block in its event.
    pub block_index: usize,
    /// Byte offset of the event's token ids in the payload (msgpack formats fed with
    /// [`Verifier::feed_payload`]).
    pub token_ids_offset: Option<usize>,
    /// The block's token ids.
    pub tokens: Vec<u64>,
    /// The event's block size (tokens per published block).
    pub event_block_size: u64,
    /// The rule's block size.
    pub rule_block_size: usize,
    /// The published parent (64-bit form), `None` for a root block.
    pub parent: Option<u64>,
    /// The published hash (64-bit form).
    pub published: u64,
    /// The published hash as digest bytes (vLLM bytes mode), hex.
    pub published_hex: Option<String>,
    /// The re-derived hash (64-bit form), when one was computed.
    pub expected: Option<u64>,
    /// The re-derived full digest, hex (vLLM, SGLang).
    pub expected_digest: Option<String>,
    /// The extra keys the block was published with (`lora_name=…` first, then vLLM's
    /// `extra_keys` as text, `hex:…` bytes or `mm:identifier@offset`; empty when none).
    pub keys: Vec<String>,
    /// Mismatched blocks in the window when the verdict was reached.
    pub mismatches_in_window: u32,
}

/// The verifier's state as JSON-friendly data (what `kvexact watch --json` prints).
#[derive(Debug, Clone, Serialize)]
pub struct DriftReport {
    /// Engine family.
    pub engine: Engine,
    /// The release used.
    pub release_id: String,
    /// Its contract id.
    pub contract_id: String,
    /// The engine version the contract was resolved from.
    pub engine_version: Option<String>,
    /// The rule's block size.
    pub block_size: usize,
    /// `"clean"`, `"drift"` or `"unverifiable"` ([`Verifier::state`]).
    pub verdict: Verdict,
    /// The verdict in one line ([`Verifier::summary`]).
    pub summary: String,
    /// The counters.
    pub counters: Counters,
    /// Re-derived / seen.
    pub rederived_fraction: f64,
    /// Prediction counters, when tracked.
    pub predictions: Option<PredictionCounters>,
    /// Map: capacity, entries, evictions, bytes.
    pub map: MapStats,
    /// The first offending block, when the verdict is `drift`.
    pub evidence: Option<DriftEvidence>,
}

/// The map's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MapStats {
    /// Most entries.
    pub capacity: usize,
    /// Entries now.
    pub entries: usize,
    /// Entries evicted so far.
    pub evictions: u64,
    /// Bytes the map takes (fixed).
    pub bytes: usize,
}

/// A parent as the chain goes on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Parent {
    /// The block is a root (block 0).
    Root,
    /// The parent's full digest.
    Digest(Digest),
    /// The parent cannot be used.
    Unavailable(Unverifiable),
}

/// One block's outcome.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Outcome {
    /// Re-derived and equal; the value kept for children.
    Matched(Value),
    /// Evidence.
    Mismatch {
        kind: MismatchKind,
        expected: Option<u64>,
        expected_digest: Option<Digest>,
        detail: &'static str,
    },
    /// Not re-derivable.
    Unverifiable(Unverifiable),
}

impl Outcome {
    pub(crate) fn keys(detail: &'static str) -> Outcome {
        Outcome::Mismatch {
            kind: MismatchKind::Keys,
            expected: None,
            expected_digest: None,
            detail,
        }
    }

    pub(crate) fn block_size(detail: &'static str) -> Outcome {
        Outcome::Mismatch {
            kind: MismatchKind::BlockSize,
            expected: None,
            expected_digest: None,
            detail,
        }
    }

    /// The parent the next block of the same chain gets.
    pub(crate) fn next_parent(&self) -> Parent {
        match self {
            Outcome::Matched(Value::Derived(d)) => Parent::Digest(*d),
            Outcome::Matched(_) => Parent::Unavailable(Unverifiable::ParentUnverifiable),
            Outcome::Mismatch { .. } => Parent::Unavailable(Unverifiable::ParentMismatched),
            Outcome::Unverifiable(r) => Parent::Unavailable(r.inherited()),
        }
    }
}

/// A block's tokens, as the engine's event holds them.
#[derive(Debug, Clone)]
pub(crate) enum Tokens<'a> {
    U64(&'a [u64]),
    U32(&'a [u32]),
    /// The next `n` ids of an event's token-id view (read only for evidence).
    Wire(kvhash::events::TokenIter<'a>, usize),
}

impl Tokens<'_> {
    fn to_vec(&self) -> Vec<u64> {
        match self {
            Tokens::U64(t) => t.to_vec(),
            Tokens::U32(t) => t.iter().map(|&x| u64::from(x)).collect(),
            Tokens::Wire(it, n) => it.clone().take(*n).collect(),
        }
    }
}

/// Where a block sits, for evidence.
#[derive(Debug, Clone)]
pub(crate) struct BlockAt<'a> {
    pub(crate) event_index: usize,
    pub(crate) block_index: usize,
    pub(crate) event_id: Option<u64>,
    pub(crate) token_ids_offset: Option<usize>,
    pub(crate) tokens: Tokens<'a>,
    pub(crate) event_block_size: u64,
    pub(crate) parent: Option<u64>,
    pub(crate) published: u64,
    pub(crate) published_bytes: Option<&'a [u8]>,
    /// The block's published extra keys, rendered (evidence only).
    pub(crate) keys: Vec<String>,
}

/// Everything but the engine's re-hasher: counters, map, window, predictions.
pub(crate) struct Book {
    counters: Counters,
    map: ClockMap,
    window: VecDeque<(u64, Option<DriftEvidence>)>,
    verdict: Option<DriftEvidence>,
    predictions: Option<Predictions>,
    policy: DriftPolicy,
    release_id: &'static str,
    contract_id: &'static str,
    engine_version: Option<String>,
    rule_block_size: usize,
    batch_index: u64,
    batch_seq: Option<u64>,
    now: Option<Instant>,
}

impl Book {
    /// The parent a published parent hash names.
    pub(crate) fn parent(&mut self, published: u64) -> Parent {
        match self.map.get(published) {
            Lookup::Hit(Value::Derived(d)) => Parent::Digest(d),
            Lookup::Hit(Value::Stored) => Parent::Unavailable(Unverifiable::ParentUnverifiable),
            Lookup::Hit(Value::Unverifiable(r)) => Parent::Unavailable(r.inherited()),
            Lookup::Hit(Value::Mismatched) => Parent::Unavailable(Unverifiable::ParentMismatched),
            Lookup::Evicted => Parent::Unavailable(Unverifiable::ParentEvicted),
            Lookup::Missing => Parent::Unavailable(Unverifiable::ParentNeverSeen),
        }
    }

    /// What is known against the chain a published parent hash anchors (TensorRT-LLM, whose
    /// blocks are re-derived from the published parent itself): `Some(reason)` when the
    /// parent mismatched or descends from a mismatch (`parent_mismatched`), or was
    /// unverifiable (its reason, inherited); `None` when it matched or was never seen.
    pub(crate) fn taint(&mut self, published: u64) -> Option<Unverifiable> {
        match self.map.get(published) {
            Lookup::Hit(Value::Mismatched) => Some(Unverifiable::ParentMismatched),
            Lookup::Hit(Value::Unverifiable(r)) => Some(r.inherited()),
            _ => None,
        }
    }

    /// [`Book::record`] of `Outcome::Matched(Value::Derived(digest))`: a block re-derived to
    /// its published hash, whose digest its children chain on.
    #[inline]
    pub(crate) fn record_matched(&mut self, published: u64, digest: Digest) {
        let c = &mut self.counters;
        c.blocks_seen += 1;
        c.rederived += 1;
        c.matched += 1;
        self.map.insert(published, Value::Derived(digest));
        if let (Some(p), Some(now)) = (&mut self.predictions, self.now) {
            p.stored(published, now);
        }
    }

    /// Records one stored block's outcome; `at` (where the block sits, for evidence) is
    /// built only for a mismatch.
    #[inline]
    pub(crate) fn record<'a>(
        &mut self,
        published: u64,
        outcome: Outcome,
        at: impl FnOnce() -> BlockAt<'a>,
    ) {
        let c = &mut self.counters;
        c.blocks_seen += 1;
        let ordinal = c.blocks_seen;
        let value = match outcome {
            Outcome::Matched(v) => {
                c.rederived += 1;
                c.matched += 1;
                v
            }
            Outcome::Unverifiable(Unverifiable::ParentMismatched) => {
                c.consequences += 1;
                Value::Unverifiable(Unverifiable::ParentMismatched)
            }
            Outcome::Unverifiable(r) => {
                c.unverifiable += 1;
                c.unverifiable_by_reason.add(r);
                Value::Unverifiable(r)
            }
            Outcome::Mismatch { kind, .. } => {
                c.mismatched += 1;
                match kind {
                    MismatchKind::Root => {
                        c.rederived += 1;
                        c.mismatched_root += 1;
                    }
                    MismatchKind::Chained => {
                        c.rederived += 1;
                        c.mismatched_chained += 1;
                    }
                    MismatchKind::BlockSize => c.mismatched_block_size += 1,
                    MismatchKind::Keys => c.mismatched_keys += 1,
                }
                self.mismatch(ordinal, &at(), &outcome);
                Value::Mismatched
            }
        };
        // A digest already derived is not forgotten because a later copy of the block could
        // not be verified.
        let keep = matches!(value, Value::Unverifiable(_))
            && matches!(self.map.get(published), Lookup::Hit(Value::Derived(_)));
        if !keep {
            self.map.insert(published, value);
        }
        if let (Some(p), Some(now)) = (&mut self.predictions, self.now) {
            p.stored(published, now);
        }
    }

    fn mismatch(&mut self, ordinal: u64, at: &BlockAt<'_>, outcome: &Outcome) {
        let window = self.policy.window_blocks.max(1);
        while self
            .window
            .front()
            .is_some_and(|(o, _)| o + window <= ordinal)
        {
            self.window.pop_front();
        }
        let need = self.policy.mismatches.max(1) as usize;
        if self.window.len() >= need {
            self.window.pop_front();
        }
        let evidence = self.verdict.is_none().then(|| self.evidence(at, outcome));
        let decisive = matches!(outcome, Outcome::Mismatch { kind, .. } if kind.is_decisive());
        self.window.push_back((ordinal, evidence));
        if self.verdict.is_none() && decisive {
            // A root, block-size or keys mismatch is a verdict on its own: its own evidence.
            if let Some((_, Some(mut e))) = self.window.back().cloned() {
                e.mismatches_in_window = self.window.len() as u32;
                self.verdict = Some(e);
            }
        }
        if self.verdict.is_none() && self.window.len() >= need {
            let n = self.window.len() as u32;
            if let Some(mut e) = self.window.iter().find_map(|(_, e)| e.clone()) {
                e.mismatches_in_window = n;
                self.verdict = Some(e);
            }
        }
    }

    fn evidence(&self, at: &BlockAt<'_>, outcome: &Outcome) -> DriftEvidence {
        let (kind, expected, expected_digest, detail) = match *outcome {
            Outcome::Mismatch {
                kind,
                expected,
                expected_digest,
                detail,
            } => (kind, expected, expected_digest, detail),
            _ => (MismatchKind::Root, None, None, "not a mismatch"),
        };
        let mut detail = detail.to_string();
        if !at.keys.is_empty() {
            detail = format!("{detail} (keys {})", at.keys.join(", "));
        }
        if let Some(e) = expected {
            detail = format!("{detail}: published {} re-derives to {e}", at.published);
        }
        DriftEvidence {
            release_id: self.release_id.to_string(),
            contract_id: self.contract_id.to_string(),
            engine_version: self.engine_version.clone(),
            kind,
            detail,
            batch_index: self.batch_index,
            batch_seq: self.batch_seq,
            event_id: at.event_id,
            event_index: at.event_index,
            block_index: at.block_index,
            token_ids_offset: at.token_ids_offset,
            tokens: at.tokens.to_vec(),
            event_block_size: at.event_block_size,
            rule_block_size: self.rule_block_size,
            parent: at.parent,
            published: at.published,
            published_hex: at.published_bytes.map(hex::encode),
            expected,
            expected_digest: expected_digest.map(|d| d.to_hex()),
            keys: at.keys.clone(),
            mismatches_in_window: 0,
        }
    }
}

/// The mismatch of a re-derived block (root or chained by where it sits).
pub(crate) fn rederived_mismatch(root: bool, expected: u64, digest: Option<Digest>) -> Outcome {
    Outcome::Mismatch {
        kind: if root {
            MismatchKind::Root
        } else {
            MismatchKind::Chained
        },
        expected: Some(expected),
        expected_digest: digest,
        detail: if root {
            "root block re-derived to another hash"
        } else {
            "chained block re-derived to another hash"
        },
    }
}

// One per verifier, never moved on the hot path: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
enum Deriver {
    Vllm(vllm::VllmDeriver),
    Sglang(sglang::SglangDeriver),
    Trtllm(trtllm::TrtDeriver),
}

/// Re-derives every stored block of one endpoint's KV-event stream (see the module docs).
pub struct Verifier {
    engine: Engine,
    deriver: Deriver,
    book: Book,
    tokens: Vec<u64>,
    ahead: Vec<u64>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("engine", &self.engine)
            .field("release", &self.book.release_id)
            .field("counters", &self.book.counters)
            .finish()
    }
}

impl Verifier {
    /// A verifier for an endpoint running the release of `contract`, under the rule's
    /// settings `cfg`. Errors: a contract without a KV plane, block size 0, an algorithm of
    /// another engine.
    pub fn new(contract: &Contract, cfg: DriftConfig) -> Result<Verifier, Error> {
        if cfg.block_size == 0 {
            return Err(Error::Config("drift: block size 0".into()));
        }
        let format = contract.event_format();
        let deriver = match contract.hash() {
            Some(HashContract::Vllm(rules)) => Deriver::Vllm(vllm::VllmDeriver::new(
                rules,
                crate::bridge::vllm_algo(cfg.algo.or(contract.default_algorithm()))?,
                &cfg,
                format,
            )?),
            Some(HashContract::Sglang(rules)) => {
                check_algo(cfg.algo, HashAlgorithm::Sha256Sglang)?;
                Deriver::Sglang(sglang::SglangDeriver::new(rules, cfg.block_size)?)
            }
            Some(HashContract::Trtllm(salt)) => {
                check_algo(cfg.algo, HashAlgorithm::BlockhashTrtllm)?;
                Deriver::Trtllm(trtllm::TrtDeriver::new(salt, cfg.block_size)?)
            }
            None => {
                return Err(Error::Config(format!(
                    "{} has no KV plane to verify",
                    contract.release_id()
                )))
            }
        };
        Ok(Verifier {
            engine: contract.engine(),
            deriver,
            book: Book {
                counters: Counters::default(),
                map: ClockMap::new(cfg.map_capacity),
                window: VecDeque::with_capacity(cfg.policy.mismatches.max(1) as usize + 1),
                verdict: None,
                predictions: cfg.predictions.map(Predictions::new),
                policy: cfg.policy,
                release_id: contract.release_id(),
                contract_id: contract.contract_id(),
                engine_version: contract.version().map(str::to_string),
                rule_block_size: cfg.block_size,
                batch_index: 0,
                batch_seq: None,
                now: None,
            },
            tokens: Vec::new(),
            ahead: Vec::new(),
        })
    }

    /// Feeds one decoded batch (no byte offsets in the evidence).
    pub fn feed(&mut self, batch: &EventBatch<'_>) {
        self.feed_at(batch, None, Instant::now());
    }

    /// Feeds one decoded msgpack batch with the payload it was decoded from, so that evidence
    /// gives byte offsets.
    pub fn feed_payload(&mut self, batch: &EventBatch<'_>, payload: &[u8]) {
        self.feed_at(batch, Some(payload), Instant::now());
    }

    /// Feeds one batch observed at `now` (the clock of the prediction tracker).
    pub fn feed_at(&mut self, batch: &EventBatch<'_>, payload: Option<&[u8]>, now: Instant) {
        let book = &mut self.book;
        book.counters.batches += 1;
        book.batch_seq = batch.seq;
        book.now = Some(now);
        if let Some(p) = &mut book.predictions {
            p.expire(now);
        }
        for (i, ev) in batch.events.iter().enumerate() {
            book.counters.events += 1;
            match (&ev.kind, &mut self.deriver) {
                (EventKind::BlockStored(s), Deriver::Vllm(d)) => {
                    book.counters.stored_events += 1;
                    d.stored(book, s, i, payload, &mut self.tokens, &mut self.ahead);
                }
                (EventKind::BlockStored(s), Deriver::Sglang(d)) => {
                    book.counters.stored_events += 1;
                    d.stored(book, s, i, payload, &mut self.tokens);
                }
                (EventKind::Stored(s), Deriver::Trtllm(d)) => {
                    book.counters.stored_events += 1;
                    d.stored(book, s, i, ev.envelope.map(|e| e.event_id));
                }
                (EventKind::BlockStored(_) | EventKind::Stored(_), _) => {
                    // Another engine's events: each block is evidence of a wrong endpoint.
                    book.counters.stored_events += 1;
                    foreign(book, &ev.kind, i);
                }
                (EventKind::BlockRemoved(_), _) => book.counters.removed_events += 1,
                (EventKind::AllBlocksCleared, _) => book.counters.cleared_events += 1,
                (EventKind::Created(_) | EventKind::Updated(_), _) => {
                    book.counters.other_events += 1
                }
            }
        }
        book.batch_index += 1;
    }

    /// Hashes kvexact predicted for a request routed to this endpoint at `now` (64-bit forms):
    /// each is counted as already stored, stored within T, or expired. A no-op without
    /// [`DriftConfig::predictions`].
    pub fn predict(&mut self, hashes: &[u64], now: Instant) {
        let Book {
            predictions, map, ..
        } = &mut self.book;
        if let Some(p) = predictions {
            p.predict(hashes, now, |h| map.contains(h));
        }
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.book.counters
    }

    /// Prediction counters (`None` without tracking).
    pub fn prediction_counters(&self) -> Option<PredictionCounters> {
        self.book.predictions.as_ref().map(Predictions::counters)
    }

    /// The evidence of a `drift` verdict; `None` while not drifted ([`Verifier::state`]
    /// tells `clean` from `unverifiable`).
    pub fn verdict(&self) -> Option<&DriftEvidence> {
        self.book.verdict.as_ref()
    }

    /// The verdict: `drift` once there is evidence (sticky until
    /// [`Verifier::reset_verdict`]); else `unverifiable` when no stored block was seen or
    /// fewer than half of them were re-derived (the rest unverifiable, or consequences of a
    /// chained mismatch below the policy); else `clean`.
    pub fn state(&self) -> Verdict {
        let c = &self.book.counters;
        if self.book.verdict.is_some() {
            Verdict::Drift
        } else if c.blocks_seen == 0 || c.rederived.saturating_mul(2) < c.blocks_seen {
            Verdict::Unverifiable
        } else {
            Verdict::Clean
        }
    }

    /// The verdict in one line: the evidence's summary, the unverifiable share with its
    /// reasons (largest first), or the clean figures.
    pub fn summary(&self) -> String {
        let c = &self.book.counters;
        match (self.state(), &self.book.verdict) {
            (Verdict::Drift, Some(e)) => format!(
                "{} ({}): batch {} event {} block {}: {}{}",
                e.release_id,
                e.kind,
                e.batch_index,
                e.event_index,
                e.block_index,
                e.detail,
                if c.consequences > 0 {
                    format!(
                        "; {} blocks chained on mismatched ones are its consequences",
                        c.consequences
                    )
                } else {
                    String::new()
                }
            ),
            (Verdict::Unverifiable, _) if c.blocks_seen == 0 => {
                "no stored block seen: nothing verified".to_string()
            }
            (Verdict::Unverifiable, _) => {
                let mut reasons: Vec<(Unverifiable, u64)> =
                    c.unverifiable_by_reason.nonzero().collect();
                reasons.sort_by_key(|r| std::cmp::Reverse(r.1));
                let mut parts: Vec<String> = reasons
                    .iter()
                    .map(|(r, n)| format!("{} {n}", r.as_str()))
                    .collect();
                if c.consequences > 0 {
                    parts.push(format!(
                        "chained on a mismatch {} (below the policy)",
                        c.consequences
                    ));
                }
                format!(
                    "{} of {} stored blocks re-derived, {} not: {}",
                    c.rederived,
                    c.blocks_seen,
                    c.blocks_seen - c.rederived,
                    parts.join(", ")
                )
            }
            _ => format!(
                "{} of {} stored blocks re-derived, {} matched, 0 drift",
                c.rederived, c.blocks_seen, c.matched
            ),
        }
    }

    /// Clears the verdict and the window (after the rule re-attested).
    pub fn reset_verdict(&mut self) {
        self.book.verdict = None;
        self.book.window.clear();
    }

    /// The verdict as the ladder's observation: pass while clean, `hash_drift` with the
    /// evidence's summary once drifted. An `unverifiable` stream is no evidence of drift: the
    /// observation passes, its detail saying `unverifiable` and why ([`Verifier::state`] is
    /// the verdict).
    pub fn finding(&self) -> Finding {
        match (self.state(), &self.book.verdict) {
            (Verdict::Drift, Some(_)) => Finding::fail(Reason::HashDrift, self.summary()),
            (Verdict::Unverifiable, _) => {
                Finding::pass(format!("unverifiable: {}", self.summary()))
            }
            _ => Finding::pass(self.summary()),
        }
    }

    /// Everything as one serializable report.
    pub fn report(&self) -> DriftReport {
        let b = &self.book;
        DriftReport {
            engine: self.engine,
            release_id: b.release_id.to_string(),
            contract_id: b.contract_id.to_string(),
            engine_version: b.engine_version.clone(),
            block_size: b.rule_block_size,
            verdict: self.state(),
            summary: self.summary(),
            counters: b.counters,
            rederived_fraction: b.counters.rederived_fraction(),
            predictions: self.prediction_counters(),
            map: MapStats {
                capacity: b.map.capacity(),
                entries: b.map.len(),
                evictions: b.map.evictions(),
                bytes: map::bytes_for(b.map.capacity()),
            },
            evidence: b.verdict.clone(),
        }
    }
}

/// Stored events of another engine family: evidence for every block.
fn foreign(book: &mut Book, kind: &EventKind<'_>, event_index: usize) {
    let hashes: Vec<u64> = match kind {
        EventKind::BlockStored(s) => s.block_hashes.iter().map(BlockHash::to_u64).collect(),
        EventKind::Stored(s) => s.blocks.iter().map(|b| b.block_hash).collect(),
        _ => Vec::new(),
    };
    for (j, h) in hashes.into_iter().enumerate() {
        let at = BlockAt {
            event_index,
            block_index: j,
            event_id: None,
            token_ids_offset: None,
            tokens: Tokens::U64(&[]),
            event_block_size: 0,
            parent: None,
            published: h,
            published_bytes: None,
            keys: Vec::new(),
        };
        book.record(
            h,
            Outcome::keys("an event of another engine family than the contract's"),
            || at,
        );
    }
}

/// The byte offset of `inner` in `outer`, when it lies within it.
pub(crate) fn offset_in(outer: Option<&[u8]>, inner: &[u8]) -> Option<usize> {
    let outer = outer?;
    let start = outer.as_ptr() as usize;
    let at = inner.as_ptr() as usize;
    (at >= start && at + inner.len() <= start + outer.len()).then(|| at - start)
}

fn check_algo(algo: Option<HashAlgorithm>, only: HashAlgorithm) -> Result<(), Error> {
    match algo {
        None => Ok(()),
        Some(a) if a == only => Ok(()),
        Some(a) => Err(Error::Config(format!(
            "{} is not {}'s algorithm",
            a.as_str(),
            only.engine()
        ))),
    }
}
