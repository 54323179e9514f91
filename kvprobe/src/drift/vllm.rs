//! vLLM: re-deriving each block of a `BlockStored` event under the release's rules.

use super::{
    offset_in, rederived_mismatch, BlockAt, Book, DriftConfig, MismatchKind, Outcome, Parent,
    Tokens, Unverifiable,
};
use crate::Error;
use kvhash::events::{BlockHash, BlockStored, EventFormat, ExtraKey, TokenShape};
use kvhash::vllm::{BlockExtraKey, BlockRehasher, ExtraKeyForm, HashAlgo, VllmRules};
use kvhash::Digest;
use std::collections::BTreeMap;

/// Keys one block can carry without a heap allocation.
const INLINE_KEYS: usize = 8;

pub(crate) struct VllmDeriver {
    rules: VllmRules,
    algo: HashAlgo,
    none_hash: Option<Digest>,
    rehasher: BlockRehasher,
    block_size: usize,
    /// Up to vLLM 0.23 (the array family) a group block's key is the concatenation of its
    /// sub-hashes; from 0.24 its last sub-hash.
    concat_group_keys: bool,
    lora_paths: BTreeMap<String, String>,
    /// Digests of an event's run of plain blocks, re-hashed pipelined before the blocks are
    /// judged one by one (grows to the longest event seen, then reused).
    run: Vec<Digest>,
}

/// A block's keys in hashed order, inline up to [`INLINE_KEYS`].
struct KeyBuf<'a> {
    inline: [BlockExtraKey<'a>; INLINE_KEYS],
    len: usize,
    spill: Vec<BlockExtraKey<'a>>,
}

impl<'a> KeyBuf<'a> {
    fn new() -> Self {
        KeyBuf {
            inline: [BlockExtraKey::CacheSalt(""); INLINE_KEYS],
            len: 0,
            spill: Vec::new(),
        }
    }

    fn push(&mut self, k: BlockExtraKey<'a>) {
        if self.spill.is_empty() && self.len < INLINE_KEYS {
            self.inline[self.len] = k;
            self.len += 1;
        } else {
            if self.spill.is_empty() {
                self.spill.extend_from_slice(&self.inline[..self.len]);
            }
            self.spill.push(k);
        }
    }

    fn as_slice(&self) -> &[BlockExtraKey<'a>] {
        if self.spill.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.spill
        }
    }
}

impl VllmDeriver {
    pub(crate) fn new(
        rules: VllmRules,
        algo: HashAlgo,
        cfg: &DriftConfig,
        format: Option<EventFormat>,
    ) -> Result<VllmDeriver, Error> {
        let none_hash =
            match kvhash::vllm::none_hash_with(rules.none_hash, algo, cfg.hash_seed.as_deref()) {
                Ok(d) => Some(d),
                Err(kvhash::Error::UnreproducibleNoneHash { .. }) => None,
                Err(e) => return Err(e.into()),
            };
        Ok(VllmDeriver {
            rules,
            algo,
            none_hash,
            rehasher: BlockRehasher::new(rules, algo),
            block_size: cfg.block_size,
            concat_group_keys: format == Some(EventFormat::VllmKvArrayV1),
            lora_paths: cfg.lora_paths.clone(),
            run: Vec::new(),
        })
    }

