//! The typed event model shared by every engine.
//!
//! A decoded [`EventBatch`] borrows strings, byte-string hashes and token-id arrays from the
//! input bytes (msgpack formats); TensorRT-LLM's JSON values are owned.

use super::msgpack::Reader;
use std::fmt;

pub use crate::location::Location;

/// One decoded batch: a ZMQ message (vLLM, SGLang) or one drained HTTP body (TensorRT-LLM).
#[derive(Debug, Clone, PartialEq)]
pub struct EventBatch<'a> {
    /// The format the batch was decoded from.
    pub format: super::EventFormat,
    /// Frame 0 (ZMQ topic) when decoded from frames.
    pub topic: Option<&'a str>,
    /// Frame 1 (sequence number, 8 bytes big-endian) when decoded from frames.
    pub seq: Option<u64>,
    /// Batch timestamp (seconds since the epoch); `None` for TensorRT-LLM.
    pub ts: Option<f64>,
    /// Batch slot 2: vLLM's `data_parallel_rank` (`None` when nil on the wire) or SGLang's
    /// `attn_dp_rank`. `None` for TensorRT-LLM, whose rank is per event
    /// ([`TrtEnvelope::attention_dp_rank`]).
    pub rank: Option<u32>,
    /// The events, in wire order.
    pub events: Vec<Event<'a>>,
}

/// One event with, for TensorRT-LLM, its envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct Event<'a> {
    /// TensorRT-LLM's `event_id` / `window_size` / `attention_dp_rank`; `None` elsewhere.
    pub envelope: Option<TrtEnvelope>,
    /// What happened.
    pub kind: EventKind<'a>,
}

/// The event types of all engines.
// BlockStored dominates real batches; boxing it would add one allocation per event.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind<'a> {
    /// vLLM / SGLang `BlockStored`: a chain of blocks with their tokens.
    BlockStored(BlockStored<'a>),
    /// vLLM / SGLang `BlockRemoved`, TensorRT-LLM `removed`.
    BlockRemoved(BlockRemoved<'a>),
    /// vLLM / SGLang `AllBlocksCleared` (prefix-cache reset).
    AllBlocksCleared,
    /// TensorRT-LLM `created`: a fresh pool for this window.
    Created(TrtCreated),
    /// TensorRT-LLM `stored`: blocks with per-block tokens and metadata.
    Stored(TrtStored),
    /// TensorRT-LLM `updated`: a block moved between cache levels or was reprioritised.
    Updated(TrtUpdated),
}

impl EventKind<'_> {
    /// The wire name of the event type (`"BlockStored"`, `"stored"`, …). `BlockRemoved` is
    /// named `"BlockRemoved"` for every engine.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventKind::BlockStored(_) => "BlockStored",
            EventKind::BlockRemoved(_) => "BlockRemoved",
            EventKind::AllBlocksCleared => "AllBlocksCleared",
            EventKind::Created(_) => "created",
            EventKind::Stored(_) => "stored",
            EventKind::Updated(_) => "updated",
        }
    }
}

/// A block hash in the engine's own form.
///
/// Conversion to the 64-bit value a gateway indexes ([`BlockHash::to_u64`]):
///
/// | form | engine | `to_u64` |
/// |---|---|---|
/// | `U64` | vLLM int mode, TensorRT-LLM | the value |
/// | `I64` | SGLang (signed int64) | two's-complement bits (`v as u64`) |
/// | `Bytes` | vLLM bytes mode (`VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0`) | `int.from_bytes(d, "big") mod 2^64`: the last 8 bytes big-endian (shorter digests zero-extended), docs/contracts/vllm.md §5 |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockHash<'a> {
    /// Unsigned 64-bit (vLLM int mode, TensorRT-LLM).
    U64(u64),
    /// Signed 64-bit (SGLang).
    I64(i64),
    /// Raw digest bytes (vLLM bytes mode), borrowed from the payload.
    Bytes(&'a [u8]),
}

impl BlockHash<'_> {
    /// The 64-bit value the gateway indexes (see the table on [`BlockHash`]).
    #[inline]
    pub fn to_u64(&self) -> u64 {
        match *self {
            BlockHash::U64(v) => v,
            BlockHash::I64(v) => v as u64,
            BlockHash::Bytes(b) => match b.last_chunk::<8>() {
                // A digest (vLLM's 32 bytes): its last eight, big-endian.
                Some(tail) => u64::from_be_bytes(*tail),
                None => b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x)),
            },
        }
    }
}

