//! The ids of recently seen words, per encoder, kept in a [`Scratch`](super::Scratch): a
//! direct-mapped table for short words with few ids (nearly every word of chat text) and
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

/// Slots of a [`WordCache`]'s direct-mapped table (a power of two; 32 bytes each).
const SHORT_SLOTS: usize = 1 << 13;
/// Most ids a direct-mapped slot holds.
pub(super) const SLOT_IDS: usize = 3;

/// One slot of the direct-mapped table: a word of up to 15 bytes packed with its length
/// ([`pack_short`]; 0, which no word of at least one byte packs to, marks an empty slot)
/// and its ids.
#[derive(Clone, Copy, Default)]
struct ShortSlot {
    key: u128,
    ids: [u32; SLOT_IDS],
    len: u32,
}

/// The ids of recently seen words, for one encoder (`uid`).
///
/// Words of up to 15 bytes with at most [`SLOT_IDS`] ids (nearly all words of chat text) live
/// in a direct-mapped table of [`SHORT_SLOTS`] slots (256 KiB): one multiply picks the slot,
/// one 128-bit compare of the packed word decides, a newer word evicts an older one. It
/// cannot return the ids of another word: the packed key holds every byte of the word and
/// its length, and a slot is only ever written as a whole with the key and the ids the
/// encoder computed for that key. Other words go to the hash maps.
pub(crate) struct WordCache {
    /// The encoder whose words these are.
    pub(super) uid: u64,
    /// The direct-mapped table ([`SHORT_SLOTS`] slots).
    slots: Vec<ShortSlot>,
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

/// The slot of a packed word.
#[inline]
fn slot_of(key: u128) -> usize {
    let h =
        ((key as u64) ^ ((key >> 64) as u64).rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 32) as usize & (SHORT_SLOTS - 1)
}

impl WordCache {
    /// An empty cache for the encoder `uid`.
    pub(super) fn new(uid: u64) -> Self {
        Self {
            uid,
            slots: vec![ShortSlot::default(); SHORT_SLOTS],
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

    /// The ids cached for `word`.
    #[inline]
    pub(crate) fn get(&self, word: &[u8]) -> Option<&[u32]> {
        let &(at, len) = match pack_short(word) {
            Some(key) => {
                if let Some(slot) = self.slots.get(slot_of(key)).filter(|s| s.key == key) {
                    return slot.ids.get(..slot.len as usize);
                }
                self.short.get(&key)?
            }
            None => self.long.get(word)?,
        };
        self.ids.get(at as usize..(at as usize + len as usize))
    }

    /// [`insert`](Self::insert) into the direct-mapped slots only: nothing for a word of
    /// 16 bytes or more or more than [`SLOT_IDS`] ids.
    pub(super) fn insert_slot(&mut self, word: &[u8], ids: &[u32]) {
        if ids.len() <= SLOT_IDS {
            if let Some(key) = pack_short(word) {
                self.insert(word, ids);
                debug_assert!(self.slots.get(slot_of(key)).is_some_and(|s| s.key == key));
            }
        }
    }

    /// Caches `ids` as `word`'s: in its direct-mapped slot when it has one (evicting the
    /// word there), else in a hash map (all maps emptied first when they are full).
    pub(crate) fn insert(&mut self, word: &[u8], ids: &[u32]) {
        let key = pack_short(word);
        if let Some(key) = key.filter(|_| ids.len() <= SLOT_IDS) {
            if let Some(slot) = self.slots.get_mut(slot_of(key)) {
                let mut inline = [0; SLOT_IDS];
                if let Some(dst) = inline.get_mut(..ids.len()) {
                    dst.copy_from_slice(ids);
                }
                *slot = ShortSlot {
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
    /// Words of under 16 bytes with at most [`SLOT_IDS`] ids, in the direct-mapped slots.
    SlotsOnly,
}

/// `out.extend_from_slice(ids)`, without a `memcpy` call for the one to three ids of a
/// cached word.
#[inline]
pub(crate) fn extend_short(out: &mut Vec<u32>, ids: &[u32]) {
    match *ids {
        [a] => out.push(a),
        [a, b] => out.extend([a, b]),
        [a, b, c] => out.extend([a, b, c]),
        _ => out.extend_from_slice(ids),
    }
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
    use super::{pack_short, WordCache};
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
                continue;
            }
            let ids: Vec<u32> = (0..(x >> 40) % 6).map(|k| i + k as u32).collect();
            c.insert(&word, &ids);
            model.insert(word, ids);
        }
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
