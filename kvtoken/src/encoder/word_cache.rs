//! The ids of recently seen words, per encoder, kept in a [`Scratch`](super::Scratch): a
//! two-way set-associative table for short words with few ids (nearly every word of chat text) and
//! hash maps for the rest. Exact by construction: a key holds every byte of its word.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::fxhash::{BytesMap, FxHasher};

/// Identifies each encoder's word cache in a [`Scratch`](super::Scratch) (and a fast path's
/// entries in a [`SegmentCache`](crate::segment_cache::SegmentCache)).
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// A uid no other encoder has (fast paths and tekken tokenizers alike).
pub(crate) fn next_uid() -> u64 {
    NEXT_UID.fetch_add(1, Ordering::Relaxed)
}

/// Words longer than this (bytes) are not cached.
pub(crate) const CACHE_MAX_WORD: usize = 256;
/// A cache holding this many words is emptied before the next insertion.
const CACHE_MAX_WORDS: usize = 1 << 16;
/// A scratch keeps the caches of at most this many encoders (the oldest goes first).
const CACHE_MAX_ENCODERS: usize = 8;

/// Sets of a [`WordCache`]'s table (a power of two; two 32-byte slots each, one cache line).
const SHORT_SETS: usize = 1 << 12;
/// Most ids a slot of the table holds.
pub(super) const SLOT_IDS: usize = 3;

/// One slot of the table: a word of up to 15 bytes packed with its length
/// ([`pack_short`]; 0, which no word of at least one byte packs to, marks an empty slot)
/// and its ids.
#[derive(Clone, Copy, Default)]
struct ShortSlot {
    key: u128,
    ids: [u32; SLOT_IDS],
    len: u32,
}

/// One set of the table: the word inserted last in it first, the one before second (a word
/// evicted from its slot by one other word is still found: two words of chat text that share
/// a set do not take turns evicting each other).
#[derive(Clone, Copy, Default)]
#[repr(align(64))]
struct ShortSet([ShortSlot; 2]);

