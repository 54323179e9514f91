//! [`Verifier`]: the engine-specific derivers behind one re-derivation loop over an endpoint's
//! event stream.

use super::book::*;
use super::config::*;
use super::map::ClockMap;
use super::predict::{PredictionCounters, Predictions};
use super::report::*;
use super::{map, sglang, trtllm, vllm};
use crate::contract::{Contract, HashContract};
use crate::{Engine, Error, Finding, Reason};
use kvhash::events::{BlockHash, EventBatch, EventKind};
use kvprofile_core::HashAlgorithm;
use std::collections::VecDeque;
use std::time::Instant;

// One per verifier, never moved on the hot path: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
enum Deriver {
    Vllm(vllm::VllmDeriver),
    Sglang(sglang::SglangDeriver),
    Trtllm(trtllm::TrtDeriver),
}

/// Re-derives every stored block of one endpoint's KV-event stream (see the module docs).
pub struct Verifier {
    engine: Engine,
    deriver: Deriver,
    book: Book,
    tokens: Vec<u64>,
    ahead: Vec<u64>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("engine", &self.engine)
            .field("release", &self.book.release_id)
            .field("counters", &self.book.counters)
            .finish()
    }
}

impl Verifier {
    /// A verifier for an endpoint running the release of `contract`, under the rule's
    /// settings `cfg`. Errors: a contract without a KV plane, block size 0, an algorithm of
    /// another engine.
    pub fn new(contract: &Contract, cfg: DriftConfig) -> Result<Verifier, Error> {
        if cfg.block_size == 0 {
            return Err(Error::Config("drift: block size 0".into()));
        }
        let format = contract.event_format();
        let deriver = match contract.hash() {
            Some(HashContract::Vllm(rules)) => Deriver::Vllm(vllm::VllmDeriver::new(
                rules,
                crate::bridge::vllm_algo(cfg.algo.or(contract.default_algorithm()))?,
                &cfg,
                format,
            )?),
            Some(HashContract::Sglang(rules)) => {
                check_algo(cfg.algo, HashAlgorithm::Sha256Sglang)?;
                Deriver::Sglang(sglang::SglangDeriver::new(
                    rules,
                    cfg.block_size,
                    cfg.bigram_pages,
                    cfg.event_namespace,
                    cfg.lora_paths.clone(),
                )?)
            }
            Some(HashContract::Trtllm(salt)) => {
                check_algo(cfg.algo, HashAlgorithm::BlockhashTrtllm)?;
                Deriver::Trtllm(trtllm::TrtDeriver::new(salt, cfg.block_size)?)
            }
            None => {
                return Err(Error::Config(format!(
                    "{} has no KV plane to verify",
                    contract.release_id()
                )))
            }
        };
        Ok(Verifier {
            engine: contract.engine(),
            deriver,
            book: Book {
                counters: Counters::default(),
                map: ClockMap::new(cfg.map_capacity),
                window: VecDeque::with_capacity(cfg.policy.mismatches.max(1) as usize + 1),
                verdict: None,
                predictions: cfg.predictions.map(Predictions::new),
                policy: cfg.policy,
                release_id: contract.release_id(),
                contract_id: contract.contract_id(),
                engine_version: contract.version().map(str::to_string),
                rule_block_size: cfg.block_size,
                batch_index: 0,
                batch_seq: None,
                now: None,
            },
            tokens: Vec::new(),
            ahead: Vec::new(),
        })
    }

    /// Feeds one decoded batch (no byte offsets in the evidence).
    pub fn feed(&mut self, batch: &EventBatch<'_>) {
        self.feed_at(batch, None, Instant::now());
    }

    /// Feeds one decoded msgpack batch with the payload it was decoded from, so that evidence
    /// gives byte offsets.
    pub fn feed_payload(&mut self, batch: &EventBatch<'_>, payload: &[u8]) {
        self.feed_at(batch, Some(payload), Instant::now());
    }

