//! vLLM's prefix-cache block-hash chain (target vLLM 0.31; `docs/contracts/vllm.md` §1–5).
//!
//! ```text
//! digest_0 = H(ser([NONE_HASH, [t_0 .. t_B-1], extra_0]))
//! digest_i = H(ser([digest_{i-1}, [t_iB .. t_iB+B-1], extra_i]))
//! ```
//!
//! `ser`/`H` come from the [`HashAlgo`] (`--prefix-caching-hash-algo`); only full blocks are
//! hashed; the KV-event integer is the digest's last 8 bytes big-endian
//! ([`Digest::last8_be`]).
//!
//! [`VllmHasher`] holds what is fixed for a request (algorithm, block size, NONE_HASH, extra
//! keys) and is immutable and `Send + Sync`; [`VllmChain`] is the running state (parent
//! digest, position, partial block) that [`VllmChain::extend`] advances block by block.
//!
//! ```
//! use kvhash::vllm::{HashAlgo, VllmHasher};
//! let hasher = VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0")).unwrap();
//! let ids: Vec<u32> = (0..40).collect();
//! let mut out = [0u64; 4];
//! assert_eq!(hasher.block_hashes_u64(&ids, &mut out).unwrap(), 2); // 2 full blocks
//! // The same chain, one turn at a time:
//! let mut chain = hasher.chain();
//! let mut got = Vec::new();
//! chain.extend(&ids[..20], |d| got.push(d.last8_be())).unwrap();
//! chain.extend(&ids[20..], |d| got.push(d.last8_be())).unwrap();
//! assert_eq!(got, out[..2]);
//! ```

mod cbor;
mod keys;
mod pickle;
mod rehash;
mod rules;

pub use rehash::BlockRehasher;
pub use rules::{ExtraKeyForm, NoneHashRule, VllmRules};

use crate::{Digest, Error};
use sha2::{Digest as _, Sha256};
use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;

/// `--prefix-caching-hash-algo`: serializer and digest of the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashAlgo {
    /// Canonical CBOR + SHA-256 (the kvexact contract).
    Sha256Cbor,
    /// Pickle protocol 5 + SHA-256 (vLLM's default).
    Sha256,
    /// Pickle protocol 5 + XXH3-128.
    Xxhash,
    /// Canonical CBOR + XXH3-128.
    XxhashCbor,
}

impl HashAlgo {
    /// Every algorithm, in a fixed order.
    pub const ALL: [HashAlgo; 4] = [
        HashAlgo::Sha256Cbor,
        HashAlgo::Sha256,
        HashAlgo::Xxhash,
        HashAlgo::XxhashCbor,
    ];

    /// The name vLLM uses on its command line.
    pub const fn name(self) -> &'static str {
        match self {
            HashAlgo::Sha256Cbor => "sha256_cbor",
            HashAlgo::Sha256 => "sha256",
            HashAlgo::Xxhash => "xxhash",
            HashAlgo::XxhashCbor => "xxhash_cbor",
        }
    }

    /// Digest length in bytes: 32 (SHA-256) or 16 (XXH3-128).
    pub const fn digest_len(self) -> usize {
        match self {
            HashAlgo::Sha256Cbor | HashAlgo::Sha256 => 32,
            HashAlgo::Xxhash | HashAlgo::XxhashCbor => 16,
        }
    }

    /// Whether the serializer is CBOR (otherwise pickle).
    pub const fn is_cbor(self) -> bool {
        matches!(self, HashAlgo::Sha256Cbor | HashAlgo::XxhashCbor)
    }

    /// The digest function `H`.
    #[inline]
    pub fn digest(self, data: &[u8]) -> Digest {
        match self {
            HashAlgo::Sha256Cbor | HashAlgo::Sha256 => {
                Digest::sha256(crate::digest::sha256_oneshot(data))
            }
            HashAlgo::Xxhash | HashAlgo::XxhashCbor => {
                Digest::xxh3_128(xxhash_rust::xxh3::xxh3_128(data).to_be_bytes())
            }
        }
    }
}

impl fmt::Display for HashAlgo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for HashAlgo {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        HashAlgo::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| Error::UnknownName {
                what: "vLLM prefix-caching hash algorithm",
                name: s.to_string(),
            })
    }
}

