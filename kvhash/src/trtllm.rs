//! TensorRT-LLM's V1 block-key hash (target 1.3.0rc29; `docs/contracts/trtllm.md` §2–5).
//!
//! A 64-bit hash per block of `tokens_per_block` tokens, chained through the parent's hash
//! (0 for the first block). Partial trailing blocks are hashed too (with their real length)
//! but never match a later full block, so routing uses full blocks only
//! ([`TrtllmHasher::block_hashes_u64`]); [`TrtllmChain::partial_hash`] gives the tail.
//!
//! The trap: `mix32` adds `0x9E3779B9` **in 32 bits** before widening (docs/contracts/trtllm.md §3/§10).
//!
//! ```
//! use kvhash::trtllm::TrtllmHasher;
//! let h = TrtllmHasher::new(2).unwrap();
//! let mut chain = h.chain();
//! let mut full = Vec::new();
//! chain.extend(&[1, 2, 3], |x| full.push(x)).unwrap();
//! assert_eq!(full, [226568388523]);
//! assert_eq!(chain.partial_hash(), Some(11698258173249394544));
//! ```

use crate::Error;
use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;

const GOLDEN: u32 = 0x9E37_79B9;
const PARENT_MUL: u64 = 0xBF58_476D_1CE4_E5B9;

#[inline(always)]
fn fin32(mut x: u32) -> u32 {
    x = ((x >> 16) ^ x).wrapping_mul(0x045D_9F3B);
    x = ((x >> 16) ^ x).wrapping_mul(0x045D_9F3B);
    (x >> 16) ^ x
}

#[inline(always)]
fn fin64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[inline(always)]
fn absorb(seed: u64, v: u64) -> u64 {
    seed ^ v.wrapping_add(seed << 6).wrapping_add(seed >> 2)
}

#[inline(always)]
fn mix32(seed: u64, x: u32) -> u64 {
    absorb(seed, fin32(x).wrapping_add(GOLDEN) as u64)
}

#[inline(always)]
fn mix64(seed: u64, x: u64) -> u64 {
    absorb(seed, fin64(x).wrapping_add(GOLDEN as u64))
}

/// How the cache salt string becomes the 64-bit value mixed into block 0 (docs/contracts/trtllm.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaltVariant {
    /// libstdc++ `std::hash<std::string>` of the UTF-8 bytes: 1.3.0rc (2026) builds,
    /// believed to be 1.3.0rc29. Vector name `std_hash_string`.
    StdHashString,
    /// First 8 bytes of BLAKE3(salt), little-endian: V1 builds 1.1 – 1.2.x and early 1.3.
    /// Vector name `blake3_salt_id`.
    Blake3SaltId,
}

impl SaltVariant {
    /// The name used in the vectors' `cache_salt_mode`.
    pub const fn name(self) -> &'static str {
        match self {
            SaltVariant::StdHashString => "std_hash_string",
            SaltVariant::Blake3SaltId => "blake3_salt_id",
        }
    }

    /// The 64-bit salt value of `salt`.
    pub fn salt_value(self, salt: &str) -> u64 {
        match self {
            SaltVariant::StdHashString => std_hash_bytes(salt.as_bytes()),
            SaltVariant::Blake3SaltId => {
                let h = blake3::hash(salt.as_bytes());
                let mut w = [0u8; 8];
                w.copy_from_slice(&h.as_bytes()[..8]);
                u64::from_le_bytes(w)
            }
        }
    }
}

impl fmt::Display for SaltVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SaltVariant {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "std_hash_string" => Ok(SaltVariant::StdHashString),
            "blake3_salt_id" => Ok(SaltVariant::Blake3SaltId),
            _ => Err(Error::UnknownName {
                what: "TensorRT-LLM cache salt variant",
                name: s.to_string(),
            }),
        }
    }
}

