//! The index against a slow, obvious model, under traffic that shares prefixes; stream
//! health, capacity, duplicate copies, concurrency.

mod common;

use common::*;
use kvindex::{Applied, Outcome, Request, UnknownReason};
use proptest::prelude::*;
use std::collections::HashMap;

/// Hashes of a workload: `prompts` system prompts, each followed by conversations; a
/// conversation's block `j` hangs off block `j - 1`.
fn chain(prompt: u64, conv: u64, len: usize) -> Vec<u64> {
    (0..len)
        .map(|j| {
            if j < 6 {
                // The system prompt's blocks are shared by every conversation on it.
                0x5157_0000_0000_0000 | (prompt << 8) | j as u64
            } else {
                0xC0_0000_0000_0000 | (prompt << 40) | (conv << 16) | j as u64
            }
        })
        .collect()
}

/// The sparse prediction lists exactly the dense one's ranks that differ from
/// `nothing_cached`, in the same order; the per-slot path (each rank's version checked after
/// the walk, never the path of a moment nothing changed) gives the same answers, dense and
/// sparse.
fn sparse_equals_dense(
    index: &kvindex::Index,
    req: &Request<'_>,
    dense: &[kvindex::Prediction],
) -> bool {
    let mut sparse = Vec::new();
    index.predict_sparse(req, &mut sparse).unwrap();
    let nothing = index.nothing_cached();
    let listed: Vec<kvindex::Prediction> = dense
        .iter()
        .filter(|p| p.outcome != nothing)
        .copied()
        .collect();
    let mut slow = Vec::new();
    index.predict_per_slot(req, &mut slow, false).unwrap();
    let mut slow_sparse = Vec::new();
    index.predict_per_slot(req, &mut slow_sparse, true).unwrap();
    sparse == listed && slow == dense && slow_sparse == listed
}