/// A token id vLLM can hash: `u32` (the hot path) or `u64` (any id a Python int can be
/// within 64 bits). Sealed.
pub trait TokenId: Copy + private::Sealed {
    /// The id as an unsigned 64-bit integer.
    fn to_u64(self) -> u64;
}
impl TokenId for u32 {
    #[inline(always)]
    fn to_u64(self) -> u64 {
        self as u64
    }
}
impl TokenId for u64 {
    #[inline(always)]
    fn to_u64(self) -> u64 {
        self
    }
}
mod private {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// The string vLLM ≥ 0.29 hashes for NONE_HASH when `PYTHONHASHSEED` is unset (SHA-256 algos).
pub const UNSET_SEED_STRING: &str = "vllm-none-hash";

/// `NONE_HASH = H(ser(S))`, the root parent (docs/contracts/vllm.md §2), under rule B (vLLM ≥ 0.29, the
/// reference). See [`none_hash_with`].
pub fn none_hash(algo: HashAlgo, python_hash_seed: Option<&str>) -> Result<Digest, Error> {
    none_hash_with(NoneHashRule::B, algo, python_hash_seed)
}

/// `NONE_HASH = H(ser(S))` under `rule`.
///
/// `python_hash_seed` is the `PYTHONHASHSEED` environment value verbatim (`Some("0")`,
/// `Some("")`, ...) or `None` when unset. Unset under rule B with an SHA-256 algorithm hashes
/// `"vllm-none-hash"`; every other unset case is random per engine process and gives
/// [`Error::UnreproducibleNoneHash`] (never a guess).
pub fn none_hash_with(
    rule: NoneHashRule,
    algo: HashAlgo,
    python_hash_seed: Option<&str>,
) -> Result<Digest, Error> {
    let seed = match (python_hash_seed, rule, algo) {
        (Some(s), _, _) => s,
        (None, NoneHashRule::B, HashAlgo::Sha256 | HashAlgo::Sha256Cbor) => UNSET_SEED_STRING,
        (None, NoneHashRule::B, HashAlgo::Xxhash | HashAlgo::XxhashCbor) => {
            return Err(Error::UnreproducibleNoneHash {
                algo: algo.name(),
                why: "vLLM draws a random hex seed per process for the xxhash algorithms",
            })
        }
        (None, NoneHashRule::A, _) => {
            return Err(Error::UnreproducibleNoneHash {
                algo: algo.name(),
                why: "this vLLM release (NONE_HASH rule A) uses 32 random bytes per process",
            })
        }
    };
    let mut buf = Vec::with_capacity(seed.len() + 16);
    if algo.is_cbor() {
        cbor::encode_seed(&mut buf, seed);
    } else {
        pickle::encode_seed(&mut buf, seed)?;
    }
    Ok(algo.digest(&buf))
}

/// LoRA key: hashed as `["lora", name, path]` on every block.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LoraKey {
    /// Adapter name (the request's `model`; `/v1/models` `id`).
    pub name: String,
    /// Adapter path the server registered (`/v1/models` `root`).
    pub path: String,
}

/// One multimodal item: placeholder range `[offset, offset + length)` of the prompt.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MmFeature {
    /// Opaque identifier (normally the item's content-hash hex).
    pub identifier: String,
    /// First placeholder position.
    pub offset: u64,
    /// Number of placeholder tokens.
    pub length: u64,
}

/// Prompt embeddings: the raw row-major bytes (little-endian, in their dtype) and the bytes
/// per row (`hidden_size * dtype size`). Block `[s, e)` is keyed by SHA-256 of rows `s..e`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PromptEmbeds {
    data: Vec<u8>,
    row_bytes: usize,
}

impl fmt::Debug for PromptEmbeds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PromptEmbeds")
            .field("rows", &self.rows())
            .field("row_bytes", &self.row_bytes)
            .finish()
    }
}