/// libstdc++'s `_Hash_bytes(p, len, 0xc70f6907)` (64-bit), i.e. `std::hash<std::string>`.
pub fn std_hash_bytes(data: &[u8]) -> u64 {
    const M: u64 = 0xC6A4_A793_5BD1_E995;
    fn shift(v: u64) -> u64 {
        v ^ (v >> 47)
    }
    let mut h = 0xC70F_6907u64 ^ (data.len() as u64).wrapping_mul(M);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        let w = shift(u64::from_le_bytes(b).wrapping_mul(M)).wrapping_mul(M);
        h = (h ^ w).wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        let mut b = [0u8; 8];
        b[..tail.len()].copy_from_slice(tail);
        h = (h ^ u64::from_le_bytes(b)).wrapping_mul(M);
    }
    shift(shift(h).wrapping_mul(M))
}

/// One multimodal item: its 32-byte content digest and prompt range `[start, start + length)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MmItem {
    /// Content digest, in byte order.
    pub digest: [u8; 32],
    /// First prompt position.
    pub start: u64,
    /// Number of positions.
    pub length: u64,
}

/// One multimodal key of one block as a stored block publishes it (`mm_keys[]`): the item's
/// 32-byte content digest and the offset inside the item where the block starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockMmKey {
    /// Content digest, in byte order (the 64 hex digits of `mm_keys[].hash`).
    pub digest: [u8; 32],
    /// `mm_keys[].start_offset`.
    pub start_offset: u64,
}

/// Step 5 of the hash for one item: its digest as eight little-endian 32-bit words, then the
/// offset.
#[inline]
fn mix_mm(mut seed: u64, digest: &[u8; 32], offset: u64) -> u64 {
    for w in digest.chunks_exact(4) {
        let mut b = [0u8; 4];
        b.copy_from_slice(w);
        seed = mix32(seed, u32::from_le_bytes(b));
    }
    mix64(seed, offset)
}

/// Converts ids given as signed or wide integers to the 32-bit pattern TensorRT-LLM hashes:
/// `-2^31..2^32` is accepted (`-1294967296` and `3000000000` are the same token).
pub fn token_bits<T: Copy + Into<i128>>(ids: &[T], out: &mut Vec<u32>) -> Result<(), Error> {
    out.reserve(ids.len());
    for (index, t) in ids.iter().enumerate() {
        let v: i128 = (*t).into();
        if !(i32::MIN as i128..=u32::MAX as i128).contains(&v) {
            return Err(Error::TokenIdOutOfRange {
                engine: "trtllm",
                index,
                value: v,
                range: "-2^31..2^32",
            });
        }
        out.push(v as u32);
    }
    Ok(())
}

/// What is fixed for one request: block size, salt, LoRA task id, extra-id use and
/// multimodal items.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TrtllmHasher {
    tokens_per_block: usize,
    salt: Option<u64>,
    lora_task_id: Option<u64>,
    uses_extra_ids: bool,
    mm_items: Vec<MmItem>,
}

impl TrtllmHasher {
    /// A plain hasher with `tokens_per_block` tokens per block.
    pub fn new(tokens_per_block: usize) -> Result<Self, Error> {
        if tokens_per_block == 0 {
            return Err(Error::ZeroBlockSize);
        }
        Ok(TrtllmHasher {
            tokens_per_block,
            salt: None,
            lora_task_id: None,
            uses_extra_ids: false,
            mm_items: Vec::new(),
        })
    }

    /// The same hasher with a cache salt string, turned into its value by `variant`.
    /// Empty salts are refused ([`Error::EmptyCacheSalt`]): the engine's behaviour is not
    /// established.
    pub fn with_cache_salt(self, variant: SaltVariant, salt: &str) -> Result<Self, Error> {
        if salt.is_empty() {
            return Err(Error::EmptyCacheSalt { engine: "trtllm" });
        }
        Ok(self.with_salt_value(variant.salt_value(salt)))
    }

    /// The same hasher with a precomputed 64-bit salt value.
    pub fn with_salt_value(mut self, value: u64) -> Self {
        self.salt = Some(value);
        self
    }

    /// The same hasher with a LoRA task id (mixed into every block).
    pub fn with_lora_task_id(mut self, id: u64) -> Self {
        self.lora_task_id = Some(id);
        self
    }

    /// The same hasher for a request that carried `input_token_extra_ids`: one extra id
    /// per token must then be given ([`TrtllmChain::extend_with_extra_ids`]).
    pub fn with_extra_ids(mut self, uses: bool) -> Self {
        self.uses_extra_ids = uses;
        self
    }

