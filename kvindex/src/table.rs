//! The holder table: for every cached block key (hash, KV-cache group, medium) outside the
//! run-compressed chains, which slots (endpoint × data-parallel rank) hold it and how many
//! copies each holds. The chains ([`crate::runs`]) hold their own keys' holders; an index made
//! [`crate::Index::with_twin`] also counts those keys here, as the twin
//! [`crate::Index::self_check`] compares the chains with.
//!
//! One table serves every endpoint of an index, so a prediction walks the request's blocks
//! once for all endpoints (one lookup per block, not one per block and endpoint). The table
//! is split into shards, each behind its own `RwLock`: readers never wait for each other and a
//! writer blocks only the lookups of its shard for the time of one insert or removal.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Index of a storage medium in the index's medium table; 0 is the GPU.
pub(crate) type Medium = u8;

/// One cached block as the engine keys it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    pub hash: u64,
    pub group: u8,
    pub medium: Medium,
}

impl Key {
    /// The block hashes are digests (uniform bits); group and medium are folded in with an
    /// odd multiplier so that the same hash in two groups lands apart.
    #[inline]
    fn mixed(&self) -> u64 {
        let tag = (u64::from(self.group) << 8 | u64::from(self.medium)).wrapping_add(1);
        let x = self.hash ^ tag.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        // A final avalanche: engines' hashes are uniform, but a caller-chosen hash (a test,
        // a hostile stream) must not pile into one shard.
        let x = (x ^ (x >> 32)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
        x ^ (x >> 32)
    }
}

impl Hash for Key {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.mixed());
    }
}

/// Passes the key's own mixed value through.
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x100_0000_01B3);
        }
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// Builds [`KeyHasher`]s.
#[derive(Default, Clone, Copy)]
pub(crate) struct BuildKeyHasher;

impl BuildHasher for BuildKeyHasher {
    type Hasher = KeyHasher;
    #[inline]
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(0)
    }
}

/// Slots whose holders sit in the inline bitset (bit `s % 64` of word `s / 64`).
const INLINE_SLOTS: u32 = 128;

/// The slots holding one key, with their copy counts (never 0). A slot below
/// [`INLINE_SLOTS`] holding one copy is its bit alone (no allocation, no search: the common
/// case, an index of up to 128 slots whose engines store each block once); the exceptions sit
/// in one sorted heap list: a copy count above 1 (vLLM stores one hash in two physical blocks)
/// for an inline slot, and every slot from [`INLINE_SLOTS`] on with its count.
#[derive(Debug, Default)]
pub(crate) struct Holders {
    bits: [u64; 2],
    // Boxed on purpose: a thin pointer keeps the entry small for every key, while the extra
    // allocation is paid only by keys with a duplicate copy or a slot past the inline ones.
    #[allow(clippy::box_collection)]
    more: Option<Box<Vec<(u32, u32)>>>,
}

/// The holders of a key nobody holds.
static NO_HOLDERS: Holders = Holders {
    bits: [0, 0],
    more: None,
};

impl Holders {
    #[inline]
    fn bit(slot: u32) -> (usize, u64) {
        (slot as usize / 64, 1u64 << (slot % 64))
    }

    #[inline]
    fn more_slice(&self) -> &[(u32, u32)] {
        self.more.as_deref().map_or(&[], |v| &v[..])
    }

    /// The position of `slot` in the heap list, or where it would go.
    #[inline]
    fn find_more(&self, slot: u32) -> Result<usize, usize> {
        self.more_slice().binary_search_by_key(&slot, |&(s, _)| s)
    }

    /// Whether nobody holds the key.
    #[inline]
    fn is_empty(&self) -> bool {
        self.bits == [0, 0] && self.more.is_none()
    }

    /// Whether `slot` holds a copy.
    #[inline]
    pub fn has(&self, slot: u32) -> bool {
        if slot < INLINE_SLOTS {
            let (w, b) = Self::bit(slot);
            self.bits[w] & b != 0
        } else {
            self.find_more(slot).is_ok()
        }
    }

    /// The copies `slot` holds (0 when none).
    pub fn copies(&self, slot: u32) -> u32 {
        match self.find_more(slot) {
            Ok(i) => self.more_slice()[i].1,
            Err(_) => u32::from(self.has(slot)),
        }
    }