    pub(crate) fn stored(
        &mut self,
        book: &mut Book,
        s: &BlockStored<'_>,
        event_index: usize,
        payload: Option<&[u8]>,
        tokens: &mut Vec<u64>,
        ahead: &mut Vec<u64>,
    ) {
        let n = s.block_hashes.len();
        let ebs = s.block_size as usize;
        let bs = self.block_size;
        let flat = s.token_ids.shape() == TokenShape::Flat;
        let token_ids_offset = offset_in(payload, s.token_ids.wire_bytes());
        // Event-wide checks decide every block the same way.
        let whole: Option<Outcome> = if ebs == 0 || !ebs.is_multiple_of(bs) {
            Some(Outcome::block_size(
                "event block_size is not a multiple of the rule's block size",
            ))
        } else if !flat {
            Some(Outcome::Unverifiable(Unverifiable::Malformed))
        } else if s.token_ids.is_empty() {
            Some(Outcome::Unverifiable(Unverifiable::NoTokenIds))
        } else if n.checked_mul(ebs) != Some(s.token_ids.len())
            || s.extra_keys.as_ref().is_some_and(|k| k.len() != n)
            || s.lookahead_token_ids.as_ref().is_some_and(|l| l.len() != n)
        {
            Some(Outcome::Unverifiable(Unverifiable::Malformed))
        } else if s
            .lora_name
            .is_some_and(|n| !self.lora_paths.contains_key(n))
        {
            // The engine keys the blocks with an adapter the rule does not declare (neither
            // the rule's adapters nor the server's `/v1/models`): drift, with the keys.
            Some(Outcome::keys(
                "blocks keyed with a LoRA adapter the rule does not declare",
            ))
        } else if s.extra_keys.is_none() {
            Some(Outcome::Unverifiable(Unverifiable::ExtraKeysAbsent))
        } else {
            None
        };
        // The ids are read block by block from the payload; a plain block's go straight from
        // their msgpack bytes into the hashed CBOR (`BlockRehasher::digest_wire`).
        let mut ids = s.token_ids.values();
        let mut parent = match &s.parent_block_hash {
            None => Parent::Root,
            Some(BlockHash::Bytes(b)) => self.digest_of(b),
            Some(h) => book.parent(h.to_u64()),
        };
        let parent_u64 = s.parent_block_hash.as_ref().map(BlockHash::to_u64);
        // Never more than the event holds (its block_size is the engine's word).
        let per_block = ebs.min(s.token_ids.len());
        // Where every block is plain (no keys, no look-ahead, one rule block: the common
        // event), the blocks are re-hashed up front as one pipelined chain from the event's
        // parent; each block's digest is then judged in the loop exactly as if it had been
        // hashed there (a block after a mismatch is still unverifiable: its parent did not
        // match, whatever its digest).
        let run_done = match (whole, self.parent_digest(parent)) {
            (None, Ok(pd)) if ebs == bs && all_plain(s) => {
                if self.run.len() < n {
                    self.run.resize(n, pd);
                }
                self.rehasher
                    .digest_wire_chain(&pd, &mut ids, ebs, &mut self.run[..n])
            }
            _ => 0,
        };
        // Set once a block of the run mismatched and the chain went on from the engine's
        // published digest: the run's digests (computed from ours) no longer apply.
        let mut diverged = false;
        // Set while the chain descends from a mismatched (or unverifiable) block whose full
        // digest the wire gave: its blocks are re-derived on the engine's digests, and one that
        // matches is a consequence (or unverifiable), not a match.
        let mut taint = match &s.parent_block_hash {
            Some(BlockHash::Bytes(_)) => parent_u64.and_then(|p| book.taint(p)),
            _ => None,
        };
        for (i, published) in s.block_hashes.iter().enumerate() {
            // The steady path: a run block whose parent is known and whose digest matches
            // (what `record` of `Outcome::Matched` does, without building the outcome).
            if i < run_done
                && !diverged
                && taint.is_none()
                && !matches!(parent, Parent::Unavailable(_))
            {
                let d = self.run[i];
                let equal = match published {
                    BlockHash::U64(v) => Some(*v == d.last8_be()),
                    BlockHash::Bytes(b) => Some(*b == d.as_bytes()),
                    BlockHash::I64(_) => None,
                };
                if equal == Some(true) {
                    book.record_matched(published.to_u64(), d);
                    parent = Parent::Digest(d);
                    continue;
                }
            }
            // The block's ids (for evidence only): a run block's are found again on demand.
            let start = (i >= run_done).then(|| ids.clone());
            let outcome = if i < run_done && diverged {
                // Re-derived from the published parent digest, its ids read again.
                let mut it = s.token_ids.values();
                skip(&mut it, i * per_block);
                self.derive_plain(parent, &mut it, ebs, published)
            } else if i < run_done {
                match self.parent_digest(parent) {
                    Ok(_) => judge(published, self.run[i], matches!(parent, Parent::Root)),
                    Err(o) => o,
                }
            } else {
                let keys = s
                    .extra_keys
                    .as_ref()
                    .and_then(|k| k.get(i))
                    .and_then(|k| k.as_deref())
                    .unwrap_or(&[]);
                ahead.clear();
                let ahead_ok = match s.lookahead_token_ids.as_ref().and_then(|l| l.get(i)) {
                    Some(l) => l.extend_into(ahead),
                    None => true,
                };
                match whole {
                    Some(o) => {
                        skip(&mut ids, per_block);
                        o
                    }
                    None if !ahead_ok => {
                        skip(&mut ids, per_block);
                        Outcome::Unverifiable(Unverifiable::Malformed)
                    }
                    None if keys.is_empty() && ahead.is_empty() && ebs == bs => {
                        self.derive_plain(parent, &mut ids, ebs, published)
                    }
                    None => {
                        tokens.resize(per_block, 0);
                        let got = ids.read_into(tokens);
                        tokens.truncate(got);
                        self.derive(parent, tokens, ebs / bs, keys, ahead, s, published)
                    }
                }
            };
            let published_u64 = published.to_u64();
            let at = || BlockAt {
                event_index,
                block_index: i,
                event_id: None,
                token_ids_offset,
                tokens: Tokens::Wire(
                    start.clone().unwrap_or_else(|| {
                        let mut it = s.token_ids.values();
                        skip(&mut it, i * per_block);
                        it
                    }),
                    per_block,
                ),
                event_block_size: ebs as u64,
                parent: if i == 0 {
                    parent_u64
                } else {
                    s.block_hashes.get(i - 1).map(BlockHash::to_u64)
                },
                published: published_u64,
                published_bytes: match published {
                    BlockHash::Bytes(b) => Some(b),
                    _ => None,
                },
                keys: render_keys(
                    s.lora_name,
                    s.extra_keys
                        .as_ref()
                        .and_then(|k| k.get(i))
                        .and_then(|k| k.as_deref())
                        .unwrap_or(&[]),
                ),
            };
            let raw = outcome;
            let outcome = match (outcome, taint) {
                (Outcome::Matched(_), Some(t)) => Outcome::Unverifiable(t),
                (o, _) => o,
            };
            book.record(published_u64, outcome, at);
            parent = match (&raw, published) {
                (Outcome::Matched(super::map::Value::Derived(d)), _) if taint.is_some() => {
                    Parent::Digest(*d)
                }
                // The wire gives the mismatched block's full digest (bytes mode): its child
                // is re-derived on the engine's own parent, not written off.
                (
                    Outcome::Mismatch {
                        kind: MismatchKind::Root | MismatchKind::Chained,
                        ..
                    },
                    BlockHash::Bytes(b),
                ) => {
                    diverged = true;
                    taint = Some(Unverifiable::ParentMismatched);
                    self.digest_of(b)
                }
                _ => outcome.next_parent(),
            };
        }
    }