impl PromptEmbeds {
    /// Checks that `data` is a whole number of non-empty rows.
    pub fn new(data: Vec<u8>, row_bytes: usize) -> Result<Self, Error> {
        if row_bytes == 0 {
            return Err(Error::PromptEmbeds {
                reason: "row size is zero",
            });
        }
        if !data.len().is_multiple_of(row_bytes) {
            return Err(Error::PromptEmbeds {
                reason: "data is not a whole number of rows",
            });
        }
        Ok(PromptEmbeds { data, row_bytes })
    }

    /// Number of rows (tokens).
    pub fn rows(&self) -> usize {
        self.data.len() / self.row_bytes
    }

    fn block_digest(&self, start: u64, end: u64) -> Result<[u8; 32], Error> {
        let too_short = Error::PromptEmbeds {
            reason: "embeddings do not cover the block",
        };
        let s = usize::try_from(start)
            .ok()
            .and_then(|s| s.checked_mul(self.row_bytes));
        let e = usize::try_from(end)
            .ok()
            .and_then(|e| e.checked_mul(self.row_bytes));
        match (s, e) {
            (Some(s), Some(e)) => self
                .data
                .get(s..e)
                .map(|rows| Sha256::digest(rows).into())
                .ok_or(too_short),
            _ => Err(too_short),
        }
    }
}

/// The request's extra keys (docs/contracts/vllm.md §3). All empty = plain text (`extra_i` = null).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct VllmExtras {
    /// LoRA adapter of the request, if any.
    pub lora: Option<LoraKey>,
    /// `cache_salt` of the request; `None` or empty means no salt key.
    pub cache_salt: Option<String>,
    /// Multimodal items in placeholder order (sorted by offset).
    pub mm_features: Vec<MmFeature>,
    /// Embeddings of a prompt given as embeddings (its token ids are all 0).
    pub prompt_embeds: Option<PromptEmbeds>,
}

impl VllmExtras {
    /// Whether no key is ever produced (every `extra_i` is null).
    pub fn is_plain(&self) -> bool {
        self.lora.is_none()
            && self.cache_salt.as_deref().is_none_or(str::is_empty)
            && self.mm_features.is_empty()
            && self.prompt_embeds.is_none()
    }

    fn validate(&self) -> Result<(), Error> {
        let mut prev = 0u64;
        for (index, f) in self.mm_features.iter().enumerate() {
            if f.offset < prev {
                return Err(Error::MmUnsorted { index });
            }
            let end = f.offset.checked_add(f.length);
            if end.is_none_or(|e| e > i64::MAX as u64) {
                return Err(Error::MmOutOfRange { index });
            }
            prev = f.offset;
        }
        Ok(())
    }
}

/// One key of a block, by reference into [`VllmExtras`] (no allocation per block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockKey {
    Lora,
    Mm { index: usize, offset: i64 },
    CacheSalt,
    PromptEmbeds([u8; 32]),
}

impl BlockKey {
    /// The key with its strings, from the request's extras. A `BlockKey` is only ever made
    /// for a key the extras hold, so the empty fallbacks are never written.
    #[inline]
    fn resolve<'a>(&'a self, extras: &'a VllmExtras) -> BlockExtraKey<'a> {
        match self {
            BlockKey::Lora => {
                let (name, path) = extras
                    .lora
                    .as_ref()
                    .map_or(("", ""), |l| (l.name.as_str(), l.path.as_str()));
                BlockExtraKey::Lora { name, path }
            }
            BlockKey::Mm { index, offset } => BlockExtraKey::Mm {
                identifier: extras
                    .mm_features
                    .get(*index)
                    .map_or("", |f| f.identifier.as_str()),
                offset: *offset,
            },
            BlockKey::CacheSalt => {
                BlockExtraKey::CacheSalt(extras.cache_salt.as_deref().unwrap_or(""))
            }
            BlockKey::PromptEmbeds(d) => BlockExtraKey::PromptEmbeds(d),
        }
    }
}