    /// Feeds one batch observed at `now` (the clock of the prediction tracker).
    pub fn feed_at(&mut self, batch: &EventBatch<'_>, payload: Option<&[u8]>, now: Instant) {
        let book = &mut self.book;
        book.counters.batches += 1;
        book.batch_seq = batch.seq;
        book.now = Some(now);
        if let Some(p) = &mut book.predictions {
            p.expire(now);
        }
        for (i, ev) in batch.events.iter().enumerate() {
            book.counters.events += 1;
            match (&ev.kind, &mut self.deriver) {
                (EventKind::BlockStored(s), Deriver::Vllm(d)) => {
                    book.counters.stored_events += 1;
                    d.stored(book, s, i, payload, &mut self.tokens, &mut self.ahead);
                }
                (EventKind::BlockStored(s), Deriver::Sglang(d)) => {
                    book.counters.stored_events += 1;
                    d.stored(book, s, i, payload, &mut self.tokens);
                }
                (EventKind::Stored(s), Deriver::Trtllm(d)) => {
                    book.counters.stored_events += 1;
                    d.stored(book, s, i, ev.envelope.map(|e| e.event_id));
                }
                (EventKind::BlockStored(_) | EventKind::Stored(_), _) => {
                    // Another engine's events: each block is evidence of a wrong endpoint.
                    book.counters.stored_events += 1;
                    foreign(book, &ev.kind, i);
                }
                (EventKind::BlockRemoved(_), _) => book.counters.removed_events += 1,
                (EventKind::AllBlocksCleared, _) => book.counters.cleared_events += 1,
                (EventKind::Created(_) | EventKind::Updated(_), _) => {
                    book.counters.other_events += 1
                }
            }
        }
        book.batch_index += 1;
    }

    /// Hashes kvexact predicted for a request routed to this endpoint at `now` (64-bit forms):
    /// each is counted as already stored, stored within T, or expired. A no-op without
    /// [`DriftConfig::predictions`].
    pub fn predict(&mut self, hashes: &[u64], now: Instant) {
        let Book {
            predictions, map, ..
        } = &mut self.book;
        if let Some(p) = predictions {
            p.predict(hashes, now, |h| map.contains(h));
        }
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.book.counters
    }

    /// Prediction counters (`None` without tracking).
    pub fn prediction_counters(&self) -> Option<PredictionCounters> {
        self.book.predictions.as_ref().map(Predictions::counters)
    }

    /// The evidence of a `drift` verdict; `None` while not drifted ([`Verifier::state`]
    /// tells `clean` from `unverifiable`).
    pub fn verdict(&self) -> Option<&DriftEvidence> {
        self.book.verdict.as_ref()
    }

    /// The verdict: `drift` once there is evidence (sticky until
    /// [`Verifier::reset_verdict`]); else `unverifiable` when no stored block was seen or
    /// fewer than half of them were re-derived (the rest unverifiable, or consequences of a
    /// chained mismatch below the policy); else `clean`.
    pub fn state(&self) -> Verdict {
        let c = &self.book.counters;
        if self.book.verdict.is_some() {
            Verdict::Drift
        } else if c.blocks_seen == 0 || c.rederived.saturating_mul(2) < c.blocks_seen {
            Verdict::Unverifiable
        } else {
            Verdict::Clean
        }
    }

    /// The verdict in one line: the evidence's summary, the unverifiable share with its
    /// reasons (largest first), or the clean figures.
    pub fn summary(&self) -> String {
        let c = &self.book.counters;
        match (self.state(), &self.book.verdict) {
            (Verdict::Drift, Some(e)) => format!(
                "{} ({}): batch {} event {} block {}: {}{}",
                e.release_id,
                e.kind,
                e.batch_index,
                e.event_index,
                e.block_index,
                e.detail,
                if c.consequences > 0 {
                    format!(
                        "; {} blocks chained on mismatched ones are its consequences",
                        c.consequences
                    )
                } else {
                    String::new()
                }
            ),
            (Verdict::Unverifiable, _) if c.blocks_seen == 0 => {
                "no stored block seen: nothing verified".to_string()
            }
            (Verdict::Unverifiable, _) => {
                let mut reasons: Vec<(Unverifiable, u64)> =
                    c.unverifiable_by_reason.nonzero().collect();
                reasons.sort_by_key(|r| std::cmp::Reverse(r.1));
                let mut parts: Vec<String> = reasons
                    .iter()
                    .map(|(r, n)| format!("{} {n}", r.as_str()))
                    .collect();
                if c.consequences > 0 {
                    parts.push(format!(
                        "chained on a mismatch {} (below the policy)",
                        c.consequences
                    ));
                }
                format!(
                    "{} of {} stored blocks re-derived, {} not: {}",
                    c.rederived,
                    c.blocks_seen,
                    c.blocks_seen - c.rederived,
                    parts.join(", ")
                )
            }
            _ => format!(
                "{} of {} stored blocks re-derived, {} matched, 0 drift",
                c.rederived, c.blocks_seen, c.matched
            ),
        }
    }