/// vLLM / SGLang `BlockStored`. Fields an engine does not send are `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockStored<'a> {
    /// Consecutive chain hashes, one per stored block.
    pub block_hashes: Vec<BlockHash<'a>>,
    /// Hash of the block before the first stored one; `None` when it hangs off the root.
    pub parent_block_hash: Option<BlockHash<'a>>,
    /// The tokens of the stored blocks (borrowed view).
    pub token_ids: TokenIds<'a>,
    /// Tokens per stored block.
    pub block_size: u32,
    /// Adapter integer id (vLLM, deprecated; SGLang: always nil in 0.5.19).
    pub lora_id: Option<i64>,
    /// Storage tier: `"GPU"`, `"CPU"`, SGLang `"CPU_PINNED"` …
    pub medium: Option<&'a str>,
    /// Adapter name (vLLM; SGLang 0.5.22 `dynamo` format).
    pub lora_name: Option<&'a str>,
    /// vLLM: one entry per stored block, nil or the block's untagged extra keys.
    pub extra_keys: Option<Vec<Option<Vec<ExtraKey<'a>>>>>,
    /// vLLM: KV-cache group index.
    pub group_idx: Option<u32>,
    /// vLLM: KV-cache spec kind (`"full_attention"`, `"sliding_window"` …).
    pub kv_cache_spec_kind: Option<&'a str>,
    /// vLLM: sliding window of a sliding-window group.
    pub kv_cache_spec_sliding_window: Option<u64>,
    /// vLLM offloading tiers: `"LOCAL"` / `"REMOTE"`.
    pub locality: Option<&'a str>,
    /// vLLM offloading tiers: ownership.
    pub ownership: Option<&'a str>,
    /// vLLM / SGLang 0.5.20+: the request's session id.
    pub session_id: Option<&'a str>,
    /// vLLM 0.33 (look-ahead hashing): per stored block, the look-ahead tokens its hash
    /// also covers.
    pub lookahead_token_ids: Option<Vec<TokenIds<'a>>>,
    /// SGLang: the request's cache salt (0.5.19: the 8th element's `{"cache_salt": …}` map).
    pub cache_salt: Option<&'a str>,
}

impl BlockStored<'_> {
    /// The blocks carry keys besides their tokens: a non-empty `extra_keys` entry or a
    /// `cache_salt` (a plain request's hash can never match such a block).
    pub fn has_extra_keys(&self) -> bool {
        self.cache_salt.is_some()
            || self
                .extra_keys
                .as_ref()
                .is_some_and(|v| v.iter().any(|k| k.as_ref().is_some_and(|k| !k.is_empty())))
    }

    /// The blocks carry keys besides the LoRA adapter's own (`lora_name`, published untagged
    /// as the only key of every block): a salt, multimodal or embedding keys, or a LoRA key
    /// that is not `lora_name`. A LoRA request's hash can be predicted; such blocks cannot be
    /// matched by a request without those keys.
    pub fn has_keys_besides_lora(&self) -> bool {
        if self.cache_salt.is_some() {
            return true;
        }
        let Some(blocks) = &self.extra_keys else {
            return false;
        };
        blocks.iter().any(|k| match (k.as_deref(), self.lora_name) {
            (None | Some([]), _) => false,
            (Some([ExtraKey::Text(t)]), Some(name)) => *t != name,
            _ => true,
        })
    }

    /// The event names a LoRA adapter (id or name).
    pub fn has_lora(&self) -> bool {
        self.lora_id.is_some() || self.lora_name.is_some()
    }
}

/// vLLM / SGLang `BlockRemoved`, TensorRT-LLM `removed`.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockRemoved<'a> {
    /// The removed hashes.
    pub block_hashes: Vec<BlockHash<'a>>,
    /// Storage tier (vLLM, SGLang); `None` for TensorRT-LLM.
    pub medium: Option<&'a str>,
    /// vLLM: KV-cache group index.
    pub group_idx: Option<u32>,
    /// vLLM offloading tiers.
    pub locality: Option<&'a str>,
    /// vLLM offloading tiers.
    pub ownership: Option<&'a str>,
}