/// One extra key of one block with its values (borrowed), in vLLM's key order: the LoRA key,
/// the multimodal keys, the cache salt (block 0 only), the prompt-embeds digest. The release's
/// [`ExtraKeyForm`] decides how each is written: untagged (`K1`: a multimodal key is its bare
/// identifier; `K2`: `(identifier, offset)`; a LoRA key is its name) or tagged (`K3`:
/// `("lora", name, path)`, `("mm", identifier, offset)`, `("cache_salt", salt)`,
/// `("prompt_embeds", digest)`).
///
/// What [`BlockRehasher::digest`] takes to re-derive a published block from its event, whose
/// `extra_keys` carry the untagged keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockExtraKey<'a> {
    /// The LoRA adapter: its name and (hashed only under `K3`) the path the server registered.
    Lora {
        /// Adapter name.
        name: &'a str,
        /// Adapter path (ignored by `K1`/`K2`).
        path: &'a str,
    },
    /// A multimodal item touching the block.
    Mm {
        /// The item's identifier.
        identifier: &'a str,
        /// The item's start relative to the block start (ignored by `K1`).
        offset: i64,
    },
    /// The request's cache salt (block 0 only).
    CacheSalt(&'a str),
    /// SHA-256 of the block's prompt-embedding rows.
    PromptEmbeds(&'a [u8]),
}

/// What is fixed for one request: the release's rules, algorithm, block size, NONE_HASH,
/// extra keys and look-ahead.
///
/// Immutable, cheap to share (`Send + Sync`); hash with [`VllmHasher::block_hashes_u64`],
/// [`VllmHasher::block_hashes`], or keep a [`VllmChain`] across turns.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VllmHasher {
    rules: VllmRules,
    algo: HashAlgo,
    block_size: usize,
    none_hash: Digest,
    extras: VllmExtras,
    lookahead: usize,
}

impl VllmHasher {
    /// A plain-text hasher under the reference rules ([`VllmRules::REFERENCE`], vLLM 0.31).
    /// `python_hash_seed` as in [`none_hash`].
    pub fn new(
        algo: HashAlgo,
        block_size: usize,
        python_hash_seed: Option<&str>,
    ) -> Result<Self, Error> {
        Self::with_rules(VllmRules::REFERENCE, algo, block_size, python_hash_seed)
    }

    /// A plain-text hasher under `rules` (those of the engine release, from the contract
    /// catalog). `python_hash_seed` as in [`none_hash_with`].
    pub fn with_rules(
        rules: VllmRules,
        algo: HashAlgo,
        block_size: usize,
        python_hash_seed: Option<&str>,
    ) -> Result<Self, Error> {
        if block_size == 0 {
            return Err(Error::ZeroBlockSize);
        }
        Ok(VllmHasher {
            rules,
            algo,
            block_size,
            none_hash: none_hash_with(rules.none_hash, algo, python_hash_seed)?,
            extras: VllmExtras::default(),
            lookahead: 0,
        })
    }

    /// A hasher under the reference rules whose root parent is a given NONE_HASH (e.g. one
    /// read from a fixture).
    pub fn with_none_hash(
        algo: HashAlgo,
        block_size: usize,
        none_hash: Digest,
    ) -> Result<Self, Error> {
        Self::with_rules_and_none_hash(VllmRules::REFERENCE, algo, block_size, none_hash)
    }

    /// A hasher under `rules` whose root parent is a given NONE_HASH.
    pub fn with_rules_and_none_hash(
        rules: VllmRules,
        algo: HashAlgo,
        block_size: usize,
        none_hash: Digest,
    ) -> Result<Self, Error> {
        if block_size == 0 {
            return Err(Error::ZeroBlockSize);
        }
        check_len(algo, &none_hash)?;
        Ok(VllmHasher {
            rules,
            algo,
            block_size,
            none_hash,
            extras: VllmExtras::default(),
            lookahead: 0,
        })
    }

    /// The same hasher with these extra keys (validated: multimodal items sorted by offset,
    /// ranges within 63 bits).
    pub fn with_extras(mut self, extras: VllmExtras) -> Result<Self, Error> {
        extras.validate()?;
        self.extras = extras;
        Ok(self)
    }

