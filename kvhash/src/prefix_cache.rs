//! [`PrefixCache`]: block hashes of prefixes already seen, reused across requests.
//!
//! A gateway sees every turn of a conversation, and turn k+1's token ids usually extend
//! turn k's. The chain makes this cheap to exploit exactly: block `i`'s digest is a function
//! of (configuration, digest of block `i-1`, tokens of block `i`) only. Two layers:
//!
//! 1. **Block entries** (a trie whose nodes are named by the chain's own digests):
//!    `(config fingerprint, parent digest, block tokens) -> block digest`, in [`SHARDS`]
//!    shards, each behind its own `Mutex` (no global lock), each evicting with the CLOCK
//!    rule (an entry hit since the hand last passed is spared once); `capacity` entries in
//!    all. Entries are found through a 64-bit key mixed from the fingerprint and the
//!    tokens up to the block's end (computed up front, so the probes of one request are
//!    independent and each shard is locked once per request); a block is reused only if
//!    the stored fingerprint, parent and tokens are equal — the parent being the digest
//!    already verified for block `i-1` (NONE_HASH for block 0). By induction every reused
//!    digest is exactly the chain's.
//! 2. **Recent requests** (at most [`MEMOS`], `capacity` blocks in all): the full-block ids
//!    of a request with all its digests. A request that extends one of them (compared token
//!    for token, one `memcmp`) takes that many digests at once, without a lookup per block;
//!    this is what makes a 40-turn conversation cheap. A request replaces the memo it
//!    extended. Memos are sharded too ([`SHARDS`] locks, [`MEMOS`]` / SHARDS` memos each),
//!    by the lookup key of the request's first block: two requests sharing any prefix share
//!    that block, so they meet in the same shard, and unrelated conversations never wait
//!    for each other's lock.
//!
//! The chain is resumed after the longest verified prefix and only the blocks after it are
//! hashed (and inserted). Exactness never depends on a non-cryptographic hash: the 64-bit
//! keys only find candidates, and a key collision is only a miss. Configurations are told
//! apart by [`ConfigFingerprint`] (SHA-256 of the hasher's whole configuration), prefixes
//! by comparing tokens and the chain's digests (SHA-256 or XXH3-128, as the engine itself
//! relies on). Memory: at most about `2 × capacity` blocks (entries plus memos);
//! [`PrefixCache::bytes_held`] says how much is held now.
//!
//! Only vLLM chains without look-ahead are cached; SGLang, TensorRT-LLM and look-ahead
//! hashers (whose block digest also depends on the tokens after the block) are computed in
//! full on every call (same results, counted as hashed).
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
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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

/// Counters of a [`PrefixCache`], since it was made ([`PrefixCache::clear`] keeps them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Blocks whose digest was taken from the cache.
    pub reused: u64,
    /// Blocks that were hashed.
    pub hashed: u64,
    /// Entries evicted to stay within capacity.
    pub evicted: u64,
}

/// Most recent requests remembered whole (see [`PrefixCache`]), over all memo shards.
pub const MEMOS: usize = 128;

/// Memos per shard.
const MEMOS_PER_SHARD: usize = MEMOS / SHARDS;

/// A recent request: its full-block ids, their digests and lookup keys.
struct Memo {
    fp: ConfigFingerprint,
    ids: Box<[u32]>,
    digests: Box<[Digest]>,
    keys: Box<[u64]>,
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
    memos: Vec<Mutex<VecDeque<Arc<Memo>>>>,
    /// Blocks held by all memos.
    memo_blocks: AtomicUsize,
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
            memos: (0..SHARDS).map(|_| Mutex::new(VecDeque::new())).collect(),
            memo_blocks: AtomicUsize::new(0),
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

    /// Drops every entry and memo (the counters are kept; dropped entries are not counted
    /// as evicted). Results are unchanged: later requests hash their blocks again.
    pub fn clear(&self) {
        for s in &self.shards {
            if let Ok(mut s) = s.lock() {
                *s = Shard::default();
            }
        }
        for m in &self.memos {
            if let Ok(mut m) = m.lock() {
                let blocks: usize = m.iter().map(|x| x.digests.len()).sum();
                m.clear();
                self.memo_blocks.fetch_sub(blocks, Ordering::Relaxed);
            }
        }
    }