    /// The same hasher with multimodal items (ranges must fit in 64 bits).
    pub fn with_mm_items(mut self, items: Vec<MmItem>) -> Result<Self, Error> {
        for (index, it) in items.iter().enumerate() {
            if it.start.checked_add(it.length).is_none() {
                return Err(Error::MmOutOfRange { index });
            }
        }
        self.mm_items = items;
        Ok(self)
    }

    /// Tokens per block.
    pub fn tokens_per_block(&self) -> usize {
        self.tokens_per_block
    }

    /// Whether extra ids are mixed.
    pub fn uses_extra_ids(&self) -> bool {
        self.uses_extra_ids
    }

    /// A fresh chain borrowing this hasher.
    pub fn chain(&self) -> TrtllmChain<&TrtllmHasher> {
        TrtllmChain::new(self)
    }

    /// The hash of one block starting at token position `start` whose parent hash is
    /// `parent` (0 for the first block). `extra_ids` must be given (one per token) exactly
    /// when the hasher uses extra ids.
    pub fn block_hash(
        &self,
        parent: u64,
        start: u64,
        tokens: &[u32],
        extra_ids: Option<&[u64]>,
    ) -> Result<u64, Error> {
        let extra = self.check_extra(tokens.len(), extra_ids)?;
        self.hash(parent, start, tokens, extra)
    }

    fn check_extra<'a>(
        &self,
        n: usize,
        extra_ids: Option<&'a [u64]>,
    ) -> Result<Option<&'a [u64]>, Error> {
        match (self.uses_extra_ids, extra_ids) {
            (true, Some(e)) if e.len() == n => Ok(Some(e)),
            (true, Some(_)) => Err(Error::ExtraIds {
                reason: "not one extra id per token",
            }),
            (true, None) => Err(Error::ExtraIds {
                reason: "the hasher uses extra ids but none were given",
            }),
            (false, Some(_)) => Err(Error::ExtraIds {
                reason: "extra ids given to a hasher that does not use them",
            }),
            (false, None) => Ok(None),
        }
    }

    /// The hash of one block with its multimodal keys given explicitly, in item order (as a
    /// stored block's `mm_keys` lists them: the item's content digest and the offset inside
    /// the item where the block starts) instead of derived from the hasher's items and the
    /// block's position: what re-deriving a published block needs. The hasher's own items are
    /// not used; salt, LoRA task id and extra ids are, as in [`TrtllmHasher::block_hash`].
    pub fn block_hash_with_mm_keys(
        &self,
        parent: u64,
        tokens: &[u32],
        extra_ids: Option<&[u64]>,
        mm_keys: &[BlockMmKey],
    ) -> Result<u64, Error> {
        let extra = self.check_extra(tokens.len(), extra_ids)?;
        let mut seed = self.hash_tokens(parent, tokens, extra);
        for k in mm_keys {
            seed = mix_mm(seed, &k.digest, k.start_offset);
        }
        Ok(seed)
    }

    #[inline]
    fn hash(
        &self,
        parent: u64,
        start: u64,
        tokens: &[u32],
        extra: Option<&[u64]>,
    ) -> Result<u64, Error> {
        let n = tokens.len() as u64;
        let mut seed = self.hash_tokens(parent, tokens, extra);
        if !self.mm_items.is_empty() {
            let end = start.checked_add(n).ok_or(Error::PositionOverflow)?;
            for it in &self.mm_items {
                let it_end = it.start.saturating_add(it.length);
                if end > it.start && start < it_end {
                    seed = mix_mm(seed, &it.digest, start.saturating_sub(it.start));
                }
            }
        }
        Ok(seed)
    }

    /// Steps 1–4 of the hash: length and parent, salt (first block), tokens with their extra
    /// ids, LoRA task id.
    #[inline]
    fn hash_tokens(&self, parent: u64, tokens: &[u32], extra: Option<&[u64]>) -> u64 {
        let n = tokens.len() as u64;
        let mut seed = n ^ parent.wrapping_mul(PARENT_MUL);
        if parent == 0 {
            if let Some(s) = self.salt {
                seed = mix64(seed, s);
            }
        }
        match extra {
            Some(extra) => {
                for (t, e) in tokens.iter().zip(extra) {
                    seed = mix32(seed, *t);
                    seed = mix64(seed, *e);
                }
            }
            None => {
                for t in tokens {
                    seed = mix32(seed, *t);
                }
            }
        }
        if let Some(l) = self.lora_task_id {
            seed = mix64(seed, l);
        }
        seed
    }

    /// Hashes of the full blocks of `ids` into `out`; stops when `out` is full. Returns the
    /// number written. For a hasher that uses extra ids see
    /// [`TrtllmHasher::block_hashes_u64_with_extra_ids`].
    pub fn block_hashes_u64(&self, ids: &[u32], out: &mut [u64]) -> Result<usize, Error> {
        self.one_shot(ids, None, out)
    }

    /// As [`TrtllmHasher::block_hashes_u64`] with one extra id per token.
    pub fn block_hashes_u64_with_extra_ids(
        &self,
        ids: &[u32],
        extra_ids: &[u64],
        out: &mut [u64],
    ) -> Result<usize, Error> {
        self.one_shot(ids, Some(extra_ids), out)
    }

    fn one_shot(
        &self,
        ids: &[u32],
        extra: Option<&[u64]>,
        out: &mut [u64],
    ) -> Result<usize, Error> {
        let extra = self.check_extra(ids.len(), extra)?;
        let t = self.tokens_per_block;
        let mut parent = 0u64;
        let mut n = 0;
        for (i, (block, slot)) in ids.chunks_exact(t).zip(out.iter_mut()).enumerate() {
            let e = match extra {
                Some(e) => e.get(i * t..(i + 1) * t),
                None => None,
            };
            parent = self.hash(parent, (i * t) as u64, block, e)?;
            *slot = parent;
            n += 1;
        }
        Ok(n)
    }
}

