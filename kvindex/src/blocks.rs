//! A run's block hashes: a vector with room at the front, so a run grows and shrinks at
//! either end in amortised constant time (a position moving between neighbouring runs is
//! the common change).

use std::ops::Deref;

/// Block hashes in chain order (`buf[head..]`).
#[derive(Debug, Default, Clone)]
pub(crate) struct Blocks {
    buf: Vec<u64>,
    head: usize,
}

impl Deref for Blocks {
    type Target = [u64];
    #[inline]
    fn deref(&self) -> &[u64] {
        &self.buf[self.head..]
    }
}

impl Blocks {
    /// A copy of `hashes`; one block gets room for fifteen more (a run is mostly made by a
    /// store and grown by the next blocks of its chain: one of up to sixteen blocks never
    /// reallocates).
    pub fn from_slice(hashes: &[u64]) -> Self {
        let mut buf = Vec::with_capacity(if hashes.len() == 1 { 16 } else { hashes.len() });
        buf.extend_from_slice(hashes);
        Blocks { buf, head: 0 }
    }

    /// Holds `hashes` instead, in the array it has when that has room ([`Blocks::shed`] left
    /// it), else as [`Blocks::from_slice`].
    pub fn reset(&mut self, hashes: &[u64]) {
        if self.buf.capacity() < hashes.len() {
            *self = Blocks::from_slice(hashes);
            return;
        }
        self.buf.clear();
        self.buf.extend_from_slice(hashes);
        self.head = 0;
    }

    /// Empties the array for reuse ([`Blocks::reset`]), keeping it when it has room for 32
    /// blocks or fewer (256 bytes), dropping a larger one.
    pub fn shed(&mut self) {
        if self.buf.capacity() > 32 {
            *self = Blocks::default();
        } else {
            self.buf.clear();
            self.head = 0;
        }
    }

    /// Appends a block; a full array grows to at least 16 blocks (an array made smaller, by
    /// [`Blocks::from_slice`] or [`Blocks::prepend`], mostly belongs to a run that goes on
    /// growing).
    pub fn push(&mut self, hash: u64) {
        if self.buf.len() == self.buf.capacity() {
            self.buf.reserve(self.buf.len().max(12));
        }
        self.buf.push(hash);
    }

    /// Appends blocks.
    pub fn extend(&mut self, hashes: &[u64]) {
        self.buf.extend_from_slice(hashes);
    }

    /// Drops the last block.
    pub fn pop(&mut self) -> Option<u64> {
        if self.buf.len() > self.head {
            self.buf.pop()
        } else {
            None
        }
    }

    /// Keeps the first `n` blocks.
    pub fn truncate(&mut self, n: usize) {
        self.buf.truncate(self.head + n);
    }

    /// Drops the first `n` blocks (`n` at most the length).
    pub fn drain_front(&mut self, n: usize) {
        self.head = (self.head + n).min(self.buf.len());
        let live = self.buf.len() - self.head;
        if self.head > 2 * live + 16 {
            self.buf.drain(..self.head);
            self.head = 0;
        }
    }

    /// Puts `hashes` before the first block; makes room at the front (as much as the new
    /// length) when there is too little.
    pub fn prepend(&mut self, hashes: &[u64]) {
        let n = hashes.len();
        if self.head < n {
            let len = self.len() + n;
            let gap = len.max(4);
            let mut buf = Vec::with_capacity(gap + len);
            buf.resize(gap, 0);
            buf.extend_from_slice(hashes);
            buf.extend_from_slice(&self.buf[self.head..]);
            self.buf = buf;
            self.head = gap;
        } else {
            self.head -= n;
            self.buf[self.head..self.head + n].copy_from_slice(hashes);
        }
    }

    /// Heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.buf.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every operation equals the same on a plain `Vec`.
        #[test]
        fn blocks_behave_like_a_vec(ops in prop::collection::vec((0..8u8, 0..40usize), 1..200)) {
            let mut b = Blocks::from_slice(&[0]);
            let mut v = vec![0u64];
            let mut next = 1u64;
            for (op, n) in ops {
                match op {
                    0 => { b.push(next); v.push(next); next += 1; }
                    1 => { prop_assert_eq!(b.pop(), v.pop()); }
                    2 => { let k = n.min(v.len()); b.truncate(k); v.truncate(k); }
                    3 => { let k = n.min(v.len()); b.drain_front(k); v.drain(..k); }
                    4 => {
                        let s: Vec<u64> = (0..n as u64 % 7).map(|i| next + i).collect();
                        next += 7;
                        b.prepend(&s);
                        v.splice(0..0, s);
                    }
                    5 => {
                        let s: Vec<u64> = (0..n as u64 % 5).map(|i| next + i).collect();
                        next += 5;
                        b.extend(&s);
                        v.extend(s);
                    }
                    6 => {
                        // A freed run's array, then a run made in its place.
                        b.shed();
                        prop_assert!(b.is_empty());
                        prop_assert!(b.heap_bytes() <= 32 * 8);
                        let s: Vec<u64> = (0..1 + n as u64 % 20).map(|i| next + i).collect();
                        next += 20;
                        b.reset(&s);
                        v = s;
                    }
                    _ => {
                        let s: Vec<u64> = (0..n as u64 % 20).map(|i| next + i).collect();
                        next += 20;
                        b.reset(&s);
                        v = s;
                    }
                }
                prop_assert_eq!(&*b, &v[..]);
            }
        }
    }
}
