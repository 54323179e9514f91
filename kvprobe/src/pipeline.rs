//! [`Pipeline`]: the gateway's hot path in one call — parse, refuse, render, tokenize, hash.
//! kvtemplate turns a raw OpenAI body into the ids the engine caches; kvhash turns those ids
//! into the engine's block hashes. Both caches plug in here: the encoder's `kvtoken::SegmentCache` (enable it with
//! [`kvtemplate::Encoder::enable_segment_cache`] before sharing the encoder) and a shared
//! [`PrefixCache`] of block-hash chains. Results are identical with or without them.
//!
//! Requests are borrowed, never copied; the rendered text and the full ids live in the
//! caller's [`ScratchBuf`] (keep one per thread); hashes are written into the caller's
//! buffers. Nothing is allocated per block.

use std::ops::Range;
use std::sync::Arc;

use kvhash::prefix_cache::PrefixCache;
use kvhash::BlockHasher;
use kvtemplate::{Encoder, Outcome, ScratchBuf};

use crate::Error;

/// What one encode-and-hash call produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Ids written to the caller's id buffer.
    pub ids: usize,
    /// The prompt had more ids than the id buffer holds (the rest were cut; the hashes still
    /// cover the whole prompt, as the engine caches it).
    pub truncated: bool,
    /// Block hashes written (full blocks of the whole prompt, capped at the hash buffer).
    pub hashes: usize,
}

/// One request of a [`Pipeline::encode_and_hash_chat_batch`] call.
#[derive(Debug)]
pub struct BatchItem {
    /// The outcome (a refusal or error affects this request only).
    pub outcome: Result<Outcome<()>, Error>,
    /// This request's ids in the batch's id buffer (empty unless done).
    pub ids: Range<usize>,
    /// This request's block hashes in the batch's hash buffer (empty unless done).
    pub hashes: Range<usize>,
}

/// An encoder (one profile × engine contract), the contract's block hasher and an optional
/// shared prefix cache. `Send + Sync`; share it behind an `Arc`.
#[derive(Debug, Clone)]
pub struct Pipeline {
    encoder: Arc<Encoder>,
    hasher: BlockHasher,
    prefix: Option<Arc<PrefixCache>>,
}

impl Pipeline {
    /// A pipeline without a prefix cache.
    pub fn new(encoder: Arc<Encoder>, hasher: BlockHasher) -> Self {
        Pipeline {
            encoder,
            hasher,
            prefix: None,
        }
    }

    /// The same pipeline hashing through `cache` (which may be shared with other pipelines:
    /// entries are keyed by the hasher's whole configuration).
    pub fn with_prefix_cache(mut self, cache: Arc<PrefixCache>) -> Self {
        self.prefix = Some(cache);
        self
    }

    /// The encoder.
    pub fn encoder(&self) -> &Arc<Encoder> {
        &self.encoder
    }

    /// The block hasher.
    pub fn hasher(&self) -> &BlockHasher {
        &self.hasher
    }

    /// The prefix cache, if any.
    pub fn prefix_cache(&self) -> Option<&Arc<PrefixCache>> {
        self.prefix.as_ref()
    }

    /// Full blocks of `n_ids` ids (the most hashes a prompt of that length has).
    pub fn blocks_of(&self, n_ids: usize) -> usize {
        n_ids / self.hasher.block_size().max(1)
    }

    fn hash(&self, ids: &[u32], out: &mut [u64]) -> Result<usize, Error> {
        Ok(match &self.prefix {
            Some(cache) => cache.block_hashes_u64(&self.hasher, ids, out)?,
            None => self.hasher.block_hashes_u64(ids, out)?,
        })
    }

    /// How many ids a call must tokenize to fill `ids_out` ids and `hashes_out` block hashes
    /// (tokenization stops there: the work is bounded by the caller's buffers).
    fn cap_for(&self, ids_out: usize, hashes_out: usize) -> usize {
        ids_out.max(hashes_out.saturating_mul(self.hasher.block_size().max(1)))
    }