/// The running state of one token sequence: parent hash, position, and the current
/// partial block (tokens and extra ids).
#[derive(Debug, Clone)]
pub struct TrtllmChain<H: Borrow<TrtllmHasher>> {
    hasher: H,
    parent: u64,
    position: u64,
    pending: Vec<u32>,
    pending_extra: Vec<u64>,
}

impl<H: Borrow<TrtllmHasher>> TrtllmChain<H> {
    /// A chain before block 0 (parent 0).
    pub fn new(hasher: H) -> Self {
        TrtllmChain {
            hasher,
            parent: 0,
            position: 0,
            pending: Vec::new(),
            pending_extra: Vec::new(),
        }
    }

    /// A chain resumed after `position` tokens (a block boundary) whose last hash is `parent`.
    pub fn resume(hasher: H, parent: u64, position: u64) -> Result<Self, Error> {
        let bs = hasher.borrow().tokens_per_block;
        if !position.is_multiple_of(bs as u64) {
            return Err(Error::MisalignedPosition {
                position,
                block_size: bs,
            });
        }
        let mut c = TrtllmChain::new(hasher);
        c.parent = parent;
        c.position = position;
        Ok(c)
    }

    /// Hash of the last full block (0 before block 0).
    pub fn parent(&self) -> u64 {
        self.parent
    }

    /// Tokens covered by full blocks so far.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Appends tokens (hasher without extra ids); calls `sink` with each full block's hash.
    pub fn extend(&mut self, ids: &[u32], sink: impl FnMut(u64)) -> Result<(), Error> {
        self.hasher.borrow().check_extra(ids.len(), None)?;
        self.feed(ids, None, sink)
    }

    /// Appends tokens with one extra id each (hasher with extra ids).
    pub fn extend_with_extra_ids(
        &mut self,
        ids: &[u32],
        extra_ids: &[u64],
        sink: impl FnMut(u64),
    ) -> Result<(), Error> {
        self.hasher
            .borrow()
            .check_extra(ids.len(), Some(extra_ids))?;
        self.feed(ids, Some(extra_ids), sink)
    }

    /// The hash of the current partial block (what the engine would emit for it), or `None`
    /// when there is none.
    pub fn partial_hash(&self) -> Option<u64> {
        if self.pending.is_empty() {
            return None;
        }
        let h = self.hasher.borrow();
        let extra = h.uses_extra_ids.then_some(&self.pending_extra[..]);
        h.hash(self.parent, self.position, &self.pending, extra)
            .ok()
    }