    /// The same hasher with `num_hash_lookahead_tokens = tokens` (vLLM ≥ 0.33 with EAGLE
    /// drafting): block `i` is hashed only once `(i+1)·B + L` tokens exist, and its extra key
    /// becomes `(E, t_end, …, t_end+L-1)` with `E` the normal keys over `[start, end+L)`.
    /// [`Error::RuleNotSupported`] when the release's rules have no look-ahead and `tokens > 0`.
    pub fn with_lookahead(mut self, tokens: usize) -> Result<Self, Error> {
        if tokens > 0 && !self.rules.lookahead {
            return Err(Error::RuleNotSupported {
                what: "look-ahead hashing (num_hash_lookahead_tokens)",
            });
        }
        self.lookahead = tokens;
        Ok(self)
    }

    /// The release's rules.
    pub fn rules(&self) -> VllmRules {
        self.rules
    }

    /// The algorithm.
    pub fn algo(&self) -> HashAlgo {
        self.algo
    }

    /// Tokens per hashed block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Look-ahead tokens per block (0: none).
    pub fn lookahead(&self) -> usize {
        self.lookahead
    }

    /// The root parent digest.
    pub fn none_hash(&self) -> Digest {
        self.none_hash
    }

    /// The extra keys.
    pub fn extras(&self) -> &VllmExtras {
        &self.extras
    }

    /// A fresh chain at position 0, borrowing this hasher.
    pub fn chain(&self) -> VllmChain<&VllmHasher> {
        VllmChain::new(self)
    }

    /// Number of blocks `n_tokens` tokens yield: `floor((n - L) / B)` (0 when `n < L`).
    pub fn block_count(&self, n_tokens: usize) -> usize {
        n_tokens.saturating_sub(self.lookahead) / self.block_size
    }

    /// Hashes the full blocks of `ids` into `out` (digests); stops when `out` is full.
    /// Returns the number written: `min(block_count(ids.len()), out.len())`.
    pub fn block_hashes<T: TokenId>(&self, ids: &[T], out: &mut [Digest]) -> Result<usize, Error> {
        let mut n = 0;
        self.one_shot(ids, out.len(), |d| {
            if let Some(slot) = out.get_mut(n) {
                *slot = d;
            }
            n += 1;
        })?;
        Ok(n)
    }

    /// Hashes the full blocks of `ids` into `out` in KV-event integer form (last 8 digest
    /// bytes big-endian); stops when `out` is full. Returns the number written.
    pub fn block_hashes_u64<T: TokenId>(&self, ids: &[T], out: &mut [u64]) -> Result<usize, Error> {
        let mut n = 0;
        self.one_shot(ids, out.len(), |d| {
            if let Some(slot) = out.get_mut(n) {
                *slot = d.last8_be();
            }
            n += 1;
        })?;
        Ok(n)
    }

    fn one_shot<T: TokenId>(
        &self,
        ids: &[T],
        max_blocks: usize,
        sink: impl FnMut(Digest),
    ) -> Result<(), Error> {
        let blocks = self.block_count(ids.len()).min(max_blocks);
        let used = match blocks {
            0 => &[][..],
            b => ids
                .get(..b * self.block_size + self.lookahead)
                .unwrap_or(&[]),
        };
        self.chain().extend(used, sink)
    }
}

fn check_len(algo: HashAlgo, d: &Digest) -> Result<(), Error> {
    if d.len() != algo.digest_len() {
        return Err(Error::DigestLength {
            expected: algo.digest_len(),
            got: d.len(),
        });
    }
    Ok(())
}

/// The running state of one token sequence: parent digest, position of the next block,
/// the tokens not yet hashed (the current partial block and, with look-ahead, the tokens
/// after it), and the multimodal cursor.
///
/// `H` is anything that borrows a [`VllmHasher`]: `&VllmHasher` (from
/// [`VllmHasher::chain`]) or an owned/`Arc` hasher for a chain kept in a cache.
/// If [`VllmChain::extend`] fails, the chain may have advanced past some blocks; discard it.
///
/// Multimodal keys of blocks completed by later calls continue the walk from block 0, as
/// vLLM does when it hashes a prompt in one pass. vLLM's own decode path restarts the walk
/// for blocks completed by generated tokens (at the last item before 0.31, at the items in
/// the block's window from 0.31 on); the two differ only when an item reaches into the
/// prompt's trailing partial block, which a gateway never hashes.
#[derive(Debug, Clone)]
pub struct VllmChain<H: Borrow<VllmHasher>> {
    hasher: H,
    parent: Digest,
    position: u64,
    pending: Vec<u64>,
    mm_cursor: usize,
    buf: Vec<u8>,
    keys: Vec<BlockKey>,
}