    /// One more copy in `slot`; true when it held none before.
    fn add(&mut self, slot: u32) -> bool {
        if slot < INLINE_SLOTS {
            let (w, b) = Self::bit(slot);
            if self.bits[w] & b == 0 {
                self.bits[w] |= b;
                return true;
            }
        }
        let v = self.more.get_or_insert_with(Default::default);
        match v.binary_search_by_key(&slot, |&(s, _)| s) {
            Ok(i) => {
                v[i].1 += 1;
                false
            }
            Err(i) => {
                // An inline slot's first extra copy makes two; a slot past them starts at one.
                let first = slot >= INLINE_SLOTS;
                v.insert(i, (slot, if first { 1 } else { 2 }));
                first
            }
        }
    }

    /// One copy fewer in `slot`: `None` when it held none, else whether that was its last.
    fn remove(&mut self, slot: u32) -> Option<bool> {
        let listed = self.more.as_mut().and_then(|v| {
            let i = v.binary_search_by_key(&slot, |&(s, _)| s).ok()?;
            Some((v, i))
        });
        if let Some((v, i)) = listed {
            v[i].1 -= 1;
            // An inline slot back to one copy is its bit alone; a slot past them leaves the
            // list at zero.
            let left = v[i].1;
            let last = slot >= INLINE_SLOTS && left == 0;
            if last || slot < INLINE_SLOTS && left == 1 {
                v.remove(i);
                if v.is_empty() {
                    self.more = None;
                }
            }
            return Some(last);
        }
        if slot < INLINE_SLOTS {
            let (w, b) = Self::bit(slot);
            if self.bits[w] & b != 0 {
                self.bits[w] &= !b;
                return Some(true);
            }
        }
        None
    }

    /// Drops every copy `slot` holds; returns how many.
    fn remove_all(&mut self, slot: u32) -> u32 {
        let n = self.copies(slot);
        if n == 0 {
            return 0;
        }
        if let Some(v) = self.more.as_mut() {
            if let Ok(i) = v.binary_search_by_key(&slot, |&(s, _)| s) {
                v.remove(i);
            }
            if v.is_empty() {
                self.more = None;
            }
        }
        if slot < INLINE_SLOTS {
            let (w, b) = Self::bit(slot);
            self.bits[w] &= !b;
        }
        n
    }

    /// The holding slots in slot order, with their copy counts.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let more = self.more_slice();
        let inline = self.bits.iter().enumerate().flat_map(move |(w, &word)| {
            let mut left = word;
            std::iter::from_fn(move || {
                if left == 0 {
                    return None;
                }
                let b = left.trailing_zeros();
                left &= left - 1;
                let slot = w as u32 * 64 + b;
                let n = match more.binary_search_by_key(&slot, |&(s, _)| s) {
                    Ok(i) => more[i].1,
                    Err(_) => 1,
                };
                Some((slot, n))
            })
        });
        inline.chain(more.iter().copied().filter(|&(s, _)| s >= INLINE_SLOTS))
    }

    /// Holding slots.
    fn len(&self) -> usize {
        (self.bits[0].count_ones() + self.bits[1].count_ones()) as usize
            + self
                .more_slice()
                .iter()
                .filter(|&&(s, _)| s >= INLINE_SLOTS)
                .count()
    }

    /// Heap bytes.
    fn heap_bytes(&self) -> usize {
        self.more
            .as_ref()
            .map_or(0, |v| 24 + v.capacity() * BYTES_PER_HOLDER)
    }
}

/// What [`Table::add`] did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Added {
    /// The slot held no copy before.
    pub first_for_slot: bool,
    /// No slot held the key before.
    pub new_key: bool,
}

/// What [`Table::remove`] did (when the slot held a copy).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Removed {
    /// The slot holds no copy now.
    pub last_for_slot: bool,
    /// No slot holds the key now (its entry is gone).
    pub key_gone: bool,
}

type Shard = HashMap<Key, Holders, BuildKeyHasher>;

const SHARD_BITS: u32 = 6;
const SHARDS: usize = 1 << SHARD_BITS;

/// Bytes the table spends per held key besides the heap list of its exceptional holders: key,
/// holder bitset and list pointer and the hash map's control byte, at the map's load factor
/// (7/8). (A chain key has no table entry: its run holds its holders, `runs.rs`.)
pub const BYTES_PER_KEY: usize =
    (std::mem::size_of::<Key>() + std::mem::size_of::<Holders>() + 1) * 8 / 7;