/// One untagged extra key of a vLLM block, as published in `extra_keys`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtraKey<'a> {
    /// A text key: the LoRA name, the cache salt, or (vLLM <= 0.18) a bare mm identifier.
    Text(&'a str),
    /// A byte-string key: the prompt-embeds digest.
    Bytes(&'a [u8]),
    /// A multimodal key `[identifier, offset]` (offset relative to the block start; may be
    /// negative).
    Mm {
        /// The item's identifier.
        identifier: &'a str,
        /// Offset of the item's start relative to the block start.
        offset: i64,
    },
}

/// The shape of a token-id array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenShape {
    /// A flat array of ids (the normal case).
    Flat,
    /// SGLang EAGLE bigrams: an array of `[t_j, t_j+1]` pairs. Such events cannot be matched
    /// with plain-token hashing (docs/contracts/sglang.md §1.1); SGLang's own typed decoder rejects them.
    Bigrams,
}

/// A borrowed, already validated view of a msgpack token-id array: the ids are decoded
/// lazily from the payload bytes when iterated, never copied at decode time.
///
/// Every element was checked at decode time to be a non-negative integer below 2^64 (and,
/// for [`TokenShape::Bigrams`], every unit a 2-element array of such integers). Equality
/// compares shape and values, not the wire widths.
#[derive(Clone, Copy)]
pub struct TokenIds<'a> {
    raw: &'a [u8],
    units: usize,
    shape: TokenShape,
}

impl PartialEq for TokenIds<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.shape == other.shape && self.units == other.units && self.values().eq(other.values())
    }
}

impl Eq for TokenIds<'_> {}

impl fmt::Debug for TokenIds<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenIds")
            .field("shape", &self.shape)
            .field("values", &self.values().collect::<Vec<_>>())
            .finish()
    }
}

impl<'a> TokenIds<'a> {
    /// Builds a view; `raw` must be the validated element bytes (see the decoders).
    pub(crate) fn new(raw: &'a [u8], units: usize, shape: TokenShape) -> Self {
        TokenIds { raw, units, shape }
    }

    /// The array's element bytes as they are in the payload (validated msgpack integers, or
    /// bigram arrays), borrowed from it: where the ids sit in the input (subtract the
    /// payload's address from `wire_bytes().as_ptr()` for a byte offset).
    pub fn wire_bytes(&self) -> &'a [u8] {
        self.raw
    }

    /// Flat ids or bigrams.
    pub fn shape(&self) -> TokenShape {
        self.shape
    }

    /// Number of units: ids for [`TokenShape::Flat`], pairs for [`TokenShape::Bigrams`].
    pub fn len(&self) -> usize {
        self.units
    }

    /// True when there are no units.
    pub fn is_empty(&self) -> bool {
        self.units == 0
    }

    /// Every integer in wire order (for bigrams: both members of each pair, flattened).
    pub fn values(&self) -> TokenIter<'a> {
        TokenIter {
            raw: self.raw,
            pos: 0,
        }
    }

    /// The ids, when the array is flat; `None` for bigrams.
    pub fn ids(&self) -> Option<TokenIter<'a>> {
        match self.shape {
            TokenShape::Flat => Some(self.values()),
            TokenShape::Bigrams => None,
        }
    }

    /// The pairs, when the array holds bigrams; `None` for flat arrays.
    pub fn bigrams(&self) -> Option<impl Iterator<Item = (u64, u64)> + 'a> {
        match self.shape {
            TokenShape::Flat => None,
            TokenShape::Bigrams => {
                let mut it = self.values();
                Some(std::iter::from_fn(move || Some((it.next()?, it.next()?))))
            }
        }
    }

    /// The flat ids copied into a vector (`None` for bigrams).
    pub fn to_vec(&self) -> Option<Vec<u64>> {
        let mut v = Vec::new();
        self.extend_into(&mut v).then_some(v)
    }

    /// Appends the flat ids to `out` in one pass over the wire bytes (the same values as
    /// [`TokenIds::ids`], several times faster for a consumer that wants them in a buffer it
    /// reuses); `false`, with nothing appended, for bigrams.
    pub fn extend_into(&self, out: &mut Vec<u64>) -> bool {
        if self.shape != TokenShape::Flat {
            return false;
        }
        let start = out.len();
        out.resize(start + self.units, 0);
        let n = self
            .values()
            .read_into(out.get_mut(start..).unwrap_or(&mut []));
        out.truncate(start + n);
        true
    }
}

/// Iterator over the integers of a [`TokenIds`] view.
#[derive(Debug, Clone)]
pub struct TokenIter<'a> {
    raw: &'a [u8],
    pos: usize,
}