impl<H: Borrow<VllmHasher>> VllmChain<H> {
    /// A chain at position 0 (parent = NONE_HASH).
    pub fn new(hasher: H) -> Self {
        let h = hasher.borrow();
        let parent = h.none_hash;
        let cap = 48 + (h.block_size + h.lookahead) * 9;
        VllmChain {
            hasher,
            parent,
            position: 0,
            pending: Vec::new(),
            mm_cursor: 0,
            buf: Vec::with_capacity(cap),
            keys: Vec::new(),
        }
    }

    /// A chain resumed after `position` tokens (a multiple of the block size) whose last
    /// block digest is `parent` (e.g. from a cache or a fixture).
    pub fn resume(hasher: H, parent: Digest, position: u64) -> Result<Self, Error> {
        let mut chain = VllmChain::new(hasher);
        let (algo, bs, la) = {
            let h = chain.hasher.borrow();
            (h.algo, h.block_size as u64, h.lookahead as u64)
        };
        check_len(algo, &parent)?;
        if !position.is_multiple_of(bs) {
            return Err(Error::MisalignedPosition {
                position,
                block_size: bs as usize,
            });
        }
        // Replay the multimodal cursor over the blocks before `position`.
        let mut start = 0u64;
        let has_mm = !chain.hasher.borrow().extras.mm_features.is_empty();
        while has_mm && start < position {
            let Some(end) = start.checked_add(bs) else {
                return Err(Error::PositionOverflow);
            };
            let hash_end = end.checked_add(la).ok_or(Error::PositionOverflow)?;
            chain.keys.clear();
            let h = chain.hasher.borrow();
            chain.mm_cursor = keys::next_cursor(
                &h.extras.mm_features,
                h.rules.extra_keys,
                start,
                end,
                hash_end,
                chain.mm_cursor,
                &mut chain.keys,
            )?;
            start = end;
        }
        chain.keys.clear();
        chain.parent = parent;
        chain.position = position;
        Ok(chain)
    }

    /// The hasher.
    pub fn hasher(&self) -> &VllmHasher {
        self.hasher.borrow()
    }

    /// Digest of the last full block (NONE_HASH at position 0).
    pub fn parent(&self) -> Digest {
        self.parent
    }

    /// Tokens covered by full blocks so far.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Tokens given but not yet covered by a hashed block (the partial block and, with
    /// look-ahead, the tokens after it).
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Appends tokens; calls `sink` with the digest of every block that becomes hashable,
    /// in order. Tokens not yet covered are kept for the next call.
    pub fn extend<T: TokenId>(
        &mut self,
        tokens: &[T],
        mut sink: impl FnMut(Digest),
    ) -> Result<(), Error> {
        let (bs, la) = {
            let h = self.hasher.borrow();
            (h.block_size, h.lookahead)
        };
        if la > 0 {
            return self.extend_lookahead(tokens, bs, la, &mut sink);
        }
        let mut fast = self.fast_path();
        let mut rest = tokens;
        if !self.pending.is_empty() {
            let need = bs - self.pending.len();
            if rest.len() < need {
                self.pending.extend(rest.iter().map(|t| t.to_u64()));
                return Ok(());
            }
            let (head, tail) = rest.split_at(need);
            self.pending.extend(head.iter().map(|t| t.to_u64()));
            let pending = std::mem::take(&mut self.pending);
            let r = self.hash_block(&mut fast, &pending, &[]);
            self.pending = pending;
            self.pending.clear();
            r?;
            sink(self.parent);
            rest = tail;
        }
        if let Some(f) = fast.as_mut() {
            rest = self.extend_plain(f, rest, &mut sink);
        }
        let mut blocks = rest.chunks_exact(bs);
        for block in &mut blocks {
            self.hash_block(&mut fast, block, &[])?;
            sink(self.parent);
        }
        self.pending
            .extend(blocks.remainder().iter().map(|t| t.to_u64()));
        Ok(())
    }

