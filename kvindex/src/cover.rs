//! A run's cover: the set of slots holding its blocks, as a bitset whose first 128 slots sit
//! inline (a change of one slot's membership allocates nothing on an index of up to 128
//! slots, the common size).

/// Slots as a bitset (bit `s % 64` of word `s / 64`); words past the second on the heap,
/// without trailing zero words, so equal sets compare equal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Cover {
    low: [u64; 2],
    high: Option<Box<[u64]>>,
}

impl Cover {
    /// Word `w`.
    #[inline]
    pub fn word(&self, w: usize) -> u64 {
        match w {
            0 | 1 => self.low[w],
            _ => self
                .high
                .as_ref()
                .and_then(|h| h.get(w - 2).copied())
                .unwrap_or(0),
        }
    }

    /// Whether `slot` is in the set.
    pub fn has(&self, slot: u32) -> bool {
        self.word(slot as usize / 64) & (1u64 << (slot % 64)) != 0
    }

    /// Members.
    pub fn len(&self) -> usize {
        let high: u32 = self
            .high
            .iter()
            .flat_map(|h| h.iter())
            .map(|w| w.count_ones())
            .sum();
        (self.low[0].count_ones() + self.low[1].count_ones() + high) as usize
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.low == [0, 0] && self.high.is_none()
    }

    /// Whether `slot` is the only member.
    #[inline]
    pub fn is_only(&self, slot: u32) -> bool {
        let (w, bit) = (slot as usize / 64, 1u64 << (slot % 64));
        match (w, self.high.as_deref()) {
            (0 | 1, None) => self.low[w] == bit && self.low[1 - w] == 0,
            (0 | 1, Some(_)) => false,
            (_, None) => false,
            // The heap words have no trailing zero word: the slot's word is the last.
            (_, Some(h)) => {
                self.low == [0, 0]
                    && h.len() == w - 1
                    && h[w - 2] == bit
                    && h[..w - 2].iter().all(|&x| x == 0)
            }
        }
    }

    /// The set with `slot` added (`on`) or taken out.
    pub fn with(&self, slot: u32, on: bool) -> Cover {
        let mut c = self.clone();
        c.set(slot, on);
        c
    }

    fn set(&mut self, slot: u32, on: bool) {
        let w = slot as usize / 64;
        let bit = 1u64 << (slot % 64);
        if w < 2 {
            if on {
                self.low[w] |= bit;
            } else {
                self.low[w] &= !bit;
            }
            return;
        }
        let mut h: Vec<u64> = self.high.take().map(Vec::from).unwrap_or_default();
        if h.len() <= w - 2 {
            h.resize(w - 1, 0);
        }
        if on {
            h[w - 2] |= bit;
        } else {
            h[w - 2] &= !bit;
        }
        while h.last() == Some(&0) {
            h.pop();
        }
        self.high = (!h.is_empty()).then(|| h.into_boxed_slice());
    }

    /// Heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.high.as_ref().map_or(0, |h| h.len() * 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// Membership, emptiness and equality equal a plain set's, across the inline and heap
        /// words.
        #[test]
        fn covers_behave_like_sets(ops in prop::collection::vec((0..300u32, any::<bool>()), 1..60)) {
            let mut c = Cover::default();
            let mut s = BTreeSet::new();
            for (slot, on) in ops {
                c = c.with(slot, on);
                if on { s.insert(slot); } else { s.remove(&slot); }
                for x in [0, 1, 63, 64, 127, 128, 191, 192, 299, slot] {
                    prop_assert_eq!(c.has(x), s.contains(&x));
                }
                prop_assert_eq!(c.is_empty(), s.is_empty());
                prop_assert_eq!(c.len(), s.len());
                prop_assert_eq!(c.is_only(slot), s.len() == 1 && s.contains(&slot));
                // The canonical form: the same set built afresh compares equal.
                let fresh = s.iter().fold(Cover::default(), |c, &x| c.with(x, true));
                prop_assert_eq!(&c, &fresh);
            }
        }
    }
}