impl<'a> TokenIter<'a> {
    /// The bytes not read yet.
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.raw.get(self.pos..).unwrap_or(&[])
    }

    /// Skips `n` bytes (of whole values, read by the caller from [`TokenIter::rest`]).
    pub(crate) fn advance(&mut self, n: usize) {
        self.pos += n;
    }

    /// Fills `out` with the next values (fewer at the end); returns how many were written.
    /// For flat arrays the same values as [`Iterator::next`], decoded without a branch per
    /// width (ids of random widths defeat branch prediction), so that a consumer can take
    /// one block's ids at a time into a buffer it reuses.
    pub fn read_into(&mut self, out: &mut [u64]) -> usize {
        let raw = self.raw;
        let mut pos = self.pos;
        let mut n = 0;
        for slot in out.iter_mut() {
            // While 9 bytes are left: the head byte gives the length, the 8 bytes after it,
            // read big-endian and shifted, the value.
            let Some(chunk) = raw.get(pos..pos + 9) else {
                break;
            };
            let b = chunk[0];
            // Positive fixint: 1 byte; 0xcc–0xcf and 0xd0–0xd3: 2, 3, 5, 9 bytes by the low
            // two bits (computed, not looked up: the next id's position waits for it).
            if b >= 0x80 && (b & 0xfc) != 0xcc && (b & 0xfc) != 0xd0 {
                break; // a bigram header: leave it to `next`
            }
            let len = if b < 0x80 { 1 } else { (1usize << (b & 3)) + 1 };
            let mut w = [0u8; 8];
            w.copy_from_slice(&chunk[1..9]);
            let wide = u64::from_be_bytes(w) >> ((8 * (9 - len as u32)) & 63);
            *slot = if len == 1 { u64::from(b) } else { wide };
            pos += len;
            n += 1;
        }
        self.pos = pos;
        for slot in out.iter_mut().skip(n) {
            match self.next() {
                Some(v) => *slot = v,
                None => break,
            }
            n += 1;
        }
        n
    }
}

impl Iterator for TokenIter<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        // The bytes were validated at decode time; any inconsistency simply ends iteration.
        loop {
            let b = *self.raw.get(self.pos)?;
            if b == 0x92 {
                self.pos += 1; // a bigram's array header
                continue;
            }
            let (v, n) = read_uint_fast(self.raw.get(self.pos..)?)?;
            self.pos += n;
            return Some(v);
        }
    }
}

/// Reads one non-negative msgpack integer; returns the value and its encoded length.
#[inline]
fn read_uint_fast(s: &[u8]) -> Option<(u64, usize)> {
    let b = *s.first()?;
    let be = |n: usize| -> Option<u64> {
        let bytes = s.get(1..1 + n)?;
        Some(bytes.iter().fold(0u64, |a, &x| (a << 8) | u64::from(x)))
    };
    match b {
        0x00..=0x7f => Some((u64::from(b), 1)),
        0xcc | 0xd0 => Some((be(1)?, 2)),
        0xcd | 0xd1 => Some((be(2)?, 3)),
        0xce | 0xd2 => Some((be(4)?, 5)),
        0xcf | 0xd3 => Some((be(8)?, 9)),
        _ => None,
    }
}

/// Reads and validates a token-id array at the reader's position, returning the lazy view.
pub(crate) fn read_token_ids<'a>(r: &mut Reader<'a>) -> Result<TokenIds<'a>, crate::Error> {
    let n = r.array("an array of token ids")?;
    let start = r.pos();
    // Leading ids in unsigned forms are valid whatever follows (the checked loop below would
    // accept each): skipped in one tight pass, the checked loop reads from the first other.
    let skipped = r.skip_uints(n);
    read_token_units(r, n, start, skipped)
}

/// The checked loop of [`read_token_ids`]: units `from..n` of the array whose units start at
/// `start` (units before `from` are flat unsigned ids already read).
fn read_token_units<'a>(
    r: &mut Reader<'a>,
    n: usize,
    start: usize,
    from: usize,
) -> Result<TokenIds<'a>, crate::Error> {
    let mut shape = TokenShape::Flat;
    for i in from..n {
        let b = r.peek("a token id")?;
        if matches!(b, 0x90..=0x9f | 0xdc | 0xdd) {
            // EAGLE bigrams: every unit must be a fixarray of exactly two ids.
            if i == 0 {
                shape = TokenShape::Bigrams;
            }
            let at = r.pos();
            if shape != TokenShape::Bigrams || b != 0x92 {
                return Err(crate::Error::EventInvalidValue {
                    at: r.at(at),
                    reason: "token ids mix integers and arrays, or a bigram is not [a, b]"
                        .to_string(),
                });
            }
            r.array("a bigram")?;
            r.u64("a token id")?;
            r.u64("a token id")?;
        } else {
            if shape == TokenShape::Bigrams {
                let at = r.pos();
                return Err(crate::Error::EventInvalidValue {
                    at: r.at(at),
                    reason: "token ids mix arrays and integers".to_string(),
                });
            }
            r.u64("a token id")?;
        }
    }
    let end = r.pos();
    Ok(TokenIds::new(r.slice(start, end), n, shape))
}