    /// The whole blocks of `tokens` on the plain `sha256_cbor` buffer `fast`, in its own
    /// loop (the parent stays a local array from one block to the next); returns the tokens
    /// it left: a partial block, and the rest from a block it could not take or whose end
    /// position would overflow (the caller's per-block path hashes or refuses those).
    fn extend_plain<'t, T: TokenId>(
        &mut self,
        fast: &mut cbor::PlainSha256Cbor,
        tokens: &'t [T],
        sink: &mut impl FnMut(Digest),
    ) -> &'t [T] {
        let bs = fast.block_size();
        let Ok(parent) = <&[u8; 32]>::try_from(self.parent.as_bytes()) else {
            return tokens;
        };
        // Blocks whose end positions fit in a u64.
        let room = (u64::MAX - self.position) / bs as u64;
        let n = (tokens.len() / bs).min(usize::try_from(room).unwrap_or(usize::MAX));
        let (done, last) = fast.hash_run(parent, &tokens[..n * bs], |d| sink(Digest::sha256(d)));
        if done > 0 {
            self.parent = Digest::sha256(last);
            // `done ≤ room`: no overflow.
            self.position += (done * bs) as u64;
        }
        &tokens[done * bs..]
    }

    /// [`VllmChain::extend`] with `L > 0` look-ahead tokens: a block is hashed once the `L`
    /// tokens after it are known.
    fn extend_lookahead<T: TokenId>(
        &mut self,
        tokens: &[T],
        bs: usize,
        la: usize,
        sink: &mut impl FnMut(Digest),
    ) -> Result<(), Error> {
        self.pending.extend(tokens.iter().map(|t| t.to_u64()));
        let mut done = 0;
        let pending = std::mem::take(&mut self.pending);
        let mut result = Ok(());
        while pending.len() - done >= bs + la {
            let block = &pending[done..done + bs];
            let ahead = &pending[done + bs..done + bs + la];
            if let Err(e) = self.hash_block(&mut None, block, ahead) {
                result = Err(e);
                break;
            }
            sink(self.parent);
            done += bs;
        }
        self.pending = pending;
        self.pending.drain(..done);
        result
    }

    /// Appends tokens and returns the digests of the blocks that became full.
    pub fn extend_to_vec<T: TokenId>(&mut self, tokens: &[T]) -> Result<Vec<Digest>, Error> {
        let mut v = Vec::with_capacity(tokens.len() / self.hasher.borrow().block_size + 1);
        self.extend(tokens, |d| v.push(d))?;
        Ok(v)
    }

    /// The exact bytes fed to the digest for the next block if it consisted of `tokens`
    /// (which must be one block long) followed by the look-ahead tokens `ahead` (as many
    /// as the hasher's look-ahead), without advancing the chain. For tests and benches.
    pub fn serialize_next<T: TokenId>(
        &mut self,
        tokens: &[T],
        ahead: &[T],
    ) -> Result<Vec<u8>, Error> {
        let cursor = self.mm_cursor;
        let ahead: Vec<u64> = ahead.iter().map(|t| t.to_u64()).collect();
        self.serialize(tokens, &ahead)?;
        self.mm_cursor = cursor;
        Ok(self.buf.clone())
    }

    fn serialize<T: TokenId>(&mut self, tokens: &[T], ahead: &[u64]) -> Result<u64, Error> {
        let VllmChain {
            hasher,
            parent,
            position,
            mm_cursor,
            buf,
            keys,
            ..
        } = self;
        let h: &VllmHasher = (*hasher).borrow();
        if ahead.len() != h.lookahead {
            return Err(Error::RuleNotSupported {
                what: "a look-ahead token count other than the hasher's",
            });
        }
        let start = *position;
        let end = start
            .checked_add(tokens.len() as u64)
            .ok_or(Error::PositionOverflow)?;
        let hash_end = end
            .checked_add(ahead.len() as u64)
            .ok_or(Error::PositionOverflow)?;
        keys.clear();
        buf.clear();
        let salt = start == 0
            && h.extras
                .cache_salt
                .as_deref()
                .is_some_and(|s| !s.is_empty());
        let plain = h.extras.lora.is_none()
            && h.extras.mm_features.is_empty()
            && h.extras.prompt_embeds.is_none()
            && !salt;
        if !plain {
            if h.extras.lora.is_some() {
                keys.push(BlockKey::Lora);
            }
            *mm_cursor = keys::next_cursor(
                &h.extras.mm_features,
                h.rules.extra_keys,
                start,
                end,
                hash_end,
                *mm_cursor,
                keys,
            )?;
            if salt {
                keys.push(BlockKey::CacheSalt);
            }
            if let Some(e) = &h.extras.prompt_embeds {
                keys.push(BlockKey::PromptEmbeds(e.block_digest(start, hash_end)?));
            }
        }
        let form = h.rules.extra_keys;
        let resolved = keys.iter().map(|k| k.resolve(&h.extras));
        if h.algo.is_cbor() {
            cbor::encode_block(buf, parent.as_bytes(), tokens, resolved, form, ahead);
        } else {
            pickle::encode_block(buf, parent.as_bytes(), tokens, resolved, form, ahead)?;
        }
        Ok(end)
    }

    /// The reusable stack buffer of the plain `sha256_cbor` path, when it applies (no extra
    /// keys, no look-ahead, block size ≤ 64).
    #[inline]
    fn fast_path(&self) -> Option<cbor::PlainSha256Cbor> {
        let h: &VllmHasher = self.hasher.borrow();
        if h.algo == HashAlgo::Sha256Cbor && h.extras.is_plain() && h.lookahead == 0 {
            cbor::PlainSha256Cbor::new(h.block_size)
        } else {
            None
        }
    }

    /// Hashes one block (followed by the look-ahead tokens `ahead`); the digest becomes
    /// `self.parent`.
    #[inline]
    fn hash_block<T: TokenId>(
        &mut self,
        fast: &mut Option<cbor::PlainSha256Cbor>,
        tokens: &[T],
        ahead: &[u64],
    ) -> Result<(), Error> {
        if let Some(f) = fast {
            if let Ok(parent) = <&[u8; 32]>::try_from(self.parent.as_bytes()) {
                if let Some(d) = f.hash(parent, tokens) {
                    let Some(end) = self.position.checked_add(tokens.len() as u64) else {
                        return Err(Error::PositionOverflow);
                    };
                    self.position = end;
                    self.parent = Digest::sha256(d);
                    return Ok(());
                }
            }
        }
        let end = self.serialize(tokens, ahead)?;
        self.parent = self.hasher.borrow().algo.digest(&self.buf);
        self.position = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_hash_seed0() {
        assert_eq!(
            none_hash(HashAlgo::Sha256Cbor, Some("0")).unwrap().to_hex(),
            "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e"
        );
        assert_eq!(
            none_hash(HashAlgo::XxhashCbor, Some("0")).unwrap().to_hex(),
            "1ebe36576dcb573f26b99533a20aaeca"
        );
        assert_eq!(
            none_hash(HashAlgo::Xxhash, None),
            Err(Error::UnreproducibleNoneHash {
                algo: "xxhash",
                why: "vLLM draws a random hex seed per process for the xxhash algorithms"
            })
        );
    }

    #[test]
    fn zero_block_size() {
        assert_eq!(
            VllmHasher::new(HashAlgo::Sha256Cbor, 0, Some("0")),
            Err(Error::ZeroBlockSize)
        );
    }

    #[test]
    fn worked_example() {
        let h = VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0")).unwrap();
        let t: [u32; 16] = [
            28907, 112899, 93381, 3066, 109640, 77388, 46319, 65159, 111194, 57010, 147205, 46005,
            28522, 22064, 118665, 30140,
        ];
        let mut out = [0u64; 1];
        assert_eq!(h.block_hashes_u64(&t, &mut out).unwrap(), 1);
        assert_eq!(out[0], 14422604315143095113);
    }

    #[test]
    fn unsorted_mm_is_error() {
        let h = VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0")).unwrap();
        let f = |o| MmFeature {
            identifier: "x".into(),
            offset: o,
            length: 1,
        };
        let e = h.with_extras(VllmExtras {
            mm_features: vec![f(5), f(2)],
            ..Default::default()
        });
        assert_eq!(e, Err(Error::MmUnsorted { index: 1 }));
    }
}
