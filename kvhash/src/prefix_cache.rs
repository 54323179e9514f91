//! [`PrefixCache`]: block hashes of prefixes already seen, reused across requests (issue 9).
//!
//! A gateway sees every turn of a conversation, and turn k+1's token ids usually extend
//! turn k's. The chain makes this cheap to exploit exactly: block `i`'s digest is a function
//! of (configuration, digest of block `i-1`, tokens of block `i`) only. The cache maps
//! exactly that triple to the digest, like a trie whose nodes are named by the chain's own
//! digests:
//!
//! ```text
//! (config fingerprint, parent digest, block tokens) -> block digest
//! ```
//!
//! A lookup walks the request's blocks from NONE_HASH while entries are found; the chain is
//! resumed at the first miss and only the blocks after it are hashed (and inserted).
//!
//! Exactness does not depend on any non-cryptographic hash: entries are found through a
//! fast 64-bit key, but a hit requires the stored fingerprint (SHA-256 of the hasher's whole
//! configuration), the full parent digest and every token of the block to be equal. A key
//! collision is only a miss. Configurations are told apart by the SHA-256 fingerprint, and
//! prefixes by the chain's digests (SHA-256 or XXH3-128, as the engine itself relies on).
//!
//! Memory is bounded: `capacity` blocks in all, spread over [`SHARDS`] shards each behind
//! its own `Mutex` (no global lock), each evicting with the CLOCK rule (a block hit since
//! the hand last passed is spared once).
//!
//! Only vLLM chains are cached; SGLang and TensorRT-LLM hashers are computed in full on
//! every call (same results, counted as misses).
//!
//! ```
//! use kvhash::prefix_cache::PrefixCache;
//! use kvhash::vllm::{HashAlgo, VllmHasher};
//! use kvhash::BlockHasher;
//! let h: BlockHasher = VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0")).unwrap().into();
//! let cache = PrefixCache::new(10_000);
//! let turn1: Vec<u32> = (0..40).collect();
//! let turn2: Vec<u32> = (0..70).collect();
//! let mut out = [0u64; 8];
//! assert_eq!(cache.block_hashes_u64(&h, &turn1, &mut out).unwrap(), 2);
//! assert_eq!(cache.block_hashes_u64(&h, &turn2, &mut out).unwrap(), 4);
//! let mut plain = [0u64; 8];
//! h.block_hashes_u64(&turn2, &mut plain).unwrap();
//! assert_eq!(out, plain);
//! // Turn 2 hashed only its 2 new blocks.
//! assert_eq!(cache.stats().hashed, 4);
//! assert_eq!(cache.stats().reused, 2);
//! ```

use crate::vllm::{VllmChain, VllmHasher};
use crate::{BlockHasher, Digest, Error};
use sha2::Digest as _;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Number of shards (independent locks) of a [`PrefixCache`].
pub const SHARDS: usize = 16;

/// SHA-256 of a hasher's whole configuration (engine, algorithm, block size, NONE_HASH or
/// seed, extra keys, salt, LoRA, ...): what makes two hashers produce different chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConfigFingerprint([u8; 32]);

impl ConfigFingerprint {
    /// The fingerprint of `hasher`: SHA-256 of the stream its `Hash` implementation writes
    /// (every field, strings and vectors length-delimited).
    pub fn of(hasher: &BlockHasher) -> Self {
        let mut s = ShaStream(sha2::Sha256::new());
        hasher.hash(&mut s);
        ConfigFingerprint(s.0.finalize().into())
    }

    /// The fingerprint bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// A `Hasher` that feeds everything into SHA-256 (for [`ConfigFingerprint::of`]).
struct ShaStream(sha2::Sha256);

impl Hasher for ShaStream {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    fn finish(&self) -> u64 {
        0
    }
}

/// Counters of a [`PrefixCache`], since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Blocks whose digest was taken from the cache.
    pub reused: u64,
    /// Blocks that were hashed.
    pub hashed: u64,
    /// Entries evicted to stay within capacity.
    pub evicted: u64,
}

/// One cached block: the full key (checked on every hit) and the digest.
struct Entry {
    fp: ConfigFingerprint,
    parent: Digest,
    tokens: Tokens,
    digest: Digest,
    /// CLOCK bit: hit since the hand last passed.
    referenced: bool,
}

/// The 64-bit keys are already mixed; the map uses them as they are.
#[derive(Default)]
struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type Map = HashMap<u64, Entry, BuildHasherDefault<IdentityHasher>>;

/// One shard: the entries and the CLOCK ring of their keys.
#[derive(Default)]
struct Shard {
    map: Map,
    ring: Vec<u64>,
    hand: usize,
}

