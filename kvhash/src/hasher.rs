//! [`BlockHasher`]: one type over the three engines' hashers, for callers (the C ABI, the
//! hash challenge, a cross-turn cache) that only need "these ids → these u64 hashes".

use crate::sglang::SglangHasher;
use crate::trtllm::TrtllmHasher;
use crate::vllm::VllmHasher;
use crate::Error;

/// A configured hasher of any engine. Immutable, `Send + Sync`.
///
/// ```
/// use kvhash::{BlockHasher, vllm::{HashAlgo, VllmHasher}};
/// let h: BlockHasher = VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0")).unwrap().into();
/// let mut out = [0u64; 8];
/// assert_eq!(h.block_hashes_u64(&[1u32; 33], &mut out).unwrap(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BlockHasher {
    /// vLLM chain.
    Vllm(VllmHasher),
    /// SGLang page chain.
    Sglang(SglangHasher),
    /// TensorRT-LLM V1 block keys (hasher without extra ids).
    Trtllm(TrtllmHasher),
}

impl BlockHasher {
    /// Tokens per hashed block.
    pub fn block_size(&self) -> usize {
        match self {
            BlockHasher::Vllm(h) => h.block_size(),
            BlockHasher::Sglang(h) => h.page_size(),
            BlockHasher::Trtllm(h) => h.tokens_per_block(),
        }
    }

    /// Number of routable hashes `n_tokens` ids yield: full blocks only (vLLM with
    /// look-ahead: only blocks followed by their look-ahead tokens; SGLang EAGLE bigram mode:
    /// `n - 1` units).
    pub fn block_count(&self, n_tokens: usize) -> usize {
        match self {
            BlockHasher::Vllm(h) => h.block_count(n_tokens),
            BlockHasher::Sglang(h) => h.page_count(n_tokens),
            BlockHasher::Trtllm(h) => n_tokens / h.tokens_per_block(),
        }
    }

    /// Writes the routable (full-block) hashes of `ids` in the engine's KV-event integer
    /// form into `out`, stopping when `out` is full; returns the number written
    /// (`min(full blocks, out.len())`).
    ///
    /// vLLM: last 8 digest bytes big-endian; SGLang: first 8 digest bytes big-endian (the
    /// bits of the signed int64 it publishes); TensorRT-LLM: the 64-bit block key.
    pub fn block_hashes_u64(&self, ids: &[u32], out: &mut [u64]) -> Result<usize, Error> {
        match self {
            BlockHasher::Vllm(h) => h.block_hashes_u64(ids, out),
            BlockHasher::Sglang(h) => h.block_hashes_u64(ids, out),
            BlockHasher::Trtllm(h) => h.block_hashes_u64(ids, out),
        }
    }
}

impl BlockHasher {
    /// Number of hashes `n_tokens` ids give with the trailing partial block included when
    /// `with_partial_tail` is true: `n_tokens / block_size` full blocks, plus one for a
    /// partial tail where the engine defines its hash (SGLang's digest of the partial page,
    /// computed but never published; TensorRT-LLM's partial block key, published when a
    /// request ends). `None` when a partial tail is asked for and the engine defines no hash
    /// for it (vLLM never hashes a trailing partial block).
    ///
    /// ```
    /// use kvhash::{BlockHasher, sglang::SglangHasher, vllm::{HashAlgo, VllmHasher}};
    /// let sglang: BlockHasher = SglangHasher::new(16).unwrap().into();
    /// assert_eq!(sglang.hash_count(40, false), Some(2));
    /// assert_eq!(sglang.hash_count(40, true), Some(3));
    /// let vllm: BlockHasher = VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0")).unwrap().into();
    /// assert_eq!(vllm.hash_count(40, true), None);
    /// assert_eq!(vllm.hash_count(32, true), Some(2));
    /// ```
    pub fn hash_count(&self, n_tokens: usize, with_partial_tail: bool) -> Option<usize> {
        if self.keys_past_block_end() {
            // Look-ahead and bigram keys: a block is keyed only once the tokens after it
            // exist, and no engine defines the hash of a partial tail under them.
            let keyed = self.block_count(n_tokens);
            return (!with_partial_tail || n_tokens == keyed * self.block_size()).then_some(keyed);
        }
        let full = n_tokens / self.block_size();
        if !with_partial_tail || n_tokens.is_multiple_of(self.block_size()) {
            return Some(full);
        }
        match self {
            BlockHasher::Vllm(_) => None,
            // No vector shows a namespaced partial tail.
            BlockHasher::Sglang(h) if h.event_namespace().is_some() => None,
            BlockHasher::Sglang(_) | BlockHasher::Trtllm(_) => Some(full + 1),
        }
    }

    /// Whether a block's key depends on tokens after the block (vLLM look-ahead hashing,
    /// SGLang EAGLE bigram pages): then fewer blocks are keyed than `n / block_size`.
    pub fn keys_past_block_end(&self) -> bool {
        match self {
            BlockHasher::Vllm(h) => h.lookahead() > 0,
            BlockHasher::Sglang(h) => h.mode() == crate::sglang::KeyMode::EagleBigram,
            BlockHasher::Trtllm(_) => false,
        }
    }