/// TensorRT-LLM event envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrtEnvelope {
    /// Per-manager event counter (a jump means events were dropped).
    pub event_id: u64,
    /// Attention window of the pool (not the block size).
    pub window_size: Option<u64>,
    /// Attention-DP rank; only with attention DP.
    pub attention_dp_rank: Option<u32>,
}

/// TensorRT-LLM `created`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrtCreated {
    /// Blocks per cache level (0 = GPU, 1 = host).
    pub num_blocks_per_cache_level: Vec<u64>,
}

/// TensorRT-LLM `stored`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrtStored {
    /// Hash of the block before the first listed one; `None` off the root.
    pub parent_hash: Option<u64>,
    /// The stored blocks, in chain order.
    pub blocks: Vec<TrtStoredBlock>,
}

/// One TensorRT-LLM stored block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrtStoredBlock {
    /// The V1 block hash.
    pub block_hash: u64,
    /// Every token of the block (partial blocks list fewer).
    pub tokens: Vec<TrtToken>,
    /// The request's cache salt (1.3.0rc builds); `None` when null or absent.
    pub cache_salt: Option<String>,
    /// 0 = GPU, 1 = host.
    pub cache_level: Option<i64>,
    /// Retention priority (35 = engine default).
    pub priority: Option<i64>,
    /// Multimodal keys (1.3.0rc builds); empty when absent.
    pub mm_keys: Vec<TrtMmKey>,
    /// LoRA id, only if a build serializes it (V1 JSON does not).
    pub lora_id: Option<i64>,
}

impl TrtStoredBlock {
    /// The block's hash takes more than its token ids and parent: a cache salt, multimodal
    /// keys or prompt-table extra ids (docs/contracts/trtllm.md §3).
    pub fn has_extra_keys(&self) -> bool {
        self.cache_salt.is_some()
            || !self.mm_keys.is_empty()
            || self.tokens.iter().any(|t| t.token_extra_id != 0)
    }
}

/// One TensorRT-LLM token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrtToken {
    /// The token id as the engine prints it (int32; ids ≥ 2^31 appear negative).
    pub token_id: i32,
    /// Prompt-table extra id (0 when unused).
    pub token_extra_id: u64,
}

impl TrtToken {
    /// The id as the hash reads it: the same 32 bits, unsigned.
    pub fn token_id_u32(&self) -> u32 {
        self.token_id as u32
    }
}

/// One TensorRT-LLM multimodal key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrtMmKey {
    /// The item digest as 64 hex digits, or a UUID string.
    pub hash: String,
    /// Offset inside the item where this block starts.
    pub start_offset: u64,
}

/// TensorRT-LLM `updated`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrtUpdated {
    /// The block.
    pub block_hash: u64,
    /// Cache-level change, if any.
    pub cache_level: Option<TrtDiff>,
    /// Priority change, if any.
    pub priority: Option<TrtDiff>,
}

