//! The prefix index fed arbitrary bytes in any order: ZMQ frames, payloads with a
//! sequence number, TensorRT-LLM JSON bodies, resets, failed replays, predictions and
//! observations, an endpoint removed and added again (it takes the slots it freed, under a new
//! id), interleaved over two endpoints of two ranks each, under the vLLM, SGLang and
//! TensorRT-LLM releases' schemas and rules. Every call returns Ok or a typed error, never a
//! panic; after every step each rank holds at most its capacity (GPU and other media) and
//! the table holds no more holders than the ranks' capacities together (the memory cap), and
//! the run-compressed chains agree with their twin, a holder table counting every chain key's
//! copies (`Index::with_twin`, `Index::self_check`).
#![no_main]

use kvindex::{
    Capacity, EndpointConfig, EndpointId, GroupKind, GroupSpec, HitRule, Index, IndexOptions,
    Outcome, Request,
};
use libfuzzer_sys::fuzz_target;

const GPU: u64 = 24;
const OTHER: u64 = 8;

/// Endpoint `i`'s configuration (`e1` has adapters loaded and no replay, and joins midway).
fn config(i: usize) -> EndpointConfig {
    let replay = i == 0;
    EndpointConfig {
        name: format!("e{i}"),
        dp_ranks: 2,
        capacity: Capacity {
            gpu_blocks: GPU,
            other_blocks: OTHER,
        },
        lora_adapters: i == 1,
        replay,
        starts_empty: replay,
    }
}

fn index(release: &str) -> Option<Index> {
    let contract = kvprobe::contract::resolve_within(release, None).ok()?;
    let index = Index::with_twin(IndexOptions {
        rule: HitRule::for_release_id(release).ok()?,
        schema: contract.events()?.clone(),
        block_size: 16,
        groups: vec![GroupSpec {
            kind: GroupKind::FullAttention,
            block_size: 16,
        }],
        max_slots: 8,
    })
    .ok()?;
    for i in 0..2 {
        index.add_endpoint(config(i)).ok()?;
    }
    Some(index)
}

fn check_bounds(index: &Index) {
    for r in index.status() {
        let gpu = r.held.first().map_or(0, |(_, n)| *n);
        let other: u64 = r.held.iter().skip(1).map(|(_, n)| *n).sum();
        assert!(gpu <= GPU, "{}: {gpu} GPU blocks held", r.endpoint);
        assert!(other <= OTHER, "{}: {other} other blocks held", r.endpoint);
    }
    let (_, pairs, _) = index.memory();
    assert!(pairs as u64 <= 4 * (GPU + OTHER), "{pairs} holders");
    // The run-compressed chains agree with their twin table.
    if let Err(e) = index.self_check() {
        panic!("chains differ from the twin table: {e}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(&choice) = data.first() else { return };
    let release = match choice % 3 {
        0 => "vllm-kv-map-v3-r0.31",
        1 => "sglang-kv-rank-v2-r0.5.19",
        _ => "trtllm-kv-http-v1-r1.2.1",
    };
    let index = index(release).expect("the release builds an index");
    let mut rest = &data[1..];
    let mut preds = Vec::new();
    let mut sparse = Vec::new();
    // The endpoints' ids by position (an endpoint added again has a new one).
    let mut ids = index.endpoint_ids();
    while let [op, ep, rank, l0, l1, tail @ ..] = rest {
        let len = usize::from(u16::from_le_bytes([*l0, *l1])).min(tail.len());
        let (chunk, next) = tail.split_at(len);
        rest = next;
        // 2 = an unknown endpoint.
        let ep = ids
            .get(usize::from(*ep % 3))
            .copied()
            .unwrap_or(EndpointId(u32::MAX));
        let rank = u32::from(*rank % 3); // 2 = unknown rank
        match op % 8 {
            0 => {
                let a = chunk
                    .first()
                    .map_or(0, |&b| usize::from(b))
                    .min(chunk.len());
                let b = (a + 8).min(chunk.len());
                let _ = index.apply_frames(ep, rank, &[&chunk[..a], &chunk[a..b], &chunk[b..]]);
            }
            1 => {
                let seq = chunk
                    .iter()
                    .take(2)
                    .fold(0u64, |s, &b| s * 256 + u64::from(b));
                let _ = index.apply_payload(ep, rank, seq, chunk);
            }
            2 => {
                let _ = index.apply_json(ep, chunk);
            }
            3 => {
                let _ = index.reset_endpoint(ep);
            }
            4 => {
                let _ = index.replay_failed(ep, rank);
            }
            5 => {
                if let Some(i) = ids.iter().position(|&x| x == ep) {
                    index
                        .remove_endpoint(ep)
                        .expect("a live endpoint is removed");
                    assert!(index.apply_payload(ep, rank % 2, 0, chunk).is_err());
                    ids[i] = index
                        .add_endpoint(config(i))
                        .expect("the slots it freed take it again");
                }
            }
            _ => {
                // A request: hashes from the chunk (small values collide with stored ones).
                let hashes: Vec<u64> = chunk.iter().map(|&b| u64::from(b % 16)).collect();
                let prompt = hashes.len() * 16 + usize::from(*op % 17);
                let req = Request {
                    block_hashes: &hashes,
                    prompt_tokens: prompt,
                    max_cached_tokens: (op & 2 == 2).then_some(0),
                };
                if index.predict(&req, &mut preds).is_ok() {
                    // The sparse answer lists exactly the dense one's ranks that differ from
                    // "nothing cached" (no feed runs in between: one state).
                    let nothing = index.nothing_cached();
                    index
                        .predict_sparse(&req, &mut sparse)
                        .expect("the dense form predicted");
                    assert!(sparse
                        .iter()
                        .eq(preds.iter().filter(|p| p.outcome != nothing)));
                    for p in &preds {
                        if let Outcome::Cached { tokens, .. } = p.outcome {
                            assert!(tokens as usize <= prompt.saturating_sub(1));
                        }
                        let _ = index.observe(p.endpoint, p.rank, "f", p.outcome, u64::from(*op));
                    }
                }
            }
        }
        check_bounds(&index);
    }
    let _ = index.prometheus();
    let _ = index.prediction_drift();
});