    /// Heap bytes held now: an estimate from the tables' allocated capacity and the memos'
    /// lengths (locks each shard in turn: meant for metrics, not the hot path). Bounded by
    /// about [`PrefixCache::capacity`] × (2 × [`PrefixCache::ENTRY_BYTES`], as a table may
    /// be up to half empty after growing, + `4 × block size + 48` for the memos).
    pub fn bytes_held(&self) -> usize {
        let slot = std::mem::size_of::<(u64, Entry)>() + 1;
        let tables: usize = self
            .shards
            .iter()
            .map(|s| {
                s.lock().map_or(0, |s| {
                    let heap: usize = s
                        .map
                        .values()
                        .map(|e| match &e.tokens {
                            Tokens::Inline { .. } => 0,
                            Tokens::Heap(b) => 4 * b.len(),
                        })
                        .sum();
                    // The table allocates about 8/7 slots per element it can hold.
                    s.map.capacity() * slot * 8 / 7 + s.ring.capacity() * 8 + heap
                })
            })
            .sum();
        let memos: usize = self
            .memos
            .iter()
            .map(|m| {
                m.lock().map_or(0, |m| {
                    m.iter()
                        .map(|x| {
                            std::mem::size_of::<Memo>()
                                + 4 * x.ids.len()
                                + std::mem::size_of::<Digest>() * x.digests.len()
                                + 8 * x.keys.len()
                        })
                        .sum::<usize>()
                })
            })
            .sum();
        tables + memos
    }

    /// Bytes one block entry takes: its table slot (at the table's 7/8 load factor) and its
    /// place in the CLOCK ring; block sizes above 16 add `4 × block size` on the heap.
    pub const ENTRY_BYTES: usize = (std::mem::size_of::<(u64, Entry)>() + 1) * 8 / 7 + 8;