    /// Strict chat path: [`Encoder::encode_chat`] (refusal scan, render at `now_ms`, encode)
    /// then the block hashes of the prompt's ids into `hashes_out`. Tokenization stops once
    /// both buffers can be filled; those ids (the first ones of the prompt, exactly) stay in
    /// `scratch` ([`ScratchBuf::ids`]), so the hashes cover `hashes_out.len()` blocks even
    /// when `ids_out` is shorter.
    pub fn encode_and_hash_chat(
        &self,
        body: &[u8],
        now_ms: i64,
        ids_out: &mut [u32],
        hashes_out: &mut [u64],
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<Counts>, Error> {
        let cap = self.cap_for(ids_out.len(), hashes_out.len());
        let enc = match self
            .encoder
            .encode_chat_capped(body, now_ms, cap, scratch)?
        {
            Outcome::Done(e) => e,
            Outcome::Refused(r) => return Ok(Outcome::Refused(r)),
        };
        self.finish(enc, scratch, ids_out, hashes_out)
    }

    /// Completions twin of [`encode_and_hash_chat`](Self::encode_and_hash_chat) for the
    /// extracted prompt text ([`Encoder::encode_completions`]: the engine's BOS rules).
    pub fn encode_and_hash_completions(
        &self,
        prompt: &str,
        ids_out: &mut [u32],
        hashes_out: &mut [u64],
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<Counts>, Error> {
        let cap = self.cap_for(ids_out.len(), hashes_out.len());
        let enc = match self
            .encoder
            .encode_completions_capped(prompt, cap, scratch)?
        {
            Outcome::Done(e) => e,
            Outcome::Refused(r) => return Ok(Outcome::Refused(r)),
        };
        self.finish(enc, scratch, ids_out, hashes_out)
    }

    /// Copies the first ids into `ids_out` and hashes the ids in `scratch`.
    fn finish(
        &self,
        enc: kvtemplate::Encoded,
        scratch: &ScratchBuf,
        ids_out: &mut [u32],
        hashes_out: &mut [u64],
    ) -> Result<Outcome<Counts>, Error> {
        let ids = scratch.ids();
        let n = ids.len().min(ids_out.len());
        if let (Some(dst), Some(src)) = (ids_out.get_mut(..n), ids.get(..n)) {
            dst.copy_from_slice(src);
        }
        let hashes = self.hash(ids, hashes_out)?;
        Ok(Outcome::Done(Counts {
            ids: n,
            truncated: enc.truncated || ids.len() > n,
            hashes,
        }))
    }

    /// Encodes and hashes many chat bodies in one call, reusing one scratch. `ids` and
    /// `hashes` are cleared, then receive every done request's full ids and block hashes
    /// back to back; `items` is cleared, then gets one [`BatchItem`] per body, in order,
    /// with the request's ranges in those buffers.
    pub fn encode_and_hash_chat_batch(
        &self,
        bodies: &[&[u8]],
        now_ms: i64,
        ids: &mut Vec<u32>,
        hashes: &mut Vec<u64>,
        items: &mut Vec<BatchItem>,
        scratch: &mut ScratchBuf,
    ) {
        ids.clear();
        hashes.clear();
        items.clear();
        items.reserve(bodies.len());
        for body in bodies {
            let (i0, h0) = (ids.len(), hashes.len());
            let outcome = self.batch_one(body, now_ms, ids, hashes, scratch);
            if !matches!(outcome, Ok(Outcome::Done(()))) {
                ids.truncate(i0);
                hashes.truncate(h0);
            }
            items.push(BatchItem {
                outcome,
                ids: i0..ids.len(),
                hashes: h0..hashes.len(),
            });
        }
    }

    fn batch_one(
        &self,
        body: &[u8],
        now_ms: i64,
        ids: &mut Vec<u32>,
        hashes: &mut Vec<u64>,
        scratch: &mut ScratchBuf,
    ) -> Result<Outcome<()>, Error> {
        // Every id of the prompt lands in the scratch (bounded by the encoder's limits).
        if let Outcome::Refused(r) =
            self.encoder
                .encode_chat_capped(body, now_ms, usize::MAX, scratch)?
        {
            return Ok(Outcome::Refused(r));
        }
        let full = scratch.ids();
        ids.extend_from_slice(full);
        let h0 = hashes.len();
        let blocks = self.blocks_of(full.len());
        hashes.resize(h0 + blocks, 0);
        let n = match hashes.get_mut(h0..) {
            Some(tail) => self.hash(full, tail)?,
            None => 0,
        };
        hashes.truncate(h0 + n);
        Ok(Outcome::Done(()))
    }
}
