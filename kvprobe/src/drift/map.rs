//! The bounded map of published hashes the verifier has seen: 64-bit published hash → what
//! re-deriving it gave (the full digest a child's hash chains on, or a mark that it did not
//! re-derive), with CLOCK eviction and a small "ghost" table of evicted keys.
//!
//! Memory is fixed at construction and never grows: `capacity` slots of
//! [`SLOT_BYTES`] bytes, an open-addressing index of `u32` slot numbers with at least twice as
//! many cells as slots (linear probing, backward-shift deletion: no tombstones), and a
//! direct-mapped ghost table of `u64` keys with as many cells as the index has. Nothing
//! allocates after [`ClockMap::new`].

use kvhash::Digest;
use std::hash::BuildHasher;

/// What re-deriving a published hash gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value {
    /// Matched; the full digest children chain on (vLLM, SGLang).
    Derived(Digest),
    /// Matched (or stored) where the chain needs no digest (TensorRT-LLM chains on the 64-bit
    /// hash itself).
    Stored,
    /// Published, but the re-derived hash differed.
    Mismatched,
    /// Published, but not re-derivable, for this reason.
    Unverifiable(super::Unverifiable),
}

/// The result of a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Present.
    Hit(Value),
    /// Not present, but evicted from the map not long ago (the ghost table remembers it;
    /// approximate: a later eviction may overwrite the memory, and the key then reads
    /// [`Lookup::Missing`]).
    Evicted,
    /// Never seen (or evicted long ago).
    Missing,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    key: u64,
    value: Value,
    referenced: bool,
}

/// Bytes of one slot (key, value with its inline digest, CLOCK bit).
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

/// Bytes a map of `capacity` entries takes: slots, index and ghost table.
pub fn bytes_for(capacity: usize) -> usize {
    let cells = index_cells(capacity);
    capacity * SLOT_BYTES + cells * (std::mem::size_of::<u32>() + std::mem::size_of::<u64>())
}

fn index_cells(capacity: usize) -> usize {
    (capacity.max(1) * 2).next_power_of_two()
}

const EMPTY: u32 = 0;

pub(crate) struct ClockMap {
    slots: Vec<Slot>,
    capacity: usize,
    /// `slot number + 1`, or [`EMPTY`].
    index: Vec<u32>,
    ghosts: Vec<u64>,
    mask: usize,
    hand: usize,
    seed: u64,
    evictions: u64,
}

