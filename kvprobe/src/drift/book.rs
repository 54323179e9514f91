//! The bookkeeping of one stream: per block, whether its parent and tokens are known, and the
//! outcome of re-deriving it (memoised in the clock map), with the counters and evidence it
//! feeds.

use super::config::DriftPolicy;
use super::map::{ClockMap, Lookup, Value};
use super::predict::Predictions;
use super::report::*;
use kvhash::Digest;
use std::collections::VecDeque;
use std::time::Instant;

/// A parent as the chain goes on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Parent {
    /// The block is a root (block 0).
    Root,
    /// The parent's full digest.
    Digest(Digest),
    /// The parent cannot be used.
    Unavailable(Unverifiable),
}

/// One block's outcome.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Outcome {
    /// Re-derived and equal; the value kept for children.
    Matched(Value),
    /// Evidence.
    Mismatch {
        kind: MismatchKind,
        expected: Option<u64>,
        expected_digest: Option<Digest>,
        detail: &'static str,
    },
    /// Not re-derivable.
    Unverifiable(Unverifiable),
}

impl Outcome {
    pub(crate) fn keys(detail: &'static str) -> Outcome {
        Outcome::Mismatch {
            kind: MismatchKind::Keys,
            expected: None,
            expected_digest: None,
            detail,
        }
    }

    pub(crate) fn block_size(detail: &'static str) -> Outcome {
        Outcome::Mismatch {
            kind: MismatchKind::BlockSize,
            expected: None,
            expected_digest: None,
            detail,
        }
    }

    /// The parent the next block of the same chain gets.
    pub(crate) fn next_parent(&self) -> Parent {
        match self {
            Outcome::Matched(Value::Derived(d)) => Parent::Digest(*d),
            Outcome::Matched(_) => Parent::Unavailable(Unverifiable::ParentUnverifiable),
            Outcome::Mismatch { .. } => Parent::Unavailable(Unverifiable::ParentMismatched),
            Outcome::Unverifiable(r) => Parent::Unavailable(r.inherited()),
        }
    }
}

/// A block's tokens, as the engine's event holds them.
#[derive(Debug, Clone)]
pub(crate) enum Tokens<'a> {
    U64(&'a [u64]),
    U32(&'a [u32]),
    /// The next `n` ids of an event's token-id view (read only for evidence).
    Wire(kvhash::events::TokenIter<'a>, usize),
}

impl Tokens<'_> {
    pub(super) fn to_vec(&self) -> Vec<u64> {
        match self {
            Tokens::U64(t) => t.to_vec(),
            Tokens::U32(t) => t.iter().map(|&x| u64::from(x)).collect(),
            Tokens::Wire(it, n) => it.clone().take(*n).collect(),
        }
    }
}

/// Where a block sits, for evidence.
#[derive(Debug, Clone)]
pub(crate) struct BlockAt<'a> {
    pub(crate) event_index: usize,
    pub(crate) block_index: usize,
    pub(crate) event_id: Option<u64>,
    pub(crate) token_ids_offset: Option<usize>,
    pub(crate) tokens: Tokens<'a>,
    pub(crate) event_block_size: u64,
    pub(crate) parent: Option<u64>,
    pub(crate) published: u64,
    pub(crate) published_bytes: Option<&'a [u8]>,
    /// The block's published extra keys, rendered (evidence only).
    pub(crate) keys: Vec<String>,
}

/// Everything but the engine's re-hasher: counters, map, window, predictions.
pub(crate) struct Book {
    pub(super) counters: Counters,
    pub(super) map: ClockMap,
    pub(super) window: VecDeque<(u64, Option<DriftEvidence>)>,
    pub(super) verdict: Option<DriftEvidence>,
    pub(super) predictions: Option<Predictions>,
    pub(super) policy: DriftPolicy,
    pub(super) release_id: &'static str,
    pub(super) contract_id: &'static str,
    pub(super) engine_version: Option<String>,
    pub(super) rule_block_size: usize,
    pub(super) batch_index: u64,
    pub(super) batch_seq: Option<u64>,
    pub(super) now: Option<Instant>,
}

impl Book {
    /// The parent a published parent hash names.
    pub(crate) fn parent(&mut self, published: u64) -> Parent {
        match self.map.get(published) {
            Lookup::Hit(Value::Derived(d)) => Parent::Digest(d),
            Lookup::Hit(Value::Stored) => Parent::Unavailable(Unverifiable::ParentUnverifiable),
            Lookup::Hit(Value::Unverifiable(r)) => Parent::Unavailable(r.inherited()),
            Lookup::Hit(Value::Mismatched) => Parent::Unavailable(Unverifiable::ParentMismatched),
            Lookup::Evicted => Parent::Unavailable(Unverifiable::ParentEvicted),
            Lookup::Missing => Parent::Unavailable(Unverifiable::ParentNeverSeen),
        }
    }

    /// What is known against the chain a published parent hash anchors (TensorRT-LLM, whose
    /// blocks are re-derived from the published parent itself): `Some(reason)` when the
    /// parent mismatched or descends from a mismatch (`parent_mismatched`), or was
    /// unverifiable (its reason, inherited); `None` when it matched or was never seen.
    pub(crate) fn taint(&mut self, published: u64) -> Option<Unverifiable> {
        match self.map.get(published) {
            Lookup::Hit(Value::Mismatched) => Some(Unverifiable::ParentMismatched),
            Lookup::Hit(Value::Unverifiable(r)) => Some(r.inherited()),
            _ => None,
        }
    }

