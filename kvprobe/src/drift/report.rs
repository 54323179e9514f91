//! What a [`super::Verifier`] reports: the verdict and its vocabulary (mismatch kinds,
//! reasons a block cannot be re-derived), counters, the evidence of the first mismatches and
//! the report that holds them.

use super::PredictionCounters;
use crate::Engine;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

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
        /// adapter the rule does not declare ([`DriftConfig::lora_paths`](super::DriftConfig::lora_paths)) is
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
    /// for [`DriftPolicy`](super::DriftPolicy).
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

    pub(super) fn add(&mut self, r: Unverifiable) {
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
    /// [`Verifier::feed_payload`](super::Verifier::feed_payload)).
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
    /// `"clean"`, `"drift"` or `"unverifiable"` ([`Verifier::state`](super::Verifier::state)).
    pub verdict: Verdict,
    /// The verdict in one line ([`Verifier::summary`](super::Verifier::summary)).
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