/// A bounded, sharded cache of vLLM block digests keyed by exact prefix (see the module
/// documentation). `Send + Sync`; share one per gateway (e.g. in an `Arc`).
pub struct PrefixCache {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
    reused: AtomicU64,
    hashed: AtomicU64,
    evicted: AtomicU64,
}

impl std::fmt::Debug for PrefixCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrefixCache")
            .field("capacity", &self.capacity())
            .field("stats", &self.stats())
            .finish()
    }
}

impl PrefixCache {
    /// A cache holding at most about `capacity` blocks (rounded up to a multiple of
    /// [`SHARDS`]); `0` caches nothing.
    pub fn new(capacity: usize) -> Self {
        PrefixCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            per_shard: capacity.div_ceil(SHARDS),
            reused: AtomicU64::new(0),
            hashed: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        }
    }

    /// Most blocks held at once.
    pub fn capacity(&self) -> usize {
        self.per_shard * SHARDS
    }

    /// Blocks held now.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map(|s| s.map.len()).unwrap_or(0))
            .sum()
    }

    /// Whether no block is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counters since the cache was made.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            reused: self.reused.load(Ordering::Relaxed),
            hashed: self.hashed.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
        }
    }

    /// Exactly what [`BlockHasher::block_hashes_u64`] returns for the same arguments,
    /// hashing only the blocks after the longest cached prefix of `ids`.
    pub fn block_hashes_u64(
        &self,
        hasher: &BlockHasher,
        ids: &[u32],
        out: &mut [u64],
    ) -> Result<usize, Error> {
        let BlockHasher::Vllm(h) = hasher else {
            let n = hasher.block_hashes_u64(ids, out)?;
            self.hashed.fetch_add(n as u64, Ordering::Relaxed);
            return Ok(n);
        };
        let fp = ConfigFingerprint::of(hasher);
        let mut n = 0;
        self.vllm_walk(h, &fp, ids, out.len(), |d| {
            if let Some(slot) = out.get_mut(n) {
                *slot = d.last8_be();
            }
            n += 1;
        })?;
        Ok(n)
    }

    /// Exactly what [`VllmHasher::block_hashes`] returns for the same arguments (full
    /// digests), hashing only the blocks after the longest cached prefix of `ids`.
    pub fn vllm_block_hashes(
        &self,
        hasher: &VllmHasher,
        ids: &[u32],
        out: &mut [Digest],
    ) -> Result<usize, Error> {
        let fp = ConfigFingerprint::of(&BlockHasher::Vllm(hasher.clone()));
        let mut n = 0;
        self.vllm_walk(hasher, &fp, ids, out.len(), |d| {
            if let Some(slot) = out.get_mut(n) {
                *slot = d;
            }
            n += 1;
        })?;
        Ok(n)
    }

    fn vllm_walk(
        &self,
        h: &VllmHasher,
        fp: &ConfigFingerprint,
        ids: &[u32],
        max_blocks: usize,
        mut sink: impl FnMut(Digest),
    ) -> Result<(), Error> {
        let bs = h.block_size();
        let blocks = (ids.len() / bs).min(max_blocks);
        let used = ids.get(..blocks * bs).unwrap_or(&[]);
        // Lookup keys of every block, computed up front from the tokens alone, so that the
        // probes below are independent of each other (and each shard is locked once).
        let keys = Self::keys(fp, used, bs);
        let mut found: Vec<Option<(Digest, Digest)>> = vec![None; blocks];
        for (s, shard) in self.shards.iter().enumerate() {
            if !keys.iter().any(|k| shard_of(*k) == s) {
                continue;
            }
            let Ok(mut shard) = shard.lock() else {
                continue;
            };
            for ((k, block), slot) in keys.iter().zip(used.chunks_exact(bs)).zip(&mut found) {
                if shard_of(*k) != s {
                    continue;
                }
                if let Some(e) = shard.map.get_mut(k) {
                    if e.fp == *fp && e.tokens.as_slice() == block {
                        e.referenced = true;
                        *slot = Some((e.parent, e.digest));
                    }
                }
            }
        }
        // Exactness by induction: block i is reused only if its entry's parent is the
        // verified digest of block i-1 (NONE_HASH for block 0) and its tokens are equal.
        let mut parent = h.none_hash();
        let mut done = 0usize;
        for f in &found {
            match f {
                Some((p, d)) if *p == parent => {
                    sink(*d);
                    parent = *d;
                    done += 1;
                }
                _ => break,
            }
        }
        self.reused.fetch_add(done as u64, Ordering::Relaxed);
        if done == blocks {
            return Ok(());
        }
        let start = used.get(done * bs..).unwrap_or(&[]);
        let digests = VllmChain::resume(h, parent, (done * bs) as u64)?.extend_to_vec(start)?;
        let mut new = Vec::with_capacity(digests.len());
        for ((block, d), k) in start
            .chunks_exact(bs)
            .zip(digests)
            .zip(keys.get(done..).unwrap_or(&[]))
        {
            new.push((*k, parent, block, d));
            sink(d);
            parent = d;
        }
        self.hashed
            .fetch_add((blocks - done) as u64, Ordering::Relaxed);
        self.insert_all(fp, &new);
        Ok(())
    }

    /// The 64-bit lookup key of every full block of `used`: a mix of the fingerprint and
    /// all tokens up to the block's end (only a hint: hits are verified in full).
    fn keys(fp: &ConfigFingerprint, used: &[u32], bs: usize) -> Vec<u64> {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let f = fp.0;
        let mut x = u64::from_le_bytes([f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]]);
        let mut keys = Vec::with_capacity(used.len() / bs.max(1));
        for block in used.chunks_exact(bs) {
            for pair in block.chunks(2) {
                let a = pair.first().copied().unwrap_or(0);
                let b = pair.get(1).copied().unwrap_or(u32::MAX);
                x = (x ^ (u64::from(a) | (u64::from(b) << 32))).wrapping_mul(K);
                x ^= x >> 29;
            }
            let mut y = (x ^ block.len() as u64).wrapping_mul(K);
            y ^= y >> 32;
            keys.push(y);
        }
        keys
    }

    /// Inserts new blocks `(key, parent, tokens, digest)`, locking each shard once.
    fn insert_all(&self, fp: &ConfigFingerprint, new: &[(u64, Digest, &[u32], Digest)]) {
        if self.per_shard == 0 {
            return;
        }
        for (s, shard) in self.shards.iter().enumerate() {
            if !new.iter().any(|n| shard_of(n.0) == s) {
                continue;
            }
            let Ok(mut guard) = shard.lock() else {
                continue;
            };
            for (k, parent, tokens, digest) in new {
                if shard_of(*k) != s {
                    continue;
                }
                let entry = Entry {
                    fp: *fp,
                    parent: *parent,
                    tokens: Tokens::new(tokens),
                    digest: *digest,
                    referenced: false,
                };
                if self.insert_one(&mut guard, *k, entry) {
                    self.evicted.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Inserts one entry into a locked shard; returns whether another was evicted.
    fn insert_one(&self, shard: &mut Shard, k: u64, entry: Entry) -> bool {
        if let Some(e) = shard.map.get_mut(&k) {
            // Same key: the same block again, or a 64-bit collision; the newest wins.
            *e = entry;
            return false;
        }
        if shard.ring.len() < self.per_shard {
            shard.ring.push(k);
            shard.map.insert(k, entry);
            return false;
        }
        // CLOCK: spare each referenced entry once; two laps at most.
        let n = shard.ring.len();
        for _ in 0..2 * n {
            let hand = shard.hand % n;
            shard.hand = (hand + 1) % n;
            let Some(old) = shard.ring.get(hand).copied() else {
                return false;
            };
            match shard.map.get_mut(&old) {
                Some(e) if e.referenced => e.referenced = false,
                _ => {
                    shard.map.remove(&old);
                    if let Some(slot) = shard.ring.get_mut(hand) {
                        *slot = k;
                    }
                    shard.map.insert(k, entry);
                    return true;
                }
            }
        }
        false
    }
}

/// The shard of a lookup key.
#[inline]
fn shard_of(k: u64) -> usize {
    (k >> 60) as usize % SHARDS
}

/// A block's tokens, inline up to 16 (vLLM's default block size), else on the heap.
enum Tokens {
    Inline { len: u8, ids: [u32; 16] },
    Heap(Box<[u32]>),
}

impl Tokens {
    fn new(t: &[u32]) -> Self {
        let mut ids = [0u32; 16];
        match ids.get_mut(..t.len()) {
            Some(dst) => {
                dst.copy_from_slice(t);
                Tokens::Inline {
                    len: t.len() as u8,
                    ids,
                }
            }
            None => Tokens::Heap(t.into()),
        }
    }

    fn as_slice(&self) -> &[u32] {
        match self {
            Tokens::Inline { len, ids } => ids.get(..usize::from(*len)).unwrap_or(&[]),
            Tokens::Heap(b) => b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_sync() {
        fn f<T: Send + Sync>() {}
        f::<PrefixCache>();
    }
}