    /// [`Book::record`] of `Outcome::Matched(Value::Derived(digest))`: a block re-derived to
    /// its published hash, whose digest its children chain on.
    #[inline]
    pub(crate) fn record_matched(&mut self, published: u64, digest: Digest) {
        let c = &mut self.counters;
        c.blocks_seen += 1;
        c.rederived += 1;
        c.matched += 1;
        self.map.insert(published, Value::Derived(digest));
        if let (Some(p), Some(now)) = (&mut self.predictions, self.now) {
            p.stored(published, now);
        }
    }

    /// Records one stored block's outcome; `at` (where the block sits, for evidence) is
    /// built only for a mismatch.
    #[inline]
    pub(crate) fn record<'a>(
        &mut self,
        published: u64,
        outcome: Outcome,
        at: impl FnOnce() -> BlockAt<'a>,
    ) {
        let c = &mut self.counters;
        c.blocks_seen += 1;
        let ordinal = c.blocks_seen;
        let value = match outcome {
            Outcome::Matched(v) => {
                c.rederived += 1;
                c.matched += 1;
                v
            }
            Outcome::Unverifiable(Unverifiable::ParentMismatched) => {
                c.consequences += 1;
                Value::Unverifiable(Unverifiable::ParentMismatched)
            }
            Outcome::Unverifiable(r) => {
                c.unverifiable += 1;
                c.unverifiable_by_reason.add(r);
                Value::Unverifiable(r)
            }
            Outcome::Mismatch { kind, .. } => {
                c.mismatched += 1;
                match kind {
                    MismatchKind::Root => {
                        c.rederived += 1;
                        c.mismatched_root += 1;
                    }
                    MismatchKind::Chained => {
                        c.rederived += 1;
                        c.mismatched_chained += 1;
                    }
                    MismatchKind::BlockSize => c.mismatched_block_size += 1,
                    MismatchKind::Keys => c.mismatched_keys += 1,
                }
                self.mismatch(ordinal, &at(), &outcome);
                Value::Mismatched
            }
        };
        // A digest already derived is not forgotten because a later copy of the block could
        // not be verified.
        let keep = matches!(value, Value::Unverifiable(_))
            && matches!(self.map.get(published), Lookup::Hit(Value::Derived(_)));
        if !keep {
            self.map.insert(published, value);
        }
        if let (Some(p), Some(now)) = (&mut self.predictions, self.now) {
            p.stored(published, now);
        }
    }

    pub(super) fn mismatch(&mut self, ordinal: u64, at: &BlockAt<'_>, outcome: &Outcome) {
        let window = self.policy.window_blocks.max(1);
        while self
            .window
            .front()
            .is_some_and(|(o, _)| o + window <= ordinal)
        {
            self.window.pop_front();
        }
        let need = self.policy.mismatches.max(1) as usize;
        if self.window.len() >= need {
            self.window.pop_front();
        }
        let evidence = self.verdict.is_none().then(|| self.evidence(at, outcome));
        let decisive = matches!(outcome, Outcome::Mismatch { kind, .. } if kind.is_decisive());
        self.window.push_back((ordinal, evidence));
        if self.verdict.is_none() && decisive {
            // A root, block-size or keys mismatch is a verdict on its own: its own evidence.
            if let Some((_, Some(mut e))) = self.window.back().cloned() {
                e.mismatches_in_window = self.window.len() as u32;
                self.verdict = Some(e);
            }
        }
        if self.verdict.is_none() && self.window.len() >= need {
            let n = self.window.len() as u32;
            if let Some(mut e) = self.window.iter().find_map(|(_, e)| e.clone()) {
                e.mismatches_in_window = n;
                self.verdict = Some(e);
            }
        }
    }

    pub(super) fn evidence(&self, at: &BlockAt<'_>, outcome: &Outcome) -> DriftEvidence {
        let (kind, expected, expected_digest, detail) = match *outcome {
            Outcome::Mismatch {
                kind,
                expected,
                expected_digest,
                detail,
            } => (kind, expected, expected_digest, detail),
            _ => (MismatchKind::Root, None, None, "not a mismatch"),
        };
        let mut detail = detail.to_string();
        if !at.keys.is_empty() {
            detail = format!("{detail} (keys {})", at.keys.join(", "));
        }
        if let Some(e) = expected {
            detail = format!("{detail}: published {} re-derives to {e}", at.published);
        }
        DriftEvidence {
            release_id: self.release_id.to_string(),
            contract_id: self.contract_id.to_string(),
            engine_version: self.engine_version.clone(),
            kind,
            detail,
            batch_index: self.batch_index,
            batch_seq: self.batch_seq,
            event_id: at.event_id,
            event_index: at.event_index,
            block_index: at.block_index,
            token_ids_offset: at.token_ids_offset,
            tokens: at.tokens.to_vec(),
            event_block_size: at.event_block_size,
            rule_block_size: self.rule_block_size,
            parent: at.parent,
            published: at.published,
            published_hex: at.published_bytes.map(hex::encode),
            expected,
            expected_digest: expected_digest.map(|d| d.to_hex()),
            keys: at.keys.clone(),
            mismatches_in_window: 0,
        }
    }
}

/// The mismatch of a re-derived block (root or chained by where it sits).
pub(crate) fn rederived_mismatch(root: bool, expected: u64, digest: Option<Digest>) -> Outcome {
    Outcome::Mismatch {
        kind: if root {
            MismatchKind::Root
        } else {
            MismatchKind::Chained
        },
        expected: Some(expected),
        expected_digest: digest,
        detail: if root {
            "root block re-derived to another hash"
        } else {
            "chained block re-derived to another hash"
        },
    }
}