    /// Exactly what [`BlockHasher::block_hashes_u64`] returns for the same arguments,
    /// hashing only the blocks after the longest cached prefix of `ids`.
    pub fn block_hashes_u64(
        &self,
        hasher: &BlockHasher,
        ids: &[u32],
        out: &mut [u64],
    ) -> Result<usize, Error> {
        let h = match hasher {
            BlockHasher::Vllm(h) if h.lookahead() == 0 => h,
            _ => {
                let n = hasher.block_hashes_u64(ids, out)?;
                self.hashed.fetch_add(n as u64, Ordering::Relaxed);
                return Ok(n);
            }
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
        if hasher.lookahead() > 0 {
            let n = hasher.block_hashes(ids, out)?;
            self.hashed.fetch_add(n as u64, Ordering::Relaxed);
            return Ok(n);
        }
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
        let mut keys = Vec::with_capacity(blocks);
        let mut digests: Vec<Digest> = Vec::with_capacity(blocks);
        // 1. The longest prefix shared with a recent request (verified token by token), in
        //    the memo shard of the first block (every request sharing a prefix has it).
        let memo_shard = {
            let mut k0 = Vec::with_capacity(1);
            extend_keys(key_seed(fp), used.get(..bs).unwrap_or(&[]), bs, &mut k0);
            k0.first().map(|k| shard_of(*k))
        };
        let memo = memo_shard.and_then(|s| self.best_memo(s, fp, used, bs));
        if let Some((memo, m)) = &memo {
            keys.extend_from_slice(memo.keys.get(..*m).unwrap_or(&[]));
            digests.extend_from_slice(memo.digests.get(..*m).unwrap_or(&[]));
        }
        let from_memo = digests.len();
        // 2. Block entries after it. Lookup keys are computed from the tokens alone, so the
        //    probes are independent of each other and each shard is locked once.
        let x = keys.last().copied().unwrap_or_else(|| key_seed(fp));
        extend_keys(x, used.get(from_memo * bs..).unwrap_or(&[]), bs, &mut keys);
        let tail_keys = keys.get(from_memo..).unwrap_or(&[]);
        let mut found: Vec<Option<(Digest, Digest)>> = vec![None; tail_keys.len()];
        for (s, group) in by_shard(tail_keys).iter().enumerate() {
            if group.is_empty() {
                continue;
            }
            let Some(Ok(mut shard)) = self.shards.get(s).map(Mutex::lock) else {
                continue;
            };
            for &j in group {
                let i = from_memo + j;
                let (Some(k), Some(block), Some(slot)) = (
                    tail_keys.get(j),
                    used.get(i * bs..(i + 1) * bs),
                    found.get_mut(j),
                ) else {
                    continue;
                };
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
        let mut parent = digests.last().copied().unwrap_or_else(|| h.none_hash());
        for f in &found {
            match f {
                Some((p, d)) if *p == parent => {
                    digests.push(*d);
                    parent = *d;
                }
                _ => break,
            }
        }
        let done = digests.len();
        self.reused.fetch_add(done as u64, Ordering::Relaxed);
        // 3. Hash the rest, from the last known digest.
        if done < blocks {
            let start = used.get(done * bs..).unwrap_or(&[]);
            let fresh = VllmChain::resume(h, parent, (done * bs) as u64)?.extend_to_vec(start)?;
            let mut new = Vec::with_capacity(fresh.len());
            for ((block, d), k) in start
                .chunks_exact(bs)
                .zip(fresh)
                .zip(keys.get(done..).unwrap_or(&[]))
            {
                new.push((*k, parent, block, d));
                digests.push(d);
                parent = d;
            }
            self.hashed
                .fetch_add((blocks - done) as u64, Ordering::Relaxed);
            self.insert_all(fp, &new);
        }
        for d in &digests {
            sink(*d);
        }
        if let Some(s) = memo_shard {
            self.remember(s, fp, used, digests, keys, memo);
        }
        Ok(())
    }

    /// The recent request sharing the most full blocks with `used` (same configuration),
    /// and that number of blocks; `None` if none shares any.
    fn best_memo(
        &self,
        shard: usize,
        fp: &ConfigFingerprint,
        used: &[u32],
        bs: usize,
    ) -> Option<(Arc<Memo>, usize)> {
        let candidates: Vec<Arc<Memo>> = {
            let memos = self.memos.get(shard)?.lock().ok()?;
            memos.iter().filter(|m| m.fp == *fp).cloned().collect()
        };
        let mut best: Option<(Arc<Memo>, usize)> = None;
        for m in candidates {
            let both = m.ids.len().min(used.len());
            // One comparison for the common case (one request extends the other), block
            // by block otherwise.
            let whole = m.ids.get(..both) == used.get(..both);
            let blocks = if whole {
                both / bs
            } else {
                m.ids
                    .chunks_exact(bs)
                    .zip(used.chunks_exact(bs))
                    .take_while(|(a, b)| a == b)
                    .count()
            };
            let shared = blocks.min(m.digests.len()).min(m.keys.len());
            if shared > 0 && best.as_ref().is_none_or(|b| shared > b.1) {
                best = Some((m, shared));
            }
        }
        best
    }

    /// Keeps this request as a memo in memo shard `shard` (dropping the memo it extended,
    /// if it covered it whole), then evicts that shard's oldest memos beyond its share of
    /// [`MEMOS`] or while all memos hold more than `capacity` blocks.
    fn remember(
        &self,
        shard: usize,
        fp: &ConfigFingerprint,
        used: &[u32],
        digests: Vec<Digest>,
        keys: Vec<u64>,
        extended: Option<(Arc<Memo>, usize)>,
    ) {
        let blocks = digests.len();
        if blocks == 0 || blocks > self.capacity() {
            return;
        }
        let Some(Ok(mut memos)) = self.memos.get(shard).map(Mutex::lock) else {
            return;
        };
        if let Some((old, m)) = extended {
            if m == old.digests.len() {
                let before = memos.len();
                memos.retain(|x| !Arc::ptr_eq(x, &old));
                if memos.len() < before {
                    self.memo_blocks
                        .fetch_sub(old.digests.len(), Ordering::Relaxed);
                }
            }
        }
        memos.push_back(Arc::new(Memo {
            fp: *fp,
            ids: used.into(),
            digests: digests.into(),
            keys: keys.into(),
        }));
        let mut total = self.memo_blocks.fetch_add(blocks, Ordering::Relaxed) + blocks;
        // Other shards' memos count towards the bound but are only evicted by their own
        // shard's requests: evicting here until the total fits (or this shard is empty,
        // having given back at least what it added) keeps the bound.
        while memos.len() > MEMOS_PER_SHARD || total > self.capacity() {
            match memos.pop_front() {
                Some(m) => {
                    let n = m.digests.len();
                    total = self.memo_blocks.fetch_sub(n, Ordering::Relaxed) - n;
                }
                None => break,
            }
        }
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

const K: u64 = 0x9e37_79b9_7f4a_7c15;

/// The lookup-key state before block 0 of a configuration.
fn key_seed(fp: &ConfigFingerprint) -> u64 {
    let f = fp.0;
    u64::from_le_bytes([f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]])
}

/// Appends the 64-bit lookup key of every full block of `tail`, continuing from state `x`
/// (the previous block's key): a mix of the fingerprint and all tokens up to the block's
/// end. Only a hint: hits are verified in full.
fn extend_keys(mut x: u64, tail: &[u32], bs: usize, keys: &mut Vec<u64>) {
    for block in tail.chunks_exact(bs) {
        // Independent terms per pair of tokens (no serial dependency inside a block),
        // summed; then one serial mixing step per block.
        let mut h = block.len() as u64;
        for (j, pair) in block.chunks(2).enumerate() {
            let a = pair.first().copied().unwrap_or(0);
            let b = pair.get(1).copied().unwrap_or(u32::MAX);
            let p = u64::from(a) | (u64::from(b) << 32);
            let term = (p ^ (j as u64).wrapping_mul(0xd6e8_feb8_6659_fd93)).wrapping_mul(K);
            h = h.wrapping_add(term ^ (term >> 31));
        }
        x = (x ^ h).wrapping_mul(K);
        x ^= x >> 32;
        keys.push(x);
    }
}

/// Indices of `keys` grouped by shard.
fn by_shard(keys: &[u64]) -> Vec<Vec<usize>> {
    let mut groups = vec![Vec::new(); SHARDS];
    for (i, k) in keys.iter().enumerate() {
        if let Some(g) = groups.get_mut(shard_of(*k)) {
            g.push(i);
        }
    }
    groups
}

/// The shard of a lookup key.
#[inline]
fn shard_of(k: u64) -> usize {
    // Bits the map itself does not use much (it takes the low bits for the bucket and
    // the top 7 for its tags).
    (k >> 40) as usize % SHARDS
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
