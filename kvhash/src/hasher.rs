//! [`BlockHasher`]: one type over the three engines' hashers, for callers (the C ABI, the
//! hash challenge, a cross-turn cache) that only need "these ids → these u64 hashes".

use crate::sglang::SglangHasher;
use crate::trtllm::TrtllmHasher;
use crate::vllm::VllmHasher;
use crate::Error;

/// The engine whose block hashes are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashEngine {
    /// vLLM.
    Vllm,
    /// SGLang.
    Sglang,
    /// TensorRT-LLM.
    Trtllm,
}

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
    /// The engine.
    pub fn engine(&self) -> HashEngine {
        match self {
            BlockHasher::Vllm(_) => HashEngine::Vllm,
            BlockHasher::Sglang(_) => HashEngine::Sglang,
            BlockHasher::Trtllm(_) => HashEngine::Trtllm,
        }
    }

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

    #[test]
    fn send_sync() {
        fn f<T: Send + Sync>() {}
        f::<BlockHasher>();
    }
}