/// Where a cached word's ids are: a slot of the table (its first `len` ids), or the hash
/// maps' id list.
enum Found<'a> {
    /// A slot of the set-associative table.
    Slot(&'a ShortSlot),
    /// The ids of a hash-map entry.
    Ids(&'a [u32]),
}

/// The ids of recently seen words, for one encoder (`uid`).
///
/// Words of up to 15 bytes with at most [`SLOT_IDS`] ids (nearly all words of chat text) live
/// in a two-way set-associative table of [`SHORT_SETS`] sets (256 KiB): one multiply picks
/// the set, at most two 128-bit compares of the packed word decide, a newer word evicts the
/// older of the set's two. It cannot return the ids of another word: the packed key holds
/// every byte of the word and its length, and a slot is only ever written as a whole with the
/// key and the ids the encoder computed for that key. Other words go to the hash maps.
pub(crate) struct WordCache {
    /// The encoder whose words these are.
    pub(super) uid: u64,
    /// The set-associative table ([`SHORT_SETS`] sets).
    sets: Vec<ShortSet>,
    /// Words of up to 15 bytes with more ids, packed into one integer (no memcmp).
    short: HashMap<u128, (u32, u32), BuildHasherDefault<FxHasher>>,
    /// Longer words.
    long: BytesMap<(u32, u32)>,
    /// The ids of the hash maps' words, one after the other (`(start, len)` in the maps).
    ids: Vec<u32>,
    /// BPE of the parts of cut words, for an encoder whose words skip BPE when they are
    /// vocabulary tokens (`ignore_merges`): a part is always merged, so its ids cannot
    /// share the words' cache.
    parts: Option<Box<WordCache>>,
}

/// The first `b.len() < 8` bytes of `b`, little-endian, zero-extended.
#[inline]
fn load_partial(b: &[u8]) -> u64 {
    let n = b.len();
    let (first, last) = match n {
        0 => return 0,
        1 => return b.first().map_or(0, |&x| u64::from(x)),
        2 | 3 => (
            b.get(..2)
                .map_or(0, |x| u64::from(u16::from_le_bytes([x[0], x[1]]))),
            b.get(n - 2..)
                .map_or(0, |x| u64::from(u16::from_le_bytes([x[0], x[1]]))),
        ),
        _ => (
            b.get(..4).map_or(0, |x| {
                u64::from(u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
            }),
            b.get(n - 4..).map_or(0, |x| {
                u64::from(u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
            }),
        ),
    };
    // The two loads overlap on equal bytes; the last one is shifted into place.
    let width = if n < 4 { 2 } else { 4 };
    first | (last << (8 * (n - width)))
}

/// `word` packed into a `u128` with its length in the top byte, if it is under 16 bytes.
#[inline]
fn pack_short(word: &[u8]) -> Option<u128> {
    let n = word.len();
    if n >= 16 {
        return None;
    }
    let (lo, hi) = match word.split_first_chunk::<8>() {
        Some((head, tail)) => (u64::from_le_bytes(*head), load_partial(tail)),
        None => (load_partial(word), 0),
    };
    Some(u128::from(lo) | (u128::from(hi) << 64) | ((n as u128) << 120))
}

/// The set of a packed word.
#[inline]
fn set_of(key: u128) -> usize {
    let h =
        ((key as u64) ^ ((key >> 64) as u64).rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 32) as usize & (SHORT_SETS - 1)
}

impl WordCache {
    /// An empty cache for the encoder `uid`.
    pub(super) fn new(uid: u64) -> Self {
        Self {
            uid,
            sets: vec![ShortSet::default(); SHORT_SETS],
            short: HashMap::default(),
            long: BytesMap::default(),
            ids: Vec::new(),
            parts: None,
        }
    }

    /// The cache of cut words' parts (see [`WordCache::parts`]), made on first use.
    pub(super) fn parts(&mut self) -> &mut WordCache {
        let uid = self.uid;
        self.parts
            .get_or_insert_with(|| Box::new(WordCache::new(uid)))
    }

    /// Where `word`'s ids are cached, if they are.
    #[inline]
    fn find(&self, word: &[u8]) -> Option<Found<'_>> {
        let &(at, len) = match pack_short(word) {
            Some(key) => {
                if let Some(ShortSet([a, b])) = self.sets.get(set_of(key)) {
                    if a.key == key {
                        return Some(Found::Slot(a));
                    }
                    if b.key == key {
                        return Some(Found::Slot(b));
                    }
                }
                self.short.get(&key)?
            }
            None => self.long.get(word)?,
        };
        self.ids
            .get(at as usize..(at as usize + len as usize))
            .map(Found::Ids)
    }

    /// The ids cached for `word` (the tests' view; the encoders [`append`](Self::append)).
    #[cfg(test)]
    pub(crate) fn get(&self, word: &[u8]) -> Option<&[u32]> {
        match self.find(word)? {
            Found::Slot(slot) => slot.ids.get(..slot.len as usize),
            Found::Ids(ids) => Some(ids),
        }
    }

    /// Appends the ids cached for `word` to `out`; whether it was cached. A word of the table
    /// is appended without a branch on its id count (its slot's three ids are written, then
    /// `out` is cut back to its own count): that count is known only when the slot arrives
    /// from memory, and a mispredicted branch on it would wait for the load and then flush.
    #[inline]
    pub(crate) fn append(&self, word: &[u8], out: &mut Vec<u32>) -> bool {
        match self.find(word) {
            Some(Found::Slot(slot)) => {
                let keep = out.len() + slot.len as usize;
                out.extend_from_slice(&slot.ids);
                out.truncate(keep);
                true
            }
            Some(Found::Ids(ids)) => {
                out.extend_from_slice(ids);
                true
            }
            None => false,
        }
    }

    /// [`insert`](Self::insert) into the set-associative table only: nothing for a word of
    /// 16 bytes or more or more than [`SLOT_IDS`] ids.
    pub(super) fn insert_slot(&mut self, word: &[u8], ids: &[u32]) {
        if ids.len() <= SLOT_IDS {
            if let Some(key) = pack_short(word) {
                self.insert(word, ids);
                debug_assert!(self
                    .sets
                    .get(set_of(key))
                    .is_some_and(|s| s.0[0].key == key));
            }
        }
    }

    /// Caches `ids` as `word`'s: first in its set when it has one (the set's older word is
    /// evicted), else in a hash map (all maps emptied first when they are full).
    pub(crate) fn insert(&mut self, word: &[u8], ids: &[u32]) {
        let key = pack_short(word);
        if let Some(key) = key.filter(|_| ids.len() <= SLOT_IDS) {
            if let Some(ShortSet([a, b])) = self.sets.get_mut(set_of(key)) {
                let mut inline = [0; SLOT_IDS];
                if let Some(dst) = inline.get_mut(..ids.len()) {
                    dst.copy_from_slice(ids);
                }
                *b = *a;
                *a = ShortSlot {
                    key,
                    ids: inline,
                    len: ids.len() as u32,
                };
                return;
            }
        }
        if self.short.len() + self.long.len() >= CACHE_MAX_WORDS {
            self.short.clear();
            self.long.clear();
            self.ids.clear();
        }
        let entry = (self.ids.len() as u32, ids.len() as u32);
        self.ids.extend_from_slice(ids);
        match key {
            Some(key) => self.short.insert(key, entry),
            None => self.long.insert(word.into(), entry),
        };
    }
}

/// Which words a caller caches (`ByteLevel::through_cache`).
#[derive(Clone, Copy)]
pub(super) enum Cached {
    /// Words of at most this many bytes, in the slots or the hash maps.
    UpTo(usize),
    /// Words of under 16 bytes with at most [`SLOT_IDS`] ids, in the set-associative table.
    SlotsOnly,
}

/// The cache of encoder `uid` among a scratch's `caches`, made (evicting the oldest beyond
/// [`CACHE_MAX_ENCODERS`]) on first use.
pub(super) fn cache_of(caches: &mut Vec<WordCache>, uid: u64) -> &mut WordCache {
    let i = match caches.iter().position(|c| c.uid == uid) {
        Some(i) => i,
        None => {
            if caches.len() >= CACHE_MAX_ENCODERS {
                caches.remove(0);
            }
            caches.push(WordCache::new(uid));
            caches.len() - 1
        }
    };
    &mut caches[i]
}

#[cfg(test)]
mod tests {
    use super::{pack_short, set_of, WordCache};
    use std::collections::HashMap;

    /// The word-level `pack_short` equals packing byte by byte (the slow, obvious twin).
    #[test]
    fn pack_short_matches_bytewise_packing() {
        let mut buf = [0u8; 20];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..2000 {
            for b in &mut buf {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = if round % 3 == 0 {
                    (x % 3) as u8
                } else {
                    x as u8
                };
            }
            for n in 0..=buf.len() {
                let word = &buf[..n];
                let slow = (n < 16).then(|| {
                    let mut k = [0u8; 16];
                    k[..n].copy_from_slice(word);
                    k[15] = n as u8;
                    u128::from_le_bytes(k)
                });
                assert_eq!(pack_short(word), slow, "{word:?}");
            }
        }
    }

    /// The cache returns exactly the ids inserted for a word, whatever evicts whom.
    #[test]
    fn word_cache_returns_what_was_inserted() {
        let mut c = WordCache::new(1);
        let mut model: HashMap<Vec<u8>, Vec<u32>> = HashMap::new();
        let mut x = 7u64;
        for i in 0..60_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = 1 + (x % 24) as usize;
            let word: Vec<u8> = (0..n)
                .map(|k| b"ab\0z"[((x >> (2 * k)) % 4) as usize])
                .collect();
            if let Some(ids) = c.get(&word) {
                assert_eq!(Some(&ids.to_vec()), model.get(&word), "{word:?}");
                let mut out = vec![7];
                assert!(c.append(&word, &mut out));
                assert_eq!(out[1..], ids[..], "{word:?}");
                continue;
            }
            assert!(!c.append(&word, &mut Vec::new()));
            let ids: Vec<u32> = (0..(x >> 40) % 6).map(|k| i + k as u32).collect();
            c.insert(&word, &ids);
            model.insert(word, ids);
        }
    }

    /// Two words of one set are both found after both were inserted (a chat text's words
    /// that share a set do not evict each other each turn); a third evicts the older.
    #[test]
    fn two_words_of_one_set_are_both_kept() {
        let words: Vec<String> = (0..100_000).map(|i| format!("w{i}")).collect();
        let key = |w: &String| set_of(pack_short(w.as_bytes()).expect("short"));
        let first = key(&words[0]);
        let same: Vec<&String> = words.iter().filter(|w| key(w) == first).take(3).collect();
        assert_eq!(same.len(), 3, "three words of one set");
        let mut c = WordCache::new(1);
        c.insert(same[0].as_bytes(), &[1]);
        c.insert(same[1].as_bytes(), &[2, 3]);
        assert_eq!(c.get(same[0].as_bytes()), Some(&[1][..]));
        assert_eq!(c.get(same[1].as_bytes()), Some(&[2, 3][..]));
        c.insert(same[2].as_bytes(), &[4]);
        assert_eq!(c.get(same[0].as_bytes()), None);
        assert_eq!(c.get(same[1].as_bytes()), Some(&[2, 3][..]));
        assert_eq!(c.get(same[2].as_bytes()), Some(&[4][..]));
    }

    #[test]
    fn short_keys_are_distinct_and_bounded() {
        assert_ne!(pack_short(b"a"), pack_short(b"a\0"));
        assert_ne!(pack_short(b""), pack_short(b"\0"));
        assert_eq!(
            pack_short(b"0123456789abcde").map(|k| (k >> 120) as u8),
            Some(15)
        );
        assert_eq!(pack_short(b"0123456789abcdef"), None);
    }
}