    fn feed(
        &mut self,
        ids: &[u32],
        extra: Option<&[u64]>,
        mut sink: impl FnMut(u64),
    ) -> Result<(), Error> {
        let h: &TrtllmHasher = self.hasher.borrow();
        let t = h.tokens_per_block;
        let mut rest = ids;
        let mut rest_extra = extra;
        if !self.pending.is_empty() {
            let take = (t - self.pending.len()).min(rest.len());
            self.pending
                .extend_from_slice(rest.get(..take).unwrap_or(&[]));
            rest = rest.get(take..).unwrap_or(&[]);
            if let Some(e) = rest_extra {
                self.pending_extra
                    .extend_from_slice(e.get(..take).unwrap_or(&[]));
                rest_extra = e.get(take..);
            }
            if self.pending.len() < t {
                return Ok(());
            }
            let ex = h.uses_extra_ids.then_some(&self.pending_extra[..]);
            self.parent = h.hash(self.parent, self.position, &self.pending, ex)?;
            self.position += t as u64;
            self.pending.clear();
            self.pending_extra.clear();
            sink(self.parent);
        }
        let mut blocks = rest.chunks_exact(t);
        for (i, block) in (&mut blocks).enumerate() {
            let ex = rest_extra.and_then(|e| e.get(i * t..(i + 1) * t));
            self.parent = h.hash(self.parent, self.position, block, ex)?;
            self.position = self
                .position
                .checked_add(t as u64)
                .ok_or(Error::PositionOverflow)?;
            sink(self.parent);
        }
        let rem = blocks.remainder();
        self.pending.extend_from_slice(rem);
        if let Some(e) = rest_extra {
            self.pending_extra
                .extend_from_slice(e.get(e.len() - rem.len()..).unwrap_or(&[]));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salt_values() {
        assert_eq!(
            SaltVariant::StdHashString.salt_value("tenant-A"),
            11647872923530560891
        );
        assert_eq!(
            SaltVariant::Blake3SaltId.salt_value("tenant-A"),
            11905099046384790080
        );
    }

    #[test]
    fn wrap_trap() {
        // fin32(2) + golden overflows 32 bits; the spec's worked example depends on the wrap.
        assert_eq!(fin32(2), 0x66A7_9298);
        assert_eq!(mix32(2, 1) & 0xffff_ffff, 0xCF5C_95E2);
    }

    #[test]
    fn explicit_mm_keys_give_the_positional_hashes() {
        // Item of 40 positions from 10: blocks of 32 at 0 and 32 touch it at offsets 0 and 22.
        let item = MmItem {
            digest: std::array::from_fn(|i| i as u8 * 7),
            start: 10,
            length: 40,
        };
        let h = TrtllmHasher::new(32)
            .unwrap()
            .with_cache_salt(SaltVariant::StdHashString, "tenant-A")
            .unwrap()
            .with_mm_items(vec![item.clone()])
            .unwrap();
        let ids: Vec<u32> = (0..64).map(|i| 900 + i).collect();
        let mut want = [0u64; 2];
        assert_eq!(h.block_hashes_u64(&ids, &mut want).unwrap(), 2);
        let key = |start_offset| BlockMmKey {
            digest: item.digest,
            start_offset,
        };
        let b0 = h
            .block_hash_with_mm_keys(0, &ids[..32], None, &[key(0)])
            .unwrap();
        let b1 = h
            .block_hash_with_mm_keys(b0, &ids[32..], None, &[key(22)])
            .unwrap();
        assert_eq!([b0, b1], want);
        // Without keys it is the plain (salted) hash.
        let plain = TrtllmHasher::new(32)
            .unwrap()
            .with_cache_salt(SaltVariant::StdHashString, "tenant-A")
            .unwrap();
        assert_eq!(
            h.block_hash_with_mm_keys(0, &ids[..32], None, &[]).unwrap(),
            plain.block_hash(0, 0, &ids[..32], None).unwrap()
        );
    }

    #[test]
    fn token_bits_range() {
        let mut v = Vec::new();
        token_bits(&[-1294967296i64, 3000000000], &mut v).unwrap();
        assert_eq!(v, [3000000000, 3000000000]);
        assert!(token_bits(&[1i64 << 32], &mut v).is_err());
    }
}