    /// Clears the verdict and the window (after the rule re-attested).
    pub fn reset_verdict(&mut self) {
        self.book.verdict = None;
        self.book.window.clear();
    }

    /// The verdict as the ladder's observation: pass while clean, `hash_drift` with the
    /// evidence's summary once drifted. An `unverifiable` stream is no evidence of drift: the
    /// observation passes, its detail saying `unverifiable` and why ([`Verifier::state`] is
    /// the verdict).
    pub fn finding(&self) -> Finding {
        match (self.state(), &self.book.verdict) {
            (Verdict::Drift, Some(_)) => Finding::fail(Reason::HashDrift, self.summary()),
            (Verdict::Unverifiable, _) => {
                Finding::pass(format!("unverifiable: {}", self.summary()))
            }
            _ => Finding::pass(self.summary()),
        }
    }

    /// Everything as one serializable report.
    pub fn report(&self) -> DriftReport {
        let b = &self.book;
        DriftReport {
            engine: self.engine,
            release_id: b.release_id.to_string(),
            contract_id: b.contract_id.to_string(),
            engine_version: b.engine_version.clone(),
            block_size: b.rule_block_size,
            verdict: self.state(),
            summary: self.summary(),
            counters: b.counters,
            rederived_fraction: b.counters.rederived_fraction(),
            predictions: self.prediction_counters(),
            map: MapStats {
                capacity: b.map.capacity(),
                entries: b.map.len(),
                evictions: b.map.evictions(),
                bytes: map::bytes_for(b.map.capacity()),
            },
            evidence: b.verdict.clone(),
        }
    }
}

/// Stored events of another engine family: evidence for every block.
fn foreign(book: &mut Book, kind: &EventKind<'_>, event_index: usize) {
    let hashes: Vec<u64> = match kind {
        EventKind::BlockStored(s) => s.block_hashes.iter().map(BlockHash::to_u64).collect(),
        EventKind::Stored(s) => s.blocks.iter().map(|b| b.block_hash).collect(),
        _ => Vec::new(),
    };
    for (j, h) in hashes.into_iter().enumerate() {
        let at = BlockAt {
            event_index,
            block_index: j,
            event_id: None,
            token_ids_offset: None,
            tokens: Tokens::U64(&[]),
            event_block_size: 0,
            parent: None,
            published: h,
            published_bytes: None,
            keys: Vec::new(),
        };
        book.record(
            h,
            Outcome::keys("an event of another engine family than the contract's"),
            || at,
        );
    }
}

/// The byte offset of `inner` in `outer`, when it lies within it.
pub(crate) fn offset_in(outer: Option<&[u8]>, inner: &[u8]) -> Option<usize> {
    let outer = outer?;
    let start = outer.as_ptr() as usize;
    let at = inner.as_ptr() as usize;
    (at >= start && at + inner.len() <= start + outer.len()).then(|| at - start)
}

fn check_algo(algo: Option<HashAlgorithm>, only: HashAlgorithm) -> Result<(), Error> {
    match algo {
        None => Ok(()),
        Some(a) if a == only => Ok(()),
        Some(a) => Err(Error::Config(format!(
            "{} is not {}'s algorithm",
            a.as_str(),
            only.engine()
        ))),
    }
}
