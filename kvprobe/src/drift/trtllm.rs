//! TensorRT-LLM: re-deriving each block of a `stored` event from the published parent hash.

use super::map::Value;
use super::{rederived_mismatch, BlockAt, Book, Outcome, Tokens, Unverifiable};
use crate::Error;
use kvhash::events::{TrtStored, TrtStoredBlock};
use kvhash::trtllm::{BlockMmKey, SaltVariant, TrtllmHasher};

pub(crate) struct TrtDeriver {
    salt: Option<SaltVariant>,
    block_size: usize,
    ids: Vec<u32>,
    extra: Vec<u64>,
    mm: Vec<BlockMmKey>,
}

impl TrtDeriver {
    pub(crate) fn new(salt: Option<SaltVariant>, block_size: usize) -> Result<TrtDeriver, Error> {
        TrtllmHasher::new(block_size)?;
        Ok(TrtDeriver {
            salt,
            block_size,
            ids: Vec::new(),
            extra: Vec::new(),
            mm: Vec::new(),
        })
    }

    pub(crate) fn stored(
        &mut self,
        book: &mut Book,
        st: &TrtStored,
        event_index: usize,
        event_id: Option<u64>,
    ) {
        let mut parent = st.parent_hash.unwrap_or(0);
        let last = st.blocks.len().saturating_sub(1);
        for (j, b) in st.blocks.iter().enumerate() {
            self.ids.clear();
            self.extra.clear();
            self.ids.extend(b.tokens.iter().map(|t| t.token_id_u32()));
            self.extra.extend(b.tokens.iter().map(|t| t.token_extra_id));
            let mut outcome = self.derive(b, parent, j == last);
            // A block re-derived on its published parent is right relative to it; but where
            // that parent mismatched (or descends from a mismatch) it is a consequence of that
            // evidence, and where the parent was unverifiable so is the chain.
            if let (Outcome::Matched(_), Some(t)) = (
                &outcome,
                (parent != 0).then(|| book.taint(parent)).flatten(),
            ) {
                outcome = Outcome::Unverifiable(t);
            }
            let published_u64 = b.block_hash;
            let at = || BlockAt {
                event_index,
                block_index: j,
                event_id,
                token_ids_offset: None,
                tokens: Tokens::U32(&self.ids),
                event_block_size: self.ids.len() as u64,
                parent: (parent != 0).then_some(parent),
                published: published_u64,
                published_bytes: None,
                keys: b
                    .cache_salt
                    .as_ref()
                    .map(|c| format!("cache_salt={c}"))
                    .into_iter()
                    .chain(b.lora_id.map(|l| format!("lora_id={l}")))
                    .collect(),
            };
            book.record(published_u64, outcome, at);
            // The V1 hash chains on the published 64-bit parent itself.
            parent = b.block_hash;
        }
    }

    fn derive(&mut self, b: &TrtStoredBlock, parent: u64, last: bool) -> Outcome {
        let n = self.ids.len();
        if n == 0 {
            return Outcome::Unverifiable(Unverifiable::NoTokenIds);
        }
        if n > self.block_size {
            return Outcome::block_size("a stored block longer than the rule's block size");
        }
        if n < self.block_size && !last {
            return Outcome::block_size(
                "a short block followed by another one (only the last block of a chain can be partial)",
            );
        }
        if b.lora_id.is_some() {
            return Outcome::Unverifiable(Unverifiable::LoraNotRederivable);
        }
        self.mm.clear();
        for k in &b.mm_keys {
            let mut digest = [0u8; 32];
            if k.hash.len() != 64 || hex::decode_to_slice(&k.hash, &mut digest).is_err() {
                return Outcome::Unverifiable(Unverifiable::MmUuid);
            }
            self.mm.push(BlockMmKey {
                digest,
                start_offset: k.start_offset,
            });
        }
        let Ok(mut h) = TrtllmHasher::new(self.block_size) else {
            return Outcome::Unverifiable(Unverifiable::HashError);
        };
        if parent == 0 {
            if let Some(salt) = &b.cache_salt {
                match self.salt {
                    Some(v) if !salt.is_empty() => h = h.with_salt_value(v.salt_value(salt)),
                    _ => return Outcome::Unverifiable(Unverifiable::SaltVariantUnknown),
                }
            }
        }
        let uses_extra = self.extra.iter().any(|&e| e != 0);
        let h = h.with_extra_ids(uses_extra);
        let extra = uses_extra.then_some(&self.extra[..]);
        let Ok(got) = h.block_hash_with_mm_keys(parent, &self.ids, extra, &self.mm) else {
            return Outcome::Unverifiable(Unverifiable::HashError);
        };
        if got == b.block_hash {
            return Outcome::Matched(Value::Stored);
        }
        if !uses_extra {
            // All-zero extra ids do not prove the request had none (docs/contracts/trtllm.md §6): the one
            // other reading the contract allows.
            let with = h.with_extra_ids(true);
            if with
                .block_hash_with_mm_keys(parent, &self.ids, Some(&self.extra), &self.mm)
                .is_ok_and(|x| x == b.block_hash)
            {
                return Outcome::Matched(Value::Stored);
            }
        }
        rederived_mismatch(parent == 0, got, None)
    }
}