/// Heap bytes per listed holder of a key: a slot holding more than one copy, or a slot from
/// the 129th on (slots below 128 holding one copy cost nothing beyond [`BYTES_PER_KEY`]).
pub const BYTES_PER_HOLDER: usize = std::mem::size_of::<(u32, u32)>();

/// The sharded table.
pub(crate) struct Table {
    shards: Box<[RwLock<Shard>]>,
}

impl Table {
    pub fn new() -> Self {
        Table {
            shards: (0..SHARDS)
                .map(|_| RwLock::new(Shard::with_hasher(BuildKeyHasher)))
                .collect(),
        }
    }

    #[inline]
    fn shard_of(key: &Key) -> usize {
        (key.mixed() >> (64 - SHARD_BITS)) as usize
    }

    #[inline]
    fn read(&self, i: usize) -> RwLockReadGuard<'_, Shard> {
        // A poisoned shard only means a writer panicked between two whole operations (each
        // insert / removal leaves the map consistent): keep serving it.
        self.shards[i].read().unwrap_or_else(|e| e.into_inner())
    }

    #[inline]
    fn write(&self, i: usize) -> RwLockWriteGuard<'_, Shard> {
        self.shards[i].write().unwrap_or_else(|e| e.into_inner())
    }

    /// Calls `f` with the holders of `key` (empty when nobody holds it).
    #[inline]
    pub fn with_holders<R>(&self, key: &Key, f: impl FnOnce(&Holders) -> R) -> R {
        let shard = self.read(Self::shard_of(key));
        match shard.get(key) {
            Some(e) => f(e),
            None => f(&NO_HOLDERS),
        }
    }

    /// Whether some slot holds `key`.
    pub fn holds_any(&self, key: &Key) -> bool {
        self.read(Self::shard_of(key)).contains_key(key)
    }

    /// Whether `slot` holds `key`.
    pub fn holds(&self, key: &Key, slot: u32) -> bool {
        self.with_holders(key, |h| h.has(slot))
    }

    /// One more copy of `key` in `slot`.
    pub fn add(&self, key: Key, slot: u32) -> Added {
        let mut shard = self.write(Self::shard_of(&key));
        match shard.entry(key) {
            std::collections::hash_map::Entry::Vacant(e) => {
                let mut holders = Holders::default();
                holders.add(slot);
                e.insert(holders);
                Added {
                    first_for_slot: true,
                    new_key: true,
                }
            }
            std::collections::hash_map::Entry::Occupied(mut e) => Added {
                first_for_slot: e.get_mut().add(slot),
                new_key: false,
            },
        }
    }

    /// One copy fewer of `key` in `slot`; `None` when `slot` held none.
    pub fn remove(&self, key: Key, slot: u32) -> Option<Removed> {
        let mut shard = self.write(Self::shard_of(&key));
        // One probe: the entry found is the one dropped when its last holder goes.
        let std::collections::hash_map::Entry::Occupied(mut o) = shard.entry(key) else {
            return None;
        };
        let last = o.get_mut().remove(slot)?;
        let gone = o.get().is_empty();
        if gone {
            o.remove();
        }
        Some(Removed {
            last_for_slot: last,
            key_gone: gone,
        })
    }

    /// Drops every copy `slot` holds; returns how many copies per medium were dropped.
    pub fn clear_slot(&self, slot: u32, dropped: &mut [u64]) {
        for i in 0..SHARDS {
            let mut shard = self.write(i);
            shard.retain(|k, e| {
                let n = e.remove_all(slot);
                if let Some(d) = dropped.get_mut(usize::from(k.medium)) {
                    *d += u64::from(n);
                }
                !e.is_empty()
            });
        }
    }

    /// Calls `f` with every held key and its holders (the self-check).
    pub fn for_each(&self, mut f: impl FnMut(&Key, &Holders)) {
        for i in 0..SHARDS {
            let shard = self.read(i);
            for (k, e) in shard.iter() {
                f(k, e);
            }
        }
    }

    /// Keys held, (key, holder) pairs and the heap bytes of the holder lists of the keys
    /// `counted` takes, for the memory figure.
    pub fn sizes(&self, counted: impl Fn(&Key) -> bool) -> (usize, usize, usize) {
        let (mut keys, mut pairs, mut heap) = (0, 0, 0);
        for i in 0..SHARDS {
            let shard = self.read(i);
            for (_, e) in shard.iter().filter(|(k, _)| counted(k)) {
                keys += 1;
                pairs += e.len();
                heap += e.heap_bytes();
            }
        }
        (keys, pairs, heap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Adds and removals of copies equal a plain map of copy counts per slot: the holders,
        /// in slot order, what each call reports, and whether the key is held at all.
        #[test]
        fn holders_equal_a_map_of_counts(
            ops in prop::collection::vec((prop_oneof![0..8u32, 60..70u32, 120..136u32, 250..256u32], any::<bool>()), 1..160),
            clear in prop_oneof![0..8u32, 120..136u32],
        ) {
            let t = Table::new();
            let k = Key { hash: 9, group: 0, medium: 0 };
            let mut m: BTreeMap<u32, u32> = BTreeMap::new();
            for (slot, add) in ops {
                if add {
                    let a = t.add(k, slot);
                    prop_assert_eq!(a.new_key, m.is_empty());
                    prop_assert_eq!(a.first_for_slot, !m.contains_key(&slot));
                    *m.entry(slot).or_default() += 1;
                } else {
                    let r = t.remove(k, slot);
                    match m.get_mut(&slot) {
                        None => prop_assert!(r.is_none()),
                        Some(n) => {
                            *n -= 1;
                            let last = *n == 0;
                            if last { m.remove(&slot); }
                            let r = r.unwrap();
                            prop_assert_eq!(r.last_for_slot, last);
                            prop_assert_eq!(r.key_gone, m.is_empty());
                        }
                    }
                }
                let want: Vec<(u32, u32)> = m.iter().map(|(&s, &n)| (s, n)).collect();
                let got: Vec<(u32, u32)> = t.with_holders(&k, |h| h.iter().collect());
                prop_assert_eq!(&got, &want);
                prop_assert_eq!(t.with_holders(&k, |h| h.len()), want.len());
                for s in 0..256 {
                    prop_assert_eq!(t.holds(&k, s), m.contains_key(&s));
                    prop_assert_eq!(t.with_holders(&k, |h| h.copies(s)), m.get(&s).copied().unwrap_or(0));
                }
                // The heap list holds exactly the exceptions: more than one copy, or a slot
                // past the inline ones.
                let listed = want.iter().filter(|&&(s, n)| n > 1 || s >= INLINE_SLOTS).count();
                prop_assert_eq!(t.with_holders(&k, |h| h.more_slice().len()), listed);
            }
            // Clearing a slot drops all its copies and leaves the others as they were.
            let mut dropped = [0u64; 2];
            t.clear_slot(clear, &mut dropped);
            prop_assert_eq!(dropped[0], u64::from(m.remove(&clear).unwrap_or(0)));
            let want: Vec<(u32, u32)> = m.iter().map(|(&s, &n)| (s, n)).collect();
            let got: Vec<(u32, u32)> = t.with_holders(&k, |h| h.iter().collect());
            prop_assert_eq!(got, want);
            prop_assert_eq!(t.sizes(|_| true).0, usize::from(!m.is_empty()));
        }
    }

    #[test]
    fn the_stated_sizes_hold() {
        assert_eq!(std::mem::size_of::<Key>(), 16);
        assert_eq!(std::mem::size_of::<Holders>(), 24);
        assert_eq!(BYTES_PER_KEY, 46);
    }

    #[test]
    fn holders_move_between_inline_and_heap() {
        let t = Table::new();
        let k = Key {
            hash: 7,
            group: 0,
            medium: 0,
        };
        assert!(t.add(k, 1).new_key);
        assert!(t.add(k, 2).first_for_slot);
        assert!(!t.add(k, 2).first_for_slot);
        t.with_holders(&k, |h| assert_eq!(h.len(), 2));
        assert!(t
            .remove(k, 1)
            .is_some_and(|r| r.last_for_slot && !r.key_gone));
        t.with_holders(&k, |h| assert!(h.iter().eq([(2, 2)])));
        assert!(t.remove(k, 2).is_some_and(|r| !r.last_for_slot));
        assert!(t.remove(k, 2).is_some_and(|r| r.key_gone));
        assert!(t.remove(k, 2).is_none());
        assert_eq!(t.sizes(|_| true), (0, 0, 0));
        t.add(k, 3);
        t.add(k, 4);
        let mut dropped = [0u64; 8];
        t.clear_slot(4, &mut dropped);
        assert_eq!(dropped[0], 1);
        t.with_holders(&k, |h| assert!(h.iter().eq([(3, 1)])));
    }
}
