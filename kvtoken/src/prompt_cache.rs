//! [`PromptCache`]: the ids of recent prompts, so that the next prompt of the same
//! conversation (the previous one plus a little) is encoded from a proven cut on instead of
//! from its start.
//!
//! Why a cut can be trusted. The fast path finds the added tokens leftmost-longest, from the
//! end of the previous match on, looking only at the bytes from there; each piece between two
//! matches is encoded on its own. So the ids of a text are the ids of its pieces and matches
//! in order, and if a match of text `T` ends at byte `b`, the encoding of `T` from `b` on is
//! exactly the encoding of `T[b..]` alone. Take a new text `T'` that agrees with `T` on its
//! first `c` bytes. Every match the scan of `T'` can consider before `b` starts before `b`
//! and is at most `longest` bytes long (the longest added token), so it ends before
//! `b + longest`; when `b + longest - 1 <= c` (or `T'` ends within the agreed bytes, `c =
//! len(T')`), all those candidates lie in the agreed bytes and are the same as in `T`, so the
//! scan of `T'` makes the same matches as the scan of `T` up to `b`, its pieces before `b`
//! are the same bytes, and `encode(T') = ids(T)[..n_b] ++ encode(T'[b..])`, where `n_b` is
//! the number of ids of `T` up to `b`. [`crate::FastEncoder::encode_limited_reusing`] uses
//! exactly that; the tests hold it against the plain encoding (the slow twin) on growing,
//! edited and unrelated texts.
//!
//! Only a text encoded completely (no cap reached, no bound crossed) is stored, with the
//! encoder it was encoded by and the word bound it was encoded under. An entry is filed
//! under a hash of the text's first `L` bytes, `L` the longest of [`KEY_LADDER`] the text
//! holds (all of it when shorter than the first): a conversation's start stays the same from
//! turn to turn, so a longer text finds the entries of its earlier turns under one of the
//! lengths it holds, looking from the longest down; candidates are then compared byte for
//! byte. A set holds [`WAYS`] entries. Memory is
//! bounded: about `capacity_bytes` in all (text, 4 bytes per id, 16 per cut and
//! [`ENTRY_OVERHEAD`] per entry), [`SETS`] sets each holding at most its share; the oldest
//! entries of a set make room for a new one, and an entry larger than a set's share is not
//! stored.

use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::fxhash::FxHasher;

/// Number of sets (independent locks) of a [`PromptCache`].
pub const SETS: usize = 16;

/// Entries per set.
pub const WAYS: usize = 8;

/// The lengths of a text's start an entry is filed under (the longest one the text holds).
pub const KEY_LADDER: [usize; 4] = [64, 512, 4096, 32768];

/// Bytes of bookkeeping counted per entry besides its text, ids and cuts.
pub const ENTRY_OVERHEAD: usize = 128;

/// One encoded prompt.
pub(crate) struct Entry {
    /// The encoder's identity.
    encoder: u64,
    /// The word bound the text was encoded under.
    max_word_bytes: usize,
    /// The text.
    pub(crate) text: Box<str>,
    /// All its ids.
    pub(crate) ids: Box<[u32]>,
    /// Each added-token match's end: (byte offset, ids up to it), in order.
    pub(crate) cuts: Box<[(usize, usize)]>,
    /// When it was stored (larger is newer).
    stamp: u64,
    /// [`head_hash`] of the head it is filed under.
    filed: u64,
}

impl Entry {
    fn cost(&self) -> usize {
        self.text.len() + 4 * self.ids.len() + 16 * self.cuts.len() + ENTRY_OVERHEAD
    }
}

/// Where a new text may take over a stored one's ids.
pub(crate) struct Reuse {
    /// The stored prompt.
    pub(crate) entry: Arc<Entry>,
    /// The cut: bytes of the new text covered, and the stored ids that encode them.
    pub(crate) bytes: usize,
    /// Ids of the stored prompt up to the cut.
    pub(crate) ids: usize,
    /// Index of the cut in the stored prompt's cuts (its cuts up to and including it carry
    /// over to the new text); `None` when the new text is the stored text itself.
    pub(crate) cut_index: Option<usize>,
}