    /// The digest a block chains on: NONE_HASH for a root, else the parent's.
    fn parent_digest(&self, parent: Parent) -> Result<Digest, Outcome> {
        match parent {
            Parent::Root => self
                .none_hash
                .ok_or(Outcome::Unverifiable(Unverifiable::NoneHashUnknown)),
            Parent::Digest(d) => Ok(d),
            Parent::Unavailable(r) => Err(Outcome::Unverifiable(r)),
        }
    }

    /// A plain block (no keys, no look-ahead, one rule block), hashed from the wire.
    fn derive_plain(
        &mut self,
        parent: Parent,
        ids: &mut kvhash::events::TokenIter<'_>,
        n: usize,
        published: &BlockHash<'_>,
    ) -> Outcome {
        let root = matches!(parent, Parent::Root);
        let pd = match self.parent_digest(parent) {
            Ok(d) => d,
            Err(o) => {
                skip(ids, n);
                return o;
            }
        };
        match self.rehasher.digest_wire(&pd, ids, n) {
            Ok(d) => judge(published, d, root),
            Err(_) => Outcome::Unverifiable(Unverifiable::HashError),
        }
    }

    /// A parent given as digest bytes (bytes mode): the digest itself, or up to 0.23 for a
    /// group block the concatenation of its sub-digests (the last one is the parent).
    fn digest_of(&self, b: &[u8]) -> Parent {
        let dl = self.algo.digest_len();
        if b.is_empty() || !b.len().is_multiple_of(dl) {
            return Parent::Unavailable(Unverifiable::HashForm);
        }
        match Digest::from_slice(&b[b.len() - dl..]) {
            Ok(d) => Parent::Digest(d),
            Err(_) => Parent::Unavailable(Unverifiable::HashForm),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn derive(
        &mut self,
        parent: Parent,
        toks: &[u64],
        k: usize,
        keys: &[ExtraKey<'_>],
        ahead: &[u64],
        s: &BlockStored<'_>,
        published: &BlockHash<'_>,
    ) -> Outcome {
        let root = matches!(parent, Parent::Root);
        let pd = match self.parent_digest(parent) {
            Ok(d) => d,
            Err(o) => return o,
        };
        let bs = self.block_size;
        if k > 1 {
            if !keys.is_empty() || !ahead.is_empty() {
                return Outcome::Unverifiable(Unverifiable::GroupBlockKeys);
            }
            let dl = self.algo.digest_len();
            let mut d = pd;
            let mut concat_ok = true;
            for (j, sub) in toks.chunks_exact(bs).enumerate() {
                d = match self.rehasher.digest(&d, sub, &[], &[]) {
                    Ok(d) => d,
                    Err(_) => return Outcome::Unverifiable(Unverifiable::HashError),
                };
                // Up to 0.23 in bytes mode the key is every sub-digest, concatenated.
                if let (true, BlockHash::Bytes(b)) = (self.concat_group_keys, published) {
                    concat_ok &= b.get(j * dl..(j + 1) * dl) == Some(d.as_bytes());
                }
            }
            let ok = match published {
                BlockHash::U64(v) => *v == d.last8_be(),
                BlockHash::Bytes(b) if self.concat_group_keys => b.len() == k * dl && concat_ok,
                BlockHash::Bytes(b) => *b == d.as_bytes(),
                BlockHash::I64(_) => return Outcome::Unverifiable(Unverifiable::HashForm),
            };
            if ok {
                return Outcome::Matched(super::map::Value::Derived(d));
            }
            // A block size other than the rule's that does not re-derive as a hybrid
            // model's group blocks: the engine runs another block size (or worse).
            return Outcome::Mismatch {
                kind: MismatchKind::BlockSize,
                expected: Some(d.last8_be()),
                expected_digest: Some(d),
                detail: "event block_size is a multiple of the rule's, and its blocks do not \
                         re-derive as a hybrid model's group blocks",
            };
        }
        let d = if keys.is_empty() {
            self.rehasher.digest(&pd, toks, &[], ahead)
        } else {
            if !ahead.is_empty() {
                return Outcome::Unverifiable(Unverifiable::LookaheadKeys);
            }
            let mut buf = KeyBuf::new();
            let r = match self.rules.extra_keys {
                ExtraKeyForm::K1 | ExtraKeyForm::K2 => {
                    verbatim(self.rules.extra_keys, keys, &mut buf)
                }
                ExtraKeyForm::K3 => tagged(keys, s, root, &self.lora_paths, &mut buf),
            };
            if let Err(o) = r {
                return o;
            }
            self.rehasher.digest(&pd, toks, buf.as_slice(), ahead)
        };
        let d = match d {
            Ok(d) => d,
            Err(_) => return Outcome::Unverifiable(Unverifiable::HashError),
        };
        let ok = match published {
            BlockHash::U64(v) => *v == d.last8_be(),
            BlockHash::Bytes(b) => *b == d.as_bytes(),
            BlockHash::I64(_) => return Outcome::Unverifiable(Unverifiable::HashForm),
        };
        compare(ok, root, d)
    }
}

/// Every block of the event is plain: no extra keys, no look-ahead tokens.
fn all_plain(s: &BlockStored<'_>) -> bool {
    s.extra_keys
        .as_ref()
        .is_some_and(|k| k.iter().all(|b| b.as_deref().is_none_or(<[_]>::is_empty)))
        && s.lookahead_token_ids.as_ref().is_none_or(|l| {
            l.iter()
                .all(|a| a.is_empty() && a.shape() == TokenShape::Flat)
        })
}

/// A plain block's re-derived digest against the published hash.
#[inline]
fn judge(published: &BlockHash<'_>, d: Digest, root: bool) -> Outcome {
    let ok = match published {
        BlockHash::U64(v) => *v == d.last8_be(),
        BlockHash::Bytes(b) => *b == d.as_bytes(),
        BlockHash::I64(_) => return Outcome::Unverifiable(Unverifiable::HashForm),
    };
    compare(ok, root, d)
}

/// Moves `ids` past one block.
fn skip(ids: &mut kvhash::events::TokenIter<'_>, n: usize) {
    if let Some(last) = n.checked_sub(1) {
        ids.nth(last);
    }
}

#[inline]
fn compare(ok: bool, root: bool, d: Digest) -> Outcome {
    if ok {
        Outcome::Matched(super::map::Value::Derived(d))
    } else {
        rederived_mismatch(root, d.last8_be(), Some(d))
    }
}

/// K1, K2: the hashed keys are the published ones, as they are.
fn verbatim<'a>(
    form: ExtraKeyForm,
    keys: &[ExtraKey<'a>],
    out: &mut KeyBuf<'a>,
) -> Result<(), Outcome> {
    for k in keys {
        out.push(match *k {
            // Written as the bare string in both forms (LoRA name, salt, K1 identifier).
            ExtraKey::Text(t) => BlockExtraKey::CacheSalt(t),
            ExtraKey::Bytes(b) => BlockExtraKey::PromptEmbeds(b),
            ExtraKey::Mm { identifier, offset } => match form {
                ExtraKeyForm::K1 => {
                    return Err(Outcome::keys(
                        "a multimodal [identifier, offset] key under a release whose multimodal keys are bare identifiers",
                    ))
                }
                _ => BlockExtraKey::Mm { identifier, offset },
            },
        });
    }
    Ok(())
}

/// K3: the published keys are untagged; each is placed by vLLM's fixed order (LoRA name on
/// every block of a LoRA request, multimodal `[identifier, offset]` keys, the salt on block 0,
/// the embeddings digest) and hashed tagged.
fn tagged<'a>(
    keys: &[ExtraKey<'a>],
    s: &BlockStored<'a>,
    root: bool,
    paths: &'a BTreeMap<String, String>,
    out: &mut KeyBuf<'a>,
) -> Result<(), Outcome> {
    let mut rest = keys;
    if let Some(name) = s.lora_name {
        match rest.split_first() {
            Some((ExtraKey::Text(t), tail)) if *t == name => {
                let Some(path) = paths.get(name) else {
                    return Err(Outcome::Unverifiable(Unverifiable::LoraPathUnknown));
                };
                out.push(BlockExtraKey::Lora { name, path });
                rest = tail;
            }
            _ => {
                return Err(Outcome::keys(
                    "a LoRA block whose keys do not start with its adapter's name",
                ))
            }
        }
    } else if s.lora_id.is_some() {
        // A LoRA named by id only: the first text key would be its name, but this release
        // always names it; the event reads more than one way.
        return Err(Outcome::Unverifiable(Unverifiable::AmbiguousKeys));
    }
    while let Some((ExtraKey::Mm { identifier, offset }, tail)) = rest.split_first() {
        out.push(BlockExtraKey::Mm {
            identifier,
            offset: *offset,
        });
        rest = tail;
    }
    if let Some((ExtraKey::Text(salt), tail)) = rest.split_first() {
        if !root {
            return Err(Outcome::keys(
                "a text key after the LoRA and multimodal keys on a block after block 0 (a salt keys block 0 only)",
            ));
        }
        out.push(BlockExtraKey::CacheSalt(salt));
        rest = tail;
    }
    if let Some((ExtraKey::Bytes(d), tail)) = rest.split_first() {
        out.push(BlockExtraKey::PromptEmbeds(d));
        rest = tail;
    }
    if rest.is_empty() {
        Ok(())
    } else {
        Err(Outcome::keys(
            "extra keys out of the release's order (LoRA, multimodal, salt, embeddings)",
        ))
    }
}

/// A block's published keys as evidence shows them: `lora_name=…`, then each extra key (text
/// as is, bytes as `hex:…`, a multimodal key as `mm:identifier@offset`).
fn render_keys(lora_name: Option<&str>, keys: &[ExtraKey<'_>]) -> Vec<String> {
    let mut out: Vec<String> = lora_name
        .map(|n| format!("lora_name={n}"))
        .into_iter()
        .collect();
    out.extend(keys.iter().map(|k| match k {
        ExtraKey::Text(t) => (*t).to_string(),
        ExtraKey::Bytes(b) => format!("hex:{}", hex::encode(b)),
        ExtraKey::Mm { identifier, offset } => format!("mm:{identifier}@{offset}"),
    }));
    out
}
