//! FxHash, a tiny multiply-rotate hasher, and the byte-string map built on it: the
//! vocabulary and cache maps of this crate hash short keys where SipHash would dominate.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A tiny multiply-rotate hasher (FxHash) for the byte-string vocabulary.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Eight bytes a word, little-endian; the last word zero-padded. Whole words are read
        // as arrays (a copy of a slice of unknown length is a `memmove` call per word).
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.add(u64::from_le_bytes(
                <[u8; 8]>::try_from(w).unwrap_or_default(),
            ));
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            let mut buf = [0u8; 8];
            for (b, t) in buf.iter_mut().zip(tail) {
                *b = *t;
            }
            self.add(u64::from_le_bytes(buf));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.add(i as u64);
        self.add((i >> 64) as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// A map keyed by byte strings.
pub(crate) type BytesMap<V> = HashMap<Box<[u8]>, V, BuildHasherDefault<FxHasher>>;

#[cfg(test)]
mod tests {
    use super::FxHasher;
    use proptest::prelude::*;
    use std::hash::Hasher;

    /// The obvious form: every chunk of up to eight bytes copied into a zeroed word.
    fn slow(bytes: &[u8]) -> u64 {
        let mut h = FxHasher::default();
        for chunk in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            h.add(u64::from_le_bytes(buf));
        }
        h.finish()
    }

    proptest! {
        #[test]
        fn write_equals_the_chunked_copy(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let mut h = FxHasher::default();
            h.write(&bytes);
            prop_assert_eq!(h.finish(), slow(&bytes));
        }
    }
}