/// A hash of `head` (the first bytes of a text) for filing: four FxHash lanes over 32-byte
/// stripes, so that a long head is not hashed as one serial chain of multiplies. It only
/// spreads entries over the sets: candidates are compared byte for byte.
fn head_hash(encoder: u64, head: &[u8]) -> u64 {
    let mut lanes = [FxHasher::default(); 4];
    let mut stripes = head.chunks_exact(32);
    for stripe in &mut stripes {
        for (lane, w) in lanes.iter_mut().zip(stripe.chunks_exact(8)) {
            lane.write_u64(u64::from_le_bytes(
                <[u8; 8]>::try_from(w).unwrap_or_default(),
            ));
        }
    }
    let mut h = FxHasher::default();
    h.write_u64(encoder);
    for lane in lanes {
        h.write_u64(lane.finish());
    }
    h.write(stripes.remainder());
    h.write_usize(head.len());
    h.finish()
}

/// The lengths of `text`'s start its entries may be filed under, longest first.
fn key_lengths(text: &str) -> impl Iterator<Item = usize> {
    let n = text.len();
    let short = (n < KEY_LADDER[0]).then_some(n);
    KEY_LADDER
        .into_iter()
        .rev()
        .filter(move |&l| l <= n)
        .chain(short)
}

#[derive(Default)]
struct Set {
    entries: Vec<Arc<Entry>>,
    bytes: usize,
}

/// Counters of a [`PromptCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PromptStats {
    /// Prompts that took over a stored prompt's ids up to a cut.
    pub hits: u64,
    /// Prompts encoded from their start.
    pub misses: u64,
    /// Added-token cuts' worth of pieces taken over (pieces not encoded again).
    pub pieces_reused: u64,
    /// Entries dropped to make room.
    pub evicted: u64,
}

/// A bounded cache of recent prompts' ids (see the module documentation). `Send + Sync`;
/// one may be shared by several encoders (entries carry the encoder's identity).
pub struct PromptCache {
    sets: Vec<Mutex<Set>>,
    per_set: usize,
    stamp: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    pieces: AtomicU64,
    evicted: AtomicU64,
}

impl std::fmt::Debug for PromptCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptCache")
            .field("capacity_bytes", &self.capacity_bytes())
            .field("stats", &self.stats())
            .finish()
    }
}

/// How many leading bytes `a` and `b` share.
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const CHUNK: usize = 64;
    let n = a.len().min(b.len());
    let mut at = 0;
    while at + CHUNK <= n {
        if a.get(at..at + CHUNK) != b.get(at..at + CHUNK) {
            break;
        }
        at += CHUNK;
    }
    let rest = a
        .get(at..n)
        .unwrap_or_default()
        .iter()
        .zip(b.get(at..n).unwrap_or_default())
        .position(|(x, y)| x != y);
    match rest {
        Some(i) => at + i,
        None => n,
    }
}

impl PromptCache {
    /// A cache holding about `capacity_bytes` of prompts.
    pub fn new(capacity_bytes: usize) -> Self {
        PromptCache {
            sets: (0..SETS).map(|_| Mutex::new(Set::default())).collect(),
            per_set: capacity_bytes.div_ceil(SETS),
            stamp: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            pieces: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        }
    }

    /// Most bytes held at once.
    pub fn capacity_bytes(&self) -> usize {
        self.per_set * SETS
    }

