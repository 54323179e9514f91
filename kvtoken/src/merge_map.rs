//! The merge table of BPE over token ids: `(left id, right id)` → `(rank, merged id)`, an
//! open-addressing map behind a bit filter. A leaf module: the merge algorithms
//! ([`crate::bpe`], [`crate::runs`]) and the table builders all read it.

use std::collections::HashMap;

use serde_json::Value;

/// One merge: the pair of ids, and its `(rank, merged id)`.
pub(crate) type Merge = ((u32, u32), (u32, u32));

/// Open-addressing map from an id pair to `(rank, merged id)`; key and value share one
/// 16-byte slot, so a look-up touches one cache line. In front of it, a 256 KiB bitmap
/// with one bit per hashed pair, set for every pair in the map: a clear bit proves the pair
/// absent without touching the (megabytes of) slots — most look-ups of long random words
/// (CJK, emoji, letters) are of absent pairs, and the bitmap stays in L2.
pub(crate) struct MergeMap {
    filter: Vec<u64>,
    slots: Vec<(u64, (u32, u32))>,
    mask: usize,
    /// One more than the highest rank present (0 for no merges).
    ranks: usize,
}

const EMPTY: u64 = u64::MAX;

impl MergeMap {
    /// Builds the map; later duplicates of a pair overwrite earlier ones, as a `HashMap`
    /// collected from the merges list does in `tokenizers`.
    pub(crate) fn new(merges: &[Merge]) -> Self {
        let cap = (merges.len() + merges.len() / 2)
            .next_power_of_two()
            .max(16);
        let mut map = Self {
            filter: vec![0; FILTER_BITS / 64],
            slots: vec![(EMPTY, (0, 0)); cap],
            mask: cap - 1,
            ranks: 0,
        };
        for &((a, b), v) in merges {
            let key = pack(a, b);
            let mut slot = map.slot(key);
            loop {
                match map.slots.get(slot) {
                    Some(&(k, _)) if k == key || k == EMPTY => break,
                    _ => slot = (slot + 1) & map.mask,
                }
            }
            if let Some(entry) = map.slots.get_mut(slot) {
                *entry = (key, v);
            }
            let bit = filter_bit(key);
            if let Some(w) = map.filter.get_mut(bit / 64) {
                *w |= 1 << (bit % 64);
            }
        }
        map.ranks = map
            .slots
            .iter()
            .filter(|&&(k, _)| k != EMPTY)
            .map(|&(_, (rank, _))| rank as usize + 1)
            .max()
            .unwrap_or(0);
        map
    }

    #[inline]
    fn slot(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & self.mask
    }

    /// One more than the highest rank present (0 for no merges).
    #[inline]
    pub(crate) fn rank_count(&self) -> usize {
        self.ranks
    }

    /// `(rank, merged id)` of the pair `(a, b)`.
    #[inline]
    pub(crate) fn get(&self, a: u32, b: u32) -> Option<(u32, u32)> {
        let key = pack(a, b);
        let bit = filter_bit(key);
        if *self.filter.get(bit / 64)? & (1 << (bit % 64)) == 0 {
            return None;
        }
        let mut slot = self.slot(key);
        loop {
            let &(k, v) = self.slots.get(slot)?;
            if k == key {
                return Some(v);
            }
            if k == EMPTY {
                return None;
            }
            slot = (slot + 1) & self.mask;
        }
    }
}

/// Bits of [`MergeMap`]'s filter (256 KiB).
const FILTER_BITS: usize = 1 << 21;

/// The filter bit of a packed pair (another multiplier than the slot's, so that pairs
/// sharing a slot run do not share a bit).
#[inline]
fn filter_bit(key: u64) -> usize {
    (key.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> (64 - FILTER_BITS.trailing_zeros())) as usize
}

#[inline]
fn pack(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

/// The merges of a `tokenizer.json` (`model.merges`, as `"a b"` lines or `["a", "b"]`
/// pairs; a `#version` line skipped) on the ids of `vocab`, ranked in list order. `each` is
/// called with every merge's result (`a` and `b` joined) and its id, for the tables a path
/// derives from the merges; its error stops the reading.
pub(crate) fn merges_from_json(
    json: &Value,
    vocab: &HashMap<String, u32>,
    mut each: impl FnMut(&str, u32) -> Result<(), String>,
) -> Result<Vec<Merge>, String> {
    let model = json.get("model").unwrap_or(&Value::Null);
    let merges_json = model
        .get("merges")
        .and_then(Value::as_array)
        .ok_or("model.merges missing")?;
    let mut merges = Vec::with_capacity(merges_json.len());
    let mut rank = 0u32;
    // One buffer for every merge's result (a tokenizer has 10^5 merges).
    let mut joined = String::new();
    for m in merges_json {
        let (a, b) = match m {
            Value::String(line) => {
                if line.starts_with("#version") {
                    continue;
                }
                let mut parts = line.split(' ');
                match (parts.next(), parts.next(), parts.next()) {
                    (Some(a), Some(b), None) => (a, b),
                    _ => return Err(format!("bad merge {line:?}")),
                }
            }
            Value::Array(pair) => match pair.as_slice() {
                [Value::String(a), Value::String(b)] => (a.as_str(), b.as_str()),
                _ => return Err("bad merge pair".into()),
            },
            _ => return Err("bad merge".into()),
        };
        let id = |s: &str| {
            vocab
                .get(s)
                .copied()
                .ok_or_else(|| format!("merge token {s:?} not in vocab"))
        };
        joined.clear();
        joined.push_str(a);
        joined.push_str(b);
        let out = id(&joined)?;
        each(&joined, out)?;
        merges.push(((id(a)?, id(b)?), (rank, out)));
        rank += 1;
    }
    Ok(merges)
}