/// TensorRT-LLM `event_diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrtDiff {
    /// New value.
    pub new_value: i64,
    /// Old value.
    pub old_value: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_views_compare_values_not_widths() {
        let narrow = [0x05u8, 0xcc, 0x80];
        let wide = [0xcfu8, 0, 0, 0, 0, 0, 0, 0, 5, 0xd1, 0x00, 0x80];
        let a = TokenIds::new(&narrow, 2, TokenShape::Flat);
        let b = TokenIds::new(&wide, 2, TokenShape::Flat);
        assert_eq!(a.to_vec(), Some(vec![5, 128]));
        // Every width through the one-pass copy, as the iterator reads them.
        let all = [
            0x7fu8, 0xcc, 0xff, 0xcd, 0x12, 0x34, 0xce, 1, 2, 3, 4, 0xcf, 1, 2, 3, 4, 5, 6, 7, 8,
            0xd0, 0x7f, 0xd1, 0x7f, 0xff, 0xd2, 0x7f, 0, 0, 1, 0xd3, 0, 0, 0, 0, 0, 0, 0, 9,
        ];
        let t = TokenIds::new(&all, 9, TokenShape::Flat);
        let mut v = vec![42];
        assert!(t.extend_into(&mut v));
        assert_eq!(v[1..], t.values().collect::<Vec<_>>()[..]);
        assert_eq!(v.len(), 10);
        // Block by block through the cursor.
        let mut it = t.values();
        let mut chunk = [0u64; 4];
        let mut got = Vec::new();
        loop {
            let n = it.read_into(&mut chunk);
            got.extend_from_slice(&chunk[..n]);
            if n < chunk.len() {
                break;
            }
        }
        assert_eq!(got, v[1..]);
        assert!(!TokenIds::new(&[0x92, 1, 2], 1, TokenShape::Bigrams).extend_into(&mut v));
        assert_eq!(v.len(), 10);
        assert_eq!(a, b);
        assert_ne!(a, TokenIds::new(&narrow[..1], 1, TokenShape::Flat));
        assert_eq!(b.wire_bytes().as_ptr(), wide.as_ptr());
        assert_eq!(b.wire_bytes().len(), wide.len());
    }

    /// The checked loop alone, from the array's first unit: the slow twin of the fast lane.
    fn read_token_ids_checked<'a>(r: &mut Reader<'a>) -> Result<TokenIds<'a>, crate::Error> {
        let n = r.array("an array of token ids")?;
        let start = r.pos();
        read_token_units(r, n, start, 0)
    }

    /// Msgpack units a token array may hold, valid or not: every integer form (negative ones
    /// too), bigram heads of the right and wrong sizes, other types, cut-off tails.
    fn unit() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        prop_oneof![
            (0u8..0x80).prop_map(|b| vec![b]),
            any::<u8>().prop_map(|b| vec![0xcc, b]),
            any::<u16>().prop_map(|v| [&[0xcd][..], &v.to_be_bytes()].concat()),
            any::<u32>().prop_map(|v| [&[0xce][..], &v.to_be_bytes()].concat()),
            any::<u64>().prop_map(|v| [&[0xcf][..], &v.to_be_bytes()].concat()),
            any::<i16>().prop_map(|v| [&[0xd1][..], &v.to_be_bytes()].concat()),
            any::<i8>().prop_map(|v| vec![0xd0, v as u8]),
            (0xe0u8..=0xff).prop_map(|b| vec![b]),
            (any::<u8>(), any::<u8>()).prop_map(|(a, b)| vec![0x92, a & 0x7f, b & 0x7f]),
            Just(vec![0x93, 1, 2, 3]),
            Just(vec![0xc0]),
            Just(vec![0xcd, 0x01]),
            Just(vec![0xcf, 0, 0]),
        ]
    }

    proptest::proptest! {
        /// The fast lane and the checked loop alone agree on every array: the same view or
        /// the same error, and the reader left at the same place.
        #[test]
        fn token_ids_fast_lane_equals_the_checked_loop(
            units in proptest::collection::vec(unit(), 0..40),
            head in 0usize..3,
            cut in 0usize..4,
        ) {
            let n = units.len() + head.saturating_sub(1);
            let mut buf = vec![0xdc];
            buf.extend_from_slice(&(n as u16).to_be_bytes());
            for u in &units {
                buf.extend_from_slice(u);
            }
            buf.truncate(buf.len().saturating_sub(cut));
            let limits = crate::events::Limits::default();
            let mut fast = Reader::new(&buf, &limits);
            let mut slow = Reader::new(&buf, &limits);
            let a = read_token_ids(&mut fast).map(|t| (t.raw, t.units, t.shape));
            let b = read_token_ids_checked(&mut slow).map(|t| (t.raw, t.units, t.shape));
            proptest::prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
            proptest::prop_assert_eq!(fast.pos(), slow.pos());
        }

        /// A byte hash of any length reads as the fold of its last eight bytes, big-endian.
        #[test]
        fn bytes_hash_to_u64_equals_the_fold(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)) {
            let tail = &b[b.len().saturating_sub(8)..];
            let want = tail.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
            proptest::prop_assert_eq!(BlockHash::Bytes(&b).to_u64(), want);
        }
    }

    #[test]
    fn bytes_hash_to_u64_is_the_big_endian_tail() {
        let d: Vec<u8> = (1..=32).collect();
        assert_eq!(BlockHash::Bytes(&d).to_u64(), 0x191a1b1c1d1e1f20);
        assert_eq!(BlockHash::Bytes(&[1, 2]).to_u64(), 0x0102);
        assert_eq!(BlockHash::I64(-1).to_u64(), u64::MAX);
    }
}