    /// Counters since the cache was made.
    pub fn stats(&self) -> PromptStats {
        PromptStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            pieces_reused: self.pieces.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
        }
    }

    /// Bytes held now (locks each set in turn: for metrics).
    pub fn bytes_held(&self) -> usize {
        self.sets
            .iter()
            .map(|s| s.lock().map_or(0, |s| s.bytes))
            .sum()
    }

    /// Prompts held now (locks each set in turn).
    pub fn len(&self) -> usize {
        self.sets
            .iter()
            .map(|s| s.lock().map_or(0, |s| s.entries.len()))
            .sum()
    }

    /// Whether no prompt is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties the cache (counters are kept; dropped prompts are not counted as evicted).
    pub fn clear(&self) {
        for s in &self.sets {
            if let Ok(mut s) = s.lock() {
                *s = Set::default();
            }
        }
    }

    /// The [`head_hash`] of `text`'s first `len` bytes.
    fn filed(encoder: u64, text: &str, len: usize) -> u64 {
        head_hash(
            encoder,
            text.as_bytes().get(..len).unwrap_or(text.as_bytes()),
        )
    }

    /// The set of the entries filed under a head of hash `k`.
    fn set(&self, k: u64) -> Option<&Mutex<Set>> {
        self.sets.get(((k ^ (k >> 29) ^ (k >> 47)) as usize) % SETS)
    }

    /// The stored prompt whose ids `text` can take over furthest (see the module
    /// documentation for the rule), for an encoder whose longest added token is `longest`
    /// bytes.
    pub(crate) fn find(
        &self,
        encoder: u64,
        max_word_bytes: usize,
        longest: usize,
        text: &str,
    ) -> Option<Reuse> {
        let mut candidates: Vec<Arc<Entry>> = Vec::new();
        for len in key_lengths(text) {
            let Some(Ok(set)) = self.set(Self::filed(encoder, text, len)).map(Mutex::lock) else {
                continue;
            };
            candidates.extend(
                set.entries
                    .iter()
                    .filter(|e| e.encoder == encoder && e.max_word_bytes == max_word_bytes)
                    .cloned(),
            );
        }
        let mut best: Option<Reuse> = None;
        for e in candidates {
            let c = common_prefix(e.text.as_bytes(), text.as_bytes());
            if c == text.len() && c == e.text.len() {
                let ids = e.ids.len();
                best = Some(Reuse {
                    bytes: c,
                    ids,
                    cut_index: None,
                    entry: e,
                });
                break;
            }
            // The last cut the rule allows.
            let ok = |b: usize| c == text.len() || b.saturating_add(longest.saturating_sub(1)) <= c;
            let upto = e.cuts.partition_point(|&(b, _)| b <= c);
            let Some(i) = (0..upto)
                .rev()
                .find(|&i| e.cuts.get(i).is_some_and(|&(b, _)| ok(b)))
            else {
                continue;
            };
            let Some(&(b, n)) = e.cuts.get(i) else {
                continue;
            };
            if best.as_ref().is_none_or(|r| b > r.bytes) {
                best = Some(Reuse {
                    bytes: b,
                    ids: n,
                    cut_index: Some(i),
                    entry: e,
                });
            }
        }
        match &best {
            Some(r) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                let pieces = r.cut_index.map_or(r.entry.cuts.len(), |i| i + 1);
                self.pieces.fetch_add(pieces as u64, Ordering::Relaxed);
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
            }
        }
        best
    }

    /// Drops `old` from the set it is filed in.
    fn remove(&self, old: &Arc<Entry>) {
        let Some(Ok(mut set)) = self.set(old.filed).map(Mutex::lock) else {
            return;
        };
        if let Some(i) = set.entries.iter().position(|e| Arc::ptr_eq(e, old)) {
            let gone = set.entries.swap_remove(i);
            set.bytes = set.bytes.saturating_sub(gone.cost());
        }
    }

    /// Stores a completely encoded prompt; `replaces`: the stored prompt it grew from (the
    /// conversation moved on, so that entry goes).
    pub(crate) fn insert(
        &self,
        encoder: u64,
        max_word_bytes: usize,
        text: &str,
        ids: &[u32],
        cuts: Vec<(usize, usize)>,
        replaces: Option<&Arc<Entry>>,
    ) {
        let len = key_lengths(text).next().unwrap_or(0);
        let filed = Self::filed(encoder, text, len);
        let entry = Entry {
            encoder,
            max_word_bytes,
            text: text.into(),
            ids: ids.into(),
            cuts: cuts.into_boxed_slice(),
            stamp: self.stamp.fetch_add(1, Ordering::Relaxed),
            filed,
        };
        let cost = entry.cost();
        if cost > self.per_set {
            return;
        }
        let Some(set) = self.set(filed) else {
            return;
        };
        if let Some(old) = replaces {
            self.remove(old);
        }
        let Ok(mut set) = set.lock() else {
            return;
        };
        while !set.entries.is_empty()
            && (set.entries.len() >= WAYS || set.bytes + cost > self.per_set)
        {
            let Some(oldest) = (0..set.entries.len())
                .min_by_key(|&i| set.entries.get(i).map_or(u64::MAX, |e| e.stamp))
            else {
                break;
            };
            let gone = set.entries.swap_remove(oldest);
            set.bytes = set.bytes.saturating_sub(gone.cost());
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
        set.bytes += cost;
        set.entries.push(Arc::new(entry));
    }
}

#[cfg(test)]
mod tests {
    use super::common_prefix;
    use proptest::prelude::*;

    proptest! {
        /// The chunked compare gives what a byte-by-byte walk gives.
        #[test]
        fn common_prefix_is_the_bytewise_one(a in proptest::collection::vec(0u8..3, 0..300), b in proptest::collection::vec(0u8..3, 0..300), shared in 0usize..300) {
            let mut b2 = a.iter().copied().take(shared).collect::<Vec<u8>>();
            b2.extend(&b);
            let slow = a.iter().zip(&b2).take_while(|(x, y)| x == y).count();
            prop_assert_eq!(common_prefix(&a, &b2), slow);
        }
    }
}
