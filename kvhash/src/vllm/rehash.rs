//! [`BlockRehasher`]: the digest of one block given explicitly — parent digest, tokens, extra
//! keys and look-ahead tokens — as a verifier re-derives a block a vLLM engine published in a
//! KV event (`BlockStored` carries the tokens and the untagged keys of every stored block).

use super::cbor::{self, PlainSha256Cbor};
use super::{check_len, pickle, BlockExtraKey, HashAlgo, TokenId, VllmRules};
use crate::events::TokenIter;
use crate::{Digest, Error};

/// Hashes single blocks `H(ser([parent, tokens, extra]))` of one release's rules and one
/// algorithm, reusing its buffers: after the first calls (buffers sized to the largest block
/// seen), [`BlockRehasher::digest`] does not allocate.
///
/// The plain `sha256_cbor` case (no keys, no look-ahead, at most 64 tokens) takes the same
/// stack fast path as [`super::VllmChain`].
///
/// ```
/// use kvhash::vllm::{BlockRehasher, HashAlgo, VllmHasher, VllmRules};
/// let h = VllmHasher::new(HashAlgo::Sha256Cbor, 16, Some("0")).unwrap();
/// let ids: Vec<u32> = (100..132).collect();
/// let mut chain = Vec::new();
/// h.chain().extend(&ids, |d| chain.push(d)).unwrap();
/// let mut r = BlockRehasher::new(VllmRules::REFERENCE, HashAlgo::Sha256Cbor);
/// let d0 = r.digest(&h.none_hash(), &ids[..16], &[], &[]).unwrap();
/// let d1 = r.digest(&d0, &ids[16..], &[], &[]).unwrap();
/// assert_eq!([d0, d1], chain[..]);
/// ```
pub struct BlockRehasher {
    rules: VllmRules,
    algo: HashAlgo,
    fast: Option<PlainSha256Cbor>,
    /// The second buffer of [`BlockRehasher::digest_wire_chain`]'s pipeline.
    fast2: Option<PlainSha256Cbor>,
    buf: Vec<u8>,
    scratch: Vec<u64>,
}

impl std::fmt::Debug for BlockRehasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockRehasher")
            .field("rules", &self.rules)
            .field("algo", &self.algo)
            .finish()
    }
}

