//! [`SegmentCache`]: token ids of whole segments (text between added tokens), reused across
//! requests.
//!
//! `tokenizers` first splits the input at added tokens and then normalizes, pre-tokenizes
//! and BPE-encodes each piece between them on its own; the fast path does the same
//! ([`crate::FastEncoder`] encodes piece by piece). So the ids of a prompt are the
//! concatenation of the ids of its pieces and added-token ids, and a piece's ids depend on
//! its bytes (and the encoder) alone. The cache stores exactly that: (encoder, piece bytes)
//! → ids. Multi-turn chats re-send every earlier message, whose pieces are then found
//! instead of re-encoded.
//!
//! Exactness never rests on a non-cryptographic hash: a 64-bit key only picks the bucket; a
//! hit requires the encoder id and every byte of the piece to be equal. Configurations the
//! fast path does not handle (added tokens with lstrip/rstrip/single_word/normalized,
//! gemma-2's SentencePiece BPE, …) go through `tokenizers` unchanged and bypass the cache.
//!
//! Memory is bounded: about `capacity_bytes` in all — piece text, 4 bytes per id and
//! [`ENTRY_OVERHEAD`] bytes of bookkeeping per piece — spread over [`SHARDS`] shards, each
//! behind its own `Mutex`; a full shard is emptied before the next insertion.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::fxhash::FxHasher;

/// Number of shards (independent locks) of a [`SegmentCache`].
pub const SHARDS: usize = 16;

/// Pieces shorter than this (bytes) are encoded directly (the word cache already makes
/// them cheap; a lock would cost more).
pub const MIN_SEGMENT: usize = 64;

/// Bytes of bookkeeping counted per cached piece besides its text and ids: the entry, its
/// place in the shard's table and bucket, and the two heap allocations' headers.
pub const ENTRY_OVERHEAD: usize = 128;

struct Entry {
    encoder: u64,
    text: Box<[u8]>,
    ids: Box<[u32]>,
}

/// Keys are already hashes: pass them through.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = i;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

#[derive(Default)]
struct Shard {
    map: HashMap<u64, Vec<Entry>, BuildHasherDefault<KeyHasher>>,
    bytes: usize,
    entries: usize,
}

/// Counters of a [`SegmentCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentStats {
    /// Pieces found in the cache.
    pub hits: u64,
    /// Pieces encoded (and inserted).
    pub misses: u64,
    /// Shards emptied because they were full.
    pub clears: u64,
    /// Pieces dropped when their shard was emptied because it was full.
    pub evicted: u64,
}

/// A bounded, sharded cache of segment ids keyed by exact segment bytes and encoder (see the
/// module documentation). `Send + Sync`; one may be shared by several encoders.
pub struct SegmentCache {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
    hits: AtomicU64,
    misses: AtomicU64,
    clears: AtomicU64,
    evicted: AtomicU64,
}

impl std::fmt::Debug for SegmentCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentCache")
            .field("capacity_bytes", &self.capacity_bytes())
            .field("stats", &self.stats())
            .finish()
    }
}

impl SegmentCache {
    /// A cache holding about `capacity_bytes` of segments (text bytes + 4 per id +
    /// [`ENTRY_OVERHEAD`] per piece).
    pub fn new(capacity_bytes: usize) -> Self {
        SegmentCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            per_shard: capacity_bytes.div_ceil(SHARDS),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            clears: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        }
    }

    /// Most bytes held at once.
    pub fn capacity_bytes(&self) -> usize {
        self.per_shard * SHARDS
    }

    /// Counters since the cache was made.
    pub fn stats(&self) -> SegmentStats {
        SegmentStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            clears: self.clears.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
        }
    }

    /// Bytes held now, counted as the capacity counts them (text, ids, [`ENTRY_OVERHEAD`]
    /// per piece); locks each shard in turn, so meant for metrics, not the hot path.
    pub fn bytes_held(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map_or(0, |s| s.bytes))
            .sum()
    }

    /// Pieces held now (locks each shard in turn).
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map_or(0, |s| s.entries))
            .sum()
    }

    /// Whether no piece is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties the cache (counters are kept; dropped pieces are not counted as evicted).
    pub fn clear(&self) {
        for s in &self.shards {
            if let Ok(mut s) = s.lock() {
                *s = Shard::default();
            }
        }
    }

    fn key(encoder: u64, text: &[u8]) -> u64 {
        let mut h = FxHasher::default();
        h.write_u64(encoder);
        h.write_usize(text.len());
        h.write(text);
        // Fx's low bits are weak: fold the high bits in before picking shard and bucket.
        let k = h.finish();
        k ^ (k >> 29) ^ (k >> 47)
    }

    fn shard(&self, key: u64) -> Option<&Mutex<Shard>> {
        self.shards.get((key as usize) % SHARDS)
    }

    /// Appends the ids of `text` for `encoder` to `out` if cached; returns whether it did.
    pub(crate) fn get_into(&self, encoder: u64, text: &[u8], out: &mut Vec<u32>) -> bool {
        let key = Self::key(encoder, text);
        let Some(shard) = self.shard(key) else {
            return false;
        };
        let Ok(shard) = shard.lock() else {
            return false;
        };
        let found = shard.map.get(&key).and_then(|bucket| {
            bucket
                .iter()
                .find(|e| e.encoder == encoder && *e.text == *text)
        });
        match found {
            Some(e) => {
                out.extend_from_slice(&e.ids);
                self.hits.fetch_add(1, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Records the ids of `text` for `encoder`.
    pub(crate) fn insert(&self, encoder: u64, text: &[u8], ids: &[u32]) {
        self.misses.fetch_add(1, Ordering::Relaxed);
        let cost = text.len() + 4 * ids.len() + ENTRY_OVERHEAD;
        if cost > self.per_shard {
            return;
        }
        let key = Self::key(encoder, text);
        let Some(shard) = self.shard(key) else {
            return;
        };
        let Ok(mut shard) = shard.lock() else {
            return;
        };
        if shard.bytes + cost > self.per_shard {
            let dropped = shard.entries as u64;
            shard.map.clear();
            shard.bytes = 0;
            shard.entries = 0;
            self.clears.fetch_add(1, Ordering::Relaxed);
            self.evicted.fetch_add(dropped, Ordering::Relaxed);
        }
        let bucket = shard.map.entry(key).or_default();
        if bucket
            .iter()
            .any(|e| e.encoder == encoder && *e.text == *text)
        {
            return;
        }
        bucket.push(Entry {
            encoder,
            text: text.into(),
            ids: ids.into(),
        });
        shard.bytes += cost;
        shard.entries += 1;
    }
}