    /// [`BlockHasher::block_hashes_u64`] with the trailing partial block's hash after the
    /// full blocks' (see [`BlockHasher::hash_count`]), in one pass over the chain; stops when
    /// `out` is full and returns the number written. `Ok(None)` when `ids` end in a partial
    /// block whose hash the engine does not define (vLLM); nothing is written then.
    pub fn block_hashes_u64_with_tail(
        &self,
        ids: &[u32],
        out: &mut [u64],
    ) -> Result<Option<usize>, Error> {
        if ids.len().is_multiple_of(self.block_size()) {
            return self.block_hashes_u64(ids, out).map(Some);
        }
        let mut n = 0usize;
        let mut sink = |h: u64| {
            if let Some(slot) = out.get_mut(n) {
                *slot = h;
                n += 1;
            }
        };
        let tail = match self {
            BlockHasher::Sglang(h) if h.event_namespace().is_some() => None,
            BlockHasher::Sglang(h) => {
                let mut chain = h.chain();
                chain.extend(ids, |d| sink(d.first8_be()));
                chain.partial_digest().map(|d| d.first8_be())
            }
            BlockHasher::Trtllm(h) => {
                let mut chain = h.chain();
                chain.extend(ids, &mut sink)?;
                chain.partial_hash()
            }
            BlockHasher::Vllm(_) => None,
        };
        let Some(t) = tail else {
            return Ok(None);
        };
        sink(t);
        Ok(Some(n))
    }
}

impl From<VllmHasher> for BlockHasher {
    fn from(h: VllmHasher) -> Self {
        BlockHasher::Vllm(h)
    }
}
impl From<SglangHasher> for BlockHasher {
    fn from(h: SglangHasher) -> Self {
        BlockHasher::Sglang(h)
    }
}
impl From<TrtllmHasher> for BlockHasher {
    fn from(h: TrtllmHasher) -> Self {
        BlockHasher::Trtllm(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashers() -> [BlockHasher; 3] {
        use crate::sglang::SglangHasher;
        use crate::trtllm::TrtllmHasher;
        use crate::vllm::{HashAlgo, VllmHasher};
        [
            VllmHasher::new(HashAlgo::Sha256Cbor, 4, Some("0"))
                .unwrap()
                .into(),
            SglangHasher::new(4).unwrap().into(),
            TrtllmHasher::new(4).unwrap().into(),
        ]
    }

    /// The full blocks come first and equal `block_hashes_u64`; the tail hash depends on the
    /// tail's tokens; vLLM writes nothing; whole blocks give no tail.
    #[test]
    fn partial_tail_follows_the_full_blocks() {
        let ids: Vec<u32> = (1..=10).collect();
        for h in hashers() {
            let mut full = [0u64; 8];
            let nf = h.block_hashes_u64(&ids, &mut full).unwrap();
            assert_eq!(nf, 2);
            let mut out = [0u64; 8];
            let got = h.block_hashes_u64_with_tail(&ids, &mut out).unwrap();
            match h {
                BlockHasher::Vllm(_) => {
                    assert_eq!(got, None);
                    assert_eq!(h.hash_count(ids.len(), true), None);
                    assert_eq!(out, [0; 8]);
                }
                _ => {
                    assert_eq!(got, Some(3));
                    assert_eq!(h.hash_count(ids.len(), true), Some(3));
                    assert_eq!(out[..2], full[..2]);
                    // The tail depends on its tokens and differs from every full block.
                    let mut other = ids.clone();
                    other[9] += 1;
                    let mut out2 = [0u64; 8];
                    h.block_hashes_u64_with_tail(&other, &mut out2).unwrap();
                    assert_eq!(out2[..2], full[..2]);
                    assert_ne!(out2[2], out[2]);
                    assert!(!full[..2].contains(&out[2]));
                    // Short buffers stop early.
                    let mut one = [0u64; 1];
                    assert_eq!(
                        h.block_hashes_u64_with_tail(&ids, &mut one).unwrap(),
                        Some(1)
                    );
                    assert_eq!(one[0], full[0]);
                }
            }
            // Whole blocks: the same as the full-block hashes, for every engine.
            let mut whole = [0u64; 8];
            assert_eq!(
                h.block_hashes_u64_with_tail(&ids[..8], &mut whole).unwrap(),
                Some(2)
            );
            assert_eq!(whole[..2], full[..2]);
            assert_eq!(h.hash_count(8, true), Some(2));
            assert_eq!(h.hash_count(10, false), Some(2));
        }
    }

    /// The tail hash equals what each engine's chain API gives for the partial block.
    #[test]
    fn partial_tail_matches_the_chain_apis() {
        let ids: Vec<u32> = (100..111).collect();
        let [_, sg, trt] = hashers();
        let mut out = [0u64; 4];
        assert_eq!(
            sg.block_hashes_u64_with_tail(&ids, &mut out).unwrap(),
            Some(3)
        );
        if let BlockHasher::Sglang(h) = &sg {
            let mut c = h.chain();
            c.extend(&ids, |_| {});
            assert_eq!(c.partial_digest().unwrap().first8_be(), out[2]);
        }
        assert_eq!(
            trt.block_hashes_u64_with_tail(&ids, &mut out).unwrap(),
            Some(3)
        );
        if let BlockHasher::Trtllm(h) = &trt {
            let mut c = h.chain();
            c.extend(&ids, |_| {}).unwrap();
            assert_eq!(c.partial_hash().unwrap(), out[2]);
        }
    }

    #[test]
    fn send_sync() {
        fn f<T: Send + Sync>() {}
        f::<BlockHasher>();
    }
}