impl BlockRehasher {
    /// A re-hasher for `rules` (the release's extra-key form and look-ahead ability) and `algo`.
    pub fn new(rules: VllmRules, algo: HashAlgo) -> Self {
        BlockRehasher {
            rules,
            algo,
            fast: None,
            fast2: None,
            buf: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// The rules.
    pub fn rules(&self) -> VllmRules {
        self.rules
    }

    /// The algorithm.
    pub fn algo(&self) -> HashAlgo {
        self.algo
    }

    /// The digest of the block `tokens` whose parent digest is `parent` (NONE_HASH for block
    /// 0), with its extra keys `keys` in vLLM's order (empty: `extra` is null) and, under
    /// look-ahead hashing (vLLM ≥ 0.33), the look-ahead tokens `ahead` (empty: none).
    ///
    /// Errors: a parent of another length than the algorithm's digest
    /// ([`Error::DigestLength`]), an empty block ([`Error::ZeroBlockSize`]), look-ahead tokens
    /// under rules without look-ahead ([`Error::RuleNotSupported`]), a pickle body over one
    /// frame ([`Error::PickleTooLarge`]).
    pub fn digest<T: TokenId>(
        &mut self,
        parent: &Digest,
        tokens: &[T],
        keys: &[BlockExtraKey<'_>],
        ahead: &[u64],
    ) -> Result<Digest, Error> {
        check_len(self.algo, parent)?;
        if tokens.is_empty() {
            return Err(Error::ZeroBlockSize);
        }
        if !ahead.is_empty() && !self.rules.lookahead {
            return Err(Error::RuleNotSupported {
                what: "look-ahead hashing (num_hash_lookahead_tokens)",
            });
        }
        if self.algo == HashAlgo::Sha256Cbor && keys.is_empty() && ahead.is_empty() {
            if self.fast.as_ref().map(PlainSha256Cbor::block_size) != Some(tokens.len()) {
                self.fast = PlainSha256Cbor::new(tokens.len());
            }
            if let (Some(f), Ok(p)) = (&mut self.fast, <&[u8; 32]>::try_from(parent.as_bytes())) {
                if let Some(d) = f.hash(p, tokens) {
                    return Ok(Digest::sha256(d));
                }
            }
        }
        let form = self.rules.extra_keys;
        let buf = &mut self.buf;
        buf.clear();
        let keys = keys.iter().copied();
        if self.algo.is_cbor() {
            cbor::encode_block(buf, parent.as_bytes(), tokens, keys, form, ahead);
        } else {
            pickle::encode_block(buf, parent.as_bytes(), tokens, keys, form, ahead)?;
        }
        Ok(self.algo.digest(buf))
    }

    /// [`BlockRehasher::digest`] of a plain block (no extra keys, no look-ahead) whose `n` ids
    /// are the next `n` of `ids` (a KV event's token-id view), advancing it past them. Under
    /// `sha256_cbor` the ids go from their msgpack bytes straight into the hashed CBOR, without
    /// being decoded first (the verifier's steady path); otherwise, and for ids not in
    /// msgpack's shortest form, they are decoded and hashed by [`BlockRehasher::digest`], the
    /// slow twin this is checked against. Errors as `digest`, and
    /// [`Error::EventBadLength`] when `ids` has fewer than `n` ids left.
    pub fn digest_wire(
        &mut self,
        parent: &Digest,
        ids: &mut TokenIter<'_>,
        n: usize,
    ) -> Result<Digest, Error> {
        check_len(self.algo, parent)?;
        if n == 0 {
            return Err(Error::ZeroBlockSize);
        }
        if self.algo == HashAlgo::Sha256Cbor {
            if self.fast.as_ref().map(PlainSha256Cbor::block_size) != Some(n) {
                self.fast = PlainSha256Cbor::new(n);
            }
            if let (Some(f), Ok(p)) = (&mut self.fast, <&[u8; 32]>::try_from(parent.as_bytes())) {
                if let Some((d, used)) = f.hash_msgpack(p, ids.rest()) {
                    ids.advance(used);
                    return Ok(Digest::sha256(d));
                }
            }
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.resize(n, 0);
        let got = ids.read_into(&mut scratch);
        let r = if got < n {
            Err(Error::EventBadLength {
                at: crate::events::Location::default(),
                what: "token ids",
                expected: "a whole block",
                found: got as u64,
            })
        } else {
            self.digest(parent, &scratch, &[], &[])
        };
        self.scratch = scratch;
        r
    }
}

impl BlockRehasher {
    /// [`BlockRehasher::digest_wire`] of up to `out.len()` consecutive plain blocks of `n` ids
    /// chained on each other (block `k`'s digest is block `k + 1`'s parent; `parent` is the
    /// first block's), as a vLLM `BlockStored` event without extra keys holds them. Writes
    /// `out[..k]` and advances `ids` past those `k` blocks, returning `k`; `k` is less than
    /// `out.len()` where a block cannot take the `sha256_cbor` transcoding path (another
    /// algorithm, ids not in msgpack's shortest form, fewer ids left, blocks over 64 ids,
    /// a parent of another length): those blocks are for [`BlockRehasher::digest_wire`].
    ///
    /// The blocks are pipelined (the next block's ids are transcoded while the previous
    /// digest is computed); the digests equal `digest_wire`'s block by block (proptest
    /// `rehash_twins`). Does not allocate.
    pub fn digest_wire_chain(
        &mut self,
        parent: &Digest,
        ids: &mut TokenIter<'_>,
        n: usize,
        out: &mut [Digest],
    ) -> usize {
        if self.algo != HashAlgo::Sha256Cbor || out.is_empty() {
            return 0;
        }
        let Ok(p) = <&[u8; 32]>::try_from(parent.as_bytes()) else {
            return 0;
        };
        if self.fast.as_ref().map(PlainSha256Cbor::block_size) != Some(n) {
            self.fast = PlainSha256Cbor::new(n);
        }
        if self.fast2.as_ref().map(PlainSha256Cbor::block_size) != Some(n) {
            self.fast2 = PlainSha256Cbor::new(n);
        }
        let (Some(a), Some(b)) = (&mut self.fast, &mut self.fast2) else {
            return 0;
        };
        let (k, used) = a.hash_msgpack_chain(b, p, ids.rest(), out);
        ids.advance(used);
        k
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ExtraKeyForm, LoraKey, MmFeature, NoneHashRule, VllmExtras, VllmHasher};
    use super::*;

    /// The request of the vectors' `lora_and_salt_and_mm` shape: LoRA, salt, one image at
    /// offset 6 of length 20, three blocks of 16 — and the keys its events publish per block.
    #[test]
    fn explicit_keys_give_the_chain_digests_for_every_form_and_algorithm() {
        let ids: Vec<u32> = (0..48).map(|i| 1000 + i * 37).collect();
        let extras = VllmExtras {
            lora: Some(LoraKey {
                name: "sql-lora".into(),
                path: "/adapters/sql-lora".into(),
            }),
            cache_salt: Some("tenant-a".into()),
            mm_features: vec![MmFeature {
                identifier: "img".into(),
                offset: 6,
                length: 20,
            }],
            prompt_embeds: None,
        };
        let lora = BlockExtraKey::Lora {
            name: "sql-lora",
            path: "/adapters/sql-lora",
        };
        let mm = |offset| BlockExtraKey::Mm {
            identifier: "img",
            offset,
        };
        let salt = BlockExtraKey::CacheSalt("tenant-a");
        let per_block: [&[BlockExtraKey<'_>]; 3] =
            [&[lora, mm(6), salt], &[lora, mm(-10)], &[lora]];
        for form in [ExtraKeyForm::K1, ExtraKeyForm::K2, ExtraKeyForm::K3] {
            let rules = VllmRules {
                none_hash: NoneHashRule::B,
                extra_keys: form,
                lookahead: false,
            };
            for algo in HashAlgo::ALL {
                let h = VllmHasher::with_rules(rules, algo, 16, Some("0"))
                    .unwrap()
                    .with_extras(extras.clone())
                    .unwrap();
                let chain = h.chain().extend_to_vec(&ids).unwrap();
                let mut r = BlockRehasher::new(rules, algo);
                let mut parent = h.none_hash();
                for (i, keys) in per_block.iter().enumerate() {
                    let d = r
                        .digest(&parent, &ids[i * 16..(i + 1) * 16], keys, &[])
                        .unwrap();
                    assert_eq!(d, chain[i], "{form} {algo} block {i}");
                    parent = d;
                }
                // Plain blocks on the same re-hasher (the fast path for sha256_cbor).
                let plain = VllmHasher::with_rules(rules, algo, 16, Some("0")).unwrap();
                let want = plain.chain().extend_to_vec(&ids).unwrap();
                let d = r.digest(&plain.none_hash(), &ids[..16], &[], &[]).unwrap();
                assert_eq!(d, want[0], "{form} {algo} plain");
            }
        }
    }

    #[test]
    fn lookahead_and_errors() {
        let rules = VllmRules {
            lookahead: true,
            ..VllmRules::REFERENCE
        };
        let ids: Vec<u64> = (5..38).collect();
        let h = VllmHasher::with_rules(rules, HashAlgo::Sha256Cbor, 16, Some("0"))
            .unwrap()
            .with_lookahead(1)
            .unwrap();
        let chain = h.chain().extend_to_vec(&ids).unwrap();
        let mut r = BlockRehasher::new(rules, HashAlgo::Sha256Cbor);
        let d0 = r
            .digest(&h.none_hash(), &ids[..16], &[], &ids[16..17])
            .unwrap();
        let d1 = r.digest(&d0, &ids[16..32], &[], &ids[32..33]).unwrap();
        assert_eq!([d0, d1], chain[..]);
        let mut old = BlockRehasher::new(VllmRules::REFERENCE, HashAlgo::Sha256Cbor);
        assert!(matches!(
            old.digest(&h.none_hash(), &ids[..16], &[], &ids[16..17]),
            Err(Error::RuleNotSupported { .. })
        ));
        assert!(matches!(
            old.digest(&Digest::xxh3_128([0; 16]), &ids[..16], &[], &[]),
            Err(Error::DigestLength { .. })
        ));
        assert_eq!(
            old.digest::<u64>(&h.none_hash(), &[], &[], &[]),
            Err(Error::ZeroBlockSize)
        );
    }
}