impl ClockMap {
    /// A map of at most `capacity` entries (at least 1, at most 2^31).
    pub(crate) fn new(capacity: usize) -> ClockMap {
        let capacity = capacity.clamp(1, 1 << 31);
        let cells = index_cells(capacity);
        // A per-map random seed keeps crafted hash values from lining up in one probe run.
        let seed =
            std::collections::hash_map::RandomState::new().hash_one(0x006b_7665_7861_6374_u64);
        ClockMap {
            slots: Vec::with_capacity(capacity),
            capacity,
            index: vec![EMPTY; cells],
            ghosts: vec![0; cells],
            mask: cells - 1,
            hand: 0,
            seed,
            evictions: 0,
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn evictions(&self) -> u64 {
        self.evictions
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        let x = (key ^ self.seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ((x ^ (x >> 29)) as usize) & self.mask
    }

    #[inline]
    fn ghost_cell(&self, key: u64) -> usize {
        let x = (key ^ self.seed.rotate_left(32)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
        ((x ^ (x >> 31)) as usize) & self.mask
    }

    /// The index cell holding `key`, if present.
    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        let mut i = self.home(key);
        loop {
            let c = *self.index.get(i)?;
            if c == EMPTY {
                return None;
            }
            if self.slots.get(c as usize - 1).is_some_and(|s| s.key == key) {
                return Some(i);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Looks `key` up (and marks it recently used).
    pub(crate) fn get(&mut self, key: u64) -> Lookup {
        if let Some(cell) = self.find(key) {
            let slot = self.index[cell] as usize - 1;
            if let Some(s) = self.slots.get_mut(slot) {
                s.referenced = true;
                return Lookup::Hit(s.value);
            }
        }
        if key != 0 && self.ghosts.get(self.ghost_cell(key)) == Some(&key) {
            Lookup::Evicted
        } else {
            Lookup::Missing
        }
    }

    /// Whether `key` is present (without marking it).
    pub(crate) fn contains(&self, key: u64) -> bool {
        self.find(key).is_some()
    }

    /// Sets `key` to `value`: replaces a present entry, else takes a free slot, else evicts the
    /// first entry the CLOCK hand finds unreferenced since its last pass.
    pub(crate) fn insert(&mut self, key: u64, value: Value) {
        if let Some(cell) = self.find(key) {
            let slot = self.index[cell] as usize - 1;
            if let Some(s) = self.slots.get_mut(slot) {
                s.value = value;
                s.referenced = true;
            }
            return;
        }
        let fresh = Slot {
            key,
            value,
            referenced: false,
        };
        let slot = if self.slots.len() < self.capacity {
            self.slots.push(fresh);
            self.slots.len() - 1
        } else {
            let victim = self.advance_hand();
            let old = self.slots[victim].key;
            if let Some(cell) = self.find(old) {
                self.remove_cell(cell);
            }
            let g = self.ghost_cell(old);
            self.ghosts[g] = old;
            self.evictions += 1;
            self.slots[victim] = fresh;
            victim
        };
        let mut i = self.home(key);
        while self.index[i] != EMPTY {
            i = (i + 1) & self.mask;
        }
        self.index[i] = slot as u32 + 1;
    }

    /// The next slot without its reference bit, clearing bits on the way (CLOCK).
    fn advance_hand(&mut self) -> usize {
        loop {
            let h = self.hand;
            self.hand = (self.hand + 1) % self.capacity;
            let s = &mut self.slots[h];
            if s.referenced {
                s.referenced = false;
            } else {
                return h;
            }
        }
    }

    /// Backward-shift deletion of an index cell.
    fn remove_cell(&mut self, cell: usize) {
        let mut i = cell;
        let mut j = cell;
        loop {
            j = (j + 1) & self.mask;
            let c = self.index[j];
            if c == EMPTY {
                break;
            }
            let k = self.home(self.slots[c as usize - 1].key);
            let stays = if i <= j {
                i < k && k <= j
            } else {
                i < k || k <= j
            };
            if stays {
                continue;
            }
            self.index[i] = c;
            i = j;
        }
        self.index[i] = EMPTY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn behaves_as_a_bounded_map() {
        let mut m = ClockMap::new(64);
        let mut model: HashMap<u64, Value> = HashMap::new();
        let mut x = 0x1234_5678_9abc_def0u64;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = x % 200 + 1;
            if step % 3 == 0 {
                m.insert(key, Value::Stored);
                model.insert(key, Value::Stored);
            } else if let Lookup::Hit(v) = m.get(key) {
                assert_eq!(model.get(&key), Some(&v));
            }
            assert!(m.len() <= 64);
        }
        // Everything present in the map is in the model, and every index cell is reachable.
        let present: Vec<u64> = (1..=200).filter(|k| m.contains(*k)).collect();
        assert_eq!(present.len(), m.len());
        assert!(m.evictions() > 0);
    }

    #[test]
    fn clock_keeps_what_is_used_and_remembers_evictions() {
        let mut m = ClockMap::new(4);
        for k in 1..=4 {
            m.insert(k, Value::Stored);
        }
        // Key 1 is used again; 5 and 6 evict others first.
        assert_eq!(m.get(1), Lookup::Hit(Value::Stored));
        m.insert(5, Value::Mismatched);
        m.insert(
            6,
            Value::Unverifiable(super::super::Unverifiable::HashError),
        );
        assert_eq!(m.get(1), Lookup::Hit(Value::Stored));
        assert_eq!(m.get(5), Lookup::Hit(Value::Mismatched));
        let evicted: Vec<u64> = (2..=4).filter(|k| !m.contains(*k)).collect();
        assert_eq!(evicted, [2, 3]);
        // The ghost table is direct-mapped: the later eviction always reads evicted, the
        // earlier one unless both fell into the same cell (then it reads missing).
        assert_eq!(m.get(3), Lookup::Evicted);
        assert!(matches!(m.get(2), Lookup::Evicted | Lookup::Missing));
        assert_eq!(m.get(99), Lookup::Missing);
        // 64 bytes a slot (key, value with its inline digest, CLOCK bit) and 24 of index and
        // ghost cells: the 88 bytes an entry the module docs state (64-bit targets).
        if cfg!(target_pointer_width = "64") {
            assert_eq!(SLOT_BYTES, 64);
            assert_eq!(bytes_for(65_536), 65_536 * 88);
        }
    }
}
