//! vLLM's prefix-cache block-hash chain (target vLLM 0.31; spec `vllm.md` §1–5).
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
mod pickle;

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

/// `NONE_HASH = H(ser(S))`, the root parent (spec §2).
///
/// `python_hash_seed` is the `PYTHONHASHSEED` environment value verbatim (`Some("0")`,
/// `Some("")`, ...) or `None` when unset. Unset with an SHA-256 algorithm hashes
/// `"vllm-none-hash"` (vLLM ≥ 0.29); unset with xxhash is random per engine process and
/// gives [`Error::UnreproducibleNoneHash`] (so does every unset seed on vLLM 0.17–0.28).
pub fn none_hash(algo: HashAlgo, python_hash_seed: Option<&str>) -> Result<Digest, Error> {
    let seed = match (python_hash_seed, algo) {
        (Some(s), _) => s,
        (None, HashAlgo::Sha256 | HashAlgo::Sha256Cbor) => UNSET_SEED_STRING,
        (None, HashAlgo::Xxhash | HashAlgo::XxhashCbor) => {
            return Err(Error::UnreproducibleNoneHash { algo: algo.name() })
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

/// The request's extra keys (spec §3). All empty = plain text (`extra_i` = null).
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

/// What is fixed for one request: algorithm, block size, NONE_HASH and extra keys.
///
/// Immutable, cheap to share (`Send + Sync`); hash with [`VllmHasher::block_hashes_u64`],
/// [`VllmHasher::block_hashes`], or keep a [`VllmChain`] across turns.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VllmHasher {
    algo: HashAlgo,
    block_size: usize,
    none_hash: Digest,
    extras: VllmExtras,
}

impl VllmHasher {
    /// A plain-text hasher. `python_hash_seed` as in [`none_hash`].
    pub fn new(
        algo: HashAlgo,
        block_size: usize,
        python_hash_seed: Option<&str>,
    ) -> Result<Self, Error> {
        if block_size == 0 {
            return Err(Error::ZeroBlockSize);
        }
        Ok(VllmHasher {
            algo,
            block_size,
            none_hash: none_hash(algo, python_hash_seed)?,
            extras: VllmExtras::default(),
        })
    }

    /// A hasher whose root parent is a given NONE_HASH (e.g. one read from a fixture).
    pub fn with_none_hash(
        algo: HashAlgo,
        block_size: usize,
        none_hash: Digest,
    ) -> Result<Self, Error> {
        if block_size == 0 {
            return Err(Error::ZeroBlockSize);
        }
        check_len(algo, &none_hash)?;
        Ok(VllmHasher {
            algo,
            block_size,
            none_hash,
            extras: VllmExtras::default(),
        })
    }

    /// The same hasher with these extra keys (validated: multimodal items sorted by offset,
    /// ranges within 63 bits).
    pub fn with_extras(mut self, extras: VllmExtras) -> Result<Self, Error> {
        extras.validate()?;
        self.extras = extras;
        Ok(self)
    }

    /// The algorithm.
    pub fn algo(&self) -> HashAlgo {
        self.algo
    }

    /// Tokens per hashed block.
    pub fn block_size(&self) -> usize {
        self.block_size
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

    /// Hashes the full blocks of `ids` into `out` (digests); stops when `out` is full.
    /// Returns the number written: `min(ids.len() / block_size, out.len())`.
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
        let blocks = (ids.len() / self.block_size).min(max_blocks);
        let used = ids.get(..blocks * self.block_size).unwrap_or(&[]);
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
/// the tokens of the current partial block, and the multimodal cursor.
///
/// `H` is anything that borrows a [`VllmHasher`]: `&VllmHasher` (from
/// [`VllmHasher::chain`]) or an owned/`Arc` hasher for a chain kept in a cache.
/// If [`VllmChain::extend`] fails, the chain may have advanced past some blocks; discard it.
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
        let cap = 48 + h.block_size * 9;
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
        let (algo, bs) = {
            let h = chain.hasher.borrow();
            (h.algo, h.block_size as u64)
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
            chain.keys.clear();
            let h = chain.hasher.borrow();
            chain.mm_cursor = mm_keys(
                &h.extras.mm_features,
                start,
                end,
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

    /// Tokens waiting in the current partial block.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Appends tokens; calls `sink` with the digest of every block that becomes full, in
    /// order. A trailing partial block is kept for the next call.
    pub fn extend<T: TokenId>(
        &mut self,
        tokens: &[T],
        mut sink: impl FnMut(Digest),
    ) -> Result<(), Error> {
        let bs = self.hasher.borrow().block_size;
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
            let r = self.hash_block(&mut fast, &pending);
            self.pending = pending;
            self.pending.clear();
            r?;
            sink(self.parent);
            rest = tail;
        }
        let mut blocks = rest.chunks_exact(bs);
        for block in &mut blocks {
            self.hash_block(&mut fast, block)?;
            sink(self.parent);
        }
        self.pending
            .extend(blocks.remainder().iter().map(|t| t.to_u64()));
        Ok(())
    }

    /// Appends tokens and returns the digests of the blocks that became full.
    pub fn extend_to_vec<T: TokenId>(&mut self, tokens: &[T]) -> Result<Vec<Digest>, Error> {
        let mut v = Vec::with_capacity(tokens.len() / self.hasher.borrow().block_size + 1);
        self.extend(tokens, |d| v.push(d))?;
        Ok(v)
    }

    /// The exact bytes fed to the digest for the next block if it consisted of `tokens`
    /// (which must be one block long), without advancing the chain. For tests and benches.
    pub fn serialize_next<T: TokenId>(&mut self, tokens: &[T]) -> Result<Vec<u8>, Error> {
        let cursor = self.mm_cursor;
        self.serialize(tokens)?;
        self.mm_cursor = cursor;
        Ok(self.buf.clone())
    }

    fn serialize<T: TokenId>(&mut self, tokens: &[T]) -> Result<u64, Error> {
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
        let start = *position;
        let end = start
            .checked_add(tokens.len() as u64)
            .ok_or(Error::PositionOverflow)?;
        keys.clear();
        buf.clear();
        let plain = h.extras.lora.is_none()
            && h.extras.mm_features.is_empty()
            && h.extras.prompt_embeds.is_none()
            && (start != 0 || h.extras.cache_salt.as_deref().is_none_or(str::is_empty));
        if !plain {
            if h.extras.lora.is_some() {
                keys.push(BlockKey::Lora);
            }
            *mm_cursor = mm_keys(&h.extras.mm_features, start, end, *mm_cursor, keys)?;
            if start == 0
                && h.extras
                    .cache_salt
                    .as_deref()
                    .is_some_and(|s| !s.is_empty())
            {
                keys.push(BlockKey::CacheSalt);
            }
            if let Some(e) = &h.extras.prompt_embeds {
                keys.push(BlockKey::PromptEmbeds(e.block_digest(start, end)?));
            }
        }
        if h.algo.is_cbor() {
            cbor::encode_block(buf, parent.as_bytes(), tokens, &h.extras, keys);
        } else {
            pickle::encode_block(buf, parent.as_bytes(), tokens, &h.extras, keys)?;
        }
        Ok(end)
    }

    /// The reusable stack buffer of the plain `sha256_cbor` path, when it applies (no extra
    /// keys, block size ≤ 64).
    #[inline]
    fn fast_path(&self) -> Option<cbor::PlainSha256Cbor> {
        let h: &VllmHasher = self.hasher.borrow();
        if h.algo == HashAlgo::Sha256Cbor && h.extras.is_plain() {
            cbor::PlainSha256Cbor::new(h.block_size)
        } else {
            None
        }
    }

    /// Hashes one block; the digest becomes `self.parent`.
    #[inline]
    fn hash_block<T: TokenId>(
        &mut self,
        fast: &mut Option<cbor::PlainSha256Cbor>,
        tokens: &[T],
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
        let end = self.serialize(tokens)?;
        self.parent = self.hasher.borrow().algo.digest(&self.buf);
        self.position = end;
        Ok(())
    }
}

/// vLLM's `_gen_mm_extra_hash_keys`: walks the items from `cur`, pushing a key for each
/// item the block `[start, end)` touches, and returns the cursor for the next block.
///
/// The cursor is carried from block 0, as vLLM does when it hashes a new request's prompt.
/// Not reproduced: for blocks completed later by *generated* tokens vLLM restarts the walk
/// at the last item only (`curr_mm_idx = -1`), which differs only when multimodal items
/// reach into the prompt's trailing partial block.
fn mm_keys(
    features: &[MmFeature],
    start: u64,
    end: u64,
    mut cur: usize,
    keys: &mut Vec<BlockKey>,
) -> Result<usize, Error> {
    while let Some(f) = features.get(cur) {
        let f_end = f
            .offset
            .checked_add(f.length)
            .ok_or(Error::MmOutOfRange { index: cur })?;
        if end > f.offset {
            if start > f_end {
                cur += 1;
                continue;
            }
            let rel = i64::try_from(f.offset as i128 - start as i128)
                .map_err(|_| Error::MmOutOfRange { index: cur })?;
            keys.push(BlockKey::Mm {
                index: cur,
                offset: rel,
            });
            if end >= f_end {
                cur += 1;
            } else {
                break;
            }
        } else {
            break;
        }
    }
    Ok(cur)
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
            Err(Error::UnreproducibleNoneHash { algo: "xxhash" })
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