#[derive(Debug, Clone)]
enum Op {
    /// Endpoint `ep` stores blocks `from..to` of conversation (prompt, conv).
    Store {
        ep: usize,
        prompt: u64,
        conv: u64,
        from: usize,
        to: usize,
    },
    /// Endpoint `ep` removes block `at` of a conversation (one copy).
    Remove {
        ep: usize,
        prompt: u64,
        conv: u64,
        at: usize,
    },
    /// Endpoint `ep`'s cache is reset.
    Clear { ep: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..4usize, 0..3u64, 0..4u64, 0..12usize, 1..14usize).prop_map(|(ep, prompt, conv, a, n)| Op::Store {
            ep, prompt, conv, from: a.min(13), to: (a + n).min(14)
        }),
        3 => (0..4usize, 0..3u64, 0..4u64, 0..14usize).prop_map(|(ep, prompt, conv, at)| Op::Remove { ep, prompt, conv, at }),
        1 => (0..4usize).prop_map(|ep| Op::Clear { ep }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// The one-walk prediction for all endpoints equals, endpoint by endpoint, the longest
    /// prefix of held blocks in a plain map of copy counts, within `prompt - 1` tokens.
    #[test]
    fn predictions_equal_the_obvious_count(ops in prop::collection::vec(op(), 1..60),
                                           queries in prop::collection::vec((0..3u64, 0..4u64, 0..15usize, 0..16usize, prop::option::of(0..240u32)), 1..8)) {
        let index = index_of("vllm-kv-map-v3-r0.31", 16);
        let eps: Vec<_> = (0..4).map(|i| index.add_endpoint(endpoint(&format!("e{i}"), 1 << 20)).unwrap()).collect();
        // The same index without the twin table, as a gateway makes it: the same answers.
        let plain = plain_index_of("vllm-kv-map-v3-r0.31", 16);
        for i in 0..4 {
            plain.add_endpoint(endpoint(&format!("e{i}"), 1 << 20)).unwrap();
        }
        let mut model: Vec<HashMap<u64, u32>> = vec![HashMap::new(); 4];
        let mut seq = [0u64; 4];
        for op in &ops {
            let (ep, ev) = match *op {
                Op::Store { ep, prompt, conv, from, to } => {
                    let c = chain(prompt, conv, to);
                    if from >= to { continue; }
                    for &h in &c[from..to] { *model[ep].entry(h).or_default() += 1; }
                    (ep, stored(&c[from..to], from.checked_sub(1).map(|p| c[p])))
                }
                Op::Remove { ep, prompt, conv, at } => {
                    let h = chain(prompt, conv, at + 1)[at];
                    if let Some(n) = model[ep].get_mut(&h) {
                        *n -= 1;
                        if *n == 0 { model[ep].remove(&h); }
                    }
                    (ep, removed(&[h]))
                }
                Op::Clear { ep } => { model[ep].clear(); (ep, Ev::Cleared) }
            };
            let applied = feed(&index, eps[ep], seq[ep], std::slice::from_ref(&ev)).unwrap();
            let in_step = matches!(applied, Applied::Applied { .. });
            prop_assert!(in_step);
            prop_assert_eq!(feed(&plain, eps[ep], seq[ep], &[ev]).unwrap(), applied);
            seq[ep] += 1;
            // The chains agree with the twin table after every batch.
            prop_assert_eq!(index.self_check(), Ok(()));
            // Keys and holders counted from the chains: the model's, with the twin or without.
            let keys: std::collections::HashSet<u64> = model.iter().flat_map(|m| m.keys().copied()).collect();
            let pairs: usize = model.iter().map(|m| m.len()).sum();
            prop_assert_eq!((index.memory().0, index.memory().1), (keys.len(), pairs));
            prop_assert_eq!((plain.memory().0, plain.memory().1), (keys.len(), pairs));
        }
        let mut out = Vec::new();
        for &(prompt, conv, blocks, extra, cap) in &queries {
            let c = chain(prompt, conv, blocks);
            let n = blocks * 16 + extra;
            // A capped request (vLLM 0.34 prompt logprobs: `prompt_logprob_start`; 0 = skip).
            let r = Request { block_hashes: &c, prompt_tokens: n, max_cached_tokens: cap };
            index.predict(&r, &mut out).unwrap();
            prop_assert_eq!(out.len(), 4);
            prop_assert!(sparse_equals_dense(&index, &r, &out), "sparse differs");
            let mut plain_out = Vec::new();
            plain.predict(&r, &mut plain_out).unwrap();
            prop_assert_eq!(&plain_out, &out);
            // The slow twin: the longest held prefix within min(prompt - 1, cap) tokens.
            let max = n.saturating_sub(1).min(cap.map_or(usize::MAX, |x| x as usize));
            for (i, p) in out.iter().enumerate() {
                let want = kvindex::lookup::prefix_hit(max / 16, |j| model[i].contains_key(&c[j])) * 16;
                prop_assert_eq!(p.outcome.tokens(), Some(want as u64), "endpoint {} query {:?}", i, (prompt, conv, blocks, extra, cap));
                prop_assert_eq!(index.predict_endpoint(eps[i], &r).unwrap()[0].outcome, p.outcome);
            }
        }
        // Nothing wrote while it predicted: every walk went through the chains.
        prop_assert_eq!(index.walk_fallbacks(), 0);
    }
}

/// Ops on long chains: endpoints store overlapping stretches of a few long conversations on
/// one shared system prompt, and evict stretches tail first, head first or in the middle.
#[derive(Debug, Clone)]
enum LongOp {
    Store {
        ep: usize,
        conv: u64,
        from: usize,
        to: usize,
    },
    Evict {
        ep: usize,
        conv: u64,
        from: usize,
        to: usize,
        tail_first: bool,
    },
    Clear {
        ep: usize,
    },
}

fn long_chain(conv: u64, len: usize) -> Vec<u64> {
    (0..len)
        .map(|j| {
            if j < 24 {
                0x5157_0000 | j as u64
            } else {
                (conv + 1) << 32 | j as u64
            }
        })
        .collect()
}

fn long_op() -> impl Strategy<Value = LongOp> {
    prop_oneof![
        6 => (0..4usize, 0..3u64, 0..70usize, 1..80usize).prop_map(|(ep, conv, a, n)| LongOp::Store {
            ep, conv, from: a, to: (a + n).min(80)
        }),
        4 => (0..4usize, 0..3u64, 0..80usize, 1..40usize, any::<bool>()).prop_map(|(ep, conv, a, n, tail_first)| LongOp::Evict {
            ep, conv, from: a, to: (a + n).min(80), tail_first
        }),
        1 => (0..4usize).prop_map(|ep| LongOp::Clear { ep }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The chains under long runs that split, shrink and join, with endpoints on slots in
    /// three words of the cover bitsets (`wide`: 131 endpoints, the walk on the scratch
    /// vectors) or in both words of an index of 128 slots (the walk's bitsets in arrays):
    /// predictions equal the obvious count, the chains equal the table after every batch, and
    /// no walk falls back.
    #[test]
    fn long_chains_split_and_join_exactly(ops in prop::collection::vec(long_op(), 1..40),
                                           queries in prop::collection::vec((0..3u64, 1..81usize, 0..16usize), 1..8),
                                           wide in any::<bool>()) {
        let (slots, last) = if wide { (200, 130) } else { (128, 127) };
        let index = index_of("vllm-kv-map-v3-r0.31", slots);
        let mut eps = Vec::new();
        for i in 0..=last {
            let id = index.add_endpoint(endpoint(&format!("e{i}"), 1 << 20)).unwrap();
            if [0, 1, 64, last].contains(&i) {
                eps.push((i, id));
            }
        }
        let mut model: Vec<HashMap<u64, u32>> = vec![HashMap::new(); 4];
        let mut seq = [0u64; 4];
        for op in &ops {
            let (ep, evs) = match *op {
                LongOp::Store { ep, conv, from, to } => {
                    let c = long_chain(conv, to);
                    for &h in &c[from..to] { *model[ep].entry(h).or_default() += 1; }
                    (ep, vec![stored(&c[from..to], from.checked_sub(1).map(|p| c[p]))])
                }
                LongOp::Evict { ep, conv, from, to, tail_first } => {
                    let c = long_chain(conv, to);
                    let mut held: Vec<u64> = c[from..to].iter().copied().filter(|h| model[ep].contains_key(h)).collect();
                    if tail_first { held.reverse(); }
                    for h in &held {
                        let n = model[ep].get_mut(h).unwrap();
                        *n -= 1;
                        if *n == 0 { model[ep].remove(h); }
                    }
                    if held.is_empty() { continue; }
                    // One event per block, as vLLM's free queue evicts them.
                    (ep, held.iter().map(|h| removed(&[*h])).collect())
                }
                LongOp::Clear { ep } => { model[ep].clear(); (ep, vec![Ev::Cleared]) }
            };
            let applied = matches!(feed(&index, eps[ep].1, seq[ep], &evs).unwrap(), Applied::Applied { .. });
            prop_assert!(applied);
            seq[ep] += 1;
            prop_assert_eq!(index.self_check(), Ok(()));
        }
        let mut out = Vec::new();
        for &(conv, blocks, extra) in &queries {
            let c = long_chain(conv, blocks);
            let n = blocks * 16 + extra;
            index.predict(&Request { block_hashes: &c, prompt_tokens: n, max_cached_tokens: None }, &mut out).unwrap();
            prop_assert!(sparse_equals_dense(&index, &req(&c, n), &out), "sparse differs");
            for (k, &(i, _)) in eps.iter().enumerate() {
                let want = kvindex::lookup::prefix_hit(n.saturating_sub(1) / 16, |j| model[k].contains_key(&c[j])) * 16;
                prop_assert_eq!(out[i].outcome.tokens(), Some(want as u64), "endpoint {} query {:?}", i, (conv, blocks, extra));
            }
        }
        prop_assert_eq!(index.walk_fallbacks(), 0);
    }
}

fn req(c: &[u64], n: usize) -> Request<'_> {
    Request {
        block_hashes: c,
        prompt_tokens: n,
        max_cached_tokens: None,
    }
}

fn one(index: &kvindex::Index, c: &[u64], n: usize) -> Outcome {
    let mut out = Vec::new();
    index.predict(&req(c, n), &mut out).unwrap();
    out[0].outcome
}

#[test]
fn copies_are_counted_and_removed_one_by_one() {
    let index = index_of("vllm-kv-map-v3-r0.31", 4);
    let ep = index.add_endpoint(endpoint("e", 100)).unwrap();
    let c = chain(0, 0, 4);
    feed(&index, ep, 0, &[stored(&c, None)]).unwrap();
    // The same two leading blocks stored again (a second physical copy).
    feed(&index, ep, 1, &[stored(&c[..2], None)]).unwrap();
    assert_eq!(one(&index, &c, 65).tokens(), Some(64));
    feed(&index, ep, 2, &[removed(&c[1..2])]).unwrap();
    assert_eq!(
        one(&index, &c, 65).tokens(),
        Some(64),
        "one copy of block 1 is left"
    );
    feed(&index, ep, 3, &[removed(&c[1..2])]).unwrap();
    assert_eq!(one(&index, &c, 65).tokens(), Some(16));
    // A removal of a block never seen is counted, not applied.
    feed(&index, ep, 4, &[removed(&[42])]).unwrap();
    assert_eq!(index.status()[0].removed_unknown, 1);
    // The last prompt token is never a hit; a request under one block has none.
    assert_eq!(one(&index, &c[..1], 16).tokens(), Some(0));
    assert_eq!(one(&index, &c[..1], 17).tokens(), Some(16));
    // Too few hashes for the prompt is refused, not guessed.
    let mut out = Vec::new();
    assert!(index.predict(&req(&c[..1], 40), &mut out).is_err());
    assert!(
        index.predict(&req(&c, 40), &mut out).is_err(),
        "more hashes than full blocks"
    );
}

#[test]
fn a_gap_without_replay_is_unknown_until_the_cache_is_known_again() {
    let index = index_of("vllm-kv-map-v3-r0.31", 4);
    let ep = index.add_endpoint(endpoint("e", 100)).unwrap();
    let c = chain(1, 0, 8);
    feed(&index, ep, 0, &[stored(&c[..4], None)]).unwrap();
    assert_eq!(
        feed(&index, ep, 2, &[stored(&c[4..], Some(c[3]))]).unwrap(),
        Applied::Lost
    );
    assert_eq!(
        one(&index, &c, 129),
        Outcome::Unknown(UnknownReason::OutOfStep)
    );
    assert_eq!(
        feed(&index, ep, 3, &[removed(&c[..1])]).unwrap(),
        Applied::Lost
    );
    assert_eq!(
        one(&index, &c, 129),
        Outcome::Unknown(UnknownReason::OutOfStep)
    );
    // A prefix-cache reset makes the cache known: empty, then what follows.
    feed(&index, ep, 4, &[Ev::Cleared, stored(&c[..2], None)]).unwrap();
    assert_eq!(one(&index, &c, 129).tokens(), Some(32));
    assert_eq!(index.status()[0].gaps, 1);
}

#[test]
fn a_gap_with_replay_asks_for_it_and_catches_up() {
    let index = index_of("vllm-kv-map-v3-r0.31", 4);
    let mut cfg = endpoint("e", 100);
    cfg.replay = true;
    let ep = index.add_endpoint(cfg).unwrap();
    let c = chain(2, 0, 8);
    feed(&index, ep, 0, &[stored(&c[..2], None)]).unwrap();
    assert_eq!(
        feed(&index, ep, 3, &[stored(&c[4..6], Some(c[3]))]).unwrap(),
        Applied::ReplayFrom { from: 1 }
    );
    assert_eq!(
        one(&index, &c, 129),
        Outcome::Unknown(UnknownReason::Replaying)
    );
    // The replay brings 1..=3 (3 again, as the live batch was dropped).
    feed(&index, ep, 1, &[stored(&c[2..3], Some(c[1]))]).unwrap();
    assert_eq!(
        one(&index, &c, 129),
        Outcome::Unknown(UnknownReason::Replaying)
    );
    feed(&index, ep, 2, &[stored(&c[3..4], Some(c[2]))]).unwrap();
    assert_eq!(
        one(&index, &c, 129),
        Outcome::Unknown(UnknownReason::Replaying)
    );
    feed(&index, ep, 3, &[stored(&c[4..6], Some(c[3]))]).unwrap();
    assert_eq!(one(&index, &c, 129).tokens(), Some(96));
    assert_eq!(
        feed(&index, ep, 2, &[removed(&c[..1])]).unwrap(),
        Applied::Duplicate
    );
    assert_eq!(one(&index, &c, 129).tokens(), Some(96));
    // The engine restarts: its sequence begins at 0 again, with an empty cache.
    feed(&index, ep, 0, &[stored(&c[..1], None)]).unwrap();
    assert_eq!(one(&index, &c, 129).tokens(), Some(16));
    assert_eq!(index.status()[0].restarts, 1);
    // The replay could not be had: unknown until known again.
    assert_eq!(
        feed(&index, ep, 5, &[]).unwrap(),
        Applied::ReplayFrom { from: 1 }
    );
    index.replay_failed(ep, 0).unwrap();
    assert_eq!(
        one(&index, &c, 129),
        Outcome::Unknown(UnknownReason::OutOfStep)
    );
    index.reset_endpoint(ep).unwrap();
    assert_eq!(one(&index, &c, 129).tokens(), Some(0));
}

/// Issue #59: batch 2^64 − 1 is the last a stream carries in order. Applied once, it leaves
/// the stream exhausted (the engine's publisher cannot number another batch; its cache goes
/// on changing): unknown, and a second batch of that number with other blocks is lost, never
/// applied (it used to be, and block D was predicted held: 16 tokens).
#[test]
fn the_last_sequence_number_is_applied_once_and_then_unknown() {
    for replay in [false, true] {
        let index = index_of("vllm-kv-map-v3-r0.31", 4);
        let mut cfg = endpoint("e", 100);
        cfg.replay = replay;
        let ep = index.add_endpoint(cfg).unwrap();
        let (c, d) = (0xC_u64, 0xD_u64);
        assert!(matches!(
            feed(&index, ep, u64::MAX, &[stored(&[c], None)]).unwrap(),
            Applied::Applied { stored: 1, .. }
        ));
        assert_eq!(
            index.status()[0].stream,
            kvindex::StreamState::Exhausted,
            "replay {replay}"
        );
        assert_eq!(
            one(&index, &[c], 17),
            Outcome::Unknown(UnknownReason::OutOfStep)
        );
        assert_eq!(
            feed(&index, ep, u64::MAX, &[stored(&[d], None)]).unwrap(),
            Applied::Lost
        );
        assert_eq!(
            one(&index, &[d], 17),
            Outcome::Unknown(UnknownReason::OutOfStep),
            "replay {replay}: block D was never applied"
        );
        assert_eq!(
            feed(&index, ep, 5, &[stored(&[d], None)]).unwrap(),
            Applied::Lost
        );
        index.self_check().unwrap();
        // A batch that empties the cache makes it known again, even numbered 2^64 - 1 (and
        // leaves it exhausted: known, but no batch can follow).
        feed(&index, ep, u64::MAX, &[Ev::Cleared, stored(&[d], None)]).unwrap();
        assert_eq!(
            one(&index, &[d], 17),
            Outcome::Unknown(UnknownReason::OutOfStep)
        );
        // The engine restarts at 0: in step again.
        feed(&index, ep, 0, &[stored(&[c], None)]).unwrap();
        assert_eq!(one(&index, &[c], 17).tokens(), Some(16));
        assert_eq!(one(&index, &[d], 17).tokens(), Some(0));
        index.self_check().unwrap();
    }
}

#[test]
fn a_stream_joined_midway_is_unknown() {
    let index = index_of("vllm-kv-map-v3-r0.31", 4);
    let mut cfg = endpoint("e", 100);
    cfg.starts_empty = false;
    let ep = index.add_endpoint(cfg).unwrap();
    let c = chain(0, 1, 4);
    assert_eq!(
        one(&index, &c, 70),
        Outcome::Unknown(UnknownReason::Unsynced)
    );
    assert_eq!(
        feed(&index, ep, 17, &[stored(&c, None)]).unwrap(),
        Applied::Lost
    );
    assert_eq!(
        one(&index, &c, 70),
        Outcome::Unknown(UnknownReason::OutOfStep)
    );
    // The sparse form lists the unknown rank, and nothing once its cache is known and empty.
    let mut sparse = Vec::new();
    index.predict_sparse(&req(&c, 70), &mut sparse).unwrap();
    assert_eq!(sparse.len(), 1);
    assert_eq!(
        sparse[0].outcome,
        Outcome::Unknown(UnknownReason::OutOfStep)
    );
    feed(&index, ep, 18, &[Ev::Cleared]).unwrap();
    assert_eq!(one(&index, &c, 70).tokens(), Some(0));
    index.predict_sparse(&req(&c, 70), &mut sparse).unwrap();
    assert!(sparse.is_empty());
    assert_eq!(one(&index, &c, 70), index.nothing_cached());
}

#[test]
fn more_than_the_pool_holds_is_an_overflow_and_frees_the_memory() {
    let index = index_of("vllm-kv-map-v3-r0.31", 4);
    let ep = index.add_endpoint(endpoint("e", 8)).unwrap();
    let c = chain(0, 2, 12);
    feed(&index, ep, 0, &[stored(&c[..8], None)]).unwrap();
    assert_eq!(one(&index, &c, 193).tokens(), Some(128));
    // Removals were lost: a ninth block cannot be in an 8-block pool.
    feed(&index, ep, 1, &[stored(&c[8..9], Some(c[7]))]).unwrap();
    assert_eq!(
        one(&index, &c, 193),
        Outcome::Unknown(UnknownReason::Overflow)
    );
    assert_eq!(index.memory().0, 0, "the rank's blocks are dropped");
    feed(&index, ep, 2, &[stored(&c[9..10], Some(c[8]))]).unwrap();
    assert_eq!(index.memory().0, 0, "nothing is held while overflowed");
    feed(&index, ep, 3, &[Ev::Cleared, stored(&c[..3], None)]).unwrap();
    assert_eq!(one(&index, &c, 193).tokens(), Some(48));
    assert_eq!(index.status()[0].overflows, 1);
}

/// A rank's copies of one block are counted in 32 bits, bounded by its capacity: a capacity
/// above 2^32 - 1 blocks is refused, one at the bound accepted.
#[test]
fn a_capacity_past_the_copy_counters_is_refused() {
    let index = index_of("vllm-kv-map-v3-r0.31", 4);
    let max = kvindex::MAX_BLOCKS_PER_RANK;
    assert_eq!(max, u64::from(u32::MAX));
    for (gpu, other) in [(max + 1, 0), (8, max + 1), (u64::MAX, u64::MAX)] {
        let mut e = endpoint("big", gpu);
        e.capacity.other_blocks = other;
        assert!(
            matches!(index.add_endpoint(e), Err(kvindex::Error::Options(_))),
            "{gpu} / {other}"
        );
    }
    assert!(index.add_endpoint(endpoint("at-the-bound", max)).is_ok());
}

#[test]
fn a_prompt_past_the_token_counters_is_refused() {
    let index = index_of("vllm-kv-map-v3-r0.31", 4);
    let ep = index.add_endpoint(endpoint("a", 64)).unwrap();
    let req = Request {
        block_hashes: &[],
        prompt_tokens: kvindex::MAX_PROMPT_TOKENS + 1,
        max_cached_tokens: None,
    };
    let mut out = Vec::new();
    for r in [
        index.predict(&req, &mut out),
        index.predict_sparse(&req, &mut out),
        index.predict_endpoint(ep, &req).map(|_| ()),
    ] {
        match r {
            Err(kvindex::Error::Request(why)) => {
                assert!(why.contains("at most 4294967295"), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }
    // A prediction is 24 bytes: the counts are 32-bit (what the bound above is for).
    assert_eq!(std::mem::size_of::<kvindex::Prediction>(), 24);
}

#[test]
fn a_batch_that_does_not_decode_is_refused_whole() {
    let index = index_of("vllm-kv-map-v3-r0.31", 4);
    let ep = index.add_endpoint(endpoint("e", 100)).unwrap();
    let c = chain(0, 3, 4);
    feed(&index, ep, 0, &[stored(&c[..2], None)]).unwrap();
    let mut bad = frames(1, &[stored(&c[2..], Some(c[1]))]);
    bad[2].truncate(bad[2].len() - 3);
    assert!(index
        .apply_frames(ep, 0, &[&bad[0], &bad[1], &bad[2]])
        .is_err());
    assert_eq!(
        one(&index, &c, 70),
        Outcome::Unknown(UnknownReason::OutOfStep)
    );
    // A group the index was not made with is refused too (nothing of the batch applied).
    let index = index_of("vllm-kv-map-v3-r0.31", 4);
    let ep = index.add_endpoint(endpoint("e", 100)).unwrap();
    let ev = Ev::Stored {
        hashes: c.clone(),
        parent: None,
        group: 1,
        medium: "GPU",
    };
    assert!(feed(&index, ep, 0, &[stored(&c[..1], None), ev]).is_err());
    assert_eq!(index.memory().0, 0);
    assert_eq!(index.status()[0].rejected, 1);
}

#[test]
fn other_media_are_reported_apart() {
    let index = index_of("vllm-kv-map-v3-r0.31", 4);
    let ep = index.add_endpoint(endpoint("e", 100)).unwrap();
    let c = chain(0, 0, 6);
    let cpu = Ev::Stored {
        hashes: c[2..5].to_vec(),
        parent: Some(c[1]),
        group: 0,
        medium: "CPU",
    };
    feed(&index, ep, 0, &[stored(&c[..2], None), cpu]).unwrap();
    match one(&index, &c, 6 * 16) {
        Outcome::Cached {
            tokens,
            other_media_tokens,
            proven,
        } => {
            assert_eq!((tokens, other_media_tokens, proven), (32, Some(48), true));
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn unproven_releases_say_so_and_unstated_geometry_is_refused() {
    let index = index_of("vllm-kv-map-v3-r0.29", 4);
    index.add_endpoint(endpoint("e", 100)).unwrap();
    let c = chain(0, 0, 2);
    assert!(matches!(
        one(&index, &c, 40),
        Outcome::Cached { proven: false, .. }
    ));
    let rule = kvindex::HitRule::for_release_id("vllm-kv-map-v3-r0.29").unwrap();
    let sw = kvindex::GroupSpec {
        kind: kvindex::GroupKind::SlidingWindow { window: 64 },
        block_size: 16,
    };
    assert!(
        rule.check_groups(16, &[full()[0], sw]).is_err(),
        "no replay shows 0.29's hybrid rule"
    );
    let r31 = kvindex::HitRule::for_release_id("vllm-kv-map-v3-r0.31").unwrap();
    assert!(r31.check_groups(16, &[full()[0], sw]).is_ok());
    let wide = kvindex::GroupSpec {
        kind: kvindex::GroupKind::FullAttention,
        block_size: 32,
    };
    assert!(
        r31.check_groups(16, &[full()[0], wide]).is_err(),
        "mixed block sizes are not proven"
    );
    assert!(kvindex::HitRule::for_version(kvprofile_core::Engine::Vllm, "0.99.0").is_err());
}

#[test]
fn predictions_see_whole_batches_while_events_are_applied() {
    // Each batch stores (or removes) a whole 8-block conversation: a prediction taken while
    // batches are applied must see 0 or 8 blocks, never a part.
    let index = std::sync::Arc::new(index_of("vllm-kv-map-v3-r0.31", 8));
    let eps: Vec<_> = (0..4)
        .map(|i| {
            index
                .add_endpoint(endpoint(&format!("e{i}"), 1 << 20))
                .unwrap()
        })
        .collect();
    let c = chain(0, 9, 8);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = eps
        .iter()
        .map(|&ep| {
            let (index, c) = (index.clone(), c.clone());
            std::thread::spawn(move || {
                for seq in 0..400u64 {
                    let ev = if seq % 2 == 0 {
                        stored(&c, None)
                    } else {
                        removed(&c)
                    };
                    feed(&index, ep, seq, &[ev]).unwrap();
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|k| {
            let (index, c, stop) = (index.clone(), c.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let mut seen = [0usize; 2];
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // One reader asks for the sparse form (the ranks holding none are left out).
                    if k == 0 {
                        index.predict(&req(&c, 8 * 16 + 1), &mut out).unwrap();
                    } else {
                        index
                            .predict_sparse(&req(&c, 8 * 16 + 1), &mut out)
                            .unwrap();
                    }
                    for p in &out {
                        let t = p.outcome.tokens().unwrap();
                        assert!(t == 0 || t == 128, "a prediction saw part of a batch: {t}");
                        seen[usize::from(t == 128)] += 1;
                    }
                }
                seen
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
}

#[test]
fn predictions_of_endpoints_sharing_a_chain_stay_whole_while_its_runs_split_and_join() {
    // Four endpoints store and remove different-length prefixes of one chain (the shared
    // blocks' holder sets differ block by block, so the chains split, move and join on every
    // batch, tail first and head first): each endpoint's prediction, taken while all four
    // write, is 0 or its whole prefix.
    let index = std::sync::Arc::new(index_of("vllm-kv-map-v3-r0.31", 8));
    let lens = [24usize, 17, 9, 30];
    let eps: Vec<_> = (0..4)
        .map(|i| {
            index
                .add_endpoint(endpoint(&format!("e{i}"), 1 << 20))
                .unwrap()
        })
        .collect();
    let c: Vec<u64> = (0..30).map(|j| 0xAB00_0000 | j).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = eps
        .iter()
        .zip(lens)
        .enumerate()
        .map(|(k, (&ep, n))| {
            let (index, c) = (index.clone(), c.clone());
            std::thread::spawn(move || {
                for seq in 0..600u64 {
                    let ev = if seq % 2 == 0 {
                        stored(&c[..n], None)
                    } else if k % 2 == 0 {
                        // Tail first, as vLLM frees a request's blocks.
                        let mut r = c[..n].to_vec();
                        r.reverse();
                        removed(&r)
                    } else {
                        removed(&c[..n])
                    };
                    feed(&index, ep, seq, &[ev]).unwrap();
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (index, c, stop) = (index.clone(), c.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut out = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    index.predict(&req(&c, 30 * 16 + 1), &mut out).unwrap();
                    for (p, n) in out.iter().zip(lens) {
                        let t = p.outcome.tokens().unwrap();
                        assert!(
                            t == 0 || t == (n * 16) as u64,
                            "a prediction saw part of a batch: {t} of {n} blocks"
                        );
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(index.self_check(), Ok(()));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// A hostile stream: hashes from a tiny set, parents that name the block itself, a later
    /// block or nothing (cycles), duplicates and removals of blocks never stored. The chains
    /// stay equal to the table after every batch and predictions equal the obvious count.
    #[test]
    fn hostile_parents_keep_the_chains_exact(
        ops in prop::collection::vec((0..3usize, prop::collection::vec(0..8u64, 1..6), prop::option::of(0..8u64), any::<bool>()), 1..50),
        query in prop::collection::vec(0..8u64, 1..6),
    ) {
        let index = index_of("vllm-kv-map-v3-r0.31", 8);
        let eps: Vec<_> = (0..3).map(|i| index.add_endpoint(endpoint(&format!("e{i}"), 1 << 20)).unwrap()).collect();
        let mut model: Vec<HashMap<u64, u32>> = vec![HashMap::new(); 3];
        let mut seq = [0u64; 3];
        for (ep, hashes, parent, store) in &ops {
            let ev = if *store {
                for h in hashes { *model[*ep].entry(*h).or_default() += 1; }
                stored(hashes, *parent)
            } else {
                for h in hashes {
                    if let Some(n) = model[*ep].get_mut(h) {
                        *n -= 1;
                        if *n == 0 { model[*ep].remove(h); }
                    }
                }
                removed(hashes)
            };
            feed(&index, eps[*ep], seq[*ep], &[ev]).unwrap();
            seq[*ep] += 1;
            prop_assert_eq!(index.self_check(), Ok(()));
        }
        let n = query.len() * 16 + 3;
        let mut out = Vec::new();
        index.predict(&Request { block_hashes: &query, prompt_tokens: n, max_cached_tokens: None }, &mut out).unwrap();
        prop_assert!(sparse_equals_dense(&index, &req(&query, n), &out), "sparse differs");
        for (i, p) in out.iter().enumerate() {
            let want = kvindex::lookup::prefix_hit(query.len(), |j| model[i].contains_key(&query[j])) * 16;
            prop_assert_eq!(p.outcome.tokens(), Some(want as u64));
        }
        prop_assert_eq!(index.walk_fallbacks(), 0);
    }
}

/// An endpoint removed and another added in its slots puts the slots out of output order: the
/// sparse prediction still lists the ranks in the order the endpoints were added, equal to the
/// dense one's, and every rank's hit is its own.
#[test]
fn slots_reused_out_of_order_keep_the_endpoints_order() {
    let index = index_of("vllm-kv-map-v3-r0.31", 8);
    let a = index.add_endpoint(endpoint("a", 100)).unwrap();
    let b = index.add_endpoint(endpoint("b", 100)).unwrap();
    let c = index.add_endpoint(endpoint("c", 100)).unwrap();
    let ch = chain(0, 1, 6);
    feed(&index, a, 0, &[stored(&ch, None)]).unwrap();
    feed(&index, b, 0, &[stored(&ch[..2], None)]).unwrap();
    feed(&index, c, 0, &[stored(&ch[..4], None)]).unwrap();
    index.remove_endpoint(a).unwrap();
    // `d` takes `a`'s slot (slot 0), before `b`'s and `c`'s.
    let d = index.add_endpoint(endpoint("d", 100)).unwrap();
    feed(&index, d, 0, &[stored(&ch[..3], None)]).unwrap();
    let r = req(&ch, 6 * 16 + 1);
    let mut dense = Vec::new();
    index.predict(&r, &mut dense).unwrap();
    let got: Vec<(kvindex::EndpointId, Option<u64>)> = dense
        .iter()
        .map(|p| (p.endpoint, p.outcome.tokens()))
        .collect();
    assert_eq!(got, vec![(b, Some(32)), (c, Some(64)), (d, Some(48))]);
    assert!(sparse_equals_dense(&index, &r, &dense));
    let mut sparse = Vec::new();
    index.predict_sparse(&r, &mut sparse).unwrap();
    assert_eq!(sparse, dense);
    assert_eq!(index.self_check(), Ok(()));
}

/// The prompt-logprobs rule of each release, from the request's parameters to the index's
/// `max_cached_tokens` (vLLM 0.33 `Request.get_skip_reading_prefix_cache`, 0.34
/// `Request.get_prefix_cache_hit_limit`), and a capped request's hit on a hybrid model (the
/// coordinator's lookup within the capped length).
#[test]
fn prompt_logprobs_bound_the_hit_per_release() {
    use kvindex::{CacheReadParams, HitRule, PromptLogprobsRule};
    let r33 = HitRule::for_version(kvprofile_core::Engine::Vllm, "0.33.0").unwrap();
    let r34 = HitRule::for_version(kvprofile_core::Engine::Vllm, "0.34.0").unwrap();
    assert_eq!(r33.prompt_logprobs, PromptLogprobsRule::Skip);
    assert_eq!(r34.prompt_logprobs, PromptLogprobsRule::CapAtStart);
    let p = |lp: bool, skip: Option<bool>, start: Option<u32>| CacheReadParams {
        prompt_logprobs: lp,
        skip_reading_prefix_cache: skip,
        prompt_logprob_start: start,
    };
    for (params, on33, on34) in [
        (p(false, None, None), None, None),
        // Prompt logprobs default to skipping the cache in both.
        (p(true, None, Some(40)), Some(0), Some(0)),
        (p(false, Some(true), None), Some(0), Some(0)),
        // Skipping turned off: 0.33 reads the whole prefix, 0.34 up to the start row.
        (p(true, Some(false), Some(40)), None, Some(40)),
        (p(true, Some(false), None), None, Some(0)),
        (p(false, Some(false), None), None, None),
    ] {
        assert_eq!(
            r33.prompt_logprobs.max_cached_tokens(&params),
            on33,
            "{params:?}"
        );
        assert_eq!(
            r34.prompt_logprobs.max_cached_tokens(&params),
            on34,
            "{params:?}"
        );
    }
    // Hybrid: full attention + a 32-token sliding window, blocks of 16, every block held.
    let groups = [
        kvindex::GroupSpec {
            kind: kvindex::GroupKind::FullAttention,
            block_size: 16,
        },
        kvindex::GroupSpec {
            kind: kvindex::GroupKind::SlidingWindow { window: 32 },
            block_size: 16,
        },
    ];
    for max in [0usize, 15, 16, 40, 79] {
        let got = kvindex::lookup::vllm_hit_tokens_within(&groups, max, |_, _| true);
        assert_eq!(got, max / 16 * 16, "{max}");
    }
    assert_eq!(
        kvindex::lookup::vllm_hit_tokens(&groups, 81, |_, _| true),
        kvindex::lookup::vllm_hit_tokens_within(&groups, 80, |_, _| true)
    );
}

/// One gap gives one `ReplayFrom`: every later live batch while that replay is pending is
/// `ReplayPending` (dropped, nothing more to ask for), until the replay is in — then a new
/// gap asks again — or the caller reports it failed (out of step, batches lost).
#[test]
fn one_gap_gives_one_replay_from() {
    let index = index_of("vllm-kv-map-v3-r0.31", 4);
    let mut cfg = endpoint("e", 100);
    cfg.replay = true;
    let ep = index.add_endpoint(cfg).unwrap();
    let c = chain(3, 0, 12);
    feed(&index, ep, 0, &[stored(&c[..1], None)]).unwrap();
    assert_eq!(
        feed(&index, ep, 3, &[stored(&c[3..4], Some(c[2]))]).unwrap(),
        Applied::ReplayFrom { from: 1 }
    );
    for seq in 4..11u64 {
        let i = seq as usize;
        assert_eq!(
            feed(&index, ep, seq, &[stored(&c[i..i + 1], Some(c[i - 1]))]).unwrap(),
            Applied::ReplayPending { from: 1 },
            "live batch {seq} while the replay is pending"
        );
        assert_eq!(
            one(&index, &c, 12 * 16 + 1),
            Outcome::Unknown(UnknownReason::Replaying)
        );
    }
    assert_eq!(index.status()[0].gaps, 1);
    // The replay brings 1..=10; the index is in step after the last one.
    for seq in 1..11u64 {
        let i = seq as usize;
        assert!(matches!(
            feed(&index, ep, seq, &[stored(&c[i..i + 1], Some(c[i - 1]))]).unwrap(),
            Applied::Applied { stored: 1, .. }
        ));
    }
    assert_eq!(one(&index, &c, 12 * 16 + 1).tokens(), Some(11 * 16));
    // A new gap asks again; its replay fails: lost, and no further asking.
    assert_eq!(
        feed(&index, ep, 13, &[]).unwrap(),
        Applied::ReplayFrom { from: 11 }
    );
    assert_eq!(
        feed(&index, ep, 14, &[]).unwrap(),
        Applied::ReplayPending { from: 11 }
    );
    index.replay_failed(ep, 0).unwrap();
    assert_eq!(feed(&index, ep, 15, &[]).unwrap(), Applied::Lost);
    assert_eq!(
        one(&index, &c, 12 * 16 + 1),
        Outcome::Unknown(UnknownReason::OutOfStep)
    );
    assert_eq!(index.status()[0].gaps, 2);
    index.self_check().unwrap();
}

/// A stream the caller marks lost is `unknown` (`stream_lost`) at once, before any later
/// batch; the next batch's number tells what was lost: nothing (in step again), a gap
/// (replayed or lost), or everything before a restart.
#[test]
fn a_stream_marked_lost_is_unknown_at_once() {
    let index = index_of("vllm-kv-map-v3-r0.31", 8);
    let c = chain(4, 0, 4);
    let n = 4 * 16 + 1;
    for replay in [false, true] {
        let mut cfg = endpoint(&format!("e{replay}"), 100);
        cfg.replay = replay;
        let ep = index.add_endpoint(cfg).unwrap();
        let predict = || {
            index
                .predict_endpoint(ep, &req(&c, n))
                .unwrap()
                .first()
                .unwrap()
                .outcome
        };
        feed(&index, ep, 0, &[stored(&c[..2], None)]).unwrap();
        feed(&index, ep, 1, &[]).unwrap();
        assert_eq!(predict().tokens(), Some(32));
        index.mark_lost(ep, None).unwrap();
        assert_eq!(predict(), Outcome::Unknown(UnknownReason::StreamLost));
        // A duplicate shows nothing.
        assert_eq!(feed(&index, ep, 1, &[]).unwrap(), Applied::Duplicate);
        assert_eq!(predict(), Outcome::Unknown(UnknownReason::StreamLost));
        // The next number: nothing was lost.
        feed(&index, ep, 2, &[stored(&c[2..3], Some(c[1]))]).unwrap();
        assert_eq!(predict().tokens(), Some(48));
        // Marked lost again, and a gap shows: replayed or lost.
        index.mark_lost(ep, Some(0)).unwrap();
        assert_eq!(predict(), Outcome::Unknown(UnknownReason::StreamLost));
        let gap = feed(&index, ep, 5, &[]).unwrap();
        if replay {
            assert_eq!(gap, Applied::ReplayFrom { from: 3 });
            assert_eq!(predict(), Outcome::Unknown(UnknownReason::Replaying));
        } else {
            assert_eq!(gap, Applied::Lost);
            assert_eq!(predict(), Outcome::Unknown(UnknownReason::OutOfStep));
        }
        // A restart makes it known again; a reset too.
        feed(&index, ep, 0, &[stored(&c[..1], None)]).unwrap();
        assert_eq!(predict().tokens(), Some(16));
        index.mark_lost(ep, None).unwrap();
        index.reset_endpoint(ep).unwrap();
        assert_eq!(predict().tokens(), Some(0));
        // Marked lost before any batch: no number to compare, so it waits for the start.
        index.mark_lost(ep, None).unwrap();
        assert_eq!(
            feed(&index, ep, 9, &[stored(&c[..1], None)]).unwrap(),
            Applied::Lost
        );
        assert_eq!(predict(), Outcome::Unknown(UnknownReason::OutOfStep));
        feed(&index, ep, 10, &[Ev::Cleared]).unwrap();
        assert_eq!(predict().tokens(), Some(0));
        // Bad ranks and endpoints are refused, nothing marked.
        assert!(matches!(
            index.mark_lost(ep, Some(1)),
            Err(kvindex::Error::Rank { .. })
        ));
        assert_eq!(predict().tokens(), Some(0));
    }
    assert!(matches!(
        index.mark_lost(kvindex::EndpointId(99), None),
        Err(kvindex::Error::UnknownEndpoint(99))
    ));
    assert!(index.prometheus().contains("kvexact_index_in_step"));
    index.self_check().unwrap();
}

/// The declared capacity against the engine's own: equal is no finding, a difference is a
/// typed `capacity_mismatch` naming both figures; an unstated other-media figure is not
/// compared.
#[test]
fn a_declared_capacity_is_checked_against_the_engines() {
    let index = index_of("vllm-kv-map-v3-r0.31", 4);
    let ep = index.add_endpoint(endpoint("e", 100)).unwrap();
    assert_eq!(index.check_capacity(ep, 100, Some(100)).unwrap(), None);
    assert_eq!(index.check_capacity(ep, 100, None).unwrap(), None);
    let m = index.check_capacity(ep, 4095, None).unwrap().unwrap();
    assert_eq!(m.declared.gpu_blocks, 100);
    assert_eq!(m.stated_gpu_blocks, 4095);
    assert_eq!(
        m.to_string(),
        "capacity_mismatch: endpoint e was declared 100 GPU / 100 other blocks per rank, the \
         engine states 4095 GPU"
    );
    assert!(index.check_capacity(ep, 100, Some(7)).unwrap().is_some());
    assert!(matches!(
        index.check_capacity(kvindex::EndpointId(9), 1, None),
        Err(kvindex::Error::UnknownEndpoint(9))
    ));
}

/// Many endpoints and DP ranks under churn (issue #59): endpoints added and removed, batches
/// of shared-prefix chains stored and removed on every rank, resets, streams marked lost and
/// found again, gaps without replay healed by a cleared cache — every prediction equals a
/// plain model's (the longest held prefix, or `unknown` where the model's stream is not in
/// step), and the index `self_check`s against its twin at the end.
#[test]
fn many_endpoints_and_ranks_under_churn_stay_exact() {
    /// xorshift64*: a fixed stream of choices (the test is the same on every run).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }
    /// One rank as the model knows it: copies held, the next number, in step or not.
    #[derive(Default, Clone)]
    struct Rank {
        held: HashMap<u64, u32>,
        next: u64,
        known: bool,
        /// Started empty and no batch since: the next batch of any number starts it.
        fresh: bool,
    }
    struct Ep {
        id: kvindex::EndpointId,
        ranks: Vec<Rank>,
    }
    let index = index_of("vllm-kv-map-v3-r0.31", 256);
    let mut rng = Rng(0x59);
    let mut eps: Vec<Ep> = Vec::new();
    let mut added = 0;
    let (mut hits, mut unknowns, mut ranks_seen) = (0, 0, 0);
    let feed_rank = |ep: kvindex::EndpointId, r: u32, seq: u64, events: &[Ev]| {
        let mut f = frames(seq, events);
        // The batch names its DP rank last (a positive fixint).
        *f[2].last_mut().unwrap() = r as u8;
        index.apply_frames(ep, r, &[&f[0], &f[1], &f[2]]).unwrap()
    };
    for step in 0..3000 {
        let live = eps.len();
        match rng.below(20) {
            // Add an endpoint of 1..=4 ranks (starting empty).
            0 | 1 if live < 48 => {
                let mut cfg = endpoint(&format!("e{added}"), 1 << 16);
                added += 1;
                cfg.dp_ranks = 1 + rng.below(4) as u32;
                let id = index.add_endpoint(cfg.clone()).unwrap();
                let ranks = vec![
                    Rank {
                        known: true,
                        fresh: true,
                        ..Rank::default()
                    };
                    cfg.dp_ranks as usize
                ];
                // A starting-empty rank takes any first number: start every model at 0.
                eps.push(Ep { id, ranks });
            }
            2 if live > 8 => {
                let e = eps.remove(rng.below(live as u64) as usize);
                index.remove_endpoint(e.id).unwrap();
            }
            3 if live > 0 => {
                let e = &mut eps[rng.below(live as u64) as usize];
                index.reset_endpoint(e.id).unwrap();
                for r in &mut e.ranks {
                    // In step from the next batch of any number: keep numbering on.
                    r.held.clear();
                    r.known = true;
                    r.fresh = true;
                }
            }
            // Marked lost: unknown until the next batch, which follows in order.
            4 if live > 0 => {
                let e = &mut eps[rng.below(live as u64) as usize];
                let r = rng.below(e.ranks.len() as u64) as u32;
                index.mark_lost(e.id, Some(r)).unwrap();
                let rank = &mut e.ranks[r as usize];
                if rank.known {
                    let out = index.predict_endpoint(e.id, &req(&[1], 17)).unwrap();
                    assert_eq!(
                        out[r as usize].outcome,
                        Outcome::Unknown(UnknownReason::StreamLost),
                        "step {step}"
                    );
                }
                // A rank that saw no batch since it started empty cannot tell what the loss
                // lost but by the engine's start (0) or an emptied cache.
                if rank.fresh && rank.next != 0 {
                    rank.known = false;
                }
                rank.fresh = false;
                let a = feed_rank(e.id, r, rank.next, &[]);
                assert!(
                    matches!(a, Applied::Applied { .. } | Applied::Lost),
                    "step {step}: {a:?}"
                );
                rank.next += 1;
            }
            // A gap (no replay): unknown until a batch empties the cache.
            5 if live > 0 => {
                let e = &mut eps[rng.below(live as u64) as usize];
                let r = rng.below(e.ranks.len() as u64) as usize;
                let rank = &mut e.ranks[r];
                rank.next += 2;
                feed_rank(e.id, r as u32, rank.next, &[]);
                rank.next += 1;
                // A rank that started empty takes any first number.
                if !rank.fresh {
                    rank.known = false;
                }
                rank.fresh = false;
            }
            6 if live > 0 => {
                let e = &mut eps[rng.below(live as u64) as usize];
                let r = rng.below(e.ranks.len() as u64) as usize;
                let rank = &mut e.ranks[r];
                feed_rank(e.id, r as u32, rank.next, &[Ev::Cleared]);
                rank.next += 1;
                rank.held.clear();
                rank.known = true;
                rank.fresh = false;
            }
            // Store or remove part of a conversation on one rank.
            _ if live > 0 => {
                let e = &mut eps[rng.below(live as u64) as usize];
                let r = rng.below(e.ranks.len() as u64) as usize;
                let c = chain(rng.below(3), rng.below(6), 12);
                let rank = &mut e.ranks[r];
                let ev = if rng.below(3) > 0 {
                    let (a, n) = (rng.below(12) as usize, 1 + rng.below(6) as usize);
                    let b = (a + n).min(12);
                    if rank.known {
                        for h in &c[a..b] {
                            *rank.held.entry(*h).or_default() += 1;
                        }
                    }
                    stored(&c[a..b], a.checked_sub(1).map(|p| c[p]))
                } else {
                    let at = rng.below(12) as usize;
                    if rank.known {
                        if let Some(n) = rank.held.get_mut(&c[at]) {
                            *n -= 1;
                            if *n == 0 {
                                rank.held.remove(&c[at]);
                            }
                        }
                    }
                    removed(&c[at..at + 1])
                };
                feed_rank(e.id, r as u32, rank.next, &[ev]);
                rank.next += 1;
                rank.fresh = false;
            }
            _ => {}
        }
        // A query against every endpoint and rank: the model's answer.
        if step % 7 == 0 {
            let c = chain(rng.below(3), rng.below(6), 12);
            let n = 12 * 16 + 1;
            let mut out = Vec::new();
            index.predict(&req(&c, n), &mut out).unwrap();
            let mut want = Vec::new();
            for e in &eps {
                for (r, rank) in e.ranks.iter().enumerate() {
                    let o = if rank.known {
                        let hit = c.iter().take_while(|h| rank.held.contains_key(h)).count();
                        Some((hit * 16) as u64)
                    } else {
                        None
                    };
                    want.push((e.id, r as u32, o));
                }
            }
            let got: Vec<_> = out
                .iter()
                .map(|p| (p.endpoint, p.rank, p.outcome.tokens()))
                .collect();
            assert_eq!(got, want, "step {step}");
            assert!(sparse_equals_dense(&index, &req(&c, n), &out));
            hits += got.iter().filter(|g| g.2.is_some_and(|t| t > 0)).count();
            unknowns += got.iter().filter(|g| g.2.is_none()).count();
            ranks_seen = ranks_seen.max(got.len());
        }
    }
    assert!(eps.len() > 8);
    // The churn reached what it is for: many ranks, hits and unknown ranks among them.
    assert!(
        ranks_seen > 40 && hits > 100 && unknowns > 100,
        "{ranks_seen} ranks, {hits} hits, {unknowns} unknown"
    );
    index.self_check().unwrap();
}
